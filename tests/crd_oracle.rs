//! Runs every recorded CRD case of `../shared/crd-oracle-sample/cases` (a real kube-apiserver
//! 1.32's answers) and every own golden case of `tests/crd-cases` (same layout) through
//! `celgate::crd`: the CRD's acceptance with its exact causes (as an update when objects.yaml
//! holds an initial CRD), then the request's answer (status message and causes, or the stored
//! object). Causes compare as a multiset (sibling order is random in the API server), and the
//! fields of the "contributed to estimated rule cost total" causes are masked (which of equally
//! expensive rules the server names is random too). The oracle figure is ratcheted, the
//! golden cases must all pass.
//!
//! Each case is its own trial, `oracle/NAME` or `golden/NAME` (`cargo test --test crd_oracle
//! -- golden/` runs the golden ones): skipped cases are ignored with their reason, and so are
//! failing oracle cases (their figure is checked by the `oracle_ratchet` trial).

use std::path::{Path, PathBuf};

use celgate::crd::errors::{Cause, Status};
use celgate::crd::request::{crd_status, merge_patch};
use celgate::crd::rules::{compile, compile_update};
use celgate::crd::schema::parse_crd;
use libtest_mimic::{Completion, Failed, Trial};
use serde_json::Value as Json;

/// Oracle cases that must pass (raise it as behaviour is added, never lower it).
const MIN_PASSED: usize = 246;

fn shared_dir() -> PathBuf {
    std::env::var_os("CELGATE_SHARED")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared"))
}

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

/// Runs every case of `dir`; the number that pass.
fn count_passed(dir: &Path) -> usize {
    common_cases(dir)
        .iter()
        .filter(|(_, c)| matches!(run_case(c), Outcome::Pass))
        .count()
}

/// The case folders of `dir` by name, in name order (none when `dir` is missing).
fn common_cases(dir: &Path) -> Vec<(String, PathBuf)> {
    let mut cases: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.is_dir())
                .collect()
        })
        .unwrap_or_default();
    cases.sort();
    cases
        .into_iter()
        .map(|c| {
            let name = c
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            (name, c)
        })
        .collect()
}

/// One trial per case of `dir`, named `prefix/NAME`: a skipped case is ignored with its
/// reason; a failing one fails, or when `ratcheted` (the figure is checked by count) is
/// ignored with why it fails.
fn trials(prefix: &str, dir: &Path, ratcheted: bool) -> Vec<Trial> {
    common_cases(dir)
        .into_iter()
        .map(|(name, case)| {
            Trial::ignorable_test(format!("{prefix}/{name}"), move || match run_case(&case) {
                Outcome::Pass => Ok(Completion::Completed),
                Outcome::Skip(why) => Ok(Completion::ignored_with(format!("skipped: {why}"))),
                Outcome::Fail(why) if ratcheted => Ok(Completion::ignored_with(format!(
                    "fails (ratcheted by count): {}",
                    why
                ))),
                Outcome::Fail(why) => Err(Failed::from(why)),
            })
        })
        .collect()
}

/// The recorded oracle cases (ratcheted: at least [`MIN_PASSED`] pass, checked by the
/// `oracle_ratchet` trial) and the own golden cases (each must pass).
fn main() {
    let args = libtest_mimic::Arguments::from_args();
    let oracle = shared_dir().join("crd-oracle-sample/cases");
    let golden = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/crd-cases");
    let mut all = trials("oracle", &oracle, true);
    all.extend(trials("golden", &golden, false));
    all.push(Trial::ignorable_test("oracle_ratchet", move || {
        if !oracle.is_dir() {
            return Ok(Completion::ignored_with(format!(
                "crd oracle: no cases at {}",
                oracle.display()
            )));
        }
        let passed = count_passed(&oracle);
        eprintln!("crd oracle: {passed} passed");
        if passed >= MIN_PASSED {
            Ok(Completion::Completed)
        } else {
            Err(format!("crd oracle: {passed} passed, below the ratchet {MIN_PASSED}").into())
        }
    }));
    libtest_mimic::run(&args, all).exit();
}
