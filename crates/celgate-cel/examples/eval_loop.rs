//! Evaluates one expression N times against a JSON object bound to `object` (the VAP
//! environment, as `cargo bench --bench cel`'s "evaluation only" group does), for instruction
//! counts of the evaluator under callgrind: `eval_loop FILE EXPR N`. Profile only [`run`]:
//! `valgrind --tool=callgrind --toggle-collect=eval_loop::run`.

use celgate_cel::json::Doc;
use celgate_cel::vap::{vap_env, Decls};
use celgate_cel::{Meter, Program, Value, NEWEST_MINOR, PER_CALL_LIMIT};

#[inline(never)]
fn run(program: &Program, doc: &Doc<'_>, n: usize) -> usize {
    let mut held = 0;
    for _ in 0..n {
        let vars = [
            Value::from_doc(doc.root()),
            Value::Null,
            Value::Null,
            Value::Null,
        ];
        let mut meter = Meter::with_limit(PER_CALL_LIMIT);
        held += usize::from(matches!(
            program.eval(&vars, &mut meter),
            Ok(Value::Bool(true))
        ));
    }
    held
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let bytes = std::fs::read(&args[1]).expect("a JSON file");
    let doc = Doc::parse(&bytes).expect("JSON");
    let decls = Decls {
        params: false,
        authorizer: false,
    };
    let program = vap_env(NEWEST_MINOR, decls)
        .0
        .compile(&args[2])
        .expect("the expression compiles");
    let n: usize = args[3].parse().expect("a count");
    run(&program, &doc, 1);
    println!("{} of {n} held", run(&program, &doc, n));
}
