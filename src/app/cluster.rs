//! The cluster source while serving (its policies and bindings from the cluster, or from a
//! folder's watch through a feed): the Kubernetes client, the SubjectAccessReview
//! authorizer, snapshots installed as they come, the source's health (history resets and
//! drift included) copied into the metrics, admission results handed to the policy reports, and the background scans.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use crate::cel::k8s::authz::AuthorizerFactory;
use crate::server::metrics::SourceHealth;
use crate::server::AppState;
use crate::source::kube::authorizer::{SarAuthorizer, SarOptions};
use crate::source::kube::namespaces::ClusterNamespaces;
use crate::source::kube::{self, ClientError, KubeOptions, KubeSource};

/// Connects to the API server and starts the cluster source; snapshots are installed as they
/// come, and the service turns ready with the first (complete) one.
pub(super) async fn start(
    state: &Arc<AppState>,
    connect: kube::Connect,
    options: KubeOptions,
    sar: Option<SarOptions>,
    feed: Option<Arc<kube::PolicyFeed>>,
    publish: Option<crate::certs::rules::Install>,
) -> Result<Arc<KubeSource>, ClientError> {
    let client = kube::client(connect).await?;
    let authorizer =
        sar.map(|o| SarAuthorizer::new(client.clone(), o) as Arc<dyn AuthorizerFactory>);
    // What the engine may wait on, handed to it per review (the snapshot stays pure data).
    state.set_services(crate::admission::Services {
        authorizer: authorizer.clone(),
        namespace_lookup: Some(Arc::new(ClusterNamespaces::new(client.clone()))),
    });
    let target = state.clone();
    // At once, or through the webhook rules controller once the rules cover the snapshot.
    let publish = publish.unwrap_or_else(|| Arc::new(move |s| target.install(s)));
    // With a feed, policies and bindings come from it (a folder) instead of the cluster.
    let source = KubeSource::start_fed(client, options, publish, feed);
    // Background scans: the serving snapshot, the same authorizer, and namespaces from the
    // snapshot only (no GET per scanned object).
    let current = state.clone();
    source.start_background(
        Arc::new(move || current.snapshot.load_full()),
        crate::admission::Services {
            authorizer,
            namespace_lookup: None,
        },
        Arc::new(ScanMetrics(state.clone())),
    );
    if let Some(store) = source.report_store() {
        state.set_result_sink(Arc::new(Reports {
            admission: store,
            background: source.background_store(),
        }));
    }
    Ok(Arc::new(source))
}

/// The server's admission results go to the cluster source's policy reports (the server
/// and the source know nothing of each other); a new snapshot drops the results of removed
/// policies and bindings from the background reports (the source does it for the admission
/// reports as it publishes the snapshot).
struct Reports {
    admission: Arc<kube::reports::ReportStore>,
    background: Option<Arc<kube::reports::ReportStore>>,
}

impl crate::server::ResultSink for Reports {
    fn admitted(
        &self,
        snapshot: &crate::policy::snapshot::Snapshot,
        answer: &crate::review::Answer,
    ) {
        self.admission.admitted(snapshot, answer);
    }

    fn installed(&self, snapshot: &crate::policy::snapshot::Snapshot) {
        if let Some(b) = &self.background {
            b.retain(snapshot);
        }
    }
}

/// Background scans counted in the server's metrics (`source="scan"` for results).
struct ScanMetrics(Arc<AppState>);

impl kube::background::ScanObserver for ScanMetrics {
    fn evaluated(
        &self,
        snapshot: &crate::policy::snapshot::Snapshot,
        evaluated: &[crate::admission::Evaluated],
    ) {
        let source = crate::server::metrics::ResultSource::Scan;
        self.0.metrics.results(snapshot, evaluated, source);
    }

    fn scanned(&self, resource: &str, objects: u64) {
        self.0
            .metrics
            .background_objects
            .with_label_values(&[resource])
            .inc_by(objects);
    }

    fn finished(&self, elapsed: Duration, complete: bool) {
        self.0
            .metrics
            .background_scan_seconds
            .observe(elapsed.as_secs_f64());
        if !complete {
            self.0.metrics.background_incomplete.inc();
        }
    }
}

/// Copies the cluster source's health and problems into the metrics, every second.
pub(super) async fn report(
    state: Arc<AppState>,
    source: Arc<KubeSource>,
    mut stop: watch::Receiver<bool>,
) {
    loop {
        let statuses = source.status();
        state.metrics.sources(statuses.iter().map(|s| SourceHealth {
            name: &s.name,
            synced: s.synced,
            stale: s.stale,
            objects: s.objects,
        }));
        state
            .metrics
            .problems(super::problem_labels(&source.problems()));
        let (resets, drift) = (source.history_resets(), source.resync_drift());
        state.metrics.history(
            resets.iter().map(|(r, n)| (r.as_str(), *n)),
            drift.iter().map(|(s, n)| (s.as_str(), *n)),
        );
        if let Some(store) = source.report_store() {
            // The store counts; the metric follows (a counter only goes up).
            let counted = state.metrics.report_evicted.get();
            state
                .metrics
                .report_evicted
                .inc_by(store.evicted().saturating_sub(counted));
        }
        tokio::select! {
            _ = stop.changed() => return,
            _ = tokio::time::sleep(Duration::from_secs(1)) => {}
        }
    }
}
