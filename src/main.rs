//! The `celgate` command line.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use serde_json::Value as Json;

use celgate::cel::eval::Meter;
use std::sync::Arc;

use celgate::cel::k8s::authz::{Attributes, AuthorizerValue, Decision, Verdict};
use celgate::cel::vap::{request_resource_attributes, vap_env, Decls};
use celgate::cel::{Type, Value, NEWEST_MINOR, PER_CALL_LIMIT};

#[derive(Parser)]
#[command(
    name = "celgate",
    version,
    about = "Kubernetes ValidatingAdmissionPolicy, enforced by a webhook"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Evaluate one CEL expression in the ValidatingAdmissionPolicy environment and print the
    /// result as JSON. Exit 0 on a value, 1 on a CEL error, 2 on bad usage.
    Expr {
        /// The expression.
        expr: String,
        /// A variable from a JSON or YAML file: `object=pod.yaml`. The VAP variables
        /// (`object`, `oldObject`, `request`, `namespaceObject`, `params`) keep their declared
        /// types; other names are declared `dyn`. Unset VAP variables are null.
        #[arg(long = "var", value_name = "NAME=FILE")]
        vars: Vec<String>,
        /// The Kubernetes version whose CEL libraries are available (1.N).
        #[arg(long, value_name = "1.N", default_value_t = format!("1.{NEWEST_MINOR}"))]
        k8s_version: String,
        /// Print the evaluation's cost on standard error.
        #[arg(long)]
        cost: bool,
    },
    /// Evaluate an AdmissionReview against a folder of policies, bindings, params, namespaces
    /// and RBAC objects, offline, and print the AdmissionReview answer. Exit 0 whatever the
    /// decision; 2 for unreadable input or an invalid object.
    Eval {
        /// Folder (read recursively) of YAML or JSON manifests, multi-document allowed.
        #[arg(long, value_name = "DIR")]
        policies: PathBuf,
        /// The AdmissionReview (v1 or v1beta1; JSON or YAML); `-` for standard input.
        #[arg(long, value_name = "FILE")]
        request: String,
        /// The Kubernetes version whose CEL libraries are available (1.N).
        #[arg(long, value_name = "1.N", default_value_t = format!("1.{NEWEST_MINOR}"))]
        k8s_version: String,
        /// Do not add what every cluster has (namespace name labels, kube-root-ca.crt).
        #[arg(long)]
        no_cluster_defaults: bool,
    },
    /// Print the version.
    Version,
}

/// `celgate expr` has no RBAC objects to consult: every check has no opinion, so
/// `allowed()` is false, with a reason that says why.
#[derive(Debug)]
struct NoAuthorizationData;

impl celgate::cel::k8s::authz::Authorizer for NoAuthorizationData {
    fn authorize(&self, _: &Attributes) -> Decision {
        Decision {
            verdict: Verdict::NoOpinion,
            reason: "celgate expr has no authorization data".into(),
            error: None,
        }
    }
}

/// Runs `work` on a thread with a stack that does not depend on the platform's default: the
/// evaluator recurses once per nesting level of an expression.
fn on_big_stack(work: impl FnOnce() -> ExitCode + Send + 'static) -> ExitCode {
    match std::thread::Builder::new().stack_size(64 << 20).spawn(work) {
        Ok(h) => h.join().unwrap_or(ExitCode::from(1)),
        Err(e) => {
            eprintln!("celgate: cannot start evaluation thread: {e}");
            ExitCode::from(1)
        }
    }
}

fn run_eval(
    policies: &Path,
    request: &str,
    k8s_version: &str,
    cluster_defaults: bool,
) -> Result<(), Usage> {
    let version = parse_version(k8s_version)?;
    let mut objects = celgate::source::folder::load(policies).map_err(|e| Usage(e.to_string()))?;
    if cluster_defaults {
        celgate::source::add_cluster_defaults(&mut objects);
    }
    let snapshot =
        celgate::source::snapshot(objects, version, true).map_err(|e| Usage(e.to_string()))?;
    let (name, text) = if request == "-" {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin(), &mut s)
            .map_err(|e| Usage(format!("cannot read standard input: {e}")))?;
        ("<stdin>".to_string(), s)
    } else {
        let t = std::fs::read_to_string(request)
            .map_err(|e| Usage(format!("cannot read {request}: {e}")))?;
        (request.to_string(), t)
    };
    // JSON as it is; anything else is read as YAML and re-encoded.
    let body = if serde_json::from_str::<Json>(&text).is_ok() {
        text.into_bytes()
    } else {
        let v: Json = serde_yaml_ng::from_str(&text)
            .map_err(|e| Usage(format!("{name}: not valid JSON or YAML: {e}")))?;
        serde_json::to_vec(&v).map_err(|e| Usage(format!("{name}: {e}")))?
    };
    let answer = celgate::admission::review_answer(&snapshot, &body)
        .map_err(|e| Usage(format!("{name}: {}", e.0)))?;
    println!(
        "{}",
        serde_json::to_string_pretty(&answer).unwrap_or_default()
    );
    Ok(())
}

/// An error for exit code 2 (bad usage or unreadable input).
struct Usage(String);

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Version => {
            println!("celgate {}", env!("CARGO_PKG_VERSION"));
            ExitCode::SUCCESS
        }
        Command::Eval {
            policies,
            request,
            k8s_version,
            no_cluster_defaults,
        } => on_big_stack(move || {
            match run_eval(&policies, &request, &k8s_version, !no_cluster_defaults) {
                Ok(()) => ExitCode::SUCCESS,
                Err(Usage(msg)) => {
                    eprintln!("celgate: {msg}");
                    ExitCode::from(2)
                }
            }
        }),
        Command::Expr {
            expr,
            vars,
            k8s_version,
            cost,
        } => on_big_stack(move || run_expr(&expr, &vars, &k8s_version, cost)),
    }
}

fn run_expr(expr: &str, vars: &[String], k8s_version: &str, show_cost: bool) -> ExitCode {
    let loaded = match parse_version(k8s_version).and_then(|v| load_vars(vars).map(|l| (v, l))) {
        Ok(x) => x,
        Err(Usage(msg)) => {
            eprintln!("celgate: {msg}");
            return ExitCode::from(2);
        }
    };
    let (version, loaded) = loaded;
    let with_params = loaded.iter().any(|(n, _)| n == "params");
    let (mut env, slots) = vap_env(
        version,
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
    let program = match env.compile(expr) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(1);
        }
    };
    let mut meter = Meter::with_limit(PER_CALL_LIMIT);
    let result = program.eval(&values, &mut meter);
    if show_cost {
        eprintln!("cost: {}", meter.cost);
    }
    match result {
        Ok(v) => {
            println!(
                "{}",
                serde_json::to_string_pretty(&v.to_json()).unwrap_or_else(|_| "null".into())
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("evaluation error: {e}");
            ExitCode::from(1)
        }
    }
}

fn parse_version(v: &str) -> Result<u16, Usage> {
    let minor = v.strip_prefix("1.").and_then(|m| m.parse::<u16>().ok());
    match minor {
        Some(m) if m <= NEWEST_MINOR => Ok(m),
        _ => Err(Usage(format!(
            "--k8s-version must be 1.N with N at most {NEWEST_MINOR}, got {v:?}"
        ))),
    }
}

fn load_vars(vars: &[String]) -> Result<Vec<(String, Json)>, Usage> {
    vars.iter()
        .map(|spec| {
            let (name, file) = spec
                .split_once('=')
                .ok_or_else(|| Usage(format!("--var takes NAME=FILE, got {spec:?}")))?;
            Ok((name.to_string(), read_document(Path::new(file))?))
        })
        .collect()
}

/// Reads one JSON or YAML document.
fn read_document(path: &Path) -> Result<Json, Usage> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| Usage(format!("cannot read {}: {e}", path.display())))?;
    let is_yaml = matches!(
        path.extension().and_then(|e| e.to_str()),
        Some("yaml" | "yml")
    );
    if !is_yaml {
        if let Ok(j) = serde_json::from_str(&text) {
            return Ok(j);
        }
    }
    serde_yaml_ng::from_str(&text).map_err(|e| {
        Usage(format!(
            "{}: not valid JSON or YAML: {e}",
            PathBuf::from(path).display()
        ))
    })
}
