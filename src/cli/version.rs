//! `celgate version`: celgate's version and the Kubernetes minor versions whose CEL
//! environments it carries (`--k8s-version`), as text or, for scripts, JSON or YAML.

use celgate::cel::{NEWEST_MINOR, OLDEST_MINOR};

use crate::cli::flags::DocFormat;
use crate::cli::{emit_document, emit_line, CliError, Outcome};

#[derive(clap::Args)]
pub struct VersionArgs {
    /// `text`: `celgate X.Y.Z`; `json` or `yaml`: `version` and the Kubernetes versions
    /// `--k8s-version` accepts (`kubernetes.oldest`, `kubernetes.newest`).
    #[arg(short = 'o', long, value_enum, default_value = "text")]
    output: VersionOutput,
}

/// `celgate version`'s output.
#[derive(Clone, Copy, clap::ValueEnum)]
enum VersionOutput {
    Text,
    Json,
    Yaml,
}

/// `celgate version`: exit 0.
pub fn run(args: VersionArgs) -> Result<Outcome, CliError> {
    let version = env!("CARGO_PKG_VERSION");
    let document = serde_json::json!({
        "version": version,
        "kubernetes": {
            "oldest": format!("1.{OLDEST_MINOR}"),
            "newest": format!("1.{NEWEST_MINOR}"),
        },
    });
    match args.output {
        VersionOutput::Text => emit_line(&format!("celgate {version}")),
        VersionOutput::Json => emit_document(&document, DocFormat::Json)?,
        VersionOutput::Yaml => emit_document(&document, DocFormat::Yaml)?,
    }
    Ok(Outcome::Success)
}
