//! The admission engine of celgate: what the API server's ValidatingAdmissionPolicy plugin
//! decides for a request, with no I/O. It knows no HTTP server, Kubernetes client or async
//! runtime; whatever may wait (a namespace lookup, the authorizer, a deadline) is passed in.
//!
//! Layers, each using only those above it (checked by `tests/layers.rs`):
//!
//! - [`model`]: the policy and binding API types as the API server stores them;
//! - [`matching`]: which requests a policy or binding applies to (`matchConstraints`,
//!   `matchResources`, selectors), following `admission/plugin/policy/matching`;
//! - [`policy`]: policies compiled against the CEL environment, and the immutable
//!   [`policy::snapshot::Snapshot`] the sources build;
//! - [`admission`]: a request evaluated against a snapshot, following
//!   `admission/plugin/policy/validating`;
//! - [`review`]: the `AdmissionReview` codec (v1, v1beta1) and manifests read as requests;
//! - [`crd`]: CustomResourceDefinition validation rules (`x-kubernetes-validations`), as the
//!   apiextensions-apiserver runs them;
//! - [`lint`]: the API server's type checking of policies (`status.typeChecking`), offline;
//! - [`scan`]: stored objects evaluated as their CREATE, and the policy reports of the
//!   results.
//!
//! The CEL language itself is the `celgate-cel` crate.

// Unsafe code only where an item allows it (each block with its `SAFETY:` comment).
#![deny(unsafe_code)]
// An item of a private module is `pub(crate)` unless the public surface re-exports it.
#![warn(unreachable_pub)]
#![warn(clippy::undocumented_unsafe_blocks)]

pub mod admission;
pub mod crd;
pub mod lint;
pub mod matching;
pub mod model;
pub mod policy;
pub mod review;
pub mod scan;
