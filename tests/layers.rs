//! The house's walls, checked: the engine crates' normal dependency trees hold no I/O crate
//! (`cargo tree`), no top-level module of a crate takes part in an import cycle, and each
//! layer uses only the layers it may (read on the source text, naming the file and line).
//!
//! The crates: `celgate-cel` (the Kubernetes CEL language) <- `celgate-engine` (the pure
//! admission engine) <- `celgate` (sources, server, certificates, reports, CLI). The
//! compiler enforces that direction between crates; this file checks what it cannot: the
//! dependency trees and the order inside each crate.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Crates that do I/O, serve or parse a command line: none may be in an engine crate's
/// normal dependency tree.
const IO_CRATES: &[&str] = &[
    "tokio",
    "tokio-rustls",
    "kube",
    "kube-client",
    "kube-runtime",
    "k8s-openapi",
    "axum",
    "hyper",
    "hyper-util",
    "rustls",
    "prometheus",
    "clap",
    "tracing-subscriber",
    "rcgen",
];

/// Standard-library I/O the engine crates never do themselves: what may wait is passed in.
const HIDDEN_IO: &[&str] = &["std::fs", "std::process", "std::env", "std::net::Tcp"];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A crate's source folder, by package name.
fn crate_src(package: &str) -> PathBuf {
    match package {
        "celgate" => root().join("src"),
        other => root().join("crates").join(other).join("src"),
    }
}

/// The packages in `package`'s normal dependency tree (`cargo tree -e normal`).
fn normal_dependencies(package: &str) -> BTreeSet<String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args([
            "tree",
            "--offline",
            "-e",
            "normal",
            "--prefix",
            "none",
            "--format",
            "{p}",
            "-p",
            package,
        ])
        .current_dir(root())
        .output()
        .expect("cargo runs");
    assert!(
        out.status.success(),
        "cargo tree -p {package}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_string)
        .collect()
}

#[test]
fn engine_crates_depend_on_no_io_crate() {
    for package in ["celgate-cel", "celgate-engine"] {
        let deps = normal_dependencies(package);
        assert!(deps.contains(package), "{package}'s tree: {deps:?}");
        let io: Vec<&&str> = IO_CRATES.iter().filter(|c| deps.contains(**c)).collect();
        assert!(io.is_empty(), "{package} depends on {io:?}");
    }
    // The check sees an I/O crate where there is one.
    let outer = normal_dependencies("celgate");
    assert!(
        outer.contains("tokio") && outer.contains("kube"),
        "{outer:?}"
    );
}

/// A rule: files of `module` (a top-level module of `package`) may not name `modules`
/// (`crate::NAME`) or `paths` (an external crate or a std path).
struct Rule {
    package: &'static str,
    module: &'static str,
    modules: &'static [&'static str],
    paths: &'static [&'static str],
}

const ENGINE: &str = "celgate-engine";
const CEL: &str = "celgate-cel";
const OUTER: &str = "celgate";

fn rules() -> Vec<Rule> {
    let rule = |package, module, modules, paths| Rule {
        package,
        module,
        modules,
        paths,
    };
    let cel_modules = top_level_modules(CEL);
    let mut rules = vec![
        // Inside the engine, one way: model <- matching <- schemas <- mutating <- policy <-
        // admission <- review; CRD rules beside them; lint and scan on top.
        rule(
            ENGINE,
            "model",
            &[
                "matching",
                "schemas",
                "mutating",
                "policy",
                "admission",
                "review",
                "crd",
                "lint",
                "scan",
            ],
            &["celgate_cel"],
        ),
        rule(
            ENGINE,
            "matching",
            &[
                "schemas",
                "mutating",
                "policy",
                "admission",
                "review",
                "crd",
                "lint",
                "scan",
            ],
            &[],
        ),
        // The kinds' schemas (built-in and CRDs), then the patches typed by them: below the
        // policies that compile mutations and the admission that applies them.
        rule(
            ENGINE,
            "schemas",
            &["mutating", "policy", "admission", "review", "lint", "scan"],
            &[],
        ),
        rule(
            ENGINE,
            "mutating",
            &["policy", "admission", "review", "lint", "scan"],
            &[],
        ),
        rule(
            ENGINE,
            "policy",
            &["admission", "review", "crd", "lint", "scan"],
            &[],
        ),
        rule(ENGINE, "admission", &["review", "crd", "lint", "scan"], &[]),
        rule(ENGINE, "review", &["crd", "lint", "scan"], &[]),
        rule(
            ENGINE,
            "crd",
            &[
                "model",
                "matching",
                "policy",
                "admission",
                "review",
                "lint",
                "scan",
            ],
            &[],
        ),
        rule(ENGINE, "lint", &["admission", "review", "scan"], &[]),
        // Outside the engine: the server knows no source, no certificate controller; the
        // certificate controller hands the server PEM through the app.
        rule(
            OUTER,
            "server",
            &["source", "certs", "app", "testing"],
            &["kube", "k8s_openapi"],
        ),
        rule(OUTER, "certs", &["source", "server", "app", "testing"], &[]),
        rule(OUTER, "source", &["server", "certs", "app", "testing"], &[]),
        rule(
            OUTER,
            "testing",
            &["server", "certs", "app"],
            &["tokio", "kube", "axum", "hyper"],
        ),
        rule(
            OUTER,
            "x509",
            &["source", "server", "certs", "app", "testing"],
            &[],
        ),
    ];
    // Kubernetes' and Go's conventions are a leaf of the CEL crate.
    let others: Vec<&'static str> = cel_modules
        .into_iter()
        .filter(|m| *m != "apimachinery")
        .map(|m| &*Box::leak(m.into_boxed_str()))
        .collect();
    rules.push(rule(
        CEL,
        "apimachinery",
        Box::leak(others.into_boxed_slice()),
        &[],
    ));
    // No hidden I/O in either engine crate.
    for package in [CEL, ENGINE] {
        for m in top_level_modules(package) {
            rules.push(rule(package, Box::leak(m.into_boxed_str()), &[], HIDDEN_IO));
        }
    }
    rules
}

/// The top-level modules of a crate: `src/NAME.rs` and `src/NAME/` (the crate root aside).
fn top_level_modules(package: &str) -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir(crate_src(package))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter_map(|p| {
            let name = p.file_name()?.to_str()?.to_string();
            if p.is_dir() {
                Some(name)
            } else {
                let stem = name.strip_suffix(".rs")?;
                (stem != "lib" && stem != "main").then(|| stem.to_string())
            }
        })
        .collect();
    out.sort();
    out.dedup();
    out
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

/// The files of a top-level module.
fn module_files(package: &str, module: &str) -> Vec<PathBuf> {
    let src = crate_src(package);
    let mut files = Vec::new();
    rust_files(&src.join(module), &mut files);
    rust_files(&src.join(format!("{module}.rs")), &mut files);
    files
}

/// The lines of `text` that are code outside a unit-test module (comments skipped): what a
/// build of the crate itself compiles.
fn code_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    let mut lines = text.lines().enumerate().peekable();
    let mut out = Vec::new();
    while let Some((i, l)) = lines.next() {
        if l.trim() == "#[cfg(test)]"
            && lines
                .peek()
                .is_some_and(|(_, n)| n.trim_start().starts_with("mod tests"))
        {
            break;
        }
        if !l.trim_start().starts_with("//") {
            out.push((i, l));
        }
    }
    out.into_iter()
}

/// The uses of `rule`'s forbidden modules and paths in `text`, as `line: text`.
fn violations(rule: &Rule, text: &str) -> Vec<String> {
    let modules = rule.modules.iter().map(|m| format!(r"\bcrate::{m}\b"));
    // A path not preceded by `::` (so `crate::source::kube::` is not the crate `kube`); a
    // crate's name is followed by `::`, a std path is a prefix (`std::net::Tcp`).
    let paths = rule.paths.iter().map(|c| {
        let tail = if c.contains("::") { "" } else { "::" };
        format!(r"(^|[^:\w]){}{tail}", regex::escape(c))
    });
    let patterns: Vec<regex::Regex> = modules
        .chain(paths)
        .map(|p| regex::Regex::new(&p).unwrap())
        .collect();
    code_lines(text)
        .filter(|(_, l)| patterns.iter().any(|p| p.is_match(l)))
        .map(|(i, l)| format!("{}: {}", i + 1, l.trim()))
        .collect()
}

#[test]
fn each_layer_uses_only_the_layers_it_may() {
    let mut found = Vec::new();
    let mut checked = 0;
    for rule in rules() {
        for f in module_files(rule.package, rule.module) {
            checked += 1;
            let text = std::fs::read_to_string(&f).unwrap();
            for v in violations(&rule, &text) {
                found.push(format!("{} ({}): {v}", f.display(), rule.module));
            }
        }
    }
    assert!(
        checked > 100,
        "only {checked} files checked: are the crates there?"
    );
    assert!(found.is_empty(), "layer violations:\n{}", found.join("\n"));
}

/// Which top-level modules each top-level module of `package` names (`crate::NAME`, or
/// `super::NAME` in a file directly under the crate root), outside unit tests.
fn module_graph(package: &str) -> BTreeMap<String, BTreeSet<String>> {
    let modules = top_level_modules(package);
    let src = crate_src(package);
    let named = regex::Regex::new(r"\bcrate::(\w+)").unwrap();
    let sibling = regex::Regex::new(r"(?:^|[^:\w])super::(\w+)").unwrap();
    let mut graph = BTreeMap::new();
    for m in &modules {
        let mut uses = BTreeSet::new();
        for f in module_files(package, m) {
            let at_root = f.parent() == Some(src.as_path());
            let text = std::fs::read_to_string(&f).unwrap();
            for (_, l) in code_lines(&text) {
                let mut found: Vec<&str> = named
                    .captures_iter(l)
                    .map(|c| c.get(1).unwrap().as_str())
                    .collect();
                if at_root {
                    found.extend(sibling.captures_iter(l).map(|c| c.get(1).unwrap().as_str()));
                }
                uses.extend(
                    found
                        .into_iter()
                        .filter(|u| *u != m && modules.iter().any(|x| x == u))
                        .map(str::to_string),
                );
            }
        }
        graph.insert(m.clone(), uses);
    }
    graph
}

/// A cycle of `graph`, if it has one.
fn find_cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|p| p == node) {
            let mut cycle = path[at..].to_vec();
            cycle.push(node.to_string());
            return Some(cycle);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_string());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(c) = visit(next, graph, path, done) {
                return Some(c);
            }
        }
        path.pop();
        done.insert(node.to_string());
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|n| visit(n, graph, &mut Vec::new(), &mut done))
}

#[test]
fn no_crate_has_an_import_cycle_between_its_modules() {
    for package in [CEL, ENGINE, OUTER] {
        let graph = module_graph(package);
        assert!(graph.len() > 4, "{package}: {graph:?}");
        if let Some(cycle) = find_cycle(&graph) {
            panic!("{package}: import cycle {}", cycle.join(" -> "));
        }
    }
}

#[test]
fn the_checks_see_a_use_and_skip_comments_nested_paths_and_tests() {
    let rule = Rule {
        package: OUTER,
        module: "server",
        modules: &["source"],
        paths: &["kube", "std::fs"],
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
    assert_eq!(violations(&rule, "let t = std::fs::read(p);").len(), 1);
    assert!(violations(&rule, "//! filled by [`crate::source`]").is_empty());
    assert!(violations(&rule, "use crate::sources_of_truth::X;").is_empty());
    assert!(violations(&rule, "use crate::other::kube::X;").is_empty());
    assert!(violations(&rule, "#[cfg(test)]\nmod tests {\n    use std::fs;\n}").is_empty());
    let graph: BTreeMap<String, BTreeSet<String>> = [
        ("a", vec!["b"]),
        ("b", vec!["c"]),
        ("c", vec!["a"]),
        ("d", vec![]),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.into_iter().map(str::to_string).collect()))
    .collect();
    assert_eq!(find_cycle(&graph).unwrap(), ["a", "b", "c", "a"]);
    let mut acyclic = graph.clone();
    acyclic.get_mut("c").unwrap().clear();
    assert_eq!(find_cycle(&acyclic), None);
}
