//! Admission: evaluates a request against a snapshot and decides, as the in-tree
//! ValidatingAdmissionPolicy plugin does (§1): every matching policy × binding × param is
//! evaluated; decisions are routed by the binding's validationActions; configuration errors
//! follow the failurePolicy; the first denial is reported.
//!
//! Policies are visited by name and bindings by name (in-tree order is arbitrary).
//!
//! One file per question: `context` (what an evaluation may wait on: services and limits),
//! `params` (which params a binding evaluates with), `activation` (the values each expression
//! group sees), [`validator`] (one policy × binding × param), `routing` (where each decision
//! goes: validationActions, failurePolicy, check metrics) and `verdict` (what was decided).
//! The request model is [`Request`]; reading it from an AdmissionReview is
//! [`crate::review`]'s job, never this module's.

mod activation;
pub mod bare;
mod context;
mod convert;
mod error;
pub mod mutate;
mod params;
pub mod probe;
mod rbac;
pub(crate) mod request;
mod routing;
pub mod validator;
mod verdict;
mod versioned;

use std::sync::Arc;
use std::time::Instant;

use crate::matching::{is_exempt, Match, Matched};
use crate::policy::snapshot::Snapshot;
use activation::{bind, namespace_object, Authz, RequestNamespaces};
use celgate_cel::k8s::authz::AuthorizerValue;
pub use context::{AdmitContext, Deadline, EvalLimits, NamespaceLookup, Services};
pub use convert::ConvertError;
pub use error::ConfigError;
use params::{binding_params, param_kind_error};
use rbac::RbacAuthorizer;
pub use request::{Request, UserInfo};
use routing::{configuration_error, route};
use validator::{validate, AuditResult, Outcome};
use verdict::collect;
pub use verdict::{
    AdmissionVerdict, AuditedFailure, BindingOutcome, BindingResult, CheckMetric, Denial,
    Evaluated, PolicyResult, ValidationResult,
};
use versioned::{Versions, View};

/// The operations VAP handles.
fn handled(operation: &str) -> bool {
    matches!(operation, "CREATE" | "UPDATE" | "DELETE" | "CONNECT")
}

/// How [`admit`] runs: what it records beyond the decision. The default records nothing
/// more (the webhook's path); each field names what a caller wants:
///
/// ```
/// # use celgate_engine::admission::AdmitOptions;
/// let traced = AdmitOptions { trace: true, ..AdmitOptions::default() };
/// assert!(traced.probe.is_none());
/// ```
#[derive(Clone, Copy, Default)]
pub struct AdmitOptions<'a> {
    /// Also record [`AdmissionVerdict::results`]: each binding's and validation's result
    /// (for `celgate test`, scans and policy reports).
    pub trace: bool,
    /// Told about every expression evaluated (for `celgate test --coverage`); `None` costs
    /// one untaken branch per expression.
    pub probe: Option<&'a dyn probe::Probe>,
}

impl std::fmt::Debug for AdmitOptions<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AdmitOptions")
            .field("trace", &self.trace)
            .field("probe", &self.probe.map(|_| "..."))
            .finish()
    }
}

/// Evaluates `req` against every policy of `snapshot`, calling the services of `context`
/// and within its limits, recording what `options` asks for.
pub fn admit(
    snapshot: &Snapshot,
    req: &Request<'_>,
    context: &AdmitContext<'_>,
    options: AdmitOptions<'_>,
) -> AdmissionVerdict {
    let AdmitOptions { trace, probe } = options;
    let services = context.services;
    let deadline = Deadline::new(&context.limits);
    let mut verdict = AdmissionVerdict::default();
    let attrs = &req.attributes;
    if !handled(&attrs.operation) || is_exempt(&attrs.group, &attrs.resource) {
        return verdict;
    }
    let namespaces = RequestNamespaces::new(snapshot, services, req);
    let namespace_object = namespace_object(&namespaces, req);
    // Made when a binding is first evaluated: a request no policy matches costs none of it.
    let mut authz: Option<Authz> = None;
    let new_authz = || {
        let backend: Arc<dyn celgate_cel::k8s::authz::Authorizer> = match &services.authorizer {
            Some(factory) => factory.for_user(&req.user),
            None => Arc::new(RbacAuthorizer::new(snapshot.rbac.clone(), req.user.clone())),
        };
        let authz = AuthorizerValue::new(backend);
        let preset = authz.request_resource(req.resource_attributes());
        Authz::new(authz, preset)
    };
    // The served resources equivalent to the request's (one registry lookup per request).
    let equivalents =
        snapshot
            .registry
            .equivalents(&attrs.group, &attrs.resource, &attrs.subresource);
    // The request's own view, built when a policy first matches (the request value is a
    // small map of its own, see `versioned::in_tree_request`).
    let mut own_view: Option<View<'_>> = None;
    // Converted views, built only when a policy matched through an equivalent resource.
    let mut versions = Versions::default();
    let candidates = snapshot
        .index
        .candidates_with(&attrs.group, &attrs.resource, equivalents);
    'policies: for index in candidates {
        let entry = &snapshot.policies[index];
        let policy = &entry.policy;
        let mut matched = Matched::Own;
        let config_error = match &policy.matcher {
            Err(guard) => Some(ConfigError::from(*guard)),
            Ok(m) => match m.matches_resource(attrs, &namespaces, equivalents) {
                (Match::No, _) => continue,
                (Match::Yes, how) => {
                    matched = how;
                    policy
                        .invalid
                        .clone()
                        .map(ConfigError::Invalid)
                        .or_else(|| param_kind_error(snapshot, policy))
                }
                (Match::Error(e), _) => Some(e.into()),
            },
        };
        if let Some(e) = config_error {
            verdict.record(trace, &policy.name, None, BindingOutcome::Error);
            // The policy cannot be evaluated for any of its bindings.
            verdict
                .evaluated
                .extend((0..entry.bindings.len()).map(|b| Evaluated {
                    policy: index,
                    binding: b,
                    result: PolicyResult::Error,
                }));
            configuration_error(
                &mut verdict,
                policy,
                None,
                &format!("failed to configure policy: {e}"),
            );
            continue;
        }
        let mut collector: Vec<(String, Vec<String>)> = Vec::new();
        for (binding_index, binding) in entry.bindings.iter().enumerate() {
            let evaluated = |result| Evaluated {
                policy: index,
                binding: binding_index,
                result,
            };
            let params =
                match binding_params(snapshot, &namespaces, policy, binding, req, equivalents) {
                    Ok(Some(p)) => p,
                    Ok(None) => continue,
                    Err(e) => {
                        let b = Some(binding.name.as_str());
                        verdict.record(trace, &policy.name, b, BindingOutcome::Error);
                        verdict.evaluated.push(evaluated(PolicyResult::Error));
                        let message = format!("failed to configure binding: {e}");
                        configuration_error(&mut verdict, policy, Some(&binding.name), &message);
                        continue;
                    }
                };
            if params.is_empty() {
                // No param object, and parameterNotFoundAction Allow: nothing to evaluate.
                verdict.evaluated.push(evaluated(PolicyResult::Skip));
                continue;
            }
            // In-tree converts once a binding has params to evaluate; a failure is the
            // binding's configuration error (each binding that gets here reports it).
            let view = match matched {
                Matched::Own => {
                    let view = own_view.get_or_insert_with(|| View::own_objects(req));
                    if policy.reads.request {
                        view.build_request(req);
                    }
                    view.clone()
                }
                other => match versions.view(req, other, equivalents) {
                    Ok(v) => v,
                    Err(e) => {
                        let b = Some(binding.name.as_str());
                        verdict.record(trace, &policy.name, b, BindingOutcome::Error);
                        verdict.evaluated.push(evaluated(PolicyResult::Error));
                        let e = ConfigError::Conversion(e);
                        let message = format!("failed to configure binding: {e}");
                        configuration_error(&mut verdict, policy, Some(&binding.name), &message);
                        continue;
                    }
                },
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
                    &view,
                    &namespace_object,
                    param.as_deref(),
                    authz.get_or_insert_with(new_authz),
                );
                let (result, condition_errors) = validate(policy, &bindings, &deadline, probe);
                let elapsed = started.elapsed();
                verdict.timed_out |= deadline.passed();
                let Some(result) = result else {
                    // Excluded by the matchConditions, or their error ignored (failurePolicy
                    // Ignore).
                    verdict.evaluated.push(evaluated(if condition_errors > 0 {
                        PolicyResult::Error
                    } else {
                        PolicyResult::Skip
                    }));
                    if condition_errors > 0 {
                        let b = Some(binding.name.as_str());
                        verdict.record(trace, &policy.name, b, BindingOutcome::Error);
                        verdict.checks.push(CheckMetric::new(
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
                let errored = result
                    .decisions
                    .iter()
                    .any(|d| matches!(d.evaluation, Outcome::Error(_)))
                    || result
                        .audit
                        .iter()
                        .any(|a| matches!(a, AuditResult::Error(_)));
                let failed = result
                    .decisions
                    .iter()
                    .any(|d| d.evaluation == Outcome::Deny);
                let (outcome, policy_result) = match (errored, failed) {
                    (true, _) => (BindingOutcome::Error, PolicyResult::Error),
                    (false, true) => (BindingOutcome::Fail, PolicyResult::Fail),
                    (false, false) => (BindingOutcome::Pass, PolicyResult::Pass),
                };
                verdict.evaluated.push(evaluated(policy_result));
                if trace {
                    let b = Some(binding.name.as_str());
                    verdict.record(trace, &policy.name, b, outcome);
                    verdict.record_validations(
                        &policy.name,
                        &binding.name,
                        validation_results(policy, &result),
                    );
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
                            verdict.checks.push(CheckMetric::new(
                                policy,
                                binding,
                                e.kind.label(),
                                "deny",
                                elapsed,
                                0,
                            ));
                            verdict.deny(&policy.name, Some(&binding.name), &e.message, None);
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

/// Each validation's result for one param (when tracing): by index when there is a decision
/// per validation, else (the cost budget or a failed audit annotation replaced them) one
/// error for the whole policy; and each audit annotation's error.
fn validation_results<'a>(
    policy: &'a crate::policy::compile::CompiledPolicy,
    result: &'a validator::ParamResult,
) -> impl Iterator<Item = ValidationResult> + 'a {
    let per_validation = result.decisions.len() == policy.validations.len();
    let decisions = result.decisions.iter().enumerate().map(move |(i, d)| {
        let (result, reason) = match d.evaluation {
            Outcome::Admit => (PolicyResult::Pass, None),
            Outcome::Deny => (PolicyResult::Fail, d.reason.clone()),
            Outcome::Error(_) => (PolicyResult::Error, None),
        };
        ValidationResult {
            index: per_validation.then_some(i),
            result,
            message: d.message.clone(),
            reason,
        }
    });
    let audit = result.audit.iter().filter_map(|a| match a {
        AuditResult::Error(e) => Some(ValidationResult {
            index: None,
            result: PolicyResult::Error,
            message: e.message.clone(),
            reason: None,
        }),
        AuditResult::Publish(..) => None,
    });
    decisions.chain(audit)
}
