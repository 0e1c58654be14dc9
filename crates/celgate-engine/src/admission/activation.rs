//! Activation: the values each expression group of a policy sees for one request and param,
//! in the slot layout its environment was compiled with, and the namespace they read.

use std::sync::Arc;

use serde_json::Value as Json;

use super::context::Services;
use super::request::Request;
use super::validator::GroupValues;
use super::versioned::View;
use crate::policy::compile::{CompiledPolicy, SlotLayout};
use crate::policy::snapshot::{namespace_view, NamespaceEntry, Snapshot};
use celgate_cel::k8s::authz::{AuthorizerValue, ResourceCheck};
use celgate_cel::Value;

/// The snapshot's namespaces, plus the request's own namespace read from the cluster when the
/// snapshot does not have it yet.
pub(super) struct RequestNamespaces<'s> {
    snapshot: &'s Snapshot,
    fetched: Option<Arc<NamespaceEntry>>,
}

impl<'s> RequestNamespaces<'s> {
    pub(super) fn new(snapshot: &'s Snapshot, services: &Services, req: &Request<'_>) -> Self {
        let ns = &req.attributes.namespace;
        let fetched = match &services.namespace_lookup {
            Some(lookup) if !ns.is_empty() && !snapshot.namespaces.contains_key(ns) => {
                lookup.entry(ns)
            }
            _ => None,
        };
        RequestNamespaces { snapshot, fetched }
    }

    fn get(&self, name: &str) -> Option<&NamespaceEntry> {
        self.snapshot.namespaces.get(name).or_else(|| {
            self.fetched
                .as_deref()
                .filter(|e| e.object["metadata"]["name"] == name)
        })
    }
}

impl crate::matching::Namespaces for RequestNamespaces<'_> {
    fn labels(&self, name: &str) -> Option<&std::collections::BTreeMap<String, String>> {
        self.get(name).map(|e| &e.labels)
    }
}

/// `namespaceObject`: the request's namespace with the fields Kubernetes copies, or null for
/// cluster-scoped requests and for Namespace requests themselves. A namespace missing from the
/// snapshot (an offline folder without its Namespace object) is taken as a bare namespace
/// with its `kubernetes.io/metadata.name` label, rather than failing every request in it.
pub(super) fn namespace_object(
    namespaces: &RequestNamespaces<'_>,
    req: &Request<'_>,
) -> Option<Arc<Json>> {
    let is_namespace_kind = req.kind == "Namespace" && req.attributes.group.is_empty();
    let ns = &req.attributes.namespace;
    if ns.is_empty() || is_namespace_kind {
        return None;
    }
    Some(namespaces.get(ns).map(|n| n.view.clone()).unwrap_or_else(|| {
        Arc::new(namespace_view(&serde_json::json!({"metadata": {"name": ns, "labels": {"kubernetes.io/metadata.name": ns}}})))
    }))
}

/// The values of one expression group, in its layout: the VAP variables; `variables` itself
/// is lazy (computed on first read), so its slot stays null.
fn fill<'a>(
    layout: SlotLayout,
    view: &View<'a>,
    request: &Value<'a>,
    ns: Value<'a>,
    params: Value<'a>,
    authz: Option<(Value<'a>, Value<'a>)>,
) -> Vec<Value<'a>> {
    let slots = layout.slots;
    let mut v = vec![Value::Null; layout.len];
    let mut set = |slot: usize, value: Value<'a>| {
        // The layout's length comes from the same environment as its slots.
        if let Some(s) = v.get_mut(slot) {
            *s = value;
        }
    };
    set(slots.object, view.object.clone());
    set(slots.old_object, view.old_object.clone());
    set(slots.request, request.clone());
    set(slots.namespace_object, ns);
    if let Some(p) = slots.params {
        set(p, params);
    }
    if let (Some(a), Some(r), Some((av, rv))) = (slots.authorizer, slots.request_resource, authz) {
        set(a, av);
        set(r, rv);
    }
    v
}

/// `authorizer` and `authorizer.requestResource` of one request: made once per request, then
/// shared (not copied) by the values of every binding and param.
#[derive(Clone)]
pub(super) struct Authz {
    authorizer: Value<'static>,
    request_resource: Value<'static>,
}

impl Authz {
    pub(super) fn new(authz: AuthorizerValue, preset: ResourceCheck) -> Authz {
        Authz {
            authorizer: Value::opaque(authz),
            request_resource: Value::opaque(preset),
        }
    }
}

/// The values of each expression group for one param.
pub(super) fn bind<'a>(
    policy: &CompiledPolicy,
    view: &View<'a>,
    namespace_object: &'a Option<Arc<Json>>,
    param: Option<&'a Json>,
    authz: &Authz,
) -> GroupValues<'a> {
    let s = &policy.slots;
    let ns = namespace_object
        .as_deref()
        .map_or(Value::Null, Value::from_json);
    let params = param.map_or(Value::Null, Value::from_json);
    let authorizer = || Some((authz.authorizer.clone(), authz.request_resource.clone()));
    // A group the policy does not have is never evaluated: its values stay unbuilt.
    let has_messages = policy
        .validations
        .iter()
        .any(|v| v.message_program.is_some());
    GroupValues {
        condition: if policy.match_conditions.is_empty() {
            Vec::new()
        } else {
            fill(
                s.condition,
                view,
                &view.condition_request,
                Value::Null,
                params.clone(),
                authorizer(),
            )
        },
        validation: fill(
            s.validation,
            view,
            &view.request,
            ns.clone(),
            params.clone(),
            authorizer(),
        ),
        message: if has_messages {
            fill(
                s.message,
                view,
                &view.request,
                ns.clone(),
                params.clone(),
                None,
            )
        } else {
            Vec::new()
        },
        audit: if policy.audit_annotations.is_empty() {
            Vec::new()
        } else {
            fill(s.validation, view, &view.request, ns, params, None)
        },
    }
}
