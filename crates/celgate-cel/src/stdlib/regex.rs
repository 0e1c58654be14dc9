//! Regular expressions: the standard `matches` and Kubernetes' regex library (`find`,
//! `findAll`), with cel-go's cost rule. A constant pattern is compiled with the expression
//! (the evaluator calls [`find_with`] and [`find_all_with`] directly); one known only at run
//! time goes through the evaluation's cache.

use crate::ctx::Ctx;
use crate::error::EvalError;
use crate::meter::STEPS_PER_CHECK;
use crate::overload::{int_arg, str_arg, Builder, Cost, R};
use crate::regex::Regex;
use crate::value::{Str, Value};

use super::build::{piece, ListBuilder};

/// `matches` with a pattern known only at run time (a constant one is compiled with the
/// expression): through the evaluation's cache.
pub fn matches<'a>(cx: &mut Ctx<'_>, a: &[Value<'a>]) -> R<'a> {
    let re = cx.regex(str_arg(&a[1])?)?;
    let s = str_arg(&a[0])?;
    search_watch(cx, s)?;
    Ok(Value::Bool(
        re.is_match(s, &mut cx.ticker(STEPS_PER_CHECK))?,
    ))
}

/// A regex search cannot be stopped once started; it is linear in the text (times the
/// automaton's size, bounded for run-time patterns), so a long text gets a look at the
/// deadline first.
#[inline]
pub fn search_watch(cx: &Ctx<'_>, text: &str) -> Result<(), EvalError> {
    if text.len() >= LONG_TEXT {
        cx.check_deadline()?;
    }
    Ok(())
}

/// A text long enough that one pass over it is worth a look at the clock first.
pub const LONG_TEXT: usize = 64 << 10;

pub fn regex_error(e: EvalError) -> EvalError {
    EvalError::new(format!("Illegal regex: {}", e.message()))
}

/// The first match of `re` in the string `target`: borrowed when `target` is.
pub fn find_with<'a>(cx: &mut Ctx<'_>, re: &Regex, target: &Value<'a>) -> R<'a> {
    let s = str_arg(target)?;
    search_watch(cx, s)?;
    match re.find(s, &mut cx.ticker(STEPS_PER_CHECK))? {
        Some(range) => piece(cx, target, range),
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
    let mut search = cx.ticker(STEPS_PER_CHECK);
    let mut out = ListBuilder::new(cx);
    let mut last = 0;
    let mut found = 0;
    re.for_each_match(s, &mut search, |m| {
        // The search between two matches is work too.
        out.ticker.bytes(m.end - last)?;
        last = m.end;
        let v = piece(out.cx, target, m)?;
        out.push(v)?;
        found += 1;
        Ok(found < limit)
    })?;
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

/// `matches`, `find`, `findAll`: ⌈0.1·(1+size(str))⌉ × ⌈0.25·size(regex)⌉.
pub fn cost_regex(a: &[Value<'_>]) -> u64 {
    regex_cost(a[0].cost_size(), a[1].cost_size())
}

#[inline]
pub fn regex_cost(str_size: u64, pattern_size: u64) -> u64 {
    let s = ((1 + str_size) as f64 * 0.1).ceil() as u64;
    let r = (pattern_size as f64 * 0.25).ceil() as u64;
    s * r
}

pub(super) fn register(b: &mut Builder) {
    b.always_cx(
        "matches",
        &["(string, string) bool", "string.(string) bool"],
        matches,
        Cost::Custom(cost_regex),
    );
    b.always_cx(
        "find",
        &["string.(string) string"],
        find,
        Cost::Custom(cost_regex),
    );
    b.always_cx(
        "findAll",
        &[
            "string.(string) list(string)",
            "string.(string, int) list(string)",
        ],
        find_all,
        Cost::Custom(cost_regex),
    );
}

#[cfg(test)]
mod tests {
    use super::super::test_support::s;
    use super::*;
    use crate::meter::Meter;
    use crate::regex::RegexCache;

    #[test]
    fn find_all_keeps_empty_matches() {
        let re = crate::regex::compile_regex("[0-9]*").unwrap();
        let mut meter = Meter::default();
        let mut regexes = RegexCache::default();
        let mut cx = Ctx::new(&mut meter, &mut regexes);
        let Value::List(l) = find_all_with(&mut cx, &re, &s("1, 2"), -1).unwrap() else {
            panic!()
        };
        assert!(l.iter().any(|v| v.as_str() == Some("")));
    }
}
