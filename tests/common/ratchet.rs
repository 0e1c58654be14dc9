//! Ratchets of the recorded suites (the CEL differential, the CRD oracle, the admission
//! oracle), by case id: every case passes except those a committed list names as known
//! failures, each with its reason. A case outside the list that fails is a regression (or a
//! new case that fails) and fails the test; a listed case that passes must leave the list, so
//! that it cannot fail again unnoticed. A count alone would let one regression trade places
//! with one fix; the list does not (see [`logic_trial`]).

use std::collections::BTreeMap;
use std::path::Path;

use libtest_mimic::{Completion, Failed, Trial};

/// Known failures, `id -> reason`.
pub type Known = BTreeMap<String, String>;

/// The `<id> <reason>` lines of `path` (`#` starts a comment line); every id needs a reason.
pub fn read_list(path: &Path) -> Known {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    parse_list(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// [`read_list`] of a text.
pub fn parse_list(text: &str) -> Result<Known, String> {
    let mut known = Known::new();
    for line in text.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (id, reason) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
        if reason.trim().is_empty() {
            return Err(format!("{id} gives no reason"));
        }
        if known.insert(id.into(), reason.trim().into()).is_some() {
            return Err(format!("{id} is listed twice"));
        }
    }
    Ok(known)
}

/// Checks one run of the suite (each case's id and whether it passed) against the known
/// failures of `list` (its name in the messages): `Err` names every case that broke, every
/// listed case that now passes, and every listed id that names no case run.
pub fn check<'a>(
    results: impl IntoIterator<Item = (&'a str, bool)>,
    known: &Known,
    list: &str,
) -> Result<(), String> {
    let mut problems = Vec::new();
    let mut ran = BTreeMap::new();
    for (id, passed) in results {
        ran.insert(id, passed);
        match (passed, known.contains_key(id)) {
            (false, false) => problems.push(format!(
                "{id} fails and is not a known failure: a regression (or a new case: fix it, or list it in {list} with why)"
            )),
            (true, true) => problems.push(format!(
                "{id} passes now: remove it from {list}, so that it stays passing"
            )),
            _ => {}
        }
    }
    for id in known.keys() {
        if !ran.contains_key(id.as_str()) {
            problems.push(format!("{list} names {id}, which is no case that runs"));
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("\n"))
    }
}

/// The verdict of one case's own trial: a pass, or a known failure (ignored with its
/// reason); a failure outside `list`, or a listed case that passes, fails the trial.
pub fn case_verdict(
    outcome: Result<(), String>,
    known: Option<&str>,
    list: &str,
) -> Result<Completion, Failed> {
    match (outcome, known) {
        (Ok(()), None) => Ok(Completion::Completed),
        (Ok(()), Some(_)) => {
            Err(format!("listed as a known failure but passes now: remove it from {list}").into())
        }
        (Err(e), Some(why)) => Ok(Completion::ignored_with(format!(
            "known failure ({why}): {e}"
        ))),
        (Err(e), None) => Err(e.into()),
    }
}

/// A trial of the ratchet's own logic: one regression traded for one fix fails, and so do a
/// lone regression, a lone fix left listed and a listed id that names no case; an unchanged
/// run passes.
pub fn logic_trial() -> Trial {
    Trial::test("ratchet_logic", || {
        let known = parse_list("# comment\nfixed was broken\n").map_err(Failed::from)?;
        let before = [("fixed", false), ("kept", true), ("broken", true)];
        check(before, &known, "LIST").map_err(|e| format!("an unchanged run fails: {e}"))?;
        let traded = [("fixed", true), ("kept", true), ("broken", false)];
        let err = check(traded, &known, "LIST")
            .err()
            .ok_or("one regression traded for one fix passes")?;
        if !(err.contains("broken fails") && err.contains("fixed passes now")) {
            return Err(format!("the trade is not named: {err}").into());
        }
        let cases: [&[(&str, bool)]; 3] = [
            &[("fixed", false), ("kept", true), ("broken", false)],
            &[("fixed", true), ("kept", true), ("broken", true)],
            &[("kept", true), ("broken", true)],
        ];
        for run in cases {
            if check(run.iter().copied(), &known, "LIST").is_ok() {
                return Err(format!("{run:?} passes").into());
            }
        }
        if parse_list("id\n").is_ok() || parse_list("a x\na y\n").is_ok() {
            return Err("a list without a reason or with an id twice is read".into());
        }
        let verdicts = [
            case_verdict(Ok(()), None, "LIST").is_ok(),
            case_verdict(Ok(()), Some("why"), "LIST").is_err(),
            case_verdict(Err("e".into()), Some("why"), "LIST").is_ok(),
            case_verdict(Err("e".into()), None, "LIST").is_err(),
        ];
        if verdicts.contains(&false) {
            return Err(format!("case verdicts: {verdicts:?}").into());
        }
        Ok(())
    })
}
