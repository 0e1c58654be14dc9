//! The admission engine of celgate: what the API server's ValidatingAdmissionPolicy plugin
//! decides for a request, with no I/O. It knows no HTTP server, Kubernetes client or async
//! runtime; whatever may wait (a namespace lookup, the authorizer, a deadline) is passed in.
//!
//! Layers, each using only those above it (checked by `tests/layers.rs`):
//!
//! - [`model`]: the policy and binding API types as the API server stores them;
//! - [`matching`]: which requests a policy or binding applies to (`matchConstraints`,
//!   `matchResources`, selectors), following `admission/plugin/policy/matching`;
//! - [`policy`]: policies compiled against the CEL environment, and the immutable
//!   [`policy::snapshot::Snapshot`] the sources build;
//! - [`admission`]: a request evaluated against a snapshot, following
//!   `admission/plugin/policy/validating`;
//! - [`review`]: the `AdmissionReview` codec (v1, v1beta1) and manifests read as requests;
//! - [`crd`]: CustomResourceDefinition validation rules (`x-kubernetes-validations`), as the
//!   apiextensions-apiserver runs them;
//! - [`lint`]: the API server's type checking of policies (`status.typeChecking`), offline;
//! - [`scan`]: stored objects evaluated as their CREATE, and the policy reports of the
//!   results.
//!
//! The CEL language itself is the `celgate-cel` crate.
//!
//! # Embedding the engine
//!
//! The crate root re-exports what an embedder needs; the modules hold the rest:
//!
//! - build an immutable [`Snapshot`] from policies, bindings and other objects with a
//!   [`SnapshotBuilder`] (a [`CompileCache`] keeps unchanged policies compiled across
//!   snapshots);
//! - answer an AdmissionReview body with [`answer`] ([`AnswerOptions`]: the [`Mode`], tracing),
//!   or evaluate a decoded [`Request`] with [`admit`] ([`AdmitOptions`]); both run within an
//!   [`AdmitContext`]: the live [`Services`] (a [`NamespaceLookup`], an authorizer) and the
//!   [`EvalLimits`];
//! - validate custom resources against their CRD's rules: [`crd::cli::Catalog`], or
//!   [`parse_crd`] then [`crd::rules::compile`];
//! - type-check policies: [`lint_documents`];
//! - evaluate stored objects as their CREATE: [`Scanner`].
//!
//! ```
//! use celgate_engine::{answer, AdmitContext, AnswerOptions, Binding, Policy, SnapshotBuilder};
//! use serde_json::{from_value, json};
//!
//! let policy: Policy = from_value(json!({
//!     "metadata": {"name": "no-debug"},
//!     "spec": {
//!         "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
//!             "operations": ["CREATE"], "resources": ["configmaps"]}]},
//!         "validations": [{"expression": "!has(object.data.debug)"}]
//!     }
//! }))?;
//! let binding: Binding = from_value(json!({
//!     "metadata": {"name": "no-debug"},
//!     "spec": {"policyName": "no-debug", "validationActions": ["Deny"]}
//! }))?;
//! let mut builder = SnapshotBuilder::new();
//! builder.add_policy(policy);
//! builder.add_binding(binding);
//! let snapshot = builder.build(celgate_cel::NEWEST_MINOR);
//!
//! let review = json!({
//!     "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
//!     "request": {
//!         "uid": "1", "operation": "CREATE", "namespace": "default", "name": "c",
//!         "kind": {"group": "", "version": "v1", "kind": "ConfigMap"},
//!         "resource": {"group": "", "version": "v1", "resource": "configmaps"},
//!         "userInfo": {"username": "alice"},
//!         "object": {"apiVersion": "v1", "kind": "ConfigMap",
//!                    "metadata": {"name": "c"}, "data": {"debug": "1"}}
//!     }
//! });
//! let body = serde_json::to_vec(&review)?;
//! let context = AdmitContext::default();
//! let answered = answer(&snapshot, &body, &context, AnswerOptions::default())?;
//! assert_eq!(answered.review()["response"]["allowed"], false);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

// Unsafe code only where an item allows it (each block with its `SAFETY:` comment).
#![deny(unsafe_code)]
#![warn(clippy::undocumented_unsafe_blocks)]
// An item of a private module is `pub(crate)` unless the public surface re-exports it.
#![warn(unreachable_pub)]

pub mod admission;
pub mod crd;
pub mod lint;
pub mod matching;
pub mod model;
pub mod mutating;
pub mod policy;
pub mod review;
pub mod scan;
pub(crate) mod schemas;

pub use admission::{
    admit, AdmissionVerdict, AdmitContext, AdmitOptions, EvalLimits, NamespaceLookup, Request,
    Services,
};
pub use crd::schema::{parse_crd, Crd, CrdError};
pub use lint::{lint_documents, LintError, PolicyLint};
pub use model::{Binding, Policy};
pub use policy::snapshot::{CompileCache, Snapshot, SnapshotBuilder};
pub use review::{answer, Answer, AnswerOptions, Mode, ReviewError};
pub use scan::{ObjectResults, ScanError, Scanner};
