//! Evaluates one CEL differential case (`../shared/cel-differential/README.md`) with celgate
//! as Kubernetes 1.32's ValidatingAdmissionPolicy plugin evaluated it, and encodes the result
//! in the README's record format. Shared by `examples/cel-batch.rs` and
//! `tests/cel_differential.rs`, so both run exactly the same code.
//!
//! What it mirrors: the environment (`vap_env(32)` with params and the authorizer declared,
//! plus the composited `variables`, each compiled with the earlier ones declared, as
//! `policy::compile` does); the bindings (objects as JSON documents, `request` and
//! `namespaceObject` as the API server converts them, the fake authorizer); the lazy,
//! cached variables whose cost is counted apart (as `admission::validator` does, whose
//! activation is private); and the per-expression cost limit.
//!
//! Where celgate's public API has no counterpart, the mapping is this module's: celgate
//! reports constant-folding and constant-regex errors when it checks an expression, cel-go when
//! it creates the program; such an error (one issue whose message is an evaluation error's)
//! is reported at stage `program` with the plain message.

use std::cell::{Cell, RefCell};
use std::sync::Arc;

use celgate::cel::json::Doc;
use celgate::cel::k8s::authz::{AuthorizerValue, UserInfo};
use celgate::cel::vap::{composited_type, request_resource_attributes, vap_env, Decls, Slots};
use celgate::cel::{
    Activation, CompileError, Env, EvalError, Meter, Program, Type, Value, PER_CALL_LIMIT,
};
use celgate::policy::namespace_object::namespace_view;
use serde_json::{json, Map as JsonMap, Value as Json};

#[path = "fake_authz.rs"]
pub mod fake_authz;

/// `--k8s-version 1.32`.
pub const K8S_MINOR: u16 = 32;

/// The composited variables declared for every case, in order.
pub const COMPOSITED: &[(&str, &str)] = &[
    ("podName", "object.metadata.name"),
    ("images", "object.spec.containers.map(c, c.image)"),
    ("imageCount", "size(variables.images)"),
    ("isCreate", "request.operation == 'CREATE'"),
    (
        "appLabel",
        "object.metadata.?labels[?'app.kubernetes.io/name']",
    ),
    (
        "teamOrDefault",
        "object.metadata.?labels.?team.orValue('none')",
    ),
    ("divByZero", "size(object.metadata.name) / 0"),
    ("broken", "object.metadata.name + 1 + undefinedVariable"),
    (
        "memLimit",
        "quantity(object.spec.containers[0].resources.limits.memory)",
    ),
    (
        "expensive",
        "object.spec.containers.all(c, c.image.matches('^registry\\\\.example\\\\.com/[a-z0-9-]+:[0-9.]+$'))",
    ),
    ("nsEnv", "namespaceObject.metadata.labels['env']"),
    ("paramsData", "params.data"),
];

/// A composited variable: its name and program, or the text of its compile error.
type Compiled = (String, Result<Program, String>);

/// The compiled environment every case is evaluated in.
pub struct Harness {
    env: Env,
    slots: Slots,
    variables: Vec<Compiled>,
}

fn decls() -> Decls {
    Decls {
        params: true,
        authorizer: true,
    }
}

impl Default for Harness {
    fn default() -> Self {
        Harness::new()
    }
}

impl Harness {
    pub fn new() -> Harness {
        let mut fields: Vec<(String, Type)> = Vec::new();
        let mut variables = Vec::with_capacity(COMPOSITED.len());
        for (name, source) in COMPOSITED {
            let (mut env, _) = vap_env(K8S_MINOR, decls());
            env.declare_lazy("variables", fields.clone());
            let compiled = env
                .compile(source)
                .map_err(|e| format!("compilation failed: {e}"));
            let ty = compiled
                .as_ref()
                .map_or(Type::Dyn, |p| composited_type(p.result_type()));
            fields.push((name.to_string(), ty));
            variables.push((name.to_string(), compiled));
        }
        let (mut env, slots) = vap_env(K8S_MINOR, decls());
        env.declare_lazy("variables", fields);
        Harness {
            env,
            slots,
            variables,
        }
    }

    /// The output record of one case (`id`, `expr`, `vars`; other keys ignored).
    pub fn evaluate(&self, case: &Json) -> Json {
        let id = case.get("id").cloned().unwrap_or(Json::Null);
        let Some(expr) = case.get("expr").and_then(Json::as_str) else {
            return harness_error(id, "the case has no string `expr`".into());
        };
        let empty = JsonMap::new();
        let vars = match case.get("vars") {
            None | Some(Json::Null) => &empty,
            Some(Json::Object(m)) => m,
            Some(_) => return harness_error(id, "`vars` is not a JSON object".into()),
        };
        let program = match self.env.compile(expr) {
            Ok(p) => p,
            Err(e) => {
                let (error, stage) = compile_failure(&e);
                return json!({"id": id, "outcome": "compile_error", "error": error, "error_stage": stage});
            }
        };
        match self.run(&program, vars) {
            Ok(mut record) => {
                record.insert("id".into(), id);
                record.insert(
                    "static_type".into(),
                    Json::String(program.result_type().to_string()),
                );
                Json::Object(record)
            }
            Err(message) => harness_error(id, message),
        }
    }

    /// Binds `vars`, evaluates, and returns the record's outcome, value or error, and costs.
    fn run(
        &self,
        program: &Program,
        vars: &JsonMap<String, Json>,
    ) -> Result<JsonMap<String, Json>, String> {
        let var = |name: &str| vars.get(name).filter(|v| !v.is_null());
        for name in ["object", "oldObject", "params", "namespaceObject"] {
            if var(name).is_some_and(|v| !v.is_object()) {
                return Err(format!("`{name}` must be a JSON object or null"));
            }
        }
        let request = var("request");
        // Objects and the request go through the document parser, as a review body does.
        let texts = [
            var("object").map(Json::to_string),
            var("oldObject").map(Json::to_string),
            request.map(|r| request_view(r).to_string()),
        ];
        let mut docs = Vec::with_capacity(texts.len());
        for t in &texts {
            docs.push(match t {
                Some(t) => Some(Doc::parse(t.as_bytes()).map_err(|e| format!("bad JSON: {e}"))?),
                None => None,
            });
        }
        let namespace = var("namespaceObject").map(namespace_view);

        let mut values: Vec<Value<'_>> = vec![Value::Null; self.env.variables().len()];
        let s = self.slots;
        values[s.object] = doc_value(&docs[0]);
        values[s.old_object] = doc_value(&docs[1]);
        values[s.request] = doc_value(&docs[2]);
        values[s.namespace_object] = namespace.as_ref().map_or(Value::Null, Value::from_json);
        if let Some(p) = s.params {
            values[p] = var("params").map_or(Value::Null, Value::from_json);
        }
        if let (Some(a), Some(r)) = (s.authorizer, s.request_resource) {
            let user = request.map(user_info).unwrap_or_default();
            let authz = AuthorizerValue::new(Arc::new(fake_authz::FakeAuthorizer { user }));
            let raw = request.cloned().unwrap_or(Json::Null);
            values[r] = Value::opaque(authz.request_resource(request_resource_attributes(&raw)));
            values[a] = Value::opaque(authz);
        }

        let lazy = Lazy {
            variables: &self.variables,
            values: &values,
            cache: RefCell::new(vec![None; self.variables.len()]),
            cost: Cell::new(0),
        };
        let act = Act {
            values: &values,
            lazy: &lazy,
        };
        let mut meter = Meter::with_limit(PER_CALL_LIMIT);
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            program.eval(&act, &mut meter)
        }));
        // Taken now: encoding the `variables` object reads every variable, uncharged.
        let variables_cost = lazy.cost.get();
        let mut record = JsonMap::new();
        match result {
            Ok(Ok(v)) => {
                record.insert("outcome".into(), "value".into());
                record.insert("type".into(), Json::String(v.type_name().to_string()));
                let value = if is_variables(&v) {
                    lazy.encode_all()
                } else {
                    encode(&v)
                };
                record.insert("value".into(), value);
            }
            Ok(Err(e)) => {
                record.insert("outcome".into(), "eval_error".into());
                record.insert("error".into(), Json::String(e.message().to_string()));
            }
            Err(panic) => {
                let message = panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                record.insert("outcome".into(), "panic".into());
                record.insert("error".into(), Json::String(message));
                record.insert("error_stage".into(), "eval".into());
            }
        }
        record.insert("cost".into(), json!(meter.cost));
        if variables_cost > 0 {
            record.insert("variables_cost".into(), json!(variables_cost));
        }
        Ok(record)
    }
}

fn doc_value<'a>(d: &'a Option<Doc<'a>>) -> Value<'a> {
    d.as_ref()
        .map_or(Value::Null, |d| Value::from_doc(d.root()))
}

fn harness_error(id: Json, message: String) -> Json {
    json!({"id": id, "outcome": "harness_error", "error": message})
}

/// The error text and stage of a compile failure, as cel-go would report it.
fn compile_failure(e: &CompileError) -> (String, &'static str) {
    if let [issue] = e.issues.as_slice() {
        // Kubernetes converts the checked AST (`cel.AstToCheckedExpr`) between compiling and
        // creating the program; the recording names that stage `checked_expr`.
        if issue
            .message
            .starts_with("missing type conversion to proto")
        {
            return (issue.message.clone(), "checked_expr");
        }
        if is_evaluation_error(&issue.message) {
            return (issue.message.clone(), "program");
        }
    }
    (e.to_string(), "compile")
}

/// Messages of evaluation errors, which celgate's checker reports when it folds a constant
/// call or compiles a constant pattern, and cel-go only when it plans the program.
fn is_evaluation_error(message: &str) -> bool {
    const PREFIXES: &[&str] = &[
        "integer overflow",
        "unsigned integer overflow",
        "type conversion error",
        "no such overload",
        "invalid UTF-8",
        "error parsing regexp",
        "timestamp overflow",
        "duration overflow",
        "division by zero",
        "modulus by zero",
        "reference to undefined type",
        "index out of bounds",
        "no such key",
    ];
    PREFIXES.iter().any(|p| message.starts_with(p))
}

/// Composited variables of one evaluation: computed on first read and cached, their cost
/// summed apart from the expression's.
struct Lazy<'a, 'h> {
    variables: &'h [Compiled],
    values: &'h [Value<'a>],
    cache: RefCell<Vec<Option<Result<Value<'a>, EvalError>>>>,
    cost: Cell<u64>,
}

impl<'a> Lazy<'a, '_> {
    fn get(&self, index: usize) -> Result<Value<'a>, EvalError> {
        if let Some(Some(cached)) = self.cache.borrow().get(index) {
            return cached.clone();
        }
        let Some((name, compiled)) = self.variables.get(index) else {
            return Err(EvalError::new(format!("no such variable: {index}")));
        };
        let result = match compiled {
            Err(e) => Err(EvalError::new(format!(
                "composited variable {name:?} fails to compile: {e}"
            ))),
            Ok(program) => {
                let mut meter = Meter::with_limit(PER_CALL_LIMIT);
                let act = Act {
                    values: self.values,
                    lazy: self,
                };
                let r = program.eval(&act, &mut meter);
                self.cost.set(self.cost.get() + meter.cost);
                r.map_err(|e| {
                    EvalError::new(format!(
                        "composited variable {name:?} fails to evaluate: {e}"
                    ))
                })
            }
        };
        if let Some(slot) = self.cache.borrow_mut().get_mut(index) {
            *slot = Some(result.clone());
        }
        result
    }

    /// The `variables` object as the README encodes it: every variable by name, its value
    /// or its error. Read after the expression's cost was taken, as the recorder did.
    fn encode_all(&self) -> Json {
        let mut map = JsonMap::new();
        for (index, (name, _)) in self.variables.iter().enumerate() {
            let entry = match self.get(index) {
                Ok(v) => encode(&v),
                Err(e) => json!({ "error": e.message() }),
            };
            map.insert(name.clone(), entry);
        }
        json!({ "map": map })
    }
}

/// Whether `v` is the composited variables object itself (`variables` used bare).
fn is_variables(v: &Value<'_>) -> bool {
    matches!(v, Value::Opaque(o) if o.type_name() == celgate::cel::VARIABLES_TYPE)
}

struct Act<'a, 'h> {
    values: &'h [Value<'a>],
    lazy: &'h Lazy<'a, 'h>,
}

impl<'a> Activation<'a> for Act<'a, '_> {
    fn var(&self, slot: usize) -> Value<'a> {
        self.values.get(slot).cloned().unwrap_or(Value::Null)
    }

    fn lazy(&self, index: usize) -> Result<Value<'a>, EvalError> {
        self.lazy.get(index)
    }
}

/// Parses one JSON line without serde_json's nesting limit: a record's value can nest as
/// deeply as the expressions the parser accepts.
pub fn parse_line(line: &str) -> Result<Json, serde_json::Error> {
    use serde::Deserialize;
    let mut de = serde_json::Deserializer::from_str(line);
    de.disable_recursion_limit();
    let v = Json::deserialize(&mut de)?;
    de.end()?;
    Ok(v)
}

// ---- bindings ---------------------------------------------------------------------------------

fn text(v: &Json) -> String {
    v.as_str().unwrap_or("").to_string()
}

fn non_empty(out: &mut JsonMap<String, Json>, key: &str, v: &Json) {
    let s = text(v);
    if !s.is_empty() {
        out.insert(key.into(), Json::String(s));
    }
}

/// The request's user, for the authorizer.
fn user_info(request: &Json) -> UserInfo {
    let u = &request["userInfo"];
    let strings = |v: &Json| -> Vec<String> {
        v.as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|s| s.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    };
    UserInfo {
        username: text(&u["username"]),
        uid: text(&u["uid"]),
        groups: strings(&u["groups"]),
        extra: u["extra"]
            .as_object()
            .map(|m| m.iter().map(|(k, v)| (k.clone(), strings(v))).collect())
            .unwrap_or_default(),
    }
}

/// `request` as VAP sees it: the admission attributes rebuilt from the AdmissionRequest, then
/// `CreateAdmissionRequest` and the unstructured conversion (empty strings omitted, `uid`
/// empty, no objects, `dryRun` always present).
fn request_view(r: &Json) -> Json {
    let gvk = |v: &Json| json!({"group": text(&v["group"]), "version": text(&v["version"]), "kind": text(&v["kind"])});
    let gvr = |v: &Json| json!({"group": text(&v["group"]), "version": text(&v["version"]), "resource": text(&v["resource"])});
    let or = |a: &'static str, b: &'static str| -> Json {
        if r[a].is_object() {
            r[a].clone()
        } else {
            r[b].clone()
        }
    };
    let mut out = JsonMap::new();
    out.insert("uid".into(), "".into());
    out.insert("kind".into(), gvk(&r["kind"]));
    out.insert("resource".into(), gvr(&r["resource"]));
    // The attributes have one subresource, which both fields report.
    let sub = match text(&r["subResource"]) {
        s if s.is_empty() => text(&r["requestSubResource"]),
        s => s,
    };
    if !sub.is_empty() {
        out.insert("subResource".into(), Json::String(sub.clone()));
        out.insert("requestSubResource".into(), Json::String(sub));
    }
    out.insert("requestKind".into(), gvk(&or("requestKind", "kind")));
    out.insert(
        "requestResource".into(),
        gvr(&or("requestResource", "resource")),
    );
    non_empty(&mut out, "name", &r["name"]);
    non_empty(&mut out, "namespace", &r["namespace"]);
    out.insert("operation".into(), Json::String(text(&r["operation"])));
    let u = &r["userInfo"];
    let mut user = JsonMap::new();
    non_empty(&mut user, "username", &u["username"]);
    non_empty(&mut user, "uid", &u["uid"]);
    if u["groups"].as_array().is_some_and(|g| !g.is_empty()) {
        user.insert("groups".into(), u["groups"].clone());
    }
    if u["extra"].as_object().is_some_and(|e| !e.is_empty()) {
        user.insert("extra".into(), u["extra"].clone());
    }
    out.insert("userInfo".into(), Json::Object(user));
    out.insert("object".into(), Json::Null);
    out.insert("oldObject".into(), Json::Null);
    out.insert(
        "dryRun".into(),
        Json::Bool(r["dryRun"].as_bool().unwrap_or(false)),
    );
    out.insert("options".into(), r["options"].clone());
    Json::Object(out)
}

// ---- output encoding ------------------------------------------------------------------------

/// A value in the README's encoding: a one-key object naming its kind.
pub fn encode(v: &Value<'_>) -> Json {
    let one = |k: &str, v: Json| {
        let mut m = JsonMap::new();
        m.insert(k.to_string(), v);
        Json::Object(m)
    };
    match v {
        Value::Null => one("null", Json::Null),
        Value::Bool(b) => one("bool", Json::Bool(*b)),
        Value::Int(i) => one("int", Json::String(i.to_string())),
        Value::Uint(u) => one("uint", Json::String(u.to_string())),
        Value::Double(d) => one("double", Json::String(go_float(*d))),
        Value::String(s) => one("string", Json::String(s.as_str().to_string())),
        Value::Bytes(b) => {
            use base64::Engine;
            one(
                "bytes",
                Json::String(base64::engine::general_purpose::STANDARD.encode(b)),
            )
        }
        Value::Timestamp(t) => {
            // At the timestamp's own offset, as cel-go keeps it.
            let c = t.civil(i64::from(t.offset()));
            one(
                "timestamp",
                Json::String(format!(
                    "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:09}{}",
                    c.year,
                    c.month,
                    c.day,
                    c.hour,
                    c.minute,
                    c.second,
                    c.nanos,
                    t.offset_suffix()
                )),
            )
        }
        Value::Duration(n) => one(
            "duration",
            json!({"go": go_duration(*n), "seconds": decimal_seconds(*n)}),
        ),
        Value::List(l) => one("list", Json::Array(l.iter().map(|e| encode(&e)).collect())),
        Value::Map(m) => {
            let entries = m.entries();
            if entries.iter().all(|(k, _)| matches!(k, Value::String(_))) {
                let mut out = JsonMap::new();
                for (k, v) in &entries {
                    out.insert(k.as_str().unwrap_or("").to_string(), encode(v));
                }
                one("map", Json::Object(out))
            } else {
                let mut pairs: Vec<(String, Json)> = entries
                    .iter()
                    .map(|(k, v)| {
                        let key = encode(k);
                        (key.to_string(), Json::Array(vec![key, encode(v)]))
                    })
                    .collect();
                pairs.sort_by(|a, b| a.0.cmp(&b.0));
                one(
                    "map",
                    Json::Array(pairs.into_iter().map(|(_, p)| p).collect()),
                )
            }
        }
        Value::Type(t) => one("type", Json::String((*t).to_string())),
        Value::Optional(o) => one("optional", o.as_ref().map_or(Json::Null, |v| encode(v))),
        Value::Opaque(o) => {
            let name = o.type_name();
            match o.to_cel_string() {
                Some(s) if KNOWN_OPAQUE.contains(&name) => one(name, Json::String(s)),
                _ => one("opaque", Json::String(name.to_string())),
            }
        }
    }
}

/// Library types the README encodes by their string form.
const KNOWN_OPAQUE: &[&str] = &[
    "kubernetes.Quantity",
    "kubernetes.URL",
    "net.IP",
    "net.CIDR",
    "kubernetes.NamedFormat",
];

/// Go's `strconv.FormatFloat(f, 'g', -1, 64)`.
pub fn go_float(f: f64) -> String {
    if f.is_nan() {
        return "NaN".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { "+Inf" } else { "-Inf" }.into();
    }
    if f == 0.0 {
        return if f.is_sign_negative() { "-0" } else { "0" }.into();
    }
    // Rust's `{:e}` gives the same shortest round-trip digits; only the layout differs.
    let sci = format!("{:e}", f.abs());
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    let sign = if f < 0.0 { "-" } else { "" };
    // The shortest form uses precision 6 for the choice of %e.
    if !(-4..6).contains(&exp) {
        let (first, rest) = digits.split_at(1);
        let frac = if rest.is_empty() {
            String::new()
        } else {
            format!(".{rest}")
        };
        let esign = if exp < 0 { '-' } else { '+' };
        return format!("{sign}{first}{frac}e{esign}{:02}", exp.abs());
    }
    let point = exp + 1; // digits before the decimal point
    let body = if point <= 0 {
        format!("0.{}{digits}", "0".repeat((-point) as usize))
    } else if (point as usize) >= digits.len() {
        format!("{digits}{}", "0".repeat(point as usize - digits.len()))
    } else {
        let (a, b) = digits.split_at(point as usize);
        format!("{a}.{b}")
    };
    format!("{sign}{body}")
}

/// The fraction of `v / 10^prec` without trailing zeros (and without the point when zero).
fn go_frac(v: u64, prec: u32) -> (u64, String) {
    let scale = 10u64.pow(prec);
    let frac = v % scale;
    if frac == 0 {
        return (v / scale, String::new());
    }
    let digits = format!("{:0width$}", frac, width = prec as usize);
    (v / scale, format!(".{}", digits.trim_end_matches('0')))
}

/// Go's `time.Duration.String()`.
pub fn go_duration(nanos: i64) -> String {
    let sign = if nanos < 0 { "-" } else { "" };
    let u = nanos.unsigned_abs();
    if u == 0 {
        return "0s".into();
    }
    if u < 1_000_000_000 {
        let (prec, unit) = match u {
            u if u < 1_000 => (0, "ns"),
            u if u < 1_000_000 => (3, "µs"),
            _ => (6, "ms"),
        };
        let (int, frac) = go_frac(u, prec);
        return format!("{sign}{int}{frac}{unit}");
    }
    let (secs, frac) = go_frac(u, 9);
    let (mins, s) = (secs / 60, secs % 60);
    if mins == 0 {
        return format!("{sign}{s}{frac}s");
    }
    let (hours, m) = (mins / 60, mins % 60);
    if hours == 0 {
        return format!("{sign}{m}m{s}{frac}s");
    }
    format!("{sign}{hours}h{m}m{s}{frac}s")
}

/// Exact decimal seconds: `5400`, `1.5`, `-0.000000001`.
pub fn decimal_seconds(nanos: i64) -> String {
    let sign = if nanos < 0 { "-" } else { "" };
    let (int, frac) = go_frac(nanos.unsigned_abs(), 9);
    format!("{sign}{int}{frac}")
}
