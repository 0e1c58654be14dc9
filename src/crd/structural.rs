//! The structural-schema checks of the API server that a CRD with validation rules must
//! pass: every specified field has a type, value validations (`allOf`...) carry no
//! structural or rule extensions, `metadata` declares at most `name` and `generateName`.

use super::errors::Cause;
use super::schema::Schema;

/// Causes for the schema at `path` (the root).
pub fn check(schema: &Schema, path: &str) -> Vec<Cause> {
    let mut causes = Vec::new();
    if schema.type_.is_empty() && !schema.preserve_unknown_fields && !schema.int_or_string {
        causes.push(Cause::required(
            format!("{path}.type"),
            "must not be empty at the root",
        ));
    } else if schema.type_ != "object" && !schema.type_.is_empty() {
        causes.push(Cause::invalid(
            format!("{path}.type"),
            &super::errors::go_quote(&schema.type_),
            "must be object at the root",
        ));
    }
    if let Some(meta) = schema.property("metadata") {
        let only_names = meta
            .properties
            .iter()
            .all(|(n, _)| n == "name" || n == "generateName");
        if !only_names
            || !meta.validations.is_empty()
            || meta.type_ != "object" && !meta.type_.is_empty()
        {
            causes.push(Cause::forbidden(
                format!("{path}.properties[metadata]"),
                "must not specify anything other than name and generateName, but metadata is implicitly specified",
            ));
        }
    }
    walk(schema, path, &mut causes);
    causes
}

fn walk(s: &Schema, path: &str, causes: &mut Vec<Cause>) {
    for (name, sub) in &s.properties {
        let p = format!("{path}.properties[{name}]");
        if sub.type_.is_empty() && !sub.preserve_unknown_fields && !sub.int_or_string {
            causes.push(Cause::required(
                format!("{p}.type"),
                "must not be empty for specified object fields",
            ));
        }
        walk(sub, &p, causes);
    }
    if s.type_ == "array" && s.items.is_none() {
        causes.push(Cause::required(
            format!("{path}.items"),
            "must be specified",
        ));
    }
    if let Some(items) = s.items.as_deref() {
        let p = format!("{path}.items");
        if items.type_.is_empty() && !items.preserve_unknown_fields && !items.int_or_string {
            causes.push(Cause::required(
                format!("{p}.type"),
                "must not be empty for specified array items",
            ));
        }
        walk(items, &p, causes);
    }
    if let Some(add) = s.additional_schema() {
        let p = format!("{path}.additionalProperties");
        if add.type_.is_empty() && !add.preserve_unknown_fields && !add.int_or_string {
            causes.push(Cause::required(
                format!("{p}.type"),
                "must not be empty for specified object fields",
            ));
        }
        walk(add, &p, causes);
    }
    for (kw, list) in [
        ("allOf", &s.all_of),
        ("anyOf", &s.any_of),
        ("oneOf", &s.one_of),
    ] {
        for (i, sub) in list.iter().enumerate() {
            value_validation(sub, &format!("{path}.{kw}[{i}]"), causes);
        }
    }
    if let Some(not) = s.not.as_deref() {
        value_validation(not, &format!("{path}.not"), causes);
    }
}

/// Inside a value validation (`allOf`...), structural and rule extensions are forbidden.
fn value_validation(s: &Schema, path: &str, causes: &mut Vec<Cause>) {
    let forbid = |causes: &mut Vec<Cause>, what: &str| {
        causes.push(Cause::forbidden(
            format!("{path}.{what}"),
            "must be empty to be structural",
        ))
    };
    if !s.type_.is_empty() {
        forbid(causes, "type");
    }
    if s.default.is_some() {
        forbid(causes, "default");
    }
    if s.additional_properties.is_some() {
        forbid(causes, "additionalProperties");
    }
    if s.nullable {
        forbid(causes, "nullable");
    }
    if s.preserve_unknown_fields {
        forbid(causes, "x-kubernetes-preserve-unknown-fields");
    }
    if s.embedded_resource {
        forbid(causes, "x-kubernetes-embedded-resource");
    }
    if s.int_or_string {
        forbid(causes, "x-kubernetes-int-or-string");
    }
    if !s.validations.is_empty() {
        forbid(causes, "x-kubernetes-validations");
    }
    for (name, sub) in &s.properties {
        value_validation(sub, &format!("{path}.properties[{name}]"), causes);
    }
    if let Some(items) = s.items.as_deref() {
        value_validation(items, &format!("{path}.items"), causes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema(j: serde_json::Value) -> Schema {
        serde_json::from_value(j).unwrap()
    }

    #[test]
    fn untyped_property_is_not_structural() {
        let s = schema(serde_json::json!({"type": "object", "properties": {"x": {}}}));
        let c = check(&s, "r");
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].field, "r.properties[x].type");
        assert_eq!(
            c[0].message,
            "Required value: must not be empty for specified object fields"
        );
    }

    #[test]
    fn rules_inside_all_of_are_forbidden() {
        let s = schema(serde_json::json!({"type": "object", "properties": {"x": {
            "type": "integer", "allOf": [{"x-kubernetes-validations": [{"rule": "true"}]}]}}}));
        let c = check(&s, "r");
        assert_eq!(
            c[0].field,
            "r.properties[x].allOf[0].x-kubernetes-validations"
        );
        assert_eq!(c[0].message, "Forbidden: must be empty to be structural");
    }
}
