//! Type conversions (`int`, `uint`, `double`, `string`, `bytes`, `bool`, `dyn`, `type`) with
//! cel-go's error texts, and doubles printed as Go prints them.

use std::sync::Arc;

use crate::error::EvalError;
use crate::overload::{no_overload, since, Builder, Cost, R};
use crate::time::format_duration;
use crate::value::{Str, Value};

/// cel-go's failed conversion from a string, which never quotes the value.
fn conversion_error(to: &str) -> EvalError {
    EvalError::new(format!("type conversion error from 'string' to '{to}'"))
}

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
            .map_err(|_| conversion_error("int")),
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
            if d.is_nan() || *d < 0.0 || *d >= 1.8446744073709552e19 {
                return Err(EvalError::new("unsigned integer overflow"));
            }
            Ok(Value::Uint(d.trunc() as u64))
        }
        // Go's `strconv.ParseUint` takes no sign, where Rust's parse takes `+`.
        Value::String(s) if s.as_str().starts_with('+') => Err(conversion_error("uint")),
        Value::String(s) => s
            .as_str()
            .parse::<u64>()
            .map(Value::Uint)
            .map_err(|_| conversion_error("uint")),
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
            .ok_or_else(|| conversion_error("double")),
        _ => no_overload(),
    }
}

/// Go's `strconv.ParseFloat(s, 64)`: decimal and hexadecimal (`0x1p-2`) forms, `_` between
/// digits, `inf`, `infinity`, `nan` in any case with an optional sign (none for `nan`). A
/// finite value past the double range is an error (Go's `ErrRange`), as cel-go reports it.
fn parse_go_float(s: &str) -> Option<f64> {
    let (negative, body) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let lower = body.to_ascii_lowercase();
    if matches!(lower.as_str(), "inf" | "infinity") {
        return Some(if negative {
            f64::NEG_INFINITY
        } else {
            f64::INFINITY
        });
    }
    if lower == "nan" && body.len() == s.len() {
        return Some(f64::NAN);
    }
    if body.contains('_') && !go_underscores_ok(body) {
        return None;
    }
    let digits: String = body.chars().filter(|c| *c != '_').collect();
    let magnitude = match digits
        .strip_prefix("0x")
        .or_else(|| digits.strip_prefix("0X"))
    {
        Some(hex) => parse_hex_float(hex)?,
        None => {
            if digits.is_empty()
                || !digits
                    .bytes()
                    .all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'E' | b'+' | b'-'))
            {
                return None;
            }
            digits.parse::<f64>().ok()?
        }
    };
    if magnitude.is_infinite() {
        return None;
    }
    Some(if negative { -magnitude } else { magnitude })
}

/// Go's `underscoreOK` for a number without its sign: each `_` between two digits (or
/// after a base prefix and before a digit).
fn go_underscores_ok(s: &str) -> bool {
    let b = s.as_bytes();
    let hex =
        b.len() >= 2 && b[0] == b'0' && matches!(b[1], b'x' | b'X' | b'b' | b'B' | b'o' | b'O');
    let (mut saw, start) = if hex { (b'0', 2) } else { (b'^', 0) };
    let hex_digits = hex && matches!(b[1], b'x' | b'X');
    for &c in &b[start..] {
        if c.is_ascii_digit() || (hex_digits && c.is_ascii_hexdigit()) {
            saw = b'0';
        } else if c == b'_' {
            if saw != b'0' {
                return false;
            }
            saw = b'_';
        } else {
            if saw == b'_' {
                return false;
            }
            saw = b'!';
        }
    }
    saw != b'_'
}

/// The digits of a hexadecimal float after `0x`: a mantissa with an optional point, then a
/// binary exponent `p±N`, which Go requires.
fn parse_hex_float(s: &str) -> Option<f64> {
    let (mantissa, exp) = s.split_once(['p', 'P'])?;
    let exp: i32 = exp.parse().ok()?;
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    if int.is_empty() && frac.is_empty() {
        return None;
    }
    let mut value = 0f64;
    for c in int.chars().chain(frac.chars()) {
        value = value * 16.0 + f64::from(c.to_digit(16)?);
    }
    let shift = exp.checked_sub(i32::try_from(frac.len()).ok()?.checked_mul(4)?)?;
    Some(value * 2f64.powi(shift))
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
    // Go's shortest `%g` switches to the exponent form from 1e+06 (its precision 6).
    if !(-4..6).contains(&exp) {
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
            _ => Err(conversion_error("bool")),
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

fn cost_string_conversion(a: &[Value<'_>]) -> u64 {
    match &a[0] {
        Value::String(_) | Value::Bytes(_) => (a[0].cost_size() as f64 * 0.1).ceil() as u64,
        _ => 1,
    }
}

pub(super) fn register(b: &mut Builder) {
    b.always(
        "int",
        &[
            "(int) int",
            "(uint) int",
            "(double) int",
            "(string) int",
            "(timestamp) int",
            "(duration) int",
        ],
        to_int,
        Cost::One,
    );
    b.always(
        "uint",
        &[
            "(uint) uint",
            "(int) uint",
            "(double) uint",
            "(string) uint",
        ],
        to_uint,
        Cost::One,
    );
    b.always(
        "double",
        &[
            "(double) double",
            "(int) double",
            "(uint) double",
            "(string) double",
        ],
        to_double,
        Cost::One,
    );
    let mut string_sigs: Vec<(&str, u16)> = [
        "(string) string",
        "(bool) string",
        "(int) string",
        "(uint) string",
        "(double) string",
        "(bytes) string",
        "(timestamp) string",
        "(duration) string",
    ]
    .iter()
    .map(|s| (*s, since::ALWAYS))
    .collect();
    string_sigs.extend([
        ("(net.IP) string", since::IP_CIDR),
        ("(net.CIDR) string", since::IP_CIDR),
    ]);
    b.add(
        "string",
        &string_sigs,
        to_string,
        Cost::Custom(cost_string_conversion),
    );
    b.always(
        "bytes",
        &["(bytes) bytes", "(string) bytes"],
        to_bytes,
        Cost::Custom(cost_string_conversion),
    );
    b.always(
        "bool",
        &["(bool) bool", "(string) bool"],
        to_bool,
        Cost::One,
    );
    b.always("dyn", &["(A) dyn"], dyn_, Cost::One);
    b.always("type", &["(A) type(A)"], type_of, Cost::One);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_print_like_go() {
        assert_eq!(format_double(-1.23e4), "-12300");
        assert_eq!(format_double(1e21), "1e+21");
        assert_eq!(format_double(123456789.123), "1.23456789123e+08");
        assert_eq!(format_double(999999.0), "999999");
        assert_eq!(format_double(1e6), "1e+06");
        assert_eq!(parse_go_float("0x1p-2"), Some(0.25));
        assert_eq!(parse_go_float("1_000.5"), Some(1000.5));
        assert_eq!(parse_go_float("-Inf"), Some(f64::NEG_INFINITY));
        assert!(parse_go_float("+nan").is_none());
        for bad in [
            "1e400", "-1e400", "", " 1.5", "1,5", "_1", "1__0", "1_", "0x1", "1_.5",
        ] {
            assert_eq!(parse_go_float(bad), None, "{bad}");
        }
        assert_eq!(format_double(1.5e-5), "1.5e-05");
        assert_eq!(format_double(0.1), "0.1");
        assert_eq!(format_double(f64::INFINITY), "+Inf");
    }

    #[test]
    fn bytes_are_base64_in_json() {
        let json = |b: &[u8]| Value::Bytes(b.into()).to_json();
        assert_eq!(json(b""), "");
        assert_eq!(json(&[0, 0xff]), "AP8=");
        assert_eq!(json(b"abc"), "YWJj");
    }
}
