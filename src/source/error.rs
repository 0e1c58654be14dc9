//! Why one object read by a source cannot be added to a snapshot; a leaf of `source`, so that
//! the folder's load errors can carry it without depending on the module that builds
//! snapshots.

use crate::policy::validate::FieldErrors;

/// Why one object cannot be added to a snapshot.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ObjectError {
    /// A policy or binding whose fields do not have the API's types (serde's message).
    #[error("{0}")]
    Malformed(#[source] serde_json::Error),
    /// A policy or binding that fails validation (only when validating strictly).
    #[error("invalid {kind} {name:?}: {errors}")]
    Invalid {
        kind: String,
        name: String,
        errors: FieldErrors,
    },
}
