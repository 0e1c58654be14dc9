//! Decoding: the [`Request`] of an AdmissionReview (v1 or v1beta1, which share the request's
//! shape), read from its compact document without copying the objects.
//!
//! The review is checked as the API server produces it (k8s.io/api `admission/v1`
//! `AdmissionRequest`), because a field read leniently decides a request: a missing
//! `resource` or an unknown `operation` matched no policy and was allowed. Every field
//! celgate reads must have its type; the fields the type does not mark optional (`uid`,
//! `kind`, `resource`, `operation`, `userInfo`, and the members of `kind` and `resource`)
//! must be present; `operation` must be one of the four. Anything else is a
//! [`ReviewError`] naming the field's JSON path (a 400 from the server).
//!
//! Where Go's decoder (sigs.k8s.io/json, which the API server uses: case-sensitive, unknown
//! fields ignored) accepts a value, so does this: `null` for a string is `""`, for a list or
//! map empty, for `dryRun` false, for `object`/`oldObject`/`options` absent; a `null` in a
//! list of strings is `""`. Two exceptions, for values Go would decode but the API server
//! never sends: a required object (`kind`, `resource`, `userInfo`) that is `null` is
//! refused as missing, and `uid`, the versions, `kind.kind` and `resource.resource` must not
//! be empty (an empty resource matched no policy, as a missing one did). Unknown fields are
//! ignored, as Go ignores them. Two bounds the API server's own reviews always meet: a
//! resource name holds no `/` (it is a path segment, apimachinery's
//! `path.ValidatePathSegmentName`; a subresource has its own field), and the `uid`, copied
//! into the answer and the logs, is at most [`MAX_UID_BYTES`] (the API server's is a UUID).

use std::collections::BTreeMap;

use crate::admission::request::{Request, UserInfo};
use crate::matching::RequestAttributes;
use celgate_cel::json::{quoted, Doc, Item, Ref};

/// A body that is not an AdmissionReview as the API server sends it; the text names the
/// field's JSON path (the server answers 400 with it).
#[derive(Debug, thiserror::Error)]
pub enum ReviewError {
    /// The body is not JSON (or nests deeper than the API server's limit).
    #[error("malformed JSON: {0}")]
    MalformedJson(#[source] serde_json::Error),
    /// The body is JSON but not an object.
    #[error("the body is not a JSON object")]
    NotAnObject,
    /// `apiVersion` is neither `admission.k8s.io/v1` nor `admission.k8s.io/v1beta1` (the
    /// version, Go-quoted and cut as [`Invalid`](ReviewError::Invalid) values are).
    #[error("unsupported AdmissionReview apiVersion {0} (expected admission.k8s.io/v1 or admission.k8s.io/v1beta1)")]
    UnsupportedVersion(String),
    /// `kind` is sent and is not `AdmissionReview` (the kind, Go-quoted).
    #[error("kind: Unsupported value: {0}: supported values: \"AdmissionReview\"")]
    UnsupportedKind(String),
    /// The review has no `request` (or a null one).
    #[error("the AdmissionReview has no request")]
    NoRequest,
    /// A field the type does not mark optional is missing, or empty where the API server
    /// never sends it empty (the field's path).
    #[error("{0}: Required value")]
    Required(String),
    /// A field has another JSON type than its Go type.
    #[error("{path}: Invalid value: must be {expected}, not {got}")]
    WrongType {
        /// The field's JSON path.
        path: String,
        /// The JSON type its Go type reads.
        expected: &'static str,
        /// The JSON type sent.
        got: &'static str,
    },
    /// A string the API server never sends this way (the path, the value Go-quoted and cut
    /// to `MAX_SHOWN` bytes, why).
    #[error("{path}: Invalid value: {value}: {detail}")]
    Invalid {
        /// The field's JSON path.
        path: String,
        /// The value, Go-quoted and cut.
        value: String,
        /// Why it is refused.
        detail: &'static str,
    },
    /// A string longer than the API server ever sends (the path, the most bytes allowed); the
    /// value is not repeated.
    #[error("{path}: Too long: may not be more than {max} bytes")]
    TooLong {
        /// The field's JSON path.
        path: String,
        /// The most bytes allowed.
        max: usize,
    },
    /// `request.operation` is not one of the four (the operation, Go-quoted).
    #[error("request.operation: Unsupported value: {0}: supported values: \"CREATE\", \"UPDATE\", \"DELETE\", \"CONNECT\"")]
    UnsupportedOperation(String),
}

/// The longest `request.uid` accepted. The API server's is a UUID (36 bytes,
/// `types.UID` filled by `uuid.NewUUID` in k8s.io/apiserver's admission webhook request
/// builder); the uid is echoed in every answer and log line, so a megabyte one is refused
/// rather than copied.
pub(super) const MAX_UID_BYTES: usize = 256;

/// The most bytes of a refused value an error repeats.
const MAX_SHOWN: usize = 256;

/// The operations an AdmissionRequest carries (`admission/v1` `Operation`).
const OPERATIONS: [&str; 4] = ["CREATE", "UPDATE", "DELETE", "CONNECT"];

/// The JSON kind of a value, as an error names it.
fn kind_name(item: &Item<'_>) -> &'static str {
    match item {
        Item::Null => "null",
        Item::Bool(_) => "a boolean",
        Item::Int(_) | Item::Double(_) => "a number",
        Item::Str(_) => "a string",
        Item::Array(_) => "an array",
        Item::Object(_) => "an object",
        Item::Skipped { object: true } => "an object (not parsed)",
        Item::Skipped { object: false } => "an array (not parsed)",
    }
}

/// A field path: a parent path and a field name (joined only when an error is built).
#[derive(Clone, Copy)]
struct Path<'p>(&'p str, &'p str);

impl std::fmt::Display for Path<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.0, self.1) {
            ("", name) => f.write_str(name),
            (parent, name) => write!(f, "{parent}.{name}"),
        }
    }
}

/// A key quoted as Go quotes it (cut as [`shown`] cuts it), formatted only when an error is
/// written: paths are built for every label of every review, errors for few.
struct Quoted<'k>(&'k str);

impl std::fmt::Display for Quoted<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&shown(self.0))
    }
}

fn required(path: impl std::fmt::Display) -> ReviewError {
    ReviewError::Required(path.to_string())
}

fn wrong_type(path: impl std::fmt::Display, expected: &'static str, got: &Item<'_>) -> ReviewError {
    ReviewError::WrongType {
        path: path.to_string(),
        expected,
        got: kind_name(got),
    }
}

/// A string field: absent or `null` is `""` (Go leaves the string empty).
fn string<'d>(
    path: impl std::fmt::Display,
    r: Option<Ref<'d, 'd>>,
) -> Result<&'d str, ReviewError> {
    match r.map(|r| r.item()) {
        None | Some(Item::Null) => Ok(""),
        Some(Item::Str(s)) => Ok(s),
        Some(other) => Err(wrong_type(path, "a string", &other)),
    }
}

/// A string field the type does not mark optional: present (`null` is `""`, as in Go).
fn present_string<'d>(path: Path<'_>, r: Option<Ref<'d, 'd>>) -> Result<&'d str, ReviewError> {
    match r {
        None => Err(required(path)),
        r => string(path, r),
    }
}

/// A string that must not be empty either.
fn non_empty<'d>(path: Path<'_>, r: Option<Ref<'d, 'd>>) -> Result<&'d str, ReviewError> {
    match present_string(path, r)? {
        "" => Err(required(path)),
        s => Ok(s),
    }
}

/// An optional object (`object`, `oldObject`, `options`, `requestKind`...): absent or `null`
/// is `None`.
fn optional_object<'d>(
    path: Path<'_>,
    r: Option<Ref<'d, 'd>>,
) -> Result<Option<Ref<'d, 'd>>, ReviewError> {
    match r.map(|r| (r, r.item())) {
        None | Some((_, Item::Null)) => Ok(None),
        Some((r, Item::Object(_))) => Ok(Some(r)),
        Some((_, other)) => Err(wrong_type(path, "an object", &other)),
    }
}

/// An object the type does not mark optional.
fn required_object<'d>(path: Path<'_>, r: Option<Ref<'d, 'd>>) -> Result<Ref<'d, 'd>, ReviewError> {
    optional_object(path, r)?.ok_or_else(|| required(path))
}

/// A list of strings: absent or `null` is empty, a `null` element `""` (as in Go).
fn strings(
    path: impl std::fmt::Display,
    r: Option<Ref<'_, '_>>,
) -> Result<Vec<String>, ReviewError> {
    let Some(r) = r else {
        return Ok(Vec::new());
    };
    match r.item() {
        Item::Null => Ok(Vec::new()),
        Item::Array(_) => r
            .children()
            .enumerate()
            .map(|(i, x)| match x.item() {
                Item::Null => Ok(String::new()),
                Item::Str(s) => Ok(s.to_string()),
                other => Err(wrong_type(format!("{path}[{i}]"), "a string", &other)),
            })
            .collect(),
        other => Err(wrong_type(path, "a list of strings", &other)),
    }
}

/// `value` Go-quoted, cut to [`MAX_SHOWN`] bytes (on a character boundary) first.
fn shown(value: &str) -> String {
    let mut cut = value.len().min(MAX_SHOWN);
    while !value.is_char_boundary(cut) {
        cut -= 1;
    }
    quoted(&value[..cut])
}

/// A resource name: a path segment, so no `/` (apimachinery's `ValidatePathSegmentName`).
fn resource_name<'d>(path: &str, name: &'d str) -> Result<&'d str, ReviewError> {
    if name.contains('/') {
        return Err(ReviewError::Invalid {
            path: format!("{path}.resource"),
            value: shown(name),
            detail: "may not contain '/'",
        });
    }
    Ok(name)
}

/// A group/version/kind or group/version/resource: every member present and a string, the
/// version and the last member not empty.
fn group_version<'d>(
    path: &str,
    node: Ref<'d, 'd>,
    last: &'static str,
) -> Result<(&'d str, &'d str, &'d str), ReviewError> {
    let (mut group, mut version, mut name) = (None, None, None);
    let mut c = node.children();
    while let Some((k, v)) = c.next_entry() {
        match k {
            "group" => group = Some(v),
            "version" => version = Some(v),
            k if k == last => name = Some(v),
            _ => {}
        }
    }
    Ok((
        present_string(Path(path, "group"), group)?,
        non_empty(Path(path, "version"), version)?,
        non_empty(Path(path, last), name)?,
    ))
}

/// The fields of the request that celgate reads, in one pass over its keys.
#[derive(Default)]
struct Fields<'d> {
    uid: Option<Ref<'d, 'd>>,
    kind: Option<Ref<'d, 'd>>,
    resource: Option<Ref<'d, 'd>>,
    sub_resource: Option<Ref<'d, 'd>>,
    request_kind: Option<Ref<'d, 'd>>,
    request_resource: Option<Ref<'d, 'd>>,
    request_sub_resource: Option<Ref<'d, 'd>>,
    name: Option<Ref<'d, 'd>>,
    namespace: Option<Ref<'d, 'd>>,
    operation: Option<Ref<'d, 'd>>,
    user_info: Option<Ref<'d, 'd>>,
    object: Option<Ref<'d, 'd>>,
    old_object: Option<Ref<'d, 'd>>,
    dry_run: Option<Ref<'d, 'd>>,
    options: Option<Ref<'d, 'd>>,
}

impl<'d> Fields<'d> {
    fn of(request: Ref<'d, 'd>) -> Fields<'d> {
        let mut f = Fields::default();
        let mut c = request.children();
        while let Some((k, v)) = c.next_entry() {
            let slot = match k {
                "uid" => &mut f.uid,
                "kind" => &mut f.kind,
                "resource" => &mut f.resource,
                "subResource" => &mut f.sub_resource,
                "requestKind" => &mut f.request_kind,
                "requestResource" => &mut f.request_resource,
                "requestSubResource" => &mut f.request_sub_resource,
                "name" => &mut f.name,
                "namespace" => &mut f.namespace,
                "operation" => &mut f.operation,
                "userInfo" => &mut f.user_info,
                "object" => &mut f.object,
                "oldObject" => &mut f.old_object,
                "dryRun" => &mut f.dry_run,
                "options" => &mut f.options,
                _ => continue,
            };
            *slot = Some(v);
        }
        f
    }
}

/// `userInfo`: every member optional, each of its type.
fn user_info(node: Ref<'_, '_>) -> Result<UserInfo, ReviewError> {
    const P: &str = "request.userInfo";
    let (mut username, mut uid, mut groups, mut extra) = (None, None, None, None);
    let mut c = node.children();
    while let Some((k, v)) = c.next_entry() {
        match k {
            "username" => username = Some(v),
            "uid" => uid = Some(v),
            "groups" => groups = Some(v),
            "extra" => extra = Some(v),
            _ => {}
        }
    }
    let mut extras = BTreeMap::new();
    if let Some(e) = optional_object(Path(P, "extra"), extra)? {
        let mut c = e.children();
        while let Some((k, v)) = c.next_entry() {
            let values = strings(format_args!("{P}.extra[{}]", Quoted(k)), Some(v))?;
            extras.insert(k.to_string(), values);
        }
    }
    Ok(UserInfo {
        username: string(Path(P, "username"), username)?.to_string(),
        uid: string(Path(P, "uid"), uid)?.to_string(),
        groups: strings(Path(P, "groups"), groups)?,
        extra: extras,
    })
}

/// What celgate reads of an object's metadata: its labels (`None` without metadata), name
/// and generateName, each checked for its type.
struct Meta<'d> {
    labels: Option<BTreeMap<String, String>>,
    name: &'d str,
    generate_name: &'d str,
}

fn meta<'d>(path: &str, object: Option<Ref<'d, 'd>>) -> Result<Meta<'d>, ReviewError> {
    let mut out = Meta {
        labels: None,
        name: "",
        generate_name: "",
    };
    let Some(object) = object else {
        return Ok(out);
    };
    let Some(m) = optional_object(Path(path, "metadata"), object.get("metadata"))? else {
        return Ok(out);
    };
    let (mut labels, mut name, mut generate_name) = (None, None, None);
    let mut c = m.children();
    while let Some((k, v)) = c.next_entry() {
        match k {
            "labels" => labels = Some(v),
            "name" => name = Some(v),
            "generateName" => generate_name = Some(v),
            _ => {}
        }
    }
    let mut map = BTreeMap::new();
    if let Some(l) = optional_object(Path(path, "metadata.labels"), labels)? {
        let mut c = l.children();
        while let Some((k, v)) = c.next_entry() {
            let value = string(
                format_args!("{path}.metadata.labels[{}]", Quoted(k)),
                Some(v),
            )?;
            map.insert(k.to_string(), value.to_string());
        }
    }
    out.labels = Some(map);
    out.name = string(Path(path, "metadata.name"), name)?;
    out.generate_name = string(Path(path, "metadata.generateName"), generate_name)?;
    Ok(out)
}

/// Reads the review's request; a review without one, of an unknown version, or whose request
/// is not as the API server sends it (see the module comment) is an error.
pub fn request<'d>(doc: &'d Doc<'d>) -> Result<Request<'d>, ReviewError> {
    let root = doc.root();
    if !matches!(root.item(), Item::Object(_)) {
        return Err(ReviewError::NotAnObject);
    }
    let (mut api_version, mut kind, mut request) = (None, None, None);
    let mut c = root.children();
    while let Some((k, v)) = c.next_entry() {
        match k {
            "apiVersion" => api_version = Some(v),
            "kind" => kind = Some(v),
            "request" => request = Some(v),
            _ => {}
        }
    }
    let api_version = string("apiVersion", api_version)?;
    if api_version != "admission.k8s.io/v1" && api_version != "admission.k8s.io/v1beta1" {
        return Err(ReviewError::UnsupportedVersion(shown(api_version)));
    }
    match string("kind", kind)? {
        // TypeMeta's fields may be omitted; when sent, the kind is this one.
        "" | "AdmissionReview" => {}
        other => return Err(ReviewError::UnsupportedKind(shown(other))),
    }
    let request = optional_object(Path("", "request"), request)?.ok_or(ReviewError::NoRequest)?;
    let f = Fields::of(request);
    const P: &str = "request";
    let uid = non_empty(Path(P, "uid"), f.uid)?;
    if uid.len() > MAX_UID_BYTES {
        return Err(ReviewError::TooLong {
            path: Path(P, "uid").to_string(),
            max: MAX_UID_BYTES,
        });
    }
    let kind_node = required_object(Path(P, "kind"), f.kind)?;
    let (_, _, kind) = group_version("request.kind", kind_node, "kind")?;
    let resource_node = required_object(Path(P, "resource"), f.resource)?;
    let (group, version, resource) = group_version("request.resource", resource_node, "resource")?;
    let resource = resource_name("request.resource", resource)?;
    if let Some(k) = optional_object(Path(P, "requestKind"), f.request_kind)? {
        group_version("request.requestKind", k, "kind")?;
    }
    let (original_group, original_resource) =
        match optional_object(Path(P, "requestResource"), f.request_resource)? {
            Some(r) => {
                let (g, _, r) = group_version("request.requestResource", r, "resource")?;
                (g, resource_name("request.requestResource", r)?)
            }
            None => (group, resource),
        };
    let subresource = string(Path(P, "subResource"), f.sub_resource)?;
    string(Path(P, "requestSubResource"), f.request_sub_resource)?;
    let request_name = string(Path(P, "name"), f.name)?;
    let namespace = string(Path(P, "namespace"), f.namespace)?;
    let operation = present_string(Path(P, "operation"), f.operation)?;
    if operation.is_empty() {
        return Err(required(Path(P, "operation")));
    }
    if !OPERATIONS.contains(&operation) {
        return Err(ReviewError::UnsupportedOperation(shown(operation)));
    }
    let user = user_info(required_object(Path(P, "userInfo"), f.user_info)?)?;
    let object = optional_object(Path(P, "object"), f.object)?;
    let old_object = optional_object(Path(P, "oldObject"), f.old_object)?;
    optional_object(Path(P, "options"), f.options)?;
    match f.dry_run.map(|r| r.item()) {
        None | Some(Item::Null | Item::Bool(_)) => {}
        Some(other) => return Err(wrong_type(Path(P, "dryRun"), "a boolean", &other)),
    }
    let new_meta = meta("request.object", object)?;
    let old_meta = meta("request.oldObject", old_object)?;
    // A CREATE with generateName never matches resourceNames, even though admission sees
    // the generated name (vap-semantics.md Appendix C.2).
    let name = if operation == "CREATE" && !new_meta.generate_name.is_empty() {
        ""
    } else {
        request_name
    };
    let attributes = RequestAttributes {
        operation: operation.to_string(),
        group: group.to_string(),
        version: version.to_string(),
        resource: resource.to_string(),
        subresource: subresource.to_string(),
        namespace: namespace.to_string(),
        name: name.to_string(),
        object_labels: new_meta.labels,
        old_object_labels: old_meta.labels,
    };
    Ok(Request {
        api_version: api_version.to_string(),
        uid: uid.to_string(),
        request,
        object,
        old_object,
        attributes,
        kind: kind.to_string(),
        user,
        object_name: new_meta.name.to_string(),
        generate_name: new_meta.generate_name.to_string(),
        request_name: request_name.to_string(),
        original_group: original_group.to_string(),
        original_resource: original_resource.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_review() {
        let body = br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u1",
            "kind":{"group":"","version":"v1","kind":"Pod"},"resource":{"group":"","version":"v1","resource":"pods"},
            "namespace":"ns","operation":"CREATE","userInfo":{"username":"alice","groups":["g1","system:authenticated"]},
            "object":{"metadata":{"generateName":"web-","name":"web-x1","labels":{"app":"web"}}},"oldObject":null}}"#;
        let doc = Doc::parse(body).unwrap();
        let r = request(&doc).unwrap();
        assert_eq!(r.uid, "u1");
        assert_eq!(r.attributes.resource, "pods");
        assert_eq!(r.attributes.name, "", "generateName CREATE");
        assert_eq!(r.attributes.object_labels.as_ref().unwrap()["app"], "web");
        assert!(r.old_object.is_none());
        assert_eq!(r.user.groups, ["g1", "system:authenticated"]);
        assert_eq!(r.display_name(), "web-x1");
    }

    #[test]
    fn refuses_what_is_not_a_review() {
        for body in [
            &br#"[]"#[..],
            br#"{"apiVersion":"admission.k8s.io/v2","request":{}}"#,
            br#"{"apiVersion":"admission.k8s.io/v1"}"#,
        ] {
            let doc = Doc::parse(body).unwrap();
            assert!(request(&doc).is_err());
        }
    }
}
