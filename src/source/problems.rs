//! What is wrong with a set of policies and bindings (kubernetes/kubernetes#117263's policy
//! status), found when a snapshot is built: a binding naming no policy, a missing param, a
//! param kind not served or not listed, a policy that does not compile. The API server only
//! reports these at admission time, request by request; both sources report them as soon as
//! the object is loaded (the folder in its log and metrics, the cluster source also as
//! Warning Events). Names no Kubernetes client: the folder source builds on it.

use std::sync::Arc;

use serde_json::Value as Json;

use crate::policy::snapshot::{group_of, Scope, Snapshot};

/// One thing wrong with a policy or binding.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Problem {
    /// `ValidatingAdmissionPolicy`, `ValidatingAdmissionPolicyBinding`,
    /// `MutatingAdmissionPolicy` or `MutatingAdmissionPolicyBinding`.
    pub kind: String,
    pub api_version: String,
    pub name: String,
    pub uid: String,
    /// One of [`REASONS`].
    pub reason: &'static str,
    pub message: String,
}

/// A param a binding names, to look up.
#[derive(Debug)]
pub struct ParamKey<'a> {
    pub api_version: &'a str,
    pub kind: &'a str,
    pub namespace: &'a str,
    pub name: &'a str,
}

/// Events carry at most 1 kB of note.
fn note(text: String) -> String {
    if text.len() <= 1024 {
        return text;
    }
    let mut end = 1000;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}... ({} more bytes)", &text[..end], text.len() - end)
}

/// Every problem's reason: the metrics export each at zero while it has no problem.
pub const REASONS: [&str; 6] = [
    "PolicyNotFound",
    "ParamNotFound",
    NAMESPACE_NOT_WATCHED,
    "ParamKindNotFound",
    "ParamKindNotListed",
    "InvalidPolicy",
];

pub(crate) fn problem(object: &Json, reason: &'static str, message: String) -> Problem {
    debug_assert!(REASONS.contains(&reason), "{reason} is not in REASONS");
    let text = |v: &Json| v.as_str().unwrap_or("").to_string();
    Problem {
        kind: text(&object["kind"]),
        api_version: text(&object["apiVersion"]),
        name: text(&object["metadata"]["name"]),
        uid: text(&object["metadata"]["uid"]),
        reason,
        message: note(message),
    }
}

/// The reason of a binding whose params lie (or, looked up per request, may lie) in a
/// namespace outside `--param-namespaces`.
pub const NAMESPACE_NOT_WATCHED: &str = "ParamNamespaceNotWatched";

/// The kind of policy a binding binds: its own kind without `Binding`
/// (`ValidatingAdmissionPolicy` or `MutatingAdmissionPolicy`).
pub fn policy_kind_of(binding: &Json) -> &str {
    let kind = binding["kind"].as_str().unwrap_or("");
    kind.strip_suffix("Binding").unwrap_or(kind)
}

/// What is wrong with the compiled policy named `name` of `kind`, if the snapshot has it
/// (only bound policies are compiled).
fn compile_problems(snapshot: &Snapshot, kind: &str, name: &str) -> Vec<String> {
    // The snapshot keeps its policies sorted by name.
    if kind == "MutatingAdmissionPolicy" {
        let Ok(i) = snapshot
            .mutating
            .binary_search_by(|e| e.policy.base.name.as_str().cmp(name))
        else {
            return Vec::new();
        };
        let policy = &snapshot.mutating[i].policy;
        let mut errors = policy.base.problems();
        for (i, m) in policy.mutations.iter().enumerate() {
            if let Err(e) = &m.program {
                let field = match m.kind {
                    crate::policy::compile_mutating::PatchKind::JsonPatch => "jsonPatch",
                    crate::policy::compile_mutating::PatchKind::ApplyConfiguration => {
                        "applyConfiguration"
                    }
                };
                errors.push(format!("spec.mutations[{i}].{field}.expression: {e}"));
            }
        }
        return errors;
    }
    snapshot
        .policies
        .binary_search_by(|e| e.policy.name.as_str().cmp(name))
        .map_or_else(|_| Vec::new(), |i| snapshot.policies[i].policy.problems())
}

/// Finds the problems of `policies` and `bindings` (validating and mutating ones, told apart
/// by kind) given the snapshot built from them.
/// `lookup` says whether a param exists: `None` while its kind is not listed, else the kind's
/// scope and whether the object exists. `list_errors` says why param kinds (by `apiVersion`
/// and kind) cannot be listed. `param_namespaces` are the namespaces in which namespaced
/// param kinds are watched (empty: all).
pub fn problems(
    policies: &[Arc<Json>],
    bindings: &[Arc<Json>],
    snapshot: &Snapshot,
    lookup: impl Fn(&ParamKey<'_>) -> Option<(Scope, bool)>,
    list_errors: &std::collections::BTreeMap<(String, String), String>,
    param_namespaces: &[String],
) -> Vec<Problem> {
    let mut out = Vec::new();
    for p in policies {
        let name = p["metadata"]["name"].as_str().unwrap_or("");
        let pk = &p["spec"]["paramKind"];
        if let (Some(api_version), Some(kind)) = (pk["apiVersion"].as_str(), pk["kind"].as_str()) {
            let key = (group_of(api_version).to_string(), kind.to_string());
            if !snapshot.kinds.contains_key(&key) {
                out.push(problem(
                    p,
                    "ParamKindNotFound",
                    format!("paramKind {kind} ({api_version}) is not served by the cluster: every request the policy matches is a configuration error"),
                ));
            } else if let Some(e) = list_errors.get(&(api_version.to_string(), kind.to_string())) {
                out.push(problem(
                    p,
                    "ParamKindNotListed",
                    format!("celgate cannot list paramKind {kind} ({api_version}): {e}; bindings that use params fail as not yet synced. Grant celgate get, list and watch on it (Helm value rbac.paramResources)"),
                ));
            }
        }
        let errors = compile_problems(snapshot, p["kind"].as_str().unwrap_or(""), name);
        if !errors.is_empty() {
            out.push(problem(p, "InvalidPolicy", errors.join("; ")));
        }
    }
    // By kind and name: a validating and a mutating policy may share a name.
    let by_name: std::collections::BTreeMap<(&str, &str), &Json> = policies
        .iter()
        .filter_map(|p| Some(((p["kind"].as_str()?, p["metadata"]["name"].as_str()?), &**p)))
        .collect();
    for b in bindings {
        let spec = &b["spec"];
        let policy_name = spec["policyName"].as_str().unwrap_or("");
        let policy_kind = policy_kind_of(b);
        let Some(policy) = by_name.get(&(policy_kind, policy_name)) else {
            out.push(problem(
                b,
                "PolicyNotFound",
                format!("policyName names {policy_kind} {policy_name:?}, which does not exist: the binding has no effect"),
            ));
            continue;
        };
        let pk = &policy["spec"]["paramKind"];
        let pr = &spec["paramRef"];
        let (Some(api_version), Some(kind), Some(_)) = (
            pk["apiVersion"].as_str(),
            pk["kind"].as_str(),
            pr.as_object(),
        ) else {
            continue;
        };
        let namespace = pr["namespace"].as_str().unwrap_or("");
        // A paramRef names one param or selects params by label (no name).
        let name = pr["name"].as_str();
        let key = ParamKey {
            api_version,
            kind,
            namespace,
            name: name.unwrap_or(""),
        };
        let found = lookup(&key);
        let effect = if pr["parameterNotFoundAction"].as_str() == Some("Deny") {
            "requests the policy matches fail with parameterNotFoundAction Deny"
        } else {
            "the binding is skipped"
        };
        if let (Some((Scope::Namespaced, _)), false) = (found, param_namespaces.is_empty()) {
            let watched = || quoted(param_namespaces.iter().map(String::as_str), usize::MAX);
            if !namespace.is_empty() && !param_namespaces.iter().any(|n| n == namespace) {
                out.push(problem(
                    b,
                    NAMESPACE_NOT_WATCHED,
                    format!(
                        "paramRef names {kind} params in namespace {namespace:?}, which celgate does not watch (--param-namespaces {}): they count as missing, {effect}. Add the namespace to --param-namespaces (Helm value rbac.paramResources[].namespaces)",
                        watched()
                    ),
                ));
                continue;
            }
            if namespace.is_empty() {
                let unwatched = unwatched_selected(policy, b, snapshot, param_namespaces);
                if !unwatched.is_empty() {
                    out.push(problem(
                        b,
                        NAMESPACE_NOT_WATCHED,
                        format!(
                            "paramRef has no namespace, so each request's param is looked up in the request's namespace, but celgate watches {kind} params only in {} (--param-namespaces): requests in {} (selected by the binding) find none, and there {effect}",
                            watched(),
                            quoted(unwatched.iter().copied(), 5)
                        ),
                    ));
                    continue;
                }
            }
        }
        let Some(name) = name else {
            continue;
        };
        match found {
            // A namespaced param without paramRef.namespace is looked up in each request's
            // namespace: there is no single object to miss.
            Some((Scope::Namespaced, _)) if namespace.is_empty() => {}
            Some((_, false)) => {
                let place = if namespace.is_empty() {
                    String::new()
                } else {
                    format!(" in namespace {namespace:?}")
                };
                out.push(problem(
                    b,
                    "ParamNotFound",
                    format!(
                        "paramRef names {kind} {name:?}{place}, which does not exist: {effect}"
                    ),
                ));
            }
            _ => {}
        }
    }
    out.sort();
    out
}

/// `"a", "b"`, at most `max` of them, then how many more.
fn quoted<'a>(names: impl ExactSizeIterator<Item = &'a str>, max: usize) -> String {
    let total = names.len();
    let mut text: Vec<String> = names.take(max).map(|n| format!("{n:?}")).collect();
    if total > text.len() {
        text.push(format!("{} more", total - text.len()));
    }
    text.join(", ")
}

/// The namespaces outside `watched` (known to the snapshot) whose requests both the policy's
/// and the binding's namespaceSelector select: a per-request param lookup there finds
/// nothing. Empty when a selector does not compile (the object's own problem).
fn unwatched_selected<'a>(
    policy: &Json,
    binding: &Json,
    snapshot: &'a Snapshot,
    watched: &[String],
) -> Vec<&'a str> {
    use crate::matching::selector::Selector;
    let selector = |s: &Json| -> Option<Selector> {
        if s.is_null() {
            return Some(Selector::default());
        }
        let s: crate::model::LabelSelector = serde_json::from_value(s.clone()).ok()?;
        Selector::compile(&s).ok()
    };
    let (Some(of_policy), Some(of_binding)) = (
        selector(&policy["spec"]["matchConstraints"]["namespaceSelector"]),
        selector(&binding["spec"]["matchResources"]["namespaceSelector"]),
    ) else {
        return Vec::new();
    };
    snapshot
        .namespaces
        .iter()
        .filter(|(name, ns)| {
            !watched.iter().any(|w| w == *name)
                && of_policy.matches(&ns.labels)
                && of_binding.matches(&ns.labels)
        })
        .map(|(name, _)| name.as_str())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn objects(yaml: &str) -> Vec<Arc<Json>> {
        serde_yaml_ng::Deserializer::from_str(yaml)
            .map(|d| Arc::new(serde::Deserialize::deserialize(d).unwrap()))
            .collect()
    }

    /// A policy with ConfigMap params.
    const LIMITS: &str = r#"
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: limits, uid: u1}
spec:
  paramKind: {apiVersion: v1, kind: ConfigMap}
  matchConstraints: {resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}]}
  validations: [{expression: "object.spec.containers.size() <= int(params.data.max)"}]
"#;

    #[test]
    fn finds_missing_policies_params_and_compile_errors() {
        let policies = objects(&format!(
            "{LIMITS}---{}",
            r#"
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: broken, uid: u2}
spec:
  matchConstraints: {resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}]}
  validations: [{expression: "object.spec.nosuch("}]
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: crd-params, uid: u3}
spec:
  paramKind: {apiVersion: example.com/v1, kind: Limits}
  matchConstraints: {resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}]}
  validations: [{expression: "true"}]
"#
        ));
        let bindings = objects(
            r#"
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: orphan, uid: b1}
spec: {policyName: nosuch, validationActions: [Deny]}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: limits-missing, uid: b2}
spec: {policyName: limits, validationActions: [Deny], paramRef: {name: absent, namespace: team, parameterNotFoundAction: Deny}}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: limits-present, uid: b3}
spec: {policyName: limits, validationActions: [Deny], paramRef: {name: present, namespace: team}}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: limits-per-namespace, uid: b4}
spec: {policyName: limits, validationActions: [Deny], paramRef: {name: absent}}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: broken, uid: b5}
spec: {policyName: broken, validationActions: [Deny]}
"#,
        );
        let mut b = crate::policy::snapshot::SnapshotBuilder::new();
        for o in policies.iter().chain(&bindings) {
            let loaded = crate::source::folder::Loaded {
                file: "t".into(),
                document: 0,
                field_errors: Vec::new(),
                object: Json::clone(o),
            };
            crate::source::add_loaded(&mut b, loaded, crate::source::Check::Nothing).unwrap();
        }
        let snapshot = b.build(crate::cel::NEWEST_MINOR);
        let found = problems(
            &policies,
            &bindings,
            &snapshot,
            |k| {
                assert_eq!((k.api_version, k.kind), ("v1", "ConfigMap"));
                Some((Scope::Namespaced, k.name == "present"))
            },
            &Default::default(),
            &[],
        );
        let summary: Vec<(&str, &str)> =
            found.iter().map(|p| (p.name.as_str(), p.reason)).collect();
        assert_eq!(
            summary,
            [
                ("broken", "InvalidPolicy"),
                ("crd-params", "ParamKindNotFound"),
                ("limits-missing", "ParamNotFound"),
                ("orphan", "PolicyNotFound"),
            ]
        );
        let missing = &found[2];
        assert_eq!(missing.uid, "b2");
        assert!(
            missing.message.contains("\"absent\" in namespace \"team\"")
                && missing.message.contains("parameterNotFoundAction Deny"),
            "{}",
            missing.message
        );
        assert!(
            found[0]
                .message
                .starts_with("spec.validations[0].expression:"),
            "{}",
            found[0].message
        );
    }

    #[test]
    fn a_param_kind_that_cannot_be_listed_is_named() {
        let policies = objects(LIMITS);
        let snapshot =
            crate::policy::snapshot::SnapshotBuilder::new().build(crate::cel::NEWEST_MINOR);
        let errors = [(
            ("v1".to_string(), "ConfigMap".to_string()),
            "configmaps is forbidden".to_string(),
        )]
        .into_iter()
        .collect();
        let found = problems(&policies, &[], &snapshot, |_| None, &errors, &[]);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].reason, "ParamKindNotListed");
        assert!(found[0].message.contains("configmaps is forbidden"));
        assert!(found[0].message.contains("rbac.paramResources"));
    }

    /// With `--param-namespaces team-a`: a paramRef (by name or selector) into another
    /// namespace, and a per-request lookup whose binding selects namespaces outside the list,
    /// are reported; a per-request lookup confined to listed namespaces is not.
    #[test]
    fn params_outside_the_watched_namespaces_are_reported() {
        let policies = objects(LIMITS);
        let bindings = objects(
            r#"
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: in-watched, uid: b1}
spec: {policyName: limits, validationActions: [Deny], paramRef: {name: limits, namespace: team-a}}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: elsewhere, uid: b2}
spec: {policyName: limits, validationActions: [Deny], paramRef: {name: limits, namespace: team-b, parameterNotFoundAction: Deny}}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: selected-elsewhere, uid: b3}
spec: {policyName: limits, validationActions: [Deny], paramRef: {selector: {}, namespace: team-b}}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: per-request-confined, uid: b4}
spec:
  policyName: limits
  validationActions: [Deny]
  paramRef: {name: limits}
  matchResources: {namespaceSelector: {matchLabels: {team: a}}}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: per-request-wide, uid: b5}
spec:
  policyName: limits
  validationActions: [Deny]
  paramRef: {name: limits}
  matchResources: {namespaceSelector: {matchExpressions: [{key: team, operator: Exists}]}}
"#,
        );
        let namespaces = objects(
            r#"
apiVersion: v1
kind: Namespace
metadata: {name: team-a, labels: {team: a}}
---
apiVersion: v1
kind: Namespace
metadata: {name: team-b, labels: {team: b}}
---
apiVersion: v1
kind: Namespace
metadata: {name: kube-system}
"#,
        );
        let mut b = crate::policy::snapshot::SnapshotBuilder::new();
        for o in policies.iter().chain(&bindings).chain(&namespaces) {
            let loaded = crate::source::folder::Loaded {
                file: "t".into(),
                field_errors: Vec::new(),
                document: 0,
                object: Json::clone(o),
            };
            crate::source::add_loaded(&mut b, loaded, crate::source::Check::Nothing).unwrap();
        }
        let snapshot = b.build(crate::cel::NEWEST_MINOR);
        let find = |watched: &[String]| {
            problems(
                &policies,
                &bindings,
                &snapshot,
                |_| Some((Scope::Namespaced, true)),
                &Default::default(),
                watched,
            )
        };
        assert_eq!(find(&[]), [], "every namespace watched");
        let found = find(&["team-a".to_string()]);
        let summary: Vec<(&str, &str)> =
            found.iter().map(|p| (p.name.as_str(), p.reason)).collect();
        assert_eq!(
            summary,
            [
                ("elsewhere", NAMESPACE_NOT_WATCHED),
                ("per-request-wide", NAMESPACE_NOT_WATCHED),
                ("selected-elsewhere", NAMESPACE_NOT_WATCHED),
            ]
        );
        assert_eq!(
            found[0].message,
            "paramRef names ConfigMap params in namespace \"team-b\", which celgate does not watch (--param-namespaces \"team-a\"): they count as missing, requests the policy matches fail with parameterNotFoundAction Deny. Add the namespace to --param-namespaces (Helm value rbac.paramResources[].namespaces)"
        );
        // kube-system has no team label: the binding does not select it.
        assert!(
            found[1]
                .message
                .contains("requests in \"team-b\" (selected")
                && found[1].message.contains("the binding is skipped"),
            "{}",
            found[1].message
        );
        // Cluster-scoped param kinds are watched whole: nothing to report.
        let cluster = problems(
            &policies,
            &bindings,
            &snapshot,
            |_| Some((Scope::Cluster, true)),
            &Default::default(),
            &["team-a".to_string()],
        );
        assert_eq!(cluster, []);
    }

    #[test]
    fn at_most_five_names_are_quoted() {
        let names = ["a", "b", "c", "d", "e", "f", "g"];
        assert_eq!(
            quoted(names.iter().copied(), 5),
            "\"a\", \"b\", \"c\", \"d\", \"e\", 2 more"
        );
        assert_eq!(quoted(names[..2].iter().copied(), 5), "\"a\", \"b\"");
    }

    #[test]
    fn long_messages_are_cut_for_events() {
        let text = "é".repeat(2000);
        let cut = note(text);
        assert!(cut.len() < 1100 && cut.ends_with("more bytes)"));
    }
}
