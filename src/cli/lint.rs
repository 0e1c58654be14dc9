//! `celgate lint`: the API server's type checking of ValidatingAdmissionPolicies
//! (`status.typeChecking`, `celgate::lint`), offline, printed as text or JSON.

use std::path::PathBuf;

use serde_json::Value as Json;

use crate::cli::files::load_path;
use crate::cli::flags::{K8sVersion, LogFormat};
use crate::cli::{emit, CliError, Outcome};

#[derive(clap::Args)]
pub struct LintArgs {
    /// A policy file, or a folder read recursively (policies and CRDs; other objects are
    /// ignored).
    #[arg(long, value_name = "PATH")]
    policies: PathBuf,
    /// `text`: the warnings under each policy and field; `json`: one object per policy
    /// and line, `{"policy", "typeChecking": {"expressionWarnings": [...]}, "checked",
    /// "noSchema"}`.
    #[arg(short = 'o', long, value_enum, default_value = "text")]
    output: LogFormat,
    /// The Kubernetes version whose type checking is followed (CEL libraries, keywords
    /// as field names from 1.31, `params` without a schema declared from 1.36).
    #[arg(long, value_name = "1.N", default_value_t = K8sVersion::NEWEST)]
    k8s_version: K8sVersion,
    /// Largest file read (a manifest, suite or policy file); a larger one, or one that is not a regular file (a FIFO,
    /// a device), is skipped with a warning in a folder, refused when named
    /// itself.
    #[arg(long, value_name = "BYTES", default_value_t = celgate::source::read::DEFAULT_MAX_FILE_BYTES)]
    max_file_bytes: u64,
}

/// `celgate lint`.
pub fn run(args: LintArgs) -> Result<Outcome, CliError> {
    let docs =
        load_path(&args.policies, args.max_file_bytes).map_err(|source| CliError::FlagFile {
            flag: "--policies",
            source: Box::new(source),
        })?;
    let docs: Vec<Json> = docs.into_iter().map(|d| d.object).collect();
    let results = celgate::lint::lint_documents(&docs, args.k8s_version.0)
        .map_err(|e| CliError::Input(e.into()))?;
    let text = match args.output {
        LogFormat::Json => celgate::lint::render_json(&results),
        LogFormat::Text => celgate::lint::render_text(&results),
    };
    emit(&text);
    Ok(if results.iter().any(|r| !r.warnings.is_empty()) {
        Outcome::Refused
    } else {
        Outcome::Success
    })
}
