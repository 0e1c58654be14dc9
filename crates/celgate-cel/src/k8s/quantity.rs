//! Kubernetes' quantity library (`library/quantity.go`, type `kubernetes.Quantity`;
//! compatibility 1.28).
//!
//! Parsing follows apimachinery's `resource.ParseQuantity`: an optionally signed decimal, then
//! one suffix (binary `Ki`..`Ei`, decimal `n u m k M G T P E`, or an exponent `e<int>`). The
//! value is exact: like apimachinery it is rounded up (away from zero) to nano precision, and a
//! binary-suffixed value is capped at 2^63-1. celgate holds it as an `i128` count of
//! nano-units times a power of ten (kept at 1 whenever the count fits), so any quantity with
//! up to 38 significant digits is exact (`1e1000` is, as apimachinery's unbounded `inf.Dec`
//! keeps it); more digits than that are refused with a clear error. Its text is
//! apimachinery's `String()`: the parsed text where `ParseQuantity` keeps it, else the
//! canonical form (`1.5` is `1500m`, `1e1000` is `10e999`).

use std::any::Any;
use std::cmp::Ordering;

use crate::error::EvalError;
use crate::overload::{since, str_arg, Cost, Register, R};
use crate::value::{Opaque, Value};

const NANOS: i128 = 1_000_000_000;

/// apimachinery's `ErrFormatWrong`.
const FORMAT_WRONG: &str =
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";
const NUMERIC: &str = "unable to parse numeric part of quantity";
const SUFFIX: &str = "unable to parse quantity's suffix";

/// A `kubernetes.Quantity` value (`quantity('1Gi')`), as apimachinery's `resource.Quantity`.
#[derive(Debug, Clone, PartialEq)]
pub struct Quantity {
    /// The value in nano-units, times `10^scale`.
    pub nanos: i128,
    /// 0 unless the value does not fit an `i128` of nano-units; then `nanos` has no trailing
    /// zero. So two quantities are equal exactly when both fields are.
    pub scale: u32,
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
            .is_some_and(|o| (o.nanos, o.scale) == (self.nanos, self.scale))
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn to_cel_string(&self) -> Option<String> {
        Some(match &self.text {
            Some(text) => text.to_string(),
            None => canonical(self.nanos, self.scale, self.format),
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
    // The digits of `num` and `denom` as one number (read in place: no copy per parse),
    // and the power of ten that scales them.
    let all = Digits(num, denom);
    let leading = all.bytes().take_while(|&c| c == b'0').count();
    let mut exp10: i64 = -(denom.len() as i64);
    let mut binary: u32 = 0;
    match suffix {
        Suffix::Decimal(e) => exp10 += i64::from(e),
        Suffix::Binary(e) => binary = e,
    }
    // Into nano-units, rounding up away from zero as apimachinery does (`inf.RoundUp`).
    let shift = exp10 + 9;
    let too_large = || err(TOO_LARGE);
    // Trailing zeros only scale: `1e1000` is one digit.
    let trailing = if leading == all.len() {
        0
    } else {
        all.bytes().rev().take_while(|&c| c == b'0').count()
    };
    let shift = shift + trailing as i64;
    // The significant digits: `all[leading..end]`.
    let end = all.len() - trailing;
    let significant = end - leading;
    let (mut nanos, mut scale): (i128, u32) = if significant == 0 {
        (0, 0)
    } else if shift >= 0 {
        if significant > 38 {
            return Err(too_large());
        }
        let base = all.value(leading, end).ok_or_else(|| err(NUMERIC))?;
        let shift = u32::try_from(shift).map_err(|_| too_large())?;
        normalize(base, shift)
    } else {
        let cut = (-shift) as usize;
        if cut >= significant {
            (1, 0)
        } else {
            let keep_end = end - cut;
            if keep_end - leading > 38 {
                return Err(too_large());
            }
            let kept = all.value(leading, keep_end).ok_or_else(|| err(NUMERIC))?;
            let dropped = all.bytes().take(end).skip(keep_end).any(|c| c != b'0');
            (kept + i128::from(dropped), 0)
        }
    };
    if binary > 0 {
        // Binary quantities are capped at the largest int64 (apimachinery's maxAllowed).
        let cap = i128::from(i64::MAX) * NANOS;
        nanos = match scale {
            0 => nanos
                .checked_mul(1i128 << binary)
                .map_or(cap, |v| v.min(cap)),
            _ => cap,
        };
        scale = 0;
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
        scale,
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
    let shifted = Digits(num, denom);
    let digits = shifted.len() as i64;
    match *suffix {
        Suffix::Decimal(exp) => {
            let scale = i64::from(exp) - denom.len() as i64;
            if digits > 18 || scale < -9 {
                return None;
            }
            // At most 18 digits: always an int64.
            let ends_000 = shifted.len() >= 3 && shifted.bytes().rev().take(3).all(|c| c == b'0');
            let starts_0 = shifted.bytes().next() == Some(b'0');
            Some(scale % 3 == 0 && !ends_000 && !starts_0)
        }
        Suffix::Binary(exp) => {
            let precision = 15 - num.len() as i64 - (exp as f32 * 3.0 / 10.0) as i64 - 1;
            if !denom.is_empty() || precision < 0 {
                return None;
            }
            let value = i64::try_from(shifted.value(0, shifted.len())?).ok()?;
            value.checked_mul(1i64 << exp)?;
            Some(exp % 10 == 0 && value & 7 != 0)
        }
    }
}

/// Two runs of ASCII digits read as one (a quantity's integer and fractional digits),
/// without joining them.
#[derive(Clone, Copy)]
struct Digits<'s>(&'s str, &'s str);

impl<'s> Digits<'s> {
    fn len(self) -> usize {
        self.0.len() + self.1.len()
    }

    fn bytes(self) -> impl DoubleEndedIterator<Item = u8> + 's {
        self.0.bytes().chain(self.1.bytes())
    }

    /// The digits `from..to` as a number; `None` past an `i128`.
    fn value(self, from: usize, to: usize) -> Option<i128> {
        self.bytes().take(to).skip(from).try_fold(0i128, |n, c| {
            n.checked_mul(10)?.checked_add(i128::from(c - b'0'))
        })
    }
}

/// The quantity `v` holds, borrowed (a clone would copy its kept text).
fn quantity_of<'v>(v: &'v Value<'_>) -> Result<&'v Quantity, EvalError> {
    v.as_opaque::<Quantity>()
        .ok_or_else(EvalError::no_such_overload)
}

/// `m·10^scale` nano-units in the representation's normal form: `scale` 0 when the count
/// fits an `i128`, else no trailing zero in `m`.
fn normalize(m: i128, scale: u32) -> (i128, u32) {
    if let Some(n) = 10i128.checked_pow(scale).and_then(|p| m.checked_mul(p)) {
        return (n, 0);
    }
    let (mut m, mut scale) = (m, scale);
    while m != 0 && m % 10 == 0 {
        m /= 10;
        scale += 1;
    }
    (m, scale)
}

/// `|a| · 10^by`, or `None` when it does not fit an `i128`.
fn scaled(a: i128, by: u32) -> Option<i128> {
    10i128.checked_pow(by).and_then(|p| a.checked_mul(p))
}

/// The two quantities' nano counts at the smaller of their scales, with that scale; `None`
/// when the larger one does not fit there.
fn aligned(a: &Quantity, b: (i128, u32)) -> Option<(i128, i128, u32)> {
    let (bn, bs) = b;
    let low = a.scale.min(bs);
    Some((scaled(a.nanos, a.scale - low)?, scaled(bn, bs - low)?, low))
}

/// Orders two quantities by value.
fn cmp_quantity(a: &Quantity, b: &Quantity) -> Ordering {
    if a.scale == b.scale {
        return a.nanos.cmp(&b.nanos);
    }
    match a.nanos.signum().cmp(&b.nanos.signum()) {
        Ordering::Equal => {}
        other => return other,
    }
    // Same sign, both non-zero: compare magnitudes, first by their number of digits.
    let (x, y) = (a.nanos.unsigned_abs(), b.nanos.unsigned_abs());
    let width = |m: u128, scale: u32| u64::from(m.ilog10()) + u64::from(scale);
    let magnitude = width(x, a.scale).cmp(&width(y, b.scale)).then_with(|| {
        // As many digits: bring the larger scale down; overflowing means larger.
        if a.scale > b.scale {
            10u128
                .checked_pow(a.scale - b.scale)
                .and_then(|p| x.checked_mul(p))
                .map_or(Ordering::Greater, |x| x.cmp(&y))
        } else {
            10u128
                .checked_pow(b.scale - a.scale)
                .and_then(|p| y.checked_mul(p))
                .map_or(Ordering::Less, |y| x.cmp(&y))
        }
    });
    if a.nanos > 0 {
        magnitude
    } else {
        magnitude.reverse()
    }
}

const TOO_LARGE: &str = "quantity is too large for celgate's exact range (38 significant digits)";

/// An `add`/`sub` result: apimachinery's `Add`/`Sub` keep the receiver's format, and an
/// int64 amount while both operands are.
fn from_nanos<'a>(nanos: i128, scale: u32, format: Format, int64: bool) -> R<'a> {
    let (nanos, scale) = normalize(nanos, scale);
    Ok(Value::opaque(Quantity {
        nanos,
        scale,
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
fn canonical(nanos: i128, scale: u32, format: Format) -> String {
    if nanos == 0 {
        return "0".into();
    }
    let sign = if nanos < 0 { "-" } else { "" };
    let abs = nanos.unsigned_abs();
    let whole = abs.is_multiple_of(NANOS as u128);
    if scale == 0 && format == Format::BinarySi && whole && abs >= 1024 * NANOS as u128 {
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
    // The mantissa without trailing zeros, its exponent made a multiple of 3 (in digits:
    // apimachinery's is an unbounded integer).
    let digits = abs.to_string();
    let significant = digits.trim_end_matches('0');
    let exp = i64::from(scale) - 9 + (digits.len() - significant.len()) as i64;
    let shift = exp.rem_euclid(3);
    let (amount, exp) = (
        format!("{significant}{}", "0".repeat(shift as usize)),
        exp - shift,
    );
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
    if !q.int64 || q.scale != 0 || q.nanos % NANOS != 0 {
        return None;
    }
    i64::try_from(q.nanos / NANOS).ok()
}

fn is_integer<'a>(a: &[Value<'a>]) -> R<'a> {
    Ok(Value::Bool(as_int64(quantity_of(&a[0])?).is_some()))
}

fn as_integer<'a>(a: &[Value<'a>]) -> R<'a> {
    as_int64(quantity_of(&a[0])?)
        .map(Value::Int)
        .ok_or_else(|| EvalError::new("cannot convert value to integer"))
}

fn as_approximate_float<'a>(a: &[Value<'a>]) -> R<'a> {
    let q = quantity_of(&a[0])?;
    if q.scale == 0 {
        return Ok(Value::Double(q.nanos as f64 / NANOS as f64));
    }
    // apimachinery's `AsApproximateFloat64`: an int64 amount (`1e1000` is one) is its value
    // times `math.Pow10(scale)`; a decimal is its unscaled integer (nano-units) as the
    // nearest float, times `math.Pow10(-9)`.
    let exp = i64::from(q.scale) - 9;
    Ok(Value::Double(if q.int64 {
        q.nanos as f64 * go_pow10(exp)
    } else {
        let unscaled: f64 = format!("{}e{}", q.nanos, q.scale)
            .parse()
            .unwrap_or(f64::NAN);
        unscaled * go_pow10(-9)
    }))
}

/// Go's `math.Pow10`: a product (or quotient) of two table entries, infinite above 1e308.
fn go_pow10(n: i64) -> f64 {
    let entry = |e: i64| format!("1e{e}").parse::<f64>().unwrap_or(f64::NAN);
    match n {
        0..=308 => entry(n / 32 * 32) * entry(n % 32),
        -323..=-1 => entry(n / 32 * 32) / entry(-n % 32),
        n if n > 0 => f64::INFINITY,
        _ => 0.0,
    }
}

/// The argument of `add`/`sub`: a quantity, or an int of whole units, as nano-units times
/// a power of ten (with whether apimachinery holds it as an int64 amount).
fn operand(v: &Value<'_>) -> Result<(i128, u32, bool), EvalError> {
    match v {
        Value::Int(i) => Ok((i128::from(*i) * NANOS, 0, true)),
        other => {
            let q = quantity_of(other)?;
            Ok((q.nanos, q.scale, q.int64))
        }
    }
}

/// `add` (`negate` false) or `sub`: exact within 38 significant digits at the smaller
/// scale, else an error (apimachinery's decimal is unbounded).
fn add_or_sub<'a>(a: &[Value<'a>], negate: bool) -> R<'a> {
    let q = quantity_of(&a[0])?;
    let (y, y_scale, y_int64) = operand(&a[1])?;
    let (x, y, scale) = aligned(q, (y, y_scale)).ok_or_else(|| EvalError::new(TOO_LARGE))?;
    let result = if negate {
        x.checked_sub(y)
    } else {
        x.checked_add(y)
    };
    result.map_or_else(
        || Err(EvalError::new("quantity overflow")),
        |n| from_nanos(n, scale, q.format, q.int64 && y_int64),
    )
}

fn add_quantity<'a>(a: &[Value<'a>]) -> R<'a> {
    add_or_sub(a, false)
}

fn sub_quantity<'a>(a: &[Value<'a>]) -> R<'a> {
    add_or_sub(a, true)
}

fn compare_to<'a>(a: &[Value<'a>]) -> R<'a> {
    Ok(Value::Int(
        cmp_quantity(quantity_of(&a[0])?, quantity_of(&a[1])?) as i64,
    ))
}

fn is_greater_than<'a>(a: &[Value<'a>]) -> R<'a> {
    Ok(Value::Bool(
        cmp_quantity(quantity_of(&a[0])?, quantity_of(&a[1])?) == Ordering::Greater,
    ))
}

fn is_less_than<'a>(a: &[Value<'a>]) -> R<'a> {
    Ok(Value::Bool(
        cmp_quantity(quantity_of(&a[0])?, quantity_of(&a[1])?) == Ordering::Less,
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
        assert_eq!(canonical(50_020 * NANOS, 0, Format::DecimalSi), "50020");
    }

    #[test]
    fn quantities_beyond_i128_nanos_stay_exact() {
        let q = |s: &str| parse(s).unwrap_or_else(|e| panic!("{s}: {e}"));
        let text = |s: &str| q(s).to_cel_string().unwrap();
        // Recorded from Kubernetes 1.32 (k8s.quantity): apimachinery's decimal is unbounded.
        assert_eq!(text("1e1000"), "10e999");
        assert_eq!(
            text("999999999999999999999999999999999"),
            "999999999999999999999999999999999"
        );
        assert_eq!(text("-1e+308"), "-100e306");
        assert_eq!(text("2E"), "2E");
        assert_eq!(text("1000000000000000000000000000000000E"), "1e51");
        // Held as an int64 amount by apimachinery (value 1, scale 1000), yet no integer.
        assert!(q("1e1000").int64 && as_int64(&q("1e1000")).is_none());
        // Order and equality across representations.
        let order = |a: &str, b: &str| cmp_quantity(&q(a), &q(b));
        assert_eq!(order("1e1000", "1e999"), Ordering::Greater);
        assert_eq!(order("-1e1000", "-1e999"), Ordering::Less);
        assert_eq!(
            order("1e40", "99999999999999999999999999999999999999e2"),
            Ordering::Greater
        );
        assert_eq!(
            order("1e40", "99999999999999999999999999999999999999e3"),
            Ordering::Less
        );
        assert_eq!(order("1e40", "1e30"), Ordering::Greater);
        assert_eq!(order("1e40", "-1"), Ordering::Greater);
        assert_eq!(order("10e39", "1e40"), Ordering::Equal);
        assert!(q("10e39").equals(&q("1e40")));
        assert!(!q("1e40").equals(&q("1e41")));
        // Arithmetic that fits 38 significant digits at the smaller scale.
        let sum = add_quantity(&[Value::opaque(q("1e40")), Value::opaque(q("1e40"))]).unwrap();
        assert_eq!(
            sum.as_opaque::<Quantity>()
                .unwrap()
                .to_cel_string()
                .unwrap(),
            "20e39"
        );
        let diff = sub_quantity(&[Value::opaque(q("1e40")), Value::opaque(q("1e40"))]).unwrap();
        assert_eq!(diff.as_opaque::<Quantity>().unwrap().nanos, 0);
        assert!(add_quantity(&[Value::opaque(q("1e1000")), Value::Int(1)]).is_err());
        // Beyond 38 significant digits: refused, not rounded.
        assert!(parse("1234567890123456789012345678901234567890").is_err());
        // A binary suffix still caps.
        assert_eq!(
            n("100000000000000000000000000000000000000000Ki"),
            i128::from(i64::MAX) * NANOS
        );
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
