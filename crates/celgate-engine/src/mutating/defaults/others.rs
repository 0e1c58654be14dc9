//! Defaulters of the other API groups: autoscaling (`pkg/apis/autoscaling/v{1,2}/defaults.go`,
//! as of 1.32: no `selectionStrategy` or `tolerance` yet), networking
//! (`pkg/apis/networking/v1/defaults.go`), rbac (`pkg/apis/rbac/v1/defaults.go`) and
//! scheduling (`pkg/apis/scheduling/v1/defaults.go`).

use serde_json::{json, Value as Json};

use super::{child, default_ptr, default_str, is_empty, str_of, value_struct, Defaulter, Obj};

/// The defaulter of `name` in `package` (`api.autoscaling.v2`, ...).
pub(super) fn defaulter(package: &str, name: &str) -> Option<Defaulter> {
    Some(match (package, name) {
        ("api.autoscaling.v1", "HorizontalPodAutoscaler") => hpa_v1,
        ("api.autoscaling.v2", "HorizontalPodAutoscaler") => hpa_v2,
        ("api.networking.v1", "NetworkPolicy") => network_policy,
        ("api.networking.v1", "NetworkPolicyPort") => network_policy_port,
        ("api.networking.v1", "IngressClass") => ingress_class,
        ("api.rbac.v1", "RoleBinding" | "ClusterRoleBinding") => role_binding,
        ("api.rbac.v1", "Subject") => subject,
        ("api.scheduling.v1", "PriorityClass") => priority_class,
        _ => return None,
    })
}

/// autoscaling/v1 `SetDefaults_HorizontalPodAutoscaler`.
fn hpa_v1(m: &mut Obj) {
    if let Some(spec) = value_struct(m, "spec") {
        default_ptr(spec, "minReplicas", 1);
    }
}

/// autoscaling/v2 `SetDefaults_HorizontalPodAutoscaler`: one replica at least, 80% CPU
/// when no metric is given, a behavior's missing scaling rules filled
/// (`SetDefaults_HorizontalPodAutoscalerBehavior`).
fn hpa_v2(m: &mut Obj) {
    let Some(spec) = value_struct(m, "spec") else {
        return;
    };
    default_ptr(spec, "minReplicas", 1);
    if is_empty(spec, "metrics") {
        let cpu = json!([{"type": "Resource", "resource": {"name": "cpu",
            "target": {"type": "Utilization", "averageUtilization": 80}}}]);
        spec.insert("metrics".into(), cpu);
    }
    if let Some(behavior) = child(spec, "behavior") {
        let up = json!({"stabilizationWindowSeconds": 0, "selectPolicy": "Max", "policies": [
            {"type": "Pods", "value": 4, "periodSeconds": 15},
            {"type": "Percent", "value": 100, "periodSeconds": 15}]});
        let down = json!({"selectPolicy": "Max", "policies": [
            {"type": "Percent", "value": 100, "periodSeconds": 15}]});
        for (k, defaults) in [("scaleUp", up), ("scaleDown", down)] {
            let rules = scaling_rules(behavior.get(k), defaults);
            behavior.insert(k.into(), rules);
        }
    }
}

/// `copyHPAScalingRules`: the given rules' set fields over the defaults.
fn scaling_rules(given: Option<&Json>, defaults: Json) -> Json {
    let Json::Object(mut out) = defaults else {
        return defaults;
    };
    if let Some(Json::Object(given)) = given {
        for k in ["selectPolicy", "stabilizationWindowSeconds", "policies"] {
            if let Some(v) = given.get(k).filter(|v| !v.is_null()) {
                out.insert(k.into(), v.clone());
            }
        }
    }
    Json::Object(out)
}

/// `SetDefaults_NetworkPolicy`: policy types are Ingress, and Egress when egress rules
/// are given.
fn network_policy(m: &mut Obj) {
    let Some(spec) = value_struct(m, "spec") else {
        return;
    };
    if is_empty(spec, "policyTypes") {
        let mut types = vec![Json::from("Ingress")];
        if !is_empty(spec, "egress") {
            types.push(Json::from("Egress"));
        }
        spec.insert("policyTypes".into(), Json::Array(types));
    }
}

/// `SetDefaults_NetworkPolicyPort`.
fn network_policy_port(m: &mut Obj) {
    default_ptr(m, "protocol", "TCP");
}

/// `SetDefaults_IngressClass`: parameters are cluster-scoped unless said otherwise.
fn ingress_class(m: &mut Obj) {
    if let Some(params) = child(m, "spec").and_then(|s| child(s, "parameters")) {
        default_ptr(params, "scope", "Cluster");
    }
}

/// `SetDefaults_ClusterRoleBinding`, `SetDefaults_RoleBinding`: the role is RBAC's.
fn role_binding(m: &mut Obj) {
    if let Some(role_ref) = value_struct(m, "roleRef") {
        default_str(role_ref, "apiGroup", "rbac.authorization.k8s.io");
    }
}

/// `SetDefaults_Subject`: users and groups are RBAC's.
fn subject(m: &mut Obj) {
    if matches!(str_of(m, "kind"), "User" | "Group") {
        default_str(m, "apiGroup", "rbac.authorization.k8s.io");
    }
}

/// `SetDefaults_PriorityClass`.
fn priority_class(m: &mut Obj) {
    default_ptr(m, "preemptionPolicy", "PreemptLowerPriority");
}
