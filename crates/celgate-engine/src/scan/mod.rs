//! Scans of stored objects, for `celgate scan` (offline, `celgate::app::scan`) and the
//! cluster's background scans (`celgate::source::kube`): each stored object is evaluated as the CREATE
//! the API server would send for it ("would this object be admitted today?") against every
//! binding whose rules match that CREATE, and the results are gathered by namespace for
//! policy reports ([`report`]).
//!
//! The synthesised request: operation CREATE, `oldObject` null, `dryRun` true, the user
//! [`SCAN_USER`] (celgate's own service account, in the groups the API server gives it), the
//! object's own namespace. So `request.userInfo`, `authorizer` checks and
//! `request.dryRun` see celgate's identity and a dry run, not the object's author; a
//! binding whose rules match no CREATE of the object (an UPDATE-only or DELETE-only policy)
//! is not evaluated. A namespace the snapshot does not define is a bare one (its name and
//! `kubernetes.io/metadata.name` label), as in `celgate serve`'s folder mode.

pub mod report;

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::Value as Json;

use crate::admission::bare::BareNamespaces;
use crate::admission::{admit, AdmitContext, AdmitOptions, PolicyResult, Services};
use crate::policy::snapshot::Snapshot;
use crate::review::manifest::{manifest_review, ManifestError, ManifestRequest};

/// The user of every scan request: celgate's service account as the chart installs it.
pub const SCAN_USER: &str = "system:serviceaccount:celgate:celgate";
/// Its groups (`system:authenticated` is added to them).
const SCAN_GROUPS: &[&str] = &["system:serviceaccounts", "system:serviceaccounts:celgate"];

/// The object a result is about, as report results reference it.
pub use crate::review::ObjectRef as Resource;

impl Resource {
    fn of(object: &Json) -> Resource {
        let text = |v: &Json| v.as_str().unwrap_or_default().to_string();
        let meta = &object["metadata"];
        Resource {
            api_version: text(&object["apiVersion"]),
            kind: text(&object["kind"]),
            namespace: text(&meta["namespace"]),
            name: text(&meta["name"]),
            uid: text(&meta["uid"]),
        }
    }

    /// `Kind namespace/name`, or `Kind name` for a cluster-scoped object.
    pub fn display(&self) -> String {
        if self.namespace.is_empty() {
            format!("{} {}", self.kind, self.name)
        } else {
            format!("{} {}/{}", self.kind, self.namespace, self.name)
        }
    }
}

/// One validation's result for one object, by index into the snapshot.
#[derive(Debug, Clone, PartialEq)]
pub struct ScanResult {
    /// Index into `Snapshot::policies`.
    pub policy: usize,
    /// Index into that entry's bindings.
    pub binding: usize,
    /// The validation's index; `None` for an error of the whole policy or binding.
    pub validation: Option<usize>,
    pub result: PolicyResult,
    /// Empty for a pass or a skip.
    pub message: String,
    /// A failed validation's reason.
    pub reason: Option<String>,
}

/// An object's results.
#[derive(Debug, Clone, PartialEq)]
pub struct ObjectResults {
    /// The object, as policy reports reference it.
    pub resource: Resource,
    /// Each matching (policy, binding)'s validations, the worst over its params.
    pub results: Vec<ScanResult>,
    /// The API server would refuse the object's CREATE today (a Deny binding failed, or an
    /// error under failurePolicy Fail).
    pub denied: bool,
}

/// The user and groups of `system:serviceaccount:<namespace>:<name>` as the API server
/// authenticates it (`system:authenticated` is added to the groups).
pub fn service_account_identity(namespace: &str, name: &str) -> (String, Vec<String>) {
    (
        format!("system:serviceaccount:{namespace}:{name}"),
        vec![
            "system:serviceaccounts".to_string(),
            format!("system:serviceaccounts:{namespace}"),
        ],
    )
}

/// Why an object cannot be scanned: no request can be built for it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ScanError {
    /// No apiVersion or kind, or a kind whose resource is unknown.
    #[error(transparent)]
    Manifest(#[from] ManifestError),
    /// The review built does not round-trip through JSON (too deep an object).
    #[error(transparent)]
    Json(serde_json::Error),
    /// The review built does not decode as the API server's.
    #[error(transparent)]
    Review(#[from] crate::review::ReviewError),
}

/// Evaluates objects against a snapshot.
pub struct Scanner<'s> {
    snapshot: &'s Snapshot,
    /// The CRDs that tell a custom resource's plural and scope.
    crds: Vec<Json>,
    services: Services,
    /// The requests' user and groups.
    user: String,
    groups: Vec<String>,
}

impl<'s> Scanner<'s> {
    /// Scans against `snapshot`, with the kinds of `crds` known (besides the built-in ones),
    /// as [`SCAN_USER`] and without services.
    pub fn new(snapshot: &'s Snapshot, crds: Vec<Json>) -> Scanner<'s> {
        Scanner {
            snapshot,
            crds,
            services: Services {
                authorizer: None,
                namespace_lookup: Some(Arc::new(BareNamespaces::default())),
            },
            user: SCAN_USER.to_string(),
            groups: SCAN_GROUPS.iter().map(|g| g.to_string()).collect(),
        }
    }

    /// Requests made by `user` in `groups` instead of [`SCAN_USER`] (celgate's own service
    /// account where it runs).
    pub fn with_identity(mut self, user: String, groups: Vec<String>) -> Self {
        self.user = user;
        self.groups = groups;
        self
    }

    /// Evaluations call `services` (a cluster's authorizer) instead of none.
    pub fn with_services(mut self, services: Services) -> Self {
        self.services = services;
        self
    }

    /// The snapshot scanned against.
    pub fn snapshot(&self) -> &'s Snapshot {
        self.snapshot
    }

    /// Evaluates `object` as its CREATE; an error when no request can be built for it (no
    /// apiVersion or kind, a kind whose resource is unknown).
    pub fn scan(&self, object: Json) -> Result<ObjectResults, ScanError> {
        self.scan_traced(object).map(|(results, _)| results)
    }

    /// [`Scanner::scan`], with each (policy, binding) evaluation of the verdict (for the
    /// results metric).
    pub fn scan_traced(
        &self,
        object: Json,
    ) -> Result<(ObjectResults, Vec<crate::admission::Evaluated>), ScanError> {
        let resource = Resource::of(&object);
        let request = ManifestRequest {
            operation: Some("CREATE".into()),
            object,
            old: None,
            user: Some(self.user.clone()),
            groups: self.groups.clone(),
            namespace: None,
            sub_resource: None,
            dry_run: true,
        };
        let review = manifest_review(self.crds.iter(), request)?;
        let body = serde_json::to_vec(&review).map_err(ScanError::Json)?;
        let doc = celgate_cel::json::Doc::parse(&body).map_err(ScanError::Json)?;
        let req = crate::review::request(&doc)?;
        let context = AdmitContext {
            services: &self.services,
            ..AdmitContext::default()
        };
        let options = AdmitOptions {
            trace: true,
            ..AdmitOptions::default()
        };
        let verdict = admit(self.snapshot, &req, &context, options);
        let results = ObjectResults {
            resource,
            results: verdict_results(self.snapshot, &verdict),
            denied: !verdict.allowed(),
        };
        Ok((results, verdict.evaluated))
    }
}

/// Each matching (policy, binding)'s validations, the worst over its params, from a verdict
/// of a traced [`admit`] on `snapshot` (also the cluster's report writer's input).
pub fn verdict_results(
    snapshot: &Snapshot,
    verdict: &crate::admission::AdmissionVerdict,
) -> Vec<ScanResult> {
    type Key = (usize, usize, Option<usize>);
    let mut worst: BTreeMap<Key, ScanResult> = BTreeMap::new();
    let mut keep = |r: ScanResult| {
        let key = (r.policy, r.binding, r.validation);
        match worst.get(&key) {
            Some(old) if old.result >= r.result => {}
            _ => {
                worst.insert(key, r);
            }
        }
    };
    for e in &verdict.evaluated {
        let Some(entry) = snapshot.policies.get(e.policy) else {
            continue;
        };
        let Some(binding) = entry.bindings.get(e.binding) else {
            continue;
        };
        let policy = &entry.policy;
        let result = |validation, result, message: &str, reason: Option<String>| ScanResult {
            policy: e.policy,
            binding: e.binding,
            validation,
            result,
            message: message.to_string(),
            reason,
        };
        let traced = verdict.results.iter().find(|r| {
            r.policy == policy.name && r.binding.as_deref() == Some(binding.name.as_str())
        });
        match traced {
            Some(t) if !t.validations.is_empty() => {
                for v in &t.validations {
                    keep(result(v.index, v.result, &v.message, v.reason.clone()));
                }
            }
            // Excluded by the matchConditions: each validation skipped.
            _ if e.result == PolicyResult::Skip => {
                for i in 0..policy.validations.len() {
                    keep(result(Some(i), PolicyResult::Skip, "", None));
                }
            }
            // A configuration error, or a match condition's error ignored.
            _ => {
                let message = verdict
                    .denials
                    .iter()
                    .find(|d| {
                        d.policy == policy.name
                            && d.binding.as_deref().is_none_or(|b| b == binding.name)
                    })
                    .map_or("the policy or binding could not be evaluated", |d| {
                        d.message.as_str()
                    });
                keep(result(None, e.result, message, None));
            }
        }
    }
    worst.into_values().collect()
}

/// Expands a `List` (what `kubectl get -o yaml` prints for several objects) into its items;
/// any other object is itself.
pub fn expand_lists(object: Json) -> Vec<Json> {
    let is_list = object["kind"]
        .as_str()
        .is_some_and(|k| k == "List" || k.ends_with("List"))
        && object["items"].is_array();
    if !is_list {
        return vec![object];
    }
    match object {
        Json::Object(mut map) => match map.remove("items") {
            Some(Json::Array(items)) => items,
            _ => Vec::new(),
        },
        _ => Vec::new(),
    }
}
