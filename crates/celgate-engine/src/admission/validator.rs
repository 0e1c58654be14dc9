//! Evaluates one (policy, binding, param) as `validating/validator.go` does (§4):
//! matchConditions (2,500,000 budget), then validations (10,000,000), then every
//! messageExpression on what is left, then audit annotations on a fresh 10,000,000. Variables
//! are computed on first use and cached per expression group; their cost is charged to the
//! group after the expression that read them.
//!
//! Every expression is evaluated inside [`contain`]: a panic in the engine or a library
//! function becomes that expression's CEL error (`internal error: <panic message>`, the text
//! cel-go's `Program.Eval` recovers a panic into), so it follows its own policy's
//! failurePolicy and check metrics like any runtime error, instead of failing the whole
//! review with a 500.

use std::cell::{Cell, RefCell};
use std::collections::BTreeSet;
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, Once};

use super::probe::{Probe, Seen, Site};
use super::Deadline;
use crate::policy::compile::{CompiledPolicy, FailurePolicy};
use celgate_cel::Activation;
use celgate_cel::{CancelReason, EvalError, Program, Value, PER_CALL_LIMIT};

pub(crate) const BUDGET: u64 = 10_000_000;
pub(crate) const MATCH_CONDITIONS_BUDGET: u64 = 2_500_000;
pub(crate) const OUT_OF_BUDGET: &str =
    "validation failed due to running out of cost budget, no further validation rules will be run";
/// messageExpression results longer than this are discarded.
const MAX_MESSAGE_BYTES: usize = 5120;

/// What a decision does to the request (in-tree `PolicyDecisionAction`): an evaluation
/// error under failurePolicy Ignore admits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DecisionAction {
    Admit,
    Deny,
}

/// How a validation's evaluation came out (in-tree `PolicyDecisionEvaluation`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    Admit,
    Deny,
    /// It could not be evaluated; the kind labels its check metric.
    Error(ErrorKind),
}

/// Why an expression's evaluation failed, as the check metrics label it (§8.1): the in-tree
/// labels, except that an evaluation stopped for a limit is not an ordinary `invalid_error`
/// (in-tree it is).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ErrorKind {
    /// The expression does not compile (`compile_error`).
    Compile,
    /// The group's cost budget ran out, or one expression's cost limit stopped it
    /// (`out_of_budget`, the in-tree label of the group budget: either way the policy costs
    /// too much for this request).
    OutOfBudget,
    /// The request's deadline (the API server's `?timeout=`) stopped it
    /// (`deadline_exceeded`, our own label).
    DeadlineExceeded,
    /// It would have built more than the memory limit (`memory_limit`, our own label).
    MemoryLimit,
    /// Any other error (`invalid_error`).
    Invalid,
}

impl ErrorKind {
    /// The `error_type` label of the check metrics.
    pub(crate) fn label(self) -> &'static str {
        match self {
            ErrorKind::Compile => "compile_error",
            ErrorKind::OutOfBudget => "out_of_budget",
            ErrorKind::DeadlineExceeded => "deadline_exceeded",
            ErrorKind::MemoryLimit => "memory_limit",
            ErrorKind::Invalid => "invalid_error",
        }
    }

    fn stopped(reason: CancelReason) -> ErrorKind {
        match reason {
            CancelReason::CostLimit => ErrorKind::OutOfBudget,
            CancelReason::Deadline => ErrorKind::DeadlineExceeded,
            CancelReason::MemoryLimit => ErrorKind::MemoryLimit,
        }
    }

    /// The kind of a runtime error: the limit that stopped the expression, or one that
    /// stopped a composited variable it read (whose error became an ordinary error value).
    fn of(e: &EvalError, variable_stop: Option<CancelReason>) -> ErrorKind {
        match (e, variable_stop) {
            (EvalError::Cancelled(r), _) => ErrorKind::stopped(*r),
            (_, Some(r)) => ErrorKind::stopped(r),
            _ => ErrorKind::Invalid,
        }
    }

    /// The kind of several distinct match-condition errors reported as one `[a, b]` message:
    /// a limit that stopped any of them, else `invalid_error` (even for compile errors, as
    /// the joined message is labelled in-tree by the first one's text only when alone).
    fn joined(kinds: &[ErrorKind]) -> ErrorKind {
        [
            ErrorKind::OutOfBudget,
            ErrorKind::DeadlineExceeded,
            ErrorKind::MemoryLimit,
        ]
        .into_iter()
        .find(|k| kinds.contains(k))
        .unwrap_or(ErrorKind::Invalid)
    }
}

/// An expression's error: its message and its metric kind.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ExprFailure {
    pub message: String,
    pub kind: ErrorKind,
}

/// One validation's decision (in-tree `PolicyDecision`).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PolicyDecision {
    pub action: DecisionAction,
    pub evaluation: Outcome,
    pub message: String,
    pub reason: Option<String>,
}

/// One audit annotation's result.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum AuditResult {
    Publish(String, String),
    /// An error under failurePolicy Fail: denies whatever the validation actions.
    Error(ExprFailure),
}

/// The result for one param.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct ParamResult {
    pub decisions: Vec<PolicyDecision>,
    pub audit: Vec<AuditResult>,
}

/// The variable values bound for each expression group of a policy (not VAP bindings), in
/// the slot layout of its environment; empty for a group the policy has no expression in.
pub(crate) struct GroupValues<'a> {
    /// matchConditions (namespaceObject null).
    pub condition: Vec<Value<'a>>,
    /// validations and the variables they read.
    pub validation: Vec<Value<'a>>,
    /// messageExpressions, with their variables slot.
    pub message: Vec<Value<'a>>,
    /// audit annotations: the validation layout without an authorizer bound.
    pub audit: Vec<Value<'a>>,
}

/// A composited variable's value or error, with the limit that stopped it, if one did.
type VariableResult<'a> = (Result<Value<'a>, EvalError>, Option<CancelReason>);

/// Composited variables for one expression group: computed on first read, cached.
struct Lazy<'a, 'p> {
    policy: &'p CompiledPolicy,
    values: &'p [Value<'a>],
    /// Each variable's result, once computed.
    cache: RefCell<Vec<Option<VariableResult<'a>>>>,
    cost: Cell<u64>,
    /// The limit that stopped a variable read since the last reset: the reading expression's
    /// error, if it is the variable's, is labelled by it.
    stop: Cell<Option<CancelReason>>,
    deadline: &'p Deadline,
    probe: Option<&'p dyn Probe>,
}

impl<'a, 'p> Lazy<'a, 'p> {
    fn new(
        policy: &'p CompiledPolicy,
        values: &'p [Value<'a>],
        deadline: &'p Deadline,
        probe: Option<&'p dyn Probe>,
    ) -> Self {
        Lazy {
            policy,
            values,
            cache: RefCell::new(vec![None; policy.variables.len()]),
            cost: Cell::new(0),
            stop: Cell::new(None),
            deadline,
            probe,
        }
    }

    fn get(&self, index: usize) -> Result<Value<'a>, EvalError> {
        if let Some(Some((cached, stop))) = self.cache.borrow().get(index) {
            if stop.is_some() {
                self.stop.set(*stop);
            }
            return cached.clone();
        }
        let Some((name, compiled)) = self.policy.variables.get(index) else {
            return Err(EvalError::new(format!("no such variable: {index}")));
        };
        let mut stop = None;
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
                let r = contain(&self.policy.name, program.source(), || {
                    program.eval(&act, &mut meter)
                });
                if let Some(p) = self.probe {
                    let cost = self.cost.get();
                    p.seen(&self.policy.name, Site::Variable, index, Seen::of(&r), &act);
                    self.cost.set(cost);
                }
                if let Err(e) = &r {
                    self.deadline.note(e);
                    stop = match e {
                        EvalError::Cancelled(reason) => Some(*reason),
                        // A variable it read was stopped.
                        _ => self.stop.get(),
                    };
                }
                self.cost.set(self.cost.get() + meter.cost);
                // Any error, a cancellation included, becomes an ordinary error value of the
                // reading expression, as in-tree (`composition.go` wraps the variable's error),
                // so `variables.x || true` is true even when `x` ran out of cost.
                r.map_err(|e| {
                    EvalError::new(format!(
                        "composited variable {name:?} fails to evaluate: {e}"
                    ))
                })
            }
        };
        if let Some(slot) = self.cache.borrow_mut().get_mut(index) {
            *slot = Some((result.clone(), stop));
        }
        if stop.is_some() {
            self.stop.set(stop);
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

    fn var_ref(&self, slot: usize) -> Option<&Value<'a>> {
        self.values.get(slot)
    }

    fn lazy(&self, index: usize) -> Result<Value<'a>, EvalError> {
        match self.lazy {
            Some(l) => l.get(index),
            None => Err(EvalError::new("variables are not available here")),
        }
    }
}

/// Tells `probe` (if any) what an expression gave; what the probe evaluates against `act`
/// is not charged to the group.
fn probed<'a, E>(
    probe: Option<&dyn Probe>,
    policy: &CompiledPolicy,
    site: Site,
    index: usize,
    r: &Result<Value<'a>, E>,
    act: &Act<'a, '_>,
) {
    if let Some(p) = probe {
        let cost = act.lazy.map(|l| l.cost.get());
        p.seen(&policy.name, site, index, Seen::of(r), act);
        if let (Some(l), Some(c)) = (act.lazy, cost) {
            l.cost.set(c);
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
        policy: &CompiledPolicy,
        program: &Program,
        act: &Act<'a, '_>,
    ) -> Result<Result<Value<'a>, (EvalError, ErrorKind)>, OutOfBudget> {
        if self.1.passed() {
            return Ok(Err((Deadline::interrupted(), ErrorKind::DeadlineExceeded)));
        }
        let mut meter = self.1.meter(PER_CALL_LIMIT);
        if let Some(l) = act.lazy {
            l.stop.set(None);
        }
        let r = contain(&policy.name, program.source(), || {
            program.eval(act, &mut meter)
        });
        if let Err(e) = &r {
            self.1.note(e);
        }
        let cost = meter.cost + act.lazy.map_or(0, |l| l.cost.replace(0));
        if cost > self.0 {
            return Err(OutOfBudget);
        }
        self.0 -= cost;
        Ok(r.map_err(|e| {
            let kind = ErrorKind::of(&e, act.lazy.and_then(|l| l.stop.get()));
            (e, kind)
        }))
    }
}

// Containment needs unwinding: with `panic = "abort"` a contained panic would end the
// process instead of becoming one policy's error.
#[cfg(not(panic = "unwind"))]
compile_error!("celgate must be built with panic = \"unwind\" (see admission::validator::contain)");

/// Panics contained so far, in this process.
static CONTAINED_PANICS: AtomicU64 = AtomicU64::new(0);

/// How many evaluation panics [`contain`] has turned into errors since the process started
/// (each is also one policy's `invalid_error` in the check metrics).
pub fn contained_panics() -> u64 {
    CONTAINED_PANICS.load(Ordering::Relaxed)
}

thread_local! {
    /// How many [`contain`] calls are running on this thread (a composited variable is
    /// evaluated inside the expression that reads it): while non-zero, the panic hook is
    /// silent and leaves the panic's location here for the one warning.
    static CONTAINING: Cell<u32> = const { Cell::new(0) };
    static PANIC_LOCATION: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Marks this thread as containing panics for its lifetime.
struct Containing;

impl Containing {
    fn enter() -> Containing {
        CONTAINING.with(|c| c.set(c.get().saturating_add(1)));
        Containing
    }
}

impl Drop for Containing {
    fn drop(&mut self) {
        CONTAINING.with(|c| c.set(c.get().saturating_sub(1)));
    }
}

/// Wraps the process's panic hook (once) so that a panic [`contain`] will catch prints
/// nothing: a request that makes a policy panic must not write a backtrace to stderr each
/// time. Any other panic goes to the previous hook as before.
fn install_quiet_hook() {
    static INSTALL: Once = Once::new();
    // `set_hook` may not be called while this thread panics.
    if std::thread::panicking() {
        return;
    }
    INSTALL.call_once(|| {
        let previous = panic::take_hook();
        panic::set_hook(Box::new(move |info| {
            if CONTAINING.with(Cell::get) > 0 {
                let location = info
                    .location()
                    .map(|l| format!("{}:{}", l.file(), l.line()));
                PANIC_LOCATION.with(|p| *p.borrow_mut() = location);
                return;
            }
            previous(info);
        }));
    });
}

/// The text of a panic payload (`panic!` with a literal or with format arguments).
fn panic_message(payload: &(dyn std::any::Any + Send)) -> &str {
    if let Some(s) = payload.downcast_ref::<&str>() {
        s
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s
    } else {
        "panic with a non-text payload"
    }
}

/// Runs one expression's evaluation, turning a panic into its error:
/// `internal error: <panic message>`, as cel-go's `Program.Eval` recovers one. The panic is
/// counted ([`contained_panics`]) and logged at warn level once per policy name, with the
/// expression and where it panicked; later panics of that policy are quiet (they still show
/// in its check metrics as `invalid_error`).
///
/// Free when nothing panics (`catch_unwind` only adds a landing pad; the hook is installed
/// once). Unwind safety: after a panic the evaluation's meter and evaluator are dropped; the
/// one shared state it mutates, a composited variable's cache, is never borrowed across an
/// evaluation, so the variable that panicked is simply left uncomputed.
pub fn contain<T>(
    policy: &str,
    expression: &str,
    evaluate: impl FnOnce() -> Result<T, EvalError>,
) -> Result<T, EvalError> {
    install_quiet_hook();
    let containing = Containing::enter();
    let result = panic::catch_unwind(AssertUnwindSafe(evaluate));
    drop(containing);
    let payload = match result {
        Ok(r) => return r,
        Err(payload) => payload,
    };
    let message = panic_message(payload.as_ref()).to_string();
    CONTAINED_PANICS.fetch_add(1, Ordering::Relaxed);
    let location = PANIC_LOCATION.with(|p| p.borrow_mut().take());
    warn_once(policy, expression, &message, location.as_deref());
    Err(EvalError::new(format!("internal error: {message}")))
}

/// The first contained panic of each policy is logged. The set holds policy names, which
/// administrators choose, not requests: it grows with the policies installed, not traffic.
/// Returns whether this call logged.
fn warn_once(policy: &str, expression: &str, message: &str, location: Option<&str>) -> bool {
    static WARNED: Mutex<BTreeSet<String>> = Mutex::new(BTreeSet::new());
    let first = match WARNED.lock() {
        Ok(mut warned) => warned.insert(policy.to_string()),
        // A poisoned set still holds its names; nothing panics while holding it anyway.
        Err(poisoned) => poisoned.into_inner().insert(policy.to_string()),
    };
    if first {
        tracing::warn!(
            policy,
            expression,
            panic = message,
            location = location.unwrap_or("unknown"),
            "an expression panicked; it is this policy's evaluation error (internal error) \
             under its failurePolicy; further panics of this policy are not logged"
        );
    }
    first
}

fn runtime_error(expression: &str, e: &EvalError, kind: ErrorKind) -> ExprFailure {
    ExprFailure {
        message: format!("expression '{expression}' resulted in error: {e}"),
        kind,
    }
}

fn compile_error(e: &impl std::fmt::Display) -> ExprFailure {
    ExprFailure {
        message: format!("compilation error: {e}"),
        kind: ErrorKind::Compile,
    }
}

fn out_of_budget() -> ExprFailure {
    ExprFailure {
        message: OUT_OF_BUDGET.to_string(),
        kind: ErrorKind::OutOfBudget,
    }
}

/// An evaluation error: denied under Fail, admitted (but counted) under Ignore.
fn error_decision(policy: &CompiledPolicy, failure: ExprFailure) -> PolicyDecision {
    let action = if policy.failure_policy == FailurePolicy::Ignore {
        DecisionAction::Admit
    } else {
        DecisionAction::Deny
    };
    PolicyDecision {
        action,
        evaluation: Outcome::Error(failure.kind),
        message: failure.message,
        reason: None,
    }
}

/// Evaluates the policy for one param; `None` when its matchConditions exclude the request.
/// Also returns how many match conditions errored (for the metrics). Every expression stops
/// at `deadline`.
pub(crate) fn validate(
    policy: &CompiledPolicy,
    b: &GroupValues<'_>,
    deadline: &Deadline,
    probe: Option<&dyn Probe>,
) -> (Option<ParamResult>, u64) {
    let mut condition_errors = 0;
    if !policy.match_conditions.is_empty() {
        let (early, errors) = match_conditions(policy, &b.condition, deadline, probe);
        condition_errors = errors;
        if let Some(early) = early {
            return (early, condition_errors);
        }
    }
    (evaluate(policy, b, deadline, probe), condition_errors)
}

fn evaluate(
    policy: &CompiledPolicy,
    b: &GroupValues<'_>,
    deadline: &Deadline,
    probe: Option<&dyn Probe>,
) -> Option<ParamResult> {
    let mut decisions = validations(policy, b, deadline, probe);
    match audit_annotations(policy, &b.audit, deadline, probe) {
        Ok(audit) => Some(ParamResult { decisions, audit }),
        Err(failure) => {
            // An audit-annotation group failure replaces the whole result for this param.
            decisions.clear();
            decisions.push(error_decision(policy, failure));
            Some(ParamResult {
                decisions,
                audit: Vec::new(),
            })
        }
    }
}

/// Evaluates one mutation of a mutating policy (`patch.Patcher`): in its validation group
/// (variables, params, the authorizer), on a fresh 10,000,000 budget; a result or the
/// error as the API server words it.
pub(super) fn eval_mutation<'a>(
    policy: &CompiledPolicy,
    values: &[Value<'a>],
    program: &Program,
    index: usize,
    deadline: &Deadline,
    probe: Option<&dyn Probe>,
) -> Result<Value<'a>, ExprFailure> {
    let lazy = Lazy::new(policy, values, deadline, probe);
    let act = Act {
        values,
        lazy: Some(&lazy),
    };
    let mut budget = Budget(BUDGET, deadline);
    match budget.eval(policy, program, &act).inspect(|r| {
        probed(probe, policy, Site::Mutation, index, r, &act);
    }) {
        Err(OutOfBudget) => Err(out_of_budget()),
        Ok(Ok(v)) => Ok(v),
        Ok(Err((e, kind))) => Err(runtime_error(program.source(), &e, kind)),
    }
}

/// A compile error as its expression's failure (`compilation error: ...`).
pub(super) fn compile_failure(e: &impl std::fmt::Display) -> ExprFailure {
    compile_error(e)
}

/// `Some(result)` when the conditions decide (no match, or an error decision); `None` to go
/// on. With the number of conditions that errored.
pub(super) fn match_conditions(
    policy: &CompiledPolicy,
    values: &[Value<'_>],
    deadline: &Deadline,
    probe: Option<&dyn Probe>,
) -> (Option<Option<ParamResult>>, u64) {
    let act = Act { values, lazy: None };
    let mut budget = Budget(MATCH_CONDITIONS_BUDGET, deadline);
    let mut errors: Vec<ExprFailure> = Vec::new();
    let mut any_false = false;
    for (index, (_, compiled)) in policy.match_conditions.iter().enumerate() {
        match compiled {
            Err(e) => errors.push(compile_error(e)),
            Ok(program) => match budget.eval(policy, program, &act).inspect(|r| {
                probed(probe, policy, Site::MatchCondition, index, r, &act);
            }) {
                Err(OutOfBudget) => {
                    return (
                        Some(fail_or_skip(policy, out_of_budget())),
                        errors.len() as u64,
                    )
                }
                Ok(Ok(Value::Bool(true))) => {}
                Ok(Ok(Value::Bool(false))) => any_false = true,
                Ok(Ok(_)) => errors.push(runtime_error(
                    program.source(),
                    &EvalError::no_such_overload(),
                    ErrorKind::Invalid,
                )),
                Ok(Err((e, kind))) => errors.push(runtime_error(program.source(), &e, kind)),
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
    let mut unique: Vec<ExprFailure> = Vec::new();
    for e in errors {
        if !unique.iter().any(|u| u.message == e.message) {
            unique.push(e);
        }
    }
    let failure = match unique.as_slice() {
        [one] => one.clone(),
        many => {
            let messages: Vec<&str> = many.iter().map(|f| f.message.as_str()).collect();
            let kinds: Vec<ErrorKind> = many.iter().map(|f| f.kind).collect();
            ExprFailure {
                message: format!("[{}]", messages.join(", ")),
                kind: ErrorKind::joined(&kinds),
            }
        }
    };
    (Some(fail_or_skip(policy, failure)), count)
}

/// Under Fail, a single error decision; under Ignore, no match.
fn fail_or_skip(policy: &CompiledPolicy, failure: ExprFailure) -> Option<ParamResult> {
    if policy.failure_policy == FailurePolicy::Ignore {
        return None;
    }
    Some(ParamResult {
        decisions: vec![error_decision(policy, failure)],
        audit: Vec::new(),
    })
}

fn validations(
    policy: &CompiledPolicy,
    b: &GroupValues<'_>,
    deadline: &Deadline,
    probe: Option<&dyn Probe>,
) -> Vec<PolicyDecision> {
    let lazy = Lazy::new(policy, &b.validation, deadline, probe);
    let act = Act {
        values: &b.validation,
        lazy: Some(&lazy),
    };
    let mut budget = Budget(BUDGET, deadline);
    let mut results: Vec<Result<bool, ExprFailure>> = Vec::with_capacity(policy.validations.len());
    for (index, v) in policy.validations.iter().enumerate() {
        let r = match &v.program {
            Err(e) => Err(compile_error(e)),
            Ok(program) => match budget.eval(policy, program, &act).inspect(|r| {
                probed(probe, policy, Site::Validation, index, r, &act);
            }) {
                Err(OutOfBudget) => return vec![error_decision(policy, out_of_budget())],
                Ok(Ok(Value::Bool(ok))) => Ok(ok),
                Ok(Ok(_)) => Err(runtime_error(
                    &v.expression,
                    &EvalError::no_such_overload(),
                    ErrorKind::Invalid,
                )),
                Ok(Err((e, kind))) => Err(runtime_error(&v.expression, &e, kind)),
            },
        };
        results.push(r);
    }
    // Every messageExpression, passing validations included, on the budget that is left.
    let message_lazy = Lazy::new(policy, &b.message, deadline, probe);
    let message_act = Act {
        values: &b.message,
        lazy: Some(&message_lazy),
    };
    let mut messages: Vec<Option<String>> = Vec::with_capacity(policy.validations.len());
    let mut group_error: Option<String> = None;
    for v in &policy.validations {
        let m = match &v.message_program {
            Some(Ok(program)) if group_error.is_none() => {
                match budget.eval(policy, program, &message_act) {
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
                failed_message_expression(group_error.as_deref().unwrap_or("")),
            ),
            Ok(true) => PolicyDecision {
                action: DecisionAction::Admit,
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
                PolicyDecision {
                    action: DecisionAction::Deny,
                    evaluation: Outcome::Deny,
                    message,
                    reason,
                }
            }
        })
        .collect()
}

/// The error of every validation once the messageExpressions ran out of budget: as in-tree,
/// an ordinary error, not `out_of_budget`.
fn failed_message_expression(group_error: &str) -> ExprFailure {
    ExprFailure {
        message: format!("failed messageExpression: {group_error}"),
        kind: ErrorKind::Invalid,
    }
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
    probe: Option<&dyn Probe>,
) -> Result<Vec<AuditResult>, ExprFailure> {
    if policy.audit_annotations.is_empty() {
        return Ok(Vec::new());
    }
    let lazy = Lazy::new(policy, values, deadline, probe);
    let act = Act {
        values,
        lazy: Some(&lazy),
    };
    let mut budget = Budget(BUDGET, deadline);
    let mut out = Vec::new();
    let ignore = policy.failure_policy == FailurePolicy::Ignore;
    for (index, (key, compiled)) in policy.audit_annotations.iter().enumerate() {
        let error = match compiled {
            Err(e) => Some(compile_error(e)),
            Ok(program) => match budget.eval(policy, program, &act).inspect(|r| {
                probed(probe, policy, Site::AuditAnnotation, index, r, &act);
            }) {
                Err(OutOfBudget) => return Err(out_of_budget()),
                Ok(Ok(Value::String(s))) => {
                    let v = s.as_str().trim();
                    if !v.is_empty() {
                        out.push(AuditResult::Publish(key.clone(), v.to_string()));
                    }
                    None
                }
                Ok(Ok(Value::Null)) => None,
                Ok(Ok(other)) => Some(ExprFailure {
                    message: format!(
                        "valueExpression '{}' resulted in unsupported return type: {}. Return type must be either string or null.",
                        program.source(),
                        other.type_name()
                    ),
                    kind: ErrorKind::Invalid,
                }),
                Ok(Err((e, kind))) => Some(runtime_error(program.source(), &e, kind)),
            },
        };
        if let (Some(e), false) = (error, ignore) {
            out.push(AuditResult::Error(e));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limit_stops_are_not_ordinary_errors() {
        let expr = |e: &EvalError, stop| runtime_error("x.all(a, true)", e, ErrorKind::of(e, stop));
        let label = |f: ExprFailure| f.kind.label();
        assert_eq!(
            label(compile_error(&"undeclared reference")),
            "compile_error"
        );
        assert_eq!(label(out_of_budget()), "out_of_budget");
        assert_eq!(
            label(expr(&EvalError::Cancelled(CancelReason::CostLimit), None)),
            "out_of_budget"
        );
        assert_eq!(
            label(expr(&Deadline::interrupted(), None)),
            "deadline_exceeded"
        );
        // A composited variable's stop is an ordinary error value of the reading expression,
        // labelled by the stop.
        assert_eq!(
            label(expr(
                &EvalError::new(
                    "composited variable \"v\" fails to evaluate: operation interrupted"
                ),
                Some(CancelReason::Deadline)
            )),
            "deadline_exceeded"
        );
        assert_eq!(
            label(expr(&EvalError::Cancelled(CancelReason::MemoryLimit), None)),
            "memory_limit"
        );
        assert_eq!(
            label(expr(&EvalError::new("no such key: a"), None)),
            "invalid_error"
        );
        // As in-tree: a messageExpression that ran out of budget is an ordinary error.
        assert_eq!(
            label(failed_message_expression(OUT_OF_BUDGET)),
            "invalid_error"
        );
        // Joined match-condition errors: a limit among them, else invalid_error.
        assert_eq!(
            ErrorKind::joined(&[ErrorKind::Compile, ErrorKind::DeadlineExceeded]),
            ErrorKind::DeadlineExceeded
        );
        assert_eq!(
            ErrorKind::joined(&[ErrorKind::Compile, ErrorKind::Invalid]),
            ErrorKind::Invalid
        );
    }

    #[test]
    fn a_panic_becomes_the_expressions_error() {
        let before = contained_panics();
        let r: Result<(), EvalError> = contain("p-contain", "x", || panic!("boom {}", 7));
        assert_eq!(r.unwrap_err().message(), "internal error: boom 7");
        let r: Result<(), EvalError> = contain("p-contain", "x", || panic!("literal"));
        assert_eq!(r.unwrap_err().message(), "internal error: literal");
        assert!(contained_panics() >= before + 2);
        // Results and errors pass through unchanged, and the thread is usable afterwards.
        assert_eq!(contain("p-contain", "x", || Ok(5)).unwrap(), 5);
        let e: Result<(), EvalError> = contain("p-contain", "x", || Err(EvalError::new("e")));
        assert_eq!(e.unwrap_err().message(), "e");
        assert_eq!(CONTAINING.with(Cell::get), 0);
    }

    #[test]
    fn nested_containment_catches_at_the_innermost() {
        let outer = contain("p-nested", "outer", || {
            let inner: Result<u8, EvalError> = contain("p-nested", "inner", || panic!("deep"));
            assert_eq!(CONTAINING.with(Cell::get), 1);
            Ok(inner.unwrap_err().message().to_string())
        });
        assert_eq!(outer.unwrap(), "internal error: deep");
        assert_eq!(CONTAINING.with(Cell::get), 0);
    }

    #[test]
    fn the_hook_is_silent_for_contained_panics_and_records_where() {
        install_quiet_hook();
        let containing = Containing::enter();
        let r = panic::catch_unwind(|| panic!("quiet"));
        drop(containing);
        assert!(r.is_err());
        // The hook took the quiet branch (which alone records the location) rather than
        // printing through the previous hook.
        let location = PANIC_LOCATION.with(|p| p.borrow_mut().take());
        assert!(
            location
                .as_deref()
                .is_some_and(|l| l.contains("validator.rs")),
            "{location:?}"
        );
    }

    #[test]
    fn each_policy_is_warned_about_once() {
        assert!(warn_once("p-warn-once", "e", "m", None));
        assert!(!warn_once("p-warn-once", "e", "m", Some("f.rs:1")));
        assert!(warn_once("p-warn-other", "e", "m", None));
    }
}
