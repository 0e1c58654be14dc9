//! Kubernetes label selectors (`metav1.LabelSelector`): `matchLabels` and `matchExpressions`
//! with `In`, `NotIn`, `Exists` and `DoesNotExist`, validated as apimachinery does when
//! converting to a selector.

use std::collections::BTreeMap;

use crate::model::LabelSelector;
use celgate_cel::apimachinery::names;

/// Why a label selector does not compile, in apimachinery's words (`LabelSelectorAsSelector`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    /// A key of matchLabels or matchExpressions is not a qualified name.
    #[error("key: Invalid value: {key:?}: {}", .errors.join("; "))]
    Key { key: String, errors: Vec<String> },
    /// A value of matchLabels or of an `In`/`NotIn` expression is not a label value.
    #[error("values[0][{key}]: Invalid value: {value:?}: bad value: {}", .errors.join("; "))]
    Value {
        key: String,
        value: String,
        errors: Vec<String>,
    },
    /// An `In` or `NotIn` expression has no values.
    #[error("values: Invalid value: []string(nil): for 'in', 'notin' operators, values set can't be empty (key {key:?})")]
    NoValues { key: String },
    /// An `Exists` or `DoesNotExist` expression has values.
    #[error(
        "values: Invalid value: {values:?}: values set must be empty for exists and does not exist"
    )]
    ValuesForExists { values: Vec<String> },
    /// The operator is none of `In`, `NotIn`, `Exists`, `DoesNotExist`.
    #[error("{operator:?} is not a valid label selector operator")]
    Operator { operator: String },
}

#[derive(Debug, Clone, PartialEq)]
enum Op {
    In(Vec<String>),
    NotIn(Vec<String>),
    Exists,
    DoesNotExist,
}

#[derive(Debug, Clone, PartialEq)]
struct Requirement {
    key: String,
    op: Op,
}

/// A compiled selector. The empty selector matches everything.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Selector {
    requirements: Vec<Requirement>,
}

impl Selector {
    /// Compiles a selector, refusing what apimachinery's `LabelSelectorAsSelector` refuses.
    pub fn compile(s: &LabelSelector) -> Result<Selector, SelectorError> {
        let mut requirements = Vec::new();
        for (k, v) in &s.match_labels {
            validate_key(k)?;
            validate_value(k, v)?;
            requirements.push(Requirement {
                key: k.clone(),
                op: Op::In(vec![v.clone()]),
            });
        }
        for e in &s.match_expressions {
            validate_key(&e.key)?;
            let op = match e.operator.as_str() {
                "In" | "NotIn" => {
                    if e.values.is_empty() {
                        return Err(SelectorError::NoValues { key: e.key.clone() });
                    }
                    for v in &e.values {
                        validate_value(&e.key, v)?;
                    }
                    if e.operator == "In" {
                        Op::In(e.values.clone())
                    } else {
                        Op::NotIn(e.values.clone())
                    }
                }
                "Exists" | "DoesNotExist" => {
                    if !e.values.is_empty() {
                        return Err(SelectorError::ValuesForExists {
                            values: e.values.clone(),
                        });
                    }
                    if e.operator == "Exists" {
                        Op::Exists
                    } else {
                        Op::DoesNotExist
                    }
                }
                other => {
                    return Err(SelectorError::Operator {
                        operator: other.to_string(),
                    })
                }
            };
            requirements.push(Requirement {
                key: e.key.clone(),
                op,
            });
        }
        Ok(Selector { requirements })
    }

    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.requirements.iter().all(|r| {
            let got = labels.get(&r.key);
            match &r.op {
                Op::In(vs) => got.is_some_and(|v| vs.contains(v)),
                Op::NotIn(vs) => got.is_none_or(|v| !vs.contains(v)),
                Op::Exists => got.is_some(),
                Op::DoesNotExist => got.is_none(),
            }
        })
    }
}

fn validate_key(k: &str) -> Result<(), SelectorError> {
    let errors = names::qualified_name(k);
    if errors.is_empty() {
        Ok(())
    } else {
        Err(SelectorError::Key {
            key: k.to_string(),
            errors,
        })
    }
}

fn validate_value(k: &str, v: &str) -> Result<(), SelectorError> {
    let errors = names::label_value(v);
    if errors.is_empty() {
        Ok(())
    } else {
        Err(SelectorError::Value {
            key: k.to_string(),
            value: v.to_string(),
            errors,
        })
    }
}

/// The labels of a JSON object's `metadata.labels` (strings only).
pub fn labels_of(object: &serde_json::Value) -> Option<BTreeMap<String, String>> {
    let meta = object.get("metadata")?.as_object()?;
    let labels = meta.get("labels").and_then(|l| l.as_object());
    Some(
        labels
            .map(|m| {
                m.iter()
                    .filter_map(|(k, v)| v.as_str().map(|s| (k.clone(), s.to_string())))
                    .collect()
            })
            .unwrap_or_default(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::SelectorRequirement;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn expr(key: &str, op: &str, values: &[&str]) -> SelectorRequirement {
        SelectorRequirement {
            key: key.into(),
            operator: op.into(),
            values: values.iter().map(|v| v.to_string()).collect(),
        }
    }

    fn sel(match_labels: &[(&str, &str)], exprs: Vec<SelectorRequirement>) -> Selector {
        Selector::compile(&LabelSelector {
            match_labels: labels(match_labels),
            match_expressions: exprs,
        })
        .unwrap()
    }

    /// (operator, values, labels present, expected match)
    type Case = (
        &'static str,
        &'static [&'static str],
        &'static [(&'static str, &'static str)],
        bool,
    );

    /// Every operator against every label state, as a table.
    #[test]
    fn operator_table() {
        let cases: &[Case] = &[
            ("In", &["a", "b"], &[("k", "a")], true),
            ("In", &["a", "b"], &[("k", "c")], false),
            ("In", &["a"], &[], false),
            ("NotIn", &["a"], &[("k", "a")], false),
            ("NotIn", &["a"], &[("k", "b")], true),
            ("NotIn", &["a"], &[], true),
            ("Exists", &[], &[("k", "")], true),
            ("Exists", &[], &[], false),
            ("DoesNotExist", &[], &[], true),
            ("DoesNotExist", &[], &[("k", "x")], false),
        ];
        for (op, values, present, want) in cases {
            let s = sel(&[], vec![expr("k", op, values)]);
            assert_eq!(
                s.matches(&labels(present)),
                *want,
                "{op} {values:?} on {present:?}"
            );
        }
    }

    #[test]
    fn empty_matches_everything_and_terms_are_anded() {
        assert!(sel(&[], vec![]).matches(&labels(&[])));
        let s = sel(&[("env", "prod")], vec![expr("team", "Exists", &[])]);
        assert!(s.matches(&labels(&[("env", "prod"), ("team", "a")])));
        assert!(!s.matches(&labels(&[("env", "prod")])));
        assert!(!s.matches(&labels(&[("env", "dev"), ("team", "a")])));
    }

    #[test]
    fn invalid_selectors_are_refused() {
        let bad = |m: &[(&str, &str)], e: Vec<SelectorRequirement>| {
            Selector::compile(&LabelSelector {
                match_labels: labels(m),
                match_expressions: e,
            })
            .unwrap_err()
            .to_string()
        };
        assert!(bad(&[("k", "bad value!")], vec![]).contains("bad value"));
        assert!(bad(&[], vec![expr("k", "In", &[])]).contains("can't be empty"));
        assert!(bad(&[], vec![expr("k", "Exists", &["x"])]).contains("must be empty"));
        assert!(
            bad(&[], vec![expr("k", "Near", &[])]).contains("not a valid label selector operator")
        );
        assert!(bad(&[("bad key!", "v")], vec![]).contains("key"));
    }
}
