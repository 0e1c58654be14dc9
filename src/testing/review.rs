//! Builds a case's AdmissionReview as the API server would send it: the resource from the
//! object's apiVersion and kind (a compact table of built-in kinds, plus the suite's CRDs),
//! the request namespace and name, the user, default options per operation, and a generated
//! name for a CREATE with `metadata.generateName`.

use std::collections::BTreeMap;

use serde_json::{json, Map, Value as Json};

use super::Case;

/// Built-in kinds: (group, kind, plural, namespaced).
const BUILTIN: &[(&str, &str, &str, bool)] = &[
    ("", "Pod", "pods", true),
    ("", "Service", "services", true),
    ("", "ConfigMap", "configmaps", true),
    ("", "Secret", "secrets", true),
    ("", "ServiceAccount", "serviceaccounts", true),
    ("", "Endpoints", "endpoints", true),
    ("", "Event", "events", true),
    ("", "LimitRange", "limitranges", true),
    ("", "ResourceQuota", "resourcequotas", true),
    ("", "PersistentVolumeClaim", "persistentvolumeclaims", true),
    ("", "ReplicationController", "replicationcontrollers", true),
    ("", "PodTemplate", "podtemplates", true),
    ("", "Namespace", "namespaces", false),
    ("", "Node", "nodes", false),
    ("", "PersistentVolume", "persistentvolumes", false),
    ("apps", "Deployment", "deployments", true),
    ("apps", "StatefulSet", "statefulsets", true),
    ("apps", "DaemonSet", "daemonsets", true),
    ("apps", "ReplicaSet", "replicasets", true),
    ("apps", "ControllerRevision", "controllerrevisions", true),
    ("batch", "Job", "jobs", true),
    ("batch", "CronJob", "cronjobs", true),
    (
        "autoscaling",
        "HorizontalPodAutoscaler",
        "horizontalpodautoscalers",
        true,
    ),
    (
        "policy",
        "PodDisruptionBudget",
        "poddisruptionbudgets",
        true,
    ),
    (
        "networking.k8s.io",
        "NetworkPolicy",
        "networkpolicies",
        true,
    ),
    ("networking.k8s.io", "Ingress", "ingresses", true),
    ("networking.k8s.io", "IngressClass", "ingressclasses", false),
    ("discovery.k8s.io", "EndpointSlice", "endpointslices", true),
    ("coordination.k8s.io", "Lease", "leases", true),
    ("rbac.authorization.k8s.io", "Role", "roles", true),
    (
        "rbac.authorization.k8s.io",
        "RoleBinding",
        "rolebindings",
        true,
    ),
    (
        "rbac.authorization.k8s.io",
        "ClusterRole",
        "clusterroles",
        false,
    ),
    (
        "rbac.authorization.k8s.io",
        "ClusterRoleBinding",
        "clusterrolebindings",
        false,
    ),
    ("storage.k8s.io", "StorageClass", "storageclasses", false),
    (
        "scheduling.k8s.io",
        "PriorityClass",
        "priorityclasses",
        false,
    ),
    ("node.k8s.io", "RuntimeClass", "runtimeclasses", false),
    (
        "apiextensions.k8s.io",
        "CustomResourceDefinition",
        "customresourcedefinitions",
        false,
    ),
    (
        "admissionregistration.k8s.io",
        "ValidatingAdmissionPolicy",
        "validatingadmissionpolicies",
        false,
    ),
    (
        "admissionregistration.k8s.io",
        "ValidatingAdmissionPolicyBinding",
        "validatingadmissionpolicybindings",
        false,
    ),
    (
        "admissionregistration.k8s.io",
        "ValidatingWebhookConfiguration",
        "validatingwebhookconfigurations",
        false,
    ),
    (
        "admissionregistration.k8s.io",
        "MutatingWebhookConfiguration",
        "mutatingwebhookconfigurations",
        false,
    ),
];

/// The kinds a suite knows: built-in ones and its CRDs.
pub(super) struct Resources {
    /// (group, kind) to (plural, namespaced).
    crds: BTreeMap<(String, String), (String, bool)>,
}

impl Resources {
    pub(super) fn new<'a>(objects: impl Iterator<Item = &'a Json>) -> Resources {
        let mut crds = BTreeMap::new();
        for o in objects {
            if o["kind"] != "CustomResourceDefinition" {
                continue;
            }
            let spec = &o["spec"];
            if let (Some(g), Some(k), Some(p)) = (
                spec["group"].as_str(),
                spec["names"]["kind"].as_str(),
                spec["names"]["plural"].as_str(),
            ) {
                let namespaced = spec["scope"] != "Cluster";
                crds.insert((g.to_string(), k.to_string()), (p.to_string(), namespaced));
            }
        }
        Resources { crds }
    }

    /// The plural and scope of a kind, `None` when unknown.
    fn lookup(&self, group: &str, kind: &str) -> Option<(String, bool)> {
        if let Some(found) = self.crds.get(&(group.to_string(), kind.to_string())) {
            return Some(found.clone());
        }
        BUILTIN
            .iter()
            .find(|(g, k, _, _)| *g == group && *k == kind)
            .map(|(_, _, p, n)| (p.to_string(), *n))
    }
}

fn group_version(api_version: &str) -> (&str, &str) {
    match api_version.split_once('/') {
        Some((g, v)) => (g, v),
        None => ("", api_version),
    }
}

/// The user of a case: given, a service account's, or a plain authenticated test user.
fn user_info(case: &Case) -> Json {
    let u = case.user_info.clone().unwrap_or_default();
    let mut out = Map::new();
    let (username, groups) = match &u.service_account {
        Some(sa) => {
            let (ns, name) = (&sa.namespace, &sa.name);
            (
                format!("system:serviceaccount:{ns}:{name}"),
                vec![
                    "system:serviceaccounts".to_string(),
                    format!("system:serviceaccounts:{ns}"),
                    "system:authenticated".to_string(),
                ],
            )
        }
        None => (
            "celgate-test-user".to_string(),
            vec!["system:authenticated".to_string()],
        ),
    };
    out.insert(
        "username".into(),
        Json::String(u.username.clone().unwrap_or(username)),
    );
    if let Some(uid) = &u.uid {
        out.insert("uid".into(), Json::String(uid.clone()));
    }
    out.insert("groups".into(), json!(u.groups.clone().unwrap_or(groups)));
    if let Some(extra) = &u.extra {
        out.insert("extra".into(), json!(extra));
    }
    Json::Object(out)
}

/// Default options per operation (§ `request.options`), as the API server fills them.
fn default_options(operation: &str) -> Json {
    let kind = match operation {
        "CREATE" => "CreateOptions",
        "UPDATE" => "UpdateOptions",
        "DELETE" => "DeleteOptions",
        _ => return Json::Null,
    };
    json!({"apiVersion": "meta.k8s.io/v1", "kind": kind})
}

/// The AdmissionReview of a case. `index` makes the uid and a generated name deterministic.
pub(super) fn build(
    resources: &Resources,
    case: &Case,
    index: usize,
    object: Option<Json>,
    old_object: Option<Json>,
) -> Result<Json, String> {
    let operation = case.operation.map_or("CREATE", |o| o.as_str());
    // A DELETE acts on the existing object: `object` is taken as the old one.
    let (mut object, old_object) = match (operation, object, old_object) {
        ("DELETE", Some(o), None) => (None, Some(o)),
        (_, o, old) => (o, old),
    };
    match (operation, &old_object) {
        ("CONNECT", _) => {
            return Err("operation: a CONNECT case needs a review file (review: path)".into())
        }
        ("UPDATE", None) => {
            return Err("oldObject: an UPDATE needs the object as it was (oldObject)".into())
        }
        _ => {}
    }
    let subject = object
        .as_ref()
        .or(old_object.as_ref())
        .ok_or("object: a case needs an object (or a review)")?;
    let api_version = subject["apiVersion"]
        .as_str()
        .ok_or("object.apiVersion: required")?
        .to_string();
    let kind = subject["kind"]
        .as_str()
        .ok_or("object.kind: required")?
        .to_string();
    let (group, version) = group_version(&api_version);
    let (plural, namespaced) = resources.lookup(group, &kind).ok_or_else(|| {
        format!(
            "object: unknown kind {kind:?} of {api_version:?}: give its CustomResourceDefinition in the suite's resources"
        )
    })?;
    let meta_name = subject["metadata"]["name"]
        .as_str()
        .unwrap_or("")
        .to_string();
    let namespace = if kind == "Namespace" && group.is_empty() {
        // A Namespace request carries its own name as namespace (vap-semantics.md C.1).
        meta_name.clone()
    } else if namespaced {
        case.namespace
            .clone()
            .or_else(|| {
                subject["metadata"]["namespace"]
                    .as_str()
                    .map(str::to_string)
            })
            .unwrap_or_else(|| "default".to_string())
    } else {
        String::new()
    };
    let mut name = meta_name;
    if let Some(o) = object.as_mut().filter(|o| o.is_object()) {
        let meta = &mut o["metadata"];
        if !meta.is_object() {
            *meta = json!({});
        }
        if namespaced && meta["namespace"].is_null() {
            meta["namespace"] = Json::String(namespace.clone());
        }
        if kind == "Namespace" && group.is_empty() && !name.is_empty() {
            if !meta["labels"].is_object() {
                meta["labels"] = json!({});
            }
            meta["labels"]["kubernetes.io/metadata.name"] = Json::String(name.clone());
        }
        // The API server generates the name before validating admission (C.2).
        if operation == "CREATE" && name.is_empty() {
            if let Some(prefix) = meta["generateName"].as_str() {
                name = format!("{prefix}{}", suffix(index));
                meta["name"] = Json::String(name.clone());
                meta["uid"] = Json::String(uid(index, "object"));
                meta["creationTimestamp"] = Json::String("2025-01-01T00:00:00Z".into());
            }
        }
    }
    let mut request = Map::new();
    request.insert("uid".into(), Json::String(uid(index, "request")));
    let gvk = json!({"group": group, "version": version, "kind": kind});
    let gvr = json!({"group": group, "version": version, "resource": plural});
    request.insert("kind".into(), gvk.clone());
    request.insert("resource".into(), gvr.clone());
    request.insert("requestKind".into(), gvk);
    request.insert("requestResource".into(), gvr);
    if let Some(sub) = case.sub_resource.as_ref().filter(|s| !s.is_empty()) {
        request.insert("subResource".into(), Json::String(sub.clone()));
        request.insert("requestSubResource".into(), Json::String(sub.clone()));
    }
    if !name.is_empty() {
        request.insert("name".into(), Json::String(name));
    }
    if !namespace.is_empty() {
        request.insert("namespace".into(), Json::String(namespace));
    }
    request.insert("operation".into(), Json::String(operation.to_string()));
    request.insert("userInfo".into(), user_info(case));
    request.insert("object".into(), object.unwrap_or(Json::Null));
    request.insert("oldObject".into(), old_object.unwrap_or(Json::Null));
    request.insert("dryRun".into(), Json::Bool(case.dry_run.unwrap_or(false)));
    request.insert(
        "options".into(),
        case.options
            .clone()
            .unwrap_or_else(|| default_options(operation)),
    );
    Ok(json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": request,
    }))
}

/// A deterministic uid per case.
fn uid(index: usize, what: &str) -> String {
    let tag = if what == "object" { 1 } else { 0 };
    format!("00000000-0000-4000-8{tag:03}-{index:012}")
}

/// Five characters as the API server's name generator appends.
fn suffix(index: usize) -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut n = index;
    (0..5)
        .map(|_| {
            let c = ALPHABET.get(n % ALPHABET.len()).copied().unwrap_or(b'x');
            n /= ALPHABET.len();
            char::from(c)
        })
        .collect()
}

/// A request described by `celgate eval`'s flags around a plain manifest.
#[derive(Debug, Clone, Default)]
pub struct ManifestRequest {
    /// CREATE (default), UPDATE, DELETE.
    pub operation: Option<String>,
    pub object: Json,
    pub old: Option<Json>,
    pub user: Option<String>,
    /// Groups besides `system:authenticated`, which is always added (as `kubectl --as-group`).
    pub groups: Vec<String>,
    pub namespace: Option<String>,
    pub sub_resource: Option<String>,
    pub dry_run: bool,
}

/// The AdmissionReview the API server would send for `m`, with the kinds of `cluster`'s
/// CRDs known; built as a test case's review is.
pub fn manifest_review<'a>(
    cluster: impl Iterator<Item = &'a Json>,
    m: ManifestRequest,
) -> Result<Json, String> {
    let operation = match m
        .operation
        .as_deref()
        .map(str::to_ascii_uppercase)
        .as_deref()
    {
        None | Some("CREATE") => super::Operation::Create,
        Some("UPDATE") => super::Operation::Update,
        Some("DELETE") => super::Operation::Delete,
        Some(other) => {
            return Err(format!(
                "--operation: expected CREATE, UPDATE or DELETE, got {other:?}"
            ))
        }
    };
    if operation == super::Operation::Update && m.old.is_none() {
        return Err("--operation UPDATE needs --old (the object as it was)".into());
    }
    if !m.object.is_object() {
        return Err("the manifest must be a Kubernetes object (a mapping)".into());
    }
    let user_info = (m.user.is_some() || !m.groups.is_empty()).then(|| {
        let mut groups = m.groups.clone();
        if !groups.iter().any(|g| g == "system:authenticated") {
            groups.push("system:authenticated".into());
        }
        super::UserInfo {
            username: m.user.clone(),
            groups: Some(groups),
            ..Default::default()
        }
    });
    let case = Case {
        name: String::new(),
        operation: Some(operation),
        object: None,
        old_object: None,
        namespace: m.namespace,
        user_info,
        sub_resource: m.sub_resource,
        dry_run: Some(m.dry_run),
        options: None,
        review: None,
        skip: false,
        expect: None,
    };
    build(&Resources::new(cluster), &case, 0, Some(m.object), m.old)
}
