//! An admission request as the engine sees it: the request of an AdmissionReview (v1 or
//! v1beta1, which share the request's shape), its objects left in the review's compact
//! document, not copied. [`crate::review`] reads it from a review; the engine only reads it.

use crate::matching::RequestAttributes;
use celgate_cel::json::Ref;

pub use celgate_cel::k8s::authz::UserInfo;

/// An admission request in a parsed review.
#[derive(Debug)]
pub struct Request<'d> {
    /// `admission.k8s.io/v1` or `admission.k8s.io/v1beta1`: the answer uses the same.
    pub api_version: String,
    /// `request.uid`, echoed in the answer.
    pub uid: String,
    /// The review's `request`, as CEL's `request` variable reads it.
    pub request: Ref<'d, 'd>,
    /// `request.object`; `None` when null (a DELETE, a CONNECT).
    pub object: Option<Ref<'d, 'd>>,
    /// `request.oldObject`; `None` when null (a CREATE, a CONNECT).
    pub old_object: Option<Ref<'d, 'd>>,
    /// What matching reads of the request.
    pub attributes: RequestAttributes,
    /// The request's original resource, for `authorizer.requestResource`.
    pub kind: String,
    /// `request.userInfo`, for `authorizer` and the offline RBAC authorizer.
    pub user: UserInfo,
    /// The object's own `metadata.name` and `generateName` (for the denial's details).
    pub object_name: String,
    /// The object's `metadata.generateName`.
    pub generate_name: String,
    /// The request's `name` as sent (`attributes.name` is cleared for a generated name).
    pub request_name: String,
    /// `requestResource` (else `resource`): group and resource, for `authorizer`.
    pub original_group: String,
    /// The resource of `requestResource` (else `resource`).
    pub original_resource: String,
}

impl Request<'_> {
    /// What `authorizer.requestResource` presets: the original request's resource group and
    /// resource, its subresource, namespace and name.
    pub fn resource_attributes(&self) -> celgate_cel::k8s::authz::ResourceAttributes {
        celgate_cel::k8s::authz::ResourceAttributes {
            group: self.original_group.clone(),
            resource: self.original_resource.clone(),
            subresource: self.attributes.subresource.clone(),
            namespace: self.attributes.namespace.clone(),
            name: self.request_name.clone(),
            field_selector: None,
            label_selector: None,
        }
    }

    /// The request's name as it should appear in a denial (§5.1).
    pub(crate) fn display_name(&self) -> String {
        if !self.request_name.is_empty() {
            return self.request_name.clone();
        }
        if !self.object_name.is_empty() {
            return self.object_name.clone();
        }
        if !self.generate_name.is_empty() {
            return self.generate_name.clone();
        }
        "Unknown".into()
    }
}
