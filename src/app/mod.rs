//! The composition root of `celgate serve` (and, in [`scan`], of `celgate scan`): it owns the
//! wiring of the service, which no other layer knows. It picks the policy source (a folder and its watcher, or the cluster's
//! watchers with the SubjectAccessReview authorizer), loads the TLS identity and watches its
//! files, fills the server's [`AppState`] (snapshot handle, readiness, metrics) from the
//! source, and starts the listeners through [`server::listen`]. Used by `main.rs` and by the
//! integration tests, which start the real service on ephemeral ports.

mod cluster;
mod folder;
pub mod scan;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::certs;
use crate::server::tls::{self, Identity, TlsError};
use crate::server::{self, Answering, AppState, Bound, Limits, Listen, ServerError};
use crate::source::folder::FolderSource;
use crate::source::kube::authorizer::SarOptions;
use crate::source::kube::{ClientError, KubeOptions, KubeSource};

/// Where the serving certificate comes from.
#[derive(Debug, Clone)]
// Built once at start: the size of the controller's settings does not matter.
#[allow(clippy::large_enum_variant)]
pub enum CertSource {
    /// PEM files, reloaded when they change.
    Files { cert: PathBuf, key: PathBuf },
    /// Generated at start for these names; the CA is returned to register.
    SelfSigned { names: Vec<String> },
    /// Kept in a Secret and rotated by the certificate controller ([`crate::certs`]), which
    /// also injects its CA into the webhook configuration; the service starts once it has
    /// a certificate.
    Controller {
        /// The API server: a URL, a kubeconfig, or the in-cluster configuration.
        connect: crate::source::kube::Connect,
        options: certs::Options,
    },
}

/// Where policies come from.
// Built once at start: the size of the larger variant does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone)]
pub enum PolicySource {
    /// A folder of manifests, reloaded when its files change.
    Folder(FolderSource),
    /// The cluster's policies, bindings, params and namespaces, through the API server.
    Kubernetes {
        /// The API server; `None`: `kubeconfig`, else in-cluster configuration or the
        /// default kubeconfig.
        api_url: Option<axum::http::Uri>,
        /// A kubeconfig file whose current context to use (`--kubeconfig`).
        kubeconfig: Option<PathBuf>,
        options: KubeOptions,
        /// `authorizer` checks by SubjectAccessReview; `None`: no cluster authorizer (checks
        /// read the RBAC objects of the snapshot, which a cluster source does not hold).
        sar: Option<SarOptions>,
    },
}

/// Who keeps the webhook configuration's `rules` (`--webhook-rules`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum WebhookRulesMode {
    /// Someone else (the chart's rendered rules, GitOps): celgate leaves them alone.
    #[default]
    Static,
    /// celgate, to what the served bindings can match ([`certs::rules`]), through the
    /// certificate controller's client and configuration.
    Dynamic,
}

/// The policy folder of `ServeConfig::default()` (for tests; `celgate serve` in folder mode
/// requires `--policies`).
pub const DEFAULT_POLICY_DIR: &str = "examples/policies";

/// `--listen`'s default: HTTPS on every interface, port 8443.
pub const DEFAULT_LISTEN: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 8443);

/// `--metrics-listen`'s default: plain HTTP on every interface, port 9090.
pub const DEFAULT_METRICS_LISTEN: SocketAddr =
    SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 9090);

/// `--dns-name`'s default: the names of a self-signed certificate.
pub const DEFAULT_DNS_NAMES: [&str; 2] = ["localhost", "127.0.0.1"];

/// How often `celgate serve` checks the policy folder and certificate files for changes.
pub const DEFAULT_POLL: Duration = Duration::from_secs(1);

/// What `celgate serve` runs; [`Default`] holds the command's defaults, so that a caller
/// names only what it changes (`ServeConfig { listen, ..Default::default() }`).
#[derive(Debug, Clone)]
pub struct ServeConfig {
    pub source: PolicySource,
    pub listen: SocketAddr,
    pub metrics_listen: Option<SocketAddr>,
    pub cert: CertSource,
    pub client_ca: Option<PathBuf>,
    pub limits: Limits,
    /// Enforce or observe mode.
    pub answering: Answering,
    /// How often the policy folder and certificate files are checked for changes.
    pub poll: Duration,
    /// Kubernetes minor version of the CEL environment.
    pub version: u16,
    /// Who keeps the webhook configuration's rules.
    pub webhook_rules: WebhookRulesMode,
}

impl Default for ServeConfig {
    /// `celgate serve` without flags: the folder [`DEFAULT_POLICY_DIR`] (the folder flags'
    /// defaults), the default listeners, limits and answering (enforce), polled every
    /// [`DEFAULT_POLL`], the newest Kubernetes version celgate knows. The command makes its
    /// user pick a certificate; the default is what `--self-signed` gives, for
    /// [`DEFAULT_DNS_NAMES`].
    fn default() -> Self {
        ServeConfig {
            source: PolicySource::Folder(FolderSource::new(DEFAULT_POLICY_DIR)),
            listen: DEFAULT_LISTEN,
            metrics_listen: Some(DEFAULT_METRICS_LISTEN),
            cert: CertSource::SelfSigned {
                names: DEFAULT_DNS_NAMES.map(String::from).to_vec(),
            },
            client_ca: None,
            limits: Limits::default(),
            answering: Answering::default(),
            poll: DEFAULT_POLL,
            version: crate::cel::NEWEST_MINOR,
            webhook_rules: WebhookRulesMode::Static,
        }
    }
}

/// Why the service did not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StartError {
    /// The serving certificate, its key or the client CA cannot be read, parsed or
    /// generated, or rustls refuses the configuration.
    #[error(transparent)]
    Tls(#[from] TlsError),
    /// A listener cannot be bound.
    #[error(transparent)]
    Listen(#[from] ServerError),
    /// The Kubernetes client cannot be configured (`--source kubernetes`).
    #[error(transparent)]
    Cluster(#[from] ClientError),
    /// The certificate controller's settings are refused, or it stopped before issuing a
    /// certificate.
    #[error("certificate controller: {0}")]
    Certificates(#[from] certs::OptionsError),
    /// The certificate controller stopped before it issued the first certificate.
    #[error("certificate controller: stopped before issuing a certificate")]
    CertificatesStopped,
    /// Dynamic webhook rules without the certificate controller, whose client and
    /// configuration they use.
    #[error("--webhook-rules dynamic needs the certificate controller (--cert-secret and --cert-webhook): it keeps the rules of that configuration")]
    RulesNeedController,
    /// The policy folder does not exist or cannot be read (`--source folder`): a typo or a
    /// relative path run from elsewhere, which waiting would not fix.
    #[error("cannot read the policy folder {}: {source}", dir.display())]
    PolicyFolder {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The policy folder is a file.
    #[error("cannot read the policy folder {}: not a directory", dir.display())]
    PolicyFolderNotDirectory { dir: PathBuf },
}

/// Why `celgate serve` stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The tokio runtime cannot be built (threads cannot be started).
    #[error("cannot start the runtime: {0}")]
    Runtime(#[source] std::io::Error),
    /// The service did not start.
    #[error(transparent)]
    Start(#[from] StartError),
    /// The self-signed CA bundle cannot be written to `--ca-out`.
    #[error("cannot write the CA bundle to {}: {source}", path.display())]
    CaOut {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// `celgate serve`: builds the runtime, starts the service, hands out the self-signed CA
/// (written to `ca_out`, else printed), and serves until SIGTERM or Ctrl-C, then drains.
/// `eval_threads` 0 picks the number of evaluation threads from the cores and the source.
pub fn serve(
    cfg: ServeConfig,
    eval_threads: usize,
    ca_out: Option<&Path>,
) -> Result<(), ServeError> {
    // Evaluation runs on the server's pool (`server::pool`): one evaluation per core at a
    // time, and a spare thread beside each evaluation past `server::pool::SLOW_EVALUATION`, so
    // slow reviews (each running up to its deadline) do not hold up the others. By default
    // 32 slow reviews at once leave the others their cores (`pool::default_eval_threads`);
    // in a cluster, where an evaluation may also wait on the API server (a
    // SubjectAccessReview, a namespace GET), 64.
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    let evaluators = match (eval_threads, &cfg.source) {
        (n, _) if n > 0 => n,
        (_, PolicySource::Folder(_)) => crate::server::pool::default_eval_threads(cores, false),
        (_, PolicySource::Kubernetes { .. }) => {
            crate::server::pool::default_eval_threads(cores, true)
        }
    };
    let mut cfg = cfg;
    cfg.limits.eval_threads = evaluators;
    // The blocking pool compiles policies, which recurses once per nesting level of an
    // expression: its threads (and the workers) get a stack sized for the deepest one.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_stack_size(32 << 20)
        .max_blocking_threads(evaluators)
        .build()
        .map_err(ServeError::Runtime)?;
    runtime.block_on(async move {
        let running = start(cfg).await?;
        if let Some(ca) = &running.ca_pem {
            match ca_out {
                Some(path) => {
                    std::fs::write(path, ca).map_err(|source| ServeError::CaOut {
                        path: path.to_path_buf(),
                        source,
                    })?;
                    tracing::info!(path = %path.display(), "self-signed CA written");
                }
                None => {
                    use std::io::Write;
                    // Not print!: a closed standard output must not panic the server.
                    let mut out = std::io::stdout().lock();
                    if let Err(e) = writeln!(out, "{ca}").and_then(|()| out.flush()) {
                        tracing::warn!(error = %e, "cannot print the self-signed CA (--ca-out writes it to a file)");
                    }
                }
            }
        }
        let metrics = running
            .bound
            .metrics
            .map_or_else(|| "off".to_string(), |a| a.to_string());
        tracing::info!(webhook = %running.bound.webhook, %metrics, "serving");
        wait_for_signal().await;
        tracing::info!("shutting down: no new connections, finishing in-flight requests");
        running.shutdown().await;
        Ok(())
    })
}

async fn wait_for_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = ctrl_c => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = ctrl_c.await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = ctrl_c.await;
    }
}

/// A started service.
pub struct Running {
    pub bound: Bound,
    pub state: Arc<AppState>,
    /// The self-signed CA, when the certificate was generated.
    pub ca_pem: Option<String>,
    shutdown: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
    /// The cluster source, kept alive while serving.
    pub cluster: Option<Arc<KubeSource>>,
    /// The certificate controller, stopped when dropped.
    certs: Option<certs::Handle>,
    /// The webhook rules controller, stopped when dropped.
    rules: Option<Arc<certs::rules::RulesHandle>>,
}

impl Running {
    /// Stops accepting and lets in-flight requests finish, and meanwhile releases the cluster
    /// source's Lease (another replica takes over Events, reports and scans at once); waits
    /// for both. The release is not waited on first: with the API server unreachable it may
    /// take its whole `--lease-release-timeout`, and the drain must fit in the pod's grace
    /// period.
    pub async fn shutdown(self) {
        let Running {
            shutdown,
            tasks,
            cluster,
            certs,
            rules,
            ..
        } = self;
        let _ = shutdown.send(true);
        let release = async {
            if let Some(cluster) = &cluster {
                cluster.release_lease().await;
            }
        };
        let drain = async {
            for t in tasks {
                let _ = t.await;
            }
        };
        tokio::join!(release, drain);
        drop(rules);
        drop(certs);
    }
}

/// Starts the service; returns once both listeners are bound and the first load was tried.
pub async fn start(cfg: ServeConfig) -> Result<Running, StartError> {
    let mut cert_controller = None;
    // The certificate controller's client, for the rules controller.
    let mut controller_client = None;
    if cfg.webhook_rules == WebhookRulesMode::Dynamic
        && !matches!(cfg.cert, CertSource::Controller { .. })
    {
        return Err(StartError::RulesNeedController);
    }
    match &cfg.source {
        PolicySource::Folder(source) => check_folder(&source.dir)?,
        PolicySource::Kubernetes { options, .. } => {
            if let Some(folder) = &options.policy_folder {
                check_folder(&folder.dir)?;
            }
        }
    }
    let (key, ca_pem) = match &cfg.cert {
        CertSource::Files { cert, key } => (tls::load_certified_key(cert, key)?, None),
        CertSource::Controller { connect, options } => {
            options.check()?;
            let client = crate::source::kube::client(connect.clone()).await?;
            controller_client = Some((client.clone(), options.clone()));
            let handle = certs::start(client, options.clone());
            let pair = first_certificate(&handle).await?;
            cert_controller = Some(handle);
            let key =
                tls::certified_key_from_pem(pair.cert_pem.as_bytes(), pair.key_pem.as_bytes())?;
            (key, None)
        }
        CertSource::SelfSigned { names } => {
            let s = tls::self_signed(names)?;
            let key = tls::certified_key_from_pem(s.cert_pem.as_bytes(), s.key_pem.as_bytes())?;
            (key, Some(s.ca_pem))
        }
    };
    let identity = Identity::new(key);
    let tls_config = tls::server_config(identity.clone(), cfg.client_ca.as_deref())?;
    let state = AppState::new(cfg.limits.clone(), cfg.answering);
    state
        .metrics
        .set_problem_reasons(&crate::source::kube::feedback::REASONS);
    if cfg.answering.mode == crate::review::Mode::Observe {
        tracing::info!("observe mode: every review is answered allowed; results are recorded");
    }
    if let Some(t) = identity.not_after() {
        state.metrics.certificate_expiry.set(t);
    }
    // Dynamic rules: snapshots are installed once the configuration's rules cover them.
    let rules = match (cfg.webhook_rules, controller_client) {
        (WebhookRulesMode::Dynamic, Some((client, options))) => {
            let target = state.clone();
            Some(Arc::new(certs::rules::start(
                client,
                options.configurations(),
                options.check_every,
                Arc::new(move |s| target.install(s)),
            )))
        }
        _ => None,
    };
    let publish = rules
        .clone()
        .map(|r| -> certs::rules::Install { Arc::new(move |s| r.publish(s)) });
    let mut folder_watch = None;
    let cluster = match &cfg.source {
        PolicySource::Folder(source) => {
            tracing::info!(k8s_version = %format!("1.{}", cfg.version), "CEL environment");
            if !source.strict_namespaces {
                state.set_services(crate::admission::Services {
                    authorizer: None,
                    namespace_lookup: Some(Arc::new(
                        crate::source::folder::BareNamespaces::default(),
                    )),
                });
            }
            let mut watch = folder::FolderWatch::new(state.clone(), source.clone(), cfg.version);
            if let Some(p) = &publish {
                watch = watch.publishing(p.clone());
            }
            // The first load does not wait for a quiet period: only for a read during which
            // nothing changed.
            watch.load_now().await;
            folder_watch = Some(watch);
            None
        }
        PolicySource::Kubernetes {
            api_url,
            kubeconfig,
            options,
            sar,
        } => {
            if !options.version_from_server {
                tracing::info!(k8s_version = %format!("1.{}", options.version), "CEL environment");
            }
            let connect = crate::source::kube::Connect {
                api_url: api_url.clone(),
                kubeconfig: kubeconfig.clone(),
            };
            // Policies and bindings from a folder: its watch feeds the cluster source.
            let feed = options
                .policy_folder
                .as_ref()
                .map(|_| Arc::new(crate::source::kube::PolicyFeed::default()));
            let source = cluster::start(
                &state,
                connect,
                options.clone(),
                sar.clone(),
                feed.clone(),
                publish.clone(),
            )
            .await?;
            if let (Some(folder), Some(feed)) = (&options.policy_folder, feed) {
                let version = options.version;
                let mut watch =
                    folder::FolderWatch::feeding(state.clone(), folder.clone(), version, feed);
                watch.load_now().await;
                folder_watch = Some(watch);
            }
            Some(source)
        }
    };
    let (tx, rx) = watch::channel(false);
    let at = Listen {
        webhook: cfg.listen,
        metrics: cfg.metrics_listen,
    };
    let (bound, tasks) = server::listen(&state, tls_config, &at, rx.clone()).await?;
    // Watchers end with the process; they hold no request state.
    if let Some(watch) = folder_watch {
        tokio::spawn(folder::watch(watch, cfg.poll, rx.clone()));
    }
    if let Some(c) = &cluster {
        tokio::spawn(cluster::report(state.clone(), c.clone(), rx.clone()));
    }
    if let CertSource::Files { cert, key } = &cfg.cert {
        let metrics_state = state.clone();
        let identity = identity.clone();
        tokio::spawn(tls::watch_files(
            identity.clone(),
            cert.clone(),
            key.clone(),
            cfg.poll,
            move |r| match r {
                Ok(()) => {
                    if let Some(t) = identity.not_after() {
                        metrics_state.metrics.certificate_expiry.set(t);
                    }
                    tracing::info!("serving certificate reloaded");
                }
                Err(e) => tracing::warn!(error = %e, "serving certificate not reloaded yet"),
            },
        ));
    }
    if let Some(handle) = &cert_controller {
        tokio::spawn(follow_certificates(
            identity.clone(),
            state.clone(),
            handle.serving.clone(),
        ));
    }
    Ok(Running {
        bound,
        state,
        ca_pem,
        shutdown: tx,
        tasks,
        cluster,
        certs: cert_controller,
        rules,
    })
}

/// The certificate controller's first pair; it retries until the API server answers.
async fn first_certificate(handle: &certs::Handle) -> Result<Arc<certs::Pair>, StartError> {
    let mut serving = handle.serving.clone();
    let first = serving
        .wait_for(Option::is_some)
        .await
        .map_err(|_| StartError::CertificatesStopped)?
        .clone();
    // `wait_for(Option::is_some)` returned: the value is `Some`.
    first.ok_or(StartError::CertificatesStopped)
}

/// Serves each new pair of the certificate controller from the next handshake on; ends with
/// the controller.
async fn follow_certificates(
    identity: Arc<Identity>,
    state: Arc<AppState>,
    mut serving: watch::Receiver<Option<Arc<certs::Pair>>>,
) {
    while serving.changed().await.is_ok() {
        let Some(pair) = serving.borrow_and_update().clone() else {
            continue;
        };
        match tls::certified_key_from_pem(pair.cert_pem.as_bytes(), pair.key_pem.as_bytes()) {
            Ok(key) => {
                identity.replace(key);
                if let Some(t) = identity.not_after() {
                    state.metrics.certificate_expiry.set(t);
                }
                tracing::info!("serving certificate replaced by the certificate controller");
            }
            Err(e) => tracing::warn!(error = %e, "certificate from the controller not served"),
        }
    }
}

/// Refuses a policy folder that is not there at start. Once serving, a folder that vanishes
/// keeps the last good snapshot (a volume being swapped); at start there is none to keep.
fn check_folder(dir: &Path) -> Result<(), StartError> {
    match std::fs::metadata(dir) {
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) => Err(StartError::PolicyFolderNotDirectory {
            dir: dir.to_path_buf(),
        }),
        Err(source) => Err(StartError::PolicyFolder {
            dir: dir.to_path_buf(),
            source,
        }),
    }
}

/// The problem gauge's labels of a source's problems.
fn problem_labels(
    problems: &[crate::source::kube::Problem],
) -> impl Iterator<Item = server::metrics::ProblemLabels<'_>> {
    problems.iter().map(|p| server::metrics::ProblemLabels {
        kind: &p.kind,
        name: &p.name,
        reason: p.reason,
    })
}
