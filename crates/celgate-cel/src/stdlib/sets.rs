//! cel-go's ext.Sets (`sets.contains`, `sets.equivalent`, `sets.intersects`), from
//! Kubernetes 1.29: charged 1 + size(x) · size(y) comparisons, but a comparison walks lists
//! and strings whatever their size, so each watches the deadline.

use crate::ctx::Ctx;
use crate::error::EvalError;
use crate::meter::{Ticker, STEPS_PER_CHECK};
use crate::overload::{list_arg, since, Builder, Cost, R};
use crate::value::{List, Value};

use super::comparison::list_contains_ticking;

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

/// cel-go's `trackSetsCost(1)`: 1 + size(a) · size(b).
fn cost_sets(a: &[Value<'_>]) -> u64 {
    a[0].cost_size()
        .saturating_mul(a[1].cost_size())
        .saturating_add(1)
}

/// cel-go's `trackSetsCost(2)`: 1 + 2 · size(a) · size(b).
fn cost_sets_equivalent(a: &[Value<'_>]) -> u64 {
    a[0].cost_size()
        .saturating_mul(a[1].cost_size())
        .saturating_mul(2)
        .saturating_add(1)
}

pub(super) fn register(b: &mut Builder) {
    b.at_cx(
        since::SETS,
        "sets.contains",
        &["(list(A), list(A)) bool"],
        sets_contains,
        Cost::Custom(cost_sets),
    );
    b.at_cx(
        since::SETS,
        "sets.equivalent",
        &["(list(A), list(A)) bool"],
        sets_equivalent,
        Cost::Custom(cost_sets_equivalent),
    );
    b.at_cx(
        since::SETS,
        "sets.intersects",
        &["(list(A), list(A)) bool"],
        sets_intersects,
        Cost::Custom(cost_sets),
    );
}
