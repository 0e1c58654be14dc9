//! The runtime path of a create: defaulting, pruning, OpenAPI value validation, then the CEL
//! rules (skipped, with a synthetic cause, after a blocking schema error), answered as the
//! API server does: the stored object, or a 422 `Status`.

use serde_json::Value as Json;

use super::errors::Status;
use super::rules::CompiledCrd;
use super::{defaults, prune, validate};

impl CompiledCrd {
    /// Admits `obj` as a new custom resource: the object as stored, or the rejection.
    pub fn create(&self, mut obj: Json) -> Result<Json, Status> {
        defaults::apply(&mut obj, &self.schema);
        prune::prune_root(&mut obj, &self.schema);
        let mut causes = validate::validate_root(&obj, &self.schema);
        if causes.iter().any(validate::is_blocking) {
            causes.push(validate::skipped_rules_cause());
        } else {
            causes.extend(self.validate_rules_create(&obj));
        }
        if causes.is_empty() {
            return Ok(obj);
        }
        let name = obj
            .pointer("/metadata/name")
            .and_then(Json::as_str)
            .unwrap_or_default();
        Err(Status::invalid(&self.info.qualified_kind(), name, causes))
    }
}

/// The rejection of a CRD whose schema or rules are invalid.
pub fn crd_status(name: &str, causes: Vec<super::errors::Cause>) -> Status {
    Status::invalid("CustomResourceDefinition.apiextensions.k8s.io", name, causes)
}
