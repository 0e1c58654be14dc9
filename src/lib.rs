//! celgate: Kubernetes ValidatingAdmissionPolicy, enforced by an external validating
//! admission webhook.
//!
//! The engine (`cel`) does no I/O and knows nothing of HTTP or Kubernetes clients, so it is
//! testable on its own and usable from the command line. Data flows one way:
//! source -> policy (compile) -> snapshot -> matching -> admission -> server codec.

// Unsafe code only where an item allows it (each block with its `SAFETY:` comment).
#![deny(unsafe_code)]
#![warn(clippy::undocumented_unsafe_blocks)]

pub mod admission;
pub mod app;
pub mod cel;
pub mod crd;
pub mod matching;
pub mod policy;
pub mod server;
pub mod source;
pub mod testing;
