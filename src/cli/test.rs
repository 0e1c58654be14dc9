//! `celgate test`: policy test suites (`*.celgate-test.yaml`, Kyverno CLI `kyverno-test.yaml`)
//! run by `celgate::testing`, reported as a table, JSON, JUnit XML or TAP, with expression
//! coverage on demand.

use std::path::PathBuf;

use celgate::testing::report::{render, Format};

use crate::cli::flags::{self, Checked, K8sVersion};
use crate::cli::{emit, CliError, Outcome};

#[derive(clap::Args)]
pub struct TestArgs {
    /// Suite files or folders searched recursively.
    #[arg(value_name = "PATH", default_value = ".")]
    paths: Vec<PathBuf>,
    /// Only run cases whose `FILE: CASE NAME` matches this regular expression.
    #[arg(long, value_name = "REGEX", value_parser = Checked(flags::regex))]
    filter: Option<regex::Regex>,
    /// Report format: a table, JSON, JUnit XML or TAP, on standard output.
    #[arg(short = 'o', long, value_enum, default_value = "table")]
    output: TestOutput,
    /// The Kubernetes version whose CEL libraries are available (1.N or v1.N).
    #[arg(long, value_name = "1.N", default_value_t = K8sVersion::NEWEST)]
    k8s_version: K8sVersion,
    /// Report which matchConditions, variables, validations and audit annotations the
    /// cases evaluated, and whether each boolean one was seen both true and false.
    #[arg(long)]
    coverage: bool,
    /// Fail the run (exit 1) when coverage is below this percentage; implies --coverage.
    #[arg(long, value_name = "PERCENT", value_parser = Checked(flags::percentage))]
    min_coverage: Option<f64>,
    /// Write what failing cases (and cases without `expect`) observed into their test
    /// files (comments and key order kept), then run again and report that run.
    #[arg(long)]
    update: bool,
    /// Every file a suite names (policies, resources, objects, reviews) must lie under
    /// this folder once symlinks are resolved (default: the current directory or a PATH
    /// given, or the folder of a suite file given), so that a suite from a pull request
    /// cannot read files elsewhere (`/etc/...`, `../../secret.yaml`); `--root /` allows
    /// any.
    #[arg(long, value_name = "DIR")]
    root: Option<PathBuf>,
    /// Pass a run that tested nothing: no suite found under the paths, no case selected, or
    /// every case skipped (without it such a run fails, exit 1).
    #[arg(long)]
    allow_empty: bool,
    /// Largest file read (a manifest, suite or policy file); a larger one, or one that is not a regular file (a FIFO,
    /// a device), is skipped with a warning in a folder, refused when named
    /// itself.
    #[arg(long, value_name = "BYTES", default_value_t = celgate::source::read::DEFAULT_MAX_FILE_BYTES)]
    max_file_bytes: u64,
    /// Unknown and duplicate fields of policies, bindings and ConfigMaps, as `kubectl apply
    /// --validate`: `strict` makes the suite invalid, `warn` warns on standard error,
    /// `ignore`.
    #[arg(long, value_name = "strict|warn|ignore", default_value_t = celgate::source::folder::FieldValidation::Strict)]
    field_validation: celgate::source::folder::FieldValidation,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum TestOutput {
    Table,
    Json,
    Junit,
    Tap,
}

/// The folders `celgate test`'s suites may read under: `--root`, else the working directory
/// and each PATH (a suite file's folder).
fn test_roots(root: Option<PathBuf>, paths: &[PathBuf]) -> Vec<PathBuf> {
    if let Some(root) = root {
        return vec![root];
    }
    // A PATH that does not exist is reported as such by the run, not as a bad root.
    let given = paths
        .iter()
        .filter(|p| p.exists())
        .map(|p| match p.parent() {
            Some(parent) if p.is_file() && !parent.as_os_str().is_empty() => parent.to_path_buf(),
            _ if p.is_file() => PathBuf::from("."),
            _ => p.clone(),
        });
    std::iter::once(PathBuf::from(".")).chain(given).collect()
}

/// `celgate test`.
pub fn run(args: TestArgs) -> Result<Outcome, CliError> {
    let options = celgate::testing::Options {
        filter: args.filter,
        version: args.k8s_version.0,
        coverage: args.coverage,
        min_coverage: args.min_coverage,
        update: args.update,
        roots: test_roots(args.root, &args.paths),
        max_file_bytes: args.max_file_bytes,
        allow_empty: args.allow_empty,
        field_validation: args.field_validation,
    };
    let report =
        celgate::testing::run(&args.paths, &options).map_err(|e| CliError::Input(e.into()))?;
    for w in &report.field_warnings {
        eprintln!("warning: {w}");
    }
    let format = match args.output {
        TestOutput::Table => Format::Table,
        TestOutput::Json => Format::Json,
        TestOutput::Junit => Format::Junit,
        TestOutput::Tap => Format::Tap,
    };
    for note in &report.updated {
        eprintln!("celgate: {note}");
    }
    emit(&render(&report, format));
    // JUnit and TAP stay machine-readable: the coverage table goes to standard error.
    if let (Some(c), Format::Junit | Format::Tap) = (&report.coverage, format) {
        eprint!("{}", c.table());
    }
    if report.coverage_too_low() {
        if let Some(c) = &report.coverage {
            eprintln!(
                "celgate: coverage {:.1}% is below --min-coverage {}",
                c.percent(),
                args.min_coverage.unwrap_or_default()
            );
        }
    }
    if report.fails_empty() {
        if let Some(nothing) = report.nothing_tested() {
            eprintln!(
                "celgate: no test ran: {}; --allow-empty accepts a run without tests",
                nothing.describe(&report.searched)
            );
        }
    }
    Ok(match report.exit_code() {
        0 => Outcome::Success,
        1 => Outcome::Refused,
        _ => Outcome::Invalid,
    })
}
