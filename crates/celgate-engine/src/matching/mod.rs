//! Which policies and bindings apply to a request: `MatchResources` (rules, exclusions,
//! namespace and object selectors, matchPolicy), following `policy/matching/matching.go`
//! (§2 of vap-semantics.md), and the resources no policy ever sees.

pub mod registry;
pub mod rules;
pub mod selector;

use std::collections::BTreeMap;

use crate::model::{MatchResources, NamedRule};
use registry::{Equivalent, Equivalents};
use rules::{rule_matches, Gvr};
use selector::{Selector, SelectorError};

/// What matching needs to know of a request, computed once per request.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RequestAttributes {
    pub operation: String,
    pub group: String,
    pub version: String,
    pub resource: String,
    pub subresource: String,
    pub namespace: String,
    /// The name rules' `resourceNames` compare with: empty for a CREATE with `generateName`.
    pub name: String,
    /// Labels of the new object (`None` when there is no object or it has no metadata).
    pub object_labels: Option<BTreeMap<String, String>>,
    pub old_object_labels: Option<BTreeMap<String, String>>,
}

impl RequestAttributes {
    fn gvr(&self) -> Gvr<'_> {
        Gvr {
            group: &self.group,
            version: &self.version,
            resource: &self.resource,
        }
    }

    fn is_namespaces(&self) -> bool {
        self.group.is_empty() && self.version == "v1" && self.resource == "namespaces"
    }
}

/// The namespaces the matcher may look up (for namespaceSelector).
pub trait Namespaces {
    /// The labels of the namespace `name`, or `None` if it does not exist.
    fn labels(&self, name: &str) -> Option<&BTreeMap<String, String>>;
}

/// The outcome of matching one `MatchResources`.
#[derive(Debug, Clone, PartialEq)]
pub enum Match {
    No,
    Yes,
    /// A configuration error (a namespace lookup or selector failure), only reported when the
    /// rules match.
    Error(MatchError),
}

/// Why a `MatchResources` cannot be decided for a request: a configuration error of the
/// policy or binding that holds it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MatchError {
    /// The request's namespace is unknown, so a namespaceSelector cannot be evaluated (the
    /// API server's wording, a Go `%q`-quoted name).
    #[error("namespaces {0:?} not found")]
    NamespaceNotFound(String),
    /// A namespaceSelector or objectSelector does not compile (the selector's own message).
    #[error(transparent)]
    Selector(#[from] SelectorError),
}

/// A compiled `MatchResources`.
#[derive(Debug, Clone)]
pub struct Matcher {
    namespace_selector: Result<Selector, MatchError>,
    object_selector: Result<Selector, MatchError>,
    /// The selectors as written, for the webhook configuration's hints.
    written: (
        Option<crate::model::LabelSelector>,
        Option<crate::model::LabelSelector>,
    ),
    rules: Vec<NamedRule>,
    exclude: Vec<NamedRule>,
    equivalent: bool,
}

/// The resource a `MatchResources` matched a request as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Matched<'s> {
    /// The request's own resource.
    Own,
    /// An equivalent served resource of the registry.
    Equivalent(&'s Equivalent),
    /// Another version (named by a rule) of a resource the registry does not know.
    Version(&'s str),
}

fn is_own(e: &Equivalent, req: &RequestAttributes) -> bool {
    e.group == req.group && e.version == req.version && e.resource == req.resource
}

fn gvr_of(e: &Equivalent) -> Gvr<'_> {
    Gvr {
        group: &e.group,
        version: &e.version,
        resource: &e.resource,
    }
}

/// Requests VAP never evaluates: the non-persisted review resources, and the admission
/// policy resources themselves (§1).
pub fn is_exempt(group: &str, resource: &str) -> bool {
    matches!(
        (group, resource),
        (
            "authentication.k8s.io",
            "selfsubjectreviews" | "tokenreviews"
        ) | (
            "authorization.k8s.io",
            "localsubjectaccessreviews"
                | "selfsubjectaccessreviews"
                | "selfsubjectrulesreviews"
                | "subjectaccessreviews"
        ) | (
            "admissionregistration.k8s.io",
            "validatingadmissionpolicies"
                | "validatingadmissionpolicybindings"
                | "mutatingadmissionpolicies"
                | "mutatingadmissionpolicybindings"
        )
    )
}

fn restricting<'a>(
    compiled: &Result<Selector, MatchError>,
    written: &'a Option<crate::model::LabelSelector>,
) -> Option<&'a crate::model::LabelSelector> {
    match compiled {
        Ok(s) if !s.is_empty() => written.as_ref(),
        _ => None,
    }
}

impl Matcher {
    /// Compiles with the API server's defaults: selectors `{}`, matchPolicy `Equivalent`.
    pub fn compile(m: &MatchResources) -> Matcher {
        let compile = |s: &Option<crate::model::LabelSelector>| match s {
            Some(s) => Selector::compile(s).map_err(MatchError::Selector),
            None => Ok(Selector::default()),
        };
        Matcher {
            namespace_selector: compile(&m.namespace_selector),
            object_selector: compile(&m.object_selector),
            written: (m.namespace_selector.clone(), m.object_selector.clone()),
            rules: m.resource_rules.clone(),
            exclude: m.exclude_resource_rules.clone(),
            equivalent: m.match_policy.as_deref() != Some("Exact"),
        }
    }

    /// The namespaceSelector as written, when it compiles and selects less than everything
    /// (`None`: every namespace, or a selector error, which every matched request reports).
    pub fn restricting_namespace_selector(&self) -> Option<&crate::model::LabelSelector> {
        restricting(&self.namespace_selector, &self.written.0)
    }

    /// The objectSelector as written, as [`Self::restricting_namespace_selector`].
    pub fn restricting_object_selector(&self) -> Option<&crate::model::LabelSelector> {
        restricting(&self.object_selector, &self.written.1)
    }

    /// The include rules (for indexing).
    pub fn rules(&self) -> &[NamedRule] {
        &self.rules
    }

    /// §2.2: selectors, then exclusions, then rules; selector errors only count when the
    /// rules match. Equivalents are those of a resource the registry does not know (see
    /// `Self::matches_resource`).
    pub fn matches(&self, req: &RequestAttributes, namespaces: &dyn Namespaces) -> Match {
        self.matches_resource(req, namespaces, Equivalents::Unknown)
            .0
    }

    /// [`Self::matches`], with the request's equivalent resources, and which resource matched
    /// (`matching.go` `matchesResourceRules`): the request's own when a rule names it (or
    /// there are no rules), else under matchPolicy Equivalent the first rule, in order, that
    /// names an equivalent one.
    pub fn matches_resource<'s>(
        &'s self,
        req: &RequestAttributes,
        namespaces: &dyn Namespaces,
        equivalents: Equivalents<'s>,
    ) -> (Match, Matched<'s>) {
        let ns = self.namespace_selector_matches(req, namespaces);
        if ns == Ok(false) {
            return (Match::No, Matched::Own);
        }
        let obj = self.object_selector_matches(req);
        if obj == Ok(false) {
            return (Match::No, Matched::Own);
        }
        if self.rules_match(&self.exclude, req, equivalents).is_some() {
            return (Match::No, Matched::Own);
        }
        let matched = if self.rules.is_empty() {
            Matched::Own
        } else {
            match self.rules_match(&self.rules, req, equivalents) {
                Some(m) => m,
                None => return (Match::No, Matched::Own),
            }
        };
        match (ns, obj) {
            (Err(e), _) | (_, Err(e)) => (Match::Error(e), matched),
            _ => (Match::Yes, matched),
        }
    }

    /// The exact pass over every rule, then (matchPolicy Equivalent) the equivalent pass:
    /// each rule against each served equivalent of the request's resource other than its own.
    fn rules_match<'s>(
        &'s self,
        rules: &'s [NamedRule],
        req: &RequestAttributes,
        equivalents: Equivalents<'s>,
    ) -> Option<Matched<'s>> {
        if rules.iter().any(|r| rule_matches(r, req, req.gvr())) {
            return Some(Matched::Own);
        }
        if !self.equivalent {
            return None;
        }
        match equivalents {
            Equivalents::Known { equivalents, .. } => rules.iter().find_map(|rule| {
                equivalents
                    .iter()
                    .filter(|e| !is_own(e, req))
                    .find(|e| rule_matches(rule, req, gvr_of(e)))
                    .map(Matched::Equivalent)
            }),
            // Nothing is known of what is served: any other version a rule names.
            Equivalents::Unknown => rules.iter().find_map(|rule| {
                rule.api_versions
                    .iter()
                    .filter(|v| *v != &req.version && *v != "*")
                    .find(|v| {
                        let gvr = Gvr {
                            group: &req.group,
                            version: v,
                            resource: &req.resource,
                        };
                        rule_matches(rule, req, gvr)
                    })
                    .map(|v| Matched::Version(v))
            }),
        }
    }

    /// Whether some object of the request's resource may match, whatever its name, labels
    /// and namespace: the rules with their resourceNames ignored, and only the exclusions
    /// that name no resource (which exclude every object). Background scans pick the
    /// resources to list with it, version by version (equivalents as for a resource the
    /// registry does not know).
    pub fn may_match_some_object(&self, req: &RequestAttributes) -> bool {
        let unnamed_exclusions: Vec<NamedRule> = self
            .exclude
            .iter()
            .filter(|r| r.resource_names.is_empty())
            .cloned()
            .collect();
        if self
            .rules_match(&unnamed_exclusions, req, Equivalents::Unknown)
            .is_some()
        {
            return false;
        }
        let unnamed_rules: Vec<NamedRule> = self
            .rules
            .iter()
            .map(|r| NamedRule {
                resource_names: Vec::new(),
                ..r.clone()
            })
            .collect();
        unnamed_rules.is_empty()
            || self
                .rules_match(&unnamed_rules, req, Equivalents::Unknown)
                .is_some()
    }

    fn namespace_selector_matches(
        &self,
        req: &RequestAttributes,
        namespaces: &dyn Namespaces,
    ) -> Result<bool, MatchError> {
        if req.namespace.is_empty() && !req.is_namespaces() {
            return Ok(true);
        }
        let selector = self.namespace_selector.as_ref().map_err(Clone::clone)?;
        if selector.is_empty() {
            return Ok(true);
        }
        let own = req.is_namespaces()
            && req.subresource.is_empty()
            && matches!(req.operation.as_str(), "CREATE" | "UPDATE");
        if own {
            return Ok(req
                .object_labels
                .as_ref()
                .is_some_and(|l| selector.matches(l)));
        }
        match namespaces.labels(&req.namespace) {
            Some(labels) => Ok(selector.matches(labels)),
            None => Err(MatchError::NamespaceNotFound(req.namespace.clone())),
        }
    }

    fn object_selector_matches(&self, req: &RequestAttributes) -> Result<bool, MatchError> {
        let selector = self.object_selector.as_ref().map_err(Clone::clone)?;
        if selector.is_empty() {
            return Ok(true);
        }
        let hit =
            |l: &Option<BTreeMap<String, String>>| l.as_ref().is_some_and(|l| selector.matches(l));
        Ok(hit(&req.object_labels) || hit(&req.old_object_labels))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{LabelSelector, SelectorRequirement};

    struct Ns(BTreeMap<String, BTreeMap<String, String>>);

    impl Namespaces for Ns {
        fn labels(&self, name: &str) -> Option<&BTreeMap<String, String>> {
            self.0.get(name)
        }
    }

    fn namespaces() -> Ns {
        let mut m = BTreeMap::new();
        m.insert(
            "prod".to_string(),
            [("env".to_string(), "prod".to_string())]
                .into_iter()
                .collect(),
        );
        m.insert(
            "dev".to_string(),
            [("env".to_string(), "dev".to_string())]
                .into_iter()
                .collect(),
        );
        Ns(m)
    }

    fn pods_rule() -> NamedRule {
        NamedRule {
            operations: vec!["CREATE".into()],
            api_groups: vec!["".into()],
            api_versions: vec!["v1".into()],
            resources: vec!["pods".into()],
            ..Default::default()
        }
    }

    fn pod_create(ns: &str) -> RequestAttributes {
        RequestAttributes {
            operation: "CREATE".into(),
            version: "v1".into(),
            resource: "pods".into(),
            namespace: ns.into(),
            name: "p".into(),
            object_labels: Some(BTreeMap::new()),
            ..Default::default()
        }
    }

    fn env_selector(v: &str) -> Option<LabelSelector> {
        Some(LabelSelector {
            match_expressions: vec![SelectorRequirement {
                key: "env".into(),
                operator: "In".into(),
                values: vec![v.into()],
            }],
            ..Default::default()
        })
    }

    #[test]
    fn namespace_selector_and_missing_namespace() {
        let m = Matcher::compile(&MatchResources {
            namespace_selector: env_selector("prod"),
            resource_rules: vec![pods_rule()],
            ..Default::default()
        });
        assert_eq!(m.matches(&pod_create("prod"), &namespaces()), Match::Yes);
        assert_eq!(m.matches(&pod_create("dev"), &namespaces()), Match::No);
        assert_eq!(
            m.matches(&pod_create("gone"), &namespaces()),
            Match::Error(MatchError::NamespaceNotFound("gone".into()))
        );
        assert_eq!(
            MatchError::NamespaceNotFound("gone".into()).to_string(),
            "namespaces \"gone\" not found"
        );
        let mut cm = pod_create("gone");
        cm.resource = "configmaps".into();
        assert_eq!(
            m.matches(&cm, &namespaces()),
            Match::No,
            "a selector error without a rule match is no match"
        );
    }

    #[test]
    fn exclusions_win_and_empty_rules_match_everything() {
        let m = Matcher::compile(&MatchResources {
            resource_rules: vec![pods_rule()],
            exclude_resource_rules: vec![pods_rule()],
            ..Default::default()
        });
        assert_eq!(m.matches(&pod_create("prod"), &namespaces()), Match::No);
        let all = Matcher::compile(&MatchResources::default());
        assert_eq!(all.matches(&pod_create("prod"), &namespaces()), Match::Yes);
    }

    #[test]
    fn equivalent_versions() {
        let mut rule = pods_rule();
        rule.api_versions = vec!["v1beta1".into()];
        let exact = Matcher::compile(&MatchResources {
            resource_rules: vec![rule.clone()],
            match_policy: Some("Exact".into()),
            ..Default::default()
        });
        let equivalent = Matcher::compile(&MatchResources {
            resource_rules: vec![rule],
            ..Default::default()
        });
        assert_eq!(exact.matches(&pod_create("prod"), &namespaces()), Match::No);
        assert_eq!(
            equivalent.matches(&pod_create("prod"), &namespaces()),
            Match::Yes
        );
    }

    /// A resource some object of which may match: names and selectors do not narrow it, an
    /// exclusion naming objects does not exclude the resource, one naming none does.
    #[test]
    fn some_object_may_match() {
        let mut named = pods_rule();
        named.resource_names = vec!["only-this".into()];
        let m = Matcher::compile(&MatchResources {
            object_selector: env_selector("prod"),
            resource_rules: vec![named.clone()],
            exclude_resource_rules: vec![named],
            ..Default::default()
        });
        let mut create = pod_create("dev");
        create.name = String::new();
        assert!(m.may_match_some_object(&create));
        let excluded = Matcher::compile(&MatchResources {
            resource_rules: vec![pods_rule()],
            exclude_resource_rules: vec![pods_rule()],
            ..Default::default()
        });
        assert!(!excluded.may_match_some_object(&create));
        let mut cm = create.clone();
        cm.resource = "configmaps".into();
        assert!(!m.may_match_some_object(&cm));
        let mut delete = create;
        delete.operation = "DELETE".into();
        assert!(!m.may_match_some_object(&delete), "{:?}", pods_rule());
    }

    #[test]
    fn equivalents_come_from_the_registry() {
        let registry = registry::Registry::builtin(33);
        let rule = |group: &str, version: &str, resource: &str| NamedRule {
            operations: vec!["CREATE".into()],
            api_groups: vec![group.into()],
            api_versions: vec![version.into()],
            resources: vec![resource.into()],
            ..Default::default()
        };
        let matcher = |rules: Vec<NamedRule>| {
            Matcher::compile(&MatchResources {
                resource_rules: rules,
                ..Default::default()
            })
        };
        let request = |group: &str, version: &str, resource: &str| RequestAttributes {
            group: group.into(),
            version: version.into(),
            resource: resource.into(),
            ..pod_create("prod")
        };
        let run = |m: &Matcher, r: &RequestAttributes| {
            let eq = registry.equivalents(&r.group, &r.resource, &r.subresource);
            let (found, how) = m.matches_resource(r, &namespaces(), eq);
            let how = match how {
                Matched::Own => "own".to_string(),
                Matched::Equivalent(e) => format!("{}/{} {}", e.group, e.version, e.kind.kind),
                Matched::Version(v) => format!("version {v}"),
            };
            (found, how)
        };

        let cm = request("", "v1", "configmaps");
        let v2 = matcher(vec![rule("", "v2", "configmaps")]);
        assert_eq!(run(&v2, &cm).0, Match::No, "no configmaps v2 is served");
        assert_eq!(
            v2.matches(&cm, &namespaces()),
            Match::Yes,
            "without the registry, any version named"
        );

        let hpa = request("autoscaling", "v2", "horizontalpodautoscalers");
        let v1 = matcher(vec![rule("autoscaling", "v1", "horizontalpodautoscalers")]);
        assert_eq!(
            run(&v1, &hpa),
            (Match::Yes, "autoscaling/v1 HorizontalPodAutoscaler".into())
        );

        let event = request("events.k8s.io", "v1", "events");
        let core = matcher(vec![rule("", "v1", "events")]);
        assert_eq!(run(&core, &event), (Match::Yes, "/v1 Event".into()));

        // matching.go tries every rule exactly before any equivalent.
        let both = matcher(vec![
            rule("autoscaling", "v1", "horizontalpodautoscalers"),
            rule("autoscaling", "v2", "horizontalpodautoscalers"),
        ]);
        assert_eq!(run(&both, &hpa), (Match::Yes, "own".into()));

        let widgets = request("example.com", "v2", "widgets");
        let unknown = matcher(vec![rule("example.com", "v1", "widgets")]);
        assert_eq!(
            run(&unknown, &widgets),
            (Match::Yes, "version v1".into()),
            "a resource the registry does not know: the version the rule names"
        );

        let exact = Matcher::compile(&MatchResources {
            resource_rules: vec![rule("autoscaling", "v1", "horizontalpodautoscalers")],
            match_policy: Some("Exact".into()),
            ..Default::default()
        });
        assert_eq!(run(&exact, &hpa).0, Match::No);
        let excluded = Matcher::compile(&MatchResources {
            exclude_resource_rules: vec![rule("autoscaling", "v1", "horizontalpodautoscalers")],
            ..Default::default()
        });
        assert_eq!(
            run(&excluded, &hpa).0,
            Match::No,
            "exclusions match equivalents too"
        );
    }

    #[test]
    fn object_selector_reads_old_or_new() {
        let m = Matcher::compile(&MatchResources {
            object_selector: env_selector("prod"),
            ..Default::default()
        });
        let mut r = pod_create("prod");
        r.operation = "DELETE".into();
        r.object_labels = None;
        r.old_object_labels = Some(
            [("env".to_string(), "prod".to_string())]
                .into_iter()
                .collect(),
        );
        assert_eq!(m.matches(&r, &namespaces()), Match::Yes);
        r.old_object_labels = None;
        assert_eq!(
            m.matches(&r, &namespaces()),
            Match::No,
            "no object never matches"
        );
    }

    #[test]
    fn exempt_resources() {
        assert!(is_exempt(
            "admissionregistration.k8s.io",
            "validatingadmissionpolicies"
        ));
        assert!(is_exempt("authorization.k8s.io", "subjectaccessreviews"));
        assert!(!is_exempt("", "pods"));
    }
}
