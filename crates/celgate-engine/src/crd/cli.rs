//! `celgate crd check` and `celgate crd validate` on documents already read (the command line
//! does the I/O): which CRD serves a custom resource, which stored object it replaces, and
//! the API server's answer to each, as text or as one JSON object per line (`-o json`).

use serde_json::Value as Json;

use super::cost::{RuleCost, STATIC_ESTIMATED_COST_LIMIT, STATIC_ESTIMATED_CRD_COST_LIMIT};
use super::errors::{go_quote, Status};
use super::request::crd_status;
use super::rules::{compile_full, CompiledCrd, UpdateOptions};
use super::schema::{parse_crd_version, parse_crd_versions, Crd};
use std::cell::OnceCell;
use std::collections::HashMap;

/// What a command prints and how it ends.
#[derive(Debug)]
pub struct Answer {
    /// Text or JSON to print on standard output.
    pub output: String,
    /// Every CRD or object was accepted.
    pub accepted: bool,
}

impl Answer {
    /// The answers one after another (one per line or block), accepted when all are.
    fn join(answers: Vec<Answer>) -> Answer {
        Answer {
            accepted: answers.iter().all(|a| a.accepted),
            output: answers
                .into_iter()
                .map(|a| a.output)
                .collect::<Vec<_>>()
                .join("\n"),
        }
    }
}

/// Input `crd validate` cannot answer for (its texts name the flag at fault).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InputError {
    /// Two different CRDs serve one kind in one group and version.
    #[error("CustomResourceDefinitions {first:?} and {second:?} both serve kind {kind:?} in {group}/{version}")]
    SameKind {
        first: String,
        second: String,
        kind: String,
        group: String,
        version: String,
    },
    /// Two stored objects (`--old`) with one identity.
    #[error("--old: {kind}.{group} {namespace}/{name} is given twice")]
    OldTwice {
        kind: String,
        group: String,
        namespace: String,
        name: String,
    },
    /// Only CRDs among the objects.
    #[error("no custom resource to validate")]
    NoCustomResource,
}

/// Reads the first YAML/JSON document of `text` (for the tests).
#[cfg(test)]
fn read_doc(text: &str) -> Result<Json, serde_yaml_ng::Error> {
    let de = serde_yaml_ng::Deserializer::from_str(text);
    for doc in de {
        let v: Json = serde::Deserialize::deserialize(doc)?;
        if !v.is_null() {
            return Ok(v);
        }
    }
    Ok(Json::Null)
}

const CRD_KIND: &str = "CustomResourceDefinition";
const CRD_QUALIFIED_KIND: &str = "CustomResourceDefinition.apiextensions.k8s.io";

fn is_crd(doc: &Json) -> bool {
    doc["kind"] == CRD_KIND
}

fn str_at<'a>(doc: &'a Json, pointer: &str) -> &'a str {
    doc.pointer(pointer)
        .and_then(Json::as_str)
        .unwrap_or_default()
}

/// The API server's answer as `-o json` prints it: `{"allowed": true}`, or the refusal with
/// its code, reason, message and causes (when it has any).
fn answer_json(result: &Result<(), Status>) -> Json {
    match result {
        Ok(()) => serde_json::json!({"allowed": true}),
        Err(s) => {
            let mut j = serde_json::json!({
                "allowed": false,
                "code": s.code,
                "reason": s.reason,
                "message": s.message,
            });
            if !s.causes.is_empty() {
                j["causes"] = serde_json::to_value(&s.causes).unwrap_or_default();
            }
            j
        }
    }
}

/// One answer: `-o json` one line of JSON, text `<what>: <ok>` or the refusal's message.
fn render(result: Result<(), Status>, json: bool, what: &str, ok: &str) -> Answer {
    let output = if json {
        answer_json(&result).to_string()
    } else {
        match &result {
            Ok(()) => format!("{what}: {ok}"),
            Err(s) => s.message.clone(),
        }
    };
    Answer {
        output,
        accepted: result.is_ok(),
    }
}

fn bad_request(message: String) -> Status {
    Status {
        code: 400,
        reason: "BadRequest".into(),
        message,
        causes: Vec::new(),
    }
}

fn not_found(message: String) -> Status {
    Status {
        code: 404,
        reason: "NotFound".into(),
        message,
        causes: Vec::new(),
    }
}

/// What the API server says to creating `crd`, or to replacing the stored CRD `old` by it:
/// every version's schema checked and its rules compiled (one schema when they are all the
/// same); the estimated cost of every expression is appended to `costs`.
fn check_crd(crd: &Json, old: Option<&Json>, costs: &mut Vec<RuleCost>) -> Result<(), Status> {
    let name = str_at(crd, "/metadata/name");
    let versions = parse_crd_versions(crd).map_err(|e| bad_request(e.to_string()))?;
    // The stored CRD's versions: their rules are all "stored expressions".
    let olds: Vec<(String, Crd)> = match old {
        Some(o) => o
            .pointer("/spec/versions")
            .and_then(Json::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default()
            .iter()
            .map(|v| {
                let version = v["name"].as_str().unwrap_or_default();
                parse_crd_version(o, Some(version)).map(|c| (version.to_string(), c))
            })
            .collect::<Result<_, _>>()
            .map_err(|e| bad_request(format!("--old: {e}")))?,
        None => Vec::new(),
    };
    // The versions' names, in order: `versions` has one per version, or just the first's.
    let names: Vec<&str> = crd
        .pointer("/spec/versions")
        .and_then(Json::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .map(|v| v["name"].as_str().unwrap_or_default())
        .collect();
    let mut causes = Vec::new();
    for (i, crd) in versions.iter().enumerate() {
        let version = names.get(i).copied().unwrap_or_default();
        let update = match olds.iter().find(|(v, _)| *v == version).or(olds.first()) {
            Some((_, same)) => {
                let mut update = UpdateOptions::replacing(same, &crd.raw_schema);
                for (_, other) in &olds {
                    let more = UpdateOptions::replacing(other, &crd.raw_schema);
                    update.stored_rules.extend(more.stored_rules);
                    update.stored_messages.extend(more.stored_messages);
                }
                update
            }
            None => UpdateOptions::default(),
        };
        // Each schema has its own budget.
        let mut version_costs = Vec::new();
        if let Err(c) = compile_full(crd, &update, &mut version_costs) {
            causes.extend(c);
        }
        costs.extend(version_costs);
    }
    if causes.is_empty() {
        Ok(())
    } else {
        Err(crd_status(name, causes))
    }
}

/// Compiles `version` of `crd` for validating its custom resources, once the whole CRD
/// would be accepted.
fn load_version(crd: &Json, version: &str) -> Result<CompiledCrd, Status> {
    check_crd(crd, None, &mut Vec::new())?;
    let parsed = parse_crd_version(crd, Some(version)).map_err(|e| bad_request(e.to_string()))?;
    compile_full(&parsed, &UpdateOptions::default(), &mut Vec::new())
        .map_err(|c| crd_status(&parsed.name, c))
}

/// `celgate crd check`: whether the CRD would be accepted (created, or replacing `old`).
pub fn check(crd: &Json, old: Option<&Json>, json: bool) -> Answer {
    check_one(crd, old, false, json)
}

/// `celgate crd check --costs`: the answer, preceded (text) or accompanied (JSON, under
/// `costs`) by the estimated cost of every rule and messageExpression that compiled.
pub fn check_costs(crd: &Json, old: Option<&Json>, json: bool) -> Answer {
    check_one(crd, old, true, json)
}

/// `celgate crd check` over the documents of its files: one answer per CRD, in order (other
/// documents are skipped); a CRD replaces the one of the same name in `olds`, if any, else
/// it is created. `None` when there is no CRD.
pub fn check_all(docs: &[Json], olds: &[Json], costs: bool, json: bool) -> Option<Answer> {
    let answers: Vec<Answer> = docs
        .iter()
        .filter(|d| is_crd(d))
        .map(|crd| {
            let name = str_at(crd, "/metadata/name");
            let old = olds
                .iter()
                .find(|o| is_crd(o) && str_at(o, "/metadata/name") == name);
            check_one(crd, old, costs, json)
        })
        .collect();
    (!answers.is_empty()).then(|| Answer::join(answers))
}

fn check_one(crd: &Json, old: Option<&Json>, with_costs: bool, json: bool) -> Answer {
    let mut costs = Vec::new();
    let name = str_at(crd, "/metadata/name");
    let result = check_crd(crd, old, &mut costs);
    let what = format!("{CRD_QUALIFIED_KIND} {}", go_quote(name));
    if !with_costs {
        return render(result, json, &what, "accepted");
    }
    let total = costs.iter().fold(0u64, |t, c| t.saturating_add(c.cost));
    if json {
        let rows: Vec<Json> = costs
            .iter()
            .map(|c| {
                serde_json::json!({
                    "field": c.field,
                    "expression": c.expression,
                    "estimatedCost": c.estimated,
                    "cardinality": c.cardinality,
                    "cost": c.cost,
                    "ruleLimitShare": share(c.cost, STATIC_ESTIMATED_COST_LIMIT),
                    "crdBudgetShare": share(c.cost, STATIC_ESTIMATED_CRD_COST_LIMIT),
                })
            })
            .collect();
        let mut answer = answer_json(&result);
        answer["costs"] = Json::Array(rows);
        answer["totalCost"] = total.into();
        return Answer {
            output: answer.to_string(),
            accepted: result.is_ok(),
        };
    }
    let table = cost_table(&costs, total);
    let mut answer = render(result, false, &what, "accepted");
    answer.output = format!("{table}\n{}", answer.output);
    answer
}

/// A cost as a percentage of a limit, rounded to 0.01.
fn share(cost: u64, limit: u64) -> f64 {
    (cost as f64 / limit as f64 * 10_000.0).round() / 100.0
}

/// The `--costs` table: one row per expression (its schema path, the expression, the
/// estimated cost of one evaluation, how many times it may run, their product and its share
/// of the per-rule limit and of the CRD budget), then the total.
fn cost_table(costs: &[RuleCost], total: u64) -> String {
    const PREFIX: &str = "spec.validation.openAPIV3Schema";
    let mut rows = vec![[
        "PATH".to_string(),
        "EXPRESSION".to_string(),
        "ESTIMATED".to_string(),
        "TIMES".to_string(),
        "COST".to_string(),
        "RULE LIMIT".to_string(),
        "CRD BUDGET".to_string(),
    ]];
    for c in costs {
        // The root of a CRD's one schema is `<root>`; a version's own schema keeps its path.
        let path = match c.field.strip_prefix(PREFIX) {
            Some(rest) => format!("<root>{rest}"),
            None => c.field.clone(),
        };
        let mut expr: String = c
            .expression
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        if expr.chars().count() > 60 {
            expr = expr.chars().take(57).collect::<String>() + "...";
        }
        rows.push([
            path,
            expr,
            c.estimated.to_string(),
            c.cardinality.to_string(),
            c.cost.to_string(),
            format!("{:.2}%", share(c.cost, STATIC_ESTIMATED_COST_LIMIT)),
            format!("{:.2}%", share(c.cost, STATIC_ESTIMATED_CRD_COST_LIMIT)),
        ]);
    }
    let widths: Vec<usize> = (0..7)
        .map(|i| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for r in &rows {
        let cells: Vec<String> = r
            .iter()
            .zip(&widths)
            .enumerate()
            .map(|(i, (cell, w))| {
                if i >= 2 {
                    format!("{cell:>w$}")
                } else {
                    format!("{cell:<w$}")
                }
            })
            .collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    out.push_str(&format!(
        "total estimated cost {total}: {:.2}% of the CRD budget ({STATIC_ESTIMATED_CRD_COST_LIMIT}); per-rule limit {STATIC_ESTIMATED_COST_LIMIT}",
        share(total, STATIC_ESTIMATED_CRD_COST_LIMIT)
    ));
    out
}

/// One served version of a CRD: the kind it serves there, compiled on first use.
#[derive(Debug)]
struct Served {
    group: String,
    version: String,
    kind: String,
    doc: Json,
    compiled: OnceCell<Result<CompiledCrd, Status>>,
}

impl Served {
    fn compiled(&self) -> &Result<CompiledCrd, Status> {
        self.compiled
            .get_or_init(|| load_version(&self.doc, &self.version))
    }

    fn namespaced(&self) -> bool {
        self.doc.pointer("/spec/scope").and_then(Json::as_str) != Some("Cluster")
    }

    /// `widgets.g.example.com`, as a NotFound message names the resource.
    fn resource(&self) -> String {
        format!("{}.{}", str_at(&self.doc, "/spec/names/plural"), self.group)
    }
}

/// The CRDs `crd validate` knows, by the group, version and kind they serve.
#[derive(Debug, Default)]
pub struct Catalog {
    served: Vec<Served>,
}

impl Catalog {
    /// The served versions of every CRD among `docs` (other documents are skipped). Two
    /// different CRDs serving the same kind in the same group and version are an error:
    /// which one applies would be a guess.
    pub fn new(docs: impl IntoIterator<Item = Json>) -> Result<Catalog, InputError> {
        let mut served: Vec<Served> = Vec::new();
        for doc in docs.into_iter().filter(is_crd) {
            let group = str_at(&doc, "/spec/group").to_string();
            let kind = str_at(&doc, "/spec/names/kind").to_string();
            let versions: Vec<String> = doc
                .pointer("/spec/versions")
                .and_then(Json::as_array)
                .map(|vs| {
                    vs.iter()
                        .filter(|v| v["served"] == true)
                        .filter_map(|v| v["name"].as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default();
            for version in versions {
                if let Some(other) = served
                    .iter()
                    .find(|s| s.group == group && s.version == version && s.kind == kind)
                {
                    if other.doc == doc {
                        continue;
                    }
                    return Err(InputError::SameKind {
                        first: str_at(&other.doc, "/metadata/name").to_string(),
                        second: str_at(&doc, "/metadata/name").to_string(),
                        kind,
                        group,
                        version,
                    });
                }
                served.push(Served {
                    group: group.clone(),
                    version,
                    kind: kind.clone(),
                    doc: doc.clone(),
                    compiled: OnceCell::new(),
                });
            }
        }
        Ok(Catalog { served })
    }

    /// No CRD serves any version.
    pub fn is_empty(&self) -> bool {
        self.served.is_empty()
    }

    fn find(&self, group: &str, version: Option<&str>, kind: &str) -> Option<&Served> {
        self.served
            .iter()
            .find(|s| s.group == group && s.kind == kind && version.is_none_or(|v| s.version == v))
    }
}

/// `(group, version)` of an apiVersion (`v1` is the core group).
fn group_version(api_version: &str) -> (&str, &str) {
    api_version.split_once('/').unwrap_or(("", api_version))
}

/// What identifies a stored object: group, kind, namespace (`default` when a namespaced
/// object names none, as kubectl sends it; none for cluster-scoped kinds) and name.
fn object_key(catalog: &Catalog, obj: &Json) -> (String, String, String, String) {
    let (group, _) = group_version(str_at(obj, "/apiVersion"));
    let kind = str_at(obj, "/kind");
    let namespaced = catalog
        .find(group, None, kind)
        .is_none_or(Served::namespaced);
    let namespace = match str_at(obj, "/metadata/namespace") {
        _ if !namespaced => "",
        "" => "default",
        ns => ns,
    };
    (
        group.to_string(),
        kind.to_string(),
        namespace.to_string(),
        str_at(obj, "/metadata/name").to_string(),
    )
}

/// `celgate crd validate`: the API server's answer to each custom resource among `objects`
/// (CRD documents are skipped), in order: a create, or an update of the object of the same
/// group, kind, namespace and name among `olds` (with `status`, a /status update of it).
/// `Err` for unusable input: no custom resource, or two stored objects with one identity.
pub fn validate_all(
    catalog: &Catalog,
    objects: &[Json],
    olds: &[Json],
    status: bool,
    json: bool,
) -> Result<Answer, InputError> {
    let mut stored = HashMap::new();
    for old in olds.iter().filter(|o| !is_crd(o)) {
        let key = object_key(catalog, old);
        if stored.insert(key.clone(), old).is_some() {
            let (group, kind, namespace, name) = key;
            return Err(InputError::OldTwice {
                kind,
                group,
                namespace,
                name,
            });
        }
    }
    let answers: Vec<Answer> = objects
        .iter()
        .filter(|o| !is_crd(o))
        .map(|obj| {
            let old = stored.get(&object_key(catalog, obj)).copied();
            validate_one(catalog, obj, old, status, json)
        })
        .collect();
    if answers.is_empty() {
        return Err(InputError::NoCustomResource);
    }
    Ok(Answer::join(answers))
}

fn validate_one(
    catalog: &Catalog,
    obj: &Json,
    old: Option<&Json>,
    status: bool,
    json: bool,
) -> Answer {
    let (group, _) = group_version(str_at(obj, "/apiVersion"));
    let what = format!(
        "{}.{group} {}",
        str_at(obj, "/kind"),
        go_quote(str_at(obj, "/metadata/name"))
    );
    render(catalog.admit(obj, old, status), json, &what, "allowed")
}

impl Catalog {
    /// The API server's answer to creating `obj`, or to replacing `old` by it (`status`: a
    /// /status update), from the CRD serving its group, version and kind: `Ok` when it
    /// would be stored, else the refusal (404 when no CRD serves it).
    pub fn admit(&self, obj: &Json, old: Option<&Json>, status: bool) -> Result<(), Status> {
        let api_version = str_at(obj, "/apiVersion");
        let kind = str_at(obj, "/kind");
        let name = str_at(obj, "/metadata/name");
        if api_version.is_empty() || kind.is_empty() {
            return Err(bad_request(format!(
                "the object {} has no apiVersion or no kind",
                go_quote(name)
            )));
        }
        let (group, version) = group_version(api_version);
        let no_match = || format!("no matches for kind {kind:?} in version {api_version:?}");
        let served = self
            .find(group, Some(version), kind)
            .ok_or_else(|| not_found(no_match()))?;
        let compiled = served.compiled().as_ref().map_err(|s| {
            not_found(format!(
                "{}: the CustomResourceDefinition would be refused: {}",
                no_match(),
                s.message
            ))
        })?;
        match (old, status) {
            (None, false) => compiled.create(obj.clone()),
            (Some(old), false) => compiled.update(old, obj.clone()),
            (_, true) if !compiled.info.status_subresource => Err(not_found(
                "the server could not find the requested resource".into(),
            )),
            (None, true) => Err(not_found(format!(
                "{} {} not found",
                served.resource(),
                go_quote(name)
            ))),
            (Some(old), true) => compiled.update_status(old, obj),
        }
        .map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CRD: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.g.example.com}
spec:
  group: g.example.com
  names: {plural: widgets, kind: Widget}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties: {n: {type: integer}}
            x-kubernetes-validations: [{rule: "self.n > 0"}]
"#;

    #[test]
    fn validate_reports_the_api_server_message() {
        let crd = read_doc(CRD).unwrap();
        let obj = read_doc(
            "apiVersion: g.example.com/v1\nkind: Widget\nmetadata: {name: t1}\nspec: {n: 0}",
        )
        .unwrap();
        let catalog = Catalog::new([crd.clone()]).unwrap();
        let a = validate_all(&catalog, &[obj], &[], false, false).unwrap();
        assert!(!a.accepted);
        assert_eq!(
            a.output,
            "Widget.g.example.com \"t1\" is invalid: spec: Invalid value: \"object\": failed rule: self.n > 0"
        );
        assert!(check(&crd, None, false).accepted);
    }

    #[test]
    fn costs_table_lists_every_rule_with_its_share() {
        let crd = read_doc(CRD).unwrap();
        let a = check_costs(&crd, None, false);
        assert!(a.accepted);
        // `self.n > 0`: self (1) + .n (1) + the comparison (1).
        assert!(a
            .output
            .contains("<root>.properties[spec].x-kubernetes-validations[0].rule  self.n > 0"));
        let row = a.output.lines().nth(1).unwrap();
        let cells: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(&cells[cells.len() - 5..], ["3", "1", "3", "0.00%", "0.00%"]);
        assert!(a.output.ends_with("accepted"));
        let j: Json = serde_json::from_str(&check_costs(&crd, None, true).output).unwrap();
        assert_eq!(j["costs"][0]["cost"], 3);
        assert_eq!(j["totalCost"], 3);
    }

    #[test]
    fn costs_table_shows_a_rule_over_the_limit() {
        let crd = read_doc(
            &CRD.replace(
                "properties: {n: {type: integer}}",
                "properties: {n: {type: integer}, l: {type: array, items: {type: string}}}",
            )
            .replace("self.n > 0", "self.l.all(x, x.matches('^a+$'))"),
        )
        .unwrap();
        let a = check_costs(&crd, None, false);
        assert!(!a.accepted);
        assert!(a
            .output
            .contains("estimated rule cost exceeds budget by factor of more than 100x"));
        assert!(a.output.contains("self.l.all(x, x.matches('^a+$'))"));
        // Replacing a CRD with the same schema: the per-rule limit is not enforced, the CRD
        // budget still is.
        let same = check(&crd, Some(&crd), false).output;
        assert!(!same.contains("estimated rule cost exceeds budget"));
        assert!(same.contains("estimated rule cost total for entire OpenAPIv3 schema exceeds"));
        let changed = check(&crd, Some(&read_doc(CRD).unwrap()), false).output;
        assert!(changed.contains("estimated rule cost exceeds budget"));
    }
}
