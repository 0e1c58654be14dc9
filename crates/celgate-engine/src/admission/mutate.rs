//! Mutating admission: runs the snapshot's MutatingAdmissionPolicies on a request as the
//! in-tree plugin does (`plugin/policy/mutating/dispatcher.go` behind the generic
//! `policy_dispatcher.go`), for one webhook call:
//!
//! - every policy × binding × param that matches is found first, on the request as it came
//!   (matchConstraints, matchResources, params; configuration errors such as a missing param
//!   under `Deny` are `Forbidden`);
//! - each invocation then runs in turn: its matchConditions and mutations see the object as
//!   the earlier mutations left it; each mutation's patch is applied before the next runs;
//! - an expression or patch error is that policy's error (`Invalid`), dropped under
//!   failurePolicy Ignore; a patch result that does not decode into the kind's type is a 500
//!   whatever the failurePolicy, as in-tree;
//! - the first error that is not ignored answers the request; otherwise the mutated object.
//!
//! Order: policies by name, bindings by name, params by namespace and name. In-tree the
//! order is a Go map's, fixed between policy refreshes: any order is one the API server may
//! use. Reinvocation (`reinvocationPolicy: IfNeeded`) happens in later rounds of the API
//! server's mutating chain, which calls the webhook again when its configuration's
//! `reinvocationPolicy` is `IfNeeded`: one call is one round, as the recorded webhook saw.

use std::sync::Arc;

use serde_json::Value as Json;

use super::activation::{bind, namespace_object, Authz, RequestNamespaces};
use super::context::{AdmitContext, Deadline};
use super::convert::{convert, ConvertError};
use super::error::ConfigError;
use super::params::{binding_params, param_kind_error};
use super::probe::Probe;
use super::rbac::RbacAuthorizer;
use super::request::Request;
use super::validator::{compile_failure, eval_mutation, match_conditions, ExprFailure};
use super::versioned::{matched_kind, request_kind, to_json, Versions, View};
use crate::matching::registry::{Conversion, Gvk};
use crate::matching::{is_exempt, Match, Matched};
use crate::mutating::{apply_mutation, PatchContext, PatchFailure};
use crate::policy::compile::FailurePolicy;
use crate::policy::compile_mutating::CompiledMutatingPolicy;
use crate::policy::snapshot::{CompiledBinding, Snapshot};
use celgate_cel::k8s::authz::AuthorizerValue;
use celgate_cel::Value;

/// Why a mutating admission denied the request: the status the API server answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MutationDenial {
    /// HTTP status code: 403, or 500 for a patch result that does not decode.
    pub code: u16,
    /// `Invalid` (an expression or patch error), `Forbidden` (a configuration error) or
    /// `InternalError`.
    pub reason: &'static str,
    /// The status message (the first error's).
    pub message: String,
    /// Every error that was not ignored (the status details' causes).
    pub causes: Vec<String>,
}

/// An object mutating admission changed.
#[derive(Debug, Clone, PartialEq)]
pub struct Mutated {
    /// The request's object.
    pub before: Json,
    /// The object after every mutation.
    pub after: Json,
}

/// One invocation's outcome, for metrics and traces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvocationRecord {
    pub policy: String,
    pub binding: String,
    /// `applied` (it changed the object), `unchanged`, `skipped` (matchConditions),
    /// `error` or `ignored_error`.
    pub outcome: &'static str,
}

/// One mutation's evaluation, for the in-tree check metrics
/// (`apiserver_mutating_admission_policy_check_total`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MutationCheck {
    pub policy: String,
    pub binding: String,
    /// `no_error`, `compile_error`, `invalid_error`, `out_of_budget` (and celgate's
    /// `deadline_exceeded`, `memory_limit`).
    pub error_type: &'static str,
    pub elapsed: std::time::Duration,
}

/// What mutating admission decided.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct MutationVerdict {
    /// The request's object and the object after every mutation, when they differ.
    pub mutated: Option<Mutated>,
    /// Why the request is denied, if it is.
    pub denial: Option<MutationDenial>,
    /// Each invocation that ran (or failed to configure), in order.
    pub invocations: Vec<InvocationRecord>,
    /// Each mutation evaluated, in order.
    pub checks: Vec<MutationCheck>,
    /// The request's deadline stopped an evaluation.
    pub timed_out: bool,
}

impl MutationVerdict {
    pub fn allowed(&self) -> bool {
        self.denial.is_none()
    }
}

/// An error of one policy (in-tree `generic.PolicyError`), before the failurePolicy.
struct PolicyError {
    policy: String,
    binding: Option<String>,
    ignored: bool,
    reason: &'static str,
    message: String,
}

impl PolicyError {
    /// A binding's configuration error (`Forbidden`, `failed to configure binding: ...`).
    fn binding_config(
        policy: &CompiledMutatingPolicy,
        binding: &str,
        e: ConfigError,
    ) -> PolicyError {
        PolicyError {
            policy: policy.base.name.clone(),
            binding: Some(binding.to_string()),
            ignored: ignored(policy),
            reason: "Forbidden",
            message: format!("failed to configure binding: {e}"),
        }
    }

    fn text(&self) -> String {
        match &self.binding {
            Some(b) => format!(
                "policy '{}' with binding '{b}' denied request: {}",
                self.policy, self.message
            ),
            None => format!("policy {:?} denied request: {}", self.policy, self.message),
        }
    }
}

fn ignored(policy: &CompiledMutatingPolicy) -> bool {
    policy.base.failure_policy == FailurePolicy::Ignore
}

/// One policy × binding × param to run.
struct Invocation<'s> {
    entry: usize,
    binding: &'s CompiledBinding,
    param: Option<Arc<Json>>,
    matched: Matched<'s>,
}

/// The operations the mutating plugin handles: it never sees DELETE.
fn handled(operation: &str) -> bool {
    matches!(operation, "CREATE" | "UPDATE" | "CONNECT")
}

/// Runs every mutating policy of `snapshot` that matches `req`, within the limits and with
/// the services of `context`.
pub fn mutate(
    snapshot: &Snapshot,
    req: &Request<'_>,
    context: &AdmitContext<'_>,
    probe: Option<&dyn Probe>,
) -> MutationVerdict {
    let mut verdict = MutationVerdict::default();
    let attrs = &req.attributes;
    if snapshot.mutating.is_empty()
        || !handled(&attrs.operation)
        || is_exempt(&attrs.group, &attrs.resource)
    {
        return verdict;
    }
    let services = context.services;
    let deadline = Deadline::new(&context.limits);
    let namespaces = RequestNamespaces::new(snapshot, services, req);
    let equivalents =
        snapshot
            .registry
            .equivalents(&attrs.group, &attrs.resource, &attrs.subresource);
    let mut errors: Vec<PolicyError> = Vec::new();
    let invocations = find_invocations(
        snapshot,
        req,
        &namespaces,
        equivalents,
        &mut errors,
        &mut verdict,
    );
    if invocations.is_empty() && errors.iter().all(|e| e.ignored) {
        return verdict;
    }
    let namespace_object = namespace_object(&namespaces, req);
    let backend: Arc<dyn celgate_cel::k8s::authz::Authorizer> = match &services.authorizer {
        Some(factory) => factory.for_user(&req.user),
        None => Arc::new(RbacAuthorizer::new(snapshot.rbac.clone(), req.user.clone())),
    };
    let authz = AuthorizerValue::new(backend);
    let preset = authz.request_resource(req.resource_attributes());
    let authz = Authz::new(authz, preset);
    let original = req.object.map(to_json);
    let mut object = original.clone();
    let mut versions = Versions::default();
    for inv in &invocations {
        let entry = &snapshot.mutating[inv.entry];
        let policy = &entry.policy;
        let name = &policy.base.name;
        let binding = &inv.binding.name;
        let record = |outcome| InvocationRecord {
            policy: name.clone(),
            binding: binding.clone(),
            outcome,
        };
        // The request's values as the policy matched it (converted for an equivalent match).
        let view = match inv.matched {
            Matched::Own => Ok(View::own(req)),
            other => versions.view(req, other, equivalents),
        };
        let view = match view {
            Ok(v) => v,
            Err(e) => {
                verdict.invocations.push(record("error"));
                errors.push(PolicyError::binding_config(
                    policy,
                    binding,
                    ConfigError::Conversion(e),
                ));
                continue;
            }
        };
        let target = Target::new(req, inv.matched, equivalents);
        let Some(current) = object.as_ref() else {
            // In-tree: no patcher runs when there is no object.
            continue;
        };
        let before = current.clone();
        let mut working = match target.to_matched(current) {
            Ok(o) => o,
            Err(e) => {
                verdict.invocations.push(record("error"));
                errors.push(PolicyError::binding_config(
                    policy,
                    binding,
                    ConfigError::Conversion(e),
                ));
                continue;
            }
        };
        let outcome = run_invocation(
            policy,
            &view,
            &mut working,
            &namespace_object,
            inv.param.as_deref(),
            &authz,
            &PatchContext {
                kind: target.kind(),
                schemas: &snapshot.schemas,
                max_copy_bytes: context.limits.memory_per_expression,
                max_apply_depth: context.limits.max_apply_depth,
            },
            &deadline,
            probe,
            &mut |error_type, elapsed| {
                verdict.checks.push(MutationCheck {
                    policy: name.clone(),
                    binding: binding.clone(),
                    error_type,
                    elapsed,
                })
            },
        );
        verdict.timed_out |= deadline.passed();
        match outcome {
            Ok(Ran::Skipped) => verdict.invocations.push(record("skipped")),
            Ok(Ran::Mutated(failed)) => match target.back_from_matched(working) {
                Ok(back) => {
                    let changed = back != before;
                    object = Some(back);
                    let ignored = ignored(policy);
                    let outcome = match (failed.is_empty(), ignored, changed) {
                        (false, true, _) => "ignored_error",
                        (false, false, _) => "error",
                        (true, _, true) => "applied",
                        (true, _, false) => "unchanged",
                    };
                    verdict.invocations.push(record(outcome));
                    errors.extend(failed.into_iter().map(|message| PolicyError {
                        policy: name.clone(),
                        binding: Some(binding.clone()),
                        ignored,
                        reason: "Invalid",
                        message,
                    }));
                }
                Err(e) => {
                    verdict.invocations.push(record("error"));
                    verdict.denial = Some(internal(format!("failed to convert object: {e}")));
                    return verdict;
                }
            },
            Err(Failure::Policy(message)) => {
                let ignored = ignored(policy);
                verdict
                    .invocations
                    .push(record(if ignored { "ignored_error" } else { "error" }));
                errors.push(PolicyError {
                    policy: name.clone(),
                    binding: Some(binding.clone()),
                    ignored,
                    reason: "Invalid",
                    message,
                });
            }
            Err(Failure::Internal(message)) => {
                verdict.invocations.push(record("error"));
                verdict.denial = Some(internal(message));
                return verdict;
            }
        }
    }
    let causes: Vec<String> = errors
        .iter()
        .filter(|e| !e.ignored)
        .map(PolicyError::text)
        .collect();
    if let Some(first) = errors.iter().find(|e| !e.ignored) {
        verdict.denial = Some(MutationDenial {
            code: 403,
            reason: first.reason,
            message: first.text(),
            causes,
        });
        return verdict;
    }
    if let (Some(before), Some(after)) = (original, object) {
        if before != after {
            verdict.mutated = Some(Mutated { before, after });
        }
    }
    verdict
}

/// The kind an invocation mutates the object as: the request's own, or the equivalent kind
/// its policy matched, converted there and back (in-tree `VersionedAttributes`).
struct Target {
    own: Gvk,
    matched: Option<(Gvk, Conversion)>,
}

impl Target {
    fn new(
        req: &Request<'_>,
        matched: Matched<'_>,
        equivalents: crate::matching::registry::Equivalents<'_>,
    ) -> Target {
        match matched_kind(req, matched, equivalents) {
            Some((own, to, strategy)) if own != to => Target {
                own,
                matched: Some((to, strategy)),
            },
            _ => Target {
                own: request_kind(req),
                matched: None,
            },
        }
    }

    fn kind(&self) -> &Gvk {
        self.matched.as_ref().map_or(&self.own, |(k, _)| k)
    }

    fn to_matched(&self, object: &Json) -> Result<Json, ConvertError> {
        match &self.matched {
            None => Ok(object.clone()),
            Some((to, strategy)) => convert(object, &self.own, to, strategy),
        }
    }

    fn back_from_matched(&self, object: Json) -> Result<Json, ConvertError> {
        match &self.matched {
            None => Ok(object),
            Some((to, strategy)) => convert(&object, to, &self.own, strategy),
        }
    }
}

/// A 500 answer (`Internal error occurred: ...`).
fn internal(message: String) -> MutationDenial {
    let message = format!("Internal error occurred: {message}");
    MutationDenial {
        code: 500,
        reason: "InternalError",
        causes: vec![message.clone()],
        message,
    }
}

/// Every policy × binding × param that matches the request, in order; the configuration
/// errors met on the way go to `errors`.
fn find_invocations<'s>(
    snapshot: &'s Snapshot,
    req: &Request<'_>,
    namespaces: &RequestNamespaces<'_>,
    equivalents: crate::matching::registry::Equivalents<'s>,
    errors: &mut Vec<PolicyError>,
    verdict: &mut MutationVerdict,
) -> Vec<Invocation<'s>> {
    let attrs = &req.attributes;
    let mut out = Vec::new();
    let candidates =
        snapshot
            .mutating_index
            .candidates_with(&attrs.group, &attrs.resource, equivalents);
    for index in candidates {
        let entry = &snapshot.mutating[index];
        let policy = &entry.policy;
        let name = &policy.base.name;
        let mut matched = Matched::Own;
        let config_error = match &policy.base.matcher {
            Err(guard) => Some(ConfigError::from(*guard)),
            Ok(m) => match m.matches_resource(attrs, namespaces, equivalents) {
                (Match::No, _) => continue,
                (Match::Yes, how) => {
                    matched = how;
                    policy
                        .base
                        .invalid
                        .clone()
                        .map(ConfigError::Invalid)
                        .or_else(|| param_kind_error(snapshot, &policy.base))
                }
                (Match::Error(e), _) => Some(e.into()),
            },
        };
        if let Some(e) = config_error {
            verdict.invocations.push(InvocationRecord {
                policy: name.clone(),
                binding: String::new(),
                outcome: "error",
            });
            errors.push(PolicyError {
                policy: name.clone(),
                binding: None,
                ignored: ignored(policy),
                reason: "Forbidden",
                message: format!("failed to configure policy: {e}"),
            });
            continue;
        }
        for binding in &entry.bindings {
            match binding_params(
                snapshot,
                namespaces,
                &policy.base,
                binding,
                req,
                equivalents,
            ) {
                Ok(None) => {}
                Ok(Some(params)) => out.extend(params.into_iter().map(|param| Invocation {
                    entry: index,
                    binding,
                    param,
                    matched,
                })),
                Err(e) => {
                    verdict.invocations.push(InvocationRecord {
                        policy: name.clone(),
                        binding: binding.name.clone(),
                        outcome: "error",
                    });
                    errors.push(PolicyError::binding_config(policy, &binding.name, e));
                }
            }
        }
    }
    out
}

enum Ran {
    /// Its matchConditions excluded the request (or their error was ignored).
    Skipped,
    /// Every mutation ran (the object may or may not have changed); the errors of those
    /// that failed, whose patches were not applied (in-tree, a mutation's error does not
    /// stop the next one).
    Mutated(Vec<String>),
}

enum Failure {
    /// The policy's own error, under its failurePolicy.
    Policy(String),
    /// A 500, whatever the failurePolicy.
    Internal(String),
}

/// Runs one invocation's matchConditions and mutations on `object` (in the matched version).
#[allow(clippy::too_many_arguments)]
fn run_invocation(
    policy: &CompiledMutatingPolicy,
    view: &View<'_>,
    object: &mut Json,
    namespace_object: &Option<Arc<Json>>,
    param: Option<&Json>,
    authz: &Authz,
    context: &PatchContext<'_>,
    deadline: &Deadline,
    probe: Option<&dyn Probe>,
    check: &mut dyn FnMut(&'static str, std::time::Duration),
) -> Result<Ran, Failure> {
    let base = &policy.base;
    if !base.match_conditions.is_empty() {
        let current = View {
            object: Value::from_json(object),
            ..view.clone()
        };
        let values = bind(base, &current, namespace_object, param, authz);
        match match_conditions(base, &values.condition, deadline, probe).0 {
            None => {}
            Some(None) => return Ok(Ran::Skipped),
            Some(Some(result)) => {
                let message = result
                    .decisions
                    .into_iter()
                    .next()
                    .map(|d| d.message)
                    .unwrap_or_default();
                return Err(Failure::Policy(message));
            }
        }
    }
    let mut failed = Vec::new();
    for (index, mutation) in policy.mutations.iter().enumerate() {
        let started = std::time::Instant::now();
        let program = match &mutation.program {
            Ok(p) => p,
            Err(e) => {
                check("compile_error", started.elapsed());
                failed.push(compile_failure(e).message);
                continue;
            }
        };
        let applied = {
            let current = View {
                object: Value::from_json(object),
                ..view.clone()
            };
            let values = bind(base, &current, namespace_object, param, authz);
            let evaluated =
                eval_mutation(base, &values.validation, program, index, deadline, probe);
            evaluated
                .map_err(|ExprFailure { message, kind }| (Failure::Policy(message), kind.label()))
                .and_then(|value| {
                    apply_mutation(mutation.kind, &value, object, context).map_err(|e| match e {
                        PatchFailure::Policy(m) => (Failure::Policy(m), "invalid_error"),
                        PatchFailure::Internal(m) => (Failure::Internal(m), "invalid_error"),
                    })
                })
        };
        match applied {
            Ok(next) => {
                check("no_error", started.elapsed());
                *object = next;
            }
            Err((Failure::Policy(message), error_type)) => {
                check(error_type, started.elapsed());
                failed.push(message);
            }
            Err((internal @ Failure::Internal(_), error_type)) => {
                check(error_type, started.elapsed());
                return Err(internal);
            }
        }
    }
    Ok(Ran::Mutated(failed))
}
