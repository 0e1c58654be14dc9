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
//! Each replica keeps the results of the admissions it answered; the writer reports what it
//! saw (a replica that takes the Lease over writes its whole state at once).
//!
//! Background scans ([`super::background`]) have a store of their own, written the same way
//! as the reports `celgate-background` (label `celgate.io/source: background`); each scan
//! replaces its whole state ([`ReportStore::replace`]).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kube::api::{ApiResource, DeleteParams, DynamicObject, Patch, PatchParams};
use kube::{Api, Client};
use serde_json::Value as Json;

use crate::policy::snapshot::Snapshot;
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

/// How reports are written.
#[derive(Debug, Clone)]
pub struct ReportOptions {
    pub api: ReportApi,
    /// Each report is written at most once per interval.
    pub interval: Duration,
    /// Results listed per report at most (see [`ReportMeta::max_results`]).
    pub max_results: usize,
}

/// One resource's current results.
#[derive(Debug)]
struct Entry {
    resource: Resource,
    results: Vec<ReportResult>,
}

#[derive(Debug, Default)]
struct State {
    /// Namespace (`""`: the cluster report) -> resource key -> its results.
    namespaces: BTreeMap<String, BTreeMap<String, Entry>>,
    /// Reports to write (or delete) at the next flush.
    dirty: BTreeSet<String>,
}

/// The current results, shared by the serving threads (which record) and the writer.
#[derive(Debug)]
pub struct ReportStore {
    state: Mutex<State>,
    /// The reports' name.
    name: &'static str,
    /// Their `celgate.io/source` label.
    source: &'static str,
}

/// The admission results' store.
impl Default for ReportStore {
    fn default() -> Self {
        ReportStore {
            state: Mutex::default(),
            name: REPORT_NAME,
            source: "admission",
        }
    }
}

/// The report a resource's results go to: its namespace, or the cluster report for a
/// cluster-scoped object (a Namespace included, whose requests name it as their namespace).
fn report_namespace(r: &Resource) -> &str {
    if r.kind == "Namespace" && r.api_version == "v1" {
        ""
    } else {
        &r.namespace
    }
}

fn resource_key(r: &Resource) -> String {
    if r.uid.is_empty() {
        format!("{}/{}/{}", r.api_version, r.kind, r.name)
    } else {
        r.uid.clone()
    }
}

impl ReportStore {
    /// The background scans' store: reports `celgate-background`, labelled with the source
    /// `background`, apart from the admission reports.
    pub fn background() -> ReportStore {
        ReportStore {
            state: Mutex::default(),
            name: BACKGROUND_REPORT_NAME,
            source: "background",
        }
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
        let namespace = report_namespace(&resource).to_string();
        let key = resource_key(&resource);
        let mut state = self.lock();
        if results.is_empty() {
            let removed = state
                .namespaces
                .get_mut(&namespace)
                .and_then(|m| m.remove(&key))
                .is_some();
            if removed {
                state.dirty.insert(namespace);
            }
            return;
        }
        let objects = state.namespaces.entry(namespace.clone()).or_default();
        let unchanged = objects.get(&key).is_some_and(|e| {
            e.resource == resource
                && e.results.len() == results.len()
                && e.results
                    .iter()
                    .zip(&results)
                    .all(|(a, b)| same_outcome(a, b))
        });
        if unchanged {
            return;
        }
        objects.insert(key, Entry { resource, results });
        state.dirty.insert(namespace);
    }

    /// Drops the results of policies and bindings `snapshot` no longer has.
    pub fn retain(&self, snapshot: &Snapshot) {
        let known: BTreeSet<(&str, &str)> = snapshot
            .policies
            .iter()
            .flat_map(|p| {
                p.bindings
                    .iter()
                    .map(|b| (p.policy.name.as_str(), b.name.as_str()))
            })
            .collect();
        let mut state = self.lock();
        let State { namespaces, dirty } = &mut *state;
        for (namespace, objects) in namespaces.iter_mut() {
            let mut changed = false;
            objects.retain(|_, e| {
                let before = e.results.len();
                e.results
                    .retain(|r| known.contains(&(r.policy.as_str(), r.binding.as_str())));
                changed |= e.results.len() != before;
                !e.results.is_empty()
            });
            if changed {
                dirty.insert(namespace.clone());
            }
        }
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
        let mut fresh: BTreeMap<String, BTreeMap<String, Entry>> = BTreeMap::new();
        for (resource, results) in results {
            if results.is_empty() {
                continue;
            }
            fresh
                .entry(report_namespace(&resource).to_string())
                .or_default()
                .insert(resource_key(&resource), Entry { resource, results });
        }
        let mut state = self.lock();
        let State { namespaces, dirty } = &mut *state;
        for (namespace, objects) in namespaces.iter() {
            for (key, e) in objects {
                if keep(&e.resource) {
                    let kept = Entry {
                        resource: e.resource.clone(),
                        results: e.results.clone(),
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
    }

    /// Marks every report with results dirty (a writer taking over writes them all).
    fn mark_all(&self) {
        let mut state = self.lock();
        let State { namespaces, dirty } = &mut *state;
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
    /// ([`crate::review::answer_traced`]): the reported object's results replace its
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

/// Writes the dirty reports every `options.interval` while `is_writer` says this replica
/// writes; runs until aborted.
pub async fn write(
    client: Client,
    store: Arc<ReportStore>,
    options: ReportOptions,
    is_writer: impl Fn() -> bool + Send + 'static,
) {
    let mut was_writer = false;
    loop {
        tokio::time::sleep(options.interval).await;
        let writer = is_writer();
        if writer && !was_writer {
            tracing::info!("writing policy reports");
            store.mark_all();
        }
        was_writer = writer;
        if !writer {
            continue;
        }
        for (namespace, report) in store.take_dirty(&options) {
            let written = write_one(&client, options.api, store.name, &namespace, report);
            if let Err(e) = written.await {
                tracing::warn!(namespace, error = %e, "policy report not written; retried at the next interval");
                store.mark([namespace]);
            }
        }
    }
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
        let fails = results.iter().filter(|r| r["result"] == "fail").count();
        assert_eq!(fails, 2, "both failures kept");
        assert_eq!(
            report["metadata"]["annotations"][report::DROPPED_ANNOTATION],
            "7"
        );
        // The summary counts every result.
        assert_eq!(report["summary"]["pass"], 8);
        assert_eq!(report["summary"]["fail"], 2);
    }
}
