//! What one evaluation may wait on or spend besides the snapshot, passed to
//! [`super::admit`] explicitly: the services that do I/O (the namespace lookup, the
//! authorizer), and the limits (the deadline, memory per expression). The snapshot itself is
//! pure data, so an engine entry point's signature shows everything it may wait on.

use std::cell::Cell;
use std::sync::Arc;
use std::time::Instant;

use serde_json::Value as Json;

use crate::policy::snapshot::NamespaceEntry;
use celgate_cel::k8s::authz::AuthorizerFactory;
use celgate_cel::{CancelReason, EvalError, Meter};

/// Finds a namespace the snapshot does not have yet, as the API server falls back from its
/// informer to a live GET: a namespace created a moment before the request (`kubectl apply`
/// of a namespace and its workloads) would otherwise be "not found".
pub trait NamespaceLookup: Send + Sync + std::fmt::Debug {
    /// The Namespace object, or `None` when it does not exist (or cannot be read).
    fn get(&self, name: &str) -> Option<Json>;

    /// The namespace as the evaluation reads it (labels, `namespaceObject`); a lookup whose
    /// answers do not change keeps them, rather than building one per request.
    fn entry(&self, name: &str) -> Option<Arc<NamespaceEntry>> {
        self.get(name)
            .map(|o| Arc::new(NamespaceEntry::new(Arc::new(o))))
    }

    /// Whether a lookup may wait on I/O (a live GET): the server then never evaluates on an
    /// async worker. A lookup that answers from memory says `false`.
    fn may_wait(&self) -> bool {
        true
    }
}

/// The live services an evaluation may call (and wait on), built once by whoever wires the
/// sources (the server in a cluster); none offline.
#[derive(Debug, Clone, Default)]
pub struct Services {
    /// Answers `authorizer` checks in a cluster (SubjectAccessReview); `None`: the snapshot's
    /// RBAC objects, evaluated offline.
    pub authorizer: Option<Arc<dyn AuthorizerFactory>>,
    /// Reads namespaces missing from the snapshot from the cluster.
    pub namespace_lookup: Option<Arc<dyn NamespaceLookup>>,
}

impl Services {
    /// Whether an evaluation calling these services may wait on I/O (the cluster's
    /// authorizer, a namespace lookup that may GET).
    pub fn may_wait(&self) -> bool {
        self.authorizer.is_some() || self.namespace_lookup.as_ref().is_some_and(|l| l.may_wait())
    }
}

/// No services: the offline engine (`celgate eval`, `celgate test`, tests).
static NO_SERVICES: Services = Services {
    authorizer: None,
    namespace_lookup: None,
};

/// Everything one review's evaluation may wait on or spend: the live services and the
/// limits.
#[derive(Debug, Clone, Copy)]
pub struct AdmitContext<'s> {
    /// What the evaluation may call (none by default).
    pub services: &'s Services,
    /// What it may spend (by default no deadline, the API server's per-expression limits).
    pub limits: EvalLimits,
}

impl Default for AdmitContext<'static> {
    /// No services and the default limits.
    fn default() -> Self {
        AdmitContext {
            services: &NO_SERVICES,
            limits: EvalLimits::default(),
        }
    }
}

/// When the evaluation of a request must stop (the API server's `?timeout=`), shared by every
/// expression evaluated for it. Every meter carries the instant, so that comprehensions stop
/// at it; once an expression was stopped, the remaining expressions are not run and the
/// remaining (policy, binding, param) evaluations are skipped: past the deadline nobody waits
/// for the answer, and the evaluation thread is needed by other reviews.
#[derive(Debug, Default)]
pub struct Deadline {
    at: Option<Instant>,
    passed: Cell<bool>,
    /// The memory ceiling every meter of the request carries.
    memory_limit: u64,
}

/// What one review's evaluation may spend besides cel-go's cost units: the instant it must be
/// decided by, and the bytes one expression's evaluation may build.
#[derive(Debug, Clone, Copy)]
pub struct EvalLimits {
    /// The API server's `?timeout=` (none for `celgate eval`).
    pub deadline: Option<Instant>,
    /// Bytes one expression may build ([`celgate_cel::DEFAULT_MEMORY_LIMIT`] by default);
    /// also the bytes one JSON patch of a mutation may copy (its `copy` operations).
    pub memory_per_expression: u64,
    /// How deep an object and an apply configuration may nest for a mutation's merge
    /// ([`crate::mutating::DEFAULT_MAX_APPLY_DEPTH`] by default); deeper is the policy's
    /// error (the merge walks recursively).
    pub max_apply_depth: usize,
}

impl Default for EvalLimits {
    fn default() -> Self {
        EvalLimits {
            deadline: None,
            memory_per_expression: celgate_cel::DEFAULT_MEMORY_LIMIT,
            max_apply_depth: crate::mutating::DEFAULT_MAX_APPLY_DEPTH,
        }
    }
}

impl Deadline {
    pub fn new(limits: &EvalLimits) -> Deadline {
        Deadline {
            at: limits.deadline,
            passed: Cell::new(false),
            memory_limit: limits.memory_per_expression,
        }
    }

    /// A meter with `limit` that stops at the deadline.
    pub fn meter(&self, limit: u64) -> Meter {
        let mut meter = Meter::with_limit(limit);
        meter.deadline = self.at;
        meter.memory_limit = self.memory_limit;
        meter
    }

    /// Whether an evaluation was already stopped by the deadline.
    pub fn passed(&self) -> bool {
        self.passed.get()
    }

    /// Notes an evaluation error: a cancellation past the deadline marks it passed. The clock
    /// is read only for cancellations, never on the way of a normal evaluation.
    pub fn note(&self, e: &EvalError) {
        if e.is_cancelled() && self.at.is_some_and(|d| Instant::now() >= d) {
            self.passed.set(true);
        }
    }

    /// Whether `now` is past the deadline (marking it passed).
    pub(super) fn reached(&self, now: Instant) -> bool {
        if self.at.is_some_and(|d| now >= d) {
            self.passed.set(true);
        }
        self.passed.get()
    }

    /// The error of an expression not run because the deadline passed.
    pub fn interrupted() -> EvalError {
        EvalError::Cancelled(CancelReason::Deadline)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_deadline_is_seen_only_on_cancellations() {
        let none = Deadline::new(&EvalLimits::default());
        assert_eq!(none.meter(7).deadline, None);
        none.note(&EvalError::cost_limit());
        assert!(!none.passed());
        let past = Deadline::new(&EvalLimits {
            deadline: Some(Instant::now()),
            ..EvalLimits::default()
        });
        assert!(past.meter(7).deadline.is_some());
        past.note(&EvalError::new("no such key: a"));
        assert!(
            !past.passed(),
            "an ordinary error says nothing of the deadline"
        );
        past.note(&Deadline::interrupted());
        assert!(past.passed());
    }
}
