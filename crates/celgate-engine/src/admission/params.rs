//! Params: which param objects a binding evaluates its policy with (§3.2, §3.3), or why it
//! cannot (a binding configuration error).

use std::sync::Arc;

use serde_json::Value as Json;

use super::activation::RequestNamespaces;
use super::error::ConfigError;
use super::request::Request;
use crate::matching::{Match, MatchError};
use crate::policy::compile::CompiledPolicy;
use crate::policy::snapshot::{group_of, CompiledBinding, Scope, Snapshot};

/// `failed to find resource referenced by paramKind` when nothing is known of the kind.
pub(super) fn param_kind_error(
    snapshot: &Snapshot,
    policy: &CompiledPolicy,
) -> Option<ConfigError> {
    let pk = policy.param_kind.as_ref()?;
    let group = group_of(&pk.api_version);
    if snapshot
        .kinds
        .contains_key(&(group.to_string(), pk.kind.clone()))
    {
        return None;
    }
    let version = pk.api_version.rsplit('/').next().unwrap_or("");
    Some(ConfigError::ParamKindNotFound {
        group: group.to_string(),
        version: version.to_string(),
        kind: pk.kind.clone(),
    })
}

/// The params a binding evaluates its policy with; `None` when the binding does not match the
/// request; an error for a binding configuration error (§2.7, §3.3, §7).
pub(super) fn binding_params(
    snapshot: &Snapshot,
    namespaces: &RequestNamespaces<'_>,
    policy: &CompiledPolicy,
    binding: &CompiledBinding,
    req: &Request<'_>,
    equivalents: crate::matching::registry::Equivalents<'_>,
) -> Result<Option<Vec<Option<Arc<Json>>>>, ConfigError> {
    if let Some(m) = &binding.matcher {
        // The binding's own matchPolicy; which resource it matched as is discarded (§2.7).
        match m
            .matches_resource(&req.attributes, namespaces, equivalents)
            .0
        {
            Match::No => return Ok(None),
            Match::Yes => {}
            Match::Error(e) => return Err(e.into()),
        }
    }
    if let Some(e) = &binding.invalid {
        return Err(ConfigError::Invalid(e.clone()));
    }
    collect_params(snapshot, policy, binding, req).map(Some)
}

/// The params to evaluate with (§3.2, §3.3): `[None]` for a null param.
fn collect_params(
    snapshot: &Snapshot,
    policy: &CompiledPolicy,
    binding: &CompiledBinding,
    req: &Request<'_>,
) -> Result<Vec<Option<Arc<Json>>>, ConfigError> {
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
                .as_deref()
                .filter(|n| !n.is_empty())
                .unwrap_or(&req.attributes.namespace);
            if ns.is_empty() {
                return Err(ConfigError::NamespacedParamForClusterScoped);
            }
            Some(ns)
        }
        Scope::Cluster => None,
    };
    if snapshot.unsynced_params.contains(&key) {
        return Err(ConfigError::ParamKindNotSynced {
            api_version: pk.api_version.clone(),
            kind: pk.kind.clone(),
        });
    }
    if scope == Scope::Cluster && pr.namespace.as_deref().is_some_and(|n| !n.is_empty()) {
        return Err(ConfigError::NamespaceForClusterScopedParam);
    }
    // Borrowed, not collected: the request path allocates only the params it returns.
    let candidates = || {
        snapshot
            .params
            .get(&key)
            .into_iter()
            .flatten()
            .filter(|o| namespace.is_none_or(|ns| o.namespace == ns))
    };
    let found: Vec<Option<Arc<Json>>> = match (&pr.name, &pr.selector) {
        (Some(_), Some(_)) => return Err(ConfigError::NameAndSelector),
        (Some(name), None) => candidates()
            .filter(|o| o.name == *name)
            .map(|o| Some(o.object.clone()))
            .collect(),
        (None, Some(_)) => {
            // Compiled with the binding (`CompiledBinding::param_selector`).
            let sel = match &binding.param_selector {
                Some(Ok(sel)) => sel,
                Some(Err(e)) => return Err(ConfigError::Match(MatchError::Selector(e.clone()))),
                None => return Err(ConfigError::NoNameOrSelector),
            };
            candidates()
                .filter(|o| sel.matches(&o.labels))
                .map(|o| Some(o.object.clone()))
                .collect()
        }
        (None, None) => return Err(ConfigError::NoNameOrSelector),
    };
    if found.is_empty() && pr.parameter_not_found_action.as_deref() == Some("Deny") {
        return Err(ConfigError::NoParams);
    }
    Ok(found)
}
