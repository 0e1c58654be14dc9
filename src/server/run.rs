//! Starting the service: TLS identity, the policy folder and its watcher, the certificate
//! watcher, both listeners, and shutdown. Used by `celgate serve` and by the integration
//! tests, which start the real server on ephemeral ports.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::tls::{self, Identity};
use super::{metrics_router, router, serve_plain, serve_tls, AppState, Bound, Limits};

/// Where the serving certificate comes from.
#[derive(Debug, Clone)]
pub enum CertSource {
    /// PEM files, reloaded when they change.
    Files { cert: PathBuf, key: PathBuf },
    /// Generated at start for these names; the CA is returned to register.
    SelfSigned { names: Vec<String> },
}

#[derive(Debug, Clone)]
pub struct ServeConfig {
    pub policies: PathBuf,
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

fn load(state: &AppState, cfg: &ServeConfig) {
    let dir = cfg.policies.clone();
    match crate::source::load_for_serving(&dir, cfg.version, &state.compiled) {
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
    let initial = {
        let state = state.clone();
        let cfg = cfg.clone();
        tokio::task::spawn_blocking(move || load(&state, &cfg))
    };
    let _ = initial.await;
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
            rx.clone(),
        )));
    }
    // Watchers end with the process; they hold no request state.
    tokio::spawn(watch_folder(state.clone(), cfg.clone(), rx.clone()));
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
    })
}

/// Reloads the policy folder when its files change; a broken file keeps the last good
/// snapshot (logged and counted).
async fn watch_folder(state: Arc<AppState>, cfg: ServeConfig, mut stop: watch::Receiver<bool>) {
    let mut last = crate::source::fingerprint(&cfg.policies);
    loop {
        tokio::select! {
            _ = stop.changed() => return,
            _ = tokio::time::sleep(cfg.poll) => {}
        }
        let now = crate::source::fingerprint(&cfg.policies);
        if now == last {
            continue;
        }
        last = now;
        let (s, c) = (state.clone(), cfg.clone());
        let _ = tokio::task::spawn_blocking(move || load(&s, &c)).await;
    }
}
