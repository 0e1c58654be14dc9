//! Tests: the second variable of a two-variable comprehension over a `dyn` range, per
//! Kubernetes minor. cel-go v0.22.0 (vendored by Kubernetes 1.32) leaves it untyped:
//! `checker/checker.go`, `checkComprehension`, sets `var2Type` only for list and map ranges,
//! so the variable is declared with a nil `*types.Type` (kind unspecified, name `''`,
//! `common/types/types.go`). cel-go #1077 (v0.22.1) types it `dyn`; Kubernetes 1.33 vendors
//! cel-go v0.23.

use serde_json::json;

use crate::{Env, Meter, Type, Value};

/// The compile error of `src` with `x` declared `dyn`, as `(column, message)` pairs; `None`
/// if it compiles.
fn compile_issues(version: u16, src: &str) -> Option<Vec<(usize, String)>> {
    let mut env = Env::new(version);
    env.declare("x", Type::Dyn);
    env.compile(src).err().map(|e| {
        e.issues
            .iter()
            .map(|i| (i.column, i.message.clone()))
            .collect()
    })
}

fn one_issue(column: usize, message: &str) -> Option<Vec<(usize, String)>> {
    Some(vec![(column, message.to_string())])
}

/// Evaluates `src` with `x` bound to a small map.
fn eval(version: u16, src: &str) -> String {
    let mut env = Env::new(version);
    env.declare("x", Type::Dyn);
    let program = match env.compile(src) {
        Ok(p) => p,
        Err(e) => return format!("compile error: {e}"),
    };
    let doc = json!({"a": {"on": true}, "b": {"on": false}});
    let activation = [Value::from_json(&doc)];
    let mut meter = Meter::default();
    match program.eval(&activation, &mut meter) {
        Ok(v) => format!("{v:?}"),
        Err(e) => format!("eval error: {e}"),
    }
}

#[test]
fn the_untyped_second_variable_supports_no_field_selection_in_1_32() {
    // `checkSelect` on a nil type: `typeDoesNotSupportFieldSelection` prints the type as ''.
    assert_eq!(
        compile_issues(32, "x.exists(k, v, v.on)"),
        one_issue(17, "type '' does not support field selection")
    );
    assert_eq!(compile_issues(33, "x.exists(k, v, v.on)"), None);
    assert_eq!(eval(33, "x.exists(k, v, v.on)"), "Bool(true)");
}

#[test]
fn the_untyped_second_variable_matches_no_concrete_overload_in_1_32() {
    // `resolveOverload`: a nil argument is assignable to no concrete parameter
    // (`checker/types.go`, `internalIsAssignable` falls to its default case).
    assert_eq!(
        compile_issues(32, "x.all(k, v, v != null)"),
        one_issue(
            15,
            "found no matching overload for '_!=_' applied to '(, null)'"
        )
    );
    assert_eq!(
        compile_issues(32, "x.transformList(k, v, v.size())"),
        one_issue(29, "found no matching overload for 'size' applied to '.()'")
    );
    // A type parameter binds to it, then refuses a concrete type (`isValidTypeSubstitution`).
    assert_eq!(
        compile_issues(32, "x.existsOne(k, v, v == 'a')"),
        one_issue(
            21,
            "found no matching overload for '_==_' applied to '(, string)'"
        )
    );
    assert_eq!(compile_issues(33, "x.existsOne(k, v, v == 'a')"), None);
}

#[test]
fn a_clean_check_that_reads_the_untyped_variable_fails_converting_the_checked_ast_in_1_32() {
    // `dyn` accepts nil, so the check passes; the checked AST then holds the nil type, which
    // `cel.AstToCheckedExpr` (`common/types/pb`, no conversion for it) refuses: Kubernetes
    // calls it before creating the program (`plugin/cel/compile.go`).
    let msg = "missing type conversion to proto: ";
    assert_eq!(compile_issues(32, "x.all(k, v, k == v)"), one_issue(0, msg));
    assert_eq!(
        compile_issues(32, "x.transformList(k, v, [v]).size() == 2"),
        one_issue(0, msg)
    );
    assert_eq!(eval(33, "x.all(k, v, k == v)"), "Bool(false)");
}

#[test]
fn a_map_step_with_an_untyped_value_is_not_the_accumulator_type_in_1_32() {
    // The step `cel.@mapInsert(@result, k, v)` is `map(dyn, nil)`, asserted against `{}`'s
    // `map(_var0, _var1)` at the macro call (`ext/comprehensions.go`, `checkComprehension`).
    let msg = "expected type 'map(_var0, _var1)' but found 'map(dyn, )'";
    assert_eq!(
        compile_issues(32, "x.transformMap(k, v, v)"),
        one_issue(15, msg)
    );
    assert_eq!(
        compile_issues(32, "x.transformMapEntry(k, v, {k: v})"),
        one_issue(20, msg)
    );
    assert_eq!(compile_issues(33, "x.transformMap(k, v, v)"), None);
}

#[test]
fn typed_ranges_and_an_unread_second_variable_are_unaffected_in_1_32() {
    // List and map ranges type both variables; an unread nil-typed variable leaves no nil
    // type in the checked AST.
    assert_eq!(compile_issues(32, "[1, 2].all(i, v, v > i)"), None);
    assert_eq!(compile_issues(32, "{'a': 1}.exists(k, v, v == 1)"), None);
    assert_eq!(
        eval(32, "x.transformList(k, v, k)"),
        eval(33, "x.transformList(k, v, k)")
    );
    assert!(eval(32, "x.exists(k, v, k == 'b')").contains("true"));
}
