//! Strict field validation of the admissionregistration objects, as the API server decodes a
//! create or update with `fieldValidation=Strict` (`kubectl apply`'s default `--validate=strict`):
//! every field the type does not declare is `unknown field "<path>"`, every field given twice
//! in one object is `duplicate field "<path>"`, in the order the decoder meets them, joined
//! by `, ` after `strict decoding error: ` (apimachinery's `runtime.NewStrictDecodingError`,
//! sigs.k8s.io/json's `UnmarshalStrict`; paths as `spec.validations[0].expression`). A field
//! both unknown and repeated is reported once, as unknown (as for typed objects in-tree).
//!
//! The field sets are those of `admissionregistration.k8s.io` v1 (v1beta1 and v1alpha1 have
//! the same fields) and of `meta/v1` ObjectMeta; the document is read a second time into an
//! [`Ordered`] tree, which keeps the order of its keys and their repeats, since a
//! `serde_json::Value` keeps neither.

use std::fmt;

use serde::de::{Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::Value as Json;

/// A document read with its keys in order, repeats kept; scalars keep only their text
/// (a string's), which is all the walk needs (a List item's `apiVersion` and `kind`).
#[derive(Debug, Clone, PartialEq)]
pub enum Ordered {
    /// A string (`Some`) or any other scalar (`None`).
    Scalar(Option<String>),
    /// A sequence.
    Array(Vec<Ordered>),
    /// A mapping, its entries in document order.
    Object(Vec<(String, Ordered)>),
}

impl<'de> serde::Deserialize<'de> for Ordered {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Ordered, D::Error> {
        d.deserialize_any(OrderedVisitor)
    }
}

struct OrderedVisitor;

impl<'de> Visitor<'de> for OrderedVisitor {
    type Value = Ordered;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON or YAML value")
    }
    fn visit_bool<E>(self, _: bool) -> Result<Ordered, E> {
        Ok(Ordered::Scalar(None))
    }
    fn visit_i64<E>(self, _: i64) -> Result<Ordered, E> {
        Ok(Ordered::Scalar(None))
    }
    fn visit_u64<E>(self, _: u64) -> Result<Ordered, E> {
        Ok(Ordered::Scalar(None))
    }
    fn visit_i128<E>(self, _: i128) -> Result<Ordered, E> {
        Ok(Ordered::Scalar(None))
    }
    fn visit_u128<E>(self, _: u128) -> Result<Ordered, E> {
        Ok(Ordered::Scalar(None))
    }
    fn visit_f64<E>(self, _: f64) -> Result<Ordered, E> {
        Ok(Ordered::Scalar(None))
    }
    fn visit_str<E>(self, v: &str) -> Result<Ordered, E> {
        Ok(Ordered::Scalar(Some(v.to_string())))
    }
    fn visit_none<E>(self) -> Result<Ordered, E> {
        Ok(Ordered::Scalar(None))
    }
    fn visit_unit<E>(self) -> Result<Ordered, E> {
        Ok(Ordered::Scalar(None))
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Ordered, D::Error> {
        d.deserialize_any(self)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Ordered, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element::<Ordered>()? {
            items.push(item);
        }
        Ok(Ordered::Array(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Ordered, A::Error> {
        let mut entries = Vec::new();
        while let Some(key) = map.next_key::<String>()? {
            entries.push((key, map.next_value::<Ordered>()?));
        }
        Ok(Ordered::Object(entries))
    }
}

/// What a field holds, as far as strict decoding looks into it.
#[derive(Clone, Copy)]
enum Shape {
    /// A scalar, or anything not looked into (a map of labels, `fieldsV1`).
    Any,
    /// An object of these fields.
    Fields(&'static [(&'static str, Shape)]),
    /// A list of objects of these fields.
    List(&'static [(&'static str, Shape)]),
}

use Shape::{Any, Fields, List};

const OWNER_REFERENCE: &[(&str, Shape)] = &[
    ("apiVersion", Any),
    ("kind", Any),
    ("name", Any),
    ("uid", Any),
    ("controller", Any),
    ("blockOwnerDeletion", Any),
];

const MANAGED_FIELDS: &[(&str, Shape)] = &[
    ("manager", Any),
    ("operation", Any),
    ("apiVersion", Any),
    ("time", Any),
    ("fieldsType", Any),
    ("fieldsV1", Any),
    ("subresource", Any),
];

/// `meta/v1` ObjectMeta.
const OBJECT_META: &[(&str, Shape)] = &[
    ("name", Any),
    ("generateName", Any),
    ("namespace", Any),
    ("selfLink", Any),
    ("uid", Any),
    ("resourceVersion", Any),
    ("generation", Any),
    ("creationTimestamp", Any),
    ("deletionTimestamp", Any),
    ("deletionGracePeriodSeconds", Any),
    ("labels", Any),
    ("annotations", Any),
    ("ownerReferences", List(OWNER_REFERENCE)),
    ("finalizers", Any),
    ("managedFields", List(MANAGED_FIELDS)),
];

const LABEL_SELECTOR: &[(&str, Shape)] = &[
    ("matchLabels", Any),
    (
        "matchExpressions",
        List(&[("key", Any), ("operator", Any), ("values", Any)]),
    ),
];

const NAMED_RULE: &[(&str, Shape)] = &[
    ("resourceNames", Any),
    ("operations", Any),
    ("apiGroups", Any),
    ("apiVersions", Any),
    ("resources", Any),
    ("scope", Any),
];

const MATCH_RESOURCES: &[(&str, Shape)] = &[
    ("namespaceSelector", Fields(LABEL_SELECTOR)),
    ("objectSelector", Fields(LABEL_SELECTOR)),
    ("resourceRules", List(NAMED_RULE)),
    ("excludeResourceRules", List(NAMED_RULE)),
    ("matchPolicy", Any),
];

const POLICY_SPEC: &[(&str, Shape)] = &[
    ("paramKind", Fields(&[("apiVersion", Any), ("kind", Any)])),
    ("matchConstraints", Fields(MATCH_RESOURCES)),
    (
        "validations",
        List(&[
            ("expression", Any),
            ("message", Any),
            ("reason", Any),
            ("messageExpression", Any),
        ]),
    ),
    ("failurePolicy", Any),
    (
        "auditAnnotations",
        List(&[("key", Any), ("valueExpression", Any)]),
    ),
    (
        "matchConditions",
        List(&[("name", Any), ("expression", Any)]),
    ),
    ("variables", List(&[("name", Any), ("expression", Any)])),
];

const POLICY_STATUS: &[(&str, Shape)] = &[
    ("observedGeneration", Any),
    (
        "typeChecking",
        Fields(&[(
            "expressionWarnings",
            List(&[("fieldRef", Any), ("warning", Any)]),
        )]),
    ),
    (
        "conditions",
        List(&[
            ("type", Any),
            ("status", Any),
            ("observedGeneration", Any),
            ("lastTransitionTime", Any),
            ("reason", Any),
            ("message", Any),
        ]),
    ),
];

const POLICY: &[(&str, Shape)] = &[
    ("apiVersion", Any),
    ("kind", Any),
    ("metadata", Fields(OBJECT_META)),
    ("spec", Fields(POLICY_SPEC)),
    ("status", Fields(POLICY_STATUS)),
];

const BINDING_SPEC: &[(&str, Shape)] = &[
    ("policyName", Any),
    (
        "paramRef",
        Fields(&[
            ("name", Any),
            ("namespace", Any),
            ("selector", Fields(LABEL_SELECTOR)),
            ("parameterNotFoundAction", Any),
        ]),
    ),
    ("matchResources", Fields(MATCH_RESOURCES)),
    ("validationActions", Any),
];

const BINDING: &[(&str, Shape)] = &[
    ("apiVersion", Any),
    ("kind", Any),
    ("metadata", Fields(OBJECT_META)),
    ("spec", Fields(BINDING_SPEC)),
];

const MUTATING_POLICY_SPEC: &[(&str, Shape)] = &[
    ("paramKind", Fields(&[("apiVersion", Any), ("kind", Any)])),
    ("matchConstraints", Fields(MATCH_RESOURCES)),
    ("variables", List(&[("name", Any), ("expression", Any)])),
    (
        "mutations",
        List(&[
            ("patchType", Any),
            ("applyConfiguration", Fields(&[("expression", Any)])),
            ("jsonPatch", Fields(&[("expression", Any)])),
        ]),
    ),
    ("failurePolicy", Any),
    (
        "matchConditions",
        List(&[("name", Any), ("expression", Any)]),
    ),
    ("reinvocationPolicy", Any),
];

const MUTATING_POLICY: &[(&str, Shape)] = &[
    ("apiVersion", Any),
    ("kind", Any),
    ("metadata", Fields(OBJECT_META)),
    ("spec", Fields(MUTATING_POLICY_SPEC)),
];

const MUTATING_BINDING_SPEC: &[(&str, Shape)] = &[
    ("policyName", Any),
    (
        "paramRef",
        Fields(&[
            ("name", Any),
            ("namespace", Any),
            ("selector", Fields(LABEL_SELECTOR)),
            ("parameterNotFoundAction", Any),
        ]),
    ),
    ("matchResources", Fields(MATCH_RESOURCES)),
];

const MUTATING_BINDING: &[(&str, Shape)] = &[
    ("apiVersion", Any),
    ("kind", Any),
    ("metadata", Fields(OBJECT_META)),
    ("spec", Fields(MUTATING_BINDING_SPEC)),
];

/// A core ConfigMap (the usual params kind): `kubectl apply` refuses its unknown fields too.
const CONFIG_MAP: &[(&str, Shape)] = &[
    ("apiVersion", Any),
    ("kind", Any),
    ("metadata", Fields(OBJECT_META)),
    ("data", Any),
    ("binaryData", Any),
    ("immutable", Any),
];

/// The fields of the kind `apiVersion`/`kind` names, when celgate knows them.
fn shape_of(api_version: &str, kind: &str) -> Option<&'static [(&'static str, Shape)]> {
    if super::API_VERSIONS.contains(&api_version) {
        match kind {
            "ValidatingAdmissionPolicy" => Some(POLICY),
            "ValidatingAdmissionPolicyBinding" => Some(BINDING),
            "MutatingAdmissionPolicy" => Some(MUTATING_POLICY),
            "MutatingAdmissionPolicyBinding" => Some(MUTATING_BINDING),
            _ => None,
        }
    } else if api_version == "v1" && kind == "ConfigMap" {
        Some(CONFIG_MAP)
    } else {
        None
    }
}

/// Whether strict decoding looks into `object` (a kind whose fields celgate knows).
pub fn is_checked_kind(object: &Json) -> bool {
    shape_of(
        object["apiVersion"].as_str().unwrap_or(""),
        object["kind"].as_str().unwrap_or(""),
    )
    .is_some()
}

/// The strict decoding errors of one object (not a `List`), each as the API server words
/// it (`unknown field "spec.x"`, `duplicate field "metadata.name"`), in document order;
/// empty for a kind whose fields celgate does not know.
pub fn strict_errors(object: &Ordered) -> Vec<String> {
    let Ordered::Object(entries) = object else {
        return Vec::new();
    };
    let text = |key: &str| {
        entries.iter().find_map(|(k, v)| match v {
            Ordered::Scalar(Some(s)) if k == key => Some(s.as_str()),
            _ => None,
        })
    };
    let Some(fields) = shape_of(text("apiVersion").unwrap_or(""), text("kind").unwrap_or(""))
    else {
        return Vec::new();
    };
    let mut out = Vec::new();
    walk_fields(entries, fields, "", &mut out);
    out
}

fn walk_fields(
    entries: &[(String, Ordered)],
    fields: &[(&str, Shape)],
    path: &str,
    out: &mut Vec<String>,
) {
    let mut seen: Vec<&str> = Vec::new();
    for (key, value) in entries {
        let field = if path.is_empty() {
            key.clone()
        } else {
            format!("{path}.{key}")
        };
        let repeated = seen.contains(&key.as_str());
        seen.push(key);
        match fields.iter().find(|(name, _)| name == key) {
            None if !repeated => out.push(format!("unknown field {}", quote(&field))),
            None => {}
            Some(_) if repeated => out.push(format!("duplicate field {}", quote(&field))),
            Some((_, shape)) => walk(value, *shape, &field, out),
        }
    }
}

fn walk(value: &Ordered, shape: Shape, path: &str, out: &mut Vec<String>) {
    match (shape, value) {
        (Fields(fields), Ordered::Object(entries)) => walk_fields(entries, fields, path, out),
        (List(fields), Ordered::Array(items)) => {
            for (i, item) in items.iter().enumerate() {
                if let Ordered::Object(entries) = item {
                    walk_fields(entries, fields, &format!("{path}[{i}]"), out);
                }
            }
        }
        // A value of the wrong type is the typed decoding's error, not strict decoding's.
        _ => {}
    }
}

/// A Go `%q` of a field path (paths are plain text; quotes and backslashes escaped).
fn quote(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| format!("\"{s}\""))
}

/// The message the API server answers for `errors` (non-empty), as
/// `runtime.NewStrictDecodingError` joins them.
pub fn strict_decoding_error(errors: &[String]) -> String {
    format!("strict decoding error: {}", errors.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn errors(text: &str) -> Vec<String> {
        strict_errors(&serde_json::from_str::<Ordered>(text).unwrap())
    }

    #[test]
    fn unknown_and_duplicate_fields_with_their_paths_in_document_order() {
        let got = errors(
            r#"{"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": "a", "name": "b", "unknownMeta": 1},
            "spec": {"failurPolicy": "Fail", "failurPolicy": "Fail", "failurePolicy": "Fail",
              "failurePolicy": "Ignore",
              "validations": [{"expression": "true"}, {"expression": "true", "messageExpresion": "'x'"}],
              "matchConstraints": {"resourceRules": [{"operations": ["CREATE"], "verbs": ["x"]}]}}}"#,
        );
        assert_eq!(
            got,
            [
                r#"duplicate field "metadata.name""#,
                r#"unknown field "metadata.unknownMeta""#,
                r#"unknown field "spec.failurPolicy""#,
                r#"duplicate field "spec.failurePolicy""#,
                r#"unknown field "spec.validations[1].messageExpresion""#,
                r#"unknown field "spec.matchConstraints.resourceRules[0].verbs""#,
            ]
        );
        assert_eq!(
            strict_decoding_error(&got[..2]),
            r#"strict decoding error: duplicate field "metadata.name", unknown field "metadata.unknownMeta""#
        );
    }

    #[test]
    fn bindings_config_maps_and_unknown_kinds() {
        let got = errors(
            r#"{"apiVersion": "admissionregistration.k8s.io/v1beta1", "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": "b", "labels": {"anything": "x"}},
            "spec": {"policyName": "p", "validationAction": ["Deny"],
              "paramRef": {"name": "x", "selector": {"matchLabel": {}}}}}"#,
        );
        assert_eq!(
            got,
            [
                r#"unknown field "spec.validationAction""#,
                r#"unknown field "spec.paramRef.selector.matchLabel""#,
            ]
        );
        assert_eq!(
            errors(r#"{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}, "dta": {}}"#),
            [r#"unknown field "dta""#]
        );
        assert!(errors(r#"{"apiVersion": "v1", "kind": "Pod", "spec": {"x": 1}}"#).is_empty());
    }

    #[test]
    fn yaml_keeps_repeats_too() {
        let doc: Ordered = serde_yaml_ng::from_str(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata: {}\ndata: {}\n",
        )
        .unwrap();
        assert_eq!(strict_errors(&doc), [r#"duplicate field "data""#]);
    }
}
