//! Runs every case recorded from a real kube-apiserver (`../shared/oracle-sample/cases/`)
//! through the `celgate eval` code path and compares the answer with what the API server did,
//! as the sample's README prescribes. Each case is its own test (`cargo test --test oracle --
//! NAME`).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use celgate::review::encode::annotation_key;
use libtest_mimic::Trial;
use serde_json::Value as Json;

/// Cases celgate answers differently on purpose, with the reason. Empty: every case agrees.
const KNOWN_DIFFERENCES: &[(&str, &str)] = &[];

mod common;

/// Runs one case; `Err` describes every difference.
fn run_case(dir: &Path) -> Result<(), String> {
    let (answer, expected) = common::cases::answer_case(dir)?;
    compare(&answer["response"], &expected)
}

fn compare(got: &Json, want: &Json) -> Result<(), String> {
    let mut diffs = Vec::new();
    if got["allowed"] != want["allowed"] {
        diffs.push(format!(
            "allowed: got {}, want {}",
            got["allowed"], want["allowed"]
        ));
    }
    if want["allowed"] == false {
        let status = &got["status"];
        if status["code"] != want["code"] {
            diffs.push(format!(
                "code: got {}, want {}",
                status["code"], want["code"]
            ));
        }
        if status["reason"] != want["reason"] {
            diffs.push(format!(
                "reason: got {}, want {}",
                status["reason"], want["reason"]
            ));
        }
        let mut accepted: Vec<&Json> = vec![&want["vap_message"]];
        if let Some(any) = want["vap_message_any_of"].as_array() {
            accepted.extend(any);
        }
        if !accepted.contains(&&status["message"]) {
            diffs.push(format!(
                "message:\n   got  {}\n   want {}",
                status["message"], want["vap_message"]
            ));
        }
    }
    common::cases::diff_warnings(&got["warnings"], &want["warnings"], &mut diffs);
    let got_ann = got["auditAnnotations"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    let want_ann = want["audit_annotations"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    let mut expected_keys = BTreeSet::new();
    for (key, value) in &want_ann {
        if key == "validation.policy.admission.k8s.io/validation_failure" {
            expected_keys.insert("validation_failure".to_string());
            let got_list: Json = got_ann
                .get("validation_failure")
                .and_then(|v| v.as_str())
                .and_then(|s| serde_json::from_str(s).ok())
                .unwrap_or(Json::Null);
            let mut alternatives: Vec<Json> = vec![value
                .as_str()
                .and_then(|s| serde_json::from_str(s).ok())
                .unwrap_or(Json::Null)];
            if let Some(any) = want["validation_failure_any_of"].as_array() {
                alternatives.extend(any.iter().map(|a| {
                    a.as_str()
                        .and_then(|s| serde_json::from_str(s).ok())
                        .unwrap_or_else(|| a.clone())
                }));
            }
            // 1.32 keeps only the first audited failure; celgate keeps all (up to 50), so the
            // recorded entries must start celgate's list.
            let starts = |alt: &Json| match (alt.as_array(), got_list.as_array()) {
                (Some(a), Some(g)) => g.len() >= a.len() && g[..a.len()] == a[..],
                _ => false,
            };
            if !alternatives.iter().any(starts) {
                diffs.push(format!(
                    "validation_failure: got {got_list}, want {}",
                    alternatives[0]
                ));
            }
            continue;
        }
        let (policy, k) = key.split_once('/').unwrap_or((key, ""));
        let ours = annotation_key(policy, k);
        expected_keys.insert(ours.clone());
        if got_ann.get(&ours) != Some(value) {
            diffs.push(format!(
                "annotation {ours}: got {:?}, want {value}",
                got_ann.get(&ours)
            ));
        }
    }
    for k in got_ann.keys() {
        if !expected_keys.contains(k) {
            diffs.push(format!("unexpected annotation {k}: {}", got_ann[k]));
        }
    }
    if diffs.is_empty() {
        Ok(())
    } else {
        Err(diffs.join("\n  "))
    }
}

/// A case listed in [`KNOWN_DIFFERENCES`] is ignored (with its reason) while it differs,
/// and fails once it agrees (the list must shrink with it).
fn oracle_trial(name: String, dir: PathBuf) -> Trial {
    let known = KNOWN_DIFFERENCES
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, why)| *why);
    Trial::ignorable_test(name, move || {
        let result = common::cases::on_big_stack(move || run_case(&dir));
        common::ratchet::case_verdict(result, known, "KNOWN_DIFFERENCES")
    })
}

/// One trial per recorded case, and one that checks they are all there.
fn main() {
    let args = libtest_mimic::Arguments::from_args();
    let dir = common::shared_dir().join("oracle-sample/cases");
    let cases =
        common::cases::case_dirs(&dir).unwrap_or_else(|| panic!("cannot read {}", dir.display()));
    let found = cases.len();
    let mut trials: Vec<Trial> = cases
        .into_iter()
        .map(|(name, dir)| oracle_trial(name, dir))
        .collect();
    trials.push(common::cases::count_trial(
        "oracle_case_count",
        "recorded cases",
        found,
        70,
        &dir,
    ));
    libtest_mimic::run(&args, trials).exit();
}
