//! CustomResourceDefinition validation offline (issue 14): the structural schema model, the
//! structural checks, the mapping of a schema to CEL types, compilation of the
//! `x-kubernetes-validations` rules at their schema locations, and the runtime path of a
//! create (defaulting, pruning, OpenAPI value validation, CEL rules) with the API server's
//! error texts and field paths.

pub mod cli;
mod cost;
mod defaults;
pub mod errors;
mod prune;
pub mod request;
pub mod rules;
pub mod schema;
mod structural;
pub(crate) mod types;
mod validate;

pub use errors::{Cause, Status};
pub use rules::{CompiledCrd, CrdInfo};
pub use schema::{parse_crd, Crd, CrdError, Schema};
