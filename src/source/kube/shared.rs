//! What the tasks of one cluster source share: the state the run loop writes and the handle
//! ([`super::KubeSource`]) reads (readiness, stores, problems, discovered versions, the
//! Lease's leadership, history resets), and where new snapshots go. Its own file so that the
//! handle, which starts the run loop, and the run loop, which writes this state, do not
//! import each other.

use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use super::{history, lease, Problem, Reader};
use crate::policy::snapshot::Snapshot;

/// Receives each new snapshot.
pub type Publish = Arc<dyn Fn(Snapshot) + Send + Sync>;

#[derive(Default)]
pub(super) struct Shared {
    pub(super) ready: AtomicBool,
    /// The Lease rounds completed before the last decision whether to report Events.
    pub(super) reporting_decided_after: AtomicU64,
    pub(super) stores: Mutex<Vec<Reader>>,
    pub(super) problems: Mutex<Vec<Problem>>,
    /// The policy API version in use (`v1` or `v1beta1`), once discovered.
    pub(super) vap_version: Mutex<Option<String>>,
    /// The MutatingAdmissionPolicy API version watched, once discovery found one served.
    pub(super) map_version: Mutex<Option<String>>,
    /// When the discovery of the policy API first failed, while it has not answered yet.
    pub(super) discovery_failing_since: Mutex<Option<Instant>>,
    /// The CEL environment's version read from the API server, once read.
    pub(super) cel_version: Mutex<Option<u16>>,
    /// Whether this replica holds the Lease (Events, policy reports, background scans).
    pub(super) leadership: Arc<lease::Leadership>,
    /// Bumped after each published snapshot whose policies or bindings changed (the first
    /// included): background scans follow it.
    pub(super) policy_changes: tokio::sync::watch::Sender<u64>,
    /// Shared by the watches: history resets, drift.
    pub(super) history: Arc<history::History>,
}
