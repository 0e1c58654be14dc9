//! What the case-driven tests share: answering a case folder through the `celgate eval` code
//! path, running a case on a thread with a known stack, and making one libtest-mimic trial of
//! each case (so that `cargo test --test NAME -- CASE` filters and each failure is its own
//! line).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use celgate::cel::NEWEST_MINOR;
use celgate::source::{add_cluster_defaults, folder, snapshot_stored};
use libtest_mimic::{Failed, Trial};
use serde_json::Value as Json;

/// Answers `dir/review.json` against `dir/objects.yaml` (with the cluster defaults, strict
/// validation) as `celgate eval` does; returns the answer and `dir/expected.json`.
pub fn answer_case(dir: &Path) -> Result<(Json, Json), String> {
    let objects_path = dir.join("objects.yaml");
    let text = std::fs::read_to_string(&objects_path).map_err(|e| e.to_string())?;
    let mut objects = folder::parse_documents(&objects_path, &text).map_err(|e| e.to_string())?;
    add_cluster_defaults(&mut objects);
    let snap = snapshot_stored(objects, NEWEST_MINOR).map_err(|e| e.to_string())?;
    let body = std::fs::read(dir.join("review.json")).map_err(|e| e.to_string())?;
    let answer = celgate::review::answer(&snap, &body, &Default::default(), Default::default())
        .map_err(|e| e.to_string())?
        .review();
    let expected = std::fs::read(dir.join("expected.json")).map_err(|e| e.to_string())?;
    let expected = serde_json::from_slice(&expected).map_err(|e| format!("expected.json: {e}"))?;
    Ok((answer, expected))
}

/// The case folders below `dir`, by name, in name order; `None` when `dir` cannot be read.
pub fn case_dirs(dir: &Path) -> Option<Vec<(String, PathBuf)>> {
    let mut cases: Vec<PathBuf> = std::fs::read_dir(dir)
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .collect();
    cases.sort();
    Some(
        cases
            .into_iter()
            .map(|case| {
                let name = case
                    .file_name()
                    .map(|n| n.to_string_lossy().to_string())
                    .unwrap_or_default();
                (name, case)
            })
            .collect(),
    )
}

/// Runs `work` on a thread with a 64 MiB stack (as `celgate eval` evaluates); a panic is an
/// error.
pub fn on_big_stack<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, String> + Send + 'static,
) -> Result<T, String> {
    match std::thread::Builder::new().stack_size(64 << 20).spawn(work) {
        Ok(h) => h.join().unwrap_or_else(|_| Err("panicked".into())),
        Err(e) => Err(format!("cannot start a thread: {e}")),
    }
}

/// One trial per case folder below `dir`, each running `check` on a big stack.
pub fn case_trials(dir: &Path, check: fn(&Path) -> Result<(), String>) -> Vec<Trial> {
    case_dirs(dir)
        .unwrap_or_else(|| panic!("cannot read {}", dir.display()))
        .into_iter()
        .map(|(name, case)| {
            Trial::test(name, move || {
                on_big_stack(move || check(&case)).map_err(Failed::from)
            })
        })
        .collect()
}

/// A trial that checks that at least `min` cases of `what` were found in `dir`.
pub fn count_trial(name: &str, what: &str, found: usize, min: usize, dir: &Path) -> Trial {
    let message = format!(
        "expected at least {min} {what} in {}, found {found}",
        dir.display()
    );
    Trial::test(name, move || {
        if found >= min {
            Ok(())
        } else {
            Err(message.into())
        }
    })
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
