//! Param reconcile: the param kinds the policies name are resolved through discovery in
//! their own tasks, watched (cluster-wide, or in `--param-namespaces` only) while some
//! policy names them, looked up again when discovery failed or did not serve them, and
//! stopped when none does. Follows the API server's policy plugin, which starts an informer
//! per paramKind and reports ``paramKind kind `...` not yet synced`` until it has synced
//! (`k8s.io/apiserver/pkg/admission/plugin/policy/generic/policy_source.go`).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Instant;

use kube::api::ApiResource;
use kube::Client;
use serde_json::Value as Json;
use tokio::sync::{oneshot, Notify};

use super::discovery::{discover, LOOKUP_TIMEOUT};
use super::feedback;
use super::options::KubeOptions;
use super::retry::Backoff;
use super::watched::Watched;
use super::{watch, DiscoveryError, Task};
use crate::policy::snapshot::Scope;

/// What is known of a param kind (`apiVersion`, `kind`) some policy names.
pub(super) enum ParamKind {
    /// One watch cluster-wide, or (a namespaced kind with `param_namespaces`) one per listed
    /// namespace.
    Watched { scope: Scope, watches: Vec<Watched> },
    /// Discovery does not list the kind: policies naming it are misconfigured.
    NotServed { checked: Instant },
    /// Discovery under way, in its own task so that a slow or unreachable API server holds
    /// no rebuild up: treated as not yet synced.
    Resolving { lookup: Lookup, backoff: Backoff },
    /// Discovery failed (API server unreachable): treated as not yet synced, and looked up
    /// again at `retry_at`.
    Unresolved { retry_at: Instant, backoff: Backoff },
}

/// What discovery said of a param kind: its resource and scope, `None` if not served.
type Discovered = Result<Option<(ApiResource, Scope)>, DiscoveryError>;

/// The param kinds (`apiVersion`, `kind`) the policies name.
pub(super) fn named_param_kinds(policies: &[Arc<Json>]) -> BTreeSet<(String, String)> {
    policies
        .iter()
        .filter_map(|p| {
            let pk = &p["spec"]["paramKind"];
            Some((
                pk["apiVersion"].as_str()?.to_string(),
                pk["kind"].as_str()?.to_string(),
            ))
        })
        .collect()
}

/// A param kind's watches: none until discovery has resolved it.
pub(super) fn watches(p: &ParamKind) -> &[Watched] {
    match p {
        ParamKind::Watched { watches, .. } => watches,
        _ => &[],
    }
}

pub(super) fn all_synced(watches: &[Watched]) -> bool {
    watches.iter().all(|w| w.store.synced())
}

/// Finds a param object for the status feedback: `None` when the kind is not listed (yet).
pub(super) fn param_lookup(
    params: &BTreeMap<(String, String), ParamKind>,
    key: &feedback::ParamKey<'_>,
) -> Option<(Scope, bool)> {
    let p = params.get(&(key.api_version.to_string(), key.kind.to_string()))?;
    let ParamKind::Watched { scope, watches } = p else {
        return None;
    };
    if !all_synced(watches) {
        return None;
    }
    let namespace = if *scope == Scope::Cluster {
        ""
    } else {
        key.namespace
    };
    // A namespace no watch covers has no params.
    let exists = watches
        .iter()
        .filter(|w| w.namespace.as_deref().is_none_or(|n| n == namespace))
        .any(|w| w.store.get(namespace, key.name).is_some());
    Some((*scope, exists))
}

/// The notifications a param kind's watch and discovery send to the main loop.
pub(super) struct Wakers<'a> {
    pub(super) changed: &'a Arc<Notify>,
    pub(super) resolved: &'a Arc<Notify>,
    /// What the watches started are given.
    pub(super) settings: &'a watch::Settings,
}

/// When the next failed discovery is due again, if one failed.
pub(super) fn next_lookup(params: &BTreeMap<(String, String), ParamKind>) -> Option<Instant> {
    params
        .values()
        .filter_map(|p| match p {
            ParamKind::Unresolved { retry_at, .. } => Some(*retry_at),
            _ => None,
        })
        .min()
}

/// A param kind's discovery in its own task.
pub(super) struct Lookup {
    answer: oneshot::Receiver<Discovered>,
    _task: Task,
}

/// Looks a param kind up in its own task, which wakes `resolved` once the answer is there.
fn lookup(client: &Client, key: &(String, String), resolved: &Arc<Notify>) -> Lookup {
    let (client, resolved) = (client.clone(), resolved.clone());
    let (api_version, kind) = key.clone();
    let (tx, answer) = oneshot::channel();
    let task = tokio::spawn(async move {
        let found = discover(&client, &api_version, &kind);
        let answer = match tokio::time::timeout(LOOKUP_TIMEOUT, found).await {
            Ok(answer) => answer.map_err(DiscoveryError::from),
            Err(_) => Err(DiscoveryError::TimedOut),
        };
        // Sent before the wake, so that the woken loop finds it.
        let _ = tx.send(answer);
        resolved.notify_one();
    });
    Lookup {
        answer,
        _task: Task(task),
    }
}

/// Starts watchers for newly named param kinds (once discovery answered), stops those no
/// policy names any more, and looks up again kinds that discovery did not resolve (with a
/// backoff capped at `retry_max`) or that the cluster did not serve (every `recheck`).
pub(super) fn reconcile_params(
    client: &Client,
    named: &BTreeSet<(String, String)>,
    params: &mut BTreeMap<(String, String), ParamKind>,
    wakers: &Wakers<'_>,
    options: &KubeOptions,
) {
    params.retain(|key, _| {
        let keep = named.contains(key);
        if !keep {
            tracing::info!(api_version = %key.0, kind = %key.1, "param kind no longer named; watch stopped");
        }
        keep
    });
    for key in named {
        let now = Instant::now();
        let state = match params.remove(key) {
            None => ParamKind::Resolving {
                lookup: lookup(client, key, wakers.resolved),
                backoff: Backoff::new(options.retry_max),
            },
            Some(ParamKind::NotServed { checked }) if checked.elapsed() >= options.recheck => {
                ParamKind::Resolving {
                    lookup: lookup(client, key, wakers.resolved),
                    backoff: Backoff::new(options.retry_max),
                }
            }
            Some(ParamKind::Unresolved { retry_at, backoff }) if retry_at <= now => {
                ParamKind::Resolving {
                    lookup: lookup(client, key, wakers.resolved),
                    backoff,
                }
            }
            Some(ParamKind::Resolving {
                mut lookup,
                backoff,
            }) => match lookup.answer.try_recv() {
                Err(oneshot::error::TryRecvError::Empty) => {
                    ParamKind::Resolving { lookup, backoff }
                }
                Ok(answer) => resolved(client, key, answer, backoff, wakers, options),
                Err(oneshot::error::TryRecvError::Closed) => {
                    let answer = Err(DiscoveryError::Lost);
                    resolved(client, key, answer, backoff, wakers, options)
                }
            },
            Some(other) => other,
        };
        params.insert(key.clone(), state);
    }
}

/// The state a param kind's discovery answer leads to.
fn resolved(
    client: &Client,
    key: &(String, String),
    answer: Discovered,
    mut backoff: Backoff,
    wakers: &Wakers<'_>,
    options: &KubeOptions,
) -> ParamKind {
    let (api_version, kind) = key;
    match answer {
        Ok(Some((resource, scope))) => {
            let start = |namespace: Option<&String>| {
                let label = match namespace {
                    Some(ns) => format!("{}.{} (params in {ns})", resource.plural, api_version),
                    None => format!("{}.{} (params)", resource.plural, api_version),
                };
                let (resource, namespace) = (resource.clone(), namespace.cloned());
                Watched::start(
                    client,
                    resource,
                    namespace,
                    label,
                    wakers.changed,
                    wakers.settings,
                )
            };
            let watches = if scope == Scope::Namespaced && !options.param_namespaces.is_empty() {
                let namespaces = options.param_namespaces.join(",");
                tracing::info!(%api_version, %kind, plural = %resource.plural, %namespaces, "watching param kind in these namespaces only (--param-namespaces)");
                options
                    .param_namespaces
                    .iter()
                    .map(|ns| start(Some(ns)))
                    .collect()
            } else {
                tracing::info!(%api_version, %kind, plural = %resource.plural, "watching param kind");
                vec![start(None)]
            };
            ParamKind::Watched { scope, watches }
        }
        Ok(None) => {
            tracing::warn!(%api_version, %kind, "param kind not served by the cluster");
            ParamKind::NotServed {
                checked: Instant::now(),
            }
        }
        Err(e) => {
            let delay = backoff.next_delay();
            tracing::warn!(%api_version, %kind, error = %e, retry_in = ?delay, "cannot look up param kind");
            ParamKind::Unresolved {
                retry_at: Instant::now() + delay,
                backoff,
            }
        }
    }
}
