//! OpenAPI value validation of a custom resource against its structural schema (type,
//! nullable, required, enum, pattern, bounds, lengths, formats, uniqueItems,
//! allOf/anyOf/oneOf/not), with kube-openapi's texts as the API server reports them.

use serde_json::Value as Json;

use super::errors::{go_quote, render_value, Cause};
use super::schema::Schema;

/// Validates `v` (the whole object) against `schema`.
pub(super) fn validate_root(v: &Json, schema: &Schema) -> Vec<Cause> {
    let mut causes = Vec::new();
    validate(v, schema, "", &mut causes);
    causes
}

/// Whether a cause blocks CEL evaluation (`hasBlockingErr`): required, unsupported and
/// type errors.
pub(super) fn is_blocking(c: &Cause) -> bool {
    matches!(
        c.reason.as_str(),
        "FieldValueRequired" | "FieldValueNotSupported" | "FieldValueTypeInvalid"
    )
}

/// The synthetic cause added when CEL rules were skipped.
pub(super) fn skipped_rules_cause() -> Cause {
    Cause::invalid(
        "<nil>",
        "\"null\"",
        "some validation rules were not checked because the object was invalid; correct the existing errors to complete validation",
    )
}

fn json_type(v: &Json) -> &'static str {
    match v {
        Json::Null => "null",
        Json::Bool(_) => "boolean",
        Json::Number(n) => {
            if n.is_i64() || n.is_u64() {
                "integer"
            } else {
                "number"
            }
        }
        Json::String(_) => "string",
        Json::Array(_) => "array",
        Json::Object(_) => "object",
    }
}

fn child(path: &str, name: &str) -> String {
    if path.is_empty() {
        name.to_string()
    } else {
        format!("{path}.{name}")
    }
}

fn type_matches(v: &Json, t: &str) -> bool {
    match t {
        "" => true,
        "integer" => match v {
            Json::Number(n) => {
                n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0)
            }
            _ => false,
        },
        "number" => v.is_number(),
        "string" => v.is_string(),
        "boolean" => v.is_boolean(),
        "array" => v.is_array(),
        "object" => v.is_object(),
        _ => true,
    }
}

fn validate(v: &Json, s: &Schema, path: &str, causes: &mut Vec<Cause>) {
    let shown = if path.is_empty() { "<nil>" } else { path };
    if v.is_null() {
        if s.nullable || s.type_.is_empty() {
            return;
        }
        causes.push(Cause::type_invalid(
            shown,
            "\"null\"",
            &format!("{shown} in body must be of type {}: \"null\"", s.type_),
        ));
        return;
    }
    if s.int_or_string {
        if !(v.is_string() || type_matches(v, "integer")) {
            causes.push(Cause::type_invalid(
                shown,
                &go_quote(json_type(v)),
                &format!(
                    "{shown} in body must be of type integer,string: {}",
                    go_quote(json_type(v))
                ),
            ));
            return;
        }
    } else if !type_matches(v, &s.type_) {
        causes.push(Cause::type_invalid(
            shown,
            &go_quote(json_type(v)),
            &format!(
                "{shown} in body must be of type {}: {}",
                s.type_,
                go_quote(json_type(v))
            ),
        ));
        return;
    }
    if let Some(values) = &s.enum_ {
        if !values.iter().any(|e| e == v) {
            let supported: Vec<String> = values.iter().map(render_value).collect();
            causes.push(Cause::not_supported(shown, &render_value(v), &supported));
        }
    }
    match v {
        Json::String(text) => string_checks(text, s, shown, causes),
        Json::Number(n) => number_checks(v, n.as_f64().unwrap_or(f64::NAN), s, shown, causes),
        Json::Array(a) => {
            if let Some(max) = s.max_items {
                if a.len() as u64 > max {
                    causes.push(Cause {
                        field: shown.to_string(),
                        reason: "FieldValueTooMany".into(),
                        message: format!("Too many: {}: must have at most {max} items", a.len()),
                    });
                }
            }
            if let Some(min) = s.min_items {
                if (a.len() as u64) < min {
                    causes.push(Cause::invalid(
                        shown,
                        &a.len().to_string(),
                        &format!("{shown} in body should have at least {min} items"),
                    ));
                }
            }
            let set = s.unique_items || s.list_type.as_deref() == Some("set");
            // Duplicates in one pass: items (or list-map keys) by their JSON text, which is
            // canonical since serde_json's maps are sorted (a pairwise scan was quadratic:
            // 14 ms for a 1,000-item list).
            if set {
                let mut seen = std::collections::HashSet::with_capacity(a.len());
                for (i, x) in a.iter().enumerate() {
                    if !seen.insert(x.to_string()) {
                        causes.push(Cause::duplicate(format!("{shown}[{i}]"), &render_value(x)));
                    }
                }
            }
            if s.list_type.as_deref() == Some("map") && !s.list_map_keys.is_empty() {
                let mut seen = std::collections::HashSet::with_capacity(a.len());
                for (i, x) in a.iter().enumerate() {
                    let key: Vec<Option<&Json>> =
                        s.list_map_keys.iter().map(|k| x.get(k)).collect();
                    // An absent key differs from a null one.
                    let text: Vec<String> = key
                        .iter()
                        .map(|v| v.map_or_else(|| "\u{0}absent".to_string(), Json::to_string))
                        .collect();
                    let dup = !seen.insert(text.join("\u{1}"));
                    if dup {
                        let shown_key: Vec<String> = s
                            .list_map_keys
                            .iter()
                            .zip(&key)
                            .map(|(k, v)| {
                                format!(
                                    "\"{k}\":{}",
                                    v.map(|v| v.to_string()).unwrap_or("null".into())
                                )
                            })
                            .collect();
                        causes.push(Cause::duplicate(
                            format!("{shown}[{i}]"),
                            &format!("map[string]interface {{}}{{{}}}", shown_key.join(", ")),
                        ));
                    }
                }
            }
            if let Some(items) = s.items.as_deref() {
                for (i, x) in a.iter().enumerate() {
                    validate(x, items, &format!("{shown}[{i}]"), causes);
                }
            }
        }
        Json::Object(m) => {
            for r in &s.required {
                if !m.contains_key(r) {
                    causes.push(Cause::required(child(path, r), ""));
                }
            }
            if let Some(max) = s.max_properties {
                if m.len() as u64 > max {
                    causes.push(Cause {
                        field: shown.to_string(),
                        reason: "FieldValueTooMany".into(),
                        message: format!("Too many: {}: must have at most {max} items", m.len()),
                    });
                }
            }
            if let Some(min) = s.min_properties {
                if (m.len() as u64) < min {
                    causes.push(Cause::invalid(
                        shown,
                        &m.len().to_string(),
                        &format!("{shown} in body should have at least {min} properties"),
                    ));
                }
            }
            for (k, x) in m {
                if let Some(sub) = s.property(k) {
                    validate(x, sub, &child(path, k), causes);
                } else if let Some(add) = s.additional_schema() {
                    validate(x, add, &format!("{shown}[{k}]"), causes);
                }
            }
        }
        Json::Bool(_) | Json::Null => {}
    }
    combinators(v, s, shown, causes);
}

fn string_checks(text: &str, s: &Schema, shown: &str, causes: &mut Vec<Cause>) {
    let chars = text.chars().count() as u64;
    if let Some(max) = s.max_length {
        if chars > max {
            causes.push(Cause {
                field: shown.to_string(),
                reason: "FieldValueTooLong".into(),
                message: format!(
                    "Too long: may not be more than {max} {}",
                    if max == 1 { "byte" } else { "bytes" }
                ),
            });
        }
    }
    if let Some(min) = s.min_length {
        if chars < min {
            causes.push(Cause::invalid(
                shown,
                &go_quote(text),
                &format!("{shown} in body should be at least {min} chars long"),
            ));
        }
    }
    if let Some(p) = &s.pattern {
        if let Ok(re) = regex::Regex::new(p) {
            if !re.is_match(text) {
                causes.push(Cause::invalid(
                    shown,
                    &go_quote(text),
                    &format!("{shown} in body should match '{p}'"),
                ));
            }
        }
    }
    if !format_ok(&s.format, text) {
        causes.push(Cause::type_invalid(
            shown,
            &go_quote(text),
            &format!(
                "{shown} in body must be of type {}: {}",
                s.format,
                go_quote(text)
            ),
        ));
    }
}

/// The formats the API server checks (a subset of kube-openapi's registry).
fn format_ok(format: &str, text: &str) -> bool {
    use base64::Engine;
    match format {
        "byte" => base64::engine::general_purpose::STANDARD
            .decode(text)
            .is_ok(),
        "date-time" => celgate_cel::time::Timestamp::parse_rfc3339(text).is_some(),
        "date" => {
            celgate_cel::time::Timestamp::parse_rfc3339(&format!("{text}T00:00:00Z")).is_some()
        }
        "duration" => celgate_cel::apimachinery::duration::parse_go_duration(text).is_some(),
        _ => true,
    }
}

fn number_checks(v: &Json, n: f64, s: &Schema, shown: &str, causes: &mut Vec<Cause>) {
    let value = v.to_string();
    if let Some(max) = s.maximum {
        let bad = if s.exclusive_maximum {
            n >= max
        } else {
            n > max
        };
        if bad {
            let op = if s.exclusive_maximum {
                "less than"
            } else {
                "less than or equal to"
            };
            causes.push(Cause::invalid(
                shown,
                &value,
                &format!("{shown} in body should be {op} {}", fmt_num(max)),
            ));
        }
    }
    if let Some(min) = s.minimum {
        let bad = if s.exclusive_minimum {
            n <= min
        } else {
            n < min
        };
        if bad {
            let op = if s.exclusive_minimum {
                "greater than"
            } else {
                "greater than or equal to"
            };
            causes.push(Cause::invalid(
                shown,
                &value,
                &format!("{shown} in body should be {op} {}", fmt_num(min)),
            ));
        }
    }
    if let Some(m) = s.multiple_of {
        if m != 0.0 && (n / m).fract() != 0.0 {
            causes.push(Cause::invalid(
                shown,
                &value,
                &format!("{shown} in body should be a multiple of {}", fmt_num(m)),
            ));
        }
    }
}

/// A bound as Go's `%v` prints a float64 that holds an integer or not.
fn fmt_num(f: f64) -> String {
    if f.fract() == 0.0 && f.abs() < 1e21 {
        format!("{}", f as i64)
    } else {
        format!("{f}")
    }
}

fn combinators(v: &Json, s: &Schema, shown: &str, causes: &mut Vec<Cause>) {
    let passes = |sub: &Schema| {
        let mut c = Vec::new();
        validate(v, sub, shown, &mut c);
        c.is_empty()
    };
    for sub in &s.all_of {
        validate(v, sub, shown, causes);
    }
    if !s.any_of.is_empty() && !s.any_of.iter().any(passes) {
        causes.push(Cause::invalid(
            shown,
            &render_value_brief(v),
            &format!("{shown} in body must match at least one schema (anyOf)"),
        ));
    }
    if !s.one_of.is_empty() {
        let n = s.one_of.iter().filter(|x| passes(x)).count();
        if n != 1 {
            causes.push(Cause::invalid(
                shown,
                &render_value_brief(v),
                &format!("{shown} in body must match exactly one schema (oneOf)"),
            ));
        }
    }
    if let Some(not) = s.not.as_deref() {
        if passes(not) {
            causes.push(Cause::invalid(
                shown,
                &render_value_brief(v),
                &format!("{shown} in body should not match the schema (not)"),
            ));
        }
    }
}

fn render_value_brief(v: &Json) -> String {
    match v {
        Json::Object(_) | Json::Array(_) => go_quote(json_type(v)),
        other => render_value(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn s(j: Json) -> Schema {
        serde_json::from_value(j).unwrap()
    }

    #[test]
    fn maximum_and_format_texts() {
        let schema = s(
            json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "n": {"type": "integer", "maximum": 10},
            "b": {"type": "string", "format": "byte"}}}}}),
        );
        let c = validate_root(&json!({"spec": {"n": 100, "b": "!!!"}}), &schema);
        let texts: Vec<String> = c.iter().map(Cause::render).collect();
        assert!(texts.contains(
            &"spec.n: Invalid value: 100: spec.n in body should be less than or equal to 10"
                .to_string()
        ));
        assert!(texts.contains(
            &"spec.b: Invalid value: \"!!!\": spec.b in body must be of type byte: \"!!!\""
                .to_string()
        ));
        assert!(c.iter().any(is_blocking));
    }
}
