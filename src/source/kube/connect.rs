//! How to reach the API server ([`Connect`]) and the client made from it: an explicit URL,
//! a kubeconfig file, or what kube-rs infers (the in-cluster service account, else
//! `KUBECONFIG` or `~/.kube/config`), as client-go's `clientcmd` and `rest.InClusterConfig`
//! resolve them.

use kube::Client;

use super::ClientError;

/// How to reach the API server.
#[derive(Debug, Clone, Default)]
pub struct Connect {
    /// This URL, without credentials (`kubectl proxy`).
    pub api_url: Option<axum::http::Uri>,
    /// This kubeconfig file's current context (`--kubeconfig`).
    pub kubeconfig: Option<std::path::PathBuf>,
}

/// A client for the API server at `api_url`, else of the kubeconfig file, else (neither) for
/// the in-cluster service account or the kubeconfig of `KUBECONFIG` or `~/.kube/config`.
pub async fn client(connect: Connect) -> Result<Client, ClientError> {
    let config = match (connect.api_url, connect.kubeconfig) {
        (Some(url), _) => kube::Config::new(url),
        (None, Some(path)) => {
            let options = kube::config::KubeConfigOptions::default();
            let loaded = match kube::config::Kubeconfig::read_from(&path) {
                Ok(k) => kube::Config::from_custom_kubeconfig(k, &options).await,
                Err(e) => Err(e),
            };
            loaded.map_err(|source| ClientError::Kubeconfig { path, source })?
        }
        (None, None) => kube::Config::infer().await.map_err(ClientError::Config)?,
    };
    Client::try_from(config).map_err(ClientError::Client)
}
