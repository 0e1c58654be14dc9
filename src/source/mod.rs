//! Where policies come from: a local folder of manifests (the embedded default), or, in a
//! cluster, the Kubernetes API. Either way the objects end in a
//! [`crate::policy::snapshot::Snapshot`].

mod error;
pub mod folder;
pub mod kube;

use serde::Deserialize;
use serde_json::{json, Value as Json};

use crate::model::{Binding, Policy};
use crate::policy::snapshot::{CompileCache, Snapshot, SnapshotBuilder};
use crate::policy::validate::{validate_binding, validate_policy, FieldErrors};
pub use error::ObjectError;
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
    add_shared(b, std::sync::Arc::new(o.object), strict).map_err(|source| LoadError::Object {
        file: o.file,
        document: o.document,
        source,
    })
}

/// [`add_loaded`] for a shared object (the cluster source's stores hold `Arc`s): nothing is
/// copied but what the snapshot keeps of policies and bindings.
pub fn add_shared(
    b: &mut SnapshotBuilder,
    object: std::sync::Arc<Json>,
    strict: bool,
) -> Result<(), ObjectError> {
    let api_version = object["apiVersion"].as_str().unwrap_or("");
    let is_vap = crate::model::API_VERSIONS.contains(&api_version);
    let invalid = |errors: FieldErrors| ObjectError::Invalid {
        kind: object["kind"].as_str().unwrap_or("object").to_string(),
        errors,
    };
    match (is_vap, object["kind"].as_str()) {
        (true, Some("ValidatingAdmissionPolicy")) => {
            let p = Policy::deserialize(&*object).map_err(ObjectError::Malformed)?;
            let errors = validate_policy(&p);
            if strict && !errors.is_empty() {
                return Err(invalid(errors));
            }
            b.add_policy(p);
        }
        (true, Some("ValidatingAdmissionPolicyBinding")) => {
            let binding = Binding::deserialize(&*object).map_err(ObjectError::Malformed)?;
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
/// configuration errors (not a refusal of the whole folder). Also returns the folder's
/// misconfigured policies and bindings (a binding naming no policy, a missing param, ...),
/// found as for the cluster source, with the same reasons.
pub fn build_for_serving(
    objects: Vec<Loaded>,
    version: u16,
    cache: &CompileCache,
) -> Result<(Snapshot, Vec<kube::Problem>), LoadError> {
    let mut b = SnapshotBuilder::new();
    let (mut policies, mut bindings) = (Vec::new(), Vec::new());
    for o in objects {
        let object = std::sync::Arc::new(o.object);
        if crate::model::API_VERSIONS.contains(&object["apiVersion"].as_str().unwrap_or("")) {
            match object["kind"].as_str() {
                Some("ValidatingAdmissionPolicy") => policies.push(object.clone()),
                Some("ValidatingAdmissionPolicyBinding") => bindings.push(object.clone()),
                _ => {}
            }
        }
        add_shared(&mut b, object, false).map_err(|source| LoadError::Object {
            file: o.file,
            document: o.document,
            source,
        })?;
    }
    let snapshot = b.build_cached(version, cache);
    let problems = kube::feedback::problems(
        &policies,
        &bindings,
        &snapshot,
        |k| folder_param(&snapshot, k),
        &Default::default(),
        &[],
    );
    Ok((snapshot, problems))
}

/// Whether the param a binding names is in the folder, and its kind's scope; `None` when
/// nothing is known of the kind (the policy's own problem).
fn folder_param(
    snapshot: &Snapshot,
    key: &kube::feedback::ParamKey<'_>,
) -> Option<(crate::policy::snapshot::Scope, bool)> {
    let kind = (
        crate::policy::snapshot::group_of(key.api_version).to_string(),
        key.kind.to_string(),
    );
    let scope = *snapshot.kinds.get(&kind)?;
    let cluster = scope == crate::policy::snapshot::Scope::Cluster;
    let exists = snapshot.params.get(&kind).is_some_and(|objects| {
        objects
            .iter()
            .any(|o| o.name == key.name && (cluster || o.namespace == key.namespace))
    });
    Some((scope, exists))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The folder's problems have the cluster source's reasons; a param is looked up among the
    /// folder's objects.
    #[test]
    fn folder_problems() {
        let yaml = r#"
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: limits}
spec:
  paramKind: {apiVersion: v1, kind: ConfigMap}
  matchConstraints: {resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}]}
  validations: [{expression: "true"}]
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: present}
spec: {policyName: limits, validationActions: [Deny], paramRef: {name: cm, namespace: team}}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: elsewhere}
spec: {policyName: limits, validationActions: [Deny], paramRef: {name: cm, namespace: other}}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: orphan}
spec: {policyName: nosuch, validationActions: [Deny]}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: cm, namespace: team}
"#;
        let objects = folder::parse_documents(std::path::Path::new("f.yaml"), yaml).unwrap();
        let (snapshot, problems) =
            build_for_serving(objects, crate::cel::NEWEST_MINOR, &CompileCache::default()).unwrap();
        assert_eq!(snapshot.policies.len(), 1);
        let found: Vec<(&str, &str)> = problems
            .iter()
            .map(|p| (p.name.as_str(), p.reason))
            .collect();
        assert_eq!(
            found,
            [("elsewhere", "ParamNotFound"), ("orphan", "PolicyNotFound")]
        );
        assert_eq!(problems[1].kind, "ValidatingAdmissionPolicyBinding");
    }
}
