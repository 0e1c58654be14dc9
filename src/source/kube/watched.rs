//! A watched resource ([`Watched`]): the list-then-watch task that keeps a store's copy
//! ([`super::watch`], client-go's `Reflector`) and a reader of that store (its `Indexer`),
//! stopped when dropped.

use std::sync::Arc;

use kube::api::ApiResource;
use kube::Client;
use tokio::sync::Notify;

use super::{store, watch, Reader, Task};

/// A watcher task (which holds the store's writer) and a reader of its store; aborted when
/// dropped.
pub(super) struct Watched {
    /// `Some`: the watch covers this namespace only.
    pub(super) namespace: Option<String>,
    pub(super) store: Reader,
    _task: Task,
}

impl Watched {
    pub(super) fn start(
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
    pub(super) fn start_trimmed(
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
