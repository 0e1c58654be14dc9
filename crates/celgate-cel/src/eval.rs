//! Evaluation of a compiled program, metered in cel-go's runtime cost units.
//!
//! Costs follow cel-go's `CostTracker` as Kubernetes configures it: constants 0, each
//! identifier, field selection and index 1, `has()` 0, list and map literals 10 and 30, calls
//! by the function's cost rule, and comprehensions charged node by node as their cel-go macro
//! expansions would be (`all` costs 3 per element plus its predicate, `map` 12 plus its
//! transform...). The limit is checked on every charge, so an expression stops as soon as it
//! goes over, including inside a comprehension.
//!
//! Two limits cel-go's units do not give are kept beside the cost: a memory ceiling, since
//! some calls build far more than they are charged (`flatten`, `format`, `replace`...), and
//! the request's deadline, which every loop whose length depends on the input watches. Library
//! functions that build or scan reach both through an explicit [`Ctx`].

use std::sync::Arc;

use super::ast::MacroKind;
use super::ctx::Ctx;
use super::error::EvalError;
use super::json::Key;
use super::meter::{Meter, Ticker, STEPS_PER_CHECK};
use super::overload::{Function, Overload};
use super::regex::{Regex, RegexCache};
use super::stdlib::lists::{sort_by_keys, sort_cost};
use super::stdlib::regex::{find_all_with, find_with, regex_cost, search_watch};
use super::types::Type;
use super::value::{List, Map, OwnedMap, Value, VALUE_BYTES};

mod walk;

/// The compiled form of an expression.
#[derive(Debug)]
pub enum Node {
    Const(Value<'static>),
    /// A declared variable, by slot.
    Var(usize),
    /// A comprehension variable, by its position on the local stack.
    Local(usize),
    /// A composited variable (`variables.name`), by index; evaluated on demand by the
    /// activation. `optional` for `variables.?name`, which always finds a declared variable.
    Lazy {
        index: usize,
        optional: bool,
    },
    /// `has(variables.name)`, by index. Kubernetes' composited variables are a
    /// `lazy.MapValue` (`k8s.io/apiserver/pkg/cel/lazy/lazy.go`) and its declared type gives
    /// no field tester, so cel-go tests presence with the map's `Find`
    /// (`interpreter/attributes.go`, `refQualify`): that evaluates the variable and finds
    /// every declared one, true whatever its value, or fails with the variable's own error
    /// (`composited variable "x" fails to evaluate: ...`, `plugin/cel/composition.go`).
    LazyPresent(usize),
    /// The composited variables as a whole (`variables` not followed by a selection).
    Variables,
    Select {
        operand: Box<Node>,
        field: Key,
        optional: bool,
        /// Written `.?` (rather than made optional by the chain before it): finds nothing,
        /// instead of failing, on null or a scalar.
        explicit: bool,
        /// What the selection charges, from [`Node::qualifier_cost`].
        cost: u8,
    },
    Has {
        operand: Box<Node>,
        /// Prepared for the document's prefix lookup, as a selection's.
        field: Key,
    },
    Index {
        operand: Box<Node>,
        index: Box<Node>,
        optional: bool,
        /// What the indexing charges, from [`Node::qualifier_cost`].
        cost: u8,
    },
    And(Box<Node>, Box<Node>),
    Or(Box<Node>, Box<Node>),
    Cond(Box<[Node; 3]>),
    Call {
        func: &'static Function,
        imp: Callee,
        args: Box<[Node]>,
    },
    /// `matches`, `find` or `findAll` with a constant pattern compiled once.
    Regex {
        op: RegexOp,
        args: Box<[Node]>,
        re: Arc<Regex>,
        pattern_size: u64,
        /// Charged 1 (cel-go's default), not the regex rule: the global `matches(s, p)`,
        /// whose overload id cel-go's tracker does not price.
        plain: bool,
    },
    List {
        elements: Box<[Node]>,
        optional: Box<[bool]>,
    },
    Map {
        entries: Box<[(Node, Node, bool)]>,
    },
    Comprehension(Box<Comprehension>),
    /// A patch type's construction (`Object.spec{...}`, `JSONPatch{...}`): the type name
    /// as written, each field's name, value and whether it is written `?name:`.
    Struct {
        type_name: &'static str,
        fields: Box<[(Box<str>, Node, bool)]>,
    },
    /// `a.or(b)` (`value == false`) and `a.orValue(b)`: `b` is evaluated only when `a` is
    /// none, and neither call is charged (cel-go's `decorateOptionalOr`).
    OptOr {
        args: Box<[Node; 2]>,
        value: bool,
    },
    /// Always an error (an unknown name in an unchecked expression).
    Fail(Box<str>),
    /// A library constructor on constant arguments (`quantity('1Gi')`), its result computed
    /// once when compiled. cel-go calls it at every evaluation, so every evaluation is
    /// charged `cost`, what the call costs, as the call would have been (in one charge, its
    /// constant arguments costing nothing). Built only for calls that succeed.
    Kept {
        value: Value<'static>,
        cost: u64,
    },
}

impl Node {
    /// Whether cel-go plans this node as an attribute (an identifier, a selection or index
    /// chain, a conditional), whose evaluation its cost tracker charges once for the whole
    /// chain rather than once per node.
    pub(crate) fn is_attribute(&self) -> bool {
        matches!(
            self,
            Node::Var(_)
                | Node::Local(_)
                | Node::Lazy { .. }
                | Node::Variables
                | Node::Select { .. }
                | Node::Index { .. }
                | Node::Cond(_)
        )
    }

    /// An attribute other than `?:`: evaluating it charges its head identifier, a charge
    /// cel-go does not make where it folds the attribute into another (an attribute index,
    /// an attribute branch of `?:`).
    pub(crate) fn is_headed_attribute(&self) -> bool {
        self.is_attribute() && !matches!(self, Node::Cond(_))
    }

    /// Whether `slot` of the local stack is read anywhere in this node.
    pub(crate) fn reads_local(&self, slot: usize) -> bool {
        let any = |nodes: &[Node]| nodes.iter().any(|n| n.reads_local(slot));
        match self {
            Node::Local(i) => *i == slot,
            Node::Const(_)
            | Node::Var(_)
            | Node::Lazy { .. }
            | Node::LazyPresent(_)
            | Node::Variables
            | Node::Fail(_)
            | Node::Kept { .. } => false,
            Node::Select { operand, .. } | Node::Has { operand, .. } => operand.reads_local(slot),
            Node::Index { operand, index, .. } => {
                operand.reads_local(slot) || index.reads_local(slot)
            }
            Node::And(l, r) | Node::Or(l, r) => l.reads_local(slot) || r.reads_local(slot),
            Node::Cond(parts) => any(&parts[..]),
            Node::OptOr { args, .. } => any(&args[..]),
            Node::Call { args, .. } | Node::Regex { args, .. } => any(args),
            Node::List { elements, .. } => any(elements),
            Node::Map { entries } => entries
                .iter()
                .any(|(k, v, _)| k.reads_local(slot) || v.reads_local(slot)),
            Node::Struct { fields, .. } => fields.iter().any(|(_, v, _)| v.reads_local(slot)),
            Node::Comprehension(c) => {
                c.range.reads_local(slot)
                    || c.filter.as_ref().is_some_and(|f| f.reads_local(slot))
                    || c.body.reads_local(slot)
            }
        }
    }

    /// What a selection or index on `operand` (by `index`, for an index) charges, as cel-go's
    /// cost tracker does: 1 for the qualifier; 1 more when the operand is not an attribute
    /// (cel-go wraps it in a relative attribute, charged on its own); 1 less when the index
    /// is an attribute (cel-go resolves it as a qualifier without charging its evaluation).
    pub(crate) fn qualifier_cost(operand: &Node, index: Option<&Node>) -> u8 {
        let relative = u8::from(!operand.is_attribute());
        let attribute_index = u8::from(index.is_some_and(Node::is_headed_attribute));
        (1 + relative).saturating_sub(attribute_index)
    }
}

/// Which implementation a call runs.
#[derive(Debug)]
pub enum Callee {
    /// Resolved when the expression was checked.
    Static(&'static Overload),
    /// Chosen by the arguments' runtime kinds among these overloads (for `dyn` arguments
    /// whose candidates have different implementations).
    Dispatch(Box<[&'static Overload]>),
    /// Resolved to this one overload of a conversion family whose implementation takes every
    /// kind: cel-go guards such an overload's arguments at run time (`int(x)` checked as
    /// `int(int)`, meeting a string, is `no such overload: int(string)`).
    Guarded(&'static Overload),
    /// A call the checker could not resolve to one overload, charged cel-go's default of 1
    /// whatever the overload's own rule: cel-go prices `in`, string comparison and
    /// concatenation, `bytes(s)`... by the checked overload id, which such a call lacks.
    Untyped(Box<Callee>),
}

/// Functions whose cost cel-go's tracker looks up by overload id (`runtimecost.go`), which
/// a call matching several overloads does not have.
pub(crate) const COSTED_BY_OVERLOAD_ID: &[&str] = &[
    "@in",
    "_<_",
    "_<=_",
    "_>_",
    "_>=_",
    "_+_",
    "bytes",
    "string",
    "startsWith",
    "endsWith",
    "contains",
    "matches",
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RegexOp {
    Matches,
    Find,
    FindAll,
}

#[derive(Debug)]
pub struct Comprehension {
    pub kind: MacroKind,
    pub range: Node,
    pub two_vars: bool,
    /// cel-go v0.22 (Kubernetes 1.32): a two-variable comprehension whose range fails
    /// reports `unsupported comprehension range type: *types.Err` instead of the error.
    pub range_error_hidden: bool,
    pub filter: Option<Node>,
    pub body: Node,
    /// Whether the body reads the (first) variable: `optMap` and `optFlatMap` evaluate
    /// their target's value only then.
    pub reads_var: bool,
}

impl std::fmt::Debug for Function {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}

impl std::fmt::Debug for Overload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", self.sig)
    }
}

/// Whether a runtime value is of a kind a parameter type accepts.
fn kind_accepts(t: &Type, v: &Value<'_>) -> bool {
    match (t, v) {
        (Type::Dyn | Type::Param(_), _) => true,
        (Type::Null, Value::Null)
        | (Type::Bool, Value::Bool(_))
        | (Type::Int, Value::Int(_))
        | (Type::Uint, Value::Uint(_))
        | (Type::Double, Value::Double(_))
        | (Type::String, Value::String(_))
        | (Type::Bytes, Value::Bytes(_))
        | (Type::Timestamp, Value::Timestamp(_))
        | (Type::Duration, Value::Duration(_))
        | (Type::List(_), Value::List(_))
        | (Type::Map(..) | Type::Object(_), Value::Map(_))
        | (Type::Optional(_), Value::Optional(_))
        | (Type::TypeOf(_), Value::Type(_)) => true,
        (Type::Opaque(name), Value::Opaque(o)) => o.type_name() == *name,
        _ => false,
    }
}

const NO_SUCH_OVERLOAD: &str = "no such overload";

/// Operators cel-go binds through one implementation guarded by a trait of the first
/// operand (`traits.AdderType`...): see [`has_operand_trait`].
const TRAIT_OPERATORS: &[&str] = &[
    "_+_", "_-_", "_*_", "_/_", "_%_", "-_", "_<_", "_<=_", "_>_", "_>=_", "size", "matches",
];

/// Functions whose cel-go implementation checks its arguments itself and fails with a bare
/// `no such overload` (`!_`'s binding; `contains`, `startsWith` and `endsWith`, declared
/// with type guards disabled; `@in`'s aggregate over lists and maps).
const SELF_CHECKING: &[&str] = &["!_", "contains", "startsWith", "endsWith", "@in"];

/// Whether `v`'s cel-go type has the trait that `op`'s singleton binding requires.
fn has_operand_trait(op: &str, v: &Value<'_>) -> bool {
    use Value as V;
    match op {
        "_+_" => matches!(
            v,
            V::Int(_)
                | V::Uint(_)
                | V::Double(_)
                | V::String(_)
                | V::Bytes(_)
                | V::List(_)
                | V::Timestamp(_)
                | V::Duration(_)
        ),
        "_-_" => matches!(
            v,
            V::Int(_) | V::Uint(_) | V::Double(_) | V::Timestamp(_) | V::Duration(_)
        ),
        "_*_" | "_/_" => matches!(v, V::Int(_) | V::Uint(_) | V::Double(_)),
        "_%_" => matches!(v, V::Int(_) | V::Uint(_)),
        "-_" => matches!(v, V::Int(_) | V::Double(_) | V::Duration(_) | V::Bool(_)),
        "size" => matches!(v, V::String(_) | V::Bytes(_) | V::List(_) | V::Map(_)),
        "matches" => matches!(v, V::String(_)),
        // The comparisons.
        _ => matches!(
            v,
            V::Bool(_)
                | V::Int(_)
                | V::Uint(_)
                | V::Double(_)
                | V::String(_)
                | V::Bytes(_)
                | V::Timestamp(_)
                | V::Duration(_)
        ),
    }
}

/// cel-go's `ReceiverType`: a first operand without the operator's trait is asked to
/// `Receive` the call, which fails with a bare `no such overload`.
fn is_receiver(v: &Value<'_>) -> bool {
    matches!(
        v,
        Value::String(_) | Value::Duration(_) | Value::Timestamp(_)
    )
}

/// cel-go's runtime type guard (`IsAssignableRuntimeType`): the kind, and for a list or map
/// its first element or entry.
fn guard_accepts(t: &Type, v: &Value<'_>) -> bool {
    if !kind_accepts(t, v) {
        return false;
    }
    match (t, v) {
        (Type::List(elem), Value::List(l)) => l.get(0).is_none_or(|e| guard_accepts(elem, &e)),
        (Type::Map(k, val), Value::Map(m)) => m
            .entries()
            .first()
            .is_none_or(|(ek, ev)| guard_accepts(k, ek) && guard_accepts(val, ev)),
        _ => true,
    }
}

/// The error of a call none of `candidates` takes, worded as cel-go words it: its type guards
/// name the function and the arguments' runtime types (`no such overload: int(null_type)`);
/// [`TRAIT_OPERATORS`] and [`SELF_CHECKING`] fail otherwise. A call whose arguments pass an
/// overload's guard failed inside it, with its own bare `no such overload`.
#[cold]
fn no_overload_error(
    func: &'static Function,
    candidates: &[&'static Overload],
    vals: &[Value<'_>],
) -> EvalError {
    if TRAIT_OPERATORS.contains(&func.name) {
        return match vals.first() {
            Some(first) if has_operand_trait(func.name, first) || is_receiver(first) => {
                EvalError::no_such_overload()
            }
            _ => EvalError::new(format!("{NO_SUCH_OVERLOAD}: {}", func.name)),
        };
    }
    if SELF_CHECKING.contains(&func.name) {
        return EvalError::no_such_overload();
    }
    let fits = |o: &Overload| o.sig.params.len() == vals.len() && passes_guards(o, vals);
    if func.overloads.iter().any(&fits) || candidates.iter().any(|o| fits(o)) {
        return EvalError::no_such_overload();
    }
    guard_error(func, vals)
}

/// Whether `vals` pass `o`'s type guards, parameter by parameter.
fn passes_guards(o: &Overload, vals: &[Value<'_>]) -> bool {
    o.sig
        .params
        .iter()
        .zip(vals)
        .all(|(t, v)| guard_accepts(t, v))
}

/// cel-go's `MaybeNoSuchOverload`: the function and the arguments' runtime types.
fn guard_error(func: &Function, vals: &[Value<'_>]) -> EvalError {
    let types: Vec<&str> = vals.iter().map(Value::type_name).collect();
    EvalError::new(format!(
        "{NO_SUCH_OVERLOAD}: {}({})",
        func.name,
        types.join(", ")
    ))
}

/// The composited variables as a value: Kubernetes' lazy map of type `kubernetes.variables`.
/// Its fields are read through the activation ([`Activation::lazy`]); the checker resolves
/// each selection on it to [`Node::Lazy`], so the value itself only answers `type()` and
/// equality (one evaluation has one such object, and cel-go compares it by identity).
#[derive(Debug)]
pub struct VariablesObject;

impl super::value::Opaque for VariablesObject {
    fn type_name(&self) -> &'static str {
        super::env::VARIABLES_TYPE
    }
    fn equals(&self, other: &dyn super::value::Opaque) -> bool {
        other.as_any().is::<VariablesObject>()
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

/// Where the values of declared variables come from during one evaluation.
pub trait Activation<'a> {
    /// The value of the declared variable in `slot`.
    fn var(&self, slot: usize) -> Value<'a>;
    /// The declared variable in `slot` lent rather than copied, where the activation holds
    /// it as a value: a selection chain on it then reads the document in place.
    fn var_ref(&self, _slot: usize) -> Option<&Value<'a>> {
        None
    }
    /// The value of composited variable `index`; its own cost is the activation's business.
    fn lazy(&self, index: usize) -> Result<Value<'a>, EvalError> {
        Err(EvalError::new(format!(
            "no such composited variable: {index}"
        )))
    }
}

impl<'a> Activation<'a> for [Value<'a>] {
    fn var(&self, slot: usize) -> Value<'a> {
        self.get(slot).cloned().unwrap_or(Value::Null)
    }
    fn var_ref(&self, slot: usize) -> Option<&Value<'a>> {
        self.get(slot)
    }
}

impl<'a, const N: usize> Activation<'a> for [Value<'a>; N] {
    fn var(&self, slot: usize) -> Value<'a> {
        self.as_slice().var(slot)
    }
    fn var_ref(&self, slot: usize) -> Option<&Value<'a>> {
        self.get(slot)
    }
}

impl<'a> Activation<'a> for Vec<Value<'a>> {
    fn var(&self, slot: usize) -> Value<'a> {
        self.as_slice().var(slot)
    }
    fn var_ref(&self, slot: usize) -> Option<&Value<'a>> {
        self.get(slot)
    }
}

pub(crate) struct Evaluator<'a, 'x> {
    act: &'x dyn Activation<'a>,
    locals: Vec<Value<'a>>,
    pub meter: &'x mut Meter,
    /// Patterns compiled at run time during this evaluation.
    regexes: RegexCache,
}

type R<'a> = Result<Value<'a>, EvalError>;

/// What cel-go charges a struct creation (`common.StructCreateBaseCost`).
const STRUCT_CREATE_COST: u64 = 40;

impl<'a, 'x> Evaluator<'a, 'x> {
    pub fn new(act: &'x dyn Activation<'a>, meter: &'x mut Meter) -> Self {
        Evaluator {
            act,
            locals: Vec::new(),
            meter,
            regexes: RegexCache::default(),
        }
    }

    pub fn eval(&mut self, n: &Node) -> R<'a> {
        match n {
            Node::Const(v) => Ok(v.clone()),
            Node::Var(slot) => {
                self.meter.charge(1)?;
                Ok(self.act.var(*slot))
            }
            Node::Local(i) => {
                self.meter.charge(1)?;
                Ok(self.local_attribute(*i))
            }
            Node::Lazy { index, optional } => {
                // cel-go charges the `variables` identifier and the field selection.
                self.meter.charge(2)?;
                let v = self.act.lazy(*index)?;
                Ok(if *optional {
                    Value::Optional(Some(Arc::new(v)))
                } else {
                    v
                })
            }
            Node::LazyPresent(index) => {
                // Charged as `has()` on the `variables` attribute was: its identifier.
                self.meter.charge(1)?;
                self.act.lazy(*index).map(|_| Value::Bool(true))
            }
            Node::Variables => {
                self.meter.charge(1)?;
                Ok(Value::opaque(VariablesObject))
            }
            Node::Select {
                operand,
                field,
                optional,
                explicit,
                cost,
            } => {
                if let Some(r) = self.select_local(operand, field, *optional) {
                    return r;
                }
                if !*optional {
                    if let Some(r) = self.walk(n) {
                        return r;
                    }
                }
                let v = self.eval_charging(operand)?;
                if *optional || matches!(v, Value::Optional(_)) {
                    let r = select_in(v, field, *optional, *explicit);
                    return self.charge_optional(r, *cost);
                }
                self.meter.charge(u64::from(*cost))?;
                select_in(v, field, false, false)
            }
            Node::Has { operand, field } => {
                if let Node::Local(i) = **operand {
                    if let Some(Value::Map(m)) = self.locals.get(i) {
                        // `has(x.f)` on a comprehension variable holding a map, in place:
                        // charged the variable, as below.
                        self.meter.charge(1)?;
                        return Ok(Value::Bool(m.get_key(field).is_some()));
                    }
                }
                if matches!(**operand, Node::Select { .. }) {
                    if let Some(r) = self.has_walked(operand, field) {
                        return r;
                    }
                }
                let v = self.presence_operand(operand);
                // cel-go wraps a computed operand in a relative attribute, charged even when
                // the operand failed.
                if !operand.is_attribute() && !v.as_ref().is_err_and(|e| e.is_cancelled()) {
                    self.meter.charge(1)?;
                }
                has(&v?, field)
            }
            Node::Index {
                operand,
                index,
                optional,
                cost,
            } => {
                if !*optional && matches!(**index, Node::Const(Value::Int(_))) {
                    if let Some(r) = self.walk(n) {
                        return r;
                    }
                }
                let v = self.eval_charging(operand)?;
                let by_attribute = index.is_headed_attribute();
                let presence = *optional || matches!(v, Value::Optional(_));
                let k = match self.eval(index) {
                    Ok(k) => k,
                    Err(e) if e.is_cancelled() => return Err(e),
                    Err(e) => {
                        self.charge_index(false, presence, by_attribute, *cost)?;
                        return Err(e);
                    }
                };
                if presence {
                    let r = index_value(v, &k, *optional);
                    let found = matches!(&r, Ok(x) if !matches!(x, Value::Optional(None)));
                    self.charge_index(found, presence, by_attribute, *cost)?;
                    return r;
                }
                self.meter.charge(u64::from(*cost))?;
                index_value(v, &k, false)
            }
            Node::And(l, r) => self.logic(l, r, false),
            Node::Or(l, r) => self.logic(l, r, true),
            Node::Cond(parts) => match self.eval(&parts[0])? {
                Value::Bool(true) => self.branch(&parts[1]),
                Value::Bool(false) => self.branch(&parts[2]),
                _ => Err(EvalError::no_such_overload()),
            },
            Node::Call { func, imp, args } => self.call(func, imp, args),
            Node::Regex {
                op,
                args,
                re,
                pattern_size,
                plain,
            } => self.regex(*op, args, re, *pattern_size, *plain),
            Node::List { elements, optional } => {
                let mut out = Vec::with_capacity(elements.len());
                for (i, e) in elements.iter().enumerate() {
                    // cel-go charges the list's creation even when an element failed.
                    let v = self.eval(e).or_else(|e| self.failed_literal(e, 10))?;
                    if optional.get(i).copied().unwrap_or(false) {
                        match v {
                            Value::Optional(Some(inner)) => out.push((*inner).clone()),
                            Value::Optional(None) => {}
                            _ => return Err(EvalError::no_such_overload()),
                        }
                    } else {
                        out.push(v);
                    }
                }
                self.meter.charge(10)?;
                self.meter.alloc(out.len() as u64 * VALUE_BYTES)?;
                Ok(Value::list(out))
            }
            Node::Map { entries } => {
                let mut out = OwnedMap::with_capacity(entries.len());
                for (k, v, opt) in entries.iter() {
                    let key = self.eval(k).or_else(|e| self.failed_literal(e, 30))?;
                    let val = self.eval(v).or_else(|e| self.failed_literal(e, 30))?;
                    if *opt {
                        match val {
                            Value::Optional(Some(inner)) => out.assign(key, (*inner).clone())?,
                            Value::Optional(None) => out.unassign(&key),
                            _ => return Err(EvalError::no_such_overload()),
                        }
                    } else {
                        out.assign(key, val)?;
                    }
                }
                self.meter.charge(30)?;
                self.meter.alloc(out.len() as u64 * 2 * VALUE_BYTES)?;
                Ok(Value::Map(Map::Owned(Arc::new(out))))
            }
            Node::Comprehension(c) => self.comprehension(c),
            Node::Struct { type_name, fields } => {
                let mut out = Vec::with_capacity(fields.len());
                for (name, node, opt) in fields.iter() {
                    // cel-go charges the creation even when a field failed.
                    let v = self
                        .eval(node)
                        .or_else(|e| self.failed_literal(e, STRUCT_CREATE_COST))?;
                    if *opt {
                        match v {
                            Value::Optional(Some(inner)) => out.push((&**name, (*inner).clone())),
                            Value::Optional(None) => {}
                            _ => return Err(EvalError::no_such_overload()),
                        }
                    } else {
                        out.push((&**name, v));
                    }
                }
                self.meter.charge(STRUCT_CREATE_COST)?;
                super::mutation::construct(type_name, out, self.meter)
            }
            Node::Fail(msg) => Err(EvalError::new(msg.as_ref())),
            Node::Kept { value, cost } => {
                self.meter.charge(*cost)?;
                Ok(value.clone())
            }
            Node::OptOr { args, value } => match self.eval(&args[0])? {
                Value::Optional(Some(v)) if *value => Ok((*v).clone()),
                Value::Optional(None) => self.eval(&args[1]),
                // A present optional for `or`; anything else as cel-go returns it.
                other => Ok(other),
            },
        }
    }

    /// The operand of a selection or index charging `cost`: when it fails, cel-go still
    /// charges the relative attribute wrapped around a non-attribute operand.
    #[inline(always)]
    fn eval_charging(&mut self, operand: &Node) -> R<'a> {
        match self.eval(operand) {
            Ok(v) => Ok(v),
            Err(e) => self.failed_operand(operand, e),
        }
    }

    /// [`Self::eval_charging`]'s error path, kept out of the evaluator's hot loop.
    #[cold]
    #[inline(never)]
    fn failed_operand(&mut self, operand: &Node, e: EvalError) -> R<'a> {
        if Node::qualifier_cost(operand, None) > 1 && !e.is_cancelled() {
            self.meter.charge(1)?;
        }
        Err(e)
    }

    /// Charges an index's qualification. cel-go observes an optional qualification (`[?k]`,
    /// or any index once the chain is optional) only when it found something
    /// (`QualifyIfPresent`): otherwise the qualifier is not charged, and an attribute index
    /// (whose head was charged on evaluation) is given back; the relative attribute around a
    /// computed operand is charged all the same.
    fn charge_index(
        &mut self,
        found: bool,
        presence: bool,
        by_attribute: bool,
        cost: u8,
    ) -> Result<(), EvalError> {
        if !presence || found {
            return self.meter.charge(u64::from(cost));
        }
        if by_attribute {
            self.meter.refund(1);
            return self.meter.charge(u64::from(cost));
        }
        self.meter.charge(u64::from(cost.saturating_sub(1)))
    }

    /// Charges an optional selection that gave `r`: cel-go observes an optional qualifier
    /// only when it found something, so a none costs the qualifier nothing.
    fn charge_optional(&mut self, r: R<'a>, cost: u8) -> R<'a> {
        let cost = match &r {
            Ok(Value::Optional(None)) => cost.saturating_sub(1),
            _ => cost,
        };
        self.meter.charge(u64::from(cost))?;
        r
    }

    /// The operand of `has()`. cel-go resolves a selection chain under a presence test
    /// qualifier by qualifier (`QualifyIfPresent`), and its cost observer charges a
    /// qualifier only once it found its field: a chain that fails charges what it read
    /// before the missing field, not the miss.
    fn presence_operand(&mut self, n: &Node) -> R<'a> {
        let Node::Select {
            operand,
            field,
            optional: false,
            cost,
            ..
        } = n
        else {
            return self.eval(n);
        };
        if let (Node::Local(i), 1) = (&**operand, *cost) {
            if let Some(Value::Map(m)) = self.locals.get(*i) {
                // The commonest chain head, a comprehension variable holding a map, read in
                // place: charged as below (the variable, then the field once found).
                self.meter.charge(1)?;
                let found = m
                    .get_key(field)
                    .ok_or_else(|| EvalError::no_such_key(field))?;
                self.meter.charge(1)?;
                return Ok(found);
            }
        }
        let inner = self.presence_operand(operand);
        // The relative attribute around a computed operand is charged whatever it found.
        let relative = u64::from(cost.saturating_sub(1));
        if relative > 0 && !inner.as_ref().is_err_and(|e| e.is_cancelled()) {
            self.meter.charge(relative)?;
        }
        let v = inner?;
        if matches!(v, Value::Optional(_)) {
            // An optional chain: charged as an ordinary selection.
            let r = select_in(v, field, false, false);
            return self.charge_optional(r, 1);
        }
        let r = select_in(v, field, false, false)?;
        self.meter.charge(1)?;
        Ok(r)
    }

    /// A branch of `?:`. cel-go folds an attribute branch into the conditional attribute
    /// without the branch's own evaluation charge (the identifier's, or the relative
    /// attribute's), so that charge is given back; it reads a computed branch through a
    /// relative attribute.
    fn branch(&mut self, n: &Node) -> R<'a> {
        let r = self.eval(n);
        if !n.is_attribute() {
            // Read through the relative attribute cel-go wraps a computed branch in.
            return r.map(attribute_value);
        }
        if n.is_headed_attribute() && !matches!(&r, Err(e) if e.is_cancelled()) {
            self.meter.refund(1);
        }
        r
    }

    /// `x.f` on a comprehension variable holding a map, the commonest selection: reads the
    /// map in place instead of copying the variable out first. `None` for other selections.
    #[inline(always)]
    fn select_local(&mut self, operand: &Node, field: &Key, optional: bool) -> Option<R<'a>> {
        let (Node::Local(i), false) = (operand, optional) else {
            return None;
        };
        let Some(Value::Map(m)) = self.locals.get(*i) else {
            return None;
        };
        // The variable's charge and the selection's.
        Some(self.meter.charge(2).and_then(|()| {
            m.get_key(field)
                .ok_or_else(|| EvalError::no_such_key(field))
        }))
    }

    /// `eval`, with the commonest operand, a field of a comprehension variable, inline.
    #[inline(always)]
    fn eval_operand(&mut self, n: &Node) -> R<'a> {
        if let Node::Select {
            operand,
            field,
            optional,
            ..
        } = n
        {
            if let Some(r) = self.select_local(operand, field, *optional) {
                return r;
            }
        }
        self.eval(n)
    }

    /// `eval` for a comprehension's body, entering the commonest one, a call, without the
    /// general dispatch.
    #[inline]
    fn eval_body(&mut self, n: &Node) -> R<'a> {
        match n {
            Node::Call { func, imp, args } => self.call(func, imp, args),
            _ => self.eval(n),
        }
    }

    /// `&&` (`or == false`) and `||`, commutative over errors: the deciding value on either
    /// side wins over an error on the other. A cancellation is never absorbed.
    fn logic(&mut self, l: &Node, r: &Node, or: bool) -> R<'a> {
        let lv = self.eval(l);
        match &lv {
            Ok(Value::Bool(b)) if *b == or => return Ok(Value::Bool(or)),
            Err(e) if e.is_cancelled() => return lv,
            _ => {}
        }
        let rv = self.eval(r);
        match &rv {
            Ok(Value::Bool(b)) if *b == or => return Ok(Value::Bool(or)),
            Err(e) if e.is_cancelled() => return rv,
            _ => {}
        }
        match (lv, rv) {
            (Ok(Value::Bool(_)), Ok(Value::Bool(_))) => Ok(Value::Bool(!or)),
            (Err(e), _) => Err(e),
            (Ok(Value::Bool(_)), Err(e)) => Err(e),
            _ => Err(EvalError::no_such_overload()),
        }
    }

    #[inline(always)]
    fn call(&mut self, func: &'static Function, callee: &Callee, args: &[Node]) -> R<'a> {
        // Library functions take one to three arguments (receiver included), or rarely
        // more: keep the common ones on the stack instead of allocating per call.
        match args {
            [a] => {
                let a = match self.eval(a) {
                    Ok(a) => a,
                    Err(e) => return self.failed_call(callee, e, [None, None]),
                };
                return self.invoke(func, callee, &[a]);
            }
            // `x.f(constant)`, the commonest call in policies: the constant is lent, not
            // cloned (for a string, no reference-count traffic per call).
            [a, Node::Const(b)] => {
                let a = match self.eval_operand(a) {
                    Ok(a) => a,
                    Err(e) => return self.failed_call(callee, e, [None, Some(b.clone())]),
                };
                return self.invoke_lending(func, callee, a, b);
            }
            [a, b] => {
                // cel-go evaluates both operands of a binary call before looking for errors.
                let (a, b) = match (self.eval(a), b) {
                    (Ok(a), b) => match self.eval(b) {
                        Ok(b) => (a, b),
                        Err(e) => return self.failed_call(callee, e, [Some(a), None]),
                    },
                    (Err(e), _) if e.is_cancelled() => return Err(e),
                    (Err(e), b) => {
                        let b = match self.eval(b) {
                            Ok(b) => Some(b),
                            Err(eb) if eb.is_cancelled() => return Err(eb),
                            Err(_) => None,
                        };
                        return self.failed_call(callee, e, [None, b]);
                    }
                };
                return self.invoke(func, callee, &[a, b]);
            }
            [a, b, c] => {
                let a = self.eval(a)?;
                let b = self.eval(b)?;
                let c = self.eval(c)?;
                return self.invoke(func, callee, &[a, b, c]);
            }
            _ => {}
        }
        let mut vals: Vec<Value<'a>> = Vec::with_capacity(args.len());
        for a in args {
            vals.push(self.eval(a)?);
        }
        self.invoke(func, callee, &vals)
    }

    /// A list or map literal whose element failed with `e`: charged its creation `cost`.
    #[cold]
    fn failed_literal(&mut self, e: EvalError, cost: u64) -> R<'a> {
        if !e.is_cancelled() {
            self.meter.charge(cost)?;
        }
        Err(e)
    }

    /// A unary or binary call whose argument failed with `e`: cel-go's cost tracker still
    /// charges the call, with the error in place of the argument (sized 1); `args` are the
    /// arguments, `None` for a failed one (a unary call has one, given first). Cancellations
    /// pass through uncharged.
    #[cold]
    fn failed_call(
        &mut self,
        callee: &Callee,
        e: EvalError,
        args: [Option<Value<'a>>; 2],
    ) -> R<'a> {
        if e.is_cancelled() {
            return Err(e);
        }
        let (callee, plain) = match callee {
            Callee::Untyped(inner) => (&**inner, true),
            other => (other, false),
        };
        let overload = match callee {
            Callee::Static(o) | Callee::Guarded(o) => Some(*o),
            Callee::Dispatch(candidates) => candidates.first().copied(),
            Callee::Untyped(_) => None,
        };
        if plain {
            self.meter.charge(1)?;
        } else if let Some(o) = overload {
            let arity = o.sig.params.len().min(2);
            let vals: Vec<Value<'a>> = args
                .into_iter()
                .take(arity)
                .map(|v| v.unwrap_or(Value::Null))
                .collect();
            let mut cx = Ctx::new(self.meter, &mut self.regexes);
            let cost = o.cost.charge_in(&mut cx, &vals)?;
            cx.meter.charge(cost)?;
        }
        Err(e)
    }

    /// `invoke` with arguments `[a, *b]`, where `b` is lent by the program for the call.
    #[inline(always)]
    #[allow(unsafe_code)]
    fn invoke_lending(
        &mut self,
        func: &'static Function,
        callee: &Callee,
        a: Value<'a>,
        b: &Value<'static>,
    ) -> R<'a> {
        // SAFETY: `args[1]` is a bitwise copy of `*b`, which the program owns and keeps alive
        // (and unchanged: the program is immutable) for the whole call, since `b` borrows it.
        // The copy is never dropped (`ManuallyDrop`), so whatever it owns (an `Arc`) is
        // released once, by the program; a callee that keeps part of it clones it, which
        // takes its own reference. `Value` is covariant, so `Value<'static>` is a `Value<'a>`.
        // If the call unwinds, `args[0]` leaks, which is safe.
        let mut args = std::mem::ManuallyDrop::new([a, unsafe { std::ptr::read(b) }]);
        let r = self.invoke(func, callee, &args[..]);
        // SAFETY: `args[0]` is owned here and dropped exactly once; `args[1]` is not dropped.
        unsafe { std::ptr::drop_in_place(&mut args[0]) };
        r
    }

    #[inline(always)]
    fn invoke(&mut self, func: &'static Function, callee: &Callee, vals: &[Value<'a>]) -> R<'a> {
        let (callee, plain) = match callee {
            Callee::Untyped(inner) => (&**inner, true),
            other => (other, false),
        };
        let overload = match callee {
            Callee::Static(o) => *o,
            Callee::Guarded(o) if !passes_guards(o, vals) => {
                return self.guard_failed(func, o, vals)
            }
            Callee::Guarded(o) => *o,
            Callee::Untyped(_) => return Err(EvalError::no_such_overload()),
            Callee::Dispatch(candidates) => candidates
                .iter()
                .find(|o| {
                    o.sig
                        .params
                        .iter()
                        .zip(vals)
                        .all(|(t, v)| kind_accepts(t, v))
                })
                .copied()
                .ok_or(())
                .or_else(|()| self.no_overload(func, candidates, vals, plain))?,
        };
        let mut cx = Ctx::new(self.meter, &mut self.regexes);
        let cost = if plain {
            1
        } else {
            overload.cost.charge_in(&mut cx, vals)?
        };
        cx.meter.charge(cost)?;
        match overload.imp.call(&mut cx, vals) {
            Err(EvalError::Value(m)) if m == NO_SUCH_OVERLOAD => Err(no_overload_error(
                func,
                std::slice::from_ref(&overload),
                vals,
            )),
            r => r,
        }
    }

    /// A guarded overload's arguments of other kinds: charged as the call, then
    /// [`guard_error`].
    #[cold]
    fn guard_failed(&mut self, func: &'static Function, o: &Overload, vals: &[Value<'a>]) -> R<'a> {
        let mut cx = Ctx::new(self.meter, &mut self.regexes);
        let cost = o.cost.charge_in(&mut cx, vals)?;
        cx.meter.charge(cost)?;
        Err(guard_error(func, vals))
    }

    /// No overload takes these arguments: cel-go charges the call all the same (as its
    /// first candidate would be charged).
    #[cold]
    fn no_overload(
        &mut self,
        func: &'static Function,
        candidates: &[&'static Overload],
        vals: &[Value<'a>],
        plain: bool,
    ) -> Result<&'static Overload, EvalError> {
        if plain {
            self.meter.charge(1)?;
        } else if let Some(o) = candidates.first() {
            let mut cx = Ctx::new(self.meter, &mut self.regexes);
            let cost = o.cost.charge_in(&mut cx, vals)?;
            cx.meter.charge(cost)?;
        }
        Err(no_overload_error(func, candidates, vals))
    }

    fn regex(
        &mut self,
        op: RegexOp,
        args: &[Node],
        re: &Regex,
        pattern_size: u64,
        plain: bool,
    ) -> R<'a> {
        let target = self.eval(&args[0])?;
        // The constant pattern was taken out of the arguments when the node was compiled:
        // `findAll`'s limit follows the target directly.
        let limit = match args.get(1) {
            Some(n) => Some(self.eval(n)?),
            None => None,
        };
        // Charged before the target's kind is looked at, as cel-go charges a failed call.
        self.meter.charge(if plain {
            1
        } else {
            regex_cost(target.cost_size(), pattern_size)
        })?;
        let Some(s) = target.as_str() else {
            // cel-go's precompiled constant-pattern `matches` (MatchesRegexOptimization)
            // and Kubernetes' `find`/`findAll` fail with a bare error.
            return Err(EvalError::no_such_overload());
        };
        let mut cx = Ctx::new(self.meter, &mut self.regexes);
        match op {
            RegexOp::Matches => {
                search_watch(&cx, s)?;
                Ok(Value::Bool(
                    re.is_match(s, &mut cx.ticker(STEPS_PER_CHECK))?,
                ))
            }
            RegexOp::Find => find_with(&mut cx, re, &target),
            RegexOp::FindAll => {
                let n = match limit {
                    Some(Value::Int(n)) => n,
                    None => -1,
                    Some(_) => return Err(EvalError::no_such_overload()),
                };
                find_all_with(&mut cx, re, &target, n)
            }
        }
    }

    /// Evaluates `body` with the iteration variables pushed, popping them whatever happens.
    fn with_vars(&mut self, v1: Value<'a>, v2: Option<Value<'a>>, node: &Node) -> R<'a> {
        let depth = self.locals.len();
        self.locals.push(v1);
        if let Some(v) = v2 {
            self.locals.push(v);
        }
        let r = self.eval(node);
        self.locals.truncate(depth);
        r
    }

    fn comprehension(&mut self, c: &Comprehension) -> R<'a> {
        use MacroKind::*;
        let before = self.meter.cost;
        let range = match self.eval(&c.range) {
            Ok(v) => v,
            Err(e) if c.range_error_hidden && !e.is_cancelled() => {
                return Err(EvalError::new(
                    "unsupported comprehension range type: *types.Err",
                ))
            }
            Err(e) => return Err(e),
        };
        match c.kind {
            OptMap | OptFlatMap => {
                let spent = self.meter.cost.saturating_sub(before);
                return self.opt_map(c, range, spent);
            }
            SortBy => return self.sort_by(c, range),
            _ => {}
        }
        // The iteration variables: a list gives (element) or (index, element); a map gives
        // (key) or (key, value). Lists are walked in place, a document array without the
        // list's dispatch per element.
        match (&range, c.two_vars) {
            (Value::List(List::Doc(r)), false) => {
                self.iterate(c, r.children().map(Value::from_doc))
            }
            (Value::List(l), false) => self.iterate(c, l.iter()),
            (Value::List(l), true) => self.iterate(
                c,
                l.iter()
                    .enumerate()
                    .map(|(i, v)| (Value::Int(i as i64), Some(v))),
            ),
            (Value::Map(m), false) => self.iterate(c, m.keys().into_iter()),
            (Value::Map(m), true) => {
                self.iterate(c, m.entries().into_iter().map(|(k, v)| (k, Some(v))))
            }
            // cel-go's two-variable fold names the range's Go type its own way.
            (other, true) => Err(go_type_name(other)
                .map_or_else(EvalError::no_such_overload, |t| {
                    EvalError::new(format!("unsupported comprehension range type: {t}"))
                })),
            (other, false) => Err(not_iterable(other)),
        }
    }

    /// Runs comprehension `c` over `items`. The iteration variables get their slots once and
    /// are overwritten in place at each step.
    fn iterate<B: Bind<'a>>(
        &mut self,
        c: &Comprehension,
        items: impl ExactSizeIterator<Item = B>,
    ) -> R<'a> {
        let slot = self.locals.len();
        self.locals.push(Value::Null);
        if c.two_vars {
            self.locals.push(Value::Null);
        }
        let r = self.iterate_in(c, items, slot);
        self.locals.truncate(slot);
        r
    }

    fn iterate_in<B: Bind<'a>>(
        &mut self,
        c: &Comprehension,
        items: impl ExactSizeIterator<Item = B>,
        slot: usize,
    ) -> R<'a> {
        use MacroKind::*;
        let mut deadline = Ticker::new(self.meter.deadline, DEADLINE_EVERY);
        match c.kind {
            All | Exists => self.quantify(c, items, c.kind == Exists, slot),
            ExistsOne => {
                let mut count: Result<i64, EvalError> = Ok(0);
                for item in items {
                    deadline.tick()?;
                    self.bind(item, slot);
                    // step `p ? @result + 1 : @result`
                    match self.eval_body(&c.body) {
                        Ok(Value::Bool(true)) => {
                            self.meter.charge(2)?;
                            count = count.map(|n| n + 1);
                        }
                        // The `@result` branch: an attribute, charged nothing by cel-go.
                        Ok(Value::Bool(false)) => {}
                        Err(e) if e.is_cancelled() => return Err(e),
                        Err(e) => count = Err(e),
                        Ok(_) => count = Err(EvalError::no_such_overload()),
                    }
                }
                // result `@result == 1`
                self.meter.charge(2)?;
                count.map(|n| Value::Bool(n == 1))
            }
            Map | Filter | TransformList => {
                let mut out = Vec::new();
                // cel-go folds on with an error accumulator: later steps are evaluated and
                // charged as usual, and the first error is the result.
                let mut error: Option<EvalError> = None;
                for item in items {
                    deadline.tick()?;
                    self.bind(item, slot);
                    if !self.filtered_in(c.filter.as_ref(), &mut error)? {
                        continue;
                    }
                    if c.kind == Filter {
                        match self.eval_body(&c.body) {
                            Ok(Value::Bool(true)) => {
                                // `@result + [x]`: `@result`, `x`, the list, the `+`.
                                self.meter.charge_units(2)?;
                                self.meter.charge(10)?;
                                self.meter.charge(1)?;
                                // The element: the variable, or the second of two.
                                out.push(self.local(slot + usize::from(c.two_vars)));
                            }
                            // The `@result` branch, charged nothing (see exists_one).
                            Ok(Value::Bool(false)) => {}
                            Ok(_) => fold_error(&mut error, EvalError::no_such_overload())?,
                            Err(e) => fold_error(&mut error, e)?,
                        }
                    } else {
                        // `@result + [t]`: `@result` before `t`, then the list and the `+`,
                        // charged whether `t` failed or not.
                        self.meter.charge(1)?;
                        let t = self.eval_body(&c.body);
                        if let Err(e) = &t {
                            if e.is_cancelled() {
                                return t;
                            }
                        }
                        self.meter.charge(10)?;
                        self.meter.charge(1)?;
                        match t {
                            Ok(t) if error.is_none() => out.push(t),
                            Ok(_) => {}
                            Err(e) => fold_error(&mut error, e)?,
                        }
                    }
                }
                self.meter.charge(1)?;
                if let Some(e) = error {
                    return Err(e);
                }
                // Each element was charged 12 or 13: the cost bounds the slots, counted here.
                self.meter.alloc(out.len() as u64 * VALUE_BYTES)?;
                Ok(Value::list(out))
            }
            TransformMap | TransformMapEntry => {
                let mut out = OwnedMap::default();
                // cel-go folds on with an error accumulator. Its step `cel.@mapInsert(@result,
                // k, t)` (transformMap) then stops at `@result`, charged alone; the entry form
                // `cel.@mapInsert(@result, t)` is binary and evaluates `t` all the same.
                let mut error: Option<EvalError> = None;
                for item in items {
                    deadline.tick()?;
                    self.bind(item, slot);
                    if !self.filtered_in(c.filter.as_ref(), &mut error)? {
                        continue;
                    }
                    if c.kind == TransformMap {
                        if error.is_some() {
                            self.meter.charge(1)?;
                            continue;
                        }
                        // `@result` and `k`, then `t`, then the insertion.
                        self.meter.charge(2)?;
                        let t = self.eval_body(&c.body);
                        self.meter.charge(1)?;
                        match t {
                            Ok(t) => out.insert_new(self.local(slot), t)?,
                            Err(e) => fold_error(&mut error, e)?,
                        }
                    } else {
                        let t = self.eval_body(&c.body);
                        if let Err(e) = &t {
                            if e.is_cancelled() {
                                return t;
                            }
                        }
                        self.meter.charge(2)?;
                        match t {
                            _ if error.is_some() => {}
                            Ok(Value::Map(entry)) => {
                                for (k, v) in entry.entries() {
                                    let shown = k.clone();
                                    if out.insert_new(k, v).is_err() {
                                        error.get_or_insert_with(|| {
                                            EvalError::new(format!(
                                                "insert failed: key {} already exists",
                                                shown.debug_string()
                                            ))
                                        });
                                        break;
                                    }
                                }
                            }
                            Ok(_) => fold_error(&mut error, EvalError::no_such_overload())?,
                            Err(e) => fold_error(&mut error, e)?,
                        }
                    }
                }
                self.meter.charge(1)?;
                if let Some(e) = error {
                    return Err(e);
                }
                self.meter.alloc(out.len() as u64 * 2 * VALUE_BYTES)?;
                Ok(Value::Map(super::value::Map::Owned(Arc::new(out))))
            }
            OptMap | OptFlatMap | SortBy => Err(EvalError::no_such_overload()),
        }
    }

    /// Stores one step's iteration variables in their slots, from `slot`.
    #[inline]
    fn bind<B: Bind<'a>>(&mut self, item: B, slot: usize) {
        item.bind(self.locals.get_mut(slot..).unwrap_or_default());
    }

    /// Local slot `i` read as an attribute ([`attribute_value`]) without moving it through
    /// that function: only a nested optional needs more than a clone.
    #[inline(always)]
    fn local_attribute(&self, i: usize) -> Value<'a> {
        match &self.locals[i] {
            Value::Optional(Some(inner)) if matches!(**inner, Value::Optional(_)) => {
                Value::optional(Some(strip_optionals(inner)))
            }
            v => v.clone(),
        }
    }

    /// The value in local slot `i`.
    fn local(&self, i: usize) -> Value<'a> {
        self.locals.get(i).cloned().unwrap_or(Value::Null)
    }

    /// [`Evaluator::passes`] in a fold that goes on after an error: a filter that failed
    /// keeps its error for the result (the first one wins) and skips the step.
    fn filtered_in(
        &mut self,
        filter: Option<&Node>,
        error: &mut Option<EvalError>,
    ) -> Result<bool, EvalError> {
        match self.passes(filter) {
            Ok(pass) => Ok(pass),
            Err(e) => {
                fold_error(error, e)?;
                Ok(false)
            }
        }
    }

    /// Whether the step passes a comprehension's filter (three-argument `map`, the `transform`
    /// macros): a rejected step costs nothing more.
    fn passes(&mut self, filter: Option<&Node>) -> Result<bool, EvalError> {
        let Some(f) = filter else {
            return Ok(true);
        };
        match self.eval(f)? {
            Value::Bool(true) => Ok(true),
            // The `@result` branch, charged nothing (see exists_one).
            Value::Bool(false) => Ok(false),
            _ => Err(EvalError::no_such_overload()),
        }
    }

    /// `all` and `exists` with cel-go's error absorption: a deciding element wins over errors
    /// from others; otherwise the first error is the result.
    fn quantify<B: Bind<'a>>(
        &mut self,
        c: &Comprehension,
        items: impl ExactSizeIterator<Item = B>,
        exists: bool,
        slot: usize,
    ) -> R<'a> {
        // all: cond `@not_strictly_false(@result)` (2), step `@result && p` (1 + p);
        // exists: cond `@not_strictly_false(!@result)` (3), step `@result || p` (1 + p).
        let cond_cost = if exists { 3 } else { 2 };
        let mut error: Option<EvalError> = None;
        let last = items.len().saturating_sub(1);
        let mut deadline = Ticker::new(self.meter.deadline, DEADLINE_EVERY);
        for (i, item) in items.into_iter().enumerate() {
            deadline.tick()?;
            self.meter.charge_units(cond_cost + 1)?;
            self.bind(item, slot);
            match self.eval_body(&c.body) {
                Ok(Value::Bool(b)) if b == exists => {
                    // The next element's condition check stops the loop; then `@result`.
                    let stop = if i < last { cond_cost } else { 0 };
                    self.meter.charge_units(stop + 1)?;
                    return Ok(Value::Bool(exists));
                }
                Ok(Value::Bool(_)) => {}
                Err(e) if e.is_cancelled() => return Err(e),
                Err(e) => {
                    error.get_or_insert(e);
                }
                Ok(_) => {
                    error.get_or_insert_with(EvalError::no_such_overload);
                }
            }
        }
        self.meter.charge(1)?;
        match error {
            Some(e) => Err(e),
            None => Ok(Value::Bool(!exists)),
        }
    }

    /// `optMap` and `optFlatMap` on `range`, whose evaluation cost `spent`, as cel-go's
    /// expansion `t.hasValue() ? optional.of(<fold binding x to t.value()>) : optional.none()`
    /// (`optFlatMap` without the `optional.of`): the fold evaluates its accumulator, the
    /// target a second time and `value()`, only if the body reads the variable; the result
    /// is read through the conditional's relative attribute (see [`attribute_value`]).
    fn opt_map(&mut self, c: &Comprehension, range: Value<'a>, spent: u64) -> R<'a> {
        let Value::Optional(opt) = range else {
            return Err(EvalError::no_such_overload());
        };
        self.meter.charge(1)?;
        let Some(inner) = opt else {
            self.meter.charge(1)?;
            return Ok(Value::Optional(None));
        };
        if c.reads_var {
            self.meter.charge(1)?;
            self.meter.charge(spent)?;
        }
        let t = match self.with_vars((*inner).clone(), None, &c.body) {
            Ok(t) => t,
            // `optional.of` is charged with the failed fold as its argument.
            Err(e) if c.kind == MacroKind::OptMap && !e.is_cancelled() => {
                self.meter.charge(1)?;
                return Err(e);
            }
            Err(e) => return Err(e),
        };
        if c.kind == MacroKind::OptFlatMap {
            return match t {
                Value::Optional(_) => Ok(attribute_value(t)),
                _ => Err(EvalError::no_such_overload()),
            };
        }
        self.meter.charge(1)?;
        Ok(attribute_value(Value::optional(Some(t))))
    }

    fn sort_by(&mut self, c: &Comprehension, range: Value<'a>) -> R<'a> {
        let Value::List(l) = &range else {
            return Err(EvalError::no_such_overload());
        };
        // Keys and items, counted before they are copied (the list may be a view of any
        // size); the cost then bounds the rest.
        self.meter
            .alloc((l.len() as u64).saturating_mul(2 * VALUE_BYTES))?;
        let items = l.to_vec();
        let mut keys = Vec::with_capacity(items.len());
        let mut deadline = Ticker::new(self.meter.deadline, DEADLINE_EVERY);
        for item in &items {
            deadline.tick()?;
            keys.push(self.with_vars(item.clone(), None, &c.body)?);
            self.meter.charge(12)?;
        }
        self.meter.charge(sort_cost(items.len() as u64))?;
        sort_by_keys(items, keys)
    }
}

/// The iteration variables of one step of a comprehension.
trait Bind<'a> {
    /// Stores them in their slots, from the first of `slots`.
    fn bind(self, slots: &mut [Value<'a>]);
}

/// One variable.
impl<'a> Bind<'a> for Value<'a> {
    #[inline]
    fn bind(self, slots: &mut [Value<'a>]) {
        if let Some(s) = slots.first_mut() {
            *s = self;
        }
    }
}

/// One variable, or two.
impl<'a> Bind<'a> for (Value<'a>, Option<Value<'a>>) {
    #[inline]
    fn bind(self, slots: &mut [Value<'a>]) {
        let (v1, v2) = self;
        v1.bind(slots);
        if let (Some(v), Some(rest)) = (v2, slots.get_mut(1..)) {
            v.bind(rest);
        }
    }
}

/// cel-go's error for a comprehension over a value that is not a list or map, naming the
/// value's Go type (`got 'types.Int', expected iterable type`).
#[cold]
fn not_iterable(v: &Value<'_>) -> EvalError {
    match go_type_name(v) {
        Some(go_type) => EvalError::new(format!("got '{go_type}', expected iterable type")),
        None => EvalError::no_such_overload(),
    }
}

/// The Go type of cel-go's value for `v` (its `%T`), for the scalar kinds.
fn go_type_name(v: &Value<'_>) -> Option<&'static str> {
    Some(match v {
        Value::Null => "types.Null",
        Value::Bool(_) => "types.Bool",
        Value::Int(_) => "types.Int",
        Value::Uint(_) => "types.Uint",
        Value::Double(_) => "types.Double",
        Value::String(_) => "types.String",
        Value::Bytes(_) => "types.Bytes",
        Value::Timestamp(_) => "types.Timestamp",
        Value::Duration(_) => "types.Duration",
        Value::Optional(_) => "*types.Optional",
        _ => return None,
    })
}

/// Keeps the first error of a fold that goes on after it; a cancellation stops the fold.
#[cold]
fn fold_error(first: &mut Option<EvalError>, e: EvalError) -> Result<(), EvalError> {
    if e.is_cancelled() {
        return Err(e);
    }
    first.get_or_insert(e);
    Ok(())
}

/// How many comprehension iterations run between two looks at the clock (cel-go's interrupt
/// check frequency).
const DEADLINE_EVERY: u32 = 100;

/// `v.field`: map lookup by key; `no such key` when absent or when `v` is not a map.
/// `select`, where `optional` says the result is optional and `explicit` that this is a
/// `.?` selection rather than a plain one made optional by the chain before it.
#[inline]
fn select_in<'a>(v: Value<'a>, field: &Key, optional: bool, explicit: bool) -> R<'a> {
    let found = match &v {
        Value::Map(m) => m.get_key(field),
        // Optional chaining is viral: any selection on an optional is an optional selection.
        Value::Optional(None) => return Ok(Value::Optional(None)),
        Value::Optional(Some(inner)) => return select_in((**inner).clone(), field, true, explicit),
        // A `.?` selection finds nothing on null or a scalar (cel-go's presence test); a
        // plain one fails there, optional chain or not.
        // A field of a list is a string index into it, for plain and `.?` selections.
        Value::List(_) => return Err(unsupported_list_index()),
        // `JSONPatch{...}.op`: the patch type's own fields.
        Value::Opaque(o) => match super::mutation::patch_field_value(o.as_ref(), field.as_str()) {
            Some(x) => Some(x),
            None if explicit => return Ok(Value::Optional(None)),
            None => return Err(EvalError::no_such_key(field)),
        },
        _ if explicit => return Ok(Value::Optional(None)),
        _ => return Err(EvalError::no_such_key(field)),
    };
    match (found, optional) {
        (Some(x), false) => Ok(x),
        (Some(x), true) => Ok(Value::optional(Some(x))),
        (None, true) => Ok(Value::Optional(None)),
        (None, false) => Err(EvalError::no_such_key(field)),
    }
}

fn has(v: &Value<'_>, field: &Key) -> R<'static> {
    match v {
        Value::Map(m) => Ok(Value::Bool(m.get_key(field).is_some())),
        Value::Optional(None) => Ok(Value::Bool(false)),
        Value::Optional(Some(inner)) => has(inner, field),
        Value::List(_) => Err(unsupported_list_index()),
        // cel-go's presence test finds nothing on a scalar or null.
        _ => Ok(Value::Bool(false)),
    }
}

/// A field name used on a list, by `has()` or an optional selection.
fn unsupported_list_index() -> EvalError {
    EvalError::new("unsupported index type 'string' in list")
}

/// `v[k]` on lists (integral index of any numeric kind) and maps (CEL key equality).
fn index_value<'a>(v: Value<'a>, k: &Value<'_>, optional: bool) -> R<'a> {
    match &v {
        Value::Optional(None) => Ok(Value::Optional(None)),
        Value::Optional(Some(inner)) => index_value((**inner).clone(), k, true),
        Value::List(l) => {
            let i = match k {
                Value::Int(i) => *i,
                Value::Uint(u) => match i64::try_from(*u) {
                    Ok(i) => i,
                    Err(_) => return Err(unsupported_index_value(k)),
                },
                // Whole and within int64 (2^63 itself is not: `as` would saturate to it).
                Value::Double(d)
                    if d.fract() == 0.0
                        && *d >= -9.223372036854776e18
                        && *d < 9.223372036854776e18 =>
                {
                    *d as i64
                }
                Value::Double(_) => return Err(unsupported_index_value(k)),
                other => {
                    return Err(EvalError::new(format!(
                        "unsupported index type '{}' in list",
                        other.type_name()
                    )))
                }
            };
            let got = if i < 0 { None } else { l.get(i as usize) };
            match (got, optional) {
                (Some(x), false) => Ok(x),
                (Some(x), true) => Ok(Value::optional(Some(x))),
                (None, true) => Ok(Value::Optional(None)),
                (None, false) => Err(EvalError::new(format!("index out of bounds: {i}"))),
            }
        }
        Value::Map(m) => {
            if !matches!(
                k,
                Value::String(_)
                    | Value::Int(_)
                    | Value::Uint(_)
                    | Value::Bool(_)
                    | Value::Double(_)
            ) {
                return Err(EvalError::no_such_overload());
            }
            match (m.get(k), optional) {
                (Some(x), false) => Ok(x),
                (Some(x), true) => Ok(Value::optional(Some(x))),
                (None, true) => Ok(Value::Optional(None)),
                (None, false) => Err(EvalError::no_such_key(k.debug_string())),
            }
        }
        // cel-go's `refQualify` (interpreter/attributes.go) on anything that is neither a
        // list, a map nor a message: a presence test (`[?k]`, or any index in an optional
        // chain) finds nothing, whatever the index; a plain index is a missing key.
        _ if optional && !is_message(&v) => Ok(Value::Optional(None)),
        _ => Err(EvalError::no_such_key(k.debug_string())),
    }
}

/// A message value (cel-go's `traits.Indexer`, which `refQualify` asks for the field).
fn is_message(v: &Value<'_>) -> bool {
    super::mutation::object_view(v).is_some() || super::mutation::json_patch_view(v).is_some()
}

/// cel-go's `IndexOrError` for a number that is no int64 (`%v` of the value).
#[cold]
fn unsupported_index_value(k: &Value<'_>) -> EvalError {
    EvalError::new(format!(
        "unsupported index value {} in list",
        k.debug_string()
    ))
}

#[allow(dead_code)]
fn _assert_send_sync() {
    fn check<T: Send + Sync>() {}
    check::<Node>();
    check::<List<'static>>();
}

/// A value as cel-go reads it through an attribute (a variable, a conditional's branch):
/// an optional base is unwrapped to its Go value, which strips every optional inside it (a
/// none inside becoming null), and wrapped once again. So `optional.of(optional.of(1))`
/// read that way is `optional.of(1)`.
#[inline]
fn attribute_value(v: Value<'_>) -> Value<'_> {
    match v {
        Value::Optional(Some(inner)) if matches!(*inner, Value::Optional(_)) => {
            Value::optional(Some(strip_optionals(&inner)))
        }
        v => v,
    }
}

fn strip_optionals<'a>(v: &Value<'a>) -> Value<'a> {
    match v {
        Value::Optional(Some(x)) => strip_optionals(x),
        Value::Optional(None) => Value::Null,
        v => v.clone(),
    }
}
