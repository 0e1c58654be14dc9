//! Background scans in the cluster (`serve --source kubernetes`, `--background-interval`):
//! every existing object that some binding can select is listed from the API server and
//! evaluated as the CREATE [`crate::scan::Scanner`] synthesises ("would this object be
//! admitted today?"), at start, on each policy or binding change and every interval.
//!
//! - Which resources: discovery (`/api`, `/apis` and the group versions of the groups some
//!   rule names), then, per group and resource (subresources and resources without `list`
//!   skipped, as those VAP never sees), the first version, preferred version first, at which
//!   a CREATE may match some (policy, binding): the policy's matchConstraints and the
//!   binding's matchResources, names and selectors aside
//!   ([`crate::matching::Matcher::may_match_some_object`]). Bindings whose rules match no
//!   CREATE select nothing. Sensitive resources ([`SENSITIVE`]: Secrets) are listed only
//!   when a rule of that policy or binding names them (`secrets`, not a `*`): a wildcard
//!   policy still judges Secrets at admission, but a scan does not read every Secret of the
//!   cluster (and the chart need not grant it) unless a policy asks for them.
//! - Listing: full objects, paginated (`limit` and `continue`), rate-limited (a request per
//!   `1/qps` at most, discovery included) with `concurrency` resources listed at once. A
//!   `410 Gone` on a continue token (the list expired) restarts that resource's list, its
//!   results so far dropped. Objects are evaluated page by page: a scan holds one page per
//!   list in flight, and the results.
//! - Evaluation: on one thread, against the snapshot current when the scan started (the
//!   whole scan sees one set of policies, bindings, params and namespaces); namespaces come
//!   from that snapshot only (no GET per object); `authorizer` checks ask the cluster about
//!   celgate's own service account, the request's user.
//! - Results: counted (the observer, i.e. the metrics), and when reports are written,
//!   replacing the previous scan's in the background report store: an object deleted or
//!   fixed since loses its failing result. Resources whose list or discovery failed keep
//!   their previous results. A complete scan (everything discovered and listed) also tells
//!   the admission reports which resources exist: an admission result of a scanned kind
//!   whose object was not listed goes ([`ReportStore::prune_absent`]), and the background
//!   reports celgate wrote that the new state does not have (a previous Lease holder's, in
//!   namespaces without results now) are deleted at the next write
//!   ([`ReportStore::request_sweep`]).
//! - With a Lease, only its holder scans (and writes); a replica that takes the Lease over
//!   scans at once. Changes coalesce over `debounce`; a scan is never run twice at once (a
//!   change during a scan makes one more scan after it).

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kube::api::ListParams;
use kube::Client;
use serde_json::{json, Value as Json};
use tokio::sync::{mpsc, watch};

use super::reports::{unix_now, ReportStore};
use crate::admission::{Evaluated, Services};
use crate::matching::{is_exempt, Matcher, RequestAttributes};
use crate::policy::snapshot::{group_of, Snapshot};
use crate::scan::report::ReportResult;
use crate::scan::{Resource, Scanner};

/// `--background-interval` by default.
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(3600);
/// `--background-page-size` by default: the page size kubectl and client-go's pager use.
pub const DEFAULT_PAGE_SIZE: u32 = 500;
/// `--background-qps` by default.
pub const DEFAULT_QPS: f64 = 20.0;
/// `--background-concurrency` by default.
pub const DEFAULT_CONCURRENCY: usize = 2;
/// `--background-debounce` by default.
pub const DEFAULT_DEBOUNCE: Duration = Duration::from_secs(5);
/// Times a resource's list restarts after `410 Gone` within one scan before it is given up
/// (its previous results kept).
const MAX_RESTARTS: u32 = 3;
/// How often a replica without the Lease checks whether it got it.
const LEADER_CHECK: Duration = Duration::from_secs(1);
/// A scan that could not discover anything is tried again this soon (or at the interval,
/// if shorter).
const RETRY: Duration = Duration::from_secs(60);

/// How background scans run.
#[derive(Debug, Clone)]
pub struct BackgroundOptions {
    /// Time from one scan's start to the next.
    pub interval: Duration,
    /// Policy and binding changes within this window make one scan.
    pub debounce: Duration,
    /// Objects per list request (`limit`).
    pub page_size: u32,
    /// Requests per second to the API server at most, discovery included.
    pub qps: f64,
    /// Resources listed at once.
    pub concurrency: usize,
    /// The requests' user (celgate's service account) and its groups.
    pub user: String,
    pub groups: Vec<String>,
}

impl Default for BackgroundOptions {
    fn default() -> Self {
        let (user, groups) = crate::scan::service_account_identity("celgate", "celgate");
        BackgroundOptions {
            interval: DEFAULT_INTERVAL,
            debounce: DEFAULT_DEBOUNCE,
            page_size: DEFAULT_PAGE_SIZE,
            qps: DEFAULT_QPS,
            concurrency: DEFAULT_CONCURRENCY,
            user,
            groups,
        }
    }
}

/// Receives what scans find: the composition root counts it in the metrics.
pub trait ScanObserver: Send + Sync {
    /// One object's (policy, binding) evaluations on `snapshot`.
    fn evaluated(&self, snapshot: &Snapshot, evaluated: &[Evaluated]);
    /// `objects` more objects of `resource` (`plural` or `plural.group`) evaluated.
    fn scanned(&self, resource: &str, objects: u64);
    /// A scan ended after `elapsed`; `complete` unless some resource could not be listed.
    fn finished(&self, elapsed: Duration, complete: bool);
}

/// The snapshot serving now.
pub type CurrentSnapshot = Arc<dyn Fn() -> Arc<Snapshot> + Send + Sync>;

/// A resource as discovery lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct ServedResource {
    /// `pods`, or `pods/status` for a subresource.
    pub plural: String,
    pub kind: String,
    pub namespaced: bool,
    pub verbs: Vec<String>,
}

/// A served API group: its preferred version and each version's resources, in discovery
/// order. The core group is named `""`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ServedGroup {
    pub name: String,
    pub preferred: String,
    pub versions: Vec<(String, Vec<ServedResource>)>,
}

/// A resource a scan lists, at one version.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Target {
    pub group: String,
    pub version: String,
    pub plural: String,
    pub kind: String,
    pub namespaced: bool,
}

impl Target {
    fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// The collection's path, cluster-wide.
    fn path(&self) -> String {
        if self.group.is_empty() {
            format!("/api/{}/{}", self.version, self.plural)
        } else {
            format!("/apis/{}/{}/{}", self.group, self.version, self.plural)
        }
    }

    /// `pods`, `deployments.apps`: the metric label (one per served resource, so bounded).
    pub fn label(&self) -> String {
        if self.group.is_empty() {
            self.plural.clone()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }

    /// What the scanner needs to build the request of a custom resource: its plural and
    /// scope, as a CRD tells them (discovery's answer, for built-in kinds too).
    fn as_crd(&self) -> Json {
        json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "spec": {
                "group": self.group,
                "names": {"kind": self.kind, "plural": self.plural},
                "scope": if self.namespaced { "Namespaced" } else { "Cluster" },
            }
        })
    }
}

/// Resources (group, plural) a scan lists only when a rule names them: reading them all
/// is a privilege a wildcard policy should not need.
pub const SENSITIVE: &[(&str, &str)] = &[("", "secrets")];

/// Whether some rule of `matcher` names `plural` of `group` itself (not through `*`).
fn names(matcher: &Matcher, group: &str, plural: &str) -> bool {
    matcher.rules().iter().any(|r| {
        r.resources.iter().any(|p| p == plural)
            && r.api_groups.iter().any(|g| g == group || g == "*")
    })
}

/// Each (policy matchConstraints, binding matchResources) pair of `snapshot`; a policy whose
/// matchConstraints do not compile selects nothing (its error is reported at admission).
fn pairs(snapshot: &Snapshot) -> Vec<(&Matcher, Option<&Matcher>)> {
    snapshot
        .policies
        .iter()
        .filter_map(|e| Some((e.policy.matcher.as_ref().ok()?, e)))
        .flat_map(|(m, e)| e.bindings.iter().map(move |b| (m, b.matcher.as_ref())))
        .collect()
}

/// The API groups some policy's rules name; `None`: every group (a `*`).
pub fn wanted_groups(snapshot: &Snapshot) -> Option<BTreeSet<String>> {
    let mut groups = BTreeSet::new();
    for (policy, _) in pairs(snapshot) {
        // Without rules a policy matches every resource (validation refuses that, but the
        // matcher allows it).
        if policy.rules().is_empty() {
            return None;
        }
        for rule in policy.rules() {
            for g in &rule.api_groups {
                if g == "*" {
                    return None;
                }
                groups.insert(g.clone());
            }
        }
    }
    Some(groups)
}

/// The resources a scan of `snapshot` lists, of those `served`: for each group and
/// resource, the first version (the group's preferred one first) at which a CREATE may
/// match some policy and its binding ([`SENSITIVE`] resources: some policy and binding, one
/// of which names them).
pub fn select(snapshot: &Snapshot, served: &[ServedGroup]) -> Vec<Target> {
    let pairs = pairs(snapshot);
    let mut out = Vec::new();
    for group in served {
        let preferred = group.versions.iter().filter(|(v, _)| *v == group.preferred);
        let others = group.versions.iter().filter(|(v, _)| *v != group.preferred);
        // Resource -> the versions serving it, preferred first.
        let mut by_plural: BTreeMap<&str, Vec<(&str, &ServedResource)>> = BTreeMap::new();
        for (version, resources) in preferred.chain(others) {
            for r in resources {
                let listable = r.verbs.iter().any(|v| v == "list");
                if r.plural.contains('/') || !listable || is_exempt(&group.name, &r.plural) {
                    continue;
                }
                by_plural.entry(&r.plural).or_default().push((version, r));
            }
        }
        for (plural, versions) in by_plural {
            let sensitive = SENSITIVE.contains(&(group.name.as_str(), plural));
            let chosen = versions.iter().find(|(version, r)| {
                let create = RequestAttributes {
                    operation: "CREATE".into(),
                    group: group.name.clone(),
                    version: version.to_string(),
                    resource: plural.to_string(),
                    // Any namespace: the rules' scope only asks whether there is one.
                    namespace: if r.namespaced {
                        "-".into()
                    } else {
                        String::new()
                    },
                    ..RequestAttributes::default()
                };
                pairs.iter().any(|(policy, binding)| {
                    policy.may_match_some_object(&create)
                        && binding.is_none_or(|b| b.may_match_some_object(&create))
                        && (!sensitive
                            || names(policy, &group.name, plural)
                            || binding.is_some_and(|b| names(b, &group.name, plural)))
                })
            });
            if let Some((version, r)) = chosen {
                out.push(Target {
                    group: group.name.clone(),
                    version: version.to_string(),
                    plural: plural.to_string(),
                    kind: r.kind.clone(),
                    namespaced: r.namespaced,
                });
            }
        }
    }
    out
}

/// At most one request per `1/qps`: each caller reserves the next free slot and sleeps
/// until it, so that in any window of `t` seconds at most `t * qps + 1` requests start.
pub struct Limiter {
    spacing: Duration,
    next: Mutex<Instant>,
}

impl Limiter {
    pub fn new(qps: f64) -> Limiter {
        // A rate checked positive and finite by the flag; the fallback only guards the
        // conversion.
        let spacing = Duration::try_from_secs_f64(1.0 / qps).unwrap_or(Duration::from_secs(1));
        Limiter {
            spacing,
            next: Mutex::new(Instant::now()),
        }
    }

    pub async fn acquire(&self) {
        let at = {
            let mut next = super::lock(&self.next);
            let at = (*next).max(Instant::now());
            *next = at + self.spacing;
            at
        };
        tokio::time::sleep_until(at.into()).await;
    }
}

/// Discovery of the groups `wanted` (`None`: all), each request rate-limited; with the
/// group versions whose resources could not be read (an aggregated API that is down).
async fn discover(
    client: &Client,
    limiter: &Limiter,
    wanted: Option<&BTreeSet<String>>,
) -> Result<(Vec<ServedGroup>, BTreeSet<String>), kube::Error> {
    let wants = |g: &str| wanted.is_none_or(|w| w.contains(g));
    let mut groups = Vec::new();
    if wants("") {
        limiter.acquire().await;
        let core = client.list_core_api_versions().await?;
        groups.push(ServedGroup {
            name: String::new(),
            preferred: core.versions.first().cloned().unwrap_or_default(),
            versions: core.versions.into_iter().map(|v| (v, Vec::new())).collect(),
        });
    }
    if wanted.is_none_or(|w| w.iter().any(|g| !g.is_empty())) {
        limiter.acquire().await;
        for g in client.list_api_groups().await?.groups {
            if !wants(&g.name) {
                continue;
            }
            let versions: Vec<String> = g.versions.into_iter().map(|v| v.version).collect();
            let preferred = g
                .preferred_version
                .map(|p| p.version)
                .or_else(|| versions.first().cloned())
                .unwrap_or_default();
            groups.push(ServedGroup {
                name: g.name,
                preferred,
                versions: versions.into_iter().map(|v| (v, Vec::new())).collect(),
            });
        }
    }
    let mut failed = BTreeSet::new();
    for group in &mut groups {
        for (version, resources) in &mut group.versions {
            limiter.acquire().await;
            let list = if group.name.is_empty() {
                client.list_core_api_resources(version).await
            } else {
                let gv = format!("{}/{version}", group.name);
                client.list_api_group_resources(&gv).await
            };
            match list {
                Ok(list) => {
                    *resources = list
                        .resources
                        .into_iter()
                        .map(|r| ServedResource {
                            plural: r.name,
                            kind: r.kind,
                            namespaced: r.namespaced,
                            verbs: r.verbs,
                        })
                        .collect();
                }
                Err(e) => {
                    tracing::warn!(group = %group.name, %version, error = %e, "background scan: discovery of this group version failed; its resources keep their previous results");
                    failed.insert(group.name.clone());
                }
            }
        }
    }
    Ok((groups, failed))
}

/// What the listing tasks hand the evaluation thread.
enum Page {
    /// Objects of the target at this index.
    Objects(usize, Vec<Json>),
    /// The target's list starts over: drop what it sent so far.
    Restart(usize),
}

/// Lists `target` page by page into `pages`; the objects listed, or why the list failed.
async fn list(
    client: Client,
    limiter: Arc<Limiter>,
    page_size: u32,
    (index, target): (usize, Target),
    pages: mpsc::Sender<Page>,
) -> Result<u64, kube::Error> {
    let path = target.path();
    let (api_version, kind) = (target.api_version(), target.kind.clone());
    let mut restarts = 0;
    let mut listed = 0;
    let mut token: Option<String> = None;
    loop {
        let mut params = ListParams::default().limit(page_size);
        if let Some(t) = &token {
            params = params.continue_token(t);
        }
        let request = kube::core::Request::new(path.as_str())
            .list(&params)
            .map_err(kube::Error::BuildRequest)?;
        limiter.acquire().await;
        let mut answer: Json = match client.request(request).await {
            Ok(a) => a,
            // The list's snapshot expired between pages (etcd compaction): start again.
            Err(kube::Error::Api(s)) if s.code == 410 && token.is_some() => {
                restarts += 1;
                if restarts > MAX_RESTARTS {
                    return Err(kube::Error::Api(s));
                }
                tracing::info!(resource = %target.label(), "background scan: the list expired (410 Gone); listing it again");
                token = None;
                listed = 0;
                if pages.send(Page::Restart(index)).await.is_err() {
                    return Ok(0);
                }
                continue;
            }
            Err(e) => return Err(e),
        };
        let mut items = match answer.get_mut("items").map(Json::take) {
            Some(Json::Array(items)) => items,
            _ => Vec::new(),
        };
        // List items of built-in kinds carry no apiVersion and kind.
        for item in &mut items {
            if let Some(o) = item.as_object_mut() {
                o.entry("apiVersion").or_insert_with(|| json!(api_version));
                o.entry("kind").or_insert_with(|| json!(kind));
            }
        }
        listed += items.len() as u64;
        if pages.send(Page::Objects(index, items)).await.is_err() {
            // The evaluation thread is gone (the scan is being stopped).
            return Ok(listed);
        }
        token = answer["metadata"]["continue"]
            .as_str()
            .filter(|t| !t.is_empty())
            .map(str::to_string);
        if token.is_none() {
            return Ok(listed);
        }
    }
}

/// One object's results, as reports keep them.
type Found = (Resource, Vec<ReportResult>);

/// What the evaluation thread found, per target: the results (objects with no result left
/// out) and the uid of every object listed.
struct Evaluation {
    found: Vec<Vec<Found>>,
    uids: Vec<HashSet<String>>,
}

/// The evaluation thread: every page of `pages`, evaluated on `snapshot`.
fn evaluate(
    snapshot: Arc<Snapshot>,
    targets: Arc<Vec<Target>>,
    options: &BackgroundOptions,
    services: Services,
    observer: &dyn ScanObserver,
    mut pages: mpsc::Receiver<Page>,
) -> Evaluation {
    let crds = targets.iter().map(Target::as_crd).collect();
    let scanner = Scanner::new(&snapshot, crds)
        .with_identity(options.user.clone(), options.groups.clone())
        .with_services(services);
    let labels: Vec<String> = targets.iter().map(Target::label).collect();
    let now = unix_now();
    let mut found: Vec<Vec<Found>> = vec![Vec::new(); targets.len()];
    let mut uids: Vec<HashSet<String>> = vec![HashSet::new(); targets.len()];
    while let Some(page) = pages.blocking_recv() {
        match page {
            Page::Restart(i) => {
                if let Some(f) = found.get_mut(i) {
                    f.clear();
                }
                if let Some(u) = uids.get_mut(i) {
                    u.clear();
                }
            }
            Page::Objects(i, objects) => {
                let (Some(out), Some(listed), Some(label)) =
                    (found.get_mut(i), uids.get_mut(i), labels.get(i))
                else {
                    continue;
                };
                let count = objects.len() as u64;
                for object in objects {
                    if let Some(uid) = object["metadata"]["uid"].as_str() {
                        listed.insert(uid.to_string());
                    }
                    match scanner.scan_traced(object) {
                        Ok((o, evaluated)) => {
                            observer.evaluated(&snapshot, &evaluated);
                            let results: Vec<ReportResult> = o
                                .results
                                .iter()
                                .filter_map(|r| ReportResult::of(&snapshot, r, now))
                                .collect();
                            if !results.is_empty() {
                                out.push((o.resource, results));
                            }
                        }
                        Err(e) => {
                            tracing::debug!(resource = %label, error = %e, "background scan: object not evaluated")
                        }
                    }
                }
                observer.scanned(label, count);
            }
        }
    }
    Evaluation { found, uids }
}

/// Everything a scan uses besides its options.
pub(super) struct Inputs {
    pub client: Client,
    pub current: CurrentSnapshot,
    pub services: Services,
    pub observer: Arc<dyn ScanObserver>,
    /// Where results go (`None`: metrics only, reports are off).
    pub store: Option<Arc<ReportStore>>,
    /// The admission reports' state, which a complete scan rids of resources that are gone.
    pub admission: Option<Arc<ReportStore>>,
    /// Whether this replica scans (the Lease holder, or always without a Lease).
    pub is_leader: Box<dyn Fn() -> bool + Send + Sync>,
    /// Bumped after each published snapshot whose policies or bindings changed.
    pub changes: watch::Receiver<u64>,
}

/// One scan of the current snapshot; false when discovery failed (nothing was listed, and
/// nothing replaced).
async fn scan(inputs: &Inputs, options: &BackgroundOptions, limiter: &Arc<Limiter>) -> bool {
    let started = Instant::now();
    // Admissions recorded from now on may be of objects created after their list.
    let admitted_before = inputs.admission.as_ref().map(|a| a.sequence());
    let snapshot = (inputs.current)();
    let wanted = wanted_groups(&snapshot);
    if wanted.as_ref().is_some_and(BTreeSet::is_empty) {
        // No binding: nothing to list, and every previous result goes.
        if let Some(store) = &inputs.store {
            store.replace(Vec::new(), |_| false);
            store.request_sweep();
        }
        inputs.observer.finished(started.elapsed(), true);
        return true;
    }
    let (served, failed_groups) = match discover(&inputs.client, limiter, wanted.as_ref()).await {
        Ok(d) => d,
        Err(e) => {
            tracing::warn!(error = %e, "background scan: discovery failed; scan skipped");
            inputs.observer.finished(started.elapsed(), false);
            return false;
        }
    };
    let targets = Arc::new(select(&snapshot, &served));
    tracing::info!(
        resources = targets.len(),
        policies = snapshot.policies.len(),
        "background scan started"
    );
    let (tx, rx) = mpsc::channel(options.concurrency.max(1) * 2);
    let (done_tx, done_rx) = tokio::sync::oneshot::channel();
    let thread = {
        let (snapshot, targets, options) = (snapshot.clone(), targets.clone(), options.clone());
        let (services, observer) = (inputs.services.clone(), inputs.observer.clone());
        // A thread of its own with the stack evaluation needs (it recurses once per
        // nesting level of an expression), off the async workers.
        std::thread::Builder::new()
            .name("celgate-background".into())
            .stack_size(64 << 20)
            .spawn(move || {
                let found = evaluate(snapshot, targets, &options, services, &*observer, rx);
                let _ = done_tx.send(found);
            })
    };
    if let Err(e) = thread {
        tracing::error!(error = %e, "background scan: cannot start the evaluation thread");
        inputs.observer.finished(started.elapsed(), false);
        return true;
    }
    let listed: Vec<Result<u64, kube::Error>> = {
        use futures::StreamExt;
        let (client, page_size) = (inputs.client.clone(), options.page_size);
        let (limiter, pages) = (limiter.clone(), tx.clone());
        futures::stream::iter(targets.iter().cloned().enumerate())
            .map(move |t| list(client.clone(), limiter.clone(), page_size, t, pages.clone()))
            .buffered(options.concurrency.max(1))
            .collect()
            .await
    };
    drop(tx);
    let Ok(Evaluation { found, uids }) = done_rx.await else {
        tracing::error!("background scan: the evaluation thread stopped");
        inputs.observer.finished(started.elapsed(), false);
        return true;
    };
    let mut failed_kinds: BTreeSet<(String, String)> = BTreeSet::new();
    let mut objects = 0;
    for (target, listed) in targets.iter().zip(&listed) {
        match listed {
            Ok(n) => objects += n,
            Err(e) => {
                tracing::warn!(resource = %target.label(), error = %e, "background scan: cannot list; its objects keep their previous results");
                failed_kinds.insert((target.group.clone(), target.kind.clone()));
            }
        }
    }
    let complete = failed_kinds.is_empty() && failed_groups.is_empty();
    if let Some(store) = &inputs.store {
        let keep = |r: &Resource| {
            let group = group_of(&r.api_version);
            failed_groups.contains(group)
                || failed_kinds.contains(&(group.to_string(), r.kind.clone()))
        };
        store.replace(found.into_iter().flatten(), keep);
        if complete {
            // What it has is all there is: reports beyond it (a previous Lease holder's) go.
            store.request_sweep();
        }
    }
    if let (Some(admission), Some(before), true) = (&inputs.admission, admitted_before, complete) {
        let scanned = targets
            .iter()
            .map(|t| (t.group.clone(), t.kind.clone()))
            .collect();
        let listed: HashSet<String> = uids.into_iter().flatten().collect();
        let pruned = admission.prune_absent(&scanned, &listed, before);
        if pruned > 0 {
            tracing::info!(
                resources = pruned,
                "admission reports: results of resources that no longer exist dropped"
            );
        }
    }
    let elapsed = started.elapsed();
    inputs.observer.finished(elapsed, complete);
    tracing::info!(
        objects,
        resources = targets.len(),
        seconds = elapsed.as_secs_f64(),
        complete,
        "background scan finished"
    );
    true
}

/// Scans at start (once the first snapshot is published), after each policy or binding
/// change (debounced), when this replica takes the Lease over, and every interval; runs
/// until aborted.
pub(super) async fn run(options: BackgroundOptions, mut inputs: Inputs) {
    if inputs.changes.wait_for(|n| *n > 0).await.is_err() {
        return;
    }
    inputs.changes.borrow_and_update();
    let limiter = Arc::new(Limiter::new(options.qps));
    let mut due = Instant::now();
    let mut was_leader = false;
    loop {
        let leader = (inputs.is_leader)();
        if leader && !was_leader {
            due = Instant::now();
        }
        was_leader = leader;
        if leader && due <= Instant::now() {
            let next = if scan(&inputs, &options, &limiter).await {
                options.interval
            } else {
                options.interval.min(RETRY)
            };
            due = Instant::now() + next;
            continue;
        }
        let wait = due
            .saturating_duration_since(Instant::now())
            .min(LEADER_CHECK);
        tokio::select! {
            changed = inputs.changes.changed() => {
                if changed.is_err() {
                    return;
                }
                tokio::time::sleep(options.debounce).await;
                inputs.changes.borrow_and_update();
                due = Instant::now();
            }
            _ = tokio::time::sleep(wait) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::folder::Loaded;

    fn snapshot(objects: &[Json]) -> Snapshot {
        let loaded = objects
            .iter()
            .enumerate()
            .map(|(i, o)| Loaded {
                file: "test.yaml".into(),
                document: i,
                field_errors: Vec::new(),
                object: o.clone(),
            })
            .collect();
        crate::source::snapshot(loaded, crate::cel::NEWEST_MINOR, true).unwrap()
    }

    fn policy(name: &str, rules: Json) -> Json {
        json!({
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": name},
            "spec": {
                "matchConstraints": {"resourceRules": rules},
                "validations": [{"expression": "true"}]
            }
        })
    }

    fn binding(name: &str, policy: &str, match_resources: Option<Json>) -> Json {
        let mut b = json!({
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": name},
            "spec": {"policyName": policy, "validationActions": ["Deny"]}
        });
        if let Some(m) = match_resources {
            b["spec"]["matchResources"] = m;
        }
        b
    }

    fn res(plural: &str, kind: &str, namespaced: bool) -> ServedResource {
        ServedResource {
            plural: plural.into(),
            kind: kind.into(),
            namespaced,
            verbs: ["get", "list", "watch", "create"]
                .map(String::from)
                .to_vec(),
        }
    }

    /// A cluster: core v1 (pods, pods/status, configmaps, secrets, namespaces, bindings
    /// without list), apps v1 (deployments) and a CRD group served at v1 (preferred) and v1beta1.
    fn served() -> Vec<ServedGroup> {
        let mut bindings = res("bindings", "Binding", true);
        bindings.verbs = vec!["create".into()];
        vec![
            ServedGroup {
                name: String::new(),
                preferred: "v1".into(),
                versions: vec![(
                    "v1".into(),
                    vec![
                        res("pods", "Pod", true),
                        res("pods/status", "Pod", true),
                        res("configmaps", "ConfigMap", true),
                        res("secrets", "Secret", true),
                        res("namespaces", "Namespace", false),
                        bindings,
                    ],
                )],
            },
            ServedGroup {
                name: "apps".into(),
                preferred: "v1".into(),
                versions: vec![("v1".into(), vec![res("deployments", "Deployment", true)])],
            },
            ServedGroup {
                name: "example.com".into(),
                preferred: "v1".into(),
                versions: vec![
                    ("v1beta1".into(), vec![res("widgets", "Widget", false)]),
                    ("v1".into(), vec![res("widgets", "Widget", false)]),
                ],
            },
        ]
    }

    fn labels(targets: &[Target]) -> Vec<String> {
        targets
            .iter()
            .map(|t| format!("{}@{}", t.label(), t.version))
            .collect()
    }

    fn rule(groups: &[&str], versions: &[&str], ops: &[&str], resources: &[&str]) -> Json {
        json!({"apiGroups": groups, "apiVersions": versions, "operations": ops, "resources": resources})
    }

    #[test]
    fn a_binding_scans_what_its_policy_and_its_rules_both_match() {
        // The policy matches pods and deployments; the binding narrows it to deployments.
        let s = snapshot(&[
            policy(
                "p",
                json!([
                    rule(&[""], &["v1"], &["CREATE"], &["pods"]),
                    rule(&["apps"], &["*"], &["*"], &["deployments"])
                ]),
            ),
            binding(
                "b",
                "p",
                Some(
                    json!({"resourceRules": [rule(&["apps"], &["v1"], &["CREATE", "UPDATE"], &["deployments"])]}),
                ),
            ),
        ]);
        assert_eq!(
            wanted_groups(&s),
            Some(["".to_string(), "apps".to_string()].into())
        );
        assert_eq!(labels(&select(&s, &served())), ["deployments.apps@v1"]);
    }

    #[test]
    fn update_only_and_delete_only_bindings_scan_nothing() {
        let s = snapshot(&[
            policy("upd", json!([rule(&[""], &["v1"], &["UPDATE"], &["pods"])])),
            binding("upd", "upd", None),
            policy("del", json!([rule(&["*"], &["*"], &["DELETE"], &["*"])])),
            binding("del", "del", None),
            // CREATE in the policy, but the binding keeps UPDATE only.
            policy(
                "narrowed",
                json!([rule(&[""], &["v1"], &["*"], &["configmaps"])]),
            ),
            binding(
                "narrowed",
                "narrowed",
                Some(
                    json!({"resourceRules": [rule(&[""], &["v1"], &["UPDATE"], &["configmaps"])]}),
                ),
            ),
        ]);
        assert!(select(&s, &served()).is_empty());
    }

    #[test]
    fn wildcards_expand_to_listable_main_resources() {
        let s = snapshot(&[
            policy("all", json!([rule(&["*"], &["*"], &["CREATE"], &["*/*"])])),
            binding("all", "all", None),
        ]);
        assert_eq!(wanted_groups(&s), None);
        // pods/status (a subresource), bindings (no list) and secrets (sensitive, named by
        // no rule) are not listed; each resource once, at its group's preferred version.
        assert_eq!(
            labels(&select(&s, &served())),
            [
                "configmaps@v1",
                "namespaces@v1",
                "pods@v1",
                "deployments.apps@v1",
                "widgets.example.com@v1"
            ]
        );
    }

    #[test]
    fn secrets_are_listed_only_when_a_rule_names_them() {
        let wildcard = || policy("all", json!([rule(&["*"], &["*"], &["CREATE"], &["*"])]));
        let core = |resources: &[&str]| rule(&[""], &["v1"], &["CREATE"], resources);
        let has_secrets = |s: &Snapshot| {
            labels(&select(s, &served()))
                .iter()
                .any(|l| l == "secrets@v1")
        };
        // A wildcard policy and binding: every resource but secrets.
        assert!(!has_secrets(&snapshot(&[
            wildcard(),
            binding("all", "all", None)
        ])));
        // The policy names them (a `*` group still names the resource).
        let named = policy(
            "s",
            json!([rule(&["*"], &["v1"], &["CREATE"], &["secrets"])]),
        );
        assert!(has_secrets(&snapshot(&[named, binding("s", "s", None)])));
        // A wildcard policy whose binding names them.
        let narrowed = json!({"resourceRules": [core(&["secrets", "configmaps"])]});
        assert!(has_secrets(&snapshot(&[
            wildcard(),
            binding("all", "all", Some(narrowed))
        ])));
        // Named by one policy's rules, but its binding keeps configmaps only; another
        // binding matches them through a wildcard only: not listed.
        let s = snapshot(&[
            policy("s", json!([core(&["secrets", "configmaps"])])),
            binding(
                "s",
                "s",
                Some(json!({"resourceRules": [core(&["configmaps"])]})),
            ),
            wildcard(),
            binding("all", "all", None),
        ]);
        assert!(!has_secrets(&s));
    }

    #[test]
    fn versions_and_scope_follow_the_rules() {
        // Exact matchPolicy on v1beta1: listed at v1beta1; Equivalent: at the preferred v1.
        let widgets = || rule(&["example.com"], &["v1beta1"], &["CREATE"], &["widgets"]);
        let mut p = policy("p", json!([widgets()]));
        p["spec"]["matchConstraints"]["matchPolicy"] = json!("Exact");
        let exact_policy = snapshot(&[p, binding("b", "p", None)]);
        assert_eq!(
            labels(&select(&exact_policy, &served())),
            ["widgets.example.com@v1beta1"]
        );
        let equivalent = snapshot(&[policy("p", json!([widgets()])), binding("b", "p", None)]);
        assert_eq!(
            labels(&select(&equivalent, &served())),
            ["widgets.example.com@v1"]
        );
        // A Namespaced-only rule does not list cluster-scoped resources.
        let mut namespaced = rule(&["*"], &["*"], &["CREATE"], &["*"]);
        namespaced["scope"] = json!("Namespaced");
        let s = snapshot(&[policy("p", json!([namespaced])), binding("b", "p", None)]);
        assert_eq!(
            labels(&select(&s, &served())),
            ["configmaps@v1", "pods@v1", "deployments.apps@v1"]
        );
    }

    #[test]
    fn exclusions_without_names_and_exempt_resources_are_not_listed() {
        let s = snapshot(&[
            policy(
                "p",
                json!([rule(
                    &["", "admissionregistration.k8s.io"],
                    &["*"],
                    &["CREATE"],
                    &["*"]
                )]),
            ),
            binding(
                "b",
                "p",
                Some(json!({
                    "excludeResourceRules": [
                        rule(&[""], &["v1"], &["*"], &["configmaps"]),
                        {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["*"], "resources": ["pods"], "resourceNames": ["one"]}
                    ]
                })),
            ),
        ]);
        let mut served = served();
        served.push(ServedGroup {
            name: "admissionregistration.k8s.io".into(),
            preferred: "v1".into(),
            versions: vec![(
                "v1".into(),
                vec![res(
                    "validatingadmissionpolicies",
                    "ValidatingAdmissionPolicy",
                    false,
                )],
            )],
        });
        assert_eq!(labels(&select(&s, &served)), ["namespaces@v1", "pods@v1"]);
    }

    #[tokio::test]
    async fn the_limiter_spaces_requests() {
        let limiter = Limiter::new(50.0);
        let started = Instant::now();
        for _ in 0..6 {
            limiter.acquire().await;
        }
        // The first at once, then one per 20 ms.
        assert!(
            started.elapsed() >= Duration::from_millis(100),
            "{:?}",
            started.elapsed()
        );
    }
}
