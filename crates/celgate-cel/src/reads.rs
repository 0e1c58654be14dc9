//! What the expressions of a ValidatingAdmissionPolicy can read of `object` and `oldObject`:
//! an abstract interpretation of the parsed tree giving one [`Projection`] per root.
//!
//! Each expression is given the set of *origins* its value may come from: a root (`object`,
//! `oldObject`, or `request`, whose `object`/`oldObject` members are taken as those roots)
//! and a path of member names and "every element or member" steps. A selection or a constant
//! string index extends a path by a name; any other index by "every member" (a computed key
//! may name any of them). A presence test, an iteration or a selection needs its container
//! built but not the rest ("touched"); every other use (a function or operator argument, a
//! literal's element, a result) needs the value whole. Only the conditional, `dyn()`,
//! `optional.of()`, `.value()`, `.or()` and `.orValue()` pass their operands' origins on.
//! A composited variable (`variables.name`) carries its own expression's origins; anything
//! the analysis cannot follow reads the roots whole. Kubernetes has no counterpart: this only
//! decides how much of the decoded review must be kept (see [`crate::projection`]).

use std::collections::HashMap;

use crate::ast::{Comprehension, Expr, ExprKind, Literal, MacroKind};
use crate::error::CompileError;
use crate::parser::parse_for;
use crate::program::COMPILER_STACK;
use crate::projection::{Projection, Projections};

/// The parts of `object` and `oldObject` a set of expressions can read, and whether they
/// read the `request` variable at all.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reads {
    /// What of `object` is read.
    pub object: Projection,
    /// What of `oldObject` is read.
    pub old_object: Projection,
    /// Whether an expression names the `request` variable (not a comprehension variable of
    /// that name): without it, the value of `request` is never read and need not be built.
    pub request: bool,
}

impl Reads {
    /// Both roots whole.
    pub fn whole() -> Reads {
        Reads {
            object: Projection::whole(),
            old_object: Projection::whole(),
            request: true,
        }
    }

    /// Widens `self` to also cover `other`.
    pub fn union(&mut self, other: &Reads) {
        self.object.union(&other.object);
        self.old_object.union(&other.old_object);
        self.request |= other.request;
    }

    /// Both projections [finished](Projection::finish), as a parser reads them.
    pub fn finish(&mut self) {
        self.object.finish();
        self.old_object.finish();
    }

    /// The parser's paths for a document holding the object at `object` and the old object
    /// at `old_object` (keys from the root); empty (a full parse) when both are read whole.
    pub fn at(&self, object: &[&str], old_object: &[&str]) -> Projections {
        let mut paths = Projections::new();
        if !(self.object.is_whole() && self.old_object.is_whole()) {
            paths.project(object, &self.object);
            paths.project(old_object, &self.old_object);
        }
        paths
    }

    /// Whether both roots are read whole (a projected parse would build everything).
    pub fn is_whole(&self) -> bool {
        self.object.is_whole() && self.old_object.is_whole()
    }
}

/// Where a value may come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Root {
    Object,
    OldObject,
    /// `request`: its `object` and `oldObject` members lead to the two roots.
    Request,
}

/// One step of a path from a root.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Step {
    /// The member of this name.
    Field(Box<str>),
    /// Every element of a list, or every member of a map.
    Each,
}

/// One place a value may come from.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Origin {
    root: Root,
    path: Vec<Step>,
}

impl Origin {
    fn with(&self, step: Step) -> Origin {
        let mut path = self.path.clone();
        path.push(step);
        Origin {
            root: self.root,
            path,
        }
    }
}

/// The origins of one value (a short list: duplicates are dropped).
type Origins = Vec<Origin>;

fn join(mut a: Origins, b: Origins) -> Origins {
    for o in b {
        if !a.contains(&o) {
            a.push(o);
        }
    }
    a
}

/// The analysis of one policy: its composited variables in declaration order, and what its
/// expressions read so far.
#[derive(Debug, Default)]
pub struct Analysis {
    reads: Reads,
    /// Each composited variable declared so far, with the origins of its value (empty for
    /// one that did not compile: reading it is an error, not a read).
    variables: Vec<(String, Origins)>,
    /// The place of each variable's first declaration by name (a policy may declare
    /// thousands, each expression naming some).
    index: HashMap<String, usize>,
}

impl Analysis {
    /// An analysis that has read nothing yet.
    pub fn new() -> Analysis {
        Analysis::default()
    }

    /// Adds what evaluating `expr` (a validation, message, audit annotation or match
    /// condition: its result is used whole) reads.
    pub fn expr(&mut self, expr: &Expr) {
        let mut walk = Walk {
            analysis: self,
            scope: Vec::new(),
        };
        let o = walk.expr(expr);
        walk.whole(&o);
    }

    /// Declares the next composited variable, `name`, from its parsed expression (`None`
    /// when it did not compile), adding what evaluating it reads; its value's origins are
    /// kept for the expressions that name it. A name declared twice keeps its first place,
    /// as the environment does.
    pub fn variable(&mut self, name: &str, expr: Option<&Expr>) {
        let origins = match expr {
            Some(e) => {
                let mut walk = Walk {
                    analysis: self,
                    scope: Vec::new(),
                };
                let o = walk.expr(e);
                // Evaluating the variable reaches these values even when nothing reads them
                // further (`has(variables.x)` evaluates `x`).
                walk.touch(&o);
                o
            }
            None => Vec::new(),
        };
        self.index
            .entry(name.to_string())
            .or_insert(self.variables.len());
        self.variables.push((name.to_string(), origins));
    }

    /// [`Analysis::expr`] of `source`, parsed with the grammar of Kubernetes 1.`version`.
    /// Parsing and the analysis run on a thread with the compiler's stack, as compiling
    /// does (both recurse once per nesting level).
    pub fn expr_source(&mut self, source: &str, version: u16) -> Result<(), CompileError> {
        on_big_stack(|| {
            let ast = parse_for(source, version)?;
            self.expr(&ast);
            Ok(())
        })
    }

    /// [`Analysis::variable`] of `source` (`None` when it did not compile).
    pub fn variable_source(
        &mut self,
        name: &str,
        source: Option<&str>,
        version: u16,
    ) -> Result<(), CompileError> {
        on_big_stack(|| {
            let ast = source.map(|s| parse_for(s, version)).transpose()?;
            self.variable(name, ast.as_ref());
            Ok(())
        })
    }

    /// [`Analysis::variable_source`] and [`Analysis::expr_source`] of each of `sources` in
    /// order, on one thread with the compiler's stack (a policy's expressions together: one
    /// thread per policy, not per expression).
    pub fn sources(&mut self, sources: &[Source<'_>], version: u16) -> Result<(), CompileError> {
        on_big_stack(|| {
            for source in sources {
                match *source {
                    Source::Variable(name, source) => {
                        let ast = source.map(|s| parse_for(s, version)).transpose()?;
                        self.variable(name, ast.as_ref());
                    }
                    Source::Expr(source) => {
                        let ast = parse_for(source, version)?;
                        self.expr(&ast);
                    }
                }
            }
            Ok(())
        })
    }

    /// What the expressions added so far read, [finished](Projection::finish).
    pub fn reads(&self) -> Reads {
        let mut r = self.reads.clone();
        r.finish();
        r
    }
}

/// One expression for [`Analysis::sources`], by its source text.
#[derive(Debug, Clone, Copy)]
pub enum Source<'a> {
    /// A composited variable: its name and its source (`None` when it did not compile).
    Variable(&'a str, Option<&'a str>),
    /// Any other expression.
    Expr(&'a str),
}

/// Runs `work` on a thread with [`COMPILER_STACK`]; a failure to start one, or a panic, reads
/// as "cannot analyse", which the caller answers with the whole roots.
fn on_big_stack<T: Send>(
    work: impl FnOnce() -> Result<T, CompileError> + Send,
) -> Result<T, CompileError> {
    std::thread::scope(|scope| {
        let handle = std::thread::Builder::new()
            .name("cel-reads".into())
            .stack_size(COMPILER_STACK)
            .spawn_scoped(scope, work);
        match handle {
            Ok(h) => h.join().unwrap_or_else(|_| {
                Err(CompileError::general(
                    "",
                    "internal error: analysis panicked",
                ))
            }),
            Err(e) => Err(CompileError::general(
                "",
                format!("cannot start analysis thread: {e}"),
            )),
        }
    })
}

/// One walk over an expression: the comprehension variables in scope, innermost last.
struct Walk<'a> {
    analysis: &'a mut Analysis,
    scope: Vec<(String, Origins)>,
}

impl Walk<'_> {
    fn is_local(&self, name: &str) -> bool {
        self.scope.iter().any(|(n, _)| n == name)
    }

    /// The projection an origin's root reads into (`request` is resolved before).
    fn root(&mut self, root: Root) -> &mut Projection {
        match root {
            Root::Object | Root::Request => &mut self.analysis.reads.object,
            Root::OldObject => &mut self.analysis.reads.old_object,
        }
    }

    /// `o` resolved out of `request`: `request.object...` is an `object` path; `request`
    /// itself, or every member of it, is both roots whole (the flag); another member of it is
    /// neither.
    fn resolve(o: &Origin) -> Vec<(Origin, bool)> {
        if o.root != Root::Request {
            return vec![(o.clone(), false)];
        }
        let member = |root, rest: &[Step]| {
            vec![(
                Origin {
                    root,
                    path: rest.to_vec(),
                },
                false,
            )]
        };
        match o.path.split_first() {
            None | Some((Step::Each, _)) => [Root::Object, Root::OldObject]
                .into_iter()
                .map(|root| {
                    let origin = Origin {
                        root,
                        path: Vec::new(),
                    };
                    (origin, true)
                })
                .collect(),
            Some((Step::Field(f), rest)) => match &**f {
                "object" => member(Root::Object, rest),
                "oldObject" => member(Root::OldObject, rest),
                _ => Vec::new(),
            },
        }
    }

    /// Marks the containers on the way to each origin as built, and the value at it as
    /// needed whole (`whole`) or only present (not).
    fn mark(&mut self, origins: &Origins, whole: bool) {
        for o in origins {
            for (o, forced) in Self::resolve(o) {
                let mut p = self.root(o.root);
                for step in &o.path {
                    if p.is_whole() {
                        break;
                    }
                    p = match step {
                        Step::Field(f) => p.field_mut(f),
                        Step::Each => p.each_mut(),
                    };
                }
                if whole || forced {
                    p.set_whole();
                }
            }
        }
    }

    fn whole(&mut self, origins: &Origins) {
        self.mark(origins, true);
    }

    fn touch(&mut self, origins: &Origins) {
        self.mark(origins, false);
    }

    /// Both roots whole: what the analysis cannot follow.
    fn give_up(&mut self) {
        self.analysis.reads = Reads::whole();
    }

    fn extend(&mut self, origins: Origins, step: Step) -> Origins {
        let out: Origins = origins.iter().map(|o| o.with(step.clone())).collect();
        // The container is built to be selected in or iterated over.
        self.touch(&out);
        out
    }

    /// The origins of a composited variable.
    fn variable(&mut self, name: &str) -> Origins {
        let found = self.analysis.index.get(name).copied();
        match found.and_then(|i| self.analysis.variables.get(i)) {
            Some((_, o)) => o.clone(),
            None => {
                // Not declared before: the expression did not compile in this order.
                self.give_up();
                Vec::new()
            }
        }
    }

    /// Whether `e` is the bare `variables` (not a comprehension variable of that name).
    fn is_variables(&self, e: &Expr) -> bool {
        matches!(&e.kind, ExprKind::Ident(n) if n == "variables" && !self.is_local(n))
    }

    fn expr(&mut self, e: &Expr) -> Origins {
        match &e.kind {
            ExprKind::Literal(_) => Vec::new(),
            ExprKind::Ident(name) => self.ident(name),
            ExprKind::Select { operand, field, .. } => {
                if self.is_variables(operand) {
                    return self.variable(field);
                }
                let o = self.expr(operand);
                self.extend(o, Step::Field(field.as_str().into()))
            }
            ExprKind::Has { operand, field } => {
                if self.is_variables(operand) {
                    // Evaluates the variable (its reads are counted where it is declared)
                    // and finds its name: nothing of its value is read.
                    self.variable(field);
                    return Vec::new();
                }
                let o = self.expr(operand);
                self.extend(o, Step::Field(field.as_str().into()));
                Vec::new()
            }
            ExprKind::Index { operand, index, .. } => {
                let o = self.expr(operand);
                if let ExprKind::Literal(Literal::String(key)) = &index.kind {
                    return self.extend(o, Step::Field(key.as_str().into()));
                }
                let i = self.expr(index);
                self.whole(&i);
                self.extend(o, Step::Each)
            }
            ExprKind::Call { func, target, args } => self.call(func, target.as_deref(), args),
            ExprKind::List { elements, .. } => {
                for el in elements {
                    let o = self.expr(el);
                    self.whole(&o);
                }
                Vec::new()
            }
            ExprKind::Map { entries } => {
                for entry in entries {
                    let k = self.expr(&entry.key);
                    self.whole(&k);
                    let v = self.expr(&entry.value);
                    self.whole(&v);
                }
                Vec::new()
            }
            ExprKind::Struct { fields, .. } => {
                for f in fields {
                    let o = self.expr(&f.value);
                    self.whole(&o);
                }
                Vec::new()
            }
            ExprKind::Comprehension(c) => self.comprehension(c),
        }
    }

    fn ident(&mut self, name: &str) -> Origins {
        if let Some((_, o)) = self.scope.iter().rev().find(|(n, _)| n == name) {
            return o.clone();
        }
        let root = match name {
            "object" => Root::Object,
            "oldObject" => Root::OldObject,
            "request" => {
                self.analysis.reads.request = true;
                Root::Request
            }
            "variables" => {
                // The composited variables as a whole: each one's value may be read.
                let all: Origins = self
                    .analysis
                    .variables
                    .iter()
                    .flat_map(|(_, o)| o.clone())
                    .collect();
                self.whole(&all);
                return Vec::new();
            }
            // `params`, `namespaceObject`, `authorizer`: not the review's objects.
            _ => return Vec::new(),
        };
        vec![Origin {
            root,
            path: Vec::new(),
        }]
    }

    fn call(&mut self, func: &str, target: Option<&Expr>, args: &[Expr]) -> Origins {
        let optional_namespace = matches!(target.map(|t| &t.kind), Some(ExprKind::Ident(n)) if n == "optional" && !self.is_local(n));
        match (func, target, args) {
            ("_?_:_", None, [c, a, b]) => {
                let c = self.expr(c);
                self.whole(&c);
                let a = self.expr(a);
                let b = self.expr(b);
                return join(a, b);
            }
            ("dyn", None, [x]) | ("optional.of", None, [x]) => return self.expr(x),
            ("of", Some(_), [x]) if optional_namespace => return self.expr(x),
            ("value", Some(t), []) => return self.expr(t),
            ("or" | "orValue", Some(t), [x]) => {
                let t = self.expr(t);
                let x = self.expr(x);
                return join(t, x);
            }
            _ => {}
        }
        for a in target.into_iter().chain(args) {
            let o = self.expr(a);
            self.whole(&o);
        }
        Vec::new()
    }

    fn comprehension(&mut self, c: &Comprehension) -> Origins {
        let range = self.expr(&c.range);
        let optional = matches!(c.kind, MacroKind::OptMap | MacroKind::OptFlatMap);
        // Iterated: the container is built, each element or member only as the body needs.
        let each = if optional {
            range.clone()
        } else {
            self.extend(range.clone(), Step::Each)
        };
        let depth = self.scope.len();
        match &c.var2 {
            // Two variables: an index or a key (a number or a string), then the element or
            // the member's value.
            Some(v2) => {
                self.scope.push((c.var.clone(), Vec::new()));
                self.scope.push((v2.clone(), each.clone()));
            }
            // One: an element, or a map's key (taken as its member, which covers it).
            None => self.scope.push((c.var.clone(), each.clone())),
        }
        if let Some(f) = &c.filter {
            let o = self.expr(f);
            self.whole(&o);
        }
        let body = self.expr(&c.body);
        self.scope.truncate(depth);
        match c.kind {
            MacroKind::OptMap | MacroKind::OptFlatMap => body,
            MacroKind::All
            | MacroKind::Exists
            | MacroKind::ExistsOne
            | MacroKind::Map
            | MacroKind::TransformList
            | MacroKind::TransformMap
            | MacroKind::TransformMapEntry => {
                self.whole(&body);
                Vec::new()
            }
            // The result holds the range's own elements.
            MacroKind::Filter | MacroKind::SortBy => {
                self.whole(&body);
                self.whole(&each);
                Vec::new()
            }
        }
    }
}

/// A projection as text, for tests and diagnostics: `*` whole, `{a:…,[]:…}` a container
/// with named members and every other element or member (`[]`), `-` nothing below.
pub fn show(p: &Projection) -> String {
    if p.is_whole() {
        return "*".into();
    }
    if p.is_none() {
        return "-".into();
    }
    let mut parts: Vec<String> = p
        .fields()
        .map(|(k, v)| format!("{k}:{}", show(v)))
        .collect();
    if let Some(each) = p.each() {
        parts.push(format!("[]:{}", show(each)));
    }
    format!("{{{}}}", parts.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reads of `exprs` after the variables `vars` (name, source), as text:
    /// `(object, oldObject)`.
    fn reads_with(vars: &[(&str, &str)], exprs: &[&str]) -> (String, String) {
        let r = analysed(vars, exprs);
        (show(&r.object), show(&r.old_object))
    }

    /// The reads of `exprs` after the variables `vars` (name, source).
    fn analysed(vars: &[(&str, &str)], exprs: &[&str]) -> Reads {
        let mut a = Analysis::new();
        for (name, src) in vars {
            a.variable_source(name, Some(src), crate::NEWEST_MINOR)
                .unwrap();
        }
        for src in exprs {
            a.expr_source(src, crate::NEWEST_MINOR).unwrap();
        }
        a.reads()
    }

    fn object(src: &str) -> String {
        reads_with(&[], &[src]).0
    }

    /// Whether `request` is read: named anywhere, in a variable or not, but not as a
    /// comprehension variable of that name.
    #[test]
    fn the_request_variable_is_read_where_it_is_named() {
        let reads_request = |vars: &[(&str, &str)], exprs: &[&str]| analysed(vars, exprs).request;
        assert!(reads_request(&[], &["request.operation == 'CREATE'"]));
        assert!(reads_request(&[], &["has(request.dryRun)"]));
        assert!(reads_request(
            &[],
            &["object.spec.x == 1", "dyn(request) != null"]
        ));
        assert!(reads_request(
            &[("r", "request.userInfo")],
            &["object.a == 1"]
        ));
        assert!(reads_request(&[], &["[1].all(x, [request].size() > 0)"]));
        assert!(!reads_request(
            &[],
            &["object.spec.replicas > 1", "oldObject == null"]
        ));
        assert!(!reads_request(&[], &["[1, 2].all(request, request > 0)"]));
        assert!(!reads_request(
            &[("v", "object.spec")],
            &["variables.v.x == 1"]
        ));
        assert!(Reads::whole().request);
        let mut r = Reads::default();
        r.union(&Reads::whole());
        assert!(r.request, "a union reads what either reads");
    }

    #[test]
    fn whole_values_compared_or_held_are_read_whole() {
        assert_eq!(
            reads_with(&[], &["object == oldObject"]),
            ("*".into(), "*".into())
        );
        assert_eq!(object("[object][0].spec == 1"), "*");
        assert_eq!(object("{'a': object}.a.spec == 1"), "*");
        assert_eq!(object("object.spec.replicas > 1"), "{spec:{replicas:*}}");
        assert_eq!(
            object("size(object.spec.containers) > 1"),
            "{spec:{containers:*}}"
        );
        assert_eq!(object("object.spec"), "{spec:*}", "a result is read whole");
    }

    #[test]
    fn selections_and_constant_indexes_name_members() {
        assert_eq!(
            object("object.metadata.name == 'x' && object['spec']['a'] == 1"),
            "{metadata:{name:*},spec:{a:*}}"
        );
        assert_eq!(
            object("object.spec.containers[0].image == 'x'"),
            "{spec:{containers:{[]:{image:*}}}}"
        );
        assert_eq!(object("object.?spec.?x.orValue(1) == 1"), "{spec:{x:*}}");
        assert_eq!(object("object.spec[?'x'].value() == 1"), "{spec:{x:*}}");
    }

    #[test]
    fn a_computed_key_may_name_any_member() {
        let (object, _) = reads_with(&[], &["object[params.key] == 1"]);
        assert_eq!(object, "{[]:*}");
        assert_eq!(
            self::object("object.metadata.labels.all(k, object.metadata.labels[k] != '')"),
            "{metadata:{labels:{[]:*}}}"
        );
    }

    #[test]
    fn presence_tests_keep_the_key_only() {
        assert_eq!(object("has(object.spec.x)"), "{spec:{x:-}}");
        assert_eq!(
            object("has(object.spec.x) && object.spec.y == 1"),
            "{spec:{x:-,y:*}}"
        );
    }

    #[test]
    fn pass_through_constructs_keep_origins() {
        assert_eq!(object("dyn(object).spec == 1"), "{spec:*}");
        assert_eq!(
            reads_with(&[], &["(1 > 0 ? object : oldObject).spec.x == 1"]),
            ("{spec:{x:*}}".into(), "{spec:{x:*}}".into())
        );
        assert_eq!(object("optional.of(object).value().spec == 1"), "{spec:*}");
        assert_eq!(
            object("object.?spec.or(optional.of(object.status)).value().x == 1"),
            "{spec:{x:*},status:{x:*}}"
        );
    }

    #[test]
    fn comprehensions_extend_their_range_by_each_element() {
        assert_eq!(
            object("object.spec.containers.all(c, c.image != '')"),
            "{spec:{containers:{[]:{image:*}}}}"
        );
        assert_eq!(
            object("object.spec.containers.all(i, c, c.image != '')"),
            "{spec:{containers:{[]:{image:*}}}}"
        );
        assert_eq!(
            object("object.spec.containers.exists(c, true)"),
            "{spec:{containers:{[]:-}}}",
            "iterated, elements not read"
        );
        assert_eq!(
            object("object.spec.containers.map(c, c).exists(c, c.name == 'x')"),
            "{spec:{containers:{[]:*}}}"
        );
        assert_eq!(
            object("object.spec.containers.filter(c, c.x == 1).size() > 0"),
            "{spec:{containers:{[]:*}}}"
        );
        assert_eq!(
            object("object.?spec.optMap(s, s.x).orValue(0) == 1"),
            "{spec:{x:*}}"
        );
    }

    #[test]
    fn comprehension_variables_shadow_the_roots() {
        assert_eq!(object("[1].all(object, object == 1)"), "-");
        assert_eq!(
            object("[1].all(variables, variables.x == 1)"),
            "-",
            "a local named `variables` is not the composited variables"
        );
    }

    #[test]
    fn request_leads_to_the_roots() {
        assert_eq!(
            object("request.object.metadata.name == 'x'"),
            "{metadata:{name:*}}"
        );
        assert_eq!(object("request.userInfo.username == 'x'"), "-");
        assert_eq!(
            reads_with(&[], &["request == request"]),
            ("*".into(), "*".into())
        );
        assert_eq!(object("request.all(k, k == 'a')"), "*");
    }

    #[test]
    fn composited_variables_carry_their_origins() {
        assert_eq!(
            reads_with(&[("x", "object")], &["variables.x.spec.a == 1"]).0,
            "{spec:{a:*}}"
        );
        assert_eq!(
            reads_with(
                &[("x", "object.spec"), ("y", "variables.x.containers")],
                &["variables.y.all(c, c.name != '')"]
            )
            .0,
            "{spec:{containers:{[]:{name:*}}}}"
        );
        assert_eq!(
            reads_with(&[("x", "object.spec.a")], &["has(variables.x)"]).0,
            "{spec:{a:-}}",
            "evaluated, not read"
        );
        assert_eq!(
            reads_with(&[("x", "object.spec")], &["variables.x == 1"]).0,
            "{spec:*}"
        );
        assert_eq!(
            reads_with(&[("x", "object.spec")], &["size(variables) > 0"]).0,
            "{spec:*}",
            "the variables as a whole"
        );
        assert_eq!(
            reads_with(&[], &["variables.nope == 1"]),
            ("*".into(), "*".into()),
            "an unknown variable: whole"
        );
        assert_eq!(
            reads_with(&[("x", "object.spec.a == 1")], &["variables.x"]).0,
            "{spec:{a:*}}",
            "a variable's own reads count"
        );
    }
}
