//! Params: which param objects a binding evaluates its policy with (§3.2, §3.3), or why it
//! cannot (a binding configuration error).

use std::sync::Arc;

use serde_json::Value as Json;

use super::activation::RequestNamespaces;
use super::request::Request;
use crate::matching::Match;
use crate::policy::compile::CompiledPolicy;
use crate::policy::snapshot::{group_of, CompiledBinding, ParamObject, Scope, Snapshot};

/// `failed to find resource referenced by paramKind` when nothing is known of the kind.
pub(super) fn param_kind_error(snapshot: &Snapshot, policy: &CompiledPolicy) -> Option<String> {
    let pk = policy.param_kind.as_ref()?;
    let group = group_of(&pk.api_version);
    if snapshot
        .kinds
        .contains_key(&(group.to_string(), pk.kind.clone()))
    {
        return None;
    }
    let version = pk.api_version.rsplit('/').next().unwrap_or("");
    Some(format!(
        "failed to find resource referenced by paramKind: '{group}/{version}, Kind={}'",
        pk.kind
    ))
}

/// The params a binding evaluates its policy with; `None` when the binding does not match the
/// request; an error for a binding configuration error (§2.7, §3.3, §7).
pub(super) fn binding_params(
    snapshot: &Snapshot,
    namespaces: &RequestNamespaces<'_>,
    policy: &CompiledPolicy,
    binding: &CompiledBinding,
    req: &Request<'_>,
) -> Result<Option<Vec<Option<Arc<Json>>>>, String> {
    if let Some(m) = &binding.matcher {
        match m.matches(&req.attributes, namespaces) {
            Match::No => return Ok(None),
            Match::Yes => {}
            Match::Error(e) => return Err(e),
        }
    }
    if let Some(e) = &binding.invalid {
        return Err(e.clone());
    }
    collect_params(snapshot, policy, binding, req).map(Some)
}

/// The params to evaluate with (§3.2, §3.3): `[None]` for a null param.
fn collect_params(
    snapshot: &Snapshot,
    policy: &CompiledPolicy,
    binding: &CompiledBinding,
    req: &Request<'_>,
) -> Result<Vec<Option<Arc<Json>>>, String> {
    let (Some(pk), Some(pr)) = (&policy.param_kind, &binding.param_ref) else {
        return Ok(vec![None]);
    };
    let key = (group_of(&pk.api_version).to_string(), pk.kind.clone());
    let scope = snapshot
        .kinds
        .get(&key)
        .copied()
        .unwrap_or(Scope::Namespaced);
    let namespace = match scope {
        Scope::Namespaced => {
            let ns = pr
                .namespace
                .clone()
                .filter(|n| !n.is_empty())
                .unwrap_or_else(|| req.attributes.namespace.clone());
            if ns.is_empty() {
                return Err("cannot use namespaced paramRef in policy binding that matches cluster-scoped resources".into());
            }
            Some(ns)
        }
        Scope::Cluster => None,
    };
    if snapshot.unsynced_params.contains(&key) {
        return Err(format!(
            "paramKind kind `&ParamKind{{APIVersion:{},Kind:{},}}` not yet synced to use for admission",
            pk.api_version, pk.kind
        ));
    }
    if scope == Scope::Cluster && pr.namespace.as_deref().is_some_and(|n| !n.is_empty()) {
        return Err(
            "paramRef.namespace must not be provided for a cluster-scoped `paramKind`".into(),
        );
    }
    let candidates: Vec<&ParamObject> = snapshot
        .params
        .get(&key)
        .map(|v| {
            v.iter()
                .filter(|o| namespace.as_ref().is_none_or(|ns| o.namespace == *ns))
                .collect()
        })
        .unwrap_or_default();
    let found: Vec<Option<Arc<Json>>> = match (&pr.name, &pr.selector) {
        (Some(_), Some(_)) => {
            return Err("paramRef.name and paramRef.selector are mutually exclusive".into())
        }
        (Some(name), None) => candidates
            .iter()
            .filter(|o| o.name == *name)
            .map(|o| Some(o.object.clone()))
            .collect(),
        (None, Some(sel)) => {
            let sel = crate::matching::selector::Selector::compile(sel)?;
            candidates
                .iter()
                .filter(|o| sel.matches(&o.labels))
                .map(|o| Some(o.object.clone()))
                .collect()
        }
        (None, None) => return Err("one of name or selector must be provided".into()),
    };
    if found.is_empty() && pr.parameter_not_found_action.as_deref() == Some("Deny") {
        return Err(
            "no params found for policy binding with `Deny` parameterNotFoundAction".into(),
        );
    }
    Ok(found)
}
