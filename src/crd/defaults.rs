//! Defaulting of a custom resource from the schema's `default` values, top-down: a missing
//! property (or a null one that is not nullable) takes its default, then defaults apply
//! inside it.

use serde_json::Value as Json;

use super::schema::Schema;

/// Applies the defaults of `schema` to `v` in place.
pub fn apply(v: &mut Json, schema: &Schema) {
    match v {
        Json::Object(m) => {
            for (name, sub) in &schema.properties {
                if let Some(d) = &sub.default {
                    let missing = match m.get(name) {
                        None => true,
                        Some(Json::Null) => !sub.nullable,
                        Some(_) => false,
                    };
                    if missing {
                        m.insert(name.clone(), d.clone());
                    }
                }
                if let Some(x) = m.get_mut(name) {
                    apply(x, sub);
                }
            }
            if let Some(add) = schema.additional_schema() {
                for (_, x) in m.iter_mut() {
                    apply(x, add);
                }
            }
        }
        Json::Array(a) => {
            if let Some(items) = schema.items.as_deref() {
                for x in a.iter_mut() {
                    apply(x, items);
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
    fn defaults_apply_inside_a_defaulted_object() {
        let s: Schema = serde_json::from_value(json!({"type": "object", "properties": {
            "o": {"type": "object", "default": {}, "properties": {"a": {"type": "string", "default": "x"}}}
        }}))
        .unwrap();
        let mut v = json!({});
        apply(&mut v, &s);
        assert_eq!(v, json!({"o": {"a": "x"}}));
    }
}
