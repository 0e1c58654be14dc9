//! Which param objects a binding can select, so that a change to any other object of a
//! watched param kind rebuilds nothing: with ConfigMaps as params, watched cluster-wide,
//! every ConfigMap change in the cluster would otherwise rebuild the snapshot.
//!
//! The rule, following how the API server resolves a binding's paramRef
//! (`k8s.io/apiserver/pkg/admission/plugin/policy/generic`): an object of a policy's
//! paramKind is visible to a binding of that policy when the binding's `paramRef.name` is its
//! name, or its `paramRef.selector` matches its labels; and it is in `paramRef.namespace`
//! when that is set (else in any namespace: the request's own namespace is used, and a
//! request may come from any). A selector that does not compile counts as matching
//! everything: too many rebuilds, never a missed one.
//!
//! A rebuild is due when the visible objects change: the fingerprint covers each visible
//! object's namespace, name and resourceVersion, so that creating, changing or deleting one
//! changes it, and so does a label change that makes an object visible or no longer visible.
//! Policies and bindings changing rebuild anyway (and recompute this).

use std::collections::BTreeMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Arc;

use serde_json::Value as Json;

use crate::matching::selector::{labels_of, Selector};
use crate::model::ParamRef;

/// What one binding's paramRef can select.
#[derive(Debug)]
struct Reference {
    /// `None`: any namespace.
    namespace: Option<String>,
    name: Option<String>,
    /// `Some(None)`: a selector that does not compile (matches everything).
    selector: Option<Option<Selector>>,
}

impl Reference {
    fn selects(&self, object: &Json) -> bool {
        let meta = &object["metadata"];
        let in_namespace = self
            .namespace
            .as_deref()
            .is_none_or(|ns| meta["namespace"].as_str().unwrap_or("") == ns);
        if !in_namespace {
            return false;
        }
        let named = self
            .name
            .as_deref()
            .is_some_and(|n| meta["name"].as_str() == Some(n));
        let selected = match &self.selector {
            None => false,
            Some(None) => true,
            Some(Some(s)) => labels_of(object).is_some_and(|labels| s.matches(&labels)),
        };
        named || selected
    }
}

/// The paramRefs of the bindings, by param kind (`apiVersion`, `kind`) of their policy.
#[derive(Debug, Default)]
pub struct ParamRefs {
    kinds: BTreeMap<(String, String), Vec<Reference>>,
}

impl ParamRefs {
    pub fn new(policies: &[Arc<Json>], bindings: &[Arc<Json>]) -> ParamRefs {
        // By the policy's kind and name: a validating and a mutating policy may share a name.
        let kinds_of: BTreeMap<(&str, &str), (String, String)> = policies
            .iter()
            .filter_map(|p| {
                let pk = &p["spec"]["paramKind"];
                let kind = (
                    pk["apiVersion"].as_str()?.to_string(),
                    pk["kind"].as_str()?.to_string(),
                );
                let policy_kind = p["kind"].as_str().unwrap_or("");
                Some(((policy_kind, p["metadata"]["name"].as_str()?), kind))
            })
            .collect();
        let mut kinds: BTreeMap<(String, String), Vec<Reference>> = BTreeMap::new();
        for b in bindings {
            let spec = &b["spec"];
            let policy_kind = crate::source::problems::policy_kind_of(b);
            let Some(kind) = spec["policyName"]
                .as_str()
                .and_then(|p| kinds_of.get(&(policy_kind, p)))
            else {
                continue;
            };
            let Ok(param_ref) = serde_json::from_value::<ParamRef>(spec["paramRef"].clone()) else {
                continue;
            };
            let selector = param_ref
                .selector
                .as_ref()
                .map(|s| Selector::compile(s).ok());
            kinds.entry(kind.clone()).or_default().push(Reference {
                namespace: param_ref.namespace.filter(|ns| !ns.is_empty()),
                name: param_ref.name.filter(|n| !n.is_empty()),
                selector,
            });
        }
        ParamRefs { kinds }
    }

    /// A fingerprint of the objects of `kind` (`apiVersion`, `kind`) some binding can
    /// select, among `objects`: it moves when one of them changes.
    pub fn fingerprint<'a>(
        &self,
        kind: &(String, String),
        objects: impl IntoIterator<Item = &'a Arc<Json>>,
    ) -> u64 {
        let mut hasher = DefaultHasher::new();
        let references = self.kinds.get(kind).map_or(&[][..], Vec::as_slice);
        for o in objects {
            if !references.iter().any(|r| r.selects(o)) {
                continue;
            }
            let meta = &o["metadata"];
            meta["namespace"].as_str().hash(&mut hasher);
            meta["name"].as_str().hash(&mut hasher);
            match meta["resourceVersion"].as_str() {
                Some(rv) => rv.hash(&mut hasher),
                // Without a resourceVersion (not from an API server): the whole object.
                None => o.to_string().hash(&mut hasher),
            }
        }
        hasher.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cm(ns: &str, name: &str, rv: &str, labels: Json) -> Arc<Json> {
        Arc::new(
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"namespace": ns, "name": name, "resourceVersion": rv, "labels": labels}}),
        )
    }

    fn refs() -> ParamRefs {
        let policy = |name: &str| {
            Arc::new(
                json!({"metadata": {"name": name}, "spec": {"paramKind": {"apiVersion": "v1", "kind": "ConfigMap"}}}),
            )
        };
        let binding = |policy: &str, param_ref: Json| {
            Arc::new(json!({"spec": {"policyName": policy, "paramRef": param_ref}}))
        };
        ParamRefs::new(
            &[policy("by-name"), policy("by-selector")],
            &[
                binding("by-name", json!({"name": "limits"})),
                binding(
                    "by-selector",
                    json!({"namespace": "team", "selector": {"matchLabels": {"role": "param"}}}),
                ),
                // Its policy has no paramKind: selects nothing.
                binding("other", json!({"name": "x"})),
            ],
        )
    }

    #[test]
    fn only_objects_a_binding_can_select_count() {
        let refs = refs();
        let kind = ("v1".to_string(), "ConfigMap".to_string());
        let base = vec![
            cm("a", "limits", "1", json!({})),
            cm("team", "tuned", "2", json!({"role": "param"})),
        ];
        let before = refs.fingerprint(&kind, &base);
        // Unrelated objects, and changes to them, change nothing.
        let mut more = base.clone();
        more.push(cm("team", "unrelated", "3", json!({})));
        more.push(cm("other", "tuned", "4", json!({"role": "param"})));
        more.push(cm("b", "x", "5", json!({})));
        assert_eq!(refs.fingerprint(&kind, &more), before);
        // A named param in any namespace counts.
        more.push(cm("b", "limits", "6", json!({})));
        let with_b = refs.fingerprint(&kind, &more);
        assert_ne!(with_b, before);
        // A label change that makes an object selected counts.
        more[2] = cm("team", "unrelated", "7", json!({"role": "param"}));
        assert_ne!(refs.fingerprint(&kind, &more), with_b);
        // A change to a visible object counts.
        let mut changed = base.clone();
        changed[0] = cm("a", "limits", "8", json!({}));
        assert_ne!(refs.fingerprint(&kind, &changed), before);
        // Another kind: nothing selected.
        let other = ("v1".to_string(), "Secret".to_string());
        assert_eq!(
            refs.fingerprint(&other, &base),
            refs.fingerprint(&other, &more)
        );
    }
}
