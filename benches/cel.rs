//! CEL engine benchmarks on the shared inputs of `../shared/bench/` (the Pod fixture, its
//! 10/1,000/10,000-container variants, and the 10 validations of `pss-validations.yaml`),
//! each measured as evaluation only and from JSON bytes to result, with cost metering on:
//! the whole review built, and built as `/validate` builds it (the projected group: what the
//! read analysis finds the expressions read, and the codec's own reads).
//! The in-tree (cel-go) figures for the same cases are in `../shared/bench/README.md`.

use std::path::PathBuf;

#[path = "../tests/common/fixtures.rs"]
mod fixtures;

use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion};
use serde_json::Value as Json;

use celgate::cel::json::Doc;
use celgate::cel::projection::Projections;
use celgate::cel::reads::{Analysis, Source};
use celgate::cel::vap::{vap_env, Decls};
use celgate::cel::{Meter, Program, Value, NEWEST_MINOR, PER_CALL_LIMIT};

fn shared(path: &str) -> PathBuf {
    let base = std::env::var_os("CELGATE_SHARED")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared"));
    base.join(path)
}

fn pod() -> Json {
    serde_json::from_slice(&std::fs::read(shared("bench/pod.json")).expect("bench/pod.json"))
        .expect("pod.json is JSON")
}

/// The Pod with `spec.containers` replaced by `n` copies cycling the three containers,
/// each with a unique name.
fn scaled_pod(n: usize) -> Json {
    let mut p = pod();
    let base = p["spec"]["containers"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let containers: Vec<Json> = (0..n)
        .map(|i| {
            let mut c = base[i % base.len()].clone();
            c["name"] = Json::String(format!("c-{i}"));
            c
        })
        .collect();
    p["spec"]["containers"] = Json::Array(containers);
    p
}

/// A v1 AdmissionReview for a Pod CREATE carrying `object` (the shared fixture's envelope).
fn review_bytes(object: &Json) -> Vec<u8> {
    let review = fixtures::pod_create_review(
        object.clone(),
        serde_json::json!({"username": "admin", "groups": ["system:masters", "system:authenticated"]}),
    );
    serde_json::to_vec(&review).expect("serialisable")
}

fn compile(expr: &str) -> Program {
    let (env, _) = vap_env(
        NEWEST_MINOR,
        Decls {
            params: false,
            authorizer: false,
        },
    );
    env.compile(expr).unwrap_or_else(|e| panic!("{expr}: {e}"))
}

/// Evaluates `programs` against `object`, each with its own per-call limit.
fn eval_all(programs: &[Program], object: Value<'_>) -> bool {
    // `vap_env` declares object, oldObject, request, namespaceObject in slots 0..4.
    let vars = [object, Value::Null, Value::Null, Value::Null];
    programs.iter().all(|p| {
        let mut meter = Meter::with_limit(PER_CALL_LIMIT);
        matches!(p.eval(&vars, &mut meter), Ok(Value::Bool(true)))
    })
}

/// The whole request path from the body's bytes: parse the AdmissionReview into a compact
/// document, find `request.object`, evaluate.
fn from_bytes(programs: &[Program], bytes: &[u8]) -> bool {
    eval_request_object(programs, &Doc::parse(bytes).expect("review JSON"))
}

/// Evaluates `programs` against the review's `request.object`.
fn eval_request_object(programs: &[Program], review: &Doc<'_>) -> bool {
    let object = review
        .root()
        .get("request")
        .and_then(|r| r.get("object"))
        .expect("request.object");
    eval_all(programs, Value::from_doc(object))
}

/// As [`from_bytes`], building only what `routes` project (as the server parses a review).
fn from_bytes_projected(programs: &[Program], bytes: &[u8], routes: &Projections) -> bool {
    let review = Doc::parse_projected(bytes, routes).expect("review JSON");
    eval_request_object(programs, &review)
}

/// What `review::answer` builds of a review for `programs`: what the read analysis finds
/// they read of the object, and the codec's own reads.
fn routes(programs: &[Program]) -> Projections {
    let sources: Vec<Source<'_>> = programs.iter().map(|p| Source::Expr(p.source())).collect();
    let mut analysis = Analysis::new();
    analysis
        .sources(&sources, NEWEST_MINOR)
        .expect("the expressions parse");
    let mut reads = celgate::review::own_reads();
    reads.union(&analysis.reads());
    reads.finish();
    reads.at(&["request", "object"], &["request", "oldObject"])
}

fn pss_expressions() -> Vec<String> {
    let text = std::fs::read_to_string(shared("bench/pss-validations.yaml"))
        .expect("pss-validations.yaml");
    let doc: Json = serde_yaml_ng::from_str(&text).expect("YAML");
    doc["validations"]
        .as_array()
        .expect("validations")
        .iter()
        .map(|v| v["expression"].as_str().expect("expression").to_string())
        .collect()
}

fn bench(c: &mut Criterion) {
    let mut cases: Vec<(String, Vec<Program>, Json)> = vec![(
        "1 field compare".into(),
        vec![compile("object.metadata.name.startsWith('web')")],
        pod(),
    )];
    for n in [10, 1_000, 10_000] {
        cases.push((
            format!("2 all() {n} containers"),
            vec![compile(
                "object.spec.containers.all(c, c.image.startsWith('registry.example.com/'))",
            )],
            scaled_pod(n),
        ));
    }
    cases.push((
        "3 regex all() 10 containers".into(),
        vec![compile(r"object.spec.containers.all(c, c.image.matches('^registry\\.example\\.com/[a-z0-9-]+:[0-9.]+$'))")],
        scaled_pod(10),
    ));
    cases.push((
        "4 quantity compare".into(),
        vec![compile(
            "quantity(object.spec.containers[0].resources.limits.memory).compareTo(quantity('1Gi')) <= 0",
        )],
        pod(),
    ));
    cases.push((
        "5 10 validations".into(),
        pss_expressions().iter().map(|e| compile(e)).collect(),
        pod(),
    ));

    let mut eval_group = c.benchmark_group("evaluation only");
    for (name, programs, object) in &cases {
        let text = serde_json::to_vec(object).expect("serialisable");
        let doc = Doc::parse(&text).expect("JSON");
        assert!(
            eval_all(programs, Value::from_doc(doc.root())),
            "{name} must be true on its input"
        );
        eval_group.bench_function(BenchmarkId::from_parameter(name), |b| {
            b.iter(|| eval_all(programs, Value::from_doc(black_box(&doc).root())))
        });
    }
    eval_group.finish();
    let mut bytes_group = c.benchmark_group("JSON bytes to result");
    for (name, programs, object) in &cases {
        let bytes = review_bytes(object);
        bytes_group.bench_with_input(BenchmarkId::from_parameter(name), &bytes, |b, bytes| {
            b.iter(|| from_bytes(programs, black_box(bytes)))
        });
    }
    bytes_group.finish();
    let mut projected_group = c.benchmark_group("JSON bytes to result (projected)");
    for (name, programs, object) in &cases {
        let bytes = review_bytes(object);
        let routes = routes(programs);
        assert!(
            from_bytes_projected(programs, &bytes, &routes),
            "{name} must be true on its projected input"
        );
        projected_group.bench_with_input(BenchmarkId::from_parameter(name), &bytes, |b, bytes| {
            b.iter(|| from_bytes_projected(programs, black_box(bytes), &routes))
        });
    }
    projected_group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
