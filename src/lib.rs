//! celgate: Kubernetes ValidatingAdmissionPolicy, enforced by an external validating
//! admission webhook.
//!
//! Layers, each using only those above it (checked by `tests/layers.rs`):
//!
//! - [`apimachinery`]: Kubernetes and Go conventions that every layer shares (object-name
//!   validation with apimachinery's messages, Go durations, calendar arithmetic); it uses
//!   nothing of the crate;
//! - the engine, which does no I/O and knows no HTTP server, Kubernetes client or async
//!   runtime, so that it is testable on its own and reusable from any entry point:
//!   - [`cel`]: the CEL language and the Kubernetes CEL libraries;
//!   - [`policy`] (compile a policy, the [`policy::snapshot::Snapshot`]), [`matching`]
//!     (which requests a policy or binding applies to), [`admission`] (evaluate a request
//!     against a snapshot, and the AdmissionReview codec), [`crd`] (CRD validation rules);
//! - [`source`]: where the objects come from (a folder, or the cluster's watchers and the
//!   SubjectAccessReview authorizer); it builds snapshots with the engine;
//! - [`certs`]: the certificate controller, which keeps the serving certificate in a Secret,
//!   its CA in the webhook configuration, and rotates both; it hands the server PEM only;
//! - [`server`]: the webhook's HTTP service over a snapshot handle, a readiness flag and the
//!   metrics; it knows no source;
//! - [`testing`]: `celgate test`, policy test suites run on the engine over folder sources;
//! - [`scan`]: `celgate scan`, stored objects evaluated as their CREATE, and the policy
//!   reports of the results;
//! - [`lint`]: `celgate lint`, the API server's type checking of policies against the
//!   schemas of the kinds they match, offline;
//! - [`app`]: the composition root of `celgate serve`, the only layer that wires a source to
//!   the server (used by `main.rs` and the integration tests).
//!
//! Data flows one way: source -> policy (compile) -> snapshot -> matching -> admission ->
//! server codec.

// Unsafe code only where an item allows it (each block with its `SAFETY:` comment).
#![deny(unsafe_code)]
#![warn(clippy::undocumented_unsafe_blocks)]

pub mod admission;
pub mod apimachinery;
pub mod app;
pub mod cel;
pub mod certs;
pub mod crd;
pub mod lint;
pub mod matching;
pub mod model;
pub mod policy;
pub mod review;
pub mod scan;
pub mod server;
pub mod source;
pub mod testing;
