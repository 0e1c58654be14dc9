//! The function table: every function an expression may call, with its typed overloads
//! (each gated by the Kubernetes minor version that introduced it, per `base.go`), its
//! implementation and its runtime cost rule (cel-go's tracker plus Kubernetes' `cost.go`).

use std::collections::HashMap;
use std::sync::OnceLock;

use super::error::EvalError;
use super::eval::{Ctx, Ticker, STEPS_PER_CHECK};
use super::ext;
use super::functions as f;
use super::types::{parse_signature, Signature};
use super::value::Value;

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
    Pure(Imp),
    WithCtx(CxImp),
}

impl Implementation {
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
    Custom(CostFn),
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

pub struct Overload {
    pub sig: Signature,
    /// The Kubernetes minor version (1.N) whose environment introduced it; 0 for always.
    pub since: u16,
    pub imp: Implementation,
    pub cost: Cost,
}

/// A function name and all its overloads, from every library that declares it (`compareTo`
/// exists for quantities and semvers).
pub struct Function {
    pub name: &'static str,
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
    pub const SEMVER: u16 = 33;
    pub const LISTS_V3: u16 = 34;
    pub const K8S_LISTS_V1: u16 = 37;
}

struct Builder {
    fns: HashMap<&'static str, Function>,
}

impl Builder {
    fn add(&mut self, name: &'static str, sigs: &[(&str, u16)], imp: Imp, cost: Cost) {
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

    fn always(&mut self, name: &'static str, sigs: &[&str], imp: Imp, cost: Cost) {
        self.at(since::ALWAYS, name, sigs, imp, cost);
    }

    fn at(&mut self, v: u16, name: &'static str, sigs: &[&str], imp: Imp, cost: Cost) {
        let sigs: Vec<(&str, u16)> = sigs.iter().map(|s| (*s, v)).collect();
        self.add(name, &sigs, imp, cost);
    }

    /// `add` for a function that needs the evaluation's context.
    fn add_cx(&mut self, name: &'static str, sigs: &[(&str, u16)], imp: CxImp, cost: Cost) {
        self.add_imp(name, sigs, Implementation::WithCtx(imp), cost);
    }

    /// `always` for a function that needs the evaluation's context.
    fn always_cx(&mut self, name: &'static str, sigs: &[&str], imp: CxImp, cost: Cost) {
        self.at_cx(since::ALWAYS, name, sigs, imp, cost);
    }

    /// `at` for a function that needs the evaluation's context.
    fn at_cx(&mut self, v: u16, name: &'static str, sigs: &[&str], imp: CxImp, cost: Cost) {
        let sigs: Vec<(&str, u16)> = sigs.iter().map(|s| (*s, v)).collect();
        self.add_imp(name, &sigs, Implementation::WithCtx(imp), cost);
    }
}

/// All functions, by name.
pub fn functions() -> &'static HashMap<&'static str, Function> {
    static TABLE: OnceLock<HashMap<&'static str, Function>> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut b = Builder {
            fns: HashMap::new(),
        };
        standard(&mut b);
        strings(&mut b);
        lists_and_sets(&mut b);
        optional(&mut b);
        super::k8s::register(&mut |name, sigs, imp, cost| b.add(name, sigs, imp, cost));
        b.fns
    })
}

const ORDERED: &[&str] = &[
    "(bool, bool) bool",
    "(int, int) bool",
    "(uint, uint) bool",
    "(double, double) bool",
    "(string, string) bool",
    "(bytes, bytes) bool",
    "(timestamp, timestamp) bool",
    "(duration, duration) bool",
];
const CROSS_NUMERIC: &[&str] = &[
    "(int, uint) bool",
    "(int, double) bool",
    "(uint, int) bool",
    "(uint, double) bool",
    "(double, int) bool",
    "(double, uint) bool",
];

fn ordering(b: &mut Builder, name: &'static str, imp: Imp) {
    let mut sigs: Vec<(&str, u16)> = ORDERED.iter().map(|s| (*s, since::ALWAYS)).collect();
    sigs.extend(CROSS_NUMERIC.iter().map(|s| (*s, since::CROSS_NUMERIC)));
    b.add(name, &sigs, imp, Cost::Custom(cost_compare));
}

/// `==` and string/bytes ordering: ⌈0.1 · min(size(a), size(b))⌉.
fn cost_compare(a: &[Value<'_>]) -> u64 {
    let min = a[0].cost_size().min(a[1].cost_size());
    (min as f64 * 0.1).ceil() as u64
}

fn cost_add(a: &[Value<'_>]) -> u64 {
    match (&a[0], &a[1]) {
        (Value::String(_), Value::String(_)) | (Value::Bytes(_), Value::Bytes(_)) => {
            ((a[0].cost_size() + a[1].cost_size()) as f64 * 0.1).ceil() as u64
        }
        _ => 1,
    }
}

fn cost_in(a: &[Value<'_>]) -> u64 {
    match &a[1] {
        Value::List(l) => l.len() as u64,
        _ => 1,
    }
}

/// `matches`, `find`, `findAll`: ⌈0.1·(1+size(str))⌉ × ⌈0.25·size(regex)⌉.
pub fn cost_regex(a: &[Value<'_>]) -> u64 {
    regex_cost(a[0].cost_size(), a[1].cost_size())
}

pub fn regex_cost(str_size: u64, pattern_size: u64) -> u64 {
    let s = ((1 + str_size) as f64 * 0.1).ceil() as u64;
    let r = (pattern_size as f64 * 0.25).ceil() as u64;
    s * r
}

fn cost_contains(a: &[Value<'_>]) -> u64 {
    let s = (a[0].cost_size() as f64 * 0.1).ceil() as u64;
    let sub = (a[1].cost_size() as f64 * 0.1).ceil() as u64;
    s * sub
}

fn cost_string_conversion(a: &[Value<'_>]) -> u64 {
    match &a[0] {
        Value::String(_) | Value::Bytes(_) => (a[0].cost_size() as f64 * 0.1).ceil() as u64,
        _ => 1,
    }
}

/// One traversal of a list: 1 per scalar element, 0.1·len per string or bytes element,
/// nested lists and maps traversed recursively (Kubernetes `cost.go`); 0.1·len for a string.
///
/// Working this out walks the list (as Kubernetes does), which a concatenated list can make
/// as long as any size: the walk stops once the cost is past what the meter has left (any
/// such cost cancels alike) and watches the deadline (elements may cost 0).
pub fn cost_traversal(cx: &mut Ctx<'_>, a: &[Value<'_>]) -> Result<u64, EvalError> {
    fn walk(v: &Value<'_>, ticker: &mut Ticker, cap: f64) -> Result<f64, EvalError> {
        Ok(match v {
            Value::String(_) | Value::Bytes(_) => 0.1 * v.cost_size() as f64,
            Value::List(l) => walk_all(l.iter(), ticker, cap)?,
            Value::Map(m) => {
                let mut sum = 0.0;
                for (k, v) in m.entries() {
                    ticker.tick()?;
                    sum += walk(&k, ticker, cap)? + walk(&v, ticker, cap)?;
                    if sum > cap {
                        break;
                    }
                }
                sum
            }
            _ => 1.0,
        })
    }
    fn walk_all<'a>(
        items: impl Iterator<Item = Value<'a>>,
        ticker: &mut Ticker,
        cap: f64,
    ) -> Result<f64, EvalError> {
        let mut sum = 0.0;
        for e in items {
            ticker.tick()?;
            sum += walk(&e, ticker, cap)?;
            if sum > cap {
                break;
            }
        }
        Ok(sum)
    }
    let cap = cx.remaining_cost().saturating_add(1) as f64;
    let mut ticker = cx.ticker(STEPS_PER_CHECK);
    Ok(match &a[0] {
        Value::String(_) => (0.1 * a[0].cost_size() as f64).ceil() as u64,
        Value::List(l) => walk_all(l.iter(), &mut ticker, cap)?.ceil().max(1.0) as u64,
        _ => 1,
    })
}

fn standard(b: &mut Builder) {
    b.always_cx(
        "_+_",
        &[
            "(int, int) int",
            "(uint, uint) uint",
            "(double, double) double",
            "(string, string) string",
            "(bytes, bytes) bytes",
            "(list(A), list(A)) list(A)",
            "(duration, duration) duration",
            "(timestamp, duration) timestamp",
            "(duration, timestamp) timestamp",
        ],
        f::add,
        Cost::Custom(cost_add),
    );
    b.always(
        "_-_",
        &[
            "(int, int) int",
            "(uint, uint) uint",
            "(double, double) double",
            "(duration, duration) duration",
            "(timestamp, duration) timestamp",
            "(timestamp, timestamp) duration",
        ],
        f::sub,
        Cost::One,
    );
    b.always(
        "_*_",
        &[
            "(int, int) int",
            "(uint, uint) uint",
            "(double, double) double",
        ],
        f::mul,
        Cost::One,
    );
    b.always(
        "_/_",
        &[
            "(int, int) int",
            "(uint, uint) uint",
            "(double, double) double",
        ],
        f::div,
        Cost::One,
    );
    b.always(
        "_%_",
        &["(int, int) int", "(uint, uint) uint"],
        f::rem,
        Cost::One,
    );
    b.always("-_", &["(int) int", "(double) double"], f::neg, Cost::One);
    b.always("!_", &["(bool) bool"], f::not, Cost::One);
    b.always_cx("_==_", &["(A, A) bool"], f::eq, Cost::Custom(cost_compare));
    b.always_cx("_!=_", &["(A, A) bool"], f::ne, Cost::Custom(cost_compare));
    ordering(b, "_<_", f::lt);
    ordering(b, "_<=_", f::le);
    ordering(b, "_>_", f::gt);
    ordering(b, "_>=_", f::ge);
    b.always_cx(
        "@in",
        &["(A, list(A)) bool", "(A, map(A, B)) bool"],
        f::in_,
        Cost::Custom(cost_in),
    );
    b.always(
        "size",
        &[
            "(string) int",
            "(bytes) int",
            "(list(A)) int",
            "(map(A, B)) int",
            "string.() int",
            "bytes.() int",
            "list(A).() int",
            "map(A, B).() int",
        ],
        f::size,
        Cost::One,
    );
    b.always(
        "contains",
        &["string.(string) bool"],
        f::contains,
        Cost::Custom(cost_contains),
    );
    b.always(
        "startsWith",
        &["string.(string) bool"],
        f::starts_with,
        Cost::Traverse(0, 0.1),
    );
    b.always(
        "endsWith",
        &["string.(string) bool"],
        f::ends_with,
        Cost::Traverse(0, 0.1),
    );
    b.always_cx(
        "matches",
        &["(string, string) bool", "string.(string) bool"],
        f::matches,
        Cost::Custom(cost_regex),
    );
    b.always(
        "int",
        &[
            "(int) int",
            "(uint) int",
            "(double) int",
            "(string) int",
            "(timestamp) int",
            "(duration) int",
        ],
        f::to_int,
        Cost::One,
    );
    b.always(
        "uint",
        &[
            "(uint) uint",
            "(int) uint",
            "(double) uint",
            "(string) uint",
        ],
        f::to_uint,
        Cost::One,
    );
    b.always(
        "double",
        &[
            "(double) double",
            "(int) double",
            "(uint) double",
            "(string) double",
        ],
        f::to_double,
        Cost::One,
    );
    let mut string_sigs: Vec<(&str, u16)> = [
        "(string) string",
        "(bool) string",
        "(int) string",
        "(uint) string",
        "(double) string",
        "(bytes) string",
        "(timestamp) string",
        "(duration) string",
    ]
    .iter()
    .map(|s| (*s, since::ALWAYS))
    .collect();
    string_sigs.extend([
        ("(net.IP) string", since::IP_CIDR),
        ("(net.CIDR) string", since::IP_CIDR),
    ]);
    b.add(
        "string",
        &string_sigs,
        f::to_string,
        Cost::Custom(cost_string_conversion),
    );
    b.always(
        "bytes",
        &["(bytes) bytes", "(string) bytes"],
        f::to_bytes,
        Cost::Custom(cost_string_conversion),
    );
    b.always(
        "bool",
        &["(bool) bool", "(string) bool"],
        f::to_bool,
        Cost::One,
    );
    b.always("dyn", &["(A) dyn"], f::dyn_, Cost::One);
    b.always("type", &["(A) type(A)"], f::type_of, Cost::One);
    b.always(
        "duration",
        &["(duration) duration", "(string) duration", "(int) duration"],
        f::to_duration,
        Cost::One,
    );
    b.always(
        "timestamp",
        &[
            "(timestamp) timestamp",
            "(string) timestamp",
            "(int) timestamp",
        ],
        f::to_timestamp,
        Cost::One,
    );
    let ts_only: [(&'static str, Imp); 6] = [
        ("getFullYear", f::get_full_year),
        ("getMonth", f::get_month),
        ("getDayOfYear", f::get_day_of_year),
        ("getDayOfMonth", f::get_day_of_month),
        ("getDate", f::get_date),
        ("getDayOfWeek", f::get_day_of_week),
    ];
    for (name, imp) in ts_only {
        b.always(
            name,
            &["timestamp.() int", "timestamp.(string) int"],
            imp,
            Cost::One,
        );
    }
    let both: [(&'static str, Imp); 4] = [
        ("getHours", f::get_hours),
        ("getMinutes", f::get_minutes),
        ("getSeconds", f::get_seconds),
        ("getMilliseconds", f::get_milliseconds),
    ];
    for (name, imp) in both {
        b.always(
            name,
            &[
                "timestamp.() int",
                "timestamp.(string) int",
                "duration.() int",
            ],
            imp,
            Cost::One,
        );
    }
}

fn strings(b: &mut Builder) {
    b.always_cx("charAt", &["string.(int) string"], ext::char_at, Cost::One);
    b.add_cx(
        "indexOf",
        &[
            ("string.(string) int", since::ALWAYS),
            ("string.(string, int) int", since::ALWAYS),
            ("list(A).(A) int", since::ALWAYS),
        ],
        ext::index_of,
        Cost::Walk(cost_traversal),
    );
    b.add_cx(
        "lastIndexOf",
        &[
            ("string.(string) int", since::ALWAYS),
            ("string.(string, int) int", since::ALWAYS),
            ("list(A).(A) int", since::ALWAYS),
        ],
        ext::last_index_of,
        Cost::Walk(cost_traversal),
    );
    b.always_cx(
        "lowerAscii",
        &["string.() string"],
        ext::lower_ascii,
        Cost::Traverse(0, 0.1),
    );
    b.always_cx(
        "upperAscii",
        &["string.() string"],
        ext::upper_ascii,
        Cost::Traverse(0, 0.1),
    );
    b.always_cx(
        "replace",
        &[
            "string.(string, string) string",
            "string.(string, string, int) string",
        ],
        ext::replace,
        Cost::Traverse(0, 0.2),
    );
    b.always_cx(
        "split",
        &[
            "string.(string) list(string)",
            "string.(string, int) list(string)",
        ],
        ext::split,
        Cost::Traverse(0, 0.2),
    );
    b.always_cx(
        "substring",
        &["string.(int) string", "string.(int, int) string"],
        ext::substring,
        Cost::Traverse(0, 0.1),
    );
    b.always_cx(
        "trim",
        &["string.() string"],
        ext::trim,
        Cost::Traverse(0, 0.1),
    );
    b.always_cx(
        "join",
        &["list(string).() string", "list(string).(string) string"],
        ext::join,
        Cost::Walk(cost_join),
    );
    b.at_cx(
        since::STRINGS_V2,
        "format",
        &["string.(list(dyn)) string"],
        ext::format,
        Cost::Traverse(0, 0.1),
    );
    b.at_cx(
        since::STRINGS_V2,
        "strings.quote",
        &["(string) string"],
        ext::quote,
        Cost::Traverse(0, 0.1),
    );
    b.always_cx(
        "find",
        &["string.(string) string"],
        ext::find,
        Cost::Custom(cost_regex),
    );
    b.always_cx(
        "findAll",
        &[
            "string.(string) list(string)",
            "string.(string, int) list(string)",
        ],
        ext::find_all,
        Cost::Custom(cost_regex),
    );
}

/// `join`: 0.2 per code point of the result, worked out from the list before joining (a walk
/// that stops past what the meter has left, as [`cost_traversal`]).
fn cost_join(cx: &mut Ctx<'_>, a: &[Value<'_>]) -> Result<u64, EvalError> {
    let Value::List(l) = &a[0] else { return Ok(1) };
    let sep = a.get(1).map_or(0, |s| s.cost_size());
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

fn cost_list_result(a: &[Value<'_>]) -> u64 {
    a[0].cost_size() + 11
}

/// 2·n² + 11 (saturating: a concatenated list can be longer than any square fits).
pub fn cost_sort(a: &[Value<'_>]) -> u64 {
    sort_cost(a[0].cost_size())
}

pub fn sort_cost(n: u64) -> u64 {
    n.saturating_mul(n).saturating_mul(2).saturating_add(11)
}

fn cost_sets(a: &[Value<'_>]) -> u64 {
    a[0].cost_size()
        .saturating_mul(a[1].cost_size())
        .saturating_add(1)
}

fn cost_sets_equivalent(a: &[Value<'_>]) -> u64 {
    cost_sets(a).saturating_mul(2)
}

fn lists_and_sets(b: &mut Builder) {
    b.always(
        "isSorted",
        &["list(A).() bool"],
        ext::is_sorted,
        Cost::Walk(cost_traversal),
    );
    b.always_cx(
        "sum",
        &["list(A).() A"],
        ext::sum,
        Cost::Walk(cost_traversal),
    );
    b.always(
        "min",
        &["list(A).() A"],
        ext::min,
        Cost::Walk(cost_traversal),
    );
    b.always(
        "max",
        &["list(A).() A"],
        ext::max,
        Cost::Walk(cost_traversal),
    );
    b.at_cx(
        since::K8S_LISTS_V1,
        "includes",
        &["dyn.(dyn) bool"],
        ext::includes,
        Cost::Walk(cost_traversal),
    );
    b.at_cx(
        since::LISTS_V3,
        "slice",
        &["list(A).(int, int) list(A)"],
        ext::slice,
        Cost::Custom(cost_list_result),
    );
    b.at_cx(
        since::LISTS_V3,
        "flatten",
        &["list(list(A)).() list(A)", "list(A).(int) list(dyn)"],
        ext::flatten,
        Cost::Custom(cost_list_result),
    );
    b.at_cx(
        since::LISTS_V3,
        "sort",
        &["list(A).() list(A)"],
        ext::sort,
        Cost::Custom(cost_sort),
    );
    b.at_cx(
        since::LISTS_V3,
        "distinct",
        &["list(A).() list(A)"],
        ext::distinct,
        Cost::Custom(cost_sort),
    );
    b.at_cx(
        since::LISTS_V3,
        "reverse",
        &["list(A).() list(A)"],
        ext::reverse,
        Cost::Custom(cost_list_result),
    );
    b.at_cx(
        since::LISTS_V3,
        "lists.range",
        &["(int) list(int)"],
        ext::range,
        Cost::Custom(cost_range),
    );
    b.at_cx(
        since::SETS,
        "sets.contains",
        &["(list(A), list(A)) bool"],
        ext::sets_contains,
        Cost::Custom(cost_sets),
    );
    b.at_cx(
        since::SETS,
        "sets.equivalent",
        &["(list(A), list(A)) bool"],
        ext::sets_equivalent,
        Cost::Custom(cost_sets_equivalent),
    );
    b.at_cx(
        since::SETS,
        "sets.intersects",
        &["(list(A), list(A)) bool"],
        ext::sets_intersects,
        Cost::Custom(cost_sets),
    );
}

fn cost_range(a: &[Value<'_>]) -> u64 {
    match &a[0] {
        Value::Int(n) if *n > 0 => *n as u64 + 11,
        _ => 11,
    }
}

fn optional(b: &mut Builder) {
    let v = since::OPTIONAL;
    b.at(
        v,
        "optional.of",
        &["(A) optional(A)"],
        ext::optional_of,
        Cost::One,
    );
    b.at(
        v,
        "optional.ofNonZeroValue",
        &["(A) optional(A)"],
        ext::optional_of_non_zero,
        Cost::One,
    );
    b.at(
        v,
        "optional.none",
        &["() optional(dyn)"],
        ext::optional_none,
        Cost::One,
    );
    b.at(
        v,
        "hasValue",
        &["optional(A).() bool"],
        ext::has_value,
        Cost::One,
    );
    b.at(v, "value", &["optional(A).() A"], ext::value, Cost::One);
    b.at(
        v,
        "or",
        &["optional(A).(optional(A)) optional(A)"],
        ext::or,
        Cost::One,
    );
    b.at(
        v,
        "orValue",
        &["optional(A).(A) A"],
        ext::or_value,
        Cost::One,
    );
    b.at(
        v,
        "first",
        &["list(A).() optional(A)"],
        ext::first,
        Cost::One,
    );
    b.at(v, "last", &["list(A).() optional(A)"], ext::last, Cost::One);
    b.at_cx(
        v,
        "optional.unwrap",
        &["(list(optional(A))) list(A)"],
        ext::unwrap_opt,
        Cost::One,
    );
    b.at_cx(
        v,
        "unwrapOpt",
        &["list(optional(A)).() list(A)"],
        ext::unwrap_opt,
        Cost::One,
    );
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

    #[test]
    fn table_builds_and_every_signature_parses() {
        let t = functions();
        assert!(t.contains_key("_+_") && t.contains_key("sets.contains"));
        for f in t.values() {
            for o in &f.overloads {
                assert!(
                    !o.sig.to_string_lossy().contains("unknown"),
                    "{}: {:?}",
                    f.name,
                    o.sig
                );
            }
        }
    }

    trait Lossy {
        fn to_string_lossy(&self) -> String;
    }
    impl Lossy for Signature {
        fn to_string_lossy(&self) -> String {
            let p: Vec<String> = self.params.iter().map(|t| t.to_string()).collect();
            format!("({}) {}", p.join(", "), self.result)
        }
    }
}
