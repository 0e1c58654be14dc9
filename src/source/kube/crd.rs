//! CRD trimming: CustomResourceDefinitions (`apiextensions.k8s.io/v1`) are watched, each kept
//! as what the resource registry reads of it (group, names, scope, served versions and their
//! subresources, conversion strategy; the schemas go), as the API server's
//! `apiextensions-apiserver` serves a CRD's versions. When they cannot be listed (403, 404),
//! that is logged once and custom resources keep the lenient rule.

use std::sync::Arc;

use kube::Client;
use serde_json::Value as Json;
use tokio::sync::Notify;

use super::discovery::{resource, LOOKUP_TIMEOUT};
use super::watch;
use super::watched::Watched;

const CRD_GROUP: &str = "apiextensions.k8s.io";

/// What the resource registry and the snapshot read of a CRD ([`crate::matching::registry`]):
/// its name, group, names, scope, conversion strategy, and each version's name, whether it
/// is served and its subresources. The schemas (most of a CRD's size) go.
fn trim_crd(crd: &mut Json) {
    let spec = &crd["spec"];
    let versions: Vec<Json> = spec["versions"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or(&[])
        .iter()
        .map(|v| {
            serde_json::json!({
                "name": v["name"],
                "served": v["served"],
                "storage": v["storage"],
                "subresources": v["subresources"],
            })
        })
        .collect();
    let trimmed = serde_json::json!({
        "apiVersion": crd["apiVersion"],
        "kind": crd["kind"],
        "metadata": {
            "name": crd["metadata"]["name"],
            "uid": crd["metadata"]["uid"],
            "resourceVersion": crd["metadata"]["resourceVersion"],
        },
        "spec": {
            "group": spec["group"],
            "names": spec["names"],
            "scope": spec["scope"],
            "versions": versions,
            "conversion": {"strategy": spec["conversion"]["strategy"]},
        }
    });
    *crd = trimmed;
}

/// The CRDs' watch; `None` when they cannot be listed (403: RBAC does not grant it; 404: not
/// served), logged once: custom resources then keep the lenient matching rule.
pub(super) async fn crd_watch(
    client: &Client,
    changed: &Arc<Notify>,
    settings: &watch::Settings,
) -> Option<Watched> {
    let crds = resource(
        CRD_GROUP,
        "v1",
        "CustomResourceDefinition",
        "customresourcedefinitions",
    );
    let api: kube::Api<kube::api::DynamicObject> = kube::Api::all_with(client.clone(), &crds);
    let one = kube::api::ListParams::default().limit(1);
    match tokio::time::timeout(LOOKUP_TIMEOUT, api.list(&one)).await {
        Ok(Err(kube::Error::Api(s))) if s.code == 403 || s.code == 404 => {
            tracing::warn!(error = %s.message, "cannot list CustomResourceDefinitions: custom resources are matched without knowing their served versions (any version a rule names counts as served); grant get, list and watch on customresourcedefinitions.apiextensions.k8s.io");
            return None;
        }
        // Anything else (a timeout, an outage) is the watch's to retry.
        Ok(Err(e)) => tracing::debug!(error = %e, "CustomResourceDefinitions not listed yet"),
        Err(_) | Ok(Ok(_)) => {}
    }
    Some(Watched::start_trimmed(
        client,
        crds,
        None,
        "customresourcedefinitions.v1".into(),
        changed,
        settings,
        Some(trim_crd),
    ))
}
