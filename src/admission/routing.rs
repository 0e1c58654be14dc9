//! Routing: where a decision goes. An evaluated decision goes through its binding's
//! validationActions (§4.8) into denials, warnings and audited failures, with the in-tree
//! check metrics; a configuration error follows the policy's failurePolicy.

use super::validator::{self, DecisionAction, Outcome, PolicyDecision};
use super::verdict::{AdmissionVerdict, AuditedFailure, CheckMetric};
use crate::cel::CancelReason;
use crate::policy::compile::{CompiledPolicy, FailurePolicy};
use crate::policy::snapshot::{CompiledBinding, ValidationAction};

pub(super) fn configuration_error(
    verdict: &mut AdmissionVerdict,
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

/// The `error_type` label of an error decision's message (§8.1): the in-tree values, except
/// that an evaluation stopped for a limit is not an ordinary `invalid_error` (in-tree it is):
/// the per-expression cost limit is `out_of_budget`, as the in-tree label of the group budget
/// (both say the policy costs too much for this request), and two labels of our own say
/// `deadline_exceeded` (the request's `?timeout=` passed) and `memory_limit`.
///
/// By message for now: a stop is the last part of an expression's error. An error text that
/// quotes input (a missing key named like a stop) can mislabel its own check, but only among
/// these fixed values.
pub(super) fn error_type(message: &str) -> &'static str {
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
pub(super) fn route(
    verdict: &mut AdmissionVerdict,
    policy: &CompiledPolicy,
    binding: &CompiledBinding,
    decisions: &[PolicyDecision],
    elapsed: std::time::Duration,
    condition_errors: u64,
) {
    let mut condition_errors = condition_errors;
    for (index, d) in decisions.iter().enumerate() {
        if d.action != DecisionAction::Deny {
            if d.evaluation == Outcome::Error {
                let c = CheckMetric::new(
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
                ValidationAction::Deny => "deny",
                ValidationAction::Warn => "warn",
                ValidationAction::Audit => "audit",
            };
            verdict.checks.push(CheckMetric::new(
                policy,
                binding,
                kind,
                name,
                elapsed,
                std::mem::take(&mut condition_errors),
            ));
            match action {
                ValidationAction::Deny => {
                    let reason = if d.evaluation == Outcome::Deny {
                        d.reason.clone()
                    } else {
                        None
                    };
                    verdict.deny(&policy.name, Some(&binding.name), &d.message, reason);
                }
                ValidationAction::Warn => verdict.warn(format!(
                    "Validation failed for ValidatingAdmissionPolicy '{}' with binding '{}': {}",
                    policy.name, binding.name, d.message
                )),
                ValidationAction::Audit => verdict.audited.push(AuditedFailure {
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
