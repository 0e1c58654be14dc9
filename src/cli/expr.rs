//! `celgate expr`: one CEL expression evaluated in the ValidatingAdmissionPolicy environment
//! of a Kubernetes version (the API server's `vap` environment, `celgate::cel::vap`), with
//! variables read from files; the result printed as JSON.

use std::sync::Arc;

use celgate::cel::k8s::authz::{Attributes, AuthorizeError, AuthorizerValue, Decision, Verdict};
use celgate::cel::vap::{request_resource_attributes, vap_env, Decls};
use celgate::cel::{Meter, Type, Value, PER_CALL_LIMIT};
use serde_json::Value as Json;

use crate::cli::files::read_document;
use crate::cli::flags::{DocFormat, K8sVersion, Var};
use crate::cli::{emit_document, CliError, Outcome};

#[derive(clap::Args)]
pub struct ExprArgs {
    /// The expression.
    expr: String,
    /// A variable from a JSON or YAML file: `object=pod.yaml`. The VAP variables
    /// (`object`, `oldObject`, `request`, `namespaceObject`, `params`) keep their declared
    /// types; other names are declared `dyn`. Unset VAP variables are null.
    #[arg(long = "var", value_name = "NAME=FILE")]
    vars: Vec<Var>,
    /// The Kubernetes version whose CEL libraries are available (1.N or v1.N).
    #[arg(long, value_name = "1.N", default_value_t = K8sVersion::NEWEST)]
    k8s_version: K8sVersion,
    /// How the value is printed: JSON (pretty) or YAML.
    #[arg(short = 'o', long, value_enum, default_value = "json")]
    output: DocFormat,
    /// Print the evaluation's cost on standard error.
    #[arg(long)]
    cost: bool,
    /// Largest file read (a manifest, suite or policy file); a larger one, or one that is not a regular file (a FIFO,
    /// a device), is skipped with a warning in a folder, refused when named
    /// itself.
    #[arg(long, value_name = "BYTES", default_value_t = celgate::source::read::DEFAULT_MAX_FILE_BYTES)]
    max_file_bytes: u64,
}

/// `celgate expr` has no RBAC objects to consult: every check has no opinion, so
/// `allowed()` is false, with a reason that says why.
#[derive(Debug)]
struct NoAuthorizationData;

impl celgate::cel::k8s::authz::Authorizer for NoAuthorizationData {
    fn authorize(&self, _: &Attributes) -> Result<Decision, AuthorizeError> {
        Ok(Decision {
            verdict: Verdict::NoOpinion,
            reason: "celgate expr has no authorization data".into(),
            error: None,
        })
    }
}

/// `celgate expr`.
pub fn run(args: ExprArgs) -> Result<Outcome, CliError> {
    let loaded = args
        .vars
        .iter()
        .map(|var| {
            Ok((
                var.name.clone(),
                read_document(&var.file, args.max_file_bytes)?,
            ))
        })
        .collect::<Result<Vec<(String, Json)>, CliError>>()?;
    let with_params = loaded.iter().any(|(n, _)| n == "params");
    let (mut env, slots) = vap_env(
        args.k8s_version.0,
        Decls {
            params: with_params,
            authorizer: true,
        },
    );
    let mut values: Vec<Value<'_>> = vec![Value::Null; env.variables().len()];
    let authz = AuthorizerValue::new(Arc::new(NoAuthorizationData));
    let request = loaded
        .iter()
        .find(|(n, _)| n == "request")
        .map(|(_, j)| j.clone())
        .unwrap_or_default();
    if let (Some(a), Some(r)) = (slots.authorizer, slots.request_resource) {
        values[r] = Value::opaque(authz.request_resource(request_resource_attributes(&request)));
        values[a] = Value::opaque(authz);
    }
    for (name, json) in &loaded {
        let slot = match env.variable(name) {
            Some((slot, _)) => slot,
            None => {
                values.push(Value::Null);
                env.declare(name, Type::Dyn)
            }
        };
        values[slot] = Value::from_json(json);
    }
    let program = env.compile(&args.expr).map_err(CliError::Compile)?;
    let mut meter = Meter::with_limit(PER_CALL_LIMIT);
    let result = program.eval(&values, &mut meter);
    if args.cost {
        eprintln!("cost: {}", meter.cost);
    }
    let value = result.map_err(CliError::Evaluation)?;
    emit_document(&value.to_json(), args.output)?;
    Ok(Outcome::Success)
}
