//! Configuration errors: why a policy or binding that matches a request cannot be evaluated
//! for it. Each becomes `failed to configure policy|binding: <this>` under the policy's
//! failurePolicy (§7); the texts are the API server's.

use crate::matching::MatchError;
use crate::policy::compile::NoMatchConstraints;
use crate::policy::validate::FieldErrors;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// The policy has no matchConstraints (§2.6).
    #[error(transparent)]
    NoMatchConstraints(#[from] NoMatchConstraints),
    /// Its matchConstraints or matchResources cannot be decided (a namespace not found, a
    /// selector that does not compile).
    #[error(transparent)]
    Match(#[from] MatchError),
    /// The object fails the API server's validation (§7): its field errors, joined.
    #[error(transparent)]
    Invalid(FieldErrors),
    /// The policy's paramKind names a kind nothing is known of.
    #[error("failed to find resource referenced by paramKind: '{group}/{version}, Kind={kind}'")]
    ParamKindNotFound {
        group: String,
        version: String,
        kind: String,
    },
    /// The binding's paramRef names no namespace and the request is cluster-scoped.
    #[error(
        "cannot use namespaced paramRef in policy binding that matches cluster-scoped resources"
    )]
    NamespacedParamForClusterScoped,
    /// The param kind's objects are still being listed from the cluster.
    #[error("paramKind kind `&ParamKind{{APIVersion:{api_version},Kind:{kind},}}` not yet synced to use for admission")]
    ParamKindNotSynced { api_version: String, kind: String },
    /// The binding's paramRef names a namespace for a cluster-scoped param kind.
    #[error("paramRef.namespace must not be provided for a cluster-scoped `paramKind`")]
    NamespaceForClusterScopedParam,
    /// The binding's paramRef has both a name and a selector.
    #[error("paramRef.name and paramRef.selector are mutually exclusive")]
    NameAndSelector,
    /// The binding's paramRef has neither a name nor a selector.
    #[error("one of name or selector must be provided")]
    NoNameOrSelector,
    /// The policy matched through an equivalent resource whose version celgate cannot
    /// convert the object to (the API server's prefix, celgate's reason).
    #[error("failed to convert object version: {0}")]
    Conversion(super::convert::ConvertError),
    /// No param matched and the binding's parameterNotFoundAction is `Deny`.
    #[error("no params found for policy binding with `Deny` parameterNotFoundAction")]
    NoParams,
}
