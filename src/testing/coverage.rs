//! `celgate test --coverage`: which expressions of each policy the suite evaluated, and for
//! each boolean one whether some case saw it true and some case saw it false.
//!
//! The engine reports every expression it evaluates through
//! [`crate::admission::probe::Probe`] (only `celgate test --coverage` passes one). An
//! expression's outcomes are its coverage points: a boolean expression (matchCondition,
//! validation, boolean variable) has two, `true` and `false`; any other (a non-boolean
//! variable, an audit annotation) has one, `evaluated`. Coverage is covered points over
//! all points.
//!
//! A boolean expression whose top level is a chain of `||` (or else of `&&`) also has two
//! points per operand: each operand is compiled on its own in the expression's environment
//! and evaluated, whenever the expression is, against the same values (CEL's `&&`/`||` are
//! commutative and total, so an operand's value does not depend on the others having been
//! evaluated). Nested chains (inside parentheses) are not split.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Arc;

use serde_json::{json, Value as Json};

use crate::admission::probe::{Probe, Seen, Site};
use crate::cel::vap::{composited_type, vap_env, Decls};
use crate::cel::{Activation, Env, Meter, Program, Type, PER_CALL_LIMIT};
use crate::policy::compile::{Compiled, CompiledPolicy};

/// One operand of a top-level `&&`/`||` chain.
#[derive(Debug, Clone)]
pub struct Operand {
    pub expression: String,
    pub seen_true: bool,
    pub seen_false: bool,
    pub errors: u64,
    program: Arc<Program>,
}

/// One expression's record.
#[derive(Debug, Clone)]
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
    /// `&&` or `||` when the expression's operands are tracked.
    pub chain: Option<&'static str>,
    pub operands: Vec<Operand>,
}

impl Item {
    fn new(site: Site, index: usize, name: &str, compiled: &Compiled, source: &str) -> Item {
        let boolean = match site {
            Site::MatchCondition | Site::Validation => true,
            Site::AuditAnnotation | Site::Mutation => false,
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
            chain: None,
            operands: Vec::new(),
        }
    }

    /// Splits a boolean expression into its top-level operands, each compiled in `env`;
    /// left whole when one does not compile alone.
    fn with_operands(mut self, env: &Env) -> Item {
        if !self.boolean {
            return self;
        }
        let Some((chain, parts)) = operands(&self.expression) else {
            return self;
        };
        let compiled: Option<Vec<Operand>> = parts
            .into_iter()
            .map(|source| {
                let program = env.compile(&source).ok()?;
                Some(Operand {
                    expression: source,
                    seen_true: false,
                    seen_false: false,
                    errors: 0,
                    program: Arc::new(program),
                })
            })
            .collect();
        if let Some(list) = compiled {
            self.chain = Some(chain);
            self.operands = list;
        }
        self
    }

    /// (covered, total) points: the expression's, and its operands'.
    pub fn points(&self) -> (usize, usize) {
        let own = if self.boolean {
            (
                usize::from(self.seen_true) + usize::from(self.seen_false),
                2,
            )
        } else {
            (usize::from(self.evaluated > 0), 1)
        };
        self.operands.iter().fold(own, |(c, t), o| {
            (
                c + usize::from(o.seen_true) + usize::from(o.seen_false),
                t + 2,
            )
        })
    }

    /// `validations[1]`, `variables[0] (name)`.
    pub fn label(&self) -> String {
        let list = match self.site {
            Site::MatchCondition => "matchConditions",
            Site::Variable => "variables",
            Site::Validation => "validations",
            Site::AuditAnnotation => "auditAnnotations",
            Site::Mutation => "mutations",
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
#[derive(Debug)]
pub struct Collector {
    /// CEL library version, to compile operands.
    version: u16,
    policies: RefCell<BTreeMap<String, Vec<Item>>>,
    /// Set while operands are evaluated: the variables they read were not read by the
    /// policy, so they are not counted.
    in_operands: Cell<bool>,
}

impl Collector {
    pub fn new(version: u16) -> Collector {
        Collector {
            version,
            policies: RefCell::new(BTreeMap::new()),
            in_operands: Cell::new(false),
        }
    }

    /// Makes `policy`'s expressions known (so that one never evaluated counts as uncovered).
    /// A policy of the same name met in another suite file is taken as the same policy.
    pub fn register(&self, policy: &CompiledPolicy) {
        let mut policies = self.policies.borrow_mut();
        if policies.contains_key(&policy.name) {
            return;
        }
        // The environments the policy's expressions were compiled in (policy::compile).
        let decls = || Decls {
            params: policy.param_kind.is_some(),
            authorizer: true,
        };
        let (condition_env, _) = vap_env(self.version, decls());
        let (mut env, _) = vap_env(self.version, decls());
        let fields = policy
            .variables
            .iter()
            .map(|(name, c)| {
                let ty = c
                    .as_ref()
                    .map_or(Type::Dyn, |p| composited_type(p.result_type()));
                (name.clone(), ty)
            })
            .collect();
        env.declare_lazy("variables", fields);
        let mut items = Vec::new();
        for (i, (name, c)) in policy.match_conditions.iter().enumerate() {
            let item = Item::new(Site::MatchCondition, i, name, c, source(c));
            items.push(item.with_operands(&condition_env));
        }
        for (i, (name, c)) in policy.variables.iter().enumerate() {
            items.push(Item::new(Site::Variable, i, name, c, source(c)).with_operands(&env));
        }
        for (i, v) in policy.validations.iter().enumerate() {
            let item = Item::new(Site::Validation, i, "", &v.program, &v.expression);
            items.push(item.with_operands(&env));
        }
        for (i, (key, c)) in policy.audit_annotations.iter().enumerate() {
            items.push(Item::new(Site::AuditAnnotation, i, key, c, source(c)));
        }
        policies.insert(policy.name.clone(), items);
    }

    /// Makes a mutating policy's expressions known: its matchConditions, variables and
    /// mutations (without operands: those are tracked for validating policies only).
    pub fn register_mutating(
        &self,
        policy: &crate::policy::compile_mutating::CompiledMutatingPolicy,
    ) {
        let mut policies = self.policies.borrow_mut();
        let base = &policy.base;
        if policies.contains_key(&base.name) {
            return;
        }
        let mut items = Vec::new();
        for (i, (name, c)) in base.match_conditions.iter().enumerate() {
            items.push(Item::new(Site::MatchCondition, i, name, c, source(c)));
        }
        for (i, (name, c)) in base.variables.iter().enumerate() {
            items.push(Item::new(Site::Variable, i, name, c, source(c)));
        }
        for (i, m) in policy.mutations.iter().enumerate() {
            items.push(Item::new(Site::Mutation, i, "", &m.program, &m.expression));
        }
        policies.insert(base.name.clone(), items);
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

impl Collector {
    fn with_item<T>(
        &self,
        policy: &str,
        site: Site,
        index: usize,
        f: impl FnOnce(&mut Item) -> T,
    ) -> Option<T> {
        let mut policies = self.policies.borrow_mut();
        let item = policies
            .get_mut(policy)?
            .iter_mut()
            .find(|i| i.site == site && i.index == index)?;
        Some(f(item))
    }
}

impl Probe for Collector {
    fn seen<'a>(
        &self,
        policy: &str,
        site: Site,
        index: usize,
        seen: Seen,
        activation: &dyn Activation<'a>,
    ) {
        if self.in_operands.get() {
            return;
        }
        let programs = self.with_item(policy, site, index, |item| {
            item.evaluated += 1;
            match seen {
                Seen::True => item.seen_true = true,
                Seen::False => item.seen_false = true,
                Seen::Value => {}
                Seen::Error => item.errors += 1,
            }
            item.operands
                .iter()
                .map(|o| o.program.clone())
                .collect::<Vec<_>>()
        });
        let Some(programs) = programs.filter(|p| !p.is_empty()) else {
            return;
        };
        // Evaluated with no borrow held: an operand may read a variable, which the engine
        // computes (and reports) through this probe.
        self.in_operands.set(true);
        let results: Vec<Seen> = programs
            .iter()
            .map(|p| Seen::of(&p.eval(activation, &mut Meter::with_limit(PER_CALL_LIMIT))))
            .collect();
        self.in_operands.set(false);
        self.with_item(policy, site, index, |item| {
            for (o, r) in item.operands.iter_mut().zip(results) {
                match r {
                    Seen::True => o.seen_true = true,
                    Seen::False => o.seen_false = true,
                    Seen::Value | Seen::Error => o.errors += 1,
                }
            }
        });
    }
}

/// The top-level operands of `source` when it is a chain of `||` (or else of `&&`) outside
/// any parentheses, brackets, braces, string or comment, and not a conditional (`?:`).
pub fn operands(source: &str) -> Option<(&'static str, Vec<String>)> {
    let b = source.as_bytes();
    let mut depth = 0i32;
    let mut i = 0;
    let (mut ors, mut ands) = (Vec::new(), Vec::new());
    while let Some(&c) = b.get(i) {
        match c {
            b'(' | b'[' | b'{' => depth += 1,
            b')' | b']' | b'}' => depth -= 1,
            b'/' if b.get(i + 1) == Some(&b'/') => {
                while b.get(i).is_some_and(|&x| x != b'\n') {
                    i += 1;
                }
                continue;
            }
            b'"' | b'\'' => {
                // A raw string (r"..") has no escapes.
                let raw = i > 0 && matches!(b.get(i - 1), Some(b'r' | b'R'));
                let triple = b.get(i + 1) == Some(&c) && b.get(i + 2) == Some(&c);
                let quote_len = if triple { 3 } else { 1 };
                i += quote_len;
                while let Some(&x) = b.get(i) {
                    if !raw && x == b'\\' {
                        i += 2;
                        continue;
                    }
                    if x == c && (!triple || (b.get(i + 1) == Some(&c) && b.get(i + 2) == Some(&c)))
                    {
                        i += quote_len;
                        break;
                    }
                    i += 1;
                }
                continue;
            }
            b'?' if depth == 0 => return None,
            b'|' if depth == 0 && b.get(i + 1) == Some(&b'|') => {
                ors.push(i);
                i += 1;
            }
            b'&' if depth == 0 && b.get(i + 1) == Some(&b'&') => {
                ands.push(i);
                i += 1;
            }
            _ => {}
        }
        i += 1;
    }
    let (op, at) = if ors.is_empty() {
        ("&&", ands)
    } else {
        ("||", ors)
    };
    if at.is_empty() {
        return None;
    }
    let mut parts = Vec::new();
    let mut start = 0;
    for p in at {
        parts.push(source.get(start..p)?.trim().to_string());
        start = p + 2;
    }
    parts.push(source.get(start..)?.trim().to_string());
    parts.iter().all(|p| !p.is_empty()).then_some((op, parts))
}

/// A run's coverage, per policy name.
#[derive(Debug, Default, Clone)]
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
                let plural = |n: u64| if n == 1 { "" } else { "s" };
                let errors = if i.errors > 0 {
                    format!(", {} error{}", i.errors, plural(i.errors))
                } else {
                    String::new()
                };
                let _ = writeln!(
                    out,
                    "    {:<36} {:>5} run{}{errors}  {seen}",
                    i.label(),
                    i.evaluated,
                    plural(i.evaluated)
                );
                for (n, o) in i.operands.iter().enumerate() {
                    let _ = writeln!(
                        out,
                        "      {} operand {n}: {:<24}  true {}  false {}",
                        i.chain.unwrap_or(""),
                        format!("`{}`", o.expression),
                        mark(o.seen_true),
                        mark(o.seen_false)
                    );
                }
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
                            "chain": i.chain,
                            "operands": i.operands.iter().map(|o| json!({
                                "expression": o.expression,
                                "seenTrue": o.seen_true,
                                "seenFalse": o.seen_false,
                                "errors": o.errors,
                            })).collect::<Vec<_>>(),
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

#[cfg(test)]
mod tests {
    use super::operands;

    #[test]
    fn top_level_chains_are_split() {
        let v = |op: &'static str, parts: &[&str]| {
            Some((op, parts.iter().map(|p| p.to_string()).collect::<Vec<_>>()))
        };
        assert_eq!(operands("a && b && c"), v("&&", &["a", "b", "c"]));
        // `||` binds looser: it is the top level.
        assert_eq!(operands("a && b || c"), v("||", &["a && b", "c"]));
        assert_eq!(operands("a && (b || c)"), v("&&", &["a", "(b || c)"]));
        assert_eq!(
            operands("x.all(c, c.a || c.b) && 'a&&b' in y"),
            v("&&", &["x.all(c, c.a || c.b)", "'a&&b' in y"])
        );
        assert_eq!(
            operands("\"\"\"q && \"\"\" == s || r'\\' == t // c || d\n || z"),
            v(
                "||",
                &["\"\"\"q && \"\"\" == s", "r'\\' == t // c || d", "z"]
            )
        );
        assert_eq!(operands("a ? b && c : d"), None);
        assert_eq!(operands("(a && b)"), None);
        assert_eq!(operands("!(a || b)"), None);
        assert_eq!(operands("size(x) > 2"), None);
        assert_eq!(
            operands("'it\\'s' == a && b"),
            v("&&", &["'it\\'s' == a", "b"])
        );
    }
}
