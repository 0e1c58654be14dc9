//! One resource listed and watched into one store (through its only [`Writer`]), as
//! client-go's reflector does: list (in pages), then watch from the list's resourceVersion,
//! watching again from the last one delivered whenever a watch ends. A (re-)list replaces
//! the store's contents atomically once the list is complete, so readers never see half a
//! list. Written on kube's list and watch calls rather than kube-runtime's watcher, which
//! hides bookmarks and the resourceVersions of its lists: those tell when the history went
//! back ([`super::history`]).
//!
//! Retries are paced here: a failure waits a [`Backoff`] capped at `retry_max`, and a
//! `410 Gone` lists again at once (at most once per `retry_max`).
//!
//! The store is stale from the first failure until it is current again: a completed (re-)list,
//! an event or bookmark from the resumed watch, or, for a watch that resumed without news, the
//! resumed watch staying up for [`SETTLE`] while the API server answers a probe (a one-item
//! list). A watch that must list again stays stale until the list has completed.
//!
//! The history went back (etcd replaced or restored) when a list, the probe's included, is
//! older than what the watch had seen when the list was sent (not what it delivered while
//! the list was on its way: changes written after the list was read), or a bookmark is
//! older than what it delivered: the store is
//! stale and listed again, and every other watch of the source too. Every watch started
//! again (each ends after [`WATCH_TIMEOUT`]) is probed, so that a wipe is found within about
//! that time even when no connection broke.
//!
//! Every `resync` the resource is also listed in full beside the watch and compared with the
//! store: an object that differs, and that the watch did not touch within [`RESYNC_GRACE`]
//! (its event was not merely on its way), is drift: put right, counted and logged. Objects
//! the watch changed or deleted after the list was read (newer than the list) are not
//! compared: the watch is ahead of the list there.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use kube::api::{ApiResource, DynamicObject, ListParams, WatchEvent, WatchParams};
use kube::{Api, Client};
use serde_json::Value as Json;
use tokio::sync::{watch, Notify};

use super::history::{newer, History, Reset, Seen, Sent};
use super::retry::Backoff;
use super::store::{key_of, ObjectKey, Writer};

/// How long a resumed watch must stay up, without an error, before a probe may declare its
/// store current: an API server that lost the watch's history answers `410 Gone` at once.
const SETTLE: Duration = Duration::from_secs(1);

/// How long a watch request lasts, in seconds (client-go's reflector picks 5 to 10 minutes):
/// each new watch is probed.
const WATCH_TIMEOUT: u32 = 290;

/// Objects per page of a list.
const PAGE: u32 = 500;

/// How long an object found different by a periodic re-list is left to the watch before it
/// counts as drift: its event may be on its way.
const RESYNC_GRACE: Duration = Duration::from_secs(5);

/// What a store keeps of each object: all of it, or (a [`Trim`]) the fields its readers use.
pub type Trim = Option<fn(&mut Json)>;

/// What every watch of a source is given.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The longest wait between tries while the API server does not answer.
    pub retry_max: Duration,
    /// How often the resource is listed in full and compared with the store (`None`: never).
    pub resync: Option<Duration>,
    /// Shared by the source's watches: history resets and drift.
    pub history: Arc<History>,
}

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

fn resource_version(object: &Json) -> &str {
    object["metadata"]["resourceVersion"].as_str().unwrap_or("")
}

type Listed = Result<(Vec<Json>, String), kube::Error>;

/// Every object (page by page) and the list's resourceVersion.
fn list_all(api: Api<DynamicObject>, resource: ApiResource, trim: Trim) -> ListFuture {
    Box::pin(async move {
        let mut items = Vec::new();
        let mut params = ListParams::default().limit(PAGE);
        let mut version = None;
        loop {
            let page = api.list(&params).await?;
            // Every page is of the first page's snapshot.
            version.get_or_insert(page.metadata.resource_version.unwrap_or_default());
            items.extend(
                page.items
                    .into_iter()
                    .filter_map(|o| to_json(o, &resource, trim)),
            );
            match page.metadata.continue_ {
                Some(token) if !token.is_empty() => params = params.continue_token(&token),
                _ => return Ok((items, version.unwrap_or_default())),
            }
        }
    })
}

type ListFuture = Pin<Box<dyn Future<Output = Listed> + Send>>;
type Check = Pin<Box<dyn Future<Output = Option<String>> + Send>>;

/// Where the probe of a resumed watch stands. Every resumed watch is probed once, whatever
/// it delivers meanwhile: its answer is checked against what was seen when it was sent.
enum Probe {
    /// Waiting for the watch to stay up for [`SETTLE`].
    Settling(Pin<Box<tokio::time::Sleep>>),
    /// Sent with what was seen then.
    Asking(Sent, Check),
}

impl Probe {
    fn settling() -> Probe {
        Probe::Settling(Box::pin(tokio::time::sleep(SETTLE)))
    }
}

/// The resourceVersion of a one-item list of the resource, if the API server answers.
fn list_one(api: Api<DynamicObject>) -> Check {
    Box::pin(async move {
        let params = ListParams::default().limit(1);
        match tokio::time::timeout(Duration::from_secs(5), api.list(&params)).await {
            Ok(Ok(list)) => Some(list.metadata.resource_version.unwrap_or_default()),
            _ => None,
        }
    })
}

/// Where the periodic re-list stands.
enum Resync {
    /// No periodic re-list.
    Off,
    /// Next due then.
    Idle(Instant),
    /// Sent with what was seen then.
    Listing(Sent, ListFuture),
    /// Objects that differed from the list, with the store's copy of each at the time: at
    /// `due`, those the watch has not touched since are drift.
    Comparing {
        due: Instant,
        listed: BTreeMap<ObjectKey, Json>,
        differing: Vec<(ObjectKey, Option<Arc<Json>>)>,
    },
}

/// What a periodic re-list step came to.
enum Resynced {
    Due,
    Listed(Sent, Listed),
    Compare,
}

/// How a watch ended.
enum Ended {
    /// Without an error (its timeout): watch again from the last resourceVersion.
    Closed,
    /// Failed: watch again from the last resourceVersion after a backoff.
    Failed(String),
    /// `410 Gone`: list again.
    Gone(String),
    /// The history went back, here or in another watch of the source: list again, stale
    /// until listed.
    Relist(String),
}

/// One step of a watch, moved once on the stack: its size does not matter.
#[allow(clippy::large_enum_variant)]
enum Step {
    Event(Option<kube::Result<WatchEvent<DynamicObject>>>),
    Settled,
    Checked(Sent, Option<String>),
    Signalled,
    Resync(Resynced),
}

/// Watches `resource` into `store`, cluster-wide or (`namespace`) in one namespace only,
/// waking `changed` after every change, until the task is aborted.
pub async fn run(
    client: Client,
    resource: ApiResource,
    namespace: Option<String>,
    store: Writer,
    changed: Arc<Notify>,
    settings: Settings,
    trim: Trim,
) {
    let api: Api<DynamicObject> = match &namespace {
        Some(ns) => Api::namespaced_with(client, ns, &resource),
        None => Api::all_with(client, &resource),
    };
    let mut follower = Follower {
        backoff: Backoff::new(settings.retry_max),
        epoch: settings.history.subscribe(),
        resync: next_resync(&settings),
        api,
        resource,
        trim,
        store,
        changed,
        settings,
        seen: Seen::default(),
        deleted: BTreeMap::new(),
        listed_at: None,
    };
    // `Some`: watch from there; `None`: list first.
    let mut from: Option<String> = None;
    // The watch to start follows a list: no probe needed.
    let mut just_listed = false;
    loop {
        let rv = match from.take() {
            Some(rv) => rv,
            None => match follower.list().await {
                Ok(rv) => {
                    just_listed = true;
                    rv
                }
                Err(e) => {
                    let delay = follower.backoff.next_delay();
                    follower.failed(e.to_string(), delay).await;
                    continue;
                }
            },
        };
        let started = Instant::now();
        let (last, ended) = follower.watch(rv, !just_listed).await;
        just_listed = false;
        match ended {
            Ended::Closed => {
                // A server that ends every watch at once is not asked again in a busy loop.
                if started.elapsed() < SETTLE {
                    tokio::time::sleep(follower.backoff.next_delay()).await;
                }
                from = Some(last);
            }
            Ended::Failed(e) => {
                let delay = follower.backoff.next_delay();
                follower.failed(e, delay).await;
                from = Some(last);
            }
            Ended::Gone(e) => {
                // The API server answered, without the history: list again now, but not
                // more than once per `retry_max` should it keep answering 410.
                let retry_max = follower.settings.retry_max;
                let delay = follower
                    .listed_at
                    .map_or(Duration::ZERO, |t| retry_max.saturating_sub(t.elapsed()));
                follower.failed(e, delay).await;
            }
            Ended::Relist(why) => {
                follower.store.failing(why);
                follower.seen = Seen::default();
            }
        }
    }
}

/// The periodic re-list, next due one interval from now.
fn next_resync(settings: &Settings) -> Resync {
    settings
        .resync
        .map_or(Resync::Off, |every| Resync::Idle(Instant::now() + every))
}

/// The state of one resource's list and watch.
struct Follower {
    api: Api<DynamicObject>,
    resource: ApiResource,
    trim: Trim,
    store: Writer,
    changed: Arc<Notify>,
    settings: Settings,
    backoff: Backoff,
    epoch: watch::Receiver<u64>,
    seen: Seen,
    /// What the watch deleted while a periodic list was on its way, at which
    /// resourceVersion: an object the list still holds may be gone since.
    deleted: BTreeMap<ObjectKey, String>,
    listed_at: Option<Instant>,
    resync: Resync,
}

impl Follower {
    fn name(&self) -> &str {
        self.store.read().name()
    }

    /// Lists the resource into the store: the list's resourceVersion.
    async fn list(&mut self) -> Result<String, kube::Error> {
        // A list started now is fresh for every reset signalled so far.
        self.epoch.borrow_and_update();
        let sent = self.seen.sending();
        let (items, rv) = list_all(self.api.clone(), self.resource.clone(), self.trim).await?;
        // A re-list (after a 410) older than what was seen: the API server runs on another
        // etcd. This watch has its fresh list; the others list again.
        if sent.went_back(&rv) {
            tracing::warn!(source = %self.name(), resource_version = %rv, "listed again, older than what was seen: etcd was replaced or restored; every resource is listed again");
            self.settings.history.reset(Reset::ListWentBack);
            self.epoch.borrow_and_update();
        }
        self.seen = Seen::listed(&rv);
        let was_failing = self.store.read().error().is_some();
        self.store.replace(items);
        self.backoff.reset();
        self.listed_at = Some(Instant::now());
        self.resync = next_resync(&self.settings);
        let objects = self.store.read().status().objects;
        if was_failing {
            tracing::info!(source = %self.name(), objects, "listed again; current");
        } else {
            tracing::debug!(source = %self.name(), objects, "listed");
        }
        self.changed.notify_one();
        Ok(rv)
    }

    /// Marks the store failing and waits `delay`.
    async fn failed(&mut self, error: String, delay: Duration) {
        if self.store.read().error().is_none() {
            tracing::warn!(source = %self.name(), %error, "watch failed; retrying, the last snapshot keeps serving");
        } else {
            tracing::debug!(source = %self.name(), %error, retry_in = ?delay, "watch still failing");
        }
        self.store.failing(error);
        tokio::time::sleep(delay).await;
    }

    /// Watches from `rv` until the watch ends; `probe`: a resumed watch, to be probed. The
    /// last resourceVersion delivered, and how it ended.
    async fn watch(&mut self, mut rv: String, probe: bool) -> (String, Ended) {
        let params = WatchParams::default().timeout(WATCH_TIMEOUT);
        let stream = match self.api.watch(&params, &rv).await {
            Ok(s) => s,
            // Some API servers refuse the watch itself rather than send the event.
            Err(kube::Error::Api(s)) if s.code == 410 => return (rv, Ended::Gone(s.message)),
            Err(e) => return (rv, Ended::Failed(e.to_string())),
        };
        futures::pin_mut!(stream);
        let mut check = probe.then(Probe::settling);
        loop {
            let step = tokio::select! {
                event = stream.next() => Step::Event(event),
                checked = async {
                    match check.as_mut() {
                        Some(Probe::Settling(settle)) => {
                            settle.await;
                            Step::Settled
                        }
                        Some(Probe::Asking(sent, answer)) => Step::Checked(*sent, answer.await),
                        None => std::future::pending().await,
                    }
                } => checked,
                signalled = self.epoch.changed() => match signalled {
                    Ok(()) => Step::Signalled,
                    // The source is going away.
                    Err(_) => return (rv, Ended::Closed),
                },
                resynced = resync_step(&mut self.resync) => Step::Resync(resynced),
            };
            match step {
                Step::Event(None) => return (rv, Ended::Closed),
                Step::Event(Some(Err(e))) => return (rv, Ended::Failed(e.to_string())),
                Step::Event(Some(Ok(event))) => {
                    let (object, deleted) = match event {
                        WatchEvent::Added(o) | WatchEvent::Modified(o) => (o, false),
                        WatchEvent::Deleted(o) => (o, true),
                        WatchEvent::Bookmark(b) => {
                            let at = b.metadata.resource_version;
                            if self.seen.bookmark_went_back(&at) {
                                let why = format!("bookmark at resourceVersion {at}, older than what the watch delivered: etcd was replaced or restored");
                                return (rv, self.went_back(Reset::BookmarkWentBack, why));
                            }
                            self.seen.deliver(&at);
                            rv = at;
                            self.news();
                            continue;
                        }
                        WatchEvent::Error(s) if s.code == 410 => {
                            return (rv, Ended::Gone(s.message.clone()))
                        }
                        WatchEvent::Error(s) => return (rv, Ended::Failed(s.message.clone())),
                    };
                    let Some(json) = to_json(object, &self.resource, self.trim) else {
                        continue;
                    };
                    rv = resource_version(&json).to_string();
                    self.seen.deliver(&rv);
                    self.news();
                    if deleted {
                        if matches!(self.resync, Resync::Listing(..)) {
                            self.deleted.insert(key_of(&json), rv.clone());
                        }
                        self.store.delete(&json);
                    } else {
                        self.store.apply(json);
                    }
                    // The probe goes on: an event shows the watch is up, not that the API
                    // server kept its history; and a busy resource would never be probed.
                    self.changed.notify_one();
                }
                Step::Settled => {
                    check = Some(Probe::Asking(
                        self.seen.sending(),
                        list_one(self.api.clone()),
                    ));
                }
                Step::Checked(_, None) => check = Some(Probe::settling()),
                Step::Checked(sent, Some(at)) => {
                    check = None;
                    if sent.went_back(&at) {
                        let why = format!("list at resourceVersion {at}, older than what was seen: etcd was replaced or restored");
                        return (rv, self.went_back(Reset::ListWentBack, why));
                    }
                    self.seen.observe(&at);
                    self.news();
                }
                Step::Signalled => {
                    let why = "another watch of the cluster saw its history go back";
                    tracing::info!(source = %self.name(), "{why}; listing again");
                    return (rv, Ended::Relist(why.into()));
                }
                Step::Resync(Resynced::Listed(sent, listed)) => {
                    if let Some(at) = self.compare(sent, listed) {
                        let why = format!("periodic list at resourceVersion {at}, older than what was seen: etcd was replaced or restored");
                        return (rv, self.went_back(Reset::ListWentBack, why));
                    }
                }
                Step::Resync(Resynced::Due) => {
                    // Only beside a current watch: a failing one lists again anyway.
                    let current = self.store.read().error().is_none();
                    self.resync = if current {
                        let (api, resource) = (self.api.clone(), self.resource.clone());
                        self.deleted.clear();
                        Resync::Listing(self.seen.sending(), list_all(api, resource, self.trim))
                    } else {
                        next_resync(&self.settings)
                    };
                }
                Step::Resync(Resynced::Compare) => self.correct(),
            }
        }
    }

    /// The watch answered: the store is current (logged if it was failing).
    fn news(&mut self) {
        self.backoff.reset();
        let store = self.store.read();
        if store.error().is_some() && store.synced() {
            tracing::info!(source = %store.name(), stale = ?store.status().stale, "watch current again");
        }
        self.store.current();
    }

    /// Counts and logs a history reset found here, signals the other watches: list again.
    fn went_back(&mut self, reason: Reset, why: String) -> Ended {
        tracing::warn!(source = %self.name(), "{why}; every resource is listed again");
        self.settings.history.reset(reason);
        // This watch lists again anyway.
        self.epoch.borrow_and_update();
        Ended::Relist(why)
    }

    /// Compares a periodic list with the store: the list's resourceVersion if it is older
    /// than what was seen when it was sent, else `None` (the differing objects wait for
    /// [`RESYNC_GRACE`]). Objects the watch changed or deleted after the list was read are
    /// left to it: the store is ahead of the list there.
    fn compare(&mut self, sent: Sent, listed: Listed) -> Option<String> {
        let (items, at) = match listed {
            Ok(l) => l,
            Err(e) => {
                tracing::debug!(source = %self.name(), error = %e, "periodic list failed; next time");
                self.resync = next_resync(&self.settings);
                return None;
            }
        };
        let deleted = std::mem::take(&mut self.deleted);
        if sent.went_back(&at) {
            return Some(at);
        }
        self.seen.observe(&at);
        let listed: BTreeMap<ObjectKey, Json> =
            items.into_iter().map(|o| (key_of(&o), o)).collect();
        let reader = self.store.read();
        let mut differing: Vec<(ObjectKey, Option<Arc<Json>>)> = listed
            .iter()
            .filter_map(|(key, object)| {
                let held = reader.get(&key.0, &key.1);
                let ahead = match &held {
                    Some(held) => newer(resource_version(held), &at),
                    None => deleted.get(key).is_some_and(|rv| newer(rv, &at)),
                };
                (!ahead && held.as_deref() != Some(object)).then(|| (key.clone(), held))
            })
            .collect();
        differing.extend(
            reader
                .entries()
                .into_iter()
                .filter(|(key, held)| {
                    !listed.contains_key(key) && !newer(resource_version(held), &at)
                })
                .map(|(key, held)| (key, Some(held))),
        );
        self.resync = if differing.is_empty() {
            tracing::debug!(source = %self.name(), objects = listed.len(), "periodic list: no drift");
            next_resync(&self.settings)
        } else {
            Resync::Comparing {
                due: Instant::now() + RESYNC_GRACE,
                listed,
                differing,
            }
        };
        None
    }

    /// Puts right the objects that still differ from the periodic list and that the watch
    /// did not touch meanwhile: the drift.
    fn correct(&mut self) {
        let Resync::Comparing {
            listed, differing, ..
        } = std::mem::replace(&mut self.resync, next_resync(&self.settings))
        else {
            return;
        };
        let reader = self.store.read().clone();
        let mut drift = 0u64;
        for (key, then) in differing {
            let now = reader.get(&key.0, &key.1);
            let untouched = match (&then, &now) {
                (Some(a), Some(b)) => Arc::ptr_eq(a, b),
                (None, None) => true,
                _ => false,
            };
            if !untouched {
                continue;
            }
            drift += 1;
            match (listed.get(&key), now) {
                (Some(object), _) => self.store.apply(object.clone()),
                (None, Some(held)) => self.store.delete(&held),
                (None, None) => drift -= 1,
            }
        }
        if drift > 0 {
            tracing::warn!(source = %self.name(), objects = drift, "periodic list found objects the watch had missed; put right");
            self.settings.history.drifted(self.name(), drift);
            self.changed.notify_one();
        }
    }
}

/// The next step of the periodic re-list: due, listed, or (after the grace) to compare.
async fn resync_step(resync: &mut Resync) -> Resynced {
    match resync {
        Resync::Off => std::future::pending().await,
        Resync::Idle(due) => {
            tokio::time::sleep_until((*due).into()).await;
            Resynced::Due
        }
        Resync::Listing(sent, list) => Resynced::Listed(*sent, list.await),
        Resync::Comparing { due, .. } => {
            tokio::time::sleep_until((*due).into()).await;
            Resynced::Compare
        }
    }
}
