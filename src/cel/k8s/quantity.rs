//! Kubernetes' quantity library (`library/quantity.go`, type `kubernetes.Quantity`;
//! compatibility 1.28).
//!
//! Parsing follows apimachinery's `resource.ParseQuantity`: an optionally signed decimal, then
//! one suffix (binary `Ki`..`Ei`, decimal `n u m k M G T P E`, or an exponent `e<int>`). The
//! value is exact: like apimachinery it is rounded up (away from zero) to nano precision, and a
//! binary-suffixed value is capped at 2^63-1. celgate holds it as an `i128` count of
//! nano-units, exact up to about 1.7e29; a larger quantity is refused with a clear error where
//! apimachinery would use an unbounded decimal. Its text is apimachinery's `String()`: the
//! parsed text where `ParseQuantity` keeps it, else the canonical form (`1.5` is `1500m`).

use std::any::Any;

use crate::cel::error::EvalError;
use crate::cel::overload::{since, str_arg, Cost, Register, R};
use crate::cel::value::{Opaque, Value};

const NANOS: i128 = 1_000_000_000;

/// apimachinery's `ErrFormatWrong`.
const FORMAT_WRONG: &str =
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";
const NUMERIC: &str = "unable to parse numeric part of quantity";
const SUFFIX: &str = "unable to parse quantity's suffix";

#[derive(Debug, Clone, PartialEq)]
pub struct Quantity {
    /// The value in nano-units.
    pub nanos: i128,
    /// How apimachinery writes it, from the suffix it was parsed with.
    pub format: Format,
    /// The text it was parsed from, when apimachinery's `ParseQuantity` keeps it as the
    /// quantity's string (its fast path on text it deems canonical: `+1`, `5.`, `1E3`).
    pub text: Option<Box<str>>,
    /// Whether apimachinery holds it as an int64 amount (its parse fast path) rather than an
    /// unbounded decimal: only then is it an integer to `isInteger`/`asInteger` (`AsInt64`).
    pub int64: bool,
}

/// apimachinery's quantity formats: the suffix family a quantity was parsed with, which its
/// canonical text (`Quantity.String()`) keeps.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Format {
    /// No suffix or `n u m k M G T P E`.
    DecimalSi,
    /// `Ki` .. `Ei`.
    BinarySi,
    /// `e<int>` / `E<int>`.
    DecimalExponent,
}

impl Opaque for Quantity {
    fn type_name(&self) -> &'static str {
        "kubernetes.Quantity"
    }
    fn equals(&self, other: &dyn Opaque) -> bool {
        other
            .as_any()
            .downcast_ref::<Quantity>()
            .is_some_and(|o| o.nanos == self.nanos)
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn to_cel_string(&self) -> Option<String> {
        Some(match &self.text {
            Some(text) => text.to_string(),
            None => canonical(self.nanos, self.format),
        })
    }
}

enum Suffix {
    /// 10^exp
    Decimal(i32),
    /// 2^exp
    Binary(u32),
}

fn suffix(s: &str) -> Option<Suffix> {
    Some(match s {
        "" => Suffix::Decimal(0),
        "n" => Suffix::Decimal(-9),
        "u" => Suffix::Decimal(-6),
        "m" => Suffix::Decimal(-3),
        "k" => Suffix::Decimal(3),
        "M" => Suffix::Decimal(6),
        "G" => Suffix::Decimal(9),
        "T" => Suffix::Decimal(12),
        "P" => Suffix::Decimal(15),
        "E" => Suffix::Decimal(18),
        "Ki" => Suffix::Binary(10),
        "Mi" => Suffix::Binary(20),
        "Gi" => Suffix::Binary(30),
        "Ti" => Suffix::Binary(40),
        "Pi" => Suffix::Binary(50),
        "Ei" => Suffix::Binary(60),
        e if e.len() > 1 && (e.starts_with('e') || e.starts_with('E')) => {
            let digits = &e[1..];
            let unsigned = digits.strip_prefix(['+', '-']).unwrap_or(digits);
            if unsigned.is_empty() || !unsigned.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            Suffix::Decimal(digits.parse().ok()?)
        }
        _ => return None,
    })
}

/// Splits `[sign][digits][.digits][suffix]` as apimachinery's `parseQuantityString`.
fn split(s: &str) -> Result<(bool, &str, &str, &str), &'static str> {
    let b = s.as_bytes();
    let mut pos = 0;
    let positive = match b.first() {
        Some(b'-') => {
            pos = 1;
            false
        }
        Some(b'+') => {
            pos = 1;
            true
        }
        _ => true,
    };
    let digits = |from: usize| from + b[from..].iter().take_while(|c| c.is_ascii_digit()).count();
    let num_end = digits(pos);
    let num = &s[pos..num_end];
    pos = num_end;
    let mut denom = "";
    if b.get(pos) == Some(&b'.') {
        let end = digits(pos + 1);
        denom = &s[pos + 1..end];
        pos = end;
    }
    // No digits at all is zero, as apimachinery's scanner takes an empty number as `0`:
    // `Mi`, `-` and `.` are quantities (the empty string is refused before).
    let suffix_start = pos;
    while pos < b.len() && b"eEinumkKMGTP".contains(&b[pos]) {
        pos += 1;
    }
    if pos < b.len() && (b[pos] == b'-' || b[pos] == b'+') {
        pos += 1;
    }
    while pos < b.len() && b[pos].is_ascii_digit() {
        pos += 1;
    }
    if pos != b.len() {
        return Err(FORMAT_WRONG);
    }
    Ok((positive, num, denom, &s[suffix_start..]))
}

/// Parses like apimachinery's `ParseQuantity`, with its error messages.
pub fn parse(s: &str) -> Result<Quantity, EvalError> {
    let err = |m: &str| EvalError::new(m.to_string());
    if s.is_empty() {
        return Err(err(FORMAT_WRONG));
    }
    let (positive, num, denom, suf) = split(s).map_err(err)?;
    let suffix = suffix(suf).ok_or_else(|| err(SUFFIX))?;
    // The digits as an integer, and the power of ten that scales them.
    let digits: String = format!("{num}{denom}");
    let digits = digits.trim_start_matches('0');
    let mut exp10: i64 = -(denom.len() as i64);
    let mut binary: u32 = 0;
    match suffix {
        Suffix::Decimal(e) => exp10 += i64::from(e),
        Suffix::Binary(e) => binary = e,
    }
    // Into nano-units, rounding up away from zero as apimachinery does (`inf.RoundUp`).
    let shift = exp10 + 9;
    let too_large = || err("quantity is too large for celgate's exact range (about 1.7e29)");
    let mut nanos: i128 = if digits.is_empty() {
        0
    } else if shift >= 0 {
        if digits.len() as i64 + shift > 38 {
            return Err(too_large());
        }
        let base: i128 = digits.parse().map_err(|_| err(NUMERIC))?;
        base.checked_mul(10i128.pow(shift as u32))
            .ok_or_else(too_large)?
    } else {
        let cut = (-shift) as usize;
        if cut >= digits.len() {
            1
        } else {
            let (keep, dropped) = digits.split_at(digits.len() - cut);
            if keep.len() > 38 {
                return Err(too_large());
            }
            let kept: i128 = keep.parse().map_err(|_| err(NUMERIC))?;
            kept + i128::from(dropped.bytes().any(|c| c != b'0'))
        }
    };
    if binary > 0 {
        // Binary quantities are capped at the largest int64 (apimachinery's maxAllowed).
        let cap = i128::from(i64::MAX) * NANOS;
        nanos = nanos
            .checked_mul(1i128 << binary)
            .map_or(cap, |v| v.min(cap));
    }
    let format = if binary > 0 {
        Format::BinarySi
    } else if suf.len() > 1 && suf.starts_with(['e', 'E']) {
        Format::DecimalExponent
    } else {
        Format::DecimalSi
    };
    let fast = fast_path(num, denom, &suffix);
    let text = (fast == Some(true)).then(|| s.into());
    Ok(Quantity {
        nanos: if positive { nanos } else { -nanos },
        format,
        text,
        int64: fast.is_some(),
    })
}

/// apimachinery's `ParseQuantity` int64 fast path (few enough digits, a scale of at least
/// nano, no overflow): `None` off it, else whether it keeps the text as the quantity's
/// string: for a binary quantity whose number is not a multiple of 8, or a decimal one with
/// a scale that is a multiple of 3 and a number that neither starts with `0` nor ends with
/// `000` (leading zeros stripped first).
fn fast_path(num: &str, denom: &str, suffix: &Suffix) -> Option<bool> {
    let num = match num.trim_start_matches('0') {
        "" => "0",
        n => n,
    };
    let shifted = format!("{num}{denom}");
    let digits = (num.len() + denom.len()) as i64;
    match *suffix {
        Suffix::Decimal(exp) => {
            let scale = i64::from(exp) - denom.len() as i64;
            if digits > 18 || scale < -9 {
                return None;
            }
            shifted.parse::<i64>().ok()?;
            Some(scale % 3 == 0 && !shifted.ends_with("000") && !shifted.starts_with('0'))
        }
        Suffix::Binary(exp) => {
            let precision = 15 - num.len() as i64 - (exp as f32 * 3.0 / 10.0) as i64 - 1;
            if !denom.is_empty() || precision < 0 {
                return None;
            }
            let value = shifted.parse::<i64>().ok()?;
            value.checked_mul(1i64 << exp)?;
            Some(exp % 10 == 0 && value & 7 != 0)
        }
    }
}

fn quantity_of(v: &Value<'_>) -> Result<Quantity, EvalError> {
    v.as_opaque::<Quantity>()
        .cloned()
        .ok_or_else(EvalError::no_such_overload)
}

/// An `add`/`sub` result: apimachinery's `Add`/`Sub` keep the receiver's format, and an
/// int64 amount while both operands are.
fn from_nanos<'a>(nanos: i128, format: Format, int64: bool) -> R<'a> {
    Ok(Value::opaque(Quantity {
        nanos,
        format,
        text: None,
        int64,
    }))
}

/// apimachinery's `Quantity.String()` (`CanonicalizeBytes`): zero is `0`; a binary quantity
/// that is a whole number of at least 1024 in magnitude is written with the largest power
/// of 1024 that divides it (`Ki`..`Ei`); anything else as an integer mantissa and a power
/// of ten that is a multiple of 3, written as an SI suffix (`m`, `k`...) or, for exponent
/// quantities and powers with no suffix, as `e<exp>`.
fn canonical(nanos: i128, format: Format) -> String {
    if nanos == 0 {
        return "0".into();
    }
    let sign = if nanos < 0 { "-" } else { "" };
    let abs = nanos.unsigned_abs();
    let whole = abs.is_multiple_of(NANOS as u128);
    if format == Format::BinarySi && whole && abs >= 1024 * NANOS as u128 {
        let (mut amount, mut power) = (abs / NANOS as u128, 0usize);
        while amount % 1024 == 0 && power < 6 {
            amount /= 1024;
            power += 1;
        }
        let suffix = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"]
            .get(power)
            .unwrap_or(&"");
        return format!("{sign}{amount}{suffix}");
    }
    // The mantissa without trailing zeros, its exponent made a multiple of 3.
    let (mut amount, mut exp) = (abs, -9i32);
    while amount % 10 == 0 {
        amount /= 10;
        exp += 1;
    }
    // (A mantissa near the top of the i128 range stays as it is rather than overflow.)
    let shift = exp.rem_euclid(3);
    if let Some(scaled) = amount.checked_mul(10u128.pow(shift as u32)) {
        (amount, exp) = (scaled, exp - shift);
    }
    let si = match exp {
        -9 => Some("n"),
        -6 => Some("u"),
        -3 => Some("m"),
        0 => Some(""),
        3 => Some("k"),
        6 => Some("M"),
        9 => Some("G"),
        12 => Some("T"),
        15 => Some("P"),
        18 => Some("E"),
        _ => None,
    };
    match (format, si) {
        (_, _) if exp == 0 => format!("{sign}{amount}"),
        (Format::DecimalExponent, _) | (_, None) => format!("{sign}{amount}e{exp}"),
        (_, Some(suffix)) => format!("{sign}{amount}{suffix}"),
    }
}

fn quantity<'a>(a: &[Value<'a>]) -> R<'a> {
    Ok(Value::opaque(parse(str_arg(&a[0])?)?))
}

fn is_quantity<'a>(a: &[Value<'a>]) -> R<'a> {
    Ok(Value::Bool(parse(str_arg(&a[0])?).is_ok()))
}

fn sign<'a>(a: &[Value<'a>]) -> R<'a> {
    Ok(Value::Int(quantity_of(&a[0])?.nanos.signum() as i64))
}

fn as_int64(q: &Quantity) -> Option<i64> {
    if !q.int64 || q.nanos % NANOS != 0 {
        return None;
    }
    i64::try_from(q.nanos / NANOS).ok()
}

fn is_integer<'a>(a: &[Value<'a>]) -> R<'a> {
    Ok(Value::Bool(as_int64(&quantity_of(&a[0])?).is_some()))
}

fn as_integer<'a>(a: &[Value<'a>]) -> R<'a> {
    as_int64(&quantity_of(&a[0])?)
        .map(Value::Int)
        .ok_or_else(|| EvalError::new("cannot convert value to integer"))
}

fn as_approximate_float<'a>(a: &[Value<'a>]) -> R<'a> {
    Ok(Value::Double(
        quantity_of(&a[0])?.nanos as f64 / NANOS as f64,
    ))
}

/// The argument of `add`/`sub`: a quantity, or an int of whole units.
/// (With whether apimachinery holds it as an int64 amount.)
fn operand(v: &Value<'_>) -> Result<(i128, bool), EvalError> {
    match v {
        Value::Int(i) => Ok((i128::from(*i) * NANOS, true)),
        other => {
            let q = quantity_of(other)?;
            Ok((q.nanos, q.int64))
        }
    }
}

fn add_quantity<'a>(a: &[Value<'a>]) -> R<'a> {
    let q = quantity_of(&a[0])?;
    let (y, y_int64) = operand(&a[1])?;
    let sum = q.nanos.checked_add(y);
    sum.map_or_else(
        || Err(EvalError::new("quantity overflow")),
        |n| from_nanos(n, q.format, q.int64 && y_int64),
    )
}

fn sub_quantity<'a>(a: &[Value<'a>]) -> R<'a> {
    let q = quantity_of(&a[0])?;
    let (y, y_int64) = operand(&a[1])?;
    let diff = q.nanos.checked_sub(y);
    diff.map_or_else(
        || Err(EvalError::new("quantity overflow")),
        |n| from_nanos(n, q.format, q.int64 && y_int64),
    )
}

fn compare_to<'a>(a: &[Value<'a>]) -> R<'a> {
    Ok(Value::Int(
        quantity_of(&a[0])?.nanos.cmp(&quantity_of(&a[1])?.nanos) as i64,
    ))
}

fn is_greater_than<'a>(a: &[Value<'a>]) -> R<'a> {
    Ok(Value::Bool(
        quantity_of(&a[0])?.nanos > quantity_of(&a[1])?.nanos,
    ))
}

fn is_less_than<'a>(a: &[Value<'a>]) -> R<'a> {
    Ok(Value::Bool(
        quantity_of(&a[0])?.nanos < quantity_of(&a[1])?.nanos,
    ))
}

pub fn register(add: Register<'_>) {
    let v = since::QUANTITY;
    add(
        "quantity",
        &[("(string) kubernetes.Quantity", v)],
        quantity,
        Cost::Traverse(0, 0.1),
    );
    add(
        "isQuantity",
        &[("(string) bool", v)],
        is_quantity,
        Cost::Traverse(0, 0.1),
    );
    // Declared as a global overload in Kubernetes: `sign(q)`, not `q.sign()`.
    add("sign", &[("(kubernetes.Quantity) int", v)], sign, Cost::One);
    add(
        "isInteger",
        &[("kubernetes.Quantity.() bool", v)],
        is_integer,
        Cost::One,
    );
    add(
        "asInteger",
        &[("kubernetes.Quantity.() int", v)],
        as_integer,
        Cost::One,
    );
    add(
        "asApproximateFloat",
        &[("kubernetes.Quantity.() double", v)],
        as_approximate_float,
        Cost::One,
    );
    let arith = [
        (
            "kubernetes.Quantity.(kubernetes.Quantity) kubernetes.Quantity",
            v,
        ),
        ("kubernetes.Quantity.(int) kubernetes.Quantity", v),
    ];
    add("add", &arith, add_quantity, Cost::One);
    add("sub", &arith, sub_quantity, Cost::One);
    add(
        "compareTo",
        &[("kubernetes.Quantity.(kubernetes.Quantity) int", v)],
        compare_to,
        Cost::One,
    );
    add(
        "isGreaterThan",
        &[("kubernetes.Quantity.(kubernetes.Quantity) bool", v)],
        is_greater_than,
        Cost::One,
    );
    add(
        "isLessThan",
        &[("kubernetes.Quantity.(kubernetes.Quantity) bool", v)],
        is_less_than,
        Cost::One,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(s: &str) -> i128 {
        parse(s).unwrap_or_else(|e| panic!("{s}: {e}")).nanos
    }

    #[test]
    fn apimachinery_parsing() {
        assert_eq!(n("1Gi"), (1i128 << 30) * NANOS);
        assert_eq!(n("1.5k"), 1500 * NANOS);
        assert_eq!(n("500m"), NANOS / 2);
        assert_eq!(n("1e3"), 1000 * NANOS);
        assert_eq!(n("1E-3"), NANOS / 1000);
        assert_eq!(n("-2"), -2 * NANOS);
        assert_eq!(n("0.1n"), 1, "rounded up to the nano");
        assert_eq!(n("-0.1n"), -1, "rounded away from zero");
        assert_eq!(n("0"), 0);
        assert_eq!(n("1."), NANOS, "apimachinery accepts a trailing dot");
        assert_eq!(
            n("16Ei"),
            i128::from(i64::MAX) * NANOS,
            "binary quantities are capped"
        );
        assert!(
            parse("200K").unwrap_err().message().contains("suffix"),
            "upper-case K is invalid"
        );
        // Recorded from Kubernetes 1.32: a bare suffix is zero (the scanner's empty number).
        assert_eq!(parse("Mi").unwrap().nanos, 0);
        assert_eq!(parse("-").unwrap().to_cel_string().unwrap(), "0");
        assert!(parse("abc").is_err());
        assert!(parse(" 1").is_err());
        assert!(parse("")
            .unwrap_err()
            .message()
            .starts_with("quantities must match"));
        assert!(parse("1.2.3").is_err());
        assert!(parse("1Mi5").is_err());
    }

    #[test]
    fn comparison_and_integers() {
        assert!(n("50M") < n("50Mi"));
        assert_eq!(n("200M"), n("0.2G"));
        assert_eq!(as_int64(&parse("1k").unwrap()), Some(1000));
        assert_eq!(as_int64(&parse("1.5").unwrap()), None);
        assert_eq!(as_int64(&parse("1E19").unwrap()), None, "overflows int64");
        // Only an int64 amount (apimachinery's parse fast path) is an integer, even when
        // the unbounded decimal holds a whole number.
        assert_eq!(as_int64(&parse("1.0").unwrap()), Some(1));
        assert_eq!(as_int64(&parse("1Ti").unwrap()), Some(1 << 40));
        assert_eq!(as_int64(&parse("-1.5Gi").unwrap()), None);
        assert_eq!(as_int64(&parse("8Ei").unwrap()), None);
        assert_eq!(as_int64(&parse("9223372036854775807").unwrap()), None);
        assert_eq!(
            as_int64(&parse("922337203685477580").unwrap()),
            Some(922337203685477580)
        );
        let sum = add_quantity(&[Value::opaque(parse("1").unwrap()), Value::Int(2)]).unwrap();
        assert!(matches!(is_integer(&[sum]), Ok(Value::Bool(true))));
        let sum = add_quantity(&[Value::opaque(parse("1.5Gi").unwrap()), Value::Int(2)]).unwrap();
        assert!(matches!(is_integer(&[sum]), Ok(Value::Bool(false))));
        assert_eq!(canonical(50_020 * NANOS, Format::DecimalSi), "50020");
    }

    #[test]
    fn text_is_apimachinery_canonical_form() {
        let text = |s: &str| parse(s).unwrap().to_cel_string().unwrap();
        for (input, want) in [
            ("1.5", "1500m"),
            ("0.1m", "100u"),
            ("1.0", "1"),
            ("-0", "0"),
            ("0.000000001", "1n"),
            ("0.0000000001", "1n"),
            ("1.5e3", "1500"),
            ("1e3", "1e3"),
            ("12e2", "1200"),
            ("1000k", "1M"),
            ("1000E", "1e21"),
            ("-1.5Gi", "-1536Mi"),
            ("1024Ki", "1Mi"),
            ("1536", "1536"),
            ("512Ki", "512Ki"),
            ("1Ki", "1Ki"),
            ("0.5Ki", "512"),
            ("1023", "1023"),
            ("8Ei", "9223372036854775807"),
            ("0.5Gi", "512Mi"),
            // Text apimachinery keeps as it was written.
            ("+1", "+1"),
            ("5.", "5."),
            ("1E", "1E"),
            ("1E3", "1E3"),
            ("00001", "00001"),
            ("-1.5k", "-1500"),
            ("-15k", "-15k"),
            ("3Ki", "3Ki"),
            ("100m", "100m"),
            ("12Ti", "12Ti"),
            ("123Ti", "123Ti"),
            ("9Ei", "9223372036854775807"),
        ] {
            assert_eq!(text(input), want, "{input}");
        }
        // `add`/`sub` keep the receiver's format.
        let q = parse("1Gi").unwrap();
        let sum = add_quantity(&[Value::opaque(q), Value::Int(1024)]).unwrap();
        assert_eq!(sum.to_json().to_string(), "\"1048577Ki\"");
    }
}
