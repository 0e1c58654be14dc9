//! What the watches of one cluster source share about the history they follow: whether it
//! went back (etcd replaced, or restored from a backup: Kubernetes documents both as routine
//! operations), so that every watch lists again, and the counts the metrics show (resets by
//! reason, objects the periodic re-lists found different from the copies).
//!
//! An API server on a new or restored etcd accepts a watch resumed from a resourceVersion of
//! the old etcd and sends nothing on it (every later change is older than it): without these
//! checks the copies would keep deleted objects for as long as the process runs. The signs:
//! a list whose resourceVersion is lower than one seen before the list was sent (the watch
//! may deliver newer ones while it is on its way), a bookmark lower than one the watch
//! delivered, and a kube-system namespace with another uid (another cluster).
//!
//! resourceVersions are opaque strings in the API contract, but etcd-backed API servers hand
//! out etcd's revision, an integer that only grows within one etcd: they are compared only
//! when both read as integers, and never across resources (a resource may be stored in an
//! etcd of its own, `--etcd-servers-overrides`).

use std::collections::BTreeMap;
use std::sync::Mutex;

use tokio::sync::watch;

use super::lock;

/// Why every watch of the source lists again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Reset {
    /// A list (a probe, a re-list, a periodic re-list) older than what was seen.
    ListWentBack,
    /// A bookmark older than what the watch had delivered.
    BookmarkWentBack,
    /// The kube-system namespace has another uid.
    ClusterIdentity,
}

impl Reset {
    /// The `reason` label of `celgate_source_history_resets_total`.
    pub fn label(self) -> &'static str {
        match self {
            Reset::ListWentBack => "list_went_back",
            Reset::BookmarkWentBack => "bookmark_went_back",
            Reset::ClusterIdentity => "cluster_identity",
        }
    }
}

/// Shared by every watch of a source.
#[derive(Debug)]
pub struct History {
    /// Bumped by each reset: every watch lists again once per bump.
    epoch: watch::Sender<u64>,
    resets: Mutex<BTreeMap<Reset, u64>>,
    /// Objects the periodic re-lists found different, by store name.
    drift: Mutex<BTreeMap<String, u64>>,
}

impl Default for History {
    fn default() -> Self {
        History {
            epoch: watch::Sender::new(0),
            resets: Mutex::default(),
            drift: Mutex::default(),
        }
    }
}

impl History {
    /// Counts a reset and tells every watch to list again.
    pub fn reset(&self, reason: Reset) {
        *lock(&self.resets).entry(reason).or_default() += 1;
        self.epoch.send_modify(|n| *n += 1);
    }

    /// Wakes when some watch (or the cluster identity check) saw the history go back.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.epoch.subscribe()
    }

    /// Counts `objects` found different by a periodic re-list of `store`.
    pub fn drifted(&self, store: &str, objects: u64) {
        *lock(&self.drift).entry(store.to_string()).or_default() += objects;
    }

    /// Resets so far, by reason label.
    pub fn resets(&self) -> Vec<(String, u64)> {
        lock(&self.resets)
            .iter()
            .map(|(r, n)| (r.label().to_string(), *n))
            .collect()
    }

    /// Drift found so far, by store name (kept when a param watch stops and starts again).
    pub fn drift(&self) -> Vec<(String, u64)> {
        lock(&self.drift)
            .iter()
            .map(|(s, n)| (s.clone(), *n))
            .collect()
    }
}

/// A resourceVersion as a number, if it is one.
fn number(rv: &str) -> Option<u64> {
    rv.parse().ok()
}

/// The highest resourceVersions one watch knows of its resource.
#[derive(Debug, Clone, Copy, Default)]
pub struct Seen {
    /// Delivered by the watch itself: its list, events and bookmarks. A watch delivers in
    /// order, so a bookmark below it means the history went back.
    delivered: u64,
    /// `delivered` and the lists read beside the watch (probes, periodic re-lists), which
    /// may be ahead of it: a list below it means the history went back.
    observed: u64,
}

impl Seen {
    /// After a list at `rv` that the watch starts from.
    pub fn listed(rv: &str) -> Seen {
        let n = number(rv).unwrap_or(0);
        Seen {
            delivered: n,
            observed: n,
        }
    }

    /// The watch delivered `rv` (an object's, or a bookmark's).
    pub fn deliver(&mut self, rv: &str) {
        if let Some(n) = number(rv) {
            self.delivered = self.delivered.max(n);
            self.observed = self.observed.max(n);
        }
    }

    /// A list beside the watch answered at `rv`.
    pub fn observe(&mut self, rv: &str) {
        if let Some(n) = number(rv) {
            self.observed = self.observed.max(n);
        }
    }

    /// What was seen as a list is sent: its answer is checked against this, not against
    /// what the watch delivers while the list is on its way (changes written after the list
    /// was read are newer than it).
    pub fn sending(&self) -> Sent {
        Sent(self.observed)
    }

    /// Whether a bookmark at `rv` is older than what the watch delivered.
    pub fn bookmark_went_back(&self, rv: &str) -> bool {
        number(rv).is_some_and(|n| n < self.delivered)
    }
}

/// What a watch had seen when it sent a list (see [`Seen::sending`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct Sent(u64);

impl Sent {
    /// Whether the list, answered at `rv`, is older than what was seen when it was sent: an
    /// API server reads a list after it is sent, so only another history gives that.
    pub fn went_back(self, rv: &str) -> bool {
        number(rv).is_some_and(|n| n < self.0)
    }
}

/// Whether resourceVersion `a` is newer than `b` (both integers: otherwise not known).
pub fn newer(a: &str, b: &str) -> bool {
    matches!((number(a), number(b)), (Some(a), Some(b)) if a > b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_and_bookmarks_going_back() {
        let mut seen = Seen::listed("100");
        assert!(!seen.sending().went_back("100"));
        assert!(seen.sending().went_back("99"));
        // A list sent at 100 and answered at 110, while the watch delivered 120 (written
        // after the list was read): not a reset.
        let sent = seen.sending();
        seen.deliver("120");
        assert!(!sent.went_back("110"));
        assert!(seen.sending().went_back("110"));
        assert!(seen.bookmark_went_back("110"));
        // A probe may be ahead of the watch: bookmarks below it are not a reset.
        seen.observe("200");
        assert!(!seen.bookmark_went_back("150"));
        assert!(seen.sending().went_back("150"));
        // Not integers: not compared.
        assert!(!seen.sending().went_back("abc"));
        assert!(!Seen::listed("x").sending().went_back("1"));
        assert!(newer("11", "9") && !newer("9", "11") && !newer("x", "1"));
    }

    #[test]
    fn resets_wake_every_watch_and_are_counted() {
        let history = History::default();
        let a = history.subscribe();
        history.reset(Reset::ListWentBack);
        history.reset(Reset::ClusterIdentity);
        history.reset(Reset::ListWentBack);
        assert!(a.has_changed().unwrap_or(false));
        assert_eq!(
            history.resets(),
            [
                ("list_went_back".to_string(), 2),
                ("cluster_identity".to_string(), 1)
            ]
        );
        history.drifted("namespaces.v1", 2);
        history.drifted("namespaces.v1", 1);
        assert_eq!(history.drift(), [("namespaces.v1".to_string(), 3)]);
    }
}
