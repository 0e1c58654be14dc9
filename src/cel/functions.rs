//! The CEL standard library: operators, conversions, string and time functions, with
//! cel-go's semantics and error messages. Each function receives its arguments (the receiver
//! first for member calls) and dispatches on their runtime kinds.

use std::cmp::Ordering;
use std::sync::Arc;

use super::error::EvalError;
use super::eval::{Ctx, Ticker, STEPS_PER_CHECK};
use super::time::{Civil, Timestamp};
use super::value::{List, Str, Value};
use crate::apimachinery::duration::parse_go_duration;

pub type R<'a> = Result<Value<'a>, EvalError>;

fn no_overload<'a>() -> R<'a> {
    Err(EvalError::no_such_overload())
}

fn overflow<'a>(kind: &str) -> R<'a> {
    Err(EvalError::new(match kind {
        "uint" => "unsigned integer overflow",
        "duration" | "timestamp" => "integer overflow",
        _ => "integer overflow",
    }))
}

// ---------------------------------------------------------------------------------------
// Arithmetic

/// `+`. Strings and bytes are copied, their bytes counted against the memory ceiling; lists
/// are joined as a view (cel-go charges the concatenation 1, so it must not copy).
pub fn add<'a>(cx: &mut Ctx<'_>, a: &[Value<'a>]) -> R<'a> {
    use Value::*;
    match (&a[0], &a[1]) {
        (Int(x), Int(y)) => x
            .checked_add(*y)
            .map(Int)
            .map_or_else(|| overflow("int"), Ok),
        (Uint(x), Uint(y)) => x
            .checked_add(*y)
            .map(Uint)
            .map_or_else(|| overflow("uint"), Ok),
        (Double(x), Double(y)) => Ok(Double(x + y)),
        (String(x), String(y)) => {
            let len = x.as_str().len() + y.as_str().len();
            cx.alloc(len)?;
            let mut s = std::string::String::with_capacity(len);
            s.push_str(x.as_str());
            s.push_str(y.as_str());
            Ok(Value::string(s))
        }
        (Bytes(x), Bytes(y)) => {
            cx.alloc(x.len() + y.len())?;
            Ok(Bytes([x.as_ref(), y.as_ref()].concat().into()))
        }
        (List(x), List(y)) => {
            if y.is_empty() {
                return Ok(a[0].clone());
            }
            if x.is_empty() {
                return Ok(a[1].clone());
            }
            concat_lists(cx, x, y)
        }
        (Duration(x), Duration(y)) => x
            .checked_add(*y)
            .map(Duration)
            .map_or_else(|| overflow("duration"), Ok),
        (Timestamp(t), Duration(d)) | (Duration(d), Timestamp(t)) => timestamp_add(*t, *d),
        _ => no_overload(),
    }
}

/// The bytes a concatenation view takes.
const CONCAT_BYTES: usize = 64;

/// `x + y` for lists: a view of both, or, when the view would be too deep or longer than any
/// size, a flat copy, every slot of which counts against the memory ceiling.
fn concat_lists<'a>(cx: &mut Ctx<'_>, x: &List<'a>, y: &List<'a>) -> R<'a> {
    if let Some(view) = List::concat(x.clone(), y.clone()) {
        cx.alloc(CONCAT_BYTES)?;
        return Ok(Value::List(view));
    }
    let len = x
        .len()
        .checked_add(y.len())
        .ok_or_else(EvalError::memory_limit)?;
    cx.alloc_values(len)?;
    let mut ticker = cx.ticker(STEPS_PER_CHECK);
    let mut v = Vec::with_capacity(len);
    for e in x.iter().chain(y.iter()) {
        ticker.tick()?;
        v.push(e);
    }
    Ok(Value::list(v))
}

pub fn sub<'a>(a: &[Value<'a>]) -> R<'a> {
    use Value::*;
    match (&a[0], &a[1]) {
        (Int(x), Int(y)) => x
            .checked_sub(*y)
            .map(Int)
            .map_or_else(|| overflow("int"), Ok),
        (Uint(x), Uint(y)) => x
            .checked_sub(*y)
            .map(Uint)
            .map_or_else(|| overflow("uint"), Ok),
        (Double(x), Double(y)) => Ok(Double(x - y)),
        (Duration(x), Duration(y)) => x
            .checked_sub(*y)
            .map(Duration)
            .map_or_else(|| overflow("duration"), Ok),
        (Timestamp(t), Duration(d)) => match d.checked_neg() {
            Some(n) => timestamp_add(*t, n),
            None => overflow("timestamp"),
        },
        (Timestamp(x), Timestamp(y)) => {
            let nanos = x.as_nanos() - y.as_nanos();
            i64::try_from(nanos)
                .map(Duration)
                .map_or_else(|_| overflow("duration"), Ok)
        }
        _ => no_overload(),
    }
}

pub fn mul<'a>(a: &[Value<'a>]) -> R<'a> {
    use Value::*;
    match (&a[0], &a[1]) {
        (Int(x), Int(y)) => x
            .checked_mul(*y)
            .map(Int)
            .map_or_else(|| overflow("int"), Ok),
        (Uint(x), Uint(y)) => x
            .checked_mul(*y)
            .map(Uint)
            .map_or_else(|| overflow("uint"), Ok),
        (Double(x), Double(y)) => Ok(Double(x * y)),
        _ => no_overload(),
    }
}

pub fn div<'a>(a: &[Value<'a>]) -> R<'a> {
    use Value::*;
    match (&a[0], &a[1]) {
        (Int(_), Int(0)) | (Uint(_), Uint(0)) => Err(EvalError::new("division by zero")),
        (Int(x), Int(y)) => x
            .checked_div(*y)
            .map(Int)
            .map_or_else(|| overflow("int"), Ok),
        (Uint(x), Uint(y)) => Ok(Uint(x / y)),
        (Double(x), Double(y)) => Ok(Double(x / y)),
        _ => no_overload(),
    }
}

pub fn rem<'a>(a: &[Value<'a>]) -> R<'a> {
    use Value::*;
    match (&a[0], &a[1]) {
        (Int(_), Int(0)) | (Uint(_), Uint(0)) => Err(EvalError::new("modulus by zero")),
        (Int(x), Int(y)) => x
            .checked_rem(*y)
            .map(Int)
            .map_or_else(|| overflow("int"), Ok),
        (Uint(x), Uint(y)) => Ok(Uint(x % y)),
        _ => no_overload(),
    }
}

pub fn neg<'a>(a: &[Value<'a>]) -> R<'a> {
    match &a[0] {
        Value::Int(x) => x
            .checked_neg()
            .map(Value::Int)
            .map_or_else(|| overflow("int"), Ok),
        Value::Double(x) => Ok(Value::Double(-x)),
        _ => no_overload(),
    }
}

pub fn not<'a>(a: &[Value<'a>]) -> R<'a> {
    match &a[0] {
        Value::Bool(b) => Ok(Value::Bool(!b)),
        _ => no_overload(),
    }
}

// ---------------------------------------------------------------------------------------
// Equality, ordering, membership

pub fn eq<'a>(cx: &mut Ctx<'_>, a: &[Value<'a>]) -> R<'a> {
    Ok(Value::Bool(equal(cx, &a[0], &a[1])?))
}

pub fn ne<'a>(cx: &mut Ctx<'_>, a: &[Value<'a>]) -> R<'a> {
    Ok(Value::Bool(!equal(cx, &a[0], &a[1])?))
}

/// CEL equality. Comparing lists or maps walks them, whatever `==` was charged (cel-go charges
/// by the outer sizes: `[big] == [big]` costs 1), so that walk watches the deadline.
#[inline]
pub fn equal(cx: &Ctx<'_>, x: &Value<'_>, y: &Value<'_>) -> Result<bool, EvalError> {
    match (x, y) {
        (Value::List(_), Value::List(_))
        | (Value::Map(_), Value::Map(_))
        | (Value::Optional(_), Value::Optional(_)) => {
            x.equals_watching(y, &mut cx.ticker(STEPS_PER_CHECK))
        }
        _ => Ok(x.equals(y)),
    }
}

/// Whether `list` has an element equal to `x`, watching the deadline.
pub fn list_contains(cx: &Ctx<'_>, list: &List<'_>, x: &Value<'_>) -> Result<bool, EvalError> {
    list_contains_ticking(list, x, &mut cx.ticker(STEPS_PER_CHECK))
}

/// `list_contains` within a longer walk, sharing its ticker.
pub fn list_contains_ticking(
    list: &List<'_>,
    x: &Value<'_>,
    ticker: &mut Ticker,
) -> Result<bool, EvalError> {
    for e in list.iter() {
        ticker.tick()?;
        if e.equals_watching(x, ticker)? {
            return Ok(true);
        }
    }
    Ok(false)
}

fn order<'a>(a: &[Value<'a>], test: fn(Ordering) -> bool) -> R<'a> {
    Ok(Value::Bool(a[0].compare(&a[1])?.is_some_and(test)))
}

pub fn lt<'a>(a: &[Value<'a>]) -> R<'a> {
    order(a, |o| o == Ordering::Less)
}

pub fn le<'a>(a: &[Value<'a>]) -> R<'a> {
    order(a, |o| o != Ordering::Greater)
}

pub fn gt<'a>(a: &[Value<'a>]) -> R<'a> {
    order(a, |o| o == Ordering::Greater)
}

pub fn ge<'a>(a: &[Value<'a>]) -> R<'a> {
    order(a, |o| o != Ordering::Less)
}

pub fn in_<'a>(cx: &mut Ctx<'_>, a: &[Value<'a>]) -> R<'a> {
    match &a[1] {
        Value::List(l) => Ok(Value::Bool(list_contains(cx, l, &a[0])?)),
        Value::Map(m) => Ok(Value::Bool(m.contains_key(&a[0]))),
        _ => no_overload(),
    }
}

pub fn size<'a>(a: &[Value<'a>]) -> R<'a> {
    a[0].size()
        .map(|s| Value::Int(s as i64))
        .map_or_else(no_overload, Ok)
}

// ---------------------------------------------------------------------------------------
// Strings

pub fn str_arg<'v>(v: &'v Value<'_>) -> Result<&'v str, EvalError> {
    v.as_str().ok_or_else(EvalError::no_such_overload)
}

pub fn contains<'a>(a: &[Value<'a>]) -> R<'a> {
    Ok(Value::Bool(str_arg(&a[0])?.contains(str_arg(&a[1])?)))
}

pub fn starts_with<'a>(a: &[Value<'a>]) -> R<'a> {
    Ok(Value::Bool(str_arg(&a[0])?.starts_with(str_arg(&a[1])?)))
}

pub fn ends_with<'a>(a: &[Value<'a>]) -> R<'a> {
    Ok(Value::Bool(str_arg(&a[0])?.ends_with(str_arg(&a[1])?)))
}

/// `matches` with a pattern known only at run time (a constant one is compiled with the
/// expression): through the evaluation's cache.
pub fn matches<'a>(cx: &mut Ctx<'_>, a: &[Value<'a>]) -> R<'a> {
    let re = cx.regex(str_arg(&a[1])?)?;
    let s = str_arg(&a[0])?;
    search_watch(cx, s)?;
    Ok(Value::Bool(re.is_match(s)))
}

/// A regex search cannot be stopped once started; it is linear in the text (times the
/// automaton's size, bounded for run-time patterns), so a long text gets a look at the
/// deadline first.
pub fn search_watch(cx: &Ctx<'_>, text: &str) -> Result<(), EvalError> {
    if text.len() >= LONG_TEXT {
        cx.check_deadline()?;
    }
    Ok(())
}

/// A text long enough that one pass over it is worth a look at the clock first.
pub const LONG_TEXT: usize = 64 << 10;

// ---------------------------------------------------------------------------------------
// Conversions

pub fn to_int<'a>(a: &[Value<'a>]) -> R<'a> {
    match &a[0] {
        Value::Int(i) => Ok(Value::Int(*i)),
        Value::Uint(u) => i64::try_from(*u)
            .map(Value::Int)
            .map_err(|_| EvalError::new("integer overflow")),
        Value::Double(d) => {
            // Both ends are exclusive: ±2^63 (`i64::MIN/MAX as f64`) does not fit, as cel-go checks.
            if d.is_nan() || *d <= i64::MIN as f64 || *d >= i64::MAX as f64 {
                return Err(EvalError::new("integer overflow"));
            }
            Ok(Value::Int(d.trunc() as i64))
        }
        Value::String(s) => s
            .as_str()
            .parse::<i64>()
            .map(Value::Int)
            .map_err(|_| EvalError::new(format!("cannot convert '{}' to int", s.as_str()))),
        Value::Timestamp(t) => Ok(Value::Int(t.secs())),
        Value::Duration(d) => Ok(Value::Int(*d)),
        _ => no_overload(),
    }
}

pub fn to_uint<'a>(a: &[Value<'a>]) -> R<'a> {
    match &a[0] {
        Value::Uint(u) => Ok(Value::Uint(*u)),
        Value::Int(i) => u64::try_from(*i)
            .map(Value::Uint)
            .map_err(|_| EvalError::new("unsigned integer overflow")),
        Value::Double(d) => {
            if d.is_nan() || *d <= -1.0 || *d >= 1.8446744073709552e19 {
                return Err(EvalError::new("unsigned integer overflow"));
            }
            Ok(Value::Uint(d.trunc() as u64))
        }
        Value::String(s) => s
            .as_str()
            .parse::<u64>()
            .map(Value::Uint)
            .map_err(|_| EvalError::new(format!("cannot convert '{}' to uint", s.as_str()))),
        _ => no_overload(),
    }
}

pub fn to_double<'a>(a: &[Value<'a>]) -> R<'a> {
    match &a[0] {
        Value::Double(d) => Ok(Value::Double(*d)),
        Value::Int(i) => Ok(Value::Double(*i as f64)),
        Value::Uint(u) => Ok(Value::Double(*u as f64)),
        Value::String(s) => parse_go_float(s.as_str())
            .map(Value::Double)
            .ok_or_else(|| EvalError::new(format!("cannot convert '{}' to double", s.as_str()))),
        _ => no_overload(),
    }
}

/// Go's `strconv.ParseFloat`: decimal and exponent forms plus `inf`, `infinity`, `nan` in
/// any case, with an optional sign.
fn parse_go_float(s: &str) -> Option<f64> {
    let body = s.strip_prefix(['+', '-']).unwrap_or(s);
    let lower = body.to_ascii_lowercase();
    if matches!(lower.as_str(), "inf" | "infinity" | "nan") {
        let v = if lower == "nan" {
            f64::NAN
        } else {
            f64::INFINITY
        };
        return Some(if s.starts_with('-') { -v } else { v });
    }
    if body.is_empty()
        || !body
            .bytes()
            .all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'E' | b'+' | b'-'))
    {
        return None;
    }
    s.parse::<f64>().ok()
}

pub fn to_string<'a>(a: &[Value<'a>]) -> R<'a> {
    Ok(match &a[0] {
        Value::String(_) => a[0].clone(),
        Value::Bool(b) => Value::String(Str::Borrowed(if *b { "true" } else { "false" })),
        Value::Int(i) => Value::string(i.to_string()),
        Value::Uint(u) => Value::string(u.to_string()),
        Value::Double(d) => Value::string(format_double(*d)),
        Value::Bytes(b) => match std::str::from_utf8(b) {
            Ok(s) => Value::string(s),
            Err(_) => {
                return Err(EvalError::new(
                    "invalid UTF-8 in bytes, cannot convert to string",
                ))
            }
        },
        Value::Timestamp(t) => Value::string(t.to_rfc3339()),
        Value::Duration(d) => Value::string(format_duration(*d)),
        Value::Opaque(o) => match o.to_cel_string() {
            Some(s) => Value::string(s),
            None => return no_overload(),
        },
        _ => return no_overload(),
    })
}

/// Go's `strconv.FormatFloat(d, 'g', -1, 64)` as cel-go prints doubles: the shortest
/// representation, exponent form for large and small magnitudes, `+Inf`, `-Inf`, `NaN`.
pub fn format_double(d: f64) -> String {
    if d.is_nan() {
        return "NaN".into();
    }
    if d.is_infinite() {
        return if d > 0.0 {
            "+Inf".into()
        } else {
            "-Inf".into()
        };
    }
    if d == 0.0 {
        return if d.is_sign_negative() {
            "-0".into()
        } else {
            "0".into()
        };
    }
    // Rust's `{:e}` gives the shortest round-trip digits: `1.2345e4`.
    let sci = format!("{d:e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if !(-4..21).contains(&exp) {
        let sign = if exp < 0 { '-' } else { '+' };
        return format!("{mantissa}e{sign}{:02}", exp.abs());
    }
    let s = format!("{d}");
    s
}

pub fn to_bytes<'a>(a: &[Value<'a>]) -> R<'a> {
    match &a[0] {
        Value::Bytes(_) => Ok(a[0].clone()),
        Value::String(s) => Ok(Value::Bytes(Arc::from(s.as_str().as_bytes()))),
        _ => no_overload(),
    }
}

pub fn to_bool<'a>(a: &[Value<'a>]) -> R<'a> {
    match &a[0] {
        Value::Bool(b) => Ok(Value::Bool(*b)),
        Value::String(s) => match s.as_str() {
            "1" | "t" | "T" | "TRUE" | "true" | "True" => Ok(Value::Bool(true)),
            "0" | "f" | "F" | "FALSE" | "false" | "False" => Ok(Value::Bool(false)),
            other => Err(EvalError::new(format!(
                "type conversion error from 'string' to 'bool': {other}"
            ))),
        },
        _ => no_overload(),
    }
}

pub fn dyn_<'a>(a: &[Value<'a>]) -> R<'a> {
    Ok(a[0].clone())
}

pub fn type_of<'a>(a: &[Value<'a>]) -> R<'a> {
    Ok(Value::Type(a[0].type_name()))
}

// ---------------------------------------------------------------------------------------
// Timestamps and durations

fn out_of_range<'a>() -> R<'a> {
    Err(EvalError::new("timestamp out of range"))
}

fn timestamp_add<'a>(t: Timestamp, d: i64) -> R<'a> {
    Timestamp::from_nanos(t.as_nanos() + i128::from(d))
        .map_or_else(out_of_range, |t| Ok(Value::Timestamp(t)))
}

pub fn to_timestamp<'a>(a: &[Value<'a>]) -> R<'a> {
    match &a[0] {
        Value::Timestamp(_) => Ok(a[0].clone()),
        Value::Int(secs) => {
            Timestamp::new(*secs, 0).map_or_else(out_of_range, |t| Ok(Value::Timestamp(t)))
        }
        Value::String(s) => Timestamp::parse_rfc3339(s.as_str())
            .map(Value::Timestamp)
            .ok_or_else(|| {
                EvalError::new(format!(
                    "type conversion error from 'string' to 'google.protobuf.Timestamp': {}",
                    s.as_str()
                ))
            }),
        _ => no_overload(),
    }
}

/// A duration as cel-go prints it: seconds with an `s` suffix, the fraction trimmed.
pub fn format_duration(nanos: i64) -> String {
    let sign = if nanos < 0 { "-" } else { "" };
    let abs = nanos.unsigned_abs();
    let (secs, frac) = (abs / 1_000_000_000, abs % 1_000_000_000);
    if frac == 0 {
        return format!("{sign}{secs}s");
    }
    let f = format!("{frac:09}");
    format!("{sign}{secs}.{}s", f.trim_end_matches('0'))
}

pub fn to_duration<'a>(a: &[Value<'a>]) -> R<'a> {
    match &a[0] {
        Value::Duration(_) => Ok(a[0].clone()),
        Value::String(s) => parse_go_duration(s.as_str())
            .map(Value::Duration)
            .ok_or_else(|| {
                EvalError::new(format!(
                    "type conversion error from 'string' to 'google.protobuf.Duration': {}",
                    s.as_str()
                ))
            }),
        Value::Int(_) => Err(EvalError::new(
            "type conversion error from 'int' to 'google.protobuf.Duration'",
        )),
        _ => no_overload(),
    }
}

/// Resolves a time-zone argument: an IANA name, `UTC`, or a fixed `±HH:MM` offset.
fn time_zone(name: &str) -> Result<jiff::tz::TimeZone, EvalError> {
    // A fixed offset `±HH:MM`; cel-go also takes `HH:MM` without a sign as positive.
    let (negative, unsigned) = match name.as_bytes().first() {
        Some(b'-') => (true, &name[1..]),
        Some(b'+') => (false, &name[1..]),
        _ => (false, name),
    };
    let bytes = unsigned.as_bytes();
    if bytes.len() == 5
        && bytes[2] == b':'
        && bytes
            .iter()
            .enumerate()
            .all(|(i, b)| i == 2 || b.is_ascii_digit())
    {
        let h: i32 = unsigned[0..2].parse().map_err(|_| bad_zone(name))?;
        let m: i32 = unsigned[3..5].parse().map_err(|_| bad_zone(name))?;
        let secs = (h * 3600 + m * 60) * if negative { -1 } else { 1 };
        let offset = jiff::tz::Offset::from_seconds(secs).map_err(|_| bad_zone(name))?;
        return Ok(jiff::tz::TimeZone::fixed(offset));
    }
    if name.eq_ignore_ascii_case("UTC") || name.is_empty() {
        return Ok(jiff::tz::TimeZone::UTC);
    }
    jiff::tz::TimeZone::get(name).map_err(|_| bad_zone(name))
}

fn bad_zone(name: &str) -> EvalError {
    EvalError::new(format!("unknown time zone {name}"))
}

fn civil<'a>(a: &[Value<'a>]) -> Result<Civil, EvalError> {
    let Value::Timestamp(t) = &a[0] else {
        return Err(EvalError::no_such_overload());
    };
    let offset = match a.get(1) {
        Some(z) => t.offset_in(&time_zone(str_arg(z)?)?),
        None => 0,
    };
    Ok(t.civil(offset))
}

macro_rules! accessor {
    ($name:ident, |$c:ident| $ts:expr, |$d:ident| $dur:expr) => {
        pub fn $name<'a>(a: &[Value<'a>]) -> R<'a> {
            if let Value::Duration($d) = &a[0] {
                let $d = *$d;
                return match $dur {
                    Some(v) => Ok(Value::Int(v)),
                    None => no_overload(),
                };
            }
            let $c = civil(a)?;
            Ok(Value::Int($ts))
        }
    };
}

// Months, days of the month and days of the year are 0-based in CEL; `getDate` is 1-based.
accessor!(get_full_year, |c| c.year, |_d| None);
accessor!(get_month, |c| i64::from(c.month) - 1, |_d| None);
accessor!(get_day_of_year, |c| i64::from(c.day_of_year), |_d| None);
accessor!(get_day_of_month, |c| i64::from(c.day) - 1, |_d| None);
accessor!(get_date, |c| i64::from(c.day), |_d| None);
accessor!(get_day_of_week, |c| i64::from(c.weekday), |_d| None);
accessor!(get_hours, |c| i64::from(c.hour), |d| Some(
    d / 3_600_000_000_000
));
accessor!(get_minutes, |c| i64::from(c.minute), |d| Some(
    d / 60_000_000_000
));
accessor!(get_seconds, |c| i64::from(c.second), |d| Some(
    d / 1_000_000_000
));
accessor!(get_milliseconds, |c| i64::from(c.nanos / 1_000_000), |d| {
    Some(d / 1_000_000)
});

// ---------------------------------------------------------------------------------------
// Helpers shared with other libraries

/// The elements of a list argument, or a no-such-overload error.
pub fn list_arg<'v, 'a>(v: &'v Value<'a>) -> Result<&'v List<'a>, EvalError> {
    match v {
        Value::List(l) => Ok(l),
        _ => Err(EvalError::no_such_overload()),
    }
}

pub fn int_arg(v: &Value<'_>) -> Result<i64, EvalError> {
    match v {
        Value::Int(i) => Ok(*i),
        _ => Err(EvalError::no_such_overload()),
    }
}

#[cfg(test)]
mod tests {
    use super::super::eval::Meter;
    use super::super::regex::RegexCache;
    use super::super::value::MAX_CONCAT_DEPTH;
    use super::*;

    #[test]
    fn concatenation_is_a_view_until_too_deep_then_a_counted_copy() {
        let mut meter = Meter::default();
        let mut regexes = RegexCache::default();
        let mut cx = Ctx::new(&mut meter, &mut regexes);
        let mut l = Value::list(vec![Value::Int(0)]);
        for i in 1..=150 {
            l = add(&mut cx, &[l, Value::list(vec![Value::Int(i)])]).unwrap();
            let Value::List(list) = &l else { panic!() };
            assert!(list.concat_depth() <= MAX_CONCAT_DEPTH);
        }
        let Value::List(list) = &l else { panic!() };
        assert_eq!(list.len(), 151);
        assert!(list
            .iter()
            .enumerate()
            .all(|(i, v)| v.equals(&Value::Int(i as i64))));
        assert!((0..151).all(|i| list.get(i).unwrap().equals(&Value::Int(i as i64))));
        assert!(list.get(151).is_none());
        // Two copies of at most 150 slots, plus the views.
        assert!(
            meter.memory < 2 * 150 * 32 + 150 * 64 + 1024,
            "{}",
            meter.memory
        );
    }

    #[test]
    fn a_concatenation_longer_than_an_int_is_refused() {
        let mut meter = Meter::default();
        let mut regexes = RegexCache::default();
        let mut cx = Ctx::new(&mut meter, &mut regexes);
        let mut l = Value::list(vec![Value::Int(0); 1024]);
        let mut doublings = 0;
        let err = loop {
            match add(&mut cx, &[l.clone(), l.clone()]) {
                Ok(v) => l = v,
                Err(e) => break e,
            }
            doublings += 1;
        };
        assert_eq!(
            doublings, 52,
            "1024 · 2^52 = 2^62 fits an int, 2^63 does not"
        );
        assert!(err.is_cancelled());
        assert_eq!(size(&[l]).unwrap().debug_string(), (1i64 << 62).to_string());
    }

    #[test]
    fn doubles_print_like_go() {
        assert_eq!(format_double(-1.23e4), "-12300");
        assert_eq!(format_double(1e21), "1e+21");
        assert_eq!(format_double(1.5e-5), "1.5e-05");
        assert_eq!(format_double(0.1), "0.1");
        assert_eq!(format_double(f64::INFINITY), "+Inf");
    }

    #[test]
    fn go_durations() {
        assert_eq!(format_duration(5_400_000_000_000), "5400s");
        assert_eq!(format_duration(1_000_000), "0.001s");
    }

    #[test]
    fn bytes_are_base64_in_json() {
        let json = |b: &[u8]| Value::Bytes(b.into()).to_json();
        assert_eq!(json(b""), "");
        assert_eq!(json(&[0, 0xff]), "AP8=");
        assert_eq!(json(b"abc"), "YWJj");
    }
}
