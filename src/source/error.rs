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
    /// An object with unknown or duplicate fields (strict field validation): the API
    /// server's answer to `kubectl apply`, `<Kind> in version "<v>" cannot be handled as a
    /// <Kind>: strict decoding error: unknown field "spec.x", ...`.
    #[error(
        "{kind} in version {version:?} cannot be handled as a {kind}: {}",
        crate::model::strict::strict_decoding_error(errors)
    )]
    StrictDecoding {
        kind: String,
        /// The version of its apiVersion (`v1` of `admissionregistration.k8s.io/v1`).
        version: String,
        /// Each unknown or duplicate field, in the API server's words.
        errors: Vec<String>,
    },
    /// A policy or binding that fails validation (only when validating strictly).
    #[error("invalid {kind} {name:?}: {errors}")]
    Invalid {
        kind: String,
        name: String,
        errors: FieldErrors,
    },
}

impl ObjectError {
    /// The strict decoding error of `object`, whose fields `errors` (non-empty) found wrong.
    pub fn strict_decoding(object: &serde_json::Value, errors: Vec<String>) -> ObjectError {
        let api_version = object["apiVersion"].as_str().unwrap_or("");
        ObjectError::StrictDecoding {
            kind: object["kind"].as_str().unwrap_or("object").to_string(),
            version: api_version
                .rsplit_once('/')
                .map_or(api_version, |(_, v)| v)
                .to_string(),
            errors,
        }
    }
}
