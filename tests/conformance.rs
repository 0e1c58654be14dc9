//! Runs the official cel-spec conformance suite (`../shared/conformance/cel-spec/*.json`)
//! through celgate's CEL engine.
//!
//! Skipped, each with a counted reason: tests that need protobuf messages (message types,
//! enums, wrappers, containers), and the files of libraries Kubernetes does not enable
//! (`cel.bind`, `cel.block`, `base64`, `math`). Everything else runs, in the newest
//! Kubernetes environment, and a test passes only on the exact expected value (kind
//! included) or, when an error is expected, on an error.
//!
//! Each suite test is its own trial (`cargo test --test conformance -- string_ext/` runs one
//! file's), so each failure is its own line with its expression and what differed; skipped
//! tests are listed as ignored, with their reason. Every runnable test must pass (the pass
//! rate ratchet stands at 100%).

use std::collections::BTreeMap;
use std::path::PathBuf;

use celgate::cel::value::{Map, OwnedMap};
use celgate::cel::{Env, Meter, Type, Value};
use libtest_mimic::{Completion, Trial};
use serde_json::Value as Json;

fn conformance_dir() -> PathBuf {
    let base = std::env::var_os("CELGATE_SHARED")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared"));
    base.join("conformance/cel-spec")
}

/// Files skipped whole, with the reason.
const SKIPPED_FILES: &[(&str, &str)] = &[
    ("dynamic", "protobuf messages"),
    ("enums", "protobuf messages"),
    ("proto2", "protobuf messages"),
    ("proto2_ext", "protobuf messages"),
    ("proto3", "protobuf messages"),
    ("wrappers", "protobuf messages"),
    ("namespace", "protobuf messages"),
    (
        "bindings_ext",
        "library Kubernetes does not enable (cel.bind)",
    ),
    (
        "block_ext",
        "library Kubernetes does not enable (cel.block)",
    ),
    (
        "encoders_ext",
        "library Kubernetes does not enable (base64)",
    ),
    ("math_ext", "library Kubernetes does not enable (math)"),
];

const PROTO_NAMES: &[&str] = &[
    "TestAllTypes",
    "NestedTestAllTypes",
    "NestedMessage",
    "NestedEnum",
    "GlobalEnum",
    "google.protobuf.",
    "cel.expr.conformance",
    "proto.has",
    "proto.getExt",
    "TestRequired",
];

fn uses_proto(v: &Json) -> bool {
    match v {
        Json::Object(m) => {
            m.contains_key("object_value")
                || m.contains_key("enum_value")
                || m.values().any(uses_proto)
        }
        Json::Array(a) => a.iter().any(uses_proto),
        _ => false,
    }
}

/// Tests whose JSON expectation differs from the upstream textproto it was converted from
/// (`cel-spec/textproto/`, the reference form): the conversion rounded two doubles and kept
/// a text-format escape in one bytes value. celgate gives the textproto's value.
const CONVERSION_ARTIFACTS: &[(&str, &str)] = &[
    ("conversions", "string_exp_pos_neg"),
    ("conversions", "string_exp_neg_neg"),
    (
        "parse",
        "bytes_literals/triple_single_quoted_unescaped_punctuation",
    ),
    (
        "parse",
        "bytes_literals/triple_double_quoted_unescaped_punctuation",
    ),
];

/// Tests of cel-spec HEAD behaviour that Kubernetes does not have: it enables ext.Strings
/// version 2 (no `reverse`, the legacy `format` that prints `%e` as `1.0 × 10⁰⁰` and quotes
/// strings inside lists), its cel-go (v0.26) returns -1 from `indexOf` past the end
/// (`k8s-cel-library.md` §4), and its IP library refuses IPv4-mapped IPv6 addresses (§14).
/// celgate follows Kubernetes; its own tests cover these.
const KUBERNETES_DIFFERENCES: &[(&str, &str)] = &[
    ("string_ext", "reverse/"),
    ("string_ext", "format/scientific notation formatting clause"),
    (
        "string_ext",
        "format/default precision for scientific notation",
    ),
    ("string_ext", "format/list support for string"),
    ("string_ext", "format/map support for string"),
    ("string_ext", "format/map support (all key types)"),
    (
        "string_ext",
        "format/dyntype support for scientific notation",
    ),
    ("string_ext", "format/dyntype NaN/infinity support"),
    ("string_ext", "format/dyntype support for lists"),
    ("string_ext", "format/dyntype support for maps"),
    // Recorded from Kubernetes 1.32 (cel differential `ext.strings.format`): its legacy
    // formatter takes only doubles for `%f`/`%e` and only integers for `%d`, and renders
    // infinities as `∞` (golang.org/x/text), `%e` with its precision as a width.
    (
        "string_ext",
        "format/default precision for fixed-point clause with int",
    ),
    (
        "string_ext",
        "format/default precision for fixed-point clause with uint",
    ),
    ("string_ext", "format/NaN support for scientific notation"),
    ("string_ext", "format/NaN support for decimal"),
    ("string_ext", "format/positive infinity support for decimal"),
    ("string_ext", "format/negative infinity support for decimal"),
    (
        "string_ext",
        "format/positive infinity support for scientific notation",
    ),
    (
        "string_ext",
        "format/negative infinity support for scientific notation",
    ),
    (
        "string_ext",
        "format/positive infinity support for fixed-point",
    ),
    (
        "string_ext",
        "format/negative infinity support for fixed-point",
    ),
    ("string_ext", "value_errors/indexof_out_of_range"),
    ("string_ext", "value_errors/lastindexof_out_of_range"),
    // Recorded from Kubernetes 1.32 (cel differential `ext.strings`): without an offset its
    // `lastIndexOf` searches from the last code point, so on '' it fails with offset -1.
    ("string_ext", "last_index_of/empty_string"),
    // cel-go (v0.22 to v0.26, so every Kubernetes from 1.32) builds a map literal as a Go
    // map: any key but bytes, a repeated key takes the last value. Its own conformance run
    // skips these four (conformance/BUILD.bazel); recorded from Kubernetes 1.32 (cel
    // differential `std.collections`).
    ("fields", "qualified_identifier_resolution/map_key_float"),
    ("fields", "qualified_identifier_resolution/map_key_null"),
    (
        "fields",
        "qualified_identifier_resolution/map_value_repeat_key",
    ),
    // Kubernetes' `ip()` rejects IPv4-mapped IPv6 addresses (§14); cel-go's ext.Network maps them.
    ("network_ext", "ipv4/ipv4_equals_ipv6"),
    ("network_ext", "ipv4/ipv4_not_equals_ipv6"),
];

/// Why a test is skipped, or `None` to run it.
fn skip_reason(test: &Json) -> Option<&'static str> {
    let expr = test["expr"].as_str().unwrap_or("");
    if test.get("container").is_some() || PROTO_NAMES.iter().any(|p| expr.contains(p)) {
        return Some("protobuf messages");
    }
    if uses_proto(&test["bindings"])
        || uses_proto(&test["value"])
        || uses_proto(&test["typed_result"])
    {
        return Some("protobuf messages");
    }
    if test.get("check_only").is_some() {
        return Some("type deduction only (no evaluation)");
    }
    if let Some(decls) = test["type_env"].as_array() {
        if decls.iter().any(|d| d.get("function").is_some()) {
            return Some("declares custom functions");
        }
    }
    None
}

fn decl_type(t: &Json) -> Type {
    if let Some(p) = t.get("primitive").and_then(Json::as_str) {
        return match p {
            "BOOL" => Type::Bool,
            "INT64" => Type::Int,
            "UINT64" => Type::Uint,
            "DOUBLE" => Type::Double,
            "STRING" => Type::String,
            "BYTES" => Type::Bytes,
            _ => Type::Dyn,
        };
    }
    if let Some(l) = t.get("list_type") {
        return Type::list(decl_type(&l["elem_type"]));
    }
    if let Some(m) = t.get("map_type") {
        return Type::map(decl_type(&m["key_type"]), decl_type(&m["value_type"]));
    }
    if t.get("null").is_some() {
        return Type::Null;
    }
    Type::Dyn
}

fn expected_value(v: &Json) -> Value<'static> {
    let m = v.as_object().expect("a Value is an object");
    if m.contains_key("null_value") {
        return Value::Null;
    }
    if let Some(b) = m.get("bool_value") {
        return Value::Bool(b.as_bool().unwrap());
    }
    if let Some(i) = m.get("int64_value") {
        return Value::Int(i.as_str().unwrap().parse().unwrap());
    }
    if let Some(u) = m.get("uint64_value") {
        return Value::Uint(u.as_str().unwrap().parse().unwrap());
    }
    if let Some(d) = m.get("double_value") {
        return Value::Double(match d {
            Json::String(s) if s == "NaN" => f64::NAN,
            Json::String(s) if s == "Infinity" => f64::INFINITY,
            Json::String(s) if s == "-Infinity" => f64::NEG_INFINITY,
            other => other.as_f64().unwrap(),
        });
    }
    if let Some(s) = m.get("string_value") {
        return Value::string(s.as_str().unwrap());
    }
    if let Some(b) = m.get("bytes_value") {
        use base64::Engine;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(b.as_str().unwrap())
            .unwrap();
        return Value::Bytes(bytes.into());
    }
    if let Some(l) = m.get("list_value") {
        let vals = l
            .get("values")
            .and_then(Json::as_array)
            .cloned()
            .unwrap_or_default();
        return Value::list(vals.iter().map(expected_value).collect());
    }
    if let Some(mv) = m.get("map_value") {
        let entries = mv
            .get("entries")
            .and_then(Json::as_array)
            .cloned()
            .unwrap_or_default();
        let pairs = entries
            .iter()
            .map(|e| (expected_value(&e["key"]), expected_value(&e["value"])))
            .collect();
        return Value::Map(Map::Owned(std::sync::Arc::new(
            OwnedMap::from_entries(pairs).unwrap(),
        )));
    }
    if let Some(t) = m.get("type_value") {
        let name: &'static str = Box::leak(t.as_str().unwrap().to_string().into_boxed_str());
        return Value::Type(name);
    }
    panic!("unsupported expected value {v}");
}

/// Equality that also requires the same kinds (the suite distinguishes `1` from `1u`), and
/// lets NaN match NaN.
fn same(a: &Value<'_>, b: &Value<'_>) -> bool {
    match (a, b) {
        (Value::Double(x), Value::Double(y)) => (x.is_nan() && y.is_nan()) || x == y,
        (Value::List(x), Value::List(y)) => {
            x.len() == y.len() && x.iter().zip(y.iter()).all(|(p, q)| same(&p, &q))
        }
        (Value::Map(x), Value::Map(y)) => {
            x.len() == y.len()
                && x.entries().iter().all(|(k, v)| {
                    y.entries()
                        .iter()
                        .any(|(k2, v2)| same(k, k2) && same(v, v2))
                })
        }
        _ => std::mem::discriminant(a) == std::mem::discriminant(b) && a.equals(b),
    }
}

enum Outcome {
    Pass,
    Fail(String),
}

fn run(test: &Json) -> Outcome {
    let expr = test["expr"].as_str().unwrap_or("");
    let mut env = Env::default();
    env.check_types = test.get("disable_check").is_none();
    env.optimize = false;
    env.homogeneous_literals = false;
    let mut values: Vec<Value<'static>> = Vec::new();
    let mut declared: BTreeMap<String, Type> = BTreeMap::new();
    if let Some(decls) = test["type_env"].as_array() {
        for d in decls {
            if let Some(ident) = d.get("ident") {
                declared.insert(
                    d["name"].as_str().unwrap().to_string(),
                    decl_type(&ident["type"]),
                );
            }
        }
    }
    if let Some(b) = test["bindings"].as_object() {
        for (name, v) in b {
            let ty = declared.remove(name).unwrap_or(Type::Dyn);
            env.declare(name, ty);
            values.push(expected_value(&v["value"]));
        }
    }
    for (name, ty) in declared {
        env.declare(&name, ty);
        values.push(Value::Null);
    }
    let result = env.compile(expr).map_err(|e| e.to_string()).and_then(|p| {
        let mut meter = Meter::with_limit(u64::MAX);
        p.eval(&values, &mut meter).map_err(|e| e.to_string())
    });
    let expected = if let Some(v) = test.get("value") {
        Some(expected_value(v))
    } else if let Some(t) = test.get("typed_result") {
        t.get("result").map(expected_value)
    } else if test.get("eval_error").is_some() {
        None
    } else {
        Some(Value::Bool(true))
    };
    match (expected, result) {
        (None, Err(_)) => Outcome::Pass,
        (None, Ok(v)) => Outcome::Fail(format!("expected an error, got {}", v.to_json())),
        (Some(e), Ok(v)) if same(&e, &v) => Outcome::Pass,
        (Some(e), Ok(v)) => Outcome::Fail(format!(
            "expected {} ({}), got {} ({})",
            e.to_json(),
            e.type_name(),
            v.to_json(),
            v.type_name()
        )),
        (Some(e), Err(err)) => Outcome::Fail(format!("expected {}, got error: {err}", e.to_json())),
    }
}

/// One trial per test of every suite file: skipped tests are ignored with their reason, and
/// one more trial checks that enough tests ran.
fn main() {
    let args = libtest_mimic::Arguments::from_args();
    let dir = conformance_dir();
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| {
            panic!(
                "cannot read {}: {e} (is ../shared beside the project?)",
                dir.display()
            )
        })
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    let mut trials = Vec::new();
    let mut runnable = 0usize;
    for path in &files {
        let name = path.file_stem().unwrap().to_string_lossy().to_string();
        let doc: Json = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let file_skip = SKIPPED_FILES
            .iter()
            .find(|(f, _)| *f == name)
            .map(|(_, r)| *r);
        for section in doc["section"].as_array().cloned().unwrap_or_default() {
            for test in section["test"].as_array().cloned().unwrap_or_default() {
                let id = format!(
                    "{}/{}",
                    section["name"].as_str().unwrap_or(""),
                    test["name"].as_str().unwrap_or("")
                );
                let artifact = CONVERSION_ARTIFACTS
                    .iter()
                    .any(|(f, t)| *f == name && (id == *t || id.ends_with(&format!("/{t}"))));
                let artifact =
                    artifact.then_some("JSON expectation differs from the upstream textproto");
                let k8s = KUBERNETES_DIFFERENCES
                    .iter()
                    .any(|(f, t)| *f == name && id.starts_with(t));
                let k8s = k8s.then_some("cel-spec behaviour Kubernetes does not have (ext.Strings v3+, IPv4-mapped IPv6, map literal keys)");
                let trial_name = format!("{name}/{id}");
                if let Some(reason) = file_skip
                    .or(artifact)
                    .or(k8s)
                    .or_else(|| skip_reason(&test))
                {
                    trials.push(Trial::ignorable_test(trial_name, move || {
                        Ok(Completion::ignored_with(reason))
                    }));
                    continue;
                }
                runnable += 1;
                trials.push(Trial::test(trial_name, move || match run(&test) {
                    Outcome::Pass => Ok(()),
                    Outcome::Fail(why) => {
                        Err(format!("{}\n     {why}", test["expr"].as_str().unwrap_or("")).into())
                    }
                }));
            }
        }
    }
    trials.push(Trial::test("conformance_test_count", move || {
        if runnable > 1000 {
            Ok(())
        } else {
            Err(format!("too few conformance tests ran: {runnable}").into())
        }
    }));
    libtest_mimic::run(&args, trials).exit();
}
