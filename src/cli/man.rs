//! `celgate man [--out DIR]`: man pages generated from the clap tree (`clap_mangen`), so that
//! they cannot drift from the flags: `celgate.1` on standard output, or it and one page per
//! subcommand (`celgate-eval.1`, `celgate-crd-check.1`, ...) written into a folder.

use std::path::PathBuf;

use clap::CommandFactory;

use crate::cli::{emit, Cli, CliError, Outcome};

#[derive(clap::Args)]
pub struct ManArgs {
    /// Write `celgate.1` and one page per subcommand (`celgate-eval.1`,
    /// `celgate-crd-check.1`, ...) into this folder, created if missing, instead of printing
    /// `celgate.1`.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
}

/// `celgate man`: exit 0, or 1 when a page cannot be written.
pub fn run(args: ManArgs) -> Result<Outcome, CliError> {
    let cmd = Cli::command();
    match args.out {
        Some(dir) => std::fs::create_dir_all(&dir)
            .and_then(|()| clap_mangen::generate_to(cmd, &dir))
            .map_err(|source| CliError::ManPages { dir, source })?,
        None => {
            let mut page = Vec::new();
            clap_mangen::Man::new(cmd)
                .render(&mut page)
                .map_err(CliError::ManPage)?;
            // roff made of the clap tree's names and help texts, all Rust strings: UTF-8.
            emit(&String::from_utf8_lossy(&page));
        }
    }
    Ok(Outcome::Success)
}
