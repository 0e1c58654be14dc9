//! core/v1 defaulters: `pkg/apis/core/v1/defaults.go` (`SetDefaults_<Type>`) and the
//! declarative `+default=` markers of `k8s.io/api/core/v1` (`zz_generated.defaults.go`), by
//! the OpenAPI definition name of the type they run on. Also the two Go value structs every
//! encoded object shows (a container's `resources: {}`, an ObjectMeta's `creationTimestamp:
//! null`), which the generated walk reaches with the type.

use serde_json::{Map, Value as Json};

use super::image::image_tag;
use super::{
    child, default_int, default_ptr, default_str, is_empty, is_empty_str, is_unset, str_of,
    value_struct, Defaulter, Obj,
};

/// The defaulter of the core/v1 type `name`.
pub(super) fn defaulter(name: &str) -> Option<Defaulter> {
    Some(match name {
        "Pod" => pod,
        "PodSpec" => pod_spec,
        "PodTemplate" => pod_template_kind,
        "PodTemplateSpec" => pod_template_spec,
        "ReplicationController" => replication_controller,
        "Container" | "EphemeralContainer" => container,
        "ContainerPort" | "ServicePort" | "EndpointPort" => protocol_tcp,
        "Probe" => probe,
        "HTTPGetAction" => http_get_action,
        "Volume" => volume,
        "HostPathVolumeSource" => host_path,
        "SecretVolumeSource"
        | "ConfigMapVolumeSource"
        | "DownwardAPIVolumeSource"
        | "ProjectedVolumeSource" => default_mode,
        "ServiceAccountTokenProjection" => service_account_token,
        "ObjectFieldSelector" => object_field_selector,
        "Service" => service,
        "Secret" => secret,
        "Namespace" => namespace,
        "NamespaceStatus" => namespace_status,
        "PersistentVolume" => persistent_volume,
        "PersistentVolumeClaim" => persistent_volume_claim,
        "PersistentVolumeClaimSpec" => persistent_volume_claim_spec,
        "PersistentVolumeClaimTemplate" => pvc_template,
        "LimitRangeItem" => limit_range_item,
        "Node" => node,
        "NodeStatus" => node_status,
        _ => return None,
    })
}

/// `SetDefaults_Pod` (the generated walk also defaults the value struct `spec`).
fn pod(m: &mut Obj) {
    let Some(spec) = value_struct(m, "spec") else {
        return;
    };
    // Requests default to limits, on a Pod only (not a template), for containers and init
    // containers.
    for list in ["containers", "initContainers"] {
        for c in objects_mut(spec, list) {
            if let Some(resources) = value_struct(c, "resources") {
                requests_from_limits(resources);
            }
        }
    }
    // `PodLevelResources` is alpha (off) in 1.32: no pod-level requests or limits.
    default_ptr(spec, "enableServiceLinks", true);
    if spec.get("hostNetwork") == Some(&Json::Bool(true)) {
        for list in ["containers", "initContainers"] {
            for c in objects_mut(spec, list) {
                for p in objects_mut(c, "ports") {
                    if super::is_zero(p, "hostPort") {
                        let port = p.get("containerPort").cloned().unwrap_or(Json::from(0));
                        p.insert("hostPort".into(), port);
                    }
                }
            }
        }
    }
}

/// A container's requests missing from its limits copied from them (`limits` non-nil).
fn requests_from_limits(resources: &mut Obj) {
    let Some(Json::Object(limits)) = resources.get("limits") else {
        return;
    };
    let limits = limits.clone();
    let mut requests = match resources.get("requests") {
        Some(Json::Object(r)) => r.clone(),
        _ => Map::new(),
    };
    for (k, v) in limits {
        requests.entry(k).or_insert(v);
    }
    // An empty map is left out by the encoder (`omitempty`).
    if !requests.is_empty() {
        resources.insert("requests".into(), Json::Object(requests));
    }
}

/// `SetDefaults_PodSpec`.
fn pod_spec(m: &mut Obj) {
    default_str(m, "dnsPolicy", "ClusterFirst");
    default_str(m, "restartPolicy", "Always");
    default_ptr(m, "securityContext", Json::Object(Map::new()));
    default_ptr(m, "terminationGracePeriodSeconds", 30);
    default_str(m, "schedulerName", "default-scheduler");
}

/// A PodTemplate's value struct `template` (its PodSpec defaulted by the walk).
fn pod_template_kind(m: &mut Obj) {
    if let Some(t) = value_struct(m, "template") {
        pod_template_spec(t);
    }
}

/// A PodTemplateSpec's value structs `metadata` and `spec`, which the encoder writes and
/// the generated walk defaults (`SetDefaults_PodSpec(&in.Spec.Template.Spec)`).
pub(super) fn pod_template_spec(m: &mut Obj) {
    value_struct(m, "metadata");
    value_struct(m, "spec");
}

/// `SetDefaults_ReplicationController` and the declarative `replicas` default (1).
fn replication_controller(m: &mut Obj) {
    let labels = m
        .get("spec")
        .and_then(|s| s.get("template"))
        .and_then(|t| t.get("metadata"))
        .and_then(|md| md.get("labels"))
        .filter(|l| l.is_object())
        .cloned();
    if let Some(labels) = labels {
        if let Some(spec) = value_struct(m, "spec") {
            if is_empty(spec, "selector") {
                spec.insert("selector".into(), labels.clone());
            }
        }
        if let Some(meta) = value_struct(m, "metadata") {
            if is_empty(meta, "labels") {
                meta.insert("labels".into(), labels);
            }
        }
    }
    if let Some(spec) = value_struct(m, "spec") {
        default_ptr(spec, "replicas", 1);
    }
}

/// `SetDefaults_Container` (and `SetDefaults_EphemeralContainer`, the same on its common
/// fields); `resources` is a value struct the encoder writes as `{}`.
fn container(m: &mut Obj) {
    if is_empty_str(m, "imagePullPolicy") {
        let policy = match image_tag(str_of(m, "image")) {
            Some("latest") => "Always",
            _ => "IfNotPresent",
        };
        m.insert("imagePullPolicy".into(), Json::from(policy));
    }
    default_str(m, "terminationMessagePath", "/dev/termination-log");
    default_str(m, "terminationMessagePolicy", "File");
    value_struct(m, "resources");
}

/// The declarative `+default="TCP"` of ContainerPort, ServicePort and EndpointPort.
fn protocol_tcp(m: &mut Obj) {
    default_str(m, "protocol", "TCP");
}

/// `SetDefaults_Probe`.
fn probe(m: &mut Obj) {
    default_int(m, "timeoutSeconds", 1);
    default_int(m, "periodSeconds", 10);
    default_int(m, "successThreshold", 1);
    default_int(m, "failureThreshold", 3);
}

/// `SetDefaults_HTTPGetAction`.
fn http_get_action(m: &mut Obj) {
    default_str(m, "path", "/");
    default_str(m, "scheme", "HTTP");
}

/// `SetDefaults_Volume`: a volume without a source is an `emptyDir` (the image volume's
/// pull policy needs `ImageVolume`, alpha in 1.32).
fn volume(m: &mut Obj) {
    let has_source = m.iter().any(|(k, v)| k != "name" && !v.is_null());
    if !has_source {
        m.insert("emptyDir".into(), Json::Object(Map::new()));
    }
}

/// `SetDefaults_HostPathVolumeSource`: `type` is `HostPathUnset` (`""`).
fn host_path(m: &mut Obj) {
    default_ptr(m, "type", "");
}

/// `SetDefaults_{Secret,ConfigMap,DownwardAPI,Projected}VolumeSource`: mode 0644.
fn default_mode(m: &mut Obj) {
    default_ptr(m, "defaultMode", 0o644);
}

/// `SetDefaults_ServiceAccountTokenProjection`: an hour.
fn service_account_token(m: &mut Obj) {
    default_ptr(m, "expirationSeconds", 3600);
}

/// `SetDefaults_ObjectFieldSelector`.
fn object_field_selector(m: &mut Obj) {
    default_str(m, "apiVersion", "v1");
}

/// `SetDefaults_Service`.
fn service(m: &mut Obj) {
    let Some(spec) = value_struct(m, "spec") else {
        return;
    };
    default_str(spec, "sessionAffinity", "None");
    match str_of(spec, "sessionAffinity") {
        "None" => {
            spec.remove("sessionAffinityConfig");
        }
        "ClientIP" => {
            let timeout = spec
                .get("sessionAffinityConfig")
                .and_then(|c| c.get("clientIP"))
                .and_then(|c| c.get("timeoutSeconds"))
                .is_some_and(|t| !t.is_null());
            if !timeout {
                let config = serde_json::json!({"clientIP": {"timeoutSeconds": 10800}});
                spec.insert("sessionAffinityConfig".into(), config);
            }
        }
        _ => {}
    }
    default_str(spec, "type", "ClusterIP");
    for p in objects_mut(spec, "ports") {
        default_str(p, "protocol", "TCP");
        let target_unset = match p.get("targetPort") {
            None | Some(Json::Null) => true,
            Some(Json::String(s)) => s.is_empty(),
            Some(Json::Number(n)) => n.as_i64() == Some(0),
            _ => false,
        };
        if target_unset {
            let port = p.get("port").cloned().unwrap_or(Json::from(0));
            p.insert("targetPort".into(), port);
        }
    }
    let ty = str_of(spec, "type").to_string();
    let externally_accessible = ty == "LoadBalancer"
        || ty == "NodePort"
        || (ty == "ClusterIP" && !is_empty(spec, "externalIPs"));
    if externally_accessible {
        default_str(spec, "externalTrafficPolicy", "Cluster");
    }
    if matches!(ty.as_str(), "NodePort" | "LoadBalancer" | "ClusterIP") {
        default_ptr(spec, "internalTrafficPolicy", "Cluster");
    }
    if ty == "LoadBalancer" {
        default_ptr(spec, "allocateLoadBalancerNodePorts", true);
        // `LoadBalancerIPMode` (beta, on): an ingress point with an IP is a VIP.
        let status = value_struct(m, "status").and_then(|s| value_struct(s, "loadBalancer"));
        if let Some(lb) = status {
            for ing in objects_mut(lb, "ingress") {
                if !is_empty_str(ing, "ip") {
                    default_ptr(ing, "ipMode", "VIP");
                }
            }
        }
    }
}

/// `SetDefaults_Secret`.
fn secret(m: &mut Obj) {
    default_str(m, "type", "Opaque");
}

/// `SetDefaults_Namespace`: the `kubernetes.io/metadata.name` label follows the name (not
/// for a nameless, generateName namespace); the value struct `status` is defaulted too.
fn namespace(m: &mut Obj) {
    if let Some(meta) = child(m, "metadata") {
        let name = str_of(meta, "name").to_string();
        if !name.is_empty() {
            if let Some(labels) = value_struct(meta, "labels") {
                labels.insert("kubernetes.io/metadata.name".into(), Json::from(name));
            }
        }
    }
    value_struct(m, "status");
}

/// `SetDefaults_NamespaceStatus`.
fn namespace_status(m: &mut Obj) {
    default_str(m, "phase", "Active");
}

/// `SetDefaults_PersistentVolume`.
fn persistent_volume(m: &mut Obj) {
    if let Some(status) = value_struct(m, "status") {
        default_str(status, "phase", "Pending");
    }
    if let Some(spec) = value_struct(m, "spec") {
        default_str(spec, "persistentVolumeReclaimPolicy", "Retain");
        default_ptr(spec, "volumeMode", "Filesystem");
    }
}

/// `SetDefaults_PersistentVolumeClaim` (its value struct `spec` is defaulted too).
fn persistent_volume_claim(m: &mut Obj) {
    if let Some(status) = value_struct(m, "status") {
        default_str(status, "phase", "Pending");
    }
    value_struct(m, "spec");
}

/// `SetDefaults_PersistentVolumeClaimSpec`.
fn persistent_volume_claim_spec(m: &mut Obj) {
    default_ptr(m, "volumeMode", "Filesystem");
}

/// An ephemeral volume's claim template: its value structs `metadata` and `spec`.
fn pvc_template(m: &mut Obj) {
    value_struct(m, "metadata");
    value_struct(m, "spec");
}

/// `SetDefaults_LimitRangeItem`: a container limit's default from its max, its default
/// request from its default, then from its min.
fn limit_range_item(m: &mut Obj) {
    if str_of(m, "type") != "Container" {
        return;
    }
    let map = |m: &Obj, k: &str| match m.get(k) {
        Some(Json::Object(o)) => o.clone(),
        _ => Map::new(),
    };
    let mut default = map(m, "default");
    let mut default_request = map(m, "defaultRequest");
    for (k, v) in map(m, "max") {
        default.entry(k).or_insert(v);
    }
    for (k, v) in &default {
        default_request.entry(k.clone()).or_insert(v.clone());
    }
    for (k, v) in map(m, "min") {
        default_request.entry(k).or_insert(v);
    }
    for (k, v) in [("default", default), ("defaultRequest", default_request)] {
        if !v.is_empty() {
            m.insert(k.into(), Json::Object(v));
        }
    }
}

/// A Node's value struct `status`.
fn node(m: &mut Obj) {
    value_struct(m, "status");
}

/// `SetDefaults_NodeStatus`: allocatable is the capacity when unset.
fn node_status(m: &mut Obj) {
    if is_unset(m, "allocatable") {
        if let Some(capacity @ Json::Object(_)) = m.get("capacity") {
            let capacity = capacity.clone();
            m.insert("allocatable".into(), capacity);
        }
    }
}

/// An ObjectMeta as Go encodes it: its value struct `creationTimestamp` is `null` when
/// zero.
pub(super) fn object_meta(m: &mut Obj) {
    if !m.contains_key("creationTimestamp") {
        m.insert("creationTimestamp".into(), Json::Null);
    }
}

/// The objects of the list field `k`.
pub(super) fn objects_mut<'a>(m: &'a mut Obj, k: &str) -> impl Iterator<Item = &'a mut Obj> {
    m.get_mut(k)
        .and_then(Json::as_array_mut)
        .into_iter()
        .flatten()
        .filter_map(Json::as_object_mut)
}
