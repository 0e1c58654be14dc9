//! MutatingAdmissionPolicies and their bindings from the cluster ([`MutatingApi`]): watched
//! like the ValidatingAdmissionPolicies, into the same snapshot, when discovery shows the API
//! server serves them (`v1`, else `v1beta1`, else `v1alpha1`). Most clusters do not (alpha
//! from Kubernetes 1.32, beta and off by default from 1.34, on by default from 1.36): that
//! is no error and holds no readiness back, and discovery is asked again every
//! [`KubeOptions::recheck`](super::KubeOptions::recheck), as for param kinds the cluster does
//! not serve, so that turning the feature on later is followed. Once watched, the watches stay
//! (a feature turned off again shows as failing watches in the status). Follows the API
//! server's policy plugin, which reads both kinds through informers
//! (`k8s.io/apiserver/pkg/admission/plugin/policy/generic/policy_source.go`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use kube::Client;
use serde_json::Value as Json;
use tokio::sync::{oneshot, Notify};

use super::discovery::{mutating_policy_version, resource, LOOKUP_TIMEOUT, VAP_GROUP};
use super::shared::Shared;
use super::watched::Watched;
use super::{lock, watch, DiscoveryError, Task};

/// What discovery said: the version served, `None` if none is.
type Answer = Result<Option<&'static str>, DiscoveryError>;

/// What is known of the MutatingAdmissionPolicy API.
pub(super) enum MutatingApi {
    /// Served: its policies and bindings are watched.
    Watched {
        policies: Watched,
        bindings: Watched,
    },
    /// Not served (or discovery failed) as of `checked`: asked again after `recheck`.
    NotServed { checked: Instant },
    /// Discovery asked again, in its own task so that no rebuild waits for it.
    Rechecking {
        answer: oneshot::Receiver<Answer>,
        _task: Task,
    },
}

/// What the watches started here are given, and what they wake.
pub(super) struct Context<'a> {
    pub(super) client: &'a Client,
    pub(super) changed: &'a Arc<Notify>,
    /// Woken when a re-check has answered.
    pub(super) resolved: &'a Arc<Notify>,
    pub(super) settings: &'a watch::Settings,
    pub(super) shared: &'a Shared,
}

impl MutatingApi {
    /// The state after the first discovery: watched at `version`, or not served (logged once,
    /// at info: the usual case).
    pub(super) fn first(
        version: Option<&'static str>,
        cx: &Context<'_>,
        recheck: Duration,
    ) -> Self {
        match version {
            Some(version) => Self::watch(version, cx),
            None => {
                tracing::info!(recheck = ?recheck, "the cluster does not serve MutatingAdmissionPolicy (admissionregistration.k8s.io v1, v1beta1 or v1alpha1): only ValidatingAdmissionPolicies are watched; discovery is asked again periodically");
                MutatingApi::NotServed {
                    checked: Instant::now(),
                }
            }
        }
    }

    fn watch(version: &'static str, cx: &Context<'_>) -> Self {
        *lock(&cx.shared.map_version) = Some(version.to_string());
        tracing::info!(version, "watching MutatingAdmissionPolicies");
        let start = |kind: &str, plural: &str| {
            Watched::start(
                cx.client,
                resource(VAP_GROUP, version, kind, plural),
                None,
                format!("{plural}.{version}"),
                cx.changed,
                cx.settings,
            )
        };
        MutatingApi::Watched {
            policies: start("MutatingAdmissionPolicy", "mutatingadmissionpolicies"),
            bindings: start(
                "MutatingAdmissionPolicyBinding",
                "mutatingadmissionpolicybindings",
            ),
        }
    }

    /// Asks discovery again when `recheck` has passed since it last said "not served", and
    /// starts the watches once it says "served".
    pub(super) fn reconcile(&mut self, cx: &Context<'_>, recheck: Duration) {
        let answer = match self {
            MutatingApi::Watched { .. } => return,
            MutatingApi::NotServed { checked } => {
                if checked.elapsed() >= recheck {
                    *self = recheck_in_task(cx);
                }
                return;
            }
            MutatingApi::Rechecking { answer, .. } => match answer.try_recv() {
                Err(oneshot::error::TryRecvError::Empty) => return,
                Ok(answer) => answer,
                Err(oneshot::error::TryRecvError::Closed) => Err(DiscoveryError::Lost),
            },
        };
        *self = match answer {
            Ok(Some(version)) => Self::watch(version, cx),
            Ok(None) => MutatingApi::NotServed {
                checked: Instant::now(),
            },
            Err(error) => {
                tracing::debug!(%error, "cannot ask discovery whether MutatingAdmissionPolicy is served; asked again later");
                MutatingApi::NotServed {
                    checked: Instant::now(),
                }
            }
        };
    }

    /// The watches (none while not served).
    pub(super) fn watches(&self) -> Vec<&Watched> {
        match self {
            MutatingApi::Watched { policies, bindings } => vec![policies, bindings],
            _ => Vec::new(),
        }
    }

    /// Listed, or not served (nothing to wait for).
    pub(super) fn synced(&self) -> bool {
        self.watches().iter().all(|w| w.store.synced())
    }

    /// The policies and the bindings.
    pub(super) fn objects(&self) -> (Vec<Arc<Json>>, Vec<Arc<Json>>) {
        match self {
            MutatingApi::Watched { policies, bindings } => {
                (policies.store.objects(), bindings.store.objects())
            }
            _ => Default::default(),
        }
    }

    /// Moves with every change of the policies or bindings.
    pub(super) fn generation(&self) -> (u64, u64) {
        match self {
            MutatingApi::Watched { policies, bindings } => {
                (policies.store.generation(), bindings.store.generation())
            }
            _ => (0, 0),
        }
    }
}

/// Asks discovery in its own task, which wakes `resolved` once the answer is there.
fn recheck_in_task(cx: &Context<'_>) -> MutatingApi {
    let (client, resolved) = (cx.client.clone(), cx.resolved.clone());
    let (tx, answer) = oneshot::channel();
    let task = tokio::spawn(async move {
        let found = tokio::time::timeout(LOOKUP_TIMEOUT, mutating_policy_version(&client)).await;
        // Sent before the wake, so that the woken loop finds it.
        let _ = tx.send(found.unwrap_or(Err(DiscoveryError::TimedOut)));
        resolved.notify_one();
    });
    MutatingApi::Rechecking {
        answer,
        _task: Task(task),
    }
}
