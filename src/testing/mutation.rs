//! `celgate test` for MutatingAdmissionPolicies: a case's request goes through the suite's
//! mutating policies first, as the API server's chain does (`MutatingAdmissionPolicy` runs
//! before the validating plugins), then the validating policies see the mutated object. This
//! module owns that first phase and the expectations about it: the object after the
//! mutations (`object`, exact; `objectContains`, the fields given), the JSON patch `/mutate`
//! would answer (`patch`) and whether anything changed (`mutated`).

use serde_json::{json, Value as Json};

use super::update::Edit;
use super::{Expect, Expected};
use crate::admission::mutate::MutationVerdict;
use crate::policy::snapshot::Snapshot;

/// What the mutating phase did to a case's request.
pub(crate) struct Mutation {
    pub verdict: MutationVerdict,
    /// The `/mutate` answer's response object (its status when denied).
    pub response: Json,
    /// The patch sent, when the object changed.
    pub patch: Option<Json>,
    /// The object after the mutations (the request's own when nothing changed).
    pub object: Json,
}

impl Mutation {
    pub fn allowed(&self) -> bool {
        self.verdict.allowed()
    }
}

/// Runs the mutating phase on the review `body`: `None` when the snapshot has no mutating
/// policy (the request goes to the validating policies as it is).
pub(crate) fn run(
    snapshot: &Snapshot,
    body: &[u8],
    probe: Option<&dyn crate::admission::probe::Probe>,
) -> Result<Option<Mutation>, String> {
    if snapshot.mutating.is_empty() {
        return Ok(None);
    }
    let answer = crate::review::answer_mutating_probed(snapshot, body, &Default::default(), probe)
        .map_err(|e| format!("the review is invalid: {e}"))?;
    let object = match &answer.verdict.mutated {
        Some(m) => m.after.clone(),
        None => serde_json::from_slice::<Json>(body)
            .map(|r| r["request"]["object"].clone())
            .unwrap_or(Json::Null),
    };
    Ok(Some(Mutation {
        response: answer.review["response"].clone(),
        patch: answer.patch,
        object,
        verdict: answer.verdict,
    }))
}

/// The review `body` with its object replaced by the mutated one: what the validating
/// policies are asked.
pub(crate) fn mutated_review(body: &[u8], m: &Mutation) -> Result<Vec<u8>, String> {
    if m.verdict.mutated.is_none() {
        return Ok(body.to_vec());
    }
    let mut review: Json = serde_json::from_slice(body).map_err(|e| e.to_string())?;
    review["request"]["object"] = m.object.clone();
    serde_json::to_vec(&review).map_err(|e| e.to_string())
}

/// A mutating policy's result: `error` if an invocation failed, else `pass` if one ran, else
/// `skip`; `None` when the policy is not a mutating one of this run.
pub(crate) fn policy_result(m: &Mutation, policy: &str) -> Option<Expected> {
    result(m.verdict.invocations.iter().filter(|i| i.policy == policy))
}

/// A mutating binding's result, as [`policy_result`].
pub(crate) fn binding_result(m: &Mutation, binding: &str) -> Option<Expected> {
    result(
        m.verdict
            .invocations
            .iter()
            .filter(|i| i.binding == binding),
    )
}

fn result<'a>(
    mut invocations: impl Iterator<Item = &'a crate::admission::mutate::InvocationRecord>,
) -> Option<Expected> {
    let mut worst: Option<Expected> = None;
    for i in invocations.by_ref() {
        let r = match i.outcome {
            "error" | "ignored_error" => Expected::Error,
            "skipped" => Expected::Skip,
            _ => Expected::Pass,
        };
        let rank = |e: Expected| match e {
            Expected::Skip => 0,
            Expected::Pass => 1,
            Expected::Fail => 2,
            Expected::Error => 3,
        };
        if worst.is_none_or(|w| rank(r) > rank(w)) {
            worst = Some(r);
        }
    }
    worst
}

/// Whether `got` has every field of `want` with its value: maps by their keys (others
/// allowed), lists item by item with the same length, scalars equal.
pub(crate) fn contains(got: &Json, want: &Json) -> bool {
    match (got, want) {
        (Json::Object(g), Json::Object(w)) => w
            .iter()
            .all(|(k, v)| g.get(k).is_some_and(|gv| contains(gv, v))),
        (Json::Array(g), Json::Array(w)) => {
            g.len() == w.len() && g.iter().zip(w).all(|(a, b)| contains(a, b))
        }
        (g, w) => g == w,
    }
}

/// The unmet mutation expectations of `expect`.
pub(crate) fn check(expect: &Expect, m: Option<&Mutation>, out: &mut Vec<String>) {
    let wants = expect.object.is_some()
        || expect.object_contains.is_some()
        || expect.patch.is_some()
        || expect.mutated.is_some();
    if !wants {
        return;
    }
    let Some(m) = m else {
        out.push(
            "object/objectContains/patch/mutated: the suite has no MutatingAdmissionPolicy".into(),
        );
        return;
    };
    let mutated = m.verdict.mutated.is_some();
    if let Some(want) = expect.mutated {
        if want != mutated {
            out.push(format!("mutated: expected {want}, got {mutated}"));
        }
    }
    if let Some(want) = &expect.object {
        if *want != m.object {
            out.push(format!("object: expected {want}, got {}", m.object));
        }
    }
    if let Some(want) = &expect.object_contains {
        if !contains(&m.object, want) {
            out.push(format!(
                "objectContains: {want} is not in the mutated object {}",
                m.object
            ));
        }
    }
    if let Some(want) = &expect.patch {
        let got = m.patch.clone().unwrap_or_else(|| json!([]));
        if *want != got {
            out.push(format!("patch: expected {want}, got {got}"));
        }
    }
}

/// The edits that make the mutation expectations of `expect` what was observed (for a case
/// without expectation: `mutated`, and `object` when it changed).
pub(crate) fn observe(expect: Option<&Expect>, m: Option<&Mutation>, out: &mut Vec<Edit>) {
    let Some(m) = m else {
        return;
    };
    let edit = |key, value| Edit {
        key,
        new_key: key,
        value,
    };
    let mutated = m.verdict.mutated.is_some();
    let Some(expect) = expect.filter(|e| !e.is_empty()) else {
        out.push(edit("mutated", json!(mutated)));
        if mutated {
            out.push(edit("object", m.object.clone()));
        }
        return;
    };
    if expect.mutated.is_some() {
        out.push(edit("mutated", json!(mutated)));
    }
    if expect.object.is_some() {
        out.push(edit("object", m.object.clone()));
    }
    if expect.object_contains.is_some() && expect.object.is_none() {
        // What the fields given look like now: the whole object says it best.
        out.push(Edit {
            key: "objectContains",
            new_key: "object",
            value: m.object.clone(),
        });
    }
    if expect.patch.is_some() {
        out.push(edit("patch", m.patch.clone().unwrap_or_else(|| json!([]))));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contains_reads_maps_by_key_and_lists_by_item() {
        let got = json!({"a": 1, "b": {"c": [1, {"d": 2, "e": 3}]}});
        assert!(contains(&got, &json!({"b": {"c": [1, {"d": 2}]}})));
        assert!(!contains(&got, &json!({"b": {"c": [1]}})), "lengths differ");
        assert!(!contains(&got, &json!({"a": 2})));
        assert!(!contains(&got, &json!({"x": null})), "absent is not null");
    }
}
