//! Admission: evaluates a request against a snapshot and decides, as the in-tree
//! ValidatingAdmissionPolicy plugin does (§1): every matching policy × binding × param is
//! evaluated; decisions are routed by the binding's validationActions; configuration errors
//! follow the failurePolicy; the first denial is reported.
//!
//! Policies are visited by name and bindings by name (in-tree order is arbitrary).

pub mod context;
pub mod rbac;
pub mod request;
pub mod validator;

use std::sync::Arc;
use std::time::Instant;

use serde_json::Value as Json;

use crate::cel::k8s::authz::AuthorizerValue;
use crate::cel::vap::Slots;
use crate::cel::{CancelReason, Value};
use crate::matching::{is_exempt, Match};
use crate::policy::compile::{CompiledPolicy, FailurePolicy};
use crate::policy::snapshot::{
    group_of, namespace_view, Action, CompiledBinding, NamespaceEntry, ParamObject, Scope, Snapshot,
};
pub use context::{AdmitContext, Deadline, EvalLimits, NamespaceLookup, Services};
use rbac::RbacAuthorizer;
use request::Request;
use validator::{validate, AuditResult, Bindings, Outcome};

/// One failure routed to Audit (the `validation_failure` record).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AuditedFailure {
    pub message: String,
    pub policy: String,
    pub binding: String,
    pub expression_index: usize,
    pub validation_actions: Vec<String>,
}

/// A denial, with the decision's reason (`None` for errors and configuration errors).
#[derive(Debug, Clone, PartialEq)]
pub struct Denial {
    pub policy: String,
    /// `None` for a policy-level configuration error.
    pub binding: Option<String>,
    /// `ValidatingAdmissionPolicy '<p>' [with binding '<b>'] denied request: <message>`.
    pub message: String,
    pub reason: Option<String>,
}

/// One metric record of the in-tree `..._check_total` kind (§8.1): a decision routed to an
/// enforcement action, or an ignored error (`allow`). Configuration errors are not counted.
#[derive(Debug, Clone, PartialEq)]
pub struct Check {
    pub policy: String,
    pub binding: String,
    /// `no_error`, `compile_error`, `out_of_budget` or `invalid_error` (in-tree), or our own
    /// `deadline_exceeded` or `memory_limit` (see [`error_type`]).
    pub error_type: &'static str,
    /// `deny`, `warn`, `audit` or `allow`.
    pub action: &'static str,
    /// How long the (policy, binding, param) evaluation took.
    pub elapsed: std::time::Duration,
    /// Match conditions that errored in that evaluation.
    pub match_condition_errors: u64,
}

/// What admission decided for a request.
#[derive(Debug, Default, PartialEq)]
pub struct Verdict {
    pub denials: Vec<Denial>,
    pub warnings: Vec<String>,
    /// Per policy, its audit annotations: key to distinct values in order.
    pub annotations: Vec<(String, String, Vec<String>)>,
    pub audited: Vec<AuditedFailure>,
    /// Metric records.
    pub checks: Vec<Check>,
    /// The deadline passed before every evaluation was done: the verdict is incomplete and
    /// must not be sent (the server answers 504).
    pub timed_out: bool,
    /// Per evaluated (policy, binding), its result; filled by [`admit_traced`] only (for
    /// `celgate test`), so that serving allocates nothing for it. A binding not listed did
    /// not match.
    pub results: Vec<BindingResult>,
}

/// What one (policy, binding) evaluation came to, over all its params.
#[derive(Debug, Clone, PartialEq)]
pub struct BindingResult {
    pub policy: String,
    /// `None` for a policy-level configuration error (it applies to every binding).
    pub binding: Option<String>,
    pub outcome: BindingOutcome,
}

/// Ordered from best to worst: a binding's result is the worst of its params'.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum BindingOutcome {
    Pass,
    Fail,
    Error,
}

impl Verdict {
    pub fn allowed(&self) -> bool {
        self.denials.is_empty()
    }

    fn deny(&mut self, policy: &str, binding: Option<&str>, message: &str, reason: Option<String>) {
        let message = match binding {
            Some(b) => format!(
                "ValidatingAdmissionPolicy '{policy}' with binding '{b}' denied request: {message}"
            ),
            None => format!("ValidatingAdmissionPolicy '{policy}' denied request: {message}"),
        };
        self.denials.push(Denial {
            policy: policy.to_string(),
            binding: binding.map(str::to_string),
            message,
            reason,
        });
    }

    fn warn(&mut self, text: String) {
        if !self.warnings.contains(&text) {
            self.warnings.push(text);
        }
    }
}

/// The operations VAP handles.
fn handled(operation: &str) -> bool {
    matches!(operation, "CREATE" | "UPDATE" | "DELETE" | "CONNECT")
}

/// Evaluates `req` against every policy of `snapshot`, calling the services of `context`
/// and within its limits.
pub fn admit(snapshot: &Snapshot, req: &Request<'_>, context: &AdmitContext<'_>) -> Verdict {
    admit_with(snapshot, req, context, false)
}

/// [`admit`], also recording [`Verdict::results`].
pub fn admit_traced(snapshot: &Snapshot, req: &Request<'_>, context: &AdmitContext<'_>) -> Verdict {
    admit_with(snapshot, req, context, true)
}

fn record(
    verdict: &mut Verdict,
    trace: bool,
    policy: &str,
    binding: Option<&str>,
    outcome: BindingOutcome,
) {
    if !trace {
        return;
    }
    let found = verdict
        .results
        .iter_mut()
        .find(|r| r.policy == policy && r.binding.as_deref() == binding);
    match found {
        Some(r) => r.outcome = r.outcome.max(outcome),
        None => verdict.results.push(BindingResult {
            policy: policy.to_string(),
            binding: binding.map(str::to_string),
            outcome,
        }),
    }
}

fn admit_with(
    snapshot: &Snapshot,
    req: &Request<'_>,
    context: &AdmitContext<'_>,
    trace: bool,
) -> Verdict {
    let services = context.services;
    let deadline = Deadline::new(&context.limits);
    let mut verdict = Verdict::default();
    let attrs = &req.attributes;
    if !handled(&attrs.operation) || is_exempt(&attrs.group, &attrs.resource) {
        return verdict;
    }
    let namespaces = RequestNamespaces::new(snapshot, services, req);
    let namespace_object = namespace_object(&namespaces, req);
    let backend: Arc<dyn crate::cel::k8s::authz::Authorizer> = match &services.authorizer {
        Some(factory) => factory.for_user(&req.user),
        None => Arc::new(RbacAuthorizer::new(snapshot.rbac.clone(), req.user.clone())),
    };
    let authz = AuthorizerValue::new(backend);
    let preset = authz.request_resource(req.resource_attributes());
    'policies: for index in snapshot.index.candidates(&attrs.group, &attrs.resource) {
        let entry = &snapshot.policies[index];
        let policy = &entry.policy;
        let config_error = match &policy.matcher {
            Err(guard) => Some(guard.clone()),
            Ok(m) => match m.matches(attrs, &namespaces) {
                Match::No => continue,
                Match::Yes => policy
                    .invalid
                    .clone()
                    .or_else(|| param_kind_error(snapshot, policy)),
                Match::Error(e) => Some(e),
            },
        };
        if let Some(e) = config_error {
            record(
                &mut verdict,
                trace,
                &policy.name,
                None,
                BindingOutcome::Error,
            );
            configuration_error(
                &mut verdict,
                policy,
                None,
                &format!("failed to configure policy: {e}"),
            );
            continue;
        }
        let mut collector: Vec<(String, Vec<String>)> = Vec::new();
        for binding in &entry.bindings {
            let params = match binding_params(snapshot, &namespaces, policy, binding, req) {
                Ok(Some(p)) => p,
                Ok(None) => continue,
                Err(e) => {
                    let b = Some(binding.name.as_str());
                    record(&mut verdict, trace, &policy.name, b, BindingOutcome::Error);
                    let message = format!("failed to configure binding: {e}");
                    configuration_error(&mut verdict, policy, Some(&binding.name), &message);
                    continue;
                }
            };
            for param in params {
                let started = Instant::now();
                // The clock is read here anyway (for the check metrics): past the deadline,
                // stop rather than start another evaluation.
                if deadline.reached(started) {
                    verdict.timed_out = true;
                    break 'policies;
                }
                let bindings = bind(
                    policy,
                    req,
                    &namespace_object,
                    param.as_deref(),
                    &authz,
                    &preset,
                );
                let (result, condition_errors) = validate(policy, &bindings, &deadline);
                let elapsed = started.elapsed();
                verdict.timed_out |= deadline.passed();
                let Some(result) = result else {
                    if condition_errors > 0 {
                        let b = Some(binding.name.as_str());
                        record(&mut verdict, trace, &policy.name, b, BindingOutcome::Error);
                        verdict.checks.push(check(
                            policy,
                            binding,
                            "invalid_error",
                            "allow",
                            elapsed,
                            condition_errors,
                        ));
                    }
                    continue;
                };
                if trace {
                    let errored = result
                        .decisions
                        .iter()
                        .any(|d| d.evaluation == Outcome::Error)
                        || result
                            .audit
                            .iter()
                            .any(|a| matches!(a, AuditResult::Error(_)));
                    let failed = result
                        .decisions
                        .iter()
                        .any(|d| d.evaluation == Outcome::Deny);
                    let outcome = match (errored, failed) {
                        (true, _) => BindingOutcome::Error,
                        (false, true) => BindingOutcome::Fail,
                        (false, false) => BindingOutcome::Pass,
                    };
                    let b = Some(binding.name.as_str());
                    record(&mut verdict, trace, &policy.name, b, outcome);
                }
                route(
                    &mut verdict,
                    policy,
                    binding,
                    &result.decisions,
                    elapsed,
                    condition_errors,
                );
                for a in result.audit {
                    match a {
                        AuditResult::Publish(key, value) => collect(&mut collector, key, value),
                        AuditResult::Error(e) => {
                            verdict.checks.push(check(
                                policy,
                                binding,
                                error_type(&e),
                                "deny",
                                elapsed,
                                0,
                            ));
                            verdict.deny(&policy.name, Some(&binding.name), &e, None);
                        }
                    }
                }
            }
        }
        for (key, values) in collector {
            verdict.annotations.push((policy.name.clone(), key, values));
        }
        if verdict.timed_out {
            break;
        }
    }
    verdict
}

/// Audit annotation values: truncated to 10,240 bytes, duplicates dropped, in order.
fn collect(collector: &mut Vec<(String, Vec<String>)>, key: String, mut value: String) {
    const MAX: usize = 10_240;
    if value.len() > MAX {
        let mut cut = MAX;
        while !value.is_char_boundary(cut) {
            cut -= 1;
        }
        value.truncate(cut);
    }
    match collector.iter_mut().find(|(k, _)| *k == key) {
        Some((_, values)) => {
            if !values.contains(&value) {
                values.push(value);
            }
        }
        None => collector.push((key, vec![value])),
    }
}

fn configuration_error(
    verdict: &mut Verdict,
    policy: &CompiledPolicy,
    binding: Option<&str>,
    message: &str,
) {
    match &policy.failure_policy {
        FailurePolicy::Ignore => {}
        FailurePolicy::Fail => verdict.deny(&policy.name, binding, message, None),
        FailurePolicy::Unrecognized(v) => verdict.deny(
            &policy.name,
            binding,
            &format!("unrecognized failure policy: '{v}'"),
            None,
        ),
    }
}

fn check(
    policy: &CompiledPolicy,
    binding: &CompiledBinding,
    error_type: &'static str,
    action: &'static str,
    elapsed: std::time::Duration,
    match_condition_errors: u64,
) -> Check {
    Check {
        policy: policy.name.clone(),
        binding: binding.name.clone(),
        error_type,
        action,
        elapsed,
        match_condition_errors,
    }
}

/// The `error_type` label of an error decision's message (§8.1): the in-tree values, except
/// that an evaluation stopped for a limit is not an ordinary `invalid_error` (in-tree it is):
/// the per-expression cost limit is `out_of_budget`, as the in-tree label of the group budget
/// (both say the policy costs too much for this request), and two labels of our own say
/// `deadline_exceeded` (the request's `?timeout=` passed) and `memory_limit`.
///
/// By message for now: a stop is the last part of an expression's error. An error text that
/// quotes input (a missing key named like a stop) can mislabel its own check, but only among
/// these fixed values.
fn error_type(message: &str) -> &'static str {
    if message.starts_with("compilation") {
        "compile_error"
    } else if message.starts_with(validator::OUT_OF_BUDGET)
        || message.contains(CancelReason::CostLimit.message())
    {
        "out_of_budget"
    } else if message.contains(CancelReason::Deadline.message()) {
        "deadline_exceeded"
    } else if message.contains(CancelReason::MemoryLimit.message()) {
        "memory_limit"
    } else {
        "invalid_error"
    }
}

/// Routes a param's decisions through the binding's validationActions (§4.8), recording the
/// in-tree check metrics on the way.
fn route(
    verdict: &mut Verdict,
    policy: &CompiledPolicy,
    binding: &CompiledBinding,
    decisions: &[validator::Decision],
    elapsed: std::time::Duration,
    condition_errors: u64,
) {
    let mut condition_errors = condition_errors;
    for (index, d) in decisions.iter().enumerate() {
        if d.action != validator::Action::Deny {
            if d.evaluation == Outcome::Error {
                let c = check(
                    policy,
                    binding,
                    error_type(&d.message),
                    "allow",
                    elapsed,
                    std::mem::take(&mut condition_errors),
                );
                verdict.checks.push(c);
            }
            continue;
        }
        let kind = if d.evaluation == Outcome::Deny {
            "invalid_error"
        } else {
            error_type(&d.message)
        };
        for action in &binding.actions {
            let name = match action {
                Action::Deny => "deny",
                Action::Warn => "warn",
                Action::Audit => "audit",
            };
            verdict.checks.push(check(
                policy,
                binding,
                kind,
                name,
                elapsed,
                std::mem::take(&mut condition_errors),
            ));
            match action {
                Action::Deny => {
                    let reason = if d.evaluation == Outcome::Deny {
                        d.reason.clone()
                    } else {
                        None
                    };
                    verdict.deny(&policy.name, Some(&binding.name), &d.message, reason);
                }
                Action::Warn => verdict.warn(format!(
                    "Validation failed for ValidatingAdmissionPolicy '{}' with binding '{}': {}",
                    policy.name, binding.name, d.message
                )),
                Action::Audit => verdict.audited.push(AuditedFailure {
                    message: d.message.clone(),
                    policy: policy.name.clone(),
                    binding: binding.name.clone(),
                    expression_index: index,
                    validation_actions: binding.action_names.clone(),
                }),
            }
        }
    }
}

/// `failed to find resource referenced by paramKind` when nothing is known of the kind.
fn param_kind_error(snapshot: &Snapshot, policy: &CompiledPolicy) -> Option<String> {
    let pk = policy.param_kind.as_ref()?;
    let group = group_of(&pk.api_version);
    if snapshot
        .kinds
        .contains_key(&(group.to_string(), pk.kind.clone()))
    {
        return None;
    }
    let version = pk.api_version.rsplit('/').next().unwrap_or("");
    Some(format!(
        "failed to find resource referenced by paramKind: '{group}/{version}, Kind={}'",
        pk.kind
    ))
}

/// The params a binding evaluates its policy with; `None` when the binding does not match the
/// request; an error for a binding configuration error (§2.7, §3.3, §7).
fn binding_params(
    snapshot: &Snapshot,
    namespaces: &RequestNamespaces<'_>,
    policy: &CompiledPolicy,
    binding: &CompiledBinding,
    req: &Request<'_>,
) -> Result<Option<Vec<Option<Arc<Json>>>>, String> {
    if let Some(m) = &binding.matcher {
        match m.matches(&req.attributes, namespaces) {
            Match::No => return Ok(None),
            Match::Yes => {}
            Match::Error(e) => return Err(e),
        }
    }
    if let Some(e) = &binding.invalid {
        return Err(e.clone());
    }
    collect_params(snapshot, policy, binding, req).map(Some)
}

/// The params to evaluate with (§3.2, §3.3): `[None]` for a null param.
fn collect_params(
    snapshot: &Snapshot,
    policy: &CompiledPolicy,
    binding: &CompiledBinding,
    req: &Request<'_>,
) -> Result<Vec<Option<Arc<Json>>>, String> {
    let (Some(pk), Some(pr)) = (&policy.param_kind, &binding.param_ref) else {
        return Ok(vec![None]);
    };
    let key = (group_of(&pk.api_version).to_string(), pk.kind.clone());
    let scope = snapshot
        .kinds
        .get(&key)
        .copied()
        .unwrap_or(Scope::Namespaced);
    let namespace = match scope {
        Scope::Namespaced => {
            let ns = pr
                .namespace
                .clone()
                .filter(|n| !n.is_empty())
                .unwrap_or_else(|| req.attributes.namespace.clone());
            if ns.is_empty() {
                return Err("cannot use namespaced paramRef in policy binding that matches cluster-scoped resources".into());
            }
            Some(ns)
        }
        Scope::Cluster => None,
    };
    if snapshot.unsynced_params.contains(&key) {
        return Err(format!(
            "paramKind kind `&ParamKind{{APIVersion:{},Kind:{},}}` not yet synced to use for admission",
            pk.api_version, pk.kind
        ));
    }
    if scope == Scope::Cluster && pr.namespace.as_deref().is_some_and(|n| !n.is_empty()) {
        return Err(
            "paramRef.namespace must not be provided for a cluster-scoped `paramKind`".into(),
        );
    }
    let candidates: Vec<&ParamObject> = snapshot
        .params
        .get(&key)
        .map(|v| {
            v.iter()
                .filter(|o| namespace.as_ref().is_none_or(|ns| o.namespace == *ns))
                .collect()
        })
        .unwrap_or_default();
    let found: Vec<Option<Arc<Json>>> = match (&pr.name, &pr.selector) {
        (Some(_), Some(_)) => {
            return Err("paramRef.name and paramRef.selector are mutually exclusive".into())
        }
        (Some(name), None) => candidates
            .iter()
            .filter(|o| o.name == *name)
            .map(|o| Some(o.object.clone()))
            .collect(),
        (None, Some(sel)) => {
            let sel = crate::matching::selector::Selector::compile(sel)?;
            candidates
                .iter()
                .filter(|o| sel.matches(&o.labels))
                .map(|o| Some(o.object.clone()))
                .collect()
        }
        (None, None) => return Err("one of name or selector must be provided".into()),
    };
    if found.is_empty() && pr.parameter_not_found_action.as_deref() == Some("Deny") {
        return Err(
            "no params found for policy binding with `Deny` parameterNotFoundAction".into(),
        );
    }
    Ok(found)
}

/// The snapshot's namespaces, plus the request's own namespace read from the cluster when the
/// snapshot does not have it yet.
struct RequestNamespaces<'s> {
    snapshot: &'s Snapshot,
    fetched: Option<NamespaceEntry>,
}

impl<'s> RequestNamespaces<'s> {
    fn new(snapshot: &'s Snapshot, services: &Services, req: &Request<'_>) -> Self {
        let ns = &req.attributes.namespace;
        let fetched = match &services.namespace_lookup {
            Some(lookup) if !ns.is_empty() && !snapshot.namespaces.contains_key(ns) => {
                lookup.get(ns).map(|o| NamespaceEntry::new(Arc::new(o)))
            }
            _ => None,
        };
        RequestNamespaces { snapshot, fetched }
    }

    fn get(&self, name: &str) -> Option<&NamespaceEntry> {
        self.snapshot.namespaces.get(name).or_else(|| {
            self.fetched
                .as_ref()
                .filter(|e| e.object["metadata"]["name"] == name)
        })
    }
}

impl crate::matching::Namespaces for RequestNamespaces<'_> {
    fn labels(&self, name: &str) -> Option<&std::collections::BTreeMap<String, String>> {
        self.get(name).map(|e| &e.labels)
    }
}

/// `namespaceObject`: the request's namespace with the fields Kubernetes copies, or null for
/// cluster-scoped requests and for Namespace requests themselves. A namespace missing from the
/// snapshot (an offline folder without its Namespace object) is taken as a bare namespace
/// with its `kubernetes.io/metadata.name` label, rather than failing every request in it.
fn namespace_object(namespaces: &RequestNamespaces<'_>, req: &Request<'_>) -> Option<Arc<Json>> {
    let is_namespace_kind = req.kind == "Namespace" && req.attributes.group.is_empty();
    let ns = &req.attributes.namespace;
    if ns.is_empty() || is_namespace_kind {
        return None;
    }
    Some(namespaces.get(ns).map(|n| n.view.clone()).unwrap_or_else(|| {
        Arc::new(namespace_view(&serde_json::json!({"metadata": {"name": ns, "labels": {"kubernetes.io/metadata.name": ns}}})))
    }))
}

fn fill<'a>(
    slots: Slots,
    len: usize,
    req: &Request<'a>,
    ns: Value<'a>,
    params: Value<'a>,
    authz: Option<(Value<'a>, Value<'a>)>,
) -> Vec<Value<'a>> {
    let mut v = vec![Value::Null; len];
    v[slots.object] = req.object.map_or(Value::Null, Value::from_doc);
    v[slots.old_object] = req.old_object.map_or(Value::Null, Value::from_doc);
    v[slots.request] = Value::from_doc(req.request);
    v[slots.namespace_object] = ns;
    if let Some(p) = slots.params {
        v[p] = params;
    }
    if let (Some(a), Some(r), Some((av, rv))) = (slots.authorizer, slots.request_resource, authz) {
        v[a] = av;
        v[r] = rv;
    }
    v
}

/// The values of each expression group for one param.
fn bind<'a>(
    policy: &CompiledPolicy,
    req: &Request<'a>,
    namespace_object: &'a Option<Arc<Json>>,
    param: Option<&'a Json>,
    authz: &AuthorizerValue,
    preset: &crate::cel::k8s::authz::ResourceCheck,
) -> Bindings<'a> {
    let s = &policy.slots;
    let ns = namespace_object
        .as_deref()
        .map_or(Value::Null, Value::from_json);
    let params = param.map_or(Value::Null, Value::from_json);
    let authorizer = || Some((Value::opaque(authz.clone()), Value::opaque(preset.clone())));
    let condition_len = s.condition.request_resource.map_or(0, |r| r + 1);
    let validation_len = s.validation_variables + 1;
    Bindings {
        condition: fill(
            s.condition,
            condition_len,
            req,
            Value::Null,
            params.clone(),
            authorizer(),
        ),
        validation: fill(
            s.validation,
            validation_len,
            req,
            ns.clone(),
            params.clone(),
            authorizer(),
        ),
        message: fill(
            s.message,
            s.message_variables + 1,
            req,
            ns.clone(),
            params.clone(),
            None,
        ),
        audit: fill(s.validation, validation_len, req, ns, params, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limit_stops_are_not_ordinary_errors() {
        let expr = |e: &str| format!("expression 'x.all(a, true)' resulted in error: {e}");
        assert_eq!(
            error_type("compilation error: undeclared reference"),
            "compile_error"
        );
        assert_eq!(error_type(validator::OUT_OF_BUDGET), "out_of_budget");
        assert_eq!(
            error_type(&expr("operation cancelled: actual cost limit exceeded")),
            "out_of_budget"
        );
        assert_eq!(
            error_type(&expr(CancelReason::Deadline.message())),
            "deadline_exceeded"
        );
        assert_eq!(
            error_type(&expr(
                "composited variable \"v\" fails to evaluate: operation interrupted"
            )),
            "deadline_exceeded"
        );
        assert_eq!(
            error_type(&expr("operation cancelled: memory limit exceeded")),
            "memory_limit"
        );
        assert_eq!(error_type(&expr("no such key: a")), "invalid_error");
        // As in-tree: a messageExpression that ran out of budget is an ordinary error.
        assert_eq!(
            error_type(&format!(
                "failed messageExpression: {}",
                validator::OUT_OF_BUDGET
            )),
            "invalid_error"
        );
    }
}
