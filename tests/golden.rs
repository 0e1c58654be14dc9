//! Golden cases: `tests/cases/<name>/` holds `objects.yaml` (policies, bindings, params,
//! namespaces, RBAC), `review.json` (an AdmissionReview) and `expected.json` (the answer the
//! spec prescribes, written from `vap-semantics.md`, with the section it checks). Each runs
//! through the `celgate eval` code path.
//!
//! `expected.json`: `allowed`; when denied `code`, `reason`, `message`; `warnings` (a set);
//! `annotations` (celgate's keys to values; `validation_failure` compared as parsed JSON);
//! optionally `details` (compared field by field) and `api_version` of the answer.
//!
//! Each case is its own test: `cargo test --test golden -- NAME` runs the cases whose name
//! contains NAME.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde_json::Value as Json;

mod common;

fn run(dir: &Path) -> Result<(), String> {
    let (answer, want) = common::cases::answer_case(dir)?;
    let got = &answer["response"];
    let mut diffs = Vec::new();
    if got["allowed"] != want["allowed"] {
        diffs.push(format!(
            "allowed: got {}, want {}",
            got["allowed"], want["allowed"]
        ));
    }
    if want["allowed"] == false {
        for (field, key) in [
            ("code", "code"),
            ("reason", "reason"),
            ("message", "message"),
        ] {
            if got["status"][key] != want[field] {
                diffs.push(format!(
                    "{field}:\n   got  {}\n   want {}",
                    got["status"][key], want[field]
                ));
            }
        }
    }
    if let Some(details) = want["details"].as_object() {
        for (k, v) in details {
            if &got["status"]["details"][k] != v {
                diffs.push(format!(
                    "details.{k}: got {}, want {v}",
                    got["status"]["details"][k]
                ));
            }
        }
    }
    if let Some(v) = want.get("api_version") {
        if &answer["apiVersion"] != v {
            diffs.push(format!(
                "apiVersion: got {}, want {v}",
                answer["apiVersion"]
            ));
        }
    }
    common::cases::diff_warnings(&got["warnings"], &want["warnings"], &mut diffs);
    let got_ann = got["auditAnnotations"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    let want_ann = want["annotations"].as_object().cloned().unwrap_or_default();
    let keys: BTreeSet<&String> = got_ann.keys().chain(want_ann.keys()).collect();
    for k in keys {
        let (g, w) = (got_ann.get(k), want_ann.get(k));
        let same = if k == "validation_failure" {
            let parse = |v: Option<&Json>| {
                v.and_then(|s| s.as_str())
                    .and_then(|s| serde_json::from_str::<Json>(s).ok())
            };
            parse(g)
                == w.cloned().and_then(|w| {
                    if w.is_string() {
                        parse(Some(&w))
                    } else {
                        Some(w)
                    }
                })
        } else {
            g == w
        };
        if !same {
            diffs.push(format!("annotation {k}: got {g:?}, want {w:?}"));
        }
    }
    if diffs.is_empty() {
        Ok(())
    } else {
        Err(diffs.join("\n  "))
    }
}

/// One trial per case of `tests/cases`, and one that checks they are all there.
fn main() {
    let args = libtest_mimic::Arguments::from_args();
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/cases");
    let mut trials = common::cases::case_trials(&dir, run);
    let found = trials.len();
    trials.push(common::cases::count_trial(
        "golden_case_count",
        "golden cases",
        found,
        100,
        &dir,
    ));
    libtest_mimic::run(&args, trials).exit();
}
