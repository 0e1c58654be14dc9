//! `expect.crd` of a `celgate test` case: what the API server's CRD validation answers a
//! custom resource whose CustomResourceDefinition is in the suite (defaulting, pruning,
//! OpenAPI validation, `x-kubernetes-validations`). The API server runs it before any
//! validating webhook, so the webhook path never does: this expectation is checked apart
//! from the others, which are about the policies' answer.

use serde::Deserialize;
use serde_json::Value as Json;

use super::{Operation, Pattern};
use crate::crd::cli::Catalog;
use crate::crd::Status;

/// What the CRD validation of a case's object must answer; every field given is checked.
#[derive(Debug, Deserialize, Clone, Default)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CrdExpect {
    #[serde(default)]
    pub allowed: Option<bool>,
    /// 422 (Invalid), 404 (no CRD serves the kind), 400.
    #[serde(default)]
    pub code: Option<u16>,
    #[serde(default)]
    pub reason: Option<String>,
    #[serde(default)]
    pub message: Option<String>,
    #[serde(default)]
    pub message_matches: Option<Pattern>,
    /// The exact causes, in order.
    #[serde(default)]
    pub causes: Option<Vec<ExpectedCause>>,
}

impl CrdExpect {
    pub fn is_empty(&self) -> bool {
        self.allowed.is_none()
            && self.code.is_none()
            && self.reason.is_none()
            && self.message.is_none()
            && self.message_matches.is_none()
            && self.causes.is_none()
    }
}

/// One Status cause, as the API server returns it.
#[derive(Debug, Deserialize, Clone, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct ExpectedCause {
    #[serde(rename = "type")]
    pub type_: String,
    pub field: String,
    pub message: String,
}

/// The unmet parts of `expect` for the request `operation` of `object` (replacing `old`
/// on UPDATE; `status`: the /status subresource), answered by the CRDs of `catalog`; and,
/// when CRD validation answered, the expectation that answer meets ([`observe`]), for
/// `--update`.
pub fn check(
    catalog: &Catalog,
    expect: &CrdExpect,
    operation: Operation,
    object: Option<&Json>,
    old: Option<&Json>,
    status: bool,
) -> (Vec<String>, Option<Json>) {
    let answer = match (operation, object) {
        (Operation::Create, Some(obj)) => catalog.admit(obj, None, status),
        (Operation::Update, Some(obj)) => match old {
            Some(old) => catalog.admit(obj, Some(old), status),
            None => return (vec!["expect.crd: an UPDATE needs oldObject".into()], None),
        },
        (Operation::Create | Operation::Update, None) => {
            return (vec!["expect.crd: the case has no object".into()], None)
        }
        (op, _) => {
            return (
                vec![format!(
                    "expect.crd: CRD validation runs on CREATE and UPDATE, not {}",
                    op.as_str()
                )],
                None,
            )
        }
    };
    (compare(expect, &answer), Some(observe(expect, &answer)))
}

/// `expect` rewritten to what CRD validation answered (`celgate test --update`): each field
/// it has gets its observed value, a `messageMatches` that does not match becomes an exact
/// `message`; an empty expectation gets `allowed`, and `code`, `reason` and `message` when
/// the object was refused.
pub fn observe(expect: &CrdExpect, answer: &Result<(), Status>) -> Json {
    use serde_json::json;
    let (allowed, code, reason, message, causes) = match answer {
        Ok(()) => (true, 200, "", "", &[][..]),
        Err(s) => (
            false,
            s.code,
            s.reason.as_str(),
            s.message.as_str(),
            s.causes.as_slice(),
        ),
    };
    let mut out = serde_json::Map::new();
    if expect.is_empty() {
        out.insert("allowed".into(), json!(allowed));
        if !allowed {
            out.insert("code".into(), json!(code));
            out.insert("reason".into(), json!(reason));
            out.insert("message".into(), json!(message));
        }
        return Json::Object(out);
    }
    if expect.allowed.is_some() {
        out.insert("allowed".into(), json!(allowed));
    }
    if expect.code.is_some() {
        out.insert("code".into(), json!(code));
    }
    if expect.reason.is_some() {
        out.insert("reason".into(), json!(reason));
    }
    if expect.message.is_some() {
        out.insert("message".into(), json!(message));
    }
    if let Some(Pattern(re)) = &expect.message_matches {
        if re.is_match(message) {
            out.insert("messageMatches".into(), json!(re.as_str()));
        } else {
            out.insert("message".into(), json!(message));
        }
    }
    if expect.causes.is_some() {
        let causes: Vec<Json> = causes
            .iter()
            .map(|c| json!({"type": c.reason, "field": c.field, "message": c.message}))
            .collect();
        out.insert("causes".into(), Json::Array(causes));
    }
    Json::Object(out)
}

fn compare(expect: &CrdExpect, answer: &Result<(), Status>) -> Vec<String> {
    let mut out = Vec::new();
    let (allowed, code, reason, message, causes) = match answer {
        Ok(()) => (true, 200, "", "", &[][..]),
        Err(s) => (
            false,
            s.code,
            s.reason.as_str(),
            s.message.as_str(),
            s.causes.as_slice(),
        ),
    };
    if let Some(want) = expect.allowed {
        if want != allowed {
            let why = if allowed {
                String::new()
            } else {
                format!(" ({message})")
            };
            out.push(format!("crd.allowed: expected {want}, got {allowed}{why}"));
        }
    }
    if let Some(want) = expect.code {
        if want != code {
            out.push(format!("crd.code: expected {want}, got {code}"));
        }
    }
    super::expect_status_text(
        &mut out,
        "crd.",
        super::StatusText {
            reason: expect.reason.as_deref(),
            message: expect.message.as_deref(),
            message_matches: expect.message_matches.as_ref(),
        },
        reason,
        message,
    );
    if let Some(want) = &expect.causes {
        let got: Vec<ExpectedCause> = causes
            .iter()
            .map(|c| ExpectedCause {
                type_: c.reason.clone(),
                field: c.field.clone(),
                message: c.message.clone(),
            })
            .collect();
        if *want != got {
            let show = |cs: &[ExpectedCause]| {
                cs.iter()
                    .map(|c| format!("{} {}: {}", c.type_, c.field, c.message))
                    .collect::<Vec<_>>()
                    .join("; ")
            };
            out.push(format!(
                "crd.causes: expected [{}], got [{}]",
                show(want),
                show(&got)
            ));
        }
    }
    out
}
