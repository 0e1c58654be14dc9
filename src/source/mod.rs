//! Where policies come from: a local folder of manifests (the embedded default), or, in a
//! cluster, the Kubernetes API. Either way the objects end in a
//! [`crate::policy::snapshot::Snapshot`].

pub mod folder;
pub mod kube;

use serde::Deserialize;
use serde_json::{json, Value as Json};

use crate::policy::model::{Binding, Policy};
use crate::policy::snapshot::{CompileCache, Snapshot, SnapshotBuilder};
use crate::policy::validate::{validate_binding, validate_policy};
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
/// but does not read as one is an error naming its file and document. With `strict`, so is
/// one that fails the API server's validation; otherwise that becomes a configuration error
/// at admission, under the policy's failurePolicy.
pub fn snapshot(objects: Vec<Loaded>, version: u16, strict: bool) -> Result<Snapshot, LoadError> {
    snapshot_cached(objects, version, strict, &CompileCache::default())
}

/// [`snapshot`], reusing the compiled policies of `cache` (a policy is compiled once per
/// version of its object).
pub fn snapshot_cached(
    objects: Vec<Loaded>,
    version: u16,
    strict: bool,
    cache: &CompileCache,
) -> Result<Snapshot, LoadError> {
    let mut b = SnapshotBuilder::new();
    for o in objects {
        add_loaded(&mut b, o, strict)?;
    }
    Ok(b.build_cached(version, cache))
}

/// Adds one object to a snapshot under construction: a policy or binding is read (and, with
/// `strict`, validated); anything else is a namespace, param or RBAC object.
pub fn add_loaded(b: &mut SnapshotBuilder, o: Loaded, strict: bool) -> Result<(), LoadError> {
    add_shared(b, std::sync::Arc::new(o.object), strict).map_err(|message| LoadError {
        file: o.file,
        document: o.document,
        message,
    })
}

/// [`add_loaded`] for a shared object (the cluster source's stores hold `Arc`s): nothing is
/// copied but what the snapshot keeps of policies and bindings.
pub fn add_shared(
    b: &mut SnapshotBuilder,
    object: std::sync::Arc<Json>,
    strict: bool,
) -> Result<(), String> {
    let api_version = object["apiVersion"].as_str().unwrap_or("");
    let is_vap = crate::policy::model::API_VERSIONS.contains(&api_version);
    let invalid = |errors: Vec<String>| {
        format!(
            "invalid {}: {}",
            object["kind"].as_str().unwrap_or("object"),
            errors.join("; ")
        )
    };
    match (is_vap, object["kind"].as_str()) {
        (true, Some("ValidatingAdmissionPolicy")) => {
            let p = Policy::deserialize(&*object).map_err(|e| e.to_string())?;
            let errors = validate_policy(&p);
            if strict && !errors.is_empty() {
                return Err(invalid(errors));
            }
            b.add_policy(p);
        }
        (true, Some("ValidatingAdmissionPolicyBinding")) => {
            let binding = Binding::deserialize(&*object).map_err(|e| e.to_string())?;
            let errors = validate_binding(&binding);
            if strict && !errors.is_empty() {
                return Err(invalid(errors));
            }
            b.add_binding(binding);
        }
        _ => b.add_object(object),
    }
    Ok(())
}

/// Builds a snapshot of a folder's objects for serving: invalid policies become
/// configuration errors (not a refusal of the whole folder).
pub fn build_for_serving(
    objects: Vec<Loaded>,
    version: u16,
    cache: &CompileCache,
) -> Result<Snapshot, LoadError> {
    snapshot_cached(objects, version, false, cache)
}
