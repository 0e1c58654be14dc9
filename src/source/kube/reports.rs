//! The cluster's policy reports (`--reports wgpolicy|openreports`): admission results kept in
//! memory as the current state of each resource, and written by one replica as one report per
//! namespace plus one cluster report, batched and rate-limited.
//!
//! State: per resource (its uid, else its kind and name), the results of its latest
//! admission, keyed by policy, binding and validation index. A newer admission of the same
//! resource replaces them; its DELETE removes them; a policy or binding no longer in the
//! snapshot loses its results. Each change marks its namespace's report dirty; every
//! `interval` the Lease holder writes each dirty report once, with server-side apply (field
//! manager `celgate`, forced), or deletes it once it has no result left. So a burst of any
//! number of admissions makes at most one write per report per interval.
//!
//! Each replica keeps the results of the admissions it answered. A replica that becomes
//! the writer (at start, or taking the Lease over) writes nothing before it has adopted
//! the existing reports ([`ReportStore::adopt`]): it lists the `celgate-admission` reports
//! by their labels and merges their results into its state (it did not see those
//! admissions, but they were true when written), except the results of policies and
//! bindings the current snapshot does not have, and except where its own results of a
//! resource are as recent or more. It then writes every report it listed or has results
//! for (a report left without results is deleted), and confirms that each adopted resource
//! still exists with a GET by name, one per resource and once per takeover: a 404, an
//! object of another uid, or a kind no longer served drops its results (unless admitted
//! again since); a GET that fails otherwise (a 403 included) keeps them. A GET is used
//! rather than a background scan's listing because scans may be off, and do not list every
//! kind an admission reports (an UPDATE-only binding's). A capped report's dropped results
//! cannot be adopted (they were never written).
//!
//! The admission state is bounded: at most `max_resources` resources
//! (`--reports-max-resources`), the one recorded longest ago evicted first; and after a
//! complete background scan, a resource of a scanned kind that the scan did not list is
//! gone and loses its results ([`ReportStore::prune_absent`]).
//!
//! Background scans ([`super::background`]) have a store of their own, written the same way
//! as the reports `celgate-background` (label `celgate.io/source: background`); each scan
//! replaces its whole state ([`ReportStore::replace`]). After a complete scan, the writer
//! also lists the background reports by their labels and deletes those the new state does
//! not have (a previous Lease holder's), see [`ReportStore::request_sweep`]. A new holder
//! scans at once, so its background reports need no adoption.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kube::api::{
    ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams,
};
use kube::discovery::Scope;
use kube::error::DiscoveryError;
use kube::{Api, Client};
use serde_json::Value as Json;

use crate::policy::snapshot::{group_of, Snapshot};
use crate::scan::report::{self, ReportApi, ReportMeta, ReportResult};
use crate::scan::Resource;

/// The name of every report the admission writer owns.
pub const REPORT_NAME: &str = "celgate-admission";
/// The name of every report the background scans write.
pub const BACKGROUND_REPORT_NAME: &str = "celgate-background";
/// The server-side apply field manager.
pub const FIELD_MANAGER: &str = "celgate";
/// Results per report by default: well under the API server's 1.5 MiB object limit (a
/// result takes about 400 bytes).
pub const DEFAULT_MAX_RESULTS: usize = 2000;
/// Resources the admission state keeps at most by default (`--reports-max-resources`): at a
/// few hundred bytes per result, tens of MB.
pub const DEFAULT_MAX_RESOURCES: usize = 100_000;

/// How reports are written.
#[derive(Debug, Clone)]
pub struct ReportOptions {
    pub api: ReportApi,
    /// Each report is written at most once per interval.
    pub interval: Duration,
    /// Results listed per report at most (see [`ReportMeta::max_results`]).
    pub max_results: usize,
    /// Resources the admission state keeps at most; past it, the one recorded longest ago
    /// is evicted (its results leave the reports).
    pub max_resources: usize,
}

impl Default for ReportOptions {
    fn default() -> Self {
        ReportOptions {
            api: ReportApi::WgPolicy,
            interval: Duration::from_secs(10),
            max_results: DEFAULT_MAX_RESULTS,
            max_resources: DEFAULT_MAX_RESOURCES,
        }
    }
}

/// A resource whose results were adopted from an existing report, as recorded then.
#[derive(Debug, Clone)]
pub struct Adopted {
    namespace: String,
    key: String,
    seq: u64,
    pub resource: Resource,
}

/// One resource's current results.
#[derive(Debug)]
struct Entry {
    resource: Resource,
    results: Vec<ReportResult>,
    /// When it was last recorded ([`State::next_seq`] then).
    seq: u64,
}

#[derive(Debug, Default)]
struct State {
    /// Namespace (`""`: the cluster report) -> resource key -> its results.
    namespaces: BTreeMap<String, BTreeMap<String, Entry>>,
    /// Every entry by its `seq`, oldest first: what eviction drops first.
    order: BTreeMap<u64, (String, String)>,
    /// The `seq` of the next recorded entry.
    next_seq: u64,
    /// Reports to write (or delete) at the next flush.
    dirty: BTreeSet<String>,
    /// Stale reports are looked for at the next flush (see [`ReportStore::request_sweep`]).
    sweep: bool,
    /// The policies and bindings of the last snapshot [`ReportStore::retain`] saw; `None`
    /// before the first, when existing reports cannot be adopted yet.
    known: Option<Known>,
}

impl State {
    /// Removes one entry (and its place in `order`); whether it was there.
    fn remove(&mut self, namespace: &str, key: &str) -> bool {
        let Some(e) = self
            .namespaces
            .get_mut(namespace)
            .and_then(|m| m.remove(key))
        else {
            return false;
        };
        self.order.remove(&e.seq);
        self.dirty.insert(namespace.to_string());
        true
    }

    /// Rebuilds `order` from the entries (after a wholesale change).
    fn reindex(&mut self) {
        self.order = self
            .namespaces
            .iter()
            .flat_map(|(ns, m)| m.iter().map(move |(k, e)| (e.seq, (ns.clone(), k.clone()))))
            .collect();
    }

    fn len(&self) -> usize {
        self.order.len()
    }
}

/// The current results, shared by the serving threads (which record) and the writer.
#[derive(Debug)]
pub struct ReportStore {
    state: Mutex<State>,
    /// The reports' name.
    name: &'static str,
    /// Their `celgate.io/source` label.
    source: &'static str,
    /// Resources kept at most (the oldest evicted past it).
    max_resources: usize,
    /// Resources evicted so far for `max_resources`.
    evicted: AtomicU64,
    /// Whether a writer taking over first adopts the results of the existing reports
    /// ([`Self::adopt`]): the admission reports, whose state each replica only partly saw.
    adopts: bool,
}

/// The admission results' store, unbounded.
impl Default for ReportStore {
    fn default() -> Self {
        ReportStore::admission(usize::MAX)
    }
}

/// `r` as reports list it: a Namespace, whose admission requests name it as their
/// namespace, is cluster-scoped and has none (as the background scans list it).
fn normalized(mut r: Resource) -> Resource {
    if r.kind == "Namespace" && r.api_version == "v1" {
        r.namespace.clear();
    }
    r
}

/// The report a (normalized) resource's results go to: its namespace, or the cluster
/// report (`""`) for a cluster-scoped object.
fn report_namespace(r: &Resource) -> &str {
    &r.namespace
}

fn resource_key(r: &Resource) -> String {
    if r.uid.is_empty() {
        format!("{}/{}/{}", r.api_version, r.kind, r.name)
    } else {
        r.uid.clone()
    }
}

impl ReportStore {
    /// The admission results' store, keeping at most `max_resources` resources.
    pub fn admission(max_resources: usize) -> ReportStore {
        ReportStore {
            state: Mutex::default(),
            name: REPORT_NAME,
            source: "admission",
            max_resources,
            evicted: AtomicU64::new(0),
            adopts: true,
        }
    }

    /// The background scans' store: reports `celgate-background`, labelled with the source
    /// `background`, apart from the admission reports. Unbounded: each scan replaces it
    /// with what exists.
    pub fn background() -> ReportStore {
        ReportStore {
            state: Mutex::default(),
            name: BACKGROUND_REPORT_NAME,
            source: "background",
            max_resources: usize::MAX,
            evicted: AtomicU64::new(0),
            adopts: false,
        }
    }

    /// Resources evicted so far because the store was full.
    pub fn evicted(&self) -> u64 {
        self.evicted.load(Ordering::Relaxed)
    }

    /// Resources with results now.
    pub fn resources(&self) -> usize {
        self.lock().len()
    }

    /// A mark of this moment: entries recorded later are newer than it (for
    /// [`Self::prune_absent`]).
    pub fn sequence(&self) -> u64 {
        self.lock().next_seq
    }

    /// The name of this store's reports.
    pub fn name(&self) -> &'static str {
        self.name
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic while holding the lock leaves consistent maps: keep going.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `resource`'s results are now `results` (none: it has no result left).
    pub fn record(&self, resource: Resource, results: Vec<ReportResult>) {
        let resource = normalized(resource);
        let namespace = report_namespace(&resource).to_string();
        let key = resource_key(&resource);
        let mut state = self.lock();
        if results.is_empty() {
            state.remove(&namespace, &key);
            return;
        }
        let state = &mut *state;
        let seq = state.next_seq;
        state.next_seq += 1;
        let objects = state.namespaces.entry(namespace.clone()).or_default();
        let unchanged = objects.get(&key).is_some_and(|e| {
            e.resource == resource
                && e.results.len() == results.len()
                && e.results
                    .iter()
                    .zip(&results)
                    .all(|(a, b)| same_outcome(a, b))
        });
        // Even unchanged, it was seen now: the last to be evicted.
        let entry = Entry {
            resource,
            results,
            seq,
        };
        if let Some(old) = objects.insert(key.clone(), entry) {
            state.order.remove(&old.seq);
        }
        state.order.insert(seq, (namespace.clone(), key));
        if !unchanged {
            state.dirty.insert(namespace);
        }
        self.evict_over_bound(state);
    }

    /// Past `max_resources`, drops the entries recorded longest ago, counted.
    fn evict_over_bound(&self, state: &mut State) {
        let mut evicted = 0u64;
        while state.len() > self.max_resources {
            let Some((_, (ns, key))) = state.order.pop_first() else {
                break;
            };
            if let Some(m) = state.namespaces.get_mut(&ns) {
                m.remove(&key);
            }
            state.dirty.insert(ns);
            evicted += 1;
        }
        if evicted > 0 {
            let before = self.evicted.fetch_add(evicted, Ordering::Relaxed);
            if before == 0 {
                tracing::warn!(
                    max_resources = self.max_resources,
                    "policy reports: more resources than --reports-max-resources; the results recorded longest ago are dropped (counted in celgate_report_resources_evicted_total)"
                );
            }
        }
    }

    /// After a complete background scan that listed every object of the kinds `scanned`
    /// (`(group, kind)`), whose uids are `listed`: drops the results of resources of those
    /// kinds that the scan did not list (deleted while no DELETE reached this replica, or
    /// admitted by another one and gone since), among those recorded before `before`
    /// ([`Self::sequence`] when the scan started: newer ones may postdate the list). Entries
    /// without a uid, and of kinds not scanned (an UPDATE-only binding's), stay.
    pub fn prune_absent(
        &self,
        scanned: &BTreeSet<(String, String)>,
        listed: &HashSet<String>,
        before: u64,
    ) -> usize {
        let mut state = self.lock();
        let gone: Vec<(String, String)> = state
            .namespaces
            .iter()
            .flat_map(|(ns, m)| m.iter().map(move |(k, e)| (ns, k, e)))
            .filter(|(_, _, e)| {
                let r = &e.resource;
                e.seq < before
                    && !r.uid.is_empty()
                    && !listed.contains(&r.uid)
                    && scanned.contains(&(group_of(&r.api_version).to_string(), r.kind.clone()))
            })
            .map(|(ns, k, _)| (ns.clone(), k.clone()))
            .collect();
        for (ns, key) in &gone {
            state.remove(ns, key);
        }
        gone.len()
    }

    /// Drops the results of policies and bindings `snapshot` no longer has; results
    /// adopted later are checked against it too.
    pub fn retain(&self, snapshot: &Snapshot) {
        self.retain_known(
            snapshot
                .policies
                .iter()
                .map(|p| {
                    let bindings = p.bindings.iter().map(|b| b.name.clone()).collect();
                    (p.policy.name.clone(), bindings)
                })
                .collect(),
        );
    }

    /// [`Self::retain`] of the policies and bindings named in `known`.
    fn retain_known(&self, known: Known) {
        let mut state = self.lock();
        let State {
            namespaces,
            dirty,
            known: kept,
            ..
        } = &mut *state;
        let known = kept.insert(known);
        for (namespace, objects) in namespaces.iter_mut() {
            let mut changed = false;
            objects.retain(|_, e| {
                let before = e.results.len();
                e.results.retain(|r| is_known(known, r));
                changed |= e.results.len() != before;
                !e.results.is_empty()
            });
            if changed {
                dirty.insert(namespace.clone());
            }
        }
        state.reindex();
    }

    /// A writer taking over adopts the results of the existing reports `reports` (each
    /// report's namespace, `""` for the cluster report, with its results): it did not see
    /// those admissions, but they were true when written. Results of policies and bindings
    /// the last snapshot does not have are left out; a resource this store recorded more
    /// recently (its newest result's timestamp not older) keeps its own results. Every
    /// report listed is rewritten at the next flush (deleted when nothing is left in it).
    /// Returns the resources adopted, whose existence the writer confirms
    /// ([`Self::forget`]); `None`, adopting nothing, before the first snapshot.
    pub fn adopt(
        &self,
        reports: impl IntoIterator<Item = (String, Vec<(Resource, ReportResult)>)>,
    ) -> Option<Vec<Adopted>> {
        let mut state = self.lock();
        let state = &mut *state;
        let known = state.known.as_ref()?;
        let mut found: BTreeMap<(String, String), (Resource, Vec<ReportResult>)> = BTreeMap::new();
        for (namespace, results) in reports {
            state.dirty.insert(namespace);
            for (resource, result) in results {
                if !is_known(known, &result) {
                    continue;
                }
                let resource = normalized(resource);
                let at = (
                    report_namespace(&resource).to_string(),
                    resource_key(&resource),
                );
                found
                    .entry(at)
                    .or_insert_with(|| (resource, Vec::new()))
                    .1
                    .push(result);
            }
        }
        let newest = |results: &[ReportResult]| results.iter().map(|r| r.timestamp).max();
        let mut adopted = Vec::new();
        for ((namespace, key), (resource, results)) in found {
            let objects = state.namespaces.entry(namespace.clone()).or_default();
            if let Some(ours) = objects.get(&key) {
                if newest(&ours.results) >= newest(&results) {
                    continue;
                }
                state.order.remove(&ours.seq);
            }
            let seq = state.next_seq;
            state.next_seq += 1;
            let entry = Entry {
                resource: resource.clone(),
                results,
                seq,
            };
            objects.insert(key.clone(), entry);
            state.order.insert(seq, (namespace.clone(), key.clone()));
            state.dirty.insert(namespace.clone());
            adopted.push(Adopted {
                namespace,
                key,
                seq,
                resource,
            });
        }
        self.evict_over_bound(state);
        Some(adopted)
    }

    /// Drops the adopted resources found `gone`, unless recorded again since (a newer
    /// admission's results stay); how many were dropped.
    pub fn forget<'a>(&self, gone: impl IntoIterator<Item = &'a Adopted>) -> usize {
        let mut state = self.lock();
        let mut dropped = 0;
        for a in gone {
            let unchanged = state
                .namespaces
                .get(&a.namespace)
                .and_then(|m| m.get(&a.key))
                .is_some_and(|e| e.seq == a.seq);
            if unchanged && state.remove(&a.namespace, &a.key) {
                dropped += 1;
            }
        }
        dropped
    }

    /// A complete state at once (a background scan's): every resource's results are now
    /// those of `results`, except the resources for which `keep` holds, whose results stay
    /// (a resource kind that could not be listed this time). Only reports whose results
    /// changed are marked dirty; a namespace left without results gets its report deleted.
    pub fn replace(
        &self,
        results: impl IntoIterator<Item = (Resource, Vec<ReportResult>)>,
        keep: impl Fn(&Resource) -> bool,
    ) {
        let mut state = self.lock();
        let mut seq = state.next_seq;
        let mut fresh: BTreeMap<String, BTreeMap<String, Entry>> = BTreeMap::new();
        for (resource, results) in results {
            if results.is_empty() {
                continue;
            }
            seq += 1;
            fresh
                .entry(report_namespace(&resource).to_string())
                .or_default()
                .insert(
                    resource_key(&resource),
                    Entry {
                        resource,
                        results,
                        seq,
                    },
                );
        }
        state.next_seq = seq + 1;
        let State {
            namespaces, dirty, ..
        } = &mut *state;
        for (namespace, objects) in namespaces.iter() {
            for (key, e) in objects {
                if keep(&e.resource) {
                    let kept = Entry {
                        resource: e.resource.clone(),
                        results: e.results.clone(),
                        seq: e.seq,
                    };
                    fresh
                        .entry(namespace.clone())
                        .or_default()
                        .entry(key.clone())
                        .or_insert(kept);
                }
            }
        }
        let same = |a: &BTreeMap<String, Entry>, b: &BTreeMap<String, Entry>| {
            a.len() == b.len()
                && a.iter().zip(b).all(|((ka, ea), (kb, eb))| {
                    ka == kb
                        && ea.resource == eb.resource
                        && ea.results.len() == eb.results.len()
                        && ea
                            .results
                            .iter()
                            .zip(&eb.results)
                            .all(|(x, y)| same_outcome(x, y))
                })
        };
        let empty = BTreeMap::new();
        for namespace in namespaces.keys().chain(fresh.keys()) {
            let old = namespaces.get(namespace).unwrap_or(&empty);
            let new = fresh.get(namespace).unwrap_or(&empty);
            if !same(old, new) {
                dirty.insert(namespace.clone());
            }
        }
        *namespaces = fresh;
        state.reindex();
    }

    /// The state is complete (a background scan's that listed everything): at its next
    /// flush, the writer deletes every report of this store's source that celgate wrote
    /// (label `app.kubernetes.io/managed-by: celgate`) but that the state no longer has, such
    /// as those a previous Lease holder left in namespaces without results now.
    pub fn request_sweep(&self) {
        self.lock().sweep = true;
    }

    fn take_sweep(&self) -> bool {
        std::mem::take(&mut self.lock().sweep)
    }

    /// Whether the report `name` of `namespace` (`""`: the cluster report) is one this
    /// store has results for.
    fn has_report(&self, namespace: &str, name: &str) -> bool {
        name == self.name
            && self
                .lock()
                .namespaces
                .get(namespace)
                .is_some_and(|m| !m.is_empty())
    }

    /// Marks every report with results dirty (a writer taking over writes them all).
    fn mark_all(&self) {
        let mut state = self.lock();
        let State {
            namespaces, dirty, ..
        } = &mut *state;
        dirty.extend(namespaces.keys().cloned());
    }

    /// The dirty reports, cleared: each namespace (`""`: the cluster) with its report, or
    /// `None` when it has no result left (the report is deleted).
    pub fn take_dirty(&self, options: &ReportOptions) -> Vec<(String, Option<Json>)> {
        let mut state = self.lock();
        let dirty = std::mem::take(&mut state.dirty);
        let meta = ReportMeta {
            name: self.name,
            source: self.source,
            max_results: options.max_results,
        };
        let mut out = Vec::with_capacity(dirty.len());
        for namespace in dirty {
            let objects = state.namespaces.get(&namespace).filter(|m| !m.is_empty());
            let report = objects.map(|objects| {
                let ns = (!namespace.is_empty()).then_some(namespace.as_str());
                let results = objects
                    .values()
                    .flat_map(|e| e.results.iter().map(move |r| (&e.resource, r)));
                report::report(options.api, ns, meta, results)
            });
            if report.is_none() {
                state.namespaces.remove(&namespace);
            }
            out.push((namespace, report));
        }
        out
    }

    /// Puts reports whose write failed back for the next flush.
    fn mark(&self, namespaces: impl IntoIterator<Item = String>) {
        self.lock().dirty.extend(namespaces);
    }
}

/// Policy name -> the names of its bindings, in a snapshot.
type Known = BTreeMap<String, BTreeSet<String>>;

/// Whether `r`'s policy and binding are among `known`.
fn is_known(known: &Known, r: &ReportResult) -> bool {
    known
        .get(r.policy.as_str())
        .is_some_and(|b| b.contains(r.binding.as_str()))
}

/// Two results that report the same (the timestamp aside): an unchanged admission does not
/// rewrite its report.
fn same_outcome(a: &ReportResult, b: &ReportResult) -> bool {
    a.policy == b.policy
        && a.binding == b.binding
        && a.validation == b.validation
        && a.result == b.result
        && a.message == b.message
        && a.reason == b.reason
        && a.actions == b.actions
}

impl ReportStore {
    /// A review answered on `snapshot` with its results traced
    /// ([`crate::review::AnswerOptions::trace`]): the reported object's results replace its
    /// previous ones; its DELETE removes them.
    pub fn admitted(&self, snapshot: &Snapshot, answer: &crate::review::Answer) {
        let Some(resource) = &answer.reported else {
            return;
        };
        if answer.operation == "DELETE" {
            self.record(resource.clone(), Vec::new());
            return;
        }
        let now = unix_now();
        let results = crate::scan::verdict_results(snapshot, &answer.verdict)
            .iter()
            .filter_map(|r| ReportResult::of(snapshot, r, now))
            .collect();
        self.record(resource.clone(), results);
    }
}

pub(super) fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

/// The API resource of a report kind.
fn api_resource(api: ReportApi, cluster: bool) -> ApiResource {
    let (group, version) = match api {
        ReportApi::WgPolicy => ("wgpolicyk8s.io", "v1alpha2"),
        ReportApi::OpenReports => ("openreports.io", "v1alpha1"),
    };
    let (kind, plural) = match (api, cluster) {
        (ReportApi::WgPolicy, false) => ("PolicyReport", "policyreports"),
        (ReportApi::WgPolicy, true) => ("ClusterPolicyReport", "clusterpolicyreports"),
        (ReportApi::OpenReports, false) => ("Report", "reports"),
        (ReportApi::OpenReports, true) => ("ClusterReport", "clusterreports"),
    };
    ApiResource {
        group: group.into(),
        version: version.into(),
        api_version: format!("{group}/{version}"),
        kind: kind.into(),
        plural: plural.into(),
    }
}

/// Writes the dirty reports every `options.interval` while `term` says this replica writes
/// (the Lease term it holds, `None` while it does not); runs until aborted. The term is
/// checked again after adopting and before each write and delete: a replica that lost the
/// Lease meanwhile (the adoption lists across all namespaces, and may be slow) must not
/// write over the new holder's reports, and one that lost and regained it adopts again.
pub async fn write(
    client: Client,
    store: Arc<ReportStore>,
    options: ReportOptions,
    term: impl Fn() -> Option<u64> + Send + 'static,
) {
    // The term whose reports were adopted, hence that this replica writes in.
    let mut writing = None;
    // Confirmations of adopted resources, beside the writes (dropped, hence aborted, with
    // this task).
    let mut confirming = tokio::task::JoinSet::new();
    loop {
        tokio::time::sleep(options.interval).await;
        while confirming.try_join_next().is_some() {}
        let now = term();
        if now.is_none() {
            writing = None;
            continue;
        }
        let mut adopted = Vec::new();
        if now != writing {
            writing = None;
            // Nothing is written before the existing reports are adopted: a partial view
            // would replace what others saw.
            if store.adopts {
                match adopt(&client, options.api, &store).await {
                    Ok(Some(a)) => adopted = a,
                    Ok(None) => continue,
                    Err(e) => {
                        tracing::warn!(error = %e, "existing policy reports not listed; nothing written until they are (tried again at the next interval)");
                        continue;
                    }
                }
            }
            if term() != now {
                // Lost during the adoption: adopted again once regained.
                continue;
            }
            tracing::info!(adopted = adopted.len(), "writing policy reports");
            store.mark_all();
            writing = now;
        }
        let mut dirty = store.take_dirty(&options).into_iter();
        while let Some((namespace, report)) = dirty.next() {
            if term() != writing {
                // Written by whoever holds the Lease now, or by this replica once it holds
                // it again (after adopting).
                store.mark(std::iter::once(namespace).chain(dirty.map(|(ns, _)| ns)));
                writing = None;
                break;
            }
            let written = write_one(&client, options.api, store.name, &namespace, report);
            if let Err(e) = written.await {
                tracing::warn!(namespace, error = %e, "policy report not written; retried at the next interval");
                store.mark([namespace]);
            }
        }
        if !adopted.is_empty() {
            confirming.spawn(confirm(client.clone(), store.clone(), adopted));
        }
        if writing.is_some() && store.take_sweep() {
            let still_writing = || writing.is_some() && term() == writing;
            if let Err(e) = sweep(&client, options.api, &store, &still_writing).await {
                tracing::warn!(error = %e, "stale policy reports not listed; looked for again at the next interval");
                store.request_sweep();
            }
        }
    }
}

/// The label selector of the reports of `store`'s source that celgate wrote.
fn selector(store: &ReportStore) -> String {
    format!(
        "app.kubernetes.io/managed-by={FIELD_MANAGER},celgate.io/source={}",
        store.source
    )
}

/// Lists `store`'s existing reports (namespaced and cluster) and adopts their results
/// ([`ReportStore::adopt`]).
async fn adopt(
    client: &Client,
    api: ReportApi,
    store: &ReportStore,
) -> Result<Option<Vec<Adopted>>, kube::Error> {
    let params = ListParams::default().labels(&selector(store));
    let mut found = Vec::new();
    for cluster in [false, true] {
        let reports: Api<DynamicObject> =
            Api::all_with(client.clone(), &api_resource(api, cluster));
        for report in reports.list(&params).await? {
            if report.metadata.name.as_deref() != Some(store.name) {
                continue;
            }
            let namespace = report.metadata.namespace.clone().unwrap_or_default();
            let results = match report.data.get("results") {
                Some(Json::Array(results)) => {
                    results.iter().filter_map(ReportResult::from_json).collect()
                }
                _ => Vec::new(),
            };
            found.push((namespace, results));
        }
    }
    Ok(store.adopt(found))
}

/// Drops the adopted resources that no longer exist ([`absent`]) from `store`; their
/// reports are rewritten at the next flush.
async fn confirm(client: Client, store: Arc<ReportStore>, adopted: Vec<Adopted>) {
    let gone = absent(&client, &adopted).await;
    let dropped = store.forget(gone);
    if dropped > 0 {
        tracing::info!(
            resources = dropped,
            "admission reports: adopted results of resources that no longer exist dropped"
        );
    }
}

/// Whether an object's kind is served, and where.
enum Served {
    At(ApiResource, bool),
    /// Not served: no object of it exists.
    Not,
    /// Discovery failed: existence is not known.
    Unknown,
}

/// The adopted resources that no longer exist: a GET by name (one per resource, once per
/// takeover, one at a time so as not to load the API server) answers 404, or finds an
/// object of another uid, or the kind is no longer served. A resource whose GET fails
/// otherwise is kept (it existed when reported).
async fn absent<'a>(client: &Client, adopted: &'a [Adopted]) -> Vec<&'a Adopted> {
    let mut kinds: BTreeMap<(String, String), Served> = BTreeMap::new();
    let mut gone = Vec::new();
    for a in adopted {
        let r = &a.resource;
        let kind = (r.api_version.clone(), r.kind.clone());
        if !kinds.contains_key(&kind) {
            let served = served(client, r).await;
            kinds.insert(kind.clone(), served);
        }
        let (resource, namespaced) = match kinds.get(&kind) {
            Some(Served::At(resource, namespaced)) => (resource, *namespaced),
            Some(Served::Not) => {
                gone.push(a);
                continue;
            }
            _ => continue,
        };
        let objects: Api<DynamicObject> = match (namespaced, r.namespace.as_str()) {
            (true, "") => continue,
            (true, ns) => Api::namespaced_with(client.clone(), ns, resource),
            (false, _) => Api::all_with(client.clone(), resource),
        };
        match objects.get_opt(&r.name).await {
            Ok(None) => gone.push(a),
            Ok(Some(o)) => {
                let uid = o.metadata.uid.as_deref().unwrap_or_default();
                if !r.uid.is_empty() && !uid.is_empty() && uid != r.uid {
                    gone.push(a);
                }
            }
            Err(e) => {
                tracing::debug!(resource = %r.display(), error = %e, "admission reports: cannot tell whether an adopted resource exists; kept")
            }
        }
    }
    gone
}

/// Where `r`'s kind is served (discovery of its group version).
async fn served(client: &Client, r: &Resource) -> Served {
    let (group, version) = match r.api_version.split_once('/') {
        Some((g, v)) => (g, v),
        None => ("", r.api_version.as_str()),
    };
    let gvk = GroupVersionKind::gvk(group, version, &r.kind);
    match kube::discovery::pinned_kind(client, &gvk).await {
        Ok((resource, caps)) => Served::At(resource, caps.scope == Scope::Namespaced),
        Err(kube::Error::Discovery(DiscoveryError::MissingKind(_))) => Served::Not,
        Err(kube::Error::Api(s)) if s.code == 404 => Served::Not,
        Err(e) => {
            tracing::debug!(api_version = %r.api_version, kind = %r.kind, error = %e, "admission reports: discovery failed; adopted results of this kind kept");
            Served::Unknown
        }
    }
}

/// Deletes the reports of `store`'s source that celgate wrote and `store` has no results
/// for (namespaced and cluster reports); a failed delete is logged and left to the next
/// sweep.
async fn sweep(
    client: &Client,
    api: ReportApi,
    store: &ReportStore,
    is_writer: &impl Fn() -> bool,
) -> Result<(), kube::Error> {
    let params = ListParams::default().labels(&selector(store));
    for cluster in [false, true] {
        let reports: Api<DynamicObject> =
            Api::all_with(client.clone(), &api_resource(api, cluster));
        for report in reports.list(&params).await? {
            let namespace = report.metadata.namespace.clone().unwrap_or_default();
            let name = report.metadata.name.clone().unwrap_or_default();
            if store.has_report(&namespace, &name) {
                continue;
            }
            if !is_writer() {
                // The new holder sweeps; this replica sweeps again once it holds the Lease.
                store.request_sweep();
                return Ok(());
            }
            let deleted = write_one(client, api, &name, &namespace, None).await;
            match deleted {
                Ok(()) => {
                    tracing::info!(
                        namespace,
                        name,
                        source = store.source,
                        "stale policy report deleted"
                    )
                }
                Err(e) => {
                    tracing::warn!(namespace, name, error = %e, "stale policy report not deleted");
                    store.request_sweep();
                }
            }
        }
    }
    Ok(())
}

async fn write_one(
    client: &Client,
    api: ReportApi,
    name: &str,
    namespace: &str,
    report: Option<Json>,
) -> Result<(), kube::Error> {
    let cluster = namespace.is_empty();
    let resource = api_resource(api, cluster);
    let reports: Api<DynamicObject> = if cluster {
        Api::all_with(client.clone(), &resource)
    } else {
        Api::namespaced_with(client.clone(), namespace, &resource)
    };
    match report {
        Some(report) => {
            let params = PatchParams::apply(FIELD_MANAGER).force();
            reports.patch(name, &params, &Patch::Apply(&report)).await?;
        }
        None => match reports.delete(name, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => return Err(e),
        },
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::PolicyResult;

    fn resource(ns: &str, name: &str, uid: &str) -> Resource {
        Resource {
            api_version: "v1".into(),
            kind: "Pod".into(),
            namespace: ns.into(),
            name: name.into(),
            uid: uid.into(),
        }
    }

    fn result(policy: &str, result: PolicyResult) -> ReportResult {
        ReportResult {
            policy: policy.into(),
            binding: format!("{policy}-binding"),
            validation: Some(0),
            actions: "Deny".into(),
            result,
            message: if result == PolicyResult::Fail {
                "bad".into()
            } else {
                String::new()
            },
            reason: None,
            timestamp: 1,
        }
    }

    fn options(max_results: usize) -> ReportOptions {
        ReportOptions {
            api: ReportApi::WgPolicy,
            interval: Duration::from_secs(10),
            max_results,
            max_resources: usize::MAX,
        }
    }

    #[test]
    fn newer_admission_replaces_and_empty_removes() {
        let store = ReportStore::default();
        store.record(
            resource("a", "p", "u1"),
            vec![result("x", PolicyResult::Fail)],
        );
        store.record(
            resource("a", "p", "u1"),
            vec![result("x", PolicyResult::Pass)],
        );
        let dirty = store.take_dirty(&options(100));
        assert_eq!(dirty.len(), 1);
        let report = dirty[0].1.as_ref().unwrap();
        assert_eq!(report["metadata"]["namespace"], "a");
        assert_eq!(report["summary"]["pass"], 1);
        assert_eq!(report["summary"]["fail"], 0);
        assert_eq!(report["results"].as_array().unwrap().len(), 1);
        // Unchanged: nothing to write.
        store.record(
            resource("a", "p", "u1"),
            vec![result("x", PolicyResult::Pass)],
        );
        assert!(store.take_dirty(&options(100)).is_empty());
        // Deleted: the report goes.
        store.record(resource("a", "p", "u1"), Vec::new());
        assert_eq!(
            store.take_dirty(&options(100)),
            vec![("a".to_string(), None)]
        );
    }

    /// A scan's state replaces the last one: a fixed object's result changes, a deleted
    /// one's goes (and with it its namespace's report), kept kinds stay, and unchanged
    /// reports are not rewritten.
    #[test]
    fn a_scan_replaces_the_previous_state() {
        let store = ReportStore::background();
        let mut cm = resource("b", "c", "u3");
        cm.kind = "ConfigMap".into();
        store.replace(
            vec![
                (
                    resource("a", "p1", "u1"),
                    vec![result("x", PolicyResult::Fail)],
                ),
                (
                    resource("a", "p2", "u2"),
                    vec![result("x", PolicyResult::Pass)],
                ),
                (cm.clone(), vec![result("x", PolicyResult::Fail)]),
            ],
            |_| false,
        );
        let dirty = store.take_dirty(&options(100));
        assert_eq!(dirty.len(), 2);
        let report = dirty[0].1.as_ref().unwrap();
        assert_eq!(report["metadata"]["name"], BACKGROUND_REPORT_NAME);
        assert_eq!(
            report["metadata"]["labels"]["celgate.io/source"],
            "background"
        );
        // The same state again: nothing to write.
        store.replace(
            vec![
                (
                    resource("a", "p1", "u1"),
                    vec![result("x", PolicyResult::Fail)],
                ),
                (
                    resource("a", "p2", "u2"),
                    vec![result("x", PolicyResult::Pass)],
                ),
                (cm.clone(), vec![result("x", PolicyResult::Fail)]),
            ],
            |_| false,
        );
        assert!(store.take_dirty(&options(100)).is_empty());
        // p1 fixed, p2 deleted; ConfigMaps could not be listed: theirs stay.
        store.replace(
            vec![(
                resource("a", "p1", "u1"),
                vec![result("x", PolicyResult::Pass)],
            )],
            |r| r.kind == "ConfigMap",
        );
        let dirty = store.take_dirty(&options(100));
        assert_eq!(dirty.len(), 1, "{dirty:?}");
        let report = dirty[0].1.as_ref().unwrap();
        assert_eq!(report["summary"]["pass"], 1);
        assert_eq!(report["summary"]["fail"], 0);
        assert_eq!(report["results"].as_array().unwrap().len(), 1);
        // Nothing left in `a`: its report is deleted; `b` is kept as it was.
        store.replace(Vec::new(), |r| r.kind == "ConfigMap");
        assert_eq!(
            store.take_dirty(&options(100)),
            vec![("a".to_string(), None)]
        );
        store.replace(Vec::new(), |_| false);
        assert_eq!(
            store.take_dirty(&options(100)),
            vec![("b".to_string(), None)]
        );
    }

    fn names(store: &ReportStore) -> Vec<String> {
        let state = store.lock();
        state
            .order
            .values()
            .map(|(ns, key)| state.namespaces[ns][key].resource.name.clone())
            .collect()
    }

    /// Past `max_resources`, the resource recorded longest ago goes (a re-recorded one is
    /// new again), its report is rewritten, and the eviction is counted.
    #[test]
    fn the_oldest_resource_is_evicted() {
        let store = ReportStore::admission(2);
        let fail = || vec![result("x", PolicyResult::Fail)];
        store.record(resource("a", "p1", "u1"), fail());
        store.record(resource("b", "p2", "u2"), fail());
        store.record(resource("a", "p1", "u1"), fail());
        assert!(store.evicted() == 0 && store.resources() == 2);
        let _ = store.take_dirty(&options(100));
        store.record(resource("a", "p3", "u3"), fail());
        assert_eq!(names(&store), ["p1", "p3"], "p2 was the oldest");
        assert_eq!(store.evicted(), 1);
        // b's report has no result left: deleted.
        let dirty = store.take_dirty(&options(100));
        assert_eq!(dirty.len(), 2);
        assert_eq!(dirty[0].0, "a");
        assert_eq!(dirty[1], ("b".to_string(), None));
        // Removing frees a place: no eviction.
        store.record(resource("a", "p1", "u1"), Vec::new());
        store.record(resource("a", "p4", "u4"), fail());
        assert_eq!(names(&store), ["p3", "p4"]);
        assert_eq!(store.evicted(), 1);
    }

    /// A complete scan drops the resources of scanned kinds it did not list and that were
    /// recorded before it started; listed ones, other kinds, newer ones and ones without a
    /// uid stay.
    #[test]
    fn absent_resources_of_scanned_kinds_are_pruned() {
        let store = ReportStore::default();
        let fail = || vec![result("x", PolicyResult::Fail)];
        store.record(resource("a", "listed", "u1"), fail());
        store.record(resource("a", "gone", "u2"), fail());
        store.record(resource("a", "no-uid", ""), fail());
        let mut cm = resource("a", "cm", "u3");
        cm.kind = "ConfigMap".into();
        store.record(cm, fail());
        let mut deploy = resource("a", "d", "u5");
        deploy.api_version = "apps/v1".into();
        deploy.kind = "Deployment".into();
        store.record(deploy, fail());
        let before = store.sequence();
        store.record(resource("a", "newer", "u4"), fail());
        let _ = store.take_dirty(&options(100));
        let scanned: BTreeSet<(String, String)> = [
            ("".to_string(), "Pod".to_string()),
            ("apps".to_string(), "Deployment".to_string()),
        ]
        .into();
        let listed: HashSet<String> = ["u1".to_string()].into();
        assert_eq!(store.prune_absent(&scanned, &listed, before), 2);
        assert_eq!(names(&store), ["listed", "no-uid", "cm", "newer"]);
        assert_eq!(store.take_dirty(&options(100)).len(), 1);
        // Nothing more to drop: nothing dirty.
        assert_eq!(store.prune_absent(&scanned, &listed, before), 0);
        assert!(store.take_dirty(&options(100)).is_empty());
    }

    #[test]
    fn namespaces_go_to_the_cluster_report() {
        let store = ReportStore::default();
        let mut ns = resource("team", "team", "n1");
        ns.kind = "Namespace".into();
        store.record(ns, vec![result("x", PolicyResult::Fail)]);
        let dirty = store.take_dirty(&options(100));
        assert_eq!(dirty[0].0, "");
        let report = dirty[0].1.as_ref().unwrap();
        assert_eq!(report["kind"], "ClusterPolicyReport");
        assert!(report["metadata"].get("namespace").is_none());
        // Cluster-scoped: its reference has no namespace, as a background scan lists it.
        let reference = &report["results"][0]["resources"][0];
        assert_eq!(reference["name"], "team");
        assert!(reference.get("namespace").is_none(), "{reference}");
    }

    fn known(pairs: &[(&str, &str)]) -> Known {
        let mut k = Known::new();
        for (p, b) in pairs {
            k.entry(p.to_string()).or_default().insert(b.to_string());
        }
        k
    }

    /// The results of `store`'s reports as a writer taking over reads them back.
    fn read_back(store: &ReportStore) -> Vec<(String, Vec<(Resource, ReportResult)>)> {
        store
            .take_dirty(&options(100))
            .into_iter()
            .filter_map(|(ns, report)| {
                let results = report?["results"]
                    .as_array()?
                    .iter()
                    .map(|r| ReportResult::from_json(r).unwrap())
                    .collect();
                Some((ns, results))
            })
            .collect()
    }

    /// A writer taking over adopts the results of existing reports: read back as written,
    /// a removed policy's left out, a resource it recorded more recently keeps its own,
    /// a report left without results is deleted; an adopted resource found gone is
    /// forgotten unless recorded again since. Nothing is adopted before a snapshot.
    #[test]
    fn existing_reports_are_adopted() {
        let previous = ReportStore::default();
        let mut fail = result("x", PolicyResult::Fail);
        fail.reason = Some("Forbidden".into());
        fail.timestamp = 5;
        previous.record(resource("a", "p1", "u1"), vec![fail.clone()]);
        previous.record(resource("a", "p2", "u2"), vec![fail.clone()]);
        previous.record(
            resource("a", "p3", "u3"),
            vec![fail.clone(), result("gone", PolicyResult::Fail)],
        );
        previous.record(
            resource("b", "p4", "u4"),
            vec![result("gone", PolicyResult::Fail)],
        );
        let reports = read_back(&previous);
        let p2 = reports[0].1.iter().find(|(r, _)| r.name == "p2").unwrap();
        assert_eq!((&p2.0, &p2.1), (&resource("a", "p2", "u2"), &fail));

        let store = ReportStore::default();
        assert!(store.adopt(reports.clone()).is_none(), "no snapshot yet");
        store.retain_known(known(&[("x", "x-binding")]));
        // This replica saw p1 pass after the report was written; p2 fail before.
        let mut pass = result("x", PolicyResult::Pass);
        pass.timestamp = 9;
        store.record(resource("a", "p1", "u1"), vec![pass]);
        let mut old = result("x", PolicyResult::Pass);
        old.timestamp = 1;
        store.record(resource("a", "p2", "u2"), vec![old]);
        let _ = store.take_dirty(&options(100));
        let adopted = store.adopt(reports).unwrap();
        let mut names: Vec<&str> = adopted.iter().map(|a| a.resource.name.as_str()).collect();
        names.sort();
        assert_eq!(names, ["p2", "p3"]);
        let dirty = store.take_dirty(&options(100));
        assert_eq!(dirty.len(), 2);
        assert_eq!(dirty[1], ("b".to_string(), None), "only a removed policy's");
        let report = dirty[0].1.as_ref().unwrap();
        assert_eq!(report["summary"]["pass"], 1, "p1: its own, newer");
        assert_eq!(
            report["summary"]["fail"], 2,
            "p2 adopted, p3 without `gone`"
        );
        assert_eq!(report["results"].as_array().unwrap().len(), 3);
        // p3 is gone; p2 too, but admitted again since: it stays.
        store.record(
            resource("a", "p2", "u2"),
            vec![result("x", PolicyResult::Pass)],
        );
        assert_eq!(store.forget(&adopted), 1);
        assert_eq!(names_of(&store), ["p1", "p2"]);
    }

    fn names_of(store: &ReportStore) -> Vec<String> {
        let mut n = names(store);
        n.sort();
        n
    }

    #[test]
    fn a_capped_report_keeps_failures_and_counts_the_rest() {
        let store = ReportStore::default();
        for i in 0..10 {
            let outcome = if i % 5 == 0 {
                PolicyResult::Fail
            } else {
                PolicyResult::Pass
            };
            store.record(
                resource("a", &format!("p{i}"), &format!("u{i}")),
                vec![result("x", outcome)],
            );
        }
        let dirty = store.take_dirty(&options(3));
        let report = dirty[0].1.as_ref().unwrap();
        let results = report["results"].as_array().unwrap();
        assert_eq!(results.len(), 3);
        let listed: Vec<&Json> = results.iter().map(|r| &r["result"]).collect();
        assert_eq!(listed, ["fail", "fail", "pass"], "failures kept, and first");
        assert_eq!(
            report["metadata"]["annotations"][report::DROPPED_ANNOTATION],
            "7"
        );
        // The summary counts every result.
        assert_eq!(report["summary"]["pass"], 8);
        assert_eq!(report["summary"]["fail"], 2);
    }
}
