//! Starting the service: TLS identity, the policy source (a folder and its watcher, or the
//! cluster's watchers), the certificate watcher, both listeners, and shutdown. Used by
//! `celgate serve` and by the integration tests, which start the real server on ephemeral
//! ports.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::tls::{self, Identity};
use super::{metrics_router, router, serve_plain, serve_tls, AppState, Bound, Limits};
use crate::source::folder::{self, Fingerprint, FolderSource, NotLoaded, Settle};
use crate::source::kube::authorizer::{SarAuthorizer, SarOptions};
use crate::source::kube::namespaces::ClusterNamespaces;
use crate::source::kube::{KubeOptions, KubeSource, Problem};

/// Where the serving certificate comes from.
#[derive(Debug, Clone)]
pub enum CertSource {
    /// PEM files, reloaded when they change.
    Files { cert: PathBuf, key: PathBuf },
    /// Generated at start for these names; the CA is returned to register.
    SelfSigned { names: Vec<String> },
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
        /// The API server; `None`: in-cluster configuration or the kubeconfig.
        api_url: Option<axum::http::Uri>,
        options: KubeOptions,
        /// `authorizer` checks by SubjectAccessReview; `None`: no cluster authorizer (checks
        /// read the RBAC objects of the snapshot, which a cluster source does not hold).
        sar: Option<SarOptions>,
    },
}

#[derive(Debug, Clone)]
pub struct ServeConfig {
    pub source: PolicySource,
    pub listen: SocketAddr,
    pub metrics_listen: Option<SocketAddr>,
    pub cert: CertSource,
    pub client_ca: Option<PathBuf>,
    pub limits: Limits,
    /// How often the policy folder and certificate files are checked for changes.
    pub poll: Duration,
    /// Kubernetes minor version of the CEL environment.
    pub version: u16,
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
}

impl Running {
    /// Stops accepting, lets in-flight requests finish, and waits for the listeners.
    pub async fn shutdown(self) {
        let _ = self.shutdown.send(true);
        for t in self.tasks {
            let _ = t.await;
        }
    }
}

/// The folder source between polls: when to load, and what was reported.
struct FolderWatch {
    state: Arc<AppState>,
    source: FolderSource,
    version: u16,
    settle: Settle,
    /// The misconfigured objects last reported, so that each is logged once.
    problems: BTreeSet<Problem>,
}

impl FolderWatch {
    fn new(state: Arc<AppState>, source: FolderSource, version: u16) -> FolderWatch {
        // Present from the start, so that an alert on it need not handle its absence.
        for reason in ["empty", "unsettled"] {
            state
                .metrics
                .source_reload_refused
                .with_label_values(&[reason]);
        }
        FolderWatch {
            state,
            source,
            version,
            settle: Settle::default(),
            problems: BTreeSet::new(),
        }
    }

    /// Loads the folder if it is still in the `expected` state (and stays so while it is
    /// read), and swaps the snapshot in unless it would enforce nothing.
    async fn load(&mut self, expected: Fingerprint) {
        let (dir, version, state) = (self.source.dir.clone(), self.version, self.state.clone());
        let wanted = expected.clone();
        let built = tokio::task::spawn_blocking(move || {
            let objects = folder::load_settled(&dir, &wanted)?;
            crate::source::build_for_serving(objects, version, &state.compiled)
                .map_err(NotLoaded::Invalid)
        })
        .await;
        let dir = self.source.dir.display();
        let metrics = &self.state.metrics;
        let outcome = match built {
            Ok(Ok(built)) => Ok(built),
            Ok(Err(NotLoaded::Changed(now))) => {
                metrics
                    .source_reload_refused
                    .with_label_values(&["unsettled"])
                    .inc();
                tracing::warn!(folder = %dir, settle = ?self.source.settle, "policy folder changed while being read; loading it once it has been quiet for the settle interval");
                self.settle.changed(now, Instant::now());
                return;
            }
            Ok(Err(NotLoaded::Invalid(e))) => Err(e.to_string()),
            Err(e) => Err(e.to_string()),
        };
        self.settle.handled(expected);
        let (snapshot, problems) = match outcome {
            Ok(built) => built,
            Err(e) => {
                metrics.source_errors.inc();
                tracing::error!(error = %e, "policy folder not loaded; the last good snapshot stays");
                return;
            }
        };
        let ready = self.state.ready.load(Ordering::Acquire);
        let before = self.state.snapshot.load().policies.len();
        let after = snapshot.policies.len();
        // A folder that binds no policy enforces nothing: far more often a deleted or
        // half-replaced folder than an intent, so it takes --allow-empty-policies.
        if after == 0 && !self.source.allow_empty {
            metrics
                .source_reload_refused
                .with_label_values(&["empty"])
                .inc();
            if ready {
                tracing::error!(folder = %dir, policies = before, "policy folder binds no policy: refused, the last good snapshot stays (start with --allow-empty-policies to accept an empty folder)");
            } else {
                tracing::error!(folder = %dir, "policy folder binds no policy: not ready until it binds one (start with --allow-empty-policies to accept an empty folder)");
            }
            return;
        }
        // Losing many policies at once is legitimate (a policy set replaced), but worth a
        // line above the usual one.
        if ready && after * 2 < before {
            tracing::warn!(folder = %dir, before, after, "policy folder reload drops most policies");
        }
        tracing::info!(policies = after, problems = problems.len(), folder = %dir, "policies loaded");
        self.state.install(snapshot);
        self.report(problems);
    }

    /// Logs each new problem once (and each that went away), and sets the problem gauge.
    fn report(&mut self, problems: Vec<Problem>) {
        let current: BTreeSet<Problem> = problems.into_iter().collect();
        for p in current.difference(&self.problems) {
            tracing::warn!(kind = %p.kind, name = %p.name, reason = p.reason, message = %p.message, "misconfigured object in the policy folder");
        }
        for p in self.problems.difference(&current) {
            tracing::info!(kind = %p.kind, name = %p.name, reason = p.reason, "policy folder problem resolved");
        }
        let list: Vec<Problem> = current.iter().cloned().collect();
        self.state.metrics.problems(&list);
        self.problems = current;
    }
}

/// Starts the service; returns once both listeners are bound and the first load was tried.
pub async fn start(cfg: ServeConfig) -> Result<Running, String> {
    let (key, ca_pem) = match &cfg.cert {
        CertSource::Files { cert, key } => (
            tls::load_certified_key(cert, key).map_err(|e| e.to_string())?,
            None,
        ),
        CertSource::SelfSigned { names } => {
            let s = tls::self_signed(names).map_err(|e| e.to_string())?;
            let key = tls::certified_key_from_pem(s.cert_pem.as_bytes(), s.key_pem.as_bytes())
                .map_err(|e| e.to_string())?;
            (key, Some(s.ca_pem))
        }
    };
    let identity = Identity::new(key);
    let tls_config = tls::server_config(identity.clone(), cfg.client_ca.as_deref())
        .map_err(|e| e.to_string())?;
    let state = AppState::new(cfg.limits.clone());
    if let Some(t) = identity.not_after() {
        state.metrics.certificate_expiry.set(t);
    }
    let mut folder_watch = None;
    let cluster = match &cfg.source {
        PolicySource::Folder(source) => {
            let mut watch = FolderWatch::new(state.clone(), source.clone(), cfg.version);
            // The first load does not wait for a quiet period: only for a read during which
            // nothing changed.
            watch.load(folder::fingerprint(&source.dir)).await;
            folder_watch = Some(watch);
            None
        }
        PolicySource::Kubernetes {
            api_url,
            options,
            sar,
        } => Some(start_cluster(&state, api_url.clone(), options.clone(), sar.clone()).await?),
    };
    let listener = TcpListener::bind(cfg.listen)
        .await
        .map_err(|e| format!("cannot listen on {}: {e}", cfg.listen))?;
    let webhook = listener.local_addr().map_err(|e| e.to_string())?;
    let metrics_listener = match cfg.metrics_listen {
        Some(addr) => Some(
            TcpListener::bind(addr)
                .await
                .map_err(|e| format!("cannot listen on {addr}: {e}"))?,
        ),
        None => None,
    };
    let metrics = metrics_listener.as_ref().and_then(|l| l.local_addr().ok());
    let (tx, rx) = watch::channel(false);
    let mut tasks = Vec::new();
    tasks.push(tokio::spawn(serve_tls(
        listener,
        tls_config,
        router(state.clone()),
        cfg.limits.clone(),
        rx.clone(),
    )));
    if let Some(l) = metrics_listener {
        tasks.push(tokio::spawn(serve_plain(
            l,
            metrics_router(state.clone()),
            cfg.limits.clone(),
            rx.clone(),
        )));
    }
    // Watchers end with the process; they hold no request state.
    if let Some(watch) = folder_watch {
        tokio::spawn(watch_folder(watch, cfg.poll, rx.clone()));
    }
    if let Some(c) = &cluster {
        tokio::spawn(report_cluster(state.clone(), c.clone(), rx.clone()));
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
    Ok(Running {
        bound: Bound { webhook, metrics },
        state,
        ca_pem,
        shutdown: tx,
        tasks,
        cluster,
    })
}

/// Connects to the API server and starts the cluster source; snapshots are installed as they
/// come, and the service turns ready with the first (complete) one.
async fn start_cluster(
    state: &Arc<AppState>,
    api_url: Option<axum::http::Uri>,
    options: KubeOptions,
    sar: Option<SarOptions>,
) -> Result<Arc<KubeSource>, String> {
    let config = match api_url {
        Some(url) => kube::Config::new(url),
        None => kube::Config::infer()
            .await
            .map_err(|e| format!("cannot configure the Kubernetes client: {e}"))?,
    };
    let client = kube::Client::try_from(config)
        .map_err(|e| format!("cannot create the Kubernetes client: {e}"))?;
    let authorizer = sar.map(|o| {
        SarAuthorizer::new(client.clone(), o) as Arc<dyn crate::cel::k8s::authz::AuthorizerFactory>
    });
    state.set_services(crate::admission::Services {
        authorizer,
        namespace_lookup: Some(Arc::new(ClusterNamespaces::new(client.clone()))),
    });
    let target = state.clone();
    let publish = Arc::new(move |s| target.install(s));
    Ok(Arc::new(KubeSource::start(client, options, publish)))
}

/// Copies the cluster source's health and problems into the metrics, every second.
async fn report_cluster(
    state: Arc<AppState>,
    source: Arc<KubeSource>,
    mut stop: watch::Receiver<bool>,
) {
    loop {
        state.metrics.sources(&source.status());
        state.metrics.problems(&source.problems());
        tokio::select! {
            _ = stop.changed() => return,
            _ = tokio::time::sleep(Duration::from_secs(1)) => {}
        }
    }
}

/// Reloads the policy folder once a change has settled; a broken file keeps the last good
/// snapshot (logged and counted).
async fn watch_folder(mut watch: FolderWatch, poll: Duration, mut stop: watch::Receiver<bool>) {
    loop {
        tokio::select! {
            _ = stop.changed() => return,
            _ = tokio::time::sleep(poll) => {}
        }
        let now = folder::fingerprint(&watch.source.dir);
        if watch
            .settle
            .observe(now, Instant::now(), watch.source.settle)
        {
            if let Some(state) = watch.settle.pending().cloned() {
                watch.load(state).await;
            }
        }
    }
}
