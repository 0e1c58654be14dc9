//! The `celgate` command line: parses the flags, runs the command (`cli`, one module per
//! command) and turns how it ended into the exit code and the message on standard error, in
//! one place.

#![deny(unsafe_code)]

mod cli;

use std::process::ExitCode;

use clap::Parser;

use celgate::app::ServeError;
use cli::{on_big_stack, CliError, Command, Outcome};

/// The binary's allocator: mimalloc (issue 29, measured against glibc's malloc on the server
/// bench, alternated). The engine crates keep whatever allocator their user chooses.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let result = match cli::Cli::parse().command {
        // Serving runs on its own runtime's threads.
        Command::Serve(args) => cli::serve::run(args),
        // The offline commands evaluate CEL: on a stack deep enough for any nesting.
        Command::Expr(args) => on_big_stack(move || cli::expr::run(args)),
        Command::Eval(args) => on_big_stack(move || cli::eval::run(args)),
        Command::Test(args) => on_big_stack(move || cli::test::run(args)),
        Command::Crd(args) => on_big_stack(move || cli::crd::run(args)),
        Command::Scan(args) => on_big_stack(move || cli::scan::run(args)),
        Command::Lint(args) => cli::lint::run(args),
        Command::WebhookRules(args) => on_big_stack(move || cli::webhook_rules::run(args)),
        Command::Completion(args) => cli::completion::run(args),
        Command::Man(args) => cli::man::run(args),
        Command::Version(args) => cli::version::run(args),
    };
    exit(result)
}

/// The exit code of how a command ended, after saying why it stopped, if it did: 1 for a CEL
/// error of `celgate expr`, a failure of the service or of writing the result (or a man
/// page), 2 for bad
/// usage or input.
fn exit(result: Result<Outcome, CliError>) -> ExitCode {
    let error = match result {
        Ok(outcome) => return ExitCode::from(outcome as u8),
        Err(error) => error,
    };
    match error {
        // The compiler's message is the whole report, as cel-go prints it.
        CliError::Compile(e) => eprintln!("{e}"),
        e @ CliError::Evaluation(_) => eprintln!("{e}"),
        // Logged, in the format of the service's logs.
        CliError::Serve(ServeError::Start(e)) => tracing::error!(error = %e, "cannot start"),
        CliError::Serve(ServeError::CaOut { path, source }) => {
            tracing::error!(error = %source, path = %path.display(), "cannot write the CA bundle");
        }
        e @ (CliError::Serve(_)
        | CliError::Thread(_)
        | CliError::Json(_)
        | CliError::Yaml(_)
        | CliError::ManPages { .. }
        | CliError::ManPage(_)) => {
            eprintln!("celgate: {e}")
        }
        // The panic message is printed already.
        CliError::Panicked => {}
        usage => {
            eprintln!("celgate: {usage}");
            return ExitCode::from(2);
        }
    }
    ExitCode::from(1)
}
