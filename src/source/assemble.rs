//! Snapshot assembly shared by both sources: objects read as policies, bindings, or the
//! namespaces, params and RBAC objects they use, each policy and binding checked as the API
//! server checks it (its validation, `pkg/apis/admissionregistration/validation`, and for a
//! new policy the creation-time CEL environment, `k8s.io/apiserver/pkg/cel/environment`'s
//! NewExpressions, against StoredExpressions for stored objects). Names no Kubernetes
//! client: the folder source builds on it, the cluster source adds its watched objects here.

use serde::Deserialize;
use serde_json::Value as Json;

use super::error::ObjectError;
use super::folder::{LoadError, Loaded};
use crate::model::{Binding, MutatingBinding, MutatingPolicy, Policy};
use crate::policy::snapshot::{CompileCache, Snapshot, SnapshotBuilder};
use crate::policy::validate::{validate_binding, FieldErrors};

/// Builds a snapshot from loaded objects; an object that claims to be a policy or binding
/// but does not read as one is an error naming its file and document. With `strict`, so is
/// one the API server would refuse to create (its validation, and for a policy every
/// expression in the creation-time environment); otherwise that becomes a configuration error
/// at admission, under the policy's failurePolicy.
pub fn snapshot(objects: Vec<Loaded>, version: u16, strict: bool) -> Result<Snapshot, LoadError> {
    snapshot_cached(objects, version, strict, &CompileCache::default())
}

/// [`snapshot`] of objects as an API server stores them: each passed the validation (checked
/// here), but a policy stored by an earlier API server may hold an expression that no longer
/// compiles, a configuration error at admission under its failurePolicy (the spec's §4.1).
pub fn snapshot_stored(objects: Vec<Loaded>, version: u16) -> Result<Snapshot, LoadError> {
    snapshot_checked(objects, version, Check::Stored, &CompileCache::default())
}

/// What is checked of a policy or binding as it is added.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Check {
    /// Nothing: objects from the API server passed its checks; what fails anyway becomes a
    /// configuration error at admission.
    Nothing,
    /// The API server's validation of the object.
    Stored,
    /// What the API server of Kubernetes 1.N checks when the object is created: the
    /// validation, and for a policy every expression in the creation-time environment.
    Created(u16),
}

/// [`snapshot`], reusing the compiled policies of `cache` (a policy is compiled once per
/// version of its object).
pub fn snapshot_cached(
    objects: Vec<Loaded>,
    version: u16,
    strict: bool,
    cache: &CompileCache,
) -> Result<Snapshot, LoadError> {
    let check = if strict {
        Check::Created(version)
    } else {
        Check::Nothing
    };
    snapshot_checked(objects, version, check, cache)
}

/// The snapshot of `objects`, each policy and binding refused if it fails `check`.
fn snapshot_checked(
    objects: Vec<Loaded>,
    version: u16,
    check: Check,
    cache: &CompileCache,
) -> Result<Snapshot, LoadError> {
    let mut b = SnapshotBuilder::new();
    for o in objects {
        add_loaded(&mut b, o, check)?;
    }
    Ok(b.build_cached(version, cache))
}

/// Adds one object to a snapshot under construction: an object with unknown or duplicate
/// fields ([`Loaded::field_errors`]) is refused whatever `check` is; a policy or binding is
/// read and refused if it fails `check`; anything else is a namespace, param or RBAC object.
pub fn add_loaded(b: &mut SnapshotBuilder, o: Loaded, check: Check) -> Result<(), LoadError> {
    // Strict field validation comes first, as the API server decodes before it validates.
    if !o.field_errors.is_empty() {
        return Err(LoadError::Object {
            source: ObjectError::strict_decoding(&o.object, o.field_errors),
            file: o.file,
            document: o.document,
        });
    }
    add_shared(b, std::sync::Arc::new(o.object), check).map_err(|source| LoadError::Object {
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
    check: Check,
) -> Result<(), ObjectError> {
    let api_version = object["apiVersion"].as_str().unwrap_or("");
    let is_vap = crate::model::API_VERSIONS.contains(&api_version);
    let invalid = |errors: FieldErrors| ObjectError::Invalid {
        kind: object["kind"].as_str().unwrap_or("object").to_string(),
        name: object["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
        errors,
    };
    match (is_vap, object["kind"].as_str()) {
        (true, Some("ValidatingAdmissionPolicy")) => {
            let p = Policy::deserialize(&*object).map_err(ObjectError::Malformed)?;
            let errors = match check {
                Check::Nothing => FieldErrors::default(),
                Check::Stored => crate::policy::validate::validate_policy(&p),
                Check::Created(version) => crate::policy::compile::creation_errors(&p, version),
            };
            if !errors.is_empty() {
                return Err(invalid(errors));
            }
            b.add_policy(p);
        }
        (true, Some("ValidatingAdmissionPolicyBinding")) => {
            let binding = Binding::deserialize(&*object).map_err(ObjectError::Malformed)?;
            if check != Check::Nothing {
                let errors = validate_binding(&binding);
                if !errors.is_empty() {
                    return Err(invalid(errors));
                }
            }
            b.add_binding(binding);
        }
        (true, Some("MutatingAdmissionPolicy")) => {
            let p = MutatingPolicy::deserialize(&*object).map_err(ObjectError::Malformed)?;
            let errors = match check {
                Check::Nothing => FieldErrors::default(),
                Check::Stored => crate::policy::validate_mutating::validate_mutating_policy(&p),
                Check::Created(version) => {
                    crate::policy::compile_mutating::mutating_creation_errors(&p, version)
                }
            };
            if errors.is_empty() {
                b.add_mutating_policy(p);
            } else {
                // Left out, as `kubectl apply` leaves out what the API server refuses: the
                // requests are answered as that cluster would answer them.
                b.refuse(invalid(errors).to_string());
            }
        }
        (true, Some("MutatingAdmissionPolicyBinding")) => {
            let binding = MutatingBinding::deserialize(&*object).map_err(ObjectError::Malformed)?;
            let errors = match check {
                Check::Nothing => FieldErrors::default(),
                _ => crate::policy::validate_mutating::validate_mutating_binding(&binding),
            };
            if errors.is_empty() {
                b.add_mutating_binding(binding);
            } else {
                b.refuse(invalid(errors).to_string());
            }
        }
        _ => b.add_object(object),
    }
    Ok(())
}
