//! What the case-driven tests share: answering a case folder through the `celgate eval` code
//! path, and running every case on a thread with a known stack.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use celgate::cel::NEWEST_MINOR;
use celgate::source::{add_cluster_defaults, folder, snapshot};
use serde_json::Value as Json;

/// `../shared`, or `$CELGATE_SHARED`.
#[allow(dead_code)]
pub fn shared_dir() -> PathBuf {
    std::env::var_os("CELGATE_SHARED")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared"))
}

/// Answers `dir/review.json` against `dir/objects.yaml` (with the cluster defaults, strict
/// validation) as `celgate eval` does; returns the answer and `dir/expected.json`.
pub fn answer_case(dir: &Path) -> Result<(Json, Json), String> {
    let objects_path = dir.join("objects.yaml");
    let text = std::fs::read_to_string(&objects_path).map_err(|e| e.to_string())?;
    let mut objects = folder::parse_documents(&objects_path, &text).map_err(|e| e.to_string())?;
    add_cluster_defaults(&mut objects);
    let snap = snapshot(objects, NEWEST_MINOR, true).map_err(|e| e.to_string())?;
    let body = std::fs::read(dir.join("review.json")).map_err(|e| e.to_string())?;
    let answer = celgate::review::review_answer(&snap, &body).map_err(|e| e.to_string())?;
    let expected = std::fs::read(dir.join("expected.json")).map_err(|e| e.to_string())?;
    let expected = serde_json::from_slice(&expected).map_err(|e| format!("expected.json: {e}"))?;
    Ok((answer, expected))
}

/// Runs `check` on every case folder below `dir`, in name order, each on a thread with a
/// 64 MiB stack (as `celgate eval` evaluates); a panic is a failure of that case.
pub fn run_all(
    dir: &Path,
    check: fn(&Path) -> Result<(), String>,
) -> Vec<(String, Result<(), String>)> {
    let mut cases: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .collect();
    cases.sort();
    cases
        .into_iter()
        .map(|case| {
            let name = case
                .file_name()
                .map(|n| n.to_string_lossy().to_string())
                .unwrap_or_default();
            let worker = std::thread::Builder::new()
                .stack_size(64 << 20)
                .spawn(move || check(&case));
            let result = match worker {
                Ok(h) => h.join().unwrap_or_else(|_| Err("panicked".into())),
                Err(e) => Err(format!("cannot start a thread: {e}")),
            };
            (name, result)
        })
        .collect()
}

/// Compares warnings as sets (their order follows policy evaluation, which the cases do not
/// fix); a difference is pushed onto `diffs`.
pub fn diff_warnings(got: &Json, want: &Json, diffs: &mut Vec<String>) {
    let as_set = |v: &Json| {
        v.as_array()
            .map(|a| a.iter().map(|x| x.to_string()).collect::<BTreeSet<_>>())
            .unwrap_or_default()
    };
    if as_set(got) != as_set(want) {
        diffs.push(format!("warnings: got {got}, want {want}"));
    }
}
