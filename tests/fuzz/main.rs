//! Fuzz targets, run on stable Rust with proptest: the CEL lexer, parser and checker on
//! arbitrary and grammar-aware text (`parse`), the evaluator on well-typed generated
//! expressions over generated JSON (`eval`), `Doc::parse` on arbitrary and mutated JSON
//! (`doc`), the review decoder on mutated AdmissionReviews (`review`), and the policy loader
//! on mutated YAML (`policy`).
//!
//! `cargo test --test fuzz` runs each target for a bounded count of cases with a fixed seed
//! (CI), and replays every input kept under `tests/fuzz-regressions/<target>/`.
//! `make fuzz FUZZ_SECONDS=N` runs each target for N seconds with fresh seeds; a failing
//! input is shrunk and kept there as a plain file (the input itself, not a seed). Inputs
//! under `tests/fuzz-regressions/pending/<target>/` (known failures whose fix is elsewhere)
//! are listed by the replay, not run.

mod cel_gen;
mod choices;
#[path = "../common/mod.rs"]
mod common;
mod harness;
mod json_gen;
mod targets;

use proptest::collection::vec;
use proptest::prelude::*;

use harness::Target;

#[global_allocator]
static ALLOC: harness::Counting = harness::Counting;

#[test]
fn parse() {
    harness::fuzz(
        Target {
            name: "parse",
            cases: 600,
            ext: "cel",
            encode: |s: &String| s.as_bytes().to_vec(),
            check: |s: &String| targets::check_parse(s),
            replay: targets::replay_parse,
            shrink: |s: &String| targets::shrink_text(s),
        },
        || vec(any::<u8>(), 0..512).prop_map(|b| targets::parse_input(&b)),
    );
}

#[test]
fn parse_regressions() {
    harness::replay("parse", targets::replay_parse);
}

#[test]
fn eval() {
    harness::fuzz(
        Target {
            name: "eval",
            cases: 600,
            ext: "json",
            encode: targets::encode_eval,
            check: targets::check_eval,
            replay: targets::replay_eval,
            shrink: targets::shrink_eval,
        },
        || vec(any::<u8>(), 0..1024).prop_map(|b| targets::eval_input(&b)),
    );
}

#[test]
fn eval_regressions() {
    harness::replay("eval", targets::replay_eval);
}

#[test]
fn doc() {
    harness::fuzz(
        Target {
            name: "doc",
            cases: 2000,
            ext: "bin",
            encode: |b: &Vec<u8>| b.clone(),
            check: |b: &Vec<u8>| targets::check_doc(b),
            replay: targets::check_doc,
            shrink: |b: &Vec<u8>| targets::shrink_bytes(b),
        },
        || vec(any::<u8>(), 0..1024).prop_map(|b| targets::doc_input(&b)),
    );
}

#[test]
fn doc_regressions() {
    harness::replay("doc", targets::check_doc);
}

#[test]
fn review() {
    harness::fuzz(
        Target {
            name: "review",
            cases: 500,
            ext: "bin",
            encode: |i: &targets::CaseInput<Vec<u8>>| i.data.clone(),
            check: targets::check_review,
            replay: targets::replay_review,
            shrink: targets::shrink_review,
        },
        || (0usize..4096, vec(any::<u8>(), 0..256)).prop_map(|(i, b)| targets::review_input(i, &b)),
    );
}

#[test]
fn review_regressions() {
    harness::replay("review", targets::replay_review);
}

#[test]
fn policy() {
    harness::fuzz(
        Target {
            name: "policy",
            cases: 300,
            ext: "yaml",
            encode: |i: &targets::CaseInput<String>| i.data.as_bytes().to_vec(),
            check: targets::check_policy,
            replay: targets::replay_policy,
            shrink: targets::shrink_policy,
        },
        || (0usize..4096, vec(any::<u8>(), 0..256)).prop_map(|(i, b)| targets::policy_input(i, &b)),
    );
}

#[test]
fn policy_regressions() {
    harness::replay("policy", targets::replay_policy);
}

#[test]
fn mutate() {
    harness::fuzz(
        Target {
            name: "mutate",
            cases: 300,
            ext: "bin",
            encode: |i: &targets::CaseInput<Vec<u8>>| i.data.clone(),
            check: targets::check_mutate,
            replay: targets::replay_mutate,
            shrink: targets::shrink_review,
        },
        || (0usize..4096, vec(any::<u8>(), 0..256)).prop_map(|(i, b)| targets::mutate_input(i, &b)),
    );
}

#[test]
fn mutate_regressions() {
    harness::replay("mutate", targets::replay_mutate);
}
