//! `cargo run --release --example scan-bench -- [N]`: the background scan of N Pods (default
//! 10,000) against one policy with the 10 validations of `../shared/bench/pss-validations.yaml`,
//! on one thread, as `celgate scan` evaluates them (each Pod as its dry-run CREATE, results
//! kept for the reports), then the wgpolicyk8s.io reports built from the results. Prints
//! objects per second of the scan, the time to build the reports, and the process's peak
//! resident memory (Linux `VmHWM`).
//!
//! The Pods are `../shared/bench/pod.json` (4.4 KB, every validation holds) with their own
//! name, uid and one of 100 namespaces; every tenth is made privileged, so that a tenth of the
//! objects fail one validation and carry a message. `$CELGATE_SHARED` replaces `../shared`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use celgate::scan::report::{reports, ReportApi};
use celgate::scan::Scanner;
use celgate::source::folder::Loaded;
use serde_json::{json, Value as Json};

fn shared(path: &str) -> PathBuf {
    std::env::var_os("CELGATE_SHARED")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared"))
        .join(path)
}

fn loaded(object: Json) -> Loaded {
    Loaded {
        file: PathBuf::from("scan-bench"),
        document: 1,
        field_errors: Vec::new(),
        object,
    }
}

/// The peak resident set size in KiB (`VmHWM`), where /proc tells it.
fn peak_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()
}

fn run(n: usize) -> Result<(), String> {
    let read = |p: &str| {
        std::fs::read_to_string(shared(p)).map_err(|e| format!("{}: {e}", shared(p).display()))
    };
    let validations: Json = serde_yaml_ng::from_str::<Json>(&read("bench/pss-validations.yaml")?)
        .map_err(|e| format!("pss-validations.yaml: {e}"))?["validations"]
        .clone();
    let pod: Json =
        serde_json::from_str(&read("bench/pod.json")?).map_err(|e| format!("pod.json: {e}"))?;
    let policy = json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": "pss"},
        "spec": {
            "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"], "resources": ["pods"]}]},
            "validations": validations,
        }
    });
    let binding = json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": "pss"},
        "spec": {"policyName": "pss", "validationActions": ["Audit"]}
    });
    let snapshot = celgate::source::snapshot(
        vec![loaded(policy), loaded(binding)],
        celgate::cel::NEWEST_MINOR,
        true,
    )
    .map_err(|e| e.to_string())?;
    let scanner = Scanner::new(&snapshot, Vec::new());
    let started = Instant::now();
    let mut results = Vec::with_capacity(n);
    for i in 0..n {
        // Each Pod is built as the list of a cluster would hand it over, one at a time.
        let mut p = pod.clone();
        p["metadata"]["name"] = json!(format!("pod-{i:05}"));
        p["metadata"]["namespace"] = json!(format!("ns-{:02}", i % 100));
        p["metadata"]["uid"] = json!(format!("00000000-0000-0000-0000-{i:012}"));
        if i % 10 == 0 {
            p["spec"]["containers"][0]["securityContext"]["privileged"] = json!(true);
        }
        results.push(scanner.scan(p).map_err(|e| format!("pod {i}: {e}"))?);
    }
    let scan = started.elapsed();
    let scan_peak = peak_rss_kib();
    let started = Instant::now();
    // Built and dropped one at a time, as `celgate scan -o yaml` writes them.
    let built = reports(&snapshot, &results, ReportApi::WgPolicy, 0).count();
    let building = started.elapsed();
    let summary = celgate::scan::report::summary(&results);
    println!(
        "{n} pods scanned in {:.3} s: {:.0} objects/s (one thread)",
        scan.as_secs_f64(),
        n as f64 / scan.as_secs_f64()
    );
    println!(
        "results: {} pass, {} fail, {} error, {} skip; {} reports built in {:.3} s",
        summary.pass,
        summary.fail,
        summary.error,
        summary.skip,
        built,
        building.as_secs_f64()
    );
    match (scan_peak, peak_rss_kib()) {
        (Some(s), Some(k)) => println!(
            "peak resident memory: {:.1} MiB after the scan, {:.1} MiB with the reports built",
            s as f64 / 1024.0,
            k as f64 / 1024.0
        ),
        _ => println!("peak resident memory: unknown (no /proc/self/status)"),
    }
    Ok(())
}

fn main() -> ExitCode {
    let n = match std::env::args().nth(1).map(|a| a.parse::<usize>()) {
        None => 10_000,
        Some(Ok(n)) if n > 0 => n,
        Some(_) => {
            eprintln!("usage: scan-bench [N > 0]");
            return ExitCode::from(2);
        }
    };
    // Evaluation recurses once per nesting level: a stack that does not depend on the
    // platform's default, as `celgate scan` has.
    let worker = std::thread::Builder::new()
        .stack_size(64 << 20)
        .spawn(move || run(n));
    match worker.map(|h| h.join()) {
        Ok(Ok(Ok(()))) => ExitCode::SUCCESS,
        Ok(Ok(Err(e))) => {
            eprintln!("scan-bench: {e}");
            ExitCode::FAILURE
        }
        _ => {
            eprintln!("scan-bench: the scan thread failed");
            ExitCode::FAILURE
        }
    }
}
