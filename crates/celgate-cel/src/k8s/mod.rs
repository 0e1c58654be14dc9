//! The Kubernetes CEL libraries (`k8s.io/apiserver/pkg/cel/library`): each registers its
//! functions into the crate's function table.

pub mod authz;
mod format;
mod net;
mod quantity;
mod semver;
mod url;

pub use format::NamedFormat;
pub use net::{Cidr, Ip};
pub use quantity::{Format as QuantityFormat, Quantity};
pub use semver::{
    normalize_and_parse as normalize_and_parse_semver, parse as parse_semver, Part as SemverPart,
    Semver, SemverError,
};
pub use url::{parse_request_uri, parse_url, GoUrl, UrlError, UrlProblem};

use super::overload::Register;

/// Adds each Kubernetes library's functions: `add(name, [(signature, since)], imp, cost)`.
pub(crate) fn register(add: Register<'_>) {
    authz::register(add);
    format::register(add);
    net::register(add);
    quantity::register(add);
    semver::register(add);
    url::register(add);
}

pub(crate) use crate::apimachinery::quote::go_quote;
