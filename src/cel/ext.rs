//! The extension libraries Kubernetes enables: cel-go's ext.Strings (version 2), ext.Lists
//! (version 3), ext.Sets and optional types, plus Kubernetes' lists and regex libraries.

use std::cmp::Ordering;
use std::sync::Arc;

use super::error::EvalError;
use super::eval::{Ctx, Ticker, STEPS_PER_CHECK};
use super::functions::{
    equal, format_double, format_duration, int_arg, list_arg, list_contains, list_contains_ticking,
    search_watch, str_arg, LONG_TEXT, R,
};
use super::regex::Regex;
use super::value::{char_count, List, Str, Value};

fn index_error(i: i64) -> EvalError {
    EvalError::new(format!("index out of range: {i}"))
}

/// The byte offset of code point `n` of `s` (`s.len()` for `n` = the count); `None` past
/// the end. Constant time on ASCII.
fn byte_of_char(s: &str, n: usize) -> Option<usize> {
    if s.is_ascii() {
        return (n <= s.len()).then_some(n);
    }
    s.char_indices()
        .map(|(b, _)| b)
        .chain(std::iter::once(s.len()))
        .nth(n)
}

/// `s[range]` as a value: borrowed when `orig` (whose text `s` is) is borrowed for `'a`,
/// else copied, the copy counted against the memory ceiling.
fn piece<'a>(cx: &mut Ctx<'_>, orig: &Value<'a>, range: std::ops::Range<usize>) -> R<'a> {
    if let Some(b) = orig.borrowed_str() {
        return Ok(Value::String(Str::Borrowed(b.get(range).unwrap_or(""))));
    }
    let s = str_arg(orig)?.get(range).unwrap_or("");
    cx.alloc(s.len())?;
    Ok(Value::string(s))
}

/// A string about to be built, counted against the memory ceiling as it grows and watching
/// the deadline.
struct Out<'c, 'x> {
    s: String,
    cx: &'c mut Ctx<'x>,
    ticker: Ticker,
}

impl<'c, 'x> Out<'c, 'x> {
    fn new(cx: &'c mut Ctx<'x>) -> Self {
        let ticker = cx.ticker(STEPS_PER_CHECK);
        Out {
            s: String::new(),
            cx,
            ticker,
        }
    }

    fn push_str(&mut self, t: &str) -> Result<(), EvalError> {
        self.ticker.bytes(t.len())?;
        self.cx.alloc(t.len())?;
        self.s.push_str(t);
        Ok(())
    }

    fn push(&mut self, c: char) -> Result<(), EvalError> {
        self.push_str(c.encode_utf8(&mut [0; 4]))
    }

    /// Appends text that was counted when it was built.
    fn push_counted(&mut self, t: &str) -> Result<(), EvalError> {
        self.ticker.bytes(t.len())?;
        self.s.push_str(t);
        Ok(())
    }

    fn value<'a>(self) -> Value<'a> {
        Value::string(self.s)
    }
}

// ---------------------------------------------------------------------------------------
// ext.Strings

/// `charAt`: cel-go charges it 1, so it must not walk or copy the string when it can help
/// it: direct on ASCII, one walk otherwise.
pub fn char_at<'a>(cx: &mut Ctx<'_>, a: &[Value<'a>]) -> R<'a> {
    let s = str_arg(&a[0])?;
    let i = int_arg(&a[1])?;
    let len = a[0].size().unwrap_or(0);
    let Some(at) = usize::try_from(i).ok().filter(|&i| i <= len) else {
        return Err(index_error(i));
    };
    let start = byte_of_char(s, at).unwrap_or(s.len());
    let end = s[start..]
        .chars()
        .next()
        .map_or(start, |c| start + c.len_utf8());
    piece(cx, &a[0], start..end)
}

/// `indexOf` of ext.Strings on a string receiver, of the Kubernetes lists library on a list.
/// Offsets and results are in code points; the search is the standard library's (linear).
pub fn index_of<'a>(cx: &mut Ctx<'_>, a: &[Value<'a>]) -> R<'a> {
    if let Value::List(l) = &a[0] {
        let mut ticker = cx.ticker(STEPS_PER_CHECK);
        for (i, e) in l.iter().enumerate() {
            ticker.tick()?;
            if e.equals_watching(&a[1], &mut ticker)? {
                return Ok(Value::Int(i as i64));
            }
        }
        return Ok(Value::Int(-1));
    }
    let hay = str_arg(&a[0])?;
    let needle = str_arg(&a[1])?;
    let off = match a.get(2) {
        Some(v) => int_arg(v)?,
        None => 0,
    };
    if off < 0 {
        return Err(index_error(off));
    }
    if needle.is_empty() {
        return Ok(Value::Int(off));
    }
    search_watch(cx, hay)?;
    let Some(start) = usize::try_from(off)
        .ok()
        .and_then(|o| byte_of_char(hay, o))
        .filter(|&b| b < hay.len())
    else {
        return Ok(Value::Int(-1));
    };
    Ok(Value::Int(match hay[start..].find(needle) {
        Some(pos) => off + char_count(&hay[start..start + pos]) as i64,
        None => -1,
    }))
}

pub fn last_index_of<'a>(cx: &mut Ctx<'_>, a: &[Value<'a>]) -> R<'a> {
    if let Value::List(l) = &a[0] {
        let mut ticker = cx.ticker(STEPS_PER_CHECK);
        let mut last = -1;
        for (i, e) in l.iter().enumerate() {
            ticker.tick()?;
            if e.equals_watching(&a[1], &mut ticker)? {
                last = i as i64;
            }
        }
        return Ok(Value::Int(last));
    }
    let hay = str_arg(&a[0])?;
    let needle = str_arg(&a[1])?;
    let hay_len = a[0].size().unwrap_or(0);
    let off = match a.get(2) {
        Some(v) => int_arg(v)?,
        None => hay_len as i64,
    };
    if off < 0 {
        return Err(index_error(off));
    }
    if needle.is_empty() {
        return Ok(Value::Int(off));
    }
    if off as usize >= hay_len && a.len() == 3 {
        return Ok(Value::Int(-1));
    }
    let needle_len = char_count(needle);
    if needle_len > hay_len {
        return Ok(Value::Int(-1));
    }
    search_watch(cx, hay)?;
    // The last code point a match may start at, and the text such a match lies within.
    let last_start = (off as usize).min(hay_len - needle_len);
    // (Down to a code point boundary: a match ends on one.)
    let mut end = byte_of_char(hay, last_start)
        .unwrap_or(hay.len())
        .saturating_add(needle.len())
        .min(hay.len());
    while !hay.is_char_boundary(end) {
        end -= 1;
    }
    Ok(Value::Int(match hay[..end].rfind(needle) {
        Some(pos) => char_count(&hay[..pos]) as i64,
        None => -1,
    }))
}

pub fn lower_ascii<'a>(cx: &mut Ctx<'_>, a: &[Value<'a>]) -> R<'a> {
    let s = str_arg(&a[0])?;
    cx.alloc(s.len())?;
    Ok(Value::string(s.to_ascii_lowercase()))
}

pub fn upper_ascii<'a>(cx: &mut Ctx<'_>, a: &[Value<'a>]) -> R<'a> {
    let s = str_arg(&a[0])?;
    cx.alloc(s.len())?;
    Ok(Value::string(s.to_ascii_uppercase()))
}

/// `replace`: cel-go charges a traversal of the receiver, but the result can be far longer
/// (`s.replace('', big)` puts `big` between every character), so its length is worked out
/// and counted against the memory ceiling before anything is built.
pub fn replace<'a>(cx: &mut Ctx<'_>, a: &[Value<'a>]) -> R<'a> {
    let s = str_arg(&a[0])?;
    let old = str_arg(&a[1])?;
    let new = str_arg(&a[2])?;
    let n = match a.get(3) {
        Some(v) => int_arg(v)?,
        None => -1,
    };
    let n = usize::try_from(n).unwrap_or(usize::MAX);
    search_watch(cx, s)?;
    let count = if old.is_empty() {
        a[0].size().unwrap_or(0).saturating_add(1)
    } else {
        s.matches(old).take(n).count()
    }
    .min(n);
    let len =
        (s.len() - count.saturating_mul(old.len())).saturating_add(count.saturating_mul(new.len()));
    cx.alloc(len)?;
    if len >= LONG_TEXT {
        cx.check_deadline()?;
    }
    Ok(Value::string(go_replace(s, old, new, n)))
}

/// Go's `strings.Replace`: an empty `old` matches before every character and at the end.
fn go_replace(s: &str, old: &str, new: &str, n: usize) -> String {
    if n == 0 {
        return s.to_string();
    }
    if !old.is_empty() {
        return s.replacen(old, new, n);
    }
    let mut out = String::with_capacity(s.len() * (new.len() + 1));
    let mut done = 0;
    for c in s.chars() {
        if done < n {
            out.push_str(new);
            done += 1;
        }
        out.push(c);
    }
    if done < n {
        out.push_str(new);
    }
    out
}

/// `split`: each piece is borrowed when the receiver is (else copied), and each counted
/// against the memory ceiling; splitting on `''` gives a piece per character.
pub fn split<'a>(cx: &mut Ctx<'_>, a: &[Value<'a>]) -> R<'a> {
    let s = str_arg(&a[0])?;
    let sep = str_arg(&a[1])?;
    let n = match a.get(2) {
        Some(v) => int_arg(v)?,
        None => -1,
    };
    if n == 0 {
        return Ok(Value::list(Vec::new()));
    }
    let limit = usize::try_from(n).unwrap_or(usize::MAX);
    let mut ticker = cx.ticker(STEPS_PER_CHECK);
    let mut out: Vec<Value<'a>> = Vec::new();
    let mut push = |cx: &mut Ctx<'_>, out: &mut Vec<Value<'a>>, range| {
        ticker.tick()?;
        cx.alloc_values(1)?;
        out.push(piece(cx, &a[0], range)?);
        Ok::<(), EvalError>(())
    };
    if limit == 1 {
        push(cx, &mut out, 0..s.len())?;
        return Ok(Value::list(out));
    }
    if sep.is_empty() {
        for (i, c) in s.char_indices() {
            if out.len() + 1 == limit {
                push(cx, &mut out, i..s.len())?;
                return Ok(Value::list(out));
            }
            push(cx, &mut out, i..i + c.len_utf8())?;
        }
        return Ok(Value::list(out));
    }
    let mut start = 0;
    for (at, _) in s.match_indices(sep) {
        if out.len() + 1 == limit {
            break;
        }
        push(cx, &mut out, start..at)?;
        start = at + sep.len();
    }
    push(cx, &mut out, start..s.len())?;
    Ok(Value::list(out))
}

pub fn substring<'a>(cx: &mut Ctx<'_>, a: &[Value<'a>]) -> R<'a> {
    let s = str_arg(&a[0])?;
    let len = a[0].size().unwrap_or(0) as i64;
    let start = int_arg(&a[1])?;
    let end = match a.get(2) {
        Some(v) => int_arg(v)?,
        None => len,
    };
    if start < 0 || start > len {
        return Err(index_error(start));
    }
    if end < 0 || end > len {
        return Err(index_error(end));
    }
    if start > end {
        return Err(EvalError::new(format!(
            "invalid substring range. start: {start}, end: {end}"
        )));
    }
    let from = byte_of_char(s, start as usize).unwrap_or(s.len());
    let to = from + byte_of_char(&s[from..], (end - start) as usize).unwrap_or(s.len() - from);
    piece(cx, &a[0], from..to)
}

pub fn trim<'a>(cx: &mut Ctx<'_>, a: &[Value<'a>]) -> R<'a> {
    let s = str_arg(&a[0])?;
    let t = s.trim();
    let from = t.as_ptr() as usize - s.as_ptr() as usize;
    piece(cx, &a[0], from..from + t.len())
}

pub fn join<'a>(cx: &mut Ctx<'_>, a: &[Value<'a>]) -> R<'a> {
    let l = list_arg(&a[0])?;
    let sep = match a.get(1) {
        Some(v) => str_arg(v)?,
        None => "",
    };
    let mut out = Out::new(cx);
    for (i, e) in l.iter().enumerate() {
        if i > 0 {
            out.push_str(sep)?;
        }
        out.push_str(str_arg(&e)?)?;
    }
    Ok(out.value())
}

pub fn quote<'a>(cx: &mut Ctx<'_>, a: &[Value<'a>]) -> R<'a> {
    let s = str_arg(&a[0])?;
    let escaped = |c: char| matches!(c, '\x07'..='\x0d' | '\\' | '"');
    let len = s.len() + 2 + s.chars().filter(|c| escaped(*c)).count();
    cx.alloc(len)?;
    let mut out = String::with_capacity(len);
    out.push('"');
    for c in s.chars() {
        match c {
            '\x07' => out.push_str("\\a"),
            '\x08' => out.push_str("\\b"),
            '\x0c' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\x0b' => out.push_str("\\v"),
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            c => out.push(c),
        }
    }
    out.push('"');
    Ok(Value::string(out))
}

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
            return Err(EvalError::new("unexpected end of format string"));
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
            Value::Double(d) if d.is_nan() => Ok("NaN".into()),
            Value::Double(d) if d.is_infinite() => Ok(if *d > 0.0 {
                "Infinity".into()
            } else {
                "-Infinity".into()
            }),
            other => Err(err(&format!(
                "decimal clause can only be used on integers, was given {}",
                other.type_name()
            ))),
        },
        'f' | 'e' => {
            let d = match v {
                Value::Double(d) => *d,
                Value::Int(i) => *i as f64,
                Value::Uint(u) => *u as f64,
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
            if d.is_nan() {
                return Ok("NaN".into());
            }
            if d.is_infinite() {
                return Ok(if d > 0.0 {
                    "Infinity".into()
                } else {
                    "-Infinity".into()
                });
            }
            let p = precision.unwrap_or(6);
            if verb == 'f' {
                Ok(fixed(d, p))
            } else {
                Ok(scientific(d, p))
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
        other => Err(err(&format!("unrecognized formatting clause \"{other}\""))),
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

/// The legacy locale rendering of `%e`: `1.234568 × 10⁰⁴`.
fn scientific(d: f64, p: usize) -> String {
    let shown = p.min(MAX_PRECISION);
    let mut s = format!("{d:.shown$e}");
    if let Some(e) = s.find('e') {
        s.insert_str(e, &"0".repeat(p - shown));
    }
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
    format!("{mantissa} × 10{sign}{digits}")
}

/// `%s`: strings plain at the top level; inside lists and maps strings are quoted and
/// doubles carry six decimals.
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
        Value::Bytes(b) => String::from_utf8_lossy(b).into_owned(),
        Value::Timestamp(t) if top => t.to_rfc3339(),
        Value::Timestamp(t) => format!("timestamp(\"{}\")", t.to_rfc3339()),
        Value::Duration(d) if top => format_duration(*d),
        Value::Duration(d) => format!("duration(\"{}\")", format_duration(*d)),
        // A document's lists and maps nest up to `json::MAX_DEPTH` levels: each level of
        // them grows the stack on the heap when it runs low.
        Value::List(l) => {
            return super::json::with_stack(|| {
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
        Value::Map(m) => return super::json::with_stack(|| {
            // Entries are written sorted by their text: each is built (and counted) apart.
            let mut parts = Vec::new();
            for (k, val) in m.entries() {
                let mut part = Out::new(&mut *out.cx);
                format_string_clause(&mut part, &k, false)?;
                part.push(':')?;
                format_string_clause(&mut part, &val, false)?;
                parts.push(part.s);
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

// ---------------------------------------------------------------------------------------
// Kubernetes lists library

fn cmp_strict(x: &Value<'_>, y: &Value<'_>) -> Result<Ordering, EvalError> {
    if std::mem::discriminant(x) != std::mem::discriminant(y) {
        return Err(EvalError::no_such_overload());
    }
    Ok(x.compare(y)?.unwrap_or(Ordering::Equal))
}

// `isSorted`, `sum`, `min`, `max` are charged a traversal of the list (at least 1 per
// element), which bounds their walk; they read the list in place.

pub fn is_sorted<'a>(a: &[Value<'a>]) -> R<'a> {
    let mut it = list_arg(&a[0])?.iter();
    let Some(mut prev) = it.next() else {
        return Ok(Value::Bool(true));
    };
    for e in it {
        if cmp_strict(&prev, &e)? == Ordering::Greater {
            return Ok(Value::Bool(false));
        }
        prev = e;
    }
    Ok(Value::Bool(true))
}

pub fn sum<'a>(cx: &mut Ctx<'_>, a: &[Value<'a>]) -> R<'a> {
    let l = list_arg(&a[0])?;
    let mut acc = match l.get(0) {
        Some(Value::Uint(_)) => Value::Uint(0),
        Some(Value::Double(_)) => Value::Double(0.0),
        Some(Value::Duration(_)) => Value::Duration(0),
        _ => Value::Int(0),
    };
    for e in l.iter() {
        acc = super::functions::add(cx, &[acc, e])?;
    }
    Ok(acc)
}

fn extreme<'a>(a: &[Value<'a>], want: Ordering, name: &str) -> R<'a> {
    let mut it = list_arg(&a[0])?.iter();
    let mut best = it
        .next()
        .ok_or_else(|| EvalError::new(format!("{name} called on empty list")))?;
    for e in it {
        if cmp_strict(&e, &best)? == want {
            best = e;
        }
    }
    Ok(best)
}

pub fn min<'a>(a: &[Value<'a>]) -> R<'a> {
    extreme(a, Ordering::Less, "min")
}

pub fn max<'a>(a: &[Value<'a>]) -> R<'a> {
    extreme(a, Ordering::Greater, "max")
}

pub fn includes<'a>(cx: &mut Ctx<'_>, a: &[Value<'a>]) -> R<'a> {
    match &a[0] {
        Value::List(l) => Ok(Value::Bool(list_contains(cx, l, &a[1])?)),
        other => Ok(Value::Bool(equal(cx, other, &a[1])?)),
    }
}

// ---------------------------------------------------------------------------------------
// ext.Lists version 3

/// A list built element by element, each slot counted against the memory ceiling and the
/// deadline watched.
struct Builder<'c, 'x, 'a> {
    out: Vec<Value<'a>>,
    cx: &'c mut Ctx<'x>,
    ticker: Ticker,
}

impl<'c, 'x, 'a> Builder<'c, 'x, 'a> {
    fn new(cx: &'c mut Ctx<'x>) -> Self {
        let ticker = cx.ticker(STEPS_PER_CHECK);
        Builder {
            out: Vec::new(),
            cx,
            ticker,
        }
    }

    fn push(&mut self, v: Value<'a>) -> Result<(), EvalError> {
        self.ticker.tick()?;
        self.cx.alloc_values(1)?;
        self.out.push(v);
        Ok(())
    }

    fn value(self) -> Value<'a> {
        Value::list(self.out)
    }
}

pub fn slice<'a>(cx: &mut Ctx<'_>, a: &[Value<'a>]) -> R<'a> {
    let v = list_arg(&a[0])?;
    let (start, end) = (int_arg(&a[1])?, int_arg(&a[2])?);
    if start < 0 || end < 0 {
        return Err(EvalError::new(format!(
            "cannot slice({start}, {end}), negative indexes not supported"
        )));
    }
    if start > end {
        return Err(EvalError::new(format!(
            "cannot slice({start}, {end}), start index must be less than or equal to end index"
        )));
    }
    if end as usize > v.len() {
        return Err(EvalError::new(format!(
            "cannot slice({start}, {end}), list is length {}",
            v.len()
        )));
    }
    let mut out = Builder::new(cx);
    for e in v.iter().skip(start as usize).take((end - start) as usize) {
        out.push(e)?;
    }
    Ok(out.value())
}

/// `flatten`: charged by the outer list's size, but its result is the size of all the
/// inner lists together, so every element is counted as it is copied.
pub fn flatten<'a>(cx: &mut Ctx<'_>, a: &[Value<'a>]) -> R<'a> {
    let depth = match a.get(1) {
        Some(v) => int_arg(v)?,
        None => 1,
    };
    if depth < 0 {
        return Err(EvalError::new("level must be non-negative"));
    }
    fn go<'a>(v: &Value<'a>, depth: i64, out: &mut Builder<'_, '_, 'a>) -> Result<(), EvalError> {
        match v {
            Value::List(l) if depth >= 0 => {
                for e in l.iter() {
                    if depth > 0 {
                        go(&e, depth - 1, out)?;
                    } else {
                        out.push(e)?;
                    }
                }
                Ok(())
            }
            other => out.push(other.clone()),
        }
    }
    let mut out = Builder::new(cx);
    for e in list_arg(&a[0])?.iter() {
        match &e {
            Value::List(_) if depth > 0 => go(&e, depth - 1, &mut out)?,
            _ => out.push(e)?,
        }
    }
    Ok(out.value())
}

fn sortable_kind(v: &Value<'_>) -> bool {
    matches!(
        v,
        Value::Int(_)
            | Value::Uint(_)
            | Value::Double(_)
            | Value::Bool(_)
            | Value::String(_)
            | Value::Bytes(_)
            | Value::Timestamp(_)
            | Value::Duration(_)
    )
}

/// Sorts `items` by `keys` (stable), refusing mixed or incomparable key kinds. Charged
/// 2·n² + 11, which bounds n to about 700.
pub fn sort_by_keys<'a>(items: Vec<Value<'a>>, keys: Vec<Value<'a>>) -> R<'a> {
    if let Some(first) = keys.first() {
        if !sortable_kind(first)
            || keys
                .iter()
                .any(|k| std::mem::discriminant(k) != std::mem::discriminant(first))
        {
            return Err(EvalError::new("list elements must have the same type"));
        }
    }
    let mut pairs: Vec<(Value<'a>, Value<'a>)> = keys.into_iter().zip(items).collect();
    pairs.sort_by(|x, y| x.0.compare(&y.0).ok().flatten().unwrap_or(Ordering::Equal));
    Ok(Value::list(pairs.into_iter().map(|p| p.1).collect()))
}

pub fn sort<'a>(cx: &mut Ctx<'_>, a: &[Value<'a>]) -> R<'a> {
    let l = list_arg(&a[0])?;
    cx.alloc_values(l.len().saturating_mul(3))?;
    let v = l.to_vec();
    sort_by_keys(v.clone(), v)
}

/// `distinct`: charged 2·n² + 11, but comparing two elements walks them whatever their
/// size, so the comparisons watch the deadline.
pub fn distinct<'a>(cx: &mut Ctx<'_>, a: &[Value<'a>]) -> R<'a> {
    let mut ticker = cx.ticker(STEPS_PER_CHECK);
    let mut out: Vec<Value<'a>> = Vec::new();
    for e in list_arg(&a[0])?.iter() {
        let mut seen = false;
        for o in &out {
            ticker.tick()?;
            if o.equals_watching(&e, &mut ticker)? {
                seen = true;
                break;
            }
        }
        if !seen {
            cx.alloc_values(1)?;
            out.push(e);
        }
    }
    Ok(Value::list(out))
}

pub fn reverse<'a>(cx: &mut Ctx<'_>, a: &[Value<'a>]) -> R<'a> {
    let l = list_arg(&a[0])?;
    cx.alloc_values(l.len())?;
    let mut v = l.to_vec();
    v.reverse();
    Ok(Value::list(v))
}

/// `lists.range(n)`: charged n + 11; its slots are counted before the list is built.
pub fn range<'a>(cx: &mut Ctx<'_>, a: &[Value<'a>]) -> R<'a> {
    let n = int_arg(&a[0])?.max(0);
    cx.alloc_values(usize::try_from(n).unwrap_or(usize::MAX))?;
    Ok(Value::list((0..n).map(Value::Int).collect()))
}

// ---------------------------------------------------------------------------------------
// ext.Sets: charged 1 + size(x) · size(y) comparisons, but a comparison walks lists and
// strings whatever their size, so each watches the deadline.

pub fn sets_contains<'a>(cx: &mut Ctx<'_>, a: &[Value<'a>]) -> R<'a> {
    let (x, y) = (list_arg(&a[0])?, list_arg(&a[1])?);
    let mut ticker = cx.ticker(STEPS_PER_CHECK);
    Ok(Value::Bool(within(y, x, &mut ticker)?))
}

/// Whether every element of `p` is in `q`.
fn within(p: &List<'_>, q: &List<'_>, ticker: &mut Ticker) -> Result<bool, EvalError> {
    for e in p.iter() {
        if !list_contains_ticking(q, &e, ticker)? {
            return Ok(false);
        }
    }
    Ok(true)
}

pub fn sets_equivalent<'a>(cx: &mut Ctx<'_>, a: &[Value<'a>]) -> R<'a> {
    let (x, y) = (list_arg(&a[0])?, list_arg(&a[1])?);
    let mut ticker = cx.ticker(STEPS_PER_CHECK);
    Ok(Value::Bool(
        within(x, y, &mut ticker)? && within(y, x, &mut ticker)?,
    ))
}

pub fn sets_intersects<'a>(cx: &mut Ctx<'_>, a: &[Value<'a>]) -> R<'a> {
    let (x, y) = (list_arg(&a[0])?, list_arg(&a[1])?);
    let mut ticker = cx.ticker(STEPS_PER_CHECK);
    for e in x.iter() {
        if list_contains_ticking(y, &e, &mut ticker)? {
            return Ok(Value::Bool(true));
        }
    }
    Ok(Value::Bool(false))
}

// ---------------------------------------------------------------------------------------
// Optional types

pub fn optional_of<'a>(a: &[Value<'a>]) -> R<'a> {
    Ok(Value::optional(Some(a[0].clone())))
}

pub fn optional_none<'a>(_: &[Value<'a>]) -> R<'a> {
    Ok(Value::Optional(None))
}

pub fn optional_of_non_zero<'a>(a: &[Value<'a>]) -> R<'a> {
    let v = &a[0];
    let zero = match v {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Int(i) => *i == 0,
        Value::Uint(u) => *u == 0,
        Value::Double(d) => *d == 0.0,
        Value::String(s) => s.as_str().is_empty(),
        Value::Bytes(b) => b.is_empty(),
        Value::List(l) => l.is_empty(),
        Value::Map(m) => m.is_empty(),
        Value::Duration(d) => *d == 0,
        Value::Timestamp(t) => t.as_nanos() == 0,
        _ => false,
    };
    Ok(Value::optional(if zero { None } else { Some(v.clone()) }))
}

fn opt_arg<'v, 'a>(v: &'v Value<'a>) -> Result<&'v Option<Arc<Value<'a>>>, EvalError> {
    match v {
        Value::Optional(o) => Ok(o),
        _ => Err(EvalError::no_such_overload()),
    }
}

pub fn has_value<'a>(a: &[Value<'a>]) -> R<'a> {
    Ok(Value::Bool(opt_arg(&a[0])?.is_some()))
}

pub fn value<'a>(a: &[Value<'a>]) -> R<'a> {
    opt_arg(&a[0])?
        .as_deref()
        .cloned()
        .ok_or_else(|| EvalError::new("optional.none() dereference"))
}

pub fn or<'a>(a: &[Value<'a>]) -> R<'a> {
    match opt_arg(&a[0])? {
        Some(_) => Ok(a[0].clone()),
        None => {
            opt_arg(&a[1])?;
            Ok(a[1].clone())
        }
    }
}

pub fn or_value<'a>(a: &[Value<'a>]) -> R<'a> {
    Ok(opt_arg(&a[0])?
        .as_deref()
        .cloned()
        .unwrap_or_else(|| a[1].clone()))
}

pub fn first<'a>(a: &[Value<'a>]) -> R<'a> {
    Ok(Value::optional(list_arg(&a[0])?.get(0)))
}

pub fn last<'a>(a: &[Value<'a>]) -> R<'a> {
    let l = list_arg(&a[0])?;
    Ok(Value::optional(
        l.len().checked_sub(1).and_then(|i| l.get(i)),
    ))
}

/// `optional.unwrap`, `unwrapOpt`: charged 1 (cel-go's default) for a walk of the whole
/// list, so the walk watches the deadline and the result is counted.
pub fn unwrap_opt<'a>(cx: &mut Ctx<'_>, a: &[Value<'a>]) -> R<'a> {
    let mut out = Builder::new(cx);
    for e in list_arg(&a[0])?.iter() {
        out.ticker.tick()?;
        if let Some(v) = opt_arg(&e)? {
            out.push((**v).clone())?;
        }
    }
    Ok(out.value())
}

// ---------------------------------------------------------------------------------------
// Kubernetes regex library

pub fn regex_error(e: EvalError) -> EvalError {
    EvalError::new(format!("Illegal regex: {}", e.message()))
}

/// The first match of `re` in the string `target`: borrowed when `target` is.
pub fn find_with<'a>(cx: &mut Ctx<'_>, re: &Regex, target: &Value<'a>) -> R<'a> {
    let s = str_arg(target)?;
    search_watch(cx, s)?;
    match re.find(s) {
        Some(m) => piece(cx, target, m.range()),
        None => Ok(Value::String(Str::Borrowed(""))),
    }
}

/// At most `n` matches (all for n < 0) of `re` in `target`, each counted as it is found.
pub fn find_all_with<'a>(cx: &mut Ctx<'_>, re: &Regex, target: &Value<'a>, n: i64) -> R<'a> {
    let s = str_arg(target)?;
    if n == 0 {
        return Ok(Value::list(Vec::new()));
    }
    search_watch(cx, s)?;
    let limit = usize::try_from(n).unwrap_or(usize::MAX);
    let mut out = Builder::new(cx);
    let mut last = 0;
    for m in re.find_iter(s).take(limit) {
        // The search between two matches is work too.
        out.ticker.bytes(m.end() - last)?;
        last = m.end();
        let v = piece(out.cx, target, m.range())?;
        out.push(v)?;
    }
    Ok(out.value())
}

pub fn find<'a>(cx: &mut Ctx<'_>, a: &[Value<'a>]) -> R<'a> {
    let re = cx.regex(str_arg(&a[1])?).map_err(regex_error)?;
    find_with(cx, re.as_ref(), &a[0])
}

pub fn find_all<'a>(cx: &mut Ctx<'_>, a: &[Value<'a>]) -> R<'a> {
    let re = cx.regex(str_arg(&a[1])?).map_err(regex_error)?;
    let n = match a.get(2) {
        Some(v) => int_arg(v)?,
        None => -1,
    };
    find_all_with(cx, re.as_ref(), &a[0], n)
}

/// A borrowed view of a string value, for tests.
#[cfg(test)]
fn s(v: &str) -> Value<'_> {
    Value::String(super::value::Str::Borrowed(v))
}

#[cfg(test)]
mod tests {
    use super::super::eval::Meter;
    use super::super::regex::RegexCache;
    use super::*;

    fn text(v: R<'_>) -> String {
        v.unwrap().as_str().unwrap().to_string()
    }

    /// Calls `f` with a fresh evaluation context.
    fn call<'a>(f: super::super::library::CxImp, args: &[Value<'a>]) -> R<'a> {
        let mut meter = Meter::default();
        let mut regexes = RegexCache::default();
        f(&mut Ctx::new(&mut meter, &mut regexes), args)
    }

    fn int(v: R<'_>) -> i64 {
        match v.unwrap() {
            Value::Int(i) => i,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn strings() {
        assert_eq!(text(call(replace, &[s("abc"), s(""), s("-")])), "-a-b-c-");
        assert_eq!(
            text(call(replace, &[s("aaa"), s("a"), s("bb"), Value::Int(2)])),
            "bbbba"
        );
        assert_eq!(int(call(index_of, &[s("hello"), s("l")])), 2);
        assert_eq!(
            int(call(index_of, &[s("hello"), s("l"), Value::Int(10)])),
            -1
        );
        assert_eq!(int(call(last_index_of, &[s("hello"), s("l")])), 3);
        assert_eq!(text(call(quote, &[s("a\"b\n")])), "\"a\\\"b\\n\"");
        assert!(call(char_at, &[s("abc"), Value::Int(4)]).is_err());
        assert_eq!(text(call(char_at, &[s("abc"), Value::Int(3)])), "");
    }

    #[test]
    fn offsets_and_results_are_code_points() {
        let t = "héllo wörld";
        assert_eq!(int(call(index_of, &[s(t), s("l")])), 2);
        assert_eq!(int(call(index_of, &[s(t), s("ö"), Value::Int(3)])), 7);
        assert_eq!(int(call(index_of, &[s(t), s("l"), Value::Int(4)])), 9);
        assert_eq!(int(call(index_of, &[s(t), s("x")])), -1);
        assert_eq!(int(call(last_index_of, &[s(t), s("l")])), 9);
        assert_eq!(int(call(last_index_of, &[s(t), s("l"), Value::Int(8)])), 3);
        assert_eq!(int(call(last_index_of, &[s(t), s("wö"), Value::Int(6)])), 6);
        assert_eq!(
            int(call(last_index_of, &[s(t), s("wö"), Value::Int(5)])),
            -1
        );
        assert_eq!(int(call(last_index_of, &[s("日本"), s("本本")])), -1);
        assert_eq!(text(call(char_at, &[s(t), Value::Int(1)])), "é");
        assert_eq!(
            text(call(substring, &[s(t), Value::Int(1), Value::Int(8)])),
            "éllo wö"
        );
        assert_eq!(text(call(substring, &[s(t), Value::Int(7)])), "örld");
        assert!(call(substring, &[s(t), Value::Int(12)]).is_err());
        assert_eq!(text(call(trim, &[s("  ab c \n")])), "ab c");
    }

    #[test]
    fn split_follows_go() {
        let parts = |v: R<'_>| -> Vec<String> {
            let Value::List(l) = v.unwrap() else { panic!() };
            l.iter().map(|e| e.as_str().unwrap().to_string()).collect()
        };
        assert_eq!(
            parts(call(split, &[s("a,b,,c"), s(",")])),
            ["a", "b", "", "c"]
        );
        assert_eq!(
            parts(call(split, &[s("a,b,c"), s(","), Value::Int(2)])),
            ["a", "b,c"]
        );
        assert_eq!(parts(call(split, &[s("héj"), s("")])), ["h", "é", "j"]);
        assert_eq!(
            parts(call(split, &[s("héj"), s(""), Value::Int(2)])),
            ["h", "éj"]
        );
        assert_eq!(parts(call(split, &[s(""), s(",")])), [""]);
        assert!(parts(call(split, &[s("a,b"), s(","), Value::Int(0)])).is_empty());
        assert_eq!(
            parts(call(split, &[s("a,b"), s(","), Value::Int(1)])),
            ["a,b"]
        );
    }

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
            "1.234568 × 10⁰⁴"
        );
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
        let long = text(call(
            format,
            &[s("%.70000e"), Value::list(vec![Value::Double(1.5)])],
        ));
        assert!(long.starts_with("1.5000") && long.ends_with("0 × 10⁰⁰"));
    }

    #[test]
    fn find_all_keeps_empty_matches() {
        let re = super::super::regex::compile_regex("[0-9]*").unwrap();
        let mut meter = Meter::default();
        let mut regexes = RegexCache::default();
        let mut cx = Ctx::new(&mut meter, &mut regexes);
        let Value::List(l) = find_all_with(&mut cx, &re, &s("1, 2"), -1).unwrap() else {
            panic!()
        };
        assert!(l.iter().any(|v| v.as_str() == Some("")));
    }
}
