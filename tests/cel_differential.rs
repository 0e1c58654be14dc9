//! Runs every case of `../shared/cel-differential/cases.jsonl` (CEL expressions with the exact
//! value, error, stage, static type and cost Kubernetes 1.32 produced) through the same code as
//! `examples/cel-batch.rs` and compares the records field by field.
//!
//! Skipped: the cases where cel-go panicked (`outcome: panic`), and the cases listed in
//! `tests/cel-differential-exceptions` (one `<id> <reason>` a line: behaviour celgate must not
//! imitate). Every other case must match except the known failures of
//! `tests/cel-differential-known-failures` (same format; a fidelity gap to fix), by id (see
//! `common::ratchet`): the `ratchet` trial runs every case and fails when a case outside the
//! list fails, when a listed one passes, and when fewer than [`MIN_PASSED`] pass. Each case is
//! also its own trial (`cargo test --test cel_differential -- ID`), judged the same way; a
//! known failure is listed as ignored with its reason. `CELGATE_DIFF_VERBOSE=1` prints every
//! failing case with what was expected and what celgate gave.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use common::ratchet::{self, Known};
use libtest_mimic::{Completion, Failed, Trial};
use serde_json::Value as Json;

mod common;
#[path = "cel_differential/harness.rs"]
mod harness;

/// The known failures' list, as its messages name it.
const KNOWN_FAILURES: &str = "tests/cel-differential-known-failures";

/// The number of cases celgate matches exactly; raise it when the engine improves, never
/// lower it.
const MIN_PASSED: usize = 7839;

/// Evaluation recurses once per nesting level of an expression.
const STACK: usize = 64 << 20;

/// `id -> reason`, from the exceptions file.
fn exceptions() -> Known {
    ratchet::read_list(&common::repo().join("tests/cel-differential-exceptions"))
}

/// The fields of `expected` that `got` does not match.
fn mismatches(expected: &Json, got: &Json) -> Vec<&'static str> {
    let mut out = Vec::new();
    let field = |k: &str| -> (&Json, &Json) {
        (
            expected.get(k).unwrap_or(&Json::Null),
            got.get(k).unwrap_or(&Json::Null),
        )
    };
    let differs = |k: &str| {
        let (e, g) = field(k);
        e != g
    };
    if differs("outcome") {
        out.push("outcome");
    }
    if differs("value") || differs("type") {
        out.push("value");
    }
    if differs("error") {
        out.push("error");
    }
    if differs("error_stage") {
        out.push("stage");
    }
    if differs("static_type") {
        out.push("static_type");
    }
    if expected["outcome"] != "compile_error" {
        let got_cost = got["cost"].as_u64();
        let cost_ok = match expected.get("cost_range").and_then(Json::as_array) {
            Some(range) => match (
                range.first().and_then(Json::as_u64),
                range.get(1).and_then(Json::as_u64),
                got_cost,
            ) {
                (Some(lo), Some(hi), Some(c)) => (lo..=hi).contains(&c),
                _ => false,
            },
            None => expected["cost"].as_u64() == got_cost,
        };
        if !cost_ok {
            out.push("cost");
        }
        let vc = |j: &Json| j.get("variables_cost").and_then(Json::as_u64).unwrap_or(0);
        if vc(expected) != vc(got) {
            out.push("variables_cost");
        }
    }
    out
}

fn shorten(j: &Json) -> String {
    let s = j.to_string();
    if s.chars().count() <= 400 {
        return s;
    }
    format!("{}...", s.chars().take(400).collect::<String>())
}

/// The cases of the case file, in file order.
fn cases() -> Vec<Json> {
    let path = common::shared_dir().join("cel-differential/cases.jsonl");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(n, line)| {
            harness::parse_line(line)
                .unwrap_or_else(|e| panic!("{}:{}: {e}", path.display(), n + 1))
        })
        .collect()
}

fn verbose() -> bool {
    std::env::var_os("CELGATE_DIFF_VERBOSE").is_some_and(|v| v != "0")
}

/// Why a case is skipped: cel-go panicked, or it is listed in the exceptions file.
fn skip_reason(case: &Json, exceptions: &BTreeMap<String, String>) -> Option<String> {
    if case["outcome"] == "panic" {
        return Some("cel-go panicked".into());
    }
    let id = case["id"].as_str().unwrap_or_default();
    exceptions.get(id).map(|r| format!("exception: {r}"))
}

/// Evaluates one case; the mismatched fields, each failure printed in full when verbose.
fn check(h: &harness::Harness, case: &Json) -> Vec<&'static str> {
    let got = h.evaluate(case);
    let fields = mismatches(case, &got);
    if !fields.is_empty() && verbose() {
        let mut expected = case.clone();
        if let Some(m) = expected.as_object_mut() {
            for k in ["vars", "library", "category", "id", "expr"] {
                m.remove(k);
            }
        }
        eprintln!(
            "FAIL {} [{}]\n  expr:     {}\n  expected: {}\n  got:      {}",
            case["id"].as_str().unwrap_or_default(),
            fields.join(", "),
            case["expr"].as_str().unwrap_or_default(),
            shorten(&expected),
            shorten(&got)
        );
    }
    fields
}

/// Runs every case and checks the ratchet (by id against `known`, and by count); prints the
/// summary.
fn run_ratchet(cases: &[Json], exceptions: &Known, known: &Known) -> Result<(), String> {
    let h = harness::Harness::new();
    let (mut passed, mut skipped, mut failed) = (0usize, 0usize, 0usize);
    let mut by_library: BTreeMap<String, usize> = BTreeMap::new();
    let mut by_field: BTreeMap<&'static str, usize> = BTreeMap::new();
    let mut seen: BTreeSet<String> = BTreeSet::new();
    let mut results: Vec<(&str, bool)> = Vec::new();
    for case in cases {
        let id = case["id"].as_str().unwrap_or_default();
        seen.insert(id.to_string());
        if skip_reason(case, exceptions).is_some() {
            skipped += 1;
            continue;
        }
        let fields = check(&h, case);
        results.push((id, fields.is_empty()));
        if fields.is_empty() {
            passed += 1;
            continue;
        }
        failed += 1;
        let library = case["library"].as_str().unwrap_or("?").to_string();
        *by_library.entry(library).or_default() += 1;
        for f in &fields {
            *by_field.entry(f).or_default() += 1;
        }
    }
    for id in exceptions.keys() {
        if !seen.contains(id) {
            return Err(format!("exception {id} names no case"));
        }
    }
    println!("cel differential: {passed} passed, {failed} failed, {skipped} skipped");
    if failed > 0 {
        let libs: Vec<String> = by_library.iter().map(|(k, v)| format!("{k} {v}")).collect();
        let fields: Vec<String> = by_field.iter().map(|(k, v)| format!("{k} {v}")).collect();
        println!("failures by library: {}", libs.join(", "));
        println!("mismatched fields: {}", fields.join(", "));
        println!("(CELGATE_DIFF_VERBOSE=1 prints every failing case)");
    }
    ratchet::check(results, known, KNOWN_FAILURES)?;
    if passed < MIN_PASSED {
        return Err(format!(
            "cel differential: {passed} cases passed, fewer than the {MIN_PASSED} recorded"
        ));
    }
    Ok(())
}

/// Runs `work` on a thread with the evaluator's stack; a panic is a failure.
fn on_big_stack(
    work: impl FnOnce() -> Result<Completion, Failed> + Send + 'static,
) -> Result<Completion, Failed> {
    let handle = std::thread::Builder::new()
        .name("cel-differential".into())
        .stack_size(STACK)
        .spawn(work)
        .map_err(|e| Failed::from(format!("cannot spawn the test thread: {e}")))?;
    handle.join().unwrap_or_else(|_| Err("panicked".into()))
}

/// One trial per case (a known failure is ignored with its reason and the mismatched
/// fields), one that checks the ratchet over every case, the ratchet's own logic, and the
/// harness's own tests.
fn main() {
    let args = libtest_mimic::Arguments::from_args();
    let cases = Arc::new(cases());
    let exceptions = Arc::new(exceptions());
    let known = Arc::new(ratchet::read_list(&common::repo().join(KNOWN_FAILURES)));
    // Shared by the case trials: building one compiles the composited variables.
    let h = Arc::new(harness::Harness::new());
    let mut trials = Vec::new();
    for (i, case) in cases.iter().enumerate() {
        let id = case["id"].as_str().unwrap_or_default().to_string();
        if let Some(reason) = skip_reason(case, &exceptions) {
            trials.push(Trial::ignorable_test(id, move || {
                Ok(Completion::ignored_with(reason))
            }));
            continue;
        }
        let listed = known.get(&id).cloned();
        let (cases, h) = (cases.clone(), h.clone());
        trials.push(Trial::ignorable_test(id, move || {
            on_big_stack(move || {
                let fields = check(&h, &cases[i]);
                let outcome = if fields.is_empty() {
                    Ok(())
                } else {
                    Err(format!("differs in {}", fields.join(", ")))
                };
                ratchet::case_verdict(outcome, listed.as_deref(), KNOWN_FAILURES)
            })
        }));
    }
    trials.push(Trial::test("ratchet", move || {
        on_big_stack(move || {
            run_ratchet(&cases, &exceptions, &known)
                .map(|()| Completion::Completed)
                .map_err(Failed::from)
        })
        .map(|_| ())
    }));
    trials.push(ratchet::logic_trial());
    trials.push(Trial::test("harness_fixtures", || {
        harness_fixtures();
        Ok(())
    }));
    libtest_mimic::run(&args, trials).exit();
}

/// The harness's own Go-compatible pieces, on values whose Go output is known (the case file
/// exercises few of them).
fn harness_fixtures() {
    use harness::fake_authz::{parse_field_selector, parse_label_selector};
    use harness::{decimal_seconds, go_duration, go_float};

    assert_eq!(
        parse_label_selector("app in (web, api),!legacy"),
        Ok(vec!["app in (api,web)".to_string(), "!legacy".to_string()])
    );
    assert_eq!(
        parse_label_selector("z=1,a!=2,m,b notin ()"),
        Ok(vec![
            "a!=2".to_string(),
            "b notin ()".to_string(),
            "m".to_string(),
            "z=1".to_string()
        ])
    );
    assert_eq!(
        parse_label_selector("a in (b"),
        Err("unable to parse requirement: found '', expected: ',' or ')'".to_string())
    );
    assert_eq!(
        parse_label_selector("a,"),
        Err("found '', expected: identifier after ','".to_string())
    );
    assert_eq!(
        parse_label_selector("x>y"),
        Err("unable to parse requirement: values[0]: Invalid value: \"y\": for 'Gt', 'Lt' operators, the value must be an integer".to_string())
    );
    assert_eq!(
        parse_field_selector("spec.nodeName==node-1,status.phase!=Running"),
        Ok(vec![
            "spec.nodeName=node-1".to_string(),
            "status.phase!=Running".to_string()
        ])
    );
    assert_eq!(
        parse_field_selector("!!bad"),
        Err("invalid selector: '!!bad'; can't understand '!!bad'".to_string())
    );
    assert_eq!(
        parse_field_selector("a=b\\,c"),
        Ok(vec!["a=b,c".to_string()])
    );
    assert_eq!(
        parse_field_selector("a=b=c"),
        Err("invalid field selector: unescaped character in value: 61".to_string())
    );

    for (f, go) in [
        (1.5e308, "1.5e+308"),
        (5e-324, "5e-324"),
        (536870912.0, "5.36870912e+08"),
        (100000.0, "100000"),
        (0.0001, "0.0001"),
        (0.00001, "1e-05"),
        (-0.0, "-0"),
        (f64::NAN, "NaN"),
        (f64::NEG_INFINITY, "-Inf"),
    ] {
        assert_eq!(go_float(f), go, "{f}");
    }
    for (n, go, secs) in [
        (0, "0s", "0"),
        (-1, "-1ns", "-0.000000001"),
        (-500_000, "-500µs", "-0.0005"),
        (5_401_500_000_000, "1h30m1.5s", "5401.5"),
        (
            i64::MIN,
            "-2562047h47m16.854775808s",
            "-9223372036.854775808",
        ),
    ] {
        assert_eq!(go_duration(n), go);
        assert_eq!(decimal_seconds(n), secs);
    }
}
