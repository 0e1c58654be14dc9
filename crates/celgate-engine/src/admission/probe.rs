//! An opt-in observer of expression results, for `celgate test --coverage`: which
//! matchConditions, variables, validations and audit annotations an evaluation ran and what
//! each gave. Only `celgate test` passes one (in [`super::AdmitOptions::probe`]); the webhook's path passes none, so it
//! costs one untaken branch per expression and no allocation.

/// Which list of the policy an expression belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Site {
    MatchCondition,
    Variable,
    Validation,
    AuditAnnotation,
    /// A MutatingAdmissionPolicy's mutation.
    Mutation,
}

/// What one evaluation of an expression gave.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Seen {
    True,
    False,
    /// A value that is not a boolean (an audit annotation's string or null, a variable).
    Value,
    /// An evaluation error (a cancellation included).
    Error,
}

impl Seen {
    /// What a probe records of an evaluation's result.
    pub fn of<T>(r: &Result<celgate_cel::Value<'_>, T>) -> Seen {
        match r {
            Ok(celgate_cel::Value::Bool(true)) => Seen::True,
            Ok(celgate_cel::Value::Bool(false)) => Seen::False,
            Ok(_) => Seen::Value,
            Err(_) => Seen::Error,
        }
    }
}

/// Told about every expression evaluated; `index` is the expression's position in its list
/// of the policy's spec, `activation` what it was evaluated against (so that a probe can
/// evaluate parts of it too: the cost of variables that reads is not charged to the policy).
pub trait Probe {
    fn seen<'a>(
        &self,
        policy: &str,
        site: Site,
        index: usize,
        seen: Seen,
        activation: &dyn celgate_cel::Activation<'a>,
    );
}
