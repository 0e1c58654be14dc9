//! Policies from a Kubernetes cluster: list-then-watch loops ([`watch`]) keep local copies of
//! the ValidatingAdmissionPolicies, their bindings, the Namespaces, and every param kind that
//! some policy names; each change rebuilds the snapshot (debounced; unchanged policies keep
//! their compiled form through the [`CompileCache`]). A param kind's change rebuilds only when
//! it touches an object some binding can select ([`param_refs`]).
//!
//! - Policies and bindings are read as `admissionregistration.k8s.io/v1`, or `v1beta1` where
//!   discovery shows v1 is not served. Or, with a [`PolicyFeed`] ([`KubeSource::start_fed`],
//!   `--source kubernetes --policies DIR`), they come from it and the cluster's own are not
//!   watched at all; the first snapshot then also waits for the feed's first state.
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
//!   bindings, namespaces and the param kinds named at that time are listed; a param kind
//!   that cannot be listed within `param_grace` does not hold readiness back forever.
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
//!   ([`history`]); every [`KubeOptions::resync`] each resource is also listed in full and
//!   compared with its copy, to put right what a watch missed.

pub mod authorizer;
pub mod background;
mod blocking;
mod error;
pub mod feedback;
mod history;
pub mod lease;
pub mod namespaces;
mod param_refs;
pub mod reports;
mod retry;
mod store;
mod watch;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kube::api::ApiResource;
use kube::Client;
use serde_json::Value as Json;
use tokio::sync::{oneshot, Notify};
use tokio::task::JoinHandle;

use crate::policy::snapshot::{group_of, CompileCache, Scope, Snapshot, SnapshotBuilder};
pub use error::{CallError, ClientError, DiscoveryError};
pub use feedback::Problem;
use retry::Backoff;
pub use store::{Reader, SourceStatus, Writer};

const VAP_GROUP: &str = "admissionregistration.k8s.io";

/// How the cluster source behaves.
#[derive(Debug, Clone)]
pub struct KubeOptions {
    /// Kubernetes minor version of the CEL environment.
    pub version: u16,
    /// Take the CEL environment's version from the API server's `/version` instead (clamped
    /// to the versions celgate knows); no snapshot is built before it answered. Not with a
    /// [`PolicyFeed`]: its policies may use CEL newer than the API server's.
    pub version_from_server: bool,
    /// Changes arriving within this window make one rebuild.
    pub debounce: Duration,
    /// How long the first snapshot waits for the param kinds named at start.
    pub param_grace: Duration,
    /// How often param kinds the cluster does not serve are looked up again.
    pub recheck: Duration,
    /// The longest wait between tries while the API server does not answer (watches, lists,
    /// discovery): how soon the source follows once it is back.
    pub retry_max: Duration,
    /// Report misconfigured policies and bindings as Kubernetes Events.
    pub events: bool,
    /// With several replicas: the Lease that picks the one reporting Events. `None`: this
    /// replica always reports.
    pub events_lease: Option<lease::LeaseOptions>,
    /// This replica's name in Events (the pod name).
    pub instance: String,
    /// The namespaces in which namespaced param kinds are listed and watched (one watch per
    /// namespace and kind), for RBAC that grants them there only; a param elsewhere counts as
    /// missing. Empty: cluster-wide. Cluster-scoped param kinds are always watched whole.
    pub param_namespaces: Vec<String>,
    /// Write admission results as policy reports (`None`: no reports). With
    /// `events_lease`, only its holder writes.
    pub reports: Option<reports::ReportOptions>,
    /// Scan existing objects in the background (`None`: no scans); they start with
    /// [`KubeSource::start_background`]. With `events_lease`, only its holder scans.
    pub background: Option<background::BackgroundOptions>,
    /// Take policies and bindings from this folder instead of the cluster
    /// (`--source kubernetes --policies DIR`): the caller watches it and hands them over
    /// through a [`PolicyFeed`] ([`KubeSource::start_fed`]); the cluster's own are not
    /// watched. Everything else still comes from the cluster.
    pub policy_folder: Option<crate::source::folder::FolderSource>,
    /// How often every watched resource is listed again in full and compared with its copy
    /// (`None`: never).
    pub resync: Option<Duration>,
}

impl Default for KubeOptions {
    fn default() -> Self {
        KubeOptions {
            version: crate::cel::NEWEST_MINOR,
            version_from_server: false,
            debounce: Duration::from_millis(200),
            param_grace: Duration::from_secs(10),
            recheck: Duration::from_secs(10),
            retry_max: Duration::from_secs(1),
            events: true,
            events_lease: None,
            instance: String::new(),
            param_namespaces: Vec::new(),
            reports: None,
            background: None,
            policy_folder: None,
            resync: Some(Duration::from_secs(600)),
        }
    }
}

/// Policies and bindings handed to the cluster source from elsewhere (a watched folder) in
/// place of its own watches of the cluster's: each [`PolicyFeed::set`] replaces them all and
/// wakes the source, which rebuilds its snapshot with the cluster's namespaces and params.
#[derive(Debug, Default)]
pub struct PolicyFeed {
    current: Mutex<Option<Arc<Fed>>>,
    changed: Notify,
}

/// One state of a [`PolicyFeed`].
#[derive(Debug, Default)]
pub struct Fed {
    /// Counts the states set; the source rebuilds when it moves.
    generation: u64,
    pub policies: Vec<Arc<Json>>,
    pub bindings: Vec<Arc<Json>>,
    /// Problems found before the objects were handed over (policies refused), added to the
    /// source's own.
    pub problems: Vec<Problem>,
}

impl PolicyFeed {
    /// Replaces the policies and bindings; the source follows after its debounce.
    pub fn set(&self, policies: Vec<Arc<Json>>, bindings: Vec<Arc<Json>>, problems: Vec<Problem>) {
        {
            let mut current = lock(&self.current);
            let generation = current.as_ref().map_or(1, |c| c.generation + 1);
            *current = Some(Arc::new(Fed {
                generation,
                policies,
                bindings,
                problems,
            }));
        }
        self.changed.notify_one();
    }

    /// The current state, once one was set.
    pub fn get(&self) -> Option<Arc<Fed>> {
        lock(&self.current).clone()
    }
}

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

/// The CEL environment's minor version for an API server that reports `major`.`minor`
/// (minor as `32` or, on some providers, `32+`): its own when celgate knows it, else the
/// nearest it knows, or the newest for a version it cannot read; then with why, to log.
pub fn server_minor(major: &str, minor: &str) -> (u16, Option<String>) {
    use crate::cel::{NEWEST_MINOR, OLDEST_MINOR};
    let digits = minor.trim_end_matches(|c: char| !c.is_ascii_digit());
    match (major, digits.parse::<u16>()) {
        ("1", Ok(m)) if (OLDEST_MINOR..=NEWEST_MINOR).contains(&m) => (m, None),
        ("1", Ok(m)) => {
            let nearest = m.clamp(OLDEST_MINOR, NEWEST_MINOR);
            let why = format!("celgate knows 1.{OLDEST_MINOR} to 1.{NEWEST_MINOR}, not 1.{m}");
            (nearest, Some(why))
        }
        _ => (
            NEWEST_MINOR,
            Some(format!("version {major:?}.{minor:?} is not 1.N")),
        ),
    }
}

/// The API server's `major` and `minor`, and the version as it prints it.
async fn api_server_version(client: &Client) -> Result<(String, String, String), kube::Error> {
    let info = client.apiserver_version().await?;
    Ok((info.major, info.minor, info.git_version))
}

/// Receives each new snapshot.
pub type Publish = Arc<dyn Fn(Snapshot) + Send + Sync>;

/// A running cluster source; dropping it stops every watcher.
pub struct KubeSource {
    shared: Arc<Shared>,
    reports: Option<Arc<reports::ReportStore>>,
    client: Client,
    options: KubeOptions,
    /// The background scans' results, once started with reports on.
    background_store: std::sync::OnceLock<Arc<reports::ReportStore>>,
    /// The background scans and their report writer.
    background_tasks: Mutex<Vec<Task>>,
    /// Holds the Lease (when there is one and something needs it), until released.
    lease: tokio::sync::Mutex<Option<LeaseTask>>,
    _task: Task,
    _reports_task: Option<Task>,
}

#[derive(Default)]
struct Shared {
    ready: AtomicBool,
    /// The Lease rounds completed before the last decision whether to report Events.
    reporting_decided_after: AtomicU64,
    stores: Mutex<Vec<Reader>>,
    problems: Mutex<Vec<Problem>>,
    /// The policy API version in use (`v1` or `v1beta1`), once discovered.
    vap_version: Mutex<Option<String>>,
    /// When the discovery of the policy API first failed, while it has not answered yet.
    discovery_failing_since: Mutex<Option<Instant>>,
    /// The CEL environment's version read from the API server, once read.
    cel_version: Mutex<Option<u16>>,
    /// Whether this replica holds the Lease (Events, policy reports, background scans).
    leadership: Arc<lease::Leadership>,
    /// Bumped after each published snapshot whose policies or bindings changed (the first
    /// included): background scans follow it.
    policy_changes: tokio::sync::watch::Sender<u64>,
    /// Shared by the watches: history resets, drift.
    history: Arc<history::History>,
}

/// The status reported before discovery has answered: the watches do not exist yet, and an
/// alert on the source metrics must not depend on their absence.
pub const DISCOVERY_SOURCE: &str = "discovery";

impl KubeSource {
    /// Starts the watchers on the current tokio runtime.
    pub fn start(client: Client, options: KubeOptions, publish: Publish) -> KubeSource {
        Self::start_fed(client, options, publish, None)
    }

    /// [`Self::start`], policies and bindings coming from `feed` when given instead of the
    /// cluster's (which are then not watched): no snapshot before the feed's first state.
    pub fn start_fed(
        client: Client,
        options: KubeOptions,
        publish: Publish,
        feed: Option<Arc<PolicyFeed>>,
    ) -> KubeSource {
        let shared = Arc::new(Shared::default());
        let store = options
            .reports
            .as_ref()
            .map(|o| Arc::new(reports::ReportStore::admission(o.max_resources)));
        // The admission results follow the snapshots (a removed policy's go), and are
        // adopted from existing reports against the latest one.
        let publish: Publish = match &store {
            Some(store) => {
                let store = store.clone();
                Arc::new(move |snapshot| {
                    store.retain(&snapshot);
                    publish(snapshot)
                })
            }
            None => publish,
        };
        // Held for Events (unless the policies come from a folder: no Event is posted
        // about them), policy reports and background scans.
        let events = options.events && feed.is_none();
        let leased = events || options.reports.is_some() || options.background.is_some();
        let lease = options.events_lease.clone().filter(|_| leased).map(|l| {
            let (stop, stopped) = tokio::sync::watch::channel(false);
            let task = tokio::spawn(lease::hold(
                client.clone(),
                l,
                shared.leadership.clone(),
                stopped,
            ));
            LeaseTask {
                stop,
                task: Task(task),
            }
        });
        let reports_task = options
            .reports
            .clone()
            .zip(store.clone())
            .map(|(o, store)| {
                Task(tokio::spawn(reports::write(
                    client.clone(),
                    store,
                    o,
                    writer_term(&shared, &options),
                )))
            });
        let task = tokio::spawn(run(
            client.clone(),
            options.clone(),
            publish,
            shared.clone(),
            feed,
        ));
        KubeSource {
            shared,
            reports: store,
            client,
            options,
            background_store: std::sync::OnceLock::new(),
            background_tasks: Mutex::default(),
            lease: tokio::sync::Mutex::new(lease),
            _task: Task(task),
            _reports_task: reports_task,
        }
    }

    /// Graceful shutdown: stops leading and releases the Lease if this replica holds it, so
    /// that another replica takes over at once (waits for the release up to the Lease's
    /// `release_timeout`; past it the Lease expires on its own). Watches and writers stop when the source is dropped.
    pub async fn release_lease(&self) {
        let Some(mut lease) = self.lease.lock().await.take() else {
            return;
        };
        let _ = lease.stop.send(true);
        let limit = self
            .options
            .events_lease
            .as_ref()
            .map_or(Duration::ZERO, |l| l.release_timeout);
        if tokio::time::timeout(limit, &mut lease.task.0)
            .await
            .is_err()
        {
            tracing::warn!("the lease was not released in time");
        }
    }

    /// Starts the background scans of [`KubeOptions::background`] (nothing without them):
    /// `current` is the snapshot serving now, `services` what evaluations may call (the
    /// cluster's authorizer), `observer` counts what they find. With reports on, their
    /// results are written as the reports [`reports::BACKGROUND_REPORT_NAME`].
    pub fn start_background(
        &self,
        current: background::CurrentSnapshot,
        services: crate::admission::Services,
        observer: Arc<dyn background::ScanObserver>,
    ) {
        let Some(options) = self.options.background.clone() else {
            return;
        };
        let mut tasks = lock(&self.background_tasks);
        if !tasks.is_empty() {
            return;
        }
        let store = self.options.reports.clone().map(|o| {
            let store = self
                .background_store
                .get_or_init(|| Arc::new(reports::ReportStore::background()))
                .clone();
            let term = writer_term(&self.shared, &self.options);
            tasks.push(Task(tokio::spawn(reports::write(
                self.client.clone(),
                store.clone(),
                o,
                term,
            ))));
            store
        });
        let inputs = background::Inputs {
            client: self.client.clone(),
            current,
            services,
            observer,
            store,
            admission: self.reports.clone(),
            is_leader: Box::new(writer(&self.shared, &self.options)),
            changes: self.shared.policy_changes.subscribe(),
        };
        tasks.push(Task(tokio::spawn(background::run(options, inputs))));
    }

    /// The background scans' report store, once they started with reports on.
    pub fn background_store(&self) -> Option<Arc<reports::ReportStore>> {
        self.background_store.get().cloned()
    }

    /// The policy reports' current results, when reports are written: the server sends
    /// each admission's results there.
    pub fn report_store(&self) -> Option<Arc<reports::ReportStore>> {
        self.reports.clone()
    }

    /// Whether this replica holds the Lease (always false without one).
    pub fn is_leader(&self) -> bool {
        self.shared.leadership.is_leader()
    }

    /// True once the first complete snapshot was published.
    pub fn ready(&self) -> bool {
        self.shared.ready.load(Ordering::Acquire)
    }

    /// Each watched resource's health; before the policy API is discovered (the API server
    /// unreachable at start), one unsynced source named [`DISCOVERY_SOURCE`], stale since the
    /// first failed lookup.
    pub fn status(&self) -> Vec<SourceStatus> {
        let stores = lock(&self.shared.stores);
        if stores.is_empty() {
            let since = *lock(&self.shared.discovery_failing_since);
            return vec![SourceStatus {
                name: DISCOVERY_SOURCE.into(),
                synced: false,
                stale: since.map_or(Duration::ZERO, |t| t.elapsed()),
                objects: 0,
            }];
        }
        stores.iter().map(|s| s.status()).collect()
    }

    /// What is currently wrong with the cluster's policies and bindings.
    pub fn problems(&self) -> Vec<Problem> {
        lock(&self.shared.problems).clone()
    }

    /// How many rounds of trying to hold the events Lease this replica had completed when it
    /// last decided whether to report Events (after every snapshot and every recheck); 0
    /// until then, or without a Lease. Once it is past a round, the Events that decision
    /// called for are published: a replica known not to report can be waited on.
    pub fn reporting_decided_after(&self) -> u64 {
        self.shared.reporting_decided_after.load(Ordering::Acquire)
    }

    /// The CEL environment's minor version read from the API server's `/version`, once read
    /// (`None` as well when the version was given).
    pub fn server_version(&self) -> Option<u16> {
        *lock(&self.shared.cel_version)
    }

    /// The times the cluster's history was seen going back (etcd replaced or restored, a
    /// new cluster) and every resource listed again, by reason (`list_went_back`,
    /// `bookmark_went_back`, `cluster_identity`).
    pub fn history_resets(&self) -> Vec<(String, u64)> {
        self.shared.history.resets()
    }

    /// Objects the periodic re-lists found different from the copies (changes the watches
    /// missed), by store name.
    pub fn resync_drift(&self) -> Vec<(String, u64)> {
        self.shared.history.drift()
    }

    /// `v1` or `v1beta1` once discovery answered.
    pub fn policy_api_version(&self) -> Option<String> {
        lock(&self.shared.vap_version).clone()
    }
}

/// Whether this replica writes reports and scans: the Lease holder, or always without a
/// Lease.
fn writer(shared: &Shared, options: &KubeOptions) -> impl Fn() -> bool + Send + Sync + 'static {
    let leadership = shared.leadership.clone();
    let leased = options.events_lease.is_some();
    move || !leased || leadership.is_leader()
}

/// The term this replica writes reports in ([`lease::Leadership::term`]), `None` while it
/// does not; always the same term without a Lease.
fn writer_term(
    shared: &Shared,
    options: &KubeOptions,
) -> impl Fn() -> Option<u64> + Send + Sync + 'static {
    let leadership = shared.leadership.clone();
    let leased = options.events_lease.is_some();
    move || if leased { leadership.term() } else { Some(0) }
}

// The guarded values are replaced whole, so a poisoned lock still holds a consistent value.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A watcher task (which holds the store's writer) and a reader of its store; aborted when
/// dropped.
struct Watched {
    /// `Some`: the watch covers this namespace only.
    namespace: Option<String>,
    store: Reader,
    _task: Task,
}

impl Watched {
    fn start(
        client: &Client,
        resource: ApiResource,
        namespace: Option<String>,
        label: String,
        changed: &Arc<Notify>,
        settings: &watch::Settings,
    ) -> Self {
        Self::start_trimmed(client, resource, namespace, label, changed, settings, None)
    }

    /// [`Self::start`], the store keeping what `trim` leaves of each object.
    fn start_trimmed(
        client: &Client,
        resource: ApiResource,
        namespace: Option<String>,
        label: String,
        changed: &Arc<Notify>,
        settings: &watch::Settings,
        trim: watch::Trim,
    ) -> Self {
        let (writer, store) = store::store(label);
        let task = tokio::spawn(watch::run(
            client.clone(),
            resource,
            namespace.clone(),
            writer,
            changed.clone(),
            settings.clone(),
            trim,
        ));
        Watched {
            namespace,
            store,
            _task: Task(task),
        }
    }
}

/// Checks `--param-namespaces`: each a namespace name (a DNS-1123 label), sorted and
/// without duplicates.
pub fn param_namespaces(list: &str) -> Result<Vec<String>, String> {
    let mut out = BTreeSet::new();
    for name in list.split(',').map(str::trim) {
        let alnum =
            |c: Option<char>| c.is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
        let valid = name.len() <= 63
            && name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            && alnum(name.chars().next())
            && alnum(name.chars().last());
        if !valid {
            return Err(format!(
                "--param-namespaces: {name:?} is not a namespace name (lowercase letters, digits and '-', at most 63, starting and ending with a letter or digit)"
            ));
        }
        out.insert(name.to_string());
    }
    Ok(out.into_iter().collect())
}

/// What is known of a param kind (`apiVersion`, `kind`) some policy names.
enum ParamKind {
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

/// Looks a kind up in discovery: its resource and scope, `None` when the group version does
/// not serve it.
pub async fn discover(
    client: &Client,
    api_version: &str,
    kind: &str,
) -> Result<Option<(ApiResource, Scope)>, kube::Error> {
    let list = if api_version.contains('/') {
        client.list_api_group_resources(api_version).await
    } else {
        client.list_core_api_resources(api_version).await
    };
    let list = match list {
        Ok(l) => l,
        Err(kube::Error::Api(status)) if status.code == 404 => return Ok(None),
        Err(e) => return Err(e),
    };
    let group = group_of(api_version).to_string();
    let version = api_version.rsplit('/').next().unwrap_or(api_version);
    Ok(list
        .resources
        .iter()
        .find(|r| r.kind == kind && !r.name.contains('/'))
        .map(|r| {
            let scope = if r.namespaced {
                Scope::Namespaced
            } else {
                Scope::Cluster
            };
            let resource = ApiResource {
                group,
                version: version.to_string(),
                api_version: api_version.to_string(),
                kind: kind.to_string(),
                plural: r.name.clone(),
            };
            (resource, scope)
        }))
}

/// `v1` when the cluster serves ValidatingAdmissionPolicy at v1, else `v1beta1`.
async fn policy_version(client: &Client) -> Result<&'static str, DiscoveryError> {
    for version in ["v1", "v1beta1"] {
        match discover(
            client,
            &format!("{VAP_GROUP}/{version}"),
            "ValidatingAdmissionPolicy",
        )
        .await
        {
            Ok(Some(_)) => return Ok(version),
            Ok(None) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(DiscoveryError::NoPolicyApi)
}

fn resource(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource {
        group: group.into(),
        version: version.into(),
        api_version: if group.is_empty() {
            version.into()
        } else {
            format!("{group}/{version}")
        },
        kind: kind.into(),
        plural: plural.into(),
    }
}

const CRD_GROUP: &str = "apiextensions.k8s.io";

/// What the resource registry and the snapshot read of a CRD ([`crate::matching::registry`]):
/// its name, group, names, scope, conversion strategy, and each version's name, whether it
/// is served and its subresources. The schemas (most of a CRD's size) go.
fn trim_crd(crd: &mut Json) {
    let spec = &crd["spec"];
    let versions: Vec<Json> = spec["versions"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or(&[])
        .iter()
        .map(|v| {
            serde_json::json!({
                "name": v["name"],
                "served": v["served"],
                "storage": v["storage"],
                "subresources": v["subresources"],
            })
        })
        .collect();
    let trimmed = serde_json::json!({
        "apiVersion": crd["apiVersion"],
        "kind": crd["kind"],
        "metadata": {
            "name": crd["metadata"]["name"],
            "uid": crd["metadata"]["uid"],
            "resourceVersion": crd["metadata"]["resourceVersion"],
        },
        "spec": {
            "group": spec["group"],
            "names": spec["names"],
            "scope": spec["scope"],
            "versions": versions,
            "conversion": {"strategy": spec["conversion"]["strategy"]},
        }
    });
    *crd = trimmed;
}

/// The CRDs' watch; `None` when they cannot be listed (403: RBAC does not grant it; 404: not
/// served), logged once: custom resources then keep the lenient matching rule.
async fn crd_watch(
    client: &Client,
    changed: &Arc<Notify>,
    settings: &watch::Settings,
) -> Option<Watched> {
    let crds = resource(
        CRD_GROUP,
        "v1",
        "CustomResourceDefinition",
        "customresourcedefinitions",
    );
    let api: kube::Api<kube::api::DynamicObject> = kube::Api::all_with(client.clone(), &crds);
    let one = kube::api::ListParams::default().limit(1);
    match tokio::time::timeout(LOOKUP_TIMEOUT, api.list(&one)).await {
        Ok(Err(kube::Error::Api(s))) if s.code == 403 || s.code == 404 => {
            tracing::warn!(error = %s.message, "cannot list CustomResourceDefinitions: custom resources are matched without knowing their served versions (any version a rule names counts as served); grant get, list and watch on customresourcedefinitions.apiextensions.k8s.io");
            return None;
        }
        // Anything else (a timeout, an outage) is the watch's to retry.
        Ok(Err(e)) => tracing::debug!(error = %e, "CustomResourceDefinitions not listed yet"),
        Err(_) | Ok(Ok(_)) => {}
    }
    Some(Watched::start_trimmed(
        client,
        crds,
        None,
        "customresourcedefinitions.v1".into(),
        changed,
        settings,
        Some(trim_crd),
    ))
}

/// The param kinds (`apiVersion`, `kind`) the policies name.
fn named_param_kinds(policies: &[Arc<Json>]) -> BTreeSet<(String, String)> {
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

/// Where the policies and bindings come from: the cluster's watches, or a feed.
enum PolicyInput {
    Cluster {
        policies: Watched,
        bindings: Watched,
    },
    Fed(Arc<PolicyFeed>),
}

impl PolicyInput {
    /// The watches it holds (none for a feed).
    fn watches(&self) -> Vec<&Watched> {
        match self {
            PolicyInput::Cluster { policies, bindings } => vec![policies, bindings],
            PolicyInput::Fed(_) => Vec::new(),
        }
    }

    /// Listed, or (a feed) given a first state.
    fn synced(&self) -> bool {
        match self {
            PolicyInput::Cluster { policies, bindings } => {
                policies.store.synced() && bindings.store.synced()
            }
            PolicyInput::Fed(feed) => feed.get().is_some(),
        }
    }

    /// The policies, the bindings, and the problems found before they were handed over.
    fn objects(&self) -> (Vec<Arc<Json>>, Vec<Arc<Json>>, Vec<Problem>) {
        match self {
            PolicyInput::Cluster { policies, bindings } => (
                policies.store.objects(),
                bindings.store.objects(),
                Vec::new(),
            ),
            PolicyInput::Fed(feed) => feed.get().map_or_else(Default::default, |f| {
                (f.policies.clone(), f.bindings.clone(), f.problems.clone())
            }),
        }
    }

    /// Moves with every change of the policies or bindings.
    fn generation(&self) -> (u64, u64) {
        match self {
            PolicyInput::Cluster { policies, bindings } => {
                (policies.store.generation(), bindings.store.generation())
            }
            PolicyInput::Fed(feed) => (feed.get().map_or(0, |f| f.generation), 0),
        }
    }

    /// Wakes when a feed's state changes; never for the cluster's watches (they wake the
    /// loop through their own notification).
    async fn changed(&self) {
        match self {
            PolicyInput::Fed(feed) => feed.changed.notified().await,
            PolicyInput::Cluster { .. } => std::future::pending().await,
        }
    }
}

async fn run(
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
    let mut last_policies: Option<(u64, u64)> = None;
    // Wakes the loop when a param kind's discovery has answered.
    let resolved = Arc::new(Notify::new());
    // The uid of the kube-system namespace, once listed.
    let mut cluster: Option<String> = None;
    // What the bindings' paramRefs can select, as of these policy and binding generations,
    // and each param store's fingerprint of it as of its own generation.
    let mut refs = param_refs::ParamRefs::default();
    let mut refs_at: Option<(u64, u64)> = None;
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
        // A failing CRD watch does not hold the snapshot back: without CRDs, custom
        // resources are matched leniently.
        let crds_listed = crds
            .as_ref()
            .is_none_or(|w| w.store.synced() || w.store.error().is_some());
        if !core.iter().all(|w| w.store.synced()) || !input.synced() || !crds_listed {
            continue;
        }
        let (policy_objects, binding_objects, fed_problems) = input.objects();
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
        let policies_now = input.generation();
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
        generation.extend([policies_now.0, policies_now.1]);
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

/// A task aborted when dropped.
struct Task(JoinHandle<()>);

impl Drop for Task {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The task holding the Lease, and what tells it to stop and release it.
struct LeaseTask {
    stop: tokio::sync::watch::Sender<bool>,
    task: Task,
}

/// Time allowed for one discovery request.
const LOOKUP_TIMEOUT: Duration = Duration::from_secs(5);

/// A param kind's watches: none until discovery has resolved it.
fn watches(p: &ParamKind) -> &[Watched] {
    match p {
        ParamKind::Watched { watches, .. } => watches,
        _ => &[],
    }
}

fn all_synced(watches: &[Watched]) -> bool {
    watches.iter().all(|w| w.store.synced())
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

/// Finds a param object for the status feedback: `None` when the kind is not listed (yet).
fn param_lookup(
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
struct Wakers<'a> {
    changed: &'a Arc<Notify>,
    resolved: &'a Arc<Notify>,
    /// What the watches started are given.
    settings: &'a watch::Settings,
}

/// When the next failed discovery is due again, if one failed.
fn next_lookup(params: &BTreeMap<(String, String), ParamKind>) -> Option<Instant> {
    params
        .values()
        .filter_map(|p| match p {
            ParamKind::Unresolved { retry_at, .. } => Some(*retry_at),
            _ => None,
        })
        .min()
}

/// A param kind's discovery in its own task.
struct Lookup {
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
fn reconcile_params(
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

/// Everything a snapshot is built from, copied out of the stores.
struct Inputs {
    objects: Vec<Arc<Json>>,
    kinds: Vec<(String, String, ParamState)>,
}

enum ParamState {
    Synced(Scope),
    Unsynced(Scope),
    Unresolved,
    NotServed,
}

impl Inputs {
    fn collect<'a>(
        policies: &[Arc<Json>],
        bindings: &[Arc<Json>],
        others: impl Iterator<Item = &'a Watched>,
        params: &BTreeMap<(String, String), ParamKind>,
    ) -> Inputs {
        let mut objects: Vec<Arc<Json>> = policies.iter().chain(bindings).cloned().collect();
        for w in others {
            objects.extend(w.store.objects());
        }
        let mut kinds = Vec::new();
        for ((api_version, kind), p) in params {
            let group = group_of(api_version).to_string();
            let state = match p {
                ParamKind::Watched { scope, watches } if all_synced(watches) => {
                    for w in watches {
                        objects.extend(w.store.objects());
                    }
                    ParamState::Synced(*scope)
                }
                ParamKind::Watched { scope, .. } => ParamState::Unsynced(*scope),
                ParamKind::Resolving { .. } | ParamKind::Unresolved { .. } => {
                    ParamState::Unresolved
                }
                ParamKind::NotServed { .. } => ParamState::NotServed,
            };
            kinds.push((group, kind.clone(), state));
        }
        Inputs { objects, kinds }
    }

    fn build(self, version: u16, cache: &CompileCache) -> Snapshot {
        let mut b = SnapshotBuilder::new();
        // The same object can come from two watches (Namespaces as params, or one kind named
        // at two versions): keep the first.
        let mut seen = BTreeSet::new();
        for o in self.objects {
            let meta = &o["metadata"];
            let key = (
                group_of(o["apiVersion"].as_str().unwrap_or("")).to_string(),
                o["kind"].as_str().unwrap_or("").to_string(),
                meta["namespace"].as_str().unwrap_or("").to_string(),
                meta["name"].as_str().unwrap_or("").to_string(),
            );
            if !seen.insert(key) {
                continue;
            }
            // The API server validated these objects; one that still does not read is
            // skipped (and logged) rather than taking the whole snapshot down.
            let name = format!("{}/{}", o["kind"].as_str().unwrap_or(""), meta["name"]);
            if let Err(e) =
                crate::source::add_shared(&mut b, o.clone(), crate::source::Check::Nothing)
            {
                tracing::warn!(object = %name, error = %e, "object skipped");
            }
        }
        for (group, kind, state) in self.kinds {
            match state {
                ParamState::Synced(scope) => b.declare_kind(&group, &kind, scope),
                ParamState::Unsynced(scope) => {
                    b.declare_kind(&group, &kind, scope);
                    b.param_kind_unsynced(&group, &kind);
                }
                ParamState::Unresolved => b.param_kind_unsynced(&group, &kind),
                ParamState::NotServed => b.forget_kind(&group, &kind),
            }
        }
        b.build_cached(version, cache)
    }
}

#[cfg(test)]
mod tests {
    use super::{param_namespaces, server_minor};

    #[test]
    fn param_namespaces_are_namespace_names() {
        assert_eq!(
            param_namespaces("team-b, team-a,team-b").unwrap(),
            ["team-a", "team-b"]
        );
        for bad in ["", "team-a,", "Team", "-a", "a-", "a_b", &"a".repeat(64)] {
            let e = param_namespaces(bad).unwrap_err();
            assert!(e.starts_with("--param-namespaces: "), "{bad}: {e}");
        }
        assert!(param_namespaces(&"a".repeat(63)).is_ok());
    }
    use crate::cel::{NEWEST_MINOR, OLDEST_MINOR};

    #[test]
    fn the_api_servers_version_picks_the_environment() {
        assert_eq!(server_minor("1", "32"), (32, None));
        assert_eq!(
            server_minor("1", "30+"),
            (30, None),
            "as EKS and GKE report it"
        );
        let (newer, why) = server_minor("1", "99");
        assert_eq!(newer, NEWEST_MINOR);
        assert!(why.unwrap().contains("not 1.99"));
        assert_eq!(server_minor("1", "20").0, OLDEST_MINOR);
        let (unread, why) = server_minor("", "");
        assert_eq!(unread, NEWEST_MINOR);
        assert!(why.is_some());
    }
}
