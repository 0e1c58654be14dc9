//! The `celgate` command line: the clap tree (one module per command owns its flags and its
//! run), what a command ends with ([`Outcome`] or [`CliError`]; `main` turns either into the
//! exit code and message), and what the commands share: flag parsers ([`flags`]), file
//! loading ([`files`]), writing to standard output and running on a big stack.

pub mod completion;
pub mod crd;
pub mod eval;
pub mod expr;
pub mod files;
pub mod flags;
pub mod lint;
pub mod man;
pub mod scan;
pub mod serve;
pub mod test;
pub mod version;
pub mod webhook_rules;

use std::path::PathBuf;

use clap::{Parser, Subcommand};

use celgate::app::ServeError;

use files::FileError;
use flags::{Cause, FlagError};

#[derive(Parser)]
#[command(
    name = "celgate",
    version,
    about = "Kubernetes ValidatingAdmissionPolicy, enforced by a webhook"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

// Parsed once at start: the size of the largest variant does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand)]
pub enum Command {
    /// Run the webhook: HTTPS on --listen (POST /validate, /healthz, /readyz) and plain HTTP
    /// metrics on --metrics-listen, enforcing the policies of a folder that is watched for
    /// changes, or (`--source kubernetes`) the cluster's own policies and bindings (or, with
    /// `--policies DIR`, a folder's, with the cluster's namespaces, params and authorizer).
    Serve(serve::ServeArgs),
    /// Evaluate one CEL expression in the ValidatingAdmissionPolicy environment and print the
    /// result as JSON. Exit 0 on a value, 1 on a CEL error, 2 on bad usage.
    Expr(expr::ExprArgs),
    /// Evaluate an AdmissionReview, or a plain manifest as the request the API server would
    /// send for it, against a folder of policies, bindings, params, namespaces and RBAC
    /// objects, offline, and print the AdmissionReview answer. Exit 0 whatever the decision
    /// (1 when --fail-on deny or warn says so); 2 for unreadable input or an invalid object.
    Eval(eval::EvalArgs),
    /// Run policy test suites: every `*.celgate-test.yaml` (and Kyverno CLI `kyverno-test.yaml`
    /// whose policies are ValidatingAdmissionPolicies) under PATH (default `.`). Exit 0 when
    /// every case passed, 1 when one failed (or coverage is below --min-coverage), 2 on an
    /// invalid test file or bad usage.
    Test(test::TestArgs),
    /// CustomResourceDefinition validation rules, offline: whether a CRD is accepted, and
    /// the API server's answer to a custom resource. Exit 0 accepted, 1 rejected, 2 for
    /// unreadable input.
    Crd(crd::CrdArgs),
    /// Background scan, offline: evaluate each object of --objects as the CREATE the API
    /// server would send for it (oldObject null, dryRun true, user
    /// system:serviceaccount:celgate:celgate) against every binding of --policies whose rules
    /// match that CREATE; print the violations, or the results as policy reports. Exit 0
    /// when every object would be admitted, 1 when one would be refused (a Deny binding
    /// failed, or an error under failurePolicy Fail), 2 for unreadable input.
    Scan(scan::ScanArgs),
    /// Check the policies and bindings of --policies as the API server would: unknown and
    /// duplicate fields (strict field validation), the validation and creation-time CEL
    /// checks, what bindings name (policy, param kind, param), and the type checking of
    /// `status.typeChecking` (each expression against the schema of every kind its
    /// matchConstraints name; a MutatingAdmissionPolicy's mutations against the same
    /// schemas: Object fields, type names and literal types, JSON patch paths). Exit 0 clean, 1 on an error or type-checking warning (or any
    /// warning with --fail-on warning), 2 for unreadable input.
    Lint(lint::LintArgs),
    /// Print the ValidatingWebhookConfiguration `rules` that send the API server's requests
    /// to celgate only when a binding of --policies can match them (for a configuration kept
    /// in Git; `celgate serve --webhook-rules dynamic` keeps them itself). Exit 0, 2 for
    /// unreadable input.
    WebhookRules(webhook_rules::WebhookRulesArgs),
    /// Print the shell completion script for bash, zsh, fish, powershell or elvish (e.g.
    /// `source <(celgate completion bash)`). Exit 0.
    Completion(completion::CompletionArgs),
    /// Print the man page `celgate.1`, or write it and one page per subcommand into
    /// --out DIR. Exit 0, 1 when a page cannot be written.
    Man(man::ManArgs),
    /// Print the version (`-o json|yaml`: with the Kubernetes versions --k8s-version
    /// accepts). Exit 0.
    Version(version::VersionArgs),
}

/// How a command that ran to its end went: its exit code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Outcome {
    /// Accepted, passed, admitted, no warnings.
    Success = 0,
    /// Something checked was refused: a case failed, an object would be denied, a CRD or
    /// custom resource rejected, a policy warned about.
    Refused = 1,
    /// An input was invalid, as the command's report says (`celgate test`'s invalid suite).
    Invalid = 2,
}

/// Why a command stopped before its end. `main` prints each and picks its exit code: 1 for
/// a CEL error, a failure of the service or of writing the result, 2 for anything else (bad
/// usage, unreadable or invalid input).
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// A flag's value that only the values of other flags make wrong.
    #[error(transparent)]
    Flag(#[from] FlagError),
    /// A file named cannot be read (boxed, as a load error is large beside the others).
    #[error(transparent)]
    File(Box<FileError>),
    /// A file named by a flag cannot be read.
    #[error("{flag}: {source}")]
    FlagFile {
        flag: &'static str,
        source: Box<FileError>,
    },
    /// The input of a flag is refused (the library's message).
    #[error("{flag}: {source}")]
    FlagInput { flag: &'static str, source: Cause },
    /// Input the command refuses, in the library's words (which name the file).
    #[error(transparent)]
    Input(Cause),
    /// Input of this file (or `<stdin>`) the command refuses.
    #[error("{name}: {source}")]
    InputIn { name: String, source: Cause },
    #[error("cannot read standard input: {0}")]
    Stdin(#[source] celgate::source::read::ReadError),
    #[error("give --tls-cert and --tls-key, --self-signed, or --cert-secret")]
    NoCertificate,
    #[error("--max-buffered-bytes must be at least 4/3 of --max-body-bytes ({max_body}), or no body that large could be read")]
    BufferBelowBody { max_body: usize },
    #[error("--strict-namespaces is for --source folder (with --source kubernetes namespaces come from the cluster)")]
    StrictNamespacesInCluster,
    #[error("--source folder (the default) needs --policies DIR, the folder of policies to serve (e.g. --policies examples/policies), or --source kubernetes for the cluster's own")]
    NoPolicyFolder,
    #[error("--reports needs --source kubernetes (reports are written in the cluster)")]
    ReportsNeedCluster,
    #[error("{name}: is an AdmissionReview: --operation, --old, --user, --group, --namespace, --subresource and --dry-run describe a plain manifest")]
    ManifestFlagsOnReview { name: String },
    #[error("no CustomResourceDefinition in the files given")]
    NoCrd,
    #[error("--crds: no CustomResourceDefinition serving a version in {}", path.display())]
    NoServedCrd { path: PathBuf },
    /// `celgate expr`: the expression does not compile (exit 1).
    #[error(transparent)]
    Compile(celgate::cel::CompileError),
    /// `celgate expr`: the evaluation ends in an error (exit 1).
    #[error("evaluation error: {0}")]
    Evaluation(#[source] celgate::cel::EvalError),
    /// The result cannot be written as JSON (exit 1).
    #[error("cannot write the result as JSON: {0}")]
    Json(#[source] serde_json::Error),
    /// The result cannot be written as YAML (exit 1).
    #[error("cannot write the result as YAML: {0}")]
    Yaml(#[source] serde_yaml_ng::Error),
    /// An output file named by a flag cannot be written (exit 1).
    #[error("{flag}: cannot write {}: {source}", path.display())]
    WriteFile {
        flag: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    /// `celgate man --out`: a page cannot be written (exit 1).
    #[error("cannot write the man pages into {}: {source}", dir.display())]
    ManPages {
        dir: PathBuf,
        source: std::io::Error,
    },
    /// `celgate man`: the page cannot be rendered (exit 1).
    #[error("cannot render the man page: {0}")]
    ManPage(#[source] std::io::Error),
    /// `celgate serve` could not start or stopped with an error (exit 1).
    #[error(transparent)]
    Serve(#[from] ServeError),
    /// The evaluation thread cannot be started (exit 1).
    #[error("cannot start evaluation thread: {0}")]
    Thread(#[source] std::io::Error),
    /// The command panicked; the panic said why (exit 1).
    #[error("the command panicked")]
    Panicked,
}

impl From<FileError> for CliError {
    fn from(e: FileError) -> Self {
        CliError::File(Box::new(e))
    }
}

/// Runs `work` on a thread with a stack that does not depend on the platform's default: the
/// evaluator recurses once per nesting level of an expression.
pub fn on_big_stack(
    work: impl FnOnce() -> Result<Outcome, CliError> + Send + 'static,
) -> Result<Outcome, CliError> {
    match std::thread::Builder::new().stack_size(64 << 20).spawn(work) {
        Ok(h) => h.join().unwrap_or(Err(CliError::Panicked)),
        Err(e) => Err(CliError::Thread(e)),
    }
}

/// Writes a command's result to standard output. A reader that stopped reading
/// (`celgate eval ... | head`) is no error of celgate's: the rest is dropped, where `print!`
/// would panic.
pub fn emit(text: &str) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes()).and_then(|()| out.flush());
}

/// Writes `value` to standard output as `format` says (pretty JSON and a newline, or a YAML
/// document).
pub fn emit_document(
    value: &impl serde::Serialize,
    format: flags::DocFormat,
) -> Result<(), CliError> {
    let text = match format {
        flags::DocFormat::Json => {
            format!(
                "{}\n",
                serde_json::to_string_pretty(value).map_err(CliError::Json)?
            )
        }
        flags::DocFormat::Yaml => serde_yaml_ng::to_string(value).map_err(CliError::Yaml)?,
    };
    emit(&text);
    Ok(())
}

/// [`emit`] and a newline.
pub fn emit_line(text: &str) {
    emit(&format!("{text}\n"));
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    /// Every subcommand and every flag or argument says what it is for in `--help`.
    #[test]
    fn every_command_and_argument_has_help() {
        fn walk(cmd: &clap::Command, path: &str, missing: &mut Vec<String>) {
            let path = format!("{path} {}", cmd.get_name()).trim().to_string();
            if cmd.get_about().is_none()
                && path != "celgate help"
                && !path.starts_with("celgate help ")
            {
                missing.push(path.clone());
            }
            for arg in cmd.get_arguments() {
                // clap's own --help and --version.
                if matches!(arg.get_id().as_str(), "help" | "version") {
                    continue;
                }
                if arg.get_help().is_none() && arg.get_long_help().is_none() {
                    missing.push(format!("{path} {}", arg.get_id()));
                }
            }
            for sub in cmd.get_subcommands() {
                walk(sub, &path, missing);
            }
        }
        let mut missing = Vec::new();
        let mut cli = Cli::command();
        cli.build();
        walk(&cli, "", &mut missing);
        assert!(missing.is_empty(), "without help text: {missing:?}");
    }

    #[test]
    fn cli_is_well_formed() {
        Cli::command().debug_assert();
    }
}
