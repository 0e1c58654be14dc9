//! `cargo run --release --example cel-batch -- FILE`: evaluates the CEL differential cases of
//! FILE (JSON lines with `id`, `expr`, `vars`; `-` for standard input) as Kubernetes 1.32's
//! ValidatingAdmissionPolicy plugin would, with the fake authorizer of
//! `../shared/cel-differential/README.md`, and writes one JSON line per case with `id`,
//! `outcome`, `static_type`, `type`, `value`, `error`, `error_stage`, `cost` (and
//! `variables_cost` when composited variables were read) in that README's encoding.
//!
//! A line that is not a case gets an `outcome: harness_error` record; the exit status is then 1.
//! An example rather than a `celgate` subcommand: the fake authorizer is a test fixture.

use std::io::{BufRead, BufWriter, Write};
use std::process::ExitCode;

#[path = "../tests/cel_differential/harness.rs"]
mod harness;

/// Evaluation recurses once per nesting level of an expression: room for the deepest one the
/// parser accepts, whatever the main thread's stack.
const STACK: usize = 64 << 20;

fn run(path: &str) -> Result<bool, String> {
    let input: Box<dyn BufRead> = if path == "-" {
        Box::new(std::io::stdin().lock())
    } else {
        let file = std::fs::File::open(path).map_err(|e| format!("{path}: {e}"))?;
        Box::new(std::io::BufReader::new(file))
    };
    let h = harness::Harness::new();
    let mut out = BufWriter::new(std::io::stdout().lock());
    let mut clean = true;
    for (n, line) in input.lines().enumerate() {
        let line = line.map_err(|e| format!("{path}: {e}"))?;
        if line.trim().is_empty() {
            continue;
        }
        let record = match harness::parse_line(&line) {
            Ok(case) => h.evaluate(&case),
            Err(e) => serde_json::json!({
                "id": null,
                "outcome": "harness_error",
                "error": format!("line {}: not JSON: {e}", n + 1),
            }),
        };
        if record["outcome"] == "harness_error" {
            clean = false;
        }
        writeln!(out, "{record}").map_err(|e| format!("stdout: {e}"))?;
    }
    out.flush().map_err(|e| format!("stdout: {e}"))?;
    Ok(clean)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [path] = args.as_slice() else {
        eprintln!("usage: cel-batch FILE   (JSON lines with id, expr, vars; - for stdin)");
        return ExitCode::from(2);
    };
    let path = path.clone();
    let worker = std::thread::Builder::new()
        .name("cel-batch".into())
        .stack_size(STACK)
        .spawn(move || run(&path));
    let result = match worker {
        Ok(handle) => handle
            .join()
            .unwrap_or_else(|_| Err("the evaluation thread panicked".into())),
        Err(e) => Err(format!("cannot start the evaluation thread: {e}")),
    };
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("cel-batch: {e}");
            ExitCode::from(1)
        }
    }
}
