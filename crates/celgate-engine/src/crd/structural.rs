//! The structural-schema checks of the API server that a CRD with validation rules must
//! pass: every specified field has a type, value validations (`allOf`...) carry no
//! structural or rule extensions, `metadata` declares at most `name` and `generateName`.

use super::errors::Cause;
use super::schema::Schema;

/// Causes for the schema at `path` (the root).
pub(super) fn check(schema: &Schema, path: &str) -> Vec<Cause> {
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

/// The API server's per-node schema checks that are not about structure: `uniqueItems`,
/// `additionalProperties` beside `properties`, and the list and map types (list-map keys,
/// set items). Like a rule-field error, such an error keeps the node's (and its ancestors')
/// rules from being compiled.
pub(super) fn node_checks(s: &Schema, path: &str, causes: &mut Vec<Cause>) {
    use super::errors::go_quote;
    if s.unique_items {
        causes.push(Cause::forbidden(
            format!("{path}.uniqueItems"),
            "uniqueItems cannot be set to true since the runtime complexity becomes quadratic",
        ));
    }
    let additional_forbidden = match &s.additional_properties {
        Some(super::schema::AdditionalProperties::Bool(allows)) => !allows,
        Some(super::schema::AdditionalProperties::Schema(_)) => true,
        None => false,
    };
    if !s.properties.is_empty() && additional_forbidden {
        causes.push(Cause::forbidden(
            format!("{path}.additionalProperties"),
            "additionalProperties and properties are mutual exclusive",
        ));
    }
    let type_must_be = |causes: &mut Vec<Cause>, t: &str, ext: &str| {
        let detail = format!("must be {t} if {ext} is specified");
        causes.push(if s.type_.is_empty() {
            Cause::required(format!("{path}.type"), &detail)
        } else {
            Cause::invalid(format!("{path}.type"), &go_quote(&s.type_), &detail)
        });
    };
    if let Some(mt) = &s.map_type {
        if s.type_ != "object" {
            type_must_be(causes, "object", "x-kubernetes-map-type");
        }
        if mt != "atomic" && mt != "granular" {
            causes.push(Cause::not_supported(
                format!("{path}.x-kubernetes-map-type"),
                &go_quote(mt),
                &[go_quote("atomic"), go_quote("granular")],
            ));
        }
    }
    let items = s.items.as_deref();
    if let Some(lt) = &s.list_type {
        if s.type_ != "array" {
            type_must_be(causes, "array", "x-kubernetes-list-type");
        } else if lt == "set" {
            if let Some(is) = items {
                let must_be_atomic =
                    "must be atomic as item of a list with x-kubernetes-list-type=set";
                match is.type_.as_str() {
                    "array" if is.list_type.as_deref().is_some_and(|t| t != "atomic") => {
                        causes.push(Cause::invalid(
                            format!("{path}.items.x-kubernetes-list-type"),
                            &go_quote(is.list_type.as_deref().unwrap_or_default()),
                            must_be_atomic,
                        ));
                    }
                    "object" if is.map_type.as_deref() != Some("atomic") => {
                        // The API server shows the item's list type here (null when unset).
                        let shown = go_quote(is.list_type.as_deref().unwrap_or("null"));
                        causes.push(Cause::invalid(
                            format!("{path}.items.x-kubernetes-map-type"),
                            &shown,
                            must_be_atomic,
                        ));
                    }
                    _ => {}
                }
            }
        }
        if !matches!(lt.as_str(), "atomic" | "set" | "map") {
            causes.push(Cause::not_supported(
                format!("{path}.x-kubernetes-list-type"),
                &go_quote(lt),
                &[go_quote("atomic"), go_quote("set"), go_quote("map")],
            ));
        }
    }
    let keys_shown = || {
        let quoted: Vec<String> = s.list_map_keys.iter().map(|k| go_quote(k)).collect();
        format!("[]string{{{}}}", quoted.join(", "))
    };
    if !s.list_map_keys.is_empty() {
        let detail = "must be map if x-kubernetes-list-map-keys is non-empty";
        match s.list_type.as_deref() {
            None => causes.push(Cause::required(
                format!("{path}.x-kubernetes-list-type"),
                detail,
            )),
            Some("map") => {}
            Some(other) => causes.push(Cause::invalid(
                format!("{path}.x-kubernetes-list-type"),
                &go_quote(other),
                detail,
            )),
        }
    }
    if s.list_type.as_deref() == Some("map") {
        if s.list_map_keys.is_empty() {
            causes.push(Cause::required(
                format!("{path}.x-kubernetes-list-map-keys"),
                "must not be empty if x-kubernetes-list-type is map",
            ));
        }
        match items {
            None => causes.push(Cause::required(
                format!("{path}.items"),
                "must have a schema if x-kubernetes-list-type is map",
            )),
            Some(is) if is.type_ != "object" => causes.push(Cause::invalid(
                format!("{path}.items.type"),
                &go_quote(&is.type_),
                "must be object if parent array's x-kubernetes-list-type is map",
            )),
            Some(is) => {
                let mut seen: Vec<&str> = Vec::new();
                for k in &s.list_map_keys {
                    match is.property(k) {
                        Some(p) if p.type_ == "array" || p.type_ == "object" => {
                            causes.push(Cause::invalid(
                                format!("{path}.items.properties[{k}].type"),
                                &go_quote(&is.type_),
                                "must be a scalar type if parent array's x-kubernetes-list-type is map",
                            ))
                        }
                        Some(_) => {}
                        None => causes.push(Cause::invalid(
                            format!("{path}.x-kubernetes-list-map-keys"),
                            &keys_shown(),
                            "entries must all be names of item properties",
                        )),
                    }
                    if seen.contains(&k.as_str()) {
                        causes.push(Cause::invalid(
                            format!("{path}.x-kubernetes-list-map-keys"),
                            &keys_shown(),
                            "must not contain duplicate entries",
                        ));
                    }
                    seen.push(k);
                }
            }
        }
    }
    // `validateMapListKeysMapSet`: set and map items are not nullable; map keys are required
    // or defaulted, and not nullable.
    if let (Some(lt @ ("set" | "map")), Some(is)) = (s.list_type.as_deref(), items) {
        if is.nullable {
            causes.push(Cause::forbidden(
                format!("{path}.items.nullable"),
                &format!("cannot be nullable when x-kubernetes-list-type is {lt}"),
            ));
        }
        if lt == "map" {
            for k in &s.list_map_keys {
                let Some(p) = is.property(k) else {
                    continue;
                };
                if !is.required.contains(k) && p.default.is_none() {
                    causes.push(Cause::required(
                        format!("{path}.items.properties[{k}].default"),
                        "this property is in x-kubernetes-list-map-keys, so it must have a default or be a required property",
                    ));
                }
                if p.nullable {
                    causes.push(Cause::forbidden(
                        format!("{path}.items.properties[{k}].nullable"),
                        "this property is in x-kubernetes-list-map-keys, so it cannot be nullable",
                    ));
                }
            }
        }
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
