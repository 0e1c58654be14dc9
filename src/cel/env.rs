//! The compile environment: the Kubernetes version whose libraries are available, the
//! declared variables, and [`Program`], an expression compiled once and evaluated many times.

use std::sync::Arc;

use super::checker::Checker;
use super::error::{CompileError, EvalError};
use super::eval::{Activation, Evaluator, Meter, Node};
use super::parser::parse;
use super::types::Type;
use super::value::Value;

/// The newest Kubernetes minor version whose CEL environment celgate knows (1.37, which
/// adds `includes`); the default compatibility version.
pub const NEWEST_MINOR: u16 = 37;

/// Stack of the compiler thread: room for the deepest tree the parser accepts.
pub const COMPILER_STACK: usize = 64 << 20;

/// A declared variable.
#[derive(Debug, Clone)]
pub struct Variable {
    pub name: String,
    pub ty: Type,
    pub kind: VarKind,
}

#[derive(Debug, Clone)]
pub enum VarKind {
    Plain,
    /// A map of composited variables, each computed on first use: the fields and their
    /// types, in declaration order.
    Lazy(Vec<(String, Type)>),
}

/// Everything an expression is compiled against.
#[derive(Debug, Clone)]
pub struct Env {
    /// Kubernetes minor version (1.N): a library is available when it was introduced at or
    /// before this version (the stored-expressions environment at this compatibility version).
    pub version: u16,
    /// Full type checking (off only for conformance tests marked `disable_check`).
    pub check_types: bool,
    /// Fold constant literals and conversions at compile time, as cel-go's `OptOptimize`.
    pub optimize: bool,
    /// Kubernetes' `HomogeneousAggregateLiterals`: mixed-type list and map literals are
    /// compile errors. Plain CEL (the cel-spec suite) allows them.
    pub homogeneous_literals: bool,
    variables: Vec<Variable>,
}

impl Default for Env {
    fn default() -> Self {
        Env::new(NEWEST_MINOR)
    }
}

impl Env {
    pub fn new(version: u16) -> Self {
        Env {
            version,
            check_types: true,
            optimize: true,
            homogeneous_literals: true,
            variables: Vec::new(),
        }
    }

    /// Declares a variable; returns its slot in the activation.
    pub fn declare(&mut self, name: &str, ty: Type) -> usize {
        self.variables.push(Variable {
            name: name.to_string(),
            ty,
            kind: VarKind::Plain,
        });
        self.variables.len() - 1
    }

    /// Declares a map of lazily computed variables (`variables` in a policy).
    pub fn declare_lazy(&mut self, name: &str, fields: Vec<(String, Type)>) -> usize {
        self.variables.push(Variable {
            name: name.to_string(),
            ty: Type::Dyn,
            kind: VarKind::Lazy(fields),
        });
        self.variables.len() - 1
    }

    pub fn variable(&self, name: &str) -> Option<(usize, &Variable)> {
        self.variables
            .iter()
            .enumerate()
            .find(|(_, v)| v.name == name)
    }

    pub fn variables(&self) -> &[Variable] {
        &self.variables
    }

    /// Parses and checks `source`.
    ///
    /// Runs on a thread of its own with a [`COMPILER_STACK`] stack: the parser and checker
    /// recurse once per nesting level, up to the parser's depth limit, and that must not
    /// depend on the caller's stack (a 2 MiB test or async worker thread is too small for
    /// 250 levels in a debug build). Compilation happens when a policy changes, not per
    /// request, so the thread costs nothing on the hot path.
    pub fn compile(&self, source: &str) -> Result<Program, CompileError> {
        let work = || {
            let ast = parse(source)?;
            let (root, ty) = Checker::new(self, source).check(&ast)?;
            Ok(Program {
                root,
                ty,
                source: source.into(),
            })
        };
        std::thread::scope(|scope| {
            let handle = std::thread::Builder::new()
                .name("cel-compile".into())
                .stack_size(COMPILER_STACK)
                .spawn_scoped(scope, work);
            match handle {
                Ok(h) => h.join().unwrap_or_else(|_| {
                    Err(CompileError::general(
                        source,
                        "internal error: compiler thread panicked",
                    ))
                }),
                Err(e) => Err(CompileError::general(
                    source,
                    format!("cannot start compiler thread: {e}"),
                )),
            }
        })
    }
}

/// A compiled expression: immutable, `Send + Sync`, evaluated without re-planning.
#[derive(Debug)]
pub struct Program {
    root: Node,
    ty: Type,
    source: Arc<str>,
}

impl Program {
    /// The static type of the result.
    pub fn result_type(&self) -> &Type {
        &self.ty
    }

    pub fn source(&self) -> &str {
        &self.source
    }

    /// Evaluates against `activation`, charging `meter`; stops with a cancellation
    /// ([`EvalError::cancel_reason`]) when the meter's cost limit, memory ceiling or deadline
    /// is passed.
    pub fn eval<'a>(
        &self,
        activation: &dyn Activation<'a>,
        meter: &mut Meter,
    ) -> Result<Value<'a>, EvalError> {
        Evaluator::new(activation, meter).eval(&self.root)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn program_is_send_and_sync() {
        fn check<T: Send + Sync>() {}
        check::<Program>();
        check::<Env>();
    }
}
