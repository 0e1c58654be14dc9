//! The ValidatingAdmissionPolicy and MutatingAdmissionPolicy objects and their bindings
//! (`admissionregistration.k8s.io` v1, and v1beta1/v1alpha1, which have the same shape for
//! everything celgate reads), as deserialized from the API or from files. Defaults are applied when compiling, not here, so a missing field
//! and its default are told apart where validation needs it.
//!
//! A leaf: it uses nothing else of the crate, so `matching`, `policy` and the sources can all
//! read it without depending on each other.

mod binding;
mod meta;
mod mutating;
mod policy;
mod rules;
pub mod strict;

pub use binding::{Binding, BindingSpec, ParamRef};
pub use meta::{LabelSelector, ObjectMeta, SelectorRequirement};
pub use mutating::{
    ExpressionField, MutatingBinding, MutatingBindingSpec, MutatingPolicy, MutatingPolicySpec,
    Mutation,
};
pub use policy::{
    AuditAnnotation, MatchCondition, ParamKind, Policy, PolicySpec, Validation, Variable,
};
pub use rules::{MatchResources, NamedRule};

/// The API versions whose policy and binding objects (validating and mutating) celgate reads.
pub const API_VERSIONS: [&str; 3] = [
    "admissionregistration.k8s.io/v1",
    "admissionregistration.k8s.io/v1beta1",
    "admissionregistration.k8s.io/v1alpha1",
];
