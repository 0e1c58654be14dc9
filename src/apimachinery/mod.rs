//! Kubernetes and Go conventions that several layers share and that are not CEL: object-name
//! validation, Go's duration syntax and quoting, calendar arithmetic and X.509 validity times. A leaf: it uses nothing of the
//! crate, and `cel`, `policy`, `matching`, `crd`, `server` and the CLI use it.

pub mod civil;
pub mod duration;
pub mod names;
pub mod quote;
pub mod x509;
