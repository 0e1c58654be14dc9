//! The patched object read back as the API server reads it after a JSON patch
//! (`patch/json_patch.go`: the strict JSON serializer of apimachinery
//! `runtime/serializer/json`, decoding into the kind's Go type with sigs.k8s.io/json's
//! case-sensitive, unknown-field-refusing decoder). A failure there is the API server's
//! `500 InternalError`, even under `failurePolicy: Ignore` (`Internal error occurred: ...`).
//!
//! Built-in kinds are walked along the OpenAPI definitions celgate carries
//! (`assets/builtin-schemas.json`, with Go's type names taken from the definition names and
//! the integer widths from `format`), reproducing encoding/json's messages: the first type
//! error in document order (`json: cannot unmarshal number 3.5 into Go struct field
//! DeploymentSpec.spec.replicas of type int32`), `[]byte` fields decoded as base64 (`illegal
//! base64 data at input byte N`), then every unknown field (`strict decoding error: unknown
//! field "spec.notAField"`). The kind is read first (`SimpleMetaFactory.Interpret`): a changed
//! `kind` decodes into that kind (ConfigMap data into a Secret's base64 `data`). Custom
//! unmarshalers are followed where they decide the common errors (`metav1.Time` wants a
//! string, `IntOrString` an int32 or a string); `Quantity`, `RawExtension` and `FieldsV1`
//! take anything here.
//!
//! Kinds without a built-in definition (custom resources) are unstructured: anything decodes,
//! only a missing `kind` fails.
//!
//! The object returned is the decoded one as the API server encodes it again, as far as the
//! schema tells: a `null` map value or list element becomes its type's zero value (`""` for a
//! label), a `null` field is left out (Go's pointers and `omitempty`) except a time (`creationTimestamp:
//! null` stays). Omitted zero values of
//! non-pointer fields (`paused: false`) are not known from the schema and stay.

use std::fmt;

use celgate_cel::json::with_stack;
use serde_json::{Map, Value};

use super::json_patch::clone_json;
use crate::matching::registry::Gvk;
use crate::schemas::builtin_definition;

/// Why the patched object does not decode. `Display` is the Go error; the API server's status
/// message is `Internal error occurred: ` and this ([`DecodeError::status_message`]).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DecodeError {
    /// encoding/json's `UnmarshalTypeError`.
    #[error("{0}")]
    Type(UnmarshalTypeError),
    /// A `[]byte` field that is not base64.
    #[error("illegal base64 data at input byte {0}")]
    Base64(usize),
    /// Unknown fields (their paths, at most 100, in document order).
    #[error("strict decoding error: {}", .0.iter().map(|p| format!("unknown field {}", go_quote(p))).collect::<Vec<_>>().join(", "))]
    UnknownFields(Vec<String>),
    /// `apiVersion` or `kind` is not a string.
    #[error("couldn't get version/kind; json parse error: {0}")]
    Interpret(UnmarshalTypeError),
    /// An `apiVersion` with more than one `/`.
    #[error("unexpected GroupVersion string: {0}")]
    GroupVersion(String),
    /// The patch changed the kind to one the API server does not know.
    #[error("no kind {} is registered for version {} in scheme {}", go_quote(.kind), go_quote(.group_version), go_quote(SCHEME))]
    NotRegistered { kind: String, group_version: String },
    /// An unstructured object without `kind` (the whole patched document, compact).
    #[error("Object 'Kind' is missing in '{0}'")]
    MissingKind(String),
}

/// The scheme name in `NotRegistered` (apimachinery names a scheme after the place it was
/// built; not recorded, so this is the legacy scheme's file).
const SCHEME: &str = "pkg/api/legacyscheme/scheme.go:30";

impl DecodeError {
    /// The API server's whole status message (code 500, reason `InternalError`; the cause's
    /// message is the error itself).
    pub fn status_message(&self) -> String {
        format!("Internal error occurred: {self}")
    }
}

/// encoding/json's `UnmarshalTypeError`: what was found (`bool`, `number`, `number 3.5`,
/// `string`, `object`, `array`), where (the innermost struct's Go name and the JSON field
/// names from the root), and the Go type wanted.
#[derive(Debug, Clone, PartialEq)]
pub struct UnmarshalTypeError {
    pub value: String,
    /// `(struct, field path)`, absent at the root.
    pub context: Option<(String, String)>,
    pub go_type: String,
}

impl fmt::Display for UnmarshalTypeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.context {
            Some((s, field)) => write!(
                f,
                "json: cannot unmarshal {} into Go struct field {s}.{field} of type {}",
                self.value, self.go_type
            ),
            None => write!(
                f,
                "json: cannot unmarshal {} into Go value of type {}",
                self.value, self.go_type
            ),
        }
    }
}

impl std::error::Error for UnmarshalTypeError {}

/// Whether objects of `gvk` are typed (a built-in kind) rather than unstructured.
pub fn is_typed(gvk: &Gvk) -> bool {
    builtin_definition(gvk).is_some()
}

/// Decodes the patched `object` of a request for `gvk` (the versioned kind the policy saw) as
/// the API server does, returning it as the API server encodes it again.
pub fn decode(object: &Value, gvk: &Gvk) -> Result<Value, DecodeError> {
    let actual = interpret(object)?;
    let Some((defs, request_def)) = builtin_definition(gvk) else {
        return unstructured(object, &actual);
    };
    let actual = with_defaults(actual, gvk);
    let def = if actual == *gvk {
        request_def
    } else {
        match builtin_definition(&actual) {
            Some((_, d)) => d,
            None => {
                return Err(DecodeError::NotRegistered {
                    kind: actual.kind.clone(),
                    group_version: group_version(&actual),
                })
            }
        }
    };
    let empty = Value::Object(Map::new());
    let object = if object.is_null() { &empty } else { object };
    let mut d = Decoder {
        defs,
        saved: None,
        unknown: Vec::new(),
        fields: Vec::new(),
        in_struct: None,
        strict_path: Vec::new(),
    };
    let ty = GoType::of_def(defs, def);
    let out = d.value(object, &ty).map_err(DecodeError::Type)?;
    if let Some(e) = d.saved {
        return Err(e);
    }
    if !d.unknown.is_empty() {
        return Err(DecodeError::UnknownFields(d.unknown));
    }
    Ok(out.unwrap_or(empty))
}

fn group_version(g: &Gvk) -> String {
    if g.group.is_empty() {
        g.version.clone()
    } else {
        format!("{}/{}", g.group, g.version)
    }
}

/// `SimpleMetaFactory.Interpret`: `apiVersion` and `kind` as strings (absent or `null` is
/// empty), the group/version parsed.
fn interpret(object: &Value) -> Result<Gvk, DecodeError> {
    let kind_struct = || {
        UnmarshalTypeError {
        value: json_kind(object).to_string(),
        context: None,
        go_type: "struct { APIVersion string \"json:\\\"apiVersion,omitempty\\\"\"; Kind string \"json:\\\"kind,omitempty\\\"\" }".into(),
    }
    };
    let m = match object {
        Value::Object(m) => m,
        Value::Null => return Ok(Gvk::new("", "", "")),
        _ => return Err(DecodeError::Interpret(kind_struct())),
    };
    let field = |name: &str| -> Result<String, DecodeError> {
        match m.get(name) {
            None | Some(Value::Null) => Ok(String::new()),
            Some(Value::String(s)) => Ok(s.clone()),
            Some(v) => Err(DecodeError::Interpret(UnmarshalTypeError {
                value: json_kind(v).to_string(),
                context: Some((String::new(), name.to_string())),
                go_type: "string".into(),
            })),
        }
    };
    let api_version = field("apiVersion")?;
    let kind = field("kind")?;
    let (group, version) = if api_version.is_empty() || api_version == "/" {
        (String::new(), String::new())
    } else {
        match api_version.matches('/').count() {
            0 => (String::new(), api_version.clone()),
            1 => {
                let (g, v) = api_version.split_once('/').unwrap_or_default();
                (g.to_string(), v.to_string())
            }
            _ => return Err(DecodeError::GroupVersion(api_version)),
        }
    };
    Ok(Gvk {
        group,
        version,
        kind,
    })
}

/// `gvkWithDefaults`: what the document leaves empty comes from the kind decoded into.
fn with_defaults(mut actual: Gvk, into: &Gvk) -> Gvk {
    if actual.kind.is_empty() {
        actual.kind = into.kind.clone();
    }
    if actual.version.is_empty() && actual.group.is_empty() {
        actual.group = into.group.clone();
        actual.version = into.version.clone();
    }
    if actual.version.is_empty() && actual.group == into.group {
        actual.version = into.version.clone();
    }
    actual
}

fn unstructured(object: &Value, actual: &Gvk) -> Result<Value, DecodeError> {
    if actual.kind.is_empty() {
        return Err(DecodeError::MissingKind(object.to_string()));
    }
    Ok(clone_json(object))
}

/// The Go type a schema stands for.
enum GoType<'d> {
    /// A struct: its Go name (`v1.PodSpec`) and properties.
    Struct {
        package: &'d str,
        name: &'d str,
        props: &'d Map<String, Value>,
    },
    Map(&'d Value),
    Slice(&'d Value),
    Bytes,
    String,
    Int(u8),
    Float(u8),
    Bool,
    /// `metav1.Time`, `MicroTime`: a string (custom unmarshaler).
    Time,
    IntOrString,
    /// Anything decodes (`Quantity`, `RawExtension`, `FieldsV1`, preserved unknown fields).
    Any,
}

impl<'d> GoType<'d> {
    /// The type of the definition `def`.
    fn of_def(defs: &'d Map<String, Value>, def: &'d str) -> GoType<'d> {
        match defs.get(def) {
            Some(s) => GoType::resolve(s, defs, Some(def)),
            None => GoType::Any,
        }
    }

    /// The type of `schema`.
    fn of(schema: &'d Value, defs: &'d Map<String, Value>) -> GoType<'d> {
        GoType::resolve(schema, defs, None)
    }

    fn resolve(
        schema: &'d Value,
        defs: &'d Map<String, Value>,
        def: Option<&'d str>,
    ) -> GoType<'d> {
        let mut def = def;
        let mut s = schema;
        // References lead to definitions (a few levels at most).
        for _ in 0..8 {
            let Some(r) = s.get("$ref").and_then(Value::as_str) else {
                break;
            };
            let Some((name, target)) = defs.get_key_value(r) else {
                return GoType::Any;
            };
            def = Some(name.as_str());
            s = target;
        }
        let flag = |k: &str| s.get(k) == Some(&Value::Bool(true));
        if flag("x-kubernetes-int-or-string") {
            return GoType::IntOrString;
        }
        if flag("x-kubernetes-preserve-unknown-fields") {
            return GoType::Any;
        }
        let format = s.get("format").and_then(Value::as_str).unwrap_or("");
        match s.get("type").and_then(Value::as_str).unwrap_or("") {
            "object" => {
                if let Some(props) = s.get("properties").and_then(Value::as_object) {
                    let (package, name) = go_name(def.unwrap_or(""));
                    GoType::Struct {
                        package,
                        name,
                        props,
                    }
                } else if let Some(elem) = s.get("additionalProperties").filter(|v| v.is_object()) {
                    GoType::Map(elem)
                } else {
                    GoType::Any
                }
            }
            "array" => match s.get("items") {
                Some(items) => GoType::Slice(items),
                None => GoType::Any,
            },
            "string" => match format {
                "byte" => GoType::Bytes,
                "date-time" => GoType::Time,
                _ => GoType::String,
            },
            "integer" => GoType::Int(if format == "int32" { 32 } else { 64 }),
            "number" => GoType::Float(if format == "float" { 32 } else { 64 }),
            "boolean" => GoType::Bool,
            _ => GoType::Any,
        }
    }

    /// `reflect.Type.String()`.
    fn go_string(&self, defs: &'d Map<String, Value>) -> String {
        match self {
            GoType::Struct { package, name, .. } => format!("{package}.{name}"),
            GoType::Map(e) => format!("map[string]{}", GoType::of(e, defs).go_string(defs)),
            GoType::Slice(e) => format!("[]{}", GoType::of(e, defs).go_string(defs)),
            GoType::Bytes => "[]uint8".into(),
            GoType::String => "string".into(),
            GoType::Int(bits) => format!("int{bits}"),
            GoType::Float(bits) => format!("float{bits}"),
            GoType::Bool => "bool".into(),
            GoType::Time => "v1.Time".into(),
            GoType::IntOrString => "intstr.IntOrString".into(),
            GoType::Any => "interface {}".into(),
        }
    }

    /// The Go zero value as encoded, for a `null` map value or list element.
    fn zero(&self) -> Value {
        match self {
            GoType::String => Value::String(String::new()),
            GoType::Int(_) | GoType::Float(_) | GoType::IntOrString => Value::from(0),
            GoType::Bool => Value::Bool(false),
            GoType::Struct { .. } => Value::Object(Map::new()),
            _ => Value::Null,
        }
    }
}

/// `io.k8s.api.core.v1.PodSpec` is Go's `v1.PodSpec`.
fn go_name(def: &str) -> (&str, &str) {
    let mut parts = def.rsplitn(3, '.');
    let name = parts.next().unwrap_or("");
    let package = parts.next().unwrap_or("");
    (package, name)
}

struct Decoder<'d> {
    defs: &'d Map<String, Value>,
    /// The first error encoding/json saves (later ones are dropped).
    saved: Option<DecodeError>,
    /// Unknown field paths, deduplicated, at most 100.
    unknown: Vec<String>,
    /// JSON names of the struct fields entered (`errorContext.FieldStack`).
    fields: Vec<String>,
    /// The Go name of the innermost struct entered.
    in_struct: Option<&'d str>,
    /// sigs.k8s.io/json's strict path: keys, `.`, and `[i]`.
    strict_path: Vec<String>,
}

impl<'d> Decoder<'d> {
    fn type_error(&self, value: String, ty: &GoType<'d>) -> UnmarshalTypeError {
        let context = (self.in_struct.is_some() || !self.fields.is_empty()).then(|| {
            (
                self.in_struct.unwrap_or("").to_string(),
                self.fields.join("."),
            )
        });
        UnmarshalTypeError {
            value,
            context,
            go_type: ty.go_string(self.defs),
        }
    }

    fn save(&mut self, e: DecodeError) {
        if self.saved.is_none() {
            self.saved = Some(e);
        }
    }

    fn mismatch(&mut self, v: &Value, ty: &GoType<'d>) {
        let e = self.type_error(json_kind(v).to_string(), ty);
        self.save(DecodeError::Type(e));
    }

    /// Decodes `v` as `ty`: `Ok(None)` for a `null` (the caller decides what it becomes),
    /// `Err` for a custom unmarshaler's error, which ends the decoding.
    fn value(&mut self, v: &Value, ty: &GoType<'d>) -> Result<Option<Value>, UnmarshalTypeError> {
        if v.is_null() {
            return Ok(None);
        }
        let out = match (ty, v) {
            (GoType::Any, v) => clone_json(v),
            (GoType::Struct { name, props, .. }, Value::Object(m)) => {
                with_stack(|| self.object(m, name, props))?
            }
            (GoType::Map(elem), Value::Object(m)) => {
                let elem = GoType::of(elem, self.defs);
                let mut out = Map::new();
                for (k, v) in m {
                    self.push_key(k);
                    let r = with_stack(|| self.value(v, &elem));
                    self.strict_path.pop();
                    out.insert(k.clone(), r?.unwrap_or_else(|| elem.zero()));
                }
                Value::Object(out)
            }
            (GoType::Slice(elem), Value::Array(a)) => {
                let elem = GoType::of(elem, self.defs);
                let mut out = Vec::with_capacity(a.len());
                for (i, v) in a.iter().enumerate() {
                    self.strict_path.push(format!("[{i}]"));
                    let r = with_stack(|| self.value(v, &elem));
                    self.strict_path.pop();
                    out.push(r?.unwrap_or_else(|| elem.zero()));
                }
                Value::Array(out)
            }
            (GoType::Bytes, Value::String(s)) => {
                if let Err(at) = base64_check(s.as_bytes()) {
                    self.save(DecodeError::Base64(at));
                }
                v.clone()
            }
            (GoType::Bytes, Value::Array(a)) => {
                for (i, e) in a.iter().enumerate() {
                    self.strict_path.push(format!("[{i}]"));
                    self.scalar(e, &GoType::Int(8), true);
                    self.strict_path.pop();
                }
                v.clone()
            }
            (GoType::Time, Value::String(_)) => v.clone(),
            (GoType::Time, other) => {
                return Err(self.type_error(json_kind(other).to_string(), &GoType::String))
            }
            (GoType::IntOrString, Value::String(_)) => v.clone(),
            (GoType::IntOrString, other) => {
                let int32 = GoType::Int(32);
                if let Some(value) = int_error(other, 32) {
                    return Err(self.type_error(value, &int32));
                }
                other.clone()
            }
            (ty, v) => {
                self.scalar(v, ty, false);
                v.clone()
            }
        };
        Ok(Some(out))
    }

    /// A scalar (or a mismatched container) as `ty`; errors are saved.
    fn scalar(&mut self, v: &Value, ty: &GoType<'d>, unsigned: bool) {
        let ok = match (ty, v) {
            (GoType::String, Value::String(_)) | (GoType::Bool, Value::Bool(_)) => true,
            (GoType::Int(bits), Value::Number(_)) => {
                let err = if unsigned {
                    uint_error(v, *bits)
                } else {
                    int_error(v, *bits)
                };
                if let Some(value) = err {
                    let ty = if unsigned {
                        GoType::Any
                    } else {
                        GoType::Int(*bits)
                    };
                    let mut e = self.type_error(value, &ty);
                    if unsigned {
                        e.go_type = format!("uint{bits}");
                    }
                    self.save(DecodeError::Type(e));
                }
                true
            }
            (GoType::Float(_), Value::Number(_)) => true,
            _ => false,
        };
        if !ok {
            self.mismatch(v, ty);
        }
    }

    fn object(
        &mut self,
        m: &Map<String, Value>,
        name: &'d str,
        props: &'d Map<String, Value>,
    ) -> Result<Value, UnmarshalTypeError> {
        let mut out = Map::new();
        for (k, v) in m {
            let Some(schema) = props.get(k) else {
                let path = if self.strict_path.is_empty() {
                    k.clone()
                } else {
                    format!("{}.{k}", self.strict_path.concat())
                };
                if self.unknown.len() < 100 && !self.unknown.contains(&path) {
                    self.unknown.push(path);
                }
                continue;
            };
            let ty = GoType::of(schema, self.defs);
            let outer = self.in_struct.replace(name);
            self.fields.push(k.clone());
            self.push_key(k);
            let r = self.value(v, &ty);
            self.strict_path.pop();
            self.fields.pop();
            self.in_struct = outer;
            match r? {
                Some(v) => {
                    out.insert(k.clone(), v);
                }
                // A zero `metav1.Time` is a struct, not a pointer: printed `null` again.
                None if matches!(ty, GoType::Time) => {
                    out.insert(k.clone(), Value::Null);
                }
                None => {}
            }
        }
        Ok(Value::Object(out))
    }

    fn push_key(&mut self, k: &str) {
        if self.strict_path.is_empty() {
            self.strict_path.push(k.to_string());
        } else {
            self.strict_path.push(format!(".{k}"));
        }
    }
}

/// The value encoding/json reports for a JSON value of the wrong kind.
fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// The `number <text>` of a value a signed integer of `bits` cannot hold (`None` when it
/// can), or the kind of a non-number.
fn int_error(v: &Value, bits: u8) -> Option<String> {
    let Value::Number(n) = v else {
        return Some(json_kind(v).to_string());
    };
    let fits = n.as_i64().is_some_and(|i| {
        let max = if bits >= 64 {
            i64::MAX
        } else {
            (1i64 << (bits - 1)) - 1
        };
        i >= -max - 1 && i <= max
    });
    (!fits).then(|| format!("number {}", go_number_text(n)))
}

fn uint_error(v: &Value, bits: u8) -> Option<String> {
    let Value::Number(n) = v else {
        return Some(json_kind(v).to_string());
    };
    let fits = n.as_u64().is_some_and(|u| bits >= 64 || u < (1u64 << bits));
    (!fits).then(|| format!("number {}", go_number_text(n)))
}

/// A number as Go's encoder prints it (integers as digits, floats as `strconv` 'f' with the
/// shortest digits, or 'e' below 1e-6 and from 1e21).
pub(crate) fn go_number_text(n: &serde_json::Number) -> String {
    let Some(f) = n.as_f64().filter(|_| n.is_f64()) else {
        return n.to_string();
    };
    let abs = f.abs();
    if abs != 0.0 && !(1e-6..1e21).contains(&abs) {
        // Rust's `{:e}` is the shortest digits: `1e21`, `1.5e-7`; Go writes `1e+21`,
        // `1.5e-07`, then its encoder drops the exponent's leading zero again.
        let s = format!("{f:e}");
        let (mantissa, exp) = s.split_once('e').unwrap_or((&s, "0"));
        let sign = if exp.starts_with('-') { "-" } else { "+" };
        let digits = exp.trim_start_matches('-');
        let digits = if digits.len() < 2 && sign == "+" {
            format!("0{digits}")
        } else {
            digits.to_string()
        };
        return format!("{mantissa}e{sign}{digits}");
    }
    // Rust's `Display` for f64 is the shortest digits in plain notation.
    let s = f.to_string();
    s.strip_suffix(".0").map(str::to_string).unwrap_or(s)
}

/// Go's `base64.StdEncoding.Decode` on `src`: `Err(offset)` of its `CorruptInputError`.
/// Line breaks are skipped; padding is required.
fn base64_check(src: &[u8]) -> Result<(), usize> {
    let valid = |c: u8| c.is_ascii_alphanumeric() || c == b'+' || c == b'/';
    let mut si = 0;
    while si < src.len() {
        let mut j = 0;
        while j < 4 {
            if si == src.len() {
                if j == 0 {
                    return Ok(());
                }
                return Err(si - j);
            }
            let c = src[si];
            si += 1;
            if valid(c) {
                j += 1;
                continue;
            }
            if c == b'\n' || c == b'\r' {
                continue;
            }
            if c != b'=' {
                return Err(si - 1);
            }
            // Padding.
            match j {
                0 | 1 => return Err(si - 1),
                2 => {
                    while si < src.len() && (src[si] == b'\n' || src[si] == b'\r') {
                        si += 1;
                    }
                    if si == src.len() {
                        return Err(src.len());
                    }
                    if src[si] != b'=' {
                        return Err(si - 1);
                    }
                    si += 1;
                }
                _ => {}
            }
            while si < src.len() && (src[si] == b'\n' || src[si] == b'\r') {
                si += 1;
            }
            return if si < src.len() { Err(si) } else { Ok(()) };
        }
    }
    Ok(())
}

/// Go's `strconv.Quote` for the names and paths quoted here.
fn go_quote(s: &str) -> String {
    // JSON's escapes agree with Go's for what object keys hold; Go writes other control
    // characters as \x.., which paths do not carry in practice.
    Value::String(s.to_string()).to_string()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::json_patch::{patch_object, ApplyLimits, JsonPatchError, PatchOp};
    use super::*;

    fn case(name: &str) -> Value {
        let all: Value = serde_json::from_str(include_str!("testdata/jp-cases.json"))
            .expect("the fixture is JSON");
        let key = all
            .as_object()
            .and_then(|m| m.keys().find(|k| k.starts_with(name)))
            .expect("a recorded case")
            .clone();
        all[key.as_str()].clone()
    }

    /// The recorded 500 message of `ops` on the case's object.
    fn fails(name: &str, ops: &[PatchOp]) {
        let c = case(name);
        let k = &c["kind"];
        let gvk = Gvk::new(
            k["group"].as_str().unwrap(),
            k["version"].as_str().unwrap(),
            k["kind"].as_str().unwrap(),
        );
        let err = patch_object(&c["object"], &gvk, ops, ApplyLimits::default()).unwrap_err();
        assert!(matches!(err, JsonPatchError::Decode(_)), "{name}: {err}");
        assert_eq!(c["code"], 500);
        assert_eq!(err.to_string(), c["message"].as_str().unwrap(), "{name}");
    }

    fn add(path: &str, value: Value) -> PatchOp {
        PatchOp::new("add", path, "", Some(value))
    }

    #[test]
    fn recorded_decoding_failures_073_075_085_093_097() {
        fails(
            "073",
            &[PatchOp::new(
                "replace",
                "/spec/replicas",
                "",
                Some(json!(3.5)),
            )],
        );
        fails("075", &[add("/metadata/labels/flag", json!(true))]);
        fails("085", &[add("/data/n", json!(42))]);
        fails("093", &[add("data/k2", json!("x"))]);
        fails("097", &[add("/spec/notAField", json!("x"))]);
    }

    fn deployment(replicas: Value) -> Value {
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
               "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}}}})
    }

    #[test]
    fn integer_widths_074() {
        let gvk = Gvk::new("apps", "v1", "Deployment");
        let e = decode(&deployment(json!(3000000000u64)), &gvk).unwrap_err();
        assert_eq!(
            e.status_message(),
            "Internal error occurred: json: cannot unmarshal number 3000000000 into Go struct field DeploymentSpec.spec.replicas of type int32"
        );
        assert!(decode(&deployment(json!(2147483647)), &gvk).is_ok());
        // An int64 field takes it.
        let mut d = deployment(json!(1));
        d["metadata"]["generation"] = json!(3000000000u64);
        assert!(decode(&d, &gvk).is_ok());
        d["metadata"]["generation"] = json!(1e21);
        assert_eq!(
            decode(&d, &gvk).unwrap_err().to_string(),
            "json: cannot unmarshal number 1e+21 into Go struct field ObjectMeta.metadata.generation of type int64"
        );
    }

    #[test]
    fn a_changed_kind_decodes_as_that_kind_103() {
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "obj"},
                        "data": {"k1": "v1"}});
        let gvk = Gvk::new("", "v1", "ConfigMap");
        let ops = [PatchOp::new("replace", "/kind", "", Some(json!("Secret")))];
        let err = patch_object(&cm, &gvk, &ops, ApplyLimits::default()).unwrap_err();
        assert_eq!(
            err.to_string(),
            "Internal error occurred: illegal base64 data at input byte 0"
        );
        let ops = [PatchOp::new("replace", "/kind", "", Some(json!("Nope")))];
        let err = patch_object(&cm, &gvk, &ops, ApplyLimits::default()).unwrap_err();
        assert!(err.to_string().starts_with(
            "Internal error occurred: no kind \"Nope\" is registered for version \"v1\""
        ));
        // Without kind and apiVersion the request's kind is used.
        let bare = json!({"metadata": {"name": "obj"}, "data": {"k1": "v1"}});
        assert!(decode(&bare, &gvk).is_ok());
        let e = decode(&json!({"kind": 1}), &gvk).unwrap_err();
        assert_eq!(
            e.to_string(),
            "couldn't get version/kind; json parse error: json: cannot unmarshal number into Go struct field .kind of type string"
        );
    }

    #[test]
    fn base64_follows_go() {
        assert_eq!(base64_check(b"aGVsbG8="), Ok(()));
        assert_eq!(base64_check(b"aGVs\nbG8="), Ok(()));
        assert_eq!(base64_check(b"v1"), Err(0));
        assert_eq!(base64_check(b"aGVsbG8"), Err(4));
        assert_eq!(base64_check(b"a!"), Err(1));
        assert_eq!(base64_check(b"aGVsbG8=x"), Err(8));
    }

    #[test]
    fn unknown_fields_are_all_listed_with_their_paths() {
        let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "x": 1},
                         "spec": {"containers": [{"name": "c", "image": "i", "bad": true}]}});
        let e = decode(&pod, &Gvk::new("", "v1", "Pod")).unwrap_err();
        assert_eq!(
            e.to_string(),
            "strict decoding error: unknown field \"metadata.x\", unknown field \"spec.containers[0].bad\""
        );
        // A type error wins over unknown fields.
        let mut pod = pod;
        pod["spec"]["containers"][0]["name"] = json!(5);
        let e = decode(&pod, &Gvk::new("", "v1", "Pod")).unwrap_err();
        assert_eq!(
            e.to_string(),
            "json: cannot unmarshal number into Go struct field Container.spec.containers.name of type string"
        );
    }

    #[test]
    fn nulls_decode_as_go_zero_values_063_079() {
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
                        "metadata": {"name": "x", "creationTimestamp": null, "labels": {"a": null}},
                        "immutable": null});
        let got = decode(&cm, &Gvk::new("", "v1", "ConfigMap")).unwrap();
        assert_eq!(
            got,
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": "x", "creationTimestamp": null, "labels": {"a": ""}}})
        );
    }

    #[test]
    fn times_and_int_or_strings_use_their_unmarshalers() {
        let gvk = Gvk::new("", "v1", "ConfigMap");
        let cm = json!({"metadata": {"creationTimestamp": 5}});
        assert_eq!(
            decode(&cm, &gvk).unwrap_err().to_string(),
            "json: cannot unmarshal number into Go struct field ObjectMeta.metadata.creationTimestamp of type string"
        );
        let gvk = Gvk::new("apps", "v1", "Deployment");
        let mut d = deployment(json!(1));
        d["spec"]["strategy"] = json!({"rollingUpdate": {"maxSurge": true}});
        assert_eq!(
            decode(&d, &gvk).unwrap_err().to_string(),
            "json: cannot unmarshal bool into Go struct field RollingUpdateDeployment.spec.strategy.rollingUpdate.maxSurge of type int32"
        );
        d["spec"]["strategy"] = json!({"rollingUpdate": {"maxSurge": "25%"}});
        assert!(decode(&d, &gvk).is_ok());
    }

    #[test]
    fn unstructured_objects_need_a_kind() {
        let gvk = Gvk::new("example.com", "v1", "Widget");
        let w = json!({"apiVersion": "example.com/v1", "spec": {"anything": [1, "x"]}});
        let e = decode(&w, &gvk).unwrap_err();
        assert_eq!(e.to_string(), format!("Object 'Kind' is missing in '{w}'"));
        let mut w = w;
        w["kind"] = json!("Widget");
        assert_eq!(decode(&w, &gvk).unwrap(), w);
    }

    #[test]
    fn recorded_objects_decode_unchanged() {
        let all: Value = serde_json::from_str(include_str!("testdata/jp-cases.json")).unwrap();
        for (name, c) in all.as_object().unwrap() {
            let k = &c["kind"];
            let gvk = Gvk::new(
                k["group"].as_str().unwrap(),
                k["version"].as_str().unwrap(),
                k["kind"].as_str().unwrap(),
            );
            for o in [&c["object"], &c["mutated"]] {
                if !o.is_null() {
                    assert_eq!(decode(o, &gvk).as_ref(), Ok(o), "{name}");
                }
            }
        }
    }

    #[test]
    fn go_number_texts() {
        let t = |v: Value| go_number_text(v.as_number().unwrap());
        assert_eq!(t(json!(3.5)), "3.5");
        assert_eq!(t(json!(1e21)), "1e+21");
        assert_eq!(t(json!(1e20)), "100000000000000000000");
        assert_eq!(t(json!(1.5e-7)), "1.5e-7");
        assert_eq!(t(json!(0.000001)), "0.000001");
        assert_eq!(t(json!(-42)), "-42");
    }
}
