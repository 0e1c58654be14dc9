//! `authorizer` checks in a cluster: a SubjectAccessReview for the request's user (name, uid,
//! groups, extra) or for the service account an expression names, with a short-lived cache
//! and a timeout.
//!
//! The evaluator is synchronous and runs on blocking threads; a check hands the request to
//! the tokio runtime and waits for its answer, up to the timeout. A review that
//! fails or times out is an error, which makes the check a CEL error handled by the policy's
//! failurePolicy: an unreachable API server never silently reads as "not allowed".

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::authorization::v1::{
    FieldSelectorAttributes, LabelSelectorAttributes, NonResourceAttributes,
    ResourceAttributes as SarResource, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::api::PostParams;
use kube::{Api, Client};

use super::CallError;
use crate::cel::k8s::authz::{
    Attributes, AuthorizeError, Authorizer, AuthorizerFactory, Decision, Target, UserInfo, Verdict,
};

/// Settings of the SubjectAccessReview authorizer.
#[derive(Debug, Clone)]
pub struct SarOptions {
    /// How long an answer is reused for the same user and attributes.
    pub cache_ttl: Duration,
    /// Answers kept at most; the cache is emptied when it would grow past this.
    pub cache_entries: usize,
    /// Time one review may take.
    pub timeout: Duration,
}

impl Default for SarOptions {
    fn default() -> Self {
        SarOptions {
            cache_ttl: Duration::from_secs(10),
            cache_entries: 10_000,
            timeout: Duration::from_secs(2),
        }
    }
}

type Key = (UserInfo, Attributes);

/// Asks the API server; shared by every request.
#[derive(Debug)]
pub struct SarAuthorizer {
    inner: Arc<Inner>,
}

struct Inner {
    client: Client,
    runtime: tokio::runtime::Handle,
    options: SarOptions,
    cache: Mutex<HashMap<Key, (Instant, Decision)>>,
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SarAuthorizer")
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl SarAuthorizer {
    /// Must be called on a tokio runtime, which will send the reviews.
    pub fn new(client: Client, options: SarOptions) -> Arc<SarAuthorizer> {
        Arc::new(SarAuthorizer {
            inner: Arc::new(Inner {
                client,
                runtime: tokio::runtime::Handle::current(),
                options,
                cache: Mutex::default(),
            }),
        })
    }
}

impl Inner {
    fn cached(&self, key: &Key) -> Option<Decision> {
        let cache = super::lock(&self.cache);
        let (at, decision) = cache.get(key)?;
        (at.elapsed() < self.options.cache_ttl).then(|| decision.clone())
    }

    fn remember(&self, key: Key, decision: Decision) {
        let mut cache = super::lock(&self.cache);
        if cache.len() >= self.options.cache_entries {
            let ttl = self.options.cache_ttl;
            cache.retain(|_, (at, _)| at.elapsed() < ttl);
            if cache.len() >= self.options.cache_entries {
                cache.clear();
            }
        }
        cache.insert(key, (Instant::now(), decision));
    }

    fn review(&self, user: &UserInfo, attributes: &Attributes) -> Result<Decision, CallError> {
        let key = (user.clone(), attributes.clone());
        if let Some(d) = self.cached(&key) {
            return Ok(d);
        }
        let review = subject_access_review(user, attributes);
        let api: Api<SubjectAccessReview> = Api::all(self.client.clone());
        let answer = super::blocking::call(
            &self.runtime,
            self.options.timeout,
            "SubjectAccessReview",
            async move { api.create(&PostParams::default(), &review).await },
        )?;
        let status = answer.status.unwrap_or_default();
        let verdict = if status.allowed {
            Verdict::Allow
        } else if status.denied == Some(true) {
            Verdict::Deny
        } else {
            Verdict::NoOpinion
        };
        let decision = Decision {
            verdict,
            reason: status.reason.unwrap_or_default(),
            error: status.evaluation_error.filter(|e| !e.is_empty()),
        };
        self.remember(key, decision.clone());
        Ok(decision)
    }
}

/// The review the API server would make for `attributes` by `user` (API version `*`).
pub fn subject_access_review(user: &UserInfo, attributes: &Attributes) -> SubjectAccessReview {
    let user = attributes.principal.user(user);
    let some = |s: &str| (!s.is_empty()).then(|| s.to_string());
    let (resource_attributes, non_resource_attributes) = match &attributes.target {
        Target::Path(path) => (
            None,
            Some(NonResourceAttributes {
                path: Some(path.clone()),
                verb: Some(attributes.verb.clone()),
            }),
        ),
        Target::Resource(r) => (
            Some(SarResource {
                group: Some(r.group.clone()),
                version: Some("*".into()),
                resource: some(&r.resource),
                subresource: some(&r.subresource),
                namespace: some(&r.namespace),
                name: some(&r.name),
                verb: Some(attributes.verb.clone()),
                field_selector: r.field_selector.as_ref().map(|s| FieldSelectorAttributes {
                    raw_selector: Some(s.clone()),
                    requirements: None,
                }),
                label_selector: r.label_selector.as_ref().map(|s| LabelSelectorAttributes {
                    raw_selector: Some(s.clone()),
                    requirements: None,
                }),
            }),
            None,
        ),
    };
    SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            uid: some(&user.uid),
            user: Some(user.username),
            groups: (!user.groups.is_empty()).then_some(user.groups),
            extra: (!user.extra.is_empty()).then_some(user.extra),
            resource_attributes,
            non_resource_attributes,
        },
        ..Default::default()
    }
}

impl AuthorizerFactory for SarAuthorizer {
    fn for_user(&self, user: &UserInfo) -> Arc<dyn Authorizer> {
        Arc::new(ForUser {
            user: user.clone(),
            sar: self.inner.clone(),
        })
    }
}

/// One request's view of the authorizer.
#[derive(Debug)]
struct ForUser {
    user: UserInfo,
    sar: Arc<Inner>,
}

impl Authorizer for ForUser {
    fn authorize(&self, attributes: &Attributes) -> Result<Decision, AuthorizeError> {
        self.sar
            .review(&self.user, attributes)
            .map_err(|e| AuthorizeError::Unavailable(Box::new(e)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cel::k8s::authz::{Principal, ResourceAttributes};

    fn alice() -> UserInfo {
        UserInfo {
            username: "alice".into(),
            uid: "a-1".into(),
            groups: vec!["devs".into()],
            extra: [("scopes".to_string(), vec!["s1".to_string()])]
                .into_iter()
                .collect(),
        }
    }

    #[test]
    fn a_service_account_check_reviews_the_account_not_the_user() {
        let review = subject_access_review(
            &alice(),
            &Attributes {
                principal: Principal::ServiceAccount {
                    namespace: "team".into(),
                    name: "bot".into(),
                },
                verb: "list".into(),
                target: Target::Resource(ResourceAttributes {
                    resource: "secrets".into(),
                    namespace: "team".into(),
                    label_selector: Some("app=web".into()),
                    ..Default::default()
                }),
            },
        );
        let spec = serde_json::to_value(&review.spec).unwrap();
        assert_eq!(
            spec,
            serde_json::json!({
                "user": "system:serviceaccount:team:bot",
                "groups": ["system:serviceaccounts", "system:serviceaccounts:team"],
                "resourceAttributes": {"group": "", "version": "*", "resource": "secrets", "namespace": "team", "verb": "list", "labelSelector": {"rawSelector": "app=web"}}
            })
        );
    }

    #[test]
    fn a_path_check_is_a_non_resource_review() {
        let review = subject_access_review(
            &alice(),
            &Attributes {
                principal: Principal::RequestUser,
                verb: "get".into(),
                target: Target::Path("/healthz".into()),
            },
        );
        let spec = serde_json::to_value(&review.spec).unwrap();
        assert_eq!(
            spec,
            serde_json::json!({
                "user": "alice", "uid": "a-1", "groups": ["devs"], "extra": {"scopes": ["s1"]},
                "nonResourceAttributes": {"path": "/healthz", "verb": "get"}
            })
        );
    }
}
