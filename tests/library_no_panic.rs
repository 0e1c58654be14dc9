//! No library function panics on request data, and a panic that remains is one policy's
//! error, never a failed review (issue 10).
//!
//! The property tests are driven by the registration table (`cel::library::functions()`),
//! so a new function or overload is covered without touching this file. Every overload is
//! called
//! - directly, with arguments of its declared types and with arbitrary values of any type
//!   (a `dyn` argument reaches an implementation with whatever the request holds), after its
//!   cost is charged as the evaluator charges it;
//! - through compiled expressions (`Env::compile`, `Program::eval`), its string arguments
//!   arbitrary literals (which the compiler may fold) or `dyn` variables bound per case.
//!
//! Strings come from all of Unicode and from pieces parsers split on: percent signs,
//! brackets, colons, slashes, digits, suffixes, huge numbers, characters of two to four bytes.
//! Fixed cases pin the panics found (URL escapes and generateName prefixes cut inside a
//! character) to Go's results, and the end-to-end cases answer whole reviews.

use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::sync::{Arc, OnceLock};

use proptest::prelude::*;
use proptest::sample::select;
use proptest::test_runner::TestCaseError;

use celgate::cel::internals::{functions, Overload};
use celgate::cel::k8s::authz::{
    Attributes, AuthorizeError, Authorizer, AuthorizerFactory, AuthorizerValue, Decision, UserInfo,
    Verdict, AUTHORIZER,
};
use celgate::cel::time::Timestamp;
use celgate::cel::value::{Map, OwnedMap};
use celgate::cel::vap::{vap_env, Decls};
use celgate::cel::{Env, EvalError, Meter, Program, Type, Value, NEWEST_MINOR, PER_CALL_LIMIT};

type V = Value<'static>;

// ---------------------------------------------------------------------------------------
// The table and the one place an implementation is called.

/// Every overload of every function, in name order.
fn table() -> Vec<(&'static str, &'static Overload)> {
    let mut fns: Vec<_> = functions().values().collect();
    fns.sort_by_key(|f| f.name);
    fns.into_iter()
        .flat_map(|f| f.overloads.iter().map(move |o| (f.name, o)))
        .collect()
}

/// Calls an implementation as the evaluator does: its cost is charged first, and a call the
/// per-call limit refuses is not made (`None`).
fn call(overload: &Overload, args: &[V]) -> Option<Result<V, EvalError>> {
    let mut meter = celgate::cel::Meter::with_limit(PER_CALL_LIMIT);
    let mut regexes = celgate::cel::internals::RegexCache::default();
    let mut cx = celgate::cel::internals::Ctx::new(&mut meter, &mut regexes);
    match overload.cost.charge_in(&mut cx, args) {
        Ok(cost) if cost <= PER_CALL_LIMIT => Some(overload.imp.call(&mut cx, args)),
        _ => None,
    }
}

fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "non-text panic".into())
}

/// [`call`], failing the case on a panic (in the call, or in what an evaluation does with
/// its result next: print it, compare it, convert it to JSON).
fn checked_call(name: &str, overload: &Overload, args: &[V]) -> Result<Option<V>, TestCaseError> {
    let result = catch_unwind(AssertUnwindSafe(|| {
        let r = call(overload, args)?.ok()?;
        let _ = (
            r.debug_string(),
            r.to_json(),
            r.equals(&r),
            r.size(),
            r.cost_size(),
        );
        if let Value::Opaque(o) = &r {
            let _ = (o.to_cel_string(), o.equals(o.as_ref()));
        }
        Some(r)
    }));
    result.map_err(|p| {
        TestCaseError::fail(format!(
            "{name} {:?} panicked: {}\n  arguments: {:?}",
            overload.sig,
            panic_text(p.as_ref()),
            args.iter().map(Value::debug_string).collect::<Vec<_>>()
        ))
    })
}

// ---------------------------------------------------------------------------------------
// Arbitrary material, and values of any declared type built from it.

/// What parsers split on, what Go cuts at byte offsets, and what overflows.
const PIECES: &[&str] = &[
    "%",
    "%2",
    "%25",
    "%zz",
    "%€",
    "%é",
    "%1😀",
    "%%",
    "€",
    "é",
    "ß",
    "😀",
    "é-",
    "€-",
    "😀-",
    "\u{301}",
    "\u{0}",
    "\u{85}",
    "\u{a0}",
    "\u{ad}",
    "\u{200b}",
    "\u{fffd}",
    "[",
    "]",
    "[::1]",
    "::",
    ":",
    "/",
    "//",
    "?",
    "#",
    "@",
    ".",
    "..",
    "-",
    "--",
    "_",
    "+",
    "*",
    "e",
    "E",
    "e+",
    "e-",
    "i",
    "Ki",
    "Ei",
    "m",
    "n",
    "u",
    "v",
    "x",
    "0",
    "00",
    "01",
    "1",
    "9",
    "255",
    "256",
    "65535",
    "ffff",
    "1.2.3",
    "a",
    "A",
    "T",
    "Z",
    "t",
    " ",
    "\t",
    "\n",
    "\\",
    "\"",
    "'",
    "`",
    "{",
    "}",
    "(",
    ")",
    ",",
    "=",
    "&",
    ";",
    "!",
    "~",
    "2021-01-01",
    "T00:00:00Z",
    "+05:30",
    "/24",
    "/128",
    "/0",
];

/// How strings start and end: a parser's first and last checks.
const PREFIXES: &[&str] = &[
    "",
    "",
    "",
    "/",
    "/",
    "https://",
    "http://h:1/",
    "//",
    "mailto:",
    "s3:",
    "v",
    "-",
    "+",
    "[",
    "1.",
    "10.0.0.",
    "::",
    "2021-01-01T",
];
const SUFFIXES: &[&str] = &[
    "", "", "", "-", "/", "%", "%2", "?", "#", "/24", "Ki", "e9", "Z",
];

/// Strings the constructors accept, so that values of every library type exist to call
/// methods on.
const SEEDS: &[&str] = &[
    "https://user:pw@Example.COM:8443/a%20b/c?x=1&x=2&y=a+b#frag",
    "http://[::1]:80/p?q",
    "/absolute/path",
    "mailto:a@b.c",
    "1.5Gi",
    "-0.1n",
    "123456789012345678901234567890",
    "8Ei",
    "1e18",
    "1.2.3-alpha.1+build.5",
    "v01.2",
    "10.0.0.1",
    "255.255.255.255",
    "::ffff:1.2.3.4",
    "fe80::1",
    "2001:db8::/32",
    "10.0.0.0/8",
    "0.0.0.0/0",
    "dns1123Label",
    "uri",
    "kube-system",
    "system:serviceaccount:ns:sa",
    "2021-01-01T00:00:00Z",
    "1h2m3.5s",
    "-2562047h47m16.854775808s",
];

fn tricky_string() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        4 => select(PIECES).prop_map(str::to_string),
        1 => any::<char>().prop_map(|c| c.to_string()),
        1 => "[0-9]{1,4}",
    ];
    prop_oneof![
        4 => (select(PREFIXES), prop::collection::vec(piece, 0..10), select(SUFFIXES))
            .prop_map(|(p, v, s)| format!("{p}{}{s}", v.concat())),
        2 => any::<String>(),
        2 => (select(SEEDS), prop::collection::vec(select(PIECES), 0..3), 0usize..64).prop_map(
            |(seed, extra, at)| {
                // A seed with pieces inserted at a character boundary.
                let mut s = seed.to_string();
                let at = s.char_indices().map(|(i, _)| i).nth(at).unwrap_or(s.len());
                s.insert_str(at, &extra.concat());
                s
            }
        ),
        1 => select(SEEDS).prop_map(str::to_string),
        1 => "[+-]?[0-9]{15,60}(\\.[0-9]{0,40})?(e[+-]?[0-9]{1,12}|E|Ei|Ki|m|n|u|k|M|G|T|P)?",
    ]
}

fn tricky_int() -> impl Strategy<Value = i64> {
    prop_oneof![
        any::<i64>(),
        -3i64..300,
        select(vec![
            i64::MIN,
            i64::MIN + 1,
            i64::MAX,
            i64::MAX - 1,
            1 << 32,
            -(1 << 53)
        ]),
        (0u32..63).prop_map(|s| 1i64 << s),
    ]
}

fn tricky_double() -> impl Strategy<Value = f64> {
    prop_oneof![
        any::<f64>(),
        -1e3f64..1e3,
        select(vec![
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            -0.0,
            1e300,
            // ±2^63: just past the int64 range, where conversions must refuse.
            9_223_372_036_854_775_808.0,
            -9_223_372_036_854_775_808.0,
            1.8446744073709552e19,
            f64::MIN_POSITIVE,
        ]),
    ]
}

#[derive(Debug, Clone)]
struct Material {
    strings: Vec<String>,
    ints: Vec<i64>,
    doubles: Vec<f64>,
    bytes: Vec<Vec<u8>>,
    picks: Vec<u32>,
}

fn material() -> impl Strategy<Value = Material> {
    (
        prop::collection::vec(tricky_string(), 1..8),
        prop::collection::vec(tricky_int(), 1..6),
        prop::collection::vec(tricky_double(), 1..4),
        prop::collection::vec(prop::collection::vec(any::<u8>(), 0..12), 1..3),
        prop::collection::vec(any::<u32>(), 8..40),
    )
        .prop_map(|(strings, ints, doubles, bytes, picks)| Material {
            strings,
            ints,
            doubles,
            bytes,
            picks,
        })
}

/// Hands out the material in turn (cycling).
struct Gen<'m> {
    m: &'m Material,
    at: [usize; 5],
}

fn next<'v, T>(v: &'v [T], at: &mut usize) -> &'v T {
    let item = &v[*at % v.len()];
    *at += 1;
    item
}

impl<'m> Gen<'m> {
    fn new(m: &'m Material) -> Self {
        Gen { m, at: [0; 5] }
    }
    fn pick(&mut self, n: usize) -> usize {
        *next(&self.m.picks, &mut self.at[0]) as usize % n.max(1)
    }
    fn string(&mut self) -> String {
        next(&self.m.strings, &mut self.at[1]).clone()
    }
    fn int(&mut self) -> i64 {
        *next(&self.m.ints, &mut self.at[2])
    }
    fn double(&mut self) -> f64 {
        *next(&self.m.doubles, &mut self.at[3])
    }
    fn bytes(&mut self) -> Vec<u8> {
        next(&self.m.bytes, &mut self.at[4]).clone()
    }
}

/// Values of each library type, made by the table's own constructors.
type Pool = BTreeMap<&'static str, Vec<V>>;

const TYPE_NAMES: &[&str] = &["int", "string", "list", "map", "kubernetes.URL", "net.IP"];

fn timestamp(g: &mut Gen) -> Timestamp {
    // Anywhere in CEL's range (years 1 to 9999), nanoseconds included.
    const SPAN: i64 = 315_537_897_600;
    let secs = g.int().rem_euclid(SPAN) - 62_135_596_800;
    let nanos = (g.int().unsigned_abs() % 1_000_000_000) as u32;
    Timestamp::new(secs, nanos)
        .or_else(|| Timestamp::new(0, 0))
        .unwrap_or_else(|| unreachable!("the epoch is a timestamp"))
}

fn map_of(entries: Vec<(V, V)>) -> V {
    let map = OwnedMap::from_entries(entries).unwrap_or_default();
    Value::Map(Map::Owned(Arc::new(map)))
}

/// A value of type `t` (of any type for `dyn` and type parameters).
fn typed(g: &mut Gen, t: &Type, pool: &Pool, depth: usize) -> V {
    match t {
        Type::Dyn | Type::Param(_) => any_value(g, pool, depth),
        Type::Null => Value::Null,
        Type::Bool => Value::Bool(g.pick(2) == 0),
        Type::Int => Value::Int(g.int()),
        Type::Uint => Value::Uint(g.int() as u64),
        Type::Double => Value::Double(g.double()),
        Type::String => Value::string(g.string()),
        Type::Bytes => Value::Bytes(g.bytes().into()),
        Type::Timestamp => Value::Timestamp(timestamp(g)),
        Type::Duration => Value::Duration(g.int()),
        // A wrapper's values are its primitive's.
        Type::Wrapper(inner) => typed(g, inner, pool, depth),
        Type::List(e) => {
            let n = if depth > 3 { 0 } else { g.pick(4) };
            Value::list((0..n).map(|_| typed(g, e, pool, depth + 1)).collect())
        }
        Type::Map(k, v) => {
            let n = if depth > 3 { 0 } else { g.pick(4) };
            map_of(
                (0..n)
                    .map(|_| (typed(g, k, pool, depth + 1), typed(g, v, pool, depth + 1)))
                    .collect(),
            )
        }
        Type::Object(_) => typed(g, &Type::map(Type::String, Type::Dyn), pool, depth),
        Type::TypeOf(_) => Value::Type(TYPE_NAMES[g.pick(TYPE_NAMES.len())]),
        Type::Optional(t) => match g.pick(3) {
            0 => Value::Optional(None),
            _ => Value::optional(Some(typed(g, t, pool, depth + 1))),
        },
        Type::Opaque(name) => match pool.get(name).filter(|v| !v.is_empty()) {
            Some(vs) => vs[g.pick(vs.len())].clone(),
            None => any_value(g, pool, depth),
        },
    }
}

/// A value of any type.
fn any_value(g: &mut Gen, pool: &Pool, depth: usize) -> V {
    let t = match g.pick(16) {
        0 => Type::Null,
        1 => Type::Bool,
        2 | 3 => Type::Int,
        4 => Type::Uint,
        5 => Type::Double,
        6..=8 => Type::String,
        9 => Type::Bytes,
        10 => Type::list(Type::Dyn),
        11 => Type::map(Type::Dyn, Type::Dyn),
        12 => Type::Timestamp,
        13 => Type::Duration,
        14 => Type::Optional(Box::new(Type::Dyn)),
        _ => {
            let vs: Vec<&V> = pool.values().flatten().collect();
            if vs.is_empty() {
                return Value::string(g.string());
            }
            return vs[g.pick(vs.len())].clone();
        }
    };
    if depth > 3 && matches!(t, Type::List(_) | Type::Map(..) | Type::Optional(_)) {
        return Value::Null;
    }
    typed(g, &t, pool, depth + 1)
}

/// An authorizer whose answers depend on the check: allow, deny with an error, no opinion,
/// or a failure to answer.
#[derive(Debug)]
struct VariedAuthorizer;

impl Authorizer for VariedAuthorizer {
    fn authorize(&self, a: &Attributes) -> Result<Decision, AuthorizeError> {
        let decision = |verdict, error: Option<String>| Decision {
            verdict,
            reason: a.verb.clone(),
            error,
        };
        match a.verb.len() % 4 {
            0 => Err(AuthorizeError::Unavailable(
                format!("cannot ask about {:?}", a.verb).into(),
            )),
            1 => Ok(decision(Verdict::Allow, None)),
            2 => Ok(decision(Verdict::Deny, Some(a.verb.clone()))),
            _ => Ok(decision(Verdict::NoOpinion, None)),
        }
    }
}

/// Values of every library type the table can make from this material: the authorizer (the
/// admission layer's), then, for a few rounds, the result of every overload that returns a
/// library type, called with what exists so far.
fn build_pool(
    g: &mut Gen,
    table: &[(&'static str, &'static Overload)],
) -> Result<Pool, TestCaseError> {
    let mut pool = Pool::new();
    pool.entry(AUTHORIZER)
        .or_default()
        .push(Value::opaque(AuthorizerValue::new(Arc::new(
            VariedAuthorizer,
        ))));
    for _ in 0..4 {
        for (name, overload) in table {
            let Type::Opaque(t) = &overload.sig.result else {
                continue;
            };
            let args: Vec<V> = overload
                .sig
                .params
                .iter()
                .map(|p| typed(g, p, &pool, 0))
                .collect();
            if let Some(v) = checked_call(name, overload, &args)? {
                let held = pool.entry(t).or_default();
                if held.len() < 6 {
                    held.push(v);
                }
            }
        }
    }
    Ok(pool)
}

// ---------------------------------------------------------------------------------------
// Direct calls.

/// Cases per property: `default`, or `$PROPTEST_CASES` for a longer search.
fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(192), ..ProptestConfig::default() })]

    /// Every overload, with arguments of its declared types and, a quarter of the time,
    /// some of any type, never panics (nor do printing, comparing or converting results).
    #[test]
    fn every_overload_survives_arbitrary_arguments(m in material()) {
        let table = table();
        let mut g = Gen::new(&m);
        let pool = build_pool(&mut g, &table)?;
        for (name, overload) in &table {
            for _ in 0..3 {
                let loose = g.pick(4) == 0;
                let args: Vec<V> = overload
                    .sig
                    .params
                    .iter()
                    .map(|p| {
                        if loose && g.pick(2) == 0 {
                            any_value(&mut g, &pool, 0)
                        } else {
                            typed(&mut g, p, &pool, 0)
                        }
                    })
                    .collect();
                checked_call(name, overload, &args)?;
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// Compiled expressions.

/// A CEL string literal for `s`: characters as they are, or every non-ASCII one as a
/// `\u`/`\U` escape (which the lexer decodes).
fn cel_string(s: &str, escape_non_ascii: bool) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() || (escape_non_ascii && !c.is_ascii()) => {
                if (c as u32) < 0x10000 {
                    out.push_str(&format!("\\u{:04x}", c as u32));
                } else {
                    out.push_str(&format!("\\U{:08x}", c as u32));
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn is_function_name(name: &str) -> bool {
    name.split('.').all(|part| {
        part.chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && part.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    })
}

/// How the arguments of an expression are written.
enum Args<'g, 'm> {
    /// Every argument a literal made from the material.
    Literal(&'g mut Gen<'m>),
    /// The call's own `string` and `dyn` arguments are the variables `s0`..`s3`; the rest
    /// are fixed seeds, and library-type arguments come from the constructor this number
    /// picks.
    Variables(usize),
}

/// An expression of type `t`, or `None` when none can be written.
fn arg_expr(
    args: &mut Args,
    t: &Type,
    table: &[(&str, &Overload)],
    depth: usize,
) -> Option<String> {
    let literal = |args: &mut Args| -> String {
        match args {
            Args::Literal(g) => {
                let escape = g.pick(3) == 0;
                cel_string(&g.string(), escape)
            }
            Args::Variables(_) => cel_string(SEEDS[0], false),
        }
    };
    let int = |args: &mut Args| -> i64 {
        match args {
            Args::Literal(g) => g.int(),
            Args::Variables(_) => 7,
        }
    };
    Some(match t {
        Type::String | Type::Dyn | Type::Param(_) => literal(args),
        Type::Null => "null".into(),
        Type::Bool => "true".into(),
        Type::Int => format!("{}", int(args)),
        Type::Uint => format!("{}u", int(args) as u64),
        Type::Double => {
            let d = match args {
                Args::Literal(g) => g.double(),
                Args::Variables(_) => 1.5,
            };
            if d.is_finite() {
                format!("{d:e}")
            } else {
                format!(
                    "double({})",
                    cel_string(&d.to_string().replace("inf", "Infinity"), false)
                )
            }
        }
        Type::Bytes => {
            let b = match args {
                Args::Literal(g) => g.bytes(),
                Args::Variables(_) => b"\xe2\x82".to_vec(),
            };
            let body: String = b.iter().map(|b| format!("\\x{b:02x}")).collect();
            format!("b\"{body}\"")
        }
        Type::Timestamp => format!("timestamp({})", int(args).rem_euclid(253_402_300_799)),
        Type::Duration => format!("duration({})", literal(args)),
        Type::List(e) => format!("[{}]", arg_expr(args, e, table, depth + 1)?),
        Type::Map(k, v) => format!(
            "{{{}: {}}}",
            arg_expr(args, k, table, depth + 1)?,
            arg_expr(args, v, table, depth + 1)?
        ),
        Type::Optional(t) => format!("optional.of({})", arg_expr(args, t, table, depth + 1)?),
        Type::TypeOf(_) => "int".into(),
        Type::Object(_) | Type::Wrapper(_) => return None,
        Type::Opaque(name) if *name == AUTHORIZER => "authorizer".into(),
        Type::Opaque(name) => {
            if depth > 5 {
                return None;
            }
            // A constructor from the table: an overload returning this type that does not
            // need one already.
            let makers: Vec<&(&str, &Overload)> = table
                .iter()
                .filter(|(n, o)| {
                    is_function_name(n)
                        && o.sig.result == Type::Opaque(name)
                        && !o.sig.params.contains(&Type::Opaque(name))
                })
                .collect();
            if makers.is_empty() {
                return None;
            }
            let i = match args {
                Args::Literal(g) => g.pick(makers.len()),
                Args::Variables(k) => *k % makers.len(),
            };
            let (n, o) = makers[i];
            call_expr(args, n, o, table, depth + 1, false)?
        }
    })
}

/// `name(args)` or `(receiver).name(args)` for one overload.
fn call_expr(
    args: &mut Args,
    name: &str,
    overload: &Overload,
    table: &[(&str, &Overload)],
    depth: usize,
    top: bool,
) -> Option<String> {
    let mut parts = Vec::new();
    for (i, p) in overload.sig.params.iter().enumerate() {
        let variable = top
            && matches!(args, Args::Variables(_))
            && matches!(p, Type::String | Type::Dyn | Type::Param(_));
        parts.push(if variable {
            format!("s{i}")
        } else {
            arg_expr(args, p, table, depth)?
        });
    }
    Some(if overload.sig.member {
        let receiver = parts.remove(0);
        format!("({receiver}).{name}({})", parts.join(", "))
    } else {
        format!("{name}({})", parts.join(", "))
    })
}

/// The environment of validations (with `authorizer`), plus `s0`..`s3` of type `dyn`.
fn env() -> (Env, Vec<usize>, usize) {
    let (mut env, slots) = vap_env(
        NEWEST_MINOR,
        Decls {
            params: true,
            authorizer: true,
        },
    );
    let vars = (0..4)
        .map(|i| env.declare(&format!("s{i}"), Type::Dyn))
        .collect();
    let authorizer = slots
        .authorizer
        .unwrap_or_else(|| unreachable!("declared above"));
    (env, vars, authorizer)
}

/// Compiles and evaluates; a compile error is fine (a literal of the wrong form, a function
/// of another version), a panic is not (the compiler's thread reports one as an error).
fn compile_and_eval(env: &Env, expr: &str, vars: &[V]) -> Result<(), TestCaseError> {
    let program = match env.compile(expr) {
        Ok(p) => p,
        Err(e) if e.message().contains("panicked") => {
            return Err(TestCaseError::fail(format!(
                "compiling {expr}: {}",
                e.message()
            )))
        }
        Err(_) => return Ok(()),
    };
    eval_checked(&program, vars)
}

fn eval_checked(program: &Program, vars: &[V]) -> Result<(), TestCaseError> {
    let r = catch_unwind(AssertUnwindSafe(|| {
        let mut meter = Meter::with_limit(PER_CALL_LIMIT);
        if let Ok(v) = program.eval(&vars.to_vec(), &mut meter) {
            let _ = (v.debug_string(), v.to_json());
        }
    }));
    r.map_err(|p| {
        TestCaseError::fail(format!(
            "evaluating {} panicked: {}\n  variables: {:?}",
            program.source(),
            panic_text(p.as_ref()),
            vars.iter().map(Value::debug_string).collect::<Vec<_>>()
        ))
    })
}

fn bound(env: &Env, vars: &[usize], authorizer: usize, values: Vec<V>) -> Vec<V> {
    let mut all = vec![Value::Null; env.variables().len()];
    all[authorizer] = Value::opaque(AuthorizerValue::new(Arc::new(VariedAuthorizer)));
    for (slot, v) in vars.iter().zip(values) {
        all[*slot] = v;
    }
    all
}

/// Every overload with a function-call syntax, compiled once with its `string` and `dyn`
/// arguments as `dyn` variables.
fn variable_programs() -> &'static (Env, Vec<usize>, usize, Vec<Program>) {
    static PROGRAMS: OnceLock<(Env, Vec<usize>, usize, Vec<Program>)> = OnceLock::new();
    PROGRAMS.get_or_init(|| {
        let (env, vars, authorizer) = env();
        let table = table();
        let mut exprs: Vec<String> = table
            .iter()
            .filter(|(n, _)| is_function_name(n))
            .flat_map(|(n, o)| {
                // Each of the first constructors for a library-type receiver.
                (0..16).filter_map(|k| call_expr(&mut Args::Variables(k), n, o, &table, 0, true))
            })
            .collect();
        exprs.sort();
        exprs.dedup();
        let programs: Vec<Program> = exprs.iter().filter_map(|e| env.compile(e).ok()).collect();
        (env, vars, authorizer, programs)
    })
}

#[test]
fn variable_programs_cover_the_table() {
    // Most overloads have a call syntax and compile with their arguments as variables (some
    // do not: operators, or a dyn argument the checker cannot place).
    let (_, _, _, programs) = variable_programs();
    let named = table().iter().filter(|(n, _)| is_function_name(n)).count();
    assert!(programs.len() * 2 > named, "{} of {named}", programs.len());
    let sources: Vec<&str> = programs.iter().map(|p| p.source()).collect();
    for needed in [
        "isURL(s0)",
        "url(s0)",
        "(format.uri()).validate(s1)",
        "(format.dns1123LabelPrefix()).validate(s1)",
    ] {
        assert!(sources.contains(&needed), "{needed} not in {sources:?}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(48), ..ProptestConfig::default() })]

    /// Every overload with a call syntax, its arguments arbitrary literals: the lexer,
    /// the checker, constant folding and the evaluation never panic.
    #[test]
    fn every_function_survives_arbitrary_literals(m in material()) {
        let (env, vars, authorizer) = env();
        let values = bound(&env, &vars, authorizer, Vec::new());
        let table = table();
        let mut g = Gen::new(&m);
        for (name, overload) in table.iter().filter(|(n, _)| is_function_name(n)) {
            let Some(expr) = call_expr(&mut Args::Literal(&mut g), name, overload, &table, 0, true)
            else {
                continue;
            };
            compile_and_eval(&env, &expr, &values)?;
        }
    }

    /// The same calls compiled once with `dyn` variables, evaluated with arbitrary strings
    /// (and sometimes values of any type) bound: the dispatch a request's data goes through.
    #[test]
    fn every_function_survives_arbitrary_variables(m in material()) {
        let (env, vars, authorizer, programs) = variable_programs();
        let mut g = Gen::new(&m);
        let pool = Pool::new();
        for program in programs {
            let values: Vec<V> = (0..vars.len())
                .map(|_| {
                    if g.pick(5) == 0 {
                        any_value(&mut g, &pool, 0)
                    } else {
                        Value::string(g.string())
                    }
                })
                .collect();
            eval_checked(program, &bound(env, vars, *authorizer, values))?;
        }
    }
}

// ---------------------------------------------------------------------------------------
// The inputs that panicked, with Go's results.

/// Evaluates `expr` with `x` bound to `input`, in the newest environment, both as written
/// and with `x` replaced by `input` as a literal (which the compiler folds).
fn eval_both(expr: &str, input: &str) -> Vec<Result<serde_json::Value, String>> {
    let mut env = Env::new(NEWEST_MINOR);
    env.declare("x", Type::Dyn);
    let literal = expr.replace("(x)", &format!("({})", cel_string(input, false)));
    [expr.to_string(), literal]
        .iter()
        .map(|e| {
            let program = env
                .compile(e)
                .map_err(|e| format!("compile: {}", e.message()))?;
            let vars = [Value::string(input)];
            let mut meter = Meter::with_limit(PER_CALL_LIMIT);
            program
                .eval(&vars, &mut meter)
                .map(|v| v.to_json())
                .map_err(|e| e.to_string())
        })
        .collect()
}

fn assert_both(expr: &str, input: &str, want: Result<serde_json::Value, String>) {
    for got in eval_both(expr, input) {
        assert_eq!(got, want, "{expr} with x = {input:?}");
    }
}

#[test]
fn url_escapes_cut_inside_a_character_are_gos_errors() {
    use serde_json::json;
    let escape = r#"invalid URL escape "%\xe2\x82""#;
    assert_both("isURL(x)", "/%€", Ok(json!(false)));
    assert_both("isURL(x)", "https://%€/", Ok(json!(false)));
    assert_both("isURL(x)", "/%é", Ok(json!(false)));
    assert_both(
        "url(x).getScheme()",
        "/%€",
        Err(format!(
            r#"URL parse error during conversion from string: parse "/%€": {escape}"#
        )),
    );
    assert_both(
        "format.uri().validate(x)",
        "/%€",
        Ok(json!([format!(r#"parse "/%€": {escape}"#)])),
    );
    // A complete two-byte character after `%` is quoted whole, as Go quotes it.
    assert_both(
        "format.uri().validate(x)",
        "/a%é",
        Ok(json!([r#"parse "/a%é": invalid URL escape "%é""#])),
    );
}

#[test]
fn generate_name_prefixes_cut_inside_a_character_are_invalid() {
    use serde_json::json;
    let label = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
    assert_both(
        "format.dns1123LabelPrefix().validate(x)",
        "é-",
        Ok(json!([label])),
    );
    for f in ["dns1123SubdomainPrefix", "dns1035LabelPrefix"] {
        for input in ["é-", "a€-", "😀-"] {
            assert_both(
                &format!("format.{f}().validate(x).hasValue()"),
                input,
                Ok(json!(true)),
            );
        }
    }
    assert_both(
        "format.dns1123LabelPrefix().validate(x).hasValue()",
        "ab-",
        Ok(json!(false)),
    );
}

// ---------------------------------------------------------------------------------------
// End to end: whole reviews, as `celgate eval` and the server answer them.

fn policy(name: &str, failure: &str, expression: &str) -> String {
    format!(
        r#"
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {{name: {name}}}
spec:
  failurePolicy: {failure}
  matchConstraints:
    resourceRules:
    - {{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}}
  validations:
  - expression: "{expression}"
    message: {name} says no
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {{name: {name}}}
spec: {{policyName: {name}, validationActions: [Deny]}}
"#
    )
}

fn snapshot(policies: &[String]) -> celgate::policy::snapshot::Snapshot {
    let text = policies.join("---\n");
    let objects = celgate::source::folder::parse_documents(Path::new("policies.yaml"), &text)
        .unwrap_or_else(|e| panic!("{e}"));
    celgate::source::snapshot(objects, NEWEST_MINOR, true).unwrap_or_else(|e| panic!("{e}"))
}

fn review(data: serde_json::Value) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "u1",
            "kind": {"group": "", "version": "v1", "kind": "ConfigMap"},
            "resource": {"group": "", "version": "v1", "resource": "configmaps"},
            "operation": "CREATE",
            "namespace": "default",
            "name": "cm",
            "userInfo": {"username": "alice"},
            "object": {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "cm", "namespace": "default", "generateName": "é-"},
                "data": data
            }
        }
    }))
    .unwrap_or_default()
}

/// Policy name to (error type, action) of its check records.
fn checks(answer: &celgate::review::Answer) -> BTreeMap<String, Vec<(String, String)>> {
    let mut out: BTreeMap<String, Vec<(String, String)>> = BTreeMap::new();
    for c in &answer.verdict.checks {
        out.entry(c.policy.clone())
            .or_default()
            .push((c.error_type.to_string(), c.action.to_string()));
    }
    out
}

fn pair(error_type: &str, action: &str) -> Vec<(String, String)> {
    vec![(error_type.to_string(), action.to_string())]
}

/// The base commit's attack: `/%€` in a field a policy passes to `isURL`/`url` made the
/// whole review panic (a 500: under the webhook's `failurePolicy: Ignore`, every policy was
/// skipped). Each policy now decides on its own, under its own failurePolicy.
#[test]
fn a_url_attack_gets_each_policys_own_decision() {
    let snap = snapshot(&[
        policy("is-url", "Fail", "isURL(object.data.url)"),
        policy(
            "url-fail",
            "Fail",
            "url(object.data.url).getScheme() == 'https'",
        ),
        policy(
            "url-ignore",
            "Ignore",
            "url(object.data.url).getScheme() == 'https'",
        ),
        policy(
            "prefix",
            "Fail",
            "!format.dns1123LabelPrefix().validate(object.metadata.generateName).hasValue()",
        ),
        policy("bystander", "Fail", "object.data.url.size() < 3"),
    ]);
    let body = review(serde_json::json!({"url": "/%€"}));
    let answer = celgate::review::answer(&snap, &body, &Default::default(), Default::default())
        .unwrap_or_else(|e| panic!("{e}"));
    let denials: BTreeMap<&str, &str> = answer
        .verdict
        .denials
        .iter()
        .map(|d| (d.policy.as_str(), d.message.as_str()))
        .collect();
    let url_error = r#"expression 'url(object.data.url).getScheme() == 'https'' resulted in error: URL parse error during conversion from string: parse "/%€": invalid URL escape "%\xe2\x82""#;
    let want = BTreeMap::from([
        (
            "bystander",
            "ValidatingAdmissionPolicy 'bystander' with binding 'bystander' denied request: bystander says no".to_string(),
        ),
        (
            "is-url",
            "ValidatingAdmissionPolicy 'is-url' with binding 'is-url' denied request: is-url says no".to_string(),
        ),
        (
            "prefix",
            "ValidatingAdmissionPolicy 'prefix' with binding 'prefix' denied request: prefix says no".to_string(),
        ),
        (
            "url-fail",
            format!("ValidatingAdmissionPolicy 'url-fail' with binding 'url-fail' denied request: {url_error}"),
        ),
    ]);
    let want: BTreeMap<&str, &str> = want.iter().map(|(k, v)| (*k, v.as_str())).collect();
    assert_eq!(denials, want);
    let checks = checks(&answer);
    assert_eq!(checks["url-fail"], pair("invalid_error", "deny"));
    assert_eq!(
        checks["url-ignore"],
        pair("invalid_error", "allow"),
        "the ignored error is counted"
    );
    assert_eq!(answer.review()["response"]["allowed"], false);
    assert_eq!(answer.review()["response"]["status"]["code"], 422);
}

/// An authorizer that panics: the one way a test can make a library call panic through
/// the production code (the authorizer is the admission layer's, behind a trait).
#[derive(Debug)]
struct PanickingAuthorizer;

impl Authorizer for PanickingAuthorizer {
    fn authorize(&self, a: &Attributes) -> Result<Decision, AuthorizeError> {
        panic!("authorizer bug on {:?}", a.verb)
    }
}

impl AuthorizerFactory for PanickingAuthorizer {
    fn for_user(&self, _: &UserInfo) -> Arc<dyn Authorizer> {
        Arc::new(PanickingAuthorizer)
    }
}

/// A panic that remains is contained to the policy that raised it: its CEL error
/// (`internal error: ...`, as cel-go recovers one), under its own failurePolicy, counted in
/// the check metrics; the other policies decide as usual and the review is answered.
#[test]
fn a_panicking_policy_is_that_policys_error_and_the_review_is_answered() {
    let check = "authorizer.group('').resource('pods').check('get').allowed()";
    let snap = snapshot(&[
        policy("authz-fail", "Fail", check),
        policy("authz-ignore", "Ignore", check),
        policy("bystander", "Fail", "object.data.url.size() < 3"),
    ]);
    let services = celgate::admission::Services {
        authorizer: Some(Arc::new(PanickingAuthorizer)),
        namespace_lookup: None,
    };
    let context = celgate::admission::AdmitContext {
        services: &services,
        ..Default::default()
    };
    let before = celgate::admission::validator::contained_panics();
    let body = review(serde_json::json!({"url": "ok"}));
    let answer = celgate::review::answer(&snap, &body, &context, Default::default())
        .unwrap_or_else(|e| panic!("{e}"));
    let messages: Vec<&str> = answer
        .verdict
        .denials
        .iter()
        .map(|d| d.message.as_str())
        .collect();
    assert_eq!(
        messages,
        [format!(
            "ValidatingAdmissionPolicy 'authz-fail' with binding 'authz-fail' denied request: expression '{check}' resulted in error: internal error: authorizer bug on \"get\""
        )]
    );
    let checks = checks(&answer);
    assert_eq!(checks["authz-fail"], pair("invalid_error", "deny"));
    assert_eq!(checks["authz-ignore"], pair("invalid_error", "allow"));
    assert!(!checks.contains_key("bystander"), "admitted: no record");
    assert!(celgate::admission::validator::contained_panics() >= before + 2);
    assert_eq!(answer.review()["response"]["allowed"], false);

    // Under Ignore alone, the review is allowed.
    let snap = snapshot(&[policy("authz-ignore", "Ignore", check)]);
    let answer = celgate::review::answer(&snap, &body, &context, Default::default())
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(answer.review()["response"]["allowed"], true);
}
