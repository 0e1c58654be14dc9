//! The extension libraries Kubernetes enables: cel-go's ext.Strings (version 2), ext.Lists
//! (version 3), ext.Sets and optional types, plus Kubernetes' lists and regex libraries.

use std::cmp::Ordering;
use std::sync::Arc;

use super::error::EvalError;
use super::functions::{format_double, format_duration, int_arg, list_arg, str_arg, R};
use super::regex::Regex;
use super::value::Value;

fn index_error(i: i64) -> EvalError {
    EvalError::new(format!("index out of range: {i}"))
}

fn chars(s: &str) -> Vec<char> {
    s.chars().collect()
}

// ---------------------------------------------------------------------------------------
// ext.Strings

pub fn char_at<'a>(a: &[Value<'a>]) -> R<'a> {
    let s = str_arg(&a[0])?;
    let i = int_arg(&a[1])?;
    let cs = chars(s);
    if i < 0 || i as usize > cs.len() {
        return Err(index_error(i));
    }
    Ok(Value::string(
        cs.get(i as usize)
            .map(|c| c.to_string())
            .unwrap_or_default(),
    ))
}

/// `indexOf` of ext.Strings on a string receiver, of the Kubernetes lists library on a list.
pub fn index_of<'a>(a: &[Value<'a>]) -> R<'a> {
    if let Value::List(l) = &a[0] {
        return Ok(Value::Int(
            l.iter()
                .position(|e| e.equals(&a[1]))
                .map_or(-1, |p| p as i64),
        ));
    }
    let hay = chars(str_arg(&a[0])?);
    let needle = chars(str_arg(&a[1])?);
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
    let off = off as usize;
    if off >= hay.len() {
        return Ok(Value::Int(-1));
    }
    let found =
        (off..=hay.len().saturating_sub(needle.len())).find(|&i| hay[i..].starts_with(&needle));
    Ok(Value::Int(found.map_or(-1, |i| i as i64)))
}

pub fn last_index_of<'a>(a: &[Value<'a>]) -> R<'a> {
    if let Value::List(l) = &a[0] {
        let v = l.to_vec();
        return Ok(Value::Int(
            v.iter()
                .rposition(|e| e.equals(&a[1]))
                .map_or(-1, |p| p as i64),
        ));
    }
    let hay = chars(str_arg(&a[0])?);
    let needle = chars(str_arg(&a[1])?);
    let off = match a.get(2) {
        Some(v) => int_arg(v)?,
        None => hay.len() as i64,
    };
    if off < 0 {
        return Err(index_error(off));
    }
    if needle.is_empty() {
        return Ok(Value::Int(off));
    }
    if off as usize >= hay.len() && a.len() == 3 {
        return Ok(Value::Int(-1));
    }
    if needle.len() > hay.len() {
        return Ok(Value::Int(-1));
    }
    let last_start = (off as usize).min(hay.len() - needle.len());
    let found = (0..=last_start)
        .rev()
        .find(|&i| hay[i..].starts_with(&needle));
    Ok(Value::Int(found.map_or(-1, |i| i as i64)))
}

pub fn lower_ascii<'a>(a: &[Value<'a>]) -> R<'a> {
    Ok(Value::string(str_arg(&a[0])?.to_ascii_lowercase()))
}

pub fn upper_ascii<'a>(a: &[Value<'a>]) -> R<'a> {
    Ok(Value::string(str_arg(&a[0])?.to_ascii_uppercase()))
}

pub fn replace<'a>(a: &[Value<'a>]) -> R<'a> {
    let s = str_arg(&a[0])?;
    let old = str_arg(&a[1])?;
    let new = str_arg(&a[2])?;
    let n = match a.get(3) {
        Some(v) => int_arg(v)?,
        None => -1,
    };
    if n < 0 {
        return Ok(Value::string(go_replace(s, old, new, usize::MAX)));
    }
    Ok(Value::string(go_replace(s, old, new, n as usize)))
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

pub fn split<'a>(a: &[Value<'a>]) -> R<'a> {
    let s = str_arg(&a[0])?;
    let sep = str_arg(&a[1])?;
    let n = match a.get(2) {
        Some(v) => int_arg(v)?,
        None => -1,
    };
    let strs = |v: Vec<String>| Value::list(v.into_iter().map(Value::string).collect());
    if n == 0 {
        return Ok(Value::list(Vec::new()));
    }
    if n == 1 {
        return Ok(strs(vec![s.to_string()]));
    }
    let limit = if n < 0 { usize::MAX } else { n as usize };
    if sep.is_empty() {
        let cs = chars(s);
        let mut out: Vec<String> = Vec::new();
        for (i, c) in cs.iter().enumerate() {
            if out.len() + 1 == limit {
                out.push(cs[i..].iter().collect());
                return Ok(strs(out));
            }
            out.push(c.to_string());
        }
        return Ok(strs(out));
    }
    Ok(strs(s.splitn(limit, sep).map(str::to_string).collect()))
}

pub fn substring<'a>(a: &[Value<'a>]) -> R<'a> {
    let cs = chars(str_arg(&a[0])?);
    let start = int_arg(&a[1])?;
    let end = match a.get(2) {
        Some(v) => int_arg(v)?,
        None => cs.len() as i64,
    };
    let len = cs.len() as i64;
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
    Ok(Value::string(
        cs[start as usize..end as usize].iter().collect::<String>(),
    ))
}

pub fn trim<'a>(a: &[Value<'a>]) -> R<'a> {
    Ok(Value::string(str_arg(&a[0])?.trim()))
}

pub fn join<'a>(a: &[Value<'a>]) -> R<'a> {
    let l = list_arg(&a[0])?;
    let sep = match a.get(1) {
        Some(v) => str_arg(v)?,
        None => "",
    };
    let mut out = String::new();
    for (i, e) in l.iter().enumerate() {
        if i > 0 {
            out.push_str(sep);
        }
        out.push_str(str_arg(&e)?);
    }
    Ok(Value::string(out))
}

pub fn quote<'a>(a: &[Value<'a>]) -> R<'a> {
    let s = str_arg(&a[0])?;
    let mut out = String::with_capacity(s.len() + 2);
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
pub fn format<'a>(a: &[Value<'a>]) -> R<'a> {
    let fmt = str_arg(&a[0])?;
    let args = list_arg(&a[1])?;
    let mut out = String::new();
    let mut it = fmt.chars().peekable();
    let mut next_arg = 0usize;
    while let Some(c) = it.next() {
        if c != '%' {
            out.push(c);
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
            out.push('%');
            continue;
        }
        let arg = args
            .get(next_arg)
            .ok_or_else(|| EvalError::new(format!("index {next_arg} out of range")))?;
        next_arg += 1;
        out.push_str(&format_clause(verb, precision, &arg)?);
    }
    Ok(Value::string(out))
}

fn format_clause(verb: char, precision: Option<usize>, v: &Value<'_>) -> Result<String, EvalError> {
    let err = |what: &str| EvalError::new(format!("error during formatting: {what}"));
    match verb {
        's' => format_string_clause(v, true),
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
                Ok(format!("{d:.p$}"))
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

/// The legacy locale rendering of `%e`: `1.234568 × 10⁰⁴`.
fn scientific(d: f64, p: usize) -> String {
    let s = format!("{d:.p$e}");
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
fn format_string_clause(v: &Value<'_>, top: bool) -> Result<String, EvalError> {
    Ok(match v {
        Value::String(s) if top => s.as_str().to_string(),
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
        Value::List(l) => {
            let parts: Result<Vec<_>, _> = l.iter().map(|e| format_string_clause(&e, false)).collect();
            format!("[{}]", parts?.join(", "))
        }
        Value::Map(m) => {
            let mut parts = Vec::new();
            for (k, val) in m.entries() {
                parts.push(format!("{}:{}", format_string_clause(&k, false)?, format_string_clause(&val, false)?));
            }
            parts.sort();
            format!("{{{}}}", parts.join(", "))
        }
        Value::Type(t) => t.to_string(),
        other => {
            return Err(EvalError::new(format!(
                "error during formatting: string clause can only be used on strings, bools, bytes, ints, doubles, maps, lists, types, durations, and timestamps, was given {}",
                other.type_name()
            )))
        }
    })
}

// ---------------------------------------------------------------------------------------
// Kubernetes lists library

fn comparable_sequence<'a>(a: &Value<'a>) -> Result<Vec<Value<'a>>, EvalError> {
    Ok(list_arg(a)?.to_vec())
}

fn cmp_strict(x: &Value<'_>, y: &Value<'_>) -> Result<Ordering, EvalError> {
    if std::mem::discriminant(x) != std::mem::discriminant(y) {
        return Err(EvalError::no_such_overload());
    }
    Ok(x.compare(y)?.unwrap_or(Ordering::Equal))
}

pub fn is_sorted<'a>(a: &[Value<'a>]) -> R<'a> {
    let v = comparable_sequence(&a[0])?;
    for w in v.windows(2) {
        if cmp_strict(&w[0], &w[1])? == Ordering::Greater {
            return Ok(Value::Bool(false));
        }
    }
    Ok(Value::Bool(true))
}

pub fn sum<'a>(a: &[Value<'a>]) -> R<'a> {
    let v = comparable_sequence(&a[0])?;
    let mut acc = match v.first() {
        Some(Value::Uint(_)) => Value::Uint(0),
        Some(Value::Double(_)) => Value::Double(0.0),
        Some(Value::Duration(_)) => Value::Duration(0),
        _ => Value::Int(0),
    };
    for e in v {
        acc = super::functions::add(&[acc, e])?;
    }
    Ok(acc)
}

fn extreme<'a>(a: &[Value<'a>], want: Ordering, name: &str) -> R<'a> {
    let v = comparable_sequence(&a[0])?;
    let mut it = v.into_iter();
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

pub fn includes<'a>(a: &[Value<'a>]) -> R<'a> {
    match &a[0] {
        Value::List(l) => Ok(Value::Bool(l.iter().any(|e| e.equals(&a[1])))),
        other => Ok(Value::Bool(other.equals(&a[1]))),
    }
}

// ---------------------------------------------------------------------------------------
// ext.Lists version 3

pub fn slice<'a>(a: &[Value<'a>]) -> R<'a> {
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
    Ok(Value::list(
        v.to_vec()[start as usize..end as usize].to_vec(),
    ))
}

pub fn flatten<'a>(a: &[Value<'a>]) -> R<'a> {
    let depth = match a.get(1) {
        Some(v) => int_arg(v)?,
        None => 1,
    };
    if depth < 0 {
        return Err(EvalError::new("level must be non-negative"));
    }
    fn go<'a>(v: &Value<'a>, depth: i64, out: &mut Vec<Value<'a>>) {
        match v {
            Value::List(l) if depth >= 0 => {
                for e in l.iter() {
                    if depth > 0 {
                        go(&e, depth - 1, out);
                    } else {
                        out.push(e);
                    }
                }
            }
            other => out.push(other.clone()),
        }
    }
    let mut out = Vec::new();
    for e in list_arg(&a[0])?.iter() {
        match &e {
            Value::List(_) if depth > 0 => go(&e, depth - 1, &mut out),
            _ => out.push(e),
        }
    }
    Ok(Value::list(out))
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

/// Sorts `items` by `keys` (stable), refusing mixed or incomparable key kinds.
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

pub fn sort<'a>(a: &[Value<'a>]) -> R<'a> {
    let v = list_arg(&a[0])?.to_vec();
    sort_by_keys(v.clone(), v)
}

pub fn distinct<'a>(a: &[Value<'a>]) -> R<'a> {
    let mut out: Vec<Value<'a>> = Vec::new();
    for e in list_arg(&a[0])?.iter() {
        if !out.iter().any(|o| o.equals(&e)) {
            out.push(e);
        }
    }
    Ok(Value::list(out))
}

pub fn reverse<'a>(a: &[Value<'a>]) -> R<'a> {
    let mut v = list_arg(&a[0])?.to_vec();
    v.reverse();
    Ok(Value::list(v))
}

pub fn range<'a>(a: &[Value<'a>]) -> R<'a> {
    let n = int_arg(&a[0])?;
    Ok(Value::list((0..n.max(0)).map(Value::Int).collect()))
}

// ---------------------------------------------------------------------------------------
// ext.Sets

pub fn sets_contains<'a>(a: &[Value<'a>]) -> R<'a> {
    let (x, y) = (list_arg(&a[0])?, list_arg(&a[1])?);
    Ok(Value::Bool(
        y.iter().all(|e| x.iter().any(|f| f.equals(&e))),
    ))
}

pub fn sets_equivalent<'a>(a: &[Value<'a>]) -> R<'a> {
    let (x, y) = (list_arg(&a[0])?, list_arg(&a[1])?);
    let within = |p: &super::value::List<'_>, q: &super::value::List<'_>| {
        p.iter().all(|e| q.iter().any(|f| f.equals(&e)))
    };
    Ok(Value::Bool(within(x, y) && within(y, x)))
}

pub fn sets_intersects<'a>(a: &[Value<'a>]) -> R<'a> {
    let (x, y) = (list_arg(&a[0])?, list_arg(&a[1])?);
    Ok(Value::Bool(
        x.iter().any(|e| y.iter().any(|f| f.equals(&e))),
    ))
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

pub fn unwrap_opt<'a>(a: &[Value<'a>]) -> R<'a> {
    let mut out = Vec::new();
    for e in list_arg(&a[0])?.iter() {
        if let Some(v) = opt_arg(&e)? {
            out.push((**v).clone());
        }
    }
    Ok(Value::list(out))
}

// ---------------------------------------------------------------------------------------
// Kubernetes regex library

pub fn regex_error(e: EvalError) -> EvalError {
    EvalError::new(format!("Illegal regex: {}", e.message()))
}

pub fn find_with<'a>(re: &Regex, s: &str) -> Value<'a> {
    Value::string(re.find(s).and_then(|m| s.get(m.range())).unwrap_or(""))
}

pub fn find_all_with<'a>(re: &Regex, s: &str, n: i64) -> Value<'a> {
    if n == 0 {
        return Value::list(Vec::new());
    }
    let limit = if n < 0 { usize::MAX } else { n as usize };
    Value::list(
        re.find_iter(s)
            .take(limit)
            .map(|m| Value::string(s.get(m.range()).unwrap_or("")))
            .collect(),
    )
}

pub fn find<'a>(a: &[Value<'a>]) -> R<'a> {
    let re = super::regex::compile_regex(str_arg(&a[1])?).map_err(regex_error)?;
    Ok(find_with(&re, str_arg(&a[0])?))
}

pub fn find_all<'a>(a: &[Value<'a>]) -> R<'a> {
    let re = super::regex::compile_regex(str_arg(&a[1])?).map_err(regex_error)?;
    let n = match a.get(2) {
        Some(v) => int_arg(v)?,
        None => -1,
    };
    Ok(find_all_with(&re, str_arg(&a[0])?, n))
}

/// A borrowed view of a string value, for tests.
#[cfg(test)]
fn s(v: &str) -> Value<'_> {
    Value::String(super::value::Str::Borrowed(v))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(v: R<'_>) -> String {
        v.unwrap().as_str().unwrap().to_string()
    }

    #[test]
    fn strings() {
        assert_eq!(text(replace(&[s("abc"), s(""), s("-")])), "-a-b-c-");
        assert!(index_of(&[s("hello"), s("l")])
            .unwrap()
            .equals(&Value::Int(2)));
        assert!(index_of(&[s("hello"), s("l"), Value::Int(10)])
            .unwrap()
            .equals(&Value::Int(-1)));
        assert!(last_index_of(&[s("hello"), s("l")])
            .unwrap()
            .equals(&Value::Int(3)));
        assert_eq!(text(quote(&[s("a\"b\n")])), "\"a\\\"b\\n\"");
        assert!(char_at(&[s("abc"), Value::Int(4)]).is_err());
        assert_eq!(text(char_at(&[s("abc"), Value::Int(3)])), "");
    }

    #[test]
    fn formatting() {
        let args = Value::list(vec![Value::Int(1), s("a"), Value::Double(2.5)]);
        assert_eq!(
            text(format(&[s("%s"), Value::list(vec![args])])),
            "[1, \"a\", 2.500000]"
        );
        assert_eq!(
            text(format(&[
                s("%e"),
                Value::list(vec![Value::Double(12345.678)])
            ])),
            "1.234568 × 10⁰⁴"
        );
        assert!(format(&[s("%d"), Value::list(vec![Value::Double(1.5)])]).is_err());
        assert_eq!(
            text(format(&[
                s("%.2f%%"),
                Value::list(vec![Value::Double(1.005)])
            ])),
            "1.00%"
        );
    }

    #[test]
    fn find_all_keeps_empty_matches() {
        let re = super::super::regex::compile_regex("[0-9]*").unwrap();
        let Value::List(l) = find_all_with(&re, "1, 2", -1) else {
            panic!()
        };
        assert!(l.iter().any(|v| v.as_str() == Some("")));
    }
}
