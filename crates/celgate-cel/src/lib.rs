//! The Kubernetes CEL environment: parsing, checking, cost-metered evaluation and the
//! Kubernetes libraries, with cel-go's semantics.
//!
//! An expression is compiled once into an immutable [`Program`] (`Send + Sync`) against an
//! [`Env`] (Kubernetes version and declared variables), then evaluated many times against an
//! [`Activation`] that lends the request JSON in place. Evaluation never recurses deeper than
//! the parser's depth limit and is metered in cel-go's cost units.
//!
#![doc = include_str!("../README.md")]
// Unsafe code only where an item allows it (each block with its `SAFETY:` comment).
#![deny(unsafe_code)]
#![warn(clippy::undocumented_unsafe_blocks)]

pub mod apimachinery;
pub mod ast;
mod checker;
pub mod ctx;
pub mod deep_value;
pub mod env;
pub mod error;
pub mod eval;
pub mod json;
pub mod k8s;
pub mod lexer;
pub mod library;
pub mod meter;
pub mod overload;
pub mod parser;
pub mod program;
pub mod regex;
pub mod regex_vm;
pub mod stdlib;
pub mod text;
pub mod time;
pub mod types;
pub mod value;
pub mod vap;

pub use env::{parse_k8s_version, Env, NEWEST_MINOR, OLDEST_MINOR};
pub use error::{CancelReason, CompileError, EvalError};
pub use eval::Activation;
pub use meter::{Meter, DEFAULT_MEMORY_LIMIT, PER_CALL_LIMIT};
pub use program::Program;
pub use types::Type;
pub use value::Value;
