//! `celgate serve`'s flags: their names, defaults, help and value checks (the checks that
//! involve several flags are `serve::run`'s).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use crate::cli::flags::{self, Checked, K8sVersion, LogFormat, Namespaces, ServiceAccount};

use super::certs::CertControllerFlags;

// No doc comment: clap would take it for the command's help, which `Command::Serve` gives.
#[derive(clap::Args)]
pub struct ServeArgs {
    /// Where policies come from: a folder of manifests, or the cluster's API server.
    #[arg(long, value_enum, default_value = "folder")]
    pub source: SourceKind,
    /// `enforce`: answer with the verdict. `observe`: evaluate every policy as in enforce
    /// mode but always answer allowed, without warnings or audit annotations (for API
    /// servers that enforce the same policies in-tree), and record each result.
    #[arg(long, value_enum, default_value = "enforce")]
    pub mode: ServeMode,
    /// Log each failed or errored (policy, binding) result at info level (uid, resource,
    /// namespace, name, policy, binding, actions, result, message): one JSON object each
    /// with `--log-format json`. Always on in observe mode.
    #[arg(long)]
    pub log_results: bool,
    /// Folder of policies, bindings, params, namespaces and RBAC objects (required with
    /// `--source folder`, e.g. `--policies examples/policies`). With `--source kubernetes`: take only the
    /// policies and bindings from this folder (watched and reloaded as in folder mode; its
    /// other objects are ignored with a warning) instead of the cluster's, whose own are
    /// not watched (the API server enforces them); namespaces, params, the authorizer and
    /// CRDs still come from the cluster. For policies the API server must not enforce
    /// (CEL newer than the cluster's, canaries); the CEL environment is then --k8s-version
    /// (default: the newest celgate knows), not the API server's.
    #[arg(long, value_name = "DIR")]
    pub policies: Option<PathBuf>,
    /// A change to the policy folder is loaded once no file changed for this long
    /// (`--source folder`, or `--policies`), so that a file rewritten in place is not read
    /// half-written.
    #[arg(long, value_name = "DURATION", default_value = "2s", value_parser = Checked(flags::duration))]
    pub reload_settle: Duration,
    /// Accept a policy folder that binds no policy (`--source folder`, or `--policies`); without it such a
    /// folder is refused: at start celgate stays unready, later the last good snapshot stays.
    #[arg(long)]
    pub allow_empty_policies: bool,
    /// Refuse a request in a namespace the policy folder does not define with `namespaces
    /// "x" not found`, as `celgate eval` does (`--source folder`); without it such a
    /// namespace is served as a bare one (its name and `kubernetes.io/metadata.name` label).
    #[arg(long)]
    pub strict_namespaces: bool,
    /// Largest file read from the policy folder; a larger one, or one that is not a regular file (a FIFO,
    /// a device), is skipped, logged and counted in
    /// celgate_config_problems (kind File); the objects it last gave stay served.
    #[arg(long, value_name = "BYTES", default_value_t = celgate::source::read::DEFAULT_MAX_FILE_BYTES)]
    pub max_file_bytes: u64,
    /// Unknown and duplicate fields of the policy folder's policies, bindings and
    /// ConfigMaps, as `kubectl apply --validate`: `strict` refuses the load (the last good
    /// snapshot stays; not ready before the first), `warn` logs each, `ignore`.
    #[arg(long, value_name = "strict|warn|ignore", default_value_t = celgate::source::folder::FieldValidation::Strict)]
    pub field_validation: celgate::source::folder::FieldValidation,
    /// API server URL (`--source kubernetes`), without credentials (`kubectl proxy`);
    /// default: the in-cluster service account, or the kubeconfig.
    #[arg(long, value_name = "URL", conflicts_with = "kubeconfig", value_parser = Checked(flags::url))]
    pub kube_api_url: Option<axum::http::Uri>,
    /// Kubeconfig file whose current context to use (`--source kubernetes`); default: the
    /// in-cluster service account, else `KUBECONFIG`, else `~/.kube/config`.
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// How long a SubjectAccessReview answer is reused (`--source kubernetes`).
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = Checked(flags::duration))]
    pub authz_cache_ttl: Duration,
    /// Time a SubjectAccessReview may take; past it the check is a CEL error, handled by
    /// the policy's failurePolicy.
    #[arg(long, value_name = "DURATION", default_value = "2s", value_parser = Checked(flags::duration))]
    pub authz_timeout: Duration,
    /// Longest wait between tries of a failing watch, list or discovery lookup
    /// (`--source kubernetes`): after an API server outage celgate follows within about
    /// this long, plus a re-list.
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = Checked(flags::positive_duration))]
    pub kube_retry_max: Duration,
    /// Every this long (`--source kubernetes`) each watched resource is listed again in
    /// full beside its watch and compared with celgate's copy: objects that differ (changes
    /// the watch missed) are put right, counted in
    /// celgate_source_resync_drift_objects_total and logged; a list older than what was
    /// seen (etcd replaced or restored) lists every resource again. `0` turns it off.
    #[arg(long, value_name = "DURATION", default_value = "10m", value_parser = Checked(flags::duration))]
    pub resync_interval: Duration,
    /// List and watch namespaced param kinds only in these namespaces (`--source
    /// kubernetes`), for RBAC that grants them there only (Roles); a param elsewhere counts
    /// as missing and its binding is reported (ParamNamespaceNotWatched). Cluster-scoped
    /// param kinds are watched whole. Default: every namespace.
    #[arg(long, value_name = "NS[,NS...]")]
    pub param_namespaces: Option<Namespaces>,
    /// Do not report misconfigured policies and bindings as Kubernetes Events.
    #[arg(long)]
    pub no_events: bool,
    /// This replica's name in Events (the Deployment passes the pod name).
    #[arg(long, env = "POD_NAME", default_value = "")]
    pub pod_name: String,
    /// Namespace of the Lease that picks the one replica reporting Events (the Deployment
    /// passes its own); empty: every replica reports.
    #[arg(long, env = "POD_NAMESPACE", default_value = "")]
    pub lease_namespace: String,
    /// Name of that Lease (it also picks the one replica writing policy reports).
    #[arg(long, default_value = "celgate-events")]
    pub lease_name: String,
    /// On SIGTERM, the Lease holder releases the Lease (another replica takes over at
    /// once) beside the drain, and gives up after this long (the Lease then expires);
    /// keep it well below the pod's terminationGracePeriodSeconds.
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = Checked(flags::positive_duration))]
    pub lease_release_timeout: Duration,
    /// Write admission results as policy reports (`--source kubernetes`): `wgpolicy`
    /// (wgpolicyk8s.io/v1alpha2 PolicyReport and ClusterPolicyReport), `openreports`
    /// (openreports.io/v1alpha1 Report and ClusterReport) or `off`. One report per
    /// namespace plus one cluster report, named `celgate-admission`, written by the Lease
    /// holder with server-side apply.
    #[arg(long, value_enum, default_value = "off")]
    pub reports: ServeReports,
    /// Each policy report is written at most once per this interval.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = Checked(flags::positive_duration))]
    pub reports_interval: Duration,
    /// Results listed per policy report at most, failures and errors first (the API
    /// server refuses objects over 1.5 MiB); the annotation celgate.io/results-dropped
    /// counts those left out, and the summary counts every result.
    #[arg(long, value_name = "N", default_value_t = celgate::source::kube::reports::DEFAULT_MAX_RESULTS, value_parser = Checked(flags::at_least_one::<usize>))]
    pub reports_max_results: usize,
    /// Resources whose latest admission results each replica keeps at most for the
    /// reports; past it, the one recorded longest ago is dropped (counted in
    /// celgate_report_resources_evicted_total). Background scans also drop resources
    /// that no longer exist.
    #[arg(long, value_name = "N", default_value_t = celgate::source::kube::reports::DEFAULT_MAX_RESOURCES, value_parser = Checked(flags::at_least_one::<usize>))]
    pub reports_max_resources: usize,
    /// Background scans (`--source kubernetes`): every existing object some binding
    /// selects is evaluated as its CREATE by celgate's service account, at start, after
    /// each policy or binding change, and every this long; `0` turns them off. Results go
    /// to the metrics (source="scan") and, with --reports, to the reports
    /// `celgate-background`. Only the Lease holder scans.
    #[arg(long, value_name = "DURATION", default_value = "1h", value_parser = Checked(flags::duration))]
    pub background_interval: Duration,
    /// Objects per list request of a background scan (`limit`; `continue` follows).
    #[arg(long, value_name = "N", default_value_t = celgate::source::kube::background::DEFAULT_PAGE_SIZE, value_parser = Checked(flags::at_least_one::<u32>))]
    pub background_page_size: u32,
    /// Requests per second a background scan sends the API server at most (discovery
    /// and every page).
    #[arg(long, value_name = "QPS", default_value_t = celgate::source::kube::background::DEFAULT_QPS, value_parser = Checked(flags::rate))]
    pub background_qps: f64,
    /// Resources a background scan lists at once.
    #[arg(long, value_name = "N", default_value_t = celgate::source::kube::background::DEFAULT_CONCURRENCY, value_parser = Checked(flags::at_least_one::<usize>))]
    pub background_concurrency: usize,
    /// Policy and binding changes within this window make one background scan.
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = Checked(flags::duration))]
    pub background_debounce: Duration,
    /// celgate's service account, `[NAMESPACE:]NAME` (the namespace defaults to
    /// --lease-namespace, else `celgate`): the user of background scans' requests, whose
    /// `authorizer` checks ask about it.
    #[arg(
        long,
        value_name = "[NAMESPACE:]NAME",
        env = "CELGATE_SERVICE_ACCOUNT",
        default_value = "celgate"
    )]
    pub service_account: ServiceAccount,
    /// HTTPS address of the webhook (POST /validate, /healthz, /readyz).
    #[arg(long, default_value = "0.0.0.0:8443", value_parser = Checked(flags::address))]
    pub listen: SocketAddr,
    /// Plain-HTTP address for /metrics; `off` disables it.
    #[arg(long, default_value = "0.0.0.0:9090", value_parser = Checked(flags::optional_address))]
    // Fully qualified, so that clap takes the value parser's `None` for `off` instead of
    // making the flag optional.
    pub metrics_listen: ::std::option::Option<SocketAddr>,
    /// PEM certificate chain (reloaded when it changes).
    #[arg(long, requires = "tls_key", conflicts_with = "self_signed")]
    pub tls_cert: Option<PathBuf>,
    /// PEM private key (reloaded when it changes).
    #[arg(long, requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Generate a CA and a serving certificate (development); the CA is printed, or
    /// written to --ca-out.
    #[arg(long)]
    pub self_signed: bool,
    /// Names for the self-signed certificate (DNS names or IP addresses).
    #[arg(long = "dns-name", default_values_t = ["localhost".to_string(), "127.0.0.1".to_string()])]
    pub dns_names: Vec<String>,
    /// Where to write the self-signed CA bundle.
    #[arg(long)]
    pub ca_out: Option<PathBuf>,
    /// Require client certificates signed by this CA (PEM).
    #[arg(long)]
    pub client_ca: Option<PathBuf>,
    #[command(flatten)]
    pub cert_controller: CertControllerFlags,
    /// Who keeps the `rules` of the --cert-webhook configuration (and of the
    /// --cert-mutating-webhook one): `static`, whoever rendered it (celgate leaves them
    /// alone); `dynamic`, celgate, to what the served bindings can match (widened before a
    /// snapshot with new bindings is served, narrowed after; needs --cert-secret), as
    /// `celgate webhook-rules` (`--phase mutating` for the mutating one) prints them, with the
    /// namespaceSelector or objectSelector every binding requires added to the webhook's own.
    #[arg(long, value_enum, default_value = "static")]
    pub webhook_rules: WebhookRules,
    /// Log lines as text or as one JSON object each (on standard error).
    #[arg(long, value_enum, default_value = "text")]
    pub log_format: LogFormat,
    /// Colour text logs: `auto` when standard error is a terminal.
    #[arg(long, value_enum, default_value = "auto")]
    pub log_color: LogColor,
    /// Log level or filter (RUST_LOG syntax); RUST_LOG wins when set.
    #[arg(long, default_value = "info")]
    pub log_level: String,
    /// Largest AdmissionReview body accepted.
    #[arg(long, default_value_t = 16 << 20)]
    pub max_body_bytes: usize,
    /// Request and answer bytes buffered at once by all connections; a request that would
    /// pass it is answered 503 with Retry-After. A body's bytes past its first 64 KiB may
    /// fill only three quarters of it (the rest is kept for small reviews), so it must be
    /// at least 4/3 of --max-body-bytes. The default is a quarter of the chart's memory limit.
    #[arg(long, value_name = "BYTES", default_value_t = celgate::server::DEFAULT_MAX_BUFFERED)]
    pub max_buffered_bytes: usize,
    /// Largest request head (HTTP/1.1: also each connection's read and write buffers;
    /// HTTP/2: the header list); a larger head is refused with 431. At least 8192.
    #[arg(long, value_name = "BYTES", default_value_t = 32 << 10, value_parser = Checked(flags::header_bytes))]
    pub max_header_bytes: usize,
    /// Reviews evaluated at once; more are refused with 429.
    #[arg(long, default_value_t = 512)]
    pub max_inflight: usize,
    /// Threads that evaluate reviews, at most; 0: one per core plus 32 (plus 64 with
    /// `--source kubernetes`, whose evaluations may wait on the API server). One evaluation
    /// per core runs at a time; the other threads serve beside slow ones (past 10 ms), so
    /// that up to that many slow reviews at once (each stopped at its deadline) cannot hold
    /// up the fast ones.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub eval_threads: usize,
    /// How long a review is evaluated on the task that read it before it goes to the
    /// evaluation threads: a review done by then is answered without the hand-over between
    /// threads (most take tens of microseconds); one that needs longer starts over on them,
    /// so no review holds a connection worker longer than this. 0s: every review goes to the
    /// evaluation threads. With `--source kubernetes` (evaluations may wait on the API
    /// server) every review does.
    #[arg(long, value_name = "DURATION", default_value = "500us", value_parser = Checked(flags::duration))]
    pub inline_eval_time: Duration,
    /// Bytes one expression's evaluation may build (strings, lists, maps, run-time
    /// regexes); past it the expression stops with `operation cancelled: memory limit
    /// exceeded`, an error under its policy's failurePolicy. Also the bytes one
    /// MutatingAdmissionPolicy JSON patch's `copy` operations may write.
    #[arg(long, value_name = "BYTES", default_value_t = celgate::cel::DEFAULT_MEMORY_LIMIT, value_parser = Checked(flags::at_least_one::<u64>))]
    pub cel_memory_limit: u64,
    /// How deep the object and an apply configuration may nest when a MutatingAdmissionPolicy
    /// merges one; deeper is that mutation's error under its policy's failurePolicy.
    #[arg(long, value_name = "LEVELS", default_value_t = celgate::mutating::DEFAULT_MAX_APPLY_DEPTH, value_parser = Checked(flags::at_least_one::<usize>))]
    pub max_apply_depth: usize,
    /// Deadline of a review when the API server sends no `?timeout=`.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = Checked(flags::positive_duration))]
    pub default_timeout: Duration,
    /// Webhook connections open at once (lowered to fit the open-file limit). At the cap no
    /// connection is accepted until one ends, and one without a request under way is
    /// closed: a stalled handshake, else the one silent the longest, else a kept-alive one.
    #[arg(long, value_name = "N", default_value_t = 1024, value_parser = Checked(flags::at_least_one::<usize>))]
    pub max_connections: usize,
    /// Metrics connections open at once.
    #[arg(long, value_name = "N", default_value_t = 16, value_parser = Checked(flags::at_least_one::<usize>))]
    pub metrics_max_connections: usize,
    /// A connection without a request for this long is closed (longer than the API
    /// server's 90 s, so that it closes its idle connections first).
    #[arg(long, value_name = "DURATION", default_value = "120s", value_parser = Checked(flags::positive_duration))]
    pub idle_timeout: Duration,
    /// Time a client has for the TLS handshake, to start its first request, to send a
    /// request's headers and body, and to take its answers (past it without progress, the
    /// connection is closed).
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = Checked(flags::positive_duration))]
    pub client_timeout: Duration,
    /// The Kubernetes version whose CEL libraries are available (1.N or v1.N); default:
    /// the API server's own with `--source kubernetes` (without `--policies`), else the
    /// newest celgate knows.
    #[arg(long, value_name = "1.N")]
    pub k8s_version: Option<K8sVersion>,
}

#[derive(Clone, Copy, clap::ValueEnum)]
pub enum SourceKind {
    Folder,
    Kubernetes,
}

/// `--webhook-rules`.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum WebhookRules {
    /// Left alone.
    Static,
    /// Kept to what the served bindings can match.
    Dynamic,
}

/// How `celgate serve` answers.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum ServeMode {
    /// The verdict: denials, warnings and audit annotations.
    Enforce,
    /// Always allowed, without warnings or audit annotations; results are only recorded
    /// (metrics, logs).
    Observe,
}

/// When text logs are coloured.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum LogColor {
    /// When standard error is a terminal.
    Auto,
    Always,
    Never,
}

/// `celgate serve --reports`.
#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ServeReports {
    Wgpolicy,
    Openreports,
    Off,
}
