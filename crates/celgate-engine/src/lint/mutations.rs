//! `celgate lint` for MutatingAdmissionPolicies: the mutations checked against the schema of
//! each kind the policy's matchConstraints name, for what the API server does not check when
//! the policy is created (`Object` types are dynamic: `cel/mutation/dynamic/objects.go`) but
//! refuses at run time.
//!
//! An apply configuration's `Object...{field: value}` literals are followed along the kind's
//! schema as the API server converts the result to a typed object
//! (`mutating/patch/smd.go`, structured-merge-diff's `typed` package): a field the schema
//! does not declare (`field not declared in schema`, unless it preserves unknown fields), a
//! type name that does not match the literal's place (`CheckTypeNamesMatchFieldPathNames`:
//! a field's value is named after its parent's name and the field, list elements and map
//! values after the list's or map's own), a literal of the wrong type for its field (SMD's
//! `expected string, got ...`), `null` (which never removes a field there), a CEL map where
//! a list needs objects, and a list-map element without one of its keys
//! (`x-kubernetes-list-map-keys`: CRDs; the built-in table does not carry them). A JSON
//! patch's literal `path` and `from` are followed along the schema too (an unknown field is
//! the API server's `strict decoding error: unknown field` for a built-in kind; a custom
//! resource's is pruned). Only literals are judged: a value computed by an expression is
//! known at run time only.
//!
//! Every walk is iterative over the parsed tree (whose size and depth the parser bounds), and
//! at most [`celgate_cel::MAX_ISSUES`] findings are shown per expression and kind, as cel-go
//! shows its checker's errors.

use std::collections::HashSet;

use celgate_cel::ast::{Expr, ExprKind, Literal};
use celgate_cel::mutation::{JSON_PATCH_TYPE, OBJECT_TYPE};
use celgate_cel::vap::Decls;
use celgate_cel::{CompileError, Type, MAX_ISSUES};

use super::{types_to_check, ExpressionWarning, PolicyKind, PolicyLint};
use crate::crd::schema::Schema;
use crate::model::MutatingPolicy;
use crate::schemas::Kinds;

/// One thing found in one expression: where (a byte offset) and what.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Found {
    pos: u32,
    message: String,
}

/// Checks the mutations of `policy` against the schema of each kind its matchConstraints
/// name, with the CEL environment of Kubernetes 1.`version`. An expression that does not
/// compile is left to the creation-time check ([`super::check_objects`]).
pub(crate) fn lint_mutating_policy(
    policy: &MutatingPolicy,
    kinds: &Kinds,
    version: u16,
) -> PolicyLint {
    let shared = crate::policy::compile_mutating::shared_parts(policy);
    let mut checked = Vec::new();
    let mut schemas = Vec::new();
    let mut unresolved = Vec::new();
    for gvk in types_to_check(&shared, kinds) {
        match kinds.schema(&gvk) {
            Some(s) => {
                checked.push(gvk);
                schemas.push(s);
            }
            None => unresolved.push(gvk),
        }
    }
    let env = mutation_env(policy, version);
    let mut warnings = Vec::new();
    for (i, m) in policy.spec.mutations.iter().enumerate() {
        let (field, expression, json_patch) = match m.patch_type.as_str() {
            "JSONPatch" => ("jsonPatch", &m.json_patch, true),
            _ => ("applyConfiguration", &m.apply_configuration, false),
        };
        let Some(source) = expression.as_ref().map(|e| e.expression.as_str()) else {
            continue;
        };
        if source.is_empty() || schemas.is_empty() {
            continue;
        }
        let Ok((_, typed)) = env.compile_typed(source) else {
            continue;
        };
        let blocks: Vec<String> = checked
            .iter()
            .zip(&schemas)
            .filter_map(|(gvk, schema)| {
                let found = if json_patch {
                    check_json_patch(&typed.expr, schema)
                } else {
                    check_apply_configuration(&typed.expr, schema)
                };
                (!found.is_empty()).then(|| format!("{gvk}: {}\n", render(source, found)))
            })
            .collect();
        if !blocks.is_empty() {
            warnings.push(ExpressionWarning {
                field_ref: format!("spec.mutations[{i}].{field}.expression"),
                warning: blocks.join("\n"),
            });
        }
    }
    PolicyLint {
        kind: PolicyKind::Mutating,
        name: policy.metadata.name.clone(),
        checked,
        unresolved,
        warnings,
    }
}

/// The environment the mutations compile in (`compile_mutating`'s), with every variable
/// `dyn`: only the tree is needed here, and a variable's type does not change it.
fn mutation_env(policy: &MutatingPolicy, version: u16) -> celgate_cel::Env {
    let decls = Decls {
        params: policy.spec.param_kind.is_some(),
        authorizer: true,
    };
    let (mut env, _) = celgate_cel::mutation::map_env(version, decls);
    let variables = policy
        .spec
        .variables
        .iter()
        .map(|v| (v.name.clone(), Type::Dyn))
        .collect();
    env.declare_lazy("variables", variables);
    env
}

/// The findings as cel-go shows compile errors: by position, each with the source line and a
/// caret, at most [`MAX_ISSUES`].
fn render(source: &str, mut found: Vec<Found>) -> String {
    found.sort_by_key(|f| f.pos);
    let truncated = found.len().saturating_sub(MAX_ISSUES);
    found.truncate(MAX_ISSUES);
    let mut out: Vec<String> = found
        .into_iter()
        .map(|f| CompileError::at(source, f.pos as usize, f.message).to_string())
        .collect();
    if truncated > 0 {
        out.push(format!("{truncated} more errors were truncated"));
    }
    out.join("\n")
}

/// What the schema lets a value be, as structured-merge-diff reads an OpenAPI schema.
#[derive(Debug, Clone, Copy)]
enum Shape<'s> {
    /// Anything: no type (a `Quantity`), an object without properties or value schema
    /// (`RawExtension`), or no schema at all (under a field that preserves unknown fields).
    Any,
    /// A string, a number, a boolean, or either an integer or a string.
    Scalar(Scalar),
    /// An object with declared fields.
    Struct(&'s Schema),
    /// An object whose values all have one schema.
    Map(&'s Schema),
    /// A list, with its items' schema when it has one.
    List(Option<&'s Schema>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scalar {
    String,
    Numeric,
    Boolean,
    IntOrString,
}

fn shape(s: Option<&Schema>) -> Shape<'_> {
    let Some(s) = s else {
        return Shape::Any;
    };
    if s.int_or_string {
        return Shape::Scalar(Scalar::IntOrString);
    }
    match s.type_.as_str() {
        "string" => Shape::Scalar(Scalar::String),
        "integer" | "number" => Shape::Scalar(Scalar::Numeric),
        "boolean" => Shape::Scalar(Scalar::Boolean),
        "array" => Shape::List(s.items.as_deref()),
        _ if !s.properties.is_empty() => Shape::Struct(s),
        "object" => s.additional_schema().map_or(Shape::Any, Shape::Map),
        _ => Shape::Any,
    }
}

/// SMD's word for what a shape expects (`expected string, got ...`).
fn expected(shape: Shape<'_>) -> Option<&'static str> {
    Some(match shape {
        Shape::Any => return None,
        Shape::Scalar(Scalar::String) => "string",
        Shape::Scalar(Scalar::Numeric) => "numeric (int or float)",
        Shape::Scalar(Scalar::Boolean) => "boolean",
        Shape::Scalar(Scalar::IntOrString) => "int or string",
        Shape::Struct(_) | Shape::Map(_) => "map",
        Shape::List(_) => "list",
    })
}

/// The CEL type of a literal, as a message names it.
fn literal_type(l: &Literal) -> &'static str {
    match l {
        Literal::Null => "null",
        Literal::Bool(_) => "bool",
        Literal::Int(_) => "int",
        Literal::Uint(_) => "uint",
        Literal::Double(_) => "double",
        Literal::String(_) => "string",
        Literal::Bytes(_) => "bytes",
    }
}

/// Whether a literal of this type is a value of the scalar.
fn accepts(scalar: Scalar, l: &Literal) -> bool {
    matches!(
        (scalar, l),
        (Scalar::String, Literal::String(_))
            | (Scalar::Boolean, Literal::Bool(_))
            | (
                Scalar::Numeric,
                Literal::Int(_) | Literal::Uint(_) | Literal::Double(_)
            )
            | (
                Scalar::IntOrString,
                Literal::Int(_) | Literal::Uint(_) | Literal::String(_)
            )
    )
}

/// Whether a type name is `Object` or `Object.<path>`.
fn is_object_name(name: &str) -> bool {
    name == OBJECT_TYPE
        || name
            .strip_prefix(OBJECT_TYPE)
            .is_some_and(|rest| rest.starts_with('.'))
}

/// One value to check: the expression, its schema (`None`: anything), the field path for
/// messages (`.spec.containers[0].name`), and the type name an `Object` literal there must
/// have (`Object.spec.containers`).
struct Place<'e, 's> {
    expr: &'e Expr,
    schema: Option<&'s Schema>,
    path: String,
    type_name: String,
}

/// The findings of an apply configuration against a kind's schema: each `Object` literal
/// whose type name leads somewhere in the schema is checked with what it holds; a literal
/// inside another is checked at its place in the outer one.
fn check_apply_configuration(root: &Expr, schema: &Schema) -> Vec<Found> {
    let mut found = Vec::new();
    let mut placed: HashSet<*const Expr> = HashSet::new();
    let mut nodes = vec![root];
    while let Some(e) = nodes.pop() {
        nodes.extend(e.children().into_iter().rev());
        let ExprKind::Struct { type_name, .. } = &e.kind else {
            continue;
        };
        if !is_object_name(type_name) || placed.contains(&(e as *const Expr)) {
            continue;
        }
        match resolve(schema, type_name) {
            Resolved::At(s, path) => check_place(
                Place {
                    expr: e,
                    schema: s,
                    path,
                    type_name: type_name.clone(),
                },
                &mut placed,
                &mut found,
            ),
            Resolved::Undeclared(path) => found.push(Found {
                pos: e.pos,
                message: format!("{path}: field not declared in schema (type name {type_name:?})"),
            }),
        }
    }
    found.sort_by_key(|f| f.pos);
    found
}

enum Resolved<'s> {
    /// The schema of the literal's place (`None`: anything goes there) and its field path.
    At(Option<&'s Schema>, String),
    /// The first field of the type name the schema does not declare, as a path.
    Undeclared(String),
}

/// The schema an `Object.<a>.<b>` literal stands for: each name a field of the one before,
/// through lists (their items) and maps (their values), which add no name.
fn resolve<'s>(root: &'s Schema, type_name: &str) -> Resolved<'s> {
    let mut current = Some(root);
    let mut path = String::new();
    let fields = type_name
        .strip_prefix(OBJECT_TYPE)
        .unwrap_or_default()
        .split('.')
        .filter(|f| !f.is_empty());
    for field in fields {
        current = element(current);
        match shape(current) {
            Shape::Struct(s) => match s.property(field) {
                Some(p) => current = Some(p),
                None if s.preserve_unknown_fields => return Resolved::At(None, path),
                None => return Resolved::Undeclared(format!("{path}.{field}")),
            },
            Shape::Any => return Resolved::At(None, path),
            _ => return Resolved::Undeclared(format!("{path}.{field}")),
        }
        path.push('.');
        path.push_str(field);
    }
    Resolved::At(element(current), path)
}

/// Through lists and maps to the schema of what they hold.
fn element(mut s: Option<&Schema>) -> Option<&Schema> {
    loop {
        match shape(s) {
            Shape::List(items) => s = items,
            Shape::Map(values) => s = Some(values),
            _ => return s,
        }
    }
}

/// Checks one literal at its place and everything literal it holds (iteratively).
fn check_place<'e, 's>(
    first: Place<'e, 's>,
    placed: &mut HashSet<*const Expr>,
    found: &mut Vec<Found>,
) {
    let mut todo = vec![first];
    while let Some(p) = todo.pop() {
        let at = shape(p.schema);
        let mut wrong = |got: &str| {
            if let Some(want) = expected(at) {
                found.push(Found {
                    pos: p.expr.pos,
                    message: format!("{}: expected {want}, got {got}", shown(&p.path)),
                });
            }
        };
        match &p.expr.kind {
            ExprKind::Literal(Literal::Null) => found.push(Found {
                pos: p.expr.pos,
                message: format!(
                    "{}: null is refused at run time (an apply configuration cannot remove a field)",
                    shown(&p.path)
                ),
            }),
            ExprKind::Literal(l) => match at {
                Shape::Scalar(s) if accepts(s, l) => {}
                Shape::Any => {}
                _ => wrong(literal_type(l)),
            },
            ExprKind::Struct { type_name, fields } => {
                placed.insert(p.expr as *const Expr);
                if !is_object_name(type_name) {
                    continue;
                }
                if *type_name != p.type_name {
                    // One finding per cause: what it holds is not looked at on its own.
                    place_all(p.expr, placed);
                    found.push(Found {
                        pos: p.expr.pos,
                        message: format!(
                            "type mismatch: unexpected type name {type_name:?}, expected {:?}, which matches field name path from root Object type",
                            p.type_name
                        ),
                    });
                    continue;
                }
                let (declared, open) = match at {
                    Shape::Struct(s) => (Some(s), s.preserve_unknown_fields),
                    Shape::Any => (None, true),
                    Shape::Map(values) => {
                        // Its fields are the map's keys.
                        for f in fields {
                            todo.push(Place {
                                expr: &f.value,
                                schema: Some(values),
                                path: format!("{}.{}", p.path, f.name),
                                type_name: format!("{}.{}", p.type_name, f.name),
                            });
                        }
                        continue;
                    }
                    _ => {
                        wrong(type_name);
                        place_all(p.expr, placed);
                        continue;
                    }
                };
                for f in fields {
                    let schema = declared.and_then(|s| s.property(&f.name));
                    if schema.is_none() && !open {
                        place_all(&f.value, placed);
                        found.push(Found {
                            pos: f.pos,
                            message: format!(
                                "{}.{}: field not declared in schema",
                                p.path, f.name
                            ),
                        });
                        continue;
                    }
                    todo.push(Place {
                        expr: &f.value,
                        schema,
                        path: format!("{}.{}", p.path, f.name),
                        type_name: format!("{}.{}", p.type_name, f.name),
                    });
                }
            }
            ExprKind::Map { entries } => {
                let (declared, values, open) = match at {
                    Shape::Struct(s) => (Some(s), None, s.preserve_unknown_fields),
                    Shape::Map(v) => (None, Some(v), true),
                    Shape::Any => (None, None, true),
                    _ => {
                        wrong("map");
                        continue;
                    }
                };
                for entry in entries {
                    let key = match &entry.key.kind {
                        ExprKind::Literal(Literal::String(k)) => Some(k.as_str()),
                        _ => None,
                    };
                    let schema = match (key, declared) {
                        (Some(k), Some(s)) => s.property(k),
                        _ => values,
                    };
                    if let (Some(k), None, false) = (key, schema, open) {
                        place_all(&entry.value, placed);
                        found.push(Found {
                            pos: entry.key.pos,
                            message: format!("{}.{k}: field not declared in schema", p.path),
                        });
                        continue;
                    }
                    // A map's values keep the map's type name (in-tree's `typeCheck`).
                    todo.push(Place {
                        expr: &entry.value,
                        schema,
                        path: format!("{}.{}", p.path, key.unwrap_or("*")),
                        type_name: p.type_name.clone(),
                    });
                }
            }
            ExprKind::List { elements, .. } => {
                let items = match at {
                    Shape::List(items) => items,
                    Shape::Any => None,
                    _ => {
                        wrong("list");
                        continue;
                    }
                };
                let keys = match p.schema {
                    Some(s) if s.list_type.as_deref() == Some("map") => s.list_map_keys.as_slice(),
                    _ => &[],
                };
                for (i, el) in elements.iter().enumerate() {
                    let object_items = matches!(shape(items), Shape::Struct(_) | Shape::Map(_));
                    if object_items && matches!(el.kind, ExprKind::Map { .. }) {
                        // A list's elements are converted with `Value()`: a CEL map stays a
                        // map of CEL values, which the typed conversion does not take as an
                        // object (in-tree's `convertField`).
                        found.push(Found {
                            pos: el.pos,
                            message: format!(
                                "{}: element {i}: a CEL map is not an object in a list: write {}{{...}}",
                                shown(&p.path),
                                p.type_name
                            ),
                        });
                        continue;
                    }
                    if let ExprKind::Struct { type_name, fields } = &el.kind {
                        let missing = keys.iter().find(|k| {
                            !fields.iter().any(|f| f.name == **k)
                                && items
                                    .and_then(|s| s.property(k))
                                    .is_none_or(|k| k.default.is_none())
                        });
                        if let (Some(k), true) = (missing, *type_name == p.type_name) {
                            found.push(Found {
                                pos: el.pos,
                                message: format!(
                                    "{}: element {i}: associative list with keys has an element that omits key field {k:?}",
                                    shown(&p.path)
                                ),
                            });
                        }
                    }
                    todo.push(Place {
                        expr: el,
                        schema: items,
                        path: format!("{}[{i}]", p.path),
                        type_name: p.type_name.clone(),
                    });
                }
            }
            // `c ? a : b`: both branches land at this place.
            ExprKind::Call { func, args, .. } if func == "_?_:_" && args.len() == 3 => {
                for branch in &args[1..] {
                    todo.push(Place {
                        expr: branch,
                        schema: p.schema,
                        path: p.path.clone(),
                        type_name: p.type_name.clone(),
                    });
                }
            }
            // Computed: known at run time only.
            _ => {}
        }
    }
}

/// Marks every literal under `e` as looked at (a finding above it says what is wrong).
fn place_all(e: &Expr, placed: &mut HashSet<*const Expr>) {
    let mut nodes = vec![e];
    while let Some(n) = nodes.pop() {
        placed.insert(n as *const Expr);
        nodes.extend(n.children());
    }
}

/// A path as a message shows it: the root is `.`.
fn shown(path: &str) -> &str {
    if path.is_empty() {
        "."
    } else {
        path
    }
}

/// The findings of a JSON patch against a kind's schema: each `JSONPatch{...}` literal's
/// literal `path` and `from`.
fn check_json_patch(root: &Expr, schema: &Schema) -> Vec<Found> {
    let mut found = Vec::new();
    let mut nodes = vec![root];
    while let Some(e) = nodes.pop() {
        nodes.extend(e.children());
        let ExprKind::Struct { type_name, fields } = &e.kind else {
            continue;
        };
        if type_name != JSON_PATCH_TYPE {
            continue;
        }
        for f in fields
            .iter()
            .filter(|f| f.name == "path" || f.name == "from")
        {
            if let ExprKind::Literal(Literal::String(pointer)) = &f.value.kind {
                if let Some(message) = check_pointer(schema, pointer) {
                    found.push(Found {
                        pos: f.value.pos,
                        message: format!("{} {pointer:?}: {message}", f.name),
                    });
                }
            }
        }
    }
    found.sort_by_key(|f| f.pos);
    found
}

/// What is wrong with a JSON pointer into an object of `schema`, if anything the schema
/// tells: a field it does not declare, or a list indexed by a name.
fn check_pointer(schema: &Schema, pointer: &str) -> Option<String> {
    let Some(rest) = pointer.strip_prefix('/') else {
        return Some("a JSON pointer starts with \"/\"".to_string());
    };
    let mut current = Some(schema);
    let mut path = String::new();
    for raw in rest.split('/') {
        let field = raw.replace("~1", "/").replace("~0", "~");
        match shape(current) {
            Shape::Struct(s) => match s.property(&field) {
                Some(p) => current = Some(p),
                None if s.preserve_unknown_fields => return None,
                None => return Some(format!("{path}.{field}: field not declared in schema")),
            },
            Shape::Map(values) => current = Some(values),
            Shape::List(items) => {
                if field != "-" && field.parse::<usize>().is_err() {
                    return Some(format!(
                        "{}: {field:?} is not an index of the list",
                        shown(&path)
                    ));
                }
                current = items;
                path.push_str("[]");
                continue;
            }
            // Under a scalar the API server's patch fails in its own words; under anything,
            // nothing is known.
            _ => return None,
        }
        path.push('.');
        path.push_str(&field);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schemas::Gvk;

    fn schema(group: &str, kind: &str) -> Schema {
        let gvk = Gvk {
            group: group.into(),
            version: "v1".into(),
            kind: kind.into(),
        };
        Kinds::default().schema(&gvk).unwrap()
    }

    fn env() -> celgate_cel::Env {
        mutation_env(&MutatingPolicy::default(), 32)
    }

    /// The findings' messages for an apply configuration on a Deployment (or `kind`).
    fn apply(kind: (&str, &str), source: &str) -> Vec<String> {
        let (_, typed) = env().compile_typed(source).unwrap();
        check_apply_configuration(&typed.expr, &schema(kind.0, kind.1))
            .into_iter()
            .map(|f| f.message)
            .collect()
    }

    const DEPLOYMENT: (&str, &str) = ("apps", "Deployment");
    const CONFIG_MAP: (&str, &str) = ("", "ConfigMap");

    #[test]
    fn an_undeclared_field() {
        assert_eq!(
            apply(DEPLOYMENT, "Object{spec: Object.spec{notAField: 'x'}}"),
            [".spec.notAField: field not declared in schema"]
        );
        assert_eq!(
            apply(
                CONFIG_MAP,
                "Object{spec: Object.spec{definitelyNotAField: 1}}"
            ),
            [".spec: field not declared in schema"]
        );
        // A literal standing alone (here in a comprehension) is found by its type name.
        assert_eq!(
            apply(
                DEPLOYMENT,
                "Object{spec: Object.spec{template: Object.spec.template{spec: Object.spec.template.spec{containers: object.spec.template.spec.containers.map(c, Object.spec.template.spec.containers{name: c.name, imagePullPolicy: 'Always', pullPolicy: 'x'})}}}}"
            ),
            [".spec.template.spec.containers.pullPolicy: field not declared in schema"]
        );
        assert_eq!(
            apply(DEPLOYMENT, "Object.spec.template.spec.container{name: 'x'}"),
            [".spec.template.spec.container: field not declared in schema (type name \"Object.spec.template.spec.container\")"]
        );
    }

    #[test]
    fn a_type_name_that_does_not_match_its_place() {
        assert_eq!(
            apply(DEPLOYMENT, "Object{spec: Object.metadata{labels: {'a': 'b'}}}"),
            ["type mismatch: unexpected type name \"Object.metadata\", expected \"Object.spec\", which matches field name path from root Object type"]
        );
        assert_eq!(
            apply(("", "Pod"), "Object{spec: Object.spec{containers: [Object.spec.initContainers{name: 'c', image: 'nginx:1.27'}]}}"),
            ["type mismatch: unexpected type name \"Object.spec.initContainers\", expected \"Object.spec.containers\", which matches field name path from root Object type"]
        );
    }

    #[test]
    fn a_literal_of_the_wrong_type() {
        assert_eq!(
            apply(DEPLOYMENT, "Object{spec: Object.spec{replicas: 'three'}}"),
            [".spec.replicas: expected numeric (int or float), got string"]
        );
        assert_eq!(
            apply(CONFIG_MAP, "Object{data: {'n': 1}}"),
            [".data.n: expected string, got int"]
        );
        assert_eq!(
            apply(
                DEPLOYMENT,
                "Object{spec: Object.spec{paused: 'yes', replicas: 2, minReadySeconds: 1.5}}"
            ),
            [".spec.paused: expected boolean, got string"]
        );
        // A Quantity has no type; an IntOrString takes both.
        assert!(apply(("", "Pod"), "Object{spec: Object.spec{containers: [Object.spec.containers{name: 'c', resources: Object.spec.containers.resources{limits: {'cpu': 1}, requests: {'memory': '1Gi'}}, ports: [Object.spec.containers.ports{containerPort: 80}]}]}}").is_empty());
        assert_eq!(
            apply(DEPLOYMENT, "Object{spec: Object.spec{strategy: Object.spec.strategy{rollingUpdate: Object.spec.strategy.rollingUpdate{maxSurge: '25%', maxUnavailable: true}}}}"),
            [".spec.strategy.rollingUpdate.maxUnavailable: expected int or string, got bool"]
        );
        // A conditional's branches both land at the place.
        assert_eq!(
            apply(
                DEPLOYMENT,
                "Object{spec: Object.spec{replicas: object.spec.replicas > 2 ? 'y' : 'x'}}"
            ),
            [".spec.replicas: expected numeric (int or float), got string"; 2]
        );
    }

    #[test]
    fn null_anywhere() {
        assert_eq!(
            apply(CONFIG_MAP, "Object{metadata: Object.metadata{labels: {'a': null}}}"),
            [".metadata.labels.a: null is refused at run time (an apply configuration cannot remove a field)"]
        );
        assert_eq!(apply(DEPLOYMENT, "Object{spec: null}").len(), 1);
    }

    #[test]
    fn a_cel_map_in_a_list_of_objects() {
        assert_eq!(
            apply(("", "Pod"), "Object{spec: Object.spec{containers: [{'name': 'c', 'image': 'nginx:1.27'}]}}"),
            [".spec.containers: element 0: a CEL map is not an object in a list: write Object.spec.containers{...}"]
        );
    }

    const CRD: &str = r#"{"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
      "metadata": {"name": "gadgets.example.com"},
      "spec": {"group": "example.com", "names": {"kind": "Gadget", "plural": "gadgets"}, "scope": "Namespaced",
        "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {
          "type": "object", "properties": {"spec": {"type": "object", "properties": {
            "ports": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
              "items": {"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}, "port": {"type": "integer"}}}},
            "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": true, "properties": {"known": {"type": "string"}}}}}}}}}]}}"#;

    fn gadget() -> Schema {
        let crd: serde_json::Value = serde_json::from_str(CRD).unwrap();
        let gvk = Gvk {
            group: "example.com".into(),
            version: "v1".into(),
            kind: "Gadget".into(),
        };
        Kinds::new([&crd]).schema(&gvk).unwrap()
    }

    fn apply_gadget(source: &str) -> Vec<String> {
        let (_, typed) = env().compile_typed(source).unwrap();
        check_apply_configuration(&typed.expr, &gadget())
            .into_iter()
            .map(|f| f.message)
            .collect()
    }

    #[test]
    fn a_list_map_element_without_its_key() {
        assert_eq!(
            apply_gadget("Object{spec: Object.spec{ports: [Object.spec.ports{port: 443}, Object.spec.ports{name: 'a', port: 1}]}}"),
            [".spec.ports: element 0: associative list with keys has an element that omits key field \"name\""]
        );
    }

    #[test]
    fn unknown_fields_preserved() {
        assert!(apply_gadget(
            "Object{spec: Object.spec{extra: Object.spec.extra{known: 'a', anything: {'x': 1}}}}"
        )
        .is_empty());
        assert_eq!(
            apply_gadget("Object{spec: Object.spec{extra: Object.spec.extra{known: 1}}}"),
            [".spec.extra.known: expected string, got int"]
        );
    }

    fn patch(source: &str) -> Vec<String> {
        let (_, typed) = env().compile_typed(source).unwrap();
        check_json_patch(&typed.expr, &schema("apps", "Deployment"))
            .into_iter()
            .map(|f| f.message)
            .collect()
    }

    #[test]
    fn json_patch_paths() {
        assert!(patch("[JSONPatch{op: 'add', path: '/metadata/labels/a~1b', value: 'x'}, JSONPatch{op: 'replace', path: '/spec/template/spec/containers/0/image', value: 'x'}, JSONPatch{op: 'add', path: '/spec/template/spec/containers/-', value: {}}]").is_empty());
        assert_eq!(
            patch("[JSONPatch{op: 'add', path: '/spec/notAField', value: 1}, JSONPatch{op: 'copy', from: '/spec/replica', path: '/spec/replicas'}]"),
            [
                "path \"/spec/notAField\": .spec.notAField: field not declared in schema",
                "from \"/spec/replica\": .spec.replica: field not declared in schema"
            ]
        );
        assert_eq!(
            patch("[JSONPatch{op: 'replace', path: '/spec/template/spec/containers/name', value: 'x'}, JSONPatch{op: 'add', path: 'spec/replicas', value: 1}]"),
            [
                "path \"/spec/template/spec/containers/name\": .spec.template.spec.containers: \"name\" is not an index of the list",
                "path \"spec/replicas\": a JSON pointer starts with \"/\""
            ]
        );
    }

    #[test]
    fn a_policy_reports_per_mutation_and_kind_with_positions() {
        let p: MutatingPolicy = serde_yaml_ng::from_str(
            r#"
metadata: {name: m}
spec:
  matchConstraints: {resourceRules: [{apiGroups: [apps], apiVersions: [v1], operations: [CREATE], resources: [deployments]}]}
  variables: [{name: n, expression: "2"}]
  mutations:
  - patchType: ApplyConfiguration
    applyConfiguration: {expression: "Object{spec: Object.spec{replicas: variables.n}}"}
  - patchType: ApplyConfiguration
    applyConfiguration: {expression: "Object{spec: Object.spec{replica: 1}}"}
"#,
        )
        .unwrap();
        let r = lint_mutating_policy(&p, &Kinds::default(), 32);
        assert_eq!(r.warnings.len(), 1, "{:?}", r.warnings);
        assert_eq!(
            r.warnings[0].field_ref,
            "spec.mutations[1].applyConfiguration.expression"
        );
        assert_eq!(
            r.warnings[0].warning,
            "apps/v1, Kind=Deployment: ERROR: <input>:1:33: .spec.replica: field not declared in schema\n | Object{spec: Object.spec{replica: 1}}\n | ................................^\n"
        );
    }
}
