//! The operators that answer a bool: equality (`==`, `!=`), ordering (`<`, `<=`, `>`, `>=`,
//! across numeric kinds since Kubernetes 1.28), membership (`in`) and negation (`!`).

use std::cmp::Ordering;

use crate::ctx::Ctx;
use crate::error::EvalError;
use crate::meter::{Ticker, STEPS_PER_CHECK};
use crate::overload::{no_overload, since, Builder, Cost, Imp, R};
use crate::value::{List, Value};

pub fn not<'a>(a: &[Value<'a>]) -> R<'a> {
    match &a[0] {
        Value::Bool(b) => Ok(Value::Bool(!b)),
        _ => no_overload(),
    }
}

pub fn eq<'a>(cx: &mut Ctx<'_>, a: &[Value<'a>]) -> R<'a> {
    Ok(Value::Bool(equal(cx, &a[0], &a[1])?))
}

pub fn ne<'a>(cx: &mut Ctx<'_>, a: &[Value<'a>]) -> R<'a> {
    Ok(Value::Bool(!equal(cx, &a[0], &a[1])?))
}

/// CEL equality. Comparing lists or maps walks them, whatever `==` was charged (cel-go charges
/// by the outer sizes: `[big] == [big]` costs 1), so that walk watches the deadline.
///
/// cel-go answers `x == y` with `x.Equal(y)` once neither is null, and the Kubernetes library
/// types answer `no such overload` for a value of another type (`dyn(quantity('1')) == 1`),
/// the authorizer types for any value; the other way round (`1 == dyn(quantity('1'))`) is
/// false, as cel-go's own types answer, a protobuf message (`google.protobuf.Empty`) included.
#[inline]
pub fn equal(cx: &Ctx<'_>, x: &Value<'_>, y: &Value<'_>) -> Result<bool, EvalError> {
    match (x, y) {
        (Value::Opaque(_), Value::Null) => Ok(false),
        (Value::Opaque(a), other) => match other {
            Value::Opaque(b) if a.comparable() && a.type_name() == b.type_name() => {
                Ok(a.equals(b.as_ref()))
            }
            _ if a.unequal_to_other_types() => Ok(false),
            _ => Err(EvalError::no_such_overload()),
        },
        (Value::List(_), Value::List(_))
        | (Value::Map(_), Value::Map(_))
        | (Value::Optional(_), Value::Optional(_)) => {
            x.equals_watching(y, &mut cx.ticker(STEPS_PER_CHECK))
        }
        _ => Ok(x.equals(y)),
    }
}

/// Whether `list` has an element equal to `x`, watching the deadline.
pub fn list_contains(cx: &Ctx<'_>, list: &List<'_>, x: &Value<'_>) -> Result<bool, EvalError> {
    list_contains_ticking(list, x, &mut cx.ticker(STEPS_PER_CHECK))
}

/// `list_contains` within a longer walk, sharing its ticker.
pub fn list_contains_ticking(
    list: &List<'_>,
    x: &Value<'_>,
    ticker: &mut Ticker,
) -> Result<bool, EvalError> {
    for e in list.iter() {
        ticker.tick()?;
        if e.equals_watching(x, ticker)? {
            return Ok(true);
        }
    }
    Ok(false)
}

fn order<'a>(a: &[Value<'a>], test: fn(Ordering) -> bool) -> R<'a> {
    match a[0].compare(&a[1])? {
        Some(o) => Ok(Value::Bool(test(o))),
        // cel-go's `Double.Compare` refuses a NaN on either side.
        None if a
            .iter()
            .any(|v| matches!(v, Value::Double(d) if d.is_nan())) =>
        {
            Err(EvalError::new("NaN values cannot be ordered"))
        }
        None => Ok(Value::Bool(false)),
    }
}

pub fn lt<'a>(a: &[Value<'a>]) -> R<'a> {
    order(a, |o| o == Ordering::Less)
}

pub fn le<'a>(a: &[Value<'a>]) -> R<'a> {
    order(a, |o| o != Ordering::Greater)
}

pub fn gt<'a>(a: &[Value<'a>]) -> R<'a> {
    order(a, |o| o == Ordering::Greater)
}

pub fn ge<'a>(a: &[Value<'a>]) -> R<'a> {
    order(a, |o| o != Ordering::Less)
}

pub fn in_<'a>(cx: &mut Ctx<'_>, a: &[Value<'a>]) -> R<'a> {
    match &a[1] {
        Value::List(l) => Ok(Value::Bool(list_contains(cx, l, &a[0])?)),
        Value::Map(m) => Ok(Value::Bool(m.contains_key(&a[0]))),
        _ => no_overload(),
    }
}

/// The ordering overloads in cel-go's declaration order (its checker binds a free operand
/// type to the first that matches), the cross-numeric ones from Kubernetes 1.28.
const ORDERED: &[(&str, u16)] = &[
    ("(bool, bool) bool", since::ALWAYS),
    ("(int, int) bool", since::ALWAYS),
    ("(int, double) bool", since::CROSS_NUMERIC),
    ("(int, uint) bool", since::CROSS_NUMERIC),
    ("(uint, uint) bool", since::ALWAYS),
    ("(uint, double) bool", since::CROSS_NUMERIC),
    ("(uint, int) bool", since::CROSS_NUMERIC),
    ("(double, double) bool", since::ALWAYS),
    ("(double, int) bool", since::CROSS_NUMERIC),
    ("(double, uint) bool", since::CROSS_NUMERIC),
    ("(string, string) bool", since::ALWAYS),
    ("(bytes, bytes) bool", since::ALWAYS),
    ("(timestamp, timestamp) bool", since::ALWAYS),
    ("(duration, duration) bool", since::ALWAYS),
];

fn ordering(b: &mut Builder, name: &'static str, imp: Imp) {
    b.add(name, ORDERED, imp, Cost::Custom(cost_compare));
}

/// `==` and string/bytes ordering: ⌈0.1 · min(size(a), size(b))⌉.
fn cost_compare(a: &[Value<'_>]) -> u64 {
    let min = a[0].cost_size().min(a[1].cost_size());
    (min as f64 * 0.1).ceil() as u64
}

fn cost_in(a: &[Value<'_>]) -> u64 {
    match &a[1] {
        Value::List(l) => l.len() as u64,
        _ => 1,
    }
}

pub(super) fn register(b: &mut Builder) {
    b.always("!_", &["(bool) bool"], not, Cost::One);
    b.always_cx("_==_", &["(A, A) bool"], eq, Cost::Custom(cost_compare));
    b.always_cx("_!=_", &["(A, A) bool"], ne, Cost::Custom(cost_compare));
    ordering(b, "_<_", lt);
    ordering(b, "_<=_", le);
    ordering(b, "_>_", gt);
    ordering(b, "_>=_", ge);
    b.always_cx(
        "@in",
        &["(A, list(A)) bool", "(A, map(A, B)) bool"],
        in_,
        Cost::Custom(cost_in),
    );
    // cel-go's `OptOptimize` turns `x in <constant list of scalars>` into a set lookup that
    // its cost tracker does not see: the checker substitutes this overload, charged nothing.
    b.add_cx(
        "@in",
        &[("(A, list(A)) bool", since::HIDDEN)],
        in_,
        Cost::Custom(|_| 0),
    );
}
