//! `celgate crd check` and `celgate crd validate`: read a CRD (and objects) from YAML or JSON,
//! answer as the API server would, as text or as JSON (`-o json`).

use serde_json::Value as Json;

use super::errors::Status;
use super::request::crd_status;
use super::rules::{compile, CompiledCrd};
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

fn load(crd: &Json) -> Result<CompiledCrd, Status> {
    let parsed = parse_crd(crd).map_err(|e| Status {
        code: 400,
        reason: "BadRequest".into(),
        message: e,
        causes: Vec::new(),
    })?;
    compile(&parsed).map_err(|c| crd_status(&parsed.name, c))
}

/// `celgate crd check`: whether the CRD would be accepted.
pub fn check(crd: &Json, json: bool) -> Answer {
    let result = load(crd).map(|c| serde_json::json!({"accepted": true, "name": c.info.name}));
    render(result, json, "accepted")
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
        assert!(check(&crd, false).accepted);
    }
}
