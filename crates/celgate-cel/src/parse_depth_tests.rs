//! Tests: the parser's depth limits. cel-go v0.22.0 `parser/parser.go` counts against its
//! `MaxRecursionDepth` (250) only the nodes its AST visitor wraps in
//! `checkAndIncrementRecursionDepth` (ternaries, relations and arithmetic with an operator,
//! selections, member calls, indexes), and ANTLR's `recursionListener` limits nesting of each
//! grammar rule; celgate adds its own bound on the whole tree ([`MAX_TREE_DEPTH`]) so that
//! checking, evaluating and dropping a tree stay within a default thread's stack.

use crate::ast::Expr;
use crate::error::CompileError;
use crate::parser::{MAX_DEPTH, MAX_TREE_DEPTH};
use crate::program::COMPILER_STACK;
use crate::{Activation, Env, Meter, Value};

struct NoVars;

impl<'a> Activation<'a> for NoVars {
    fn var(&self, _slot: usize) -> Value<'a> {
        Value::Null
    }
}

/// `leaf` wrapped `levels` times by `wrap`.
fn nest(levels: usize, leaf: &str, wrap: impl Fn(&str) -> String) -> String {
    (0..levels).fold(leaf.to_string(), |inner, _| wrap(&inner))
}

/// `first` then `n` times `op term`: a left-associative chain of `n` operators.
fn chain(first: &str, op: &str, term: &str, n: usize) -> String {
    format!("{first}{}", format!(" {op} {term}").repeat(n))
}

/// Parses on a stack as big as the compiler thread's, where `Env::compile` parses: the parser
/// recurses once per bracket level.
fn parse(src: &str) -> Result<Expr, CompileError> {
    let src = src.to_string();
    std::thread::Builder::new()
        .stack_size(COMPILER_STACK)
        .spawn(move || crate::parser::parse(&src))
        .unwrap()
        .join()
        .unwrap()
}

fn parse_error(src: &str) -> String {
    parse(src).unwrap_err().to_string()
}

const VISITOR_LIMIT: &str = "ERROR: <input>:-1:0: max recursion depth exceeded";

/// A chain is as deep as its operators: parser.go counts a `CalcContext`, `RelationContext`,
/// `SelectContext`, `MemberCallContext` or `IndexContext` once each, so 250 pass and 251 fail.
#[test]
fn counted_chains_fail_past_the_limit() {
    let n = MAX_DEPTH as usize;
    for (op, term) in [("+", "1"), ("*", "2"), ("==", "true"), ("<", "1")] {
        assert!(parse(&chain("1", op, term, n)).is_ok(), "{op}");
        assert_eq!(
            parse_error(&chain("1", op, term, n + 1)),
            VISITOR_LIMIT,
            "{op}"
        );
    }
    assert!(parse(&format!("a{}", ".b".repeat(n))).is_ok());
    assert_eq!(
        parse_error(&format!("a{}", ".b".repeat(n + 1))),
        VISITOR_LIMIT
    );
    assert!(parse(&format!("a{}", "[0]".repeat(n))).is_ok());
    assert_eq!(
        parse_error(&format!("a{}", "[0]".repeat(n + 1))),
        VISITOR_LIMIT
    );
    assert!(parse(&format!("a{}", ".f()".repeat(n))).is_ok());
    assert_eq!(
        parse_error(&format!("a{}", ".f()".repeat(n + 1))),
        VISITOR_LIMIT
    );
}

/// The counted kinds add up along one path: selections under arithmetic under a relation.
#[test]
fn counted_kinds_add_up_along_a_path() {
    let operand = format!("a{}", ".b".repeat(100));
    let sum = chain(&operand, "+", "1", 100);
    assert!(parse(&chain(&sum, "==", "1", 50)).is_ok());
    assert_eq!(parse_error(&chain(&sum, "==", "1", 51)), VISITOR_LIMIT);
}

/// Lists, maps, global calls, unary operators, `&&`/`||` and parentheses are not counted by
/// parser.go's visitor: 240 nested levels of each pass although the tree is deeper than 250.
#[test]
fn uncounted_kinds_pass_beyond_the_visitor_limit() {
    let levels = 240;
    let shapes = [
        nest(levels, "1", |e| format!("[{e}]")),
        nest(levels, "1", |e| format!("{{0: {e}}}")),
        nest(levels, "1", |e| format!("f({e})")),
        nest(levels, "1", |e| format!("-[{e}]")),
        nest(levels, "x", |e| format!("!(x && {e})")),
    ];
    for src in shapes {
        assert!(parse(&src).is_ok(), "{src}");
    }
}

/// Five nodes a level (list, two `||`, `!`, index) over 201 levels: 1,005 nodes deep, which
/// celgate refuses ([`MAX_TREE_DEPTH`], its own limit; cel-go's visitor counts only the index).
#[test]
fn a_tree_deeper_than_the_tree_limit_is_refused() {
    let level = |e: &str| format!("[false || false || false || !{e}[0]]");
    assert_eq!(
        parse_error(&nest(201, "[true]", level)),
        format!("ERROR: <input>:-1:0: expression tree deeper than {MAX_TREE_DEPTH} nodes")
    );
    assert!(parse(&nest(199, "[true]", level)).is_ok());
}

/// The stack of the threads that evaluate programs (the server's evaluator pool and runtime
/// workers, `src/server/pool.rs` and `src/app/mod.rs`). A test thread's default 2 MiB is not
/// enough: a debug evaluation overflows it at about 150 nested nodes, within cel-go's 250.
const EVALUATOR_STACK: usize = 32 << 20;

/// Trees just within [`MAX_TREE_DEPTH`], of every kind of node, compile (on the compiler
/// thread), evaluate and drop on an evaluator thread's stack in a debug build.
#[test]
fn the_deepest_trees_accepted_are_safe_on_an_evaluator_stack() {
    std::thread::Builder::new()
        .stack_size(EVALUATOR_STACK)
        .spawn(deepest_trees)
        .unwrap()
        .join()
        .unwrap();
}

fn deepest_trees() {
    let bools = |e: &str| format!("[false || false || !{e}[0]]");
    let ints = |e: &str| format!("{{0: -(-{e}[0] + 1)}}");
    let calls = |e: &str| format!("[int(string({e}[0])) - 1 == 0 ? 1 : 2]");
    let comprehensions = |e: &str| format!("[[1].map(x, {e}[0])[0] + 1]");
    let selects = |e: &str| format!("{{'a': [{e}.a[0]]}}");
    let shapes = [
        nest(190, "[true]", bools),
        nest(120, "[1]", ints),
        nest(60, "[1]", calls),
        nest(60, "[1]", comprehensions),
        nest(120, "{'a': [1]}", selects),
    ];
    let env = Env::new(32);
    for src in shapes {
        let program = env.compile(&src).unwrap_or_else(|e| panic!("{src}: {e}"));
        let value = program.eval(&NoVars, &mut Meter::default());
        assert!(value.is_ok(), "{src}: {value:?}");
        drop(program);
    }
}
