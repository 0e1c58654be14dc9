//! [`Program`], an expression compiled once against an [`Env`] and evaluated many times:
//! the parser, the checker and the evaluator put together.

use std::sync::Arc;

use super::checker::Checker;
use super::env::Env;
use super::error::{CompileError, EvalError};
use super::eval::{Activation, Evaluator, Node};
use super::meter::Meter;
use super::parser::parse_for;
use super::types::Type;
use super::value::Value;

/// Stack of the compiler thread: room for the deepest tree the parser accepts.
pub const COMPILER_STACK: usize = 64 << 20;

impl Env {
    /// Parses and checks `source`.
    ///
    /// Runs on a thread of its own with a 64 MiB stack: the parser and checker
    /// recurse once per nesting level, up to the parser's depth limit, and that must not
    /// depend on the caller's stack (a 2 MiB test or async worker thread is too small for
    /// 250 levels in a debug build). Compilation happens when a policy changes, not per
    /// request, so the thread costs nothing on the hot path.
    pub fn compile(&self, source: &str) -> Result<Program, CompileError> {
        let work = || {
            let ast = parse_for(source, self.version)?;
            let (root, ty) = Checker::new(self, source).check_expr(&ast)?;
            Ok(Program {
                root,
                ty,
                source: source.into(),
            })
        };
        on_compiler_thread(source, work)
    }
}

impl Env {
    /// Parses and type-checks `source` without planning a program: its result type, or the
    /// errors cel-go's `Compile` reports (the checker's `check_only`). For offline type
    /// checking (`celgate lint`); on the compiler thread as [`Env::compile`].
    pub fn check(&self, source: &str) -> Result<Type, CompileError> {
        on_compiler_thread(source, || {
            let ast = parse_for(source, self.version)?;
            Checker::new(self, source).check_only(&ast)
        })
    }
}

/// Runs `work` (parsing and checking `source`) on a thread with a [`COMPILER_STACK`] stack.
fn on_compiler_thread<T: Send>(
    source: &str,
    work: impl FnOnce() -> Result<T, CompileError> + Send,
) -> Result<T, CompileError> {
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

/// A checked expression's tree with the type of each of its nodes (by node address: the
/// tree is boxed so the addresses stay valid), for static analysis such as cost estimation.
#[derive(Debug)]
pub struct TypedAst {
    /// The checked tree.
    pub expr: Box<super::ast::Expr>,
    types: std::collections::HashMap<usize, Type>,
}

impl TypedAst {
    /// The checked type of `e`, a node of [`TypedAst::expr`]; `None` for a node the checker
    /// did not type on its own (a part of a qualified name it resolved at once).
    pub fn type_of(&self, e: &super::ast::Expr) -> Option<&Type> {
        self.types.get(&(e as *const super::ast::Expr as usize))
    }
}

impl Env {
    /// [`Env::compile`], also returning the parsed tree with each node's checked type.
    pub fn compile_typed(&self, source: &str) -> Result<(Program, TypedAst), CompileError> {
        let work = || {
            let ast = Box::new(parse_for(source, self.version)?);
            let mut checker = Checker::new(self, source);
            checker.record_node_types();
            let (root, ty) = checker.check_expr(&ast)?;
            let types = checker.take_node_types();
            Ok((
                Program {
                    root,
                    ty,
                    source: source.into(),
                },
                TypedAst { expr: ast, types },
            ))
        };
        on_compiler_thread(source, work)
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

    /// The expression's source.
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
    }

    #[test]
    fn constant_constructors_are_kept_and_charged_at_every_evaluation() {
        let (env, _) = crate::vap::vap_env(
            crate::NEWEST_MINOR,
            crate::vap::Decls {
                params: false,
                authorizer: false,
            },
        );
        let none: [Value<'static>; 0] = [];
        let p = env
            .compile("quantity('123456789012345')")
            .expect("compiles");
        assert!(matches!(p.root, Node::Kept { cost: 2, .. }), "{:?}", p.root);
        for _ in 0..2 {
            let mut meter = Meter::default();
            let q = p.eval(&none, &mut meter).expect("evaluates");
            assert_eq!(q.type_name(), "kubernetes.Quantity");
            assert_eq!(meter.cost, 2, "ceil(0.1 * 15), as cel-go charges the call");
        }
        // A constant that fails stays a call: the error is the evaluation's, not compiled.
        let bad = env.compile("quantity('x')").expect("compiles");
        assert!(matches!(bad.root, Node::Call { .. }), "{:?}", bad.root);
        let mut meter = Meter::default();
        assert!(bad.eval(&none, &mut meter).is_err());
        assert_eq!(meter.cost, 1);
    }
}
