//! The offline authorizer: evaluates the RBAC objects among the loaded objects (Roles,
//! ClusterRoles, RoleBindings, ClusterRoleBindings) with Kubernetes' RBAC rules, plus what
//! every cluster has: `system:masters` may do everything (bound to `cluster-admin`), and the
//! bootstrap roles that matter to checks (`system:public-info-viewer`, `system:discovery`,
//! `system:basic-user`).

use std::sync::Arc;

use serde_json::Value as Json;

use super::request::UserInfo;
use celgate_cel::apimachinery::quote::go_quote_str;
use celgate_cel::k8s::authz::{
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
pub(super) struct RbacAuthorizer {
    objects: Arc<Vec<Arc<Json>>>,
    user: UserInfo,
}

impl RbacAuthorizer {
    pub(super) fn new(objects: Arc<Vec<Arc<Json>>>, user: UserInfo) -> Self {
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
    /// The rules of the role a binding refers to, or `None` when no such role exists.
    fn role_rules(&self, kind: &str, name: &str, namespace: &str) -> Option<Vec<&Json>> {
        let mut roles = self
            .objects
            .iter()
            .filter(|o| {
                o["kind"].as_str() == Some(kind)
                    && o["metadata"]["name"].as_str() == Some(name)
                    && (kind == "ClusterRole"
                        || o["metadata"]["namespace"].as_str() == Some(namespace))
            })
            .peekable();
        roles.peek()?;
        Some(
            roles
                .flat_map(|o| o["rules"].as_array().map_or(&[][..], Vec::as_slice))
                .collect(),
        )
    }
}

impl Authorizer for RbacAuthorizer {
    fn authorize(&self, attrs: &Attributes) -> Result<Decision, AuthorizeError> {
        Ok(self.decide(attrs))
    }
}

impl RbacAuthorizer {
    /// The API server's authorizer chain for a user that is not a node: `system:masters`
    /// first (allowed, with no reason), then RBAC, which visits the ClusterRoleBindings and
    /// then the RoleBindings of the target namespace and stops at the first rule that allows.
    /// Reasons are RBAC's texts; a binding of the user whose role does not exist is an error
    /// RBAC reports as the reason of a NoOpinion (not as an evaluation error).
    fn decide(&self, attrs: &Attributes) -> Decision {
        let who = self.identity(&attrs.principal);
        if who.groups.iter().any(|g| g == "system:masters") {
            return allow(String::new());
        }
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
        let bindings = |kind: &'static str| {
            self.objects
                .iter()
                .filter(move |b| b["kind"].as_str() == Some(kind))
        };
        // A RoleBinding grants only within its namespace, and never a non-resource URL.
        let role_bindings = bindings("RoleBinding").filter(|b| {
            matches!(attrs.target, Target::Resource(_))
                && b["metadata"]["namespace"].as_str().unwrap_or("") == target_namespace
        });
        let mut errors: Vec<String> = Vec::new();
        for binding in bindings("ClusterRoleBinding").chain(role_bindings) {
            let kind = binding["kind"].as_str().unwrap_or("");
            let binding_ns = binding["metadata"]["namespace"].as_str().unwrap_or("");
            let subjects = binding["subjects"]
                .as_array()
                .map_or(&[][..], Vec::as_slice);
            let Some(subject) = subjects
                .iter()
                .find(|s| subject_matches(s, &who, binding_ns))
            else {
                continue;
            };
            let role_kind = binding["roleRef"]["kind"].as_str().unwrap_or("");
            let role_name = binding["roleRef"]["name"].as_str().unwrap_or("");
            let Some(rules) = self.role_rules(role_kind, role_name, binding_ns) else {
                let resource = if role_kind == "ClusterRole" {
                    "clusterrole"
                } else {
                    "role"
                };
                let error = format!(
                    "{resource}.rbac.authorization.k8s.io {} not found",
                    go_quote_str(role_name)
                );
                if !errors.contains(&error) {
                    errors.push(error);
                }
                continue;
            };
            if rules.into_iter().any(|rule| rule_allows(rule, attrs)) {
                let name = binding["metadata"]["name"].as_str().unwrap_or("");
                let name = if kind == "RoleBinding" {
                    format!("{name}/{binding_ns}")
                } else {
                    name.to_string()
                };
                return allow(format!(
                    "RBAC: allowed by {kind} {} of {role_kind} {} to {}",
                    go_quote_str(&name),
                    go_quote_str(role_name),
                    describe_subject(subject, binding_ns)
                ));
            }
        }
        // utilerrors.NewAggregate: one message alone, several in brackets.
        let reason = match errors.as_slice() {
            [] => String::new(),
            [one] => format!("RBAC: {one}"),
            many => format!("RBAC: [{}]", many.join(", ")),
        };
        Decision {
            verdict: Verdict::NoOpinion,
            reason,
            error: None,
        }
    }
}

/// RBAC's `describeSubject`: `User "alice"`, `Group "devs"`, `ServiceAccount "name/namespace"`.
fn describe_subject(subject: &Json, binding_namespace: &str) -> String {
    let kind = subject["kind"].as_str().unwrap_or("");
    let name = subject["name"].as_str().unwrap_or("");
    if kind == "ServiceAccount" {
        let ns = subject["namespace"]
            .as_str()
            .filter(|n| !n.is_empty())
            .unwrap_or(binding_namespace);
        return format!("{kind} {}", go_quote_str(&format!("{name}/{ns}")));
    }
    format!("{kind} {}", go_quote_str(name))
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
    use celgate_cel::k8s::authz::ResourceAttributes;
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

    fn reason(a: &RbacAuthorizer, verb: &str, resource: &str, ns: &str) -> (Verdict, String) {
        let d = a.decide(&Attributes {
            principal: Principal::RequestUser,
            verb: verb.into(),
            target: Target::Resource(ResourceAttributes {
                resource: resource.into(),
                namespace: ns.into(),
                ..Default::default()
            }),
        });
        (d.verdict, d.reason)
    }

    #[test]
    fn reasons_are_rbacs_texts() {
        let alice = authz("alice", &["system:authenticated"]);
        assert_eq!(
            reason(&alice, "get", "pods", "team"),
            (
                Verdict::Allow,
                r#"RBAC: allowed by RoleBinding "rb/team" of ClusterRole "pod-reader" to User "alice""#.into()
            )
        );
        let bot = authz("system:serviceaccount:team:bot", &[]);
        assert_eq!(
            reason(&bot, "list", "pods", "team").1,
            r#"RBAC: allowed by RoleBinding "rb/team" of ClusterRole "pod-reader" to ServiceAccount "bot/team""#
        );
        assert_eq!(
            reason(&alice, "delete", "pods", "team"),
            (Verdict::NoOpinion, String::new())
        );
        // system:masters is allowed before RBAC, by an authorizer that gives no reason.
        let admin = authz("admin", &["system:masters"]);
        assert_eq!(
            reason(&admin, "delete", "pods", "x"),
            (Verdict::Allow, String::new())
        );
    }

    #[test]
    fn a_binding_to_a_missing_role_is_reported_in_the_reason() {
        let objects = vec![
            json!({"kind": "ClusterRoleBinding", "metadata": {"name": "crb"}, "roleRef": {"kind": "ClusterRole", "name": "gone"}, "subjects": [{"kind": "User", "name": "alice"}]}),
            json!({"kind": "RoleBinding", "metadata": {"name": "rb", "namespace": "team"}, "roleRef": {"kind": "Role", "name": "absent"}, "subjects": [{"kind": "User", "name": "alice"}]}),
            json!({"kind": "RoleBinding", "metadata": {"name": "other", "namespace": "team"}, "roleRef": {"kind": "Role", "name": "x"}, "subjects": [{"kind": "User", "name": "bob"}]}),
        ];
        let user = UserInfo {
            username: "alice".into(),
            ..Default::default()
        };
        let a = RbacAuthorizer::new(Arc::new(objects.into_iter().map(Arc::new).collect()), user);
        assert_eq!(
            reason(&a, "get", "pods", "team"),
            (
                Verdict::NoOpinion,
                r#"RBAC: [clusterrole.rbac.authorization.k8s.io "gone" not found, role.rbac.authorization.k8s.io "absent" not found]"#.into()
            )
        );
        assert_eq!(
            reason(&a, "get", "pods", "elsewhere").1,
            r#"RBAC: clusterrole.rbac.authorization.k8s.io "gone" not found"#
        );
    }
}
