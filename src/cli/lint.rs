//! `celgate lint`: what the API server would say of a folder of ValidatingAdmissionPolicies
//! and bindings, offline: strict field validation (unknown and duplicate fields, as `kubectl
//! apply` answers), the validation and creation-time CEL checks `eval` and `test` refuse a
//! folder for, the references between objects (binding to policy, paramRef to param kind and
//! object; `celgate::lint::check_objects`), and the type checking of `status.typeChecking`
//! (`celgate::lint`; for MutatingAdmissionPolicies, their mutations checked against the same
//! schemas), printed as text or JSON.

use std::path::PathBuf;

use serde_json::Value as Json;

use celgate::lint::{Finding, Severity};
use celgate::source::folder::{FieldValidation, Loaded};
use celgate::source::ObjectError;

use crate::cli::files::load_path;
use crate::cli::flags::{K8sVersion, LogFormat};
use crate::cli::{emit, CliError, Outcome};

/// Which findings fail the command (`--fail-on`).
#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum FailOn {
    /// Errors (and type-checking warnings) exit 1; warnings are printed only.
    Error,
    /// Warnings exit 1 too.
    Warning,
}

#[derive(clap::Args)]
pub struct LintArgs {
    /// A policy file, or a folder read recursively (policies, bindings, params and CRDs;
    /// other objects are ignored).
    #[arg(long, value_name = "PATH")]
    policies: PathBuf,
    /// `text`: each finding under its file and object, then the type-checking warnings
    /// under each policy and field; `json`: one object per policy and line, `{"policy",
    /// "typeChecking": {"expressionWarnings": [...]}, "checked", "noSchema"}` (and `"kind":
    /// "MutatingAdmissionPolicy"` for a mutating one), then one per
    /// finding, `{"file", "document", "kind", "name", "severity", "message"}`.
    #[arg(short = 'o', long, value_enum, default_value = "text")]
    output: LogFormat,
    /// The Kubernetes version whose checks are followed (CEL libraries, keywords
    /// as field names from 1.31, `params` without a schema declared from 1.36).
    #[arg(long, value_name = "1.N", default_value_t = K8sVersion::NEWEST)]
    k8s_version: K8sVersion,
    /// Largest file read (a manifest, suite or policy file); a larger one, or one that is not a regular file (a FIFO,
    /// a device), is skipped with a warning in a folder, refused when named
    /// itself.
    #[arg(long, value_name = "BYTES", default_value_t = celgate::source::read::DEFAULT_MAX_FILE_BYTES)]
    max_file_bytes: u64,
    /// Unknown and duplicate fields of policies, bindings and ConfigMaps, as `kubectl apply
    /// --validate`: `strict` an error (`strict decoding error: unknown field "spec.x"`),
    /// `warn` a warning per field, `ignore` nothing (`true`/`false`: strict/ignore).
    #[arg(long, value_name = "strict|warn|ignore", default_value_t = FieldValidation::Strict)]
    field_validation: FieldValidation,
    /// `error`: exit 1 on an error or a type-checking warning; `warning`: on any warning too.
    #[arg(long, value_enum, default_value = "error")]
    fail_on: FailOn,
}

/// `celgate lint`.
pub fn run(args: LintArgs) -> Result<Outcome, CliError> {
    let mut loaded =
        load_path(&args.policies, args.max_file_bytes).map_err(|source| CliError::FlagFile {
            flag: "--policies",
            source: Box::new(source),
        })?;
    let mut findings = field_findings(&mut loaded, args.field_validation);
    let docs: Vec<Json> = loaded.iter().map(|d| d.object.clone()).collect();
    let results = celgate::lint::lint_documents(&docs, args.k8s_version.0)
        .map_err(|e| CliError::Input(e.into()))?;
    findings.extend(celgate::lint::check_objects(&docs, args.k8s_version.0));
    let mut text = match args.output {
        LogFormat::Json => celgate::lint::render_json(&results),
        LogFormat::Text => celgate::lint::render_text(&results),
    };
    text.push_str(&match args.output {
        LogFormat::Json => findings_json(&loaded, &findings),
        LogFormat::Text => findings_text(&loaded, &findings),
    });
    emit(&text);
    let errors = findings.iter().any(|f| f.severity == Severity::Error);
    let warnings = !findings.is_empty();
    let typing = results.iter().any(|r| !r.warnings.is_empty());
    Ok(
        if errors || typing || (warnings && args.fail_on == FailOn::Warning) {
            Outcome::Refused
        } else {
            Outcome::Success
        },
    )
}

/// The unknown and duplicate fields of the loaded objects, at `level`: one error per object
/// in the API server's words (`strict`), one warning per field (`warn`), or none. Each
/// finding's `document` is the object's index in `loaded`, as [`celgate::lint::check_objects`]'
/// are.
fn field_findings(loaded: &mut [Loaded], level: FieldValidation) -> Vec<Finding> {
    let mut out = Vec::new();
    for (i, o) in loaded.iter_mut().enumerate() {
        let errors = std::mem::take(&mut o.field_errors);
        if errors.is_empty() {
            continue;
        }
        let finding = |severity, message| Finding {
            document: i,
            kind: o.object["kind"].as_str().unwrap_or_default().to_string(),
            name: o.object["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
            severity,
            message,
        };
        match level {
            FieldValidation::Strict => {
                let e = ObjectError::strict_decoding(&o.object, errors);
                out.push(finding(Severity::Error, e.to_string()));
            }
            FieldValidation::Warn => {
                out.extend(errors.into_iter().map(|e| finding(Severity::Warning, e)));
            }
            FieldValidation::Ignore => {}
        }
    }
    out
}

/// `file (document N): Kind name: error|warning: message`, then the count (nothing when
/// there is no finding: the type checking's report ends the output as before).
fn findings_text(loaded: &[Loaded], findings: &[Finding]) -> String {
    let mut out = String::new();
    if findings.is_empty() {
        return out;
    }
    for f in findings {
        let o = &loaded[f.document];
        let severity = match f.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
        };
        out.push_str(&format!(
            "{} (document {}): {} {}: {severity}: {}\n",
            o.file.display(),
            o.document,
            f.kind,
            f.name,
            f.message
        ));
    }
    let errors = findings
        .iter()
        .filter(|f| f.severity == Severity::Error)
        .count();
    let warnings = findings.len() - errors;
    let plural = |n: usize| if n == 1 { "" } else { "s" };
    out.push_str(&format!(
        "{errors} error{} and {warnings} warning{} in the objects\n",
        plural(errors),
        plural(warnings)
    ));
    out
}

/// One JSON object per finding and line.
fn findings_json(loaded: &[Loaded], findings: &[Finding]) -> String {
    findings
        .iter()
        .map(|f| {
            let o = &loaded[f.document];
            serde_json::json!({
                "file": o.file.display().to_string(),
                "document": o.document,
                "kind": f.kind,
                "name": f.name,
                "severity": f.severity,
                "message": f.message,
            })
            .to_string()
                + "\n"
        })
        .collect()
}
