//! What a MutatingAdmissionPolicy's mutation expressions see beyond a VAP's: the `Object`
//! type family and the `JSONPatch` type, `jsonpatch.escapeKey`, the values they build, and
//! the conversion of a JSONPatch `value` to JSON.
//!
//! Follows Kubernetes' `admission/plugin/cel/compile.go` (`HasPatchTypes`: the resolver of
//! `cel/mutation/typeresolver.go` and `cel/library/jsonpatch.go`, both on top of the VAP
//! environment, for mutation expressions only; matchConditions and variables keep the VAP
//! environment), `cel/mutation/dynamic/objects.go` (`Object` and `Object.<path>`: any field,
//! each `dyn`; values compared with Go's `reflect.DeepEqual`), `cel/mutation/jsonpatch.go`
//! (`JSONPatch`: `op`, `path`, `from` strings and a `dyn` `value`; another field is found
//! with no type, so the checker reports it as `expected type of field 'x' is ''`), and
//! `mutating/patch/json_patch.go` with cel-go's `ConvertToNative` into `structpb.Value`
//! (`common/types/*.go`) for [`to_patch_json`]. cel-go charges a struct creation 40
//! (`common.StructCreateBaseCost`).
//!
//! The checked result type Kubernetes words `must evaluate to Object but got ...` with is
//! [`crate::Program::result_type`], whose `Display` is cel-go's `Type.String()`
//! (`list(JSONPatch)`, `list(dyn)` for `[]`, `map(string, string)`, `Object.spec`).

use std::collections::HashSet;
use std::sync::{Arc, Mutex, OnceLock};

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use serde_json::Value as Json;

use super::env::Env;
use super::error::EvalError;
use super::meter::Meter;
use super::overload::{since, Cost, Register};
use super::types::{ObjectType, Type};
use super::value::{List, Map, Opaque, OwnedMap, Str, TypedList, Value, VALUE_BYTES};
use super::vap::{self, Decls, Slots};

/// The root of the `Object` type family: `Object` is the mutated object's type,
/// `Object.spec.containers` the type of its `spec.containers` items.
pub const OBJECT_TYPE: &str = "Object";

/// The JSON Patch operation type.
pub const JSON_PATCH_TYPE: &str = "JSONPatch";

/// The environment of a MutatingAdmissionPolicy's mutation expressions (`applyConfiguration`
/// and `jsonPatch`): the VAP variables of `decls` plus the patch types and
/// `jsonpatch.escapeKey`. A policy's matchConditions and variables are compiled in the VAP
/// environment ([`vap::vap_env`]), as Kubernetes compiles them.
pub fn map_env(version: u16, decls: Decls) -> (Env, Slots) {
    let (mut env, slots) = vap::vap_env(version, decls);
    env.declare_patch_types();
    (env, slots)
}

/// [`map_env`] with `object`, `oldObject` and `params` typed ([`vap::vap_env_typed`]).
pub fn map_env_typed(version: u16, decls: Decls, object: Type, params: Type) -> (Env, Slots) {
    let (mut env, slots) = vap::vap_env_typed(version, decls, object, params);
    env.declare_patch_types();
    (env, slots)
}

/// The static type `name` names among the patch types: `Object`, `Object.<a>.<b>...` or
/// `JSONPatch`; `None` for another name.
pub fn patch_type(name: &str) -> Option<Type> {
    if name == JSON_PATCH_TYPE {
        static T: OnceLock<Type> = OnceLock::new();
        let t = T.get_or_init(|| {
            Type::Object(Arc::new(ObjectType {
                name: JSON_PATCH_TYPE.into(),
                fields: ["op", "path", "from"]
                    .iter()
                    .map(|f| (f.to_string(), Type::String))
                    .chain(std::iter::once(("value".to_string(), Type::Dyn)))
                    .collect(),
            }))
        });
        return Some(t.clone());
    }
    is_object_name(name).then(|| {
        Type::Object(Arc::new(ObjectType {
            name: name.into(),
            fields: Vec::new(),
        }))
    })
}

/// Whether `name` is in the `Object` family.
fn is_object_name(name: &str) -> bool {
    name == OBJECT_TYPE
        || name
            .strip_prefix(OBJECT_TYPE)
            .and_then(|rest| rest.strip_prefix('.'))
            .is_some_and(|path| path.split('.').all(|p| !p.is_empty()))
}

/// The declared type of `field` of the patch type `name`: `None` when `name` is no patch
/// type, `Some(None)` for a field Kubernetes' `JSONPatch` provider finds without a type
/// (any name but its four), which only a `dyn` value is assignable to.
pub(crate) fn patch_field(name: &str, field: &str) -> Option<Option<Type>> {
    if name == JSON_PATCH_TYPE {
        return Some(match field {
            "op" | "path" | "from" => Some(Type::String),
            "value" => Some(Type::Dyn),
            _ => None,
        });
    }
    is_object_name(name).then_some(Some(Type::Dyn))
}

/// `name` with a `'static` lifetime, leaked once per distinct name: type names come from
/// policy sources (a handful each), and a value's type name must be `'static`.
pub(crate) fn intern(name: &str) -> &'static str {
    static NAMES: OnceLock<Mutex<HashSet<&'static str>>> = OnceLock::new();
    let mut names = NAMES
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some(n) = names.get(name) {
        return n;
    }
    let leaked: &'static str = Box::leak(name.to_owned().into_boxed_str());
    names.insert(leaked);
    leaked
}

/// A value built by `Object{...}` or `Object.<path>{...}`.
#[derive(Debug)]
pub struct ObjectValue {
    type_name: &'static str,
    fields: Vec<(Box<str>, Value<'static>)>,
    /// Per field, the Go type of an element `structpb.NewValue` will refuse: a list or map
    /// built by an expression inside a field's list or map built by an expression
    /// (cel-go's `[]ref.Val`, `map[ref.Val]ref.Val`). Found before the copy, which no longer
    /// tells data read from the request from data built.
    refused: Vec<Option<&'static str>>,
}

/// A value built by `JSONPatch{...}`: each field as given.
#[derive(Debug)]
pub struct JsonPatchValue {
    op: Option<Box<str>>,
    path: Option<Box<str>>,
    from: Option<Box<str>>,
    value: Option<Value<'static>>,
}

/// An `Object` value as the engine reads it.
#[derive(Debug, Clone, Copy)]
pub struct ObjectView<'v> {
    /// The type name exactly as written (`Object.spec.containers`).
    pub type_name: &'v str,
    /// The fields in the order written (a field written twice keeps its first place and
    /// its last value, as a Go map assigned in order).
    pub fields: &'v [(Box<str>, Value<'static>)],
}

impl<'v> ObjectView<'v> {
    /// The fields as `(name, value)`, in the order written.
    pub fn iter(&self) -> impl Iterator<Item = (&'v str, &'v Value<'static>)> + 'v {
        self.fields.iter().map(|(n, v)| (n.as_ref(), v))
    }
}

/// A `JSONPatch` value as the engine reads it: each field `None` when it was not given.
/// Kubernetes writes `op` and `path` always (empty when not given), `from` only when not
/// empty, and `value` when given (`json_patch.go`).
#[derive(Debug, Clone, Copy)]
pub struct JsonPatchView<'v> {
    /// `op`.
    pub op: Option<&'v str>,
    /// `path`.
    pub path: Option<&'v str>,
    /// `from`.
    pub from: Option<&'v str>,
    /// `value` (possibly `null`, which is given).
    pub value: Option<&'v Value<'static>>,
}

/// The `Object` value `v` is, if it is one.
pub fn object_view<'v>(v: &'v Value<'_>) -> Option<ObjectView<'v>> {
    let o = v.as_opaque::<ObjectValue>()?;
    Some(ObjectView {
        type_name: o.type_name,
        fields: &o.fields,
    })
}

/// The `JSONPatch` value `v` is, if it is one.
pub fn json_patch_view<'v>(v: &'v Value<'_>) -> Option<JsonPatchView<'v>> {
    let p = v.as_opaque::<JsonPatchValue>()?;
    Some(JsonPatchView {
        op: p.op.as_deref(),
        path: p.path.as_deref(),
        from: p.from.as_deref(),
        value: p.value.as_ref(),
    })
}

impl Opaque for ObjectValue {
    fn type_name(&self) -> &'static str {
        self.type_name
    }
    /// `reflect.DeepEqual` of the two field maps.
    fn equals(&self, other: &dyn Opaque) -> bool {
        other
            .as_any()
            .downcast_ref::<ObjectValue>()
            .is_some_and(|o| {
                o.type_name == self.type_name
                    && o.fields.len() == self.fields.len()
                    && self.fields.iter().all(|(n, v)| {
                        o.fields
                            .iter()
                            .find(|(m, _)| m == n)
                            .is_some_and(|(_, w)| deep_equal(v, w))
                    })
            })
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

impl Opaque for JsonPatchValue {
    fn type_name(&self) -> &'static str {
        JSON_PATCH_TYPE
    }
    /// `op`, `from` and `path` equal (not given is empty), and both values absent or equal
    /// by CEL equality (`JSONPatchVal.Equal`).
    fn equals(&self, other: &dyn Opaque) -> bool {
        let text = |s: &Option<Box<str>>| s.as_deref().unwrap_or("").to_owned();
        other
            .as_any()
            .downcast_ref::<JsonPatchValue>()
            .is_some_and(|o| {
                text(&self.op) == text(&o.op)
                    && text(&self.from) == text(&o.from)
                    && text(&self.path) == text(&o.path)
                    && match (&self.value, &o.value) {
                        (None, None) => true,
                        (Some(a), Some(b)) => a.equals(b),
                        _ => false,
                    }
            })
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

/// Go's `reflect.DeepEqual` on two cel-go values held in an `Object`'s fields: scalars of
/// the same Go type and value (no numeric cross-kind equality, NaN unequal to itself),
/// nested objects field by field; cel-go's lists and maps hold function values, which
/// `DeepEqual` never finds equal.
fn deep_equal(a: &Value<'_>, b: &Value<'_>) -> bool {
    match (a, b) {
        (Value::Null, Value::Null) => true,
        (Value::Bool(x), Value::Bool(y)) => x == y,
        (Value::Int(x), Value::Int(y)) => x == y,
        (Value::Uint(x), Value::Uint(y)) => x == y,
        (Value::Double(x), Value::Double(y)) => x == y,
        (Value::String(x), Value::String(y)) => x.as_str() == y.as_str(),
        (Value::Bytes(x), Value::Bytes(y)) => x == y,
        (Value::Timestamp(_), Value::Timestamp(_)) | (Value::Duration(_), Value::Duration(_)) => {
            a.equals(b)
        }
        (Value::Type(x), Value::Type(y)) => x == y,
        (Value::Optional(x), Value::Optional(y)) => match (x, y) {
            (None, None) => true,
            (Some(x), Some(y)) => deep_equal(x, y),
            _ => false,
        },
        (Value::Opaque(x), Value::Opaque(y)) => {
            x.type_name() == y.type_name() && x.equals(y.as_ref())
        }
        _ => false,
    }
}

/// Builds the value of `type_name{fields}` (a patch type the checker resolved; `fields` in
/// the order written), copying what the fields borrow so the value outlives the request
/// (charged to `meter`'s memory), and checking `JSONPatch` fields as `JSONPatchType.Val`.
pub(crate) fn construct<'a>(
    type_name: &'static str,
    fields: Vec<(&str, Value<'a>)>,
    meter: &mut Meter,
) -> Result<Value<'a>, EvalError> {
    if let Some(built) = super::wellknown::construct(type_name, &fields) {
        return built;
    }
    // A declared object type that is no patch type (`kubernetes.AdmissionRequest{}`):
    // Kubernetes' type provider knows its fields but creates no values of it.
    if type_name != JSON_PATCH_TYPE && !is_object_name(type_name) {
        return Err(EvalError::new(format!("unknown type '{type_name}'")));
    }
    if type_name == JSON_PATCH_TYPE {
        let mut p = JsonPatchValue {
            op: None,
            path: None,
            from: None,
            value: None,
        };
        for (name, v) in fields {
            let text = |v: &Value<'_>| match v {
                Value::String(s) => Ok(Some(Box::<str>::from(s.as_str()))),
                other => Err(EvalError::new(format!(
                    "unexpected type {} for JSONPatchType '{name}' field",
                    go_native_type(other)
                ))),
            };
            match name {
                "op" => p.op = text(&v)?,
                "path" => p.path = text(&v)?,
                "from" => p.from = text(&v)?,
                "value" => p.value = Some(to_static(&v, meter)?),
                other => {
                    return Err(EvalError::new(format!(
                        "unexpected JSONPatchType field: {other}"
                    )))
                }
            }
        }
        meter.alloc(4 * VALUE_BYTES)?;
        return Ok(Value::opaque(p));
    }
    let mut out: Vec<(Box<str>, Value<'static>)> = Vec::with_capacity(fields.len());
    let mut refused = Vec::with_capacity(fields.len());
    for (name, v) in fields {
        let bad = refused_element(&v);
        let v = to_static(&v, meter)?;
        match out.iter().position(|(n, _)| n.as_ref() == name) {
            Some(i) => {
                out[i].1 = v;
                refused[i] = bad;
            }
            None => {
                out.push((name.into(), v));
                refused.push(bad);
            }
        }
    }
    meter.alloc(out.len() as u64 * 2 * VALUE_BYTES)?;
    Ok(Value::opaque(ObjectValue {
        type_name,
        fields: out,
        refused,
    }))
}

/// The Go type of a list or map built by an expression (`[]ref.Val`,
/// `map[ref.Val]ref.Val`); `None` for data read from the request and anything else.
fn built_aggregate(v: &Value<'_>) -> Option<&'static str> {
    match v {
        Value::List(List::Owned(_) | List::Concat(_)) => Some("[]ref.Val"),
        Value::Map(Map::Owned(_)) => Some("map[ref.Val]ref.Val"),
        _ => None,
    }
}

/// For an `Object` field `v`: when `v` is a list or map built by an expression, the Go type
/// of its first element that is one too (`convertField` takes such elements' `Value()`,
/// which `structpb.NewValue` refuses).
fn refused_element(v: &Value<'_>) -> Option<&'static str> {
    built_aggregate(v)?;
    match v {
        Value::List(l) => l.iter().find_map(|e| built_aggregate(&e)),
        Value::Map(m) => m.entries().iter().find_map(|(_, e)| built_aggregate(e)),
        _ => None,
    }
}

/// Field `field` of a `JSONPatch` value (`JSONPatchVal.Get`: a text field not given is
/// empty); `None` for another value or field, or a `value` not given.
pub(crate) fn patch_field_value<'a>(o: &dyn Opaque, field: &str) -> Option<Value<'a>> {
    let p = o.as_any().downcast_ref::<JsonPatchValue>()?;
    let text = |s: &Option<Box<str>>| Some(Value::string(s.as_deref().unwrap_or("")));
    match field {
        "op" => text(&p.op),
        "path" => text(&p.path),
        "from" => text(&p.from),
        "value" => p.value.clone(),
        _ => None,
    }
}

/// The Go type cel-go's `Value()` gives for `v`, as `%T` prints it in messages.
fn go_native_type(v: &Value<'_>) -> &'static str {
    match v {
        Value::Null => "structpb.NullValue",
        Value::Bool(_) => "bool",
        Value::Int(_) => "int64",
        Value::Uint(_) => "uint64",
        Value::Double(_) => "float64",
        Value::String(_) => "string",
        Value::Bytes(_) => "[]uint8",
        Value::List(List::Json(_) | List::Doc(_) | List::Typed(_)) => "[]interface {}",
        Value::List(_) => "[]ref.Val",
        Value::Map(Map::Json(_) | Map::Doc(_)) => "map[string]interface {}",
        Value::Map(_) => "map[ref.Val]ref.Val",
        Value::Timestamp(_) => "time.Time",
        Value::Duration(_) => "time.Duration",
        Value::Type(_) => "*types.Type",
        Value::Optional(_) => "*types.Optional",
        Value::Opaque(o) if o.as_any().is::<ObjectValue>() => "map[string]interface {}",
        Value::Opaque(o) if o.as_any().is::<JsonPatchValue>() => "*mutation.JSONPatchVal",
        Value::Opaque(_) => "ref.Val",
    }
}

/// `v` with everything it borrows copied, so it lives as long as the value built around it;
/// each element and string byte copied is charged to `meter`'s memory before it is made (a
/// list concatenated with itself forty times is a small view, but not once flattened).
fn to_static(v: &Value<'_>, meter: &mut Meter) -> Result<Value<'static>, EvalError> {
    super::json::with_stack(|| {
        Ok(match v {
            Value::Null => Value::Null,
            Value::Bool(b) => Value::Bool(*b),
            Value::Int(i) => Value::Int(*i),
            Value::Uint(u) => Value::Uint(*u),
            Value::Double(d) => Value::Double(*d),
            Value::String(Str::Shared(s)) => Value::String(Str::Shared(s.clone())),
            Value::String(s) => {
                meter.alloc(s.as_str().len() as u64)?;
                Value::string(s.as_str())
            }
            Value::Bytes(b) => Value::Bytes(b.clone()),
            Value::List(l) => {
                meter.alloc(l.len() as u64 * VALUE_BYTES)?;
                let mut items = Vec::with_capacity(l.len());
                for item in l.iter() {
                    items.push(to_static(&item, meter)?);
                }
                match l {
                    List::Typed(t) => Value::List(List::Typed(Arc::new(TypedList {
                        kind: t.kind.clone(),
                        items,
                    }))),
                    _ => Value::list(items),
                }
            }
            Value::Map(m) => {
                meter.alloc(m.len() as u64 * 2 * VALUE_BYTES)?;
                let mut entries = Vec::with_capacity(m.len());
                for (k, v) in m.entries() {
                    entries.push((to_static(&k, meter)?, to_static(&v, meter)?));
                }
                Value::Map(Map::Owned(Arc::new(OwnedMap::from_distinct(entries))))
            }
            Value::Timestamp(t) => Value::Timestamp(*t),
            Value::Duration(d) => Value::Duration(*d),
            Value::Type(t) => Value::Type(t),
            Value::Optional(o) => match o {
                None => Value::Optional(None),
                Some(inner) => Value::optional(Some(to_static(inner, meter)?)),
            },
            Value::Opaque(o) => Value::Opaque(o.clone()),
        })
    })
}

/// Why a JSONPatch `value` has no JSON form. The messages are cel-go's and the Go
/// runtime's; Kubernetes puts `JSONPath valueExpression evaluated to a type that could not
/// marshal to JSON: ` before them (the API server panics on [`PatchValueError::NestedObject`]
/// instead: it closes the connection without an answer).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PatchValueError {
    /// A type value (`type(1)`).
    #[error("type conversion not supported for 'type'")]
    TypeValue,
    /// `optional.none()`.
    #[error("optional.none() dereference")]
    OptionalNone,
    /// An `Object` value inside a list or a map: cel-go's `ConvertToNative` sets a
    /// `*structpb.Struct` where a `*structpb.Value` goes, and the API server panics.
    #[error("reflect.{setter}: value of type *structpb.Struct is not assignable to type *structpb.Value", setter = if *.in_map { "Value.SetMapIndex" } else { "Set" })]
    NestedObject {
        /// Inside a map rather than a list.
        in_map: bool,
    },
    /// A map key that is not a string.
    #[error("unsupported type conversion from '{key_type}' to string")]
    MapKey {
        /// The key's CEL type.
        key_type: &'static str,
    },
    /// An `Object` field's value whose Go form `structpb.NewValue` does not take.
    #[error("proto: invalid type: {go_type}")]
    InvalidNative {
        /// The Go type (`time.Time`, `[]ref.Val`...).
        go_type: &'static str,
    },
    /// An `Object` field holding a map with a key that is not a string.
    #[error("fail to convert field {field:?}: map key {key:?} is of type {key_type}, not string")]
    ObjectMapKey {
        /// The field.
        field: String,
        /// The key as text.
        key: String,
        /// The key's cel-go type.
        key_type: &'static str,
    },
    /// A double that JSON cannot hold (NaN, an infinity).
    #[error("json: error calling MarshalJSON for type *structpb.Value: google.protobuf.Value: invalid {value} value")]
    NotFinite {
        /// `NaN`, `+Inf` or `-Inf`.
        value: &'static str,
    },
    /// A value cel-go cannot convert to JSON at all (a `JSONPatch`, a library value).
    #[error("{message}")]
    Unconvertible {
        /// cel-go's message.
        message: String,
    },
}

/// The largest integer cel-go writes as a JSON number; beyond it an int or uint becomes a
/// decimal string (`Int.isJSONSafe`).
const MAX_JSON_INT: i64 = (1 << 53) - 1;

/// A JSONPatch `value` as Kubernetes writes it into the patch (`json_patch.go`): cel-go's
/// `ConvertToNative` to `*structpb.Value`, then JSON. Ints and uints within ±(2^53 − 1)
/// are numbers, beyond it decimal strings; doubles are numbers (integral ones written as
/// integers); bytes base64; timestamps RFC 3339; durations `"3723s"`; `optional.of(x)` is
/// `x`; an `Object` value is its fields as Go values (see [`PatchValueError`] for what
/// fails).
pub fn to_patch_json(v: &Value<'_>) -> Result<Json, PatchValueError> {
    super::json::with_stack(|| {
        Ok(match v {
            Value::Null => Json::Null,
            Value::Bool(b) => Json::Bool(*b),
            Value::Int(i) if (-MAX_JSON_INT..=MAX_JSON_INT).contains(i) => Json::from(*i),
            Value::Int(i) => Json::String(i.to_string()),
            Value::Uint(u) if *u <= MAX_JSON_INT as u64 => Json::from(*u),
            Value::Uint(u) => Json::String(u.to_string()),
            Value::Double(d) => number(*d)?,
            Value::String(s) => Json::String(s.as_str().to_owned()),
            Value::Bytes(b) => Json::String(STANDARD.encode(b)),
            Value::Timestamp(t) => Json::String(t.to_rfc3339()),
            Value::Duration(d) => Json::String(super::time::format_duration(*d)),
            Value::List(l) => {
                let mut out = Vec::with_capacity(l.len());
                for item in l.iter() {
                    if item.as_opaque::<ObjectValue>().is_some() {
                        return Err(PatchValueError::NestedObject { in_map: false });
                    }
                    out.push(to_patch_json(&item)?);
                }
                Json::Array(out)
            }
            Value::Map(m) => {
                let mut out = serde_json::Map::new();
                for (k, v) in m.entries() {
                    let Value::String(k) = &k else {
                        return Err(PatchValueError::MapKey {
                            key_type: k.type_name(),
                        });
                    };
                    if v.as_opaque::<ObjectValue>().is_some() {
                        return Err(PatchValueError::NestedObject { in_map: true });
                    }
                    out.insert(k.as_str().to_owned(), to_patch_json(&v)?);
                }
                Json::Object(out)
            }
            Value::Type(_) => return Err(PatchValueError::TypeValue),
            Value::Optional(None) => return Err(PatchValueError::OptionalNone),
            Value::Optional(Some(inner)) => to_patch_json(inner)?,
            Value::Opaque(o) => {
                if let Some(obj) = o.as_any().downcast_ref::<ObjectValue>() {
                    return object_json(obj);
                }
                let message = if o.as_any().is::<JsonPatchValue>() {
                    "cannot convert to native type: *structpb.Value".to_owned()
                } else {
                    let short = o.type_name().rsplit('.').next().unwrap_or("");
                    format!("type conversion error from '{short}' to '*structpb.Value'")
                };
                return Err(PatchValueError::Unconvertible { message });
            }
        })
    })
}

/// A double as JSON: integral values within 2^63 as integers (Go's encoder writes `3`, not
/// `3.0`); NaN and infinities refused, as the protobuf JSON encoder refuses them.
fn number(d: f64) -> Result<Json, PatchValueError> {
    if d.is_nan() {
        return Err(PatchValueError::NotFinite { value: "NaN" });
    }
    if d.is_infinite() {
        let value = if d > 0.0 { "+Inf" } else { "-Inf" };
        return Err(PatchValueError::NotFinite { value });
    }
    if d.fract() == 0.0 && d.abs() < 9.2e18 {
        return Ok(Json::from(d as i64));
    }
    Ok(serde_json::Number::from_f64(d).map_or(Json::Null, Json::Number))
}

/// An `Object` value's JSON: `ObjectVal.ConvertToNative` makes each field a Go value
/// (`convertField`: a list or map built by an expression element by element through
/// `Value()`, anything else through `Value()`), then `structpb.NewStruct` takes them.
fn object_json(obj: &ObjectValue) -> Result<Json, PatchValueError> {
    let mut out = serde_json::Map::new();
    for ((name, v), refused) in obj.fields.iter().zip(&obj.refused) {
        if let Some(go_type) = refused {
            return Err(PatchValueError::InvalidNative { go_type });
        }
        let json = match v {
            Value::List(l @ (List::Owned(_) | List::Concat(_))) => {
                let mut items = Vec::with_capacity(l.len());
                for item in l.iter() {
                    items.push(native_json(&item)?);
                }
                Json::Array(items)
            }
            Value::Map(m @ Map::Owned(_)) => {
                let mut entries = serde_json::Map::new();
                for (k, v) in m.entries() {
                    let Value::String(key) = &k else {
                        return Err(PatchValueError::ObjectMapKey {
                            field: name.to_string(),
                            key: k.debug_string(),
                            key_type: go_cel_type(&k),
                        });
                    };
                    entries.insert(key.as_str().to_owned(), native_json(&v)?);
                }
                Json::Object(entries)
            }
            other => native_json(other)?,
        };
        out.insert(name.to_string(), json);
    }
    Ok(Json::Object(out))
}

/// The cel-go type of a map key, as `%T` prints it.
fn go_cel_type(v: &Value<'_>) -> &'static str {
    match v {
        Value::Int(_) => "types.Int",
        Value::Uint(_) => "types.Uint",
        Value::Bool(_) => "types.Bool",
        Value::Double(_) => "types.Double",
        _ => "ref.Val",
    }
}

/// `structpb.NewValue` of cel-go's `v.Value()`: JSON data as it is, every number a
/// double, bytes base64, a nested object its fields; times, durations and other values are
/// refused. Lists and maps here are request data (those built by an expression where Go
/// refuses them were found when the object was built: `ObjectValue::refused`).
fn native_json(v: &Value<'_>) -> Result<Json, PatchValueError> {
    super::json::with_stack(|| {
        Ok(match v {
            Value::Null | Value::Optional(None) => Json::Null,
            Value::Bool(b) => Json::Bool(*b),
            Value::Int(i) => number(*i as f64)?,
            Value::Uint(u) => number(*u as f64)?,
            Value::Double(d) => number(*d)?,
            Value::String(s) => Json::String(s.as_str().to_owned()),
            Value::Bytes(b) => Json::String(STANDARD.encode(b)),
            Value::List(l) => {
                let mut items = Vec::with_capacity(l.len());
                for item in l.iter() {
                    items.push(native_json(&item)?);
                }
                Json::Array(items)
            }
            Value::Map(m) => {
                let mut out = serde_json::Map::new();
                for (k, v) in m.entries() {
                    out.insert(k.as_str().unwrap_or("").to_owned(), native_json(&v)?);
                }
                Json::Object(out)
            }
            Value::Optional(Some(inner)) => native_json(inner)?,
            Value::Opaque(o) if o.as_any().is::<ObjectValue>() => {
                let obj = o.as_any().downcast_ref::<ObjectValue>();
                match obj {
                    Some(obj) => object_json(obj)?,
                    None => Json::Null,
                }
            }
            other => {
                return Err(PatchValueError::InvalidNative {
                    go_type: go_native_type(other),
                })
            }
        })
    })
}

/// `jsonpatch.escapeKey(s)`: `~` as `~0`, `/` as `~1`.
pub fn escape_key(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '~' => out.push_str("~0"),
            '/' => out.push_str("~1"),
            c => out.push(c),
        }
    }
    out
}

fn escape_key_fn<'a>(a: &[Value<'a>]) -> Result<Value<'a>, EvalError> {
    match &a[0] {
        Value::String(s) => Ok(Value::string(escape_key(s.as_str()))),
        _ => Err(EvalError::no_such_overload()),
    }
}

/// Adds the library Kubernetes declares with the patch types (`library/jsonpatch.go`),
/// offered only where they are ([`since::PATCH_TYPES`]); no cost rule, so cel-go's 1.
pub(crate) fn register(add: Register<'_>) {
    add(
        "jsonpatch.escapeKey",
        &[("(string) string", since::PATCH_TYPES)],
        escape_key_fn,
        Cost::One,
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Meter, NEWEST_MINOR};

    const DECLS: Decls = Decls {
        params: false,
        authorizer: true,
    };

    fn map() -> Env {
        map_env(NEWEST_MINOR, DECLS).0
    }

    fn compile_error(env: &Env, src: &str) -> String {
        env.compile(src).unwrap_err().to_string()
    }

    /// What `policy-create.json` records after `compilation failed: `.
    #[test]
    fn creation_errors_are_the_api_servers() {
        let env = map();
        assert_eq!(
            compile_error(&env, "[JSONPatch{op: 'add', path: '/data/x', valu: 'y'}]"),
            "ERROR: <input>:1:44: expected type of field 'valu' is '' but provided type is 'string'\n \
             | [JSONPatch{op: 'add', path: '/data/x', valu: 'y'}]\n \
             | ...........................................^"
        );
        let src = "Object{metadata: Object.metadata{labels: {'keys': string(size(object.data)), 'first': object.data.k1}}}";
        assert_eq!(
            compile_error(&env, src),
            format!(
                "ERROR: <input>:1:98: expected type 'string' but found 'dyn'\n | {src}\n | {}^",
                ".".repeat(97)
            )
        );
        let src = "Object{metadata: Object.metadata{labels: {'x': params.data.x}}}";
        assert_eq!(
            compile_error(&env, src),
            format!(
                "ERROR: <input>:1:48: undeclared reference to 'params' (in container '')\n | {src}\n | {}^",
                ".".repeat(47)
            )
        );
        // The typed fields of JSONPatch; a dyn value passes for a field without a type.
        assert!(compile_error(&env, "JSONPatch{op: 1}")
            .contains("expected type of field 'op' is 'string' but provided type is 'int'"));
        assert!(env.compile("JSONPatch{valu: dyn('y')}").is_ok());
        assert!(env
            .compile("JSONPatch{op: 'add', value: 1, from: 'a'}")
            .is_ok());
        // Any field of any Object type, each dyn.
        assert!(env
            .compile("Object{spec: Object.spec{anything: 1, replicas: 'x'}}.spec")
            .is_ok());
    }

    /// The types the engine words `must evaluate to ... but got ...` with.
    #[test]
    fn result_types_print_as_cel_go_prints_them() {
        let env = map();
        let ty = |src: &str| env.compile(src).unwrap().result_type().to_string();
        assert_eq!(ty("Object{}"), "Object");
        assert_eq!(
            ty("Object.spec.containers{name: 'a'}"),
            "Object.spec.containers"
        );
        assert_eq!(
            ty("[JSONPatch{op: 'add', path: '/a', value: 1}]"),
            "list(JSONPatch)"
        );
        assert_eq!(
            ty("JSONPatch{op: 'add', path: '/data/x', value: 'y'}"),
            "JSONPatch"
        );
        assert_eq!(ty("[]"), "list(dyn)");
        assert_eq!(ty("dyn([1, 2])"), "dyn");
        assert_eq!(ty("'hello'"), "string");
        assert_eq!(
            ty("{'metadata': {'labels': {'a': 'b'}}}"),
            "map(string, map(string, map(string, string)))"
        );
        assert_eq!(
            ty("[{'op': 'add', 'path': '/data/x', 'value': 'y'}]"),
            "list(map(string, string))"
        );
        assert_eq!(ty("type(Object{})"), "type(Object)");
        assert_eq!(ty("JSONPatch{}.op"), "string");
    }

    /// Only mutation expressions see the patch types and library; a VAP is unchanged.
    #[test]
    fn the_vap_environment_has_no_patch_types() {
        let (vap, _) = vap::vap_env(NEWEST_MINOR, DECLS);
        assert!(compile_error(&vap, "Object{}").contains("undeclared reference to 'Object'"));
        assert!(
            compile_error(&vap, "[JSONPatch{}]").contains("undeclared reference to 'JSONPatch'")
        );
        // Undeclared, the namespaced function is a member call on `jsonpatch` (cel-go's
        // checkCall): each segment is reported.
        let escape = compile_error(&vap, "jsonpatch.escapeKey('a')");
        assert!(
            escape.contains("undeclared reference to 'jsonpatch'"),
            "{escape}"
        );
        assert!(
            escape.contains("undeclared reference to 'escapeKey'"),
            "{escape}"
        );
        assert!(compile_error(&vap, "{'a': 'x', 'b': object.y}")
            .contains("expected type 'string' but found 'dyn'"));
        assert!(!vap.has_patch_types() && map().has_patch_types());
    }

    fn eval(src: &str, object: &Json) -> (Result<Value<'static>, EvalError>, u64) {
        let env = map();
        let p = env.compile(src).unwrap();
        let mut vars: [Value<'_>; 6] = std::array::from_fn(|_| Value::Null);
        assert_eq!(env.variables().len(), vars.len());
        vars[0] = Value::from_json(object);
        let mut meter = Meter::default();
        let r = p
            .eval(&vars, &mut meter)
            .map(|v| to_static(&v, &mut Meter::default()).unwrap());
        (r, meter.cost)
    }

    #[test]
    fn objects_and_patches_evaluate_to_views() {
        let object = serde_json::json!({"metadata": {"labels": {"a": "b"}}});
        let (v, _) = eval(
            "Object{spec: Object.spec{replicas: 3}, metadata: Object.metadata{labels: object.metadata.labels}}",
            &object,
        );
        let v = v.unwrap();
        let view = object_view(&v).unwrap();
        assert_eq!(view.type_name, "Object");
        let names: Vec<&str> = view.iter().map(|(n, _)| n).collect();
        assert_eq!(names, ["spec", "metadata"]);
        let spec = object_view(&view.fields[0].1).unwrap();
        assert_eq!(spec.type_name, "Object.spec");
        assert!(matches!(spec.fields[0].1, Value::Int(3)));
        let meta = object_view(&view.fields[1].1).unwrap();
        assert!(matches!(&meta.fields[0].1, Value::Map(m) if m.len() == 1));
        assert!(json_patch_view(&v).is_none());

        let (v, _) = eval(
            "JSONPatch{op: 'add', path: '/metadata/labels/' + jsonpatch.escapeKey('k8s.io/a~b'), value: null}",
            &object,
        );
        let v = v.unwrap();
        let p = json_patch_view(&v).unwrap();
        assert_eq!(p.op, Some("add"));
        assert_eq!(p.path, Some("/metadata/labels/k8s.io~1a~0b"));
        assert_eq!(p.from, None);
        assert!(matches!(p.value, Some(Value::Null)));
        let (v, _) = eval("JSONPatch{op: 'remove', ?value: optional.none()}", &object);
        assert!(json_patch_view(&v.unwrap()).unwrap().value.is_none());
        // A field without a type compiles from a dyn value and fails when built.
        let (v, _) = eval("JSONPatch{valu: dyn('y')}", &object);
        assert_eq!(
            v.unwrap_err().message(),
            "unexpected JSONPatchType field: valu"
        );
        let (v, _) = eval("JSONPatch{op: dyn(1)}", &object);
        assert_eq!(
            v.unwrap_err().message(),
            "unexpected type int64 for JSONPatchType 'op' field"
        );
    }

    #[test]
    fn type_equality_and_cost_follow_cel_go() {
        let object = serde_json::json!({});
        let truth = |src: &str| match eval(src, &object).0 {
            Ok(Value::Bool(b)) => b,
            other => panic!("{src}: {other:?}"),
        };
        assert!(truth("type(Object.spec{}) == Object.spec"));
        assert!(truth(
            "JSONPatch{op: 'add', value: 2}.value == 2 && JSONPatch{}.path == ''"
        ));
        assert!(truth("type(JSONPatch{}) == JSONPatch"));
        assert!(truth("type(Object{}) != Object.spec"));
        assert!(truth("Object{a: 1, b: 'x'} == Object{b: 'x', a: 1}"));
        // reflect.DeepEqual: no numeric cross-kind equality; lists never equal.
        assert!(!truth("Object{a: 1} == Object{a: 1u}"));
        assert!(!truth("Object{a: [1]} == Object{a: [1]}"));
        // Different Object types do not compare (no matching overload), as in cel-go.
        assert!(map()
            .compile("Object{} == Object.spec{}")
            .unwrap_err()
            .message()
            .contains("found no matching overload for '_==_' applied to '(Object, Object.spec)'"));
        assert!(truth(
            "Object{s: Object.s{x: 1}} == Object{s: Object.s{x: 1}}"
        ));
        // JSONPatch: CEL equality of values, unset text fields are empty.
        assert!(truth(
            "JSONPatch{op: 'add', value: 1} == JSONPatch{op: 'add', value: 1.0, from: ''}"
        ));
        assert!(!truth(
            "JSONPatch{op: 'add'} == JSONPatch{op: 'add', value: null}"
        ));
        // 40 per struct (cel-go's StructCreateBaseCost); the constant fields cost nothing.
        assert_eq!(eval("Object{}", &object).1, 40);
        assert_eq!(eval("Object{spec: Object.spec{a: 'x'}}", &object).1, 80);
        assert_eq!(eval("JSONPatch{op: 'add'}", &object).1, 40);
    }

    fn patch_json(src: &str) -> Result<Json, PatchValueError> {
        let object = serde_json::json!({"spec": {"ports": [{"port": 80}]}, "n": 5});
        let v = eval(src, &object).0.unwrap();
        to_patch_json(&v)
    }

    /// Recorded: uint and 3.0 as integers (071, 072), bytes base64 (078), timestamp and
    /// duration (083, 084), optional.of (250), type(1) (251), a list of Objects (089, 263),
    /// a single Object (101), a list of maps (264).
    #[test]
    fn patch_values_convert_as_cel_go_to_structpb() {
        use serde_json::json;
        assert_eq!(patch_json("3u").unwrap(), json!(3));
        assert_eq!(patch_json("3.0").unwrap(), json!(3));
        assert_eq!(patch_json("3.5").unwrap(), json!(3.5));
        assert_eq!(
            patch_json("9007199254740992").unwrap(),
            json!("9007199254740992")
        );
        assert_eq!(patch_json("b'hi'").unwrap(), json!("aGk="));
        assert_eq!(
            patch_json("timestamp('2024-01-02T03:04:05Z')").unwrap(),
            json!("2024-01-02T03:04:05Z")
        );
        assert_eq!(patch_json("duration('1h2m3s')").unwrap(), json!("3723s"));
        assert_eq!(patch_json("optional.of('x')").unwrap(), json!("x"));
        assert_eq!(patch_json("null").unwrap(), Json::Null);
        assert_eq!(
            patch_json("type(1)").unwrap_err().to_string(),
            "type conversion not supported for 'type'"
        );
        assert_eq!(
            patch_json("[Object.spec.containers{name: 'only', image: 'x'}]").unwrap_err(),
            PatchValueError::NestedObject { in_map: false }
        );
        assert_eq!(
            patch_json("Object.spec.ports{name: 'https', port: 443}").unwrap(),
            json!({"name": "https", "port": 443})
        );
        assert_eq!(
            patch_json("[{'name': 'a', 'image': 'b'}]").unwrap(),
            json!([{"name": "a", "image": "b"}])
        );
        assert_eq!(
            patch_json(
                "Object.spec{ports: object.spec.ports + [Object.spec.ports{port: 1}], n: object.n}"
            )
            .unwrap(),
            json!({"ports": [{"port": 80}, {"port": 1}], "n": 5})
        );
        assert_eq!(
            patch_json("Object{t: timestamp('2024-01-02T03:04:05Z')}").unwrap_err(),
            PatchValueError::InvalidNative {
                go_type: "time.Time"
            }
        );
        assert_eq!(
            patch_json("Object{l: [[1]]}").unwrap_err(),
            PatchValueError::InvalidNative {
                go_type: "[]ref.Val"
            }
        );
        assert_eq!(
            patch_json("Object{l: [{'a': 'b'}]}").unwrap_err(),
            PatchValueError::InvalidNative {
                go_type: "map[ref.Val]ref.Val"
            }
        );
        assert_eq!(
            patch_json("Object{l: object.spec.ports.map(p, p), m: {'a': object.spec}}").unwrap(),
            json!({"l": [{"port": 80}], "m": {"a": {"ports": [{"port": 80}]}}})
        );
        assert!(matches!(
            patch_json("double('NaN')").unwrap_err(),
            PatchValueError::NotFinite { value: "NaN" }
        ));
    }

    #[test]
    fn escape_key_escapes_tilde_then_slash() {
        assert_eq!(escape_key("k8s.io/my~label"), "k8s.io~1my~0label");
        assert_eq!(escape_key("~1"), "~01");
    }
}
