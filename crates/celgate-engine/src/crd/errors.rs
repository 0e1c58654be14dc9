//! Errors in the API server's format: a `Status` with reason `Invalid`, code 422, causes
//! `{field, type, message}`, and the message `<Kind>.<group> "<name>" is invalid: ...`.

use serde::Serialize;

/// One Status cause (`field.Error` rendered).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Cause {
    pub field: String,
    #[serde(rename = "type")]
    pub reason: String,
    pub message: String,
}

impl Cause {
    /// `field.Invalid`: `Invalid value: <value>: <detail>`, `value` already rendered.
    pub fn invalid(field: impl Into<String>, value: &str, detail: &str) -> Cause {
        Cause {
            field: field.into(),
            reason: "FieldValueInvalid".into(),
            message: format!("Invalid value: {value}: {detail}"),
        }
    }

    pub(crate) fn type_invalid(field: impl Into<String>, value: &str, detail: &str) -> Cause {
        Cause {
            field: field.into(),
            reason: "FieldValueTypeInvalid".into(),
            message: format!("Invalid value: {value}: {detail}"),
        }
    }

    pub fn required(field: impl Into<String>, detail: &str) -> Cause {
        Cause {
            field: field.into(),
            reason: "FieldValueRequired".into(),
            message: if detail.is_empty() {
                "Required value".into()
            } else {
                format!("Required value: {detail}")
            },
        }
    }

    pub fn forbidden(field: impl Into<String>, detail: &str) -> Cause {
        Cause {
            field: field.into(),
            reason: "FieldValueForbidden".into(),
            message: format!("Forbidden: {detail}"),
        }
    }

    pub(crate) fn not_supported(
        field: impl Into<String>,
        value: &str,
        supported: &[String],
    ) -> Cause {
        Cause {
            field: field.into(),
            reason: "FieldValueNotSupported".into(),
            message: format!(
                "Unsupported value: {value}: supported values: {}",
                supported.join(", ")
            ),
        }
    }

    pub fn duplicate(field: impl Into<String>, value: &str) -> Cause {
        Cause {
            field: field.into(),
            reason: "FieldValueDuplicate".into(),
            message: format!("Duplicate value: {value}"),
        }
    }

    /// `field: message`, as in the Status message.
    pub fn render(&self) -> String {
        format!("{}: {}", self.field, self.message)
    }
}

/// A rejection as the API server returns it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Status {
    pub code: u16,
    pub reason: String,
    pub message: String,
    pub causes: Vec<Cause>,
}

impl Status {
    /// `<qualified kind> "<name>" is invalid: <causes>` (a list in brackets when several).
    /// The causes are kept one per error, repeats included (`NewInvalid` in apimachinery's
    /// api/errors/errors.go walks the whole list), but the message names each distinct error
    /// once: `ErrorList.ToAggregate` (util/validation/field/errors.go) drops an error whose
    /// text was already seen, so two identical failing rules give two causes and a message
    /// without brackets.
    pub fn invalid(qualified_kind: &str, name: &str, causes: Vec<Cause>) -> Status {
        let mut rendered: Vec<String> = Vec::with_capacity(causes.len());
        for text in causes.iter().map(Cause::render) {
            if !rendered.contains(&text) {
                rendered.push(text);
            }
        }
        let list = if rendered.len() == 1 {
            rendered.concat()
        } else {
            format!("[{}]", rendered.join(", "))
        };
        Status {
            code: 422,
            reason: "Invalid".into(),
            message: format!("{qualified_kind} {} is invalid: {list}", go_quote(name)),
            causes,
        }
    }
}

pub use celgate_cel::apimachinery::quote::go_quote_str as go_quote;

/// A JSON value as Go's `%v`/`%#v` shows it in `Invalid value: ...`: strings quoted,
/// numbers and booleans bare.
pub(crate) fn render_value(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => go_quote(s),
        serde_json::Value::Null => "\"null\"".into(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_message_lists_several_causes_in_brackets() {
        let one = Status::invalid("Widget.g", "t1", vec![Cause::required("spec.a", "")]);
        assert_eq!(
            one.message,
            "Widget.g \"t1\" is invalid: spec.a: Required value"
        );
        let two = Status::invalid(
            "Widget.g",
            "t1",
            vec![
                Cause::required("spec.a", ""),
                Cause::forbidden("spec", "no"),
            ],
        );
        assert_eq!(
            two.message,
            "Widget.g \"t1\" is invalid: [spec.a: Required value, spec: Forbidden: no]"
        );
    }

    /// apimachinery util/validation/field/errors.go `ToAggregate` de-duplicates by text;
    /// api/errors/errors.go `NewInvalid` builds one cause per list entry.
    #[test]
    fn identical_errors_are_causes_twice_but_named_once() {
        let same = || Cause::invalid("spec", "\"object\"", "failed rule: self.n > 1");
        let status = Status::invalid("Widget.g", "t1", vec![same(), same()]);
        assert_eq!(status.causes.len(), 2);
        assert_eq!(
            status.message,
            "Widget.g \"t1\" is invalid: spec: Invalid value: \"object\": failed rule: self.n > 1"
        );
        let three = Status::invalid(
            "Widget.g",
            "t1",
            vec![same(), Cause::required("spec.a", ""), same()],
        );
        assert_eq!(
            three.message,
            "Widget.g \"t1\" is invalid: [spec: Invalid value: \"object\": failed rule: self.n > 1, spec.a: Required value]"
        );
    }

    #[test]
    fn go_quote_escapes_like_go() {
        assert_eq!(go_quote("a\"b\n"), "\"a\\\"b\\n\"");
    }
}
