//! Compiles a policy once per object version: every expression in the environment its kind
//! declares (`plugin/cel/compile.go`), with its exact result type checked, variables typed in
//! declaration order, and the API server's defaults applied.
//!
//! A compile error is not a load failure: as in Kubernetes, the expression keeps the error and
//! evaluating it yields `compilation error: ...`, which goes through the failurePolicy.

use std::sync::Arc;

use crate::matching::Matcher;
use crate::model::{ParamKind, Policy};
use celgate_cel::reads::Reads;
use celgate_cel::vap::{composited_type, vap_env, Decls, Slots};
use celgate_cel::{CompileError, Env, Program, Type};

use super::validate::FieldErrors;

/// Why an expression of a policy has no program. Evaluating it yields
/// `compilation error: <this>`, which goes through the failurePolicy.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ExprCompileError {
    /// The expression does not parse or type-check in its kind's environment.
    #[error("compilation failed: {0}")]
    Invalid(#[source] CompileError),
    /// It compiles, but its result type is not one its field allows (`bool` for a
    /// validation, `string` for a messageExpression...).
    #[error("must evaluate to {want} but got {got}")]
    ResultType {
        /// The allowed types, as the API server words them.
        want: &'static str,
        got: Type,
    },
}

/// A policy without matchConstraints (§2.6): every request it would be evaluated for is a
/// configuration error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("policy contained no match constraints, a required field")]
pub struct NoMatchConstraints;

/// An expression compiled in its environment, or why it did not compile.
pub type Compiled = Result<Arc<Program>, ExprCompileError>;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FailurePolicy {
    Fail,
    Ignore,
    /// An unknown value: every configuration error becomes a denial that says so.
    Unrecognized(String),
}

#[derive(Debug)]
pub struct CompiledValidation {
    /// The expression as written (quoted in messages).
    pub expression: String,
    pub program: Compiled,
    pub message: Option<String>,
    pub message_program: Option<Compiled>,
    pub reason: Option<String>,
}

#[derive(Debug)]
pub struct CompiledPolicy {
    pub name: String,
    pub failure_policy: FailurePolicy,
    pub param_kind: Option<ParamKind>,
    /// The matchConstraints, or the guard error of §2.6.
    pub matcher: Result<Matcher, NoMatchConstraints>,
    pub match_conditions: Vec<(String, Compiled)>,
    pub variables: Vec<(String, Compiled)>,
    pub validations: Vec<CompiledValidation>,
    pub audit_annotations: Vec<(String, Compiled)>,
    /// Where each expression kind's environment puts the VAP variables.
    pub slots: ExprSlots,
    /// Why the object fails the API server's validation (§7), if it does: a configuration
    /// error for the requests it matches.
    pub invalid: Option<FieldErrors>,
    /// What the compiled expressions can read of `object` and `oldObject` (whole for a
    /// mutating policy, whose mutations need the whole object).
    pub reads: Reads,
}

/// Where one expression kind's environment puts each VAP variable, and how many variables it
/// declares (the length of the values bound for it), as the environment says: the layout
/// does not depend on the order of declarations.
#[derive(Debug, Clone, Copy)]
pub struct SlotLayout {
    pub slots: Slots,
    pub len: usize,
}

impl SlotLayout {
    fn of(env: &Env, slots: Slots) -> SlotLayout {
        SlotLayout {
            slots,
            len: env.variables().len(),
        }
    }
}

/// The slot layout of each expression kind (they differ in what is declared).
#[derive(Debug, Clone, Copy)]
pub struct ExprSlots {
    /// matchConditions.
    pub condition: SlotLayout,
    /// validations, variables and audit annotations.
    pub validation: SlotLayout,
    /// messageExpressions.
    pub message: SlotLayout,
}

fn type_check(program: Program, want: &[Type], want_text: &'static str) -> Compiled {
    let got = program.result_type();
    if want.iter().any(|t| t == got) {
        return Ok(Arc::new(program));
    }
    Err(ExprCompileError::ResultType {
        want: want_text,
        got: got.clone(),
    })
}

fn compile_in(env: &Env, source: &str, want: &[Type], want_text: &'static str) -> Compiled {
    match env.compile(source) {
        Ok(p) if want.is_empty() => Ok(Arc::new(p)),
        Ok(p) => type_check(p, want, want_text),
        Err(e) => Err(ExprCompileError::Invalid(e)),
    }
}

impl CompiledPolicy {
    /// Expressions that do not compile, plus one if the policy fails validation.
    pub fn compile_errors(&self) -> usize {
        self.problems().len()
    }

    /// What is wrong with the policy: its validation failure, then each expression that does
    /// not compile, named by its field path.
    pub fn problems(&self) -> Vec<String> {
        let mut out: Vec<String> = self.invalid.iter().map(ToString::to_string).collect();
        let mut add = |field: String, c: &Compiled| {
            if let Err(e) = c {
                out.push(format!("{field}: {e}"));
            }
        };
        for (i, (_, c)) in self.match_conditions.iter().enumerate() {
            add(format!("spec.matchConditions[{i}].expression"), c);
        }
        for (i, (_, c)) in self.variables.iter().enumerate() {
            add(format!("spec.variables[{i}].expression"), c);
        }
        for (i, v) in self.validations.iter().enumerate() {
            add(format!("spec.validations[{i}].expression"), &v.program);
            if let Some(m) = &v.message_program {
                add(format!("spec.validations[{i}].messageExpression"), m);
            }
        }
        for (i, (_, c)) in self.audit_annotations.iter().enumerate() {
            add(format!("spec.auditAnnotations[{i}].valueExpression"), c);
        }
        out
    }
}

/// Why the API server (of Kubernetes 1.`version`) would refuse to create `policy`: its
/// validation errors, then every expression that does not compile in the creation-time
/// environment, as `spec.validations[0].expression: Invalid value: "...": compilation failed:
/// ...`. That environment is the API server's compatibility version, one minor back: a library
/// is usable in new expressions from the release after the one that introduced it (stored
/// expressions may use it at once, which is what [`compile`] at `version` accepts).
pub fn creation_errors(policy: &Policy, version: u16) -> FieldErrors {
    let mut errors = super::validate::validate_policy(policy);
    let creation = version
        .saturating_sub(1)
        .clamp(celgate_cel::OLDEST_MINOR, celgate_cel::NEWEST_MINOR);
    let compiled = compile(policy, creation);
    let spec = &policy.spec;
    let mut note = |path: String, text: &str, c: &Compiled| {
        if let Err(e) = c {
            errors.expression(path, text, e.to_string());
        }
    };
    for (i, (m, (_, c))) in spec
        .match_conditions
        .iter()
        .zip(&compiled.match_conditions)
        .enumerate()
    {
        note(
            format!("spec.matchConditions[{i}].expression"),
            &m.expression,
            c,
        );
    }
    for (i, (v, (_, c))) in spec.variables.iter().zip(&compiled.variables).enumerate() {
        note(format!("spec.variables[{i}].expression"), &v.expression, c);
    }
    for (i, (v, c)) in spec
        .validations
        .iter()
        .zip(&compiled.validations)
        .enumerate()
    {
        note(
            format!("spec.validations[{i}].expression"),
            &v.expression,
            &c.program,
        );
        if let (Some(text), Some(m)) = (&v.message_expression, &c.message_program) {
            note(format!("spec.validations[{i}].messageExpression"), text, m);
        }
    }
    for (i, (a, (_, c))) in spec
        .audit_annotations
        .iter()
        .zip(&compiled.audit_annotations)
        .enumerate()
    {
        note(
            format!("spec.auditAnnotations[{i}].valueExpression"),
            &a.value_expression,
            c,
        );
    }
    errors
}

/// Validation errors as a configuration error, if there are any.
pub fn invalid(errors: FieldErrors) -> Option<FieldErrors> {
    (!errors.is_empty()).then_some(errors)
}

/// Compiles `policy` against the CEL environment of Kubernetes 1.`version`.
pub fn compile(policy: &Policy, version: u16) -> CompiledPolicy {
    let mut compiled = CompiledPolicy {
        invalid: invalid(super::validate::validate_policy(policy)),
        ..compile_in_envs(policy, version, vap_env)
    };
    compiled.reads = super::reads::policy_reads(&compiled, version);
    compiled
}

/// What builds the environment of each expression kind: [`vap_env`] for a validating
/// policy, the mutating environment (`Object`, `JSONPatch`) for a mutating one.
pub(crate) type EnvBuilder = fn(u16, Decls) -> (Env, Slots);

/// Compiles the parts every policy kind shares (matchConditions, variables, and for a
/// validating policy its validations and audit annotations) in the environments `make_env`
/// builds; `invalid` is left for the caller, whose kind has its own validation.
pub(crate) fn compile_in_envs(
    policy: &Policy,
    version: u16,
    vap_env: EnvBuilder,
) -> CompiledPolicy {
    let spec = &policy.spec;
    let params = spec.param_kind.is_some();
    let (cond_env, condition) = vap_env(
        version,
        Decls {
            params,
            authorizer: true,
        },
    );

    // Variables: each compiled with the earlier ones declared, typed by their result. One
    // environment, a field added after each variable: building or copying the declarations
    // for each variable made compiling quadratic in their number.
    let mut variables = Vec::with_capacity(spec.variables.len());
    let mut fields: Vec<(String, Type)> = Vec::new();
    let (mut env, _) = vap_env(
        version,
        Decls {
            params,
            authorizer: true,
        },
    );
    let lazy = env.declare_lazy("variables", Vec::new());
    for v in &spec.variables {
        let compiled = compile_in(&env, &v.expression, &[], "");
        let ty = compiled
            .as_ref()
            .map_or(Type::Dyn, |p| composited_type(p.result_type()));
        env.add_lazy_field(lazy, &v.name, ty.clone());
        fields.push((v.name.clone(), ty));
        variables.push((v.name.clone(), compiled));
    }
    let (mut val_env, validation) = vap_env(
        version,
        Decls {
            params,
            authorizer: true,
        },
    );
    val_env.declare_lazy("variables", fields.clone());
    let (mut msg_env, message) = vap_env(
        version,
        Decls {
            params,
            authorizer: false,
        },
    );
    msg_env.declare_lazy("variables", fields);

    let match_conditions = spec
        .match_conditions
        .iter()
        .map(|c| {
            (
                c.name.clone(),
                compile_in(&cond_env, &c.expression, &[Type::Bool], "bool"),
            )
        })
        .collect();
    let validations = spec
        .validations
        .iter()
        .map(|v| CompiledValidation {
            expression: v.expression.clone(),
            program: compile_in(&val_env, &v.expression, &[Type::Bool], "bool"),
            message: v.message.clone(),
            message_program: v
                .message_expression
                .as_ref()
                .filter(|m| !m.trim().is_empty())
                .map(|m| compile_in(&msg_env, m, &[Type::String], "string")),
            reason: v.reason.clone(),
        })
        .collect();
    let audit_annotations = spec
        .audit_annotations
        .iter()
        .map(|a| {
            let compiled = compile_in(
                &val_env,
                &a.value_expression,
                &[Type::String, Type::Null],
                "one of [string null_type]",
            );
            (a.key.clone(), compiled)
        })
        .collect();
    let failure_policy = match spec.failure_policy.as_deref() {
        None | Some("Fail") => FailurePolicy::Fail,
        Some("Ignore") => FailurePolicy::Ignore,
        Some(other) => FailurePolicy::Unrecognized(other.to_string()),
    };
    let matcher = match &spec.match_constraints {
        Some(m) => Ok(Matcher::compile(m)),
        None => Err(NoMatchConstraints),
    };
    CompiledPolicy {
        name: policy.metadata.name.clone(),
        failure_policy,
        param_kind: spec.param_kind.clone(),
        matcher,
        match_conditions,
        variables,
        validations,
        audit_annotations,
        slots: ExprSlots {
            condition: SlotLayout::of(&cond_env, condition),
            validation: SlotLayout::of(&val_env, validation),
            message: SlotLayout::of(&msg_env, message),
        },
        invalid: None,
        reads: Reads::whole(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use celgate_cel::NEWEST_MINOR;

    fn policy(yaml: &str) -> Policy {
        serde_yaml_ng::from_str(yaml).unwrap()
    }

    #[test]
    fn result_types_are_exact() {
        let p = compile(
            &policy(
                r#"
metadata: {name: p}
spec:
  matchConstraints: {resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}]}
  validations:
  - expression: object.spec.paused
  - expression: object.spec.paused == true
    messageExpression: "'x' + string(object.spec.replicas)"
  - expression: "true"
    messageExpression: object.name
  auditAnnotations:
  - {key: k, valueExpression: "1"}
  - {key: k2, valueExpression: "null"}
"#,
            ),
            NEWEST_MINOR,
        );
        assert_eq!(
            p.validations[0].program.as_ref().unwrap_err().to_string(),
            "must evaluate to bool but got dyn"
        );
        assert!(p.validations[1].program.is_ok());
        assert!(p.validations[1].message_program.as_ref().unwrap().is_ok());
        assert_eq!(
            p.validations[2]
                .message_program
                .as_ref()
                .unwrap()
                .as_ref()
                .unwrap_err()
                .to_string(),
            "must evaluate to string but got dyn"
        );
        assert_eq!(
            p.audit_annotations[0].1.as_ref().unwrap_err().to_string(),
            "must evaluate to one of [string null_type] but got int"
        );
        assert!(p.audit_annotations[1].1.is_ok());
        assert_eq!(p.failure_policy, FailurePolicy::Fail);
    }

    #[test]
    fn declarations_follow_the_expression_kind() {
        let p = compile(
            &policy(
                r#"
metadata: {name: p}
spec:
  variables:
  - {name: a, expression: "1"}
  - {name: b, expression: "variables.a + 1"}
  - {name: c, expression: "variables.d"}
  validations:
  - expression: "variables.b == 2 && params == null"
    messageExpression: "authorizer.path('/x').check('get').reason()"
"#,
            ),
            NEWEST_MINOR,
        );
        assert!(p.variables[1].1.is_ok(), "a variable sees earlier ones");
        assert!(
            p.variables[2]
                .1
                .as_ref()
                .unwrap_err()
                .to_string()
                .contains("undefined field 'd'"),
            "not later ones"
        );
        assert!(p.validations[0]
            .program
            .as_ref()
            .unwrap_err()
            .to_string()
            .contains("undeclared reference to 'params'"));
        let msg = p.validations[0]
            .message_program
            .as_ref()
            .unwrap()
            .as_ref()
            .unwrap_err()
            .to_string();
        assert!(
            msg.contains("undeclared reference to 'authorizer'"),
            "{msg}"
        );
        assert_eq!(
            p.matcher.unwrap_err().to_string(),
            "policy contained no match constraints, a required field"
        );
    }

    /// Issue 24 item 12a: compiling a policy's variables copies each variable's declaration a
    /// bounded number of times, not once per later variable (8,000 variables took 4.5 s,
    /// 27,000 took 46 s).
    #[test]
    fn variable_declarations_are_not_copied_per_later_variable() {
        let copies = |n: usize| {
            let mut yaml = String::from(
                "metadata: {name: p}\nspec:\n  variables:\n  - {name: v0, expression: \"1\"}\n",
            );
            for i in 1..n {
                yaml += &format!(
                    "  - {{name: v{i}, expression: \"variables.v{} + 1\"}}\n",
                    i - 1
                );
            }
            celgate_cel::internals::reset_lazy_field_copies();
            let p = compile(&policy(&yaml), NEWEST_MINOR);
            assert!(p.variables.iter().all(|(_, c)| c.is_ok()));
            celgate_cel::internals::lazy_field_copies()
        };
        let (small, large) = (copies(500), copies(2000));
        assert!(
            large <= 5 * small,
            "4x the variables, {small} -> {large} declarations copied"
        );
    }
}
