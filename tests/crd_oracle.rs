//! Runs every recorded CRD case of `../shared/crd-oracle-sample/cases` (a real kube-apiserver
//! 1.32's answers) and every own golden case of `tests/crd-cases` (same layout) through
//! `celgate::crd`: the CRD's acceptance with its exact causes (as an update when objects.yaml
//! holds an initial CRD), then the request's answer (status message and causes, or the stored
//! object). Causes compare as a multiset (sibling order is random in the API server), and the
//! fields of the "contributed to estimated rule cost total" causes are masked (which of equally
//! expensive rules the server names is random too). The oracle cases are ratcheted by id (see
//! `common::ratchet`): each must pass unless `tests/crd-oracle-known-failures` lists it, and a
//! listed one that passes must leave the list; the golden cases must all pass.
//!
//! Each case is its own trial, `oracle/NAME` or `golden/NAME` (`cargo test --test crd_oracle
//! -- golden/` runs the golden ones): skipped cases are ignored with their reason, and so are
//! known failures. The `oracle_ratchet` trial runs every oracle case and checks the list and
//! the count ([`MIN_PASSED`]).

use std::path::Path;

use celgate::crd::errors::{Cause, Status};
use celgate::crd::request::{crd_status, merge_patch};
use celgate::crd::rules::{compile, compile_update};
use celgate::crd::schema::parse_crd;
use common::ratchet::{self, Known};
use libtest_mimic::{Completion, Trial};
use serde_json::Value as Json;

mod common;

/// The oracle's known failures' list, as its messages name it.
const KNOWN_FAILURES: &str = "tests/crd-oracle-known-failures";

/// Oracle cases that must pass (raise it as behaviour is added, never lower it).
const MIN_PASSED: usize = 246;

fn yaml_docs(path: &Path) -> Vec<Json> {
    let Ok(text) = std::fs::read_to_string(path) else {
        return Vec::new();
    };
    serde_yaml_ng::Deserializer::from_str(&text)
        .filter_map(|d| serde::Deserialize::deserialize(d).ok())
        .filter(|v: &Json| !v.is_null())
        .collect()
}

/// Masks what the API server does not render deterministically: Go pointer addresses and
/// the random number in `selfType<N>`.
fn mask(s: &str) -> String {
    let ptr = regex::Regex::new(r"0x[0-9a-f]+").unwrap();
    let st = regex::Regex::new(r"selfType[0-9]*").unwrap();
    st.replace_all(&ptr.replace_all(s, "0xPTR"), "selfType")
        .into_owned()
}

/// The cause the API server gives each of the (at most 4) rules it names as the most
/// expensive when a CRD's total estimated cost is over budget: *which* rules it names among
/// equally expensive ones changes from one request to the next, so only their number is
/// compared (the field is masked).
const CONTRIBUTED: &str = "Forbidden: contributed to estimated rule cost total exceeding cost limit for entire OpenAPIv3 schema";

fn mask_field(field: String, message: &str) -> String {
    if message == CONTRIBUTED {
        "<one of the most expensive rules>".into()
    } else {
        field
    }
}

fn causes_of(v: &Json) -> Vec<(String, String, String)> {
    let mut out: Vec<(String, String, String)> = v
        .get("causes")
        .and_then(Json::as_array)
        .map(|a| {
            a.iter()
                .map(|c| {
                    let f = |k: &str| mask(c.get(k).and_then(Json::as_str).unwrap_or_default());
                    let message = f("message");
                    (mask_field(f("field"), &message), f("type"), message)
                })
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}

fn our_causes(causes: &[Cause]) -> Vec<(String, String, String)> {
    let mut out: Vec<(String, String, String)> = causes
        .iter()
        .map(|c| {
            let message = mask(&c.message);
            (
                mask_field(mask(&c.field), &message),
                mask(&c.reason),
                message,
            )
        })
        .collect();
    out.sort();
    out
}

/// Compares a rejection: the causes as a multiset, and the message when the causes come in
/// one order only (a single cause).
fn same_status(expected: &Json, ours: &Status) -> Result<(), String> {
    let want = causes_of(expected);
    let got = our_causes(&ours.causes);
    if want != got {
        return Err(format!("causes differ:\n  want {want:?}\n  got  {got:?}"));
    }
    if want.len() == 1 {
        let msg = mask(
            expected
                .get("message")
                .and_then(Json::as_str)
                .unwrap_or_default(),
        );
        if msg != mask(&ours.message) {
            return Err(format!(
                "message differs:\n  want {msg}\n  got  {}",
                ours.message
            ));
        }
    }
    Ok(())
}

enum Outcome {
    Pass,
    Fail(String),
    Skip(&'static str),
}

fn run_case(dir: &Path) -> Outcome {
    let req = yaml_docs(&dir.join("request.yaml"))
        .into_iter()
        .next()
        .unwrap_or(Json::Null);
    let Ok(text) = std::fs::read_to_string(dir.join("expected.json")) else {
        return Outcome::Fail("no expected.json".into());
    };
    let Ok(expected) = serde_json::from_str::<Json>(&text) else {
        return Outcome::Fail("bad expected.json".into());
    };
    let objects = yaml_docs(&dir.join("objects.yaml"));
    // An initial CRD in objects.yaml: the CRD under test replaces it (an update).
    let initial = objects
        .iter()
        .find(|o| o["kind"] == "CustomResourceDefinition")
        .map(parse_crd)
        .transpose();
    let initial = match initial {
        Ok(i) => i,
        Err(e) => return Outcome::Fail(format!("initial CRD not read: {e}")),
    };
    let op = req["op"].as_str().unwrap_or("none");
    let exp_crd = &expected["crd"];
    let crd_rejected = exp_crd["allowed"] == false;
    let Some(crd_doc) = yaml_docs(&dir.join("crd.yaml")).into_iter().next() else {
        return Outcome::Fail("no crd.yaml".into());
    };
    let crd = match parse_crd(&crd_doc) {
        Ok(c) => c,
        Err(e) => return Outcome::Fail(format!("CRD not read: {e}")),
    };
    let compiled = match &initial {
        Some(old) => compile_update(old, &crd),
        None => compile(&crd),
    };
    let compiled = match (compiled, crd_rejected) {
        (Ok(_), true) => return Outcome::Fail("CRD accepted, the server rejected it".into()),
        (Err(c), false) => {
            return Outcome::Fail(format!("CRD rejected, the server accepted it: {c:?}"))
        }
        (Err(c), true) => {
            return match same_status(exp_crd, &crd_status(&crd.name, c)) {
                Ok(()) => Outcome::Pass,
                Err(e) => Outcome::Fail(e),
            }
        }
        (Ok(c), false) => c,
    };
    if op == "none" {
        return Outcome::Pass;
    }
    let exp_req = &expected["request"];
    let stored = &expected["stored"];
    let answer = match op {
        "create" => compiled.create(req["object"].clone()),
        "update" => compiled.update(stored, expected["sent"].clone()),
        "patch" => {
            let mut next = stored.clone();
            merge_patch(&mut next, &req["patch"]);
            compiled.update(stored, next)
        }
        "status-update" => compiled.update_status(stored, &expected["sent"]),
        _ => return Outcome::Skip("unknown op"),
    };
    match answer {
        Ok(obj) => {
            if exp_req["allowed"] != true {
                return Outcome::Fail(format!(
                    "allowed, the server said {}",
                    exp_req["message"].as_str().unwrap_or_default()
                ));
            }
            for k in ["spec", "status"] {
                if obj.get(k) != exp_req["object"].get(k) {
                    return Outcome::Fail(format!(
                        "stored {k} differs: want {} got {}",
                        exp_req["object"][k], obj[k]
                    ));
                }
            }
            Outcome::Pass
        }
        Err(status) => {
            if exp_req["allowed"] != false {
                return Outcome::Fail(format!(
                    "rejected, the server allowed it: {}",
                    status.message
                ));
            }
            match same_status(exp_req, &status) {
                Ok(()) => Outcome::Pass,
                Err(e) => Outcome::Fail(e),
            }
        }
    }
}

/// Runs every case of `dir` and checks the ratchet against `known`; the number that pass.
fn run_ratchet(dir: &Path, known: &Known) -> Result<usize, String> {
    let results: Vec<(String, bool)> = cases(dir)
        .into_iter()
        .filter_map(|(name, case)| match run_case(&case) {
            Outcome::Pass => Some((name, true)),
            Outcome::Fail(_) => Some((name, false)),
            Outcome::Skip(_) => None,
        })
        .collect();
    let passed = results.iter().filter(|(_, passed)| *passed).count();
    ratchet::check(
        results
            .iter()
            .map(|(name, passed)| (name.as_str(), *passed)),
        known,
        KNOWN_FAILURES,
    )?;
    Ok(passed)
}

/// The case folders of `dir` by name, in name order (none when `dir` is missing).
fn cases(dir: &Path) -> Vec<(String, std::path::PathBuf)> {
    common::cases::case_dirs(dir).unwrap_or_default()
}

/// One trial per case of `dir`, named `prefix/NAME`: a skipped case is ignored with its
/// reason; the others are judged against the known failures `known` (none for the golden
/// cases, which must all pass).
fn trials(prefix: &str, dir: &Path, known: &Known) -> Vec<Trial> {
    cases(dir)
        .into_iter()
        .map(|(name, case)| {
            let listed = known.get(&name).cloned();
            Trial::ignorable_test(format!("{prefix}/{name}"), move || {
                let outcome = match run_case(&case) {
                    Outcome::Pass => Ok(()),
                    Outcome::Skip(why) => {
                        return Ok(Completion::ignored_with(format!("skipped: {why}")))
                    }
                    Outcome::Fail(why) => Err(why),
                };
                ratchet::case_verdict(outcome, listed.as_deref(), KNOWN_FAILURES)
            })
        })
        .collect()
}

/// The recorded oracle cases (ratcheted by id, and at least [`MIN_PASSED`] pass, checked by
/// the `oracle_ratchet` trial), the own golden cases (each must pass) and the ratchet's own
/// logic.
fn main() {
    let args = libtest_mimic::Arguments::from_args();
    let oracle = common::shared_dir().join("crd-oracle-sample/cases");
    let golden = common::repo().join("tests/crd-cases");
    let known = ratchet::read_list(&common::repo().join(KNOWN_FAILURES));
    let mut all = trials("oracle", &oracle, &known);
    all.extend(trials("golden", &golden, &Known::new()));
    all.push(ratchet::logic_trial());
    all.push(Trial::ignorable_test("oracle_ratchet", move || {
        if !oracle.is_dir() {
            return Ok(Completion::ignored_with(format!(
                "crd oracle: no cases at {}",
                oracle.display()
            )));
        }
        let passed = run_ratchet(&oracle, &known)?;
        eprintln!("crd oracle: {passed} passed");
        if passed >= MIN_PASSED {
            Ok(Completion::Completed)
        } else {
            Err(format!("crd oracle: {passed} passed, below the ratchet {MIN_PASSED}").into())
        }
    }));
    libtest_mimic::run(&args, all).exit();
}
