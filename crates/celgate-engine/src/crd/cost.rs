//! Static cost estimation of CRD validation rules, as the API server does it when a CRD is
//! created or updated: cel-go's estimator (`checker.Cost`, v0.22) over the checked rule, with
//! Kubernetes' function estimates (`library.CostEstimator`) and its size estimator, which reads
//! the maximum sizes of the schema (`maxLength` x 4 bytes, `maxItems`, `maxProperties`, or what
//! fits in a 3 MiB request when unbounded) along the field path of each expression. The rule's
//! cost is multiplied by the number of times its schema node can occur (the product of the
//! enclosing lists' and maps' bounds, or an estimate from the request size when one is
//! unbounded), then checked against the per-rule limit and the per-CRD budget.

use std::collections::HashMap;

use super::schema::Schema;
use super::types::escape;
use celgate_cel::ast::{Comprehension, Expr, ExprKind, Literal, MacroKind};
use celgate_cel::{Type, TypedAst};

/// The largest request the API server accepts (bytes): the bound of unbounded sizes.
pub(super) const MAX_REQUEST_SIZE_BYTES: i64 = 3 * 1024 * 1024;

/// The largest estimated cost one rule (times its cardinality) may have
/// (`StaticEstimatedCostLimit`).
pub(super) const STATIC_ESTIMATED_COST_LIMIT: u64 = 10_000_000;

/// The largest estimated cost all rules of a CRD may have together
/// (`StaticEstimatedCRDCostLimit`).
pub(super) const STATIC_ESTIMATED_CRD_COST_LIMIT: u64 = 100_000_000;

const STRING_TRAVERSAL: f64 = 0.1;
const REGEX_LENGTH: f64 = 0.25;
const LIST_CREATE: u64 = 10;
const MAP_CREATE: u64 = 30;
const MAX_NAME_FORMAT_REGEX_SIZE: f64 = 128.0;
const MAX_FORMAT_SIZE: u64 = 64;

/// The API server's `DeclType` as far as cost estimation reads it: the maximum size
/// (`MaxElements`), the smallest serialized size, and the children.
#[derive(Debug, Clone, Default)]
pub(super) struct Decl {
    pub max_elements: i64,
    pub min_size: i64,
    /// Declared fields by CEL (escaped) name.
    pub fields: HashMap<String, Decl>,
    /// List items or map values.
    pub elem: Option<Box<Decl>>,
    /// Map keys.
    pub key: Option<Box<Decl>>,
}

fn simple(min_size: i64, max_elements: i64) -> Decl {
    Decl {
        max_elements,
        min_size,
        ..Decl::default()
    }
}

fn string_decl() -> Decl {
    simple(2, MAX_REQUEST_SIZE_BYTES - 2)
}

/// `SchemaDeclType`: the sizes of a schema node, `None` where CEL has no type for it.
pub(super) fn decl(s: &Schema, resource_root: bool) -> Option<Decl> {
    if s.int_or_string {
        return Some(simple(1, MAX_REQUEST_SIZE_BYTES - 2));
    }
    match s.type_.as_str() {
        "array" => {
            let items = s.items.as_deref()?;
            let item = decl(items, items.embedded_resource)?;
            let max = match s.max_items {
                Some(m) => clamp(m),
                None => (MAX_REQUEST_SIZE_BYTES - 2) / (item.min_size + 1),
            };
            Some(Decl {
                max_elements: max,
                min_size: 2,
                elem: Some(Box::new(item)),
                ..Decl::default()
            })
        }
        "object" => {
            if let Some(add) = s.additional_schema() {
                let value = decl(add, add.embedded_resource)?;
                let max = match s.max_properties {
                    Some(m) => clamp(m),
                    None => (MAX_REQUEST_SIZE_BYTES - 2) / (value.min_size + 6),
                };
                // Map keys are the plain string type, whose size is not estimated (0).
                return Some(Decl {
                    max_elements: max,
                    min_size: 2,
                    elem: Some(Box::new(value)),
                    key: Some(Box::new(simple(2, 0))),
                    ..Decl::default()
                });
            }
            let mut fields = HashMap::new();
            let mut min_size = 2;
            let meta = resource_root && !declares_type_and_meta(s);
            for (name, prop) in &s.properties {
                if meta && matches!(name.as_str(), "apiVersion" | "kind" | "metadata") {
                    continue;
                }
                let Some(t) = decl(prop, prop.embedded_resource) else {
                    continue;
                };
                if s.required.contains(name) && prop.default.is_none() {
                    min_size += name.len() as i64 + t.min_size + 4;
                }
                if let Some(n) = escape(name) {
                    fields.insert(n, t);
                }
            }
            if meta {
                fields.insert("apiVersion".into(), string_decl());
                fields.insert("kind".into(), string_decl());
                let mut m = simple(2, 0);
                m.fields.insert("name".into(), string_decl());
                m.fields.insert("generateName".into(), string_decl());
                fields.insert("metadata".into(), m);
            }
            Some(Decl {
                max_elements: 0,
                min_size,
                fields,
                ..Decl::default()
            })
        }
        "string" => Some(match s.format.as_str() {
            "byte" => simple(2, s.max_length.map_or(MAX_REQUEST_SIZE_BYTES - 2, clamp)),
            "duration" => simple(3, 32),
            "date" => simple(12, 12),
            "date-time" => simple(21, 32),
            _ => {
                let max = if let Some(m) = s.max_length {
                    clamp(m).saturating_mul(4)
                } else if let Some(values) = s.enum_.as_ref().filter(|v| !v.is_empty()) {
                    values
                        .iter()
                        .filter_map(|v| v.as_str())
                        .map(|v| v.len() as i64)
                        .max()
                        .unwrap_or(0)
                } else {
                    MAX_REQUEST_SIZE_BYTES - 2
                };
                simple(2, max)
            }
        }),
        "boolean" => Some(simple(4, 0)),
        "number" | "integer" => Some(simple(1, 0)),
        _ => None,
    }
}

fn clamp(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// Whether a resource root already declares `kind`, `apiVersion` and `metadata.name` /
/// `metadata.generateName` as strings (`WithTypeAndObjectMeta` then keeps it as is).
fn declares_type_and_meta(s: &Schema) -> bool {
    let is = |x: Option<&Schema>, t: &str| x.is_some_and(|x| x.type_ == t);
    let meta = s.property("metadata");
    is(s.property("kind"), "string")
        && is(s.property("apiVersion"), "string")
        && is(meta, "object")
        && is(meta.and_then(|m| m.property("name")), "string")
        && is(meta.and_then(|m| m.property("generateName")), "string")
}

/// How many times a rule at a node of `decl` may run when the node's cardinality is
/// unbounded (`maxCardinality`): as many as fit in a request.
pub(super) fn unbounded_cardinality(d: &Decl) -> u64 {
    (MAX_REQUEST_SIZE_BYTES / (d.min_size + 1)) as u64
}

/// The factor by which a schema node multiplies the cardinality of its children
/// (`extractMaxElements`): `None` when unbounded.
pub(super) fn child_factor(s: &Schema) -> Option<u64> {
    match s.type_.as_str() {
        "object" if s.additional_properties.is_some() => s.max_properties,
        "array" => s.max_items,
        _ => Some(1),
    }
}

/// `multiplyWithOverflowGuard`.
pub(super) fn times(cost: u64, cardinality: u64) -> u64 {
    if cost == 0 {
        0
    } else {
        cost.saturating_mul(cardinality)
    }
}

/// The estimated cost of one rule or messageExpression of a CRD.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleCost {
    /// Its path in the CRD (`spec.validation.openAPIV3Schema...x-kubernetes-validations[0].rule`).
    pub field: String,
    pub expression: String,
    /// cel-go's estimated maximum cost of one evaluation.
    pub estimated: u64,
    /// How many times it may run for one object (1 for a messageExpression, which the API
    /// server does not multiply).
    pub cardinality: u64,
    /// `estimated` x `cardinality`: what is checked against the limits.
    pub cost: u64,
}

/// The API server's text for a cost over its limit.
pub(super) fn exceeds_message(what: &str, cost: u64, limit: u64) -> String {
    let factor = cost as f64 / limit as f64;
    let shown = if factor > 100.0 {
        "more than 100x".to_string()
    } else if factor < 1.5 {
        format!("{factor:.6}x")
    } else {
        format!("{factor:.1}x")
    };
    format!("{what} exceeds budget by factor of {shown} (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)")
}

/// A cost or size range, saturating as cel-go's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Range {
    pub min: u64,
    pub max: u64,
}

const UNKNOWN: Range = Range {
    min: 0,
    max: u64::MAX,
};

impl Range {
    const fn new(min: u64, max: u64) -> Range {
        Range { min, max }
    }
    fn add(self, o: Range) -> Range {
        Range::new(
            self.min.saturating_add(o.min),
            self.max.saturating_add(o.max),
        )
    }
    fn mul(self, o: Range) -> Range {
        Range::new(
            self.min.saturating_mul(o.min),
            self.max.saturating_mul(o.max),
        )
    }
    fn factor(self, f: f64) -> Range {
        Range::new(by_factor(self.min, f), by_factor(self.max, f))
    }
    fn union(self, o: Range) -> Range {
        Range::new(self.min.min(o.min), self.max.max(o.max))
    }
}

/// `multiplyByCostFactor`: rounded up, saturating.
fn by_factor(x: u64, f: f64) -> u64 {
    let xf = x as f64;
    if xf > 0.0 && f > 0.0 && xf > u64::MAX as f64 / f {
        return u64::MAX;
    }
    let c = (xf * f).ceil();
    if c >= 18_446_744_073_709_551_616.0 {
        u64::MAX
    } else {
        c as u64
    }
}

/// What the estimator knows of a node: its cost, the field path it reads (empty: none), the
/// size it computed, and its type.
#[derive(Debug, Clone)]
struct Est {
    cost: Range,
    path: Vec<String>,
    size: Option<Range>,
    ty: Type,
}

impl Est {
    fn new(cost: Range, ty: Type) -> Est {
        Est {
            cost,
            path: Vec::new(),
            size: None,
            ty,
        }
    }
}

/// The estimator of one rule: the sizes of the rule's scope and the checked tree.
pub(super) struct Estimator<'a> {
    root: &'a Decl,
    ast: &'a TypedAst,
    /// Comprehension variables in scope: name, the range's path and type.
    iter: Vec<(String, Vec<String>, Type)>,
}

/// The estimated maximum cost of a checked rule whose `self` has the sizes of `root`.
pub(super) fn estimate(ast: &TypedAst, root: &Decl) -> u64 {
    estimate_range(ast, root).max
}

/// The estimated cost range (minimum and maximum) of a checked rule.
pub(super) fn estimate_range(ast: &TypedAst, root: &Decl) -> Range {
    let mut e = Estimator {
        root,
        ast,
        iter: Vec::new(),
    };
    e.cost(&ast.expr).cost
}

impl Estimator<'_> {
    fn ty(&self, e: &Expr) -> Type {
        self.ast.type_of(e).cloned().unwrap_or(Type::Dyn)
    }

    /// `a.b.c` when it names no variable's field (a type name): neither `self`, `oldSelf` nor
    /// a comprehension variable starts it.
    fn qualified_name(&self, e: &Expr) -> Option<String> {
        let mut parts = Vec::new();
        let mut cur = e;
        loop {
            match &cur.kind {
                ExprKind::Select {
                    operand,
                    field,
                    optional: false,
                } => {
                    parts.push(field.as_str());
                    cur = operand;
                }
                ExprKind::Ident(root) => {
                    if matches!(root.as_str(), "self" | "oldSelf")
                        || self.iter.iter().any(|(n, _, _)| n == root)
                    {
                        return None;
                    }
                    parts.push(root.as_str());
                    parts.reverse();
                    return Some(parts.join("."));
                }
                _ => return None,
            }
        }
    }

    /// The sizes estimator: the maximum size along `path` from the rule's scope.
    fn path_size(&self, path: &[String]) -> Option<Range> {
        if path.is_empty() {
            return None;
        }
        let mut cur = self.root;
        for name in &path[1..] {
            cur = match name.as_str() {
                "@items" | "@values" => cur.elem.as_deref()?,
                "@keys" => cur.key.as_deref()?,
                field => cur.fields.get(field)?,
            };
        }
        Some(Range::new(0, cur.max_elements.max(0) as u64))
    }

    /// cel-go's `sizeEstimate`: computed, else by path, else 1 for a scalar, else unknown.
    fn size(&self, e: &Est) -> Range {
        if let Some(s) = e.size {
            return s;
        }
        if let Some(s) = self.path_size(&e.path) {
            return s;
        }
        if matches!(
            e.ty,
            Type::Bool | Type::Double | Type::Duration | Type::Int | Type::Timestamp | Type::Uint
        ) {
            return Range::new(1, 1);
        }
        UNKNOWN
    }

    /// Kubernetes' `sizeEstimate`: as cel-go's but with no scalar case.
    fn k8s_size(&self, e: &Est) -> Range {
        e.size
            .or_else(|| self.path_size(&e.path))
            .unwrap_or(UNKNOWN)
    }

    fn cost(&mut self, e: &Expr) -> Est {
        let ty = self.ty(e);
        match &e.kind {
            ExprKind::Literal(l) => {
                let size = match l {
                    Literal::String(s) => s.chars().count() as u64,
                    Literal::Bytes(b) => b.len() as u64,
                    _ => 1,
                };
                Est {
                    size: Some(Range::new(size, size)),
                    ..Est::new(Range::new(0, 0), ty)
                }
            }
            ExprKind::Ident(name) => {
                let mut est = Est::new(Range::new(1, 1), ty);
                if let Some((_, path, rt)) = self.iter.iter().rev().find(|(n, _, _)| n == name) {
                    let step = match rt {
                        Type::List(_) => Some("@items"),
                        Type::Map(..) => Some("@keys"),
                        _ => None,
                    };
                    if let Some(step) = step {
                        est.path = path.clone();
                        est.path.push(step.into());
                    }
                } else {
                    est.path = vec![name.clone()];
                }
                est
            }
            ExprKind::Select {
                operand,
                field,
                optional,
            } => {
                if let Some(name) = self.qualified_name(e) {
                    // A qualified name (`google.protobuf.Timestamp`): the checker makes it
                    // one identifier.
                    return Est {
                        path: vec![name],
                        ..Est::new(Range::new(1, 1), ty)
                    };
                }
                let op = self.cost(operand);
                if *optional {
                    // `_?._`: an O(1) call.
                    return Est::new(op.cost.add(Range::new(1, 1)), ty);
                }
                let mut cost = op.cost;
                if matches!(op.ty, Type::Map(..) | Type::Object(_) | Type::Param(_)) {
                    cost = cost.add(Range::new(1, 1));
                }
                let mut path = op.path;
                path.push(field.clone());
                Est {
                    path,
                    ..Est::new(cost, ty)
                }
            }
            // Kubernetes sets the presence test's own cost to 0.
            ExprKind::Has { operand, .. } => Est::new(self.cost(operand).cost, ty),
            ExprKind::Index {
                operand,
                index,
                optional,
            } => {
                let op = self.cost(operand);
                let ix = self.cost(index);
                let cost = Range::new(1, 1).add(op.cost).add(ix.cost);
                let mut est = Est::new(cost, ty);
                if !optional {
                    let step = match op.ty {
                        Type::List(_) => "@items",
                        _ => "@values",
                    };
                    est.path = op.path;
                    est.path.push(step.into());
                }
                est
            }
            ExprKind::List { elements, .. } => {
                let mut cost = Range::new(LIST_CREATE, LIST_CREATE);
                for x in elements {
                    cost = cost.add(self.cost(x).cost);
                }
                let n = elements.len() as u64;
                Est {
                    size: Some(Range::new(n, n)),
                    ..Est::new(cost, ty)
                }
            }
            ExprKind::Map { entries } => {
                let mut cost = Range::new(MAP_CREATE, MAP_CREATE);
                for x in entries {
                    cost = cost
                        .add(self.cost(&x.key).cost)
                        .add(self.cost(&x.value).cost);
                }
                let n = entries.len() as u64;
                Est {
                    size: Some(Range::new(n, n)),
                    ..Est::new(cost, ty)
                }
            }
            ExprKind::Struct { .. } => Est::new(Range::new(40, 40), ty),
            ExprKind::Call { func, target, args } => {
                // `ip.isCanonical(s)`: the checker makes a namespaced function of a call on
                // a name that is no variable.
                if let Some(ns) = target.as_deref().and_then(|t| self.qualified_name(t)) {
                    return self.call(&format!("{ns}.{func}"), None, args, ty);
                }
                self.call(func, target.as_deref(), args, ty)
            }
            ExprKind::Comprehension(c) => self.comprehension(c, ty),
        }
    }

    /// The cost of a macro as cel-go expands it: the range, the accumulator's initial value,
    /// the result, and the loop condition and step once per element of the range.
    fn comprehension(&mut self, c: &Comprehension, ty: Type) -> Est {
        let range = self.cost(&c.range);
        let one = Range::new(1, 1);
        self.iter
            .push((c.var.clone(), range.path.clone(), range.ty.clone()));
        let body = self.cost(&c.body);
        let filter = c.filter.as_ref().map(|f| self.cost(f).cost);
        self.iter.pop();
        let b = body.cost;
        // (initial value, loop condition, loop step, result)
        let (init, cond, step, result) = match c.kind {
            // `@not_strictly_false(@result)`, `@result && p`
            MacroKind::All => (
                Range::new(0, 0),
                Range::new(2, 2),
                Range::new(1, b.max.saturating_add(1)),
                one,
            ),
            // `@not_strictly_false(!@result)`, `@result || p`
            MacroKind::Exists => (
                Range::new(0, 0),
                Range::new(3, 3),
                Range::new(1, b.max.saturating_add(1)),
                one,
            ),
            // `p ? @result + 1 : @result`, `@result == 1`
            MacroKind::ExistsOne => (
                Range::new(0, 0),
                Range::new(0, 0),
                b.add(Range::new(1, 2)),
                Range::new(2, 2),
            ),
            // `@result + [t]`, or `p ? @result + [t] : @result`
            MacroKind::Map => {
                let add = b.add(Range::new(12, 12));
                let step = match filter {
                    Some(p) => p.add(Range::new(1, 1).union(add)),
                    None => add,
                };
                (
                    Range::new(LIST_CREATE, LIST_CREATE),
                    Range::new(0, 0),
                    step,
                    one,
                )
            }
            // `p ? @result + [x] : @result`
            MacroKind::Filter => (
                Range::new(LIST_CREATE, LIST_CREATE),
                Range::new(0, 0),
                b.add(Range::new(1, 13)),
                one,
            ),
            // `hasValue(o) ? optional.of(<comprehension binding o.value()>) : optional.none()`
            MacroKind::OptMap | MacroKind::OptFlatMap => {
                let cost = range
                    .cost
                    .add(one)
                    .add(Range::new(1, 1))
                    .add(Range::new(1, LIST_CREATE + 2).add(range.cost).add(b));
                return Est::new(cost, ty);
            }
            // Not available to CRD rules (compiled for Kubernetes 1.31): cost the step as
            // a plain O(1) accumulation.
            _ => (
                Range::new(LIST_CREATE, LIST_CREATE),
                Range::new(0, 0),
                b.add(Range::new(1, 13)),
                one,
            ),
        };
        let n = self.size(&range);
        let cost = range.cost.add(init).add(result).add(n.mul(step.add(cond)));
        Est {
            size: Some(n),
            ..Est::new(cost, ty)
        }
    }

    fn call(&mut self, func: &str, target: Option<&Expr>, raw: &[Expr], ty: Type) -> Est {
        let args: Vec<Est> = raw.iter().map(|a| self.cost(a)).collect();
        let target = target.map(|t| self.cost(t));
        let arg_sum = args.iter().fold(Range::new(0, 0), |s, a| s.add(a.cost));
        let target_cost = target.as_ref().map_or(Range::new(0, 0), |t| t.cost);
        // cel-go's own per-overload estimators come first: the ext sets library's.
        if let ("sets.contains" | "sets.intersects" | "sets.equivalent", [a, b]) =
            (func, args.as_slice())
        {
            let factor = if func == "sets.equivalent" { 2.0 } else { 1.0 };
            let c = self
                .k8s_size(a)
                .mul(self.k8s_size(b))
                .factor(factor)
                .add(Range::new(1, 1));
            return Est::new(c.add(arg_sum), ty);
        }
        let (fn_cost, size) = match self.k8s_call(func, target.as_ref(), &args, raw) {
            Some((c, size)) => (c.add(arg_sum), size),
            None => self.std_call(func, target.as_ref(), &args, arg_sum),
        };
        Est {
            size,
            ..Est::new(target_cost.add(fn_cost), ty)
        }
    }

    /// Kubernetes' `EstimateCallCost` (by function name), without the arguments' costs.
    fn k8s_call(
        &self,
        func: &str,
        target: Option<&Est>,
        args: &[Est],
        raw: &[Expr],
    ) -> Option<(Range, Option<Range>)> {
        let one = Range::new(1, 1);
        let arg0 = args.first();
        // cel-go always passes a target to the estimator (possibly empty), so the checks on
        // it are true for global calls too: their first argument is then what is sized.
        let subject = target.or(arg0);
        let sized = |e: Option<&Est>| e.map_or(UNKNOWN, |e| self.k8s_size(e));
        Some(match func {
            "serviceAccount" | "path" | "group" | "resource" | "subresource" | "namespace"
            | "name" | "allowed" | "reason" | "error" | "errored" => (one, None),
            "check" => (Range::new(350_000, 350_000), None),
            "isSorted" | "sum" | "max" | "min" | "indexOf" | "lastIndexOf" => {
                let t = target?;
                match &t.ty {
                    Type::List(elem) => {
                        let mut el = one;
                        if matches!(**elem, Type::String | Type::Bytes) {
                            let mut path = t.path.clone();
                            if !path.is_empty() {
                                path.push("@items".into());
                            }
                            let sz = self.path_size(&path).unwrap_or(UNKNOWN);
                            el = el.add(sz.factor(STRING_TRAVERSAL));
                        }
                        (self.k8s_size(t).mul(el), None)
                    }
                    _ => (self.k8s_size(t).factor(STRING_TRAVERSAL), None),
                }
            }
            "url" | "jsonpatch.escapeKey" => {
                let sz = sized(Some(arg0?));
                (sz.factor(STRING_TRAVERSAL), Some(sz))
            }
            "lowerAscii" | "upperAscii" | "substring" | "trim" => {
                let sz = sized(subject);
                (sz.factor(STRING_TRAVERSAL), Some(sz))
            }
            "replace" if args.len() >= 2 => {
                let sz = sized(subject);
                let from = self.k8s_size(&args[0]);
                let with = self.k8s_size(&args[1]);
                let (mut count, mut kept) = (Range::new(0, 0), Range::new(0, 0));
                if from.min == 0 {
                    count.max = if sz.max < u64::MAX {
                        sz.max + 1
                    } else {
                        sz.max
                    };
                    kept.max = sz.max;
                } else if with.max <= from.min {
                    kept.max = sz.max;
                } else {
                    count.max = (sz.max as f64 / from.min as f64).ceil() as u64;
                }
                if from.max == 0 {
                    count.min = if sz.min < u64::MAX {
                        sz.min + 1
                    } else {
                        sz.min
                    };
                    kept.min = sz.min;
                } else if from.max <= with.min {
                    kept.min = sz.min;
                } else {
                    count.min = (sz.min as f64 / from.max as f64).ceil() as u64;
                }
                let size = count.mul(with).add(kept);
                (sz.factor(2.0 * STRING_TRAVERSAL), Some(size))
            }
            "split" => {
                let sz = sized(subject);
                // A literal limit bounds the number of parts.
                let max = match raw.get(1).map(|e| &e.kind) {
                    Some(ExprKind::Literal(Literal::Int(i))) => *i as u64,
                    _ => sz.max,
                };
                (sz.factor(2.0 * STRING_TRAVERSAL), Some(Range::new(0, max)))
            }
            "join" => {
                let t = subject?;
                let list = self.k8s_size(t);
                let mut sz = Range::new(0, 0);
                if let Type::List(_) = &t.ty {
                    let mut path = t.path.clone();
                    if !path.is_empty() {
                        path.push("@items".into());
                    }
                    let elem = self.path_size(&path).unwrap_or(UNKNOWN);
                    sz = list.mul(elem);
                }
                if let Some(sep) = arg0 {
                    let seps = Range::new(list.min.saturating_sub(1), list.max.saturating_sub(1));
                    sz = sz.add(self.k8s_size(sep).mul(seps));
                }
                (sz.factor(STRING_TRAVERSAL), Some(sz))
            }
            "find" | "findAll" => {
                let sz = sized(target);
                let re = arg0?;
                let s = sz.add(one).factor(STRING_TRAVERSAL);
                let r = self.k8s_size(re).factor(REGEX_LENGTH);
                (s.mul(r), Some(Range::new(0, sz.max)))
            }
            "cidr" | "isIP" | "isCIDR" | "quantity" | "isQuantity" => {
                (sized(Some(arg0?)).factor(STRING_TRAVERSAL), None)
            }
            "ip" => match arg0 {
                Some(a) if target.is_none() => (self.k8s_size(a).factor(STRING_TRAVERSAL), None),
                _ => (one, None),
            },
            "ip.isCanonical" => (sized(Some(arg0?)).factor(2.0 * STRING_TRAVERSAL), None),
            "masked"
            | "prefixLength"
            | "family"
            | "isUnspecified"
            | "isLoopback"
            | "isLinkLocalMulticast"
            | "isLinkLocalUnicast"
            | "isGlobalUnicast" => (one, None),
            "containsIP" | "containsCIDR" => {
                let a = arg0?;
                let sz = Range::new(4, 16);
                let mut c = sz.add(sz).factor(STRING_TRAVERSAL);
                if func == "containsCIDR" {
                    c = c.add(sz.factor(STRING_TRAVERSAL)).add(one);
                }
                if matches!(a.ty, Type::String) {
                    c = c.add(self.k8s_size(a).factor(STRING_TRAVERSAL));
                }
                (c, None)
            }
            "validate" => (
                sized(Some(arg0?))
                    .factor(STRING_TRAVERSAL)
                    .factor(MAX_NAME_FORMAT_REGEX_SIZE * REGEX_LENGTH),
                None,
            ),
            "format.named" | "sign" | "asInteger" | "isInteger" | "asApproximateFloat"
            | "isGreaterThan" | "isLessThan" | "compareTo" | "add" | "sub" | "getScheme"
            | "getHostname" | "getHost" | "getPort" | "getEscapedPath" | "getQuery" => (one, None),
            "_==_" if args.len() == 2 && args[0].ty == args[1].ty => match &args[0].ty {
                Type::Opaque(
                    "net.IP"
                    | "net.CIDR"
                    | "kubernetes.Quantity"
                    | "kubernetes.Semver"
                    | "kubernetes.authorization.Authorizer"
                    | "kubernetes.authorization.PathCheck"
                    | "kubernetes.authorization.GroupCheck"
                    | "kubernetes.authorization.ResourceCheck"
                    | "kubernetes.authorization.Decision",
                ) => (one, None),
                Type::Opaque("kubernetes.NamedFormat") => (
                    Range::new(1, MAX_FORMAT_SIZE).factor(STRING_TRAVERSAL),
                    None,
                ),
                Type::Opaque("kubernetes.URL") => {
                    // As Kubernetes does: the right operand's computed size, twice.
                    let size = args[1].size.unwrap_or(one);
                    (Range::new(1, size.max).factor(STRING_TRAVERSAL), None)
                }
                _ => return None,
            },
            _ => return None,
        })
    }

    /// cel-go's own estimates (`functionCost`), with the arguments' costs.
    fn std_call(
        &self,
        func: &str,
        target: Option<&Est>,
        args: &[Est],
        arg_sum: Range,
    ) -> (Range, Option<Range>) {
        let one = Range::new(1, 1);
        let default = (one.add(arg_sum), None);
        let is = |e: Option<&Est>, f: fn(&Type) -> bool| e.is_some_and(|e| f(&e.ty));
        let string_like = |t: &Type| matches!(t, Type::String | Type::Bytes | Type::Dyn);
        match (func, target, args) {
            ("format", Some(t), _) if matches!(t.ty, Type::String) => {
                (self.size(t).factor(STRING_TRAVERSAL).add(arg_sum), None)
            }
            ("bytes", None, [a]) if matches!(a.ty, Type::String | Type::Dyn) => {
                let sz = self.size(a);
                let mut c = sz.factor(STRING_TRAVERSAL);
                if a.ty == Type::Dyn {
                    c = c.union(one);
                }
                (
                    c.add(arg_sum),
                    Some(Range::new(sz.min, sz.max.saturating_mul(4))),
                )
            }
            ("string", None, [a]) if matches!(a.ty, Type::Bytes | Type::Dyn) => {
                let sz = self.size(a);
                let mut c = sz.factor(STRING_TRAVERSAL);
                if a.ty == Type::Dyn {
                    // Every overload of `string` applies: their costs' union.
                    c = c.union(one);
                }
                (c.add(arg_sum), Some(Range::new(sz.min / 4, sz.max)))
            }
            ("strings.quote", None, [a]) => {
                let sz = self.size(a);
                (
                    sz.factor(STRING_TRAVERSAL).add(arg_sum),
                    Some(Range::new(
                        sz.min.saturating_add(2),
                        sz.max.saturating_mul(2).saturating_add(2),
                    )),
                )
            }
            ("startsWith" | "endsWith", Some(_), [a]) => {
                (self.size(a).factor(STRING_TRAVERSAL).add(arg_sum), None)
            }
            ("@in", None, [_, r]) => match r.ty {
                Type::List(_) => (self.size(r).factor(1.0).add(arg_sum), None),
                Type::Dyn => (one.union(self.size(r).factor(1.0)).add(arg_sum), None),
                _ => default,
            },
            ("matches", Some(t), [re]) => {
                let s = self.size(t).add(one).factor(STRING_TRAVERSAL);
                let r = self.size(re).factor(REGEX_LENGTH);
                (s.mul(r).add(arg_sum), None)
            }
            ("contains", Some(t), [sub]) if matches!(t.ty, Type::String) => {
                let s = self.size(t).factor(STRING_TRAVERSAL);
                let u = self.size(sub).factor(STRING_TRAVERSAL);
                (s.mul(u).add(arg_sum), None)
            }
            ("_&&_" | "_||_", None, [l, r]) => (
                Range::new(l.cost.min, l.cost.max.saturating_add(r.cost.max)),
                None,
            ),
            ("_?_:_", None, [c, t, f]) => {
                let size = self.size(t).union(self.size(f));
                (c.cost.add(t.cost.union(f.cost)), Some(size))
            }
            ("_+_", None, [l, r])
                if is(Some(l), |t| {
                    matches!(t, Type::String | Type::Bytes | Type::List(_) | Type::Dyn)
                }) =>
            {
                let size = self.size(l).add(self.size(r));
                let list = (one.add(arg_sum), Some(size));
                let text = (size.factor(STRING_TRAVERSAL).add(arg_sum), Some(size));
                match l.ty {
                    Type::List(_) => list,
                    Type::Dyn => (
                        one.union(size.factor(STRING_TRAVERSAL)).add(arg_sum),
                        Some(size),
                    ),
                    _ => text,
                }
            }
            ("_==_" | "_!=_", None, [l, r]) => (self.eq_cost(l, r).add(arg_sum), None),
            ("_<_" | "_<=_" | "_>_" | "_>=_", None, [l, r]) if string_like(&l.ty) => {
                let c = self.eq_cost(l, r).add(arg_sum);
                if matches!(l.ty, Type::Dyn) {
                    (c.union(one.add(arg_sum)), None)
                } else {
                    (c, None)
                }
            }
            _ => default,
        }
    }

    /// The size-based cost of comparing two values (equality, string ordering).
    fn eq_cost(&self, l: &Est, r: &Est) -> Range {
        let smallest = self.size(l).max.min(self.size(r).max);
        let min = u64::from(smallest > 0);
        Range::new(min, smallest).factor(STRING_TRAVERSAL)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn factor_text_follows_the_api_server() {
        assert!(exceeds_message("x", 12_330_010, 10_000_000).contains("factor of 1.233001x"));
        assert!(exceeds_message("x", 58_000_000, 10_000_000).contains("factor of 5.8x"));
        assert!(exceeds_message("x", u64::MAX, 10_000_000).contains("more than 100x"));
    }

    #[test]
    fn sizes_follow_the_schema_bounds() {
        let s: Schema = serde_json::from_value(serde_json::json!({
            "type": "object",
            "properties": {
                "s": {"type": "string", "maxLength": 10},
                "e": {"type": "string", "enum": ["a", "abc"]},
                "l": {"type": "array", "items": {"type": "integer"}},
                "d": {"type": "string", "format": "duration", "maxLength": 5}
            }
        }))
        .unwrap();
        let d = decl(&s, false).unwrap();
        assert_eq!(d.fields["s"].max_elements, 40);
        assert_eq!(d.fields["e"].max_elements, 3);
        assert_eq!(d.fields["l"].max_elements, (MAX_REQUEST_SIZE_BYTES - 2) / 2);
        assert_eq!(d.fields["d"].max_elements, 32);
    }
}

/// The API server's own cost expectations (apiextensions-apiserver's `TestCostEstimation`,
/// 1.32): the rule's estimated cost on a schema without bounds ("calc") and with them
/// ("set"), with `self` the schema itself (not a resource root).
#[cfg(test)]
mod api_server_costs {
    use serde_json::{json, Value as Json};

    use super::*;
    use crate::crd::rules::env_for;
    use crate::crd::types::cel_type;
    use celgate_cel::Type;

    fn cost(schema: Json, rule: &str) -> u64 {
        let s: Schema = serde_json::from_value(schema).unwrap();
        let ty = cel_type(&s, "selfType").unwrap();
        let (_, ast) = env_for(&ty, None).compile_typed(rule).unwrap();
        estimate(&ast, &decl(&s, false).unwrap())
    }

    fn with(mut s: Json, key: &str, max: Option<i64>) -> Json {
        if let Some(m) = max {
            s[key] = json!(m);
        }
        s
    }

    /// `parseRuleType`: a schema for `number`, `duration`, `int-or-string`...
    fn scalar(t: &str) -> Json {
        match t {
            "duration" | "date" | "date-time" => json!({"type": "string", "format": t}),
            "int-or-string" => json!({"x-kubernetes-int-or-string": true}),
            t => json!({"type": t}),
        }
    }

    fn array(items: Json, max: Option<i64>) -> Json {
        with(json!({"type": "array", "items": items}), "maxItems", max)
    }

    fn map(values: Json, max: Option<i64>) -> Json {
        with(
            json!({"type": "object", "additionalProperties": values}),
            "maxProperties",
            max,
        )
    }

    fn string(max: Option<i64>) -> Json {
        with(json!({"type": "string"}), "maxLength", max)
    }

    fn object_with_required() -> Json {
        json!({"type": "object", "required": ["required"], "properties": {
            "required": {"type": "string"}, "optional": {"type": "string"}}})
    }

    type Gen = fn(Option<i64>) -> Json;

    /// As the API server's test: an expected cost of 0 is not checked (only that the rule
    /// compiles).
    fn check(
        name: &str,
        gen: impl Fn(Option<i64>) -> Json,
        rule: &str,
        calc: u64,
        set: (i64, u64),
    ) {
        for (got, want, what) in [
            (cost(gen(None), rule), calc, "calc"),
            (cost(gen(Some(set.0)), rule), set.1, "set"),
        ] {
            if want > 0 {
                assert_eq!(got, want, "{name}: {what}");
            }
        }
    }

    #[test]
    fn lists_and_maps_of_scalars() {
        for (t, calc, n, set) in [
            ("number", 4718591, 10, 32),
            ("string", 3145727, 20, 62),
            ("boolean", 1887437, 5, 17),
            ("int-or-string", 4718591, 10, 32),
            ("duration", 2359295, 5, 17),
            ("date", 725936, 15, 47),
            ("date-time", 428963, 25, 77),
        ] {
            check(
                t,
                |m| array(scalar(t), m),
                "self.all(x, true)",
                calc,
                (n, set),
            );
        }
        for (t, calc, n, set) in [
            ("number", 1348169, 10, 32),
            ("string", 1179647, 3, 11),
            ("boolean", 943718, 100, 302),
            ("int-or-string", 1348169, 15, 47),
            ("duration", 1048577, 5, 17),
            ("date", 524288, 10, 32),
            ("date-time", 349526, 25, 77),
        ] {
            check(
                t,
                |m| map(scalar(t), m),
                "self.all(x, true)",
                calc,
                (n, set),
            );
            check(t, |m| map(scalar(t), m), "has(self.x)", 0, (n, 0));
        }
    }

    #[test]
    fn nested_structures() {
        let arrays: Gen = |m| array(json!({"type": "array", "items": {"type": "number"}}), m);
        check(
            "array of arrays",
            arrays,
            "self.all(x, true)",
            3145727,
            (100, 302),
        );
        check(
            "array of arrays index",
            arrays,
            "self[0][0] == -1.0",
            3,
            (51, 3),
        );
        let objects: Gen = |m| array(object_with_required(), m);
        check(
            "array of objects",
            objects,
            "self.all(x, true)",
            555128,
            (50, 152),
        );
        check(
            "array of objects index",
            objects,
            "self[0] == null",
            2,
            (422, 2),
        );
        let maps: Gen = |m| {
            array(
                json!({"type": "object", "additionalProperties": {"type": "number"}}),
                m,
            )
        };
        check(
            "array of maps",
            maps,
            "self.all(x, x.y == 25.2)",
            6291452,
            (12, 74),
        );
        check("array of maps index", maps, "self[0].x > 2.0", 4, (3000, 4));
        let m_objects: Gen = |m| map(object_with_required(), m);
        check(
            "map of objects",
            m_objects,
            "self.all(x, true)",
            428963,
            (20, 62),
        );
        check("map of objects has", m_objects, "has(self.x)", 0, (9001, 0));
        let m_maps: Gen = |m| {
            map(
                json!({"type": "object", "additionalProperties": {"type": "number"}}),
                m,
            )
        };
        check(
            "map of maps",
            m_maps,
            "self.all(x, true)",
            1179647,
            (10, 32),
        );
        let m_arrays: Gen = |m| map(json!({"type": "array", "items": {"type": "number"}}), m);
        check(
            "map of arrays",
            m_arrays,
            "self.all(x, true)",
            1179647,
            (25, 77),
        );
        let nested: Gen = |m| map(string(m), m);
        check(
            "map of strings, value length",
            nested,
            "self.all(x, x.contains(self[x]))",
            2752507,
            (10, 72),
        );
        let all_max: Gen = |m| {
            let inner = with(object_with_required(), "maxProperties", m);
            array(map(inner, m), m)
        };
        let one_max: Gen = |m| array(map(object_with_required(), m), None);
        let rule = r#"self.all(x, x["y"].required == "z")"#;
        check("nested, all bounded", all_max, rule, 7340027, (10, 72));
        check("nested, one bounded", one_max, rule, 7340027, (10, 7340027));
    }

    #[test]
    fn loops_indexes_and_comparisons() {
        let numbers: Gen = |m| array(json!({"type": "number"}), m);
        assert_eq!(
            cost(numbers(Some(10)), "self.all(x, self.all(y, true))"),
            352
        );
        assert!(cost(numbers(None), "self.all(x, self.all(y, true))") > PER_CALL_LIMIT);
        assert_eq!(
            cost(
                numbers(Some(10)),
                "self.all(x, self.all(y, self.all(z, true)))"
            ),
            3552
        );
        check("index numbers", numbers, "self[1] == 0.0", 2, (5000, 2));
        check("index, no items", numbers, "self[3] == 0.0", 2, (0, 2));
        check(
            "big maxItems",
            numbers,
            "self.all(x, x == 0.0)",
            6291454,
            (3 * 1024 * 2048, 25165826),
        );
        let strings: Gen = |m| array(json!({"type": "string"}), m);
        check(
            "index strings",
            strings,
            "self[1] == self[1]",
            314577,
            (8, 314577),
        );
        let ios: Gen = |m| array(scalar("int-or-string"), m);
        check("index int-or-string", ios, "self[0] == 5", 3, (10, 3));
        let bools: Gen = |m| array(json!({"type": "boolean"}), m);
        check("index booleans", bools, "self[0] == false", 2, (25, 2));
        let durations: Gen = |m| array(scalar("duration"), m);
        check(
            "durations",
            durations,
            "self[0].getHours() == 2",
            4,
            (525, 4),
        );
        let dates: Gen = |m| array(scalar("date"), m);
        check("dates", dates, "self[2].getDayOfMonth() == 13", 4, (42, 4));
        let times: Gen = |m| array(scalar("date-time"), m);
        check(
            "date-times",
            times,
            "self[2].getMinutes() == 45",
            4,
            (99, 4),
        );
        let numbers_map: Gen = |m| map(json!({"type": "number"}), m);
        check("map index", numbers_map, r#"self["x"] == 0.0"#, 2, (0, 2));
        let ints: Gen = |m| map(json!({"type": "integer"}), m);
        check("size", ints, "oldSelf.size() == self.size()", 5, (10, 5));
        let tmap: Gen = |m| map(scalar("date-time"), m);
        check("timestamp ==", tmap, r#"self["a"] == self["b"]"#, 8, (7, 8));
        let dmap: Gen = |m| map(scalar("duration"), m);
        check("duration ==", dmap, r#"self["c"] == self["d"]"#, 8, (42, 8));
    }

    #[test]
    fn strings() {
        check("contains", string, "self.contains('test')", 314574, (10, 5));
        check("startsWith", string, "self.startsWith('test')", 2, (15, 2));
        check("endsWith", string, "self.endsWith('test')", 2, (30, 2));
        check(
            "concat",
            string,
            r#"size(self + "hello") > size("hello")"#,
            314578,
            (4, 7),
        );
        check("matches", string, r#"self.matches("x")"#, 314574, (50, 22));
        check(
            "matches literal",
            string,
            r#""".matches("(((((((((())))))))))[0-9]")"#,
            7,
            (10, 7),
        );
        check("matches empty", string, r#"self.matches("")"#, 1, (100, 1));
        check("== literal", string, r#"self == "x""#, 2, (0, 1));
        let bytes: Gen = |m| with(json!({"type": "string", "format": "byte"}), "maxLength", m);
        check("bytes ==", bytes, r#"self == b"x""#, 2, (0, 1));
        let enums: Gen = |m| {
            with(
                json!({"type": "string", "enum": ["A", "B", "C", "LongValue"]}),
                "maxLength",
                m,
            )
        };
        check("enum", enums, "self.contains('A')", 2, (1000, 401));
        check(
            "find",
            string,
            "self.find('[0-9]+') == ''",
            629147,
            (10, 11),
        );
        check(
            "lowerAscii",
            string,
            "self.lowerAscii() == 'lower!'",
            314575,
            (10, 6),
        );
        let list: Gen = |m| array(string(m), m);
        check(
            "join",
            list,
            "self.join(' ') == 'aa bb'",
            329853068905,
            (10, 43),
        );
        check(
            "isSorted",
            list,
            "self.isSorted() == true",
            329854432052,
            (10, 52),
        );
        let replace: Gen = |m| {
            json!({"type": "object", "properties": {
                "str": string(m), "before": string(Some(2)), "after": string(Some(4))}})
        };
        let rule = "self.str.replace(self.before, self.after) == 'does not matter'";
        check("replace", replace, rule, 629154, (4, 12));
        let split: Gen =
            |m| json!({"type": "object", "properties": {"str": string(m), "separator": string(m)}});
        check(
            "split",
            split,
            "self.str.split(self.separator) == []",
            629160,
            (10, 22),
        );
    }

    const PER_CALL_LIMIT: u64 = 1_000_000;

    /// Kubernetes' library estimates (apiserver's `library/cost_test.go`, 1.32) on
    /// expressions of literals: (min, max).
    #[test]
    fn library_functions() {
        let range = |expr: &str| {
            let (_, ast) = env_for(&Type::Dyn, None).compile_typed(expr).unwrap();
            let r = estimate_range(&ast, &Decl::default());
            (r.min, r.max)
        };
        let url = "url('https:://kubernetes.io/')";
        for op in [".getScheme()", ".getHost()", ".getPort()", ".getQuery()"] {
            assert_eq!(range(&format!("{url}{op}")), (4, 4), "{op}");
        }
        assert_eq!(range(&format!("{url} == {url}")), (7, 9));
        assert_eq!(range(&format!("{url} == url('http://x.b')")), (5, 5));
        let v4 = "ip('192.168.0.1')";
        let v6 = "ip('2001:db8:3333:4444:5555:6666:7777:8888')";
        assert_eq!(range(v4), (2, 2));
        assert_eq!(range(v6), (4, 4));
        assert_eq!(range(&format!("{v4}.family()")), (3, 3));
        assert_eq!(range(&format!("{v6}.isLoopback()")), (5, 5));
        assert_eq!(range(&format!("{v4} == ip('192.168.0.1')")), (5, 5));
        assert_eq!(range("ip.isCanonical('192.168.0.1')"), (3, 3));
        assert_eq!(
            range("ip.isCanonical('2001:db8:3333:4444:5555:6666:7777:8888')"),
            (8, 8)
        );
        let net = "cidr('192.168.0.0/16')";
        assert_eq!(range(net), (2, 2));
        assert_eq!(range(&format!("{net}.prefixLength()")), (3, 3));
        assert_eq!(
            range(&format!("{net}.containsCIDR(cidr('192.0.0.0/30'))")),
            (7, 11)
        );
        assert_eq!(
            range(&format!("{net}.containsCIDR('192.168.0.0/16')")),
            (7, 11)
        );
        assert_eq!(range(&format!("{net}.containsIP(ip('192.0.0.1'))")), (4, 7));
        assert_eq!(range(&format!("{net}.containsIP('192.169.0.1')")), (5, 8));
    }
}
