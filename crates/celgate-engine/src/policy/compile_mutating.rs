//! Compiles a MutatingAdmissionPolicy once per object version
//! (`plugin/policy/mutating/compilation.go`): matchConditions and variables as a validating
//! policy's, in the same environment; then each mutation in the mutating environment (which
//! adds `Object`, `JSONPatch` and `jsonpatch.escapeKey`: in-tree `HasPatchTypes` is set for
//! the mutations only), whose result type must be `Object` for an apply configuration and
//! `list(JSONPatch)` for a JSON patch.

use std::sync::Arc;

use super::compile::{compile_in_envs, invalid, Compiled, CompiledPolicy, ExprCompileError};
use super::validate::FieldErrors;
use super::validate_mutating::validate_mutating_policy;
use crate::model::{MutatingPolicy, Policy, PolicySpec};
pub use crate::mutating::PatchKind;
use celgate_cel::vap::Decls;
use celgate_cel::Env;

/// One compiled mutation.
#[derive(Debug)]
pub struct CompiledMutation {
    pub kind: PatchKind,
    /// The expression as written.
    pub expression: String,
    pub program: Compiled,
}

/// When the policy runs again after later mutations changed the object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reinvocation {
    Never,
    IfNeeded,
}

/// A compiled MutatingAdmissionPolicy: what it shares with a validating policy (matching,
/// params, matchConditions, variables, failurePolicy; no validations) and its mutations.
#[derive(Debug)]
pub struct CompiledMutatingPolicy {
    pub base: CompiledPolicy,
    pub mutations: Vec<CompiledMutation>,
    pub reinvocation: Reinvocation,
}

/// The parts shared with a validating policy, as a validating policy without validations.
pub(crate) fn shared_parts(p: &MutatingPolicy) -> Policy {
    let spec = &p.spec;
    Policy {
        metadata: p.metadata.clone(),
        spec: PolicySpec {
            param_kind: spec.param_kind.clone(),
            match_constraints: spec.match_constraints.clone(),
            failure_policy: spec.failure_policy.clone(),
            match_conditions: spec.match_conditions.clone(),
            variables: spec.variables.clone(),
            ..PolicySpec::default()
        },
    }
}

fn type_checked(env: &Env, source: &str, want: &'static str) -> Compiled {
    let program = env.compile(source).map_err(ExprCompileError::Invalid)?;
    let got = program.result_type();
    if got.to_string() != want {
        return Err(ExprCompileError::ResultType {
            want,
            got: got.clone(),
        });
    }
    Ok(Arc::new(program))
}

/// Compiles `policy` against the CEL environment of Kubernetes 1.`version`.
pub fn compile_mutating(policy: &MutatingPolicy, version: u16) -> CompiledMutatingPolicy {
    let base = CompiledPolicy {
        invalid: invalid(validate_mutating_policy(policy)),
        ..compile_in_envs(&shared_parts(policy), version, celgate_cel::vap::vap_env)
    };
    // Mutations see what validations see: the variables, params and the authorizer.
    let (mut env, _) = celgate_cel::mutation::map_env(
        version,
        Decls {
            params: policy.spec.param_kind.is_some(),
            authorizer: true,
        },
    );
    let fields = base
        .variables
        .iter()
        .map(|(name, c)| {
            let ty = c.as_ref().map_or(celgate_cel::Type::Dyn, |p| {
                celgate_cel::vap::composited_type(p.result_type())
            });
            (name.clone(), ty)
        })
        .collect();
    env.declare_lazy("variables", fields);
    let mutations = policy
        .spec
        .mutations
        .iter()
        .map(|m| {
            let (kind, field, want) = match m.patch_type.as_str() {
                "JSONPatch" => (PatchKind::JsonPatch, &m.json_patch, "list(JSONPatch)"),
                _ => (
                    PatchKind::ApplyConfiguration,
                    &m.apply_configuration,
                    "Object",
                ),
            };
            let expression = field
                .as_ref()
                .map(|f| f.expression.clone())
                .unwrap_or_default();
            CompiledMutation {
                kind,
                program: type_checked(&env, &expression, want),
                expression,
            }
        })
        .collect();
    let reinvocation = match policy.spec.reinvocation_policy.as_deref() {
        Some("IfNeeded") => Reinvocation::IfNeeded,
        _ => Reinvocation::Never,
    };
    CompiledMutatingPolicy {
        base,
        mutations,
        reinvocation,
    }
}

/// Why the API server (of Kubernetes 1.`version`) would refuse to create `policy`: its
/// validation errors, then every expression that does not compile in the creation-time
/// environment (one minor back, as for validating policies).
pub fn mutating_creation_errors(policy: &MutatingPolicy, version: u16) -> FieldErrors {
    let mut errors = validate_mutating_policy(policy);
    if !errors.is_empty() {
        return errors;
    }
    let creation = version
        .saturating_sub(1)
        .clamp(celgate_cel::OLDEST_MINOR, celgate_cel::NEWEST_MINOR);
    let compiled = compile_mutating(policy, creation);
    let spec = &policy.spec;
    let mut note = |path: String, text: &str, c: &Compiled| {
        if let Err(e) = c {
            errors.expression(path, text, e.to_string());
        }
    };
    for (i, (m, (_, c))) in spec
        .match_conditions
        .iter()
        .zip(&compiled.base.match_conditions)
        .enumerate()
    {
        note(
            format!("spec.matchConditions[{i}].expression"),
            &m.expression,
            c,
        );
    }
    for (i, (v, (_, c))) in spec
        .variables
        .iter()
        .zip(&compiled.base.variables)
        .enumerate()
    {
        note(format!("spec.variables[{i}].expression"), &v.expression, c);
    }
    for (i, m) in compiled.mutations.iter().enumerate() {
        let field = match m.kind {
            PatchKind::ApplyConfiguration => "applyConfiguration",
            PatchKind::JsonPatch => "jsonPatch",
        };
        note(
            format!("spec.mutations[{i}].{field}.expression"),
            &m.expression,
            &m.program,
        );
    }
    errors
}
