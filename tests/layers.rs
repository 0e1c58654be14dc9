//! The layers of `src/lib.rs`'s table of contents, checked on the source text: a module that
//! uses a layer it must not (the server a source, the engine an async runtime or a
//! Kubernetes client) fails here, naming the file and line.

use std::path::{Path, PathBuf};

/// Crates that do I/O or serve: none may be named by the engine.
const IO_CRATES: &[&str] = &[
    "tokio",
    "tokio_rustls",
    "kube",
    "k8s_openapi",
    "axum",
    "hyper",
    "hyper_util",
    "rustls",
    "prometheus",
];

/// Everything above the engine.
const OUTER: &[&str] = &[
    "source", "certs", "server", "testing", "scan", "lint", "app",
];

struct Rule {
    /// A top-level module of the crate (`src/NAME/` or `src/NAME.rs`).
    module: &'static str,
    /// Top-level modules it must not use (`crate::NAME`).
    modules: &'static [&'static str],
    /// External crates it must not use.
    crates: &'static [&'static str],
}

fn rules() -> Vec<Rule> {
    let engine = [
        "cel",
        "apimachinery",
        "model",
        "policy",
        "matching",
        "admission",
        "review",
        "crd",
    ];
    let mut rules: Vec<Rule> = engine
        .iter()
        .map(|m| Rule {
            module: m,
            modules: OUTER,
            crates: IO_CRATES,
        })
        .collect();
    rules.push(Rule {
        module: "cel",
        modules: &["policy", "matching", "admission", "review", "crd", "model"],
        crates: &[],
    });
    // Inside the engine, one way: apimachinery <- cel <- model <- matching <- policy <-
    // admission <- review.
    rules.push(Rule {
        module: "apimachinery",
        modules: &[
            "cel",
            "model",
            "policy",
            "matching",
            "admission",
            "review",
            "crd",
        ],
        crates: &[],
    });
    rules.push(Rule {
        module: "cel",
        modules: &[],
        crates: &["std::fs"],
    });
    rules.push(Rule {
        module: "model",
        modules: &["cel", "matching", "policy", "admission", "review", "crd"],
        crates: &[],
    });
    rules.push(Rule {
        module: "matching",
        modules: &["policy", "admission", "review", "crd"],
        crates: &[],
    });
    rules.push(Rule {
        module: "policy",
        modules: &["admission", "review", "crd"],
        crates: &[],
    });
    rules.push(Rule {
        module: "admission",
        modules: &["review", "crd"],
        crates: &[],
    });
    // Scans evaluate stored objects for `celgate scan` and the cluster's background scans:
    // under the sources, so they read no folder and call no API server themselves.
    rules.push(Rule {
        module: "scan",
        modules: &["source", "server", "certs", "app", "testing"],
        crates: &["kube", "tokio", "axum"],
    });
    // The certificate controller hands the server PEM through the app: neither knows the
    // other.
    rules.push(Rule {
        module: "certs",
        modules: &["source", "server", "app", "testing"],
        crates: &[],
    });
    rules.push(Rule {
        module: "server",
        modules: &["source", "certs", "app", "testing"],
        crates: &["kube", "k8s_openapi"],
    });
    rules.push(Rule {
        module: "source",
        modules: &["server", "certs", "app", "testing"],
        crates: &[],
    });
    // Offline scans run on the engine and the folder source, like `celgate test`.
    rules.push(Rule {
        module: "scan",
        modules: &["server", "certs", "app"],
        crates: &["tokio", "kube", "axum", "hyper"],
    });
    // Type checking of policies is offline and does no I/O: the command line reads the
    // folder.
    rules.push(Rule {
        module: "lint",
        modules: &["source", "server", "certs", "app", "testing", "scan"],
        crates: IO_CRATES,
    });
    rules.push(Rule {
        module: "testing",
        modules: &["server", "certs", "app"],
        crates: &["tokio", "kube", "axum", "hyper"],
    });
    rules
}

fn rust_files(path: &Path, out: &mut Vec<PathBuf>) {
    if path.is_dir() {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(path)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        entries.sort();
        for e in entries {
            rust_files(&e, out);
        }
    } else if path.is_file() && path.extension().is_some_and(|e| e == "rs") {
        out.push(path.to_path_buf());
    }
}

/// The uses of `rule`'s forbidden modules and crates in `text` (comments skipped), as
/// `line: text`.
fn violations(rule: &Rule, text: &str) -> Vec<String> {
    let modules = rule
        .modules
        .iter()
        .map(|m| format!(r"\bcrate::{m}\b"))
        .collect::<Vec<_>>();
    // A crate path not preceded by `::` (so `crate::source::kube::` is not the crate).
    let crates = rule
        .crates
        .iter()
        .map(|c| format!(r"(^|[^:\w]){c}::"))
        .collect::<Vec<_>>();
    let patterns: Vec<regex::Regex> = modules
        .iter()
        .chain(&crates)
        .map(|p| regex::Regex::new(p).unwrap())
        .collect();
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim_start().starts_with("//"))
        .filter(|(_, l)| patterns.iter().any(|p| p.is_match(l)))
        .map(|(i, l)| format!("{}: {}", i + 1, l.trim()))
        .collect()
}

#[test]
fn each_layer_uses_only_the_layers_it_may() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut found = Vec::new();
    let mut checked = 0;
    for rule in rules() {
        let mut files = Vec::new();
        rust_files(&src.join(rule.module), &mut files);
        rust_files(&src.join(format!("{}.rs", rule.module)), &mut files);
        for f in files {
            checked += 1;
            let text = std::fs::read_to_string(&f).unwrap();
            for v in violations(&rule, &text) {
                found.push(format!("{} ({}): {v}", f.display(), rule.module));
            }
        }
    }
    assert!(checked > 50, "only {checked} files checked: is src/ there?");
    assert!(found.is_empty(), "layer violations:\n{}", found.join("\n"));
}

#[test]
fn the_check_sees_a_use_and_skips_comments_and_nested_paths() {
    let rule = Rule {
        module: "server",
        modules: &["source"],
        crates: &["kube"],
    };
    assert_eq!(
        violations(&rule, "use crate::source::kube::Problem;").len(),
        1
    );
    assert_eq!(
        violations(&rule, "let c = kube::Client::try_from(x);").len(),
        1
    );
    assert_eq!(violations(&rule, "    use kube::Api;").len(), 1);
    assert!(violations(&rule, "//! filled by [`crate::source`]").is_empty());
    assert!(violations(&rule, "use crate::sources_of_truth::X;").is_empty());
    assert!(violations(&rule, "use crate::other::kube::X;").is_empty());
}
