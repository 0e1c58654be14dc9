//! `namespaceObject` as the VAP plugin builds it: the stored Namespace decoded into the typed
//! `core/v1.Namespace`, cut down by `CreateNamespaceObject` to the fields it copies, and
//! converted back to unstructured. The typed round trip is visible to expressions: empty
//! strings, lists and maps are omitted, an unset `creationTimestamp` is `null`, `spec` and
//! `status` are always present (`{}` when empty) and keep only their typed fields, and times
//! are whole seconds in UTC.

use serde_json::{Map, Value as Json};

use celgate_cel::time::Timestamp;

/// The view of `namespace` (a Namespace object as stored) that expressions read.
pub fn namespace_view(namespace: &Json) -> Json {
    let m = &namespace["metadata"];
    let mut meta = Map::new();
    for key in [
        "name",
        "generateName",
        "namespace",
        "uid",
        "resourceVersion",
    ] {
        non_empty_text(&mut meta, key, &m[key]);
    }
    if m["generation"].as_i64().is_some_and(|g| g != 0) {
        meta.insert("generation".into(), m["generation"].clone());
    }
    meta.insert(
        "creationTimestamp".into(),
        meta_time(&m["creationTimestamp"]),
    );
    if !m["deletionTimestamp"].is_null() {
        meta.insert(
            "deletionTimestamp".into(),
            meta_time(&m["deletionTimestamp"]),
        );
    }
    if !m["deletionGracePeriodSeconds"].is_null() {
        meta.insert(
            "deletionGracePeriodSeconds".into(),
            m["deletionGracePeriodSeconds"].clone(),
        );
    }
    for key in ["labels", "annotations"] {
        if m[key].as_object().is_some_and(|o| !o.is_empty()) {
            meta.insert(key.into(), m[key].clone());
        }
    }
    non_empty_list(&mut meta, "finalizers", &m["finalizers"]);
    let mut spec = Map::new();
    non_empty_list(&mut spec, "finalizers", &namespace["spec"]["finalizers"]);
    let st = &namespace["status"];
    let mut status = Map::new();
    non_empty_text(&mut status, "phase", &st["phase"]);
    if let Some(conditions) = st["conditions"].as_array().filter(|a| !a.is_empty()) {
        let conditions = conditions.iter().map(condition).collect();
        status.insert("conditions".into(), Json::Array(conditions));
    }
    let mut out = Map::new();
    out.insert("metadata".into(), Json::Object(meta));
    out.insert("spec".into(), Json::Object(spec));
    out.insert("status".into(), Json::Object(status));
    Json::Object(out)
}

/// A `NamespaceCondition`: `type`, `status` and `lastTransitionTime` are always encoded.
fn condition(c: &Json) -> Json {
    let mut out = Map::new();
    out.insert("type".into(), Json::String(text(&c["type"]).into()));
    out.insert("status".into(), Json::String(text(&c["status"]).into()));
    out.insert(
        "lastTransitionTime".into(),
        meta_time(&c["lastTransitionTime"]),
    );
    non_empty_text(&mut out, "reason", &c["reason"]);
    non_empty_text(&mut out, "message", &c["message"]);
    Json::Object(out)
}

/// A `metav1.Time` after a decode and an encode: RFC 3339 in UTC, whole seconds; `null` when
/// unset. A string that is not a time is kept (the API server never stores one).
fn meta_time(v: &Json) -> Json {
    match v.as_str().and_then(Timestamp::parse_rfc3339) {
        Some(t) => {
            let c = t.civil(0);
            Json::String(format!(
                "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z",
                c.year, c.month, c.day, c.hour, c.minute, c.second
            ))
        }
        None if v.is_string() => v.clone(),
        None => Json::Null,
    }
}

fn text(v: &Json) -> &str {
    v.as_str().unwrap_or("")
}

fn non_empty_text(out: &mut Map<String, Json>, key: &str, v: &Json) {
    let s = text(v);
    if !s.is_empty() {
        out.insert(key.into(), Json::String(s.into()));
    }
}

fn non_empty_list(out: &mut Map<String, Json>, key: &str, v: &Json) {
    if v.as_array().is_some_and(|a| !a.is_empty()) {
        out.insert(key.into(), v.clone());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn keeps_what_create_namespace_object_copies_in_typed_form() {
        let stored = json!({
            "apiVersion": "v1", "kind": "Namespace",
            "metadata": {
                "name": "prod", "uid": "u-1", "resourceVersion": "7", "generateName": "",
                "creationTimestamp": "2024-03-01T10:00:00.5+02:00",
                "labels": {"env": "prod"}, "annotations": {},
                "managedFields": [{"manager": "kubectl"}], "ownerReferences": [],
            },
            "spec": {"finalizers": ["kubernetes"], "unknown": 1},
            "status": {"phase": "Active", "conditions": [{"type": "T", "status": "True"}]},
        });
        assert_eq!(
            namespace_view(&stored),
            json!({
                "metadata": {
                    "name": "prod", "uid": "u-1", "resourceVersion": "7",
                    "creationTimestamp": "2024-03-01T08:00:00Z",
                    "labels": {"env": "prod"},
                },
                "spec": {"finalizers": ["kubernetes"]},
                "status": {"phase": "Active", "conditions": [
                    {"type": "T", "status": "True", "lastTransitionTime": null}
                ]},
            })
        );
    }

    #[test]
    fn a_bare_namespace_has_a_null_creation_timestamp_and_empty_spec_and_status() {
        let view = namespace_view(&json!({"metadata": {"name": "dev"}}));
        assert_eq!(
            view,
            json!({
                "metadata": {"name": "dev", "creationTimestamp": null},
                "spec": {}, "status": {},
            })
        );
    }
}
