//! A case's AdmissionReview: the case's operation, namespace, user, subresource, dry run and
//! options as a [`Spec`], built by [`crate::review::manifest`] as the API server would send it.

use serde_json::{json, Map, Value as Json};

use super::Case;
pub use crate::review::manifest::Resources;
use crate::review::manifest::{Spec, DEFAULT_USER};

/// The user of a case: given, a service account's, or a plain authenticated test user.
fn user_info(case: &Case) -> Json {
    let u = case.user_info.clone().unwrap_or_default();
    let mut out = Map::new();
    let (username, groups) = match &u.service_account {
        Some(sa) => {
            let (ns, name) = (&sa.namespace, &sa.name);
            (
                format!("system:serviceaccount:{ns}:{name}"),
                vec![
                    "system:serviceaccounts".to_string(),
                    format!("system:serviceaccounts:{ns}"),
                    "system:authenticated".to_string(),
                ],
            )
        }
        None => (
            DEFAULT_USER.to_string(),
            vec!["system:authenticated".to_string()],
        ),
    };
    out.insert(
        "username".into(),
        Json::String(u.username.clone().unwrap_or(username)),
    );
    if let Some(uid) = &u.uid {
        out.insert("uid".into(), Json::String(uid.clone()));
    }
    out.insert("groups".into(), json!(u.groups.clone().unwrap_or(groups)));
    if let Some(extra) = &u.extra {
        out.insert("extra".into(), json!(extra));
    }
    Json::Object(out)
}

/// The AdmissionReview of a case. `index` makes the uid and a generated name deterministic.
pub(super) fn build(
    resources: &Resources,
    case: &Case,
    index: usize,
    object: Option<Json>,
    old_object: Option<Json>,
) -> Result<Json, crate::review::manifest::ManifestError> {
    let spec = Spec {
        operation: case.operation.map_or("CREATE", |o| o.as_str()).to_string(),
        namespace: case.namespace.clone(),
        user_info: user_info(case),
        sub_resource: case.sub_resource.clone(),
        dry_run: case.dry_run.unwrap_or(false),
        options: case.options.clone(),
    };
    crate::review::manifest::build(resources, &spec, index, object, old_object)
}
