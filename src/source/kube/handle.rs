//! A running cluster source ([`KubeSource`]): starting its tasks (the run loop, the Lease,
//! the report writer, background scans) and what the server asks of it (readiness, status,
//! problems, leadership). Its tasks stop when it is dropped, as kube-runtime's controllers
//! stop with their stream.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kube::Client;

use super::feed::PolicyFeed;
use super::options::KubeOptions;
use super::run::run;
use super::shared::{Publish, Shared};
use super::{background, lease, lock, reports, Problem, SourceStatus, Task};

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

    /// The MutatingAdmissionPolicy API version watched (`v1`, `v1beta1` or `v1alpha1`), once
    /// discovery found it served; `None` while the cluster does not serve it (or the policies
    /// come from a folder).
    pub fn mutating_policy_api_version(&self) -> Option<String> {
        lock(&self.shared.map_version).clone()
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

/// The task holding the Lease, and what tells it to stop and release it.
struct LeaseTask {
    stop: tokio::sync::watch::Sender<bool>,
    task: Task,
}
