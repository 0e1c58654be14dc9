//! Pruning: fields a structural schema does not declare are dropped, except under
//! `x-kubernetes-preserve-unknown-fields`; `apiVersion`, `kind` and `metadata` are kept at
//! the root and in embedded resources.

use serde_json::Value as Json;

use super::schema::Schema;

/// Prunes `v` (the whole object) in place.
pub(super) fn prune_root(v: &mut Json, schema: &Schema) {
    prune(v, schema, true);
}

fn prune(v: &mut Json, schema: &Schema, resource: bool) {
    match v {
        Json::Object(m) => {
            if let Some(add) = schema.additional_schema() {
                for (_, x) in m.iter_mut() {
                    prune(x, add, add.embedded_resource);
                }
                return;
            }
            let keep_unknown = schema.preserve_unknown_fields
                || matches!(
                    schema.additional_properties,
                    Some(super::schema::AdditionalProperties::Bool(true))
                );
            if !keep_unknown {
                m.retain(|k, _| {
                    schema.property(k).is_some()
                        || resource && matches!(k.as_str(), "apiVersion" | "kind" | "metadata")
                });
            }
            for (k, x) in m.iter_mut() {
                if let Some(sub) = schema.property(k) {
                    prune(x, sub, sub.embedded_resource);
                }
            }
        }
        Json::Array(a) => {
            if let Some(items) = schema.items.as_deref() {
                for x in a.iter_mut() {
                    prune(x, items, items.embedded_resource);
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn undeclared_fields_are_dropped_unless_preserved() {
        let s: Schema = serde_json::from_value(json!({"type": "object", "properties": {
            "spec": {"type": "object", "properties": {"a": {"type": "integer"}}},
            "p": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
        }}))
        .unwrap();
        let mut v = json!({"apiVersion": "g/v1", "kind": "W", "metadata": {"name": "n"},
            "spec": {"a": 1, "b": 2}, "p": {"z": 1}, "extra": true});
        prune_root(&mut v, &s);
        assert_eq!(
            v,
            json!({"apiVersion": "g/v1", "kind": "W", "metadata": {"name": "n"},
            "spec": {"a": 1}, "p": {"z": 1}})
        );
    }
}
