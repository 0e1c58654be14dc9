//! An immutable snapshot of everything admission reads: compiled policies with their
//! bindings, namespaces, param objects and the scope of their kinds, and RBAC objects for the
//! offline authorizer. Built once per change; requests share it without locks. Pure data: the
//! live services an evaluation may call are passed to [`crate::admission::admit`] apart.
//!
//! Order is deterministic where in-tree it is arbitrary (§5.6): policies by name, bindings by
//! name, params by namespace then name.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde_json::Value as Json;

use super::compile::{compile, CompiledPolicy};
use super::compile_mutating::{compile_mutating, CompiledMutatingPolicy};
pub use super::namespace_object::namespace_view;
use crate::matching::registry::{Equivalents, Registry};
use crate::matching::selector::{Selector, SelectorError};
use crate::matching::{Matcher, Namespaces};
use crate::model::{Binding, MutatingBinding, MutatingPolicy, ParamRef, Policy};
use celgate_cel::reads::Reads;

/// A binding's validationActions entry: what a failed validation becomes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValidationAction {
    Deny,
    Warn,
    Audit,
}

#[derive(Debug)]
pub struct CompiledBinding {
    pub name: String,
    pub param_ref: Option<ParamRef>,
    /// `None`: the binding applies to every request its policy matches.
    pub matcher: Option<Matcher>,
    pub actions: Vec<ValidationAction>,
    /// The actions as written (the `validation_failure` record repeats them).
    pub action_names: Vec<String>,
    /// Why the object fails the API server's validation (§7), if it does.
    pub invalid: Option<super::validate::FieldErrors>,
    /// `paramRef.selector`, compiled once here rather than per request (`None` without one).
    pub param_selector: Option<Result<Selector, SelectorError>>,
}

/// `paramRef.selector` compiled, if the binding has one.
fn param_selector(param_ref: Option<&ParamRef>) -> Option<Result<Selector, SelectorError>> {
    param_ref?.selector.as_ref().map(Selector::compile)
}

impl CompiledBinding {
    pub fn compile(b: &Binding) -> CompiledBinding {
        let actions = b
            .spec
            .validation_actions
            .iter()
            .filter_map(|a| match a.as_str() {
                "Deny" => Some(ValidationAction::Deny),
                "Warn" => Some(ValidationAction::Warn),
                "Audit" => Some(ValidationAction::Audit),
                _ => None,
            })
            .collect();
        CompiledBinding {
            name: b.metadata.name.clone(),
            param_ref: b.spec.param_ref.clone(),
            matcher: b.spec.match_resources.as_ref().map(Matcher::compile),
            actions,
            action_names: b.spec.validation_actions.clone(),
            invalid: super::compile::invalid(super::validate::validate_binding(b)),
            param_selector: param_selector(b.spec.param_ref.as_ref()),
        }
    }
}

impl CompiledBinding {
    /// A MutatingAdmissionPolicyBinding: a binding without validationActions.
    pub fn compile_mutating(b: &MutatingBinding) -> CompiledBinding {
        CompiledBinding {
            name: b.metadata.name.clone(),
            param_ref: b.spec.param_ref.clone(),
            matcher: b.spec.match_resources.as_ref().map(Matcher::compile),
            actions: Vec::new(),
            action_names: Vec::new(),
            invalid: super::compile::invalid(super::validate_mutating::validate_mutating_binding(
                b,
            )),
            param_selector: param_selector(b.spec.param_ref.as_ref()),
        }
    }
}

/// A mutating policy and its bindings.
#[derive(Debug)]
pub struct MutatingEntry {
    pub policy: Arc<CompiledMutatingPolicy>,
    pub bindings: Vec<Arc<CompiledBinding>>,
}

/// A policy and its bindings.
#[derive(Debug)]
pub struct PolicyEntry {
    pub policy: Arc<CompiledPolicy>,
    pub bindings: Vec<Arc<CompiledBinding>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    Namespaced,
    Cluster,
}

/// One object that may serve as a param.
#[derive(Debug, Clone)]
pub struct ParamObject {
    pub namespace: String,
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub object: Arc<Json>,
}

#[derive(Debug, Clone)]
pub struct NamespaceEntry {
    pub labels: BTreeMap<String, String>,
    pub object: Arc<Json>,
    /// `namespaceObject` as expressions see it: the fields Kubernetes copies (§6.4).
    pub view: Arc<Json>,
}

impl NamespaceEntry {
    pub fn new(object: Arc<Json>) -> NamespaceEntry {
        NamespaceEntry {
            labels: crate::matching::selector::labels_of(&object).unwrap_or_default(),
            view: Arc::new(namespace_view(&object)),
            object,
        }
    }
}

/// Which policies can match a (group, resource): an index built with the snapshot, so a
/// request pays for the policies that name its resource (or use wildcards), not for all.
#[derive(Debug, Default)]
pub struct PolicyIndex {
    exact: BTreeMap<(String, String), Vec<usize>>,
    /// Rules with resource `*` (or `*/...`) for a group.
    by_group: BTreeMap<String, Vec<usize>>,
    /// Rules with group `*` for a resource.
    by_resource: BTreeMap<String, Vec<usize>>,
    /// Policies that may match anything: group and resource wildcards, no rules, or a
    /// matchConstraints error that every request must report.
    any: Vec<usize>,
}

impl PolicyIndex {
    fn add(&mut self, i: usize, policy: &CompiledPolicy) {
        let Some(rules) = policy
            .matcher
            .as_ref()
            .ok()
            .map(|m| m.rules())
            .filter(|r| !r.is_empty())
        else {
            self.any.push(i);
            return;
        };
        for rule in rules {
            for group in &rule.api_groups {
                for res in &rule.resources {
                    let main = res.split_once('/').map_or(res.as_str(), |(m, _)| m);
                    match (group.as_str(), main) {
                        ("*", "*") => self.any.push(i),
                        ("*", r) => self.by_resource.entry(r.to_string()).or_default().push(i),
                        (g, "*") => self.by_group.entry(g.to_string()).or_default().push(i),
                        (g, r) => self
                            .exact
                            .entry((g.to_string(), r.to_string()))
                            .or_default()
                            .push(i),
                    }
                }
            }
        }
    }

    /// The policies that may match a request on `group`/`resource` or (matchPolicy
    /// Equivalent) on one of its `equivalents` in another group or resource (core and
    /// `events.k8s.io` events), in snapshot order, each once.
    pub(crate) fn candidates_with(
        &self,
        group: &str,
        resource: &str,
        equivalents: Equivalents<'_>,
    ) -> Vec<usize> {
        let mut out = self.candidates(group, resource);
        if let Equivalents::Known { equivalents, .. } = equivalents {
            let mut others = equivalents
                .iter()
                .filter(|e| e.group != group || e.resource != resource)
                .peekable();
            if others.peek().is_some() {
                for e in others {
                    out.extend(self.candidates(&e.group, &e.resource));
                }
                out.sort_unstable();
                out.dedup();
            }
        }
        out
    }

    /// The policies that may match, in snapshot order, each once.
    pub fn candidates(&self, group: &str, resource: &str) -> Vec<usize> {
        let key = (group.to_string(), resource.to_string());
        let mut out: Vec<usize> = self
            .exact
            .get(&key)
            .into_iter()
            .chain(self.by_group.get(group))
            .chain(self.by_resource.get(resource))
            .chain(std::iter::once(&self.any))
            .flatten()
            .copied()
            .collect();
        out.sort_unstable();
        out.dedup();
        out
    }
}

/// Everything admission reads, compiled (built by a [`SnapshotBuilder`]; immutable).
#[derive(Debug, Default)]
pub struct Snapshot {
    /// The policies that have a binding, compiled, by name; each with its bindings by name.
    pub policies: Vec<PolicyEntry>,
    /// The namespaces, by name.
    pub namespaces: BTreeMap<String, NamespaceEntry>,
    /// Param candidates by (API group, kind).
    pub params: BTreeMap<(String, String), Vec<ParamObject>>,
    /// Known kinds and their scope, by (API group, kind).
    pub kinds: BTreeMap<(String, String), Scope>,
    /// RBAC objects: (Cluster)Roles and (Cluster)RoleBindings, as JSON.
    pub rbac: Arc<Vec<Arc<Json>>>,
    /// Which policies a request's resource may match.
    pub index: PolicyIndex,
    /// The MutatingAdmissionPolicies that have a binding, compiled, by name; each with its
    /// bindings by name.
    pub mutating: Vec<MutatingEntry>,
    /// Which mutating policies a request's resource may match.
    pub mutating_index: PolicyIndex,
    /// Objects left out because the API server would refuse them, each with why.
    pub refused: Vec<String>,
    /// The schemas mutations are typed by (built-in kinds and the CRDs), built only when
    /// there are mutating policies.
    pub schemas: Arc<crate::mutating::Schemas>,
    /// The resources the cluster serves (built-ins of the snapshot's Kubernetes minor, and
    /// its CRDs), for equivalent matching and conversion.
    pub registry: Registry,
    /// Param kinds, by (API group, kind), whose objects are still being listed from the
    /// cluster: a binding that needs one is a configuration error until they are.
    pub unsynced_params: BTreeSet<(String, String)>,
    /// What the validating policies' expressions read of a review's `object` and
    /// `oldObject`.
    policy_reads: PolicyReads,
    /// What validating admission reads of them, made on first use by the review codec
    /// (`review_projection`, which adds its own reads), with the parser's paths for a review.
    pub(crate) review_projection_cache:
        std::sync::OnceLock<(Reads, celgate_cel::projection::Projections)>,
}

/// What the validating policies read of a review's objects: whole until a build computes it
/// (a snapshot made otherwise reads nothing less than everything).
#[derive(Debug)]
struct PolicyReads(Reads);

impl Default for PolicyReads {
    fn default() -> Self {
        PolicyReads(Reads::whole())
    }
}

impl Snapshot {
    /// What every validating policy's expressions ([`CompiledPolicy::reads`]) read of a
    /// review's `object` and `oldObject`, finished. The review codec adds its own reads
    /// (`Snapshot::review_projection`). Mutating admission reads the whole object.
    pub fn policy_reads(&self) -> &Reads {
        &self.policy_reads.0
    }

    /// Whether a validating policy may see the objects of a request on `attributes`'
    /// resource converted to another kind (matchPolicy Equivalent, a class with more than one
    /// served kind that converts other than by rewriting `apiVersion`): conversion reads the
    /// whole object, so such a request is decoded whole.
    pub fn converts_objects(&self, attributes: &crate::matching::RequestAttributes) -> bool {
        use crate::matching::registry::Conversion;
        match self.registry.equivalents(
            &attributes.group,
            &attributes.resource,
            &attributes.subresource,
        ) {
            Equivalents::Known { class, equivalents } => {
                class.conversion != Conversion::Rewrite && equivalents.len() > 1
            }
            // Unknown resources convert by rewriting `apiVersion` (read in place).
            Equivalents::Unknown => false,
        }
    }

    /// Computes [`Snapshot::policy_reads`] from the validating policies.
    fn compute_policy_reads(&mut self) {
        let mut reads = Reads::default();
        for entry in &self.policies {
            reads.union(&entry.policy.reads);
        }
        reads.finish();
        self.policy_reads = PolicyReads(reads);
    }
}

impl Namespaces for Snapshot {
    fn labels(&self, name: &str) -> Option<&BTreeMap<String, String>> {
        self.namespaces.get(name).map(|n| &n.labels)
    }
}

/// The API group of an `apiVersion` (`""` for the core group).
pub fn group_of(api_version: &str) -> &str {
    api_version.rsplit_once('/').map_or("", |(g, _)| g)
}

/// Built-in kinds a policy may name as paramKind, with their scope.
const BUILTIN_KINDS: &[(&str, &str, Scope)] = &[
    ("", "ConfigMap", Scope::Namespaced),
    ("", "Secret", Scope::Namespaced),
    ("", "ServiceAccount", Scope::Namespaced),
    ("", "Service", Scope::Namespaced),
    ("", "Pod", Scope::Namespaced),
    ("", "Endpoints", Scope::Namespaced),
    ("", "LimitRange", Scope::Namespaced),
    ("", "ResourceQuota", Scope::Namespaced),
    ("", "PersistentVolumeClaim", Scope::Namespaced),
    ("", "Namespace", Scope::Cluster),
    ("", "Node", Scope::Cluster),
    ("", "PersistentVolume", Scope::Cluster),
    ("apps", "Deployment", Scope::Namespaced),
    ("apps", "StatefulSet", Scope::Namespaced),
    ("apps", "DaemonSet", Scope::Namespaced),
    ("apps", "ReplicaSet", Scope::Namespaced),
    ("batch", "Job", Scope::Namespaced),
    ("batch", "CronJob", Scope::Namespaced),
    ("rbac.authorization.k8s.io", "Role", Scope::Namespaced),
    (
        "rbac.authorization.k8s.io",
        "RoleBinding",
        Scope::Namespaced,
    ),
    ("rbac.authorization.k8s.io", "ClusterRole", Scope::Cluster),
    (
        "rbac.authorization.k8s.io",
        "ClusterRoleBinding",
        Scope::Cluster,
    ),
    ("scheduling.k8s.io", "PriorityClass", Scope::Cluster),
    ("storage.k8s.io", "StorageClass", Scope::Cluster),
    ("networking.k8s.io", "NetworkPolicy", Scope::Namespaced),
    ("networking.k8s.io", "Ingress", Scope::Namespaced),
    ("networking.k8s.io", "IngressClass", Scope::Cluster),
    ("policy", "PodDisruptionBudget", Scope::Namespaced),
    (
        "apiextensions.k8s.io",
        "CustomResourceDefinition",
        Scope::Cluster,
    ),
    (
        "admissionregistration.k8s.io",
        "ValidatingAdmissionPolicy",
        Scope::Cluster,
    ),
    (
        "admissionregistration.k8s.io",
        "ValidatingAdmissionPolicyBinding",
        Scope::Cluster,
    ),
];

/// Compiled policies kept across snapshots, keyed by the SHA-256 of the policy object and the
/// CEL version: an unchanged policy is compiled once, however often its folder or the cluster
/// changes around it.
#[derive(Default)]
pub struct CompileCache {
    map: std::sync::Mutex<BTreeMap<[u8; 32], Arc<CompiledPolicy>>>,
}

impl CompileCache {
    fn key(policy: &Policy, version: u16) -> [u8; 32] {
        use sha2::{Digest, Sha256};
        let mut h = Sha256::new();
        h.update(version.to_le_bytes());
        h.update(serde_json::to_vec(policy).unwrap_or_default());
        h.finalize().into()
    }

    /// The compiled form of `policy`, compiled now only if not seen before.
    fn get(&self, policy: &Policy, version: u16, live: &mut Vec<[u8; 32]>) -> Arc<CompiledPolicy> {
        let key = Self::key(policy, version);
        live.push(key);
        if let Some(hit) = self.map.lock().ok().and_then(|m| m.get(&key).cloned()) {
            return hit;
        }
        let compiled = Arc::new(compile(policy, version));
        if let Ok(mut m) = self.map.lock() {
            m.insert(key, compiled.clone());
        }
        compiled
    }

    /// Forgets policies that are no longer in use.
    fn retain(&self, live: &[[u8; 32]]) {
        if let Ok(mut m) = self.map.lock() {
            m.retain(|k, _| live.contains(k));
        }
    }

    /// How many compiled policies are kept.
    pub fn len(&self) -> usize {
        self.map.lock().map_or(0, |m| m.len())
    }

    /// No compiled policy is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Builds a snapshot from loose objects.
#[derive(Default)]
pub struct SnapshotBuilder {
    policies: Vec<Policy>,
    bindings: Vec<Binding>,
    mutating_policies: Vec<MutatingPolicy>,
    mutating_bindings: Vec<MutatingBinding>,
    rbac: Vec<Arc<Json>>,
    crds: Vec<Arc<Json>>,
    snapshot: Snapshot,
}

impl SnapshotBuilder {
    /// A builder that knows the scope of the built-in kinds.
    pub fn new() -> Self {
        let mut b = SnapshotBuilder::default();
        for (g, k, s) in BUILTIN_KINDS {
            b.snapshot.kinds.insert((g.to_string(), k.to_string()), *s);
        }
        b
    }

    /// Declares a kind's scope (as API discovery reports it), over any inference.
    pub fn declare_kind(&mut self, group: &str, kind: &str, scope: Scope) {
        self.snapshot
            .kinds
            .insert((group.to_string(), kind.to_string()), scope);
    }

    /// Forgets a kind: the cluster does not serve it, so a policy naming it as paramKind is
    /// misconfigured.
    pub fn forget_kind(&mut self, group: &str, kind: &str) {
        self.snapshot
            .kinds
            .remove(&(group.to_string(), kind.to_string()));
    }

    /// Marks a param kind whose objects have not been listed yet.
    pub fn param_kind_unsynced(&mut self, group: &str, kind: &str) {
        self.snapshot
            .unsynced_params
            .insert((group.to_string(), kind.to_string()));
    }

    /// Adds a ValidatingAdmissionPolicy (compiled by [`Self::build`] if a binding names it).
    pub fn add_policy(&mut self, p: Policy) {
        self.policies.push(p);
    }

    /// Adds a ValidatingAdmissionPolicyBinding.
    pub fn add_binding(&mut self, b: Binding) {
        self.bindings.push(b);
    }

    /// Records an object left out because the API server would refuse to create it (a
    /// MutatingAdmissionPolicy or binding that fails validation): `why` is shown to the user.
    pub fn refuse(&mut self, why: String) {
        self.snapshot.refused.push(why);
    }

    /// Adds a MutatingAdmissionPolicy (compiled by [`Self::build`] if a binding names it).
    pub fn add_mutating_policy(&mut self, p: MutatingPolicy) {
        self.mutating_policies.push(p);
    }

    /// Adds a MutatingAdmissionPolicyBinding.
    pub fn add_mutating_binding(&mut self, b: MutatingBinding) {
        self.mutating_bindings.push(b);
    }

    /// Adds any other object: a namespace, an RBAC object, a CRD (which declares a kind's
    /// scope), and in every case a potential param.
    pub fn add_object(&mut self, object: Arc<Json>) {
        let api_version = object["apiVersion"].as_str().unwrap_or("").to_string();
        let kind = object["kind"].as_str().unwrap_or("").to_string();
        let group = group_of(&api_version).to_string();
        let meta = &object["metadata"];
        let name = meta["name"].as_str().unwrap_or("").to_string();
        let namespace = meta["namespace"].as_str().unwrap_or("").to_string();
        let labels = crate::matching::selector::labels_of(&object).unwrap_or_default();
        if group == "apiextensions.k8s.io" && kind == "CustomResourceDefinition" {
            let spec = &object["spec"];
            let crd_group = spec["group"].as_str().unwrap_or("").to_string();
            let crd_kind = spec["names"]["kind"].as_str().unwrap_or("").to_string();
            let scope = if spec["scope"].as_str() == Some("Cluster") {
                Scope::Cluster
            } else {
                Scope::Namespaced
            };
            self.snapshot.kinds.insert((crd_group, crd_kind), scope);
            self.crds.push(object.clone());
        }
        if group.is_empty() && kind == "Namespace" {
            self.snapshot
                .namespaces
                .insert(name.clone(), NamespaceEntry::new(object.clone()));
        }
        if group == "rbac.authorization.k8s.io" {
            self.rbac.push(object.clone());
        }
        self.snapshot
            .params
            .entry((group, kind))
            .or_default()
            .push(ParamObject {
                namespace,
                name,
                labels,
                object,
            });
    }

    /// The scope of a kind: known, declared by a CRD, or else inferred from whether its
    /// objects carry a namespace. `None` when nothing is known of the kind.
    fn infer_scopes(&mut self) {
        for (key, objects) in &self.snapshot.params {
            if !self.snapshot.kinds.contains_key(key) {
                let namespaced = objects.iter().any(|o| !o.namespace.is_empty());
                let scope = if namespaced {
                    Scope::Namespaced
                } else {
                    Scope::Cluster
                };
                self.snapshot.kinds.insert(key.clone(), scope);
            }
        }
    }

    /// Compiles every policy that has a binding, against Kubernetes 1.`version`.
    pub fn build(self, version: u16) -> Snapshot {
        self.build_cached(version, &CompileCache::default())
    }

    /// [`Self::build`], reusing the compiled policies of `cache`.
    pub fn build_cached(mut self, version: u16, cache: &CompileCache) -> Snapshot {
        let mut live = Vec::new();
        self.infer_scopes();
        for objects in self.snapshot.params.values_mut() {
            objects.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
        }
        let mut by_policy: BTreeMap<String, Vec<Arc<CompiledBinding>>> = BTreeMap::new();
        for b in &self.bindings {
            by_policy
                .entry(b.spec.policy_name.clone())
                .or_default()
                .push(Arc::new(CompiledBinding::compile(b)));
        }
        self.policies
            .sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        for p in &self.policies {
            // A policy without bindings is never evaluated; a binding without its policy is
            // ignored (§3.1).
            let Some(mut bindings) = by_policy.remove(&p.metadata.name) else {
                continue;
            };
            bindings.sort_by(|a, b| a.name.cmp(&b.name));
            let compiled = cache.get(p, version, &mut live);
            self.snapshot
                .index
                .add(self.snapshot.policies.len(), &compiled);
            self.snapshot.policies.push(PolicyEntry {
                policy: compiled,
                bindings,
            });
        }
        cache.retain(&live);
        self.build_mutating(version);
        if !self.snapshot.mutating.is_empty() {
            self.snapshot.schemas = Arc::new(crate::mutating::Schemas::new(
                self.crds.iter().map(|c| &**c),
            ));
        }
        self.snapshot.registry = Registry::builtin(version);
        for crd in &self.crds {
            self.snapshot.registry.add_crd(crd);
        }
        self.snapshot.rbac = Arc::new(self.rbac);
        self.snapshot.compute_policy_reads();
        self.snapshot
    }
}

impl SnapshotBuilder {
    /// Compiles every mutating policy that has a binding (as for validating policies, a
    /// binding without its policy is ignored).
    fn build_mutating(&mut self, version: u16) {
        let mut by_policy: BTreeMap<String, Vec<Arc<CompiledBinding>>> = BTreeMap::new();
        for b in &self.mutating_bindings {
            by_policy
                .entry(b.spec.policy_name.clone())
                .or_default()
                .push(Arc::new(CompiledBinding::compile_mutating(b)));
        }
        self.mutating_policies
            .sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        for p in &self.mutating_policies {
            let Some(mut bindings) = by_policy.remove(&p.metadata.name) else {
                continue;
            };
            bindings.sort_by(|a, b| a.name.cmp(&b.name));
            let compiled = Arc::new(compile_mutating(p, version));
            self.snapshot
                .mutating_index
                .add(self.snapshot.mutating.len(), &compiled.base);
            self.snapshot.mutating.push(MutatingEntry {
                policy: compiled,
                bindings,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(name: &str, groups: &str, resources: &str) -> Policy {
        let yaml = format!(
            "metadata: {{name: {name}}}\nspec: {{matchConstraints: {{resourceRules: [{{apiGroups: {groups}, apiVersions: ['*'], operations: ['*'], resources: {resources}}}]}}, validations: [{{expression: 'true'}}]}}"
        );
        serde_yaml_ng::from_str(&yaml).unwrap()
    }

    fn binding(policy: &str) -> Binding {
        serde_yaml_ng::from_str(&format!("metadata: {{name: b-{policy}}}\nspec: {{policyName: {policy}, validationActions: [Deny]}}")).unwrap()
    }

    #[test]
    fn unchanged_policies_are_compiled_once() {
        let cache = CompileCache::default();
        let build = |second: &str| {
            let mut b = SnapshotBuilder::new();
            b.add_policy(policy("a", "['']", "[pods]"));
            b.add_policy(policy("b", "['']", second));
            b.add_binding(binding("a"));
            b.add_binding(binding("b"));
            b.build_cached(celgate_cel::NEWEST_MINOR, &cache)
        };
        let one = build("[pods]");
        let two = build("[configmaps]");
        assert!(
            Arc::ptr_eq(&one.policies[0].policy, &two.policies[0].policy),
            "unchanged: reused"
        );
        assert!(
            !Arc::ptr_eq(&one.policies[1].policy, &two.policies[1].policy),
            "changed: recompiled"
        );
        assert_eq!(cache.len(), 2, "the old version of b is forgotten");
    }

    #[test]
    fn the_policy_reads_are_every_bound_policy() {
        use celgate_cel::reads::show;
        assert!(
            Snapshot::default().policy_reads().object.is_whole(),
            "a snapshot not built reads everything"
        );
        let mut b = SnapshotBuilder::new();
        let mut p = policy("a", "['']", "[pods]");
        p.spec.validations[0].expression = "object.spec.x == oldObject.spec.y".into();
        b.add_policy(p);
        b.add_binding(binding("a"));
        let mut unbound = policy("b", "['']", "[pods]");
        unbound.spec.validations[0].expression = "object == oldObject".into();
        b.add_policy(unbound);
        let s = b.build(celgate_cel::NEWEST_MINOR);
        let r = s.policy_reads();
        assert_eq!(show(&r.object), "{spec:{x:*}}");
        assert_eq!(show(&r.old_object), "{spec:{y:*}}");
    }

    #[test]
    fn equivalents_that_convert_read_the_whole_objects() {
        let s = SnapshotBuilder::new().build(celgate_cel::NEWEST_MINOR);
        let attributes = |group: &str, resource: &str| crate::matching::RequestAttributes {
            group: group.into(),
            resource: resource.into(),
            ..Default::default()
        };
        assert!(
            s.converts_objects(&attributes("", "events")),
            "core and events.k8s.io"
        );
        assert!(!s.converts_objects(&attributes("", "pods")));
        assert!(!s.converts_objects(&attributes("example.com", "widgets")));
    }

    #[test]
    fn index_finds_exact_and_wildcard_policies() {
        let mut b = SnapshotBuilder::new();
        for (name, groups, resources) in [
            ("a-pods", "['']", "[pods]"),
            ("b-pods-status", "['']", "['pods/status']"),
            ("c-any-core", "['']", "['*']"),
            ("d-any-group-deployments", "['*']", "[deployments]"),
            ("e-everything", "['*']", "['*/*']"),
            ("f-apps", "[apps]", "[deployments]"),
        ] {
            b.add_policy(policy(name, groups, resources));
            b.add_binding(binding(name));
        }
        let s = b.build(celgate_cel::NEWEST_MINOR);
        let names = |g: &str, r: &str| {
            s.index
                .candidates(g, r)
                .into_iter()
                .map(|i| s.policies[i].policy.name.clone())
                .collect::<Vec<_>>()
        };
        assert_eq!(
            names("", "pods"),
            ["a-pods", "b-pods-status", "c-any-core", "e-everything"]
        );
        assert_eq!(
            names("apps", "deployments"),
            ["d-any-group-deployments", "e-everything", "f-apps"]
        );
        assert_eq!(names("batch", "jobs"), ["e-everything"]);
    }

    #[test]
    fn index_finds_policies_of_cross_group_equivalents() {
        let mut b = SnapshotBuilder::new();
        for (name, groups, resources) in [
            ("a-core-events", "['']", "[events]"),
            ("b-events", "['events.k8s.io']", "[events]"),
            ("c-pods", "['']", "[pods]"),
        ] {
            b.add_policy(policy(name, groups, resources));
            b.add_binding(binding(name));
        }
        let s = b.build(celgate_cel::NEWEST_MINOR);
        let names = |g: &str, r: &str| {
            let eq = s.registry.equivalents(g, r, "");
            s.index
                .candidates_with(g, r, eq)
                .into_iter()
                .map(|i| s.policies[i].policy.name.clone())
                .collect::<Vec<_>>()
        };
        assert_eq!(names("", "events"), ["a-core-events", "b-events"]);
        assert_eq!(
            names("events.k8s.io", "events"),
            ["a-core-events", "b-events"]
        );
        assert_eq!(names("", "pods"), ["c-pods"]);
    }
}
