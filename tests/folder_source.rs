//! The policy folder of `celgate serve` never drops enforcement by accident: a change loads
//! only once the folder is quiet, a folder that binds no policy is refused (unless
//! `allow_empty`), a Kubernetes ConfigMap volume is read once per file and swapped
//! atomically, and a binding that names no policy is reported. Each test runs the real
//! server on ephemeral ports and watches its snapshot and metrics.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use celgate::app::{start, PolicySource, Running, ServeConfig};
use celgate::source::folder::FolderSource;
#[cfg(unix)]
use common::mkfifo;
use common::serve::metrics_text as metrics;
use common::temp_dir;

mod common;

/// A policy and its binding for each name, as one multi-document file: the text for a prefix
/// of `names` is a prefix of the text for `names`, cut at a `---` boundary.
fn policies(names: &[&str]) -> String {
    names
        .iter()
        .map(|n| {
            format!(
                r#"apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {{name: {n}}}
spec:
  matchConstraints:
    resourceRules: [{{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}}]
  validations: [{{expression: "object.metadata.name != '{n}'"}}]
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {{name: {n}}}
spec: {{policyName: {n}, validationActions: [Deny]}}
---
"#
            )
        })
        .collect()
}

/// The configuration of a server on `dir`; the folder is polled every 20 ms.
fn config(dir: &Path, settle: Duration, allow_empty: bool) -> ServeConfig {
    ServeConfig {
        poll: Duration::from_millis(20),
        ..common::serve::config(PolicySource::Folder(FolderSource {
            settle,
            allow_empty,
            ..FolderSource::new(dir)
        }))
    }
}

/// Starts the server on `dir`; the folder is polled every 20 ms.
async fn serve(dir: &Path, settle: Duration, allow_empty: bool) -> Running {
    start(config(dir, settle, allow_empty))
        .await
        .expect("server starts")
}

/// The names of the policies the server enforces.
fn names(r: &Running) -> Vec<String> {
    r.state
        .snapshot
        .load()
        .policies
        .iter()
        .map(|p| p.policy.name.clone())
        .collect()
}

fn ready(r: &Running) -> bool {
    r.state.ready.load(Ordering::Acquire)
}

/// Waits (10 s at most) until `done` holds.
async fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Samples the server's policy names every millisecond until stopped; returns every
/// distinct set seen.
fn monitor(
    r: &Running,
) -> (
    Arc<AtomicBool>,
    tokio::task::JoinHandle<BTreeSet<Vec<String>>>,
) {
    let stop = Arc::new(AtomicBool::new(false));
    let (state, flag) = (r.state.clone(), stop.clone());
    let task = tokio::spawn(async move {
        let mut seen = BTreeSet::new();
        loop {
            let names = state
                .snapshot
                .load()
                .policies
                .iter()
                .map(|p| p.policy.name.clone())
                .collect::<Vec<_>>();
            seen.insert(names);
            if flag.load(Ordering::Acquire) {
                return seen;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    });
    (stop, task)
}

const REFUSED_EMPTY: &str = "celgate_source_reload_refused_total{reason=\"empty\"}";

/// A file rewritten in two steps (cut at a `---` boundary, then completed within the settle
/// interval) is loaded only complete: no snapshot with fewer policies is ever served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_rewritten_in_two_steps_never_serves_the_shorter_file() {
    let dir = temp_dir("two-steps");
    let file = dir.join("policies.yaml");
    let all = ["a", "b", "c", "d"];
    let full = policies(&all);
    let cut = policies(&all[..2]);
    assert!(full.starts_with(&cut));
    std::fs::write(&file, &full).unwrap();
    let settle = Duration::from_millis(1500);
    let server = serve(&dir, settle, false).await;
    assert_eq!(names(&server), all);
    let first = server.state.snapshot.load_full();
    let (stop, seen) = monitor(&server);
    let began = Instant::now();
    std::fs::write(&file, &cut).unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    std::fs::write(&file, &full).unwrap();
    assert!(
        began.elapsed() < settle,
        "the machine stalled longer than the settle interval between the two writes: the test cannot conclude"
    );
    // The completed file is loaded (a new snapshot), once the folder has been quiet.
    wait_until("the folder is reloaded", || {
        !Arc::ptr_eq(&server.state.snapshot.load_full(), &first)
    })
    .await;
    let loaded = began.elapsed();
    stop.store(true, Ordering::Release);
    let seen = seen.await.unwrap();
    let expected: BTreeSet<Vec<String>> = [all.map(String::from).to_vec()].into();
    assert_eq!(seen, expected, "every snapshot served holds every policy");
    assert!(loaded >= settle, "loaded before the folder settled");
    server.shutdown().await;
}

/// Removing every file keeps the last snapshot, and the refusal is counted; putting a policy
/// back is loaded as usual.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn removing_every_file_keeps_the_last_snapshot() {
    let dir = temp_dir("remove-all");
    std::fs::write(dir.join("a.yaml"), policies(&["a"])).unwrap();
    std::fs::write(dir.join("b.yaml"), policies(&["b"])).unwrap();
    let server = serve(&dir, Duration::from_millis(100), false).await;
    assert_eq!(names(&server), ["a", "b"]);
    assert!(metrics(&server).contains(&format!("{REFUSED_EMPTY} 0")));
    std::fs::remove_file(dir.join("a.yaml")).unwrap();
    std::fs::remove_file(dir.join("b.yaml")).unwrap();
    wait_until("the empty folder is refused", || {
        metrics(&server).contains(&format!("{REFUSED_EMPTY} 1"))
    })
    .await;
    assert_eq!(names(&server), ["a", "b"], "the last good snapshot stays");
    assert!(ready(&server));
    // A folder whose bindings are all gone enforces nothing either.
    std::fs::write(
        dir.join("c.yaml"),
        policies(&["c"]).replace("kind: ValidatingAdmissionPolicyBinding", "kind: ConfigMap"),
    )
    .unwrap();
    wait_until("the unbound folder is refused", || {
        metrics(&server).contains(&format!("{REFUSED_EMPTY} 2"))
    })
    .await;
    assert_eq!(names(&server), ["a", "b"]);
    std::fs::write(dir.join("c.yaml"), policies(&["c"])).unwrap();
    wait_until("the new policy is loaded", || names(&server) == ["c"]).await;
    server.shutdown().await;
}

/// An empty folder at start: without `allow_empty` the service stays unready (and counts the
/// refusal) until a policy is bound; with it, the service is ready at once, and a reload to
/// an empty folder is accepted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_folder_takes_the_explicit_flag() {
    let dir = temp_dir("empty-start");
    let server = serve(&dir, Duration::from_millis(50), false).await;
    assert!(!ready(&server), "nothing to enforce: not ready");
    assert!(metrics(&server).contains(&format!("{REFUSED_EMPTY} 1")));
    std::fs::write(dir.join("a.yaml"), policies(&["a"])).unwrap();
    wait_until("ready once a policy is bound", || ready(&server)).await;
    assert_eq!(names(&server), ["a"]);
    server.shutdown().await;

    let dir = temp_dir("empty-allowed");
    let server = serve(&dir, Duration::from_millis(50), true).await;
    assert!(ready(&server), "an empty folder is accepted with the flag");
    assert!(names(&server).is_empty());
    std::fs::write(dir.join("a.yaml"), policies(&["a"])).unwrap();
    wait_until("the policy is loaded", || names(&server) == ["a"]).await;
    std::fs::remove_file(dir.join("a.yaml")).unwrap();
    wait_until("the empty folder is loaded", || names(&server).is_empty()).await;
    assert!(metrics(&server).contains(&format!("{REFUSED_EMPTY} 0")));
    server.shutdown().await;
}

/// The layout of a Kubernetes ConfigMap volume: the data in a hidden timestamped directory,
/// `..data` a symlink to it, each key a symlink into `..data`. Each file is loaded once, and
/// an update (a new directory, then `..data` swapped by rename) is loaded whole: no snapshot
/// mixes the old and new files.
#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_configmap_volume_is_read_once_and_swapped_atomically() {
    use std::os::unix::fs::symlink;
    let dir = temp_dir("configmap");
    let write_version = |stamp: &str, a: &str, b: &str| {
        let data = dir.join(stamp);
        std::fs::create_dir(&data).unwrap();
        std::fs::write(data.join("a.yaml"), policies(&[a])).unwrap();
        std::fs::write(data.join("b.yaml"), policies(&[b])).unwrap();
    };
    let old = "..2026_11_23_10_00_00.000000001";
    write_version(old, "a1", "b1");
    symlink(old, dir.join("..data")).unwrap();
    symlink("..data/a.yaml", dir.join("a.yaml")).unwrap();
    symlink("..data/b.yaml", dir.join("b.yaml")).unwrap();
    let server = serve(&dir, Duration::from_millis(100), false).await;
    assert_eq!(names(&server), ["a1", "b1"]);
    let bindings: Vec<usize> = server
        .state
        .snapshot
        .load()
        .policies
        .iter()
        .map(|p| p.bindings.len())
        .collect();
    assert_eq!(bindings, [1, 1], "each binding loaded once");
    assert!(metrics(&server).contains("celgate_bindings_loaded 2"));

    let (stop, seen) = monitor(&server);
    // What the kubelet does: the new version in a new directory, `..data` replaced by a
    // rename, the old directory removed.
    let new = "..2026_11_23_10_05_00.000000002";
    write_version(new, "a2", "b2");
    symlink(new, dir.join("..data_tmp")).unwrap();
    std::fs::rename(dir.join("..data_tmp"), dir.join("..data")).unwrap();
    std::fs::remove_dir_all(dir.join(old)).unwrap();
    wait_until("the new version is loaded", || {
        names(&server) == ["a2", "b2"]
    })
    .await;
    stop.store(true, Ordering::Release);
    let seen = seen.await.unwrap();
    let whole: BTreeSet<Vec<String>> = [
        vec!["a1".to_string(), "b1".to_string()],
        vec!["a2".to_string(), "b2".to_string()],
    ]
    .into();
    assert_eq!(
        seen, whole,
        "only the old or the new version is ever served"
    );
    assert!(metrics(&server).contains("celgate_bindings_loaded 2"));
    assert!(metrics(&server).contains("celgate_source_load_errors_total 0"));
    server.shutdown().await;
}

/// A binding that names no policy is reported in `celgate_config_problems` with the cluster
/// source's reason, and no longer once the policy is added.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dangling_binding_is_reported_until_its_policy_exists() {
    let dir = temp_dir("dangling");
    std::fs::write(dir.join("a.yaml"), policies(&["a"])).unwrap();
    let late = policies(&["late"]);
    let (policy, binding) = late.split_once("---\n").unwrap();
    std::fs::write(dir.join("late-binding.yaml"), binding).unwrap();
    let server = serve(&dir, Duration::from_millis(50), false).await;
    let problem = "celgate_config_problems{kind=\"ValidatingAdmissionPolicyBinding\",name=\"late\",reason=\"PolicyNotFound\"} 1";
    assert!(metrics(&server).contains(problem), "{}", metrics(&server));
    std::fs::write(dir.join("late-policy.yaml"), policy).unwrap();
    wait_until("the policy is loaded", || names(&server) == ["a", "late"]).await;
    let text = metrics(&server);
    assert!(!text.contains("name=\"late\""), "{text}");
    server.shutdown().await;
}

/// `celgate serve` itself on `dir` with `flags`: the status of `/readyz` on its metrics port.
fn binary_readyz(dir: &Path, flags: &[&str]) -> u16 {
    binary_start(dir, flags).0
}

/// `celgate serve` itself on `dir` with `flags`: the status of `/readyz` on its metrics port,
/// and the log lines up to the one that says it serves.
fn binary_start(dir: &Path, flags: &[&str]) -> (u16, Vec<String>) {
    use std::io::{BufRead, Read, Write};
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_celgate"))
        .args(["serve", "--self-signed", "--log-format", "json"])
        .args(["--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"])
        .arg("--policies")
        .arg(dir)
        .args(flags)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = std::io::BufReader::new(child.stderr.take().unwrap());
    // The "serving" line comes once the first load was tried.
    let mut metrics = None;
    let mut lines = Vec::new();
    for line in stderr.lines() {
        let line = line.unwrap();
        let log: serde_json::Value = serde_json::from_str(&line).unwrap();
        lines.push(line);
        if log["fields"]["message"] == "serving" {
            metrics = Some(log["fields"]["metrics"].as_str().unwrap().to_string());
            break;
        }
    }
    let metrics = metrics.expect("celgate serve serves");
    let mut tcp = std::net::TcpStream::connect(metrics.as_str()).unwrap();
    tcp.write_all(b"GET /readyz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut answer = String::new();
    tcp.read_to_string(&mut answer).unwrap();
    child.kill().unwrap();
    child.wait().unwrap();
    (answer[9..12].parse().unwrap(), lines)
}

/// A folder that does not load at start leaves the service unready, and the log says so,
/// not that a last good snapshot (there is none) stays.
#[test]
fn a_broken_folder_at_start_is_logged_as_not_ready() {
    let dir = temp_dir("broken-at-start");
    std::fs::write(dir.join("broken.yaml"), "kind: [unclosed\n").unwrap();
    let (status, lines) = binary_start(&dir, &[]);
    assert_eq!(status, 503);
    let text = lines.join("\n");
    assert!(text.contains("not ready until it loads"), "{text}");
    assert!(!text.contains("last good snapshot"), "{text}");
}

/// A misspelled field is refused at load as `kubectl apply` refuses it (strict field
/// validation): the folder does not load; `--field-validation warn` loads it and logs the field.
#[test]
fn unknown_fields_refuse_the_folder_unless_told_otherwise() {
    let dir = temp_dir("strict-fields");
    let typo = policies(&["a"]).replacen("spec:\n", "spec:\n  failurPolicy: Fail\n", 1);
    assert!(typo.contains("failurPolicy"), "{typo}");
    std::fs::write(dir.join("a.yaml"), typo).unwrap();
    let (status, lines) = binary_start(&dir, &[]);
    assert_eq!(status, 503);
    let text = lines.join("\n");
    assert!(
        text.contains(r#"strict decoding error: unknown field \"spec.failurPolicy\""#),
        "{text}"
    );
    let (status, lines) = binary_start(&dir, &["--field-validation", "warn"]);
    assert_eq!(status, 200);
    let text = lines.join("\n");
    assert!(
        text.contains(r#"unknown field \"spec.failurPolicy\""#),
        "{text}"
    );
}

/// The command line: `--allow-empty-policies` makes an empty folder ready; a bad
/// `--reload-settle` is a usage error; the settle interval defaults to 2 s.
#[test]
fn serve_flags() {
    let dir = temp_dir("flags");
    assert_eq!(binary_readyz(&dir, &[]), 503);
    assert_eq!(
        binary_readyz(
            &dir,
            &["--allow-empty-policies", "--reload-settle", "500ms"]
        ),
        200
    );
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_celgate"))
        .args(["serve", "--self-signed", "--reload-settle", "soon"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--reload-settle \"soon\""));
    assert_eq!(FolderSource::new(&dir).settle, Duration::from_secs(2));
}

/// A policy the API server would refuse to create (an expression that does not compile in
/// the creation-time environment, `kubectl apply` says) is refused in the folder too: its last
/// good version stays enforced, the refusal is counted and reported, and a later fix loads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_the_api_server_would_refuse_keeps_its_last_good_version() {
    let dir = temp_dir("refused");
    let good = policies(&["a"]);
    std::fs::write(dir.join("a.yaml"), &good).unwrap();
    let server = serve(&dir, Duration::from_millis(50), false).await;
    assert_eq!(names(&server), ["a"]);
    let compiled = |r: &Running| {
        r.state.snapshot.load().policies[0].policy.validations[0]
            .program
            .is_ok()
    };
    assert!(compiled(&server));
    let refused = "celgate_source_reload_refused_total{reason=\"invalid_policy\"}";
    assert!(metrics(&server).contains(&format!("{refused} 0")));

    let bad = good.replace("object.metadata.name != 'a'", "request.namex != 'a'");
    std::fs::write(dir.join("a.yaml"), &bad).unwrap();
    let problem = "celgate_config_problems{kind=\"ValidatingAdmissionPolicy\",name=\"a\",reason=\"InvalidPolicy\"} 1";
    wait_until("the refusal is reported", || {
        metrics(&server).contains(problem)
    })
    .await;
    assert!(metrics(&server).contains(&format!("{refused} 1")));
    // The last good version is still the one enforced (it compiles; the refused one does not).
    assert_eq!(names(&server), ["a"]);
    assert!(compiled(&server));

    // Fixed: loaded, and the problem goes away.
    std::fs::write(
        dir.join("a.yaml"),
        good.replace("object.metadata.name != 'a'", "request.name != 'a'"),
    )
    .unwrap();
    wait_until("the fix is loaded", || !metrics(&server).contains(problem)).await;
    assert_eq!(names(&server), ["a"]);
    server.shutdown().await;
}

/// The problem gauge's line for a file of the folder.
fn file_problem(file: &str, reason: &str) -> String {
    format!("celgate_config_problems{{kind=\"File\",name=\"{file}\",reason=\"{reason}\"}} 1")
}

/// Only regular files are read, each up to the size cap: a symlink to `/dev/zero` (which
/// would grow memory without bound), a FIFO (whose open would block the load forever) and an
/// oversized file are skipped and reported (a warning and the problem gauge, naming each),
/// the rest of the folder loads, and later changes still load.
#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn special_and_oversized_files_are_skipped_and_reported() {
    let dir = temp_dir("special");
    std::fs::write(dir.join("a.yaml"), policies(&["a"])).unwrap();
    std::os::unix::fs::symlink("/dev/zero", dir.join("zero.yaml")).unwrap();
    mkfifo(&dir.join("fifo.yaml"));
    let big = format!("{}# {}\n", policies(&["big"]), "x".repeat(8192));
    std::fs::write(dir.join("big.yaml"), big).unwrap();
    let cfg = ServeConfig {
        source: PolicySource::Folder(FolderSource {
            max_file_bytes: 4096,
            settle: Duration::from_millis(50),
            ..FolderSource::new(&dir)
        }),
        ..config(&dir, Duration::from_millis(50), false)
    };
    let server = tokio::time::timeout(Duration::from_secs(60), start(cfg))
        .await
        .expect("the first load completes")
        .expect("server starts");
    assert!(ready(&server));
    assert_eq!(names(&server), ["a"]);
    let text = metrics(&server);
    for file in ["big.yaml", "fifo.yaml", "zero.yaml"] {
        assert!(
            text.contains(&file_problem(file, "FileSkipped")),
            "{file}: {text}"
        );
    }
    std::fs::write(dir.join("b.yaml"), policies(&["b"])).unwrap();
    wait_until("a new file loads", || names(&server) == ["a", "b"]).await;
    // The skipped files are still reported; gone once removed.
    assert!(metrics(&server).contains(&file_problem("fifo.yaml", "FileSkipped")));
    std::fs::remove_file(dir.join("fifo.yaml")).unwrap();
    wait_until("the FIFO is no longer reported", || {
        !metrics(&server).contains("fifo.yaml")
    })
    .await;
    server.shutdown().await;
}

/// A slow writer: a binding file truncated in place and rewritten after a pause longer than
/// the settle interval. The emptied file keeps its last good objects (the binding stays
/// enforced) and is reported; written back, it loads as usual; deleted, its objects go.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_emptied_file_keeps_its_objects_until_it_is_deleted() {
    let dir = temp_dir("emptied");
    std::fs::write(dir.join("a.yaml"), policies(&["a"])).unwrap();
    let b = policies(&["b"]);
    std::fs::write(dir.join("b.yaml"), &b).unwrap();
    let server = serve(&dir, Duration::from_millis(50), false).await;
    assert_eq!(names(&server), ["a", "b"]);
    let bindings = |r: &Running| -> Vec<usize> {
        r.state
            .snapshot
            .load()
            .policies
            .iter()
            .map(|p| p.bindings.len())
            .collect()
    };
    let emptied = file_problem("b.yaml", "FileEmptied");
    for blank in ["", "\n  \n", "# being rewritten\n---\n"] {
        std::fs::write(dir.join("b.yaml"), blank).unwrap();
        wait_until("the emptied file is reported", || {
            metrics(&server).contains(&emptied)
        })
        .await;
        assert_eq!(names(&server), ["a", "b"], "{blank:?}");
        assert_eq!(bindings(&server), [1, 1], "the binding is still enforced");
        std::fs::write(dir.join("b.yaml"), &b).unwrap();
        wait_until("the rewritten file loads", || {
            !metrics(&server).contains("b.yaml")
        })
        .await;
        assert_eq!(names(&server), ["a", "b"]);
    }
    // Emptied, then deleted: its objects go.
    std::fs::write(dir.join("b.yaml"), "").unwrap();
    wait_until("the emptied file is reported", || {
        metrics(&server).contains(&emptied)
    })
    .await;
    std::fs::remove_file(dir.join("b.yaml")).unwrap();
    wait_until("the deleted file's objects go", || names(&server) == ["a"]).await;
    assert!(!metrics(&server).contains("b.yaml"));
    server.shutdown().await;
}
