//! Evaluates one (policy, binding, param) as `validating/validator.go` does (§4):
//! matchConditions (2,500,000 budget), then validations (10,000,000), then every
//! messageExpression on what is left, then audit annotations on a fresh 10,000,000. Variables
//! are computed on first use and cached per expression group; their cost is charged to the
//! group after the expression that read them.

use std::cell::{Cell, RefCell};

use super::Deadline;
use crate::cel::eval::Activation;
use crate::cel::{EvalError, Program, Value, PER_CALL_LIMIT};
use crate::policy::compile::{CompiledPolicy, FailurePolicy};

pub const BUDGET: u64 = 10_000_000;
pub const MATCH_CONDITIONS_BUDGET: u64 = 2_500_000;
pub const OUT_OF_BUDGET: &str =
    "validation failed due to running out of cost budget, no further validation rules will be run";
/// messageExpression results longer than this are discarded.
const MAX_MESSAGE_BYTES: usize = 5120;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Admit,
    Deny,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Admit,
    Deny,
    Error,
}

/// One validation's decision.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    pub action: Action,
    pub evaluation: Outcome,
    pub message: String,
    pub reason: Option<String>,
}

/// One audit annotation's result.
#[derive(Debug, Clone, PartialEq)]
pub enum AuditResult {
    Publish(String, String),
    /// An error under failurePolicy Fail: denies whatever the validation actions.
    Error(String),
}

/// The result for one param.
#[derive(Debug, Default, PartialEq)]
pub struct ParamResult {
    pub decisions: Vec<Decision>,
    pub audit: Vec<AuditResult>,
}

/// The values bound for each expression group, in the slot layout of its environment.
pub struct Bindings<'a> {
    /// matchConditions (namespaceObject null).
    pub condition: Vec<Value<'a>>,
    /// validations and the variables they read.
    pub validation: Vec<Value<'a>>,
    /// messageExpressions, with their variables slot.
    pub message: Vec<Value<'a>>,
    /// audit annotations: the validation layout without an authorizer bound.
    pub audit: Vec<Value<'a>>,
}

/// Composited variables for one expression group: computed on first read, cached.
struct Lazy<'a, 'p> {
    policy: &'p CompiledPolicy,
    values: &'p [Value<'a>],
    cache: RefCell<Vec<Option<Result<Value<'a>, EvalError>>>>,
    cost: Cell<u64>,
    deadline: &'p Deadline,
}

impl<'a, 'p> Lazy<'a, 'p> {
    fn new(policy: &'p CompiledPolicy, values: &'p [Value<'a>], deadline: &'p Deadline) -> Self {
        Lazy {
            policy,
            values,
            cache: RefCell::new(vec![None; policy.variables.len()]),
            cost: Cell::new(0),
            deadline,
        }
    }

    fn get(&self, index: usize) -> Result<Value<'a>, EvalError> {
        if let Some(Some(cached)) = self.cache.borrow().get(index) {
            return cached.clone();
        }
        let Some((name, compiled)) = self.policy.variables.get(index) else {
            return Err(EvalError::new(format!("no such variable: {index}")));
        };
        let result = match compiled {
            Err(e) => Err(EvalError::new(format!(
                "composited variable {name:?} fails to compile: {e}"
            ))),
            Ok(program) => {
                let mut meter = self.deadline.meter(PER_CALL_LIMIT);
                let act = Act {
                    values: self.values,
                    lazy: Some(self),
                };
                let r = program.eval(&act, &mut meter);
                if let Err(e) = &r {
                    self.deadline.note(e);
                }
                self.cost.set(self.cost.get() + meter.cost);
                r.map_err(|e| {
                    EvalError::new(format!(
                        "composited variable {name:?} fails to evaluate: {e}"
                    ))
                })
            }
        };
        if let Some(slot) = self.cache.borrow_mut().get_mut(index) {
            *slot = Some(result.clone());
        }
        result
    }
}

struct Act<'a, 'p> {
    values: &'p [Value<'a>],
    lazy: Option<&'p Lazy<'a, 'p>>,
}

impl<'a> Activation<'a> for Act<'a, '_> {
    fn var(&self, slot: usize) -> Value<'a> {
        self.values.get(slot).cloned().unwrap_or(Value::Null)
    }

    fn lazy(&self, index: usize) -> Result<Value<'a>, EvalError> {
        match self.lazy {
            Some(l) => l.get(index),
            None => Err(EvalError::new("variables are not available here")),
        }
    }
}

/// A group's running budget, and the request's deadline.
struct Budget<'d>(u64, &'d Deadline);

struct OutOfBudget;

impl Budget<'_> {
    /// Evaluates one expression with the per-call limit; its cost (and the cost of variables
    /// it read) comes off the group's budget. Once the deadline stopped an expression, the
    /// others are not run.
    fn eval<'a>(
        &mut self,
        program: &Program,
        act: &Act<'a, '_>,
    ) -> Result<Result<Value<'a>, EvalError>, OutOfBudget> {
        if self.1.passed() {
            return Ok(Err(Deadline::interrupted()));
        }
        let mut meter = self.1.meter(PER_CALL_LIMIT);
        let r = program.eval(act, &mut meter);
        if let Err(e) = &r {
            self.1.note(e);
        }
        let cost = meter.cost + act.lazy.map_or(0, |l| l.cost.replace(0));
        if cost > self.0 {
            return Err(OutOfBudget);
        }
        self.0 -= cost;
        Ok(r)
    }
}

fn runtime_error(expression: &str, e: &EvalError) -> String {
    format!("expression '{expression}' resulted in error: {e}")
}

fn compile_error(e: &str) -> String {
    format!("compilation error: {e}")
}

/// An evaluation error: denied under Fail, admitted (but counted) under Ignore.
fn error_decision(policy: &CompiledPolicy, message: String) -> Decision {
    let action = if policy.failure_policy == FailurePolicy::Ignore {
        Action::Admit
    } else {
        Action::Deny
    };
    Decision {
        action,
        evaluation: Outcome::Error,
        message,
        reason: None,
    }
}

/// Evaluates the policy for one param; `None` when its matchConditions exclude the request.
/// Also returns how many match conditions errored (for the metrics). Every expression stops
/// at `deadline`.
pub fn validate(
    policy: &CompiledPolicy,
    b: &Bindings<'_>,
    deadline: &Deadline,
) -> (Option<ParamResult>, u64) {
    let mut condition_errors = 0;
    if !policy.match_conditions.is_empty() {
        let (early, errors) = match_conditions(policy, &b.condition, deadline);
        condition_errors = errors;
        if let Some(early) = early {
            return (early, condition_errors);
        }
    }
    (evaluate(policy, b, deadline), condition_errors)
}

fn evaluate(policy: &CompiledPolicy, b: &Bindings<'_>, deadline: &Deadline) -> Option<ParamResult> {
    let mut decisions = validations(policy, b, deadline);
    match audit_annotations(policy, &b.audit, deadline) {
        Ok(audit) => Some(ParamResult { decisions, audit }),
        Err(message) => {
            // An audit-annotation group failure replaces the whole result for this param.
            decisions.clear();
            decisions.push(error_decision(policy, message));
            Some(ParamResult {
                decisions,
                audit: Vec::new(),
            })
        }
    }
}

/// `Some(result)` when the conditions decide (no match, or an error decision); `None` to go
/// on. With the number of conditions that errored.
fn match_conditions(
    policy: &CompiledPolicy,
    values: &[Value<'_>],
    deadline: &Deadline,
) -> (Option<Option<ParamResult>>, u64) {
    let act = Act { values, lazy: None };
    let mut budget = Budget(MATCH_CONDITIONS_BUDGET, deadline);
    let mut errors: Vec<String> = Vec::new();
    let mut any_false = false;
    for (_, compiled) in &policy.match_conditions {
        match compiled {
            Err(e) => errors.push(compile_error(e)),
            Ok(program) => match budget.eval(program, &act) {
                Err(OutOfBudget) => {
                    return (
                        Some(fail_or_skip(policy, OUT_OF_BUDGET.to_string())),
                        errors.len() as u64,
                    )
                }
                Ok(Ok(Value::Bool(true))) => {}
                Ok(Ok(Value::Bool(false))) => any_false = true,
                Ok(Ok(_)) => errors.push(runtime_error(
                    program.source(),
                    &EvalError::no_such_overload(),
                )),
                Ok(Err(e)) => errors.push(runtime_error(program.source(), &e)),
            },
        }
    }
    let count = errors.len() as u64;
    if any_false {
        return (Some(None), count);
    }
    if errors.is_empty() {
        return (None, 0);
    }
    let mut unique: Vec<String> = Vec::new();
    for e in errors {
        if !unique.contains(&e) {
            unique.push(e);
        }
    }
    let message = if unique.len() == 1 {
        unique.remove(0)
    } else {
        format!("[{}]", unique.join(", "))
    };
    (Some(fail_or_skip(policy, message)), count)
}

/// Under Fail, a single error decision; under Ignore, no match.
fn fail_or_skip(policy: &CompiledPolicy, message: String) -> Option<ParamResult> {
    if policy.failure_policy == FailurePolicy::Ignore {
        return None;
    }
    Some(ParamResult {
        decisions: vec![error_decision(policy, message)],
        audit: Vec::new(),
    })
}

fn validations(policy: &CompiledPolicy, b: &Bindings<'_>, deadline: &Deadline) -> Vec<Decision> {
    let lazy = Lazy::new(policy, &b.validation, deadline);
    let act = Act {
        values: &b.validation,
        lazy: Some(&lazy),
    };
    let mut budget = Budget(BUDGET, deadline);
    let mut results: Vec<Result<bool, String>> = Vec::with_capacity(policy.validations.len());
    for v in &policy.validations {
        let r = match &v.program {
            Err(e) => Err(compile_error(e)),
            Ok(program) => match budget.eval(program, &act) {
                Err(OutOfBudget) => return vec![error_decision(policy, OUT_OF_BUDGET.to_string())],
                Ok(Ok(Value::Bool(ok))) => Ok(ok),
                Ok(Ok(_)) => Err(runtime_error(&v.expression, &EvalError::no_such_overload())),
                Ok(Err(e)) => Err(runtime_error(&v.expression, &e)),
            },
        };
        results.push(r);
    }
    // Every messageExpression, passing validations included, on the budget that is left.
    let message_lazy = Lazy::new(policy, &b.message, deadline);
    let message_act = Act {
        values: &b.message,
        lazy: Some(&message_lazy),
    };
    let mut messages: Vec<Option<String>> = Vec::with_capacity(policy.validations.len());
    let mut group_error: Option<String> = None;
    for v in &policy.validations {
        let m = match &v.message_program {
            Some(Ok(program)) if group_error.is_none() => {
                match budget.eval(program, &message_act) {
                    Err(OutOfBudget) => {
                        group_error = Some(OUT_OF_BUDGET.to_string());
                        None
                    }
                    Ok(Ok(Value::String(s))) => usable_message(s.as_str()),
                    Ok(_) => None,
                }
            }
            _ => None,
        };
        messages.push(m);
    }
    policy
        .validations
        .iter()
        .zip(results)
        .zip(messages)
        .map(|((v, result), message)| match result {
            Err(e) => error_decision(policy, e),
            Ok(_) if group_error.is_some() => error_decision(
                policy,
                format!(
                    "failed messageExpression: {}",
                    group_error.as_deref().unwrap_or("")
                ),
            ),
            Ok(true) => Decision {
                action: Action::Admit,
                evaluation: Outcome::Admit,
                message: String::new(),
                reason: None,
            },
            Ok(false) => {
                let message = message
                    .or_else(|| {
                        v.message
                            .as_deref()
                            .map(str::trim)
                            .filter(|m| !m.is_empty())
                            .map(str::to_string)
                    })
                    .unwrap_or_else(|| format!("failed expression: {}", v.expression.trim()));
                let reason = Some(v.reason.clone().unwrap_or_else(|| "Invalid".into()));
                Decision {
                    action: Action::Deny,
                    evaluation: Outcome::Deny,
                    message,
                    reason,
                }
            }
        })
        .collect()
}

/// A messageExpression result is used when, trimmed, it is non-empty, at most 5,120 bytes and
/// a single line.
fn usable_message(s: &str) -> Option<String> {
    let t = s.trim();
    (!t.is_empty() && t.len() <= MAX_MESSAGE_BYTES && !t.contains('\n')).then(|| t.to_string())
}

fn audit_annotations(
    policy: &CompiledPolicy,
    values: &[Value<'_>],
    deadline: &Deadline,
) -> Result<Vec<AuditResult>, String> {
    if policy.audit_annotations.is_empty() {
        return Ok(Vec::new());
    }
    let lazy = Lazy::new(policy, values, deadline);
    let act = Act {
        values,
        lazy: Some(&lazy),
    };
    let mut budget = Budget(BUDGET, deadline);
    let mut out = Vec::new();
    let ignore = policy.failure_policy == FailurePolicy::Ignore;
    for (key, compiled) in &policy.audit_annotations {
        let error = match compiled {
            Err(e) => Some(compile_error(e)),
            Ok(program) => match budget.eval(program, &act) {
                Err(OutOfBudget) => return Err(OUT_OF_BUDGET.to_string()),
                Ok(Ok(Value::String(s))) => {
                    let v = s.as_str().trim();
                    if !v.is_empty() {
                        out.push(AuditResult::Publish(key.clone(), v.to_string()));
                    }
                    None
                }
                Ok(Ok(Value::Null)) => None,
                Ok(Ok(other)) => Some(format!(
                    "valueExpression '{}' resulted in unsupported return type: {}. Return type must be either string or null.",
                    program.source(),
                    other.type_name()
                )),
                Ok(Err(e)) => Some(runtime_error(program.source(), &e)),
            },
        };
        if let (Some(e), false) = (error, ignore) {
            out.push(AuditResult::Error(e));
        }
    }
    Ok(out)
}
