//! The Kubernetes CEL environment: parsing, checking, cost-metered evaluation and the
//! Kubernetes libraries, with cel-go's semantics.
//!
//! An expression is compiled once into an immutable [`Program`] (`Send + Sync`) against an
//! [`Env`] (Kubernetes version and declared variables), then evaluated many times against an
//! [`Activation`] that lends the request JSON in place. Evaluation never recurses deeper than
//! the parser's depth limit and is metered in cel-go's cost units.

pub mod ast;
mod checker;
pub mod env;
pub mod error;
pub mod eval;
pub mod json;
pub mod k8s;
pub mod lexer;
pub mod lib;
pub mod library;
pub mod overload;
pub mod parser;
pub mod program;
pub mod regex;
pub mod time;
pub mod types;
pub mod value;
pub mod vap;

pub use env::{Env, NEWEST_MINOR};
pub use error::{CancelReason, CompileError, EvalError};
pub use eval::{Activation, Meter, DEFAULT_MEMORY_LIMIT, PER_CALL_LIMIT};
pub use program::Program;
pub use types::Type;
pub use value::Value;

#[cfg(test)]
mod tests {
    use std::path::Path;

    /// Every `.rs` file under `dir`, with its text.
    fn sources(dir: &Path, out: &mut Vec<(String, String)>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                sources(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).unwrap();
                out.push((path.display().to_string(), text));
            }
        }
    }

    /// The engine does no I/O and sits under every other layer: of the crate it uses only
    /// itself and the `apimachinery` leaf, and no async runtime, HTTP or Kubernetes client.
    #[test]
    fn the_engine_uses_only_itself_and_apimachinery() {
        let mut files = Vec::new();
        sources(
            &Path::new(env!("CARGO_MANIFEST_DIR")).join("src/cel"),
            &mut files,
        );
        assert!(files.len() > 20, "{} files", files.len());
        for (file, text) in &files {
            // The code, not its tests.
            let code_lines = text.lines().take_while(|l| l.trim() != "#[cfg(test)]");
            for (n, line) in code_lines.enumerate() {
                let code = line.split("//").next().unwrap_or("");
                for (i, _) in code.match_indices("crate::") {
                    let rest = &code[i + "crate::".len()..];
                    assert!(
                        rest.starts_with("cel") || rest.starts_with("apimachinery"),
                        "{file}:{}: {line}",
                        n + 1
                    );
                }
                for forbidden in [
                    "tokio",
                    "kube::",
                    "hyper",
                    "axum",
                    "rustls",
                    "std::fs",
                    "TcpStream",
                ] {
                    assert!(!code.contains(forbidden), "{file}:{}: {line}", n + 1);
                }
            }
        }
    }
}
