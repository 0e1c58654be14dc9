//! Builds the AdmissionReview the API server would send for a manifest: the resource from the
//! object's apiVersion and kind (the resource registry's built-in kinds, plus the given
//! CRDs), the request namespace and name, the user, default options per operation, and a
//! generated name for a CREATE with `metadata.generateName`. `celgate eval` on a manifest,
//! `celgate test` cases and scans of stored objects build their requests here.

use std::collections::HashMap;

use serde_json::{json, Map, Value as Json};

use crate::matching::registry::Registry;
use celgate_cel::NEWEST_MINOR;

/// Why no AdmissionReview can be built: the texts name the case field or the `celgate eval`
/// flag at fault.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ManifestError {
    /// A CONNECT has no object to build a review from.
    #[error("operation: a CONNECT case needs a review file (review: path)")]
    ConnectNeedsReview,
    /// A case's UPDATE without its old object.
    #[error("oldObject: an UPDATE needs the object as it was (oldObject)")]
    UpdateNeedsOldObject,
    /// Neither an object nor an old object.
    #[error("object: a case needs an object (or a review)")]
    NoObject,
    #[error("object.apiVersion: required")]
    NoApiVersion,
    #[error("object.kind: required")]
    NoKind,
    /// Neither a built-in kind nor one of the given CRDs'.
    #[error("object: unknown kind {kind:?} of {api_version:?}: give its CustomResourceDefinition in the suite's resources")]
    UnknownKind { kind: String, api_version: String },
    /// `celgate eval --operation` names another operation.
    #[error("--operation: expected CREATE, UPDATE or DELETE, got {0:?}")]
    Operation(String),
    /// `celgate eval --operation UPDATE` without `--old`.
    #[error("--operation UPDATE needs --old (the object as it was)")]
    UpdateNeedsOld,
    /// The manifest is not a mapping.
    #[error("the manifest must be a Kubernetes object (a mapping)")]
    NotAnObject,
}

/// The user of a request built without one (`celgate eval`, test cases).
pub const DEFAULT_USER: &str = "celgate-test-user";

/// The kinds a request can be built for: the built-in ones the newest Kubernetes serves, and
/// the given CRDs (which win over a built-in of the same group and kind).
pub struct Resources {
    /// (group, kind) to (plural, namespaced), from CRDs.
    crds: HashMap<(String, String), (String, bool)>,
    /// (group, version, kind) to (plural, namespaced), built-in.
    builtin: HashMap<(String, String, String), (String, bool)>,
}

impl Resources {
    pub fn new<'a>(objects: impl Iterator<Item = &'a Json>) -> Resources {
        let mut crds = HashMap::new();
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
        let registry = Registry::builtin(NEWEST_MINOR);
        let builtin = registry
            .served()
            .map(|e| {
                let namespaced = registry
                    .is_namespaced(&e.group, &e.resource)
                    .unwrap_or(true);
                (
                    (e.group.clone(), e.version.clone(), e.kind.kind.clone()),
                    (e.resource.clone(), namespaced),
                )
            })
            .collect();
        Resources { crds, builtin }
    }

    /// The plural and scope of a kind (a built-in one at any served version when `version`
    /// is not served), `None` when unknown.
    fn lookup(&self, group: &str, version: &str, kind: &str) -> Option<(String, bool)> {
        if let Some(found) = self.crds.get(&(group.to_string(), kind.to_string())) {
            return Some(found.clone());
        }
        let key = (group.to_string(), version.to_string(), kind.to_string());
        self.builtin.get(&key).cloned().or_else(|| {
            self.builtin
                .iter()
                .filter(|((g, _, k), _)| g == group && k == kind)
                .map(|(_, found)| found.clone())
                .min()
        })
    }
}

/// What a request says besides its objects.
#[derive(Debug, Clone)]
pub struct Spec {
    /// CREATE, UPDATE, DELETE (CONNECT needs a review file).
    pub operation: String,
    /// The request namespace of a namespaced kind; the object's, else `default`, when `None`.
    pub namespace: Option<String>,
    /// `request.userInfo` as sent.
    pub user_info: Json,
    pub sub_resource: Option<String>,
    pub dry_run: bool,
    /// `request.options`; the operation's default options when `None`.
    pub options: Option<Json>,
}

fn group_version(api_version: &str) -> (&str, &str) {
    match api_version.split_once('/') {
        Some((g, v)) => (g, v),
        None => ("", api_version),
    }
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

/// The AdmissionReview of `spec`. `index` makes the uid and a generated name deterministic.
pub fn build(
    resources: &Resources,
    spec: &Spec,
    index: usize,
    object: Option<Json>,
    old_object: Option<Json>,
) -> Result<Json, ManifestError> {
    let operation = spec.operation.as_str();
    // A DELETE acts on the existing object: `object` is taken as the old one.
    let (mut object, mut old_object) = match (operation, object, old_object) {
        ("DELETE", Some(o), None) => (None, Some(o)),
        (_, o, old) => (o, old),
    };
    match (operation, &old_object) {
        ("CONNECT", _) => return Err(ManifestError::ConnectNeedsReview),
        ("UPDATE", None) => return Err(ManifestError::UpdateNeedsOldObject),
        _ => {}
    }
    let subject = object
        .as_ref()
        .or(old_object.as_ref())
        .ok_or(ManifestError::NoObject)?;
    let api_version = subject["apiVersion"]
        .as_str()
        .ok_or(ManifestError::NoApiVersion)?
        .to_string();
    let kind = subject["kind"]
        .as_str()
        .ok_or(ManifestError::NoKind)?
        .to_string();
    let (group, version) = group_version(&api_version);
    let (plural, namespaced) =
        resources
            .lookup(group, version, &kind)
            .ok_or_else(|| ManifestError::UnknownKind {
                kind: kind.clone(),
                api_version: api_version.clone(),
            })?;
    let meta_name = subject["metadata"]["name"]
        .as_str()
        .unwrap_or("")
        .to_string();
    let namespace = if kind == "Namespace" && group.is_empty() {
        // A Namespace request carries its own name as namespace (vap-semantics.md C.1).
        meta_name.clone()
    } else if namespaced {
        spec.namespace
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
    // The API server decodes the body into the kind's type, which defaults it, before any
    // admission; the stored old object was defaulted when it was written.
    let typed = crate::matching::registry::Gvk::new(group, version, &kind);
    for o in [object.as_mut(), old_object.as_mut()].into_iter().flatten() {
        crate::mutating::default_object(o, &typed);
    }
    let mut request = Map::new();
    request.insert("uid".into(), Json::String(uid(index, "request")));
    let gvk = json!({"group": group, "version": version, "kind": kind});
    let gvr = json!({"group": group, "version": version, "resource": plural});
    request.insert("kind".into(), gvk.clone());
    request.insert("resource".into(), gvr.clone());
    request.insert("requestKind".into(), gvk);
    request.insert("requestResource".into(), gvr);
    if let Some(sub) = spec.sub_resource.as_ref().filter(|s| !s.is_empty()) {
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
    request.insert("userInfo".into(), spec.user_info.clone());
    request.insert("object".into(), object.unwrap_or(Json::Null));
    request.insert("oldObject".into(), old_object.unwrap_or(Json::Null));
    request.insert("dryRun".into(), Json::Bool(spec.dry_run));
    request.insert(
        "options".into(),
        spec.options
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
/// CRDs known.
pub fn manifest_review<'a>(
    cluster: impl Iterator<Item = &'a Json>,
    m: ManifestRequest,
) -> Result<Json, ManifestError> {
    let operation = match m
        .operation
        .as_deref()
        .map(str::to_ascii_uppercase)
        .as_deref()
    {
        None | Some("CREATE") => "CREATE",
        Some("UPDATE") => "UPDATE",
        Some("DELETE") => "DELETE",
        Some(other) => return Err(ManifestError::Operation(other.to_string())),
    };
    if operation == "UPDATE" && m.old.is_none() {
        return Err(ManifestError::UpdateNeedsOld);
    }
    if !m.object.is_object() {
        return Err(ManifestError::NotAnObject);
    }
    let operation = operation.to_string();
    // The user as given (`system:authenticated` always added), else the plain test user.
    let mut groups = if m.groups.is_empty() && m.user.is_none() {
        Vec::new()
    } else {
        m.groups.clone()
    };
    if !groups.iter().any(|g| g == "system:authenticated") {
        groups.push("system:authenticated".into());
    }
    let spec = Spec {
        operation,
        namespace: m.namespace,
        user_info: json!({
            "username": m.user.as_deref().unwrap_or(DEFAULT_USER),
            "groups": groups,
        }),
        sub_resource: m.sub_resource,
        dry_run: m.dry_run,
        options: None,
    };
    build(&Resources::new(cluster), &spec, 0, Some(m.object), m.old)
}
