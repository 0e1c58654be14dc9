//! `celgate scan`: a background scan offline (`celgate::app::scan`): each object evaluated as
//! the CREATE the API server would send for it; the violations printed as a table, or the
//! results as policy reports (wgpolicyk8s.io or openreports.io) in YAML or JSON.

use std::path::PathBuf;

use celgate::scan::report::{self, ReportApi};

use crate::cli::files::warn_skipped;
use crate::cli::flags::K8sVersion;
use crate::cli::{emit, CliError, Outcome};

#[derive(clap::Args)]
pub struct ScanArgs {
    /// Folder (read recursively) of policies, bindings, params, namespaces and RBAC
    /// objects, as `celgate eval` reads it.
    #[arg(long, value_name = "DIR")]
    policies: PathBuf,
    /// The objects to scan: a YAML or JSON file or a folder of them (read recursively;
    /// multi-document; `List`s such as `kubectl get -o yaml` prints are expanded).
    #[arg(long, value_name = "PATH")]
    objects: PathBuf,
    /// `table`: the violations (failed and errored results) and a summary; `yaml` or
    /// `json`: the policy reports (a `List` in JSON), ready for `kubectl apply`.
    #[arg(short = 'o', long, value_enum, default_value = "table")]
    output: ScanOutput,
    /// The report API of `-o yaml|json`: wgpolicyk8s.io/v1alpha2 PolicyReport and
    /// ClusterPolicyReport, or openreports.io/v1alpha1 Report and ClusterReport.
    #[arg(long, value_enum, default_value = "wgpolicy")]
    reports: ReportKind,
    /// The Kubernetes version whose CEL libraries are available (1.N or v1.N).
    #[arg(long, value_name = "1.N", default_value_t = K8sVersion::NEWEST)]
    k8s_version: K8sVersion,
    /// Largest file read (a manifest, suite or policy file); a larger one, or one that is not a regular file (a FIFO,
    /// a device), is skipped with a warning in a folder, refused when named
    /// itself.
    #[arg(long, value_name = "BYTES", default_value_t = celgate::source::read::DEFAULT_MAX_FILE_BYTES)]
    max_file_bytes: u64,
    /// Unknown and duplicate fields of the policy folder's policies, bindings and
    /// ConfigMaps, as `kubectl apply --validate`: `strict` refuses the folder, `warn` warns
    /// on standard error, `ignore`.
    #[arg(long, value_name = "strict|warn|ignore", default_value_t = celgate::source::folder::FieldValidation::Strict)]
    field_validation: celgate::source::folder::FieldValidation,
}

/// `celgate scan`'s output.
#[derive(Clone, Copy, clap::ValueEnum)]
enum ScanOutput {
    Table,
    Yaml,
    Json,
}

/// `celgate scan`'s report API.
#[derive(Clone, Copy, clap::ValueEnum)]
enum ReportKind {
    Wgpolicy,
    Openreports,
}

/// `celgate scan`.
pub fn run(args: ScanArgs) -> Result<Outcome, CliError> {
    let scanned = celgate::app::scan::scan_folder(
        &args.policies,
        &args.objects,
        args.k8s_version.0,
        args.max_file_bytes,
        args.field_validation,
    )
    .map_err(|e| CliError::Input(e.into()))?;
    warn_skipped(&scanned.skipped);
    for w in &scanned.field_warnings {
        eprintln!("warning: {w}");
    }
    let api = match args.reports {
        ReportKind::Wgpolicy => ReportApi::WgPolicy,
        ReportKind::Openreports => ReportApi::OpenReports,
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    let text = match args.output {
        ScanOutput::Table => report::table(&scanned.snapshot, &scanned.objects),
        ScanOutput::Yaml | ScanOutput::Json => {
            let items = report::reports(&scanned.snapshot, &scanned.objects, api, now);
            if matches!(args.output, ScanOutput::Json) {
                let items: Vec<_> = items.collect();
                let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": items});
                format!(
                    "{}\n",
                    serde_json::to_string_pretty(&list).map_err(CliError::Json)?
                )
            } else {
                // Each report is turned into text and dropped before the next is built.
                items
                    .map(|r| serde_yaml_ng::to_string(&r).map(|text| format!("---\n{text}")))
                    .collect::<Result<String, _>>()
                    .map_err(CliError::Yaml)?
            }
        }
    };
    emit(&text);
    Ok(if scanned.denied() {
        Outcome::Refused
    } else {
        Outcome::Success
    })
}
