//! Policies from a Kubernetes cluster: list-then-watch loops (`watch`) keep local copies of
//! the ValidatingAdmissionPolicies, their bindings, the Namespaces, and every param kind that
//! some policy names; each change rebuilds the snapshot (debounced; unchanged policies keep
//! their compiled form through the
//! [`CompileCache`](crate::policy::snapshot::CompileCache)). A param kind's change rebuilds
//! only when it touches an object some binding can select (`param_refs`).
//!
//! - Policies and bindings are read as `admissionregistration.k8s.io/v1`, or `v1beta1` where
//!   discovery shows v1 is not served. MutatingAdmissionPolicies and their bindings are
//!   watched beside them, into the same snapshot, when the cluster serves them (`v1`, else
//!   `v1beta1`, else `v1alpha1`); when it does not, that is logged once and discovery is asked
//!   again every [`KubeOptions::recheck`] (`mutating`). Or, with a [`PolicyFeed`]
//!   ([`KubeSource::start_fed`], `--source kubernetes --policies DIR`), they come from it
//!   (validating and mutating ones) and the cluster's own are not watched at all; the first
//!   snapshot then also waits for the feed's first state.
//! - A param kind is resolved through discovery when a policy first names it, watched while
//!   some policy names it, and stopped when none does. Until its first list completes, a
//!   binding that needs it is the in-tree configuration error
//!   ``paramKind kind `...` not yet synced to use for admission``; a kind the cluster does
//!   not serve makes the policy's own configuration error.
//! - With [`KubeOptions::param_namespaces`], namespaced param kinds are listed and watched
//!   only in those namespaces (one watch per namespace and kind), so that RBAC may grant them
//!   there only; a param elsewhere counts as missing (the binding's parameterNotFoundAction,
//!   as for any missing param), and a binding that points there is reported
//!   (`ParamNamespaceNotWatched`).
//! - The first snapshot is published (and the service turns ready) only once policies,
//!   bindings (mutating ones too, where served), namespaces and the param kinds named at
//!   that time are listed; a param kind that cannot be listed within `param_grace` does not
//!   hold readiness back forever.
//! - CustomResourceDefinitions (`apiextensions.k8s.io/v1`) are watched too, trimmed to what
//!   the resource registry reads (group, names, scope, versions served and their
//!   subresources, conversion strategy): equivalent matching and conversion know the
//!   cluster's custom resources as they know a folder's CRDs. When they cannot be listed
//!   (403: RBAC not granted; 404), that is logged once and the source goes on without them:
//!   custom resources keep the lenient rule (any version a rule names counts as served). A
//!   CRD watch that fails holds neither readiness nor rebuilds back.
//! - A request in a namespace the snapshot does not have yet reads it with a GET, as the API
//!   server falls back from its informer.
//! - When the API server is unreachable the watchers (and discovery) retry with a backoff
//!   capped at `retry_max` and the last snapshot keeps serving; [`SourceStatus::stale`] says
//!   for how long each copy may be behind, until its watch is current again (after a
//!   `410 Gone`, until the re-list has completed). Once the API server answers again, the
//!   source follows within about `retry_max` plus a re-list.
//! - When the history goes back (etcd replaced or restored: a list or bookmark older than
//!   what a watch saw, or a kube-system namespace with another uid), every watch lists again
//!   (`history`); every [`KubeOptions::resync`] each resource is also listed in full and
//!   compared with its copy, to put right what a watch missed.
//!
//! By concept: [`KubeOptions`] (`options`), reaching the API server (`connect`), what it
//! serves (`discovery`), the handle the server holds ([`KubeSource`], `handle`), the run loop
//! (`run`), policies from a [`PolicyFeed`] or the cluster (`feed`), the cluster's mutating
//! policies (`mutating`), param kinds (`params`),
//! CRDs (`crd`), what a snapshot is built from (`inputs`), one watched resource (`watched`,
//! over `watch` and its store); beside them the Lease, Events (`feedback`), policy reports,
//! background scans and the authorizer.

pub mod authorizer;
pub mod background;
mod blocking;
mod connect;
mod crd;
mod discovery;
mod error;
mod feed;
pub mod feedback;
mod handle;
mod history;
mod inputs;
pub mod lease;
mod mutating;
pub mod namespaces;
mod options;
mod param_refs;
mod params;
pub mod reports;
mod retry;
mod run;
mod shared;
mod store;
mod watch;
mod watched;

use std::sync::Mutex;

use tokio::task::JoinHandle;

pub use connect::{client, Connect};
pub use discovery::{discover, server_minor};
pub use error::{CallError, ClientError, DiscoveryError, ParamNamespaceError};
pub use feed::{Fed, PolicyFeed};
pub use feedback::Problem;
pub use handle::{KubeSource, DISCOVERY_SOURCE};
pub use options::{param_namespaces, KubeOptions};
pub use shared::Publish;
pub use store::{Reader, SourceStatus, Writer};

// The guarded values are replaced whole, so a poisoned lock still holds a consistent value.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A task aborted when dropped.
struct Task(JoinHandle<()>);

impl Drop for Task {
    fn drop(&mut self) {
        self.0.abort();
    }
}
