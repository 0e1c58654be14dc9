//! Kubernetes and Go conventions that the CEL libraries and the admission engine share and
//! that are not CEL themselves: object-name validation with apimachinery's messages
//! (`k8s.io/apimachinery/pkg/util/validation`), Go's duration syntax and quoting, calendar
//! arithmetic. A leaf: it uses nothing else of the crate.

pub mod civil;
pub mod duration;
pub mod names;
pub mod quote;
