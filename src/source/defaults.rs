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
        namespace_as_created(obj);
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

/// What the API server writes into a Namespace on create and a folder need not spell out:
/// `metadata.creationTimestamp` (the registry's `FillObjectMetaSystemFields`, the time of
/// the create: here the time celgate loads the folder, in whole seconds as stored),
/// `status.phase: Active` and the `kubernetes` finalizer in `spec.finalizers` (the namespace
/// strategy's `PrepareForCreate`, pkg/registry/core/namespace/strategy.go). Fields the
/// folder sets are kept, so an exported Namespace reads as it was exported.
fn namespace_as_created(ns: &mut Json) {
    if ns["metadata"]["creationTimestamp"].is_null() {
        let now = jiff::Timestamp::now();
        let whole = jiff::Timestamp::from_second(now.as_second()).unwrap_or(now);
        ns["metadata"]["creationTimestamp"] = Json::String(whole.to_string());
    }
    if !ns["spec"].is_object() {
        ns["spec"] = json!({});
    }
    if ns["spec"].get("finalizers").is_none() {
        ns["spec"]["finalizers"] = json!(["kubernetes"]);
    }
    if !ns["status"].is_object() {
        ns["status"] = json!({});
    }
    if ns["status"]["phase"].as_str().is_none_or(str::is_empty) {
        ns["status"]["phase"] = json!("Active");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loaded(object: Json) -> Loaded {
        Loaded {
            file: "ns.yaml".into(),
            document: 1,
            field_errors: Vec::new(),
            object,
        }
    }

    /// pkg/registry/core/namespace/strategy.go `PrepareForCreate` and the registry's
    /// `FillObjectMetaSystemFields`: a Namespace as the API server holds it.
    #[test]
    fn a_namespace_gets_what_the_api_server_writes_on_create() {
        let mut objects = vec![loaded(json!({
            "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "dev"}
        }))];
        add_cluster_defaults(&mut objects);
        let ns = &objects[0].object;
        let created = ns["metadata"]["creationTimestamp"].as_str().unwrap();
        let t: jiff::Timestamp = created.parse().unwrap();
        assert_eq!(t.subsec_nanosecond(), 0, "{created}");
        assert!(created.ends_with('Z'), "{created}");
        assert_eq!(ns["status"]["phase"], "Active");
        assert_eq!(ns["spec"]["finalizers"], json!(["kubernetes"]));
        assert_eq!(
            ns["metadata"]["labels"]["kubernetes.io/metadata.name"],
            "dev"
        );
    }

    #[test]
    fn what_a_namespace_sets_is_kept() {
        let mut objects = vec![loaded(json!({
            "apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": "old", "creationTimestamp": "2020-01-02T03:04:05Z"},
            "spec": {"finalizers": []},
            "status": {"phase": "Terminating"}
        }))];
        add_cluster_defaults(&mut objects);
        let ns = &objects[0].object;
        assert_eq!(ns["metadata"]["creationTimestamp"], "2020-01-02T03:04:05Z");
        assert_eq!(ns["spec"]["finalizers"], json!([]));
        assert_eq!(ns["status"]["phase"], "Terminating");
    }
}
