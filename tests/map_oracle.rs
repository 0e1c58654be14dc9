//! Runs MutatingAdmissionPolicy cases through the real binary with the recorded sample's own
//! checker (`../shared/map-oracle-sample/check_map.py`, without `--lenient-defaults`: celgate
//! runs the API server's defaulting after each mutation too), which calls
//! `celgate eval --phase mutating --policies {dir} --request {review}` per case, applies the
//! answer's patch to the request's object with Python's `jsonpatch`, and compares the result
//! (or the denial's code and message) with what the API server does. Two corpora:
//!
//! - `../shared/map-oracle-sample/cases`: recorded from a real kube-apiserver;
//! - `tests/map-cases`: our own golden cases in the same layout (v1beta1/v1 policy objects,
//!   v1beta1 reviews, params, namespaceObject/authorizer, variables, mixed patch types,
//!   list-maps with two keys, set lists, CRD map types and preserve-unknown subtrees, escaped
//!   JSONPatch keys, UPDATE, matchPolicy with a two-version CRD, binding selectors, CONNECT,
//!   Ignore errors, invalid policies), whose expected objects were derived by hand from the
//!   Kubernetes, structured-merge-diff and evanphx/json-patch sources and the sample's
//!   findings (each case's `expected.json` `notes` names the source when it is subtle).
//!
//! Each is ratcheted by case id (`common::ratchet`): every case passes unless its list
//! (`tests/map-oracle-known-failures`, `tests/map-cases-known-failures`) names it with its
//! reason, and a listed case that passes must leave the list. The checker runs in the
//! virtualenv `.ci/map-venv` makes (`make test` makes it first); without it, a `python3` that
//! has `jsonpatch` and `yaml`.

use std::path::{Path, PathBuf};
use std::process::Command;

mod common;

const KNOWN_FAILURES: &str = "tests/map-oracle-known-failures";
const GOLDEN_KNOWN_FAILURES: &str = "tests/map-cases-known-failures";

/// The Python that runs the checker: the CI virtualenv, else `python3` if it has what the
/// checker imports.
fn python(repo: &Path) -> PathBuf {
    let venv = repo.join("target/map-venv/bin/python");
    if venv.exists() {
        return venv;
    }
    let system = PathBuf::from("python3");
    let usable = Command::new(&system)
        .args(["-c", "import jsonpatch, yaml"])
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        usable,
        "the MAP oracle's checker needs Python with jsonpatch and PyYAML: run `bash .ci/map-venv` (make test does)"
    );
    system
}

/// Runs the checker on `cases` and ratchets its verdicts against `known_failures`; at least
/// `min_cases` must have run.
fn check_corpus(cases: &Path, known_failures: &str, min_cases: usize) {
    let repo = common::repo();
    let checker = common::shared_dir().join("map-oracle-sample/check_map.py");
    let binary = env!("CARGO_BIN_EXE_celgate");
    let out = Command::new(python(&repo))
        .arg(checker)
        .arg("--cases")
        .arg(cases)
        .args(["--jobs", "2", "--cmd"])
        .arg(format!(
            "{binary} eval --phase mutating --policies {{dir}} --request {{review}}"
        ))
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .expect("the checker runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let results: Vec<(&str, bool)> = stdout
        .lines()
        .filter_map(|l| {
            if let Some(id) = l.strip_prefix("PASS ") {
                Some((id.trim(), true))
            } else {
                l.strip_prefix("FAIL ").map(|id| (id.trim(), false))
            }
        })
        .collect();
    assert!(
        results.len() >= min_cases,
        "the checker ran {} cases:\n{stdout}\n{}",
        results.len(),
        String::from_utf8_lossy(&out.stderr)
    );
    let known = common::ratchet::read_list(&repo.join(known_failures));
    if let Err(problems) = common::ratchet::check(results, &known, known_failures) {
        panic!("{problems}\n\nchecker output:\n{stdout}");
    }
}

#[test]
fn recorded_mutating_admission_cases() {
    let sample = common::shared_dir().join("map-oracle-sample/cases");
    check_corpus(&sample, KNOWN_FAILURES, 150);
}

#[test]
fn golden_mutating_admission_cases() {
    let cases = common::repo().join("tests/map-cases");
    check_corpus(&cases, GOLDEN_KNOWN_FAILURES, 45);
}
