//! The arithmetic operators: `+` (numbers, strings, bytes, lists, durations, timestamps),
//! `-`, `*`, `/`, `%` and unary `-`, with cel-go's overflow errors.

use crate::ctx::Ctx;
use crate::error::EvalError;
use crate::meter::STEPS_PER_CHECK;
use crate::overload::{no_overload, Builder, Cost, R};
use crate::value::{List, Value};

use super::time::timestamp_add;

fn overflow<'a>(kind: &str) -> R<'a> {
    Err(EvalError::new(match kind {
        "uint" => "unsigned integer overflow",
        "duration" | "timestamp" => "integer overflow",
        _ => "integer overflow",
    }))
}

/// `+`. Strings and bytes are copied, their bytes counted against the memory ceiling; lists
/// are joined as a view (cel-go charges the concatenation 1, so it must not copy).
pub fn add<'a>(cx: &mut Ctx<'_>, a: &[Value<'a>]) -> R<'a> {
    use Value::*;
    match (&a[0], &a[1]) {
        (Int(x), Int(y)) => x
            .checked_add(*y)
            .map(Int)
            .map_or_else(|| overflow("int"), Ok),
        (Uint(x), Uint(y)) => x
            .checked_add(*y)
            .map(Uint)
            .map_or_else(|| overflow("uint"), Ok),
        (Double(x), Double(y)) => Ok(Double(x + y)),
        (String(x), String(y)) => {
            let len = x.as_str().len() + y.as_str().len();
            cx.alloc(len)?;
            let mut s = std::string::String::with_capacity(len);
            s.push_str(x.as_str());
            s.push_str(y.as_str());
            Ok(Value::string(s))
        }
        (Bytes(x), Bytes(y)) => {
            cx.alloc(x.len() + y.len())?;
            Ok(Bytes([x.as_ref(), y.as_ref()].concat().into()))
        }
        (List(x), List(y)) => {
            if let crate::value::List::Typed(t) = x {
                // A CRD set or map list on the left: union or merge by key (copied, counted).
                cx.alloc_values(t.items.len().saturating_add(y.len()))?;
                if let Some(l) = x.typed_concat(y) {
                    return Ok(Value::List(l));
                }
            }
            if y.is_empty() {
                return Ok(a[0].clone());
            }
            if x.is_empty() {
                return Ok(a[1].clone());
            }
            concat_lists(cx, x, y)
        }
        (Duration(x), Duration(y)) => x
            .checked_add(*y)
            .map(Duration)
            .map_or_else(|| overflow("duration"), Ok),
        (Timestamp(t), Duration(d)) | (Duration(d), Timestamp(t)) => timestamp_add(*t, *d),
        _ => no_overload(),
    }
}

/// The bytes a concatenation view takes.
const CONCAT_BYTES: usize = 64;

/// `x + y` for lists: a view of both, or, when the view would be too deep or longer than any
/// size, a flat copy, every slot of which counts against the memory ceiling.
fn concat_lists<'a>(cx: &mut Ctx<'_>, x: &List<'a>, y: &List<'a>) -> R<'a> {
    if let Some(view) = List::concat(x.clone(), y.clone()) {
        cx.alloc(CONCAT_BYTES)?;
        return Ok(Value::List(view));
    }
    let len = x
        .len()
        .checked_add(y.len())
        .ok_or_else(EvalError::memory_limit)?;
    cx.alloc_values(len)?;
    let mut ticker = cx.ticker(STEPS_PER_CHECK);
    let mut v = Vec::with_capacity(len);
    for e in x.iter().chain(y.iter()) {
        ticker.tick()?;
        v.push(e);
    }
    Ok(Value::list(v))
}

pub fn sub<'a>(a: &[Value<'a>]) -> R<'a> {
    use Value::*;
    match (&a[0], &a[1]) {
        (Int(x), Int(y)) => x
            .checked_sub(*y)
            .map(Int)
            .map_or_else(|| overflow("int"), Ok),
        (Uint(x), Uint(y)) => x
            .checked_sub(*y)
            .map(Uint)
            .map_or_else(|| overflow("uint"), Ok),
        (Double(x), Double(y)) => Ok(Double(x - y)),
        (Duration(x), Duration(y)) => x
            .checked_sub(*y)
            .map(Duration)
            .map_or_else(|| overflow("duration"), Ok),
        (Timestamp(t), Duration(d)) => match d.checked_neg() {
            Some(n) => timestamp_add(*t, n),
            None => overflow("timestamp"),
        },
        (Timestamp(x), Timestamp(y)) => {
            let nanos = x.as_nanos() - y.as_nanos();
            i64::try_from(nanos)
                .map(Duration)
                .map_or_else(|_| overflow("duration"), Ok)
        }
        _ => no_overload(),
    }
}

pub fn mul<'a>(a: &[Value<'a>]) -> R<'a> {
    use Value::*;
    match (&a[0], &a[1]) {
        (Int(x), Int(y)) => x
            .checked_mul(*y)
            .map(Int)
            .map_or_else(|| overflow("int"), Ok),
        (Uint(x), Uint(y)) => x
            .checked_mul(*y)
            .map(Uint)
            .map_or_else(|| overflow("uint"), Ok),
        (Double(x), Double(y)) => Ok(Double(x * y)),
        _ => no_overload(),
    }
}

pub fn div<'a>(a: &[Value<'a>]) -> R<'a> {
    use Value::*;
    match (&a[0], &a[1]) {
        (Int(_), Int(0)) | (Uint(_), Uint(0)) => Err(EvalError::new("division by zero")),
        (Int(x), Int(y)) => x
            .checked_div(*y)
            .map(Int)
            .map_or_else(|| overflow("int"), Ok),
        (Uint(x), Uint(y)) => Ok(Uint(x / y)),
        (Double(x), Double(y)) => Ok(Double(x / y)),
        _ => no_overload(),
    }
}

pub fn rem<'a>(a: &[Value<'a>]) -> R<'a> {
    use Value::*;
    match (&a[0], &a[1]) {
        (Int(_), Int(0)) | (Uint(_), Uint(0)) => Err(EvalError::new("modulus by zero")),
        (Int(x), Int(y)) => x
            .checked_rem(*y)
            .map(Int)
            .map_or_else(|| overflow("int"), Ok),
        (Uint(x), Uint(y)) => Ok(Uint(x % y)),
        _ => no_overload(),
    }
}

pub fn neg<'a>(a: &[Value<'a>]) -> R<'a> {
    match &a[0] {
        Value::Int(x) => x
            .checked_neg()
            .map(Value::Int)
            .map_or_else(|| overflow("int"), Ok),
        Value::Double(x) => Ok(Value::Double(-x)),
        _ => no_overload(),
    }
}

/// String and bytes concatenation: ⌈0.1 · (size(a) + size(b))⌉. cel-go prices it by the
/// checked overload id, so it holds whatever the operands turn out to be (an operand that
/// failed counts 1); the other `_+_` overloads cost 1.
fn cost_concat(a: &[Value<'_>]) -> u64 {
    ((a[0].cost_size() + a[1].cost_size()) as f64 * 0.1).ceil() as u64
}

pub(super) fn register(b: &mut Builder) {
    // Every operator's overloads in cel-go's declaration order: its checker binds a free
    // operand type to the first overload that matches (`{}.transformMap(k, v, v + dyn(x))`
    // is `map(dyn, bytes)`). `_+_` is priced per overload.
    b.always_cx(
        "_+_",
        &["(bytes, bytes) bytes"],
        add,
        Cost::Custom(cost_concat),
    );
    b.always_cx(
        "_+_",
        &[
            "(double, double) double",
            "(duration, duration) duration",
            "(duration, timestamp) timestamp",
            "(timestamp, duration) timestamp",
            "(int, int) int",
            "(list(A), list(A)) list(A)",
        ],
        add,
        Cost::One,
    );
    b.always_cx(
        "_+_",
        &["(string, string) string"],
        add,
        Cost::Custom(cost_concat),
    );
    b.always_cx("_+_", &["(uint, uint) uint"], add, Cost::One);
    b.always(
        "_-_",
        &[
            "(double, double) double",
            "(duration, duration) duration",
            "(int, int) int",
            "(timestamp, duration) timestamp",
            "(timestamp, timestamp) duration",
            "(uint, uint) uint",
        ],
        sub,
        Cost::One,
    );
    b.always(
        "_*_",
        &[
            "(double, double) double",
            "(int, int) int",
            "(uint, uint) uint",
        ],
        mul,
        Cost::One,
    );
    b.always(
        "_/_",
        &[
            "(double, double) double",
            "(int, int) int",
            "(uint, uint) uint",
        ],
        div,
        Cost::One,
    );
    b.always(
        "_%_",
        &["(int, int) int", "(uint, uint) uint"],
        rem,
        Cost::One,
    );
    b.always("-_", &["(double) double", "(int) int"], neg, Cost::One);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::meter::Meter;
    use crate::regex::RegexCache;
    use crate::stdlib::lists::size;
    use crate::value::MAX_CONCAT_DEPTH;

    #[test]
    fn concatenation_is_a_view_until_too_deep_then_a_counted_copy() {
        let mut meter = Meter::default();
        let mut regexes = RegexCache::default();
        let mut cx = Ctx::new(&mut meter, &mut regexes);
        let mut l = Value::list(vec![Value::Int(0)]);
        for i in 1..=150 {
            l = add(&mut cx, &[l, Value::list(vec![Value::Int(i)])]).unwrap();
            let Value::List(list) = &l else { panic!() };
            assert!(list.concat_depth() <= MAX_CONCAT_DEPTH);
        }
        let Value::List(list) = &l else { panic!() };
        assert_eq!(list.len(), 151);
        assert!(list
            .iter()
            .enumerate()
            .all(|(i, v)| v.equals(&Value::Int(i as i64))));
        assert!((0..151).all(|i| list.get(i).unwrap().equals(&Value::Int(i as i64))));
        assert!(list.get(151).is_none());
        // Two copies of at most 150 slots, plus the views.
        assert!(
            meter.memory < 2 * 150 * 32 + 150 * 64 + 1024,
            "{}",
            meter.memory
        );
    }

    #[test]
    fn a_concatenation_longer_than_an_int_is_refused() {
        let mut meter = Meter::default();
        let mut regexes = RegexCache::default();
        let mut cx = Ctx::new(&mut meter, &mut regexes);
        let mut l = Value::list(vec![Value::Int(0); 1024]);
        let mut doublings = 0;
        let err = loop {
            match add(&mut cx, &[l.clone(), l.clone()]) {
                Ok(v) => l = v,
                Err(e) => break e,
            }
            doublings += 1;
        };
        assert_eq!(
            doublings, 52,
            "1024 · 2^52 = 2^62 fits an int, 2^63 does not"
        );
        assert!(err.is_cancelled());
        assert_eq!(size(&[l]).unwrap().debug_string(), (1i64 << 62).to_string());
    }
}
