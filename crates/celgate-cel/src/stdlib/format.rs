//! `string.format(list)`: the legacy formatter of cel-go's ext.Strings version 2, which
//! Kubernetes enables from 1.29, with cel-go's verbs and error texts.

use crate::ctx::Ctx;
use crate::error::EvalError;
use crate::json::with_stack;
use crate::overload::{list_arg, since, str_arg, Builder, Cost, R};
use crate::time::format_duration;
use crate::value::Value;

use super::build::Out;
use super::conversions::format_double;

/// `string.format(list)`: the legacy formatter that Kubernetes' ext.Strings version 2 uses.
/// cel-go charges a traversal of the format string, but `%s` of a long list, `%x` of a long
/// string or `%.999999f` writes far more: the output is counted against the memory ceiling
/// as it grows.
pub fn format<'a>(cx: &mut Ctx<'_>, a: &[Value<'a>]) -> R<'a> {
    let fmt = str_arg(&a[0])?;
    let args = list_arg(&a[1])?;
    let mut out = Out::new(cx);
    let mut it = fmt.chars().peekable();
    let mut next_arg = 0usize;
    while let Some(c) = it.next() {
        if c != '%' {
            out.push(c)?;
            continue;
        }
        let mut precision: Option<usize> = None;
        if it.peek() == Some(&'.') {
            it.next();
            let mut digits = String::new();
            while let Some(d) = it.peek().filter(|d| d.is_ascii_digit()) {
                digits.push(*d);
                it.next();
            }
            precision = Some(digits.parse().unwrap_or(0));
        }
        let Some(verb) = it.next() else {
            return Err(EvalError::new("unexpected end of string"));
        };
        if verb == '%' {
            out.push('%')?;
            continue;
        }
        let arg = args
            .get(next_arg)
            .ok_or_else(|| EvalError::new(format!("index {next_arg} out of range")))?;
        next_arg += 1;
        match (verb, &arg) {
            ('s', _) => format_string_clause(&mut out, &arg, true)?,
            ('x' | 'X', Value::String(_) | Value::Bytes(_)) => {
                let bytes = match &arg {
                    Value::String(s) => s.as_str().as_bytes(),
                    Value::Bytes(b) => b,
                    _ => &[],
                };
                let digits: &[u8; 16] = if verb == 'X' {
                    b"0123456789ABCDEF"
                } else {
                    b"0123456789abcdef"
                };
                for chunk in bytes.chunks(512) {
                    let hex: String = chunk
                        .iter()
                        .flat_map(|b| [digits[usize::from(b >> 4)], digits[usize::from(b & 15)]])
                        .map(char::from)
                        .collect();
                    out.push_str(&hex)?;
                }
            }
            _ => {
                if matches!(verb, 'f' | 'e') {
                    // The digits the precision asks for, before they are written.
                    out.cx.alloc(precision.unwrap_or(6))?;
                }
                out.push_str(&format_clause(verb, precision, &arg)?)?;
            }
        }
    }
    Ok(out.value())
}

fn format_clause(verb: char, precision: Option<usize>, v: &Value<'_>) -> Result<String, EvalError> {
    let err = |what: &str| EvalError::new(format!("error during formatting: {what}"));
    match verb {
        'd' => match v {
            Value::Int(i) => Ok(i.to_string()),
            Value::Uint(u) => Ok(u.to_string()),
            other => Err(err(&format!(
                "decimal clause can only be used on integers, was given {}",
                other.type_name()
            ))),
        },
        'f' | 'e' => {
            // Doubles only, and the three strings that name the non-finite ones.
            let d = match v {
                Value::Double(d) => *d,
                Value::String(s) if matches!(s.as_str(), "NaN" | "Infinity" | "-Infinity") => {
                    match s.as_str() {
                        "NaN" => f64::NAN,
                        "Infinity" => f64::INFINITY,
                        _ => f64::NEG_INFINITY,
                    }
                }
                other => {
                    let clause = if verb == 'f' {
                        "fixed-point"
                    } else {
                        "scientific"
                    };
                    return Err(err(&format!(
                        "{clause} clause can only be used on doubles, was given {}",
                        other.type_name()
                    )));
                }
            };
            let p = precision.unwrap_or(6);
            if verb == 'f' {
                Ok(locale_fixed(d, p))
            } else {
                // cel-go v0.22 builds `%<precision>e` for golang.org/x/text's printer: the
                // precision is a width, and the digits stay the default six.
                let text = locale_scientific(d);
                let pad = p.saturating_sub(text.chars().count());
                Ok(" ".repeat(pad) + &text)
            }
        }
        'b' => match v {
            Value::Int(i) => Ok(if *i < 0 {
                format!("-{:b}", i.unsigned_abs())
            } else {
                format!("{i:b}")
            }),
            Value::Uint(u) => Ok(format!("{u:b}")),
            Value::Bool(b) => Ok(if *b { "1".into() } else { "0".into() }),
            other => Err(err(&format!(
                "only integers and bools can be formatted as binary, was given {}",
                other.type_name()
            ))),
        },
        'x' | 'X' => {
            let s = match v {
                Value::Int(i) => {
                    if *i < 0 {
                        format!("-{:x}", i.unsigned_abs())
                    } else {
                        format!("{i:x}")
                    }
                }
                Value::Uint(u) => format!("{u:x}"),
                Value::String(s) => s.as_str().bytes().map(|b| format!("{b:02x}")).collect(),
                Value::Bytes(b) => b.iter().map(|b| format!("{b:02x}")).collect(),
                other => {
                    return Err(err(&format!(
                        "only integers, byte buffers, and strings can be formatted as hex, was given {}",
                        other.type_name()
                    )))
                }
            };
            Ok(if verb == 'X' { s.to_uppercase() } else { s })
        }
        'o' => match v {
            Value::Int(i) => Ok(if *i < 0 {
                format!("-{:o}", i.unsigned_abs())
            } else {
                format!("{i:o}")
            }),
            Value::Uint(u) => Ok(format!("{u:o}")),
            other => Err(err(&format!(
                "octal clause can only be used on integers, was given {}",
                other.type_name()
            ))),
        },
        // Found when cel-go parses the clause, before anything is formatted.
        other => Err(EvalError::new(format!(
            "could not parse formatting clause: unrecognized formatting clause \"{other}\""
        ))),
    }
}

/// The most digits Rust's formatter is asked for (its precision is a `u16`; more panics). A
/// double's exact decimal expansion has at most 1,074 fractional digits and 767 significant
/// ones, so digits past this are zeros, appended.
const MAX_PRECISION: usize = 1100;

/// `d` with `p` fractional digits, exact (as Go's `FormatFloat(d, 'f', p, 64)`).
fn fixed(d: f64, p: usize) -> String {
    let shown = p.min(MAX_PRECISION);
    let mut s = format!("{d:.shown$}");
    s.extend(std::iter::repeat_n('0', p - shown));
    s
}

/// The non-finite values as golang.org/x/text's printer writes them.
fn locale_special(d: f64) -> Option<String> {
    if d.is_nan() {
        return Some("NaN".into());
    }
    if d.is_infinite() {
        return Some(if d > 0.0 { "∞" } else { "-∞" }.into());
    }
    None
}

/// `%.<p>f` as golang.org/x/text's printer writes it for `en-US` (cel-go's legacy
/// formatter): thousands grouped with commas, no sign on zero, `∞` for infinity.
fn locale_fixed(d: f64, p: usize) -> String {
    if let Some(s) = locale_special(d) {
        return s;
    }
    let d = if d == 0.0 { 0.0 } else { d };
    let s = fixed(d.abs(), p);
    let (int, frac) = s
        .split_once('.')
        .map_or((s.as_str(), None), |(i, f)| (i, Some(f)));
    let mut out = String::with_capacity(s.len() + s.len() / 3 + 1);
    if d < 0.0 {
        out.push('-');
    }
    for (i, c) in int.chars().enumerate() {
        if i > 0 && (int.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    if let Some(f) = frac {
        out.push('.');
        out.push_str(f);
    }
    out
}

/// `%e` as golang.org/x/text's printer writes it for `en-US`: six decimals, no sign on zero,
/// `1.234568 × 10⁰⁴` with narrow no-break spaces around the `×`.
fn locale_scientific(d: f64) -> String {
    if let Some(s) = locale_special(d) {
        return s;
    }
    let d = if d == 0.0 { 0.0 } else { d };
    let s = format!("{d:.6e}");
    let (mantissa, exp) = s.split_once('e').unwrap_or((&s, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let sup = |c: char| match c {
        '0' => '⁰',
        '1' => '¹',
        '2' => '²',
        '3' => '³',
        '4' => '⁴',
        '5' => '⁵',
        '6' => '⁶',
        '7' => '⁷',
        '8' => '⁸',
        _ => '⁹',
    };
    let digits: String = format!("{:02}", exp.abs()).chars().map(sup).collect();
    let sign = if exp < 0 { "⁻" } else { "" };
    format!("{mantissa}\u{202f}×\u{202f}10{sign}{digits}")
}

/// `%s`: strings and bytes plain at the top level; inside lists and maps they are quoted
/// (bytes as `b"..."`) and doubles carry six decimals. Bytes must be UTF-8 (cel-go converts
/// them with `string()`).
fn format_string_clause(out: &mut Out<'_, '_>, v: &Value<'_>, top: bool) -> Result<(), EvalError> {
    let text = match v {
        Value::String(s) if top => return out.push_str(s.as_str()),
        Value::String(s) => format!("{:?}", s.as_str()),
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Int(i) => i.to_string(),
        Value::Uint(u) => u.to_string(),
        Value::Double(d) if top => format_double(*d),
        Value::Double(d) => format!("{d:.6}"),
        // As `string(b)`, which refuses invalid UTF-8; inside a list quoted as a bytes literal.
        Value::Bytes(b) => match std::str::from_utf8(b) {
            Ok(text) if top => return out.push_str(text),
            Ok(text) => format!("b{text:?}"),
            Err(_) => {
                return Err(EvalError::new(
                    "error during formatting: could not convert argument \"invalid UTF-8 in bytes, cannot convert to string\" to string",
                ))
            }
        },
        Value::Timestamp(t) if top => t.to_rfc3339(),
        Value::Timestamp(t) => format!("timestamp(\"{}\")", t.to_rfc3339()),
        Value::Duration(d) if top => format_duration(*d),
        Value::Duration(d) => format!("duration(\"{}\")", format_duration(*d)),
        // A document's lists and maps nest up to `json::MAX_DEPTH` levels: each level of
        // them grows the stack on the heap when it runs low.
        Value::List(l) => {
            return with_stack(|| {
                out.push('[')?;
                for (i, e) in l.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ")?;
                    }
                    format_string_clause(out, &e, false)?;
                }
                out.push(']')
            });
        }
        Value::Map(m) => return with_stack(|| {
            // Entries are written sorted by their text: each is built (and counted) apart, on
            // the clock of the whole output (a fresh count per entry never reached a look at
            // the clock when maps of a few entries nest).
            let mut parts = Vec::new();
            for (k, val) in m.entries() {
                let mut part = out.part();
                format_string_clause(&mut part, &k, false)?;
                part.push(':')?;
                format_string_clause(&mut part, &val, false)?;
                let (text, ticker) = part.finish();
                out.ticker = ticker;
                parts.push(text);
            }
            parts.sort();
            out.push('{')?;
            for (i, p) in parts.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ")?;
                }
                out.push_counted(p)?;
            }
            out.push('}')
        }),
        Value::Type(t) => t.to_string(),
        other => {
            return Err(EvalError::new(format!(
                "error during formatting: string clause can only be used on strings, bools, bytes, ints, doubles, maps, lists, types, durations, and timestamps, was given {}",
                other.type_name()
            )))
        }
    };
    out.push_str(&text)
}

pub(super) fn register(b: &mut Builder) {
    b.at_cx(
        since::STRINGS_V2,
        "format",
        &["string.(list(dyn)) string"],
        format,
        Cost::Traverse(0, 0.1),
    );
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{call, s, text};
    use super::*;

    #[test]
    fn formatting() {
        let args = Value::list(vec![Value::Int(1), s("a"), Value::Double(2.5)]);
        assert_eq!(
            text(call(format, &[s("%s"), Value::list(vec![args])])),
            "[1, \"a\", 2.500000]"
        );
        assert_eq!(
            text(call(
                format,
                &[s("%e"), Value::list(vec![Value::Double(12345.678)])]
            )),
            "1.234568\u{202f}×\u{202f}10⁰⁴"
        );
        // cel-go v0.22 takes `%.3e`'s precision for a width: six decimals, padded to it.
        assert_eq!(
            text(call(
                format,
                &[s("%.20e"), Value::list(vec![Value::Double(1.5)])]
            )),
            "     1.500000\u{202f}×\u{202f}10⁰⁰"
        );
        assert_eq!(
            text(call(
                format,
                &[
                    s("%e|%.0e"),
                    Value::list(vec![Value::Double(f64::NAN), Value::Double(f64::INFINITY)])
                ]
            )),
            "   NaN|∞"
        );
        assert_eq!(
            text(call(
                format,
                &[
                    s("%.2f|%f"),
                    Value::list(vec![Value::Double(-1234567.891), Value::Double(-0.0)])
                ]
            )),
            "-1,234,567.89|0.000000"
        );
        // Bytes: plain at the top level, a bytes literal in a list, UTF-8 only (Kubernetes 1.32).
        let bytes = |b: &[u8]| Value::Bytes(b.into());
        assert_eq!(
            text(call(
                format,
                &[
                    s("%s|%s"),
                    Value::list(vec![bytes(b"x"), Value::list(vec![bytes(b"x")])])
                ]
            )),
            "x|[b\"x\"]"
        );
        for arg in [bytes(b"\xff\x00"), Value::list(vec![bytes(b"\xff")])] {
            assert_eq!(
                call(format, &[s("%s"), Value::list(vec![arg])]).unwrap_err().message(),
                "error during formatting: could not convert argument \"invalid UTF-8 in bytes, cannot convert to string\" to string"
            );
        }
        assert!(call(format, &[s("%f"), Value::list(vec![Value::Int(1)])]).is_err());
        assert!(call(format, &[s("%d"), Value::list(vec![Value::Double(1.5)])]).is_err());
        assert_eq!(
            text(call(
                format,
                &[s("%.2f%%"), Value::list(vec![Value::Double(1.005)])]
            )),
            "1.00%"
        );
        assert_eq!(
            text(call(
                format,
                &[s("%x|%X"), Value::list(vec![s("Hi"), s("Hi")])]
            )),
            "4869|4869"
        );
        // Past what Rust's formatter takes (it panics over 65,535): exact, then zeros.
        let long = text(call(
            format,
            &[s("%.70000f"), Value::list(vec![Value::Double(0.1)])],
        ));
        assert_eq!(long.len(), 70002);
        assert!(long.starts_with("0.1000000000000000055511151231257827"));
        assert!(long.ends_with("0000"));
        // A width that large pads with spaces, counted against the memory ceiling.
        let long = text(call(
            format,
            &[s("%.70000e"), Value::list(vec![Value::Double(1.5)])],
        ));
        assert_eq!(long.chars().count(), 70000);
        assert!(long.starts_with("    ") && long.ends_with("1.500000\u{202f}×\u{202f}10⁰⁰"));
    }
}
