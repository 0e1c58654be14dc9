//! An admission request as the engine sees it: read from an AdmissionReview (v1 or v1beta1,
//! which share the request's shape) in its compact document, without copying the objects.

use crate::cel::json::{Doc, Item, Ref};
use crate::matching::RequestAttributes;

pub use crate::cel::k8s::authz::UserInfo;

/// An admission request in a parsed review.
#[derive(Debug)]
pub struct Request<'d> {
    /// `admission.k8s.io/v1` or `admission.k8s.io/v1beta1`: the answer uses the same.
    pub api_version: String,
    pub uid: String,
    pub request: Ref<'d, 'd>,
    pub object: Option<Ref<'d, 'd>>,
    pub old_object: Option<Ref<'d, 'd>>,
    pub attributes: RequestAttributes,
    /// The request's original resource, for `authorizer.requestResource`.
    pub kind: String,
    pub user: UserInfo,
    /// The object's own `metadata.name` and `generateName` (for the denial's details).
    pub object_name: String,
    pub generate_name: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReviewError(pub String);

fn text(r: Option<Ref<'_, '_>>) -> String {
    match r.map(|r| r.item()) {
        Some(Item::Str(s)) => s.to_string(),
        _ => String::new(),
    }
}

fn non_null<'d>(r: Option<Ref<'d, 'd>>) -> Option<Ref<'d, 'd>> {
    r.filter(|r| !matches!(r.item(), Item::Null))
}

fn labels(object: Option<Ref<'_, '_>>) -> Option<std::collections::BTreeMap<String, String>> {
    let meta = object?.get("metadata")?;
    if !matches!(meta.item(), Item::Object(_)) {
        return None;
    }
    let mut out = std::collections::BTreeMap::new();
    if let Some(l) = meta.get("labels") {
        let mut c = l.children();
        while let Some((k, v)) = c.next_entry() {
            if let Item::Str(s) = v.item() {
                out.insert(k.to_string(), s.to_string());
            }
        }
    }
    Some(out)
}

/// `userInfo.extra`: a map of string lists (what a SubjectAccessReview passes on).
fn extra(node: Ref<'_, '_>) -> std::collections::BTreeMap<String, Vec<String>> {
    let mut out = std::collections::BTreeMap::new();
    let mut c = node.children();
    while let Some((k, v)) = c.next_entry() {
        let values = v
            .children()
            .filter_map(|x| match x.item() {
                Item::Str(s) => Some(s.to_string()),
                _ => None,
            })
            .collect();
        out.insert(k.to_string(), values);
    }
    out
}

impl<'d> Request<'d> {
    /// Reads the review's request; a review without one, or of an unknown version, is an error.
    pub fn from_review(doc: &'d Doc<'d>) -> Result<Request<'d>, ReviewError> {
        let root = doc.root();
        if !matches!(root.item(), Item::Object(_)) {
            return Err(ReviewError("the body is not a JSON object".into()));
        }
        let api_version = text(root.get("apiVersion"));
        if api_version != "admission.k8s.io/v1" && api_version != "admission.k8s.io/v1beta1" {
            return Err(ReviewError(format!(
                "unsupported AdmissionReview apiVersion {api_version:?} (expected admission.k8s.io/v1 or admission.k8s.io/v1beta1)"
            )));
        }
        let request = root
            .get("request")
            .filter(|r| matches!(r.item(), Item::Object(_)))
            .ok_or_else(|| ReviewError("the AdmissionReview has no request".into()))?;
        let field = |k: &str| request.get(k);
        let resource = field("resource");
        let object = non_null(field("object"));
        let old_object = non_null(field("oldObject"));
        let operation = text(field("operation"));
        let object_name = text(
            object
                .and_then(|o| o.get("metadata"))
                .and_then(|m| m.get("name")),
        );
        let generate_name = text(
            object
                .and_then(|o| o.get("metadata"))
                .and_then(|m| m.get("generateName")),
        );
        let mut name = text(field("name"));
        // A CREATE with generateName never matches resourceNames, even though admission sees
        // the generated name (vap-semantics.md Appendix C.2).
        if operation == "CREATE" && !generate_name.is_empty() {
            name.clear();
        }
        let attributes = RequestAttributes {
            operation,
            group: text(resource.and_then(|r| r.get("group"))),
            version: text(resource.and_then(|r| r.get("version"))),
            resource: text(resource.and_then(|r| r.get("resource"))),
            subresource: text(field("subResource")),
            namespace: text(field("namespace")),
            name,
            object_labels: labels(object),
            old_object_labels: labels(old_object),
        };
        let user_node = field("userInfo");
        let groups = user_node
            .and_then(|u| u.get("groups"))
            .map(|g| {
                g.children()
                    .filter_map(|x| {
                        if let Item::Str(s) = x.item() {
                            Some(s.to_string())
                        } else {
                            None
                        }
                    })
                    .collect()
            })
            .unwrap_or_default();
        let user = UserInfo {
            username: text(user_node.and_then(|u| u.get("username"))),
            uid: text(user_node.and_then(|u| u.get("uid"))),
            groups,
            extra: user_node
                .and_then(|u| u.get("extra"))
                .map(extra)
                .unwrap_or_default(),
        };
        Ok(Request {
            api_version,
            uid: text(field("uid")),
            request,
            object,
            old_object,
            attributes,
            kind: text(field("kind").and_then(|k| k.get("kind"))),
            user,
            object_name,
            generate_name,
        })
    }

    /// What `authorizer.requestResource` presets: the original request's resource group and
    /// resource, its subresource, namespace and name.
    pub fn resource_attributes(&self) -> crate::cel::k8s::authz::ResourceAttributes {
        let resource = self
            .request
            .get("requestResource")
            .or_else(|| self.request.get("resource"));
        crate::cel::k8s::authz::ResourceAttributes {
            group: text(resource.and_then(|r| r.get("group"))),
            resource: text(resource.and_then(|r| r.get("resource"))),
            subresource: self.attributes.subresource.clone(),
            namespace: self.attributes.namespace.clone(),
            name: text(self.request.get("name")),
            field_selector: None,
            label_selector: None,
        }
    }

    /// The request's name as it should appear in a denial (§5.1).
    pub fn display_name(&self) -> String {
        let own = text(self.request.get("name"));
        if !own.is_empty() {
            return own;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_review() {
        let body = br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u1",
            "kind":{"group":"","version":"v1","kind":"Pod"},"resource":{"group":"","version":"v1","resource":"pods"},
            "namespace":"ns","operation":"CREATE","userInfo":{"username":"alice","groups":["g1","system:authenticated"]},
            "object":{"metadata":{"generateName":"web-","name":"web-x1","labels":{"app":"web"}}},"oldObject":null}}"#;
        let doc = Doc::parse(body).unwrap();
        let r = Request::from_review(&doc).unwrap();
        assert_eq!(r.uid, "u1");
        assert_eq!(r.attributes.resource, "pods");
        assert_eq!(r.attributes.name, "", "generateName CREATE");
        assert_eq!(r.attributes.object_labels.as_ref().unwrap()["app"], "web");
        assert!(r.old_object.is_none());
        assert_eq!(r.user.groups, ["g1", "system:authenticated"]);
        assert_eq!(r.display_name(), "web-x1");
    }

    #[test]
    fn refuses_what_is_not_a_review() {
        for body in [
            &br#"[]"#[..],
            br#"{"apiVersion":"admission.k8s.io/v2","request":{}}"#,
            br#"{"apiVersion":"admission.k8s.io/v1"}"#,
        ] {
            let doc = Doc::parse(body).unwrap();
            assert!(Request::from_review(&doc).is_err());
        }
    }
}
