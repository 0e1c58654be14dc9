//! The registry's built-in table against k8s-openapi's types for the Kubernetes version the
//! crate is built with (its `Resource` trait: group, version, kind, URL path segment, scope):
//! every entry served at that minor names a real type with the same facts.

use celgate::matching::registry::{builtin_table, Registry};
use k8s_openapi::{ClusterResourceScope, NamespaceResourceScope, Resource};

/// Whether a scope type is namespaced.
trait Namespaced {
    const NAMESPACED: bool;
}
impl Namespaced for NamespaceResourceScope {
    const NAMESPACED: bool = true;
}
impl Namespaced for ClusterResourceScope {
    const NAMESPACED: bool = false;
}

fn facts<T: Resource>() -> (&'static str, &'static str, &'static str, &'static str, bool)
where
    T::Scope: Namespaced,
{
    (
        T::GROUP,
        T::VERSION,
        T::URL_PATH_SEGMENT,
        T::KIND,
        <T::Scope as Namespaced>::NAMESPACED,
    )
}

macro_rules! types {
    ($($t:path,)*) => { vec![$(facts::<$t>()),*] };
}

/// k8s-openapi's feature `v1_33`: the table's 1.33 entries.
const MINOR: u16 = 33;

#[test]
fn builtin_table_matches_k8s_openapi() {
    let openapi = types![
        k8s_openapi::api::core::v1::Binding,
        k8s_openapi::api::core::v1::ComponentStatus,
        k8s_openapi::api::core::v1::ConfigMap,
        k8s_openapi::api::core::v1::Endpoints,
        k8s_openapi::api::core::v1::Event,
        k8s_openapi::api::core::v1::LimitRange,
        k8s_openapi::api::core::v1::Namespace,
        k8s_openapi::api::core::v1::Node,
        k8s_openapi::api::core::v1::PersistentVolumeClaim,
        k8s_openapi::api::core::v1::PersistentVolume,
        k8s_openapi::api::core::v1::Pod,
        k8s_openapi::api::core::v1::PodTemplate,
        k8s_openapi::api::core::v1::ReplicationController,
        k8s_openapi::api::core::v1::ResourceQuota,
        k8s_openapi::api::core::v1::Secret,
        k8s_openapi::api::core::v1::ServiceAccount,
        k8s_openapi::api::core::v1::Service,
        k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration,
        k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration,
        k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicy,
        k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicyBinding,
        k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
        k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService,
        k8s_openapi::api::apps::v1::ControllerRevision,
        k8s_openapi::api::apps::v1::DaemonSet,
        k8s_openapi::api::apps::v1::Deployment,
        k8s_openapi::api::apps::v1::ReplicaSet,
        k8s_openapi::api::apps::v1::StatefulSet,
        k8s_openapi::api::authentication::v1::SelfSubjectReview,
        k8s_openapi::api::authentication::v1::TokenReview,
        k8s_openapi::api::authorization::v1::LocalSubjectAccessReview,
        k8s_openapi::api::authorization::v1::SelfSubjectAccessReview,
        k8s_openapi::api::authorization::v1::SelfSubjectRulesReview,
        k8s_openapi::api::authorization::v1::SubjectAccessReview,
        k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler,
        k8s_openapi::api::autoscaling::v1::HorizontalPodAutoscaler,
        k8s_openapi::api::batch::v1::CronJob,
        k8s_openapi::api::batch::v1::Job,
        k8s_openapi::api::certificates::v1::CertificateSigningRequest,
        k8s_openapi::api::coordination::v1::Lease,
        k8s_openapi::api::discovery::v1::EndpointSlice,
        k8s_openapi::api::events::v1::Event,
        k8s_openapi::api::flowcontrol::v1::FlowSchema,
        k8s_openapi::api::flowcontrol::v1::PriorityLevelConfiguration,
        k8s_openapi::api::networking::v1::IngressClass,
        k8s_openapi::api::networking::v1::Ingress,
        k8s_openapi::api::networking::v1::NetworkPolicy,
        k8s_openapi::api::networking::v1::IPAddress,
        k8s_openapi::api::networking::v1::ServiceCIDR,
        k8s_openapi::api::node::v1::RuntimeClass,
        k8s_openapi::api::policy::v1::PodDisruptionBudget,
        k8s_openapi::api::rbac::v1::ClusterRoleBinding,
        k8s_openapi::api::rbac::v1::ClusterRole,
        k8s_openapi::api::rbac::v1::RoleBinding,
        k8s_openapi::api::rbac::v1::Role,
        k8s_openapi::api::scheduling::v1::PriorityClass,
        k8s_openapi::api::storage::v1::CSIDriver,
        k8s_openapi::api::storage::v1::CSINode,
        k8s_openapi::api::storage::v1::CSIStorageCapacity,
        k8s_openapi::api::storage::v1::StorageClass,
        k8s_openapi::api::storage::v1::VolumeAttachment,
    ];
    let table = builtin_table(MINOR);
    for entry in &table {
        assert!(
            openapi.contains(entry),
            "{entry:?} is not k8s-openapi's (group, version, resource, kind, namespaced)"
        );
    }
    assert_eq!(table.len(), openapi.len(), "every type checked once");
}

#[test]
fn every_served_resource_is_its_own_equivalent() {
    let r = Registry::builtin(MINOR);
    for e in r.served() {
        assert!(
            r.is_namespaced(&e.group, &e.resource).is_some(),
            "{e:?} has a scope"
        );
        let celgate::matching::registry::Equivalents::Known { equivalents, .. } =
            r.equivalents(&e.group, &e.resource, "")
        else {
            panic!("{e:?} unknown")
        };
        assert!(equivalents.contains(e), "{e:?}");
    }
}
