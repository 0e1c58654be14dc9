//! The `rules` a ValidatingWebhookConfiguration (or, for MutatingAdmissionPolicies, a
//! MutatingWebhookConfiguration: [`Phase`]) needs so that the API server sends celgate
//! every request a loaded binding can decide: the union, over the bindings of a snapshot, of
//! what each can match (its policy's `matchConstraints.resourceRules` intersected with the
//! binding's `matchResources.resourceRules`), as `admissionregistration/v1`
//! `RuleWithOperations`. Follows `k8s.io/apiserver/pkg/admission/plugin/policy/matching`
//! (a request must match the policy's and the binding's rules; empty rules match all; an
//! exclusion only narrows) and `webhook/predicates/rules` (how the API server matches the
//! result).
//!
//! Never narrower than what a binding can decide, since a request left out is a bypass:
//! what the rules cannot say is widened. `resourceNames`, `excludeResourceRules` and the
//! selectors are left out (they only narrow); `apiVersions` is always `*`, so that every
//! version of a resource reaches celgate as itself, never converted to a version a rule names
//! (matchPolicy Equivalent: all served versions of a resource are equivalent); and the
//! resources the API server stores together across groups (`AddCohabitatingResources`: core
//! and `events.k8s.io` events, and the `extensions` twins of `apps` and
//! `networking.k8s.io` resources) are added beside the ones rules name. Operations no
//! request has (`PATCH`) are dropped: they match nothing, and the API server refuses them.
//!
//! The mutating phase is the same over the snapshot's MutatingAdmissionPolicies and their
//! bindings, with one difference: the in-tree mutating plugin never sees DELETE (a MAP or
//! binding naming it is refused at creation), so `*` stands for CREATE, UPDATE and CONNECT
//! and DELETE is never asked for.
//!
//! Beside the rules, [`Hints`]: a `namespaceSelector` or `objectSelector` the webhook can
//! carry too. The API server matches a webhook's selectors with the very matchers it matches
//! a policy's and a binding's `matchResources` selectors with (`policy/matching` calls
//! `webhook/predicates/namespace` and `.../object`), so a selector that every (policy,
//! binding) pair requires, copied to the webhook, leaves out only requests no pair can match.
//! Any pair without it (or with a selector that does not compile, whose error every matched
//! request reports) and there is no hint. `matchConditions` are never hinted: a policy's
//! conditions are CEL that may read `params` and its own `variables`, which a webhook's
//! conditions cannot see, and an error in one counts under the policy's failurePolicy,
//! where in a webhook's it counts under the webhook's: copied, they could drop a request a
//! policy must decide or report.
//!
//! A rule set is kept as atoms (group, resource, subresource, operation, scope), each a
//! product of single values or `*`, so that intersection, union and coverage are exact on
//! what they express; the rules written are the atoms no other atom covers, regrouped.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use std::sync::Arc;

use crate::matching::Matcher;
use crate::model::{LabelSelector, NamedRule};
use crate::policy::snapshot::{CompiledBinding, Snapshot};

/// The operations a webhook rule can name (besides `*`).
pub const OPERATIONS: [&str; 4] = ["CREATE", "UPDATE", "DELETE", "CONNECT"];

/// The operations that reach the mutating plugin (it never sees DELETE).
pub const MUTATING_OPERATIONS: [&str; 3] = ["CREATE", "UPDATE", "CONNECT"];

/// Which webhook configuration rules are for: the one for ValidatingAdmissionPolicies
/// (`/validate`) or the one for MutatingAdmissionPolicies (`/mutate`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Phase {
    #[default]
    Validating,
    Mutating,
}

/// Each policy's matcher (`None`: it has no valid matchConstraints, and matches every
/// request) with its bindings, for the policies of `phase`.
fn bound(snapshot: &Snapshot, phase: Phase) -> Vec<(Option<&Matcher>, &[Arc<CompiledBinding>])> {
    match phase {
        Phase::Validating => snapshot
            .policies
            .iter()
            .map(|e| (e.policy.matcher.as_ref().ok(), e.bindings.as_slice()))
            .collect(),
        Phase::Mutating => snapshot
            .mutating
            .iter()
            .map(|e| (e.policy.base.matcher.as_ref().ok(), e.bindings.as_slice()))
            .collect(),
    }
}

/// Resources the API server stores under one key across groups: each is equivalent to the
/// other (kube-apiserver's `AddCohabitatingResources`). Only events are still served in both
/// groups; the `extensions` ones are kept, as a rule naming an unserved resource costs
/// nothing.
/// A group and resource.
type GroupResource = (&'static str, &'static str);

const COHABITING: [(GroupResource, GroupResource); 8] = [
    (("", "events"), ("events.k8s.io", "events")),
    (("apps", "deployments"), ("extensions", "deployments")),
    (("apps", "daemonsets"), ("extensions", "daemonsets")),
    (("apps", "replicasets"), ("extensions", "replicasets")),
    (
        ("", "replicationcontrollers"),
        ("extensions", "replicationcontrollers"),
    ),
    (
        ("networking.k8s.io", "networkpolicies"),
        ("extensions", "networkpolicies"),
    ),
    (
        ("networking.k8s.io", "ingresses"),
        ("extensions", "ingresses"),
    ),
    (
        ("policy", "podsecuritypolicies"),
        ("extensions", "podsecuritypolicies"),
    ),
];

/// One rule of a ValidatingWebhookConfiguration's webhook (`RuleWithOperations`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct WebhookRule {
    pub api_groups: Vec<String>,
    pub api_versions: Vec<String>,
    pub operations: Vec<String>,
    pub resources: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
}

impl WebhookRule {
    /// The rule as a binding's rule, for matching requests against it
    /// ([`crate::matching::rules::rule_matches`] follows the webhook predicates).
    pub fn as_named_rule(&self) -> NamedRule {
        NamedRule {
            resource_names: Vec::new(),
            operations: self.operations.clone(),
            api_groups: self.api_groups.clone(),
            api_versions: self.api_versions.clone(),
            resources: self.resources.clone(),
            scope: self.scope.clone(),
        }
    }
}

/// `scope` of a rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Scope {
    All,
    Namespaced,
    Cluster,
}

impl Scope {
    /// An unknown scope (which the API server refuses) is widened to all.
    fn parse(s: Option<&str>) -> Scope {
        match s {
            Some("Namespaced") => Scope::Namespaced,
            Some("Cluster") => Scope::Cluster,
            _ => Scope::All,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Scope::All => "*",
            Scope::Namespaced => "Namespaced",
            Scope::Cluster => "Cluster",
        }
    }

    fn covers(self, other: Scope) -> bool {
        self == Scope::All || self == other
    }

    fn meet(self, other: Scope) -> Option<Scope> {
        match (self, other) {
            (Scope::All, x) | (x, Scope::All) => Some(x),
            (a, b) if a == b => Some(a),
            _ => None,
        }
    }
}

/// One product of single values (or `*`): requests of `group`, `resource`/`sub` (`sub`
/// empty: the main resource; `*`: every subresource and the main resource), `operation`,
/// `scope`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
struct Atom {
    group: String,
    resource: String,
    sub: String,
    operation: String,
    scope: Scope,
}

fn token_covers(a: &str, b: &str) -> bool {
    a == "*" || a == b
}

fn token_meet(a: &str, b: &str) -> Option<String> {
    match (a, b) {
        ("*", x) | (x, "*") => Some(x.to_string()),
        (a, b) if a == b => Some(a.to_string()),
        _ => None,
    }
}

impl Atom {
    fn everything() -> Atom {
        Atom {
            group: "*".into(),
            resource: "*".into(),
            sub: "*".into(),
            operation: "*".into(),
            scope: Scope::All,
        }
    }

    fn covers(&self, other: &Atom) -> bool {
        token_covers(&self.group, &other.group)
            && token_covers(&self.resource, &other.resource)
            && token_covers(&self.sub, &other.sub)
            && token_covers(&self.operation, &other.operation)
            && self.scope.covers(other.scope)
    }

    fn meet(&self, other: &Atom) -> Option<Atom> {
        Some(Atom {
            group: token_meet(&self.group, &other.group)?,
            resource: token_meet(&self.resource, &other.resource)?,
            sub: token_meet(&self.sub, &other.sub)?,
            operation: token_meet(&self.operation, &other.operation)?,
            scope: self.scope.meet(other.scope)?,
        })
    }

    /// The resource entry as rules write it.
    fn resource_entry(&self) -> String {
        if self.sub.is_empty() {
            self.resource.clone()
        } else {
            format!("{}/{}", self.resource, self.sub)
        }
    }
}

/// What a set of rules selects, as atoms.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RuleSet {
    atoms: BTreeSet<Atom>,
}

/// A list normalized: `*` alone if present.
fn wildcard_or(list: &[String]) -> Vec<&str> {
    if list.iter().any(|x| x == "*") {
        vec!["*"]
    } else {
        list.iter().map(String::as_str).collect()
    }
}

/// The atoms of one rule: every combination of its groups, resources, operations, with its
/// scope. `versions` empty matches nothing; otherwise versions are not kept (always `*`).
fn atoms_of(
    groups: &[String],
    versions: &[String],
    operations: &[String],
    resources: &[String],
    scope: Option<&str>,
) -> Vec<Atom> {
    if versions.is_empty() {
        return Vec::new();
    }
    let scope = Scope::parse(scope);
    let operations: Vec<&str> = wildcard_or(operations)
        .into_iter()
        // An operation no request has matches nothing (and the API server refuses it).
        .filter(|o| *o == "*" || OPERATIONS.contains(o))
        .collect();
    let mut out = Vec::new();
    for group in wildcard_or(groups) {
        for entry in resources {
            let (resource, sub) = entry.split_once('/').unwrap_or((entry, ""));
            // An empty name, or a path deeper than resource/subresource, matches nothing.
            if resource.is_empty() || sub.contains('/') {
                continue;
            }
            for operation in &operations {
                out.push(Atom {
                    group: group.to_string(),
                    resource: resource.to_string(),
                    sub: sub.to_string(),
                    operation: operation.to_string(),
                    scope,
                });
            }
        }
    }
    out
}

/// The atoms of a binding's or policy's include rules; `None`: it matches every request
/// (no rules, or matchConstraints the API server would refuse, which every request reports).
fn matcher_atoms(rules: &[NamedRule]) -> Option<Vec<Atom>> {
    if rules.is_empty() {
        return None;
    }
    let mut atoms: Vec<Atom> = rules
        .iter()
        .flat_map(|r| {
            atoms_of(
                &r.api_groups,
                &r.api_versions,
                &r.operations,
                &r.resources,
                r.scope.as_deref(),
            )
        })
        .collect();
    add_cohabiting(&mut atoms);
    Some(atoms)
}

/// `atom` as the mutating plugin can see it: `*` as its operations, DELETE as nothing.
fn mutating_atoms(atom: Atom) -> Vec<Atom> {
    match atom.operation.as_str() {
        "*" => MUTATING_OPERATIONS
            .iter()
            .map(|o| Atom {
                operation: o.to_string(),
                ..atom.clone()
            })
            .collect(),
        o if MUTATING_OPERATIONS.contains(&o) => vec![atom],
        _ => Vec::new(),
    }
}

/// Adds, for every atom naming a resource that cohabits with one of another group, that one
/// (matchPolicy Equivalent matches it; taken for every policy, as widening is safe).
fn add_cohabiting(atoms: &mut Vec<Atom>) {
    let mut extra = Vec::new();
    for a in atoms.iter() {
        if a.group == "*" {
            continue;
        }
        for (x, y) in COHABITING {
            for ((g, r), (og, or)) in [(x, y), (y, x)] {
                if a.group == g && token_covers(&a.resource, r) {
                    extra.push(Atom {
                        group: og.to_string(),
                        resource: or.to_string(),
                        ..a.clone()
                    });
                }
            }
        }
    }
    atoms.extend(extra);
}

impl RuleSet {
    /// Every request: what a webhook without narrower rules receives (`*/*`).
    pub fn everything() -> RuleSet {
        RuleSet {
            atoms: BTreeSet::from([Atom::everything()]),
        }
    }

    /// Whether it selects nothing.
    pub fn is_empty(&self) -> bool {
        self.atoms.is_empty()
    }

    /// What the bindings of `snapshot`'s validating policies can match
    /// ([`Self::of_phase`] with [`Phase::Validating`]).
    pub fn of_snapshot(snapshot: &Snapshot) -> RuleSet {
        RuleSet::of_phase(snapshot, Phase::Validating)
    }

    /// What the bindings of `snapshot` can match in `phase`: for each binding of each
    /// policy, the policy's rules intersected with the binding's (a binding without
    /// matchResources, or with no rules, takes its policy's). Bindings naming no loaded
    /// policy are not in the snapshot: they decide nothing. Mutating: DELETE never, `*` as
    /// the operations the mutating plugin sees.
    pub fn of_phase(snapshot: &Snapshot, phase: Phase) -> RuleSet {
        let mut atoms = BTreeSet::new();
        for (policy, bindings) in bound(snapshot, phase) {
            let policy = policy.and_then(|m| matcher_atoms(m.rules()));
            for binding in bindings {
                let bound = binding
                    .matcher
                    .as_ref()
                    .and_then(|m: &Matcher| matcher_atoms(m.rules()));
                match (&policy, bound) {
                    (None, None) => {
                        atoms.insert(Atom::everything());
                    }
                    (Some(p), None) => atoms.extend(p.iter().cloned()),
                    (None, Some(b)) => atoms.extend(b),
                    (Some(p), Some(b)) => {
                        for x in p {
                            atoms.extend(b.iter().filter_map(|y| x.meet(y)));
                        }
                    }
                }
            }
        }
        if phase == Phase::Mutating {
            atoms = atoms.into_iter().flat_map(mutating_atoms).collect();
        }
        RuleSet { atoms }.reduced()
    }

    /// What webhook rules select (as the API server matches them), for comparing a
    /// configuration with the wanted rules. A rule not for every version is taken for what it
    /// names only if it names `*`: else it covers less than its atoms say, and is dropped
    /// (so that a configuration holding it is never taken to cover more than it does).
    pub fn of_rules(rules: &[WebhookRule]) -> RuleSet {
        let atoms = rules
            .iter()
            .filter(|r| r.api_versions.iter().any(|v| v == "*"))
            .flat_map(|r| {
                atoms_of(
                    &r.api_groups,
                    &r.api_versions,
                    &r.operations,
                    &r.resources,
                    r.scope.as_deref(),
                )
            })
            .collect();
        RuleSet { atoms }.reduced()
    }

    /// What either selects.
    pub fn union(&self, other: &RuleSet) -> RuleSet {
        RuleSet {
            atoms: self.atoms.union(&other.atoms).cloned().collect(),
        }
        .reduced()
    }

    /// Whether every request `other` selects is selected here.
    pub fn covers(&self, other: &RuleSet) -> bool {
        other
            .atoms
            .iter()
            .all(|b| self.atoms.iter().any(|a| a.covers(b)))
    }

    /// Without atoms another covers, Namespaced and Cluster twins made one of scope `*`.
    fn reduced(self) -> RuleSet {
        let mut atoms = self.atoms;
        let twins: Vec<Atom> = atoms
            .iter()
            .filter(|a| a.scope == Scope::Namespaced)
            .filter(|a| {
                atoms.contains(&Atom {
                    scope: Scope::Cluster,
                    ..(*a).clone()
                })
            })
            .map(|a| Atom {
                scope: Scope::All,
                ..a.clone()
            })
            .collect();
        atoms.extend(twins);
        let kept: BTreeSet<Atom> = atoms
            .iter()
            .filter(|b| !atoms.iter().any(|a| a != *b && a.covers(b)))
            .cloned()
            .collect();
        RuleSet { atoms: kept }
    }

    /// The webhook rules, in a stable order: one rule per scope, operations and resources,
    /// with every group that has exactly those.
    pub fn rules(&self) -> Vec<WebhookRule> {
        // (group, resource entry, scope) -> operations.
        let mut ops: BTreeMap<(&str, String, Scope), BTreeSet<&str>> = BTreeMap::new();
        for a in &self.atoms {
            ops.entry((&a.group, a.resource_entry(), a.scope))
                .or_default()
                .insert(&a.operation);
        }
        // (group, scope, operations) -> resources.
        let mut resources: BTreeMap<(&str, Scope, Vec<&str>), Vec<String>> = BTreeMap::new();
        for ((group, entry, scope), set) in ops {
            let all = set.contains("*") || OPERATIONS.iter().all(|o| set.contains(o));
            let operations = if all {
                vec!["*"]
            } else {
                // In the API's order.
                OPERATIONS.into_iter().filter(|o| set.contains(o)).collect()
            };
            resources
                .entry((group, scope, operations))
                .or_default()
                .push(entry);
        }
        // (scope, operations, resources) -> groups.
        type Shape<'a> = (Scope, Vec<&'a str>, Vec<String>);
        let mut groups: BTreeMap<Shape<'_>, Vec<&str>> = BTreeMap::new();
        for ((group, scope, operations), entries) in resources {
            groups
                .entry((scope, operations, entries))
                .or_default()
                .push(group);
        }
        groups
            .into_iter()
            .map(|((scope, operations, resources), groups)| WebhookRule {
                api_groups: groups.into_iter().map(String::from).collect(),
                api_versions: vec!["*".into()],
                operations: operations.into_iter().map(String::from).collect(),
                resources,
                scope: Some(scope.name().into()),
            })
            .collect()
    }
}

/// The selectors every (policy, binding) pair of a snapshot requires, for the webhook
/// (`None`: none safe to copy).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Hints {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace_selector: Option<LabelSelector>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub object_selector: Option<LabelSelector>,
}

/// The selector every one of `pairs` requires (each pair: the policy's and the binding's
/// restricting selectors), the first pair's order deciding between several.
fn common(pairs: &[[Option<&LabelSelector>; 2]]) -> Option<LabelSelector> {
    let (first, rest) = pairs.split_first()?;
    first
        .iter()
        .flatten()
        .find(|s| rest.iter().all(|pair| pair.contains(&Some(**s))))
        .map(|s| (*s).clone())
}

impl Hints {
    /// What every (policy, binding) pair of `snapshot`'s validating policies requires
    /// ([`Self::of_phase`] with [`Phase::Validating`]).
    pub fn of_snapshot(snapshot: &Snapshot) -> Hints {
        Hints::of_phase(snapshot, Phase::Validating)
    }

    /// What every (policy, binding) pair of `phase` in `snapshot` requires of the namespace
    /// and of the object. A policy without valid matchConstraints matches every request: no
    /// hint.
    pub fn of_phase(snapshot: &Snapshot, phase: Phase) -> Hints {
        let mut namespaces = Vec::new();
        let mut objects = Vec::new();
        for (policy, bindings) in bound(snapshot, phase) {
            for binding in bindings {
                let bound = binding.matcher.as_ref();
                namespaces.push([
                    policy.and_then(Matcher::restricting_namespace_selector),
                    bound.and_then(Matcher::restricting_namespace_selector),
                ]);
                objects.push([
                    policy.and_then(Matcher::restricting_object_selector),
                    bound.and_then(Matcher::restricting_object_selector),
                ]);
            }
        }
        Hints {
            namespace_selector: common(&namespaces),
            object_selector: common(&objects),
        }
    }

    /// What selects the requests of either: a selector only where both have the same.
    pub fn union(&self, other: &Hints) -> Hints {
        let same = |a: &Option<LabelSelector>, b: &Option<LabelSelector>| {
            if a == b {
                a.clone()
            } else {
                None
            }
        };
        Hints {
            namespace_selector: same(&self.namespace_selector, &other.namespace_selector),
            object_selector: same(&self.object_selector, &other.object_selector),
        }
    }
}

/// `base` with `hint`'s requirements added (AND: a label selector's requirements all hold).
pub fn with_hint(base: &LabelSelector, hint: Option<&LabelSelector>) -> LabelSelector {
    let mut out = base.clone();
    if let Some(h) = hint {
        for (k, v) in &h.match_labels {
            match out.match_labels.get(k) {
                // The same key with another value: both must hold, as an expression.
                Some(other) if other != v => out.match_expressions.push(label_in(k, v)),
                _ => {
                    out.match_labels.insert(k.clone(), v.clone());
                }
            }
        }
        out.match_expressions
            .extend(h.match_expressions.iter().cloned());
    }
    out
}

/// `key In [value]`: a matchLabels entry as an expression.
fn label_in(key: &str, value: &str) -> crate::model::SelectorRequirement {
    crate::model::SelectorRequirement {
        key: key.to_string(),
        operator: "In".into(),
        values: vec![value.to_string()],
    }
}

/// `live` without what `hint` added (its labels where they still hold its value, one copy of
/// each of its expressions): the selector the configuration had without celgate's hint.
pub fn without_hint(live: &LabelSelector, hint: Option<&LabelSelector>) -> LabelSelector {
    let mut out = live.clone();
    if let Some(h) = hint {
        for (k, v) in &h.match_labels {
            if out.match_labels.get(k) == Some(v) {
                out.match_labels.remove(k);
            } else if let Some(i) = out
                .match_expressions
                .iter()
                .position(|x| *x == label_in(k, v))
            {
                out.match_expressions.remove(i);
            }
        }
        for e in &h.match_expressions {
            if let Some(i) = out.match_expressions.iter().position(|x| x == e) {
                out.match_expressions.remove(i);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(groups: &[&str], ops: &[&str], resources: &[&str], scope: Option<&str>) -> WebhookRule {
        let s = |l: &[&str]| l.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        WebhookRule {
            api_groups: s(groups),
            api_versions: vec!["v1".into(), "*".into()],
            operations: s(ops),
            resources: s(resources),
            scope: scope.map(String::from),
        }
    }

    #[test]
    fn covered_entries_go_and_twins_merge() {
        let set = RuleSet::of_rules(&[
            rule(&[""], &["CREATE"], &["pods", "pods/*", "configmaps"], None),
            rule(&[""], &["*"], &["configmaps"], Some("Namespaced")),
            rule(&[""], &["*"], &["configmaps"], Some("Cluster")),
            rule(&["apps"], &["CREATE", "PATCH"], &["deployments"], None),
        ]);
        assert_eq!(
            set.rules(),
            vec![
                WebhookRule {
                    api_groups: vec!["".into()],
                    api_versions: vec!["*".into()],
                    operations: vec!["*".into()],
                    resources: vec!["configmaps".into()],
                    scope: Some("*".into()),
                },
                WebhookRule {
                    api_groups: vec!["apps".into()],
                    api_versions: vec!["*".into()],
                    operations: vec!["CREATE".into()],
                    resources: vec!["deployments".into(),],
                    scope: Some("*".into()),
                },
                WebhookRule {
                    api_groups: vec!["".into()],
                    api_versions: vec!["*".into()],
                    operations: vec!["CREATE".into()],
                    resources: vec!["pods/*".into()],
                    scope: Some("*".into()),
                },
            ]
        );
    }

    #[test]
    fn meet_of_subresource_forms() {
        let a = &atoms_of(
            &["*".into()],
            &["*".into()],
            &["*".into()],
            &["pods/*".into()],
            None,
        )[0];
        let b = &atoms_of(
            &["".into()],
            &["v1".into()],
            &["CREATE".into()],
            &["*".into()],
            None,
        )[0];
        let m = a.meet(b).unwrap();
        assert_eq!(
            (m.group.as_str(), m.resource_entry(), m.operation.as_str()),
            ("", "pods".into(), "CREATE")
        );
        let status = &atoms_of(
            &["".into()],
            &["v1".into()],
            &["*".into()],
            &["*/status".into()],
            None,
        )[0];
        assert_eq!(a.meet(status).unwrap().resource_entry(), "pods/status");
        let cluster = &atoms_of(
            &["".into()],
            &["v1".into()],
            &["*".into()],
            &["pods".into()],
            Some("Cluster"),
        )[0];
        let namespaced = &atoms_of(
            &["".into()],
            &["v1".into()],
            &["*".into()],
            &["pods".into()],
            Some("Namespaced"),
        )[0];
        assert!(cluster.meet(namespaced).is_none());
    }

    #[test]
    fn events_bring_their_twin() {
        let mut atoms = atoms_of(
            &["".into()],
            &["v1".into()],
            &["CREATE".into()],
            &["events".into()],
            None,
        );
        add_cohabiting(&mut atoms);
        assert!(atoms
            .iter()
            .any(|a| a.group == "events.k8s.io" && a.resource == "events"));
    }
}
