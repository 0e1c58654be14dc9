//! MutatingAdmissionPolicy: the mutations a policy computes and how they are applied to the
//! request object, following the in-tree plugin
//! (`k8s.io/apiserver/pkg/admission/plugin/policy/mutating`).

pub mod patch;
