//! celgate: Kubernetes' native admission policies (ValidatingAdmissionPolicy), run outside
//! the API server by an external admission webhook, with the API server's semantics.
//!
//! This package is the outer floor of the workspace: everything that does I/O. The engine
//! below it is two crates that do none:
//!
//! - `celgate-cel` (re-exported as [`cel`], its Kubernetes and Go conventions as
//!   [`apimachinery`]): the CEL language, cel-go's cost and errors, the Kubernetes libraries;
//! - `celgate-engine` (re-exported at [`model`], [`matching`], [`policy`], [`admission`],
//!   [`review`], [`crd`], [`lint`], [`scan`]): what the API server decides for a request,
//!   the AdmissionReview codec, CRD validation rules, type checking, scans.
//!
//! Layers of this package, each using only those above it (checked by `tests/layers.rs`):
//!
//! - [`x509`]: the validity window of a certificate, shared by the server and the
//!   certificate controller;
//! - [`source`]: where the objects come from (a folder, or the cluster's watchers and the
//!   SubjectAccessReview authorizer); it builds snapshots with the engine, and writes the
//!   policy reports and Events of the cluster mode;
//! - [`certs`]: the certificate controller, which keeps the serving certificate in a Secret,
//!   its CA in the webhook configuration, and rotates both; it hands the server PEM only;
//! - [`server`]: the webhook's HTTP service over a snapshot handle, a readiness flag and the
//!   metrics; it knows no source;
//! - [`testing`]: `celgate test`, policy test suites run on the engine over folder sources;
//! - [`webhook`]: the webhook configuration's `rules` that the loaded bindings need, pure;
//! - [`app`]: the composition root of `celgate serve` and `celgate scan`, the only layer that
//!   wires a source to the server (used by `main.rs` and the integration tests).
//!
//! Data flows one way: source -> policy (compile) -> snapshot -> matching -> admission ->
//! review codec -> server.

// Unsafe code only where an item allows it (each block with its `SAFETY:` comment).
#![deny(unsafe_code)]
#![warn(clippy::undocumented_unsafe_blocks)]

// The engine crates at the paths the package had before the workspace split: the CLI, the
// sources and the tests name `celgate::cel::...` and `celgate::admission::...`.
#[doc(no_inline)]
pub use celgate_cel as cel;
#[doc(no_inline)]
pub use celgate_cel::apimachinery;
#[doc(no_inline)]
pub use celgate_engine::{admission, crd, lint, matching, model, mutating, policy, review, scan};

pub mod app;
pub mod certs;
pub mod server;
pub mod source;
pub mod testing;
pub mod webhook;
pub mod x509;
