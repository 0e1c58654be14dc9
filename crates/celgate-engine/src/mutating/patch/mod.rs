//! How a mutation changes the object, as the in-tree plugin's `patch` package does
//! (`k8s.io/apiserver/pkg/admission/plugin/policy/mutating/patch`).

pub mod smd;
mod smd_schema;
mod smd_value;
mod smd_walk;
