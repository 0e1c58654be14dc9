//! The Kubernetes CEL libraries (`k8s.io/apiserver/pkg/cel/library`): each registers its
//! functions into the table of [`super::library`].

pub mod net;

use super::library::{Cost, Imp};

/// Adds each Kubernetes library's functions: `add(name, [(signature, since)], imp, cost)`.
pub fn register(add: &mut dyn FnMut(&'static str, &[(&str, u16)], Imp, Cost)) {
    net::register(add);
}
