//! Tests: `has()` on a composited variable. Kubernetes binds `variables` to a
//! `lazy.MapValue` (`k8s.io/apiserver/pkg/cel/lazy/lazy.go`) whose declared type offers no
//! field tester, so cel-go's presence test (`interpreter/attributes.go`, `refQualify`) asks
//! the map's `Find`: it evaluates the variable, answers true for every declared one whatever
//! its value, and returns the variable's own error (`composited variable "x" fails to
//! evaluate: ...`, `plugin/cel/composition.go`, `variableAccessor.Callback`).

use crate::{Activation, Env, EvalError, Meter, Type, Value};

/// Composited variables `empty` (null), `broken` (fails) and `n` (an int).
struct Lazy;

impl<'a> Activation<'a> for Lazy {
    fn var(&self, _slot: usize) -> Value<'a> {
        Value::Null
    }
    fn lazy(&self, index: usize) -> Result<Value<'a>, EvalError> {
        match index {
            0 => Ok(Value::Null),
            1 => Err(EvalError::new(
                "composited variable \"broken\" fails to evaluate: division by zero",
            )),
            _ => Ok(Value::Int(3)),
        }
    }
}

fn eval(src: &str) -> String {
    let mut env = Env::new(32);
    env.declare_lazy(
        "variables",
        vec![
            ("empty".into(), Type::Dyn),
            ("broken".into(), Type::Int),
            ("n".into(), Type::Int),
        ],
    );
    let program = match env.compile(src) {
        Ok(p) => p,
        Err(e) => return format!("compile error: {e}"),
    };
    match program.eval(&Lazy, &mut Meter::default()) {
        Ok(v) => format!("{v:?}"),
        Err(e) => format!("eval error: {e}"),
    }
}

#[test]
fn a_declared_composited_variable_is_present_whatever_its_value() {
    assert_eq!(eval("has(variables.empty)"), "Bool(true)");
    assert_eq!(eval("has(variables.n) && variables.n == 3"), "Bool(true)");
}

#[test]
fn a_composited_variable_that_fails_fails_its_presence_test() {
    assert_eq!(
        eval("has(variables.broken)"),
        "eval error: composited variable \"broken\" fails to evaluate: division by zero"
    );
}

#[test]
fn an_undeclared_composited_variable_is_still_a_compile_error() {
    assert!(eval("has(variables.nope)").contains("undefined field 'nope'"));
}
