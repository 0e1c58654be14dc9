//! Strings: the standard `contains`, `startsWith`, `endsWith` and cel-go's ext.Strings
//! (version 2) without `format` (in [`super::format`]). Offsets and lengths are in code
//! points; results borrow the receiver where they can.

use crate::ctx::Ctx;
use crate::error::EvalError;
use crate::meter::STEPS_PER_CHECK;
use crate::overload::{cost_traversal, int_arg, list_arg, since, str_arg, Builder, Cost, R};
use crate::text::char_count;
use crate::value::Value;

use super::build::{piece, Out};
use super::regex::{search_watch, LONG_TEXT};

pub fn contains<'a>(a: &[Value<'a>]) -> R<'a> {
    Ok(Value::Bool(str_arg(&a[0])?.contains(str_arg(&a[1])?)))
}

pub fn starts_with<'a>(a: &[Value<'a>]) -> R<'a> {
    Ok(Value::Bool(str_arg(&a[0])?.starts_with(str_arg(&a[1])?)))
}

pub fn ends_with<'a>(a: &[Value<'a>]) -> R<'a> {
    Ok(Value::Bool(str_arg(&a[0])?.ends_with(str_arg(&a[1])?)))
}

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
    // cel-go (ext.Strings v0.22) gives an empty needle's offset back before it checks the
    // offset: `'a'.indexOf('', -1)` is -1.
    if needle.is_empty() {
        return Ok(Value::Int(off));
    }
    if off < 0 {
        return Err(index_error(off));
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
    // As cel-go (ext.Strings v0.22): without an offset an empty needle is at the end and
    // any other is searched from the last code point, so `''.lastIndexOf('a')` fails with
    // offset -1; an empty needle gives its offset back unchecked (`'a'.lastIndexOf('', -1)`).
    let off = match a.get(2) {
        Some(v) => int_arg(v)?,
        None if needle.is_empty() => hay_len as i64,
        None => hay_len as i64 - 1,
    };
    if needle.is_empty() {
        return Ok(Value::Int(off));
    }
    if off < 0 {
        return Err(index_error(off));
    }
    if off as usize >= hay_len {
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
    // Go's `explode` of an empty string is empty, whatever the limit.
    if sep.is_empty() && s.is_empty() {
        return Ok(Value::list(out));
    }
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
    // cel-go's order: with an end, the range first, then each end.
    if start > end && a.len() > 2 {
        return Err(EvalError::new(format!(
            "invalid substring range. start: {start}, end: {end}"
        )));
    }
    if start < 0 || start > len {
        return Err(index_error(start));
    }
    if end > len {
        return Err(index_error(end));
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
        match &e {
            Value::String(piece) => out.push_str(piece.as_str())?,
            // cel-go's type guard looks at the first element only: the call fails before
            // the implementation runs (the dispatcher names it), later elements inside it.
            _ if i == 0 => return Err(EvalError::no_such_overload()),
            other => {
                return Err(EvalError::new(format!(
                    "join: invalid input: {}",
                    other.debug_string()
                )))
            }
        }
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

fn cost_contains(a: &[Value<'_>]) -> u64 {
    let s = (a[0].cost_size() as f64 * 0.1).ceil() as u64;
    let sub = (a[1].cost_size() as f64 * 0.1).ceil() as u64;
    s * sub
}

/// `join`: 0.2 per code point of the result, worked out from the list before joining (a walk
/// that stops past what the meter has left, as [`cost_traversal`]). Without a list and a
/// string separator (an argument that failed, or `dyn` of another kind) the result is an
/// error, sized 1.
fn cost_join(cx: &mut Ctx<'_>, a: &[Value<'_>]) -> Result<u64, EvalError> {
    let Value::List(l) = &a[0] else { return Ok(1) };
    let sep = match a.get(1) {
        None => 0,
        Some(s @ Value::String(_)) => s.cost_size(),
        Some(_) => return Ok(1),
    };
    // Past this many code points, the charge is past what is left.
    let cap = cx.remaining_cost().saturating_add(1).saturating_mul(5);
    let mut ticker = cx.ticker(STEPS_PER_CHECK);
    let mut total = sep.saturating_mul(l.len().saturating_sub(1) as u64);
    for e in l.iter() {
        ticker.tick()?;
        total = total.saturating_add(e.cost_size());
        if total > cap {
            break;
        }
    }
    Ok((total as f64 * 0.2).ceil() as u64)
}

pub(super) fn register(b: &mut Builder) {
    b.always(
        "contains",
        &["string.(string) bool"],
        contains,
        Cost::Custom(cost_contains),
    );
    b.always(
        "startsWith",
        &["string.(string) bool"],
        starts_with,
        Cost::Traverse(0, 0.1),
    );
    b.always(
        "endsWith",
        &["string.(string) bool"],
        ends_with,
        Cost::Traverse(0, 0.1),
    );
    b.always_cx("charAt", &["string.(int) string"], char_at, Cost::One);
    b.add_cx(
        "indexOf",
        &[
            ("string.(string) int", since::ALWAYS),
            ("string.(string, int) int", since::ALWAYS),
            ("list(A).(A) int", since::ALWAYS),
        ],
        index_of,
        Cost::Walk(cost_traversal),
    );
    b.add_cx(
        "lastIndexOf",
        &[
            ("string.(string) int", since::ALWAYS),
            ("string.(string, int) int", since::ALWAYS),
            ("list(A).(A) int", since::ALWAYS),
        ],
        last_index_of,
        Cost::Walk(cost_traversal),
    );
    b.always_cx(
        "lowerAscii",
        &["string.() string"],
        lower_ascii,
        Cost::Traverse(0, 0.1),
    );
    b.always_cx(
        "upperAscii",
        &["string.() string"],
        upper_ascii,
        Cost::Traverse(0, 0.1),
    );
    b.always_cx(
        "replace",
        &[
            "string.(string, string) string",
            "string.(string, string, int) string",
        ],
        replace,
        Cost::Traverse(0, 0.2),
    );
    b.always_cx(
        "split",
        &[
            "string.(string) list(string)",
            "string.(string, int) list(string)",
        ],
        split,
        Cost::Traverse(0, 0.2),
    );
    b.always_cx(
        "substring",
        &["string.(int) string", "string.(int, int) string"],
        substring,
        Cost::Traverse(0, 0.1),
    );
    b.always_cx("trim", &["string.() string"], trim, Cost::Traverse(0, 0.1));
    b.always_cx(
        "join",
        &["list(string).() string", "list(string).(string) string"],
        join,
        Cost::Walk(cost_join),
    );
    b.at_cx(
        since::STRINGS_V2,
        "strings.quote",
        &["(string) string"],
        quote,
        Cost::Traverse(0, 0.1),
    );
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{call, int, s, text};
    use super::*;

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
    fn empty_needles_and_strings_as_cel_go() {
        let err = |r: R<'static>| r.map_err(|e| e.to_string()).unwrap_err();
        // An empty needle gives its offset back, even a negative one.
        assert_eq!(
            int(call(index_of, &[s("hello"), s(""), Value::Int(-1)])),
            -1
        );
        assert_eq!(int(call(index_of, &[s(""), s(""), Value::Int(7)])), 7);
        assert_eq!(int(call(last_index_of, &[s("hello"), s("")])), 5);
        assert_eq!(
            int(call(last_index_of, &[s("hello"), s(""), Value::Int(-100)])),
            -100
        );
        // Any other needle still refuses a negative offset.
        assert_eq!(
            err(call(index_of, &[s("hello"), s("l"), Value::Int(-1)])),
            "index out of range: -1"
        );
        // Without an offset, `lastIndexOf` searches from the last code point: -1 on ''.
        assert_eq!(
            err(call(last_index_of, &[s(""), s("a")])),
            "index out of range: -1"
        );
        assert_eq!(int(call(index_of, &[s(""), s("a")])), -1);
        assert_eq!(int(call(last_index_of, &[s("a"), s("a")])), 0);
        assert_eq!(
            int(call(last_index_of, &[s("abc"), s("c"), Value::Int(3)])),
            -1
        );
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
}
