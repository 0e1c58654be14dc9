//! The `celgate` command line.

#![deny(unsafe_code)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use celgate::app::{CertSource, PolicySource, ServeConfig, ServeError};
use celgate::server::Limits;
use celgate::source::kube::authorizer::SarOptions;
use celgate::source::kube::lease::LeaseOptions;
use celgate::source::kube::{self, KubeOptions};
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use serde_json::Value as Json;

use celgate::cel::meter::Meter;
use std::sync::Arc;

use celgate::cel::k8s::authz::{Attributes, AuthorizeError, AuthorizerValue, Decision, Verdict};
use celgate::cel::vap::{request_resource_attributes, vap_env, Decls};
use celgate::cel::{Type, Value, NEWEST_MINOR, PER_CALL_LIMIT};

#[derive(Parser)]
#[command(
    name = "celgate",
    version,
    about = "Kubernetes ValidatingAdmissionPolicy, enforced by a webhook"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum SourceKind {
    Folder,
    Kubernetes,
}

/// How `celgate serve` answers.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
enum ServeMode {
    /// The verdict: denials, warnings and audit annotations.
    Enforce,
    /// Always allowed, without warnings or audit annotations; results are only recorded
    /// (metrics, logs).
    Observe,
}

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

/// When text logs are coloured.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
enum LogColor {
    /// When standard error is a terminal.
    Auto,
    Always,
    Never,
}

// Parsed once at start: the size of the largest variant does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand)]
enum Command {
    /// Run the webhook: HTTPS on --listen (POST /validate, /healthz, /readyz) and plain HTTP
    /// metrics on --metrics-listen, enforcing the policies of a folder that is watched for
    /// changes, or (`--source kubernetes`) the cluster's own policies and bindings (or, with
    /// `--policies DIR`, a folder's, with the cluster's namespaces, params and authorizer).
    Serve {
        /// Where policies come from: a folder of manifests, or the cluster's API server.
        #[arg(long, value_enum, default_value = "folder")]
        source: SourceKind,
        /// `enforce`: answer with the verdict. `observe`: evaluate every policy as in enforce
        /// mode but always answer allowed, without warnings or audit annotations (for API
        /// servers that enforce the same policies in-tree), and record each result.
        #[arg(long, value_enum, default_value = "enforce")]
        mode: ServeMode,
        /// Log each failed or errored (policy, binding) result at info level (uid, resource,
        /// namespace, name, policy, binding, actions, result, message): one JSON object each
        /// with `--log-format json`. Always on in observe mode.
        #[arg(long)]
        log_results: bool,
        /// Folder of policies, bindings, params, namespaces and RBAC objects (`--source
        /// folder`; default: examples/policies). With `--source kubernetes`: take only the
        /// policies and bindings from this folder (watched and reloaded as in folder mode; its
        /// other objects are ignored with a warning) instead of the cluster's, whose own are
        /// not watched (the API server enforces them); namespaces, params, the authorizer and
        /// CRDs still come from the cluster. For policies the API server must not enforce
        /// (CEL newer than the cluster's, canaries); the CEL environment is then --k8s-version
        /// (default: the newest celgate knows), not the API server's.
        #[arg(long, value_name = "DIR")]
        policies: Option<PathBuf>,
        /// A change to the policy folder is loaded once no file changed for this long
        /// (`--source folder`, or `--policies`), so that a file rewritten in place is not read
        /// half-written.
        #[arg(long, value_name = "DURATION", default_value = "2s")]
        reload_settle: String,
        /// Accept a policy folder that binds no policy (`--source folder`, or `--policies`); without it such a
        /// folder is refused: at start celgate stays unready, later the last good snapshot stays.
        #[arg(long)]
        allow_empty_policies: bool,
        /// Refuse a request in a namespace the policy folder does not define with `namespaces
        /// "x" not found`, as `celgate eval` does (`--source folder`); without it such a
        /// namespace is served as a bare one (its name and `kubernetes.io/metadata.name` label).
        #[arg(long)]
        strict_namespaces: bool,
        /// Largest file read from the policy folder; a larger one, or one that is not a regular file (a FIFO,
        /// a device), is skipped, logged and counted in
        /// celgate_config_problems (kind File); the objects it last gave stay served.
        #[arg(long, value_name = "BYTES", default_value_t = celgate::source::read::DEFAULT_MAX_FILE_BYTES)]
        max_file_bytes: u64,
        /// API server URL (`--source kubernetes`), without credentials (`kubectl proxy`);
        /// default: the in-cluster service account, or the kubeconfig.
        #[arg(long, value_name = "URL", conflicts_with = "kubeconfig")]
        kube_api_url: Option<String>,
        /// Kubeconfig file whose current context to use (`--source kubernetes`); default: the
        /// in-cluster service account, else `KUBECONFIG`, else `~/.kube/config`.
        #[arg(long, value_name = "FILE")]
        kubeconfig: Option<PathBuf>,
        /// How long a SubjectAccessReview answer is reused (`--source kubernetes`).
        #[arg(long, value_name = "DURATION", default_value = "10s")]
        authz_cache_ttl: String,
        /// Time a SubjectAccessReview may take; past it the check is a CEL error, handled by
        /// the policy's failurePolicy.
        #[arg(long, value_name = "DURATION", default_value = "2s")]
        authz_timeout: String,
        /// Longest wait between tries of a failing watch, list or discovery lookup
        /// (`--source kubernetes`): after an API server outage celgate follows within about
        /// this long, plus a re-list.
        #[arg(long, value_name = "DURATION", default_value = "1s")]
        kube_retry_max: String,
        /// Every this long (`--source kubernetes`) each watched resource is listed again in
        /// full beside its watch and compared with celgate's copy: objects that differ (changes
        /// the watch missed) are put right, counted in
        /// celgate_source_resync_drift_objects_total and logged; a list older than what was
        /// seen (etcd replaced or restored) lists every resource again. `0` turns it off.
        #[arg(long, value_name = "DURATION", default_value = "10m")]
        resync_interval: String,
        /// List and watch namespaced param kinds only in these namespaces (`--source
        /// kubernetes`), for RBAC that grants them there only (Roles); a param elsewhere counts
        /// as missing and its binding is reported (ParamNamespaceNotWatched). Cluster-scoped
        /// param kinds are watched whole. Default: every namespace.
        #[arg(long, value_name = "NS[,NS...]")]
        param_namespaces: Option<String>,
        /// Do not report misconfigured policies and bindings as Kubernetes Events.
        #[arg(long)]
        no_events: bool,
        /// This replica's name in Events (the Deployment passes the pod name).
        #[arg(long, env = "POD_NAME", default_value = "")]
        pod_name: String,
        /// Namespace of the Lease that picks the one replica reporting Events (the Deployment
        /// passes its own); empty: every replica reports.
        #[arg(long, env = "POD_NAMESPACE", default_value = "")]
        lease_namespace: String,
        /// Name of that Lease (it also picks the one replica writing policy reports).
        #[arg(long, default_value = "celgate-events")]
        lease_name: String,
        /// On SIGTERM, the Lease holder releases the Lease (another replica takes over at
        /// once) beside the drain, and gives up after this long (the Lease then expires);
        /// keep it well below the pod's terminationGracePeriodSeconds.
        #[arg(long, value_name = "DURATION", default_value = "5s")]
        lease_release_timeout: String,
        /// Write admission results as policy reports (`--source kubernetes`): `wgpolicy`
        /// (wgpolicyk8s.io/v1alpha2 PolicyReport and ClusterPolicyReport), `openreports`
        /// (openreports.io/v1alpha1 Report and ClusterReport) or `off`. One report per
        /// namespace plus one cluster report, named `celgate-admission`, written by the Lease
        /// holder with server-side apply.
        #[arg(long, value_enum, default_value = "off")]
        reports: ServeReports,
        /// Each policy report is written at most once per this interval.
        #[arg(long, value_name = "DURATION", default_value = "10s")]
        reports_interval: String,
        /// Results listed per policy report at most, failures and errors first (the API
        /// server refuses objects over 1.5 MiB); the annotation celgate.io/results-dropped
        /// counts those left out, and the summary counts every result.
        #[arg(long, value_name = "N", default_value_t = celgate::source::kube::reports::DEFAULT_MAX_RESULTS)]
        reports_max_results: usize,
        /// Resources whose latest admission results each replica keeps at most for the
        /// reports; past it, the one recorded longest ago is dropped (counted in
        /// celgate_report_resources_evicted_total). Background scans also drop resources
        /// that no longer exist.
        #[arg(long, value_name = "N", default_value_t = celgate::source::kube::reports::DEFAULT_MAX_RESOURCES)]
        reports_max_resources: usize,
        /// Background scans (`--source kubernetes`): every existing object some binding
        /// selects is evaluated as its CREATE by celgate's service account, at start, after
        /// each policy or binding change, and every this long; `0` turns them off. Results go
        /// to the metrics (source="scan") and, with --reports, to the reports
        /// `celgate-background`. Only the Lease holder scans.
        #[arg(long, value_name = "DURATION", default_value = "1h")]
        background_interval: String,
        /// Objects per list request of a background scan (`limit`; `continue` follows).
        #[arg(long, value_name = "N", default_value_t = celgate::source::kube::background::DEFAULT_PAGE_SIZE)]
        background_page_size: u32,
        /// Requests per second a background scan sends the API server at most (discovery
        /// and every page).
        #[arg(long, value_name = "QPS", default_value_t = celgate::source::kube::background::DEFAULT_QPS)]
        background_qps: f64,
        /// Resources a background scan lists at once.
        #[arg(long, value_name = "N", default_value_t = celgate::source::kube::background::DEFAULT_CONCURRENCY)]
        background_concurrency: usize,
        /// Policy and binding changes within this window make one background scan.
        #[arg(long, value_name = "DURATION", default_value = "5s")]
        background_debounce: String,
        /// celgate's service account, `[NAMESPACE:]NAME` (the namespace defaults to
        /// --lease-namespace, else `celgate`): the user of background scans' requests, whose
        /// `authorizer` checks ask about it.
        #[arg(
            long,
            value_name = "[NAMESPACE:]NAME",
            env = "CELGATE_SERVICE_ACCOUNT",
            default_value = "celgate"
        )]
        service_account: String,
        /// HTTPS address of the webhook (POST /validate, /healthz, /readyz).
        #[arg(long, default_value = "0.0.0.0:8443")]
        listen: std::net::SocketAddr,
        /// Plain-HTTP address for /metrics; `off` disables it.
        #[arg(long, default_value = "0.0.0.0:9090")]
        metrics_listen: String,
        /// PEM certificate chain (reloaded when it changes).
        #[arg(long, requires = "tls_key", conflicts_with = "self_signed")]
        tls_cert: Option<PathBuf>,
        /// PEM private key (reloaded when it changes).
        #[arg(long, requires = "tls_cert")]
        tls_key: Option<PathBuf>,
        /// Generate a CA and a serving certificate (development); the CA is printed, or
        /// written to --ca-out.
        #[arg(long)]
        self_signed: bool,
        /// Names for the self-signed certificate (DNS names or IP addresses).
        #[arg(long = "dns-name", default_values_t = ["localhost".to_string(), "127.0.0.1".to_string()])]
        dns_names: Vec<String>,
        /// Where to write the self-signed CA bundle.
        #[arg(long)]
        ca_out: Option<PathBuf>,
        /// Require client certificates signed by this CA (PEM).
        #[arg(long)]
        client_ca: Option<PathBuf>,
        #[command(flatten)]
        cert_controller: CertControllerFlags,
        /// Log lines as text or as one JSON object each (on standard error).
        #[arg(long, value_enum, default_value = "text")]
        log_format: LogFormat,
        /// Colour text logs: `auto` when standard error is a terminal.
        #[arg(long, value_enum, default_value = "auto")]
        log_color: LogColor,
        /// Log level or filter (RUST_LOG syntax); RUST_LOG wins when set.
        #[arg(long, default_value = "info")]
        log_level: String,
        /// Largest AdmissionReview body accepted.
        #[arg(long, default_value_t = 16 << 20)]
        max_body_bytes: usize,
        /// Request and answer bytes buffered at once by all connections; a request that would
        /// pass it is answered 503 with Retry-After. A body's bytes past its first 64 KiB may
        /// fill only three quarters of it (the rest is kept for small reviews), so it must be
        /// at least 4/3 of --max-body-bytes. The default is a quarter of the chart's memory limit.
        #[arg(long, value_name = "BYTES", default_value_t = celgate::server::DEFAULT_MAX_BUFFERED)]
        max_buffered_bytes: usize,
        /// Largest request head (HTTP/1.1: also each connection's read and write buffers;
        /// HTTP/2: the header list); a larger head is refused with 431. At least 8192.
        #[arg(long, value_name = "BYTES", default_value_t = 32 << 10)]
        max_header_bytes: usize,
        /// Reviews evaluated at once; more are refused with 429.
        #[arg(long, default_value_t = 512)]
        max_inflight: usize,
        /// Threads that evaluate reviews, at most; 0: one per core plus 32 (plus 64 with
        /// `--source kubernetes`, whose evaluations may wait on the API server). One evaluation
        /// per core runs at a time; the other threads serve beside slow ones (past 10 ms), so
        /// that up to that many slow reviews at once (each stopped at its deadline) cannot hold
        /// up the fast ones.
        #[arg(long, value_name = "N", default_value_t = 0)]
        eval_threads: usize,
        /// Bytes one expression's evaluation may build (strings, lists, maps, run-time
        /// regexes); past it the expression stops with `operation cancelled: memory limit
        /// exceeded`, an error under its policy's failurePolicy.
        #[arg(long, value_name = "BYTES", default_value_t = celgate::cel::DEFAULT_MEMORY_LIMIT)]
        cel_memory_limit: u64,
        /// Deadline of a review when the API server sends no `?timeout=`.
        #[arg(long, value_name = "DURATION", default_value = "10s")]
        default_timeout: String,
        /// Webhook connections open at once (lowered to fit the open-file limit). At the cap no
        /// connection is accepted until one ends, and one without a request under way is
        /// closed: a stalled handshake, else the one silent the longest, else a kept-alive one.
        #[arg(long, value_name = "N", default_value_t = 1024)]
        max_connections: usize,
        /// Metrics connections open at once.
        #[arg(long, value_name = "N", default_value_t = 16)]
        metrics_max_connections: usize,
        /// A connection without a request for this long is closed (longer than the API
        /// server's 90 s, so that it closes its idle connections first).
        #[arg(long, value_name = "DURATION", default_value = "120s")]
        idle_timeout: String,
        /// Time a client has for the TLS handshake, to start its first request, to send a
        /// request's headers and body, and to take its answers (past it without progress, the
        /// connection is closed).
        #[arg(long, value_name = "DURATION", default_value = "10s")]
        client_timeout: String,
        /// The Kubernetes version whose CEL libraries are available (1.N or v1.N); default:
        /// the API server's own with `--source kubernetes` (without `--policies`), else the
        /// newest celgate knows.
        #[arg(long, value_name = "1.N")]
        k8s_version: Option<String>,
    },
    /// Evaluate one CEL expression in the ValidatingAdmissionPolicy environment and print the
    /// result as JSON. Exit 0 on a value, 1 on a CEL error, 2 on bad usage.
    Expr {
        /// The expression.
        expr: String,
        /// A variable from a JSON or YAML file: `object=pod.yaml`. The VAP variables
        /// (`object`, `oldObject`, `request`, `namespaceObject`, `params`) keep their declared
        /// types; other names are declared `dyn`. Unset VAP variables are null.
        #[arg(long = "var", value_name = "NAME=FILE")]
        vars: Vec<String>,
        /// The Kubernetes version whose CEL libraries are available (1.N or v1.N).
        #[arg(long, value_name = "1.N", default_value_t = format!("1.{NEWEST_MINOR}"))]
        k8s_version: String,
        /// Print the evaluation's cost on standard error.
        #[arg(long)]
        cost: bool,
        /// Largest file read (a manifest, suite or policy file); a larger one, or one that is not a regular file (a FIFO,
        /// a device), is skipped with a warning in a folder, refused when named
        /// itself.
        #[arg(long, value_name = "BYTES", default_value_t = celgate::source::read::DEFAULT_MAX_FILE_BYTES)]
        max_file_bytes: u64,
    },
    /// Evaluate an AdmissionReview, or a plain manifest as the request the API server would
    /// send for it, against a folder of policies, bindings, params, namespaces and RBAC
    /// objects, offline, and print the AdmissionReview answer. Exit 0 whatever the decision;
    /// 2 for unreadable input or an invalid object.
    Eval {
        /// Folder (read recursively) of YAML or JSON manifests, multi-document allowed.
        #[arg(long, value_name = "DIR")]
        policies: PathBuf,
        /// The AdmissionReview (v1 or v1beta1; JSON or YAML), or any other Kubernetes object
        /// (a plain manifest, described by --operation, --old, --user, --group); `-` for
        /// standard input.
        #[arg(long, visible_alias = "object", value_name = "FILE")]
        request: String,
        /// With a manifest: CREATE (default), UPDATE (needs --old) or DELETE (the manifest is
        /// the object deleted).
        #[arg(long, value_name = "OP")]
        operation: Option<String>,
        /// With a manifest: the object as it was (for UPDATE).
        #[arg(long, value_name = "FILE")]
        old: Option<PathBuf>,
        /// With a manifest: the requesting user (default `celgate-test-user`).
        #[arg(long, value_name = "NAME")]
        user: Option<String>,
        /// With a manifest: a group of the user (repeatable); `system:authenticated` is
        /// always added.
        #[arg(long = "group", value_name = "GROUP")]
        groups: Vec<String>,
        /// With a manifest: the request namespace (default: the manifest's, else `default`).
        #[arg(long, value_name = "NS")]
        namespace: Option<String>,
        /// With a manifest: the subresource (e.g. `status`).
        #[arg(long, value_name = "NAME")]
        subresource: Option<String>,
        /// With a manifest: a dry-run request.
        #[arg(long)]
        dry_run: bool,
        /// The Kubernetes version whose CEL libraries are available (1.N or v1.N).
        #[arg(long, value_name = "1.N", default_value_t = format!("1.{NEWEST_MINOR}"))]
        k8s_version: String,
        /// Do not add what every cluster has (namespace name labels, kube-root-ca.crt).
        #[arg(long)]
        no_cluster_defaults: bool,
        /// Largest file read (a manifest, suite or policy file); a larger one, or one that is not a regular file (a FIFO,
        /// a device), is skipped with a warning in a folder, refused when named
        /// itself.
        #[arg(long, value_name = "BYTES", default_value_t = celgate::source::read::DEFAULT_MAX_FILE_BYTES)]
        max_file_bytes: u64,
    },
    /// Run policy test suites: every `*.celgate-test.yaml` (and Kyverno CLI `kyverno-test.yaml`
    /// whose policies are ValidatingAdmissionPolicies) under PATH (default `.`). Exit 0 when
    /// every case passed, 1 when one failed (or coverage is below --min-coverage), 2 on an
    /// invalid test file or bad usage.
    Test {
        /// Suite files or folders searched recursively.
        #[arg(value_name = "PATH", default_value = ".")]
        paths: Vec<PathBuf>,
        /// Only run cases whose `FILE: CASE NAME` matches this regular expression.
        #[arg(long, value_name = "REGEX")]
        filter: Option<String>,
        /// Report format: a table, JSON, JUnit XML or TAP, on standard output.
        #[arg(long, value_enum, default_value = "table")]
        output: TestOutput,
        /// The Kubernetes version whose CEL libraries are available (1.N or v1.N).
        #[arg(long, value_name = "1.N", default_value_t = format!("1.{NEWEST_MINOR}"))]
        k8s_version: String,
        /// Report which matchConditions, variables, validations and audit annotations the
        /// cases evaluated, and whether each boolean one was seen both true and false.
        #[arg(long)]
        coverage: bool,
        /// Fail the run (exit 1) when coverage is below this percentage; implies --coverage.
        #[arg(long, value_name = "PERCENT")]
        min_coverage: Option<f64>,
        /// Write what failing cases (and cases without `expect`) observed into their test
        /// files (comments and key order kept), then run again and report that run.
        #[arg(long)]
        update: bool,
        /// Every file a suite names (policies, resources, objects, reviews) must lie under
        /// this folder once symlinks are resolved (default: the current directory or a PATH
        /// given, or the folder of a suite file given), so that a suite from a pull request
        /// cannot read files elsewhere (`/etc/...`, `../../secret.yaml`); `--root /` allows
        /// any.
        #[arg(long, value_name = "DIR")]
        root: Option<PathBuf>,
        /// Largest file read (a manifest, suite or policy file); a larger one, or one that is not a regular file (a FIFO,
        /// a device), is skipped with a warning in a folder, refused when named
        /// itself.
        #[arg(long, value_name = "BYTES", default_value_t = celgate::source::read::DEFAULT_MAX_FILE_BYTES)]
        max_file_bytes: u64,
    },
    /// CustomResourceDefinition validation rules, offline: whether a CRD is accepted, and
    /// the API server's answer to a custom resource. Exit 0 accepted, 1 rejected, 2 for
    /// unreadable input.
    Crd {
        #[command(subcommand)]
        command: CrdCommand,
        /// Largest file read (a CRD or custom resource file); a larger one, or one that is not
        /// a regular file (a FIFO, a device), is skipped with a warning in a folder, refused
        /// when named itself.
        #[arg(long, global = true, value_name = "BYTES", default_value_t = celgate::source::read::DEFAULT_MAX_FILE_BYTES)]
        max_file_bytes: u64,
    },
    /// Background scan, offline: evaluate each object of --objects as the CREATE the API
    /// server would send for it (oldObject null, dryRun true, user
    /// system:serviceaccount:celgate:celgate) against every binding of --policies whose rules
    /// match that CREATE; print the violations, or the results as policy reports. Exit 0
    /// when every object would be admitted, 1 when one would be refused (a Deny binding
    /// failed, or an error under failurePolicy Fail), 2 for unreadable input.
    Scan {
        /// Folder (read recursively) of policies, bindings, params, namespaces and RBAC
        /// objects, as `celgate eval` reads it.
        #[arg(long, value_name = "DIR")]
        policies: PathBuf,
        /// The objects to scan: a YAML or JSON file or a folder of them (read recursively;
        /// multi-document; `List`s such as `kubectl get -o yaml` prints are expanded).
        #[arg(long, value_name = "PATH")]
        objects: PathBuf,
        /// `table`: the violations (failed and errored results) and a summary; `yaml` or
        /// `json`: the policy reports (a `List` in JSON), ready for `kubectl apply`.
        #[arg(short = 'o', long, value_enum, default_value = "table")]
        output: ScanOutput,
        /// The report API of `-o yaml|json`: wgpolicyk8s.io/v1alpha2 PolicyReport and
        /// ClusterPolicyReport, or openreports.io/v1alpha1 Report and ClusterReport.
        #[arg(long, value_enum, default_value = "wgpolicy")]
        reports: ReportKind,
        /// The Kubernetes version whose CEL libraries are available (1.N or v1.N).
        #[arg(long, value_name = "1.N", default_value_t = format!("1.{NEWEST_MINOR}"))]
        k8s_version: String,
        /// Largest file read (a manifest, suite or policy file); a larger one, or one that is not a regular file (a FIFO,
        /// a device), is skipped with a warning in a folder, refused when named
        /// itself.
        #[arg(long, value_name = "BYTES", default_value_t = celgate::source::read::DEFAULT_MAX_FILE_BYTES)]
        max_file_bytes: u64,
    },
    /// Type-check the ValidatingAdmissionPolicies of --policies as the API server does for
    /// `status.typeChecking`: each validation's expression and messageExpression against
    /// the schema of every kind its matchConstraints name (built-in kinds, and CRDs in the
    /// folder), with `params` typed by the paramKind's schema. Prints the
    /// `expressionWarnings`. Exit 0 without warnings, 1 with warnings, 2 for unreadable input.
    Lint {
        /// A policy file, or a folder read recursively (policies and CRDs; other objects are
        /// ignored).
        #[arg(long, value_name = "PATH")]
        policies: PathBuf,
        /// `text`: the warnings under each policy and field; `json`: one object per policy
        /// and line, `{"policy", "typeChecking": {"expressionWarnings": [...]}, "checked",
        /// "noSchema"}`.
        #[arg(short = 'o', long, value_enum, default_value = "text")]
        output: LogFormat,
        /// The Kubernetes version whose type checking is followed (CEL libraries, keywords
        /// as field names from 1.31, `params` without a schema declared from 1.36).
        #[arg(long, value_name = "1.N", default_value_t = format!("1.{NEWEST_MINOR}"))]
        k8s_version: String,
        /// Largest file read (a manifest, suite or policy file); a larger one, or one that is not a regular file (a FIFO,
        /// a device), is skipped with a warning in a folder, refused when named
        /// itself.
        #[arg(long, value_name = "BYTES", default_value_t = celgate::source::read::DEFAULT_MAX_FILE_BYTES)]
        max_file_bytes: u64,
    },
    /// Print the version.
    Version,
}

/// `celgate scan`'s output.
#[derive(Clone, Copy, clap::ValueEnum)]
enum ScanOutput {
    Table,
    Yaml,
    Json,
}

/// `celgate serve --reports`.
#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum ServeReports {
    Wgpolicy,
    Openreports,
    Off,
}

/// `celgate scan`'s report API.
#[derive(Clone, Copy, clap::ValueEnum)]
enum ReportKind {
    Wgpolicy,
    Openreports,
}

/// `celgate scan`.
/// `celgate scan`: `files` are the policy folder, the objects, and `--max-file-bytes`.
fn run_scan(
    (policies, objects, max_file_bytes): (&Path, &Path, u64),
    output: ScanOutput,
    reports: ReportKind,
    k8s_version: &str,
) -> ExitCode {
    use celgate::scan::report::{self, ReportApi};
    let scanned = parse_version(k8s_version).and_then(|v| {
        celgate::app::scan::scan_folder(policies, objects, v, max_file_bytes).map_err(Usage)
    });
    let scanned = match scanned {
        Ok(s) => {
            warn_skipped(&s.skipped);
            s
        }
        Err(Usage(m)) => {
            eprintln!("celgate: {m}");
            return ExitCode::from(2);
        }
    };
    let api = match reports {
        ReportKind::Wgpolicy => ReportApi::WgPolicy,
        ReportKind::Openreports => ReportApi::OpenReports,
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    let text = match output {
        ScanOutput::Table => report::table(&scanned.snapshot, &scanned.objects),
        ScanOutput::Yaml | ScanOutput::Json => {
            let items = report::reports(&scanned.snapshot, &scanned.objects, api, now);
            if matches!(output, ScanOutput::Json) {
                let items: Vec<_> = items.collect();
                let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": items});
                format!(
                    "{}\n",
                    serde_json::to_string_pretty(&list).unwrap_or_default()
                )
            } else {
                // Each report is turned into text and dropped before the next is built.
                items
                    .map(|r| format!("---\n{}", serde_yaml_ng::to_string(&r).unwrap_or_default()))
                    .collect()
            }
        }
    };
    emit(&text);
    if scanned.denied() {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum TestOutput {
    Table,
    Json,
    Junit,
    Tap,
}

/// The flags of `celgate test`.
struct TestFlags {
    filter: Option<String>,
    output: TestOutput,
    k8s_version: String,
    coverage: bool,
    min_coverage: Option<f64>,
    update: bool,
    root: Option<PathBuf>,
    max_file_bytes: u64,
}

/// The folders `celgate test`'s suites may read under: `--root`, else the working directory
/// and each PATH (a suite file's folder).
fn test_roots(root: Option<PathBuf>, paths: &[PathBuf]) -> Vec<PathBuf> {
    if let Some(root) = root {
        return vec![root];
    }
    // A PATH that does not exist is reported as such by the run, not as a bad root.
    let given = paths
        .iter()
        .filter(|p| p.exists())
        .map(|p| match p.parent() {
            Some(parent) if p.is_file() && !parent.as_os_str().is_empty() => parent.to_path_buf(),
            _ if p.is_file() => PathBuf::from("."),
            _ => p.clone(),
        });
    std::iter::once(PathBuf::from(".")).chain(given).collect()
}

/// `celgate test`.
fn run_test(paths: &[PathBuf], flags: TestFlags) -> ExitCode {
    use celgate::testing::report::{render, Format};
    let TestFlags {
        filter,
        output,
        k8s_version,
        coverage,
        min_coverage,
        update,
        root,
        max_file_bytes,
    } = flags;
    let options = parse_version(&k8s_version).and_then(|version| {
        let filter = filter
            .as_deref()
            .map(regex::Regex::new)
            .transpose()
            .map_err(|e| Usage(format!("--filter: {e}")))?;
        if let Some(p) = min_coverage {
            if !(0.0..=100.0).contains(&p) {
                return Err(Usage(format!(
                    "--min-coverage: expected a percentage from 0 to 100, got {p}"
                )));
            }
        }
        Ok(celgate::testing::Options {
            filter,
            version,
            coverage,
            min_coverage,
            update,
            roots: test_roots(root, paths),
            max_file_bytes,
        })
    });
    let report = match options.and_then(|o| celgate::testing::run(paths, &o).map_err(Usage)) {
        Ok(r) => r,
        Err(Usage(m)) => {
            eprintln!("celgate: {m}");
            return ExitCode::from(2);
        }
    };
    let format = match output {
        TestOutput::Table => Format::Table,
        TestOutput::Json => Format::Json,
        TestOutput::Junit => Format::Junit,
        TestOutput::Tap => Format::Tap,
    };
    for note in &report.updated {
        eprintln!("celgate: {note}");
    }
    emit(&render(&report, format));
    // JUnit and TAP stay machine-readable: the coverage table goes to standard error.
    if let (Some(c), Format::Junit | Format::Tap) = (&report.coverage, format) {
        eprint!("{}", c.table());
    }
    if report.coverage_too_low() {
        if let Some(c) = &report.coverage {
            eprintln!(
                "celgate: coverage {:.1}% is below --min-coverage {}",
                c.percent(),
                min_coverage.unwrap_or_default()
            );
        }
    }
    ExitCode::from(report.exit_code())
}

#[derive(Subcommand)]
enum CrdCommand {
    /// Check CRDs: structural schema and every x-kubernetes-validations rule, as the API
    /// server would on creating (or, with --old, replacing) each CRD of the files.
    Check {
        /// Files of CRDs (YAML, multi-document, or JSON; `-` for standard input); other
        /// documents are skipped.
        #[arg(value_name = "FILE")]
        files: Vec<PathBuf>,
        /// A CRD file (the same as a FILE argument; kept for compatibility).
        #[arg(long, value_name = "FILE", hide = true)]
        crd: Vec<PathBuf>,
        /// Stored CRDs (repeatable): a CRD of FILE named as one of them is checked as
        /// replacing it (an update): rules it already has compile with the server's own
        /// library, and an unchanged schema is exempt from the per-rule cost limit.
        #[arg(long, value_name = "FILE")]
        old: Vec<PathBuf>,
        /// Output: text (the Status message) or json (one object per CRD and line).
        #[arg(short = 'o', long, value_enum, default_value = "text")]
        output: LogFormat,
        /// Also list every rule's estimated cost: per evaluation, times how often it may
        /// run, and its share of the per-rule limit and of the CRD budget.
        #[arg(long)]
        costs: bool,
    },
    /// Validate custom resources against their CRDs: a create, or an update of the object
    /// of the same kind, namespace and name in --old.
    Validate {
        /// Files of custom resources (YAML, multi-document, or JSON; `-` for standard input);
        /// CRD documents among them are skipped.
        #[arg(value_name = "FILE")]
        files: Vec<PathBuf>,
        /// The CRDs: a file, or a folder searched recursively for .yaml, .yml and .json
        /// files; a custom resource is matched by its apiVersion's group and version (a
        /// served version) and its kind.
        #[arg(long, value_name = "PATH", alias = "crd")]
        crds: PathBuf,
        /// A custom resource file (the same as a FILE argument; kept for compatibility).
        #[arg(long, value_name = "FILE", hide = true)]
        object: Vec<PathBuf>,
        /// Stored objects (repeatable): a custom resource with the same group, kind,
        /// namespace and name as one of them is validated as an update of it (transition
        /// rules, ratcheting); the others as creates.
        #[arg(long, value_name = "FILE")]
        old: Vec<PathBuf>,
        /// Validate as an update of this subresource of the stored object.
        #[arg(long, value_enum, value_name = "NAME", requires = "old")]
        subresource: Option<Subresource>,
        /// The same as --subresource status (kept for compatibility).
        #[arg(long, requires = "old", hide = true)]
        status: bool,
        /// Output: text (the Status message) or json (one object per custom resource and
        /// line).
        #[arg(short = 'o', long, value_enum, default_value = "text")]
        output: LogFormat,
    },
}

/// A subresource `crd validate` can update.
#[derive(Clone, Copy, clap::ValueEnum)]
enum Subresource {
    /// /status: only the status is taken from the object sent; nothing ratchets.
    Status,
}

/// `celgate expr` has no RBAC objects to consult: every check has no opinion, so
/// `allowed()` is false, with a reason that says why.
#[derive(Debug)]
struct NoAuthorizationData;

impl celgate::cel::k8s::authz::Authorizer for NoAuthorizationData {
    fn authorize(&self, _: &Attributes) -> Result<Decision, AuthorizeError> {
        Ok(Decision {
            verdict: Verdict::NoOpinion,
            reason: "celgate expr has no authorization data".into(),
            error: None,
        })
    }
}

fn init_logging(format: LogFormat, color: LogColor, level: &str) {
    use std::io::IsTerminal;
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(level));
    // Escape codes only where a terminal renders them, not in a file or a log collector.
    let ansi = match color {
        LogColor::Auto => std::io::stderr().is_terminal(),
        LogColor::Always => true,
        LogColor::Never => false,
    };
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Json => builder.json().with_ansi(false).init(),
        LogFormat::Text => builder.with_ansi(ansi).init(),
    }
}

fn serve(command: Command) -> ExitCode {
    let Command::Serve {
        source,
        mode,
        log_results,
        policies,
        reload_settle,
        allow_empty_policies,
        strict_namespaces,
        max_file_bytes,
        kube_api_url,
        kubeconfig,
        authz_cache_ttl,
        authz_timeout,
        kube_retry_max,
        resync_interval,
        param_namespaces,
        no_events,
        pod_name,
        lease_namespace,
        lease_name,
        lease_release_timeout,
        reports,
        reports_interval,
        reports_max_results,
        reports_max_resources,
        background_interval,
        background_page_size,
        background_qps,
        background_concurrency,
        background_debounce,
        service_account,
        listen,
        metrics_listen,
        tls_cert,
        tls_key,
        self_signed,
        dns_names,
        ca_out,
        client_ca,
        cert_controller,
        log_format,
        log_color,
        log_level,
        max_body_bytes,
        max_buffered_bytes,
        max_header_bytes,
        max_inflight,
        eval_threads,
        cel_memory_limit,
        default_timeout,
        max_connections,
        metrics_max_connections,
        idle_timeout,
        client_timeout,
        k8s_version,
    } = command
    else {
        return ExitCode::from(2);
    };
    init_logging(log_format, log_color, &log_level);
    // None: the API server's own (cluster mode), or the newest known (folder mode).
    let given_version = match k8s_version.as_deref().map(parse_version).transpose() {
        Ok(v) => v,
        Err(Usage(m)) => {
            eprintln!("celgate: {m}");
            return ExitCode::from(2);
        }
    };
    let version = given_version.unwrap_or(NEWEST_MINOR);
    let metrics_listen = match metrics_listen.as_str() {
        "off" | "" => None,
        other => match other.parse() {
            Ok(a) => Some(a),
            Err(e) => {
                eprintln!("celgate: --metrics-listen {other:?}: {e}");
                return ExitCode::from(2);
            }
        },
    };
    let controlled = match cert_controller.source(kube_api_url.as_deref(), kubeconfig.as_deref()) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("celgate: {e}");
            return ExitCode::from(2);
        }
    };
    let cert = match (tls_cert, tls_key, self_signed, controlled) {
        (Some(cert), Some(key), false, None) => CertSource::Files { cert, key },
        (None, None, true, None) => CertSource::SelfSigned { names: dns_names },
        (None, None, false, Some(c)) => c,
        _ => {
            eprintln!("celgate: give --tls-cert and --tls-key, --self-signed, or --cert-secret");
            return ExitCode::from(2);
        }
    };
    let duration = |flag: &str, text: &str| {
        celgate::apimachinery::duration::parse_go_duration(text)
            .filter(|n| *n >= 0)
            .map(|n| Duration::from_nanos(n as u64))
            .ok_or_else(|| format!("{flag} {text:?}: not a duration such as 10s or 500ms"))
    };
    let positive = |flag: &str, text: &str| match duration(flag, text)? {
        Duration::ZERO => Err(format!("{flag} {text:?}: must be more than zero")),
        d => Ok(d),
    };
    let timeouts = (|| {
        Ok::<_, String>((
            positive("--default-timeout", &default_timeout)?,
            positive("--idle-timeout", &idle_timeout)?,
            positive("--client-timeout", &client_timeout)?,
        ))
    })();
    let (default_timeout, idle_timeout, client_timeout) = match timeouts {
        Ok(t) => t,
        Err(e) => {
            eprintln!("celgate: {e}");
            return ExitCode::from(2);
        }
    };
    if cel_memory_limit == 0 {
        eprintln!("celgate: --cel-memory-limit must be at least 1");
        return ExitCode::from(2);
    }
    // A body may fill three quarters of the budget (the rest is kept for small reviews).
    if max_body_bytes > max_buffered_bytes - max_buffered_bytes / 4 {
        eprintln!(
            "celgate: --max-buffered-bytes must be at least 4/3 of --max-body-bytes ({max_body_bytes}), or no body that large could be read"
        );
        return ExitCode::from(2);
    }
    if max_header_bytes < celgate::server::conn::MIN_HEADER_BYTES {
        eprintln!(
            "celgate: --max-header-bytes must be at least {}",
            celgate::server::conn::MIN_HEADER_BYTES
        );
        return ExitCode::from(2);
    }
    if max_connections == 0 || metrics_max_connections == 0 {
        eprintln!("celgate: --max-connections and --metrics-max-connections must be at least 1");
        return ExitCode::from(2);
    }
    // Connections must not use up the descriptors: accept would then fail, and so would
    // reading policy and certificate files.
    let fd_limit = celgate::server::conn::raise_fd_limit();
    let fitted =
        celgate::server::conn::fit_to_fd_limit(max_connections, metrics_max_connections, fd_limit);
    if fitted < max_connections {
        tracing::warn!(
            max_connections,
            open_files = fd_limit,
            lowered_to = fitted,
            "--max-connections lowered to fit the open-file limit"
        );
    }
    let limits = Limits {
        max_body: max_body_bytes,
        max_buffered: max_buffered_bytes,
        max_header_bytes,
        max_inflight,
        default_timeout,
        client_timeout,
        idle_timeout,
        max_connections: fitted,
        metrics_max_connections,
        memory_per_expression: cel_memory_limit,
        ..Limits::default()
    };
    if strict_namespaces && policies.is_some() && matches!(source, SourceKind::Kubernetes) {
        eprintln!(
            "celgate: --strict-namespaces is for --source folder (with --source kubernetes namespaces come from the cluster)"
        );
        return ExitCode::from(2);
    }
    let settle = match duration("--reload-settle", &reload_settle) {
        Ok(settle) => settle,
        Err(e) => {
            eprintln!("celgate: {e}");
            return ExitCode::from(2);
        }
    };
    let folder = |dir: PathBuf| celgate::source::folder::FolderSource {
        dir,
        settle,
        allow_empty: allow_empty_policies,
        strict_namespaces,
        max_file_bytes,
    };
    if reports != ServeReports::Off && matches!(source, SourceKind::Folder) {
        eprintln!(
            "celgate: --reports needs --source kubernetes (reports are written in the cluster)"
        );
        return ExitCode::from(2);
    }
    let source = match source {
        SourceKind::Folder => PolicySource::Folder(folder(
            policies.unwrap_or_else(|| PathBuf::from("examples/policies")),
        )),
        SourceKind::Kubernetes => {
            let api_url = match kube_api_url.map(|u| u.parse()).transpose() {
                Ok(u) => u,
                Err(e) => {
                    eprintln!("celgate: --kube-api-url: {e}");
                    return ExitCode::from(2);
                }
            };
            let (cache_ttl, timeout, retry_max, resync) = match (
                duration("--authz-cache-ttl", &authz_cache_ttl),
                duration("--authz-timeout", &authz_timeout),
                positive("--kube-retry-max", &kube_retry_max),
                duration("--resync-interval", &resync_interval),
            ) {
                (Ok(a), Ok(b), Ok(c), Ok(d)) => (a, b, c, d),
                (Err(e), _, _, _) | (_, Err(e), _, _) | (_, _, Err(e), _) | (_, _, _, Err(e)) => {
                    eprintln!("celgate: {e}");
                    return ExitCode::from(2);
                }
            };
            // 0: off.
            let resync = (!resync.is_zero()).then_some(resync);
            let param_namespaces = match param_namespaces.as_deref().map(kube::param_namespaces) {
                None => Vec::new(),
                Some(Ok(list)) => list,
                Some(Err(e)) => {
                    eprintln!("celgate: {e}");
                    return ExitCode::from(2);
                }
            };
            let api = match reports {
                ServeReports::Wgpolicy => Some(celgate::scan::report::ReportApi::WgPolicy),
                ServeReports::Openreports => Some(celgate::scan::report::ReportApi::OpenReports),
                ServeReports::Off => None,
            };
            let reports = match (api, positive("--reports-interval", &reports_interval)) {
                (None, _) => None,
                (Some(_), _) if reports_max_results == 0 => {
                    eprintln!("celgate: --reports-max-results must be at least 1");
                    return ExitCode::from(2);
                }
                (Some(_), _) if reports_max_resources == 0 => {
                    eprintln!("celgate: --reports-max-resources must be at least 1");
                    return ExitCode::from(2);
                }
                (Some(api), Ok(interval)) => Some(kube::reports::ReportOptions {
                    api,
                    interval,
                    max_results: reports_max_results,
                    max_resources: reports_max_resources,
                }),
                (Some(_), Err(e)) => {
                    eprintln!("celgate: {e}");
                    return ExitCode::from(2);
                }
            };
            let background = match background_options(
                &background_interval,
                background_page_size,
                background_qps,
                background_concurrency,
                &background_debounce,
                &service_account,
                &lease_namespace,
            ) {
                Ok(b) => b,
                Err(e) => {
                    eprintln!("celgate: {e}");
                    return ExitCode::from(2);
                }
            };
            let release_timeout = match positive("--lease-release-timeout", &lease_release_timeout)
            {
                Ok(d) => d,
                Err(e) => {
                    eprintln!("celgate: {e}");
                    return ExitCode::from(2);
                }
            };
            // One replica reports Events; it needs a name and a namespace for the Lease.
            let events_lease =
                (!lease_namespace.is_empty() && !pod_name.is_empty()).then(|| LeaseOptions {
                    namespace: lease_namespace,
                    name: lease_name,
                    identity: pod_name.clone(),
                    duration: Duration::from_secs(15),
                    renew: Duration::from_secs(5),
                    release_timeout,
                });
            PolicySource::Kubernetes {
                api_url,
                kubeconfig,
                options: KubeOptions {
                    version,
                    // Folder policies may use CEL newer than the cluster's: the version
                    // given, or the newest celgate knows.
                    version_from_server: given_version.is_none() && policies.is_none(),
                    events: !no_events,
                    events_lease,
                    instance: pod_name,
                    retry_max,
                    resync,
                    param_namespaces,
                    reports,
                    background,
                    policy_folder: policies.map(folder),
                    ..KubeOptions::default()
                },
                sar: Some(SarOptions {
                    cache_ttl,
                    timeout,
                    ..SarOptions::default()
                }),
            }
        }
    };
    let cfg = ServeConfig {
        source,
        listen,
        metrics_listen,
        cert,
        client_ca,
        limits,
        answering: celgate::server::Answering {
            mode: match mode {
                ServeMode::Enforce => celgate::review::Mode::Enforce,
                ServeMode::Observe => celgate::review::Mode::Observe,
            },
            log_results,
        },
        poll: Duration::from_secs(1),
        version,
    };
    match celgate::app::serve(cfg, eval_threads, ca_out.as_deref()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(ServeError::Runtime(e)) => {
            eprintln!("celgate: {}", ServeError::Runtime(e));
            ExitCode::from(1)
        }
        Err(ServeError::Start(e)) => {
            tracing::error!(error = %e, "cannot start");
            ExitCode::from(1)
        }
        Err(ServeError::CaOut { path, source }) => {
            tracing::error!(error = %source, path = %path.display(), "cannot write the CA bundle");
            ExitCode::from(1)
        }
    }
}

/// The background scans' options from their flags; `None` for an interval of 0 (off).
fn background_options(
    interval: &str,
    page_size: u32,
    qps: f64,
    concurrency: usize,
    debounce: &str,
    service_account: &str,
    pod_namespace: &str,
) -> Result<Option<kube::background::BackgroundOptions>, String> {
    let duration = |flag: &str, text: &str| {
        celgate::apimachinery::duration::parse_go_duration(text)
            .filter(|n| *n >= 0)
            .map(|n| Duration::from_nanos(n as u64))
            .ok_or_else(|| format!("{flag} {text:?}: not a duration such as 1h or 30m"))
    };
    let interval = duration("--background-interval", interval)?;
    let debounce = duration("--background-debounce", debounce)?;
    if page_size == 0 {
        return Err("--background-page-size must be at least 1".into());
    }
    if !(qps.is_finite() && qps > 0.0) {
        return Err(format!(
            "--background-qps {qps}: must be a number of requests per second above 0"
        ));
    }
    if concurrency == 0 {
        return Err("--background-concurrency must be at least 1".into());
    }
    let (namespace, name) = match service_account.split_once(':') {
        Some((ns, name)) => (ns, name),
        None if pod_namespace.is_empty() => ("celgate", service_account),
        None => (pod_namespace, service_account),
    };
    let label = |s: &str| {
        !s.is_empty()
            && s.len() <= 253
            && s.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.')
    };
    if !label(namespace) || !label(name) {
        return Err(format!(
            "--service-account {service_account:?}: not [NAMESPACE:]NAME of a service account"
        ));
    }
    if interval.is_zero() {
        return Ok(None);
    }
    let (user, groups) = celgate::scan::service_account_identity(namespace, name);
    Ok(Some(kube::background::BackgroundOptions {
        interval,
        debounce,
        page_size,
        qps,
        concurrency,
        user,
        groups,
    }))
}

/// Runs `work` on a thread with a stack that does not depend on the platform's default: the
/// evaluator recurses once per nesting level of an expression.
fn on_big_stack(work: impl FnOnce() -> ExitCode + Send + 'static) -> ExitCode {
    match std::thread::Builder::new().stack_size(64 << 20).spawn(work) {
        Ok(h) => h.join().unwrap_or(ExitCode::from(1)),
        Err(e) => {
            eprintln!("celgate: cannot start evaluation thread: {e}");
            ExitCode::from(1)
        }
    }
}

/// `celgate eval`'s flags that describe a plain manifest's request.
struct ManifestFlags {
    operation: Option<String>,
    old: Option<PathBuf>,
    user: Option<String>,
    groups: Vec<String>,
    namespace: Option<String>,
    subresource: Option<String>,
    dry_run: bool,
}

impl ManifestFlags {
    fn given(&self) -> bool {
        self.operation.is_some()
            || self.old.is_some()
            || self.user.is_some()
            || !self.groups.is_empty()
            || self.namespace.is_some()
            || self.subresource.is_some()
            || self.dry_run
    }
}

/// `celgate eval`: `files` are the policy folder, the request file, and `--max-file-bytes`.
fn run_eval(
    (policies, request, max_file_bytes): (&Path, &str, u64),
    manifest: ManifestFlags,
    k8s_version: &str,
    cluster_defaults: bool,
) -> Result<(), Usage> {
    let version = parse_version(k8s_version)?;
    let mut objects = load_folder(policies, max_file_bytes).map_err(Usage)?;
    if cluster_defaults {
        celgate::source::add_cluster_defaults(&mut objects);
    }
    // The CRDs tell a manifest's resource and scope.
    let crds: Vec<Json> = objects
        .iter()
        .filter(|o| o.object["kind"] == "CustomResourceDefinition")
        .map(|o| o.object.clone())
        .collect();
    let snapshot =
        celgate::source::snapshot(objects, version, true).map_err(|e| Usage(e.to_string()))?;
    let (name, text) = if request == "-" {
        let s = celgate::source::read::read_stdin(max_file_bytes)
            .map_err(|e| Usage(format!("cannot read standard input: {e}")))?;
        ("<stdin>".to_string(), s)
    } else {
        let t = celgate::source::read::read_text(Path::new(request), max_file_bytes)
            .map_err(|e| Usage(format!("cannot read {request}: {e}")))?;
        (request.to_string(), t)
    };
    // JSON as it is (also when too deep or with a repeated key: the review's error to
    // report); anything else is read as YAML and re-encoded.
    let json =
        celgate::cel::json::Doc::parse(text.as_bytes()).map_or_else(|e| e.is_data(), |_| true);
    let value: Option<Json> = if json {
        celgate::cel::deep_value::from_str(&text).ok()
    } else {
        Some(
            celgate::source::folder::parse_document(Path::new(&name), &text)
                .map_err(|e| Usage(format!("{name}: {e}")))?,
        )
    };
    let is_review = value
        .as_ref()
        .is_none_or(|v| v["kind"] == "AdmissionReview" || v.get("request").is_some());
    let body = match value {
        _ if is_review && manifest.given() => {
            return Err(Usage(format!(
                "{name}: is an AdmissionReview: --operation, --old, --user, --group, --namespace, --subresource and --dry-run describe a plain manifest"
            )))
        }
        _ if is_review && json => text.into_bytes(),
        Some(v) if is_review => serde_json::to_vec(&v).map_err(|e| Usage(format!("{name}: {e}")))?,
        Some(object) => {
            let old = manifest
                .old
                .as_deref()
                .map(|p| read_document(p, max_file_bytes))
                .transpose()?;
            let m = celgate::review::manifest::ManifestRequest {
                operation: manifest.operation,
                object,
                old,
                user: manifest.user,
                groups: manifest.groups,
                namespace: manifest.namespace,
                sub_resource: manifest.subresource,
                dry_run: manifest.dry_run,
            };
            let review = celgate::review::manifest::manifest_review(crds.iter(), m)
                .map_err(|e| Usage(format!("{name}: {e}")))?;
            serde_json::to_vec(&review).map_err(|e| Usage(format!("{name}: {e}")))?
        }
        None => text.into_bytes(),
    };
    let answer = celgate::review::review_answer(&snapshot, &body)
        .map_err(|e| Usage(format!("{name}: {e}")))?;
    emit_line(&serde_json::to_string_pretty(&answer).unwrap_or_default());
    Ok(())
}

/// Writes a command's result to standard output. A reader that stopped reading
/// (`celgate eval ... | head`) is no error of celgate's: the rest is dropped, where `print!`
/// would panic.
fn emit(text: &str) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes()).and_then(|()| out.flush());
}

/// [`emit`] and a newline.
fn emit_line(text: &str) {
    emit(&format!("{text}\n"));
}

/// An error for exit code 2 (bad usage or unreadable input).
struct Usage(String);

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Serve { .. } => serve(cli.command),
        Command::Crd {
            command,
            max_file_bytes,
        } => on_big_stack(move || run_crd(command, max_file_bytes)),
        Command::Lint {
            policies,
            output,
            k8s_version,
            max_file_bytes,
        } => run_lint(&policies, output, &k8s_version, max_file_bytes),
        Command::Scan {
            policies,
            objects,
            output,
            reports,
            k8s_version,
            max_file_bytes,
        } => on_big_stack(move || {
            let files = (policies.as_path(), objects.as_path(), max_file_bytes);
            run_scan(files, output, reports, &k8s_version)
        }),
        Command::Version => {
            emit_line(&format!("celgate {}", env!("CARGO_PKG_VERSION")));
            ExitCode::SUCCESS
        }
        Command::Eval {
            policies,
            request,
            operation,
            old,
            user,
            groups,
            namespace,
            subresource,
            dry_run,
            k8s_version,
            no_cluster_defaults,
            max_file_bytes,
        } => on_big_stack(move || {
            let manifest = ManifestFlags {
                operation,
                old,
                user,
                groups,
                namespace,
                subresource,
                dry_run,
            };
            match run_eval(
                (&policies, &request, max_file_bytes),
                manifest,
                &k8s_version,
                !no_cluster_defaults,
            ) {
                Ok(()) => ExitCode::SUCCESS,
                Err(Usage(msg)) => {
                    eprintln!("celgate: {msg}");
                    ExitCode::from(2)
                }
            }
        }),
        Command::Test {
            paths,
            filter,
            output,
            k8s_version,
            coverage,
            min_coverage,
            update,
            root,
            max_file_bytes,
        } => on_big_stack(move || {
            let flags = TestFlags {
                filter,
                output,
                k8s_version,
                coverage,
                min_coverage,
                update,
                root,
                max_file_bytes,
            };
            run_test(&paths, flags)
        }),
        Command::Expr {
            expr,
            vars,
            k8s_version,
            cost,
            max_file_bytes,
        } => on_big_stack(move || run_expr(&expr, &vars, &k8s_version, cost, max_file_bytes)),
    }
}

fn run_lint(policies: &Path, output: LogFormat, k8s_version: &str, max_bytes: u64) -> ExitCode {
    let linted = parse_version(k8s_version).and_then(|version| {
        let docs = if policies.is_dir() {
            load_folder(policies, max_bytes)
        } else {
            read_loaded(policies, max_bytes)
        }
        .map_err(|e| Usage(format!("--policies: {e}")))?;
        let docs: Vec<Json> = docs.into_iter().map(|d| d.object).collect();
        celgate::lint::lint_documents(&docs, version).map_err(Usage)
    });
    let results = match linted {
        Ok(r) => r,
        Err(Usage(m)) => {
            eprintln!("celgate: {m}");
            return ExitCode::from(2);
        }
    };
    let text = match output {
        LogFormat::Json => celgate::lint::render_json(&results),
        LogFormat::Text => celgate::lint::render_text(&results),
    };
    emit(&text);
    if results.iter().any(|r| !r.warnings.is_empty()) {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

fn run_crd(command: CrdCommand, max_bytes: u64) -> ExitCode {
    use celgate::crd::cli;
    let answer = match command {
        CrdCommand::Check {
            mut files,
            crd,
            old,
            output,
            costs,
        } => (|| {
            files.extend(crd);
            let docs = read_all(&files, max_bytes)?;
            let olds = read_all(&old, max_bytes)?;
            cli::check_all(&docs, &olds, costs, matches!(output, LogFormat::Json))
                .ok_or_else(|| Usage("no CustomResourceDefinition in the files given".into()))
        })(),
        CrdCommand::Validate {
            mut files,
            crds,
            object,
            old,
            subresource,
            status,
            output,
        } => (|| {
            files.extend(object);
            let docs = if crds.is_dir() {
                load_folder(&crds, max_bytes)
            } else {
                read_loaded(&crds, max_bytes)
            }
            .map_err(|e| Usage(format!("--crds: {e}")))?;
            let catalog = cli::Catalog::new(docs.into_iter().map(|d| d.object))
                .map_err(|e| Usage(format!("--crds: {e}")))?;
            if catalog.is_empty() {
                return Err(Usage(format!(
                    "--crds: no CustomResourceDefinition serving a version in {}",
                    crds.display()
                )));
            }
            let objects = read_all(&files, max_bytes)?;
            let olds = read_all(&old, max_bytes)?;
            let status = status || matches!(subresource, Some(Subresource::Status));
            cli::validate_all(
                &catalog,
                &objects,
                &olds,
                status,
                matches!(output, LogFormat::Json),
            )
            .map_err(Usage)
        })(),
    };
    match answer {
        Ok(a) => {
            emit_line(&a.output);
            if a.accepted {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            }
        }
        Err(Usage(msg)) => {
            eprintln!("celgate: {msg}");
            ExitCode::from(2)
        }
    }
}

/// Warns on standard error of each file a folder's load skipped.
fn warn_skipped(skipped: &[celgate::source::folder::Skipped]) {
    for s in skipped {
        eprintln!("warning: {s}");
    }
}

/// Every object of a folder (read recursively), warning of each file skipped (not a regular
/// file, over `max_bytes`).
fn load_folder(dir: &Path, max_bytes: u64) -> Result<Vec<celgate::source::folder::Loaded>, String> {
    let load = celgate::source::folder::load(dir, max_bytes).map_err(|e| e.to_string())?;
    warn_skipped(&load.skipped);
    Ok(load.objects)
}

/// The documents of one file (`-`: standard input), multi-document YAML or JSON; a `List`
/// gives its items. A file that is not a regular file or is over `max_bytes` is refused.
fn read_loaded(
    path: &Path,
    max_bytes: u64,
) -> Result<Vec<celgate::source::folder::Loaded>, String> {
    let text = if path == Path::new("-") {
        celgate::source::read::read_stdin(max_bytes)
    } else {
        celgate::source::read::read_text(path, max_bytes)
    }
    .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    celgate::source::folder::parse_documents(path, &text).map_err(|e| e.to_string())
}

/// The documents of every file, in order.
fn read_all(paths: &[PathBuf], max_bytes: u64) -> Result<Vec<Json>, Usage> {
    let mut out = Vec::new();
    for p in paths {
        out.extend(
            read_loaded(p, max_bytes)
                .map_err(Usage)?
                .into_iter()
                .map(|d| d.object),
        );
    }
    Ok(out)
}

fn run_expr(
    expr: &str,
    vars: &[String],
    k8s_version: &str,
    show_cost: bool,
    max_bytes: u64,
) -> ExitCode {
    let loaded =
        match parse_version(k8s_version).and_then(|v| load_vars(vars, max_bytes).map(|l| (v, l))) {
            Ok(x) => x,
            Err(Usage(msg)) => {
                eprintln!("celgate: {msg}");
                return ExitCode::from(2);
            }
        };
    let (version, loaded) = loaded;
    let with_params = loaded.iter().any(|(n, _)| n == "params");
    let (mut env, slots) = vap_env(
        version,
        Decls {
            params: with_params,
            authorizer: true,
        },
    );
    let mut values: Vec<Value<'_>> = vec![Value::Null; env.variables().len()];
    let authz = AuthorizerValue::new(Arc::new(NoAuthorizationData));
    let request = loaded
        .iter()
        .find(|(n, _)| n == "request")
        .map(|(_, j)| j.clone())
        .unwrap_or_default();
    if let (Some(a), Some(r)) = (slots.authorizer, slots.request_resource) {
        values[r] = Value::opaque(authz.request_resource(request_resource_attributes(&request)));
        values[a] = Value::opaque(authz);
    }
    for (name, json) in &loaded {
        let slot = match env.variable(name) {
            Some((slot, _)) => slot,
            None => {
                values.push(Value::Null);
                env.declare(name, Type::Dyn)
            }
        };
        values[slot] = Value::from_json(json);
    }
    let program = match env.compile(expr) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(1);
        }
    };
    let mut meter = Meter::with_limit(PER_CALL_LIMIT);
    let result = program.eval(&values, &mut meter);
    if show_cost {
        eprintln!("cost: {}", meter.cost);
    }
    match result {
        Ok(v) => {
            emit_line(
                &serde_json::to_string_pretty(&v.to_json()).unwrap_or_else(|_| "null".into()),
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("evaluation error: {e}");
            ExitCode::from(1)
        }
    }
}

fn parse_version(v: &str) -> Result<u16, Usage> {
    celgate::cel::parse_k8s_version(v).map_err(|e| Usage(format!("--k8s-version: {e}")))
}

fn load_vars(vars: &[String], max_bytes: u64) -> Result<Vec<(String, Json)>, Usage> {
    vars.iter()
        .map(|spec| {
            let (name, file) = spec
                .split_once('=')
                .ok_or_else(|| Usage(format!("--var takes NAME=FILE, got {spec:?}")))?;
            Ok((name.to_string(), read_document(Path::new(file), max_bytes)?))
        })
        .collect()
}

/// Reads one JSON or YAML document (JSON errors for JSON text, with their position).
fn read_document(path: &Path, max_bytes: u64) -> Result<Json, Usage> {
    let text = celgate::source::read::read_text(path, max_bytes)
        .map_err(|e| Usage(format!("cannot read {}: {e}", path.display())))?;
    celgate::source::folder::parse_document(path, &text)
        .map_err(|e| Usage(format!("{}: {e}", path.display())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    /// Every subcommand and every flag or argument says what it is for in `--help`.
    #[test]
    fn every_command_and_argument_has_help() {
        fn walk(cmd: &clap::Command, path: &str, missing: &mut Vec<String>) {
            let path = format!("{path} {}", cmd.get_name()).trim().to_string();
            if cmd.get_about().is_none()
                && path != "celgate help"
                && !path.starts_with("celgate help ")
            {
                missing.push(path.clone());
            }
            for arg in cmd.get_arguments() {
                // clap's own --help and --version.
                if matches!(arg.get_id().as_str(), "help" | "version") {
                    continue;
                }
                if arg.get_help().is_none() && arg.get_long_help().is_none() {
                    missing.push(format!("{path} {}", arg.get_id()));
                }
            }
            for sub in cmd.get_subcommands() {
                walk(sub, &path, missing);
            }
        }
        let mut missing = Vec::new();
        let mut cli = Cli::command();
        cli.build();
        walk(&cli, "", &mut missing);
        assert!(missing.is_empty(), "without help text: {missing:?}");
    }

    #[test]
    fn cli_is_well_formed() {
        Cli::command().debug_assert();
    }
}

/// `celgate serve`'s certificate controller (`celgate::certs`).
#[derive(clap::Args)]
struct CertControllerFlags {
    /// Manage the serving certificate at run time in this Secret (created when missing): a CA
    /// and a certificate for the --cert-dns-names, the CA injected into the caBundle of
    /// --cert-webhook, both rotated before expiry. Instead of --tls-cert or --self-signed.
    #[arg(long, value_name = "NAME", conflicts_with_all = ["tls_cert", "self_signed"])]
    cert_secret: Option<String>,
    /// Namespace of --cert-secret (the Deployment passes its own).
    #[arg(long, value_name = "NS", env = "POD_NAMESPACE", default_value = "")]
    cert_namespace: String,
    /// The ValidatingWebhookConfiguration whose webhooks get the CA bundle in caBundle.
    #[arg(long, value_name = "NAME", default_value = "")]
    cert_webhook: String,
    /// A name of the serving certificate (repeatable): the Service's DNS names, e.g.
    /// `celgate.celgate-system.svc`.
    #[arg(long = "cert-dns-name", value_name = "NAME")]
    cert_dns_names: Vec<String>,
    /// Lifetime of each CA and serving certificate.
    #[arg(long, value_name = "DURATION", default_value = "8760h")]
    cert_validity: String,
    /// A rotation starts this long before the certificate expires.
    #[arg(long, value_name = "DURATION", default_value = "720h")]
    cert_renew_before: String,
    /// The wait between the steps of a rotation (the new CA trusted beside the old, the new
    /// certificate served, the old CA dropped), for every replica and the API server to see
    /// each step; at least twice --cert-check-interval.
    #[arg(long, value_name = "DURATION", default_value = "1m")]
    cert_overlap: String,
    /// How often each replica checks the Secret and the caBundle (and re-injects a caBundle
    /// that was overwritten).
    #[arg(long, value_name = "DURATION", default_value = "10s")]
    cert_check_interval: String,
}

impl CertControllerFlags {
    /// The certificate source, when --cert-secret is given.
    fn source(
        self,
        api_url: Option<&str>,
        kubeconfig: Option<&Path>,
    ) -> Result<Option<CertSource>, String> {
        let Some(secret) = self.cert_secret else {
            return Ok(None);
        };
        let duration = |flag: &str, text: &str| {
            celgate::apimachinery::duration::parse_go_duration(text)
                .filter(|n| *n > 0)
                .map(|n| Duration::from_nanos(n as u64))
                .ok_or_else(|| format!("{flag} {text:?}: not a positive duration such as 720h"))
        };
        let options = celgate::certs::Options {
            namespace: self.cert_namespace,
            secret,
            webhook: self.cert_webhook,
            names: self.cert_dns_names,
            timing: celgate::certs::Timing {
                validity: duration("--cert-validity", &self.cert_validity)?,
                renew_before: duration("--cert-renew-before", &self.cert_renew_before)?,
                overlap: duration("--cert-overlap", &self.cert_overlap)?,
            },
            check_every: duration("--cert-check-interval", &self.cert_check_interval)?,
        };
        options.check()?;
        let api_url = api_url
            .map(str::parse)
            .transpose()
            .map_err(|e| format!("--kube-api-url: {e}"))?;
        let connect = celgate::source::kube::Connect {
            api_url,
            kubeconfig: kubeconfig.map(Path::to_path_buf),
        };
        Ok(Some(CertSource::Controller { connect, options }))
    }
}
