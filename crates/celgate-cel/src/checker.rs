//! The checker and planner: one pass over the parsed tree that resolves names (variables,
//! comprehension variables, qualified names, namespaced functions), type-checks calls against
//! the function table of the environment's version, validates constant regexes, durations and
//! timestamps, folds constants as cel-go's `OptOptimize` does, and emits the [`Node`] tree.

use std::cell::{Cell as Flag, RefCell};
use std::fmt;
use std::sync::Arc;

use super::ast::{Comprehension, Expr, ExprKind, FieldInit, Literal, MacroKind};
use super::env::{Env, VarKind, VARIABLES_TYPE};
use super::error::{issue_at, CompileError, Issue};
use super::eval::{Callee, Comprehension as CNode, Evaluator, Node, RegexOp};
use super::json::Key;
use super::library::functions as table;
use super::meter::Meter;
use super::overload::{since, Function, Overload};
use super::types::{join, Bindings, ObjectType, Type, FREE, UNSET};
use super::value::{Map, OwnedMap, Value};

pub(crate) struct Checker<'e> {
    env: &'e Env,
    src: &'e str,
    locals: Vec<(String, Type)>,
    /// The type checker's issues. cel-go keeps checking after an error (the failed node
    /// gets its error type, which accepts anything) and reports every issue, so does this.
    issues: RefCell<Vec<Issue>>,
    /// Issues of the AST validators Kubernetes installs (duration, timestamp and regex
    /// literals, homogeneous aggregate literals): cel-go runs them only on an expression
    /// that checked cleanly.
    late: RefCell<Vec<Issue>>,
    /// The first failure of folding a constant, which cel-go meets when it creates the
    /// program: only after the check and the validators passed.
    program: RefCell<Option<CompileError>>,
    /// Whether a checked node has cel-go v0.22.0's nil type ([`UNSET`]): the checked AST then
    /// holds a type `cel.AstToCheckedExpr` cannot convert, which Kubernetes calls after a
    /// clean compile and before it creates the program.
    unset_typed: Flag<bool>,
    /// How many `format` calls the expression being checked is inside: their list and map
    /// literals, at any depth, are exempt from the homogeneous literal rule (Kubernetes
    /// configures `format` as an exempt function of that validator).
    in_format: u32,
    /// The type of every node checked inside a `format` call whose format string and
    /// argument list are literals, by the node's address, for the format validator.
    format_types: std::collections::HashMap<usize, Type>,
    /// The type of every checked node by its address, when asked for (static cost
    /// estimation needs each node's type); `None` otherwise, so compiling pays nothing.
    node_types: Option<std::collections::HashMap<usize, Type>>,
}

/// A type as cel-go's checker writes it in messages (`FormatCELType`): `duration`,
/// `timestamp` and `null` rather than the names `type()` gives them.
struct Cel<'a>(&'a Type);

impl fmt::Display for Cel<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_cel(self.0, None, f)
    }
}

/// [`Cel`] where free type variables show, numbered in order as cel-go names them in a
/// message (`map(_var0, _var1)` for `{}`).
struct TypeVars<'a>(&'a Type);

impl fmt::Display for TypeVars<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_cel(self.0, Some(&mut 0), f)
    }
}

/// Writes `t` as cel-go's `FormatCELType`; free variables as `_varN` when `vars` counts
/// them, as `dyn` otherwise.
fn write_cel(t: &Type, mut vars: Option<&mut usize>, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    match t {
        Type::Null => f.write_str("null"),
        Type::Timestamp => f.write_str("timestamp"),
        Type::Duration => f.write_str("duration"),
        Type::Param(_) if vars.is_some() => {
            let n = vars.map_or(0, |next| {
                *next += 1;
                *next - 1
            });
            write!(f, "_var{n}")
        }
        Type::List(e) => {
            f.write_str("list(")?;
            write_cel(e, vars, f)?;
            f.write_str(")")
        }
        Type::Map(k, v) => {
            f.write_str("map(")?;
            write_cel(k, vars.as_deref_mut(), f)?;
            f.write_str(", ")?;
            write_cel(v, vars, f)?;
            f.write_str(")")
        }
        Type::TypeOf(e) => {
            f.write_str("type(")?;
            write_cel(e, vars, f)?;
            f.write_str(")")
        }
        Type::Optional(e) => {
            f.write_str("optional_type(")?;
            write_cel(e, vars, f)?;
            f.write_str(")")
        }
        other => write!(f, "{other}"),
    }
}

type Checked = Result<(Node, Type), CompileError>;

/// Conversions cel-go binds per overload, with a runtime guard on the argument's type, where
/// celgate has one implementation for the family (see [`Callee::Guarded`]).
const GUARDED_CONVERSIONS: &[&str] = &[
    "int",
    "uint",
    "double",
    "string",
    "bytes",
    "bool",
    "duration",
    "timestamp",
];

/// Type names an expression may use as values (`type(x) == int`).
const TYPE_NAMES: &[(&str, &str)] = &[
    ("int", "int"),
    ("uint", "uint"),
    ("double", "double"),
    ("bool", "bool"),
    ("string", "string"),
    ("bytes", "bytes"),
    ("list", "list"),
    ("map", "map"),
    ("null_type", "null_type"),
    ("type", "type"),
    ("optional_type", "optional_type"),
    ("google.protobuf.Timestamp", "google.protobuf.Timestamp"),
    ("google.protobuf.Duration", "google.protobuf.Duration"),
    // Registered as an object type (common/types/provider.go `registerAllTypes`), unlike the
    // checked well-known types it skips.
    (super::wellknown::EMPTY, super::wellknown::EMPTY),
];

fn type_for_name(name: &str) -> Option<Type> {
    Some(match name {
        "int" => Type::Int,
        "uint" => Type::Uint,
        "double" => Type::Double,
        "bool" => Type::Bool,
        "string" => Type::String,
        "bytes" => Type::Bytes,
        "list" => Type::list(Type::Dyn),
        "map" => Type::map(Type::Dyn, Type::Dyn),
        "null_type" => Type::Null,
        "type" => Type::TypeOf(Box::new(Type::Dyn)),
        "dyn" => Type::Dyn,
        // cel-go declares the name with the unparameterised optional type: `optional_type`
        // has type `type(optional_type)`.
        "optional_type" => Type::Opaque("optional_type"),
        "google.protobuf.Timestamp" => Type::Timestamp,
        "google.protobuf.Duration" => Type::Duration,
        super::wellknown::EMPTY => super::wellknown::empty_type(),
        _ => return None,
    })
}

/// The segments of `a.b.c` when the expression is an identifier with plain selections.
fn dotted(e: &Expr) -> Option<Vec<&str>> {
    dotted_nodes(e).map(|v| v.into_iter().map(|(s, _)| s).collect())
}

/// The segments of `a.b.c` with the node each one ends (the identifier, then each
/// selection), for errors that point at one selection of a qualified name.
fn dotted_nodes(e: &Expr) -> Option<Vec<(&str, &Expr)>> {
    let mut parts = Vec::new();
    let mut cur = e;
    loop {
        match &cur.kind {
            ExprKind::Ident(n) => {
                parts.push((n.as_str(), cur));
                parts.reverse();
                return Some(parts);
            }
            ExprKind::Select {
                operand,
                field,
                optional: false,
            } => {
                parts.push((field.as_str(), cur));
                cur = operand;
            }
            _ => return None,
        }
    }
}

/// Conversions cel-go folds when their argument is constant.
const FOLDABLE: &[&str] = &[
    "int",
    "uint",
    "double",
    "string",
    "bytes",
    "bool",
    "duration",
    "timestamp",
    "dyn",
    "type",
];

/// Constructors of immutable library values that cel-go calls at every evaluation (no
/// `OptOptimize` folding), whose result on constant arguments celgate keeps from compile
/// time ([`Node::Kept`]) while still charging each evaluation what the call costs.
const KEPT_CALLS: &[&str] = &["quantity", "ip", "cidr", "semver", "url"];

/// A [`KEPT_CALLS`] call on constant arguments as [`Node::Kept`]: its result and its cost,
/// taken from one evaluation now. Anything but a plain success that costs cel-go's units
/// alone (an error, memory or a regex built, a call charged by a rule other than its
/// statically resolved overload's) keeps the call, so it fails or is charged at run time
/// exactly as before.
fn keep_result(node: Node) -> Node {
    let Node::Call {
        imp: Callee::Static(_),
        args,
        ..
    } = &node
    else {
        return node;
    };
    if !args.iter().all(|n| matches!(n, Node::Const(_))) {
        return node;
    }
    let empty: Vec<Value<'static>> = Vec::new();
    let mut meter = Meter::default();
    let result = Evaluator::new(&empty, &mut meter).eval(&node);
    match result {
        Ok(v) if meter.memory == 0 && meter.regexes_compiled == 0 => Node::Kept {
            value: detach(v),
            cost: meter.cost,
        },
        _ => node,
    }
}

impl<'e> Checker<'e> {
    pub fn new(env: &'e Env, src: &'e str) -> Self {
        Checker {
            env,
            src,
            locals: Vec::new(),
            issues: RefCell::default(),
            late: RefCell::default(),
            program: RefCell::default(),
            unset_typed: Flag::new(false),
            in_format: 0,
            format_types: std::collections::HashMap::new(),
            node_types: None,
        }
    }

    /// Records the type of every node checked from now on ([`Checker::take_node_types`]).
    pub fn record_node_types(&mut self) {
        self.node_types = Some(std::collections::HashMap::new());
    }

    /// The recorded node types, by node address.
    pub fn take_node_types(&mut self) -> std::collections::HashMap<usize, Type> {
        self.node_types.take().unwrap_or_default()
    }

    fn record(&mut self, e: &Expr, ty: &Type) {
        if let Some(types) = &mut self.node_types {
            types.insert(e as *const Expr as usize, ty.settled());
        }
    }

    /// Checks a whole expression and reports as cel-go does: every type-check issue; else
    /// every validator issue; else the first constant that fails to fold.
    pub fn check_expr(&mut self, e: &Expr) -> Checked {
        let result = self.check(e);
        let issues = self.issues.take();
        if !issues.is_empty() {
            return Err(CompileError::from_issues(self.src, issues));
        }
        let result = result?;
        let late = self.late.take();
        if !late.is_empty() {
            return Err(CompileError::from_issues(self.src, late));
        }
        // cel-go's `AstToCheckedExpr` (`common/types/pb/type.go`, `TypeToExprType`) has no
        // protobuf form for a nil type; Kubernetes calls it before `Program()`.
        if self.unset_typed.take() {
            return Err(CompileError::general(
                self.src,
                "missing type conversion to proto: ",
            ));
        }
        if let Some(err) = self.program.take() {
            return Err(err);
        }
        let (node, ty) = result;
        Ok((node, ty.settled()))
    }

    /// [`Checker::check_expr`] without creating the program: every type-check issue, else
    /// every validator issue, and otherwise the result type. A constant that fails to fold is
    /// not an error here, as cel-go meets it only in `Program()`, which Kubernetes' type
    /// checking of policies (`typechecking.go`) never calls.
    pub fn check_only(&mut self, e: &Expr) -> Result<Type, CompileError> {
        let result = self.check(e);
        let issues = self.issues.take();
        if !issues.is_empty() {
            return Err(CompileError::from_issues(self.src, issues));
        }
        let (_, ty) = result?;
        let late = self.late.take();
        if !late.is_empty() {
            return Err(CompileError::from_issues(self.src, late));
        }
        Ok(ty.settled())
    }

    /// Whether the AST validators Kubernetes installs run (regex literals, `string.format`
    /// calls, homogeneous literals): they come as one set with the homogeneous literal rule,
    /// which plain CEL (the cel-spec suite) turns off with them.
    fn k8s_validators(&self) -> bool {
        self.env.homogeneous_literals
    }

    /// Whether `name` is an object type of a declared variable (`kubernetes.Namespace`).
    fn declared_object(&self, name: &str) -> bool {
        fn holds(t: &Type, name: &str, depth: u32) -> bool {
            if depth > 16 {
                return false;
            }
            match t {
                Type::Object(o) => {
                    o.name == name || o.fields.iter().any(|(_, f)| holds(f, name, depth + 1))
                }
                Type::List(e) | Type::Optional(e) | Type::TypeOf(e) => holds(e, name, depth + 1),
                Type::Map(k, v) => holds(k, name, depth + 1) || holds(v, name, depth + 1),
                _ => false,
            }
        }
        self.env.variables().iter().any(|v| holds(&v.ty, name, 0))
    }

    /// Records a type-check issue at `e` and goes on.
    fn issue(&self, e: &Expr, msg: impl Into<String>) {
        self.issue_at(e.pos as usize, msg);
    }

    /// Records a type-check issue at a byte offset of the source and goes on.
    fn issue_at(&self, offset: usize, msg: impl Into<String>) {
        self.issues
            .borrow_mut()
            .push(issue_at(self.src, offset, msg));
    }

    /// Records a validator issue at `e`.
    fn late_issue(&self, e: &Expr, msg: impl Into<String>) {
        self.late
            .borrow_mut()
            .push(issue_at(self.src, e.pos as usize, msg));
    }

    /// Records the failure to fold a constant (the first one is reported).
    fn program_error(&self, msg: impl Into<String>) {
        let mut slot = self.program.borrow_mut();
        if slot.is_none() {
            *slot = Some(CompileError::general(self.src, msg));
        }
    }

    fn err(&self, e: &Expr, msg: impl Into<String>) -> CompileError {
        CompileError::at(self.src, e.pos as usize, msg)
    }

    fn is_local(&self, name: &str) -> bool {
        self.locals.iter().any(|(n, _)| n == name)
    }

    fn function(&self, name: &str) -> Option<&'static Function> {
        let f = table().get(name)?;
        f.overloads.iter().any(|o| self.offered(o)).then_some(f)
    }

    /// Whether the environment offers overload `o`: introduced at or before its version, or
    /// one of the patch types' library when those are declared.
    fn offered(&self, o: &Overload) -> bool {
        o.since <= self.env.version || (o.since == since::PATCH_TYPES && self.env.has_patch_types())
    }

    /// Checks `e`. A failure is recorded and the node becomes an error node of type `dyn`
    /// (cel-go's error type, which accepts anything), so that checking goes on around it.
    pub fn check(&mut self, e: &Expr) -> Checked {
        match self.check_operand(e)? {
            // A free variable at the top of a type is `dyn` to whatever uses the value (a
            // comprehension's range, a condition, an index); only a call's operand (see
            // [`Checker::check_operand`]), or a list, map or optional type around it, waits
            // for what it meets.
            (node, Type::Param(_)) => Ok((node, Type::Dyn)),
            checked => Ok(checked),
        }
    }

    /// [`Checker::check`] for an operand of a function call: a free type variable at the top
    /// stays free, for the first overload that matches to bind, as cel-go's checker binds
    /// it (`v + dyn(x)` with `v` free is `bytes`, its first overload).
    fn check_operand(&mut self, e: &Expr) -> Checked {
        let checked = match self.check_node(e) {
            Ok(checked) => checked,
            Err(err) => {
                let message = err.message().to_string();
                self.issues.borrow_mut().extend(err.issues);
                (Node::Fail(message.into()), Type::Dyn)
            }
        };
        if self.in_format > 0 {
            self.format_types
                .insert(e as *const Expr as usize, checked.1.settled());
        }
        self.record(e, &checked.1);
        Ok(checked)
    }

    fn check_node(&mut self, e: &Expr) -> Checked {
        match &e.kind {
            ExprKind::Literal(l) => Ok(literal(l)),
            ExprKind::Ident(name) => self.ident(e, name),
            ExprKind::Select {
                operand,
                field,
                optional,
            } => {
                if !optional {
                    if let Some(resolved) = self.qualified(e)? {
                        return Ok(resolved);
                    }
                }
                let (node, ty) = self.check(operand)?;
                self.select(e, node, ty, field, *optional)
            }
            ExprKind::Has { operand, field } => {
                // `has(variables.x)`: a field of the composited variables.
                if let ExprKind::Ident(name) = &operand.kind {
                    if let Some((_, var)) = self.env.variable(name) {
                        if let (VarKind::Lazy(fields), false) = (&var.kind, self.is_local(name)) {
                            return match fields.position(field) {
                                Some(index) => Ok((Node::LazyPresent(index), Type::Bool)),
                                None => Err(self.err(e, format!("undefined field '{field}'"))),
                            };
                        }
                    }
                }
                let (node, ty) = self.check(operand)?;
                match &ty {
                    Type::Object(o)
                        if o.field(field).is_none() && self.patch_field(o, field).is_none() =>
                    {
                        return Err(self.err(e, format!("undefined field '{field}'")));
                    }
                    Type::Object(_) | Type::Map(..) | Type::Dyn | Type::Optional(_) => {}
                    other if self.env.check_types => {
                        return Err(self.err(
                            e,
                            format!("invalid type for field selection: {}", Cel(other)),
                        ));
                    }
                    _ => {}
                }
                Ok((
                    Node::Has {
                        operand: Box::new(node),
                        field: Key::new(field.as_str()),
                    },
                    Type::Bool,
                ))
            }
            ExprKind::Index {
                operand,
                index,
                optional,
            } => {
                let (on, ot) = self.check(operand)?;
                let (inode, it) = self.check(index)?;
                let elem = self.index_type(e, &ot, &it, *optional)?;
                Ok((
                    Node::Index {
                        cost: Node::qualifier_cost(&on, Some(&inode)),
                        operand: Box::new(on),
                        index: Box::new(inode),
                        optional: *optional,
                    },
                    elem,
                ))
            }
            ExprKind::Call { func, target, args } => self.call(e, func, target.as_deref(), args),
            ExprKind::List { elements, optional } => {
                let exempt = self.in_format > 0;
                self.list(e, elements, optional, exempt)
            }
            ExprKind::Map { entries } => {
                let mut nodes = Vec::with_capacity(entries.len());
                let (mut kt, mut vt): (Option<Type>, Option<Type>) = (None, None);
                // The checker's own types (what the map is to whatever uses it), apart from
                // the validator's first-entry types it compares with.
                let (mut kj, mut vj): (Option<Type>, Option<Type>) = (None, None);
                let mut mismatched = (false, false);
                for entry in entries {
                    let (kn, k) = self.check(&entry.key)?;
                    let (vn, mut v) = self.check(&entry.value)?;
                    if entry.optional {
                        v = self.unwrap_optional(&entry.value, v);
                    }
                    if self.in_format > 0 {
                        kt = Some(join(kt.as_ref().unwrap_or(&k), &k).unwrap_or(Type::Dyn));
                        vt = Some(join(vt.as_ref().unwrap_or(&v), &v).unwrap_or(Type::Dyn));
                        nodes.push((kn, vn, entry.optional));
                        continue;
                    }
                    // cel-go's validator compares every key and every value with the first
                    // entry's, and reports each that differs.
                    kj = Some(join(kj.as_ref().unwrap_or(&k), &k).unwrap_or(Type::Dyn));
                    kt = Some(match self.homogeneous(&entry.key, kt.clone(), k) {
                        Ok(t) => t,
                        Err(first) => {
                            mismatched.0 = true;
                            first
                        }
                    });
                    if !(entry.optional && is_optional_none(&entry.value)) {
                        vj = Some(join(vj.as_ref().unwrap_or(&v), &v).unwrap_or(Type::Dyn));
                        vt = Some(match self.homogeneous(&entry.value, vt.clone(), v) {
                            Ok(t) => t,
                            Err(first) => {
                                mismatched.1 = true;
                                first
                            }
                        });
                    }
                    nodes.push((kn, vn, entry.optional));
                }
                // After a mismatch the validator's issue stands; whatever uses the map sees
                // the checker's type (`dyn` elements), as in cel-go.
                let kt = if mismatched.0 { kj } else { kt };
                let vt = if mismatched.1 { vj } else { vt };
                let ty = Type::map(kt.unwrap_or(FREE), vt.unwrap_or(FREE));
                let node = Node::Map {
                    entries: nodes.into_boxed_slice(),
                };
                Ok((self.fold(e, node)?, ty))
            }
            ExprKind::Struct { type_name, fields } => self.message(e, type_name, fields),
            ExprKind::Comprehension(c) => self.comprehension(e, c),
        }
    }

    /// A message construction. Only the declared object types (the request's and
    /// `namespaceObject`'s) are message types here: their fields are checked as cel-go checks
    /// them; building one fails at run time, as Kubernetes' type provider creates no values.
    fn message(&mut self, e: &Expr, type_name: &str, fields: &[FieldInit]) -> Checked {
        if let Some(ty) = self.patch_type(type_name) {
            return self.patch_message(type_name, ty, fields);
        }
        if let Some(ty) = super::wellknown::message_type(type_name) {
            return self.well_known_message(type_name, ty, fields);
        }
        let Some(object) = self.object_type(type_name) else {
            // cel-go's `checkCreateStruct` (checker/checker.go) resolves the name as an
            // identifier: a variable is found, and its type, not being a type of types, is
            // `not a type` (`dyn` for the schemaless variables).
            if let Some((_, var)) = self.env.variable(type_name) {
                let shown = match &var.ty {
                    Type::Object(o) => o.name.to_string(),
                    other => Cel(other).to_string(),
                };
                return Err(self.err(e, format!("'{shown}' is not a type")));
            }
            return Err(self.err(
                e,
                format!("undeclared reference to '{type_name}' (in container '')"),
            ));
        };
        let mut nodes = Vec::with_capacity(fields.len());
        for f in fields {
            let (node, mut vt) = self.check_operand(&f.value)?;
            nodes.push((f.name.as_str().into(), node, f.optional));
            if f.optional {
                vt = self.unwrap_optional(&f.value, vt);
            }
            let message = match object.field(&f.name) {
                None => format!("undefined field '{}'", f.name),
                Some(ft) if !Bindings::default().accepts(ft, &vt) => format!(
                    "expected type of field '{}' is '{}' but provided type is '{}'",
                    f.name,
                    Cel(ft),
                    TypeVars(&vt)
                ),
                Some(_) => continue,
            };
            self.issue_at(f.pos as usize, message);
        }
        // Built as cel-go's `evalObj` builds it (fields evaluated and the creation charged),
        // then refused by the type provider.
        let node = Node::Struct {
            type_name: super::mutation::intern(type_name),
            fields: nodes.into_boxed_slice(),
        };
        Ok((node, Type::Object(object)))
    }

    /// A well-known protobuf message's construction (`google.protobuf.Int64Value{value: 1}`):
    /// typed by its sanitized type, each field checked against the message of that kind
    /// (cel-go's `checkCreateStruct` and `lookupFieldType`, checker/checker.go).
    fn well_known_message(&mut self, type_name: &str, ty: Type, fields: &[FieldInit]) -> Checked {
        let mut nodes = Vec::with_capacity(fields.len());
        for f in fields {
            let (node, mut vt) = self.check_operand(&f.value)?;
            if f.optional {
                vt = self.unwrap_optional(&f.value, vt);
            }
            let message = match super::wellknown::field_type(&ty, &f.name) {
                None => Some(format!("undefined field '{}'", f.name)),
                Some(ft) if !Bindings::default().accepts(&ft, &vt) => Some(format!(
                    "expected type of field '{}' is '{}' but provided type is '{}'",
                    f.name,
                    Cel(&ft),
                    TypeVars(&vt)
                )),
                Some(_) => None,
            };
            if let Some(message) = message {
                self.issue_at(f.pos as usize, message);
            }
            nodes.push((f.name.as_str().into(), node, f.optional));
        }
        let node = Node::Struct {
            type_name: super::mutation::intern(type_name),
            fields: nodes.into_boxed_slice(),
        };
        Ok((node, ty))
    }

    /// The patch type `name` names, in an environment that declares them.
    fn patch_type(&self, name: &str) -> Option<Type> {
        if !self.env.has_patch_types() {
            return None;
        }
        super::mutation::patch_type(name)
    }

    /// The type of `field` of `o` when `o` is a patch type (`Some(None)`: a JSONPatch field
    /// found without a type); `None` for another object type.
    fn patch_field(&self, o: &ObjectType, field: &str) -> Option<Option<Type>> {
        if !self.env.has_patch_types() {
            return None;
        }
        super::mutation::patch_field(&o.name, field)
    }

    /// A patch type's construction (`Object.spec{...}`, `JSONPatch{...}`): each field's
    /// value must be assignable to the field's type (`dyn` for every `Object` field); a
    /// JSONPatch field beyond its four has no type, which cel-go prints as `''`.
    fn patch_message(&mut self, type_name: &str, ty: Type, fields: &[FieldInit]) -> Checked {
        let mut nodes = Vec::with_capacity(fields.len());
        for f in fields {
            let (node, mut vt) = self.check_operand(&f.value)?;
            if f.optional {
                vt = self.unwrap_optional(&f.value, vt);
            }
            let field_type = super::mutation::patch_field(type_name, &f.name).flatten();
            let assignable = match &field_type {
                Some(ft) => Bindings::default().accepts(ft, &vt),
                None => vt.is_dyn(),
            };
            if !assignable {
                let expected = field_type.as_ref().map(|t| Cel(t).to_string());
                self.issue_at(
                    f.pos as usize,
                    format!(
                        "expected type of field '{}' is '{}' but provided type is '{}'",
                        f.name,
                        expected.unwrap_or_default(),
                        TypeVars(&vt)
                    ),
                );
            }
            nodes.push((f.name.as_str().into(), node, f.optional));
        }
        let node = Node::Struct {
            type_name: super::mutation::intern(type_name),
            fields: nodes.into_boxed_slice(),
        };
        Ok((node, ty))
    }

    /// The declared object type named `name`, found among the variables' types.
    fn object_type(&self, name: &str) -> Option<Arc<ObjectType>> {
        fn find(t: &Type, name: &str) -> Option<Arc<ObjectType>> {
            match t {
                Type::Object(o) if o.name == name => Some(o.clone()),
                Type::Object(o) => o.fields.iter().find_map(|(_, t)| find(t, name)),
                Type::List(e) | Type::Optional(e) => find(e, name),
                Type::Map(k, v) => find(k, name).or_else(|| find(v, name)),
                _ => None,
            }
        }
        self.env.variables().iter().find_map(|v| find(&v.ty, name))
    }

    fn ident(&self, e: &Expr, name: &str) -> Checked {
        if let Some(i) = self.locals.iter().rposition(|(n, _)| n == name) {
            if self.locals[i].1 == UNSET {
                self.unset_typed.set(true);
            }
            return Ok((Node::Local(i), self.locals[i].1.clone()));
        }
        if let Some((slot, var)) = self.env.variable(name) {
            return match &var.kind {
                VarKind::Plain => Ok((Node::Var(slot), var.ty.clone())),
                VarKind::Lazy(fields) => Ok((
                    Node::Variables,
                    Type::Object(Arc::new(ObjectType {
                        name: VARIABLES_TYPE.to_string(),
                        fields: fields.fields().to_vec(),
                    })),
                )),
            };
        }
        if let Some((_, rt)) = TYPE_NAMES.iter().find(|(n, _)| *n == name) {
            let ty = type_for_name(name).unwrap_or(Type::Dyn);
            return Ok((Node::Const(Value::Type(rt)), Type::TypeOf(Box::new(ty))));
        }
        if let Some(n) = type_identifier(name) {
            let t = Type::Opaque(n);
            return Ok((Node::Const(Value::Type(n)), Type::TypeOf(Box::new(t))));
        }
        if let Some(t) = self.patch_type(name) {
            let n = super::mutation::intern(name);
            return Ok((Node::Const(Value::Type(n)), Type::TypeOf(Box::new(t))));
        }
        self.undeclared(e, name)
    }

    /// An unknown name: a compile error, or without type checking (as cel-go's unchecked
    /// evaluation) an error when evaluated.
    fn undeclared(&self, e: &Expr, name: &str) -> Checked {
        if self.env.check_types {
            return Err(self.err(
                e,
                format!("undeclared reference to '{name}' (in container '')"),
            ));
        }
        Ok((
            Node::Fail(format!("no such attribute: {name}").into()),
            Type::Dyn,
        ))
    }

    /// Resolves `a.b.c` against qualified variable names (`authorizer.requestResource`),
    /// composited variables (`variables.x`) and type names (`google.protobuf.Timestamp`),
    /// most qualified first, as cel-go does. `None` when the root is an ordinary value.
    fn qualified(&mut self, e: &Expr) -> Result<Option<(Node, Type)>, CompileError> {
        let Some(nodes) = dotted_nodes(e) else {
            return Ok(None);
        };
        let parts: Vec<&str> = nodes.iter().map(|(s, _)| *s).collect();
        if self.is_local(parts[0]) {
            return Ok(None);
        }
        for k in (1..=parts.len()).rev() {
            let name = parts[..k].join(".");
            let Some((slot, var)) = self.env.variable(&name) else {
                continue;
            };
            let (mut node, mut ty, rest) = match &var.kind {
                VarKind::Plain => (Node::Var(slot), var.ty.clone(), &nodes[k..]),
                VarKind::Lazy(fields) => {
                    let Some(field) = parts.get(k) else {
                        return Err(
                            self.err(e, format!("'{name}' can only be used to select a variable"))
                        );
                    };
                    let Some(index) = fields.position(field) else {
                        return Err(self.err(nodes[k].1, format!("undefined field '{field}'")));
                    };
                    (
                        Node::Lazy {
                            index,
                            optional: false,
                        },
                        fields.fields()[index].1.clone(),
                        &nodes[k + 1..],
                    )
                }
            };
            if k == 1 && rest.is_empty() && matches!(var.kind, VarKind::Plain) {
                return Ok(None);
            }
            if k == 1 {
                self.record(nodes[0].1, &ty);
            }
            for (field, at) in rest {
                let (n, t) = self.select(at, node, ty, field, false)?;
                self.record(at, &t);
                node = n;
                ty = t;
            }
            return Ok(Some((node, ty)));
        }
        let full = parts.join(".");
        if let Some((_, rt)) = TYPE_NAMES.iter().find(|(n, _)| *n == full) {
            let ty = type_for_name(&full).unwrap_or(Type::Dyn);
            return Ok(Some((
                Node::Const(Value::Type(rt)),
                Type::TypeOf(Box::new(ty)),
            )));
        }
        if let Some(n) = type_identifier(&full) {
            return Ok(Some((
                Node::Const(Value::Type(n)),
                Type::TypeOf(Box::new(Type::Opaque(n))),
            )));
        }
        if let Some(t) = self.patch_type(&full) {
            let n = super::mutation::intern(&full);
            return Ok(Some((
                Node::Const(Value::Type(n)),
                Type::TypeOf(Box::new(t)),
            )));
        }
        if WRAPPER_TYPES.contains(&full.as_str()) || self.declared_object(&full) {
            // cel-go's checker knows these types by name, but its planner has no value for
            // them: the program cannot be created.
            self.program_error(format!("reference to undefined type: {full}"));
            return Ok(Some((
                Node::Fail(format!("reference to undefined type: {full}").into()),
                Type::TypeOf(Box::new(Type::Dyn)),
            )));
        }
        Ok(None)
    }

    fn select(&self, e: &Expr, node: Node, ty: Type, field: &str, optional: bool) -> Checked {
        let explicit = optional;
        // Selection on an optional is an optional selection (chaining is viral).
        let (base, optional) = match &ty {
            Type::Optional(inner) => ((**inner).clone(), true),
            other => (other.clone(), optional),
        };
        let field_ty = match &base {
            // A patch type's field; one JSONPatch has no type for is `dyn` here.
            Type::Object(o) if self.patch_field(o, field).is_some() => {
                self.patch_field(o, field).flatten().unwrap_or(Type::Dyn)
            }
            Type::Object(o) => match o.field(field) {
                // `variables.?x`: a composited variable, read as `variables.x` is.
                Some(t) if matches!(node, Node::Variables) => {
                    let index = o.fields.iter().position(|(n, _)| n == field);
                    let ty = if optional {
                        Type::Optional(Box::new(t.clone()))
                    } else {
                        t.clone()
                    };
                    return match index {
                        Some(index) => Ok((Node::Lazy { index, optional }, ty)),
                        None => Err(self.err(e, format!("undefined field '{field}'"))),
                    };
                }
                Some(t) => t.clone(),
                None => return Err(self.err(e, format!("undefined field '{field}'"))),
            },
            // A free key type (`{}`) takes `string`.
            Type::Map(k, v) if matches!(**k, Type::String | Type::Dyn | Type::Param(_)) => {
                (**v).clone()
            }
            // A free type (`optional.none()`'s value) is `dyn`; so is a selection on an Any
            // (checker/checker.go `checkSelect`: `isDynOrError`).
            Type::Dyn | Type::Param(_) | Type::Opaque("google.protobuf.Any") => Type::Dyn,
            other if self.env.check_types => {
                return Err(self.err(
                    e,
                    format!("type '{}' does not support field selection", Cel(other)),
                ));
            }
            _ => Type::Dyn,
        };
        let ty = if optional {
            Type::Optional(Box::new(field_ty))
        } else {
            field_ty
        };
        Ok((
            Node::Select {
                cost: Node::qualifier_cost(&node, None),
                operand: Box::new(node),
                field: Key::new(field),
                optional,
                explicit,
            },
            ty,
        ))
    }

    fn index_type(
        &self,
        e: &Expr,
        ot: &Type,
        it: &Type,
        optional: bool,
    ) -> Result<Type, CompileError> {
        let func = if optional { "_[?_]" } else { "_[_]" };
        // An optional operand meets only the optional overloads of `_[_]` and `_[?_]`.
        let optional_operand = matches!(ot, Type::Optional(_));
        let (base, optional) = match ot {
            // A free type (`optional.none()`'s value) is `dyn`.
            Type::Optional(inner) => (inner.settled_top(), true),
            other => (other.clone(), optional),
        };
        // A list's index is an `int` (cel-go declares no `list[uint]` overload).
        let elem = match (&base, it) {
            (Type::List(el), Type::Int | Type::Dyn) => (**el).clone(),
            (Type::Map(k, v), key) if Bindings::default().accepts(k, key) => (**v).clone(),
            // On an optional of `dyn` (or of a free type), only the map overload takes a key
            // that is not an int: its value type stays a free variable.
            (Type::Dyn, key) if optional_operand && !matches!(key, Type::Int | Type::Dyn) => FREE,
            // Both the list and the map overload of `_[?_]` match a `dyn` operand, with
            // results cel-go does not find equivalent (`optional_type(V1)`, `(V2)`): `dyn`.
            (Type::Dyn, _) if optional => return Ok(Type::Dyn),
            (Type::Dyn, _) => Type::Dyn,
            _ if !self.env.check_types => Type::Dyn,
            _ => {
                return Err(self.err(
                    e,
                    format!(
                        "found no matching overload for '{func}' applied to '({}, {})'",
                        Cel(&base),
                        Cel(it)
                    ),
                ));
            }
        };
        Ok(if optional {
            Type::Optional(Box::new(elem))
        } else {
            elem
        })
    }

    /// The type inside an optional element or entry value (`[?x]`, `{k: ?v}`); a value
    /// that is not optional is an issue (cel-go: `expected type 'optional_type(T)' but found
    /// 'T'`) and checking goes on with its own type.
    fn unwrap_optional(&self, e: &Expr, t: Type) -> Type {
        match t {
            Type::Optional(inner) => *inner,
            Type::Dyn => Type::Dyn,
            other if self.env.check_types => {
                let wrapped = Type::Optional(Box::new(other.clone()));
                self.issue(
                    e,
                    format!(
                        "expected type '{}' but found '{}'",
                        Cel(&wrapped),
                        Cel(&other)
                    ),
                );
                other
            }
            _ => Type::Dyn,
        }
    }

    /// Kubernetes' homogeneous aggregate literal rule (cel-go's
    /// `ValidateHomogeneousAggregateLiterals`): every element (or key, or value) of a literal
    /// has an equivalent type. `dyn` is a type of its own there: `[dyn(1), 2]` and
    /// `[0, object]` are refused (`expected type 'dyn' but found 'int'`).
    ///
    /// A mismatch is a validator issue at `e`; it gives back the type so far as `Err`.
    fn homogeneous(&self, e: &Expr, so_far: Option<Type>, next: Type) -> Result<Type, Type> {
        let Some(prev) = so_far else { return Ok(next) };
        if !self.env.check_types || !self.env.homogeneous_literals {
            return Ok(join(&prev, &next).unwrap_or(Type::Dyn));
        }
        let joined = match (&prev, &next) {
            (Type::Dyn, Type::Dyn) => Some(Type::Dyn),
            (Type::Dyn, _) | (_, Type::Dyn) => None,
            _ => match join(&prev, &next) {
                Some(t)
                    if prev.unifies_with(&next)
                        || matches!(t, Type::Optional(_) | Type::Object(_)) =>
                {
                    Some(t)
                }
                _ => None,
            },
        };
        joined.ok_or_else(|| {
            self.late_issue(
                e,
                format!("expected type '{}' but found '{}'", Cel(&prev), Cel(&next)),
            );
            prev
        })
    }

    fn list(&mut self, e: &Expr, elements: &[Expr], optional: &[bool], exempt: bool) -> Checked {
        let mut nodes = Vec::with_capacity(elements.len());
        let mut elem: Option<Type> = None;
        // cel-go's validator reports the first element that differs, then leaves the list.
        let mut mismatched = false;
        for (el, opt) in elements.iter().zip(optional) {
            let (n, mut t) = self.check(el)?;
            if *opt {
                t = self.unwrap_optional(el, t);
            }
            // `?optional.none()` has an unbound element type in cel-go, which takes the
            // list's: it neither sets nor breaks the homogeneous rule.
            if *opt && !exempt && is_optional_none(el) {
                nodes.push(n);
                continue;
            }
            // cel-go's `checkCreateList` joins from a nil element type: a first element of
            // the nil type ([`UNSET`]) leaves it nil, so the next element (or a fresh type
            // variable) gives the list its type.
            if t == UNSET && elem.is_none() {
                nodes.push(n);
                continue;
            }
            elem = Some(if exempt {
                join(elem.as_ref().unwrap_or(&t), &t).unwrap_or(Type::Dyn)
            } else if mismatched {
                elem.unwrap_or(Type::Dyn)
            } else {
                self.homogeneous(el, elem, t).unwrap_or_else(|first| {
                    mismatched = true;
                    first
                })
            });
            nodes.push(n);
        }
        let optional: Box<[bool]> = if optional.iter().any(|o| *o) {
            optional.into()
        } else {
            Box::new([])
        };
        let node = Node::List {
            elements: nodes.into_boxed_slice(),
            optional,
        };
        Ok((self.fold(e, node)?, Type::list(elem.unwrap_or(FREE))))
    }

    fn call(&mut self, e: &Expr, func: &str, target: Option<&Expr>, args: &[Expr]) -> Checked {
        // `sets.contains(a, b)` parses as a member call on `sets`: a namespaced function, if
        // this environment declares it (cel-go's `checkCall` looks the qualified name up in
        // its env). Else it is a member call like any other: `optional.unwrap(l)` before
        // cel-go v0.23 reports `optional` and `unwrap`, each undeclared.
        if let Some(t) = target {
            if let Some(parts) = dotted(t) {
                let root_is_value =
                    self.is_local(parts[0]) || self.env.variable(parts[0]).is_some();
                let qualified = format!("{}.{}", parts.join("."), func);
                if !root_is_value && self.function(&qualified).is_some() {
                    return self.call(e, &qualified, None, args);
                }
            }
        }
        match func {
            "_&&_" | "_||_" => {
                let (l, lt) = self.check(&args[0])?;
                let (r, rt) = self.check(&args[1])?;
                // cel-go checks each operand of a logical operator to be a bool.
                let mut failed = false;
                for (t, a) in [(&lt, &args[0]), (&rt, &args[1])] {
                    if self.env.check_types && !matches!(t, Type::Bool | Type::Dyn) {
                        self.issue(a, format!("expected type 'bool' but found '{}'", Cel(t)));
                        failed = true;
                    }
                }
                if failed {
                    return Ok((
                        Node::Fail("logical operand is not a bool".into()),
                        Type::Dyn,
                    ));
                }
                let node = if func == "_&&_" {
                    Node::And(Box::new(l), Box::new(r))
                } else {
                    Node::Or(Box::new(l), Box::new(r))
                };
                return Ok((node, Type::Bool));
            }
            "_?_:_" => {
                let (c, ct) = self.check(&args[0])?;
                let (y, yt) = self.check(&args[1])?;
                let (n, nt) = self.check(&args[2])?;
                let joined = join(&yt, &nt);
                if self.env.check_types
                    && (!matches!(ct, Type::Bool | Type::Dyn) || joined.is_none())
                {
                    return Err(self.err(
                        e,
                        format!(
                            "found no matching overload for '_?_:_' applied to '({}, {}, {})'",
                            Cel(&ct),
                            Cel(&yt),
                            Cel(&nt)
                        ),
                    ));
                }
                return Ok((Node::Cond(Box::new([c, y, n])), joined.unwrap_or(Type::Dyn)));
            }
            _ => {}
        }
        // The receiver and the arguments are checked before the function is looked up, so an
        // unknown function reports their issues too.
        let mut nodes = Vec::with_capacity(args.len() + 1);
        let mut types = Vec::with_capacity(args.len() + 1);
        if func == "format" {
            self.in_format += 1;
        }
        if let Some(t) = target {
            let (n, ty) = self.check_operand(t)?;
            nodes.push(n);
            types.push(ty);
        }
        if func == "matches" && self.k8s_validators() {
            self.validate_pattern(args.first());
        }
        for a in args {
            let (n, ty) = self.check_operand(a)?;
            nodes.push(n);
            types.push(ty);
        }
        if func == "format" {
            self.in_format -= 1;
            if let (Some(t), [list]) = (target, args) {
                if self.k8s_validators() {
                    self.validate_format(e, t, list);
                }
            }
            if self.in_format == 0 {
                self.format_types.clear();
            }
        }
        let Some(f) = self.function(func) else {
            return self.undeclared(e, func);
        };
        let member = target.is_some();
        let mut candidates: Vec<_> = f
            .overloads
            .iter()
            .filter(|o| {
                o.sig.member == member && o.sig.params.len() == types.len() && self.offered(o)
            })
            .collect();
        // A later implementation of the same signature supersedes an earlier one (a
        // behaviour Kubernetes fixed in a later version).
        let all = candidates.clone();
        candidates.retain(|o| !all.iter().any(|n| n.since > o.since && n.sig == o.sig));
        // Comprehension variables of a free type passed here: the first match binds them for
        // the rest of the comprehension, as cel-go's substitutions are global.
        let free_locals: Vec<(usize, usize)> = nodes
            .iter()
            .zip(&types)
            .enumerate()
            .filter_map(|(i, (n, t))| match (n, t) {
                (Node::Local(slot), Type::Param(_)) => Some((i, *slot)),
                _ => None,
            })
            .collect();
        let mut result: Option<Type> = None;
        let mut matching: Vec<&'static Overload> = Vec::new();
        for o in &candidates {
            let mut b = Bindings::default();
            if o.sig
                .params
                .iter()
                .zip(&types)
                .all(|(p, t)| b.accepts(p, t))
            {
                matching.push(o);
                // The first overload that matches binds the free variables of the operand
                // types for the overloads after it, as cel-go's checker keeps the
                // substitutions of the first match (`[].sum()` is `int`).
                if types.iter().any(Type::has_free) {
                    for (t, p) in types.iter_mut().zip(&o.sig.params) {
                        *t = t.filled(&b.substitute(p));
                    }
                }
                let r = b.substitute(&o.sig.result);
                result = Some(match result {
                    None => r,
                    Some(prev) => join(&prev, &r).unwrap_or(Type::Dyn),
                });
            }
        }
        for (i, slot) in free_locals {
            if !matches!(types[i], Type::Param(_)) {
                if let Some(local) = self.locals.get_mut(slot) {
                    local.1 = types[i].clone();
                }
            }
        }
        if candidates.is_empty() && !self.env.check_types {
            return self.undeclared(e, func);
        }
        let ty = match result {
            Some(t) => t,
            None if !self.env.check_types => Type::Dyn,
            None => {
                // An operand that failed to check has cel-go's error type, `!error!`.
                let names: Vec<String> = nodes
                    .iter()
                    .zip(&types)
                    .map(|(n, t)| match n {
                        Node::Fail(_) => "!error!".to_string(),
                        _ => Cel(t).to_string(),
                    })
                    .collect();
                let shown = if member {
                    format!("{}.({})", names[0], names[1..].join(", "))
                } else {
                    format!("({})", names.join(", "))
                };
                return Err(self.err(
                    e,
                    format!("found no matching overload for '{func}' applied to '{shown}'"),
                ));
            }
        };
        // cel-go prices some calls by their checked overload id, which a call matching
        // several overloads (a `dyn` argument) lacks, and the global `matches` has no
        // priced id at all: those are charged its default of 1.
        let untyped = super::eval::COSTED_BY_OVERLOAD_ID.contains(&func)
            && (matching.len() > 1 || (func == "matches" && !member));
        if let Some(node) = self.regex_node(func, &mut nodes, untyped)? {
            return Ok((node, ty));
        }
        if matching.is_empty() {
            // Unchecked: any candidate may apply at runtime.
            matching = candidates.clone();
        }
        // An overload a later Kubernetes replaced (same signature, later `since`) gives way.
        let all = matching.clone();
        matching.retain(|o| {
            !all.iter().any(|p| {
                p.since > o.since && p.sig.member == o.sig.member && p.sig.params == o.sig.params
            })
        });
        if matches!(func, "or" | "orValue") && member {
            if let Ok(args) =
                <Box<[Node; 2]>>::try_from(std::mem::take(&mut nodes).into_boxed_slice())
            {
                // cel-go's optional library replaces these calls by short-circuiting
                // evaluations (`decorateOptionalOr`), which its cost tracker does not charge.
                return Ok((
                    Node::OptOr {
                        args,
                        value: func == "orValue",
                    },
                    ty,
                ));
            }
        }
        let first = matching[0];
        let set = self.set_membership(f, &matching, &nodes);
        if set.is_some()
            && matches!(nodes.get(1), Some(Node::Const(Value::List(l))) if l.is_empty())
        {
            // cel-go's `OptOptimize` (`maybeOptimizeSetMembership`) makes membership in a
            // constant empty list the constant false: the element is never evaluated, so an
            // element that would fail does not.
            return Ok((Node::Const(Value::Bool(false)), ty));
        }
        let imp = if let Some(set) = set {
            Callee::Static(set)
        } else if matching.len() == 1 && GUARDED_CONVERSIONS.contains(&func) {
            Callee::Guarded(first)
        } else if matching.iter().all(|o| o.imp.same(&first.imp)) {
            Callee::Static(first)
        } else {
            Callee::Dispatch(matching.into_boxed_slice())
        };
        let imp = match imp {
            Callee::Static(o) if untyped && o.since != since::HIDDEN => {
                Callee::Untyped(Box::new(Callee::Static(o)))
            }
            Callee::Dispatch(_) if untyped => Callee::Untyped(Box::new(imp)),
            other => other,
        };
        let node = Node::Call {
            func: f,
            imp,
            args: nodes.into_boxed_slice(),
        };
        if FOLDABLE.contains(&func) && self.env.optimize {
            return Ok((self.fold(e, node)?, ty));
        }
        if KEPT_CALLS.contains(&func) {
            return Ok((keep_result(node), ty));
        }
        Ok((node, ty))
    }

    /// The uncharged overload of `in` when its list is a constant cel-go's `OptOptimize`
    /// turns into a set (empty, or of booleans, numbers and strings only). Only a call
    /// checked as the list overload alone (cel-go's `in_list` id): `x in dyn([])` has none.
    fn set_membership(
        &self,
        f: &'static Function,
        matching: &[&'static Overload],
        nodes: &[Node],
    ) -> Option<&'static Overload> {
        if f.name != "@in" || !self.env.optimize {
            return None;
        }
        if !matches!(matching, [o] if matches!(o.sig.params.get(1), Some(Type::List(_)))) {
            return None;
        }
        let [_, Node::Const(Value::List(l))] = nodes else {
            return None;
        };
        let scalars = l.iter().all(|v| {
            matches!(
                v,
                Value::Bool(_)
                    | Value::Int(_)
                    | Value::Uint(_)
                    | Value::Double(_)
                    | Value::String(_)
            )
        });
        if !scalars {
            return None;
        }
        f.overloads.iter().find(|o| o.since == since::HIDDEN)
    }

    /// cel-go's regex literal validator: the first argument of a `matches` call (the
    /// pattern of `s.matches(p)`, but the subject of the global `matches(s, p)`), when it is a
    /// string literal, must compile.
    fn validate_pattern(&self, arg: Option<&Expr>) {
        let Some(arg) = arg else { return };
        if let ExprKind::Literal(Literal::String(p)) = &arg.kind {
            if super::regex::compile_regex(p).is_err() {
                self.late_issue(arg, "invalid matches argument");
            }
        }
    }

    /// cel-go's `string.format` validator: a literal format string applied to a literal list
    /// is parsed, and each clause's argument must have a type the clause formats. Issues
    /// point at the offending element, or at the call when the format string itself is wrong.
    fn validate_format(&self, call: &Expr, target: &Expr, list: &Expr) {
        let ExprKind::Literal(Literal::String(fmt)) = &target.kind else {
            return;
        };
        let ExprKind::List { elements, .. } = &list.kind else {
            return;
        };
        // cel-go stops at the first clause that fails, to parse or to accept its argument.
        let (clauses, malformed) = format_clauses(fmt, elements.len());
        for (verb, index) in &clauses {
            let Some(arg) = elements.get(*index) else {
                continue;
            };
            if let Err((at, msg)) = self.format_arg(*verb, arg) {
                self.late_issue(at, format!("error during formatting: {msg}"));
                return;
            }
        }
        match malformed {
            Some(msg) => self.late_issue(call, msg),
            None => {
                if elements.len() > clauses.len() {
                    self.late_issue(
                        call,
                        format!(
                            "too many arguments supplied to string.format (expected {}, got {})",
                            clauses.len(),
                            elements.len()
                        ),
                    );
                }
            }
        }
    }

    /// Whether the format clause `verb` accepts `arg`'s static type (by kind, `dyn` always),
    /// and, for `%s`, every element of a nested list or map literal.
    fn format_arg<'x>(&self, verb: char, arg: &'x Expr) -> Result<(), (&'x Expr, String)> {
        let ty = self
            .format_types
            .get(&(arg as *const Expr as usize))
            .cloned()
            .unwrap_or(Type::Dyn);
        let ok =
            |kinds: &[fn(&Type) -> bool]| matches!(ty, Type::Dyn) || kinds.iter().any(|k| k(&ty));
        let name = type_name(&ty);
        let int: fn(&Type) -> bool = |t| matches!(t, Type::Int);
        let uint: fn(&Type) -> bool = |t| matches!(t, Type::Uint);
        let double: fn(&Type) -> bool = |t| matches!(t, Type::Double);
        let string: fn(&Type) -> bool = |t| matches!(t, Type::String);
        let bytes: fn(&Type) -> bool = |t| matches!(t, Type::Bytes);
        let boolean: fn(&Type) -> bool = |t| matches!(t, Type::Bool);
        let (valid, what) = match verb {
            'd' => (
                ok(&[int, uint]),
                "decimal clause can only be used on integers",
            ),
            'o' => (
                ok(&[int, uint]),
                "octal clause can only be used on integers",
            ),
            'f' => (
                ok(&[double, string]),
                "fixed-point clause can only be used on doubles",
            ),
            'e' => (
                ok(&[double, string]),
                "scientific clause can only be used on doubles",
            ),
            'b' => (
                ok(&[int, uint, boolean]),
                "only integers and bools can be formatted as binary",
            ),
            'x' | 'X' => (
                ok(&[int, uint, string, bytes]),
                "only integers, byte buffers, and strings can be formatted as hex",
            ),
            _ => return self.format_string_arg(arg),
        };
        if valid {
            Ok(())
        } else {
            Err((arg, format!("{what}, was given {name}")))
        }
    }

    /// `%s`: any type but optionals and library objects, looking into list and map literals.
    fn format_string_arg<'x>(&self, arg: &'x Expr) -> Result<(), (&'x Expr, String)> {
        let ty = self
            .format_types
            .get(&(arg as *const Expr as usize))
            .cloned()
            .unwrap_or(Type::Dyn);
        if matches!(ty, Type::Optional(_) | Type::Opaque(_) | Type::Object(_)) {
            return Err((
                arg,
                format!(
                    "string clause can only be used on strings, bools, bytes, ints, doubles, maps, lists, types, durations, and timestamps, was given {}",
                    type_name(&ty)
                ),
            ));
        }
        match &arg.kind {
            ExprKind::List { elements, .. } => {
                elements.iter().try_for_each(|e| self.format_string_arg(e))
            }
            ExprKind::Map { entries } => entries.iter().try_for_each(|en| {
                self.format_string_arg(&en.key)?;
                self.format_string_arg(&en.value)
            }),
            _ => Ok(()),
        }
    }

    /// `matches`, `find`, `findAll` with a constant pattern: compiled once here; an invalid
    /// constant pattern is a compile error.
    fn regex_node(
        &self,
        func: &str,
        nodes: &mut Vec<Node>,
        plain: bool,
    ) -> Result<Option<Node>, CompileError> {
        let op = match func {
            "matches" => RegexOp::Matches,
            "find" => RegexOp::Find,
            "findAll" => RegexOp::FindAll,
            _ => return Ok(None),
        };
        let Some(Node::Const(Value::String(p))) = nodes.get(1) else {
            return Ok(None);
        };
        let pattern = p.as_str().to_string();
        // A bad constant pattern fails when cel-go plans the program (a literal `matches`
        // pattern was already reported by the validator, see `validate_pattern`).
        let re = match super::regex::compile_regex(&pattern) {
            Ok(re) => re,
            Err(err) => {
                self.program_error(err.message().to_string());
                return Ok(None);
            }
        };
        let pattern_size = pattern.chars().count() as u64;
        let mut args: Vec<Node> = std::mem::take(nodes);
        args.remove(1);
        Ok(Some(Node::Regex {
            op,
            args: args.into_boxed_slice(),
            re: Arc::new(re),
            pattern_size,
            plain,
        }))
    }

    /// Evaluates a node whose inputs are all constants (a literal list or map, a conversion
    /// of a constant), as cel-go's `OptOptimize` does at program creation: a failure is a
    /// compile error.
    fn fold(&self, e: &Expr, node: Node) -> Result<Node, CompileError> {
        let all_const = match &node {
            Node::List { elements, optional } => {
                optional.is_empty() && elements.iter().all(|n| matches!(n, Node::Const(_)))
            }
            Node::Map { entries } => entries
                .iter()
                .all(|(k, v, o)| !o && matches!(k, Node::Const(_)) && matches!(v, Node::Const(_))),
            Node::Call { args, .. } => args.iter().all(|n| matches!(n, Node::Const(_))),
            _ => false,
        };
        if !all_const || !self.env.optimize {
            return Ok(node);
        }
        let empty: Vec<Value<'static>> = Vec::new();
        let mut meter = Meter::default();
        let mut ev = Evaluator::new(&empty, &mut meter);
        let result = ev.eval(&node);
        match result {
            Ok(v) => Ok(Node::Const(detach(v))),
            Err(err) => {
                match literal_validated(e) {
                    // cel-go's duration and timestamp literal validators (Kubernetes 1.29+):
                    // an issue at the literal, worded their own way.
                    Some((name, arg)) => self.late_issue(arg, format!("invalid {name} argument")),
                    // Any other constant fails when cel-go plans the program.
                    None => self.program_error(err.message().to_string()),
                }
                Ok(node)
            }
        }
    }

    /// The first `n` arguments of the call whose `(` is at `open`, when they are plain
    /// identifiers: their names and positions (macro variables are not nodes of the tree).
    fn call_arg_idents(&self, open: usize, n: usize) -> Vec<(String, usize)> {
        use super::lexer::{tokenize, Tok};
        let Some(rest) = self.src.get(open + 1..) else {
            return Vec::new();
        };
        let Ok(tokens) = tokenize(rest) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        let mut it = tokens.iter();
        while out.len() < n {
            match it.next().map(|t| (&t.kind, t.start)) {
                Some((Tok::Ident(name), at)) => out.push((name.clone(), open + 1 + at)),
                _ => break,
            }
            if out.len() < n && !matches!(it.next().map(|t| &t.kind), Some(Tok::Comma)) {
                break;
            }
        }
        out
    }

    fn comprehension(&mut self, e: &Expr, c: &Comprehension) -> Checked {
        use MacroKind::*;
        let (issues, late) = (self.issues.borrow().len(), self.late.borrow().len());
        let (range, rt) = self.check(&c.range)?;
        if matches!(c.kind, OptMap | OptFlatMap) {
            // cel-go's expansion (`t.hasValue() ? ... t.value() ... : optional.none()`) holds
            // the target twice, so each issue of the target is reported twice.
            for list in [(&self.issues, issues), (&self.late, late)] {
                let mut v = list.0.borrow_mut();
                let again: Vec<Issue> = v.get(list.1..).map(<[Issue]>::to_vec).unwrap_or_default();
                v.extend(again);
            }
        }
        // The two-argument `existsOne` arrived with cel-go v0.23 (Kubernetes 1.33); the
        // three-argument one is the two-variable comprehension of 1.32.
        let one_variable_exists_one =
            c.name == "existsOne" && c.var2.is_none() && self.env.version < since::OPTIONAL_V23;
        let two_variable = matches!(c.kind, All | Exists | ExistsOne) && c.var2.is_some()
            || matches!(c.kind, TransformList | TransformMap | TransformMapEntry);
        if one_variable_exists_one
            || two_variable && self.env.version < since::TWO_VAR_COMPREHENSIONS
        {
            // Without the macro, cel-go checks a plain call: the function is undeclared, and
            // so are the variable names and whatever the other arguments use of them.
            let msg = |n: &str| format!("undeclared reference to '{n}' (in container '')");
            self.issue(e, msg(c.name));
            let vars = if c.var2.is_some() { 2 } else { 1 };
            for (name, pos) in self.call_arg_idents(e.pos as usize, vars) {
                if !self.is_local(&name) {
                    self.issue_at(pos, msg(&name));
                }
            }
            if let Some(f) = &c.filter {
                self.check(f)?;
            }
            self.check(&c.body)?;
            return Ok((Node::Fail(msg(c.name).into()), Type::Dyn));
        }
        if c.kind == SortBy && self.env.version < since::LISTS_V3 {
            return Err(self.err(e, "undeclared reference to 'sortBy' (in container '')"));
        }
        let (t1, t2) = match (&rt, c.kind) {
            (Type::Optional(inner), OptMap | OptFlatMap) => ((**inner).clone(), None),
            (Type::Dyn, OptMap | OptFlatMap) => (Type::Dyn, None),
            (_, OptMap | OptFlatMap) if self.env.check_types => {
                return Err(self.err(
                    e,
                    format!(
                        "found no matching overload for '{}' applied to '{}'",
                        c.name,
                        Cel(&rt)
                    ),
                ));
            }
            (Type::List(el), _) if c.var2.is_some() => (Type::Int, Some((**el).clone())),
            (Type::List(el), _) => ((**el).clone(), None),
            (Type::Map(k, v), _) if c.var2.is_some() => ((**k).clone(), Some((**v).clone())),
            (Type::Map(k, _), _) if c.kind != SortBy => ((**k).clone(), None),
            // cel-go v0.22.0 (`checker/checker.go`, `checkComprehension`) types only the first
            // variable of a `dyn` range: the second keeps a nil type ([`UNSET`]) until
            // cel-go #1077 (v0.22.1; Kubernetes 1.33 vendors v0.23).
            (Type::Dyn, _) if self.env.version < since::TWO_VAR_DYN_RANGE_TYPED => {
                (Type::Dyn, c.var2.as_ref().map(|_| UNSET))
            }
            (Type::Dyn, _) => (Type::Dyn, c.var2.as_ref().map(|_| Type::Dyn)),
            _ if !self.env.check_types => (Type::Dyn, c.var2.as_ref().map(|_| Type::Dyn)),
            _ => {
                return Err(self.err(
                    &c.range,
                    format!("expression of type '{}' cannot be range of a comprehension (must be list, map, or dynamic)", Cel(&rt)),
                ));
            }
        };
        let depth = self.locals.len();
        self.locals.push((c.var.clone(), t1.clone()));
        if let (Some(name), Some(t)) = (&c.var2, &t2) {
            self.locals.push((name.clone(), t.clone()));
        }
        let scoped = self.filter_and_body(c);
        // A free variable a call in the body bound has that type in the result (`filter`).
        let t1 = match (&t1, self.locals.get(depth)) {
            (Type::Param(_), Some((_, bound))) => bound.clone(),
            _ => t1,
        };
        self.locals.truncate(depth);
        let (filter, (body, bt)) = scoped?;
        // A predicate that is not a bool fails where cel-go's expansion uses it: as an operand
        // of `&&`/`||` (`all`, `exists`), or as the condition of the step's `_?_:_`, whose
        // error points at the macro call (`filter`, `exists_one`).
        let not_bool = self.env.check_types && !matches!(bt, Type::Bool | Type::Dyn);
        let step = |acc: &Type| {
            format!(
                "found no matching overload for '_?_:_' applied to '({}, {}, {})'",
                Cel(&bt),
                Cel(acc),
                Cel(acc)
            )
        };
        let ty = match c.kind {
            All | Exists => {
                self.expect_bool(&c.body, &bt)?;
                Type::Bool
            }
            ExistsOne if not_bool => return Err(self.err(e, step(&Type::Int))),
            ExistsOne => Type::Bool,
            Filter if not_bool => return Err(self.err(e, step(&Type::list(t1)))),
            Filter => Type::list(t1),
            Map | TransformList => Type::list(bt),
            TransformMap if bt == UNSET => return Err(self.unset_map_step(e, Type::map(t1, bt))),
            TransformMap => Type::map(
                if matches!(rt, Type::List(_)) {
                    Type::Int
                } else {
                    t1
                },
                bt,
            ),
            TransformMapEntry if matches!(&bt, Type::Map(_, v) if **v == UNSET) => {
                return Err(self.unset_map_step(e, bt))
            }
            TransformMapEntry => match bt {
                Type::Map(..) | Type::Dyn => bt,
                // cel-go's expansion inserts the entry with `cel.@mapInsert` into a `{}`.
                other if self.env.check_types => {
                    return Err(self.err(
                        e,
                        format!(
                            "found no matching overload for 'cel.@mapInsert' applied to '(map(dyn, dyn), {})'",
                            Cel(&other)
                        ),
                    ));
                }
                _ => Type::Dyn,
            },
            SortBy => rt.clone(),
            OptMap => Type::Optional(Box::new(bt)),
            OptFlatMap => match bt {
                Type::Optional(_) | Type::Dyn => bt,
                // cel-go's expansion: `target.hasValue() ? body : optional.none()`.
                other if self.env.check_types => {
                    return Err(self.err(
                        e,
                        format!(
                            "found no matching overload for '_?_:_' applied to '(bool, {}, optional_type(dyn))'",
                            Cel(&other)
                        ),
                    ));
                }
                _ => Type::Dyn,
            },
        };
        // cel-go's optMap/optFlatMap expansion binds the variable as a lazily evaluated
        // accumulator (`t.value()`), evaluated only if the body reads it.
        let reads_var = Node::reads_local(&body, depth);
        let node = CNode {
            reads_var,
            kind: c.kind,
            range,
            two_vars: c.var2.is_some(),
            range_error_hidden: c.var2.is_some() && self.env.version < since::FOLD_RANGE_ERROR,
            filter,
            body,
        };
        Ok((Node::Comprehension(Box::new(node)), ty))
    }

    /// cel-go v0.22.0's `checkComprehension` asserts the step (`cel.@mapInsert(@result, ...)`)
    /// against the accumulator's type, `{}`'s `map(_var0, _var1)`: a step whose value type is
    /// nil ([`UNSET`]) is not assignable to it, as nil is exact with nothing
    /// (`checker/types.go`, `isValidTypeSubstitution`).
    fn unset_map_step(&self, e: &Expr, step: Type) -> CompileError {
        self.err(
            e,
            format!(
                "expected type 'map(_var0, _var1)' but found '{}'",
                Cel(&step)
            ),
        )
    }

    /// The filter (checked to be a bool) and the body, with the iteration variables in scope.
    fn filter_and_body(
        &mut self,
        c: &Comprehension,
    ) -> Result<(Option<Node>, (Node, Type)), CompileError> {
        let filter = match &c.filter {
            Some(f) => {
                let (n, t) = self.check(f)?;
                self.expect_bool(f, &t)?;
                Some(n)
            }
            None => None,
        };
        Ok((filter, self.check(&c.body)?))
    }

    fn expect_bool(&self, e: &Expr, t: &Type) -> Result<(), CompileError> {
        if self.env.check_types && !matches!(t, Type::Bool | Type::Dyn) {
            return Err(self.err(e, format!("expected type 'bool' but found '{}'", Cel(t))));
        }
        Ok(())
    }
}

fn literal(l: &Literal) -> (Node, Type) {
    let (v, t) = match l {
        Literal::Null => (Value::Null, Type::Null),
        Literal::Bool(b) => (Value::Bool(*b), Type::Bool),
        Literal::Int(i) => (Value::Int(*i), Type::Int),
        Literal::Uint(u) => (Value::Uint(*u), Type::Uint),
        Literal::Double(d) => (Value::Double(*d), Type::Double),
        Literal::String(s) => (Value::string(s.as_str()), Type::String),
        Literal::Bytes(b) => (Value::Bytes(b.as_slice().into()), Type::Bytes),
    };
    (Node::Const(v), t)
}

/// Converts a value computed from constants into one that owns everything it holds, so it
/// can live in a program (`Value<'static>`).
fn detach(v: Value<'_>) -> Value<'static> {
    match v {
        Value::Null => Value::Null,
        Value::Bool(b) => Value::Bool(b),
        Value::Int(i) => Value::Int(i),
        Value::Uint(u) => Value::Uint(u),
        Value::Double(d) => Value::Double(d),
        Value::String(s) => Value::string(s.as_str()),
        Value::Bytes(b) => Value::Bytes(b),
        Value::List(l) => Value::list(l.iter().map(detach).collect()),
        Value::Map(m) => {
            let entries = m
                .entries()
                .into_iter()
                .map(|(k, v)| (detach(k), detach(v)))
                .collect();
            // The same keys as the source map: none merges, none is bytes.
            match OwnedMap::literal(entries) {
                Ok(m) => Value::Map(Map::Owned(Arc::new(m))),
                Err(_) => Value::Null,
            }
        }
        Value::Timestamp(t) => Value::Timestamp(t),
        Value::Duration(d) => Value::Duration(d),
        Value::Type(t) => Value::Type(t),
        Value::Optional(o) => Value::optional(o.map(|v| detach((*v).clone()))),
        Value::Opaque(o) => Value::Opaque(o),
    }
}

/// The protobuf wrapper types, which cel-go's checker declares by name.
const WRAPPER_TYPES: &[&str] = &[
    "google.protobuf.BoolValue",
    "google.protobuf.BytesValue",
    "google.protobuf.DoubleValue",
    "google.protobuf.FloatValue",
    "google.protobuf.Int32Value",
    "google.protobuf.Int64Value",
    "google.protobuf.StringValue",
    "google.protobuf.UInt32Value",
    "google.protobuf.UInt64Value",
];

/// The library types an expression may name as values: only `net.IP` and `net.CIDR`, the
/// two whose libraries declare their type name as an identifier (Kubernetes' `ip` and `cidr`
/// libraries); `kubernetes.Quantity` or `kubernetes.URL` are undeclared references.
fn type_identifier(name: &str) -> Option<&'static str> {
    match name {
        "net.IP" => Some("net.IP"),
        "net.CIDR" => Some("net.CIDR"),
        _ => None,
    }
}

/// A type's name without its parameters, as cel-go's `TypeName()` gives it.
fn type_name(t: &Type) -> String {
    match t {
        Type::List(_) => "list".into(),
        Type::Map(..) => "map".into(),
        Type::TypeOf(_) => "type".into(),
        Type::Optional(_) => "optional_type".into(),
        other => other.to_string(),
    }
}

/// The clauses of a format string as cel-go's validator reads it: each clause's verb and the
/// index of the argument it takes, up to the first malformed clause, whose message comes
/// second. `args` is the number of arguments, as a clause past them is an error.
fn format_clauses(fmt: &str, args: usize) -> (Vec<(char, usize)>, Option<String>) {
    let mut clauses = Vec::new();
    let malformed = read_clauses(fmt, args, &mut clauses).err();
    (clauses, malformed)
}

fn read_clauses(fmt: &str, args: usize, clauses: &mut Vec<(char, usize)>) -> Result<(), String> {
    let bytes = fmt.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != b'%' {
            i += 1;
            continue;
        }
        if bytes.get(i + 1) == Some(&b'%') {
            i += 2;
            continue;
        }
        let index = clauses.len();
        if i + 1 >= bytes.len() {
            return Err("unexpected end of string".into());
        }
        if index >= args {
            return Err(format!("index {index} out of range"));
        }
        i += 1;
        if bytes[i] == b'.' {
            i += 1;
            let digits = i;
            while i < bytes.len() && bytes[i].is_ascii_digit() {
                i += 1;
            }
            if i >= bytes.len() {
                return Err("could not parse formatting clause: error while parsing precision: could not find end of precision specifier".into());
            }
            if digits == i {
                return Err("could not parse formatting clause: error while parsing precision: error while converting precision to integer: strconv.Atoi: parsing \"\": invalid syntax".into());
            }
        }
        // cel-go reads one byte as the verb (a multi-byte character shows as its first byte).
        let verb = char::from(bytes[i]);
        i += 1;
        if !matches!(verb, 's' | 'd' | 'f' | 'e' | 'b' | 'x' | 'X' | 'o') {
            return Err(format!(
                "could not parse formatting clause: unrecognized formatting clause \"{verb}\""
            ));
        }
        clauses.push((verb, index));
    }
    Ok(())
}

/// The function name and argument of `duration(literal)` or `timestamp(literal)`, the calls
/// whose literal argument cel-go's validators check.
fn literal_validated(e: &Expr) -> Option<(&'static str, &Expr)> {
    let ExprKind::Call {
        func,
        target: None,
        args,
    } = &e.kind
    else {
        return None;
    };
    let name = match func.as_str() {
        "duration" => "duration",
        "timestamp" => "timestamp",
        _ => return None,
    };
    match args.as_slice() {
        [arg] if matches!(arg.kind, ExprKind::Literal(_)) => Some((name, arg)),
        _ => None,
    }
}

/// Whether `e` is the literal call `optional.none()`, whose type cel-go leaves free for the
/// literal around it to bind.
fn is_optional_none(e: &Expr) -> bool {
    match &e.kind {
        ExprKind::Call { func, target, args } if args.is_empty() => match target.as_deref() {
            None => func == "optional.none",
            Some(t) => func == "none" && matches!(&t.kind, ExprKind::Ident(n) if n == "optional"),
        },
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use crate::Env;

    /// Each issue of compiling `src` as `(column, message)`, in the order shown.
    fn issues(src: &str) -> Vec<(usize, String)> {
        let env = Env::new(32);
        match env.compile(src) {
            Ok(_) => Vec::new(),
            Err(e) => e
                .issues
                .iter()
                .map(|i| (i.column, i.message.clone()))
                .collect(),
        }
    }

    fn first_column(src: &str) -> usize {
        issues(src).first().map_or(0, |i| i.0)
    }

    #[test]
    fn a_member_call_fails_at_its_parenthesis() {
        assert_eq!(
            issues("'a'.foo()"),
            [(
                8,
                "undeclared reference to 'foo' (in container '')".to_string()
            )]
        );
    }

    #[test]
    fn a_global_call_fails_at_its_parenthesis() {
        assert_eq!(first_column("foo(1)"), 4);
        assert_eq!(first_column("size(1, 2)"), 5);
    }

    #[test]
    fn an_operator_fails_at_its_token() {
        assert_eq!(first_column("1 + 'a'"), 3);
        assert_eq!(first_column("1 <= 'a'"), 3);
        assert_eq!(first_column("2 * 3 * 'a'"), 7);
        assert_eq!(first_column("-'a'"), 1);
        assert_eq!(first_column("1 ? 2 : 3"), 3);
    }

    #[test]
    fn a_logical_operand_fails_at_itself() {
        assert_eq!(
            issues("1 && 2"),
            [
                (1, "expected type 'bool' but found 'int'".to_string()),
                (6, "expected type 'bool' but found 'int'".to_string())
            ]
        );
    }

    #[test]
    fn a_selection_fails_at_its_dot_and_an_index_at_its_bracket() {
        assert_eq!(
            issues("true.x"),
            [(
                5,
                "type 'bool' does not support field selection".to_string()
            )]
        );
        assert_eq!(
            issues("[1][1u]"),
            [(
                4,
                "found no matching overload for '_[_]' applied to '(list(int), uint)'".to_string()
            )]
        );
    }

    #[test]
    fn a_macro_fails_at_its_call_and_a_bad_variable_at_itself() {
        assert_eq!(
            issues("[1, 2].filter(x, x)"),
            [(
                14,
                "found no matching overload for '_?_:_' applied to '(int, list(int), list(int))'"
                    .to_string()
            )]
        );
        assert_eq!(first_column("[1].all(x.y, true)"), 10);
        assert_eq!(first_column("has(1)"), 5);
    }

    #[test]
    fn a_message_literal_fails_at_its_brace() {
        assert_eq!(first_column("Foo{a: 1}"), 4);
    }

    #[test]
    fn every_issue_is_reported_in_position_order() {
        assert_eq!(
            issues("[1, 2].map(x)"),
            [
                (
                    11,
                    "undeclared reference to 'map' (in container '')".to_string()
                ),
                (
                    12,
                    "undeclared reference to 'x' (in container '')".to_string()
                )
            ]
        );
        assert_eq!(
            issues("math.abs(-1)"),
            [
                (
                    1,
                    "undeclared reference to 'math' (in container '')".to_string()
                ),
                (
                    9,
                    "undeclared reference to 'abs' (in container '')".to_string()
                )
            ]
        );
    }

    /// cel-go's `checkCall` (checker/checker.go): a member call on a dotted name is a
    /// namespaced function only when the env declares the qualified name; otherwise the
    /// target is checked (its root undeclared) and then the function (undeclared too).
    #[test]
    fn an_undeclared_namespaced_function_is_reported_per_segment() {
        let undeclared = |n: &str| format!("undeclared reference to '{n}' (in container '')");
        assert_eq!(
            issues("optional.unwrap([optional.of(1)])"),
            [(1, undeclared("optional")), (16, undeclared("unwrap"))]
        );
        assert_eq!(
            issues("lists.range(3).size()"),
            [(1, undeclared("lists")), (12, undeclared("range"))]
        );
        // Where the version declares it, it resolves.
        assert!(crate::Env::new(33)
            .compile("optional.unwrap([optional.of(1)])")
            .is_ok());
    }

    #[test]
    fn columns_count_characters() {
        assert_eq!(first_column("'é😀' + 1"), 6);
        let shown = Env::new(32).compile("'é' + 1").unwrap_err().to_string();
        assert_eq!(
            shown,
            "ERROR: <input>:1:5: found no matching overload for '_+_' applied to '(string, int)'\n | 'é' + 1\n | .．..^"
        );
    }

    #[test]
    fn validators_run_only_on_a_clean_check() {
        assert_eq!(
            issues("[1, 'a']"),
            [(5, "expected type 'int' but found 'string'".to_string())]
        );
        assert_eq!(
            issues("[1, 'a'] == nope"),
            [(
                13,
                "undeclared reference to 'nope' (in container '')".to_string()
            )]
        );
        assert_eq!(
            issues("duration('soon')"),
            [(10, "invalid duration argument".to_string())]
        );
        assert_eq!(
            issues("'abc'.matches('[')"),
            [(15, "invalid matches argument".to_string())]
        );
    }

    #[test]
    fn the_format_validator_points_at_the_argument_or_the_call() {
        assert_eq!(
            issues("'%d'.format(['a'])"),
            [(
                14,
                "error during formatting: decimal clause can only be used on integers, was given string"
                    .to_string()
            )]
        );
        assert_eq!(
            issues("'%s'.format(['a', 'b'])"),
            [(
                12,
                "too many arguments supplied to string.format (expected 1, got 2)".to_string()
            )]
        );
        assert_eq!(
            issues("'%i'.format([1])"),
            [(
                12,
                "could not parse formatting clause: unrecognized formatting clause \"i\""
                    .to_string()
            )]
        );
        // Literals nested in a format call are exempt from the homogeneous rule.
        assert_eq!(issues("'%s'.format([[1, 'a']])"), []);
    }

    #[test]
    fn an_opt_map_target_is_reported_twice_as_cel_go_expands_it() {
        assert_eq!(
            issues("optional.of(duration('x')).optMap(z, z)"),
            [
                (22, "invalid duration argument".to_string()),
                (22, "invalid duration argument".to_string())
            ]
        );
    }

    #[test]
    fn wrapper_type_names_fail_when_the_program_is_created() {
        let e = Env::new(32)
            .compile("google.protobuf.Int64Value")
            .unwrap_err();
        assert_eq!(
            (e.issues[0].line, e.message()),
            (0, "reference to undefined type: google.protobuf.Int64Value")
        );
    }

    #[test]
    fn a_failed_fold_is_reported_only_after_check_and_validation() {
        assert_eq!(
            issues("int('x') == nope"),
            [(
                13,
                "undeclared reference to 'nope' (in container '')".to_string()
            )]
        );
        let e = Env::new(32).compile("'abc'.find('[')").unwrap_err();
        assert_eq!(e.issues[0].line, 0);
        assert!(e.message().starts_with("error parsing regexp"));
    }
    /// The static type of `src` as cel-go writes it.
    fn static_type(src: &str) -> String {
        match Env::new(32).compile(src) {
            Ok(p) => p.result_type().to_string(),
            Err(e) => format!("error: {}", e.message()),
        }
    }

    #[test]
    fn empty_literals_take_the_type_they_meet() {
        assert_eq!(static_type("true ? [1] : []"), "list(int)");
        assert_eq!(static_type("false ? {'a': 1} : {}"), "map(string, int)");
        assert_eq!(static_type("[[], [1]]"), "list(list(int))");
        assert_eq!(static_type("[] + [1u]"), "list(uint)");
        assert_eq!(static_type("[][?0]"), "optional_type(dyn)");
        // Nothing met: the free type is `dyn`.
        assert_eq!(static_type("[]"), "list(dyn)");
        assert_eq!(static_type("{}"), "map(dyn, dyn)");
        assert_eq!(static_type("[].map(x, x)"), "list(dyn)");
    }

    #[test]
    fn optional_none_takes_the_type_it_meets() {
        assert_eq!(static_type("optional.none().orValue(2)"), "int");
        assert_eq!(
            static_type("optional.none().or(optional.of('a'))"),
            "optional_type(string)"
        );
        assert_eq!(static_type("optional.none()"), "optional_type(dyn)");
        // Its value is `dyn` to a selection or an index (an index of `optional(dyn)` matches
        // the list and the map overload, whose results cel-go finds different: `dyn`).
        assert_eq!(static_type("optional.none().?x"), "optional_type(dyn)");
        assert_eq!(static_type("optional.none()[?0]"), "dyn");
        assert_eq!(static_type("optional_type"), "type(optional_type)");
        assert_eq!(
            static_type("type(optional.none()) == optional_type"),
            "bool"
        );
        // Any other key meets the map overload alone, whose value type stays free.
        assert_eq!(static_type("optional.none()[?'a']"), "optional_type(dyn)");
        assert_eq!(
            static_type("optional.of(dyn({}))[?'a']"),
            "optional_type(dyn)"
        );
        assert_eq!(
            static_type("optional.of(dyn({}))['a']"),
            "optional_type(dyn)"
        );
        assert_eq!(static_type("optional.of(dyn({}))[?dyn(1)]"), "dyn");
    }

    #[test]
    fn a_free_operand_takes_the_first_overload_in_cel_go_declaration_order() {
        // `_+_` is declared bytes first: a free element plus `dyn` is `bytes`.
        assert_eq!(static_type("[].map(v, v + dyn(1))"), "list(bytes)");
        assert_eq!(
            static_type("{}.transformMap(k, v, v + dyn('a'))"),
            "map(dyn, bytes)"
        );
        // Anywhere but a call's operand, a free value is `dyn`.
        assert_eq!(static_type("[][0] && true"), "bool");
        assert_eq!(static_type("[][0] ? 1 : 2"), "int");
        assert_eq!(static_type("[][0].map(x, x)"), "list(dyn)");
        assert_eq!(static_type("[].all(x, x)"), "bool");
        assert_eq!(static_type("[][0][1]"), "dyn");
        assert_eq!(static_type("has([][0].x)"), "bool");
        // The binding holds for the variable through the comprehension: `size` is declared
        // bytes first, so the filtered free list is `list(bytes)`, which `join` refuses.
        assert_eq!(static_type("[].filter(x, x.size() > 1)"), "list(bytes)");
        // `_<_` declares `(int, double)` right after `(int, int)`; `_-_` is double first.
        assert_eq!(static_type("[].filter(x, x < 1.0)"), "list(int)");
        assert_eq!(static_type("[].map(x, x - dyn(1))"), "list(double)");
        assert_eq!(
            static_type("[].filter(x, x.size() > 1).join(',')"),
            "error: found no matching overload for 'join' applied to 'list(bytes).(string)'"
        );
    }

    #[test]
    fn the_first_matching_overload_binds_a_free_type() {
        // `sum` has an overload for `list(int)` first: cel-go's checker keeps its binding.
        assert_eq!(static_type("[].sum()"), "int");
        assert_eq!(static_type("[].min()"), "int");
        // An element type that is not free still picks its own overload.
        assert_eq!(static_type("[1.0].sum()"), "double");
    }

    #[test]
    fn a_free_type_does_not_break_the_homogeneous_literal_rule() {
        assert!(issues("[[], [1]]").is_empty());
        assert!(issues("[{}, {'a': 1}]").is_empty());
        assert_eq!(
            issues("[[1], ['a']]"),
            vec![(
                7,
                "expected type 'list(int)' but found 'list(string)'".to_string()
            )]
        );
    }
}
