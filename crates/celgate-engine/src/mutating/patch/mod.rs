//! The mutations of a MutatingAdmissionPolicy applied to an object, following the in-tree
//! plugin's `mutating/patch` package.

pub mod diff;
pub mod json_patch;
pub mod typed;
