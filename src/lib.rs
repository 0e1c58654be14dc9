//! celgate: Kubernetes ValidatingAdmissionPolicy, enforced by an external validating
//! admission webhook.
//!
//! The engine (`cel`) does no I/O and knows nothing of HTTP or Kubernetes clients, so it is
//! testable on its own and usable from the command line. Data flows one way:
//! source -> policy (compile) -> snapshot -> matching -> admission -> server codec.

pub mod admission;
pub mod cel;
pub mod crd;
pub mod matching;
pub mod model;
pub mod policy;
pub mod review;
pub mod server;
pub mod source;
pub mod testing;
