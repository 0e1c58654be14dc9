//! Encoding: the AdmissionReview response for a verdict (§5, §10): the denial's status with the
//! in-tree wording and reason-to-code mapping, warnings, and audit annotations under keys a
//! webhook can return. Warnings are cut as the API server's warning recorder cuts them
//! (k8s.io/apiserver/pkg/endpoints/filters/warning.go): what it would drop is not sent. The
//! request's strings echoed in a denial's details are cut to [`MAX_ECHOED`] bytes, so that an
//! answer does not grow with what a client sent.

use std::collections::BTreeMap;

use celgate_cel::json::escape_into;
use serde_json::{json, Map, Value as Json};
use sha2::{Digest, Sha256};

use crate::admission::request::Request;
use crate::admission::AdmissionVerdict;

/// Kubernetes' reason to HTTP code (§5.1).
pub(crate) fn code_for(reason: &str) -> u16 {
    match reason {
        "Forbidden" => 403,
        "Unauthorized" => 401,
        "RequestEntityTooLarge" => 413,
        _ => 422,
    }
}

/// At most this many `validation_failure` entries are kept.
const MAX_AUDITED: usize = 50;
/// The name part of an audit annotation key.
const MAX_KEY: usize = 63;

/// The API server keeps warnings of at most this many runes in all; past it, each is cut to
/// [`WARNING_ITEM_RUNES`] (`truncateAtTotalRunes` in k8s.io/apiserver's
/// pkg/endpoints/filters/warning.go).
const WARNINGS_TOTAL_RUNES: usize = 4 * 1024;
/// The runes of each warning kept once the total is past (`truncateItemRunes`).
const WARNING_ITEM_RUNES: usize = 256;

/// The most bytes of a request string (name, group, resource) a denial's details repeat:
/// longer than any the API server accepts (names and groups are at most 253 bytes).
pub const MAX_ECHOED: usize = 256;

/// `text` cut to at most `bytes` bytes, on a character boundary.
pub fn cut_bytes(text: &str, bytes: usize) -> &str {
    let mut at = text.len().min(bytes);
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    &text[..at]
}

/// `text` cut to `runes` characters.
fn cut_runes(text: &str, runes: usize) -> &str {
    text.char_indices()
        .nth(runes)
        .map_or(text, |(at, _)| &text[..at])
}

/// The warnings the API server's recorder would keep of `warnings`, in order: empty and
/// repeated texts dropped; while their runes fit [`WARNINGS_TOTAL_RUNES`] all whole; once one
/// does not, every warning kept so far and each later one cut to [`WARNING_ITEM_RUNES`],
/// and later ones added only while the total is under the limit. 10,000 failing Warn
/// validations make a few kilobytes of answer, not tens of megabytes.
pub(crate) fn recorded_warnings(warnings: &[String]) -> Vec<&str> {
    let mut seen = std::collections::HashSet::new();
    let mut kept: Vec<&str> = Vec::new();
    let (mut written, mut truncating) = (0usize, false);
    for text in warnings {
        if truncating && written >= WARNINGS_TOTAL_RUNES {
            break;
        }
        if text.is_empty() || !seen.insert(text.as_str()) {
            continue;
        }
        if truncating {
            let cut = cut_runes(text, WARNING_ITEM_RUNES);
            written += cut.chars().count();
            kept.push(cut);
            continue;
        }
        let runes = text.chars().count();
        if written + runes <= WARNINGS_TOTAL_RUNES {
            written += runes;
            kept.push(text);
            continue;
        }
        // Over the limit: the recorder starts again with every warning so far cut.
        truncating = true;
        kept.push(text);
        for w in &mut kept {
            *w = cut_runes(w, WARNING_ITEM_RUNES);
        }
        written = kept.iter().map(|w| w.chars().count()).sum();
    }
    kept
}

/// `<policy>_<key>`. The API server prefixes webhook annotation keys with the webhook's name
/// and allows one `/`, so the in-tree `<policy>/<key>` cannot be returned. When the result
/// exceeds 63 characters, the policy name is cut and followed by `-` and the first 8 hex
/// digits of its SHA-256, so distinct policies keep distinct keys.
pub fn annotation_key(policy: &str, key: &str) -> String {
    if policy.len() + 1 + key.len() <= MAX_KEY {
        let mut plain = String::with_capacity(policy.len() + 1 + key.len());
        plain.push_str(policy);
        plain.push('_');
        plain.push_str(key);
        return plain;
    }
    let digest = Sha256::digest(policy.as_bytes());
    let hash: String = digest.iter().take(4).map(|b| format!("{b:02x}")).collect();
    let room = MAX_KEY.saturating_sub(key.len() + 1 + 1 + hash.len());
    let mut cut = room.min(policy.len());
    while !policy.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}-{hash}_{key}", &policy[..cut])
}

/// JSON as Go's `encoding/json` writes it: fields in declaration order, `<`, `>` and `&` escaped.
fn go_json(v: &impl serde::Serialize) -> String {
    let text = serde_json::to_string(v).unwrap_or_default();
    // Copied only when there is something to escape (rarely).
    if !text.contains(['<', '>', '&']) {
        return text;
    }
    let mut escaped = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        match c {
            '<' => escaped.push_str("\\u003c"),
            '>' => escaped.push_str("\\u003e"),
            '&' => escaped.push_str("\\u0026"),
            c => escaped.push(c),
        }
    }
    escaped
}

/// The `response` of a validating answer, written straight to the answer's bytes (no JSON
/// tree, strings escaped a run at a time): keys in the order `serde_json::Map` sorts them, so
/// that the bytes are what serde_json prints for the same review.
fn write_response(out: &mut Vec<u8>, req: &Request<'_>, verdict: &AdmissionVerdict) {
    out.extend_from_slice(if verdict.allowed() {
        b"{\"allowed\":true,\"auditAnnotations\":{"
    } else {
        b"{\"allowed\":false,\"auditAnnotations\":{"
    });
    // A map, as the in-tree answer's: a later annotation under the same key replaces an
    // earlier one.
    let mut annotations = BTreeMap::new();
    for (policy, key, values) in &verdict.annotations {
        annotations.insert(annotation_key(policy, key), values.join(", "));
    }
    if !verdict.audited.is_empty() {
        let kept: Vec<_> = verdict.audited.iter().take(MAX_AUDITED).collect();
        annotations.insert("validation_failure".into(), go_json(&kept));
    }
    for (i, (key, value)) in annotations.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        escape_into(out, key);
        out.push(b':');
        escape_into(out, value);
    }
    out.push(b'}');
    if let Some(first) = verdict.denials.first() {
        let reason = first.reason.as_deref().unwrap_or("Invalid");
        out.extend_from_slice(b",\"status\":{\"code\":");
        out.extend_from_slice(code_for(reason).to_string().as_bytes());
        out.extend_from_slice(b",\"details\":{\"causes\":[{\"message\":");
        escape_into(out, &first.message);
        out.extend_from_slice(b"}],\"group\":");
        escape_into(out, cut_bytes(&req.attributes.group, MAX_ECHOED));
        out.extend_from_slice(b",\"kind\":");
        escape_into(out, cut_bytes(&req.attributes.resource, MAX_ECHOED));
        out.extend_from_slice(b",\"name\":");
        escape_into(out, cut_bytes(&req.display_name(), MAX_ECHOED));
        out.extend_from_slice(b"},\"message\":");
        escape_into(out, &first.message);
        out.extend_from_slice(b",\"metadata\":{},\"reason\":");
        escape_into(out, reason);
        out.extend_from_slice(b",\"status\":\"Failure\"}");
    }
    out.extend_from_slice(b",\"uid\":");
    escape_into(out, &req.uid);
    out.extend_from_slice(b",\"warnings\":[");
    for (i, w) in recorded_warnings(&verdict.warnings).iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        escape_into(out, w);
    }
    out.extend_from_slice(b"]}");
}

/// An AdmissionReview around the response `response` writes, in the request's API version.
fn write_review(req: &Request<'_>, response: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
    // Room for a usual answer, so that the buffer does not grow from empty.
    let mut out = Vec::with_capacity(512);
    out.extend_from_slice(b"{\"apiVersion\":");
    escape_into(&mut out, &req.api_version);
    out.extend_from_slice(b",\"kind\":\"AdmissionReview\",\"response\":");
    response(&mut out);
    out.push(b'}');
    out
}

/// The `response` object of the answer, as JSON (for callers that inspect it).
pub fn response(req: &Request<'_>, verdict: &AdmissionVerdict) -> Json {
    let mut out = Vec::new();
    write_response(&mut out, req, verdict);
    // Written above as JSON, with every string escaped.
    serde_json::from_slice(&out).unwrap_or_default()
}

/// The whole AdmissionReview answer, in the request's API version, as the bytes to send.
pub fn review_bytes(req: &Request<'_>, verdict: &AdmissionVerdict) -> Vec<u8> {
    write_review(req, |out| write_response(out, req, verdict))
}

/// The answer of observe mode, whatever was decided: allowed, without warnings or audit
/// annotations, in the request's API version, as the bytes to send.
pub fn observed_bytes(req: &Request<'_>) -> Vec<u8> {
    write_review(req, |out| {
        out.extend_from_slice(b"{\"allowed\":true,\"uid\":");
        escape_into(out, &req.uid);
        out.push(b'}');
    })
}

/// An AdmissionReview holding `response`, in the request's API version. The response is
/// moved in: `json!` would serialize it into a copy of itself.
fn envelope(req: &Request<'_>, response: Json) -> Json {
    let mut review = Map::new();
    review.insert("apiVersion".into(), Json::String(req.api_version.clone()));
    review.insert("kind".into(), Json::String("AdmissionReview".into()));
    review.insert("response".into(), response);
    Json::Object(review)
}

/// The answer at `/mutate`: allowed with the patch (`patchType: JSONPatch`, base64), or the
/// denial's status, in the request's API version.
pub fn mutating_review(
    req: &Request<'_>,
    verdict: &crate::admission::mutate::MutationVerdict,
    patch: Option<&Json>,
) -> Json {
    use base64::Engine as _;
    let mut r = Map::new();
    r.insert("uid".into(), Json::String(req.uid.clone()));
    r.insert("allowed".into(), Json::Bool(verdict.allowed()));
    if let Some(d) = &verdict.denial {
        let causes: Vec<Json> = d.causes.iter().map(|c| json!({"message": c})).collect();
        r.insert(
            "status".into(),
            json!({
                "metadata": {},
                "status": "Failure",
                "message": d.message,
                "reason": d.reason,
                "details": {
                    "name": cut_bytes(&req.display_name(), MAX_ECHOED),
                    "group": cut_bytes(&req.attributes.group, MAX_ECHOED),
                    "kind": cut_bytes(&req.attributes.resource, MAX_ECHOED),
                    "causes": causes,
                },
                "code": d.code,
            }),
        );
    } else if let Some(patch) = patch {
        let bytes = serde_json::to_vec(patch).unwrap_or_default();
        r.insert("patchType".into(), Json::String("JSONPatch".into()));
        r.insert(
            "patch".into(),
            Json::String(base64::engine::general_purpose::STANDARD.encode(bytes)),
        );
    }
    envelope(req, Json::Object(r))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_fit_63_characters() {
        assert_eq!(annotation_key("p", "k"), "p_k");
        let long = "a".repeat(70);
        let k = annotation_key(&long, "key");
        assert!(k.len() <= 63, "{k}");
        assert!(k.ends_with("_key"));
        assert_ne!(
            annotation_key(&format!("{long}x"), "key"),
            k,
            "distinct policies keep distinct keys"
        );
    }

    /// The behaviour of the API server's recorder (its warning_test.go TestTruncation), at
    /// its real limits.
    #[test]
    fn warnings_are_cut_as_the_api_server_cuts_them() {
        let w = |c: char, n: usize| c.to_string().repeat(n);
        let owned = |v: &[String]| v.to_vec();
        // Under the total: all kept whole, repeats and empty texts dropped.
        let few = owned(&[w('a', 300), w('a', 300), String::new(), w('b', 2)]);
        assert_eq!(recorded_warnings(&few), [w('a', 300), w('b', 2)]);
        // Past it: every one cut to 256 runes, later ones added while under 4096 runes.
        let many: Vec<String> = (0..10_000)
            .map(|i| format!("{i:05}{}", "é".repeat(1000)))
            .collect();
        let kept = recorded_warnings(&many);
        assert!(kept.iter().all(|k| k.chars().count() == 256));
        assert_eq!(
            kept.len(),
            16,
            "4 whole ones fit, the 5th starts cutting: 16 * 256 = 4096"
        );
        assert!(kept[15].starts_with("00015"));
        // The first one that does not fit starts the cutting; later ones come while under.
        let mixed = owned(&[w('a', 4000), w('b', 200), w('c', 1)]);
        assert_eq!(
            recorded_warnings(&mixed),
            [w('a', 256), w('b', 200), w('c', 1)]
        );
    }

    /// The answer's bytes are the review the API server reads: the in-tree fields, with
    /// serde_json's own encoding of that JSON (keys sorted), for an allowed answer, a denial
    /// with and without a reason, repeated annotation keys, audited failures and warnings.
    #[test]
    fn answer_bytes_are_the_review_as_json() {
        let body =
            br#"{"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview","request":{
            "uid":"u-1","kind":{"group":"apps","version":"v1","kind":"Deployment"},
            "resource":{"group":"apps","version":"v1","resource":"deployments"},
            "namespace":"ns","operation":"CREATE","userInfo":{"username":"alice"},
            "object":{"metadata":{"generateName":"web-<&>"}}}}"#;
        let doc = celgate_cel::json::Doc::parse(body).unwrap();
        let req = super::super::request(&doc).unwrap();
        let denial = |reason: Option<&str>| crate::admission::Denial {
            policy: "p".into(),
            binding: Some("b".into()),
            message: "denied \"<here>\"\n\u{1} é".into(),
            reason: reason.map(str::to_string),
        };
        let audited = crate::admission::AuditedFailure {
            message: "m&".into(),
            policy: "p".into(),
            binding: "b".into(),
            expression_index: 0,
            validation_actions: vec!["Audit".into()],
        };
        let verdicts = [
            AdmissionVerdict::default(),
            AdmissionVerdict {
                denials: vec![denial(None), denial(Some("Forbidden"))],
                warnings: vec!["w1".into(), "w1".into(), "w2".into()],
                annotations: vec![
                    ("p".into(), "k".into(), vec!["a".into(), "b".into()]),
                    ("p".into(), "k".into(), vec!["later".into()]),
                ],
                audited: vec![audited],
                ..Default::default()
            },
            AdmissionVerdict {
                denials: vec![denial(Some("Forbidden"))],
                ..Default::default()
            },
        ];
        let expected = [
            json!({"allowed": true, "auditAnnotations": {}, "uid": "u-1", "warnings": []}),
            json!({"allowed": false, "uid": "u-1", "warnings": ["w1", "w2"],
                "auditAnnotations": {
                    "p_k": "later",
                    "validation_failure": r#"[{"message":"m\u0026","policy":"p","binding":"b","expressionIndex":0,"validationActions":["Audit"]}]"#,
                },
                "status": {"metadata": {}, "status": "Failure", "message": "denied \"<here>\"\n\u{1} é",
                    "reason": "Invalid", "code": 422,
                    "details": {"name": "web-<&>", "group": "apps", "kind": "deployments",
                        "causes": [{"message": "denied \"<here>\"\n\u{1} é"}]}}}),
            json!({"allowed": false, "auditAnnotations": {}, "uid": "u-1", "warnings": [],
                "status": {"metadata": {}, "status": "Failure", "message": "denied \"<here>\"\n\u{1} é",
                    "reason": "Forbidden", "code": 403,
                    "details": {"name": "web-<&>", "group": "apps", "kind": "deployments",
                        "causes": [{"message": "denied \"<here>\"\n\u{1} é"}]}}}),
        ];
        for (verdict, response) in verdicts.iter().zip(expected) {
            let bytes = review_bytes(&req, verdict);
            let review: Json = serde_json::from_slice(&bytes).unwrap();
            let whole = json!({"apiVersion": "admission.k8s.io/v1beta1", "kind": "AdmissionReview", "response": response});
            assert_eq!(review, whole);
            assert_eq!(
                bytes,
                serde_json::to_vec(&whole).unwrap(),
                "keys in serde_json's order"
            );
            assert_eq!(super::response(&req, verdict), whole["response"]);
        }
        let observed: Json = serde_json::from_slice(&observed_bytes(&req)).unwrap();
        assert_eq!(
            observed,
            json!({"apiVersion": "admission.k8s.io/v1beta1", "kind": "AdmissionReview",
                "response": {"uid": "u-1", "allowed": true}})
        );
    }

    #[test]
    fn codes_and_go_escaping() {
        assert_eq!(code_for("Forbidden"), 403);
        assert_eq!(code_for("Whatever"), 422);
        assert_eq!(go_json(&json!(["a<b>&"])), r#"["a\u003cb\u003e\u0026"]"#);
        let f = crate::admission::AuditedFailure {
            message: "m".into(),
            policy: "p".into(),
            binding: "b".into(),
            expression_index: 1,
            validation_actions: vec!["Audit".into()],
        };
        assert_eq!(
            go_json(&[f]),
            r#"[{"message":"m","policy":"p","binding":"b","expressionIndex":1,"validationActions":["Audit"]}]"#,
            "in-tree field order"
        );
    }
}
