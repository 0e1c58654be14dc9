//! The command line as CI and shells use it, through the real binary: `-o` on the commands
//! that print, `eval --fail-on`'s exit codes, `serve` refusing to guess a policy folder,
//! summaries that count what they say, shell completions and man pages generated from the
//! clap tree, and the published JSON Schemas kept equal to what the code writes.

use common::cli::{celgate_in as celgate, celgate_within};
use common::{repo, temp_dir};

mod common;

/// A Pod policy whose binding has `actions` (`Deny` or `Warn`), and a Pod that fails it.
fn no_latest(dir: &std::path::Path, actions: &str) {
    std::fs::create_dir_all(dir.join("policies")).unwrap();
    std::fs::write(
        dir.join("policies/p.yaml"),
        format!(
            r#"apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {{name: no-latest}}
spec:
  matchConstraints:
    resourceRules: [{{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}}]
  validations:
  - expression: "object.spec.containers.all(c, !c.image.endsWith(':latest'))"
    message: no latest images
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {{name: no-latest}}
spec: {{policyName: no-latest, validationActions: [{actions}]}}
"#
        ),
    )
    .unwrap();
    std::fs::write(
        dir.join("latest.yaml"),
        "apiVersion: v1\nkind: Pod\nmetadata: {name: a, namespace: default}\nspec: {containers: [{name: c, image: 'nginx:latest'}]}\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("pinned.yaml"),
        "apiVersion: v1\nkind: Pod\nmetadata: {name: b, namespace: default}\nspec: {containers: [{name: c, image: 'nginx:1.27'}]}\n",
    )
    .unwrap();
}

/// `eval --fail-on never|deny|warn`: exit 0 whatever the decision by default (as before the
/// flag), 1 on a denial with `deny`, 1 on a denial or warnings with `warn`.
#[test]
fn eval_fails_on_what_fail_on_names() {
    for (actions, object, expected) in [
        // fail-on: never, deny, warn.
        ("Deny", "latest.yaml", [0, 1, 1]),
        ("Warn", "latest.yaml", [0, 0, 1]),
        ("Deny", "pinned.yaml", [0, 0, 0]),
        ("Warn", "pinned.yaml", [0, 0, 0]),
    ] {
        let dir = temp_dir(&format!("fail-on-{actions}-{object}"));
        no_latest(&dir, actions);
        let base = ["eval", "--policies", "policies", "--request", object];
        let (code, out, err) = celgate(&base, &dir, "");
        assert_eq!(code, expected[0], "{actions} {object} default: {err}");
        let answer: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(answer["kind"], "AdmissionReview");
        for (when, code_wanted) in ["never", "deny", "warn"].into_iter().zip(expected) {
            let (code, _, err) = celgate(&[&base[..], &["--fail-on", when]].concat(), &dir, "");
            assert_eq!(
                code, code_wanted,
                "{actions} {object} --fail-on {when}: {err}"
            );
        }
    }
    let dir = temp_dir("fail-on-bad");
    let (code, _, err) = celgate(
        &[
            "eval",
            "--policies",
            ".",
            "--request",
            "-",
            "--fail-on",
            "sometimes",
        ],
        &dir,
        "",
    );
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("[possible values: never, deny, warn]"),
        "{err}"
    );
}

/// `-o yaml` on the commands that printed only JSON: the same document.
#[test]
fn eval_and_expr_print_yaml_on_request() {
    let dir = temp_dir("output-yaml");
    no_latest(&dir, "Deny");
    let base = ["eval", "--policies", "policies", "--request", "latest.yaml"];
    let (_, json, err) = celgate(&base, &dir, "");
    let (code, yaml, _) = celgate(&[&base[..], &["-o", "yaml"]].concat(), &dir, "");
    assert_eq!(code, 0, "{err}");
    let json: serde_json::Value = serde_json::from_str(&json).unwrap();
    let yaml: serde_json::Value = serde_yaml_ng::from_str(&yaml).unwrap();
    assert_eq!(json, yaml);
    assert_eq!(yaml["response"]["allowed"], false);

    let (code, out, err) = celgate(&["expr", "-o", "yaml", "{'a': [1, 2]}"], &dir, "");
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "a:\n- 1\n- 2\n");
    let (code, out, _) = celgate(&["expr", "--output", "json", "[1]"], &dir, "");
    assert_eq!((code, out.as_str()), (0, "[\n  1\n]\n"));
}

/// `serve` in folder mode without `--policies` does not read a folder relative to wherever
/// it was started: exit 2, saying what to pass.
#[test]
fn serve_without_policies_refuses_with_a_hint() {
    let dir = temp_dir("serve-no-policies");
    let (code, out, err) = celgate_within(
        &[
            "serve",
            "--self-signed",
            "--listen",
            "127.0.0.1:0",
            "--metrics-listen",
            "off",
        ],
        &dir,
    );
    assert_eq!(code, 2, "{err}");
    assert!(out.is_empty(), "{out}");
    assert!(
        err.contains("needs --policies DIR") && err.contains("--policies examples/policies"),
        "{err}"
    );
}

/// The scan summary counts objects and results apart, each with its own noun and plural.
#[test]
fn scan_summary_counts_objects_and_results() {
    let dir = temp_dir("scan-counts");
    no_latest(&dir, "Deny");
    std::fs::create_dir_all(dir.join("one")).unwrap();
    std::fs::copy(dir.join("pinned.yaml"), dir.join("one/pod.yaml")).unwrap();
    let (code, out, err) = celgate(
        &["scan", "--policies", "policies", "--objects", "one"],
        &dir,
        "",
    );
    assert_eq!(code, 0, "{err}");
    assert!(
        out.ends_with(
            "no violations\n1 object scanned, 1 result: 1 pass, 0 fail, 0 error, 0 skip\n"
        ),
        "{out}"
    );
    // Two results for one object: the examples' pod policies both match a Pod.
    let (code, out, err) = celgate(
        &[
            "scan",
            "--policies",
            "examples/policies",
            "--objects",
            "examples/pod.yaml",
        ],
        &repo(),
        "",
    );
    assert!(code == 0 || code == 1, "{err}");
    let last = out.lines().last().unwrap();
    assert!(last.starts_with("1 object scanned, "), "{out}");
    assert!(
        !last.contains(" 1 results") && last.contains(" results: "),
        "{out}"
    );
}

/// The subcommands `celgate [CMD] --help` lists under `Commands:` (clap's own `help` left
/// out), read from the binary so that a new command is checked without editing this test.
fn subcommands(path: &[&str]) -> Vec<String> {
    let dir = temp_dir("help");
    let (code, out, err) = celgate(&[path, &["--help"]].concat(), &dir, "");
    assert_eq!(code, 0, "{err}");
    let Some((_, listed)) = out.split_once("Commands:\n") else {
        return Vec::new();
    };
    listed
        .lines()
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(str::to_string)
        .collect()
}

/// Every command and nested command, as `["crd", "check"]`.
fn command_paths() -> Vec<Vec<String>> {
    let mut paths = Vec::new();
    for top in subcommands(&[]) {
        let nested = subcommands(&[top.as_str()]);
        paths.push(vec![top.clone()]);
        paths.extend(nested.into_iter().map(|sub| vec![top.clone(), sub]));
    }
    assert!(paths.len() > 10, "{paths:?}");
    paths
}

/// `celgate completion SHELL` prints a script naming every command and nested command; bash
/// accepts the bash script (`bash -n`) where bash is installed.
#[test]
fn completion_scripts_cover_every_command() {
    let dir = temp_dir("completion");
    let paths = command_paths();
    for shell in ["bash", "zsh", "fish", "powershell", "elvish"] {
        let (code, script, err) = celgate(&["completion", shell], &dir, "");
        assert_eq!(code, 0, "{shell}: {err}");
        for path in &paths {
            let name = path.last().unwrap();
            assert!(script.contains(name.as_str()), "{shell}: no {path:?}");
        }
        // A flag of a nested command, and a new flag (fish names them without dashes).
        assert!(script.contains("crds"), "{shell}");
        assert!(script.contains("fail-on"), "{shell}");
        if shell == "bash" {
            let file = dir.join("celgate.bash");
            std::fs::write(&file, &script).unwrap();
            match std::process::Command::new("bash")
                .arg("-n")
                .arg(&file)
                .output()
            {
                Ok(out) => assert!(
                    out.status.success(),
                    "bash -n: {}",
                    String::from_utf8_lossy(&out.stderr)
                ),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => panic!("bash: {e}"),
            }
        }
    }
    let (code, _, err) = celgate(&["completion", "tcsh"], &dir, "");
    assert_eq!(code, 2, "{err}");
}

/// `celgate man` prints celgate.1, which lists every command; `--out DIR` writes it and one
/// page per command and nested command, each with its own flags.
#[test]
fn man_pages_cover_every_command() {
    let dir = temp_dir("man");
    let (code, page, err) = celgate(&["man"], &dir, "");
    assert_eq!(code, 0, "{err}");
    assert!(page.contains(".TH celgate 1"), "{page}");
    let paths = command_paths();
    for path in paths.iter().filter(|p| p.len() == 1) {
        // roff escapes every `-`.
        let name = format!("celgate-{}(1)", path[0]).replace('-', "\\-");
        assert!(page.contains(&name), "{path:?}");
    }
    let (code, out, err) = celgate(&["man", "--out", "pages"], &dir, "");
    assert_eq!((code, out.as_str()), (0, ""), "{err}");
    assert!(dir.join("pages/celgate.1").is_file());
    for path in &paths {
        let file = dir.join(format!("pages/celgate-{}.1", path.join("-")));
        let text = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{file:?}: {e}"));
        assert!(text.contains(".SH SYNOPSIS"), "{file:?}");
    }
    let eval = std::fs::read_to_string(dir.join("pages/celgate-eval.1")).unwrap();
    assert!(eval.contains("fail\\-on"), "{eval}");
    // A folder that cannot be made: exit 1, naming it.
    std::fs::write(dir.join("file"), "").unwrap();
    let (code, _, err) = celgate(&["man", "--out", "file/pages"], &dir, "");
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("cannot write the man pages into file/pages"),
        "{err}"
    );
}
