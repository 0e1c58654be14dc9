//! `celgate crd check|validate`: CustomResourceDefinition validation rules offline
//! (`celgate::crd::cli`): whether the API server would accept a CRD, and its answer to a
//! custom resource created or updated.

use std::path::PathBuf;

use celgate::crd::cli;

use crate::cli::files::{load_path, read_all};
use crate::cli::flags::LogFormat;
use crate::cli::{emit_line, CliError, Outcome};

#[derive(clap::Args)]
pub struct CrdArgs {
    #[command(subcommand)]
    command: CrdCommand,
    /// Largest file read (a CRD or custom resource file); a larger one, or one that is not
    /// a regular file (a FIFO, a device), is skipped with a warning in a folder, refused
    /// when named itself.
    #[arg(long, global = true, value_name = "BYTES", default_value_t = celgate::source::read::DEFAULT_MAX_FILE_BYTES)]
    max_file_bytes: u64,
}

#[derive(clap::Subcommand)]
enum CrdCommand {
    /// Check CRDs: structural schema and every x-kubernetes-validations rule, as the API
    /// server would on creating (or, with --old, replacing) each CRD of the files.
    Check {
        /// Files of CRDs (YAML, multi-document, or JSON; `-` for standard input); other
        /// documents are skipped.
        #[arg(value_name = "FILE")]
        files: Vec<PathBuf>,
        /// A CRD file (the same as a FILE argument; kept for compatibility).
        #[arg(long, value_name = "FILE", hide = true)]
        crd: Vec<PathBuf>,
        /// Stored CRDs (repeatable): a CRD of FILE named as one of them is checked as
        /// replacing it (an update): rules it already has compile with the server's own
        /// library, and an unchanged schema is exempt from the per-rule cost limit.
        #[arg(long, value_name = "FILE")]
        old: Vec<PathBuf>,
        /// Output: text (the Status message) or json (one object per CRD and line).
        #[arg(short = 'o', long, value_enum, default_value = "text")]
        output: LogFormat,
        /// Also list every rule's estimated cost: per evaluation, times how often it may
        /// run, and its share of the per-rule limit and of the CRD budget.
        #[arg(long)]
        costs: bool,
    },
    /// Validate custom resources against their CRDs: a create, or an update of the object
    /// of the same kind, namespace and name in --old.
    Validate {
        /// Files of custom resources (YAML, multi-document, or JSON; `-` for standard input);
        /// CRD documents among them are skipped.
        #[arg(value_name = "FILE")]
        files: Vec<PathBuf>,
        /// The CRDs: a file, or a folder searched recursively for .yaml, .yml and .json
        /// files; a custom resource is matched by its apiVersion's group and version (a
        /// served version) and its kind.
        #[arg(long, value_name = "PATH", alias = "crd")]
        crds: PathBuf,
        /// A custom resource file (the same as a FILE argument; kept for compatibility).
        #[arg(long, value_name = "FILE", hide = true)]
        object: Vec<PathBuf>,
        /// Stored objects (repeatable): a custom resource with the same group, kind,
        /// namespace and name as one of them is validated as an update of it (transition
        /// rules, ratcheting); the others as creates.
        #[arg(long, value_name = "FILE")]
        old: Vec<PathBuf>,
        /// Validate as an update of this subresource of the stored object.
        #[arg(long, value_enum, value_name = "NAME", requires = "old")]
        subresource: Option<Subresource>,
        /// The same as --subresource status (kept for compatibility).
        #[arg(long, requires = "old", hide = true)]
        status: bool,
        /// Output: text (the Status message) or json (one object per custom resource and
        /// line).
        #[arg(short = 'o', long, value_enum, default_value = "text")]
        output: LogFormat,
    },
}

/// A subresource `crd validate` can update.
#[derive(Clone, Copy, clap::ValueEnum)]
enum Subresource {
    /// /status: only the status is taken from the object sent; nothing ratchets.
    Status,
}

/// `celgate crd`.
pub fn run(args: CrdArgs) -> Result<Outcome, CliError> {
    let max_bytes = args.max_file_bytes;
    let answer = match args.command {
        CrdCommand::Check {
            mut files,
            crd,
            old,
            output,
            costs,
        } => {
            files.extend(crd);
            let docs = read_all(&files, max_bytes)?;
            let olds = read_all(&old, max_bytes)?;
            cli::check_all(&docs, &olds, costs, matches!(output, LogFormat::Json))
                .ok_or(CliError::NoCrd)?
        }
        CrdCommand::Validate {
            mut files,
            crds,
            object,
            old,
            subresource,
            status,
            output,
        } => {
            files.extend(object);
            let docs = load_path(&crds, max_bytes).map_err(|source| CliError::FlagFile {
                flag: "--crds",
                source: Box::new(source),
            })?;
            let catalog = cli::Catalog::new(docs.into_iter().map(|d| d.object)).map_err(|e| {
                CliError::FlagInput {
                    flag: "--crds",
                    source: e.into(),
                }
            })?;
            if catalog.is_empty() {
                return Err(CliError::NoServedCrd { path: crds });
            }
            let objects = read_all(&files, max_bytes)?;
            let olds = read_all(&old, max_bytes)?;
            let status = status || matches!(subresource, Some(Subresource::Status));
            cli::validate_all(
                &catalog,
                &objects,
                &olds,
                status,
                matches!(output, LogFormat::Json),
            )
            .map_err(|e| CliError::Input(e.into()))?
        }
    };
    emit_line(&answer.output);
    Ok(if answer.accepted {
        Outcome::Success
    } else {
        Outcome::Refused
    })
}
