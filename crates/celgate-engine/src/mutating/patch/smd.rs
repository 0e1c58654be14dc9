//! The ApplyConfiguration mutation: an `Object{…}` value merged into the request object
//! with server-side apply semantics, as the in-tree plugin's `patch/smd.go` does it
//! (Kubernetes 1.32, sigs.k8s.io/structured-merge-diff v4.4.2).
//!
//! The order of checks and the messages follow `applyConfigPatcher.Patch` and
//! `ApplyStructuredMergeDiff`: the type names of nested `Object.<path>{}` values against
//! their field path (`CheckTypeNamesMatchFieldPathNames`), the conversion of the CEL value
//! to Go data (`ObjectVal.Value`), the kind's schema (`no corresponding type`), the
//! configuration typed against it, the refusal of atomic lists, maps and structs, the
//! object typed against it, and the merge. The input is an [`ApplyNode`] tree, which
//! mirrors the CEL value without depending on the CEL crate.

use serde_json::Value as Json;

pub use super::smd_schema::MergeSchema;
use super::smd_schema::DEFAULT_MAX_DEPTH;
use super::smd_value::{go_bytes_syntax, go_bytes_value, go_quote, GoValue, Opaque};
use super::smd_walk::{find_atomics, merge, validate};
pub use super::smd_walk::{ValidationError, ValidationErrors};
use crate::matching::registry::Gvk;

/// Default nesting limit of [`apply_configuration`]'s inputs.
pub const DEFAULT_APPLY_MAX_DEPTH: usize = DEFAULT_MAX_DEPTH;

/// The value of an ApplyConfiguration expression, as the CEL evaluator built it. Each
/// variant is a CEL value kind the plugin's conversion (`dynamic.ObjectVal.Value`,
/// `convertField`) treats differently.
#[derive(Debug, Clone, PartialEq)]
pub enum ApplyNode {
    /// `Object.<path>{fields}`: `type_name` is the full name (`Object.spec.template`).
    Object {
        type_name: String,
        fields: Vec<(String, ApplyNode)>,
    },
    /// A list built by CEL (a literal, `+`, `map()`): its Go value is `[]ref.Val`.
    List(Vec<ApplyNode>),
    /// A map built by CEL (a literal): its Go value is `map[ref.Val]ref.Val`. Keys are the
    /// CEL keys (a key that is not a string fails the conversion).
    Map(Vec<(ApplyNode, ApplyNode)>),
    /// CEL `null` (`structpb.NullValue`).
    Null,
    Bool(bool),
    Int(i64),
    Uint(u64),
    Double(f64),
    String(String),
    Bytes(Vec<u8>),
    /// Data that CEL wraps rather than builds (from `object`, `oldObject`, `params`, …): its
    /// Go value is native JSON data, used as is.
    Json(Json),
    /// Any other CEL value (a timestamp, a duration, a type), described by its Go value:
    /// its `%T`, `%#v` and `%v`, and its `json.Marshal` form (`None`: not encodable).
    Other {
        go_type: String,
        go_syntax: String,
        go_value: String,
        json: Option<Json>,
    },
}

/// Why an ApplyConfiguration could not be applied; `Display` is the text the API server
/// puts after `policy 'P' with binding 'B' denied request: `.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ApplyError {
    /// The expression did not return an `Object{}` value (the compiler rules it out).
    #[error("unsupported return type from ApplyConfiguration expression: {0}")]
    NotAnObject(&'static str),
    /// Nested `Object` type names that do not follow their field path, one line each.
    #[error("type mismatch: {}", .0.join("\n"))]
    TypeMismatch(Vec<String>),
    /// A field of the `Object` could not become Go data (a map key that is not a string).
    #[error("invalid return type: *dynamic.ObjectVal")]
    InvalidReturnType,
    #[error("error applying patch: failed to convert patch object to typed object: no corresponding type for {0}")]
    NoCorrespondingType(Gvk),
    #[error("error applying patch: failed to convert patch object to typed object: {0}")]
    PatchNotTyped(ValidationErrors),
    #[error("error applying patch: invalid ApplyConfiguration: may not mutate atomic arrays, maps or structs: {}", .0.join(", "))]
    Atomic(Vec<String>),
    #[error("error applying patch: failed to convert original object to typed object: {0}")]
    ObjectNotTyped(ValidationErrors),
    #[error("error applying patch: failed to merge patch: {0}")]
    Merge(ValidationErrors),
    #[error("error applying patch: failed to convert typed object to object: {0}")]
    Encode(String),
    /// celgate's own limit: the object or the configuration nests deeper than the schema's
    /// `max_depth`.
    #[error(
        "error applying patch: the object or the apply configuration nests deeper than {0} levels"
    )]
    TooDeep(usize),
}

/// Merges the apply configuration `config` into `object` (the request object) with the
/// kind's merge `schema`, and returns the merged object.
pub fn apply_configuration(
    object: &Json,
    config: &ApplyNode,
    schema: &MergeSchema,
) -> Result<Json, ApplyError> {
    if node_depth(config) > schema.max_depth || json_depth(object) > schema.max_depth {
        return Err(ApplyError::TooDeep(schema.max_depth));
    }
    let ApplyNode::Object { type_name, fields } = config else {
        return Err(ApplyError::NotAnObject(cel_type_name(config)));
    };
    let mut mismatches = Vec::new();
    check_type_names(config, type_name, &mut mismatches);
    if !mismatches.is_empty() {
        return Err(ApplyError::TypeMismatch(mismatches));
    }
    let Ok(GoValue::Map(mut patch)) = object_value(fields) else {
        return Err(ApplyError::InvalidReturnType);
    };
    // `SetGroupVersionKind`: the configuration carries the object's kind.
    set_entry(
        &mut patch,
        "apiVersion",
        GoValue::Str(schema.gvk.api_version()),
    );
    set_entry(&mut patch, "kind", GoValue::Str(schema.gvk.kind.clone()));
    let patch = GoValue::Map(patch);

    let Some(root) = &schema.root else {
        return Err(ApplyError::NoCorrespondingType(schema.gvk.clone()));
    };
    let errs = validate(&patch, root);
    if !errs.is_empty() {
        return Err(ApplyError::PatchNotTyped(ValidationErrors(errs)));
    }
    let mut atomics = Vec::new();
    find_atomics("", root, &patch, &mut atomics);
    if !atomics.is_empty() {
        return Err(ApplyError::Atomic(atomics));
    }
    let live = GoValue::from_json(object);
    let errs = validate(&live, root);
    if !errs.is_empty() {
        return Err(ApplyError::ObjectNotTyped(ValidationErrors(errs)));
    }
    let (merged, errs) = merge(Some(&live), Some(&patch), root);
    if !errs.is_empty() {
        return Err(ApplyError::Merge(ValidationErrors(errs)));
    }
    merged
        .unwrap_or(GoValue::Nil)
        .to_json()
        .map_err(ApplyError::Encode)
}

fn set_entry(entries: &mut Vec<(String, GoValue)>, key: &str, value: GoValue) {
    match entries.iter_mut().find(|(k, _)| k == key) {
        Some((_, v)) => *v = value,
        None => entries.push((key.to_string(), value)),
    }
}

/// The CEL type name of a node, for the (unreachable) non-Object result.
fn cel_type_name(node: &ApplyNode) -> &'static str {
    match node {
        ApplyNode::Object { .. } => "Object",
        ApplyNode::List(_) => "list",
        ApplyNode::Map(_) => "map",
        ApplyNode::Null => "null_type",
        ApplyNode::Bool(_) => "bool",
        ApplyNode::Int(_) => "int",
        ApplyNode::Uint(_) => "uint",
        ApplyNode::Double(_) => "double",
        ApplyNode::String(_) => "string",
        ApplyNode::Bytes(_) => "bytes",
        ApplyNode::Json(_) | ApplyNode::Other { .. } => "dyn",
    }
}

/// `typeCheck`: every nested `Object` must be named after the root type and the field
/// path to it; CEL-built lists and maps are looked through without adding to the path.
fn check_type_names(node: &ApplyNode, expected: &str, out: &mut Vec<String>) {
    match node {
        ApplyNode::Object { type_name, fields } => {
            if type_name != expected {
                out.push(format!(
                    "unexpected type name {}, expected {}, which matches field name path from root Object type",
                    go_quote(type_name),
                    go_quote(expected)
                ));
            }
            for (name, field) in fields {
                check_type_names(field, &format!("{expected}.{name}"), out);
            }
        }
        ApplyNode::List(items) => {
            for item in items {
                check_type_names(item, expected, out);
            }
        }
        ApplyNode::Map(entries) => {
            for (_, value) in entries {
                check_type_names(value, expected, out);
            }
        }
        _ => {}
    }
}

/// `ObjectVal.ConvertToNative(map[string]any)`: each field through `convertField`.
fn object_value(fields: &[(String, ApplyNode)]) -> Result<GoValue, String> {
    let mut out: Vec<(String, GoValue)> = Vec::with_capacity(fields.len());
    for (name, field) in fields {
        let v = convert_field(field)
            .map_err(|e| format!("fail to convert field {}: {e}", go_quote(name)))?;
        set_entry(&mut out, name, v);
    }
    Ok(GoValue::Map(out))
}

/// `convertField`: a CEL-built list or map becomes `[]any` / `map[string]any` of its
/// elements' Go values; anything else is its Go value.
fn convert_field(node: &ApplyNode) -> Result<GoValue, String> {
    match node {
        ApplyNode::List(items) => Ok(GoValue::List(items.iter().map(go_value).collect())),
        ApplyNode::Map(entries) => {
            let mut out: Vec<(String, GoValue)> = Vec::with_capacity(entries.len());
            for (key, value) in entries {
                let ApplyNode::String(k) = key else {
                    return Err(format!(
                        "map key {} is of type {}, not string",
                        go_value(key).go_value(),
                        cel_go_type(key)
                    ));
                };
                set_entry(&mut out, k, go_value(value));
            }
            Ok(GoValue::Map(out))
        }
        other => Ok(go_value(other)),
    }
}

/// The Go type of a CEL value (`%T` of the `ref.Val`), for conversion errors.
fn cel_go_type(node: &ApplyNode) -> &'static str {
    match node {
        ApplyNode::Object { .. } => "*dynamic.ObjectVal",
        ApplyNode::List(_) => "*types.baseList",
        ApplyNode::Map(_) => "*types.baseMap",
        ApplyNode::Null => "types.Null",
        ApplyNode::Bool(_) => "types.Bool",
        ApplyNode::Int(_) => "types.Int",
        ApplyNode::Uint(_) => "types.Uint",
        ApplyNode::Double(_) => "types.Double",
        ApplyNode::String(_) => "types.String",
        ApplyNode::Bytes(_) => "types.Bytes",
        ApplyNode::Json(_) | ApplyNode::Other { .. } => "ref.Val",
    }
}

fn described(go_type: &str, go_syntax: String, go_value: String, json: Option<Json>) -> GoValue {
    GoValue::Opaque(Box::new(Opaque::Described {
        go_type: go_type.to_string(),
        go_syntax,
        go_value,
        json,
    }))
}

/// `ref.Val.Value()`: the Go value of a CEL value. CEL-built lists and maps stay CEL
/// containers (`[]ref.Val`, `map[ref.Val]ref.Val`), which SMD cannot read.
fn go_value(node: &ApplyNode) -> GoValue {
    match node {
        ApplyNode::Object { fields, .. } => match object_value(fields) {
            Ok(v) => v,
            Err(e) => described("*types.Err", e.clone(), e, None),
        },
        ApplyNode::List(items) => GoValue::Opaque(Box::new(Opaque::CelList(
            items.iter().map(go_value).collect(),
        ))),
        ApplyNode::Map(entries) => GoValue::Opaque(Box::new(Opaque::CelMap(
            entries
                .iter()
                .map(|(k, v)| (go_value(k), go_value(v)))
                .collect(),
        ))),
        // structpb.NullValue is an int32 enum: Go prints and encodes it as 0.
        ApplyNode::Null => described(
            "structpb.NullValue",
            "0".into(),
            "0".into(),
            Some(Json::from(0)),
        ),
        ApplyNode::Bool(b) => GoValue::Bool(*b),
        ApplyNode::Int(i) => GoValue::Int(*i),
        // uint64 is not among the integer types SMD accepts.
        ApplyNode::Uint(u) => described(
            "uint64",
            format!("0x{u:x}"),
            u.to_string(),
            Some(Json::from(*u)),
        ),
        ApplyNode::Double(f) => GoValue::Float(*f),
        ApplyNode::String(s) => GoValue::Str(s.clone()),
        ApplyNode::Bytes(b) => {
            use base64::Engine as _;
            let encoded = base64::engine::general_purpose::STANDARD.encode(b);
            described(
                "[]uint8",
                go_bytes_syntax(b),
                go_bytes_value(b),
                Some(Json::String(encoded)),
            )
        }
        ApplyNode::Json(j) => GoValue::from_json(j),
        ApplyNode::Other {
            go_type,
            go_syntax,
            go_value,
            json,
        } => described(go_type, go_syntax.clone(), go_value.clone(), json.clone()),
    }
}

/// How deep a node tree nests (counted without recursion, so any input is safe).
fn node_depth(root: &ApplyNode) -> usize {
    let mut max = 0;
    let mut stack = vec![(root, 1usize)];
    while let Some((node, depth)) = stack.pop() {
        max = max.max(depth);
        match node {
            ApplyNode::Object { fields, .. } => {
                stack.extend(fields.iter().map(|(_, f)| (f, depth + 1)))
            }
            ApplyNode::List(items) => stack.extend(items.iter().map(|i| (i, depth + 1))),
            ApplyNode::Map(entries) => {
                for (k, v) in entries {
                    stack.push((k, depth + 1));
                    stack.push((v, depth + 1));
                }
            }
            ApplyNode::Json(j) => max = max.max(depth - 1 + json_depth(j)),
            _ => {}
        }
    }
    max
}

fn json_depth(root: &Json) -> usize {
    let mut max = 0;
    let mut stack = vec![(root, 1usize)];
    while let Some((v, depth)) = stack.pop() {
        max = max.max(depth);
        match v {
            Json::Array(items) => stack.extend(items.iter().map(|i| (i, depth + 1))),
            Json::Object(m) => stack.extend(m.values().map(|i| (i, depth + 1))),
            _ => {}
        }
    }
    max
}

#[cfg(test)]
#[path = "smd_tests.rs"]
mod tests;
