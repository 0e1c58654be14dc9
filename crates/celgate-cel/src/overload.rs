//! What the function table holds: every overload of a function with its signature, the
//! Kubernetes minor version that introduced it (per `base.go`), its implementation and its
//! runtime cost rule (cel-go's tracker plus Kubernetes' `cost.go`); the [`Builder`] each
//! library registers into; and what an implementation receives and returns.
//!
//! A call dispatches straight to the overload's function pointer: no indirection is added
//! between the evaluator and an implementation, wherever the implementation lives.

use std::collections::HashMap;

use super::ctx::Ctx;
use super::error::EvalError;
use super::meter::{Ticker, STEPS_PER_CHECK};
use super::types::{parse_signature, Signature};
use super::value::{List, Value};

/// A function of its arguments alone: bounded work, no sizeable allocation.
pub type Imp = for<'a> fn(&[Value<'a>]) -> Result<Value<'a>, EvalError>;
/// A function whose work or result grows with its input: it counts what it builds and
/// watches the deadline through the evaluation's [`Ctx`].
pub type CxImp = for<'a> fn(&mut Ctx<'_>, &[Value<'a>]) -> Result<Value<'a>, EvalError>;
pub type CostFn = for<'a> fn(&[Value<'a>]) -> u64;
/// A cost rule that walks its arguments (a list's elements): it may stop counting once the
/// cost passes what the meter has left, and it watches the deadline.
pub type WalkCostFn = for<'a> fn(&mut Ctx<'_>, &[Value<'a>]) -> Result<u64, EvalError>;
/// How a library adds a function: `add(name, [(signature, since)], imp, cost)`.
pub type Register<'r> = &'r mut dyn FnMut(&'static str, &[(&str, u16)], Imp, Cost);

/// An overload's implementation.
#[derive(Clone, Copy)]
pub enum Implementation {
    /// A function of its arguments alone.
    Pure(Imp),
    /// A function that also gets the evaluation's [`Ctx`].
    WithCtx(CxImp),
}

impl Implementation {
    /// Calls the implementation.
    #[inline(always)]
    pub fn call<'a>(&self, cx: &mut Ctx<'_>, args: &[Value<'a>]) -> Result<Value<'a>, EvalError> {
        match self {
            Implementation::Pure(f) => f(args),
            Implementation::WithCtx(f) => f(cx, args),
        }
    }

    /// Whether both are the same function.
    pub fn same(&self, other: &Implementation) -> bool {
        match (self, other) {
            (Implementation::Pure(a), Implementation::Pure(b)) => std::ptr::fn_addr_eq(*a, *b),
            (Implementation::WithCtx(a), Implementation::WithCtx(b)) => {
                std::ptr::fn_addr_eq(*a, *b)
            }
            _ => false,
        }
    }
}

/// How a call is charged once its arguments are known.
#[derive(Clone, Copy)]
pub enum Cost {
    /// 1, cel-go's default.
    One,
    /// ⌈factor · size(argument i)⌉.
    Traverse(usize, f64),
    /// A rule of the arguments alone.
    Custom(CostFn),
    /// A rule that walks the arguments.
    Walk(WalkCostFn),
}

/// `⌈x⌉` for a non-negative cost, as cel-go's `math.Ceil` on the float product (so that the
/// rounding of `size · factor` is cel-go's at any size), without a libm call on the hot path.
#[inline]
pub fn ceil(x: f64) -> u64 {
    // Below 2^62 the signed conversions, single instructions on x86-64 (the unsigned ones are
    // sequences), are exact.
    const SIGNED: f64 = 4_611_686_018_427_387_904.0;
    if (0.0..SIGNED).contains(&x) {
        let t = x as i64;
        return if (t as f64) < x {
            t as u64 + 1
        } else {
            t as u64
        };
    }
    // `as` saturates: NaN gives 0, and anything past u64::MAX gives u64::MAX.
    let t = x as u64;
    if (t as f64) < x {
        t.saturating_add(1)
    } else {
        t
    }
}

/// A size as a float, by the signed conversion (every size fits).
#[inline]
fn size_f64(n: u64) -> f64 {
    i64::try_from(n).map_or(n as f64, |n| n as f64)
}

impl Cost {
    /// The charge for a call with these arguments.
    #[inline]
    pub fn charge_in(&self, cx: &mut Ctx<'_>, args: &[Value<'_>]) -> Result<u64, EvalError> {
        Ok(match self {
            Cost::One => 1,
            Cost::Traverse(i, factor) => args
                .get(*i)
                .map_or(1, |v| ceil(size_f64(v.cost_size()) * factor)),
            Cost::Custom(f) => f(args),
            Cost::Walk(f) => f(cx, args)?,
        })
    }
}

/// One overload of a function.
pub struct Overload {
    /// Its signature.
    pub sig: Signature,
    /// The Kubernetes minor version (1.N) whose environment introduced it; 0 for always.
    pub since: u16,
    /// What it runs.
    pub imp: Implementation,
    /// What a call is charged.
    pub cost: Cost,
}

/// A function name and all its overloads, from every library that declares it (`compareTo`
/// exists for quantities and semvers).
pub struct Function {
    /// The name an expression calls it by (operators by cel-go's names: `_+_`).
    pub name: &'static str,
    /// Its overloads, from every library.
    pub overloads: Vec<Overload>,
}

/// Introduction versions of the options in `k8s.io/apiserver/pkg/cel/environment/base.go`.
pub mod since {
    pub const ALWAYS: u16 = 0;
    pub const AUTHZ: u16 = 27;
    pub const CROSS_NUMERIC: u16 = 28;
    pub const OPTIONAL: u16 = 28;
    pub const QUANTITY: u16 = 28;
    pub const STRINGS_V2: u16 = 29;
    pub const SETS: u16 = 29;
    pub const IP_CIDR: u16 = 30;
    pub const FORMAT: u16 = 31;
    pub const AUTHZ_SELECTORS: u16 = 31;
    pub const TWO_VAR_COMPREHENSIONS: u16 = 32;
    /// cel-go #1077 (v0.22.1): the second variable of a two-variable comprehension over a
    /// `dyn` range is typed `dyn`; cel-go v0.22.0 (Kubernetes 1.32) leaves it nil. Kubernetes
    /// 1.33 vendors cel-go v0.23.
    pub const TWO_VAR_DYN_RANGE_TYPED: u16 = 33;
    pub const SEMVER: u16 = 33;
    /// `containsCIDR` fixed (kubernetes#130496): the newer implementation of the same
    /// signatures. Recorded for the table's readers; no overload is gated on it yet.
    #[allow(dead_code)]
    pub const CONTAINS_CIDR_OVERLAPS: u16 = 33;
    pub const LISTS_V3: u16 = 34;
    pub const K8S_LISTS_V1: u16 = 37;
    /// cel-go v0.23: backquoted field names (``a.`b-c` ``); before, a backquote is text
    /// the lexer does not recognize.
    pub const ESCAPED_IDENTIFIERS: u16 = 33;
    /// cel-go v0.23: `first`, `last`, `optional.unwrap`/`unwrapOpt`, the `existsOne` macro.
    pub const OPTIONAL_V23: u16 = 33;
    /// cel-go v0.23: a comprehension whose range fails returns that error; before, a
    /// two-variable one reported `unsupported comprehension range type: *types.Err`.
    pub const FOLD_RANGE_ERROR: u16 = 33;
    /// `containsCIDR` masks the contained prefix (kubernetes/kubernetes#130450).
    pub const CONTAINS_CIDR_MASKED: u16 = 33;
    /// Offered only in an environment with the MutatingAdmissionPolicy patch types
    /// (`jsonpatch.escapeKey`): Kubernetes adds that library with them, whatever the version.
    pub const PATCH_TYPES: u16 = u16::MAX - 1;
    /// Never offered to the checker: an overload the checker substitutes itself (the
    /// set-membership form of `in`).
    pub const HIDDEN: u16 = u16::MAX;
}

/// The table being built: each library's `register()` adds its functions, and a
/// function's overloads keep the order they were added in.
pub struct Builder {
    fns: HashMap<&'static str, Function>,
}

impl Builder {
    pub(crate) fn new() -> Self {
        Builder {
            fns: HashMap::new(),
        }
    }

    /// The table built.
    pub(crate) fn into_functions(self) -> HashMap<&'static str, Function> {
        self.fns
    }

    pub fn add(&mut self, name: &'static str, sigs: &[(&str, u16)], imp: Imp, cost: Cost) {
        self.add_imp(name, sigs, Implementation::Pure(imp), cost);
    }

    fn add_imp(
        &mut self,
        name: &'static str,
        sigs: &[(&str, u16)],
        imp: Implementation,
        cost: Cost,
    ) {
        let f = self.fns.entry(name).or_insert_with(|| Function {
            name,
            overloads: Vec::new(),
        });
        f.overloads.extend(sigs.iter().map(|(s, v)| Overload {
            sig: parse_signature(s),
            since: *v,
            imp,
            cost,
        }));
    }

    pub fn always(&mut self, name: &'static str, sigs: &[&str], imp: Imp, cost: Cost) {
        self.at(since::ALWAYS, name, sigs, imp, cost);
    }

    pub fn at(&mut self, v: u16, name: &'static str, sigs: &[&str], imp: Imp, cost: Cost) {
        let sigs: Vec<(&str, u16)> = sigs.iter().map(|s| (*s, v)).collect();
        self.add(name, &sigs, imp, cost);
    }

    /// `add` for a function that needs the evaluation's context.
    pub fn add_cx(&mut self, name: &'static str, sigs: &[(&str, u16)], imp: CxImp, cost: Cost) {
        self.add_imp(name, sigs, Implementation::WithCtx(imp), cost);
    }

    /// `always` for a function that needs the evaluation's context.
    pub fn always_cx(&mut self, name: &'static str, sigs: &[&str], imp: CxImp, cost: Cost) {
        self.at_cx(since::ALWAYS, name, sigs, imp, cost);
    }

    /// `at` for a function that needs the evaluation's context.
    pub fn at_cx(&mut self, v: u16, name: &'static str, sigs: &[&str], imp: CxImp, cost: Cost) {
        let sigs: Vec<(&str, u16)> = sigs.iter().map(|s| (*s, v)).collect();
        self.add_imp(name, &sigs, Implementation::WithCtx(imp), cost);
    }
}

// ---------------------------------------------------------------------------------------
// What an implementation receives and returns

pub type R<'a> = Result<Value<'a>, EvalError>;

#[inline]
pub fn no_overload<'a>() -> R<'a> {
    Err(EvalError::no_such_overload())
}

#[inline]
pub fn str_arg<'v>(v: &'v Value<'_>) -> Result<&'v str, EvalError> {
    v.as_str().ok_or_else(EvalError::no_such_overload)
}

/// The elements of a list argument, or a no-such-overload error.
#[inline]
pub fn list_arg<'v, 'a>(v: &'v Value<'a>) -> Result<&'v List<'a>, EvalError> {
    match v {
        Value::List(l) => Ok(l),
        _ => Err(EvalError::no_such_overload()),
    }
}

#[inline]
pub fn int_arg(v: &Value<'_>) -> Result<i64, EvalError> {
    match v {
        Value::Int(i) => Ok(*i),
        _ => Err(EvalError::no_such_overload()),
    }
}

// ---------------------------------------------------------------------------------------
// Cost rules shared by several libraries

/// One traversal of a value as Kubernetes' `traversalCost` computes it (`cost.go`): a string
/// or bytes costs `⌊0.1 · bytes⌋` (Go's `uint64` conversion truncates, and a string counts its
/// UTF-8 bytes, not its code points), a list the sum over its elements, a map the sum over its
/// keys and values, anything else 1. The rule of `indexOf`, `lastIndexOf`, `isSorted`, `sum`,
/// `min` and `max`, charged on the receiver.
///
/// Working this out walks the list (as Kubernetes does), which a concatenated list can make
/// as long as any size: the walk stops once the cost is past what the meter has left (any
/// such cost cancels alike) and watches the deadline (elements may cost 0).
pub fn cost_traversal(cx: &mut Ctx<'_>, a: &[Value<'_>]) -> Result<u64, EvalError> {
    fn text(len: usize) -> u64 {
        // Go: `uint64(float64(len(s)) * common.StringTraversalCostFactor)`.
        (len as f64 * 0.1) as u64
    }
    fn walk(v: &Value<'_>, ticker: &mut Ticker, cap: u64) -> Result<u64, EvalError> {
        Ok(match v {
            Value::String(s) => text(s.as_str().len()),
            Value::Bytes(b) => text(b.len()),
            Value::List(l) => {
                let mut sum = 0u64;
                for e in l.iter() {
                    ticker.tick()?;
                    sum = sum.saturating_add(walk(&e, ticker, cap)?);
                    if sum > cap {
                        break;
                    }
                }
                sum
            }
            Value::Map(m) => {
                let mut sum = 0u64;
                for (k, v) in m.entries() {
                    ticker.tick()?;
                    sum = sum
                        .saturating_add(walk(&k, ticker, cap)?)
                        .saturating_add(walk(&v, ticker, cap)?);
                    if sum > cap {
                        break;
                    }
                }
                sum
            }
            _ => 1,
        })
    }
    let cap = cx.remaining_cost().saturating_add(1);
    let mut ticker = cx.ticker(STEPS_PER_CHECK);
    match a.first() {
        Some(v) => walk(v, &mut ticker, cap),
        None => Ok(0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ceil_is_floats_ceiling() {
        for n in 0..100_000u64 {
            let x = n as f64 * 0.1;
            assert_eq!(ceil(x), x.ceil() as u64, "{n}");
        }
        assert_eq!(ceil(3.0 * 0.1), 1);
        assert_eq!(ceil(30.0 * 0.1), 3);
        assert_eq!(ceil(0.0), 0);
        assert_eq!(ceil(f64::NAN), 0);
        assert_eq!(ceil(1e30), u64::MAX);
        assert_eq!(ceil(-0.5), 0);
        // Either side of the switch to unsigned conversions.
        let below = (1u64 << 62) - 1024; // the largest float under 2^62
        assert_eq!(ceil(below as f64), below);
        assert_eq!(ceil((1u64 << 62) as f64), 1 << 62);
        assert_eq!(ceil(9_223_372_036_854_775_808.0), 9_223_372_036_854_775_808);
        assert_eq!(size_f64(u64::MAX), u64::MAX as f64);
    }
}
