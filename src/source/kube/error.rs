//! The cluster source's errors: configuring the client, calls made from the evaluator's
//! threads (SubjectAccessReview, namespace GET), discovery, and `--param-namespaces`. Each
//! keeps the wording the logs, CEL errors and the CLI have always shown.

use std::time::Duration;

/// Why no Kubernetes client could be made.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    /// Neither the in-cluster service account nor a kubeconfig gives a usable configuration.
    #[error("cannot configure the Kubernetes client: {0}")]
    Config(#[source] kube::config::InferConfigError),
    /// The `--kubeconfig` file cannot be read, or its current context is unusable.
    #[error("cannot use the kubeconfig {}: {source}", path.display())]
    Kubeconfig {
        path: std::path::PathBuf,
        #[source]
        source: kube::config::KubeconfigError,
    },
    /// The configuration is there but the client cannot be built from it (TLS, proxy, ...).
    #[error("cannot create the Kubernetes client: {0}")]
    Client(#[source] kube::Error),
}

/// Why a call to the API server made from a synchronous thread has no answer.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CallError {
    /// No answer within the call's timeout (or the runtime dropped the call).
    #[error("{what} timed out after {timeout:?}")]
    TimedOut {
        what: &'static str,
        timeout: Duration,
    },
    /// The API server (or the connection to it) answered with an error.
    #[error("{what} failed: {source}")]
    Failed {
        what: &'static str,
        #[source]
        source: kube::Error,
    },
}

/// A `--param-namespaces` entry that is not a namespace name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("--param-namespaces: {name:?} is not a namespace name (lowercase letters, digits and '-', at most 63, starting and ending with a letter or digit)")]
pub struct ParamNamespaceError {
    /// The entry as given (trimmed).
    pub name: String,
}

/// Why discovery did not say whether a kind is served.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DiscoveryError {
    /// The discovery request failed.
    #[error("{0}")]
    Api(#[from] kube::Error),
    /// No answer within the lookup timeout.
    #[error("timed out")]
    TimedOut,
    /// The lookup's task ended without sending an answer.
    #[error("the lookup ended without an answer")]
    Lost,
    /// The cluster serves the ValidatingAdmissionPolicy API at no version celgate reads.
    #[error("the cluster serves ValidatingAdmissionPolicy neither at v1 nor at v1beta1")]
    NoPolicyApi,
}
