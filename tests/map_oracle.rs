//! Runs every MutatingAdmissionPolicy case recorded from a real kube-apiserver
//! (`../shared/map-oracle-sample/cases`) through the real binary, as the sample's README
//! prescribes: its own checker (`check_map.py`, strict about the API server's defaulting
//! after each mutation, which celgate does too) calls
//! `celgate eval --phase mutating --policies {dir} --request {review}` per case, applies the
//! answer's patch to the request's object with Python's `jsonpatch`, and compares the result
//! (or the denial's code and message) with what the API server did.
//!
//! Ratcheted by case id (`common::ratchet`): every case passes unless
//! `tests/map-oracle-known-failures` lists it with its reason, and a listed case that passes
//! must leave the list. The checker runs in the virtualenv `.ci/map-venv` makes
//! (`make test` makes it first); without it, a `python3` that has `jsonpatch` and `yaml`.

use std::path::{Path, PathBuf};
use std::process::Command;

mod common;

const KNOWN_FAILURES: &str = "tests/map-oracle-known-failures";

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

#[test]
fn recorded_mutating_admission_cases() {
    let repo = common::repo();
    let sample = common::shared_dir().join("map-oracle-sample");
    let binary = env!("CARGO_BIN_EXE_celgate");
    let out = Command::new(python(&repo))
        .arg(sample.join("check_map.py"))
        .arg("--cases")
        .arg(sample.join("cases"))
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
        results.len() >= 150,
        "the checker ran {} cases:\n{stdout}\n{}",
        results.len(),
        String::from_utf8_lossy(&out.stderr)
    );
    let known = common::ratchet::read_list(&repo.join(KNOWN_FAILURES));
    if let Err(problems) = common::ratchet::check(results, &known, KNOWN_FAILURES) {
        panic!("{problems}\n\nchecker output:\n{stdout}");
    }
}
