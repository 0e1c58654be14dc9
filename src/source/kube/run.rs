//! The run loop: discovers the policy APIs (or takes a [`PolicyFeed`]), starts the watches,
//! and on each change (debounced) reconciles the param kinds and rebuilds, publishes and
//! reports the snapshot; it also notices when the cluster's history goes back. Follows the
//! API server's policy plugin, which rebuilds its policy set when an informer changes
//! (`k8s.io/apiserver/pkg/admission/plugin/policy/generic/policy_source.go`).

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use kube::Client;
use tokio::sync::Notify;

use super::crd::crd_watch;
use super::discovery::{
    api_server_version, mutating_policy_version, policy_version, resource, server_minor,
    LOOKUP_TIMEOUT, VAP_GROUP,
};
use super::feed::{PolicyFeed, PolicyInput};
use super::inputs::Inputs;
use super::mutating::{self, MutatingApi};
use super::options::KubeOptions;
use super::params::{
    all_synced, named_param_kinds, next_lookup, param_lookup, reconcile_params, watches, ParamKind,
    Wakers,
};
use super::retry::Backoff;
use super::shared::{Publish, Shared};
use super::watched::Watched;
use super::{feedback, history, lease, lock, param_refs, watch, DiscoveryError, Reader};
use crate::policy::snapshot::CompileCache;

pub(super) async fn run(
    client: Client,
    mut options: KubeOptions,
    publish: Publish,
    shared: Arc<Shared>,
    feed: Option<Arc<PolicyFeed>>,
) {
    let changed = Arc::new(Notify::new());
    let settings = watch::Settings {
        retry_max: options.retry_max,
        resync: options.resync,
        history: shared.history.clone(),
    };
    // Started before the API server (or while it is down): ready within about `retry_max`
    // once it answers.
    let mut backoff = Backoff::new(options.retry_max);
    // Fed policies (a folder) are there for CEL the API server may not know: the version
    // given, not the API server's.
    if options.version_from_server && feed.is_none() {
        // The API server's own version, so that celgate accepts the CEL it accepts.
        options.version = loop {
            let answer = tokio::time::timeout(LOOKUP_TIMEOUT, api_server_version(&client)).await;
            let error = match answer {
                Ok(Ok((major, minor, printed))) => {
                    let (minor, why) = server_minor(&major, &minor);
                    let k8s_version = format!("1.{minor}");
                    match why {
                        None => {
                            tracing::info!(%k8s_version, api_server = %printed, "CEL environment of the API server's version (--k8s-version to choose another)")
                        }
                        Some(why) => {
                            tracing::warn!(%k8s_version, api_server = %printed, %why, "CEL environment of the nearest version celgate knows (--k8s-version to choose another)")
                        }
                    }
                    break minor;
                }
                Ok(Err(e)) => e.to_string(),
                Err(_) => DiscoveryError::TimedOut.to_string(),
            };
            lock(&shared.discovery_failing_since).get_or_insert_with(Instant::now);
            let delay = backoff.next_delay();
            tracing::warn!(%error, retry_in = ?delay, "cannot read the API server's version");
            tokio::time::sleep(delay).await;
        };
        *lock(&shared.cel_version) = Some(options.version);
    }
    // Wakes the loop when a param kind's discovery (or the MutatingAdmissionPolicy API's)
    // has answered.
    let resolved = Arc::new(Notify::new());
    let mutating_cx = mutating::Context {
        client: &client,
        changed: &changed,
        resolved: &resolved,
        settings: &settings,
        shared: &shared,
    };
    // The cluster's MutatingAdmissionPolicies, when it serves them (not with a feed: the
    // folder's are used).
    let mut mutating: Option<MutatingApi> = None;
    let input = match feed {
        Some(feed) => {
            tracing::info!(
                "policies and bindings from the folder; the cluster's own are not watched"
            );
            PolicyInput::Fed(feed)
        }
        None => {
            let version = loop {
                let answer = tokio::time::timeout(LOOKUP_TIMEOUT, policy_version(&client)).await;
                let error = match answer {
                    Ok(Ok(v)) => break v,
                    Ok(Err(e)) => e,
                    Err(_) => DiscoveryError::TimedOut,
                };
                lock(&shared.discovery_failing_since).get_or_insert_with(Instant::now);
                let delay = backoff.next_delay();
                tracing::warn!(error = %error, retry_in = ?delay, "cannot discover the ValidatingAdmissionPolicy API");
                tokio::time::sleep(delay).await;
            };
            *lock(&shared.vap_version) = Some(version.to_string());
            tracing::info!(version, "watching ValidatingAdmissionPolicies");
            // Asked before the first snapshot, so that it has the mutating policies too where
            // they are served; "not served" is an answer, only a failed lookup is retried.
            let mutating_version = loop {
                let answer =
                    tokio::time::timeout(LOOKUP_TIMEOUT, mutating_policy_version(&client)).await;
                let error = match answer {
                    Ok(Ok(v)) => break v,
                    Ok(Err(e)) => e,
                    Err(_) => DiscoveryError::TimedOut,
                };
                let delay = backoff.next_delay();
                tracing::warn!(error = %error, retry_in = ?delay, "cannot discover the MutatingAdmissionPolicy API");
                tokio::time::sleep(delay).await;
            };
            mutating = Some(MutatingApi::first(
                mutating_version,
                &mutating_cx,
                options.recheck,
            ));
            PolicyInput::Cluster {
                policies: Watched::start(
                    &client,
                    resource(
                        VAP_GROUP,
                        version,
                        "ValidatingAdmissionPolicy",
                        "validatingadmissionpolicies",
                    ),
                    None,
                    format!("validatingadmissionpolicies.{version}"),
                    &changed,
                    &settings,
                ),
                bindings: Watched::start(
                    &client,
                    resource(
                        VAP_GROUP,
                        version,
                        "ValidatingAdmissionPolicyBinding",
                        "validatingadmissionpolicybindings",
                    ),
                    None,
                    format!("validatingadmissionpolicybindings.{version}"),
                    &changed,
                    &settings,
                ),
            }
        }
    };
    let namespaces = Watched::start(
        &client,
        resource("", "v1", "Namespace", "namespaces"),
        None,
        "namespaces.v1".into(),
        &changed,
        &settings,
    );
    // The cluster's watches: policies and bindings (unless fed), namespaces.
    let core: Vec<&Watched> = input
        .watches()
        .into_iter()
        .chain(std::iter::once(&namespaces))
        .collect();
    let crds = crd_watch(&client, &changed, &settings).await;
    // Visible in status (and metrics) from the start: a list that never completes shows.
    *lock(&shared.stores) = core
        .iter()
        .copied()
        .chain(mutating.iter().flat_map(MutatingApi::watches))
        .chain(&crds)
        .map(|w| w.store.clone())
        .collect();
    let mut params: BTreeMap<(String, String), ParamKind> = BTreeMap::new();
    let cache = Arc::new(CompileCache::default());
    let started = Instant::now();
    // Policies from a folder are not cluster objects: Events about them would point to
    // nothing (their problems are logged by the folder's watch, and in the metrics).
    let fed = matches!(input, PolicyInput::Fed(_));
    let mut feedback = (options.events && !fed)
        .then(|| feedback::Reporter::new(client.clone(), &options.instance));
    let leadership = shared.leadership.clone();
    let reports =
        |leadership: &lease::Leadership| options.events_lease.is_none() || leadership.is_leader();
    let mut last_built: Option<Vec<u64>> = None;
    // The policy and binding stores' generations at the last published snapshot.
    let mut last_policies: Option<PolicyGenerations> = None;
    // The uid of the kube-system namespace, once listed.
    let mut cluster: Option<String> = None;
    // What the bindings' paramRefs can select, as of these policy and binding generations,
    // and each param store's fingerprint of it as of its own generation.
    let mut refs = param_refs::ParamRefs::default();
    let mut refs_at: Option<PolicyGenerations> = None;
    let mut fingerprints: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    loop {
        // Also awake when a failed lookup is due again, and when the grace for param kinds
        // ends before the first snapshot.
        let mut due = next_lookup(&params);
        let grace_end = started + options.param_grace;
        if !shared.ready.load(Ordering::Acquire) && grace_end > Instant::now() {
            due = Some(due.map_or(grace_end, |d| d.min(grace_end)));
        }
        let wait = due.map_or(options.recheck, |due| {
            options
                .recheck
                .min(due.saturating_duration_since(Instant::now()))
        });
        tokio::select! {
            _ = changed.notified() => {
                // Coalesce a burst of changes (a re-list, `kubectl apply -f dir/`) into one
                // rebuild. Not before the first snapshot: it is built once everything is
                // listed, and waiting would only delay readiness.
                if shared.ready.load(Ordering::Acquire) {
                    tokio::time::sleep(options.debounce).await;
                }
            }
            _ = resolved.notified() => {}
            _ = input.changed() => {
                if shared.ready.load(Ordering::Acquire) {
                    tokio::time::sleep(options.debounce).await;
                }
            }
            _ = tokio::time::sleep(wait) => {}
        }
        check_cluster_identity(&namespaces.store, &mut cluster, &shared.history);
        if let Some(m) = mutating.as_mut() {
            m.reconcile(&mutating_cx, options.recheck);
        }
        let mutating_synced = mutating.as_ref().is_none_or(MutatingApi::synced);
        // A failing CRD watch does not hold the snapshot back: without CRDs, custom
        // resources are matched leniently.
        let crds_listed = crds
            .as_ref()
            .is_none_or(|w| w.store.synced() || w.store.error().is_some());
        if !core.iter().all(|w| w.store.synced())
            || !input.synced()
            || !mutating_synced
            || !crds_listed
        {
            continue;
        }
        // Validating and mutating ones together: both name param kinds, and the problems
        // and paramRefs tell them apart by kind.
        let (mut policy_objects, mut binding_objects, fed_problems) = input.objects();
        if let Some(m) = &mutating {
            let (policies, bindings) = m.objects();
            policy_objects.extend(policies);
            binding_objects.extend(bindings);
        }
        let mutating_watches: Vec<&Watched> =
            mutating.iter().flat_map(MutatingApi::watches).collect();
        reconcile_params(
            &client,
            &named_param_kinds(&policy_objects),
            &mut params,
            &Wakers {
                changed: &changed,
                resolved: &resolved,
                settings: &settings,
            },
            &options,
        );
        *lock(&shared.stores) = core
            .iter()
            .copied()
            .chain(mutating_watches.iter().copied())
            .chain(&crds)
            .chain(params.values().flat_map(watches))
            .map(|w| w.store.clone())
            .collect();
        let pending = params.values().any(|p| match p {
            ParamKind::Watched { watches, .. } => !all_synced(watches),
            ParamKind::Resolving { .. } | ParamKind::Unresolved { .. } => true,
            ParamKind::NotServed { .. } => false,
        });
        let ready = shared.ready.load(Ordering::Acquire);
        if !ready && pending && started.elapsed() < options.param_grace {
            continue;
        }
        // Rebuild only when some store changed (or the param kinds did); for param stores,
        // only when an object some binding can select did (see `param_refs`).
        let policies_now = (
            input.generation(),
            mutating.as_ref().map_or((0, 0), MutatingApi::generation),
        );
        if refs_at != Some(policies_now) {
            refs = param_refs::ParamRefs::new(&policy_objects, &binding_objects);
            fingerprints.clear();
            refs_at = Some(policies_now);
        }
        let visible = |kind: &(String, String), store: &Reader| {
            let at = store.generation();
            match fingerprints.get(store.name()) {
                Some((seen_at, fingerprint)) if *seen_at == at => *fingerprint,
                _ => {
                    let fingerprint = refs.fingerprint(kind, &store.objects());
                    fingerprints.insert(store.name().to_string(), (at, fingerprint));
                    fingerprint
                }
            }
        };
        let mut generation = generation(core.iter().copied().chain(&crds), &params, visible);
        generation.extend([
            policies_now.0 .0,
            policies_now.0 .1,
            policies_now.1 .0,
            policies_now.1 .1,
        ]);
        if last_built.as_ref() != Some(&generation) {
            let inputs = Inputs::collect(
                &policy_objects,
                &binding_objects,
                std::iter::once(&namespaces).chain(&crds),
                &params,
            );
            let (version, cache) = (options.version, cache.clone());
            // Compiling is CPU work: off the async workers.
            let built = tokio::task::spawn_blocking(move || inputs.build(version, &cache)).await;
            let snapshot = match built {
                Ok(s) => s,
                Err(e) => {
                    tracing::error!(error = %e, "snapshot build failed; the last snapshot keeps serving");
                    continue;
                }
            };
            last_built = Some(generation);
            let list_errors = params
                .iter()
                .filter_map(|(key, p)| {
                    let error = watches(p).iter().find_map(|w| match w.store.synced() {
                        true => None,
                        false => w.store.error(),
                    })?;
                    Some((key.clone(), error))
                })
                .collect();
            let mut problems = feedback::problems(
                &policy_objects,
                &binding_objects,
                &snapshot,
                |k| param_lookup(&params, k),
                &list_errors,
                &options.param_namespaces,
            );
            problems.extend(fed_problems);
            // The first at info (the chart's NOTES look for it); later ones at debug: a busy
            // cluster rebuilds often, and their effect shows in the metrics.
            let (policies, problem_count) = (snapshot.policies.len(), problems.len());
            if shared.ready.load(Ordering::Acquire) {
                tracing::debug!(policies, problems = problem_count, "cluster snapshot built");
            } else {
                tracing::info!(policies, problems = problem_count, "cluster snapshot built");
            }
            publish(snapshot);
            shared.ready.store(true, Ordering::Release);
            *lock(&shared.problems) = problems;
            if last_policies != Some(policies_now) {
                last_policies = Some(policies_now);
                shared.policy_changes.send_modify(|n| *n += 1);
            }
        }
        // Reported by the Lease holder, also when it takes over without a change.
        if let Some(r) = feedback.as_mut() {
            // Read before the leadership, so that the decision knew at least these rounds.
            let rounds = leadership.rounds();
            if reports(&leadership) {
                let problems = lock(&shared.problems).clone();
                r.report(&problems).await;
            }
            shared
                .reporting_decided_after
                .store(rounds, Ordering::Release);
        }
    }
}

/// The generations of the validating policy and binding stores (or the feed's), then of the
/// mutating ones.
type PolicyGenerations = ((u64, u64), (u64, u64));

/// A kube-system namespace with another uid than before is another cluster (a new etcd,
/// whose resourceVersions may not even have gone below those seen): every watch lists again.
/// `cluster` keeps the uid seen last.
fn check_cluster_identity(
    namespaces: &Reader,
    cluster: &mut Option<String>,
    history: &history::History,
) {
    let uid = namespaces
        .get("", "kube-system")
        .and_then(|ns| ns["metadata"]["uid"].as_str().map(str::to_string));
    let Some(uid) = uid else {
        return;
    };
    if let Some(before) = cluster.as_ref().filter(|before| **before != uid) {
        tracing::warn!(%before, now = %uid, "the kube-system namespace has another uid: another cluster (etcd replaced); every resource is listed again");
        history.reset(history::Reset::ClusterIdentity);
    }
    *cluster = Some(uid);
}

/// A fingerprint of every store's contents: the change counters, and for the param kinds'
/// stores (`visible`) a fingerprint of the objects some binding can select.
fn generation<'a>(
    core: impl Iterator<Item = &'a Watched>,
    params: &BTreeMap<(String, String), ParamKind>,
    mut visible: impl FnMut(&(String, String), &Reader) -> u64,
) -> Vec<u64> {
    let mut g: Vec<u64> = core.map(|w| w.store.generation()).collect();
    for (kind, p) in params {
        match p {
            ParamKind::Watched { watches, .. } => g.extend(
                watches
                    .iter()
                    .flat_map(|w| [visible(kind, &w.store), u64::from(w.store.synced())]),
            ),
            ParamKind::NotServed { .. } => g.push(u64::MAX),
            ParamKind::Resolving { .. } | ParamKind::Unresolved { .. } => g.push(u64::MAX - 1),
        }
    }
    g
}
