//! Starting the service: TLS identity, the policy source (a folder and its watcher, or the
//! cluster's watchers), the certificate watcher, both listeners, and shutdown. Used by
//! `celgate serve` and by the integration tests, which start the real server on ephemeral
//! ports.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::tls::{self, Identity};
use super::{metrics_router, router, serve_plain, serve_tls, AppState, Bound, Limits};
use crate::source::kube::authorizer::{SarAuthorizer, SarOptions};
use crate::source::kube::{KubeOptions, KubeSource};

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
    Folder(PathBuf),
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

fn load(state: &AppState, dir: &std::path::Path, version: u16) {
    match crate::source::load_for_serving(dir, version, &state.compiled) {
        Ok(snapshot) => {
            tracing::info!(policies = snapshot.policies.len(), folder = %dir.display(), "policies loaded");
            state.install(snapshot);
        }
        Err(e) => {
            state.metrics.source_errors.inc();
            tracing::error!(error = %e, "policy folder not loaded; the last good snapshot stays");
        }
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
    let cluster = match &cfg.source {
        PolicySource::Folder(dir) => {
            let (state, dir, version) = (state.clone(), dir.clone(), cfg.version);
            let _ = tokio::task::spawn_blocking(move || load(&state, &dir, version)).await;
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
    if let PolicySource::Folder(dir) = &cfg.source {
        tokio::spawn(watch_folder(
            state.clone(),
            dir.clone(),
            cfg.clone(),
            rx.clone(),
        ));
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
    let target = state.clone();
    let publish = Arc::new(move |s| target.install(s));
    Ok(Arc::new(KubeSource::start(
        client, options, authorizer, publish,
    )))
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

/// Reloads the policy folder when its files change; a broken file keeps the last good
/// snapshot (logged and counted).
async fn watch_folder(
    state: Arc<AppState>,
    dir: PathBuf,
    cfg: ServeConfig,
    mut stop: watch::Receiver<bool>,
) {
    let mut last = crate::source::fingerprint(&dir);
    loop {
        tokio::select! {
            _ = stop.changed() => return,
            _ = tokio::time::sleep(cfg.poll) => {}
        }
        let now = crate::source::fingerprint(&dir);
        if now == last {
            continue;
        }
        last = now;
        let (s, d, version) = (state.clone(), dir.clone(), cfg.version);
        let _ = tokio::task::spawn_blocking(move || load(&s, &d, version)).await;
    }
}
