//! `celgate test --coverage`: which expressions of each policy the suite evaluated, and for
//! each boolean one whether some case saw it true and some case saw it false.
//!
//! The engine reports every expression it evaluates through
//! [`crate::admission::probe::Probe`] (only `celgate test --coverage` passes one). An
//! expression's outcomes are its coverage points: a boolean expression (matchCondition,
//! validation, boolean variable) has two, `true` and `false`; any other (a non-boolean
//! variable, an audit annotation) has one, `evaluated`. Coverage is covered points over
//! all points. Granularity is the whole expression: the operands of `&&`/`||` are not
//! tracked separately.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::fmt::Write;

use serde_json::{json, Value as Json};

use crate::admission::probe::{Probe, Seen, Site};
use crate::cel::Type;
use crate::policy::compile::{Compiled, CompiledPolicy};

/// One expression's record.
#[derive(Debug, Clone, PartialEq)]
pub struct Item {
    pub site: Site,
    /// Its position in its list of the spec.
    pub index: usize,
    /// The condition's, variable's or annotation's name; empty for a validation.
    pub name: String,
    pub expression: String,
    /// Whether its two outcomes are `true` and `false` (else only `evaluated`).
    pub boolean: bool,
    /// How many evaluations, errors included.
    pub evaluated: u64,
    pub errors: u64,
    pub seen_true: bool,
    pub seen_false: bool,
}

impl Item {
    fn new(site: Site, index: usize, name: &str, compiled: &Compiled, source: &str) -> Item {
        let boolean = match site {
            Site::MatchCondition | Site::Validation => true,
            Site::AuditAnnotation => false,
            Site::Variable => compiled
                .as_ref()
                .is_ok_and(|p| *p.result_type() == Type::Bool),
        };
        Item {
            site,
            index,
            name: name.to_string(),
            expression: source.trim().to_string(),
            boolean,
            evaluated: 0,
            errors: 0,
            seen_true: false,
            seen_false: false,
        }
    }

    /// (covered, total) points.
    pub fn points(&self) -> (usize, usize) {
        if self.boolean {
            (
                usize::from(self.seen_true) + usize::from(self.seen_false),
                2,
            )
        } else {
            (usize::from(self.evaluated > 0), 1)
        }
    }

    /// `validations[1]`, `variables[0] (name)`.
    pub fn label(&self) -> String {
        let list = match self.site {
            Site::MatchCondition => "matchConditions",
            Site::Variable => "variables",
            Site::Validation => "validations",
            Site::AuditAnnotation => "auditAnnotations",
        };
        if self.name.is_empty() {
            format!("{list}[{}]", self.index)
        } else {
            format!("{list}[{}] ({})", self.index, self.name)
        }
    }

    /// A validation no case made fail: the usual hole of a policy test.
    pub fn never_fails(&self) -> bool {
        self.site == Site::Validation && !self.seen_false
    }
}

/// Collects coverage during a run; a [`Probe`] for the engine.
#[derive(Debug, Default)]
pub struct Collector {
    policies: RefCell<BTreeMap<String, Vec<Item>>>,
}

impl Collector {
    /// Makes `policy`'s expressions known (so that one never evaluated counts as uncovered).
    /// A policy of the same name met in another suite file is taken as the same policy.
    pub fn register(&self, policy: &CompiledPolicy) {
        let mut policies = self.policies.borrow_mut();
        if policies.contains_key(&policy.name) {
            return;
        }
        let mut items = Vec::new();
        for (i, (name, c)) in policy.match_conditions.iter().enumerate() {
            items.push(Item::new(Site::MatchCondition, i, name, c, source(c)));
        }
        for (i, (name, c)) in policy.variables.iter().enumerate() {
            items.push(Item::new(Site::Variable, i, name, c, source(c)));
        }
        for (i, v) in policy.validations.iter().enumerate() {
            items.push(Item::new(
                Site::Validation,
                i,
                "",
                &v.program,
                &v.expression,
            ));
        }
        for (i, (key, c)) in policy.audit_annotations.iter().enumerate() {
            items.push(Item::new(Site::AuditAnnotation, i, key, c, source(c)));
        }
        policies.insert(policy.name.clone(), items);
    }

    pub fn finish(self) -> Coverage {
        Coverage {
            policies: self.policies.into_inner(),
        }
    }
}

fn source(c: &Compiled) -> &str {
    c.as_ref().map_or("", |p| p.source())
}

impl Probe for Collector {
    fn seen(&self, policy: &str, site: Site, index: usize, seen: Seen) {
        let mut policies = self.policies.borrow_mut();
        let Some(items) = policies.get_mut(policy) else {
            return;
        };
        let Some(item) = items
            .iter_mut()
            .find(|i| i.site == site && i.index == index)
        else {
            return;
        };
        item.evaluated += 1;
        match seen {
            Seen::True => item.seen_true = true,
            Seen::False => item.seen_false = true,
            Seen::Value => {}
            Seen::Error => item.errors += 1,
        }
    }
}

/// A run's coverage, per policy name.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Coverage {
    pub policies: BTreeMap<String, Vec<Item>>,
}

fn percent(covered: usize, total: usize) -> f64 {
    if total == 0 {
        100.0
    } else {
        covered as f64 * 100.0 / total as f64
    }
}

fn sum(items: &[Item]) -> (usize, usize) {
    items
        .iter()
        .map(Item::points)
        .fold((0, 0), |(c, t), (ic, it)| (c + ic, t + it))
}

impl Coverage {
    /// (covered, total) points over every policy.
    pub fn points(&self) -> (usize, usize) {
        self.policies
            .values()
            .map(|items| sum(items))
            .fold((0, 0), |(c, t), (pc, pt)| (c + pc, t + pt))
    }

    pub fn percent(&self) -> f64 {
        let (c, t) = self.points();
        percent(c, t)
    }

    /// The table printed after the cases.
    pub fn table(&self) -> String {
        let mut out = String::from("coverage:\n");
        let mark = |b: bool| if b { "✓" } else { "✗" };
        for (policy, items) in &self.policies {
            let (c, t) = sum(items);
            let _ = writeln!(out, "  {policy}  {c}/{t} ({:.1}%)", percent(c, t));
            for i in items {
                let seen = if i.boolean {
                    format!("true {}  false {}", mark(i.seen_true), mark(i.seen_false))
                } else {
                    format!("evaluated {}", mark(i.evaluated > 0))
                };
                let errors = if i.errors > 0 {
                    format!(", {} errors", i.errors)
                } else {
                    String::new()
                };
                let _ = writeln!(
                    out,
                    "    {:<36} {:>5} runs{errors}  {seen}",
                    i.label(),
                    i.evaluated
                );
            }
            for i in items.iter().filter(|i| i.never_fails()) {
                let _ = writeln!(
                    out,
                    "    ! {} never fails: no case makes `{}` false",
                    i.label(),
                    i.expression
                );
            }
        }
        let (c, t) = self.points();
        let _ = writeln!(out, "coverage: {c}/{t} ({:.1}%)", percent(c, t));
        out
    }

    pub fn to_json(&self) -> Json {
        let policies: Vec<Json> = self
            .policies
            .iter()
            .map(|(name, items)| {
                let (c, t) = sum(items);
                let list: Vec<Json> = items
                    .iter()
                    .map(|i| {
                        json!({
                            "kind": i.label().split('[').next().unwrap_or(""),
                            "index": i.index,
                            "name": i.name,
                            "expression": i.expression,
                            "boolean": i.boolean,
                            "evaluated": i.evaluated,
                            "errors": i.errors,
                            "seenTrue": i.seen_true,
                            "seenFalse": i.seen_false,
                        })
                    })
                    .collect();
                let never: Vec<String> = items
                    .iter()
                    .filter(|i| i.never_fails())
                    .map(Item::label)
                    .collect();
                json!({
                    "policy": name,
                    "covered": c,
                    "total": t,
                    "percent": percent(c, t),
                    "expressions": list,
                    "neverFails": never,
                })
            })
            .collect();
        let (c, t) = self.points();
        json!({"covered": c, "total": t, "percent": percent(c, t), "policies": policies})
    }
}
