//! What admission decided for a request: denials, warnings, audit annotations and audited
//! failures (what the review's answer is made of), the check metric records, and, for
//! `celgate test`, each binding's result.

use crate::policy::compile::CompiledPolicy;
use crate::policy::snapshot::CompiledBinding;

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
pub struct CheckMetric {
    pub policy: String,
    pub binding: String,
    /// `no_error`, `compile_error`, `out_of_budget` or `invalid_error` (in-tree), or our own
    /// `deadline_exceeded` or `memory_limit` (the validator's `ErrorKind`).
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
pub struct AdmissionVerdict {
    /// The denials, in the order they were decided; the answer reports the first.
    pub denials: Vec<Denial>,
    /// The warnings of failed `Warn` validations (and of audit-only errors), for the answer.
    pub warnings: Vec<String>,
    /// Per policy, its audit annotations: key to distinct values in order.
    pub annotations: Vec<(String, String, Vec<String>)>,
    /// Failed `Audit` validations, for the `validation.policy.admission.k8s.io` annotation.
    pub audited: Vec<AuditedFailure>,
    /// Metric records.
    pub checks: Vec<CheckMetric>,
    /// The deadline passed before every evaluation was done: the verdict is incomplete and
    /// must not be sent (the server answers 504).
    pub timed_out: bool,
    /// Per evaluated (policy, binding), its result; filled only with
    /// [`super::AdmitOptions::trace`] (for `celgate test`), so that serving allocates nothing
    /// for it. A binding not listed did not match.
    pub results: Vec<BindingResult>,
    /// Per (policy, binding, param) that matched the request, its result, by index into the
    /// snapshot: always filled (for the result metrics and logs), copying no names.
    pub evaluated: Vec<Evaluated>,
}

/// One (policy, binding, param) evaluation's result, by index: `policy` into
/// `Snapshot::policies`, `binding` into that entry's `bindings`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Evaluated {
    pub policy: usize,
    pub binding: usize,
    pub result: PolicyResult,
}

/// What an evaluation came to, as policy reports say it. Ordered from least to most
/// notable: over several params or validations, the greatest is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PolicyResult {
    /// The binding matched, but the policy's matchConditions excluded the request.
    Skip,
    /// Every validation held.
    Pass,
    /// A validation failed.
    Fail,
    /// An expression could not be evaluated, or the policy or binding is misconfigured.
    Error,
}

impl PolicyResult {
    /// The `result` label and the policy report's word: `pass`, `fail`, `error` or `skip`.
    pub fn label(self) -> &'static str {
        match self {
            PolicyResult::Skip => "skip",
            PolicyResult::Pass => "pass",
            PolicyResult::Fail => "fail",
            PolicyResult::Error => "error",
        }
    }
}

/// One validation's result for one param, recorded when tracing (for `celgate scan`).
#[derive(Debug, Clone, PartialEq)]
pub struct ValidationResult {
    /// The validation's index in the policy; `None` for an error of the whole policy or
    /// binding (a configuration error, a failed audit annotation, the cost budget).
    pub index: Option<usize>,
    pub result: PolicyResult,
    /// The failure's or error's message (without the `ValidatingAdmissionPolicy ... denied
    /// request:` prefix); empty for a pass.
    pub message: String,
    /// The failed validation's reason (`Invalid` unless the policy names one).
    pub reason: Option<String>,
}

/// What one (policy, binding) evaluation came to, over all its params.
#[derive(Debug, Clone, PartialEq)]
pub struct BindingResult {
    pub policy: String,
    /// `None` for a policy-level configuration error (it applies to every binding).
    pub binding: Option<String>,
    pub outcome: BindingOutcome,
    /// Each validation's result, per param in turn (empty for a configuration error).
    pub validations: Vec<ValidationResult>,
}

/// Ordered from best to worst: a binding's result is the worst of its params'.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum BindingOutcome {
    Pass,
    Fail,
    Error,
}

impl AdmissionVerdict {
    /// Nothing denied the request.
    pub fn allowed(&self) -> bool {
        self.denials.is_empty()
    }

    pub(super) fn deny(
        &mut self,
        policy: &str,
        binding: Option<&str>,
        message: &str,
        reason: Option<String>,
    ) {
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

    pub(super) fn warn(&mut self, text: String) {
        if !self.warnings.contains(&text) {
            self.warnings.push(text);
        }
    }

    /// Notes, when tracing, a (policy, binding)'s result: the worst over its params.
    pub(super) fn record(
        &mut self,
        trace: bool,
        policy: &str,
        binding: Option<&str>,
        outcome: BindingOutcome,
    ) {
        if !trace {
            return;
        }
        let found = self
            .results
            .iter_mut()
            .find(|r| r.policy == policy && r.binding.as_deref() == binding);
        match found {
            Some(r) => r.outcome = r.outcome.max(outcome),
            None => self.results.push(BindingResult {
                policy: policy.to_string(),
                binding: binding.map(str::to_string),
                outcome,
                validations: Vec::new(),
            }),
        }
    }

    /// Notes, when tracing, the validations' results of one param of a (policy, binding)
    /// already [`record`](Self::record)ed.
    pub(super) fn record_validations(
        &mut self,
        policy: &str,
        binding: &str,
        validations: impl Iterator<Item = ValidationResult>,
    ) {
        if let Some(r) = self
            .results
            .iter_mut()
            .find(|r| r.policy == policy && r.binding.as_deref() == Some(binding))
        {
            r.validations.extend(validations);
        }
    }
}

impl CheckMetric {
    /// The record of one (policy, binding, param) evaluation.
    pub(super) fn new(
        policy: &CompiledPolicy,
        binding: &CompiledBinding,
        error_type: &'static str,
        action: &'static str,
        elapsed: std::time::Duration,
        match_condition_errors: u64,
    ) -> CheckMetric {
        CheckMetric {
            policy: policy.name.clone(),
            binding: binding.name.clone(),
            error_type,
            action,
            elapsed,
            match_condition_errors,
        }
    }
}

/// Audit annotation values: truncated to 10,240 bytes, duplicates dropped, in order.
pub(super) fn collect(collector: &mut Vec<(String, Vec<String>)>, key: String, mut value: String) {
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
