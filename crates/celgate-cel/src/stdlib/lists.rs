//! Lists: the standard `size` (of strings, bytes, lists and maps), Kubernetes' lists
//! library (`isSorted`, `sum`, `min`, `max`, `includes`) and cel-go's ext.Lists version 3
//! (`slice`, `flatten`, `sort`, `distinct`, `reverse`, `lists.range`), whose sort the
//! `sortBy` macro shares.

use std::cmp::Ordering;

use crate::ctx::Ctx;
use crate::error::EvalError;
use crate::meter::STEPS_PER_CHECK;
use crate::overload::{cost_traversal, int_arg, list_arg, no_overload, since, Builder, Cost, R};
use crate::value::Value;

use super::arithmetic::add;
use super::build::ListBuilder;
use super::comparison::{equal, list_contains};

/// `size`: code points of a string, bytes, elements of a list, entries of a map.
pub fn size<'a>(a: &[Value<'a>]) -> R<'a> {
    a[0].size()
        .map(|s| Value::Int(s as i64))
        .map_or_else(no_overload, Ok)
}

/// An element as Kubernetes' lists library takes it: a `traits.Comparer` (a number, bool,
/// string, bytes, duration or timestamp), else `no such overload`.
fn comparer<'v, 'a>(e: &'v Value<'a>) -> Result<&'v Value<'a>, EvalError> {
    match e {
        Value::Bool(_)
        | Value::Int(_)
        | Value::Uint(_)
        | Value::Double(_)
        | Value::String(_)
        | Value::Bytes(_)
        | Value::Duration(_)
        | Value::Timestamp(_) => Ok(e),
        _ => Err(EvalError::no_such_overload()),
    }
}

/// `x.Compare(y)` as the lists library reads it: only an answer counts. Kinds that do not
/// compare (`1` and `'a'` in a `dyn` list) or a NaN make cel-go's `Compare` an error, which
/// `isSorted`, `min` and `max` ignore (the pair counts as in order).
fn compare_or_ignore(x: &Value<'_>, y: &Value<'_>) -> Option<Ordering> {
    x.compare(y).ok().flatten()
}

// `isSorted`, `sum`, `min`, `max` are charged a traversal of the list (at least 1 per
// element), which bounds their walk; they read the list in place.

pub fn is_sorted<'a>(a: &[Value<'a>]) -> R<'a> {
    let mut prev: Option<Value<'a>> = None;
    for e in list_arg(&a[0])?.iter() {
        comparer(&e)?;
        if let Some(p) = &prev {
            if compare_or_ignore(p, &e) == Some(Ordering::Greater) {
                return Ok(Value::Bool(false));
            }
        }
        prev = Some(e);
    }
    Ok(Value::Bool(true))
}

/// `list.sum()`, one overload per summable type as Kubernetes declares them, so that an empty
/// list sums to the zero of its static type (`[1.5].filter(x, false).sum()` is `0.0`). A
/// `dyn` list reaches the first overload whose element type fits its first element, as
/// cel-go's runtime type guard looks at the first element: that element's kind picks the
/// zero, and an empty `dyn` list sums to `0` (the first overload, `int`).
fn sum_from<'a>(cx: &mut Ctx<'_>, a: &[Value<'a>], empty: Value<'a>) -> R<'a> {
    let l = list_arg(&a[0])?;
    let mut acc = match l.get(0) {
        None => empty,
        Some(Value::Uint(_)) => Value::Uint(0),
        Some(Value::Double(_)) => Value::Double(0.0),
        Some(Value::Duration(_)) => Value::Duration(0),
        _ => Value::Int(0),
    };
    for e in l.iter() {
        acc = add(cx, &[acc, e])?;
    }
    Ok(acc)
}

pub fn sum_int<'a>(cx: &mut Ctx<'_>, a: &[Value<'a>]) -> R<'a> {
    sum_from(cx, a, Value::Int(0))
}

pub fn sum_uint<'a>(cx: &mut Ctx<'_>, a: &[Value<'a>]) -> R<'a> {
    sum_from(cx, a, Value::Uint(0))
}

pub fn sum_double<'a>(cx: &mut Ctx<'_>, a: &[Value<'a>]) -> R<'a> {
    sum_from(cx, a, Value::Double(0.0))
}

pub fn sum_duration<'a>(cx: &mut Ctx<'_>, a: &[Value<'a>]) -> R<'a> {
    sum_from(cx, a, Value::Duration(0))
}

/// `min` (`replace` is `Greater`: the kept value is above the next) and `max` (`Less`).
fn extreme<'a>(a: &[Value<'a>], replace: Ordering, name: &str) -> R<'a> {
    let mut best: Option<Value<'a>> = None;
    for e in list_arg(&a[0])?.iter() {
        comparer(&e)?;
        match &best {
            Some(b) if compare_or_ignore(b, &e) != Some(replace) => {}
            _ => best = Some(e),
        }
    }
    best.ok_or_else(|| EvalError::new(format!("{name} called on empty list")))
}

pub fn min<'a>(a: &[Value<'a>]) -> R<'a> {
    extreme(a, Ordering::Greater, "min")
}

pub fn max<'a>(a: &[Value<'a>]) -> R<'a> {
    extreme(a, Ordering::Less, "max")
}

pub fn includes<'a>(cx: &mut Ctx<'_>, a: &[Value<'a>]) -> R<'a> {
    match &a[0] {
        Value::List(l) => Ok(Value::Bool(list_contains(cx, l, &a[1])?)),
        other => Ok(Value::Bool(equal(cx, other, &a[1])?)),
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
    let mut out = ListBuilder::new(cx);
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
    fn go<'a>(
        v: &Value<'a>,
        depth: i64,
        out: &mut ListBuilder<'_, '_, 'a>,
    ) -> Result<(), EvalError> {
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
    let mut out = ListBuilder::new(cx);
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

fn cost_list_result(a: &[Value<'_>]) -> u64 {
    a[0].cost_size() + 11
}

/// 2·n² + 11 (saturating: a concatenated list can be longer than any square fits).
pub fn cost_sort(a: &[Value<'_>]) -> u64 {
    sort_cost(a[0].cost_size())
}

#[inline]
pub fn sort_cost(n: u64) -> u64 {
    n.saturating_mul(n).saturating_mul(2).saturating_add(11)
}

fn cost_range(a: &[Value<'_>]) -> u64 {
    match &a[0] {
        Value::Int(n) if *n > 0 => *n as u64 + 11,
        _ => 11,
    }
}

pub(super) fn register(b: &mut Builder) {
    b.always(
        "size",
        // cel-go's declaration order, in which its checker binds a free operand type.
        &[
            "(bytes) int",
            "bytes.() int",
            "(list(A)) int",
            "list(A).() int",
            "(map(A, B)) int",
            "map(A, B).() int",
            "(string) int",
            "string.() int",
        ],
        size,
        Cost::One,
    );
    b.always_cx(
        "sum",
        &["list(int).() int"],
        sum_int,
        Cost::Walk(cost_traversal),
    );
    b.always_cx(
        "sum",
        &["list(uint).() uint"],
        sum_uint,
        Cost::Walk(cost_traversal),
    );
    b.always_cx(
        "sum",
        &["list(double).() double"],
        sum_double,
        Cost::Walk(cost_traversal),
    );
    b.always_cx(
        "sum",
        &["list(duration).() duration"],
        sum_duration,
        Cost::Walk(cost_traversal),
    );
    // One overload per comparable element type, as Kubernetes declares them: a list of lists
    // or maps has no minimum and is not sorted (a compile error, not a run-time one).
    const COMPARABLE: [&str; 8] = [
        "list(int).() int",
        "list(uint).() uint",
        "list(double).() double",
        "list(bool).() bool",
        "list(duration).() duration",
        "list(timestamp).() timestamp",
        "list(string).() string",
        "list(bytes).() bytes",
    ];
    b.always(
        "isSorted",
        &[
            "list(int).() bool",
            "list(uint).() bool",
            "list(double).() bool",
            "list(bool).() bool",
            "list(duration).() bool",
            "list(timestamp).() bool",
            "list(string).() bool",
            "list(bytes).() bool",
        ],
        is_sorted,
        Cost::Walk(cost_traversal),
    );
    b.always("min", &COMPARABLE, min, Cost::Walk(cost_traversal));
    b.always("max", &COMPARABLE, max, Cost::Walk(cost_traversal));
    b.at_cx(
        since::K8S_LISTS_V1,
        "includes",
        &["dyn.(dyn) bool"],
        includes,
        Cost::Walk(cost_traversal),
    );
    b.at_cx(
        since::LISTS_V3,
        "slice",
        &["list(A).(int, int) list(A)"],
        slice,
        Cost::Custom(cost_list_result),
    );
    b.at_cx(
        since::LISTS_V3,
        "flatten",
        &["list(list(A)).() list(A)", "list(A).(int) list(dyn)"],
        flatten,
        Cost::Custom(cost_list_result),
    );
    b.at_cx(
        since::LISTS_V3,
        "sort",
        &["list(A).() list(A)"],
        sort,
        Cost::Custom(cost_sort),
    );
    b.at_cx(
        since::LISTS_V3,
        "distinct",
        &["list(A).() list(A)"],
        distinct,
        Cost::Custom(cost_sort),
    );
    b.at_cx(
        since::LISTS_V3,
        "reverse",
        &["list(A).() list(A)"],
        reverse,
        Cost::Custom(cost_list_result),
    );
    b.at_cx(
        since::LISTS_V3,
        "lists.range",
        &["(int) list(int)"],
        range,
        Cost::Custom(cost_range),
    );
}
