//! `celgate lint` golden cases: `tests/lint-cases/<name>/policies/` holds policies (and CRDs)
//! and `expected.json` what the API server's type checking (`typechecking.go`) would write
//! into each policy's `status.typeChecking`, worked out from its source and tests:
//! `{"k8sVersion": "1.N", "exitCode": N, "policies": [<one -o json line per policy>]}`.
//! A MutatingAdmissionPolicy's line (`"kind": "MutatingAdmissionPolicy"`) holds what its
//! mutations' check against the schemas found (`map-*` cases; the runtime errors they
//! foresee are recorded in `../shared/map-oracle-sample`).
//! Findings of the other checks (strict fields, creation-time checks, references between
//! objects; one `-o json` line each) are compared when `expected.json` has `"findings"`.
//! A case with `expected.txt` also checks the text output. Each case runs the binary as a
//! user does; `cargo test --test lint -- NAME` runs the cases whose name contains NAME.

use std::path::{Path, PathBuf};
use std::process::Command;

use libtest_mimic::Arguments;
use serde_json::Value as Json;

mod common;

fn cases_dir() -> PathBuf {
    common::repo().join("tests/lint-cases")
}

fn lint(dir: &Path, version: &str, output: &str) -> Result<(i32, String), String> {
    let out = Command::new(env!("CARGO_BIN_EXE_celgate"))
        .args(["lint", "--policies"])
        .arg(dir.join("policies"))
        .args(["--k8s-version", version, "-o", output])
        .output()
        .map_err(|e| e.to_string())?;
    if !out.stderr.is_empty() {
        return Err(format!(
            "standard error: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok((
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    ))
}

fn run(dir: &Path) -> Result<(), String> {
    let text = std::fs::read_to_string(dir.join("expected.json")).map_err(|e| e.to_string())?;
    let want: Json = serde_json::from_str(&text).map_err(|e| format!("expected.json: {e}"))?;
    let version = want["k8sVersion"].as_str().unwrap_or("1.32");
    let (code, out) = lint(dir, version, "json")?;
    let lines: Vec<Json> = out
        .lines()
        .map(serde_json::from_str)
        .collect::<Result<_, _>>()
        .map_err(|e| format!("output is not JSON lines: {e}\n{out}"))?;
    // A line per policy (`policy`), then one per finding of the other checks (`severity`),
    // compared when the case records them (`findings`).
    let (got, mut findings): (Vec<Json>, Vec<Json>) =
        lines.into_iter().partition(|l| l.get("policy").is_some());
    let prefix = format!("{}/", dir.display());
    for f in &mut findings {
        if let Some(file) = f["file"].as_str().and_then(|p| p.strip_prefix(&prefix)) {
            f["file"] = Json::String(file.to_string());
        }
    }
    let want_findings = want["findings"].as_array().cloned().unwrap_or_default();
    if want.get("findings").is_some() && findings != want_findings {
        diffs_findings(&findings, &want_findings)?;
    }
    let mut diffs = Vec::new();
    if Some(i64::from(code)) != want["exitCode"].as_i64() {
        diffs.push(format!("exit code: got {code}, want {}", want["exitCode"]));
    }
    let want_policies = want["policies"].as_array().cloned().unwrap_or_default();
    if got.len() != want_policies.len() {
        diffs.push(format!(
            "{} policies reported, want {}",
            got.len(),
            want_policies.len()
        ));
    }
    for (g, w) in got.iter().zip(&want_policies) {
        if g != w {
            diffs.push(format!(
                "policy {}:\n   got  {}\n   want {}",
                w["policy"],
                serde_json::to_string_pretty(g).unwrap_or_default(),
                serde_json::to_string_pretty(w).unwrap_or_default()
            ));
        }
    }
    if let Ok(want_text) = std::fs::read_to_string(dir.join("expected.txt")) {
        let (_, text) = lint(dir, version, "text")?;
        if text != want_text {
            diffs.push(format!("text output:\n{text}--- want:\n{want_text}"));
        }
    }
    if diffs.is_empty() {
        Ok(())
    } else {
        Err(diffs.join("\n"))
    }
}

/// The findings differ: say how (the file path is the case's, relative to the repository).
fn diffs_findings(got: &[Json], want: &[Json]) -> Result<(), String> {
    Err(format!(
        "findings:\n   got  {}\n   want {}",
        serde_json::to_string_pretty(got).unwrap_or_default(),
        serde_json::to_string_pretty(want).unwrap_or_default()
    ))
}

fn main() {
    let args = Arguments::from_args();
    let dir = cases_dir();
    let mut trials = common::cases::case_trials(&dir, run);
    let count = trials.len();
    trials.push(common::cases::count_trial(
        "at least 12 cases",
        "lint cases",
        count,
        12,
        &dir,
    ));
    libtest_mimic::run(&args, trials).exit();
}
