//! The Kubernetes CEL environment: parsing, checking, cost-metered evaluation and the
//! Kubernetes libraries, with cel-go's semantics.
//!
//! An expression is compiled once into an immutable [`Program`] (`Send + Sync`) against an
//! [`Env`] (Kubernetes version and declared variables), then evaluated many times against an
//! [`Activation`] that lends the request JSON in place. Evaluation never recurses deeper than
//! the parser's depth limit and is metered in cel-go's cost units.
//!
//! The root holds what compiling and evaluating takes: [`Env`] (with [`parse_k8s_version`],
//! [`NEWEST_MINOR`], [`OLDEST_MINOR`]), [`Program`], [`Value`], [`Type`], [`Activation`],
//! [`Meter`] and its limits, and the errors ([`CompileError`], [`EvalError`],
//! [`VersionError`]). The modules hold what a user meets beside them: [`vap`] (the variables
//! of a ValidatingAdmissionPolicy), [`mutation`] (what a MutatingAdmissionPolicy's mutations
//! add: the `Object` and `JSONPatch` types and their values), [`value`] (lists, maps, strings, library values),
//! [`json`] and [`deep_value`] (the documents values are read from), [`projection`] (which
//! parts of a document expressions can read), [`reads`] (the analysis that computes one from
//! a policy's expressions), [`time`], [`k8s`] (the Kubernetes library types and the authorizer interface), [`apimachinery`] (Kubernetes' name
//! rules, Go's quoting and durations), [`ast`] and [`lexer`] (for tools that analyse an
//! expression, such as a cost estimator).
//!
#![doc = include_str!("../README.md")]
// Unsafe code only where an item allows it (each block with its `SAFETY:` comment).
#![deny(unsafe_code)]
#![warn(missing_docs)]
#![warn(clippy::undocumented_unsafe_blocks)]

// The public modules: what a user of Kubernetes CEL meets beside the root items.
pub mod apimachinery;
pub mod ast;
pub mod deep_value;
pub mod json;
pub mod k8s;
pub mod lexer;
pub mod mutation;
pub mod projection;
pub mod reads;
pub mod time;
pub mod value;
pub mod vap;

// The language's machinery: reached through the root items below.
mod antlr;
mod checker;
mod ctx;
mod env;
mod error;
mod eval;
mod library;
mod meter;
mod overload;
mod parser;
mod program;
mod regex;
mod regex_flags;
mod regex_vm;
mod stdlib;
mod text;
mod types;
mod wellknown;

#[cfg(test)]
mod two_var_dyn_tests;

#[cfg(test)]
mod lazy_presence_tests;
#[cfg(test)]
mod parse_depth_tests;

pub use env::{
    parse_k8s_version, Env, LazyFields, VarKind, Variable, VersionError, NEWEST_MINOR,
    OLDEST_MINOR, VARIABLES_TYPE,
};
pub use error::{CancelReason, CompileError, EvalError, Issue, SyntaxError, MAX_ISSUES};
pub use eval::Activation;
pub use meter::{Meter, DEFAULT_MEMORY_LIMIT, PER_CALL_LIMIT};
pub use program::{Program, TypedAst};
pub use types::{ObjectType, Type};
pub use value::Value;

/// Not API: the library's function table and what calling one overload directly takes.
///
/// Hidden and exempt from compatibility: the root package's property tests
/// (`tests/library_no_panic.rs`, `tests/fuzz`) drive every overload of the registration
/// table with generated arguments, and generate expressions from the overloads' signatures.
/// They stay there because they exercise the whole pipeline (the engine, the review codec)
/// with the root package's proptest harness; nothing else should use these items.
#[doc(hidden)]
pub mod internals {
    pub use crate::ctx::Ctx;
    #[cfg(any(test, feature = "test-counters"))]
    pub use crate::env::{lazy_field_copies, reset_lazy_field_copies};
    pub use crate::library::functions;
    pub use crate::overload::{Cost, Function, Implementation, Overload};
    pub use crate::regex::RegexCache;
    pub use crate::types::{Bindings, Signature};
}
