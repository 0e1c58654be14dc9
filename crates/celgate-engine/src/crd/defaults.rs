//! Defaulting of a custom resource from the schema's `default` values, top-down: a missing
//! property (or a null one that is not nullable) takes its default, then defaults apply
//! inside it.

use serde_json::Value as Json;

use super::schema::Schema;

/// Removes the null values of fields that are neither nullable nor defaulted
/// (`PruneNonNullableNullsWithoutDefaults`, before defaulting): such a field reads as absent
/// rather than failing its type. Nulls in lists are kept.
pub(super) fn prune_nulls(v: &mut Json, schema: Option<&Schema>) {
    match v {
        Json::Object(m) => {
            let field_schema =
                |k: &str| schema.and_then(|s| s.property(k).or_else(|| s.additional_schema()));
            m.retain(|k, x| {
                !(x.is_null()
                    && field_schema(k).is_some_and(|s| !s.nullable && s.default.is_none()))
            });
            for (k, x) in m.iter_mut() {
                prune_nulls(x, field_schema(k));
            }
        }
        Json::Array(a) => {
            for x in a.iter_mut() {
                prune_nulls(x, schema.and_then(|s| s.items.as_deref()));
            }
        }
        _ => {}
    }
}

/// Whether `x` is a null that `s` does not allow (and so takes `s`'s default).
fn non_nullable_null(x: &Json, s: &Schema) -> bool {
    x.is_null() && !s.nullable
}

/// Applies the defaults of `schema` to `v` in place.
pub(super) fn apply(v: &mut Json, schema: &Schema) {
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
                    if non_nullable_null(x, add) {
                        *x = add.default.clone().unwrap_or(Json::Null);
                    }
                    apply(x, add);
                }
            }
        }
        Json::Array(a) => {
            if let Some(items) = schema.items.as_deref() {
                for x in a.iter_mut() {
                    if non_nullable_null(x, items) {
                        *x = items.default.clone().unwrap_or(Json::Null);
                    }
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
