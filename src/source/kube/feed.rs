//! Policies and bindings handed to the cluster source from elsewhere ([`PolicyFeed`]: a
//! watched folder, `--source kubernetes --policies DIR`) in place of its own watches of the
//! cluster's ([`PolicyInput`]). The cluster side follows the API server's policy plugin,
//! which reads both kinds through informers
//! (`k8s.io/apiserver/pkg/admission/plugin/policy/generic/policy_source.go`).

use std::sync::{Arc, Mutex};

use serde_json::Value as Json;
use tokio::sync::Notify;

use super::lock;
use super::watched::Watched;
use crate::source::problems::Problem;

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

/// Where the policies and bindings come from: the cluster's watches, or a feed.
pub(super) enum PolicyInput {
    Cluster {
        policies: Watched,
        bindings: Watched,
    },
    Fed(Arc<PolicyFeed>),
}

impl PolicyInput {
    /// The watches it holds (none for a feed).
    pub(super) fn watches(&self) -> Vec<&Watched> {
        match self {
            PolicyInput::Cluster { policies, bindings } => vec![policies, bindings],
            PolicyInput::Fed(_) => Vec::new(),
        }
    }

    /// Listed, or (a feed) given a first state.
    pub(super) fn synced(&self) -> bool {
        match self {
            PolicyInput::Cluster { policies, bindings } => {
                policies.store.synced() && bindings.store.synced()
            }
            PolicyInput::Fed(feed) => feed.get().is_some(),
        }
    }

    /// The policies, the bindings, and the problems found before they were handed over.
    pub(super) fn objects(&self) -> (Vec<Arc<Json>>, Vec<Arc<Json>>, Vec<Problem>) {
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
    pub(super) fn generation(&self) -> (u64, u64) {
        match self {
            PolicyInput::Cluster { policies, bindings } => {
                (policies.store.generation(), bindings.store.generation())
            }
            PolicyInput::Fed(feed) => (feed.get().map_or(0, |f| f.generation), 0),
        }
    }

    /// Wakes when a feed's state changes; never for the cluster's watches (they wake the
    /// loop through their own notification).
    pub(super) async fn changed(&self) {
        match self {
            PolicyInput::Fed(feed) => feed.changed.notified().await,
            PolicyInput::Cluster { .. } => std::future::pending().await,
        }
    }
}
