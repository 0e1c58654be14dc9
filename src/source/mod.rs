//! Where policies come from: a local folder of manifests (the embedded default), or, in a
//! cluster, the Kubernetes API. Either way the objects end in a
//! [`crate::policy::snapshot::Snapshot`].

pub mod folder;

use serde_json::{json, Value as Json};

use crate::policy::snapshot::{Snapshot, SnapshotBuilder};
use folder::{LoadError, Loaded};

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

/// Builds a snapshot from loaded objects; an object that claims to be a policy or binding
/// but does not read as one is an error naming its file and document.
pub fn snapshot(objects: Vec<Loaded>, version: u16) -> Result<Snapshot, LoadError> {
    let mut b = SnapshotBuilder::new();
    for o in objects {
        let api_version = o.object["apiVersion"].as_str().unwrap_or("");
        let is_vap = crate::policy::model::API_VERSIONS.contains(&api_version);
        let err = |e: serde_json::Error| LoadError {
            file: o.file.clone(),
            document: o.document,
            message: e.to_string(),
        };
        match (is_vap, o.object["kind"].as_str()) {
            (true, Some("ValidatingAdmissionPolicy")) => {
                b.add_policy(serde_json::from_value(o.object.clone()).map_err(err)?)
            }
            (true, Some("ValidatingAdmissionPolicyBinding")) => {
                b.add_binding(serde_json::from_value(o.object.clone()).map_err(err)?)
            }
            _ => b.add_object(o.object),
        }
    }
    Ok(b.build(version))
}
