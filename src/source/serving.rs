//! A folder's objects built for serving (`--source folder`), or handed to the cluster source
//! (`--source kubernetes --policies DIR`): a policy the API server would refuse to create is
//! not served and its last good version is, as the API server keeps the stored object when
//! an update is refused (the registry's validation on update,
//! `pkg/registry/admissionregistration`); what is wrong is reported with the cluster
//! source's reasons ([`super::problems`]).

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Deserialize;
use serde_json::Value as Json;

use super::assemble::{add_shared, Check};
use super::error::ObjectError;
use super::folder::{LoadError, Loaded};
use super::problems::{self, Problem};
use crate::model::{Binding, MutatingBinding, MutatingPolicy, Policy};
use crate::policy::snapshot::{CompileCache, Snapshot, SnapshotBuilder};

/// A folder's objects built for serving.
pub struct Served {
    pub snapshot: Snapshot,
    /// The folder's misconfigured policies and bindings (a binding naming no policy, a
    /// missing param, a policy refused...), with the cluster source's reasons.
    pub problems: Vec<Problem>,
    /// The policy objects served, by name: the next load's last good versions.
    pub accepted: BTreeMap<String, Arc<Json>>,
    /// Policies refused as the API server would refuse to create them.
    pub refused: usize,
}

/// Builds a snapshot of a folder's objects for serving. A policy the API server would refuse
/// to create (its validation, or an expression that does not compile in the creation-time
/// environment) is not served: its `last_good` version is, as the API server keeps the
/// stored object when an update is refused, or none (a binding to it then names no policy).
/// Each refusal is a problem (`InvalidPolicy`) saying which. An invalid binding is served: the
/// requests it matches get the configuration error, under the policy's failurePolicy.
pub fn build_for_serving(
    objects: Vec<Loaded>,
    version: u16,
    cache: &CompileCache,
    last_good: &BTreeMap<String, Arc<Json>>,
) -> Result<Served, LoadError> {
    let mut b = SnapshotBuilder::new();
    let (mut policies, mut bindings) = (Vec::new(), Vec::new());
    let mut accepted = BTreeMap::new();
    let mut refusals = Vec::new();
    for o in objects {
        // An object with unknown or duplicate fields does not decode (strict field
        // validation): the whole load is refused, as for one that does not read at all.
        if !o.field_errors.is_empty() {
            return Err(LoadError::Object {
                source: ObjectError::strict_decoding(&o.object, o.field_errors),
                file: o.file,
                document: o.document,
            });
        }
        let mut object = Arc::new(o.object);
        if crate::model::API_VERSIONS.contains(&object["apiVersion"].as_str().unwrap_or("")) {
            match object["kind"].as_str() {
                Some("ValidatingAdmissionPolicy") => {
                    let Some((name, served)) = accept_policy(
                        (&o.file, o.document),
                        object,
                        version,
                        last_good,
                        &mut refusals,
                    )?
                    else {
                        continue;
                    };
                    object = served;
                    accepted.insert(name, object.clone());
                    policies.push(object.clone());
                }
                Some("ValidatingAdmissionPolicyBinding") => bindings.push(object.clone()),
                _ => {}
            }
        }
        add_shared(&mut b, object, Check::Nothing).map_err(|source| LoadError::Object {
            file: o.file,
            document: o.document,
            source,
        })?;
    }
    let snapshot = b.build_cached(version, cache);
    let mut problems = problems::problems(
        &policies,
        &bindings,
        &snapshot,
        |k| folder_param(&snapshot, k),
        &Default::default(),
        &[],
    );
    let refused = refusals.len();
    problems.extend(refusals);
    Ok(Served {
        snapshot,
        problems,
        accepted,
        refused,
    })
}

/// The version of a folder's policy to serve, with its name: the policy itself, or (the API
/// server would refuse to create it) its `last_good` version, or none; each refusal is a
/// problem (`InvalidPolicy`) in `refusals`. A policy that does not read as one is an error.
fn accept_policy(
    (file, document): (&std::path::Path, usize),
    object: Arc<Json>,
    version: u16,
    last_good: &BTreeMap<String, Arc<Json>>,
    refusals: &mut Vec<Problem>,
) -> Result<Option<(String, Arc<Json>)>, LoadError> {
    let policy = Policy::deserialize(&*object).map_err(|e| LoadError::Object {
        file: file.to_path_buf(),
        document,
        source: ObjectError::Malformed(e),
    })?;
    let errors = crate::policy::compile::creation_errors(&policy, version);
    let name = policy.metadata.name;
    if errors.is_empty() {
        return Ok(Some((name, object)));
    }
    let kept = last_good.get(&name).cloned();
    let served = if kept.is_some() {
        "its last good version is served"
    } else {
        "not served (no earlier version was loaded)"
    };
    refusals.push(problems::problem(
        &object,
        "InvalidPolicy",
        format!(
            "refused as the API server would refuse it ({}): {errors}; {served}",
            file.display()
        ),
    ));
    Ok(kept.map(|previous| (name, previous)))
}

/// A folder's policies and bindings, for the cluster source
/// (`--source kubernetes --policies DIR`).
pub struct FolderPolicies {
    /// Validating and mutating policies.
    pub policies: Vec<Arc<Json>>,
    /// Their bindings.
    pub bindings: Vec<Arc<Json>>,
    /// Policies refused as the API server would refuse to create them (`InvalidPolicy`).
    pub refusals: Vec<Problem>,
    /// The validating policy objects served, by name: the next load's last good versions.
    pub accepted: BTreeMap<String, Arc<Json>>,
    /// The folder's other objects, which are not used (namespaces, params and RBAC come from
    /// the cluster): `file: kind name` of each, to warn about.
    pub ignored: Vec<String>,
}

/// The policies and bindings of a folder's objects, checked as [`build_for_serving`] checks
/// them (a refused policy's `last_good` version is served, or none; a binding that does not
/// read as one is an error; an invalid one is served). MutatingAdmissionPolicies and their
/// bindings are taken too; a mutating policy the API server would refuse is left out
/// (`InvalidPolicy`). Other objects are [`FolderPolicies::ignored`].
pub fn folder_policies(
    objects: Vec<Loaded>,
    version: u16,
    last_good: &BTreeMap<String, Arc<Json>>,
) -> Result<FolderPolicies, LoadError> {
    let mut out = FolderPolicies {
        policies: Vec::new(),
        bindings: Vec::new(),
        refusals: Vec::new(),
        accepted: BTreeMap::new(),
        ignored: Vec::new(),
    };
    for o in objects {
        let Loaded {
            file,
            document,
            object,
            field_errors,
        } = o;
        if !field_errors.is_empty() {
            return Err(LoadError::Object {
                source: ObjectError::strict_decoding(&object, field_errors),
                file,
                document,
            });
        }
        let object = Arc::new(object);
        let is_vap =
            crate::model::API_VERSIONS.contains(&object["apiVersion"].as_str().unwrap_or(""));
        match (is_vap, object["kind"].as_str()) {
            (true, Some("ValidatingAdmissionPolicy")) => {
                if let Some((name, served)) = accept_policy(
                    (&file, document),
                    object,
                    version,
                    last_good,
                    &mut out.refusals,
                )? {
                    out.accepted.insert(name, served.clone());
                    out.policies.push(served);
                }
            }
            (true, Some("ValidatingAdmissionPolicyBinding")) => {
                Binding::deserialize(&*object).map_err(|e| LoadError::Object {
                    file: file.clone(),
                    document,
                    source: ObjectError::Malformed(e),
                })?;
                out.bindings.push(object);
            }
            (true, Some("MutatingAdmissionPolicy")) => {
                let policy =
                    MutatingPolicy::deserialize(&*object).map_err(|e| LoadError::Object {
                        file: file.clone(),
                        document,
                        source: ObjectError::Malformed(e),
                    })?;
                // Refused as the API server refuses it, and left out (as the snapshot of a
                // folder leaves it out: `assemble`).
                let errors =
                    crate::policy::compile_mutating::mutating_creation_errors(&policy, version);
                if errors.is_empty() {
                    out.policies.push(object);
                } else {
                    out.refusals.push(problems::problem(
                        &object,
                        "InvalidPolicy",
                        format!(
                            "refused as the API server would refuse it ({}): {errors}; not served",
                            file.display()
                        ),
                    ));
                }
            }
            (true, Some("MutatingAdmissionPolicyBinding")) => {
                MutatingBinding::deserialize(&*object).map_err(|e| LoadError::Object {
                    file: file.clone(),
                    document,
                    source: ObjectError::Malformed(e),
                })?;
                out.bindings.push(object);
            }
            (_, kind) => out.ignored.push(format!(
                "{}: {} {}",
                file.display(),
                kind.unwrap_or("(no kind)"),
                object["metadata"]["name"].as_str().unwrap_or("(no name)")
            )),
        }
    }
    Ok(out)
}

/// Whether the param a binding names is in the folder, and its kind's scope; `None` when
/// nothing is known of the kind (the policy's own problem).
fn folder_param(
    snapshot: &Snapshot,
    key: &problems::ParamKey<'_>,
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
    use crate::source::folder;

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
        let Served {
            snapshot, problems, ..
        } = build_for_serving(
            objects,
            crate::cel::NEWEST_MINOR,
            &CompileCache::default(),
            &BTreeMap::new(),
        )
        .unwrap();
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

    /// `--source kubernetes --policies DIR`: only policies and bindings are taken, other
    /// objects are listed as ignored; a refused policy keeps its last good version; a binding
    /// that does not read as one fails the whole load, naming its file and document.
    #[test]
    fn folder_policies_take_policies_and_bindings_only() {
        let yaml = |expression: &str| {
            format!(
                r#"
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {{name: p}}
spec:
  matchConstraints: {{resourceRules: [{{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}}]}}
  validations: [{{expression: "{expression}"}}]
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {{name: b}}
spec: {{policyName: p, validationActions: [Deny]}}
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: cm, namespace: team}}
---
apiVersion: v1
kind: Namespace
metadata: {{name: team}}
"#
            )
        };
        let load = |text: &str, last_good: &BTreeMap<String, Arc<Json>>| {
            let objects = folder::parse_documents(std::path::Path::new("f.yaml"), text).unwrap();
            folder_policies(objects, 37, last_good)
        };
        let good = load(&yaml("request.name == 'a'"), &BTreeMap::new()).unwrap();
        assert_eq!((good.policies.len(), good.bindings.len()), (1, 1));
        assert!(good.refusals.is_empty());
        assert_eq!(
            good.ignored,
            ["f.yaml: ConfigMap cm", "f.yaml: Namespace team"]
        );
        let bad = load(&yaml("request.namex == 'a'"), &good.accepted).unwrap();
        assert_eq!(bad.policies, good.policies, "the last good version");
        assert_eq!(bad.refusals.len(), 1);
        assert_eq!(bad.refusals[0].reason, "InvalidPolicy");
        let none = load(&yaml("request.namex == 'a'"), &BTreeMap::new()).unwrap();
        assert!(none.policies.is_empty() && none.accepted.is_empty());
        let malformed = yaml("true").replace(
            "spec: {policyName: p, validationActions: [Deny]}",
            "spec: {policyName: [p]}",
        );
        let e = load(&malformed, &BTreeMap::new()).err().expect("refused");
        assert!(e.to_string().starts_with("f.yaml (document 2): "), "{e}");
    }

    /// `--source kubernetes --policies DIR` with MutatingAdmissionPolicies: their bindings are
    /// handed over (not ignored); a mutating policy the API server would refuse is left out,
    /// reported as `InvalidPolicy`; one that does not read as one fails the load.
    #[test]
    fn folder_policies_take_mutating_policies_and_bindings() {
        let yaml = |expression: &str| {
            format!(
                r#"
apiVersion: admissionregistration.k8s.io/v1alpha1
kind: MutatingAdmissionPolicy
metadata: {{name: m}}
spec:
  matchConstraints: {{resourceRules: [{{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}}]}}
  reinvocationPolicy: Never
  mutations: [{{patchType: ApplyConfiguration, applyConfiguration: {{expression: "{expression}"}}}}]
---
apiVersion: admissionregistration.k8s.io/v1alpha1
kind: MutatingAdmissionPolicyBinding
metadata: {{name: m}}
spec: {{policyName: m}}
"#
            )
        };
        let load = |text: &str| {
            let objects = folder::parse_documents(std::path::Path::new("f.yaml"), text).unwrap();
            folder_policies(objects, 37, &BTreeMap::new())
        };
        let refused = load(&yaml("object.nosuch(")).unwrap();
        assert!(refused.ignored.is_empty(), "{:?}", refused.ignored);
        assert_eq!((refused.policies.len(), refused.bindings.len()), (0, 1));
        assert_eq!(refused.refusals.len(), 1);
        assert_eq!(refused.refusals[0].reason, "InvalidPolicy");
        assert_eq!(refused.refusals[0].kind, "MutatingAdmissionPolicy");
        assert!(
            refused.refusals[0]
                .message
                .contains("spec.mutations[0].applyConfiguration.expression"),
            "{}",
            refused.refusals[0].message
        );
        let malformed = yaml("x").replace("mutations: [", "mutations: 3\nx: [");
        let e = load(&malformed).err().expect("refused");
        assert!(e.to_string().starts_with("f.yaml (document 1): "), "{e}");
    }

    /// A policy the API server would refuse to create (`request.namex` does not compile; a
    /// library newer than the creation-time environment) is not served: its last good version
    /// is, or none; each refusal is a problem saying so.
    #[test]
    fn refused_policies_keep_their_last_good_version() {
        let policy = |name: &str, expression: &str| {
            format!(
                r#"
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {{name: {name}}}
spec:
  matchConstraints: {{resourceRules: [{{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}}]}}
  validations: [{{expression: "{expression}"}}]
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {{name: {name}}}
spec: {{policyName: {name}, validationActions: [Deny]}}
"#
            )
        };
        let load = |yaml: &str, version: u16, last_good: &BTreeMap<String, Arc<Json>>| {
            let objects = folder::parse_documents(std::path::Path::new("f.yaml"), yaml).unwrap();
            build_for_serving(objects, version, &CompileCache::default(), last_good).unwrap()
        };
        let good = load(&policy("p", "request.name == 'a'"), 37, &BTreeMap::new());
        assert_eq!((good.snapshot.policies.len(), good.refused), (1, 0));

        // An update the API server would refuse: the last good version stays served.
        let bad = load(&policy("p", "request.namex == 'a'"), 37, &good.accepted);
        assert_eq!(bad.refused, 1);
        assert_eq!(bad.snapshot.policies.len(), 1);
        assert!(bad.snapshot.policies[0].policy.validations[0]
            .program
            .is_ok());
        assert_eq!(bad.accepted["p"], good.accepted["p"]);
        let refusal = bad
            .problems
            .iter()
            .find(|p| p.reason == "InvalidPolicy")
            .expect("a problem");
        assert!(
            refusal.message.contains(
                "spec.validations[0].expression: Invalid value: \"request.namex == 'a'\": compilation failed: ERROR: <input>:1:8: undefined field 'namex'"
            ) && refusal.message.contains("its last good version is served"),
            "{}",
            refusal.message
        );

        // Without an earlier version nothing is served, and the binding names no policy.
        let first = load(&policy("p", "request.namex == 'a'"), 37, &BTreeMap::new());
        assert_eq!((first.snapshot.policies.len(), first.refused), (0, 1));
        assert!(first.accepted.is_empty());
        let reasons: Vec<&str> = first.problems.iter().map(|p| p.reason).collect();
        assert_eq!(reasons, ["PolicyNotFound", "InvalidPolicy"]);

        // isIP is in the 1.30 libraries: a 1.30 API server stores it (the stored-expressions
        // environment) but refuses it in a new policy; a 1.31 API server accepts it.
        let ip = policy("ip", "isIP('1.2.3.4')");
        assert_eq!(load(&ip, 30, &BTreeMap::new()).refused, 1);
        assert_eq!(load(&ip, 31, &BTreeMap::new()).refused, 0);
    }
}
