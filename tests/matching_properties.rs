//! Property tests for label selectors and resource rules: relations that must hold for any
//! labels and any request, checked on generated inputs.

use std::collections::BTreeMap;

use celgate::matching::rules::{rule_matches, Gvr};
use celgate::matching::selector::Selector;
use celgate::matching::RequestAttributes;
use celgate::model::{LabelSelector, NamedRule, SelectorRequirement};
use proptest::prelude::*;

fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("env".to_string()),
        Just("team".to_string()),
        Just("app.kubernetes.io/name".to_string())
    ]
}

fn value() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("prod".to_string()),
        Just("dev".to_string()),
        Just("".to_string()),
        Just("web".to_string())
    ]
}

fn labels() -> impl Strategy<Value = BTreeMap<String, String>> {
    prop::collection::btree_map(key(), value(), 0..3)
}

fn expr(k: &str, op: &str, values: Vec<String>) -> Selector {
    Selector::compile(&LabelSelector {
        match_expressions: vec![SelectorRequirement {
            key: k.into(),
            operator: op.into(),
            values,
        }],
        ..Default::default()
    })
    .unwrap()
}

proptest! {
    /// `In` and `NotIn` on the same values: exactly one matches, absent label included.
    #[test]
    fn in_and_not_in_are_complements(l in labels(), k in key(), vs in prop::collection::vec(value(), 1..3)) {
        let a = expr(&k, "In", vs.clone()).matches(&l);
        let b = expr(&k, "NotIn", vs).matches(&l);
        prop_assert!(a != b);
    }

    #[test]
    fn exists_and_does_not_exist_are_complements(l in labels(), k in key()) {
        prop_assert!(expr(&k, "Exists", vec![]).matches(&l) != expr(&k, "DoesNotExist", vec![]).matches(&l));
    }

    /// `matchLabels {k: v}` is `k In (v)`.
    #[test]
    fn match_labels_is_in(l in labels(), k in key(), v in value()) {
        let m = Selector::compile(&LabelSelector { match_labels: [(k.clone(), v.clone())].into_iter().collect(), ..Default::default() }).unwrap();
        prop_assert_eq!(m.matches(&l), expr(&k, "In", vec![v]).matches(&l));
    }

    /// Requirements are ANDed: a selector matches iff each requirement alone does.
    #[test]
    fn requirements_are_anded(l in labels(), k1 in key(), v1 in value(), k2 in key(), v2 in value()) {
        let both = Selector::compile(&LabelSelector {
            match_expressions: vec![
                SelectorRequirement { key: k1.clone(), operator: "In".into(), values: vec![v1.clone()] },
                SelectorRequirement { key: k2.clone(), operator: "NotIn".into(), values: vec![v2.clone()] },
            ],
            ..Default::default()
        }).unwrap();
        prop_assert_eq!(both.matches(&l), expr(&k1, "In", vec![v1]).matches(&l) && expr(&k2, "NotIn", vec![v2]).matches(&l));
    }

    #[test]
    fn the_empty_selector_matches_everything(l in labels()) {
        prop_assert!(Selector::compile(&LabelSelector::default()).unwrap().matches(&l));
    }
}

fn resource() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("pods".to_string()),
        Just("deployments".to_string()),
        Just("configmaps".to_string())
    ]
}

fn subresource() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("".to_string()),
        Just("status".to_string()),
        Just("scale".to_string()),
        Just("exec".to_string())
    ]
}

fn op() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("CREATE".to_string()),
        Just("UPDATE".to_string()),
        Just("DELETE".to_string()),
        Just("CONNECT".to_string())
    ]
}

fn any_rule(resources: &[&str]) -> NamedRule {
    NamedRule {
        operations: vec!["*".into()],
        api_groups: vec!["*".into()],
        api_versions: vec!["*".into()],
        resources: resources.iter().map(|r| r.to_string()).collect(),
        ..Default::default()
    }
}

fn request(op: String, res: String, sub: String) -> RequestAttributes {
    RequestAttributes {
        operation: op,
        version: "v1".into(),
        resource: res,
        subresource: sub,
        namespace: "ns".into(),
        name: "x".into(),
        ..Default::default()
    }
}

proptest! {
    /// `*/*` matches everything; `*` only main resources; `r/*` every form of `r`;
    /// `*/s` only subresource `s`; `r` only the main resource `r`.
    #[test]
    fn resource_forms(o in op(), res in resource(), other in resource(), sub in subresource()) {
        let req = request(o, res.clone(), sub.clone());
        let gvr = Gvr { group: "", version: "v1", resource: &req.resource };
        let own_all = format!("{res}/*");
        let other_all = format!("{other}/*");
        prop_assert!(rule_matches(&any_rule(&["*/*"]), &req, gvr));
        prop_assert_eq!(rule_matches(&any_rule(&["*"]), &req, gvr), sub.is_empty());
        prop_assert!(rule_matches(&any_rule(&[own_all.as_str()]), &req, gvr));
        prop_assert_eq!(rule_matches(&any_rule(&[other_all.as_str()]), &req, gvr), other == res);
        prop_assert_eq!(rule_matches(&any_rule(&["*/scale"]), &req, gvr), sub == "scale");
        prop_assert_eq!(rule_matches(&any_rule(&[&res]), &req, gvr), sub.is_empty());
    }

    /// An operations list matches exactly the operations it names (or all with `*`).
    #[test]
    fn operations(o in op(), listed in prop::collection::btree_set(op(), 1..4)) {
        let mut rule = any_rule(&["*/*"]);
        rule.operations = listed.iter().cloned().collect();
        let req = request(o.clone(), "pods".into(), "".into());
        let gvr = Gvr { group: "", version: "v1", resource: "pods" };
        prop_assert_eq!(rule_matches(&rule, &req, gvr), listed.contains(&o));
    }
}
