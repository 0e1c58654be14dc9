//! `celgate lint` golden cases: `tests/lint-cases/<name>/policies/` holds policies (and CRDs)
//! and `expected.json` what the API server's type checking (`typechecking.go`) would write
//! into each policy's `status.typeChecking`, worked out from its source and tests:
//! `{"k8sVersion": "1.N", "exitCode": N, "policies": [<one -o json line per policy>]}`.
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
    let got: Vec<Json> = out
        .lines()
        .map(serde_json::from_str)
        .collect::<Result<_, _>>()
        .map_err(|e| format!("output is not JSON lines: {e}\n{out}"))?;
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
