//! Routing: where a decision goes. An evaluated decision goes through its binding's
//! validationActions (§4.8) into denials, warnings and audited failures, with the in-tree
//! check metrics; a configuration error follows the policy's failurePolicy.

use super::validator::{DecisionAction, Outcome, PolicyDecision};
use super::verdict::{AdmissionVerdict, AuditedFailure, CheckMetric};
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
            if let Outcome::Error(kind) = d.evaluation {
                let c = CheckMetric::new(
                    policy,
                    binding,
                    kind.label(),
                    "allow",
                    elapsed,
                    std::mem::take(&mut condition_errors),
                );
                verdict.checks.push(c);
            }
            continue;
        }
        let kind = match d.evaluation {
            Outcome::Error(kind) => kind.label(),
            // A failed validation is labelled `invalid_error` in-tree.
            Outcome::Admit | Outcome::Deny => "invalid_error",
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
