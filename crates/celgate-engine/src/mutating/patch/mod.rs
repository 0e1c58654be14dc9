//! The mutations of a MutatingAdmissionPolicy applied to an object, following the in-tree
//! plugin's `mutating/patch` package: apply configurations merged with structured-merge-diff
//! semantics (`smd`), JSON patches as evanphx/json-patch v4 applies them (`json_patch`) and
//! decoded back into the kind's type (`typed`), and the webhook's own patch (`diff`).

pub mod diff;
pub mod json_patch;
pub mod smd;
mod smd_schema;
mod smd_value;
mod smd_walk;
pub mod typed;
