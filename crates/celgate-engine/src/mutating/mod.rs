//! MutatingAdmissionPolicy: what the API server's in-tree plugin
//! (`admission/plugin/policy/mutating`) does to a request, with no I/O.

pub mod patch;
