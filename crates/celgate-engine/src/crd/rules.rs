//! Compilation of every `x-kubernetes-validations` rule at its schema location (typed
//! `self`, `oldSelf` for transition rules, string-typed `messageExpression`, checked `reason`
//! and `fieldPath`), with the API server's CRD error texts; and evaluation of the compiled
//! rules against a custom resource, with the per-call cost limit and the per-object budget.

use std::collections::HashSet;

use serde_json::Value as Json;

use super::cost::{self, Decl, RuleCost};
use super::errors::{go_quote, Cause};
use super::schema::{Crd, Schema, ValidationRule};
use super::structural;
use super::types::{cel_type, escape, root_type, to_cel};
use celgate_cel::lexer::{tokenize, Tok};
use celgate_cel::Type;
use celgate_cel::{Env, Meter, Program, Value};

/// Kubernetes minor version of the CEL environment CRD rules are compiled for: new
/// expressions are checked at the compatibility version (1.31 for a 1.32 server).
pub(crate) const CRD_CEL_VERSION: u16 = 31;

/// cel-go cost units one rule evaluation may spend (`PerCallLimit`).
pub const PER_CALL_LIMIT: u64 = 1_000_000;

/// cel-go cost units all rules of one object may spend (`RuntimeCELCostBudget`).
pub(crate) const RUNTIME_BUDGET: u64 = 10_000_000;

/// Longest messageExpression result used as a message (bytes); a longer one falls back to
/// the static message, as a blank or multi-line one does.
pub(crate) const MAX_MESSAGE_LEN: usize = 5 * 1024;

const REASONS: &[&str] = &[
    "FieldValueDuplicate",
    "FieldValueForbidden",
    "FieldValueInvalid",
    "FieldValueRequired",
];

/// Identity of the CRD and its kind, for error messages.
#[derive(Debug, Clone)]
pub struct CrdInfo {
    pub name: String,
    pub group: String,
    pub kind: String,
    pub status_subresource: bool,
}

impl CrdInfo {
    /// `Widget.group`, the qualified kind of a custom resource error.
    pub(crate) fn qualified_kind(&self) -> String {
        format!("{}.{}", self.kind, self.group)
    }
}

#[derive(Debug)]
struct CompiledRule {
    rule: ValidationRule,
    program: Program,
    message: Option<Program>,
    /// The rule references `oldSelf`: a transition rule.
    uses_old_self: bool,
}

/// The compiled rules of one schema node and of its children.
#[derive(Debug, Default)]
pub struct Node {
    rules: Vec<CompiledRule>,
    props: Vec<(String, Node)>,
    items: Option<Box<Node>>,
    additional: Option<Box<Node>>,
}

impl Node {
    fn is_empty(&self) -> bool {
        self.rules.is_empty()
            && self.props.is_empty()
            && self.items.is_none()
            && self.additional.is_none()
    }
}

/// A CRD whose schema is structural and whose rules all compile.
#[derive(Debug)]
pub struct CompiledCrd {
    pub info: CrdInfo,
    pub schema: Schema,
    root: Node,
}

/// Checks the schema and compiles every rule; the causes are those of a rejected CRD.
pub fn compile(crd: &Crd) -> Result<CompiledCrd, Vec<Cause>> {
    compile_with_costs(crd, &mut Vec::new())
}

/// [`compile`], also listing the estimated cost of every rule and messageExpression that
/// compiled, in schema order (`celgate crd check --costs`).
pub fn compile_with_costs(crd: &Crd, costs: &mut Vec<RuleCost>) -> Result<CompiledCrd, Vec<Cause>> {
    compile_full(crd, &UpdateOptions::default(), costs)
}

/// Kubernetes minor version of the CEL environment expressions already stored in the CRD
/// being replaced are compiled for (the server's own version, 1.32): an update may keep an
/// expression that only a newer library accepts.
pub(crate) const STORED_CEL_VERSION: u16 = 32;

/// What a CRD update relaxes (the API server's `validationOptions` on update).
#[derive(Debug, Default, Clone)]
pub struct UpdateOptions {
    /// Rules (`rule` texts) of the CRD being replaced: compiled for the stored expressions' CEL version.
    pub stored_rules: HashSet<String>,
    /// Its `messageExpression` texts, likewise.
    pub stored_messages: HashSet<String>,
    /// The schema is unchanged: the per-expression cost limit is not enforced (the CRD
    /// budget still is).
    pub suppress_per_expression_cost: bool,
}

impl UpdateOptions {
    /// The relaxations of replacing `old` by a CRD whose schema is `new_schema`.
    pub fn replacing(old: &Crd, new_schema: &Json) -> UpdateOptions {
        fn collect(s: &Schema, o: &mut UpdateOptions) {
            for r in &s.validations {
                o.stored_rules.insert(r.rule.clone());
                if !r.message_expression.is_empty() {
                    o.stored_messages.insert(r.message_expression.clone());
                }
            }
            for (_, p) in &s.properties {
                collect(p, o);
            }
            for sub in s.items.as_deref().into_iter().chain(s.additional_schema()) {
                collect(sub, o);
            }
        }
        let mut o = UpdateOptions {
            suppress_per_expression_cost: old.raw_schema == *new_schema,
            ..UpdateOptions::default()
        };
        collect(&old.schema, &mut o);
        o
    }
}

/// [`compile`] for an update replacing the stored CRD `old` by `crd`.
pub fn compile_update(old: &Crd, crd: &Crd) -> Result<CompiledCrd, Vec<Cause>> {
    compile_full(
        crd,
        &UpdateOptions::replacing(old, &crd.raw_schema),
        &mut Vec::new(),
    )
}

/// Compiles a CRD being created (`update` empty) or replacing another one.
pub(crate) fn compile_full(
    crd: &Crd,
    update: &UpdateOptions,
    costs: &mut Vec<RuleCost>,
) -> Result<CompiledCrd, Vec<Cause>> {
    // Rules are compiled only for an otherwise valid schema, as the API server does: a
    // structural or rule-field error hides the compile errors.
    let path = crd.schema_path.as_str();
    let mut causes = structural::check(&crd.schema, path);
    if !causes.is_empty() {
        return Err(causes);
    }
    // A rule-field error keeps the rules of its node and of the nodes above it from being
    // compiled (the API server compiles a node's rules only when its subtree has no schema
    // error); other nodes' rules are still compiled and reported.
    let mut invalid_nodes = Vec::new();
    check_rule_fields(&crd.schema, path, &mut causes, &mut invalid_nodes);
    let root_ty = root_type(&crd.schema);
    let root_decl = cost::decl(&crd.schema, true);
    let mut scope = Scope {
        decl: root_decl.as_ref(),
        cardinality: Some(1),
        uncorrelatable: None,
        invalid_nodes: &invalid_nodes,
    };
    let root = compile_node(
        &crd.schema,
        root_ty,
        path,
        "selfType",
        &mut scope,
        &mut Compiling {
            causes: &mut causes,
            costs,
            update,
        },
    );
    budget_causes(costs, path, &mut causes);
    if !causes.is_empty() {
        return Err(causes);
    }
    Ok(CompiledCrd {
        info: CrdInfo {
            name: crd.name.clone(),
            group: crd.group.clone(),
            kind: crd.kind.clone(),
            status_subresource: crd.status_subresource,
        },
        schema: crd.schema.clone(),
        root,
    })
}

/// Where the rules being compiled sit: the sizes of their scope, how many times the scope can
/// occur in an object (`None`: unbounded), and the schema path above which `oldSelf` cannot
/// be correlated (items of a list that is not a list-map, fields of an atomic map).
#[derive(Clone)]
struct Scope<'d> {
    decl: Option<&'d Decl>,
    cardinality: Option<u64>,
    uncorrelatable: Option<String>,
    /// The schema paths of nodes with an invalid rule field.
    invalid_nodes: &'d [String],
}

impl<'d> Scope<'d> {
    /// The scope of a child of `schema` (at `path`) whose sizes are `decl`.
    fn child(&self, schema: &Schema, decl: Option<&'d Decl>) -> Scope<'d> {
        Scope {
            decl,
            invalid_nodes: self.invalid_nodes,
            cardinality: self
                .cardinality
                .zip(cost::child_factor(schema))
                .map(|(c, f)| cost::times(c, f)),
            uncorrelatable: self.uncorrelatable.clone(),
        }
    }

    fn forbid_old_self(mut self, path: &str) -> Self {
        if self.uncorrelatable.is_none() {
            self.uncorrelatable = Some(path.to_string());
        }
        self
    }
}

/// The outputs of compiling: the causes of a rejection and the estimated costs.
struct Compiling<'o> {
    causes: &'o mut Vec<Cause>,
    costs: &'o mut Vec<RuleCost>,
    update: &'o UpdateOptions,
}

fn compile_node(
    schema: &Schema,
    ty: Type,
    path: &str,
    type_name: &str,
    scope: &mut Scope<'_>,
    out: &mut Compiling<'_>,
) -> Node {
    let mut node = Node::default();
    // Each rule scope has its own `selfType` (the API server's names are relative to the
    // scope: `selfType<random>.a.@idx`), so two list-typed fields never share a type.
    let ty = if schema.validations.is_empty() || type_name == "selfType" {
        ty
    } else {
        cel_type(schema, "selfType").unwrap_or(ty)
    };
    let subtree_invalid = scope
        .invalid_nodes
        .iter()
        .any(|p| p == path || p.strip_prefix(path).is_some_and(|r| r.starts_with('.')));
    for (i, rule) in schema.validations.iter().enumerate() {
        if subtree_invalid {
            break;
        }
        let at = format!("{path}.x-kubernetes-validations[{i}]");
        if let Some(r) = compile_rule(rule, &ty, &at, scope, out) {
            node.rules.push(r);
        }
    }
    let decl = scope.decl;
    // Fields of a map of an unknown type cannot be correlated with their old values
    // (`granular` and `atomic` maps can).
    let fields_scope = if schema
        .map_type
        .as_deref()
        .is_some_and(|t| t != "granular" && t != "atomic")
    {
        scope.clone().forbid_old_self(path)
    } else {
        scope.clone()
    };
    for (name, sub) in &schema.properties {
        let sub_path = format!("{path}.properties[{name}]");
        let sub_name = format!("{type_name}.{name}");
        let Some(sub_ty) = cel_type(sub, &sub_name) else {
            undeclared_rules(sub, &sub_path, out.causes);
            continue;
        };
        let sub_decl = decl.and_then(|d| escape(name).and_then(|n| d.fields.get(&n)));
        let mut sub_scope = fields_scope.child(schema, sub_decl);
        let child = compile_node(sub, sub_ty, &sub_path, &sub_name, &mut sub_scope, out);
        if !child.is_empty() {
            node.props.push((name.clone(), child));
        }
    }
    if let Some(items) = schema.items.as_deref() {
        let sub_name = format!("{type_name}.@idx");
        if let Some(t) = cel_type(items, &sub_name) {
            // Only list-map items correlate with old items (by key).
            let mut sub_scope = scope.child(schema, decl.and_then(|d| d.elem.as_deref()));
            if schema.list_type.as_deref() != Some("map") {
                sub_scope = sub_scope.forbid_old_self(path);
            }
            let child = compile_node(
                items,
                t,
                &format!("{path}.items"),
                &sub_name,
                &mut sub_scope,
                out,
            );
            if !child.is_empty() {
                node.items = Some(Box::new(child));
            }
        }
    }
    if let Some(add) = schema.additional_schema() {
        let sub_name = format!("{type_name}.@elem");
        if let Some(t) = cel_type(add, &sub_name) {
            let mut sub_scope = scope.child(schema, decl.and_then(|d| d.elem.as_deref()));
            let child = compile_node(
                add,
                t,
                &format!("{path}.additionalProperties"),
                &sub_name,
                &mut sub_scope,
                out,
            );
            if !child.is_empty() {
                node.additional = Some(Box::new(child));
            }
        }
    }
    node
}

/// The cause of every node with rules in a subtree that has no CEL declaration (an untyped
/// `x-kubernetes-preserve-unknown-fields` node, or a list or map of such nodes): the API
/// server builds no type for it (`defaultConverter` in apiextensions' validation/
/// cel_validation.go fails with "unable to convert structural schema to CEL declarations",
/// and a child asks its parent first, so the failure reaches every node below), and
/// `ValidateCustomResourceDefinitionOpenAPISchema` (validation.go) reports it as a
/// `field.InternalError`, whose body repeats "Internal error: " before its own
/// "internal error: " text.
fn undeclared_rules(schema: &Schema, path: &str, causes: &mut Vec<Cause>) {
    if !schema.validations.is_empty() {
        causes.push(Cause {
            field: format!("{path}.x-kubernetes-validations"),
            reason: "InternalError".into(),
            message: "Internal error: internal error: failed to construct type information for x-kubernetes-validations rules: unable to convert structural schema to CEL declarations".into(),
        });
    }
    for (name, sub) in &schema.properties {
        undeclared_rules(sub, &format!("{path}.properties[{name}]"), causes);
    }
    if let Some(items) = schema.items.as_deref() {
        undeclared_rules(items, &format!("{path}.items"), causes);
    }
    if let Some(add) = schema.additional_schema() {
        undeclared_rules(add, &format!("{path}.additionalProperties"), causes);
    }
}

/// `apiextensions.ValidationRule{...}` as Go's `%#v` prints it (pointers shown as `(nil)` or
/// an address placeholder: the real server prints a random address).
fn rule_go_syntax(r: &ValidationRule) -> String {
    let reason = match &r.reason {
        None => "(*apiextensions.FieldValueErrorReason)(nil)".to_string(),
        Some(_) => "(*apiextensions.FieldValueErrorReason)(0xc000000000)".to_string(),
    };
    let old = match r.optional_old_self {
        None => "(*bool)(nil)".to_string(),
        Some(_) => "(*bool)(0xc000000000)".to_string(),
    };
    format!(
        "apiextensions.ValidationRule{{Rule:{}, Message:{}, MessageExpression:{}, Reason:{reason}, FieldPath:{}, OptionalOldSelf:{old}}}",
        go_quote(&r.rule),
        go_quote(&r.message),
        go_quote(&r.message_expression),
        go_quote(&r.field_path),
    )
}

/// Whether the expression refers to the `oldSelf` variable (not a field named so).
fn references_old_self(src: &str) -> bool {
    let Ok(tokens) = tokenize(src) else {
        return src.contains("oldSelf");
    };
    let mut prev_dot = false;
    for t in &tokens {
        if let Tok::Ident(name) = &t.kind {
            if name == "oldSelf" && !prev_dot {
                return true;
            }
        }
        prev_dot = matches!(t.kind, Tok::Dot);
    }
    false
}

/// The environment of a new rule at `self`'s type `ty` (for tests of the estimator).
#[cfg(test)]
pub(crate) fn env_for(ty: &Type, old_self: Option<bool>) -> Env {
    env_at(CRD_CEL_VERSION, ty, old_self)
}

/// The environment of a rule at Kubernetes version 1.`version`.
fn env_at(version: u16, ty: &Type, old_self: Option<bool>) -> Env {
    let mut env = Env::new(version);
    env.declare("self", ty.clone());
    let old_ty = if old_self == Some(true) {
        Type::Optional(Box::new(ty.clone()))
    } else {
        ty.clone()
    };
    env.declare("oldSelf", old_ty);
    env
}

/// The checks of a rule's fields that need no compilation (rule, message, reason,
/// fieldPath), over the whole schema.
fn check_rule_fields(
    schema: &Schema,
    path: &str,
    causes: &mut Vec<Cause>,
    invalid_nodes: &mut Vec<String>,
) {
    let before = causes.len();
    structural::node_checks(schema, path, causes);
    for (i, rule) in schema.validations.iter().enumerate() {
        let at = format!("{path}.x-kubernetes-validations[{i}]");
        check_one_rule(rule, schema, &at, causes);
    }
    if causes.len() > before {
        invalid_nodes.push(path.to_string());
    }
    for (name, sub) in &schema.properties {
        let p = format!("{path}.properties[{name}]");
        check_rule_fields(sub, &p, causes, invalid_nodes);
    }
    if let Some(items) = schema.items.as_deref() {
        check_rule_fields(items, &format!("{path}.items"), causes, invalid_nodes);
    }
    if let Some(add) = schema.additional_schema() {
        let p = format!("{path}.additionalProperties");
        check_rule_fields(add, &p, causes, invalid_nodes);
    }
}

/// `hasNewlines`: a line break CEL's grammar knows.
fn has_newlines(s: &str) -> bool {
    s.contains(['\n', '\r'])
}

fn check_one_rule(rule: &ValidationRule, schema: &Schema, at: &str, causes: &mut Vec<Cause>) {
    let (rule_text, message) = (rule.rule.trim(), rule.message.trim());
    if rule_text.is_empty() {
        causes.push(Cause::required(
            format!("{at}.rule"),
            "rule is not specified",
        ));
    } else if !rule.message.is_empty() && message.is_empty() {
        causes.push(Cause::invalid(
            format!("{at}.message"),
            &go_quote(&rule.message),
            "message must be non-empty if specified",
        ));
    } else if has_newlines(message) {
        causes.push(Cause::invalid(
            format!("{at}.message"),
            &go_quote(&rule.message),
            "message must not contain line breaks",
        ));
    } else if has_newlines(rule_text) && message.is_empty() {
        causes.push(Cause::required(
            format!("{at}.message"),
            "message must be specified if rule contains line breaks",
        ));
    }
    if !rule.message_expression.is_empty() && rule.message_expression.trim().is_empty() {
        causes.push(Cause::required(
            format!("{at}.messageExpression"),
            "messageExpression must be non-empty if specified",
        ));
    }
    if let Some(reason) = &rule.reason {
        if !REASONS.contains(&reason.as_str()) {
            let supported: Vec<String> = REASONS.iter().map(|r| go_quote(r)).collect();
            causes.push(Cause::not_supported(
                format!("{at}.reason"),
                &go_quote(reason),
                &supported,
            ));
        }
    }
    let field_path = &rule.field_path;
    if !field_path.is_empty() && field_path.trim().is_empty() {
        causes.push(Cause::invalid(
            format!("{at}.fieldPath"),
            &go_quote(field_path),
            "fieldPath must be non-empty if specified",
        ));
    }
    if has_newlines(field_path) {
        causes.push(Cause::invalid(
            format!("{at}.fieldPath"),
            &go_quote(field_path),
            "fieldPath must not contain line breaks",
        ));
    }
    if !field_path.is_empty() && !field_path_valid(field_path, schema) {
        causes.push(Cause::invalid(
            format!("{at}.fieldPath"),
            &go_quote(field_path),
            "fieldPath must be a valid path",
        ));
    }
}

fn compile_rule(
    rule: &ValidationRule,
    ty: &Type,
    at: &str,
    scope: &Scope<'_>,
    out: &mut Compiling<'_>,
) -> Option<CompiledRule> {
    let causes = &mut *out.causes;
    let before = causes.len();
    if rule.rule.trim().is_empty() {
        return None;
    }
    let uses_old_self = references_old_self(&rule.rule);
    let version_of = |stored: bool| {
        if stored {
            STORED_CEL_VERSION
        } else {
            CRD_CEL_VERSION
        }
    };
    let update = out.update;
    let env = env_at(
        version_of(update.stored_rules.contains(&rule.rule)),
        ty,
        rule.optional_old_self,
    );
    let message_env = env_at(
        version_of(update.stored_messages.contains(&rule.message_expression)),
        ty,
        rule.optional_old_self,
    );
    let enforce = !update.suppress_per_expression_cost;
    let no_decl = Decl::default();
    let decl = scope.decl.unwrap_or(&no_decl);
    let program = match env.compile_typed(&rule.rule) {
        Ok((p, ast)) if *p.result_type() == Type::Bool => {
            // The rule's cost times the number of times its scope can occur.
            let base = cost::estimate(&ast, decl);
            let cardinality = scope
                .cardinality
                .unwrap_or_else(|| cost::unbounded_cardinality(decl));
            let total = cost::times(base, cardinality);
            if enforce && total > cost::STATIC_ESTIMATED_COST_LIMIT {
                causes.push(Cause::forbidden(
                    format!("{at}.rule"),
                    &cost::exceeds_message(
                        "estimated rule cost",
                        total,
                        cost::STATIC_ESTIMATED_COST_LIMIT,
                    ),
                ));
            }
            out.costs.push(RuleCost {
                field: format!("{at}.rule"),
                expression: rule.rule.clone(),
                estimated: base,
                cardinality,
                cost: total,
            });
            Some(p)
        }
        Ok(_) => {
            causes.push(Cause::invalid(
                format!("{at}.rule"),
                &rule_go_syntax(rule),
                "cel expression must evaluate to a bool",
            ));
            None
        }
        Err(e) => {
            causes.push(Cause::invalid(
                format!("{at}.rule"),
                &rule_go_syntax(rule),
                &format!("compilation failed: {e}"),
            ));
            None
        }
    };
    let message = if rule.message_expression.trim().is_empty() || program.is_none() {
        None
    } else {
        match message_env.compile_typed(&rule.message_expression) {
            Ok((p, ast)) if *p.result_type() == Type::String => {
                // A messageExpression's cost is not multiplied by the cardinality.
                let base = cost::estimate(&ast, decl);
                if enforce && base > cost::STATIC_ESTIMATED_COST_LIMIT {
                    causes.push(Cause::forbidden(
                        format!("{at}.messageExpression"),
                        &cost::exceeds_message(
                            "estimated messageExpression cost",
                            base,
                            cost::STATIC_ESTIMATED_COST_LIMIT,
                        ),
                    ));
                }
                out.costs.push(RuleCost {
                    field: format!("{at}.messageExpression"),
                    expression: rule.message_expression.clone(),
                    estimated: base,
                    cardinality: 1,
                    cost: base,
                });
                Some(p)
            }
            Ok(_) => {
                causes.push(Cause::invalid(
                    format!("{at}.messageExpression"),
                    &rule_go_syntax(rule),
                    "messageExpression must evaluate to a string",
                ));
                None
            }
            Err(e) => {
                causes.push(Cause::invalid(
                    format!("{at}.messageExpression"),
                    &rule_go_syntax(rule),
                    &format!("messageExpression compilation failed: {e}"),
                ));
                None
            }
        }
    };
    // A rule that does not compile counts as not using oldSelf (the server reports both).
    if uses_old_self && program.is_some() {
        if let Some(within) = &scope.uncorrelatable {
            causes.push(Cause::invalid(
                format!("{at}.rule"),
                &go_quote(&rule.rule),
                &format!(
                    "oldSelf cannot be used on the uncorrelatable portion of the schema within {within}"
                ),
            ));
        }
    } else if let Some(v) = rule.optional_old_self {
        causes.push(Cause::invalid(
            format!("{at}.optionalOldSelf"),
            &v.to_string(),
            "may not be set if oldSelf is not used in rule",
        ));
    }
    if causes.len() > before {
        return None;
    }
    Some(CompiledRule {
        rule: rule.clone(),
        program: program?,
        message,
        uses_old_self,
    })
}

/// The per-CRD budget: when the total estimated cost is over it, the most expensive rules
/// (at most 4, each at least 1% of the budget) and the total are reported.
fn budget_causes(costs: &[RuleCost], path: &str, causes: &mut Vec<Cause>) {
    let total = costs.iter().fold(0u64, |t, c| t.saturating_add(c.cost));
    if total <= cost::STATIC_ESTIMATED_CRD_COST_LIMIT {
        return;
    }
    let mut expensive: Vec<&RuleCost> = costs
        .iter()
        .filter(|c| c.cost >= cost::STATIC_ESTIMATED_CRD_COST_LIMIT / 100)
        .collect();
    expensive.sort_by_key(|c| std::cmp::Reverse(c.cost));
    for c in expensive.iter().take(4) {
        causes.push(Cause::forbidden(
            c.field.clone(),
            "contributed to estimated rule cost total exceeding cost limit for entire OpenAPIv3 schema",
        ));
    }
    causes.push(Cause::forbidden(
        path,
        &cost::exceeds_message(
            "x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 schema",
            total,
            cost::STATIC_ESTIMATED_CRD_COST_LIMIT,
        ),
    ));
}

/// One step of a rule's `fieldPath`.
#[derive(Debug, Clone, PartialEq)]
enum Step {
    Field(String),
    Key(String),
}

/// Parses `.a.b`, `['a.b']`, `.m['k']`: field selections and quoted subscripts; list
/// indices are not allowed.
fn parse_field_path(p: &str) -> Option<Vec<Step>> {
    let mut steps = Vec::new();
    let mut rest = p;
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix('.') {
            let end = r.find(['.', '[']).unwrap_or(r.len());
            let name = &r[..end];
            if name.is_empty() {
                return None;
            }
            steps.push(Step::Field(name.to_string()));
            rest = &r[end..];
        } else if let Some(r) = rest.strip_prefix("['") {
            let end = r.find("']")?;
            steps.push(Step::Key(r[..end].to_string()));
            rest = &r[end + 2..];
        } else {
            return None;
        }
    }
    if steps.is_empty() {
        return None;
    }
    Some(steps)
}

/// A `fieldPath` is valid when it parses and every step names a declared property (or a
/// key of a map).
fn field_path_valid(p: &str, schema: &Schema) -> bool {
    let Some(steps) = parse_field_path(p) else {
        return false;
    };
    let mut s = schema;
    for step in &steps {
        let name = match step {
            Step::Field(n) | Step::Key(n) => n,
        };
        if let Some(add) = s.additional_schema() {
            s = add;
        } else if let Some(sub) = s.property(name) {
            s = sub;
        } else {
            return false;
        }
    }
    true
}

/// A field path being built while walking an object (`spec.m[key]`, `spec.l[0]`).
fn join_field(path: &str, name: &str) -> String {
    if path.is_empty() {
        name.to_string()
    } else {
        format!("{path}.{name}")
    }
}

fn display_path(path: &str) -> String {
    if path.is_empty() {
        "<nil>".into()
    } else {
        path.to_string()
    }
}

/// The path a `fieldPath` points to from `base`: fields of objects join with `.`, keys of
/// maps are shown in brackets; a quoted subscript on an object is a field.
fn apply_field_path(base: &str, steps: &[Step], schema: &Schema) -> String {
    let mut path = base.to_string();
    let mut s = Some(schema);
    for step in steps {
        let name = match step {
            Step::Field(n) | Step::Key(n) => n,
        };
        let is_map = s.and_then(Schema::additional_schema).is_some();
        if is_map {
            path = format!("{path}[{name}]");
            s = s.and_then(Schema::additional_schema);
        } else {
            path = join_field(&path, name);
            s = s.and_then(|x| x.property(name));
        }
    }
    path
}

/// Runtime state of one object's rule evaluation.
struct Run {
    remaining: u64,
    stopped: bool,
    causes: Vec<Cause>,
    ratchet: bool,
}

impl CompiledCrd {
    /// Runs the CEL rules on a (defaulted, pruned, schema-valid) object being created.
    pub fn validate_rules_create(&self, obj: &Json) -> Vec<Cause> {
        self.validate_rules(obj, None, false)
    }

    /// Runs the CEL rules on an object replacing `old`. Transition rules see the correlated
    /// old value; with `ratchet`, a rule whose value (and subtree) is unchanged is not
    /// re-evaluated, except transition rules (`CRDValidationRatcheting`; not for /status).
    pub fn validate_rules(&self, obj: &Json, old: Option<&Json>, ratchet: bool) -> Vec<Cause> {
        let mut run = Run {
            remaining: RUNTIME_BUDGET,
            stopped: false,
            causes: Vec::new(),
            ratchet,
        };
        walk(&self.root, &self.schema, obj, old, false, "", &mut run);
        run.causes
    }
}

/// The item of `old` a list-map item correlates with: same values of all map keys.
fn correlate_item<'o>(old: &'o [Json], item: &Json, keys: &[String]) -> Option<&'o Json> {
    old.iter()
        .find(|o| keys.iter().all(|k| o.get(k) == item.get(k)))
}

/// Walks the object and its correlated old value. `unchanged_above`: an ancestor is equal
/// to its old value, so uncorrelatable items below it are unchanged too.
fn walk(
    node: &Node,
    schema: &Schema,
    v: &Json,
    old: Option<&Json>,
    unchanged_above: bool,
    path: &str,
    run: &mut Run,
) {
    // Only non-null values are validated: a rule on a nullable field does not see null.
    if run.stopped || v.is_null() {
        return;
    }
    // A null old value is no old value (transition rules are then skipped).
    let old = old.filter(|o| !o.is_null());
    let unchanged = unchanged_above || old == Some(v);
    if !node.rules.is_empty() {
        let resource = path.is_empty() || schema.embedded_resource;
        let self_value = to_cel(v, schema, resource);
        let old_value = old.map(|o| to_cel(o, schema, resource));
        for r in &node.rules {
            if run.stopped {
                return;
            }
            let ratcheting = run.ratchet && unchanged && !r.uses_old_self;
            eval_rule(
                r,
                schema,
                &self_value,
                old_value.as_ref(),
                path,
                ratcheting,
                run,
            );
        }
    }
    match v {
        Json::Object(m) => {
            let old_m = old.and_then(Json::as_object);
            for (name, child) in &node.props {
                if let (Some(x), Some(s)) = (m.get(name), schema.property(name)) {
                    let o = old_m.and_then(|om| om.get(name));
                    walk(child, s, x, o, unchanged, &join_field(path, name), run);
                }
            }
            if let (Some(child), Some(s)) = (&node.additional, schema.additional_schema()) {
                for (k, x) in m {
                    let o = old_m.and_then(|om| om.get(k));
                    walk(child, s, x, o, unchanged, &format!("{path}[{k}]"), run);
                }
            }
        }
        Json::Array(a) => {
            if let (Some(child), Some(s)) = (&node.items, schema.items.as_deref()) {
                let list_map =
                    schema.list_type.as_deref() == Some("map") && !schema.list_map_keys.is_empty();
                let old_a = old.and_then(Json::as_array);
                for (i, x) in a.iter().enumerate() {
                    // Only list-map items correlate; atomic and set items have no old value.
                    let o = if list_map {
                        old_a.and_then(|oa| correlate_item(oa, x, &schema.list_map_keys))
                    } else {
                        None
                    };
                    walk(child, s, x, o, unchanged, &format!("{path}[{i}]"), run);
                }
            }
        }
        _ => {}
    }
}

/// `ruleErrorString`: the trimmed message if any, else the trimmed rule.
fn rule_error_string(r: &ValidationRule) -> &str {
    if !r.message.trim().is_empty() {
        r.message.trim()
    } else {
        r.rule.trim()
    }
}

/// Evaluates one rule. `ratcheting`: the value is unchanged from its correlated old value
/// and the rule is no transition rule, so a failure is only a warning (dropped here) — but
/// the rule still runs, spends its cost, and its evaluation errors are still reported.
fn eval_rule(
    r: &CompiledRule,
    schema: &Schema,
    self_value: &Value<'static>,
    old_value: Option<&Value<'static>>,
    path: &str,
    ratcheting: bool,
    run: &mut Run,
) {
    let value_label = go_quote(&schema.type_);
    if r.uses_old_self && r.rule.optional_old_self != Some(true) && old_value.is_none() {
        // A transition rule without an old value (create, new key): not evaluated.
        return;
    }
    let old = if r.rule.optional_old_self == Some(true) {
        Value::optional(old_value.cloned())
    } else {
        old_value.cloned().unwrap_or(Value::Null)
    };
    let activation = [self_value.clone(), old];
    let mut meter = Meter::with_limit(PER_CALL_LIMIT.min(run.remaining));
    let result = r.program.eval(&activation, &mut meter);
    run.remaining = run.remaining.saturating_sub(meter.cost);
    let field = display_path(path);
    match result {
        Ok(Value::Bool(true)) => {}
        Ok(_) => {
            let at = match parse_field_path(&r.rule.field_path) {
                Some(steps) if !r.rule.field_path.is_empty() => {
                    display_path(&apply_field_path(path, &steps, schema))
                }
                _ => field,
            };
            match failure_message(r, &activation, run) {
                Message::Text(detail) => {
                    if !ratcheting {
                        run.causes
                            .push(cause_for_reason(&r.rule, at, &value_label, &detail));
                    }
                }
                Message::Stop(detail) => {
                    run.stopped = true;
                    if !ratcheting {
                        run.causes.push(Cause::invalid(at, &value_label, &detail));
                    }
                }
            }
        }
        Err(e) if e.is_cancelled() => {
            run.stopped = true;
            if meter.limit < PER_CALL_LIMIT {
                run.causes.push(Cause::invalid(
                    field,
                    &value_label,
                    "validation failed due to running out of cost budget, no further validation rules will be run",
                ));
            } else {
                run.causes.push(Cause::invalid(
                    field,
                    &value_label,
                    &format!(
                        "'{}': no further validation rules will be run due to call cost exceeds limit for rule: {}",
                        e.message(),
                        rule_error_string(&r.rule)
                    ),
                ));
            }
        }
        // A type mismatch at run time (only `dyn` values get there, e.g. int-or-string).
        Err(e) if e.message().starts_with("no such overload") => run.causes.push(Cause::invalid(
            field,
            &value_label,
            &format!(
                "'{}': call arguments did not match a supported operator, function or macro signature for rule: {}",
                e.message(),
                rule_error_string(&r.rule)
            ),
        )),
        Err(e) => run.causes.push(Cause::invalid(
            field,
            &value_label,
            &format!(
                "{} evaluating rule: {}",
                e.message(),
                rule_error_string(&r.rule)
            ),
        )),
    }
}

/// The message of a failed rule, or the error that stops all validation.
enum Message {
    Text(String),
    Stop(String),
}

/// `ruleMessageOrDefault`: the trimmed message, else `failed rule: <rule>`.
fn rule_message_or_default(r: &ValidationRule) -> String {
    if r.message.is_empty() {
        format!("failed rule: {}", rule_error_string(r))
    } else {
        r.message.trim().to_string()
    }
}

/// The message of a failed rule: the messageExpression's trimmed result when it is a
/// non-empty single-line string of at most [`MAX_MESSAGE_LEN`] bytes, else the static message
/// or the default. A messageExpression over the per-call limit or the object's budget stops
/// validation, as the API server's `evalMessageExpression`.
fn failure_message(r: &CompiledRule, activation: &[Value<'static>; 2], run: &mut Run) -> Message {
    let Some(msg) = &r.message else {
        return Message::Text(rule_message_or_default(&r.rule));
    };
    let mut meter = Meter::with_limit(PER_CALL_LIMIT.min(run.remaining));
    let result = msg.eval(activation, &mut meter);
    run.remaining = run.remaining.saturating_sub(meter.cost);
    match result {
        Err(e) if e.is_cancelled() => Message::Stop(if meter.limit < PER_CALL_LIMIT {
            "messageExpression evaluation failed due to running out of cost budget, no further validation rules will be run".to_string()
        } else {
            format!(
                "no further validation rules will be run due to call cost exceeds limit for messageExpression: {}",
                go_quote(&r.rule.message_expression)
            )
        }),
        Ok(v) => match v.as_str().map(str::trim) {
            Some(s) if !s.is_empty() && s.len() <= MAX_MESSAGE_LEN && !s.contains(['\n', '\r']) => {
                Message::Text(s.to_string())
            }
            _ => Message::Text(rule_message_or_default(&r.rule)),
        },
        Err(_) => Message::Text(rule_message_or_default(&r.rule)),
    }
}

/// `fieldErrorForReason`: the cause a failed rule gives under its `reason`.
fn cause_for_reason(r: &ValidationRule, field: String, value: &str, detail: &str) -> Cause {
    match r.reason.as_deref() {
        Some("FieldValueForbidden") => Cause::forbidden(field, detail),
        Some("FieldValueRequired") => Cause::required(field, detail),
        Some("FieldValueDuplicate") => Cause::duplicate(field, value),
        _ => Cause::invalid(field, value, detail),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_paths_parse_like_the_api_server() {
        assert_eq!(
            parse_field_path(".a.b"),
            Some(vec![Step::Field("a".into()), Step::Field("b".into())])
        );
        assert_eq!(
            parse_field_path("['a.b']"),
            Some(vec![Step::Key("a.b".into())])
        );
        assert_eq!(parse_field_path(".l[0]"), None);
        assert_eq!(parse_field_path("a"), None);
    }

    #[test]
    fn old_self_reference_is_the_variable_not_a_field() {
        assert!(references_old_self("self == oldSelf"));
        assert!(!references_old_self("self.oldSelf == 1"));
        assert!(!references_old_self("self.x > 0"));
    }
}
