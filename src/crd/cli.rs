//! `celgate crd check` and `celgate crd validate`: read a CRD (and objects) from YAML or JSON,
//! answer as the API server would, as text or as JSON (`-o json`).

use serde_json::Value as Json;

use super::cost::{RuleCost, STATIC_ESTIMATED_COST_LIMIT, STATIC_ESTIMATED_CRD_COST_LIMIT};
use super::errors::Status;
use super::request::crd_status;
use super::rules::{compile_full, CompiledCrd, UpdateOptions};
use super::schema::parse_crd;

/// What a command prints and how it ends.
#[derive(Debug)]
pub struct Answer {
    /// Text or JSON to print on standard output.
    pub output: String,
    /// The CRD or object was accepted.
    pub accepted: bool,
}

/// Reads the first YAML/JSON document of `text`.
pub fn read_doc(text: &str) -> Result<Json, String> {
    let de = serde_yaml_ng::Deserializer::from_str(text);
    for doc in de {
        let v: Json = serde::Deserialize::deserialize(doc).map_err(|e| e.to_string())?;
        if !v.is_null() {
            return Ok(v);
        }
    }
    Err("no document".into())
}

fn status_json(s: &Status) -> Json {
    serde_json::json!({
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "message": s.message,
        "reason": s.reason,
        "code": s.code,
        "details": {"causes": s.causes},
    })
}

fn render(result: Result<Json, Status>, json: bool, ok_text: &str) -> Answer {
    match result {
        Ok(obj) => Answer {
            output: if json {
                serde_json::to_string_pretty(&obj).unwrap_or_default()
            } else {
                ok_text.to_string()
            },
            accepted: true,
        },
        Err(s) => Answer {
            output: if json {
                serde_json::to_string_pretty(&status_json(&s)).unwrap_or_default()
            } else {
                s.message
            },
            accepted: false,
        },
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

fn load(crd: &Json) -> Result<CompiledCrd, Status> {
    load_replacing(crd, None)
}

/// Compiles `crd` as created, or as replacing the stored CRD `old`.
fn load_replacing(crd: &Json, old: Option<&Json>) -> Result<CompiledCrd, Status> {
    let parsed = parse_crd(crd).map_err(bad_request)?;
    let update = match old {
        Some(o) => {
            let old = parse_crd(o).map_err(|e| bad_request(format!("--old: {e}")))?;
            UpdateOptions::replacing(&old, &parsed.raw_schema)
        }
        None => UpdateOptions::default(),
    };
    compile_full(&parsed, &update, &mut Vec::new()).map_err(|c| crd_status(&parsed.name, c))
}

/// `celgate crd check`: whether the CRD would be accepted (created, or replacing `old`).
pub fn check(crd: &Json, old: Option<&Json>, json: bool) -> Answer {
    let result = load_replacing(crd, old)
        .map(|c| serde_json::json!({"accepted": true, "name": c.info.name}));
    render(result, json, "accepted")
}

/// `celgate crd check --costs`: the answer, preceded (text) or accompanied (JSON, under
/// `costs`) by the estimated cost of every rule and messageExpression that compiled.
pub fn check_costs(crd: &Json, old: Option<&Json>, json: bool) -> Answer {
    let parsed = match parse_crd(crd) {
        Ok(p) => p,
        Err(e) => return render(Err(bad_request(e)), json, ""),
    };
    let update = match old.map(parse_crd).transpose() {
        Ok(Some(o)) => UpdateOptions::replacing(&o, &parsed.raw_schema),
        Ok(None) => UpdateOptions::default(),
        Err(e) => return render(Err(bad_request(format!("--old: {e}"))), json, ""),
    };
    let mut costs = Vec::new();
    let result =
        compile_full(&parsed, &update, &mut costs).map_err(|c| crd_status(&parsed.name, c));
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
        let mut answer = match &result {
            Ok(c) => serde_json::json!({"accepted": true, "name": c.info.name}),
            Err(s) => status_json(s),
        };
        answer["costs"] = Json::Array(rows);
        answer["totalCost"] = total.into();
        return Answer {
            output: serde_json::to_string_pretty(&answer).unwrap_or_default(),
            accepted: result.is_ok(),
        };
    }
    let table = cost_table(&costs, total);
    let mut answer = render(result.map(|_| Json::Null), false, "accepted");
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
        let path = c.field.strip_prefix(PREFIX).unwrap_or(&c.field);
        let mut expr: String = c
            .expression
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        if expr.chars().count() > 60 {
            expr = expr.chars().take(57).collect::<String>() + "...";
        }
        rows.push([
            format!("<root>{path}"),
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

/// `celgate crd validate`: the answer to creating `obj`, or to replacing `old` by it
/// (`status`: as a /status update).
pub fn validate(crd: &Json, obj: Json, old: Option<&Json>, status: bool, json: bool) -> Answer {
    let compiled = match load(crd) {
        Ok(c) => c,
        Err(s) => return render(Err(s), json, ""),
    };
    let result = match (old, status) {
        (None, _) => compiled.create(obj),
        (Some(o), false) => compiled.update(o, obj),
        (Some(o), true) => compiled.update_status(o, &obj),
    };
    render(result, json, "allowed")
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
        let a = validate(&crd, obj, None, false, false);
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
