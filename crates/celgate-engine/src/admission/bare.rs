//! Namespaces the snapshot does not define, as every namespace is at least: its name and the
//! `kubernetes.io/metadata.name` label the API server sets. Folder mode and scans use them for
//! requests in namespaces the policy folder leaves out.

use serde_json::Value as Json;

/// A namespace the policy folder does not define, as every namespace is at least: its name
/// and the `kubernetes.io/metadata.name` label the API server sets. Each is built once and
/// kept (up to [`BARE_KEPT`] names, then the set starts over), not once per request.
#[derive(Debug, Default)]
pub struct BareNamespaces {
    kept: std::sync::Mutex<
        std::collections::HashMap<String, std::sync::Arc<crate::policy::snapshot::NamespaceEntry>>,
    >,
}

/// Bare namespaces kept at most: namespaces come from the API server's requests, so they are
/// the cluster's, but a bound keeps memory fixed whatever the requests say.
pub const BARE_KEPT: usize = 4096;

impl super::NamespaceLookup for BareNamespaces {
    fn entry(&self, name: &str) -> Option<std::sync::Arc<crate::policy::snapshot::NamespaceEntry>> {
        // A panic while holding the lock leaves a consistent map: keep using it.
        let mut kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(e) = kept.get(name) {
            return Some(e.clone());
        }
        if kept.len() >= BARE_KEPT {
            kept.clear();
        }
        let entry = std::sync::Arc::new(crate::policy::snapshot::NamespaceEntry::new(
            std::sync::Arc::new(self.get(name)?),
        ));
        kept.insert(name.to_string(), entry.clone());
        Some(entry)
    }

    /// Built in memory: never waits.
    fn may_wait(&self) -> bool {
        false
    }

    fn get(&self, name: &str) -> Option<Json> {
        Some(serde_json::json!({
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": name, "labels": {"kubernetes.io/metadata.name": name}},
        }))
    }
}
