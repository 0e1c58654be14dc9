//! MutatingAdmissionPolicy patches (in-tree `plugin/policy/mutating/patch`): what one
//! mutation's value does to the object. An apply configuration (`Object{...}`) is merged
//! with server-side apply semantics against the kind's schema; a `list(JSONPatch)` is
//! applied as RFC 6902 and the result decoded as the kind's type. The dispatcher around it
//! (which policies run, in which order, with which failurePolicy) is
//! [`crate::admission::mutate`].

mod defaults;
pub use defaults::default_object;
pub mod patch;

use crate::matching::registry::Gvk;
use crate::schemas::Kinds;
use celgate_cel::Value;
use patch::smd::{ApplyNode, MergeSchema};
use serde_json::Value as Json;

/// What a mutation's expression yields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchKind {
    /// An `Object{...}` merged with server-side apply semantics.
    ApplyConfiguration,
    /// A `list(JSONPatch)` applied as RFC 6902.
    JsonPatch,
}

/// The schemas patches are typed by: the built-in kinds' and the snapshot's CRDs'.
#[derive(Debug)]
pub struct Schemas {
    pub(crate) kinds: Kinds,
}

impl Schemas {
    /// The built-in kinds and the given CustomResourceDefinitions.
    pub fn new<'a>(crds: impl IntoIterator<Item = &'a Json>) -> Schemas {
        Schemas {
            kinds: Kinds::new(crds),
        }
    }
}

impl Default for Schemas {
    fn default() -> Self {
        Schemas::new([])
    }
}

/// How deep an apply configuration's merge may go by default: deeper than any real object,
/// shallow enough for the recursive walks on an evaluation thread's stack.
pub const DEFAULT_MAX_APPLY_DEPTH: usize = patch::smd::DEFAULT_APPLY_MAX_DEPTH;

/// What a patch needs besides the object: the kind it is typed as, where schemas are, and
/// its limits.
pub struct PatchContext<'a> {
    pub kind: &'a Gvk,
    pub schemas: &'a Schemas,
    /// Bytes a JSON patch's `copy` operations may write.
    pub max_copy_bytes: u64,
    /// How deep an apply configuration's merge may go.
    pub max_apply_depth: usize,
}

/// Why a mutation's patch could not be applied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PatchFailure {
    /// The policy's error (`Invalid`), under its failurePolicy; the text after
    /// `policy 'P' with binding 'B' denied request: `.
    #[error("{0}")]
    Policy(String),
    /// A result the API server cannot decode as the kind's type: a 500 whatever the
    /// failurePolicy; the text after `Internal error occurred: `.
    #[error("{0}")]
    Internal(String),
}

/// Applies one mutation's `value` to `object` (in the kind `context` names), then the
/// scheme's defaulting of a built-in kind's object ([`default_object`]).
pub fn apply_mutation(
    kind: PatchKind,
    value: &Value<'_>,
    object: &Json,
    context: &PatchContext<'_>,
) -> Result<Json, PatchFailure> {
    let mut patched = match kind {
        PatchKind::JsonPatch => json_patch(value, object, context)?,
        PatchKind::ApplyConfiguration => {
            let schema = match context.schemas.kinds.crd_schema(context.kind) {
                Some(crd) => MergeSchema::crd(context.kind, crd.as_ref()),
                None => MergeSchema::builtin(context.kind),
            }
            .with_max_depth(context.max_apply_depth);
            let config = apply_node(value);
            patch::smd::apply_configuration(object, &config, &schema)
                .map_err(|e| PatchFailure::Policy(e.to_string()))?
        }
    };
    // `dispatchOne`: the patched object, back in its Go type, is defaulted by the scheme
    // before the next policy, webhook or storage sees it.
    defaults::default_object(&mut patched, context.kind);
    Ok(patched)
}

/// A CEL value as the apply-configuration merge reads it: what the expression built
/// (`Object{}` values, list and map literals) node by node, what it only read from the
/// request (`object`, `params` subtrees) as JSON data, other values by their Go form.
fn apply_node(value: &Value<'_>) -> ApplyNode {
    use celgate_cel::value::{List, Map};
    if let Some(o) = celgate_cel::mutation::object_view(value) {
        return celgate_cel::json::with_stack(|| ApplyNode::Object {
            type_name: o.type_name.to_string(),
            fields: o
                .iter()
                .map(|(k, v)| (k.to_string(), apply_node(v)))
                .collect(),
        });
    }
    match value {
        Value::Null => ApplyNode::Null,
        Value::Bool(b) => ApplyNode::Bool(*b),
        Value::Int(i) => ApplyNode::Int(*i),
        Value::Uint(u) => ApplyNode::Uint(*u),
        Value::Double(d) => ApplyNode::Double(*d),
        Value::String(s) => ApplyNode::String(s.as_str().to_string()),
        Value::Bytes(b) => ApplyNode::Bytes(b.to_vec()),
        Value::List(List::Json(_) | List::Doc(_)) | Value::Map(Map::Json(_) | Map::Doc(_)) => {
            ApplyNode::Json(value_json(value))
        }
        Value::List(l) => celgate_cel::json::with_stack(|| {
            ApplyNode::List(l.iter().map(|v| apply_node(&v)).collect())
        }),
        Value::Map(m) => celgate_cel::json::with_stack(|| {
            ApplyNode::Map(
                m.entries()
                    .iter()
                    .map(|(k, v)| (apply_node(k), apply_node(v)))
                    .collect(),
            )
        }),
        Value::Timestamp(t) => ApplyNode::Other {
            go_type: "time.Time".into(),
            go_syntax: t.to_rfc3339(),
            go_value: t.to_rfc3339(),
            json: Some(Json::String(t.to_rfc3339())),
        },
        Value::Duration(nanos) => ApplyNode::Other {
            go_type: "time.Duration".into(),
            go_syntax: nanos.to_string(),
            go_value: format!("{nanos}ns"),
            json: Some(Json::from(*nanos)),
        },
        Value::Optional(Some(inner)) => apply_node(inner),
        other => ApplyNode::Other {
            go_type: other.type_name().to_string(),
            go_syntax: String::new(),
            go_value: String::new(),
            json: None,
        },
    }
}

/// Data read from the request, as JSON (without recursing past the stack).
fn value_json(value: &Value<'_>) -> Json {
    use celgate_cel::value::{List, Map};
    match value {
        Value::List(List::Json(a)) => patch::json_patch::clone_json(&Json::Array(a.to_vec())),
        Value::Map(Map::Json(m)) => Json::Object((*m).clone()),
        Value::List(List::Doc(r)) | Value::Map(Map::Doc(r)) => doc_json(*r),
        _ => Json::Null,
    }
}

fn doc_json(r: celgate_cel::json::Ref<'_, '_>) -> Json {
    use celgate_cel::json::Item;
    match r.item() {
        Item::Array(_) => {
            celgate_cel::json::with_stack(|| Json::Array(r.children().map(doc_json).collect()))
        }
        Item::Object(_) => celgate_cel::json::with_stack(|| {
            let mut m = serde_json::Map::new();
            let mut children = r.children();
            while let Some((k, v)) = children.next_entry() {
                m.insert(k.to_string(), doc_json(v));
            }
            Json::Object(m)
        }),
        _ => r.to_value(),
    }
}

/// What the API server says of a value it cannot write as JSON (`patch/json_patch.go`).
const UNMARSHALABLE: &str =
    "JSONPath valueExpression evaluated to a type that could not marshal to JSON";

/// A `list(JSONPatch)` applied (`jsonPatcher.Patch`): each patch's fields as Kubernetes
/// writes them into the patch document, the document applied as evanphx/json-patch v4 does,
/// the result decoded back into the kind's type.
fn json_patch(
    value: &Value<'_>,
    object: &Json,
    context: &PatchContext<'_>,
) -> Result<Json, PatchFailure> {
    use celgate_cel::mutation::{json_patch_view, to_patch_json, PatchValueError};
    use patch::json_patch::{patch_object, ApplyLimits, JsonPatchError, OpError, PatchOp};
    let Value::List(list) = value else {
        // The compiler checked `list(JSONPatch)`: another value is an engine bug, reported
        // as the policy's error rather than trusted.
        return Err(PatchFailure::Policy(format!(
            "{UNMARSHALABLE}: expected list(JSONPatch)"
        )));
    };
    let mut ops = Vec::with_capacity(list.len());
    for item in list.iter() {
        let Some(p) = json_patch_view(&item) else {
            return Err(PatchFailure::Policy(format!(
                "{UNMARSHALABLE}: expected JSONPatch"
            )));
        };
        let value = match p.value.map(to_patch_json).transpose() {
            Ok(v) => v,
            // In-tree cel-go's conversion panics here and the API server drops the
            // connection: celgate denies instead.
            Err(e @ PatchValueError::NestedObject { .. }) => {
                return Err(PatchFailure::Internal(format!(
                    "the API server cannot convert this JSONPatch value (it panics: {e})"
                )))
            }
            Err(e) => return Err(PatchFailure::Policy(format!("{UNMARSHALABLE}: {e}"))),
        };
        ops.push(PatchOp::new(
            p.op.unwrap_or(""),
            p.path.unwrap_or(""),
            p.from.unwrap_or(""),
            value,
        ));
    }
    let limits = ApplyLimits {
        max_copy_bytes: context.max_copy_bytes,
    };
    patch_object(object, context.kind, &ops, limits).map_err(|e| match e {
        JsonPatchError::Apply(OpError::Panic(why)) => PatchFailure::Internal(format!(
            "the API server cannot apply this JSON patch (it panics: {why})"
        )),
        JsonPatchError::Apply(_) => PatchFailure::Policy(e.to_string()),
        JsonPatchError::Decode(d) => PatchFailure::Internal(d.to_string()),
    })
}
