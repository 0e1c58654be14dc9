//! `celgate completion SHELL`: the shell's completion script for every command, flag and
//! value, generated from the clap tree (`clap_complete`) so that it cannot drift from the
//! flags.

use clap::CommandFactory;
use clap_complete::Shell;

use crate::cli::{emit, Cli, CliError, Outcome};

#[derive(clap::Args)]
pub struct CompletionArgs {
    /// The shell whose script is printed.
    #[arg(value_enum)]
    shell: Shell,
}

/// `celgate completion`: the script on standard output, exit 0.
pub fn run(args: CompletionArgs) -> Result<Outcome, CliError> {
    let mut cmd = Cli::command();
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut cmd, "celgate", &mut script);
    // The script is made of the clap tree's names and help texts, all Rust strings: UTF-8.
    emit(&String::from_utf8_lossy(&script));
    Ok(Outcome::Success)
}
