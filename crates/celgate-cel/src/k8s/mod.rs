//! The Kubernetes CEL libraries (`k8s.io/apiserver/pkg/cel/library`): each registers its
//! functions into the table of [`super::library`] (see [`super::overload`]).

pub mod authz;
pub mod format;
pub mod net;
pub mod quantity;
pub mod semver;
pub mod url;

use super::overload::Register;

/// Adds each Kubernetes library's functions: `add(name, [(signature, since)], imp, cost)`.
pub fn register(add: Register<'_>) {
    authz::register(add);
    format::register(add);
    net::register(add);
    quantity::register(add);
    semver::register(add);
    url::register(add);
}

pub(crate) use crate::apimachinery::quote::go_quote;
