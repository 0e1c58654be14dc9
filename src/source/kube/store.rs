//! The local copy of one watched resource: its objects (as JSON, with `apiVersion` and `kind`
//! filled in, since list items omit them), whether the initial list has completed, and since
//! when the watch has been failing (the staleness that `/metrics` reports).
//!
//! As kube-runtime's reflector does, a store has one exclusive [`Writer`] (held by its
//! watcher, not cloneable) and any number of cloneable [`Reader`]s: only the watcher can
//! change what the rebuilds read.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use serde_json::Value as Json;

use super::lock;

/// `(namespace, name)`; the namespace is empty for cluster-scoped objects.
pub type ObjectKey = (String, String);

/// What is known of one resource.
#[derive(Debug)]
struct Store {
    /// Label for logs and metrics, e.g. `namespaces.v1` or `configmaps.v1 (params)`.
    name: String,
    objects: RwLock<BTreeMap<ObjectKey, Arc<Json>>>,
    synced: AtomicBool,
    /// Counts changes, so that a rebuild can tell whether anything changed.
    generation: AtomicU64,
    /// `Some(t)`: the watch has not been current since `t` (not yet listed, or failing).
    stale_since: Mutex<Option<Instant>>,
    /// Why the watch last failed, until it is current again.
    error: Mutex<Option<String>>,
}

/// A store's health, for readiness and metrics.
#[derive(Debug, Clone, PartialEq)]
pub struct SourceStatus {
    pub name: String,
    pub synced: bool,
    /// How long the store may have been missing changes (zero while the watch is current).
    pub stale: Duration,
    pub objects: usize,
}

/// The key of an object: its namespace (empty if none) and name.
pub fn key_of(object: &Json) -> ObjectKey {
    let meta = &object["metadata"];
    let text = |k: &str| meta[k].as_str().unwrap_or("").to_string();
    (text("namespace"), text("name"))
}

// A poisoned lock means a panic while holding it; the maps stay structurally valid (each
// write is a single insert/remove/replace), so the data is used as is.
fn read<T>(l: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    l.read().unwrap_or_else(|e| e.into_inner())
}

fn write<T>(l: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    l.write().unwrap_or_else(|e| e.into_inner())
}

/// A new, empty store named `name` (not synced, stale since now): its only writer and a
/// first reader.
pub fn store(name: impl Into<String>) -> (Writer, Reader) {
    let reader = Reader {
        store: Arc::new(Store {
            name: name.into(),
            objects: RwLock::default(),
            synced: AtomicBool::new(false),
            generation: AtomicU64::new(0),
            stale_since: Mutex::new(Some(Instant::now())),
            error: Mutex::default(),
        }),
    };
    (
        Writer {
            reader: reader.clone(),
        },
        reader,
    )
}

/// The one handle that changes a store: its watcher's. Not `Clone`.
#[derive(Debug)]
pub struct Writer {
    reader: Reader,
}

/// A read-only view of a store, shared by the rebuilds and the metrics.
#[derive(Debug, Clone)]
pub struct Reader {
    store: Arc<Store>,
}

impl Writer {
    /// Reads through the writer (the watcher logs what it holds).
    pub fn read(&self) -> &Reader {
        &self.reader
    }

    /// Replaces every object (a completed list or re-list) and marks the store synced.
    pub fn replace(&self, objects: impl IntoIterator<Item = Json>) {
        let s = &self.reader.store;
        let map = objects
            .into_iter()
            .map(|o| (key_of(&o), Arc::new(o)))
            .collect();
        *write(&s.objects) = map;
        s.generation.fetch_add(1, Ordering::AcqRel);
        s.synced.store(true, Ordering::Release);
        self.current();
    }

    pub fn apply(&self, object: Json) {
        let s = &self.reader.store;
        write(&s.objects).insert(key_of(&object), Arc::new(object));
        s.generation.fetch_add(1, Ordering::AcqRel);
        self.current();
    }

    pub fn delete(&self, object: &Json) {
        let s = &self.reader.store;
        write(&s.objects).remove(&key_of(object));
        s.generation.fetch_add(1, Ordering::AcqRel);
        self.current();
    }

    /// The watch delivered something: it is current.
    pub fn current(&self) {
        let s = &self.reader.store;
        if self.reader.synced() {
            *lock(&s.stale_since) = None;
            *lock(&s.error) = None;
        }
    }

    /// The watch failed: from now on changes may be missed until it is current again.
    pub fn failing(&self, error: String) {
        let s = &self.reader.store;
        let mut since = lock(&s.stale_since);
        since.get_or_insert_with(Instant::now);
        *lock(&s.error) = Some(error);
    }
}

impl Reader {
    /// Label for logs and metrics, e.g. `namespaces.v1` or `configmaps.v1 (params)`.
    pub fn name(&self) -> &str {
        &self.store.name
    }

    /// Why the watch is failing, if it is.
    pub fn error(&self) -> Option<String> {
        lock(&self.store.error).clone()
    }

    /// Changes so far.
    pub fn generation(&self) -> u64 {
        self.store.generation.load(Ordering::Acquire)
    }

    pub fn synced(&self) -> bool {
        self.store.synced.load(Ordering::Acquire)
    }

    pub fn objects(&self) -> Vec<Arc<Json>> {
        read(&self.store.objects).values().cloned().collect()
    }

    /// Every object with its key.
    pub fn entries(&self) -> Vec<(ObjectKey, Arc<Json>)> {
        read(&self.store.objects)
            .iter()
            .map(|(k, o)| (k.clone(), o.clone()))
            .collect()
    }

    pub fn get(&self, namespace: &str, name: &str) -> Option<Arc<Json>> {
        read(&self.store.objects)
            .get(&(namespace.to_string(), name.to_string()))
            .cloned()
    }

    pub fn status(&self) -> SourceStatus {
        let since = *lock(&self.store.stale_since);
        SourceStatus {
            name: self.store.name.clone(),
            synced: self.synced(),
            stale: since.map_or(Duration::ZERO, |t| t.elapsed()),
            objects: read(&self.store.objects).len(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ns(name: &str, rv: &str) -> Json {
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "resourceVersion": rv}})
    }

    #[test]
    fn follows_lists_and_changes() {
        let (w, s) = store("namespaces.v1");
        assert!(!s.synced());
        assert!(s.status().stale > Duration::ZERO || !s.status().synced);
        w.replace([ns("a", "1"), ns("b", "2")]);
        assert!(s.synced());
        assert_eq!(s.status().stale, Duration::ZERO);
        w.apply(ns("a", "3"));
        assert_eq!(s.get("", "a").unwrap()["metadata"]["resourceVersion"], "3");
        w.delete(&ns("b", "4"));
        assert_eq!(s.objects().len(), 1);
        // A re-list drops what it no longer lists.
        w.replace([ns("c", "5")]);
        assert!(s.get("", "a").is_none());
        assert_eq!(s.status().objects, 1);
    }

    #[test]
    fn staleness_runs_while_the_watch_fails() {
        let (w, s) = store("x");
        w.replace([]);
        w.failing("boom".into());
        assert_eq!(s.error().as_deref(), Some("boom"));
        std::thread::sleep(Duration::from_millis(5));
        let first = s.status().stale;
        assert!(first >= Duration::from_millis(5));
        // A second failure keeps the original start.
        w.failing("boom again".into());
        assert!(s.status().stale >= first);
        w.current();
        assert_eq!(s.status().stale, Duration::ZERO);
        assert_eq!(s.error(), None);
    }
}
