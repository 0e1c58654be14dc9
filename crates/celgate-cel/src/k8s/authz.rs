//! Kubernetes' authz library (`library/authz.go`; compatibility 1.27, selectors 1.31).
//!
//! `authorizer.group(g).resource(r)...check(verb)` and `authorizer.path(p).check(verb)` build
//! authorization attributes and ask an [`Authorizer`]: the admission layer supplies one
//! (offline RBAC evaluation, or SubjectAccessReview in a cluster), so this module does no I/O.
//! A check costs 350,000, so at most two fit in one expression.

use std::any::Any;
use std::fmt;
use std::sync::Arc;

use crate::error::EvalError;
use crate::overload::{since, str_arg, Cost, Register, R};
use crate::value::{Opaque, Value};

/// Who a check is for: the request's user, or a service account chosen by
/// `authorizer.serviceAccount(namespace, name)`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Principal {
    /// The user who made the admission request.
    RequestUser,
    /// The service account `system:serviceaccount:<namespace>:<name>`.
    ServiceAccount {
        /// The service account's namespace.
        namespace: String,
        /// The service account's name.
        name: String,
    },
}

impl Principal {
    /// The user a check is made for: the request's user, or the service account's user as
    /// Kubernetes' `serviceAccount()` builds it (apiserver `ServiceAccountInfo.UserInfo()`):
    /// its two service-account groups only. `system:authenticated` is added by
    /// authentication, which this user never goes through (recorded from Kubernetes 1.32).
    pub fn user(&self, request_user: &UserInfo) -> UserInfo {
        match self {
            Principal::RequestUser => request_user.clone(),
            Principal::ServiceAccount { namespace, name } => UserInfo {
                username: format!("system:serviceaccount:{namespace}:{name}"),
                groups: vec![
                    "system:serviceaccounts".into(),
                    format!("system:serviceaccounts:{namespace}"),
                ],
                ..UserInfo::default()
            },
        }
    }
}

/// What is being authorized.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Target {
    /// A non-resource URL.
    Path(String),
    /// A resource (`authorizer.group(g).resource(r)...`).
    Resource(ResourceAttributes),
}

/// The resource a check is about, as Kubernetes' `authorizer.AttributesRecord` holds it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct ResourceAttributes {
    /// The API group (`""` for the core group).
    pub group: String,
    /// The resource (plural name).
    pub resource: String,
    /// The subresource, if any.
    pub subresource: String,
    /// Empty for cluster scope.
    pub namespace: String,
    /// The object's name; empty for every object.
    pub name: String,
    /// Raw selector text; parsing (and reporting parse errors) is the authorizer's business,
    /// as in Kubernetes.
    pub field_selector: Option<String>,
    /// Raw label selector text (`labelSelector`), as the field selector.
    pub label_selector: Option<String>,
}

/// The attributes of one check (API version is always `*`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Attributes {
    /// Who the check is for.
    pub principal: Principal,
    /// The verb (`get`, `create`, ...).
    pub verb: String,
    /// What is being authorized.
    pub target: Target,
}

/// An authorizer's decision, as Kubernetes' `authorizer.Decision`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Allowed.
    Allow,
    /// Denied.
    Deny,
    /// No opinion: the check is not allowed.
    NoOpinion,
}

/// An authorizer's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// The decision.
    pub verdict: Verdict,
    /// Why, as the authorizer says it.
    pub reason: String,
    /// Set when the authorizer failed; `errored()` is then true.
    pub error: Option<String>,
}

/// Why an authorizer gave no decision. The check is then the CEL error
/// `authorizer error: <this>`, which the policy's failurePolicy handles, rather than a silent
/// denial.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AuthorizeError {
    /// The backend that answers checks could not be asked or did not answer (a
    /// SubjectAccessReview that failed or timed out); shows, and is sourced by, the backend's
    /// own error, which the engine cannot name.
    #[error(transparent)]
    Unavailable(Box<dyn std::error::Error + Send + Sync>),
}

/// Answers authorization checks for one admission request. `Err` means the authorizer could
/// not be asked (see [`AuthorizeError`]).
pub trait Authorizer: Send + Sync + fmt::Debug {
    /// Decides one check.
    fn authorize(&self, attributes: &Attributes) -> Result<Decision, AuthorizeError>;
}

/// The user an admission request is made by (`request.userInfo`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct UserInfo {
    /// `request.userInfo.username`.
    pub username: String,
    /// `request.userInfo.uid`.
    pub uid: String,
    /// `request.userInfo.groups`.
    pub groups: Vec<String>,
    /// `request.userInfo.extra`.
    pub extra: std::collections::BTreeMap<String, Vec<String>>,
}

/// Makes the [`Authorizer`] for one request's user: a cluster connection (SubjectAccessReview)
/// supplies one through the snapshot; without one the admission layer evaluates RBAC objects.
pub trait AuthorizerFactory: Send + Sync + fmt::Debug {
    /// The authorizer of checks made for `user`.
    fn for_user(&self, user: &UserInfo) -> Arc<dyn Authorizer>;
}

/// The `authorizer` variable.
#[derive(Debug, Clone)]
pub struct AuthorizerValue {
    backend: Arc<dyn Authorizer>,
    principal: Principal,
}

impl AuthorizerValue {
    /// The `authorizer` of a request, answered by `backend`.
    pub fn new(backend: Arc<dyn Authorizer>) -> Self {
        AuthorizerValue {
            backend,
            principal: Principal::RequestUser,
        }
    }

    /// `authorizer.requestResource`: a resource check preset with the request's resource.
    pub fn request_resource(&self, attrs: ResourceAttributes) -> ResourceCheck {
        ResourceCheck {
            authz: self.clone(),
            attrs,
        }
    }
}

/// `authorizer.path(p)`: a check of a non-resource URL.
#[derive(Debug, Clone)]
pub struct PathCheck {
    authz: AuthorizerValue,
    path: String,
}

/// `authorizer.group(g)`: a resource check being built.
#[derive(Debug, Clone)]
pub struct GroupCheck {
    authz: AuthorizerValue,
    group: String,
}

/// `authorizer.group(g).resource(r)` and what follows: a resource check.
#[derive(Debug, Clone)]
pub struct ResourceCheck {
    authz: AuthorizerValue,
    attrs: ResourceAttributes,
}

macro_rules! opaque {
    ($t:ty, $name:literal) => {
        impl Opaque for $t {
            fn type_name(&self) -> &'static str {
                $name
            }
            fn equals(&self, _: &dyn Opaque) -> bool {
                false
            }
            // `receiverOnlyObjectVal.Equal` expects its own embedded type, which no value is.
            fn comparable(&self) -> bool {
                false
            }
            fn as_any(&self) -> &dyn Any {
                self
            }
        }
    };
}

opaque!(AuthorizerValue, "kubernetes.authorization.Authorizer");
opaque!(PathCheck, "kubernetes.authorization.PathCheck");
opaque!(GroupCheck, "kubernetes.authorization.GroupCheck");
opaque!(ResourceCheck, "kubernetes.authorization.ResourceCheck");
opaque!(Decision, "kubernetes.authorization.Decision");

fn get<T: Opaque + Clone>(v: &Value<'_>) -> Result<T, EvalError> {
    v.as_opaque::<T>()
        .cloned()
        .ok_or_else(EvalError::no_such_overload)
}

fn path<'a>(a: &[Value<'a>]) -> R<'a> {
    let authz: AuthorizerValue = get(&a[0])?;
    let p = str_arg(&a[1])?;
    if p.trim().is_empty() {
        return Err(EvalError::new("path must not be empty"));
    }
    Ok(Value::opaque(PathCheck {
        authz,
        path: p.to_string(),
    }))
}

fn group<'a>(a: &[Value<'a>]) -> R<'a> {
    let authz: AuthorizerValue = get(&a[0])?;
    Ok(Value::opaque(GroupCheck {
        authz,
        group: str_arg(&a[1])?.to_string(),
    }))
}

fn service_account<'a>(a: &[Value<'a>]) -> R<'a> {
    let authz: AuthorizerValue = get(&a[0])?;
    let namespace = str_arg(&a[1])?;
    let name = str_arg(&a[2])?;
    if !crate::apimachinery::names::dns1123_subdomain(name).is_empty() {
        return Err(EvalError::new("Invalid service account name"));
    }
    if !crate::apimachinery::names::dns1123_label(namespace).is_empty() {
        return Err(EvalError::new("Invalid service account namespace"));
    }
    let principal = Principal::ServiceAccount {
        namespace: namespace.to_string(),
        name: name.to_string(),
    };
    Ok(Value::opaque(AuthorizerValue {
        backend: authz.backend,
        principal,
    }))
}

fn resource<'a>(a: &[Value<'a>]) -> R<'a> {
    let g: GroupCheck = get(&a[0])?;
    let r = str_arg(&a[1])?;
    if r.trim().is_empty() {
        return Err(EvalError::new("resource must not be empty"));
    }
    let attrs = ResourceAttributes {
        group: g.group,
        resource: r.to_string(),
        ..Default::default()
    };
    Ok(Value::opaque(ResourceCheck {
        authz: g.authz,
        attrs,
    }))
}

fn with_field<'a>(a: &[Value<'a>], set: fn(&mut ResourceAttributes, String)) -> R<'a> {
    let mut check: ResourceCheck = get(&a[0])?;
    set(&mut check.attrs, str_arg(&a[1])?.to_string());
    Ok(Value::opaque(check))
}

fn subresource<'a>(a: &[Value<'a>]) -> R<'a> {
    with_field(a, |r, v| r.subresource = v)
}

fn namespace<'a>(a: &[Value<'a>]) -> R<'a> {
    with_field(a, |r, v| r.namespace = v)
}

fn name<'a>(a: &[Value<'a>]) -> R<'a> {
    with_field(a, |r, v| r.name = v)
}

fn field_selector<'a>(a: &[Value<'a>]) -> R<'a> {
    with_field(a, |r, v| r.field_selector = Some(v))
}

fn label_selector<'a>(a: &[Value<'a>]) -> R<'a> {
    with_field(a, |r, v| r.label_selector = Some(v))
}

fn check<'a>(a: &[Value<'a>]) -> R<'a> {
    let verb = str_arg(&a[1])?.to_string();
    let (authz, target) = if let Some(p) = a[0].as_opaque::<PathCheck>() {
        (&p.authz, Target::Path(p.path.clone()))
    } else if let Some(r) = a[0].as_opaque::<ResourceCheck>() {
        (&r.authz, Target::Resource(r.attrs.clone()))
    } else {
        return Err(EvalError::no_such_overload());
    };
    let attributes = Attributes {
        principal: authz.principal.clone(),
        verb,
        target,
    };
    match authz.backend.authorize(&attributes) {
        Ok(decision) => Ok(Value::opaque(decision)),
        Err(e) => Err(EvalError::new(format!("authorizer error: {e}"))),
    }
}

fn allowed<'a>(a: &[Value<'a>]) -> R<'a> {
    Ok(Value::Bool(
        get::<Decision>(&a[0])?.verdict == Verdict::Allow,
    ))
}

fn reason<'a>(a: &[Value<'a>]) -> R<'a> {
    Ok(Value::string(get::<Decision>(&a[0])?.reason))
}

fn errored<'a>(a: &[Value<'a>]) -> R<'a> {
    Ok(Value::Bool(get::<Decision>(&a[0])?.error.is_some()))
}

fn error<'a>(a: &[Value<'a>]) -> R<'a> {
    Ok(Value::string(
        get::<Decision>(&a[0])?.error.unwrap_or_default(),
    ))
}

fn cost_check(_: &[Value<'_>]) -> u64 {
    350_000
}

/// Kubernetes' `selectorCostEstimate` on the actual length: a list (10), a traversal
/// (0.1 a character) and a requirement every two characters (each a list and a struct, 50),
/// each factor rounded up on its own.
fn cost_selector(a: &[Value<'_>]) -> u64 {
    let len = a.get(1).map_or(0, |s| s.cost_size()) as f64;
    let parse = (0.1 * len).ceil();
    let requirements = (0.5 * len).ceil();
    (10.0 + parse + (requirements * 50.0).ceil()) as u64
}

/// The CEL type name of the `authorizer` variable.
pub const AUTHORIZER: &str = "kubernetes.authorization.Authorizer";
/// The CEL type name of a resource check (`authorizer.requestResource`).
pub const RESOURCE_CHECK: &str = "kubernetes.authorization.ResourceCheck";

pub(crate) fn register(add: Register<'_>) {
    let v = since::AUTHZ;
    add(
        "path",
        &[(
            "kubernetes.authorization.Authorizer.(string) kubernetes.authorization.PathCheck",
            v,
        )],
        path,
        Cost::One,
    );
    add(
        "group",
        &[(
            "kubernetes.authorization.Authorizer.(string) kubernetes.authorization.GroupCheck",
            v,
        )],
        group,
        Cost::One,
    );
    add(
        "serviceAccount",
        &[("kubernetes.authorization.Authorizer.(string, string) kubernetes.authorization.Authorizer", v)],
        service_account,
        Cost::One,
    );
    add(
        "resource",
        &[(
            "kubernetes.authorization.GroupCheck.(string) kubernetes.authorization.ResourceCheck",
            v,
        )],
        resource,
        Cost::One,
    );
    let builder = [(
        "kubernetes.authorization.ResourceCheck.(string) kubernetes.authorization.ResourceCheck",
        v,
    )];
    add("subresource", &builder, subresource, Cost::One);
    add("namespace", &builder, namespace, Cost::One);
    add("name", &builder, name, Cost::One);
    let selectors = [(builder[0].0, since::AUTHZ_SELECTORS)];
    add(
        "fieldSelector",
        &selectors,
        field_selector,
        Cost::Custom(cost_selector),
    );
    add(
        "labelSelector",
        &selectors,
        label_selector,
        Cost::Custom(cost_selector),
    );
    add(
        "check",
        &[
            (
                "kubernetes.authorization.PathCheck.(string) kubernetes.authorization.Decision",
                v,
            ),
            (
                "kubernetes.authorization.ResourceCheck.(string) kubernetes.authorization.Decision",
                v,
            ),
        ],
        check,
        Cost::Custom(cost_check),
    );
    add(
        "allowed",
        &[("kubernetes.authorization.Decision.() bool", v)],
        allowed,
        Cost::One,
    );
    add(
        "reason",
        &[("kubernetes.authorization.Decision.() string", v)],
        reason,
        Cost::One,
    );
    add(
        "errored",
        &[("kubernetes.authorization.Decision.() bool", v)],
        errored,
        Cost::One,
    );
    add(
        "error",
        &[("kubernetes.authorization.Decision.() string", v)],
        error,
        Cost::One,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_service_account_principal_has_only_its_service_account_groups() {
        let someone = UserInfo {
            username: "alice".into(),
            groups: vec!["system:authenticated".into()],
            ..UserInfo::default()
        };
        let sa = Principal::ServiceAccount {
            namespace: "ci".into(),
            name: "deployer".into(),
        }
        .user(&someone);
        assert_eq!(sa.username, "system:serviceaccount:ci:deployer");
        assert_eq!(
            sa.groups,
            ["system:serviceaccounts", "system:serviceaccounts:ci"]
        );
        assert_eq!(Principal::RequestUser.user(&someone), someone);
    }
}
