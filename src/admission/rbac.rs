//! The offline authorizer: evaluates the RBAC objects among the loaded objects (Roles,
//! ClusterRoles, RoleBindings, ClusterRoleBindings) with Kubernetes' RBAC rules, plus what
//! every cluster has: `system:masters` may do everything (bound to `cluster-admin`), and the
//! bootstrap roles that matter to checks (`system:public-info-viewer`, `system:discovery`,
//! `system:basic-user`).

use std::sync::Arc;

use serde_json::Value as Json;

use super::request::UserInfo;
use crate::cel::k8s::authz::{
    Attributes, AuthorizeError, Authorizer, Decision, Principal, Target, Verdict,
};

/// A user and groups checks are made for.
#[derive(Debug, Clone)]
struct Identity {
    name: String,
    groups: Vec<String>,
}

/// RBAC over a fixed set of objects, for one request's user.
#[derive(Debug)]
pub struct RbacAuthorizer {
    objects: Arc<Vec<Arc<Json>>>,
    user: UserInfo,
}

impl RbacAuthorizer {
    pub fn new(objects: Arc<Vec<Arc<Json>>>, user: UserInfo) -> Self {
        RbacAuthorizer { objects, user }
    }

    fn identity(&self, principal: &Principal) -> Identity {
        let user = principal.user(&self.user);
        Identity {
            name: user.username,
            groups: user.groups,
        }
    }
}

fn strings(v: &Json) -> Vec<&str> {
    v.as_array()
        .map(|a| a.iter().filter_map(Json::as_str).collect())
        .unwrap_or_default()
}

fn subject_matches(subject: &Json, who: &Identity, binding_namespace: &str) -> bool {
    let name = subject["name"].as_str().unwrap_or("");
    match subject["kind"].as_str().unwrap_or("") {
        "User" => name == who.name,
        "Group" => who.groups.iter().any(|g| g == name),
        "ServiceAccount" => {
            let ns = subject["namespace"]
                .as_str()
                .filter(|n| !n.is_empty())
                .unwrap_or(binding_namespace);
            who.name == format!("system:serviceaccount:{ns}:{name}")
        }
        _ => false,
    }
}

fn has(list: &[&str], want: &str) -> bool {
    list.iter().any(|x| *x == "*" || *x == want)
}

/// Kubernetes' `rbac.ResourceMatches`: `*`, an exact `resource[/subresource]`, or
/// `*/subresource`.
fn resource_matches(rule: &[&str], resource: &str, subresource: &str) -> bool {
    let combined = if subresource.is_empty() {
        resource.to_string()
    } else {
        format!("{resource}/{subresource}")
    };
    rule.iter().any(|r| {
        *r == "*" || *r == combined || (!subresource.is_empty() && *r == format!("*/{subresource}"))
    })
}

/// Whether one policy rule allows the attributes, as RBAC's `RuleAllows`.
fn rule_allows(rule: &Json, attrs: &Attributes) -> bool {
    let verbs = strings(&rule["verbs"]);
    if !has(&verbs, &attrs.verb) {
        return false;
    }
    match &attrs.target {
        Target::Path(path) => strings(&rule["nonResourceURLs"]).iter().any(|u| {
            *u == "*" || *u == path || (u.ends_with('*') && path.starts_with(&u[..u.len() - 1]))
        }),
        Target::Resource(r) => {
            let names = strings(&rule["resourceNames"]);
            has(&strings(&rule["apiGroups"]), &r.group)
                && resource_matches(&strings(&rule["resources"]), &r.resource, &r.subresource)
                && (names.is_empty() || names.contains(&r.name.as_str()))
        }
    }
}

/// The bootstrap ClusterRoles and their bindings that every cluster has.
fn bootstrap() -> &'static [(&'static str, &'static str, Json)] {
    use std::sync::OnceLock;
    static B: OnceLock<Vec<(&'static str, &'static str, Json)>> = OnceLock::new();
    B.get_or_init(|| {
        vec![
            (
                "cluster-admin",
                "system:masters",
                serde_json::json!([{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}, {"nonResourceURLs": ["*"], "verbs": ["*"]}]),
            ),
            (
                "system:public-info-viewer",
                "system:authenticated",
                serde_json::json!([{"nonResourceURLs": ["/healthz", "/livez", "/readyz", "/version", "/version/"], "verbs": ["get"]}]),
            ),
            (
                "system:public-info-viewer",
                "system:unauthenticated",
                serde_json::json!([{"nonResourceURLs": ["/healthz", "/livez", "/readyz", "/version", "/version/"], "verbs": ["get"]}]),
            ),
            (
                "system:discovery",
                "system:authenticated",
                serde_json::json!([{"nonResourceURLs": ["/api", "/api/*", "/apis", "/apis/*", "/healthz", "/livez", "/openapi", "/openapi/*", "/readyz", "/version", "/version/"], "verbs": ["get"]}]),
            ),
            (
                "system:basic-user",
                "system:authenticated",
                serde_json::json!([
                    {"apiGroups": ["authorization.k8s.io"], "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"], "verbs": ["create"]},
                    {"apiGroups": ["authentication.k8s.io"], "resources": ["selfsubjectreviews"], "verbs": ["create"]}
                ]),
            ),
        ]
    })
}

impl RbacAuthorizer {
    fn role_rules(&self, kind: &str, name: &str, namespace: &str) -> Vec<&Json> {
        self.objects
            .iter()
            .filter(|o| {
                o["kind"].as_str() == Some(kind)
                    && o["metadata"]["name"].as_str() == Some(name)
                    && (kind == "ClusterRole"
                        || o["metadata"]["namespace"].as_str() == Some(namespace))
            })
            .flat_map(|o| {
                o["rules"]
                    .as_array()
                    .map(|r| r.iter().collect::<Vec<_>>())
                    .unwrap_or_default()
            })
            .collect()
    }
}

impl Authorizer for RbacAuthorizer {
    fn authorize(&self, attrs: &Attributes) -> Result<Decision, AuthorizeError> {
        Ok(self.decide(attrs))
    }
}

impl RbacAuthorizer {
    fn decide(&self, attrs: &Attributes) -> Decision {
        let who = self.identity(&attrs.principal);
        let target_namespace = match &attrs.target {
            Target::Resource(r) => r.namespace.as_str(),
            Target::Path(_) => "",
        };
        for (role, group, rules) in bootstrap() {
            if who.groups.iter().any(|g| g == group)
                && rules
                    .as_array()
                    .is_some_and(|r| r.iter().any(|rule| rule_allows(rule, attrs)))
            {
                return allow(format!("RBAC: allowed by ClusterRoleBinding \"{role}\" of ClusterRole \"{role}\" to Group \"{group}\""));
            }
        }
        for binding in self.objects.iter() {
            let kind = binding["kind"].as_str().unwrap_or("");
            if kind != "ClusterRoleBinding" && kind != "RoleBinding" {
                continue;
            }
            let binding_ns = binding["metadata"]["namespace"].as_str().unwrap_or("");
            // A RoleBinding grants only within its namespace.
            if kind == "RoleBinding"
                && (target_namespace != binding_ns || matches!(attrs.target, Target::Path(_)))
            {
                continue;
            }
            let subjects = binding["subjects"].as_array().cloned().unwrap_or_default();
            if !subjects
                .iter()
                .any(|s| subject_matches(s, &who, binding_ns))
            {
                continue;
            }
            let role_kind = binding["roleRef"]["kind"].as_str().unwrap_or("");
            let role_name = binding["roleRef"]["name"].as_str().unwrap_or("");
            if self
                .role_rules(role_kind, role_name, binding_ns)
                .into_iter()
                .any(|rule| rule_allows(rule, attrs))
            {
                let name = binding["metadata"]["name"].as_str().unwrap_or("");
                return allow(format!(
                    "RBAC: allowed by {kind} \"{name}\" of {role_kind} \"{role_name}\""
                ));
            }
        }
        Decision {
            verdict: Verdict::NoOpinion,
            reason: String::new(),
            error: None,
        }
    }
}

fn allow(reason: String) -> Decision {
    Decision {
        verdict: Verdict::Allow,
        reason,
        error: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cel::k8s::authz::ResourceAttributes;
    use serde_json::json;

    fn authz(user: &str, groups: &[&str]) -> RbacAuthorizer {
        let objects = vec![
            json!({"kind": "ClusterRole", "metadata": {"name": "pod-reader"}, "rules": [{"apiGroups": [""], "resources": ["pods", "pods/log"], "verbs": ["get", "list"]}]}),
            json!({"kind": "RoleBinding", "metadata": {"name": "rb", "namespace": "team"}, "roleRef": {"kind": "ClusterRole", "name": "pod-reader"}, "subjects": [{"kind": "User", "name": "alice"}, {"kind": "ServiceAccount", "name": "bot"}]}),
            json!({"kind": "Role", "metadata": {"name": "cm", "namespace": "team"}, "rules": [{"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["one"], "verbs": ["*"]}]}),
            json!({"kind": "RoleBinding", "metadata": {"name": "rb2", "namespace": "team"}, "roleRef": {"kind": "Role", "name": "cm"}, "subjects": [{"kind": "Group", "name": "devs"}]}),
        ];
        let user = UserInfo {
            username: user.into(),
            groups: groups.iter().map(|g| g.to_string()).collect(),
            ..Default::default()
        };
        RbacAuthorizer::new(Arc::new(objects.into_iter().map(Arc::new).collect()), user)
    }

    fn check(
        a: &RbacAuthorizer,
        principal: Principal,
        verb: &str,
        resource: &str,
        sub: &str,
        ns: &str,
        name: &str,
    ) -> bool {
        let target = Target::Resource(ResourceAttributes {
            resource: resource.into(),
            subresource: sub.into(),
            namespace: ns.into(),
            name: name.into(),
            ..Default::default()
        });
        a.decide(&Attributes {
            principal,
            verb: verb.into(),
            target,
        })
        .verdict
            == Verdict::Allow
    }

    #[test]
    fn rbac_rules() {
        let alice = authz("alice", &["system:authenticated"]);
        assert!(check(
            &alice,
            Principal::RequestUser,
            "get",
            "pods",
            "",
            "team",
            ""
        ));
        assert!(check(
            &alice,
            Principal::RequestUser,
            "get",
            "pods",
            "log",
            "team",
            ""
        ));
        assert!(!check(
            &alice,
            Principal::RequestUser,
            "get",
            "pods",
            "exec",
            "team",
            ""
        ));
        assert!(
            !check(
                &alice,
                Principal::RequestUser,
                "get",
                "pods",
                "",
                "other",
                ""
            ),
            "RoleBinding is namespaced"
        );
        assert!(!check(
            &alice,
            Principal::RequestUser,
            "delete",
            "pods",
            "",
            "team",
            ""
        ));
        let dev = authz("bob", &["devs"]);
        assert!(check(
            &dev,
            Principal::RequestUser,
            "update",
            "configmaps",
            "",
            "team",
            "one"
        ));
        assert!(
            !check(
                &dev,
                Principal::RequestUser,
                "update",
                "configmaps",
                "",
                "team",
                "two"
            ),
            "resourceNames"
        );
        let sa = Principal::ServiceAccount {
            namespace: "team".into(),
            name: "bot".into(),
        };
        assert!(
            check(&dev, sa, "list", "pods", "", "team", ""),
            "service account subject defaults to the binding's namespace"
        );
        let admin = authz("admin", &["system:masters"]);
        assert!(check(
            &admin,
            Principal::RequestUser,
            "delete",
            "nodes",
            "",
            "",
            "n1"
        ));
        let anyone = authz("carol", &["system:authenticated"]);
        let path = Attributes {
            principal: Principal::RequestUser,
            verb: "get".into(),
            target: Target::Path("/healthz".into()),
        };
        assert_eq!(anyone.decide(&path).verdict, Verdict::Allow);
    }
}
