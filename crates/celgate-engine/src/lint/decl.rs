//! The CEL type of an OpenAPI schema as the API server's type checking of policies builds
//! it (`common.SchemaDeclType` over an `openapi.Schema`, then `MaybeAssignTypeName`).
//!
//! It differs from the type of `self` in CRD rules ([`crate::crd::types::cel_type`]) where
//! the schema is a resolved OpenAPI document rather than a structural schema: a node with no
//! `type` (Quantity, `oneOf` unions) is not exposed, nor is a list or map whose items are
//! not, and the root's `metadata` is the whole ObjectMeta the document declares. Property
//! names are escaped as for CRDs.

use std::borrow::Cow;
use std::sync::Arc;

use crate::crd::schema::Schema;
use crate::crd::types::{cel_names, escape};
use celgate_cel::{ObjectType, Type};

/// How object fields are named in CEL.
#[derive(Debug, Clone, Copy)]
pub(super) struct Naming {
    /// A reserved word is also found by its plain name (`object.metadata.namespace`), which
    /// the API server's type provider does from Kubernetes 1.31
    /// (`SetRecognizeKeywordAsFieldName`); before, only `__namespace__` is declared.
    pub keywords_as_field_names: bool,
}

/// The declared type of a value at `schema`, or `None` when the API server does not expose
/// it. `name` names object types: the root's name, then `.field`, `.@idx` and `.@elem`.
pub(super) fn decl_type(
    schema: &Schema,
    resource_root: bool,
    name: &str,
    naming: Naming,
) -> Option<Type> {
    if schema.int_or_string || schema.format == "int-or-string" {
        return Some(Type::Dyn);
    }
    let schema = if resource_root {
        with_type_and_object_meta(schema)
    } else {
        Cow::Borrowed(schema)
    };
    let t = match schema.type_.as_str() {
        "array" => {
            let items = schema.items.as_deref()?;
            let item = decl_type(
                items,
                items.embedded_resource,
                &format!("{name}.@idx"),
                naming,
            )?;
            Type::list(item)
        }
        "object" => {
            if let Some(values) = schema.additional_schema() {
                let value = decl_type(
                    values,
                    values.embedded_resource,
                    &format!("{name}.@elem"),
                    naming,
                )?;
                return Some(Type::map(Type::String, value));
            }
            let mut fields: Vec<(String, Type)> = Vec::with_capacity(schema.properties.len());
            for (prop, sub) in &schema.properties {
                let Some(escaped) = escape(prop) else {
                    continue;
                };
                let Some(t) = decl_type(
                    sub,
                    sub.embedded_resource,
                    &format!("{name}.{escaped}"),
                    naming,
                ) else {
                    continue;
                };
                let names = if naming.keywords_as_field_names {
                    cel_names(prop)
                } else {
                    vec![escaped]
                };
                for n in names {
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
        "string" => match schema.format.as_str() {
            "byte" => Type::Bytes,
            "duration" => Type::Duration,
            "date" | "date-time" => Type::Timestamp,
            _ => Type::String,
        },
        "boolean" => Type::Bool,
        "number" => Type::Double,
        "integer" => Type::Int,
        _ => return None,
    };
    Some(t)
}

fn is_string(s: Option<&Schema>) -> bool {
    s.is_some_and(|s| s.type_ == "string")
}

/// `common.WithTypeAndObjectMeta`: a resource root declares `apiVersion`, `kind` and
/// `metadata.name`/`generateName`; when one of them is missing, those four replace
/// whatever `kind`, `apiVersion` and `metadata` the schema had.
fn with_type_and_object_meta(s: &Schema) -> Cow<'_, Schema> {
    let meta = s.property("metadata");
    let complete = is_string(s.property("kind"))
        && is_string(s.property("apiVersion"))
        && meta.is_some_and(|m| {
            m.type_ == "object"
                && is_string(m.property("name"))
                && is_string(m.property("generateName"))
        });
    if complete {
        return Cow::Borrowed(s);
    }
    let string = Schema {
        type_: "string".into(),
        ..Schema::default()
    };
    let metadata = Schema {
        type_: "object".into(),
        properties: vec![
            ("name".into(), string.clone()),
            ("generateName".into(), string.clone()),
        ],
        ..Schema::default()
    };
    let mut out = s.clone();
    out.properties
        .retain(|(n, _)| !matches!(n.as_str(), "kind" | "apiVersion" | "metadata"));
    out.properties.push(("kind".into(), string.clone()));
    out.properties.push(("apiVersion".into(), string));
    out.properties.push(("metadata".into(), metadata));
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const NEW: Naming = Naming {
        keywords_as_field_names: true,
    };

    fn schema(v: serde_json::Value) -> Schema {
        serde_json::from_value(v).unwrap()
    }

    fn object(t: &Type) -> &ObjectType {
        match t {
            Type::Object(o) => o,
            other => panic!("not an object: {other}"),
        }
    }

    #[test]
    fn untyped_nodes_and_containers_of_them_are_not_exposed() {
        let s = schema(serde_json::json!({
            "type": "object",
            "properties": {
                "q": {},
                "limits": {"type": "object", "additionalProperties": {}},
                "list": {"type": "array", "items": {}},
                "noItems": {"type": "array"},
                "ios": {"format": "int-or-string"},
                "when": {"type": "string", "format": "date-time"},
                "data": {"type": "object", "additionalProperties": {"type": "string", "format": "byte"}},
                "free": {"type": "object", "additionalProperties": true, "properties": {"a": {"type": "number"}}}
            }
        }));
        let t = decl_type(&s, false, "K", NEW).unwrap();
        let o = object(&t);
        assert_eq!(o.field("q"), None);
        assert_eq!(o.field("limits"), None);
        assert_eq!(o.field("list"), None);
        assert_eq!(o.field("noItems"), None);
        assert_eq!(o.field("ios"), Some(&Type::Dyn));
        assert_eq!(o.field("when"), Some(&Type::Timestamp));
        assert_eq!(o.field("data"), Some(&Type::map(Type::String, Type::Bytes)));
        assert_eq!(
            object(o.field("free").unwrap()).field("a"),
            Some(&Type::Double)
        );
        assert_eq!(object(o.field("free").unwrap()).name, "K.free");
    }

    #[test]
    fn a_root_gets_type_meta_unless_it_declares_it() {
        let bare = schema(
            serde_json::json!({"type": "object", "properties": {"spec": {"type": "object"}}}),
        );
        let t = decl_type(&bare, true, "W", NEW).unwrap();
        let o = object(&t);
        assert_eq!(o.field("kind"), Some(&Type::String));
        let meta = object(o.field("metadata").unwrap());
        assert_eq!(meta.fields.len(), 2, "name and generateName only");
        let full = schema(serde_json::json!({"type": "object", "properties": {
            "kind": {"type": "string"}, "apiVersion": {"type": "string"},
            "metadata": {"type": "object", "properties": {
                "name": {"type": "string"}, "generateName": {"type": "string"},
                "namespace": {"type": "string"},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}}}}}}));
        let t = decl_type(&full, true, "W", NEW).unwrap();
        let meta = object(object(&t).field("metadata").unwrap());
        assert!(meta.field("labels").is_some());
        assert_eq!(meta.field("__namespace__"), Some(&Type::String));
        assert_eq!(meta.field("namespace"), Some(&Type::String));
        let old = Naming {
            keywords_as_field_names: false,
        };
        let t = decl_type(&full, true, "W", old).unwrap();
        let meta = object(object(&t).field("metadata").unwrap());
        assert_eq!(meta.field("namespace"), None, "only escaped before 1.31");
    }
}
