//! The AdmissionReview codec: decodes a v1/v1beta1 review into the engine's request model
//! ([`crate::admission::Request`]) and encodes the engine's verdict as the review to
//! send back. The server and the CLI use it; the engine (`admission`) never does: data flows
//! review -> admission -> review, and `admission` knows no wire format.

mod decode;
pub mod encode;
pub mod manifest;

use celgate_cel::json::Doc;
use celgate_cel::projection::{Projection, Projections};
use celgate_cel::reads::Reads;
use serde_json::Value as Json;

use crate::admission::{admit, AdmissionVerdict, AdmitContext, AdmitOptions, PolicyResult};
use crate::policy::snapshot::Snapshot;
pub use decode::{request, ReviewError};

/// An answered review: the AdmissionReview to send back, and what was decided (for logs and
/// metrics).
#[derive(Debug)]
pub struct Answer {
    /// The AdmissionReview to send back (the request's apiVersion, its uid, the response),
    /// encoded: the server sends these bytes as they are ([`Answer::review`] reads them).
    pub body: Vec<u8>,
    /// What admission decided.
    pub verdict: AdmissionVerdict,
    /// `request.uid`.
    pub uid: String,
    /// `request.operation`.
    pub operation: String,
    /// What the request was about; filled only when a result failed or errored (for the
    /// result log lines), so that the usual review copies nothing for it.
    pub subject: Option<Subject>,
    /// The object a stored-object admission was about, for policy reports: filled only by
    /// [`answer`] with [`AnswerOptions::trace`] (then with [`AdmissionVerdict::results`] too), for a request
    /// without a subresource and not a dry run.
    pub reported: Option<ObjectRef>,
}

impl Answer {
    /// The AdmissionReview sent back, as JSON (for callers that inspect it; the server sends
    /// [`Answer::body`]).
    pub fn review(&self) -> Json {
        // The body is serde_json's own encoding of the review (see `encode::review_bytes`).
        serde_json::from_slice(&self.body).unwrap_or_default()
    }
}

/// The object a request was about, for log lines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subject {
    /// `resource` or `resource.group`, with `/subresource` when there is one.
    pub resource: String,
    pub namespace: String,
    pub name: String,
}

/// A stored object as policy reports reference it (`celgate scan`'s objects and the
/// cluster's admissions).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ObjectRef {
    pub api_version: String,
    pub kind: String,
    /// Empty for a cluster-scoped object.
    pub namespace: String,
    pub name: String,
    /// Empty when unknown (a manifest never applied).
    pub uid: String,
}

/// How the verdict becomes the answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    /// The verdict's answer: denials, warnings and audit annotations (the in-tree answer).
    #[default]
    Enforce,
    /// Every policy is evaluated as in `Enforce`, but the answer is always `allowed: true`,
    /// without warnings or audit annotations: where the API server enforces the same
    /// policies in-tree, it adds its own; celgate only records the results.
    Observe,
}

/// How [`answer`] answers: the mode of the answer and what it records beyond it. The
/// default is the in-tree answer ([`Mode::Enforce`]), untraced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AnswerOptions {
    /// How the verdict becomes the answer.
    pub mode: Mode,
    /// Also each validation's result ([`AdmissionVerdict::results`]) and the object reported
    /// on ([`Answer::reported`]): for the cluster's policy reports, which cost this extra
    /// work only when written.
    pub trace: bool,
}

/// Parses an AdmissionReview body (JSON) and answers it as `options` says: the whole
/// request path, shared by `celgate eval` and the server. Evaluation stops at the deadline
/// of `context` (then the verdict says `timed_out`).
pub fn answer(
    snapshot: &Snapshot,
    body: &[u8],
    context: &AdmitContext<'_>,
    options: AnswerOptions,
) -> Result<Answer, ReviewError> {
    let (reads, paths) = snapshot.review_projection_paths();
    answer_with(snapshot, body, context, options, reads, paths)
}

/// Not API: [`answer`] with the objects parsed whole, whatever the policies read (the fuzz
/// target compares the two answers).
#[doc(hidden)]
pub fn answer_parsed_whole(
    snapshot: &Snapshot,
    body: &[u8],
    context: &AdmitContext<'_>,
    options: AnswerOptions,
) -> Result<Answer, ReviewError> {
    answer_with(
        snapshot,
        body,
        context,
        options,
        &Reads::whole(),
        &Projections::new(),
    )
}

fn answer_with(
    snapshot: &Snapshot,
    body: &[u8],
    context: &AdmitContext<'_>,
    options: AnswerOptions,
    reads: &Reads,
    paths: &Projections,
) -> Result<Answer, ReviewError> {
    let AnswerOptions { mode, trace } = options;
    // Declared first so that it outlives `req` when a conversion needs the whole objects.
    let whole_doc;
    let doc = parse_review(body, paths)?;
    let mut req = request(&doc)?;
    if !reads.is_whole() && snapshot.converts_objects(&req.attributes) {
        whole_doc = parse_review(body, &Projections::new())?;
        req = request(&whole_doc)?;
    }
    let options = AdmitOptions {
        trace,
        ..AdmitOptions::default()
    };
    let verdict = admit(snapshot, &req, context, options);
    let reported = if trace { reported(&req) } else { None };
    let body = match mode {
        Mode::Enforce => encode::review_bytes(&req, &verdict),
        Mode::Observe => encode::observed_bytes(&req),
    };
    let subject = verdict
        .evaluated
        .iter()
        .any(|e| e.result >= PolicyResult::Fail)
        .then(|| subject(&req));
    Ok(Answer {
        body,
        verdict,
        uid: req.uid.clone(),
        operation: req.attributes.operation.clone(),
        subject,
        reported,
    })
}

/// Parses a review body for validating admission, keeping of `request.object` and
/// `request.oldObject` what `paths` project (everything else of the review is built; empty
/// paths build everything). A skipped container is still checked as JSON, so a body is
/// refused exactly as a full parse refuses it.
fn parse_review<'b>(body: &'b [u8], paths: &Projections) -> Result<Doc<'b>, ReviewError> {
    Doc::parse_projected(body, paths).map_err(ReviewError::MalformedJson)
}

/// Where a review holds its objects (v1 and v1beta1 alike).
const OBJECT_PATH: [&str; 2] = ["request", "object"];
const OLD_OBJECT_PATH: [&str; 2] = ["request", "oldObject"];

impl Snapshot {
    /// What validating admission ([`answer`]) reads of a review's `object` and `oldObject`:
    /// every validating policy's expressions ([`Snapshot::policy_reads`]) and the codec's own
    /// reads ([`own_reads`]); finished, made once per snapshot. The objects of a request whose
    /// matching may convert them ([`Snapshot::converts_objects`]) are read whole.
    pub fn review_projection(&self) -> &Reads {
        self.review_projection_paths().0
    }

    /// [`Snapshot::review_projection`] and the parser's paths for a review made from it.
    fn review_projection_paths(&self) -> (&Reads, &Projections) {
        let (reads, paths) = self.review_projection_cache.get_or_init(|| {
            let mut reads = own_reads();
            reads.union(self.policy_reads());
            reads.finish();
            let paths = reads.at(&OBJECT_PATH, &OLD_OBJECT_PATH);
            (reads, paths)
        });
        (reads, paths)
    }
}

/// What the review codec reads of a request's `object` and `oldObject` beyond the policies'
/// expressions: the decoder's `metadata.name`, `metadata.generateName` and `metadata.labels`
/// (request names and object selectors, [`request`]), and the policy reports' `apiVersion`,
/// `kind`, `metadata.name` and `metadata.uid` ([`Answer::reported`]).
pub fn own_reads() -> Reads {
    let mut object = Projection::none();
    for field in ["apiVersion", "kind"] {
        object.field_mut(field).set_whole();
    }
    let metadata = object.field_mut("metadata");
    for field in ["name", "generateName", "labels", "uid"] {
        metadata.field_mut(field).set_whole();
    }
    Reads {
        old_object: object.clone(),
        object,
        request: false,
    }
}

/// An answered review at `/mutate`: the AdmissionReview to send back (with the JSON patch
/// from the request's object to the mutated one), and what was decided.
#[derive(Debug)]
pub struct MutatingAnswer {
    /// The AdmissionReview to send back.
    pub review: Json,
    /// What mutating admission decided.
    pub verdict: crate::admission::mutate::MutationVerdict,
    /// The JSON patch sent (RFC 6902), when the object changed.
    pub patch: Option<Json>,
    /// `request.uid`.
    pub uid: String,
    /// `request.operation`.
    pub operation: String,
    /// The request's apiVersion (the answer uses the same).
    pub api_version: String,
}

impl MutatingAnswer {
    /// The answer of observe mode: allowed, without the patch (the API server that enforces
    /// the same policies in-tree mutates itself); the verdict is kept for metrics.
    pub fn observed(mut self) -> MutatingAnswer {
        self.review = serde_json::json!({
            "apiVersion": self.api_version,
            "kind": "AdmissionReview",
            "response": {"uid": self.uid, "allowed": true},
        });
        self
    }
}

/// Parses an AdmissionReview body (JSON) and answers it as the in-tree
/// MutatingAdmissionPolicy plugin would: the whole `/mutate` path, shared by
/// `celgate eval --phase mutating` and the server.
pub fn answer_mutating(
    snapshot: &Snapshot,
    body: &[u8],
    context: &AdmitContext<'_>,
) -> Result<MutatingAnswer, ReviewError> {
    answer_mutating_probed(snapshot, body, context, None)
}

/// [`answer_mutating`], telling `probe` about every expression evaluated (for
/// `celgate test --coverage`).
pub fn answer_mutating_probed(
    snapshot: &Snapshot,
    body: &[u8],
    context: &AdmitContext<'_>,
    probe: Option<&dyn crate::admission::probe::Probe>,
) -> Result<MutatingAnswer, ReviewError> {
    let doc = celgate_cel::json::Doc::parse(body).map_err(ReviewError::MalformedJson)?;
    let req = request(&doc)?;
    let verdict = crate::admission::mutate::mutate(snapshot, &req, context, probe);
    let patch = verdict.mutated.as_ref().map(|m| {
        let ops = crate::mutating::patch::diff::diff(&m.before, &m.after);
        crate::mutating::patch::diff::to_json(&ops)
    });
    let review = encode::mutating_review(&req, &verdict, patch.as_ref());
    Ok(MutatingAnswer {
        review,
        verdict,
        patch,
        uid: req.uid.clone(),
        operation: req.attributes.operation.clone(),
        api_version: req.api_version.clone(),
    })
}

/// The stored object `req` is about: the new object, or the old one of a DELETE; `None` for
/// a subresource, a dry run, or a request without an object.
fn reported(req: &crate::admission::request::Request<'_>) -> Option<ObjectRef> {
    let a = &req.attributes;
    let dry_run = req
        .request
        .get("dryRun")
        .is_some_and(|d| matches!(d.item(), celgate_cel::json::Item::Bool(true)));
    if !a.subresource.is_empty() || dry_run {
        return None;
    }
    let object = match a.operation.as_str() {
        "DELETE" => req.old_object,
        _ => req.object,
    }?;
    let text = |r: Option<celgate_cel::json::Ref<'_, '_>>| {
        r.and_then(|r| r.str_chars())
            .map_or(String::new(), |(s, _)| s.to_string())
    };
    let metadata = object.get("metadata");
    let name = match &req.request_name {
        n if !n.is_empty() => n.clone(),
        _ => text(metadata.and_then(|m| m.get("name"))),
    };
    Some(ObjectRef {
        api_version: text(object.get("apiVersion")),
        kind: text(object.get("kind")),
        namespace: a.namespace.clone(),
        name,
        uid: text(metadata.and_then(|m| m.get("uid"))),
    })
}

fn subject(req: &crate::admission::request::Request<'_>) -> Subject {
    let a = &req.attributes;
    let mut resource = a.resource.clone();
    if !a.group.is_empty() {
        resource = format!("{resource}.{}", a.group);
    }
    if !a.subresource.is_empty() {
        resource = format!("{resource}/{}", a.subresource);
    }
    Subject {
        resource,
        namespace: a.namespace.clone(),
        name: req.display_name(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use celgate_cel::reads::show;

    #[test]
    fn the_review_projection_adds_the_codec_reads_to_the_policies() {
        assert!(
            Snapshot::default().review_projection().object.is_whole(),
            "a snapshot not built reads everything"
        );
        let mut b = crate::policy::SnapshotBuilder::new();
        let policy = "metadata: {name: p}
spec:
  matchConstraints: {resourceRules: [{apiGroups: [''], apiVersions: ['*'], operations: ['*'], resources: [pods]}]}
  validations: [{expression: 'object.spec.x == oldObject.spec.y'}]";
        b.add_policy(serde_yaml_ng::from_str(policy).unwrap());
        let binding = "metadata: {name: b}\nspec: {policyName: p, validationActions: [Deny]}";
        b.add_binding(serde_yaml_ng::from_str(binding).unwrap());
        let s = b.build(celgate_cel::NEWEST_MINOR);
        let r = s.review_projection();
        let own = "apiVersion:*,kind:*,metadata:{generateName:*,labels:*,name:*,uid:*}";
        assert_eq!(show(&r.object), format!("{{{own},spec:{{x:*}}}}"));
        assert_eq!(show(&r.old_object), format!("{{{own},spec:{{y:*}}}}"));
    }

    /// `request` is built only for policies that name it, and each of those sees it whole,
    /// whichever policy made the request's view first (policies run by name: `a-*` first).
    #[test]
    fn policies_that_name_request_see_it_and_others_need_not_build_it() {
        let mut b = crate::policy::SnapshotBuilder::new();
        for (name, expression) in [
            ("a-object", "object.spec.x == 1"),
            ("b-request", "request.operation == 'CREATE' && request.name == 'p' && request.userInfo.username == 'a'"),
            ("c-variable", "variables.r.kind.kind == 'Pod'"),
            ("d-condition", "object.spec.x == 1"),
        ] {
            let variables = if name == "c-variable" { "[{name: r, expression: 'request'}]" } else { "[]" };
            let conditions = if name == "d-condition" {
                "[{name: c, expression: \"request.resource.resource == 'pods'\"}]"
            } else {
                "[]"
            };
            let policy = format!("metadata: {{name: {name}}}
spec:
  matchConstraints: {{resourceRules: [{{apiGroups: [''], apiVersions: ['*'], operations: ['*'], resources: [pods]}}]}}
  matchConditions: {conditions}
  variables: {variables}
  validations: [{{expression: \"{expression}\"}}]");
            b.add_policy(serde_yaml_ng::from_str(&policy).unwrap());
            let binding = format!("metadata: {{name: {name}}}\nspec: {{policyName: {name}, validationActions: [Deny]}}");
            b.add_binding(serde_yaml_ng::from_str(&binding).unwrap());
        }
        let s = b.build(celgate_cel::NEWEST_MINOR);
        let reads = |name: &str| {
            s.policies
                .iter()
                .find(|e| e.policy.name == name)
                .map(|e| e.policy.reads.request)
        };
        assert_eq!(reads("a-object"), Some(false));
        for name in ["b-request", "c-variable", "d-condition"] {
            assert_eq!(reads(name), Some(true), "{name}");
        }
        let body = pod_review(r#"{"metadata":{"name":"p"},"spec":{"x":1}}"#);
        let body = String::from_utf8(body)
            .unwrap()
            .replace(r#""operation""#, r#""name":"p","operation""#);
        let a = answer(
            &s,
            body.as_bytes(),
            &AdmitContext::default(),
            AnswerOptions::default(),
        )
        .unwrap();
        assert!(a.verdict.denials.is_empty(), "{:?}", a.verdict.denials);
        assert_eq!(a.verdict.evaluated.len(), 4);
        assert!(a
            .verdict
            .evaluated
            .iter()
            .all(|e| e.result == crate::admission::PolicyResult::Pass));
    }

    /// A snapshot whose one policy reads `object.spec.x` of Pods, denying unless it is 1.
    fn spec_x_snapshot() -> Snapshot {
        let mut b = crate::policy::SnapshotBuilder::new();
        let policy = "metadata: {name: p}
spec:
  matchConstraints: {resourceRules: [{apiGroups: [''], apiVersions: ['*'], operations: ['*'], resources: [pods]}]}
  validations: [{expression: 'object.spec.x == 1'}]";
        b.add_policy(serde_yaml_ng::from_str(policy).unwrap());
        let binding = "metadata: {name: b}\nspec: {policyName: p, validationActions: [Deny]}";
        b.add_binding(serde_yaml_ng::from_str(binding).unwrap());
        b.build(celgate_cel::NEWEST_MINOR)
    }

    fn pod_review(object: &str) -> Vec<u8> {
        format!(
            r#"{{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{{"uid":"u","kind":{{"group":"","version":"v1","kind":"Pod"}},"resource":{{"group":"","version":"v1","resource":"pods"}},"operation":"CREATE","userInfo":{{"username":"a"}},"namespace":"default","object":{object}}}}}"#
        )
        .into_bytes()
    }

    #[test]
    fn the_review_is_parsed_as_the_policies_read_it_and_refused_as_a_whole_parse_refuses_it() {
        let s = spec_x_snapshot();
        let (_, paths) = s.review_projection_paths();
        // What the parse builds: the policy's spec.x, not the parts nobody reads.
        let body = pod_review(
            r#"{"metadata":{"name":"p"},"spec":{"x":1,"y":{"z":[1]}},"status":{"a":{"b":2}}}"#,
        );
        let doc = Doc::parse_projected(&body, paths).unwrap();
        let object = doc
            .root()
            .get("request")
            .and_then(|r| r.get("object"))
            .unwrap();
        assert!(object.get("status").unwrap().is_skipped());
        let spec = object.get("spec").unwrap();
        assert!(spec.get("y").unwrap().is_skipped());
        assert!(!spec.get("x").unwrap().is_skipped());
        let answer =
            |body: &[u8]| answer(&s, body, &AdmitContext::default(), AnswerOptions::default());
        let allowed = |a: &Answer| a.review()["response"]["allowed"].as_bool();
        assert_eq!(allowed(&answer(&body).unwrap()), Some(true));
        let denied = pod_review(r#"{"metadata":{"name":"p"},"spec":{"x":2},"status":{"a":{}}}"#);
        assert_eq!(allowed(&answer(&denied).unwrap()), Some(false));
        // What a whole parse refuses inside a part nobody reads is refused all the same, with
        // the whole parse's message.
        for object in [
            r#"{"spec":{"x":1},"status":{"a":1,"a":2}}"#,
            r#"{"spec":{"x":1},"status":{"a":[1,]}}"#,
            r#"{"spec":{"x":1},"status":{"a":"\ud800"}}"#,
        ] {
            let body = pod_review(object);
            let whole = Doc::parse(&body).map(|_| ()).unwrap_err().to_string();
            match answer(&body) {
                Err(ReviewError::MalformedJson(e)) => assert_eq!(e.to_string(), whole, "{object}"),
                other => panic!("{object}: {:?}", other.map(|a| a.review())),
            }
        }
    }
}
