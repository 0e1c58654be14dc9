//! Runs every case recorded from a real kube-apiserver (`../shared/oracle-sample/cases/`)
//! through the `celgate eval` code path and compares the answer with what the API server did,
//! as the sample's README prescribes.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use celgate::admission::response::annotation_key;
use celgate::cel::NEWEST_MINOR;
use celgate::source::{add_cluster_defaults, folder, snapshot};
use serde_json::Value as Json;

/// Cases celgate answers differently on purpose, with the reason. Empty: every case agrees.
const KNOWN_DIFFERENCES: &[(&str, &str)] = &[];

fn cases_dir() -> PathBuf {
    let base = std::env::var_os("CELGATE_SHARED")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared"));
    base.join("oracle-sample/cases")
}

/// Runs one case; `Err` describes every difference.
pub fn run_case(dir: &Path) -> Result<(), String> {
    let objects_path = dir.join("objects.yaml");
    let text = std::fs::read_to_string(&objects_path).map_err(|e| e.to_string())?;
    let mut objects = folder::parse_documents(&objects_path, &text).map_err(|e| e.to_string())?;
    add_cluster_defaults(&mut objects);
    let snap = snapshot(objects, NEWEST_MINOR, true).map_err(|e| e.to_string())?;
    let body = std::fs::read(dir.join("review.json")).map_err(|e| e.to_string())?;
    let answer = celgate::admission::review_answer(&snap, &body).map_err(|e| e.0)?;
    let expected: Json = serde_json::from_slice(
        &std::fs::read(dir.join("expected.json")).map_err(|e| e.to_string())?,
    )
    .map_err(|e| e.to_string())?;
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
    let as_set = |v: &Json| {
        v.as_array()
            .map(|a| a.iter().map(|x| x.to_string()).collect::<BTreeSet<_>>())
            .unwrap_or_default()
    };
    if as_set(&got["warnings"]) != as_set(&want["warnings"]) {
        diffs.push(format!(
            "warnings: got {}, want {}",
            got["warnings"], want["warnings"]
        ));
    }
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

#[test]
fn oracle_cases() {
    let dir = cases_dir();
    let mut cases: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .collect();
    cases.sort();
    let (mut passed, mut failed, mut known) = (0, 0, 0);
    let mut report = Vec::new();
    for case in &cases {
        let name = case.file_name().unwrap().to_string_lossy().to_string();
        let result = std::thread::Builder::new().stack_size(64 << 20).spawn({
            let case = case.clone();
            move || run_case(&case)
        });
        let result = result
            .unwrap()
            .join()
            .unwrap_or_else(|_| Err("panicked".into()));
        match (result, KNOWN_DIFFERENCES.iter().find(|(n, _)| *n == name)) {
            (Ok(()), None) => passed += 1,
            (Ok(()), Some(_)) => report.push(format!(
                "{name}: listed as a known difference but now agrees"
            )),
            (Err(_), Some((_, why))) => {
                known += 1;
                println!("known difference {name}: {why}");
            }
            (Err(e), None) => {
                failed += 1;
                report.push(format!("{name}:\n  {e}"));
            }
        }
    }
    for r in &report {
        println!("{r}");
    }
    println!("oracle cases: {passed} passed, {failed} failed, {known} skipped");
    assert!(
        cases.len() >= 70,
        "expected the recorded cases in {}",
        dir.display()
    );
    assert!(
        report.is_empty(),
        "{} oracle case(s) disagree",
        report.len()
    );
}
