//! Optional types (Kubernetes 1.28): `optional.of`, `optional.ofNonZeroValue`,
//! `optional.none`, `hasValue`, `value`, `or`, `orValue`, `first`, `last`,
//! `optional.unwrap` / `unwrapOpt`.

use std::sync::Arc;

use crate::ctx::Ctx;
use crate::error::EvalError;
use crate::overload::{list_arg, since, Builder, Cost, R};
use crate::value::Value;

use super::build::ListBuilder;

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
        // Go's zero `time.Time` (year 1), not the epoch.
        Value::Timestamp(t) => t.as_nanos() == -62_135_596_800 * 1_000_000_000,
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
    let mut out = ListBuilder::new(cx);
    for e in list_arg(&a[0])?.iter() {
        out.ticker.tick()?;
        if let Some(v) = opt_arg(&e)? {
            out.push((**v).clone())?;
        }
    }
    Ok(out.value())
}

pub(super) fn register(b: &mut Builder) {
    let v = since::OPTIONAL;
    b.at(
        v,
        "optional.of",
        &["(A) optional(A)"],
        optional_of,
        Cost::One,
    );
    b.at(
        v,
        "optional.ofNonZeroValue",
        &["(A) optional(A)"],
        optional_of_non_zero,
        Cost::One,
    );
    b.at(
        v,
        "optional.none",
        &["() optional(A)"],
        optional_none,
        Cost::One,
    );
    b.at(
        v,
        "hasValue",
        &["optional(A).() bool"],
        has_value,
        Cost::One,
    );
    b.at(v, "value", &["optional(A).() A"], value, Cost::One);
    b.at(
        v,
        "or",
        &["optional(A).(optional(A)) optional(A)"],
        or,
        Cost::One,
    );
    b.at(v, "orValue", &["optional(A).(A) A"], or_value, Cost::One);
    // cel-go v0.23 (Kubernetes 1.33) added these to the optional library.
    let v = since::OPTIONAL_V23;
    b.at(v, "first", &["list(A).() optional(A)"], first, Cost::One);
    b.at(v, "last", &["list(A).() optional(A)"], last, Cost::One);
    b.at_cx(
        v,
        "optional.unwrap",
        &["(list(optional(A))) list(A)"],
        unwrap_opt,
        Cost::One,
    );
    b.at_cx(
        v,
        "unwrapOpt",
        &["list(optional(A)).() list(A)"],
        unwrap_opt,
        Cost::One,
    );
}
