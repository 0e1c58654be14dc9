//! The read analysis (`celgate_cel::reads`, the snapshot's `review_projection`) is sound on
//! every recorded case that evaluates expressions over an object: each case's `object` and
//! `oldObject` are PRUNED by the projection (every container the projection skips becomes a
//! poison value, as a projected parse leaves it unreadable), evaluated again, and must give
//! exactly what the whole objects gave: the answer and the verdict for the VAP cases
//! (`../shared/oracle-sample`, `tests/cases`), the value, error text, cost and variables'
//! cost for the CEL differential cases (`../shared/cel-differential`) that bind an object.
//! Each comparison runs with two poisons (a string and a map with a unique key) so that a
//! read that one happens to answer alike is caught by the other. A last test proves the
//! check can fail: pruning to the codec's own reads only changes some answers.

use std::path::Path;

use celgate::cel::projection::Projection;
use celgate::cel::reads::{Analysis, Reads};
use celgate::policy::Snapshot;
use celgate::source::{add_cluster_defaults, folder, snapshot_stored};
use serde_json::{json, Value as Json};

mod common;
#[path = "cel_differential/harness.rs"]
mod harness;

/// What a skipped container becomes.
fn poisons() -> [Json; 2] {
    [
        Json::String("\u{0}celgate-skipped".into()),
        json!({"\u{0}celgate-skipped": ["\u{0}"]}),
    ]
}

/// `value` with every container `p` does not need replaced by `poison` (scalars are always
/// kept, as the parser keeps them; a skipped member keeps its key).
fn prune(value: &Json, p: &Projection, poison: &Json) -> Json {
    prune_at(value, Some(p), poison)
}

fn prune_at(value: &Json, p: Option<&Projection>, poison: &Json) -> Json {
    let container = value.is_object() || value.is_array();
    let Some(p) = p else {
        return if container {
            poison.clone()
        } else {
            value.clone()
        };
    };
    if p.is_whole() {
        return value.clone();
    }
    match value {
        Json::Object(m) => Json::Object(
            m.iter()
                .map(|(k, v)| (k.clone(), prune_at(v, p.field(k), poison)))
                .collect(),
        ),
        Json::Array(a) => Json::Array(a.iter().map(|v| prune_at(v, p.element(), poison)).collect()),
        _ => value.clone(),
    }
}

/// `review` with `request.object` and `request.oldObject` pruned by `reads`.
fn prune_review(review: &Json, reads: &Reads, poison: &Json) -> Json {
    let mut out = review.clone();
    if let Some(r) = out.get_mut("request").and_then(Json::as_object_mut) {
        for (key, p) in [("object", &reads.object), ("oldObject", &reads.old_object)] {
            if let Some(v) = r.get_mut(key) {
                if !v.is_null() {
                    *v = prune(v, p, poison);
                }
            }
        }
    }
    out
}

/// The answer to `body` and what it decided (everything but the metrics' timings).
fn answer(snapshot: &Snapshot, body: &[u8]) -> Result<String, String> {
    let options = celgate::review::AnswerOptions {
        trace: true,
        ..Default::default()
    };
    match celgate::review::answer(snapshot, body, &Default::default(), options) {
        Ok(a) => {
            let v = &a.verdict;
            Ok(format!(
                "{}\n{:?}\n{:?}\n{:?}\n{:?}\n{:?}\n{:?}\n{:?}\n{:?}",
                a.review(),
                v.denials,
                v.warnings,
                v.annotations,
                v.audited,
                v.results,
                v.evaluated,
                v.timed_out,
                a.reported
            ))
        }
        Err(e) => Err(e.to_string()),
    }
}

/// How one case went.
#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    /// Pruned and answered alike.
    Pruned,
    /// Nothing to prune: no object, the projection whole, or a request whose objects
    /// convert (read whole).
    Whole,
}

/// Answers a VAP case folder whole and pruned by `reads` (the snapshot's own when `None`).
fn check_vap_case(dir: &Path, reads: Option<&Reads>) -> Result<Outcome, String> {
    let objects_path = dir.join("objects.yaml");
    let text = std::fs::read_to_string(&objects_path).map_err(|e| e.to_string())?;
    let mut objects = folder::parse_documents(&objects_path, &text).map_err(|e| e.to_string())?;
    add_cluster_defaults(&mut objects);
    let snapshot =
        snapshot_stored(objects, celgate::cel::NEWEST_MINOR).map_err(|e| e.to_string())?;
    let body = std::fs::read(dir.join("review.json")).map_err(|e| e.to_string())?;
    let Ok(review) = serde_json::from_slice::<Json>(&body) else {
        return Ok(Outcome::Whole);
    };
    let reads = reads.unwrap_or(snapshot.review_projection());
    let converts = celgate::cel::json::Doc::parse(&body)
        .ok()
        .and_then(|doc| {
            celgate::review::request(&doc)
                .ok()
                .map(|r| snapshot.converts_objects(&r.attributes))
        })
        .unwrap_or(false);
    let has_object = ["object", "oldObject"]
        .iter()
        .any(|k| review["request"][k].is_object());
    if converts || !has_object || (reads.object.is_whole() && reads.old_object.is_whole()) {
        return Ok(Outcome::Whole);
    }
    let whole = answer(&snapshot, &body)?;
    for poison in poisons() {
        let pruned = prune_review(&review, reads, &poison);
        let pruned_body = serde_json::to_vec(&pruned).map_err(|e| e.to_string())?;
        let got = answer(&snapshot, &pruned_body)?;
        if got != whole {
            return Err(format!(
                "pruned answer differs (poison {poison}):\n  whole  {whole}\n  pruned {got}\n  object projection {}",
                celgate::cel::reads::show(&reads.object)
            ));
        }
    }
    Ok(Outcome::Pruned)
}

/// Every case folder below `dir`, checked; panics listing the failures. Returns how many
/// were pruned.
fn check_vap_suite(dir: &Path, min_cases: usize) -> usize {
    let cases = common::cases::case_dirs(dir).unwrap_or_default();
    assert!(
        cases.len() >= min_cases,
        "{}: {} cases, expected at least {min_cases}",
        dir.display(),
        cases.len()
    );
    let mut failures = Vec::new();
    let mut pruned = 0;
    for (name, case) in cases {
        let r = common::cases::on_big_stack(move || check_vap_case(&case, None));
        match r {
            Ok(Outcome::Pruned) => pruned += 1,
            Ok(Outcome::Whole) => {}
            Err(e) => failures.push(format!("{name}: {e}")),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    pruned
}

#[test]
fn oracle_sample_answers_alike_pruned() {
    let pruned = check_vap_suite(&common::shared_dir().join("oracle-sample/cases"), 70);
    eprintln!("oracle-sample: {pruned} pruned");
    assert!(pruned >= 40, "only {pruned} cases pruned");
}

#[test]
fn golden_cases_answer_alike_pruned() {
    let pruned = check_vap_suite(&common::repo().join("tests/cases"), 150);
    eprintln!("golden: {pruned} pruned");
    assert!(pruned >= 80, "only {pruned} cases pruned");
}

/// The reads of a differential case's expression, after the harness's composited variables.
fn differential_reads(expr: &str) -> Result<Reads, String> {
    let mut a = Analysis::new();
    for (name, source) in harness::COMPOSITED {
        a.variable_source(name, Some(source), harness::K8S_MINOR)
            .map_err(|e| format!("variable {name}: {e}"))?;
    }
    a.expr_source(expr, harness::K8S_MINOR)
        .map_err(|e| e.to_string())?;
    Ok(a.reads())
}

#[test]
fn cel_differential_cases_evaluate_alike_pruned() {
    let path = common::shared_dir().join("cel-differential/cases.jsonl");
    let text = std::fs::read_to_string(&path).expect("the differential cases");
    let cases: Vec<Json> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .filter_map(|l| harness::parse_line(l).ok())
        .filter(|c| {
            ["object", "oldObject"]
                .iter()
                .any(|k| c["vars"][k].is_object())
        })
        .collect();
    assert!(cases.len() >= 1000, "{} cases bind an object", cases.len());
    let result = common::cases::on_big_stack(move || {
        let h = harness::Harness::new();
        let mut failures = Vec::new();
        let mut pruned = 0;
        for case in &cases {
            let expr = case["expr"].as_str().unwrap_or_default();
            let whole = h.evaluate(case);
            if whole["outcome"] == "compile_error" || whole["outcome"] == "panic" {
                continue;
            }
            // An expression that does not parse is a compile error above.
            let reads = differential_reads(expr).map_err(|e| format!("{}: {e}", case["id"]))?;
            if reads.object.is_whole() && reads.old_object.is_whole() {
                continue;
            }
            pruned += 1;
            for poison in poisons() {
                let mut c = case.clone();
                for (key, p) in [("object", &reads.object), ("oldObject", &reads.old_object)] {
                    if c["vars"][key].is_object() {
                        c["vars"][key] = prune(&c["vars"][key], p, &poison);
                    }
                }
                let got = h.evaluate(&c);
                if got != whole {
                    failures.push(format!(
                        "{} `{expr}` (poison {poison}):\n  whole  {whole}\n  pruned {got}\n  object {}",
                        case["id"],
                        celgate::cel::reads::show(&reads.object)
                    ));
                    break;
                }
            }
        }
        if failures.is_empty() {
            Ok(pruned)
        } else {
            Err(failures.join("\n"))
        }
    });
    let pruned = result.unwrap_or_else(|e| panic!("{e}"));
    eprintln!("cel-differential: {pruned} pruned");
    assert!(pruned >= 500, "only {pruned} cases pruned");
}

/// The comparison detects a projection that leaves out what expressions read: with the
/// codec's own reads only, some oracle cases answer differently.
#[test]
fn a_projection_missing_reads_is_caught() {
    let dir = common::shared_dir().join("oracle-sample/cases");
    let mut caught = 0;
    for (_, case) in common::cases::case_dirs(&dir).unwrap_or_default() {
        let r = common::cases::on_big_stack(move || {
            check_vap_case(&case, Some(&celgate::review::own_reads()))
        });
        if r.is_err() {
            caught += 1;
        }
    }
    eprintln!("caught: {caught}");
    assert!(caught >= 10, "only {caught} cases caught");
}

/// The expressions of `../shared/bench` (the targets) evaluate alike over the bench
/// Pod (and the Pod with 10 containers) pruned by their reads: value or error, and cost.
#[test]
fn bench_expressions_evaluate_alike_pruned() {
    use celgate::cel::vap::{vap_env, Decls};
    use celgate::cel::{Meter, Value};
    let bench = common::shared_dir().join("bench");
    let pod: Json =
        serde_json::from_slice(&std::fs::read(bench.join("pod.json")).unwrap()).unwrap();
    let mut pod10 = pod.clone();
    let containers = pod["spec"]["containers"].as_array().unwrap().clone();
    pod10["spec"]["containers"] = Json::Array(
        (0..10)
            .map(|i| {
                let mut c = containers[i % containers.len()].clone();
                c["name"] = json!(format!("c{i}"));
                c
            })
            .collect(),
    );
    let pss: Json =
        serde_yaml_ng::from_slice(&std::fs::read(bench.join("pss-validations.yaml")).unwrap())
            .unwrap();
    let mut exprs: Vec<Vec<String>> = vec![
        vec!["object.metadata.name.startsWith('web')".into()],
        vec!["object.spec.containers.all(c, c.image.startsWith('registry.example.com/'))".into()],
        vec!["object.spec.containers.all(c, c.image.matches('^registry\\\\.example\\\\.com/[a-z0-9-]+:[0-9.]+$'))".into()],
        vec!["quantity(object.spec.containers[0].resources.limits.memory).compareTo(quantity('1Gi')) <= 0".into()],
    ];
    exprs.push(
        pss["validations"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v["expression"].as_str().unwrap().to_string())
            .collect(),
    );
    let decls = Decls {
        params: false,
        authorizer: false,
    };
    let (env, slots) = vap_env(celgate::cel::NEWEST_MINOR, decls);
    let evaluate = |sources: &[String], object: &Json| -> Vec<String> {
        let text = object.to_string();
        let doc = celgate::cel::json::Doc::parse(text.as_bytes()).unwrap();
        let mut values = vec![Value::Null; env.variables().len()];
        values[slots.object] = Value::from_doc(doc.root());
        sources
            .iter()
            .map(|s| {
                let program = env.compile(s).unwrap();
                let mut meter = Meter::default();
                let r = program.eval(&values, &mut meter);
                format!("{:?} cost {}", r.map_err(|e| e.to_string()), meter.cost)
            })
            .collect()
    };
    for sources in &exprs {
        let mut a = Analysis::new();
        for s in sources {
            a.expr_source(s, celgate::cel::NEWEST_MINOR).unwrap();
        }
        let mut reads = a.reads();
        reads.union(&celgate::review::own_reads());
        reads.finish();
        for object in [&pod, &pod10] {
            let whole = evaluate(sources, object);
            for poison in poisons() {
                let pruned = prune(object, &reads.object, &poison);
                assert_eq!(
                    evaluate(sources, &pruned),
                    whole,
                    "{sources:?} pruned by {}",
                    celgate::cel::reads::show(&reads.object)
                );
            }
            let kept = prune(object, &reads.object, &json!(null)).to_string().len();
            eprintln!(
                "bench {:?}: {kept} of {} bytes kept",
                &sources[0][..sources[0].len().min(40)],
                object.to_string().len()
            );
        }
    }
}
