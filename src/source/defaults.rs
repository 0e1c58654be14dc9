//! What every real cluster has and a folder need not spell out, added to a folder's objects:
//! the `kubernetes.io/metadata.name` label the API server sets on each Namespace (the
//! namespace registry strategy, `pkg/registry/core/namespace/strategy.go`), and the
//! `kube-root-ca.crt` ConfigMap the root CA publisher puts in each
//! (`pkg/controller/certificates/rootcacertpublisher`).

use serde_json::{json, Value as Json};

use super::folder::Loaded;

/// What every real cluster has and a folder need not spell out: each Namespace carries the
/// `kubernetes.io/metadata.name` label, and holds a ConfigMap `kube-root-ca.crt` (which a
/// `paramRef.selector: {}` over ConfigMaps also selects).
pub fn add_cluster_defaults(objects: &mut Vec<Loaded>) {
    let mut extra = Vec::new();
    for o in objects.iter_mut() {
        let obj = &mut o.object;
        if obj["apiVersion"] != "v1" || obj["kind"] != "Namespace" {
            continue;
        }
        let Some(name) = obj["metadata"]["name"].as_str().map(str::to_string) else {
            continue;
        };
        let meta = &mut obj["metadata"];
        if !meta["labels"].is_object() {
            meta["labels"] = json!({});
        }
        meta["labels"]["kubernetes.io/metadata.name"] = Json::String(name.clone());
        extra.push(Loaded {
                file: o.file.clone(),
                document: o.document,
                field_errors: Vec::new(),
                object: json!({
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": {"name": "kube-root-ca.crt", "namespace": name},
                    "data": {"ca.crt": "-----BEGIN CERTIFICATE-----\n(cluster CA)\n-----END CERTIFICATE-----\n"}
                }),
            });
    }
    let present = |ns: &str| {
        objects.iter().any(|o| {
            o.object["kind"] == "ConfigMap"
                && o.object["metadata"]["name"] == "kube-root-ca.crt"
                && o.object["metadata"]["namespace"] == ns
        })
    };
    extra.retain(|e| !present(e.object["metadata"]["namespace"].as_str().unwrap_or("")));
    objects.extend(extra);
}
