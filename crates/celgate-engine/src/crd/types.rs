//! Mapping of a structural schema to CEL: the declared type of `self` at every schema node
//! (objects with declared fields, maps via `additionalProperties`, lists, int-or-string as
//! `dyn`, formats as bytes/duration/timestamp), property-name escaping, and the conversion of
//! a JSON value to a CEL value of that type.

use std::sync::Arc;

use serde_json::Value as Json;

use super::schema::Schema;
use celgate_cel::apimachinery::duration::parse_go_duration;
use celgate_cel::time::Timestamp;
use celgate_cel::value::{List, ListKind, Map, OwnedMap, Str, TypedList};
use celgate_cel::{ObjectType, Type, Value};

/// CEL keywords and reserved words a property name is escaped from (`__{word}__`): the
/// language's literals and `in`, and the words the lexer reserves (the documented list plus
/// `var`, `void` and `while`, which the API server also escapes).
fn is_reserved(name: &str) -> bool {
    matches!(name, "true" | "false" | "null" | "in") || celgate_cel::lexer::is_reserved(name)
}

/// The CEL name of a property, or `None` when the property is not accessible from CEL.
pub(crate) fn escape(name: &str) -> Option<String> {
    if is_reserved(name) {
        return Some(format!("__{name}__"));
    }
    let mut chars = name.chars();
    let first = chars.next()?;
    let ok_first = first.is_ascii_alphabetic() || matches!(first, '_' | '.' | '-' | '/');
    let ok_rest = chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-' | '/'));
    if !ok_first || !ok_rest {
        return None;
    }
    let mut out = String::with_capacity(name.len());
    let mut rest = name;
    while let Some(c) = rest.chars().next() {
        if let Some(r) = rest.strip_prefix("__") {
            out.push_str("__underscores__");
            rest = r;
            continue;
        }
        match c {
            '.' => out.push_str("__dot__"),
            '-' => out.push_str("__dash__"),
            '/' => out.push_str("__slash__"),
            c => out.push(c),
        }
        rest = &rest[c.len_utf8()..];
    }
    Some(out)
}

/// The names a property has in CEL: its escaped name, and for a reserved word that the
/// grammar accepts after `.` (all but `in`, `true`, `false`, `null`) its plain name too,
/// which the API server also resolves (`self.namespace`).
pub(crate) fn cel_names(name: &str) -> Vec<String> {
    let Some(escaped) = escape(name) else {
        return Vec::new();
    };
    let mut out = vec![escaped];
    if is_reserved(name) && !matches!(name, "in" | "true" | "false" | "null") {
        out.push(name.to_string());
    }
    out
}

/// Whether a schema node declares something CEL can see. An untyped node (no `type`,
/// not int-or-string) is not accessible: its parent does not declare it.
fn accessible(s: &Schema) -> bool {
    !s.type_.is_empty() || s.int_or_string
}

/// The declared CEL type of a value at `schema`; `name` names object types (`selfType.spec`).
pub(crate) fn cel_type(schema: &Schema, name: &str) -> Option<Type> {
    if schema.int_or_string {
        return Some(Type::Dyn);
    }
    let t = match schema.type_.as_str() {
        "boolean" => Type::Bool,
        "integer" => Type::Int,
        "number" => Type::Double,
        "string" => match schema.format.as_str() {
            "byte" => Type::Bytes,
            "duration" => Type::Duration,
            "date" | "date-time" => Type::Timestamp,
            _ => Type::String,
        },
        // A list or map whose elements have no declaration has none either
        // (`SchemaDeclType` in k8s.io/apiserver/pkg/cel/common/schemas.go returns nil), so
        // its parent does not declare it and rules on it do not compile.
        "array" => {
            let item = cel_type(schema.items.as_deref()?, &format!("{name}.@idx"))?;
            Type::list(item)
        }
        "object" => {
            if let Some(v) = schema.additional_schema() {
                let vt = cel_type(v, &format!("{name}.@elem"))?;
                Type::map(Type::String, vt)
            } else {
                object_type(schema, name)
            }
        }
        _ => return None,
    };
    Some(t)
}

fn object_type(schema: &Schema, name: &str) -> Type {
    let mut fields: Vec<(String, Type)> = Vec::new();
    if schema.embedded_resource {
        fields.push(("apiVersion".into(), Type::String));
        fields.push(("kind".into(), Type::String));
        fields.push((
            "metadata".into(),
            metadata_type(&format!("{name}.metadata")),
        ));
    }
    for (prop, sub) in &schema.properties {
        if !accessible(sub) {
            continue;
        }
        let Some(t) = cel_type(sub, &format!("{name}.{prop}")) else {
            continue;
        };
        for n in cel_names(prop) {
            if !fields.iter().any(|(f, _)| *f == n) {
                fields.push((n, t.clone()));
            }
        }
    }
    Type::Object(Arc::new(ObjectType {
        name: name.to_string(),
        fields,
    }))
}

/// `metadata` of the root or of an embedded resource: only `name` and `generateName` are
/// visible to rules.
pub(crate) fn metadata_type(name: &str) -> Type {
    Type::Object(Arc::new(ObjectType {
        name: name.to_string(),
        fields: vec![
            ("name".into(), Type::String),
            ("generateName".into(), Type::String),
        ],
    }))
}

/// The type of `self` at the root: the schema's object type with `apiVersion`, `kind` and
/// `metadata` (name, generateName) declared.
pub(crate) fn root_type(schema: &Schema) -> Type {
    let mut root = schema.clone();
    root.embedded_resource = true;
    root.properties
        .retain(|(n, _)| n != "metadata" && n != "apiVersion" && n != "kind");
    object_type(&root, "selfType")
}

/// Converts a JSON value to the CEL value of the type [`cel_type`] gives `schema`: object
/// keys escaped, undeclared keys dropped, formats parsed. A value that does not fit the
/// schema (which OpenAPI validation reports before rules run) converts as plain JSON.
pub(crate) fn to_cel(v: &Json, schema: &Schema, embedded: bool) -> Value<'static> {
    match v {
        Json::Null => Value::Null,
        Json::Bool(b) => Value::Bool(*b),
        Json::Number(n) => {
            if schema.type_ == "number" {
                Value::Double(n.as_f64().unwrap_or(f64::NAN))
            } else if let Some(i) = n.as_i64() {
                Value::Int(i)
            } else if let Some(u) = n.as_u64() {
                Value::Uint(u)
            } else {
                Value::Double(n.as_f64().unwrap_or(f64::NAN))
            }
        }
        Json::String(s) => string_value(s, schema),
        Json::Array(a) => {
            let item = schema.items.as_deref();
            let default = Schema::default();
            let items: Vec<Value<'static>> = a
                .iter()
                .map(|x| to_cel(x, item.unwrap_or(&default), false))
                .collect();
            // Set and map lists keep their kind: as the left operand of `==` and `+` they
            // compare and concatenate by membership or key, as the API server's values do.
            let kind = match schema.list_type.as_deref() {
                Some("set") => Some(ListKind::Set),
                Some("map") if !schema.list_map_keys.is_empty() => Some(ListKind::Map(
                    schema
                        .list_map_keys
                        .iter()
                        .map(|k| Value::string(escape(k).unwrap_or_else(|| k.clone())))
                        .collect(),
                )),
                _ => None,
            };
            match kind {
                Some(kind) => Value::List(List::Typed(Arc::new(TypedList { kind, items }))),
                None => Value::list(items),
            }
        }
        Json::Object(m) => {
            let mut entries: Vec<(Value<'static>, Value<'static>)> = Vec::with_capacity(m.len());
            if let Some(vs) = schema.additional_schema() {
                for (k, x) in m {
                    entries.push((Value::string(k.as_str()), to_cel(x, vs, false)));
                }
            } else if schema.type_.is_empty() && !schema.int_or_string {
                // Untyped (preserve-unknown-fields): plain JSON.
                for (k, x) in m {
                    entries.push((
                        Value::string(k.as_str()),
                        to_cel(x, &Schema::default(), false),
                    ));
                }
            } else {
                for (k, x) in m {
                    // A null (nullable) property reads as absent.
                    if x.is_null() {
                        continue;
                    }
                    let sub = schema.property(k);
                    let meta = embedded && matches!(k.as_str(), "apiVersion" | "kind" | "metadata");
                    let Some(sub) = sub.or(if meta { Some(&EMPTY) } else { None }) else {
                        continue;
                    };
                    if sub.type_.is_empty() && !sub.int_or_string && !meta {
                        continue;
                    }
                    let value = if meta && k == "metadata" {
                        metadata_value(x)
                    } else {
                        to_cel(x, sub, sub.embedded_resource)
                    };
                    for name in cel_names(k) {
                        entries.push((Value::string(name), value.clone()));
                    }
                }
            }
            match OwnedMap::from_entries(entries) {
                Ok(m) => Value::Map(Map::Owned(Arc::new(m))),
                Err(_) => Value::Null,
            }
        }
    }
}

static EMPTY: Schema = Schema {
    type_: String::new(),
    format: String::new(),
    properties: Vec::new(),
    required: Vec::new(),
    items: None,
    additional_properties: None,
    nullable: false,
    default: None,
    enum_: None,
    pattern: None,
    maximum: None,
    minimum: None,
    exclusive_maximum: false,
    exclusive_minimum: false,
    multiple_of: None,
    max_length: None,
    min_length: None,
    max_items: None,
    min_items: None,
    unique_items: false,
    max_properties: None,
    min_properties: None,
    all_of: Vec::new(),
    any_of: Vec::new(),
    one_of: Vec::new(),
    not: None,
    preserve_unknown_fields: false,
    embedded_resource: false,
    int_or_string: false,
    list_type: None,
    list_map_keys: Vec::new(),
    map_type: None,
    validations: Vec::new(),
};

fn metadata_value(v: &Json) -> Value<'static> {
    let mut entries = Vec::new();
    for k in ["name", "generateName"] {
        if let Some(Json::String(s)) = v.get(k) {
            entries.push((Value::string(k), Value::string(s.as_str())));
        }
    }
    match OwnedMap::from_entries(entries) {
        Ok(m) => Value::Map(Map::Owned(Arc::new(m))),
        Err(_) => Value::Null,
    }
}

fn string_value(s: &str, schema: &Schema) -> Value<'static> {
    if schema.type_ == "string" {
        match schema.format.as_str() {
            "byte" => {
                use base64::Engine;
                if let Ok(b) = base64::engine::general_purpose::STANDARD.decode(s) {
                    return Value::Bytes(b.into());
                }
            }
            "duration" => {
                if let Some(d) = parse_go_duration(s) {
                    return Value::Duration(d);
                }
            }
            "date-time" => {
                // Valid RFC 3339 (the format check ran first), at the offset it was written
                // with, as the API server's value keeps it.
                if let (Some(_), Ok(t)) =
                    (Timestamp::parse_rfc3339(s), Timestamp::parse_go_rfc3339(s))
                {
                    return Value::Timestamp(t);
                }
            }
            "date" => {
                if let Some(t) = Timestamp::parse_rfc3339(&format!("{s}T00:00:00Z")) {
                    return Value::Timestamp(t);
                }
            }
            _ => {}
        }
    }
    Value::String(Str::Shared(s.into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_follows_the_api_server() {
        assert_eq!(escape("x-prop").as_deref(), Some("x__dash__prop"));
        assert_eq!(escape("a.b").as_deref(), Some("a__dot__b"));
        assert_eq!(escape("a/b").as_deref(), Some("a__slash__b"));
        assert_eq!(escape("a__b").as_deref(), Some("a__underscores__b"));
        assert_eq!(escape("namespace").as_deref(), Some("__namespace__"));
        assert_eq!(escape("while").as_deref(), Some("__while__"));
        assert_eq!(escape("1abc"), None);
        assert_eq!(escape("a b"), None);
        assert_eq!(escape("plain").as_deref(), Some("plain"));
    }

    #[test]
    fn schema_maps_to_typed_cel() {
        let s: Schema = serde_json::from_value(serde_json::json!({
            "type": "object",
            "properties": {
                "n": {"type": "integer"},
                "m": {"type": "object", "additionalProperties": {"type": "string"}},
                "l": {"type": "array", "items": {"type": "number"}},
                "u": {"x-kubernetes-preserve-unknown-fields": true},
                "d": {"type": "string", "format": "duration"},
                "ios": {"x-kubernetes-int-or-string": true}
            }
        }))
        .unwrap();
        let Some(Type::Object(o)) = cel_type(&s, "selfType") else {
            panic!("not an object")
        };
        assert_eq!(o.field("n"), Some(&Type::Int));
        assert_eq!(o.field("m"), Some(&Type::map(Type::String, Type::String)));
        assert_eq!(o.field("l"), Some(&Type::list(Type::Double)));
        assert_eq!(o.field("u"), None);
        assert_eq!(o.field("d"), Some(&Type::Duration));
        assert_eq!(o.field("ios"), Some(&Type::Dyn));
    }
}
