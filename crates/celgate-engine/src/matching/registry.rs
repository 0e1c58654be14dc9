//! The resource registry: which group/version/resources a cluster serves, their kinds, scopes
//! and subresources, and which of them are *equivalent* (the API server's
//! `EquivalentResourceMapper`): the built-in APIs served by default per Kubernetes minor, plus
//! the served versions of each CustomResourceDefinition the snapshot holds.
//!
//! Equivalence follows kube-apiserver: resources are equivalent when they share storage. The
//! storage key of a built-in is its group/resource, except the cross-group pairs the API server
//! registers as cohabiting (`AddCohabitatingResources`): of those, only core `events` and
//! `events.k8s.io` `events` are still served (the `extensions` ones went in 1.16–1.22). All
//! served versions of one group/resource are equivalent: HPA `autoscaling/v1` and `v2`,
//! `flowcontrol.apiserver.k8s.io` `v1` and its betas while served, every served CRD version.
//!
//! Pure data, built once per snapshot; a request pays one lookup (two hash probes and a short
//! scan of its resource's subresources) and no allocation.

use std::collections::HashMap;

use serde_json::Value as Json;

/// A group/version/kind (ordered by group, version, kind).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Gvk {
    pub group: String,
    pub version: String,
    pub kind: String,
}

impl Gvk {
    pub fn new(group: &str, version: &str, kind: &str) -> Gvk {
        Gvk {
            group: group.into(),
            version: version.into(),
            kind: kind.into(),
        }
    }

    /// `apiVersion` as objects spell it (`v1`, `apps/v1`).
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }
}

/// As Go's `schema.GroupVersionKind.String()` prints it (`apps/v1, Kind=Deployment`,
/// `/v1, Kind=Pod`), for error messages.
impl std::fmt::Display for Gvk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}, Kind={}", self.group, self.version, self.kind)
    }
}

/// One served resource (with the subresource it was looked up for) that a request's resource
/// is equivalent to, and the kind objects of it have.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Equivalent {
    pub group: String,
    pub version: String,
    pub resource: String,
    /// `KindFor(resource, subresource)`: the kind of the subresource's objects at this version
    /// (`autoscaling/v1 Scale` for `scale`, the resource's own kind for `status`).
    pub kind: Gvk,
}

/// How objects of a class convert between its versions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Conversion {
    /// Built-in types: the API server's conversion functions (celgate has some of them).
    Builtin,
    /// A CRD with strategy `None`: only `apiVersion` changes.
    Rewrite,
    /// A CRD whose versions convert through its webhook (the CRD's name): celgate cannot.
    Webhook(String),
}

/// Resources that share storage: every served (group, version, resource) of them, per
/// subresource.
#[derive(Debug, Clone)]
pub struct Class {
    pub conversion: Conversion,
    /// `("", [...])` for the main resource, then each subresource, each with the served
    /// resources that have it, in registration order.
    subresources: Vec<(String, Vec<Equivalent>)>,
}

/// What the registry knows of a request's resource.
#[derive(Debug, Clone, Copy)]
pub enum Equivalents<'r> {
    /// A resource of the registry: its class, and the served resources equivalent to it for
    /// the request's subresource (the request's own among them).
    Known {
        class: &'r Class,
        equivalents: &'r [Equivalent],
    },
    /// A resource the registry does not know (a custom resource whose CRD celgate has not
    /// seen, an aggregated API): any version a rule names is taken as served, converted by
    /// rewriting `apiVersion` as for a CRD without a conversion webhook.
    Unknown,
}

/// The resource registry of one snapshot.
#[derive(Debug, Clone, Default)]
pub struct Registry {
    /// group -> resource -> index in `classes`.
    index: HashMap<String, HashMap<String, usize>>,
    classes: Vec<Class>,
    /// (group, resource) -> whether it is namespaced, for every served resource.
    namespaced: HashMap<(String, String), bool>,
}

impl Registry {
    /// The built-in APIs a Kubernetes 1.`minor` API server serves by default.
    pub fn builtin(minor: u16) -> Registry {
        let mut r = Registry::default();
        for b in BUILTINS
            .iter()
            .filter(|b| b.since <= minor && minor <= b.until)
        {
            let key = match (b.group, b.resource) {
                // Cohabiting across groups (kube-apiserver's AddCohabitatingResources).
                ("events.k8s.io", "events") => ("", "events"),
                other => other,
            };
            let class = r.class_for(key.0, key.1, b.group, b.resource, Conversion::Builtin);
            let own = Gvk::new(b.group, b.version, b.kind);
            let entry = |kind: Gvk| Equivalent {
                group: b.group.into(),
                version: b.version.into(),
                resource: b.resource.into(),
                kind,
            };
            r.push(class, "", entry(own.clone()));
            for (name, sub) in b.subresources {
                let kind = match sub {
                    Sub::Own => own.clone(),
                    Sub::Kind(g, v, k) => Gvk::new(g, v, k),
                };
                r.push(class, name, entry(kind));
            }
            r.namespaced
                .insert((b.group.into(), b.resource.into()), b.namespaced);
        }
        r
    }

    /// Adds a CustomResourceDefinition: its served versions, with their `status` and `scale`
    /// subresources. Not a CRD (or one without group, plural or kind): ignored.
    pub fn add_crd(&mut self, crd: &Json) {
        let spec = &crd["spec"];
        let (Some(group), Some(plural), Some(kind)) = (
            spec["group"].as_str(),
            spec["names"]["plural"].as_str(),
            spec["names"]["kind"].as_str(),
        ) else {
            return;
        };
        let conversion = match spec["conversion"]["strategy"].as_str() {
            Some("Webhook") => Conversion::Webhook(
                crd["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            ),
            _ => Conversion::Rewrite,
        };
        // A CRD replaces what was known of its group/resource (a CRD seen twice, or one
        // shadowing a built-in name).
        if let Some(i) = self.index.get(group).and_then(|m| m.get(plural)).copied() {
            if let Some(c) = self.classes.get_mut(i) {
                c.subresources.clear();
                c.conversion = conversion.clone();
            }
        }
        let class = self.class_for(group, plural, group, plural, conversion);
        let versions = spec["versions"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or(&[]);
        for v in versions {
            let Some(version) = v["name"].as_str() else {
                continue;
            };
            if v["served"] == false {
                continue;
            }
            let entry = |kind: Gvk| Equivalent {
                group: group.into(),
                version: version.into(),
                resource: plural.into(),
                kind,
            };
            let own = Gvk::new(group, version, kind);
            self.push(class, "", entry(own.clone()));
            let subs = &v["subresources"];
            if subs["status"].is_object() {
                self.push(class, "status", entry(own));
            }
            if subs["scale"].is_object() {
                self.push(
                    class,
                    "scale",
                    entry(Gvk::new("autoscaling", "v1", "Scale")),
                );
            }
        }
        self.namespaced.insert(
            (group.into(), plural.into()),
            spec["scope"].as_str() != Some("Cluster"),
        );
    }

    /// What is known of `group`/`resource`, with the equivalents that have `subresource`.
    pub fn equivalents(&self, group: &str, resource: &str, subresource: &str) -> Equivalents<'_> {
        let Some(class) = self
            .index
            .get(group)
            .and_then(|m| m.get(resource))
            .and_then(|&i| self.classes.get(i))
        else {
            return Equivalents::Unknown;
        };
        let equivalents = class
            .subresources
            .iter()
            .find(|(s, _)| s == subresource)
            .map_or(&[][..], |(_, e)| e.as_slice());
        Equivalents::Known { class, equivalents }
    }

    /// Whether `group`/`resource` is namespaced; `None` when it is not served.
    pub fn is_namespaced(&self, group: &str, resource: &str) -> Option<bool> {
        self.namespaced
            .get(&(group.to_string(), resource.to_string()))
            .copied()
    }

    /// Every served resource (main resources only): for tests and listings.
    pub fn served(&self) -> impl Iterator<Item = &Equivalent> {
        self.classes.iter().flat_map(|c| {
            c.subresources
                .iter()
                .filter(|(s, _)| s.is_empty())
                .flat_map(|(_, e)| e.iter())
        })
    }

    /// The class stored under `key`, created if new, and `group`/`resource` indexed to it.
    fn class_for(
        &mut self,
        key_group: &str,
        key_resource: &str,
        group: &str,
        resource: &str,
        conversion: Conversion,
    ) -> usize {
        let existing = self
            .index
            .get(key_group)
            .and_then(|m| m.get(key_resource))
            .copied();
        let i = existing.unwrap_or_else(|| {
            self.classes.push(Class {
                conversion,
                subresources: Vec::new(),
            });
            self.classes.len() - 1
        });
        for (g, r) in [(key_group, key_resource), (group, resource)] {
            self.index
                .entry(g.to_string())
                .or_default()
                .insert(r.to_string(), i);
        }
        i
    }

    fn push(&mut self, class: usize, subresource: &str, e: Equivalent) {
        let Some(c) = self.classes.get_mut(class) else {
            return;
        };
        match c.subresources.iter_mut().find(|(s, _)| s == subresource) {
            Some((_, list)) => {
                if !list.contains(&e) {
                    list.push(e);
                }
            }
            None => c.subresources.push((subresource.to_string(), vec![e])),
        }
    }
}

/// The kind of a subresource's objects.
#[derive(Debug, Clone, Copy)]
enum Sub {
    /// The resource's own kind at the same version (`status`, `ephemeralcontainers`).
    Own,
    Kind(&'static str, &'static str, &'static str),
}

/// A built-in resource, served by default from 1.`since` to 1.`until`.
struct Builtin {
    group: &'static str,
    version: &'static str,
    resource: &'static str,
    kind: &'static str,
    namespaced: bool,
    subresources: &'static [(&'static str, Sub)],
    since: u16,
    until: u16,
}

const ALL: (u16, u16) = (0, u16::MAX);
const SCALE: Sub = Sub::Kind("autoscaling", "v1", "Scale");
const STATUS: &[(&str, Sub)] = &[("status", Sub::Own)];
const STATUS_SCALE: &[(&str, Sub)] = &[("status", Sub::Own), ("scale", SCALE)];
const NONE: &[(&str, Sub)] = &[];
const POD_SUBS: &[(&str, Sub)] = &[
    ("status", Sub::Own),
    ("binding", Sub::Kind("", "v1", "Binding")),
    ("eviction", Sub::Kind("policy", "v1", "Eviction")),
    ("ephemeralcontainers", Sub::Own),
    ("resize", Sub::Own),
    ("exec", Sub::Kind("", "v1", "PodExecOptions")),
    ("attach", Sub::Kind("", "v1", "PodAttachOptions")),
    ("portforward", Sub::Kind("", "v1", "PodPortForwardOptions")),
    ("proxy", Sub::Kind("", "v1", "PodProxyOptions")),
];

const fn b(
    group: &'static str,
    version: &'static str,
    resource: &'static str,
    kind: &'static str,
    namespaced: bool,
    subresources: &'static [(&'static str, Sub)],
    (since, until): (u16, u16),
) -> Builtin {
    Builtin {
        group,
        version,
        resource,
        kind,
        namespaced,
        subresources,
        since,
        until,
    }
}

const NS: bool = true;
const CL: bool = false;

/// The APIs a kube-apiserver (with its aggregator and apiextensions servers) serves without
/// `--runtime-config`, from Kubernetes 1.27: the GA versions, plus the betas still on by
/// default (flowcontrol). `tests/registry.rs` checks every entry served by the k8s-openapi
/// version in use against its types.
const BUILTINS: &[Builtin] = &[
    b("", "v1", "bindings", "Binding", NS, NONE, ALL),
    b(
        "",
        "v1",
        "componentstatuses",
        "ComponentStatus",
        CL,
        NONE,
        ALL,
    ),
    b("", "v1", "configmaps", "ConfigMap", NS, NONE, ALL),
    b("", "v1", "endpoints", "Endpoints", NS, NONE, ALL),
    b("", "v1", "events", "Event", NS, NONE, ALL),
    b("", "v1", "limitranges", "LimitRange", NS, NONE, ALL),
    b(
        "",
        "v1",
        "namespaces",
        "Namespace",
        CL,
        &[("status", Sub::Own), ("finalize", Sub::Own)],
        ALL,
    ),
    b(
        "",
        "v1",
        "nodes",
        "Node",
        CL,
        &[
            ("status", Sub::Own),
            ("proxy", Sub::Kind("", "v1", "NodeProxyOptions")),
        ],
        ALL,
    ),
    b(
        "",
        "v1",
        "persistentvolumeclaims",
        "PersistentVolumeClaim",
        NS,
        STATUS,
        ALL,
    ),
    b(
        "",
        "v1",
        "persistentvolumes",
        "PersistentVolume",
        CL,
        STATUS,
        ALL,
    ),
    b("", "v1", "pods", "Pod", NS, POD_SUBS, ALL),
    b("", "v1", "podtemplates", "PodTemplate", NS, NONE, ALL),
    b(
        "",
        "v1",
        "replicationcontrollers",
        "ReplicationController",
        NS,
        STATUS_SCALE,
        ALL,
    ),
    b("", "v1", "resourcequotas", "ResourceQuota", NS, STATUS, ALL),
    b("", "v1", "secrets", "Secret", NS, NONE, ALL),
    b(
        "",
        "v1",
        "serviceaccounts",
        "ServiceAccount",
        NS,
        &[(
            "token",
            Sub::Kind("authentication.k8s.io", "v1", "TokenRequest"),
        )],
        ALL,
    ),
    b(
        "",
        "v1",
        "services",
        "Service",
        NS,
        &[
            ("status", Sub::Own),
            ("proxy", Sub::Kind("", "v1", "ServiceProxyOptions")),
        ],
        ALL,
    ),
    b(
        "admissionregistration.k8s.io",
        "v1",
        "mutatingwebhookconfigurations",
        "MutatingWebhookConfiguration",
        CL,
        NONE,
        ALL,
    ),
    b(
        "admissionregistration.k8s.io",
        "v1",
        "validatingwebhookconfigurations",
        "ValidatingWebhookConfiguration",
        CL,
        NONE,
        ALL,
    ),
    b(
        "admissionregistration.k8s.io",
        "v1",
        "validatingadmissionpolicies",
        "ValidatingAdmissionPolicy",
        CL,
        STATUS,
        (30, u16::MAX),
    ),
    b(
        "admissionregistration.k8s.io",
        "v1",
        "validatingadmissionpolicybindings",
        "ValidatingAdmissionPolicyBinding",
        CL,
        NONE,
        (30, u16::MAX),
    ),
    b(
        "apiextensions.k8s.io",
        "v1",
        "customresourcedefinitions",
        "CustomResourceDefinition",
        CL,
        STATUS,
        ALL,
    ),
    b(
        "apiregistration.k8s.io",
        "v1",
        "apiservices",
        "APIService",
        CL,
        STATUS,
        ALL,
    ),
    b(
        "apps",
        "v1",
        "controllerrevisions",
        "ControllerRevision",
        NS,
        NONE,
        ALL,
    ),
    b("apps", "v1", "daemonsets", "DaemonSet", NS, STATUS, ALL),
    b(
        "apps",
        "v1",
        "deployments",
        "Deployment",
        NS,
        STATUS_SCALE,
        ALL,
    ),
    b(
        "apps",
        "v1",
        "replicasets",
        "ReplicaSet",
        NS,
        STATUS_SCALE,
        ALL,
    ),
    b(
        "apps",
        "v1",
        "statefulsets",
        "StatefulSet",
        NS,
        STATUS_SCALE,
        ALL,
    ),
    b(
        "authentication.k8s.io",
        "v1",
        "selfsubjectreviews",
        "SelfSubjectReview",
        CL,
        NONE,
        (28, u16::MAX),
    ),
    b(
        "authentication.k8s.io",
        "v1",
        "tokenreviews",
        "TokenReview",
        CL,
        NONE,
        ALL,
    ),
    b(
        "authorization.k8s.io",
        "v1",
        "localsubjectaccessreviews",
        "LocalSubjectAccessReview",
        NS,
        NONE,
        ALL,
    ),
    b(
        "authorization.k8s.io",
        "v1",
        "selfsubjectaccessreviews",
        "SelfSubjectAccessReview",
        CL,
        NONE,
        ALL,
    ),
    b(
        "authorization.k8s.io",
        "v1",
        "selfsubjectrulesreviews",
        "SelfSubjectRulesReview",
        CL,
        NONE,
        ALL,
    ),
    b(
        "authorization.k8s.io",
        "v1",
        "subjectaccessreviews",
        "SubjectAccessReview",
        CL,
        NONE,
        ALL,
    ),
    b(
        "autoscaling",
        "v2",
        "horizontalpodautoscalers",
        "HorizontalPodAutoscaler",
        NS,
        STATUS,
        ALL,
    ),
    b(
        "autoscaling",
        "v1",
        "horizontalpodautoscalers",
        "HorizontalPodAutoscaler",
        NS,
        STATUS,
        ALL,
    ),
    b("batch", "v1", "cronjobs", "CronJob", NS, STATUS, ALL),
    b("batch", "v1", "jobs", "Job", NS, STATUS, ALL),
    b(
        "certificates.k8s.io",
        "v1",
        "certificatesigningrequests",
        "CertificateSigningRequest",
        CL,
        &[("status", Sub::Own), ("approval", Sub::Own)],
        ALL,
    ),
    b(
        "coordination.k8s.io",
        "v1",
        "leases",
        "Lease",
        NS,
        NONE,
        ALL,
    ),
    b(
        "discovery.k8s.io",
        "v1",
        "endpointslices",
        "EndpointSlice",
        NS,
        NONE,
        ALL,
    ),
    b("events.k8s.io", "v1", "events", "Event", NS, NONE, ALL),
    b(
        "flowcontrol.apiserver.k8s.io",
        "v1",
        "flowschemas",
        "FlowSchema",
        CL,
        STATUS,
        (29, u16::MAX),
    ),
    b(
        "flowcontrol.apiserver.k8s.io",
        "v1",
        "prioritylevelconfigurations",
        "PriorityLevelConfiguration",
        CL,
        STATUS,
        (29, u16::MAX),
    ),
    b(
        "flowcontrol.apiserver.k8s.io",
        "v1beta3",
        "flowschemas",
        "FlowSchema",
        CL,
        STATUS,
        (0, 31),
    ),
    b(
        "flowcontrol.apiserver.k8s.io",
        "v1beta3",
        "prioritylevelconfigurations",
        "PriorityLevelConfiguration",
        CL,
        STATUS,
        (0, 31),
    ),
    b(
        "flowcontrol.apiserver.k8s.io",
        "v1beta2",
        "flowschemas",
        "FlowSchema",
        CL,
        STATUS,
        (0, 28),
    ),
    b(
        "flowcontrol.apiserver.k8s.io",
        "v1beta2",
        "prioritylevelconfigurations",
        "PriorityLevelConfiguration",
        CL,
        STATUS,
        (0, 28),
    ),
    b(
        "networking.k8s.io",
        "v1",
        "ingressclasses",
        "IngressClass",
        CL,
        NONE,
        ALL,
    ),
    b(
        "networking.k8s.io",
        "v1",
        "ingresses",
        "Ingress",
        NS,
        STATUS,
        ALL,
    ),
    b(
        "networking.k8s.io",
        "v1",
        "networkpolicies",
        "NetworkPolicy",
        NS,
        NONE,
        ALL,
    ),
    b(
        "networking.k8s.io",
        "v1",
        "ipaddresses",
        "IPAddress",
        CL,
        NONE,
        (33, u16::MAX),
    ),
    b(
        "networking.k8s.io",
        "v1",
        "servicecidrs",
        "ServiceCIDR",
        CL,
        STATUS,
        (33, u16::MAX),
    ),
    b(
        "node.k8s.io",
        "v1",
        "runtimeclasses",
        "RuntimeClass",
        CL,
        NONE,
        ALL,
    ),
    b(
        "policy",
        "v1",
        "poddisruptionbudgets",
        "PodDisruptionBudget",
        NS,
        STATUS,
        ALL,
    ),
    b(
        "rbac.authorization.k8s.io",
        "v1",
        "clusterrolebindings",
        "ClusterRoleBinding",
        CL,
        NONE,
        ALL,
    ),
    b(
        "rbac.authorization.k8s.io",
        "v1",
        "clusterroles",
        "ClusterRole",
        CL,
        NONE,
        ALL,
    ),
    b(
        "rbac.authorization.k8s.io",
        "v1",
        "rolebindings",
        "RoleBinding",
        NS,
        NONE,
        ALL,
    ),
    b(
        "rbac.authorization.k8s.io",
        "v1",
        "roles",
        "Role",
        NS,
        NONE,
        ALL,
    ),
    b(
        "resource.k8s.io",
        "v1",
        "deviceclasses",
        "DeviceClass",
        CL,
        NONE,
        (34, u16::MAX),
    ),
    b(
        "resource.k8s.io",
        "v1",
        "resourceclaims",
        "ResourceClaim",
        NS,
        STATUS,
        (34, u16::MAX),
    ),
    b(
        "resource.k8s.io",
        "v1",
        "resourceclaimtemplates",
        "ResourceClaimTemplate",
        NS,
        NONE,
        (34, u16::MAX),
    ),
    b(
        "resource.k8s.io",
        "v1",
        "resourceslices",
        "ResourceSlice",
        CL,
        NONE,
        (34, u16::MAX),
    ),
    b(
        "scheduling.k8s.io",
        "v1",
        "priorityclasses",
        "PriorityClass",
        CL,
        NONE,
        ALL,
    ),
    b(
        "storage.k8s.io",
        "v1",
        "csidrivers",
        "CSIDriver",
        CL,
        NONE,
        ALL,
    ),
    b("storage.k8s.io", "v1", "csinodes", "CSINode", CL, NONE, ALL),
    b(
        "storage.k8s.io",
        "v1",
        "csistoragecapacities",
        "CSIStorageCapacity",
        NS,
        NONE,
        ALL,
    ),
    b(
        "storage.k8s.io",
        "v1",
        "storageclasses",
        "StorageClass",
        CL,
        NONE,
        ALL,
    ),
    b(
        "storage.k8s.io",
        "v1",
        "volumeattachments",
        "VolumeAttachment",
        CL,
        STATUS,
        ALL,
    ),
    b(
        "storage.k8s.io",
        "v1",
        "volumeattributesclasses",
        "VolumeAttributesClass",
        CL,
        NONE,
        (34, u16::MAX),
    ),
];

/// The built-in table as data, for `tests/registry.rs`: (group, version, resource, kind,
/// namespaced) of every resource served by default at 1.`minor`.
pub fn builtin_table(
    minor: u16,
) -> Vec<(&'static str, &'static str, &'static str, &'static str, bool)> {
    BUILTINS
        .iter()
        .filter(|b| b.since <= minor && minor <= b.until)
        .map(|b| (b.group, b.version, b.resource, b.kind, b.namespaced))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn versions(e: Equivalents<'_>) -> Vec<String> {
        match e {
            Equivalents::Known { equivalents, .. } => equivalents
                .iter()
                .map(|e| format!("{}/{} {} {}", e.group, e.version, e.resource, e.kind))
                .collect(),
            Equivalents::Unknown => vec!["unknown".into()],
        }
    }

    #[test]
    fn builtins_and_their_equivalents() {
        let r = Registry::builtin(33);
        assert_eq!(
            versions(r.equivalents("", "configmaps", "")),
            ["/v1 configmaps /v1, Kind=ConfigMap"],
            "configmaps are served at v1 only"
        );
        assert_eq!(
            versions(r.equivalents("autoscaling", "horizontalpodautoscalers", "")),
            [
                "autoscaling/v2 horizontalpodautoscalers autoscaling/v2, Kind=HorizontalPodAutoscaler",
                "autoscaling/v1 horizontalpodautoscalers autoscaling/v1, Kind=HorizontalPodAutoscaler"
            ]
        );
        let events = [
            "/v1 events /v1, Kind=Event",
            "events.k8s.io/v1 events events.k8s.io/v1, Kind=Event",
        ];
        assert_eq!(versions(r.equivalents("", "events", "")), events);
        assert_eq!(
            versions(r.equivalents("events.k8s.io", "events", "")),
            events,
            "both groups share one class"
        );
        assert_eq!(
            versions(r.equivalents("apps", "deployments", "scale")),
            ["apps/v1 deployments autoscaling/v1, Kind=Scale"]
        );
        assert_eq!(
            versions(r.equivalents("", "configmaps", "status")),
            Vec::<String>::new(),
            "configmaps have no status"
        );
        assert_eq!(
            versions(r.equivalents("example.com", "widgets", "")),
            ["unknown"]
        );
        assert_eq!(r.is_namespaced("", "pods"), Some(true));
        assert_eq!(r.is_namespaced("", "nodes"), Some(false));
        assert_eq!(r.is_namespaced("", "widgets"), None);
    }

    #[test]
    fn minors_gate_what_is_served() {
        let flowschemas = |minor| {
            versions(Registry::builtin(minor).equivalents(
                "flowcontrol.apiserver.k8s.io",
                "flowschemas",
                "",
            ))
            .len()
        };
        assert_eq!(flowschemas(28), 1 + 1, "v1beta2 and v1beta3");
        assert_eq!(flowschemas(30), 2, "v1 and v1beta3");
        assert_eq!(flowschemas(32), 1, "v1beta3 removed in 1.32");
        let served = |minor, resource| {
            Registry::builtin(minor)
                .is_namespaced("resource.k8s.io", resource)
                .is_some()
        };
        assert!(!served(33, "resourceclaims"));
        assert!(served(34, "resourceclaims"));
    }

    #[test]
    fn crds_serve_their_served_versions() {
        let crd = serde_json::json!({
            "metadata": {"name": "widgets.example.com"},
            "spec": {
                "group": "example.com",
                "names": {"plural": "widgets", "kind": "Widget"},
                "scope": "Namespaced",
                "versions": [
                    {"name": "v1", "served": true, "storage": true,
                     "subresources": {"status": {}, "scale": {"specReplicasPath": ".spec.r", "statusReplicasPath": ".status.r"}}},
                    {"name": "v2", "served": true, "storage": false},
                    {"name": "v0", "served": false, "storage": false}
                ]
            }
        });
        let mut r = Registry::builtin(33);
        r.add_crd(&crd);
        let Equivalents::Known { class, .. } = r.equivalents("example.com", "widgets", "") else {
            panic!("known")
        };
        assert_eq!(class.conversion, Conversion::Rewrite);
        assert_eq!(
            versions(r.equivalents("example.com", "widgets", "")),
            [
                "example.com/v1 widgets example.com/v1, Kind=Widget",
                "example.com/v2 widgets example.com/v2, Kind=Widget"
            ],
            "v0 is not served"
        );
        assert_eq!(
            versions(r.equivalents("example.com", "widgets", "scale")),
            ["example.com/v1 widgets autoscaling/v1, Kind=Scale"]
        );
        let mut webhook = crd.clone();
        webhook["spec"]["conversion"] = serde_json::json!({"strategy": "Webhook"});
        r.add_crd(&webhook);
        let Equivalents::Known { class, equivalents } = r.equivalents("example.com", "widgets", "")
        else {
            panic!("known")
        };
        assert_eq!(
            class.conversion,
            Conversion::Webhook("widgets.example.com".into())
        );
        assert_eq!(equivalents.len(), 2, "the CRD seen again replaces itself");
        r.add_crd(&serde_json::json!({"spec": {"group": "x"}}));
        assert!(matches!(r.equivalents("x", "", ""), Equivalents::Unknown));
    }
}
