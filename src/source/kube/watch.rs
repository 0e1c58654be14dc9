//! One kube-runtime watcher feeding one [`Store`]: list, then watch; a re-list (after a
//! `410 Gone` or a dropped connection) replaces the store's contents atomically once the new
//! list is complete, so readers never see half a list. Failures retry with kube-runtime's
//! default backoff (exponential, capped, jittered) while the store keeps its last objects.

use std::sync::Arc;

use futures::StreamExt;
use kube::api::{ApiResource, DynamicObject};
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;
use kube::{Api, Client};
use serde_json::Value as Json;
use tokio::sync::Notify;

use super::store::Store;

/// The object as JSON with the type it was listed as (list items carry no `apiVersion` or
/// `kind`; CEL expressions and the snapshot builder read them).
fn to_json(object: DynamicObject, resource: &ApiResource) -> Option<Json> {
    let mut json = serde_json::to_value(object).ok()?;
    let map = json.as_object_mut()?;
    map.insert(
        "apiVersion".into(),
        Json::String(resource.api_version.clone()),
    );
    map.insert("kind".into(), Json::String(resource.kind.clone()));
    Some(json)
}

/// Watches `resource` cluster-wide into `store`, waking `changed` after every change, until
/// the task is aborted.
pub async fn run(client: Client, resource: ApiResource, store: Arc<Store>, changed: Arc<Notify>) {
    let api: Api<DynamicObject> = Api::all_with(client, &resource);
    let stream = watcher::watcher(api, watcher::Config::default()).default_backoff();
    futures::pin_mut!(stream);
    let mut listing: Option<Vec<Json>> = None;
    while let Some(event) = stream.next().await {
        match event {
            Ok(Event::Init) => listing = Some(Vec::new()),
            Ok(Event::InitApply(o)) => {
                if let (Some(list), Some(json)) = (listing.as_mut(), to_json(o, &resource)) {
                    list.push(json);
                }
            }
            Ok(Event::InitDone) => {
                store.replace(listing.take().unwrap_or_default());
                tracing::debug!(source = %store.name, objects = store.status().objects, "listed");
                changed.notify_one();
            }
            Ok(Event::Apply(o)) => {
                if let Some(json) = to_json(o, &resource) {
                    store.apply(json);
                    changed.notify_one();
                }
            }
            Ok(Event::Delete(o)) => {
                if let Some(json) = to_json(o, &resource) {
                    store.delete(&json);
                    changed.notify_one();
                }
            }
            Err(e) => {
                store.failing(e.to_string());
                tracing::warn!(source = %store.name, error = %e, "watch failed; retrying, the last snapshot keeps serving");
            }
        }
    }
}
