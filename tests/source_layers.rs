//! The folder source stands without the cluster source (issue 25): `src/source/mod.rs` and
//! every module under `src/source/` outside `kube/` name neither the `kube` crate nor the
//! `source::kube` module, so that folder mode builds on nothing that imports `kube::Client`.
//! Checked on the source text, as `tests/layers.rs` checks the crate's layers; a violation
//! names the file and line.

use std::path::{Path, PathBuf};

/// What a module outside `src/source/kube/` must not write: the `kube` crate or the cluster
/// source module, by any path.
const FORBIDDEN: &[&str] = &["kube::", "source::kube", "self::kube", "super::kube"];

/// Every `.rs` file below `dir`, but for the cluster source's own directory.
fn neutral_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            if path.file_name().is_some_and(|n| n != "kube") {
                neutral_files(&path, out);
            }
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// `file:line: text` of each line of `text` naming a forbidden path.
fn violations(file: &str, text: &str) -> Vec<String> {
    text.lines()
        .enumerate()
        .filter(|(_, line)| FORBIDDEN.iter().any(|f| line.contains(f)))
        .map(|(i, line)| format!("{file}:{}: {}", i + 1, line.trim()))
        .collect()
}

#[test]
fn folder_source_modules_name_no_cluster_source() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/source");
    let mut files = Vec::new();
    neutral_files(&root, &mut files);
    assert!(
        files.iter().any(|f| f.ends_with("source/mod.rs")),
        "src/source/mod.rs is checked"
    );
    let found: Vec<String> = files
        .iter()
        .flat_map(|f| {
            let text = std::fs::read_to_string(f).unwrap();
            violations(&f.display().to_string(), &text)
        })
        .collect();
    assert!(
        found.is_empty(),
        "the folder source names the cluster source:\n{}",
        found.join("\n")
    );
}

#[test]
fn each_spelling_is_caught() {
    for line in [
        "use kube::Client;",
        "pub problems: Vec<kube::Problem>,",
        "use crate::source::kube::feedback;",
        "use self::kube::Problem;",
        "use super::kube;",
    ] {
        assert_eq!(violations("f.rs", line).len(), 1, "{line}");
    }
    for line in [
        "pub mod kube;",
        "\"kube-root-ca.crt\"",
        "use super::folder;",
    ] {
        assert!(violations("f.rs", line).is_empty(), "{line}");
    }
}
