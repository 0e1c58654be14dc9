//! Resource rules (`NamedRuleWithOperations`): operations, API groups and versions, resources
//! with subresource forms, scope and resource names, as `webhook/predicates/rules` matches
//! them (§2.3).

use super::RequestAttributes;
use crate::model::NamedRule;

/// The resource a rule is tested against: the request's own, or an equivalent one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gvr<'a> {
    pub group: &'a str,
    pub version: &'a str,
    pub resource: &'a str,
}

fn has(list: &[String], want: &str) -> bool {
    list.iter().any(|x| x == "*" || x == want)
}

fn is_namespaces(gvr: Gvr<'_>) -> bool {
    gvr.group.is_empty() && gvr.version == "v1" && gvr.resource == "namespaces"
}

/// Whether `rule` matches the request, tested as if its resource were `gvr`.
pub fn rule_matches(rule: &NamedRule, req: &RequestAttributes, gvr: Gvr<'_>) -> bool {
    let scope_ok = match rule.scope.as_deref() {
        None | Some("*") => true,
        Some("Namespaced") => !is_namespaces(gvr) && !req.namespace.is_empty(),
        Some("Cluster") => is_namespaces(gvr) || req.namespace.is_empty(),
        Some(_) => false,
    };
    scope_ok
        && has(&rule.operations, &req.operation)
        && has(&rule.api_groups, gvr.group)
        && has(&rule.api_versions, gvr.version)
        && resource_matches(&rule.resources, gvr.resource, &req.subresource)
        && (rule.resource_names.is_empty() || rule.resource_names.contains(&req.name))
}

/// `pods` matches only the main resource; `pods/*` every subresource and the main resource
/// too; `*/scale` the scale subresource of anything; `*/*` everything; `*` every main resource.
fn resource_matches(entries: &[String], resource: &str, subresource: &str) -> bool {
    entries.iter().any(|entry| {
        let (res, sub) = entry.split_once('/').unwrap_or((entry, ""));
        (res == "*" || res == resource) && (sub == "*" || sub == subresource)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(op: &str, resource: &str, sub: &str, ns: &str, name: &str) -> RequestAttributes {
        RequestAttributes {
            operation: op.into(),
            group: String::new(),
            version: "v1".into(),
            resource: resource.into(),
            subresource: sub.into(),
            namespace: ns.into(),
            name: name.into(),
            ..Default::default()
        }
    }

    fn rule(resources: &[&str]) -> NamedRule {
        NamedRule {
            operations: vec!["*".into()],
            api_groups: vec!["*".into()],
            api_versions: vec!["*".into()],
            resources: resources.iter().map(|r| r.to_string()).collect(),
            ..Default::default()
        }
    }

    fn gvr(r: &RequestAttributes) -> Gvr<'_> {
        Gvr {
            group: &r.group,
            version: &r.version,
            resource: &r.resource,
        }
    }

    /// The subresource forms, as rules_test in Kubernetes tabulates them.
    #[test]
    fn resource_forms() {
        let cases: &[(&[&str], &str, &str, bool)] = &[
            (&["pods"], "pods", "", true),
            (&["pods"], "pods", "status", false),
            (&["pods/*"], "pods", "", true),
            (&["pods/*"], "pods", "exec", true),
            (&["pods/status"], "pods", "status", true),
            (&["pods/status"], "pods", "", false),
            (&["*/scale"], "deployments", "scale", true),
            (&["*/scale"], "deployments", "", false),
            (&["*/*"], "anything", "sub", true),
            (&["*"], "anything", "", true),
            (&["*"], "anything", "sub", false),
            (&["configmaps", "pods/exec"], "pods", "exec", true),
        ];
        for (resources, resource, sub, want) in cases {
            let r = req("CREATE", resource, sub, "ns", "x");
            assert_eq!(
                rule_matches(&rule(resources), &r, gvr(&r)),
                *want,
                "{resources:?} vs {resource}/{sub}"
            );
        }
    }

    #[test]
    fn scope_operations_and_names() {
        let mut r = rule(&["*"]);
        r.scope = Some("Namespaced".into());
        let cm = req("CREATE", "configmaps", "", "ns", "x");
        let pc = req("CREATE", "priorityclasses", "", "", "x");
        let ns = req("UPDATE", "namespaces", "", "ns", "ns");
        assert!(rule_matches(&r, &cm, gvr(&cm)));
        assert!(!rule_matches(&r, &pc, gvr(&pc)));
        assert!(
            !rule_matches(&r, &ns, gvr(&ns)),
            "namespaces are never Namespaced"
        );
        r.scope = Some("Cluster".into());
        assert!(!rule_matches(&r, &cm, gvr(&cm)));
        assert!(rule_matches(&r, &pc, gvr(&pc)));
        assert!(rule_matches(&r, &ns, gvr(&ns)));
        r.scope = Some("Bogus".into());
        assert!(!rule_matches(&r, &cm, gvr(&cm)));

        let mut ops = rule(&["*"]);
        ops.operations = vec!["CREATE".into()];
        let del = req("DELETE", "configmaps", "", "ns", "x");
        assert!(rule_matches(&ops, &cm, gvr(&cm)));
        assert!(!rule_matches(&ops, &del, gvr(&del)));

        let mut names = rule(&["*"]);
        names.resource_names = vec!["x".into()];
        let generated = req("CREATE", "configmaps", "", "ns", "");
        assert!(rule_matches(&names, &cm, gvr(&cm)));
        assert!(
            !rule_matches(&names, &generated, gvr(&generated)),
            "generateName CREATE has no name"
        );
    }
}
