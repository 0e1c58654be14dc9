//! The engine's layers are one-way (issue 11): `model` is a leaf; `matching` reads the model
//! only; `policy` compiles with `matching`; `admission` evaluates and knows no wire format;
//! `review` is the AdmissionReview codec around it. None of them does I/O or knows the
//! server, the sources, tokio or kube. This test reads the sources and fails on an import
//! that breaks those rules (comments are skipped, so doc links may name any module).

use std::path::Path;

/// Each engine module, and the paths its code must not name.
const RULES: &[(&str, &[&str])] = &[
    (
        "model",
        &[
            "crate::cel",
            "crate::matching",
            "crate::policy",
            "crate::admission",
            "crate::review",
            "crate::server",
            "crate::source",
            "crate::testing",
        ],
    ),
    (
        "matching",
        &[
            "crate::policy",
            "crate::admission",
            "crate::review",
            "crate::server",
            "crate::source",
        ],
    ),
    (
        "policy",
        &[
            "crate::admission",
            "crate::review",
            "crate::server",
            "crate::source",
        ],
    ),
    (
        "admission",
        &[
            "crate::review",
            "crate::server",
            "crate::source",
            "crate::testing",
        ],
    ),
    (
        "review",
        &["crate::server", "crate::source", "crate::testing"],
    ),
];

/// Crates of I/O no engine module may use.
const IO_CRATES: &[&str] = &["tokio", "kube", "hyper", "axum", "reqwest", "k8s_openapi"];

fn sources(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The code of a file: its lines without `//` comments.
fn code(path: &Path) -> Vec<(usize, String)> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .enumerate()
        .filter_map(|(i, l)| {
            let code = l.split("//").next().unwrap_or("");
            (!code.trim().is_empty()).then(|| (i + 1, code.to_string()))
        })
        .collect()
}

#[test]
fn engine_layers_are_one_way_and_without_io() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut broken = Vec::new();
    for (module, forbidden) in RULES {
        let mut files = Vec::new();
        sources(&root.join(module), &mut files);
        assert!(!files.is_empty(), "no sources for {module}");
        for file in files {
            for (line, text) in code(&file) {
                let io = IO_CRATES.iter().map(|c| format!("{c}::")).find(|c| {
                    text.split(|ch: char| !(ch.is_alphanumeric() || ch == '_' || ch == ':'))
                        .any(|word| word.starts_with(c.as_str()))
                });
                let bad = forbidden
                    .iter()
                    .map(|f| f.to_string())
                    .find(|f| text.contains(f.as_str()))
                    .or(io);
                if let Some(bad) = bad {
                    broken.push(format!("{}:{line}: {module} uses {bad}", file.display()));
                }
            }
        }
    }
    assert!(
        broken.is_empty(),
        "layer rules broken:\n{}",
        broken.join("\n")
    );
}

#[test]
fn the_check_sees_a_broken_rule() {
    // The scanner itself: a forbidden path in code is found, one in a comment is not.
    let dir = std::env::temp_dir().join(format!("celgate-layers-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("x.rs");
    std::fs::write(
        &file,
        "// crate::server in a comment\nuse crate::server::run; // x\n",
    )
    .unwrap();
    let lines = code(&file);
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(lines.len(), 1);
    assert_eq!(lines[0].0, 2);
    assert!(lines[0].1.contains("crate::server"));
}
