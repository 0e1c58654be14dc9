//! The fuzz targets' inputs and properties: CEL compile and evaluation (with and without the
//! optimiser, over a document and over serde_json), `Doc::parse` against serde_json, the
//! review decoder on mutated reviews, and the policy loader on mutated YAML.

use std::collections::HashSet;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use celgate::cel::json::{Doc, Item, Key, Ref};
use celgate::cel::k8s::authz::{
    Attributes, AuthorizeError, Authorizer, AuthorizerValue, Decision, Verdict,
};
use celgate::cel::projection::{Projection, Projections};
use celgate::cel::vap::{request_resource_attributes, vap_env, Decls, Slots};
use celgate::cel::{Env, Meter, Program, Type, Value, NEWEST_MINOR, PER_CALL_LIMIT};
use celgate::policy::snapshot::Snapshot;
use celgate::source::{add_cluster_defaults, folder, snapshot};
use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{json, Value as Json};

use crate::cel_gen;
use crate::choices::Choices;
use crate::harness::{self, stat};
use crate::json_gen;

// ---------------------------------------------------------------------------------------
// Shared data.

use crate::common::shared_dir;

fn repo(p: &str) -> PathBuf {
    crate::common::repo().join(p)
}

/// A folder of objects and a review for them (an oracle case, a golden case, the examples).
pub struct Case {
    pub name: String,
    pub objects: String,
    pub review: Vec<u8>,
    pub snapshot: Option<Snapshot>,
}

fn load_snapshot(text: &str) -> Option<Snapshot> {
    let mut objects = folder::parse_documents(Path::new("objects.yaml"), text).ok()?;
    add_cluster_defaults(&mut objects);
    snapshot(objects, NEWEST_MINOR, true).ok()
}

fn sub_dirs(dir: &Path) -> Vec<PathBuf> {
    let cases = crate::common::cases::case_dirs(dir).unwrap_or_default();
    cases.into_iter().map(|(_, path)| path).collect()
}

/// Every case this checkout and `../shared` hold.
pub fn cases() -> &'static Vec<Case> {
    static C: OnceLock<Vec<Case>> = OnceLock::new();
    C.get_or_init(|| {
        let mut out = Vec::new();
        let dirs = sub_dirs(&shared_dir().join("oracle-sample/cases"))
            .into_iter()
            .chain(sub_dirs(&repo("tests/cases")));
        for d in dirs {
            let (Ok(objects), Ok(review)) = (
                std::fs::read_to_string(d.join("objects.yaml")),
                std::fs::read(d.join("review.json")),
            ) else {
                continue;
            };
            out.push(Case {
                name: d.display().to_string(),
                snapshot: load_snapshot(&objects),
                objects,
                review,
            });
        }
        let mut policies = String::new();
        for f in [
            "deployment-labels.yaml",
            "namespaces.yaml",
            "pod-security.yaml",
        ] {
            if let Ok(t) = std::fs::read_to_string(repo("examples/policies").join(f)) {
                policies.push_str("---\n");
                policies.push_str(&t);
            }
        }
        for r in ["pod-ok.json", "pod-privileged.json"] {
            if let Ok(review) = std::fs::read(repo("examples/reviews").join(r)) {
                out.push(Case {
                    name: format!("examples/{r}"),
                    snapshot: load_snapshot(&policies),
                    objects: policies.clone(),
                    review,
                });
            }
        }
        assert!(!out.is_empty(), "no cases found (tests/cases, examples)");
        out
    })
}

fn answerable() -> &'static Vec<usize> {
    static A: OnceLock<Vec<usize>> = OnceLock::new();
    A.get_or_init(|| {
        cases()
            .iter()
            .enumerate()
            .filter(|(_, c)| c.snapshot.is_some())
            .map(|(i, _)| i)
            .collect()
    })
}

// ---------------------------------------------------------------------------------------
// CEL: compile and evaluate.

struct Envs {
    optimized: Env,
    plain: Env,
    slots: Slots,
}

fn envs() -> &'static Envs {
    static E: OnceLock<Envs> = OnceLock::new();
    E.get_or_init(|| {
        let (optimized, slots) = vap_env(
            NEWEST_MINOR,
            Decls {
                params: true,
                authorizer: true,
            },
        );
        let mut plain = optimized.clone();
        plain.optimize = false;
        Envs {
            optimized,
            plain,
            slots,
        }
    })
}

fn request_json() -> &'static (Json, Json) {
    static R: OnceLock<(Json, Json)> = OnceLock::new();
    R.get_or_init(|| {
        (
            json!({
                "uid": "u-1", "operation": "CREATE", "name": "web", "namespace": "default",
                "kind": {"group": "", "version": "v1", "kind": "Pod"},
                "resource": {"group": "", "version": "v1", "resource": "pods"},
                "requestKind": {"group": "", "version": "v1", "kind": "Pod"},
                "requestResource": {"group": "", "version": "v1", "resource": "pods"},
                "subResource": "", "requestSubResource": "",
                "userInfo": {"username": "alice", "uid": "1", "groups": ["dev", "system:authenticated"],
                             "extra": {"scopes": ["a", "b"]}},
                "dryRun": false, "options": {"kind": "CreateOptions"}
            }),
            json!({
                "metadata": {"name": "default", "labels": {"kubernetes.io/metadata.name": "default", "env": "prod"},
                             "annotations": {}, "finalizers": []},
                "spec": {"finalizers": ["kubernetes"]},
                "status": {"phase": "Active", "conditions": []}
            }),
        )
    })
}

/// The object of the parse target's evaluations.
pub fn fixed_object() -> &'static Vec<u8> {
    static O: OnceLock<Vec<u8>> = OnceLock::new();
    O.get_or_init(|| {
        serde_json::to_vec(&json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web", "namespace": "default", "labels": {"app": "web", "a": "1"},
                         "annotations": {"x": "y"}},
            "spec": {"containers": [
                {"name": "app", "image": "nginx:1.2", "securityContext": {"privileged": true},
                 "resources": {"limits": {"cpu": "500m", "memory": "1Gi"}}, "ports": [{"containerPort": 80}]},
                {"name": "side", "image": "busybox", "ports": []}
            ], "replicas": 3, "ratio": 0.5, "big": 18446744073709551615u64, "items": [1, 2, 3],
            "a": {"b": {"c": null}}, "x": "10.0.0.1", "in": true}
        }))
        .unwrap_or_default()
    })
}

/// One evaluation's outcome, comparable across programs and bindings.
#[derive(Debug, PartialEq)]
struct Outcome {
    result: Result<String, String>,
    cost: u64,
    cancelled: bool,
}

fn render(v: &Value<'_>, out: &mut String, budget: &mut usize) {
    if *budget == 0 {
        return;
    }
    *budget -= 1;
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => write!(out, "{b}").unwrap_or(()),
        Value::Int(i) => write!(out, "{i}").unwrap_or(()),
        Value::Uint(u) => write!(out, "{u}u").unwrap_or(()),
        Value::Double(d) => write!(out, "{d:?}d").unwrap_or(()),
        Value::String(s) => write!(out, "{:?}", s.as_str()).unwrap_or(()),
        Value::Bytes(b) => write!(out, "b{:?}", &b[..b.len().min(10_000)]).unwrap_or(()),
        Value::List(l) => {
            out.push('[');
            for x in l.iter() {
                render(&x, out, budget);
                out.push(',');
            }
            out.push(']');
        }
        Value::Map(m) => {
            out.push('{');
            for (k, x) in m.entries() {
                render(&k, out, budget);
                out.push(':');
                render(&x, out, budget);
                out.push(',');
            }
            out.push('}');
        }
        Value::Timestamp(t) => write!(out, "ts({})", t.to_rfc3339()).unwrap_or(()),
        Value::Duration(d) => write!(out, "dur({d})").unwrap_or(()),
        Value::Type(t) => write!(out, "type({t})").unwrap_or(()),
        Value::Optional(None) => out.push_str("optional.none()"),
        Value::Optional(Some(x)) => {
            out.push_str("optional.of(");
            render(x, out, budget);
            out.push(')');
        }
        Value::Opaque(o) => write!(out, "{}:{o:?}", o.type_name()).unwrap_or(()),
    }
}

/// Whether `v` has the static type the checker gave it. A result that is a list or map
/// of the document is let through whatever the type: a `dyn` value can flow unchecked into
/// a type parameter (`dyn(object.?a).orValue(b'')` is `bytes` for cel-go too). Inside a
/// list or map the elements must conform (`[0, object]` is `list(dyn)` for cel-go).
fn conforms_top(ty: &Type, v: &Value<'_>) -> bool {
    use celgate::cel::value::{List, Map};
    matches!(
        v,
        Value::List(List::Doc(_) | List::Json(_)) | Value::Map(Map::Doc(_) | Map::Json(_))
    ) || conforms(ty, v)
}

fn conforms(ty: &Type, v: &Value<'_>) -> bool {
    match (ty, v) {
        (Type::Dyn | Type::Param(_), _) => true,
        (Type::Null, Value::Null)
        | (Type::Bool, Value::Bool(_))
        | (Type::Int, Value::Int(_))
        | (Type::Uint, Value::Uint(_))
        | (Type::Double, Value::Double(_))
        | (Type::String, Value::String(_))
        | (Type::Bytes, Value::Bytes(_))
        | (Type::Timestamp, Value::Timestamp(_))
        | (Type::Duration, Value::Duration(_))
        | (Type::TypeOf(_), Value::Type(_))
        | (Type::Object(_), Value::Map(_) | Value::Null) => true,
        (Type::List(e), Value::List(l)) => l.iter().take(50).all(|x| conforms(e, &x)),
        (Type::Map(kt, vt), Value::Map(m)) => m
            .entries()
            .iter()
            .take(50)
            .all(|(k, x)| conforms(kt, k) && conforms(vt, x)),
        // cel-go reads an optional of an optional through an attribute (a variable, a
        // conditional) as one optional of the innermost value, a none inside as null.
        (Type::Optional(t), Value::Optional(o)) => o.as_ref().is_none_or(|x| {
            conforms(t, x)
                || matches!(**t, Type::Optional(_))
                    && (matches!(**x, Value::Null)
                        || conforms(t, &Value::optional(Some((**x).clone()))))
        }),
        (Type::Opaque(n), Value::Opaque(o)) => o.type_name() == *n,
        _ => false,
    }
}

/// `typed`: whether the result must have the checked type. Not when a `dyn` value is about
/// (an explicit `dyn()`, or an untyped variable such as `object`): CEL's gradual typing lets
/// a `dyn` receiver take a type parameter from an argument or a later overload, so cel-go
/// itself types `dyn(optional.of(0)).orValue(0u)` as `uint` and evaluates it to the int 0,
/// and `object.l.reverse().min()` as `int` (the first `min` overload binds the free element
/// type) while it evaluates to whatever `object.l` holds (found by the evaluation fuzzer;
/// celgate types both the same way).
#[allow(clippy::ptr_arg)] // `Vec` is the activation type.
fn evaluate(p: &Program, vars: &Vec<Value<'_>>, typed: bool) -> Result<Outcome, String> {
    let mut meter = Meter::with_limit(PER_CALL_LIMIT);
    let (r, peak) = harness::measure(|| match p.eval(vars, &mut meter) {
        Ok(v) => {
            let mut s = String::new();
            render(&v, &mut s, &mut 20_000);
            let fits = !typed || conforms_top(p.result_type(), &v);
            Ok((s, fits))
        }
        Err(e) => Err(e),
    });
    if peak > harness::MEMORY_LIMIT {
        return Err(format!(
            "memory: one evaluation held {} MiB at once (cost {})",
            peak >> 20,
            meter.cost
        ));
    }
    match r {
        Ok((s, fits)) => {
            if meter.cost > meter.limit {
                return Err(format!(
                    "cost {} over the limit {} without cancellation",
                    meter.cost, meter.limit
                ));
            }
            if !fits {
                return Err(format!(
                    "the result does not have the checked type {} — result {}",
                    p.result_type(),
                    truncate(&s, 200)
                ));
            }
            Ok(Outcome {
                result: Ok(s),
                cost: meter.cost,
                cancelled: false,
            })
        }
        Err(e) => Ok(Outcome {
            result: Err(e.to_string()),
            cost: meter.cost,
            cancelled: e.is_cancelled(),
        }),
    }
}

fn truncate(s: &str, n: usize) -> String {
    s.chars().take(n).collect()
}

fn compile(env: &Env, expr: &str) -> Result<Result<Program, String>, String> {
    match env.compile(expr) {
        Ok(p) => Ok(Ok(p)),
        Err(e) => {
            let text = e.to_string();
            if text.contains("compiler thread panicked") {
                return Err(format!("compile panicked: {}", harness::take_panic()));
            }
            Ok(Err(e.message().to_string()))
        }
    }
}

/// The CEL property: compiling never panics; with the optimiser on and off the expression
/// compiles alike (folding may only turn an evaluation error into a compile error); every
/// evaluation ends in a value of the checked type or a clean error, within the cost limit
/// and memory; the results agree with and without the optimiser, and over a document and
/// over serde_json (cost included).
pub fn check_expr(expr: &str, object: &[u8]) -> Result<(), String> {
    let e = envs();
    // Nor where an optional may hold an optional: cel-go reads one through an attribute as a
    // single optional (a none inside becoming null), whatever the checked type says.
    let optionals: usize = ["optional.", ".?", "[?", "optMap", "optFlatMap"]
        .iter()
        .map(|o| expr.matches(o).count())
        .sum();
    let typed = optionals < 2
        && !["dyn(", "object", "params", "request", "variables"]
            .iter()
            .any(|dynamic| expr.contains(dynamic));
    let optimized = compile(&e.optimized, expr)?;
    let plain = compile(&e.plain, expr)?;
    let (po, pp) = match (optimized, plain) {
        (Ok(po), Ok(pp)) => (po, pp),
        (Err(_), Err(_)) => {
            stat("compile error");
            return Ok(());
        }
        (Ok(_), Err(m)) => return Err(format!("compiles with the optimiser but not without: {m}")),
        (Err(m), Ok(pp)) => {
            // Folding a constant that fails is a compile error (cel-go's OptOptimize); the
            // plain program meets the same failure when it evaluates it, or skips it.
            stat("folding error");
            let _ = m;
            let (req, ns) = request_json();
            let json: Json = serde_json::from_slice(object).unwrap_or(Json::Null);
            let vars = bind(&e.slots, Value::from_json(&json), req, ns);
            evaluate(&pp, &vars, typed)?;
            return Ok(());
        }
    };
    stat("compiled");
    let (req, ns) = request_json();
    let json: Json = serde_json::from_slice(object).map_err(|e| format!("bad object: {e}"))?;
    let doc = Doc::parse(object).map_err(|e| format!("bad object for Doc: {e}"))?;
    let doc_vars = bind(&e.slots, Value::from_doc(doc.root()), req, ns);
    let json_vars = bind(&e.slots, Value::from_json(&json), req, ns);
    let o_doc = evaluate(&po, &doc_vars, typed)?;
    let o_json = evaluate(&po, &json_vars, typed)?;
    let p_doc = evaluate(&pp, &doc_vars, typed)?;
    stat(match (&o_doc.result, o_doc.cancelled) {
        (Ok(_), _) => "value",
        (Err(_), true) => "cancelled",
        (Err(_), false) => "error",
    });
    if o_doc != o_json {
        return Err(format!(
            "over a document and over serde_json: {:?} vs {:?}",
            short(&o_doc),
            short(&o_json)
        ));
    }
    // The one folding that changes a result: the optimiser makes `x in []` false without
    // evaluating `x` (cel-go's OptOptimize), where the plain program meets `x`'s error.
    let folded_away = p_doc.result.is_err() && {
        let squeezed: String = expr
            .chars()
            .filter(|c| !c.is_whitespace() && !matches!(c, '(' | ')'))
            .collect();
        squeezed.contains("in[]")
    };
    if !o_doc.cancelled && !p_doc.cancelled && o_doc.result != p_doc.result && !folded_away {
        return Err(format!(
            "with and without the optimiser: {:?} vs {:?}",
            short(&o_doc),
            short(&p_doc)
        ));
    }
    Ok(())
}

fn short(o: &Outcome) -> String {
    let r = match &o.result {
        Ok(v) => format!("Ok({})", truncate(v, 300)),
        Err(e) => format!("Err({})", truncate(e, 300)),
    };
    format!("{r} cost {}", o.cost)
}

/// A deterministic authorizer: allows, denies, has no opinion or fails by a hash of the
/// check, so that every path of the authz library runs.
#[derive(Debug)]
struct FakeAuthorizer;

impl Authorizer for FakeAuthorizer {
    fn authorize(&self, a: &Attributes) -> Result<Decision, AuthorizeError> {
        let text = format!("{:?}{}{:?}", a.principal, a.verb, a.target);
        let verdict = match harness::fnv(text.as_bytes()) % 5 {
            0 => {
                return Err(AuthorizeError::Unavailable(
                    format!("cannot reach the API server for {}", a.verb).into(),
                ))
            }
            1 => Verdict::Deny,
            2 => Verdict::NoOpinion,
            _ => Verdict::Allow,
        };
        Ok(Decision {
            verdict,
            reason: format!("{verdict:?} {}", a.verb),
            error: (verdict == Verdict::Deny && a.verb.is_empty()).then(|| "empty verb".into()),
        })
    }
}

fn bind<'a>(s: &Slots, object: Value<'a>, req: &'a Json, ns: &'a Json) -> Vec<Value<'a>> {
    let n = envs().optimized.variables().len();
    let mut v = vec![Value::Null; n];
    v[s.object] = object.clone();
    v[s.old_object] = object.clone();
    if let Some(p) = s.params {
        v[p] = object;
    }
    v[s.request] = Value::from_json(req);
    v[s.namespace_object] = Value::from_json(ns);
    let authz = AuthorizerValue::new(Arc::new(FakeAuthorizer));
    if let Some(slot) = s.request_resource {
        v[slot] = Value::opaque(authz.request_resource(request_resource_attributes(req)));
    }
    if let Some(slot) = s.authorizer {
        v[slot] = Value::opaque(authz);
    }
    v
}

// ---------------------------------------------------------------------------------------
// Target: parse (lexer, parser, checker on arbitrary and grammar-aware text).

fn corpus() -> &'static Vec<String> {
    static C: OnceLock<Vec<String>> = OnceLock::new();
    C.get_or_init(|| {
        let mut v: Vec<String> = std::fs::read_to_string(shared_dir().join("cel-differential/cases.jsonl"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str::<Json>(l).ok())
            .filter_map(|j| j["expr"].as_str().map(str::to_string))
            .collect();
        v.extend(
            [
                "object.spec.containers.all(c, !has(c.securityContext) || c.securityContext.privileged != true)",
                "object.metadata.labels.exists(k, k.startsWith('app'))",
                "quantity(object.spec.containers[0].resources.limits.cpu).isLessThan(quantity('1'))",
                "[1, 2, 3].map(x, x * 2).filter(y, y > 2).size() == 2",
                "'%s-%d'.format(['a', 1])",
                "url('https://x.io/a?b=c').getQuery()",
                "ip('10.0.0.1').family() == 4 && cidr('10.0.0.0/8').containsIP('10.1.2.3')",
                "semver('1.2.3').isLessThan(semver('1.3.0'))",
                "object.?spec.?replicas.orValue(1) > 0",
                "{'a': 1}.transformMap(k, v, v + 1)",
                "timestamp('2023-01-01T00:00:00Z') + duration('1h') > timestamp(0)",
                "request.userInfo.groups.exists(g, g == 'system:masters')",
                "lists.range(10).sortBy(x, -x)[0]",
                "'abc'.matches('^a') && 'abc'.find('b+') == 'b'",
            ]
            .map(str::to_string),
        );
        v
    })
}

pub fn parse_input(bytes: &[u8]) -> String {
    let mut c = Choices::new(bytes);
    match c.below(8) {
        0 => cel_gen::raw_text(&mut c),
        1 => cel_gen::token_soup(&mut c),
        2 | 3 => cel_gen::grammar_expr(&mut c, 0),
        4 | 5 => {
            let corpus = corpus();
            let base = corpus[c.below(corpus.len())].clone();
            cel_gen::mutate_text(&mut c, &base)
        }
        6 => {
            let object: Json = serde_json::from_slice(fixed_object()).unwrap_or(Json::Null);
            cel_gen::typed_expr(&mut c, &object)
        }
        _ => cel_gen::deep(&mut c),
    }
}

pub fn check_parse(src: &str) -> Result<(), String> {
    // An older Kubernetes version gates libraries and macros: compiling there must not panic
    // either.
    let version = 27 + (harness::fnv(src.as_bytes()) % 11) as u16;
    let (old, _) = vap_env(
        version,
        Decls {
            params: false,
            authorizer: true,
        },
    );
    let _compiled_or_refused = compile(&old, src)?;
    check_expr(src, fixed_object())
}

pub fn replay_parse(data: &[u8]) -> Result<(), String> {
    check_parse(&String::from_utf8_lossy(data))
}

// ---------------------------------------------------------------------------------------
// Target: eval (well-typed expressions over generated JSON).

#[derive(Debug, Clone)]
pub struct EvalInput {
    pub expr: String,
    pub object: Json,
}

pub fn eval_input(bytes: &[u8]) -> EvalInput {
    let mut c = Choices::new(bytes);
    let object = json_gen::root_object(&mut c);
    let expr = cel_gen::typed_expr(&mut c, &object);
    EvalInput { expr, object }
}

pub fn check_eval(i: &EvalInput) -> Result<(), String> {
    let bytes = serde_json::to_vec(&i.object).map_err(|e| e.to_string())?;
    check_expr(&i.expr, &bytes)
}

pub fn encode_eval(i: &EvalInput) -> Vec<u8> {
    serde_json::to_vec_pretty(&json!({"expr": i.expr, "object": i.object})).unwrap_or_default()
}

pub fn replay_eval(data: &[u8]) -> Result<(), String> {
    let j: Json = serde_json::from_slice(data).map_err(|e| format!("unreadable input: {e}"))?;
    let expr = j["expr"].as_str().ok_or("input has no expr")?.to_string();
    check_eval(&EvalInput {
        expr,
        object: j["object"].clone(),
    })
}

// ---------------------------------------------------------------------------------------
// Target: doc (`Doc::parse` on arbitrary and mutated JSON).

pub fn doc_input(bytes: &[u8]) -> Vec<u8> {
    let mut c = Choices::new(bytes);
    match c.below(5) {
        0 => (0..c.below(64)).map(|_| c.byte()).collect(),
        1 | 2 => {
            let mut s = String::new();
            json_gen::json_text(&mut c, 0, &mut s);
            let mut b = s.into_bytes();
            json_gen::mutate_bytes(&mut c, &mut b, json_gen::JSON_TOKENS);
            b
        }
        3 => {
            let v = json_gen::value(&mut c, 0);
            let mut b = serde_json::to_vec(&v).unwrap_or_default();
            json_gen::mutate_bytes(&mut c, &mut b, json_gen::JSON_TOKENS);
            b
        }
        _ => {
            let cases = cases();
            let original = &cases[c.below(cases.len())].review;
            let mut b = match serde_json::from_slice::<Json>(original) {
                Ok(mut v) => {
                    json_gen::mutate_tree(&mut c, &mut v);
                    serde_json::to_vec(&v).unwrap_or_default()
                }
                Err(_) => original.clone(),
            };
            json_gen::mutate_bytes(&mut c, &mut b, json_gen::JSON_TOKENS);
            b
        }
    }
}

/// Whether some object of the JSON text has a key twice.
struct Dups(bool);

impl<'de> Deserialize<'de> for Dups {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(DupVisitor)
    }
}

struct DupVisitor;

impl<'de> Visitor<'de> for DupVisitor {
    type Value = Dups;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("JSON")
    }
    fn visit_bool<E>(self, _: bool) -> Result<Dups, E> {
        Ok(Dups(false))
    }
    fn visit_i64<E>(self, _: i64) -> Result<Dups, E> {
        Ok(Dups(false))
    }
    fn visit_u64<E>(self, _: u64) -> Result<Dups, E> {
        Ok(Dups(false))
    }
    fn visit_f64<E>(self, _: f64) -> Result<Dups, E> {
        Ok(Dups(false))
    }
    fn visit_str<E>(self, _: &str) -> Result<Dups, E> {
        Ok(Dups(false))
    }
    fn visit_unit<E>(self) -> Result<Dups, E> {
        Ok(Dups(false))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<Dups, A::Error> {
        let mut dup = false;
        while let Some(Dups(d)) = a.next_element()? {
            dup |= d;
        }
        Ok(Dups(dup))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<Dups, A::Error> {
        let mut keys = HashSet::new();
        let mut dup = false;
        while let Some(k) = a.next_key::<String>()? {
            dup |= !keys.insert(k);
            let Dups(d) = a.next_value()?;
            dup |= d;
        }
        Ok(Dups(dup))
    }
}

fn has_duplicate_keys(data: &[u8]) -> bool {
    serde_json::from_slice::<Dups>(data).is_ok_and(|d| d.0)
}

/// Compares a document node with serde_json's value of the same text, through every
/// accessor: `item`, `str_chars`, `element`, `children`, `next_entry`, `get`, `get_key`,
/// and the CEL view's `size`.
fn compare_doc(r: Ref<'_, '_>, v: &Json, path: &str) -> Result<(), String> {
    let bad = |what: String| Err(format!("at {path}: {what}"));
    match (r.item(), v) {
        (Item::Null, Json::Null) => {}
        (Item::Bool(a), Json::Bool(b)) if a == *b => {}
        (Item::Int(i), Json::Number(n)) if n.as_i64() == Some(i) => {}
        (Item::Double(d), Json::Number(n))
            if n.as_i64().is_none() && n.as_f64().map(f64::to_bits) == Some(d.to_bits()) => {}
        (Item::Str(s), Json::String(t)) => {
            if s != t {
                return bad(format!("string {s:?} vs {t:?}"));
            }
            let chars = r.str_chars().map(|(_, n)| n as usize);
            if chars != Some(t.chars().count()) {
                return bad(format!("code points {chars:?} vs {}", t.chars().count()));
            }
        }
        (Item::Array(len), Json::Array(a)) => {
            if len as usize != a.len() || r.children().len() != a.len() {
                return bad(format!("array length {len} vs {}", a.len()));
            }
            if Value::from_doc(r).size() != Some(a.len()) {
                return bad("CEL size of the list".into());
            }
            for (i, (child, x)) in r.children().zip(a).enumerate() {
                compare_doc(child, x, &format!("{path}[{i}]"))?;
            }
            for i in (0..a.len())
                .step_by(1 + a.len() / 8)
                .chain([a.len().saturating_sub(1)])
            {
                match r.element(i) {
                    Some(e) if e.index() == r.children().nth(i).map_or(u32::MAX, |c| c.index()) => {
                    }
                    _ if a.is_empty() => {}
                    other => return bad(format!("element({i}) is {other:?}")),
                }
            }
            if r.element(a.len()).is_some() {
                return bad("element past the end".into());
            }
        }
        (Item::Object(len), Json::Object(m)) => {
            let mut entries = Vec::new();
            let mut ch = r.children();
            while let Some((k, x)) = ch.next_entry() {
                entries.push((k.to_string(), x));
            }
            if entries.len() != len as usize {
                return bad(format!("{} entries, length {len}", entries.len()));
            }
            if entries.len() != m.len() {
                // serde_json, like Go's decoders, keeps the last value of a duplicate key; the
                // document keeps every entry: a CEL map with a key twice, whose lookups give
                // the first value.
                let first = entries
                    .iter()
                    .enumerate()
                    .find(|(i, (k, _))| entries[..*i].iter().any(|(j, _)| j == k))
                    .map(|(_, (k, _))| k.clone())
                    .unwrap_or_default();
                return Err(format!(
                    "duplicate keys: the document keeps {} entries where serde_json keeps {} \
                     (the last of each key) — at {path}, key {first:?}",
                    entries.len(),
                    m.len()
                ));
            }
            for (k, x) in m {
                let p = format!("{path}.{k:?}");
                let Some(got) = r.get(k) else {
                    return bad(format!("get({k:?}) is None"));
                };
                compare_doc(got, x, &p)?;
                if r.get_key(&Key::new(k)).map(|g| g.index()) != Some(got.index()) {
                    return bad(format!("get_key({k:?}) differs from get"));
                }
            }
            if r.get("\u{0}no such key").is_some() {
                return bad("get of an absent key".into());
            }
            if Value::from_doc(r).size() != Some(m.len()) {
                return bad("CEL size of the map".into());
            }
        }
        (item, v) => {
            let item = match item {
                Item::Double(d) => format!("Double({d:?})"),
                Item::Int(i) => format!("Int({i})"),
                Item::Str(s) => format!("Str({s:?})"),
                Item::Bool(b) => format!("Bool({b})"),
                Item::Null => "Null".into(),
                Item::Array(n) => format!("Array({n})"),
                Item::Object(n) => format!("Object({n})"),
                Item::Skipped { object } => format!("Skipped(object: {object})"),
            };
            return bad(format!("{item} vs serde_json's {v}"));
        }
    }
    Ok(())
}

/// The byte-level parser alone (no fallback) accepts exactly what the serde_json-driven one
/// accepts and builds the same tables; `Doc::parse` gives the serde path's error text.
fn check_parsers(data: &[u8]) -> Result<(), String> {
    let serde = Doc::parse_serde(data);
    match (Doc::parse_bytes_only(data, None), &serde) {
        (Some(a), Ok(b)) => {
            if a.layout() != b.layout() {
                return Err(format!(
                    "byte-level and serde parses differ:\n{}\nvs\n{}",
                    a.layout(),
                    b.layout()
                ));
            }
        }
        (None, Err(_)) => {}
        (a, b) => {
            return Err(format!(
                "byte-level parse accepts: {}, serde parse: {:?}",
                a.is_some(),
                b.as_ref().map(|_| ()).map_err(ToString::to_string)
            ))
        }
    }
    match (Doc::parse(data), serde) {
        (Ok(_), Ok(_)) => Ok(()),
        (Err(a), Err(b)) if a.to_string() == b.to_string() => Ok(()),
        (a, b) => Err(format!(
            "Doc::parse {:?} vs parse_serde {:?}",
            a.map(|_| ()).map_err(|e| e.to_string()),
            b.map(|_| ()).map_err(|e| e.to_string())
        )),
    }
}

/// The projections a review's readers use, chosen by the input's length: the object's name,
/// its containers' images, presence tests on volumes, nothing of the old object, the whole
/// document skipped, every element of a top-level array skipped but for one field.
fn fuzz_projections(data: &[u8]) -> Projections {
    let mut object = Projection::none();
    let mut routes = Projections::new();
    match data.len() % 5 {
        0 => object.field_mut("metadata").field_mut("name").set_whole(),
        1 => {
            let spec = object.field_mut("spec");
            spec.field_mut("containers")
                .each_mut()
                .field_mut("image")
                .set_whole();
            spec.field_mut("volumes").each_mut().field_mut("hostPath");
        }
        2 => {
            routes.project(&[], &Projection::none());
            return routes;
        }
        3 => {
            let mut each = Projection::none();
            each.each_mut().field_mut("a").set_whole();
            routes.project(&[], &each);
            return routes;
        }
        _ => object.field_mut("metadata").set_whole(),
    }
    routes.project(&["request", "object"], &object);
    routes.project(&["request", "oldObject"], &Projection::none());
    routes
}

/// A projected parse accepts and refuses exactly what the full parse does (with its error
/// text), and reads the same wherever it built a node; a skipped container is one of the
/// full parse's, with the same value.
fn check_projected(data: &[u8]) -> Result<(), String> {
    let routes = fuzz_projections(data);
    let full = Doc::parse(data);
    if Doc::parse_bytes_only(data, Some(&routes)).is_some() != full.is_ok() {
        return Err(format!(
            "byte-level projected parse accepts: {}, full parse: {:?}",
            full.is_err(),
            full.as_ref().map(|_| ()).map_err(ToString::to_string)
        ));
    }
    match (Doc::parse_projected(data, &routes), full) {
        (Ok(p), Ok(f)) => {
            let mut skipped = 0;
            same_where_built(p.root(), f.root(), "$", &mut skipped)?;
            stat(if skipped > 0 {
                "projected: some skipped"
            } else {
                "projected: nothing skipped"
            });
            Ok(())
        }
        (Err(a), Err(b)) if a.to_string() == b.to_string() => Ok(()),
        (a, b) => Err(format!(
            "projected {:?} vs full {:?}",
            a.map(|_| ()).map_err(|e| e.to_string()),
            b.map(|_| ()).map_err(|e| e.to_string())
        )),
    }
}

fn same_where_built(
    p: Ref<'_, '_>,
    f: Ref<'_, '_>,
    path: &str,
    skipped: &mut usize,
) -> Result<(), String> {
    let bad = |what: &str| Err(format!("projected at {path}: {what}"));
    match (p.item(), f.item()) {
        (Item::Skipped { object }, full) => {
            *skipped += 1;
            if !matches!(
                (object, full),
                (true, Item::Object(_)) | (false, Item::Array(_))
            ) {
                return bad("skipped a non-container or the wrong kind");
            }
            if p.to_value() != f.to_value() || p.children().next().is_some() {
                return bad("skipped value differs");
            }
        }
        (Item::Object(n), Item::Object(m)) => {
            if n != m {
                return bad("member count");
            }
            let (mut a, mut b) = (p.children(), f.children());
            while let (Some((ka, va)), Some((kb, vb))) = (a.next_entry(), b.next_entry()) {
                if ka != kb || p.get(ka).map(|r| r.index()) != Some(va.index()) {
                    return bad("keys differ");
                }
                celgate::cel::json::with_stack(|| {
                    same_where_built(va, vb, &format!("{path}.{ka:?}"), skipped)
                })?;
            }
        }
        (Item::Array(n), Item::Array(m)) => {
            if n != m {
                return bad("length");
            }
            for (i, (a, b)) in p.children().zip(f.children()).enumerate() {
                if p.element(i).map(|r| r.index()) != Some(a.index()) {
                    return bad("element index");
                }
                celgate::cel::json::with_stack(|| {
                    same_where_built(a, b, &format!("{path}[{i}]"), skipped)
                })?;
            }
        }
        _ => {
            if p.to_value() != f.to_value() {
                return bad("scalar differs");
            }
        }
    }
    Ok(())
}

/// The document property: `Doc::parse` accepts exactly what serde_json accepts (it may also
/// refuse duplicate keys or nesting past the API server's limit), and what it parses reads
/// back as serde_json's value through every accessor. serde_json is asked without its
/// recursion limit of 128, since documents accept what the API server accepts (10,000
/// levels); fuzz inputs are small enough for the fuzz thread's stack.
pub fn check_doc(data: &[u8]) -> Result<(), String> {
    check_parsers(data)?;
    check_projected(data)?;
    let doc = Doc::parse(data);
    let serde: Result<Json, _> = {
        let mut de = serde_json::Deserializer::from_slice(data);
        de.disable_recursion_limit();
        serde::Deserialize::deserialize(&mut de).and_then(|v| de.end().map(|()| v))
    };
    match (doc, serde) {
        (Ok(d), Ok(v)) => {
            stat("both accept");
            let _ = d.root().to_value();
            compare_doc(d.root(), &v, "$")
        }
        (Ok(_), Err(e)) => Err(format!("Doc::parse accepts what serde_json refuses: {e}")),
        (Err(e), Ok(_)) => {
            let m = e.to_string();
            if has_duplicate_keys(data)
                || m.starts_with("duplicate key")
                || m.contains("depth")
                || m.contains("nest")
                || m.contains("recursion")
            {
                stat("Doc refuses (duplicate keys or depth)");
                Ok(())
            } else {
                Err(format!("Doc::parse refuses what serde_json accepts: {m}"))
            }
        }
        (Err(_), Err(_)) => {
            stat("both refuse");
            Ok(())
        }
    }
}

// ---------------------------------------------------------------------------------------
// Target: review (the request path on mutated AdmissionReviews).

#[derive(Debug, Clone)]
pub struct CaseInput<T> {
    pub case: usize,
    pub data: T,
}

pub fn review_input(case: usize, bytes: &[u8]) -> CaseInput<Vec<u8>> {
    let ids = answerable();
    let case = ids[case % ids.len()];
    let mut c = Choices::new(bytes);
    let original = &cases()[case].review;
    let mut body = match serde_json::from_slice::<Json>(original) {
        Ok(mut v) if !c.chance(1, 8) => {
            json_gen::mutate_tree(&mut c, &mut v);
            serde_json::to_vec(&v).unwrap_or_default()
        }
        _ => original.clone(),
    };
    if c.chance(1, 3) {
        json_gen::mutate_bytes(&mut c, &mut body, json_gen::JSON_TOKENS);
    }
    CaseInput { case, data: body }
}

/// Answers `body` with `snap`: an answer (a well-formed review whose uid is the request's)
/// or a clean error, never a panic; and the same answer for the same JSON written another
/// way ([`written_otherwise`]), when it is JSON without duplicate keys.
fn answer_one(snap: &Snapshot, body: &[u8]) -> Result<(), String> {
    let first = answer_checked(snap, body)?;
    if serde_json::from_slice::<Json>(body).is_ok() {
        let again = written_otherwise(body);
        if again != body && !has_duplicate_keys(body) {
            let second = answer_checked(snap, &again)?;
            if first != second {
                return Err(format!(
                    "the answer depends on how the JSON is written: {} vs {}",
                    truncate(&format!("{first:?}"), 400),
                    truncate(&format!("{second:?}"), 400)
                ));
            }
        }
    }
    Ok(())
}

/// The JSON document `body` written another way, its keys in their order (a policy may see
/// a map's order: `object.data.map(k, ...)` joined into a message; the API server's own order
/// is Go's random map order, so only the document's order is a stable reference): white space
/// after every `,`, `{`, `[` and `:`; every `a` in a string or key written as the escape
/// `\u0061` (so that keys read by the policies are found through the parser's unescaping);
/// every number with a fraction or an exponent written with another mantissa and exponent
/// for the same real number (`7e106` as `70e105`: a correctly rounded parser reads both as
/// the same double, as Go does).
fn written_otherwise(body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(body.len() * 2);
    let (mut in_string, mut escaped, mut hex) = (false, false, 0);
    let mut i = 0;
    while i < body.len() {
        let b = body[i];
        i += 1;
        if hex > 0 {
            hex -= 1;
            out.push(b);
        } else if escaped {
            escaped = false;
            hex = if b == b'u' { 4 } else { 0 };
            out.push(b);
        } else if in_string {
            match b {
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            if b == b'a' {
                out.extend_from_slice(b"\\u0061");
            } else {
                out.push(b);
            }
        } else if b == b'-' || b.is_ascii_digit() {
            let start = i - 1;
            while i < body.len()
                && matches!(body[i], b'0'..=b'9' | b'.' | b'e' | b'E' | b'+' | b'-')
            {
                i += 1;
            }
            out.extend_from_slice(&same_number(&body[start..i]));
        } else {
            out.push(b);
            match b {
                b'"' => in_string = true,
                b',' | b'{' | b'[' => out.extend_from_slice(b"\n "),
                b':' => out.push(b' '),
                _ => {}
            }
        }
    }
    out
}

/// A JSON number token with a fraction or an exponent written as `<digits>0e<exponent - 1>`
/// (the same real number, still not an integer token); other tokens as they are.
fn same_number(token: &[u8]) -> Vec<u8> {
    let text = String::from_utf8_lossy(token);
    if !text.contains(['.', 'e', 'E']) {
        return token.to_vec();
    }
    let (sign, rest) = match text.strip_prefix('-') {
        Some(r) => ("-", r),
        None => ("", &*text),
    };
    let (mantissa, exponent) = match rest.split_once(['e', 'E']) {
        Some((m, e)) => match e.parse::<i64>() {
            Ok(e) => (m, e),
            Err(_) => return token.to_vec(),
        },
        None => (rest, 0),
    };
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let digits = format!("{int}{frac}");
    let digits = digits.trim_start_matches('0');
    if digits.is_empty() || !digits.bytes().all(|d| d.is_ascii_digit()) {
        return token.to_vec();
    }
    let Some(exponent) = exponent.checked_sub(frac.len() as i64 + 1) else {
        return token.to_vec();
    };
    format!("{sign}{digits}0e{exponent}").into_bytes()
}

fn answer_checked(snap: &Snapshot, body: &[u8]) -> Result<Result<Json, String>, String> {
    let answered = celgate::review::answer(snap, body, &Default::default(), Default::default());
    // The objects parsed as far as the policies read them answer as the whole objects do.
    let whole =
        celgate::review::answer_parsed_whole(snap, body, &Default::default(), Default::default());
    let shown = |r: &Result<celgate::review::Answer, celgate::review::ReviewError>| match r {
        Ok(a) => a.review().to_string(),
        Err(e) => e.to_string(),
    };
    if shown(&answered) != shown(&whole) {
        return Err(format!(
            "the projected parse answers {} where the whole parse answers {}",
            truncate(&shown(&answered), 400),
            truncate(&shown(&whole), 400)
        ));
    }
    match answered {
        Ok(a) => {
            stat("answered");
            let resp = &a.review()["response"];
            if !resp["allowed"].is_boolean() {
                return Err(format!(
                    "answer without allowed: {}",
                    truncate(&a.review().to_string(), 300)
                ));
            }
            if let Ok(v) = serde_json::from_slice::<Json>(body) {
                if let Some(uid) = v["request"]["uid"].as_str() {
                    if !has_duplicate_keys(body) && resp["uid"].as_str() != Some(uid) {
                        return Err(format!(
                            "answer uid {} for request uid {uid:?}",
                            resp["uid"]
                        ));
                    }
                }
            }
            Ok(Ok(a.review()))
        }
        Err(e) => {
            stat("refused");
            let message = e.to_string();
            if message.trim().is_empty() {
                return Err("a refusal without a message".into());
            }
            Ok(Err(message))
        }
    }
}

pub fn check_review(i: &CaseInput<Vec<u8>>) -> Result<(), String> {
    let snap = cases()[i.case]
        .snapshot
        .as_ref()
        .ok_or("case without a snapshot")?;
    answer_one(snap, &i.data)
}

/// A kept review is answered by every case's snapshot.
pub fn replay_review(data: &[u8]) -> Result<(), String> {
    for &i in answerable() {
        let snap = cases()[i]
            .snapshot
            .as_ref()
            .ok_or("case without a snapshot")?;
        answer_one(snap, data).map_err(|e| format!("{}: {e}", cases()[i].name))?;
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Target: policy (the folder loader, validation and compilation on mutated YAML).

pub fn policy_input(case: usize, bytes: &[u8]) -> CaseInput<String> {
    let all = cases();
    let case = case % all.len();
    let mut c = Choices::new(bytes);
    let original = &all[case].objects;
    let text = match c.below(5) {
        0..=2 => {
            let docs: Result<Vec<Json>, _> = serde_yaml_ng::Deserializer::from_str(original)
                .map(Json::deserialize)
                .collect();
            match docs {
                Ok(mut docs) if !docs.is_empty() => {
                    let n = docs.len();
                    for _ in 0..1 + c.below(2) {
                        let i = c.below(n);
                        json_gen::mutate_tree(&mut c, &mut docs[i]);
                    }
                    docs.iter()
                        .map(|d| serde_yaml_ng::to_string(d).unwrap_or_default())
                        .collect::<Vec<_>>()
                        .join("---\n")
                }
                _ => original.clone(),
            }
        }
        3 => {
            let t = json_gen::mutate_lines(&mut c, original);
            let mut b = t.into_bytes();
            json_gen::mutate_bytes(&mut c, &mut b, json_gen::YAML_TOKENS);
            String::from_utf8_lossy(&b).into_owned()
        }
        _ => format!("{}---\n{original}", json_gen::alias_bomb(&mut c)),
    };
    CaseInput { case, data: text }
}

/// Loads `text` as a folder file, builds strict and lenient snapshots, and answers `review`
/// with the lenient one: no panic anywhere.
fn load_one(text: &str, reviews: &[&[u8]]) -> Result<(), String> {
    let objects = match folder::parse_documents(Path::new("fuzz.yaml"), text) {
        Ok(o) => o,
        Err(e) => {
            stat("yaml refused");
            // The parser's own message, behind celgate's file and document prefix.
            let detail = std::error::Error::source(&e).map(ToString::to_string);
            if detail.is_some_and(|d| d.trim().is_empty()) {
                return Err("a load error without a message".into());
            }
            return Ok(());
        }
    };
    let mut objects = objects;
    add_cluster_defaults(&mut objects);
    if snapshot(objects.clone(), NEWEST_MINOR, true).is_err() {
        stat("strict refusal");
    }
    match snapshot(objects, NEWEST_MINOR, false) {
        Ok(snap) => {
            stat("loaded");
            for r in reviews {
                answer_one(&snap, r)?;
            }
            Ok(())
        }
        Err(_) => {
            stat("refused");
            Ok(())
        }
    }
}

pub fn check_policy(i: &CaseInput<String>) -> Result<(), String> {
    load_one(&i.data, &[&cases()[i.case].review])
}

/// A kept file is loaded and answers every case's review.
pub fn replay_policy(data: &[u8]) -> Result<(), String> {
    let reviews: Vec<&[u8]> = cases().iter().map(|c| c.review.as_slice()).collect();
    load_one(&String::from_utf8_lossy(data), &reviews)
}

// ---------------------------------------------------------------------------------------
// Reducer candidates.

pub fn shrink_text(s: &str) -> Vec<String> {
    harness::text_removals(s)
}

pub fn shrink_bytes(b: &[u8]) -> Vec<Vec<u8>> {
    harness::chunk_removals(b)
}

pub fn shrink_eval(i: &EvalInput) -> Vec<EvalInput> {
    let mut out: Vec<EvalInput> = json_gen::removals(&i.object)
        .into_iter()
        .map(|object| EvalInput {
            expr: i.expr.clone(),
            object,
        })
        .collect();
    out.extend(
        harness::text_removals(&i.expr)
            .into_iter()
            .map(|expr| EvalInput {
                expr,
                object: i.object.clone(),
            }),
    );
    out
}

pub fn shrink_review(i: &CaseInput<Vec<u8>>) -> Vec<CaseInput<Vec<u8>>> {
    let mut out: Vec<Vec<u8>> = match serde_json::from_slice::<Json>(&i.data) {
        Ok(v) => json_gen::removals(&v)
            .iter()
            .filter_map(|w| serde_json::to_vec(w).ok())
            .collect(),
        Err(_) => Vec::new(),
    };
    out.extend(harness::chunk_removals(&i.data));
    out.into_iter()
        .map(|data| CaseInput { case: i.case, data })
        .collect()
}

pub fn shrink_policy(i: &CaseInput<String>) -> Vec<CaseInput<String>> {
    harness::text_removals(&i.data)
        .into_iter()
        .map(|data| CaseInput { case: i.case, data })
        .collect()
}

// ---------------------------------------------------------------------------------------
// Target: mutate (MutatingAdmissionPolicies: the dispatcher, apply configurations, JSON
// patches and the webhook's patch, on mutated reviews of the recorded MAP cases).

/// The recorded MutatingAdmissionPolicy cases with a snapshot: objects and the review the
/// webhook received.
pub fn map_cases() -> &'static Vec<Case> {
    static C: OnceLock<Vec<Case>> = OnceLock::new();
    C.get_or_init(|| {
        let mut out = Vec::new();
        for d in sub_dirs(&shared_dir().join("map-oracle-sample/cases")) {
            let (Ok(objects), Ok(review)) = (
                std::fs::read_to_string(d.join("objects.yaml")),
                std::fs::read(d.join("review-in.json")),
            ) else {
                continue;
            };
            let snapshot = load_snapshot(&objects).filter(|s| !s.mutating.is_empty());
            if snapshot.is_some() {
                out.push(Case {
                    name: d.display().to_string(),
                    snapshot,
                    objects,
                    review,
                });
            }
        }
        out
    })
}

pub fn mutate_input(case: usize, bytes: &[u8]) -> CaseInput<Vec<u8>> {
    let all = map_cases();
    let case = case % all.len().max(1);
    let mut c = Choices::new(bytes);
    let original = all.get(case).map(|c| c.review.clone()).unwrap_or_default();
    let mut body = match serde_json::from_slice::<Json>(&original) {
        Ok(mut v) if !c.chance(1, 8) => {
            json_gen::mutate_tree(&mut c, &mut v);
            serde_json::to_vec(&v).unwrap_or_default()
        }
        _ => original,
    };
    if c.chance(1, 4) {
        json_gen::mutate_bytes(&mut c, &mut body, json_gen::JSON_TOKENS);
    }
    CaseInput { case, data: body }
}

/// Answers `body` at `/mutate` with `snap`: a well-formed review (the request's uid; allowed
/// with a patch that decodes as a JSON array of operations, or denied with a status), or a
/// clean refusal; never a panic.
fn mutate_one(snap: &Snapshot, body: &[u8]) -> Result<(), String> {
    use base64::Engine as _;
    match celgate::review::answer_mutating(snap, body, &Default::default()) {
        Err(e) => {
            stat("refused");
            if e.to_string().trim().is_empty() {
                return Err("a refusal without a message".into());
            }
            Ok(())
        }
        Ok(a) => {
            let resp = &a.review["response"];
            match resp["allowed"].as_bool() {
                None => Err(format!(
                    "answer without allowed: {}",
                    truncate(&a.review.to_string(), 300)
                )),
                Some(false) => {
                    stat("denied");
                    if resp["status"]["message"]
                        .as_str()
                        .is_none_or(|m| m.is_empty())
                    {
                        return Err("a denial without a message".into());
                    }
                    Ok(())
                }
                Some(true) => {
                    let Some(patch) = resp["patch"].as_str() else {
                        stat("unchanged");
                        return Ok(());
                    };
                    stat("patched");
                    let bytes = base64::engine::general_purpose::STANDARD
                        .decode(patch)
                        .map_err(|e| format!("patch is not base64: {e}"))?;
                    let ops: Json = serde_json::from_slice(&bytes)
                        .map_err(|e| format!("patch is not JSON: {e}"))?;
                    if !ops.is_array() {
                        return Err(format!(
                            "patch is not a list: {}",
                            truncate(&ops.to_string(), 300)
                        ));
                    }
                    Ok(())
                }
            }
        }
    }
}

pub fn check_mutate(i: &CaseInput<Vec<u8>>) -> Result<(), String> {
    let snap = map_cases()
        .get(i.case)
        .and_then(|c| c.snapshot.as_ref())
        .ok_or("case without a snapshot")?;
    mutate_one(snap, &i.data)
}

/// A kept review is answered by every recorded MAP case's snapshot.
pub fn replay_mutate(data: &[u8]) -> Result<(), String> {
    for c in map_cases() {
        if let Some(snap) = &c.snapshot {
            mutate_one(snap, data).map_err(|e| format!("{}: {e}", c.name))?;
        }
    }
    Ok(())
}
