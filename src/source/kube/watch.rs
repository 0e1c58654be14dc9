//! One kube-runtime watcher feeding one store (through its only [`Writer`]): list, then watch; a re-list (after a
//! `410 Gone`) replaces the store's contents atomically once the new list is complete, so
//! readers never see half a list.
//!
//! Retries are paced here, not by kube-runtime's default backoff (which grows to 30 s, 60 s
//! with jitter, during an outage and resets only on a successful event, so that a watch could
//! sleep that long after the API server came back): a failure waits a [`Backoff`] capped at
//! `retry_max`, and a `410 Gone` re-lists at once.
//!
//! The store is stale from the first failure until it is current again: a completed (re-)list,
//! an event from the resumed watch, or, for a watch that resumed without news, the resumed
//! watch staying up for [`SETTLE`] while the API server answers a probe. A watch that must
//! re-list stays stale until the list has completed.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use kube::api::{ApiResource, DynamicObject, ListParams};
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client};
use serde_json::Value as Json;
use tokio::sync::Notify;

use super::retry::Backoff;
use super::store::Writer;

/// How long a resumed watch must stay up, without an error, before a probe may declare its
/// store current: an API server that lost the watch's history answers `410 Gone` at once.
const SETTLE: Duration = Duration::from_secs(1);

/// What a store keeps of each object: all of it, or (a [`Trim`]) the fields its readers use.
pub type Trim = Option<fn(&mut Json)>;

/// The object as JSON with the type it was listed as (list items carry no `apiVersion` or
/// `kind`; CEL expressions and the snapshot builder read them), trimmed by `trim`.
fn to_json(object: DynamicObject, resource: &ApiResource, trim: Trim) -> Option<Json> {
    let mut json = serde_json::to_value(object).ok()?;
    let map = json.as_object_mut()?;
    map.insert(
        "apiVersion".into(),
        Json::String(resource.api_version.clone()),
    );
    map.insert("kind".into(), Json::String(resource.kind.clone()));
    if let Some(trim) = trim {
        trim(&mut json);
    }
    Some(json)
}

/// The watch's history is gone: kube-runtime lists again on its next poll.
fn is_gone(e: &watcher::Error) -> bool {
    matches!(e, watcher::Error::WatchError(s) if s.code == 410)
}

/// kube-runtime recovers from `e` by resuming its watch from the last resourceVersion (no
/// re-list): a watch that could not be started, or a failing watch stream.
fn resumes(e: &watcher::Error) -> bool {
    match e {
        watcher::Error::WatchStartFailed(_) | watcher::Error::WatchFailed(_) => true,
        watcher::Error::WatchError(s) => s.code != 410,
        _ => false,
    }
}

type Check = Pin<Box<dyn Future<Output = bool> + Send>>;

/// After [`SETTLE`], whether the API server answers a one-item list of the resource.
fn settle_then_probe(api: Api<DynamicObject>) -> Check {
    Box::pin(async move {
        tokio::time::sleep(SETTLE).await;
        let params = ListParams::default().limit(1);
        let probe = api.list(&params);
        matches!(
            tokio::time::timeout(Duration::from_secs(5), probe).await,
            Ok(Ok(_))
        )
    })
}

// One step, moved once on the stack: its size does not matter.
#[allow(clippy::large_enum_variant)]
enum Step {
    Event(Option<watcher::Result<Event<DynamicObject>>>),
    Checked(bool),
}

/// Watches `resource` into `store`, cluster-wide or (`namespace`) in one namespace only,
/// waking `changed` after every change, until the task is aborted; failures wait at most
/// `retry_max` before the next try.
pub async fn run(
    client: Client,
    resource: ApiResource,
    namespace: Option<String>,
    store: Writer,
    changed: Arc<Notify>,
    retry_max: Duration,
    trim: Trim,
) {
    let api: Api<DynamicObject> = match &namespace {
        Some(ns) => Api::namespaced_with(client, ns, &resource),
        None => Api::all_with(client, &resource),
    };
    // Not `.default_backoff()`: the waits are ours, see the module comment.
    let stream = watcher::watcher(api.clone(), watcher::Config::default());
    futures::pin_mut!(stream);
    let mut backoff = Backoff::new(retry_max);
    let mut listing: Option<Vec<Json>> = None;
    let mut listed_at: Option<Instant> = None;
    // Set while a resumed watch has brought no news: may declare the store current.
    let mut check: Option<Check> = None;
    loop {
        let step = tokio::select! {
            event = stream.next() => Step::Event(event),
            answered = async {
                match check.as_mut() {
                    Some(c) => c.await,
                    None => std::future::pending().await,
                }
            } => Step::Checked(answered),
        };
        let event = match step {
            Step::Checked(answered) => {
                check = if answered {
                    backoff.reset();
                    recovered(&store);
                    store.current();
                    None
                } else {
                    Some(settle_then_probe(api.clone()))
                };
                continue;
            }
            Step::Event(None) => return,
            Step::Event(Some(event)) => event,
        };
        match event {
            Ok(Event::Init) => {
                listing = Some(Vec::new());
                listed_at = Some(Instant::now());
            }
            Ok(Event::InitApply(o)) => {
                if let (Some(list), Some(json)) = (listing.as_mut(), to_json(o, &resource, trim)) {
                    list.push(json);
                }
            }
            Ok(Event::InitDone) => {
                let was_failing = store.read().error().is_some();
                store.replace(listing.take().unwrap_or_default());
                backoff.reset();
                if was_failing {
                    tracing::info!(source = %store.read().name(), objects = store.read().status().objects, "listed again; current");
                } else {
                    tracing::debug!(source = %store.read().name(), objects = store.read().status().objects, "listed");
                }
                changed.notify_one();
            }
            Ok(Event::Apply(o)) => {
                if let Some(json) = to_json(o, &resource, trim) {
                    recovered(&store);
                    store.apply(json);
                    backoff.reset();
                    check = None;
                    changed.notify_one();
                }
            }
            Ok(Event::Delete(o)) => {
                if let Some(json) = to_json(o, &resource, trim) {
                    recovered(&store);
                    store.delete(&json);
                    backoff.reset();
                    check = None;
                    changed.notify_one();
                }
            }
            Err(e) => {
                check = None;
                let delay = if is_gone(&e) {
                    // The API server answered, without the history: list again now, but not
                    // more than once per `retry_max` should it keep answering 410.
                    listed_at.map_or(Duration::ZERO, |t| retry_max.saturating_sub(t.elapsed()))
                } else {
                    backoff.next_delay()
                };
                if store.read().error().is_none() {
                    tracing::warn!(source = %store.read().name(), error = %e, "watch failed; retrying, the last snapshot keeps serving");
                } else {
                    tracing::debug!(source = %store.read().name(), error = %e, retry_in = ?delay, "watch still failing");
                }
                store.failing(e.to_string());
                tokio::time::sleep(delay).await;
                if resumes(&e) {
                    check = Some(settle_then_probe(api.clone()));
                }
            }
        }
    }
}

/// Logs the end of a failure (before the store forgets it).
fn recovered(store: &Writer) {
    let store = store.read();
    if store.error().is_some() && store.synced() {
        tracing::info!(source = %store.name(), stale = ?store.status().stale, "watch current again");
    }
}
