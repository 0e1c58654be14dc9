//! An in-process fake Kubernetes API server for the cluster source's tests: discovery, list
//! and watch (chunked JSON event streams with replay from a resourceVersion, bookmarks,
//! dropped connections and `410 Gone`), SubjectAccessReview and Event creation, server-side
//! apply (PATCH `application/apply-patch+yaml`, the body replacing the object, as with one
//! field manager that owns every field) and DELETE of one object; discovery of the group
//! list (`/api`, `/apis`); lists in pages (`limit` and `continue`, a continue token that
//! can be made to expire with `410 Gone`; `labelSelector` equality terms). Tests drive
//! it (`apply`, `delete`, `drop_watches`, `expire_watches`, `set_down`, `set_unreachable`,
//! `stall`, `wipe`) and inspect what the client asked for.

#![allow(dead_code)]

use std::collections::{BTreeMap, HashMap};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::service::TowerToHyperService;
use serde_json::{json, Value as Json};
use tokio::sync::{broadcast, watch, Notify};

/// A served resource.
#[derive(Clone, Debug)]
pub struct Kind {
    /// `v1` or `group/version`.
    pub api_version: String,
    pub kind: String,
    pub plural: String,
    pub namespaced: bool,
}

impl Kind {
    pub fn new(api_version: &str, kind: &str, plural: &str, namespaced: bool) -> Kind {
        Kind {
            api_version: api_version.into(),
            kind: kind.into(),
            plural: plural.into(),
            namespaced,
        }
    }

    /// The path prefix of the group version: `api/v1` or `apis/group/version`.
    fn gv_path(&self) -> String {
        if self.api_version.contains('/') {
            format!("apis/{}", self.api_version)
        } else {
            format!("api/{}", self.api_version)
        }
    }

    fn key(&self) -> String {
        format!("{}/{}", self.gv_path(), self.plural)
    }
}

#[derive(Default)]
struct Resource {
    kind: Option<Kind>,
    objects: BTreeMap<(String, String), Json>,
    /// Every change, for watches that resume from a resourceVersion.
    history: Vec<(u64, Json)>,
    /// History before this resourceVersion is gone: resuming from it gets 410.
    compacted: u64,
}

type Sar = Box<dyn Fn(&Json) -> Result<Json, StatusCode> + Send + Sync>;
type Hook = Box<dyn Fn(&Fake) + Send + Sync>;
type ListHook = Box<dyn Fn(&Fake, &str) + Send + Sync>;

pub struct Fake {
    rv: AtomicU64,
    resources: Mutex<BTreeMap<String, Resource>>,
    /// (resource key, resourceVersion, event) to every open watch.
    events: broadcast::Sender<(String, u64, Json)>,
    /// Closes every open watch; `true` sends a 410 first.
    close: broadcast::Sender<bool>,
    open_watches: Mutex<HashMap<String, Arc<AtomicUsize>>>,
    down: AtomicBool,
    unreachable: AtomicBool,
    hanging: AtomicBool,
    /// Bumped to cut every open connection.
    cut: watch::Sender<u64>,
    /// Connections accepted so far (also those closed at once while unreachable).
    connections: AtomicUsize,
    /// Discovery of these group versions (`api/v1`, `apis/group/version`) answers 503.
    failing_discovery: Mutex<std::collections::BTreeSet<String>>,
    /// Resources whose list and watch are refused with 403 (RBAC not granted), except in
    /// the namespaces given (a Role there).
    forbidden: Mutex<BTreeMap<String, std::collections::BTreeSet<String>>>,
    /// Resources whose changes reach no watch (a watch that lags behind).
    muted: Mutex<std::collections::BTreeSet<String>>,
    stalled: Mutex<BTreeMap<String, Arc<Notify>>>,
    pub requests: Mutex<Vec<String>>,
    /// Every request with when it arrived.
    pub request_times: Mutex<Vec<(std::time::Instant, String)>>,
    /// Resources whose next list with a continue token gets `410 Gone`, as many times as
    /// counted.
    expire_continue: Mutex<BTreeMap<String, usize>>,
    /// Run after each such `410 Gone` (what changed while the list was paused).
    on_expire: Mutex<Option<Hook>>,
    /// Run on each list of a resource, with its plural, once the list's resourceVersion and
    /// items are read and before it is answered (what changed while the list was on its way).
    on_list: Mutex<Option<ListHook>>,
    pub reviews: Mutex<Vec<Json>>,
    pub posted_events: Mutex<Vec<Json>>,
    /// Successful replaces (PUT) of cluster-scoped objects, as `plural/name`.
    pub replaces: Mutex<Vec<String>>,
    /// Replaces (PUT) of cluster-scoped objects answered 503 while set.
    refuse_replaces: AtomicBool,
    /// Server-side applies, as (`plural/namespace/name`, query, body); `namespace` empty
    /// for a cluster-scoped object.
    pub applies: Mutex<Vec<(String, String, Json)>>,
    /// Deletes of one object, as `plural/namespace/name`.
    pub deletes: Mutex<Vec<String>>,
    sar: Mutex<Sar>,
    /// The `major` and `minor` that `/version` reports.
    version: Mutex<(String, String)>,
}

/// What a replica writing wgpolicyk8s.io reports needs besides the policies: the report kinds
/// and the Lease that picks the writer.
pub fn report_kinds() -> [Kind; 3] {
    [
        Kind::new(
            "wgpolicyk8s.io/v1alpha2",
            "PolicyReport",
            "policyreports",
            true,
        ),
        Kind::new(
            "wgpolicyk8s.io/v1alpha2",
            "ClusterPolicyReport",
            "clusterpolicyreports",
            false,
        ),
        Kind::new("coordination.k8s.io/v1", "Lease", "leases", true),
    ]
}

pub fn policy_kinds(version: &str) -> [Kind; 2] {
    let gv = format!("admissionregistration.k8s.io/{version}");
    [
        Kind::new(
            &gv,
            "ValidatingAdmissionPolicy",
            "validatingadmissionpolicies",
            false,
        ),
        Kind::new(
            &gv,
            "ValidatingAdmissionPolicyBinding",
            "validatingadmissionpolicybindings",
            false,
        ),
    ]
}

/// MutatingAdmissionPolicy and its binding at `version` (`v1alpha1`, `v1beta1`, `v1`), for a
/// cluster with the feature on.
pub fn mutating_policy_kinds(version: &str) -> [Kind; 2] {
    let gv = format!("admissionregistration.k8s.io/{version}");
    [
        Kind::new(
            &gv,
            "MutatingAdmissionPolicy",
            "mutatingadmissionpolicies",
            false,
        ),
        Kind::new(
            &gv,
            "MutatingAdmissionPolicyBinding",
            "mutatingadmissionpolicybindings",
            false,
        ),
    ]
}

impl Fake {
    /// A server for `kinds`, on an ephemeral localhost port.
    pub async fn start(kinds: &[Kind]) -> (Arc<Fake>, SocketAddr) {
        let (events, _) = broadcast::channel(1024);
        let (close, _) = broadcast::channel(16);
        let fake = Arc::new(Fake {
            rv: AtomicU64::new(100),
            resources: Mutex::default(),
            events,
            close,
            open_watches: Mutex::default(),
            down: AtomicBool::new(false),
            unreachable: AtomicBool::new(false),
            hanging: AtomicBool::new(false),
            cut: watch::channel(0).0,
            connections: AtomicUsize::new(0),
            failing_discovery: Mutex::default(),
            muted: Mutex::default(),
            forbidden: Mutex::default(),
            stalled: Mutex::default(),
            requests: Mutex::default(),
            request_times: Mutex::default(),
            expire_continue: Mutex::default(),
            on_expire: Mutex::default(),
            on_list: Mutex::default(),
            reviews: Mutex::default(),
            posted_events: Mutex::default(),
            replaces: Mutex::default(),
            refuse_replaces: AtomicBool::new(false),
            applies: Mutex::default(),
            deletes: Mutex::default(),
            sar: Mutex::new(Box::new(|_| Ok(json!({"allowed": false})))),
            version: Mutex::new(("1".into(), "32".into())),
        });
        for k in kinds {
            fake.serve(k.clone());
        }
        let app = Router::new().fallback(handle).with_state(fake.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(accept(listener, app, fake.clone()));
        (fake, addr)
    }

    /// While set, replaces (PUT) of cluster-scoped objects are answered 503.
    pub fn refuse_replaces(&self, refuse: bool) {
        self.refuse_replaces.store(refuse, Ordering::SeqCst);
    }

    /// While unreachable, every connection is closed as soon as it is accepted and open ones
    /// (watches included) are cut: to a client, a stopped API server. Set before the client
    /// starts, the server "starts after" it.
    pub fn set_unreachable(&self, unreachable: bool) {
        self.unreachable.store(unreachable, Ordering::SeqCst);
        if unreachable {
            self.cut.send_modify(|n| *n += 1);
        }
    }

    /// Connections accepted so far, also those refused while unreachable.
    pub fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }

    /// Discovery of `api_version` answers 500 or, with `false`, works again. (Not 503: kube's
    /// client retries 503 answers itself, with delays of its own.)
    pub fn fail_discovery(&self, api_version: &str, fail: bool) {
        let kind = Kind::new(api_version, "", "", false);
        let mut f = self.failing_discovery.lock().unwrap();
        if fail {
            f.insert(kind.gv_path());
        } else {
            f.remove(&kind.gv_path());
        }
    }

    /// What `/version` reports (`major`, `minor`; default 1 and 32).
    pub fn set_version(&self, major: &str, minor: &str) {
        *self.version.lock().unwrap() = (major.into(), minor.into());
    }

    pub fn serve(&self, kind: Kind) {
        let mut r = self.resources.lock().unwrap();
        let key = kind.key();
        r.entry(key).or_default().kind = Some(kind);
    }

    fn kind_of(&self, object: &Json) -> Kind {
        let r = self.resources.lock().unwrap();
        r.values()
            .filter_map(|r| r.kind.clone())
            .find(|k| k.api_version == object["apiVersion"] && k.kind == object["kind"])
            .unwrap_or_else(|| panic!("not served: {object}"))
    }

    fn change(&self, object: &Json, deleted: bool) -> u64 {
        let kind = self.kind_of(object);
        let rv = self.rv.fetch_add(1, Ordering::SeqCst) + 1;
        let mut object = object.clone();
        object["metadata"]["resourceVersion"] = json!(rv.to_string());
        let meta = &object["metadata"];
        let key = (
            meta["namespace"].as_str().unwrap_or("").to_string(),
            meta["name"].as_str().unwrap_or("").to_string(),
        );
        let mut resources = self.resources.lock().unwrap();
        let r = resources.get_mut(&kind.key()).unwrap();
        if object["metadata"]["uid"].is_null() {
            object["metadata"]["uid"] = json!(format!("uid-{}-{}", kind.plural, key.1));
        }
        let kind_of_event = if deleted {
            r.objects.remove(&key);
            "DELETED"
        } else if r.objects.insert(key, object.clone()).is_some() {
            "MODIFIED"
        } else {
            "ADDED"
        };
        let event = json!({"type": kind_of_event, "object": object});
        r.history.push((rv, event.clone()));
        if !self.muted.lock().unwrap().contains(&kind.plural) {
            let _ = self.events.send((kind.key(), rv, event));
        }
        rv
    }

    /// Creates or replaces an object (by namespace and name), notifying watches.
    pub fn apply(&self, object: Json) -> u64 {
        self.change(&object, false)
    }

    pub fn delete(&self, object: Json) -> u64 {
        self.change(&object, true)
    }

    /// The stored object `namespace/name` of `plural`.
    pub fn object(&self, plural: &str, namespace: &str, name: &str) -> Option<Json> {
        let r = self.resources.lock().unwrap();
        r.values()
            .find(|r| r.kind.as_ref().is_some_and(|k| k.plural == plural))?
            .objects
            .get(&(namespace.to_string(), name.to_string()))
            .cloned()
    }

    /// Lists and watches of `plural` get 403 Forbidden.
    pub fn forbid(&self, plural: &str) {
        self.forbidden
            .lock()
            .unwrap()
            .insert(plural.into(), Default::default());
    }

    /// Lists and watches of `plural` get 403 Forbidden, except in `namespaces` (RBAC granted
    /// by Roles there only): cluster-wide and in every other namespace.
    pub fn grant_only_in(&self, plural: &str, namespaces: &[&str]) {
        let granted = namespaces.iter().map(|n| n.to_string()).collect();
        self.forbidden
            .lock()
            .unwrap()
            .insert(plural.into(), granted);
    }

    /// Changes of `plural` stop reaching open watches (they stay readable by GET and list).
    pub fn mute(&self, plural: &str) {
        self.muted.lock().unwrap().insert(plural.into());
    }

    /// Ends every open watch as a dropped connection would.
    pub fn drop_watches(&self) {
        let _ = self.close.send(false);
    }

    /// Ends every open watch with `410 Gone` and forgets the history, so that clients must
    /// list again: any later watch from an older resourceVersion gets `410 Gone` too (as from
    /// an API server restarted with a fresh watch cache).
    pub fn expire_watches(&self) {
        // Past every resourceVersion handed out so far: a client that listed just now must
        // list again too.
        let now = self.rv.fetch_add(1, Ordering::SeqCst) + 1;
        for r in self.resources.lock().unwrap().values_mut() {
            r.history.clear();
            r.compacted = now;
        }
        let _ = self.close.send(true);
    }

    /// etcd replaced, or restored from a backup: every object and all history are gone and
    /// resourceVersions start again from `rv` (below those handed out before). Open watches
    /// stay open and, as a real API server does, a watch from a resourceVersion of the old
    /// etcd is accepted and sends nothing: every later change is older than it (bookmarks
    /// excepted, which carry the new, lower resourceVersion).
    pub fn wipe(&self, rv: u64) {
        let mut resources = self.resources.lock().unwrap();
        self.rv.store(rv, Ordering::SeqCst);
        for r in resources.values_mut() {
            r.objects.clear();
            r.history.clear();
            r.compacted = 0;
        }
    }

    /// The resourceVersion of the latest change.
    pub fn resource_version(&self) -> u64 {
        self.rv.load(Ordering::SeqCst)
    }

    /// Sends a bookmark on every open watch.
    pub fn bookmark(&self) {
        let rv = self.rv.load(Ordering::SeqCst);
        let kinds: Vec<Kind> = {
            let r = self.resources.lock().unwrap();
            r.values().filter_map(|r| r.kind.clone()).collect()
        };
        for k in kinds {
            let event = json!({"type": "BOOKMARK", "object": {"apiVersion": k.api_version, "kind": k.kind, "metadata": {"resourceVersion": rv.to_string()}}});
            let _ = self.events.send((k.key(), rv, event));
        }
    }

    /// While hanging, every request is read and never answered: an API server behind a
    /// network that drops its answers (the client waits for its own timeouts).
    pub fn set_hanging(&self, hanging: bool) {
        self.hanging.store(hanging, Ordering::SeqCst);
    }

    /// While down, every request gets 500 (an API server that cannot reach etcd; kube's
    /// client retries 503s itself for minutes) and open watches end.
    pub fn set_down(&self, down: bool) {
        self.down.store(down, Ordering::SeqCst);
        if down {
            self.drop_watches();
        }
    }

    /// The next `times` lists of `plural` that give a continue token get `410 Gone` (the
    /// list's snapshot compacted away between pages).
    pub fn expire_continue(&self, plural: &str, times: usize) {
        self.expire_continue
            .lock()
            .unwrap()
            .insert(plural.into(), times);
    }

    /// Runs `f` after each expired continue token's `410 Gone`.
    pub fn on_expire(&self, f: impl Fn(&Fake) + Send + Sync + 'static) {
        *self.on_expire.lock().unwrap() = Some(Box::new(f));
    }

    /// Runs `f` (given the plural) on each list, after the list is read and before it is
    /// answered; the answer then waits a little, so that a watch delivers the change first.
    pub fn on_list(&self, f: impl Fn(&Fake, &str) + Send + Sync + 'static) {
        *self.on_list.lock().unwrap() = Some(Box::new(f));
    }

    /// Lists of `plural` hang until [`Fake::release`].
    pub fn stall(&self, plural: &str) {
        self.stalled
            .lock()
            .unwrap()
            .insert(plural.into(), Arc::new(Notify::new()));
    }

    pub fn release(&self, plural: &str) {
        if let Some(n) = self.stalled.lock().unwrap().remove(plural) {
            n.notify_waiters();
        }
    }

    /// Answers SubjectAccessReviews: the spec in, the status out (or an HTTP error).
    pub fn on_review(&self, f: impl Fn(&Json) -> Result<Json, StatusCode> + Send + Sync + 'static) {
        *self.sar.lock().unwrap() = Box::new(f);
    }

    /// Watches of `plural` open now.
    pub fn open_watches(&self, plural: &str) -> usize {
        self.open_watches
            .lock()
            .unwrap()
            .get(plural)
            .map_or(0, |c| c.load(Ordering::SeqCst))
    }

    /// Requests so far whose path and query contain `needle`.
    pub fn count(&self, needle: &str) -> usize {
        self.requests
            .lock()
            .unwrap()
            .iter()
            .filter(|r| r.contains(needle))
            .count()
    }
}

fn status(code: StatusCode, message: &str) -> Response {
    let reason = match code.as_u16() {
        403 => "Forbidden",
        409 => "Conflict",
        404 => "NotFound",
        400 => "BadRequest",
        410 => "Expired",
        503 => "ServiceUnavailable",
        _ => "InternalError",
    };
    let body = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": message, "reason": reason, "code": code.as_u16()});
    (
        code,
        [("content-type", "application/json")],
        body.to_string(),
    )
        .into_response()
}

fn ok(body: Json) -> Response {
    (
        StatusCode::OK,
        [("content-type", "application/json")],
        body.to_string(),
    )
        .into_response()
}

/// A query value as sent (`%XX` escapes and `+` for a space) decoded.
fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap_or("");
                match u8::from_str_radix(hex, 16) {
                    Ok(b) => {
                        out.push(b);
                        i += 3;
                        continue;
                    }
                    Err(_) => out.push(b'%'),
                }
            }
            b'+' => out.push(b' '),
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn without_type(mut o: Json) -> Json {
    if let Some(m) = o.as_object_mut() {
        m.remove("apiVersion");
        m.remove("kind");
    }
    o
}

async fn handle(State(fake): State<Arc<Fake>>, req: Request) -> Response {
    let path = req.uri().path().trim_start_matches('/').to_string();
    let query: HashMap<String, String> = req
        .uri()
        .query()
        .unwrap_or("")
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let line = format!("{} {}", req.method(), req.uri());
    fake.request_times
        .lock()
        .unwrap()
        .push((std::time::Instant::now(), line.clone()));
    fake.requests.lock().unwrap().push(line);
    if fake.hanging.load(Ordering::SeqCst) {
        std::future::pending::<()>().await;
    }
    if fake.down.load(Ordering::SeqCst) {
        return status(StatusCode::INTERNAL_SERVER_ERROR, "the server is down");
    }
    if path == "version" {
        let (major, minor) = fake.version.lock().unwrap().clone();
        let digits = minor.trim_end_matches('+');
        return ok(json!({
            "major": major, "minor": minor, "gitVersion": format!("v{major}.{digits}.0"),
            "gitCommit": "0", "gitTreeState": "clean", "buildDate": "2026-01-01T00:00:00Z",
            "goVersion": "go1.24", "compiler": "gc", "platform": "linux/amd64"
        }));
    }
    let method = req.method().clone();
    let raw_query = req.uri().query().unwrap_or("").to_string();
    let content_type = req
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let body = axum::body::to_bytes(req.into_body(), 1 << 20)
        .await
        .unwrap_or_default();
    if method == Method::POST {
        let object: Json = serde_json::from_slice(&body).unwrap_or(Json::Null);
        if path == "apis/authorization.k8s.io/v1/subjectaccessreviews" {
            fake.reviews.lock().unwrap().push(object.clone());
            let answer = (fake.sar.lock().unwrap())(&object["spec"]);
            return match answer {
                Ok(s) => {
                    let mut review = object;
                    review["status"] = s;
                    (
                        StatusCode::CREATED,
                        [("content-type", "application/json")],
                        review.to_string(),
                    )
                        .into_response()
                }
                Err(code) => status(code, "review failed"),
            };
        }
        if path.starts_with("apis/events.k8s.io/v1/namespaces/") && path.ends_with("/events") {
            fake.posted_events.lock().unwrap().push(object.clone());
            return (
                StatusCode::CREATED,
                [("content-type", "application/json")],
                object.to_string(),
            )
                .into_response();
        }
    }
    let kinds: Vec<Kind> = {
        let r = fake.resources.lock().unwrap();
        r.values().filter_map(|r| r.kind.clone()).collect()
    };
    // The group list: the core versions, then every group with its versions (the first
    // one served preferred).
    if path == "api" {
        return ok(
            json!({"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []}),
        );
    }
    if path == "apis" {
        let mut groups: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for k in &kinds {
            if let Some((g, v)) = k.api_version.split_once('/') {
                let versions = groups.entry(g.to_string()).or_default();
                if !versions.iter().any(|x| x == v) {
                    versions.push(v.to_string());
                }
            }
        }
        let groups: Vec<Json> = groups
            .into_iter()
            .map(|(name, versions)| {
                let gv = |v: &String| json!({"groupVersion": format!("{name}/{v}"), "version": v});
                json!({"name": name, "versions": versions.iter().map(gv).collect::<Vec<_>>(), "preferredVersion": gv(&versions[0])})
            })
            .collect();
        return ok(json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}));
    }
    if let Some((kind, namespace, name)) = namespaced_target(&kinds, &path) {
        if method == Method::GET && name.is_none() {
            return collection(fake, kind, Some(namespace), &query).await;
        }
        let body: Json = serde_json::from_slice(&body).unwrap_or(Json::Null);
        if let Some(answer) = apply_or_delete(
            &fake,
            &method,
            &content_type,
            &raw_query,
            &kind,
            &namespace,
            name.as_deref(),
            &body,
        ) {
            return answer;
        }
        return one_object(&fake, &method, &kind, &namespace, name.as_deref(), body);
    }
    if method == Method::POST {
        return status(StatusCode::NOT_FOUND, "no such collection");
    }
    // Discovery of a group version.
    let in_gv: Vec<&Kind> = kinds.iter().filter(|k| k.gv_path() == path).collect();
    if fake.failing_discovery.lock().unwrap().contains(&path) {
        return status(StatusCode::INTERNAL_SERVER_ERROR, "discovery failed");
    }
    if !in_gv.is_empty() {
        let resources: Vec<Json> = in_gv
            .iter()
            .map(|k| json!({"name": k.plural, "singularName": "", "namespaced": k.namespaced, "kind": k.kind, "verbs": ["get", "list", "watch"]}))
            .collect();
        return ok(
            json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": in_gv[0].api_version, "resources": resources}),
        );
    }
    // GET and replace (PUT, refused with 409 on a stale resourceVersion) of one
    // cluster-scoped object.
    let single = kinds.iter().find_map(|k| {
        let name = path.strip_prefix(&format!("{}/", k.key()))?;
        (!name.contains('/')).then(|| (k.clone(), name.to_string()))
    });
    if let Some((kind, name)) = &single {
        let body: Json = serde_json::from_slice(&body).unwrap_or(Json::Null);
        if let Some(answer) = apply_or_delete(
            &fake,
            &method,
            &content_type,
            &raw_query,
            kind,
            "",
            Some(name),
            &body,
        ) {
            return answer;
        }
    }
    if let Some((kind, name)) = single.as_ref().filter(|_| method == Method::PUT) {
        if fake.refuse_replaces.load(Ordering::SeqCst) {
            return status(StatusCode::SERVICE_UNAVAILABLE, "replaces refused");
        }
        let mut body: Json = serde_json::from_slice(&body).unwrap_or(Json::Null);
        let stored = {
            let r = fake.resources.lock().unwrap();
            r[&kind.key()]
                .objects
                .get(&(String::new(), name.clone()))
                .cloned()
        };
        let Some(stored) = stored else {
            return status(
                StatusCode::NOT_FOUND,
                &format!("{} {name:?} not found", kind.plural),
            );
        };
        if stored["metadata"]["resourceVersion"] != body["metadata"]["resourceVersion"] {
            return status(StatusCode::CONFLICT, "the object has been modified");
        }
        fake.replaces
            .lock()
            .unwrap()
            .push(format!("{}/{name}", kind.plural));
        body["apiVersion"] = json!(kind.api_version);
        body["kind"] = json!(kind.kind);
        fake.apply(body);
        let r = fake.resources.lock().unwrap();
        return ok(r[&kind.key()].objects[&(String::new(), name.clone())].clone());
    }
    if let Some((kind, name)) = single {
        let r = fake.resources.lock().unwrap();
        return match r[&kind.key()].objects.get(&(String::new(), name.clone())) {
            Some(o) => ok(o.clone()),
            None => status(
                StatusCode::NOT_FOUND,
                &format!("{} {name:?} not found", kind.plural),
            ),
        };
    }
    let Some(kind) = kinds.iter().find(|k| k.key() == path).cloned() else {
        return status(
            StatusCode::NOT_FOUND,
            &format!("the server could not find the requested resource ({path})"),
        );
    };
    collection(fake, kind, None, &query).await
}

/// List or watch of a collection: cluster-wide, or of one namespace.
async fn collection(
    fake: Arc<Fake>,
    kind: Kind,
    namespace: Option<String>,
    query: &HashMap<String, String>,
) -> Response {
    let refused = fake
        .forbidden
        .lock()
        .unwrap()
        .get(&kind.plural)
        .is_some_and(|granted| namespace.as_ref().is_none_or(|ns| !granted.contains(ns)));
    if refused {
        let place = match &namespace {
            Some(ns) => format!(" in the namespace \"{ns}\""),
            None => " at the cluster scope".into(),
        };
        let message = format!(
            "{0} is forbidden: User \"system:serviceaccount:celgate-system:celgate\" cannot list resource \"{0}\"{place}",
            kind.plural
        );
        return status(StatusCode::FORBIDDEN, &message);
    }
    if query.get("watch").is_some_and(|w| w == "true" || w == "1") {
        let from: u64 = query
            .get("resourceVersion")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        return watch(fake, kind, namespace, from);
    }
    let stall = fake.stalled.lock().unwrap().get(&kind.plural).cloned();
    if let Some(n) = stall {
        n.notified().await;
    }
    // A continue token is the offset of the next page.
    let offset: usize = match query.get("continue").filter(|c| !c.is_empty()) {
        None => 0,
        Some(token) => {
            let expired = {
                let mut expiring = fake.expire_continue.lock().unwrap();
                let n = expiring.get_mut(&kind.plural).filter(|n| **n > 0);
                n.map(|n| *n -= 1).is_some()
            };
            if expired {
                if let Some(f) = fake.on_expire.lock().unwrap().as_ref() {
                    f(&fake);
                }
                return status(StatusCode::GONE, "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.");
            }
            match token.parse() {
                Ok(o) => o,
                Err(_) => return status(StatusCode::BAD_REQUEST, "invalid continue token"),
            }
        }
    };
    let (items, metadata) = {
        let r = fake.resources.lock().unwrap();
        let res = &r[&kind.key()];
        let limit: Option<usize> = query
            .get("limit")
            .and_then(|l| l.parse().ok())
            .filter(|l| *l > 0);
        // `labelSelector`: equality terms (`k=v`, comma-separated) only.
        let selector: Vec<(String, String)> = query
            .get("labelSelector")
            .map(|s| percent_decode(s))
            .unwrap_or_default()
            .split(',')
            .filter_map(|t| t.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let matching: Vec<&Json> = res
            .objects
            .iter()
            .filter(|((ns, _), _)| namespace.as_ref().is_none_or(|n| n == ns))
            .filter(|(_, o)| {
                selector
                    .iter()
                    .all(|(k, v)| o["metadata"]["labels"][k].as_str() == Some(v))
            })
            .map(|(_, o)| o)
            .collect();
        let end = limit.map_or(matching.len(), |l| (offset + l).min(matching.len()));
        let items: Vec<Json> = matching
            .get(offset.min(end)..end)
            .unwrap_or_default()
            .iter()
            .map(|o| without_type((*o).clone()))
            .collect();
        let mut metadata = json!({"resourceVersion": fake.rv.load(Ordering::SeqCst).to_string()});
        if end < matching.len() {
            metadata["continue"] = json!(end.to_string());
            metadata["remainingItemCount"] = json!(matching.len() - end);
        }
        (items, metadata)
    };
    let hooked = {
        let hook = fake.on_list.lock().unwrap();
        hook.as_ref().map(|f| f(&fake, &kind.plural)).is_some()
    };
    if hooked {
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    }
    ok(json!({
        "kind": format!("{}List", kind.kind),
        "apiVersion": kind.api_version,
        "metadata": metadata,
        "items": items,
    }))
}

/// Serves each accepted connection until it ends or is cut; while unreachable, closes it at
/// once.
async fn accept(listener: tokio::net::TcpListener, app: Router, fake: Arc<Fake>) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        fake.connections.fetch_add(1, Ordering::SeqCst);
        // Subscribed before the check: a cut that comes after it still reaches this one.
        let mut cut = fake.cut.subscribe();
        if fake.unreachable.load(Ordering::SeqCst) {
            drop(stream);
            continue;
        }
        let service = TowerToHyperService::new(app.clone());
        tokio::spawn(async move {
            let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
            let connection = builder.serve_connection(TokioIo::new(stream), service);
            tokio::select! {
                _ = connection => {}
                _ = cut.changed() => {}
            }
        });
    }
}

/// `{group version}/namespaces/{ns}/{plural}[/{name}]` of a namespaced kind.
fn namespaced_target(kinds: &[Kind], path: &str) -> Option<(Kind, String, Option<String>)> {
    kinds.iter().filter(|k| k.namespaced).find_map(|k| {
        let rest = path.strip_prefix(&format!("{}/namespaces/", k.gv_path()))?;
        let mut parts = rest.split('/');
        let (ns, plural, name) = (parts.next()?, parts.next()?, parts.next());
        (plural == k.plural && parts.next().is_none())
            .then(|| (k.clone(), ns.to_string(), name.map(str::to_string)))
    })
}

/// GET, create (POST) and replace (PUT, refused with 409 on a stale resourceVersion) of one
/// namespaced object.
fn one_object(
    fake: &Fake,
    method: &Method,
    kind: &Kind,
    namespace: &str,
    name: Option<&str>,
    mut body: Json,
) -> Response {
    let stored = |name: &str| {
        let r = fake.resources.lock().unwrap();
        r[&kind.key()]
            .objects
            .get(&(namespace.to_string(), name.to_string()))
            .cloned()
    };
    match (method.as_str(), name) {
        ("GET", Some(name)) => match stored(name) {
            Some(o) => ok(o),
            None => status(
                StatusCode::NOT_FOUND,
                &format!("{} {name:?} not found", kind.plural),
            ),
        },
        ("POST", None) | ("PUT", Some(_)) => {
            let name = body["metadata"]["name"].as_str().unwrap_or("").to_string();
            let existing = stored(&name);
            if method == Method::POST && existing.is_some() {
                return status(
                    StatusCode::CONFLICT,
                    &format!("{} {name:?} already exists", kind.plural),
                );
            }
            if method == Method::PUT {
                let Some(existing) = existing else {
                    return status(
                        StatusCode::NOT_FOUND,
                        &format!("{} {name:?} not found", kind.plural),
                    );
                };
                if existing["metadata"]["resourceVersion"] != body["metadata"]["resourceVersion"] {
                    return status(StatusCode::CONFLICT, "the object has been modified");
                }
            }
            body["apiVersion"] = json!(kind.api_version);
            body["kind"] = json!(kind.kind);
            body["metadata"]["namespace"] = json!(namespace);
            fake.apply(body);
            (
                StatusCode::CREATED,
                [("content-type", "application/json")],
                stored(&name).unwrap().to_string(),
            )
                .into_response()
        }
        _ => status(StatusCode::NOT_FOUND, "unsupported request"),
    }
}

/// Server-side apply (PATCH with the apply content type; other patches get 415) or DELETE
/// of one object; `None` for any other request.
#[allow(clippy::too_many_arguments)]
fn apply_or_delete(
    fake: &Fake,
    method: &Method,
    content_type: &str,
    query: &str,
    kind: &Kind,
    namespace: &str,
    name: Option<&str>,
    body: &Json,
) -> Option<Response> {
    let name = name?;
    let path = format!("{}/{namespace}/{name}", kind.plural);
    let stored = || {
        let r = fake.resources.lock().unwrap();
        r[&kind.key()]
            .objects
            .get(&(namespace.to_string(), name.to_string()))
            .cloned()
    };
    if *method == Method::PATCH {
        if content_type != "application/apply-patch+yaml" {
            return Some(status(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "only server-side apply",
            ));
        }
        if !query.contains("fieldManager=") {
            return Some(status(
                StatusCode::UNPROCESSABLE_ENTITY,
                "fieldManager is required for apply requests",
            ));
        }
        if body["apiVersion"] != json!(kind.api_version)
            || body["kind"] != json!(kind.kind)
            || body["metadata"]["name"] != json!(name)
        {
            return Some(status(
                StatusCode::BAD_REQUEST,
                "the body does not match the path",
            ));
        }
        fake.applies
            .lock()
            .unwrap()
            .push((path, query.to_string(), body.clone()));
        let mut object = body.clone();
        if !namespace.is_empty() {
            object["metadata"]["namespace"] = json!(namespace);
        }
        fake.apply(object);
        return Some(ok(stored().unwrap()));
    }
    if *method == Method::DELETE {
        let Some(existing) = stored() else {
            return Some(status(
                StatusCode::NOT_FOUND,
                &format!("{} {name:?} not found", kind.plural),
            ));
        };
        fake.deletes.lock().unwrap().push(path);
        fake.delete(existing.clone());
        return Some(ok(existing));
    }
    None
}

/// Decrements a resource's open-watch count when the stream is dropped.
struct OpenWatch(Arc<AtomicUsize>);

impl Drop for OpenWatch {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A watch of `kind`, cluster-wide or of one `namespace`, from the resourceVersion `from`.
fn watch(fake: Arc<Fake>, kind: Kind, namespace: Option<String>, from: u64) -> Response {
    // Bookmarks (no namespace) reach every watch.
    let in_scope = move |event: &Json| {
        let ns = event["object"]["metadata"]["namespace"].as_str();
        match (&namespace, ns) {
            (Some(want), Some(ns)) => want == ns,
            (Some(_), None) => event["type"] == "BOOKMARK",
            (None, _) => true,
        }
    };
    // Subscribe before reading the history, so that nothing falls between them.
    let mut events = fake.events.subscribe();
    let mut close = fake.close.subscribe();
    let (replay, gone) = {
        let r = fake.resources.lock().unwrap();
        let res = &r[&kind.key()];
        let replay: Vec<(u64, Json)> = res
            .history
            .iter()
            .filter(|(rv, e)| *rv > from && in_scope(e))
            .cloned()
            .collect();
        (replay, from != 0 && from < res.compacted)
    };
    let counter = fake
        .open_watches
        .lock()
        .unwrap()
        .entry(kind.plural.clone())
        .or_default()
        .clone();
    counter.fetch_add(1, Ordering::SeqCst);
    let guard = OpenWatch(counter);
    let key = kind.key();
    let stream = async_stream(move |tx| async move {
        let _guard = guard;
        let gone_event = json!({"type": "ERROR", "object": {"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": "too old resource version", "reason": "Expired", "code": 410}});
        if gone {
            let _ = tx.send(line(&gone_event)).await;
            return;
        }
        let mut last = from;
        for (rv, e) in replay {
            last = rv;
            if tx.send(line(&e)).await.is_err() {
                return;
            }
        }
        loop {
            // Biased: a close sent before an event wins, so a dropped watch delivers nothing
            // after it (the change must come through the resumed watch).
            tokio::select! {
                biased;
                _ = tx.closed() => return,
                c = close.recv() => {
                    if c == Ok(true) {
                        let _ = tx.send(line(&gone_event)).await;
                    }
                    return;
                }
                e = events.recv() => match e {
                    Ok((k, rv, event)) if k == key && in_scope(&event) && (rv > last || event["type"] == "BOOKMARK") => {
                        last = last.max(rv);
                        if tx.send(line(&event)).await.is_err() {
                            return;
                        }
                    }
                    Ok(_) => {}
                    Err(_) => return,
                },
            }
        }
    });
    Response::builder()
        .status(StatusCode::OK)
        .header("content-type", "application/json")
        .body(Body::from_stream(stream))
        .unwrap()
}

fn line(event: &Json) -> Bytes {
    let mut s = event.to_string();
    s.push('\n');
    Bytes::from(s)
}

/// A body stream fed by a task through a channel.
fn async_stream<F, Fut>(f: F) -> impl futures::Stream<Item = Result<Bytes, Infallible>>
where
    F: FnOnce(tokio::sync::mpsc::Sender<Bytes>) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let (tx, rx) = tokio::sync::mpsc::channel(64);
    tokio::spawn(f(tx));
    futures::stream::unfold(
        rx,
        |mut rx| async move { rx.recv().await.map(|b| (Ok(b), rx)) },
    )
}

/// Polls `check` every 20 ms for up to `limit`; panics naming `what` if it never holds. The
/// cluster-mode tests wait with it for watches, reports and scans to catch up.
pub async fn eventually_within(
    limit: std::time::Duration,
    what: &str,
    mut check: impl FnMut() -> bool,
) {
    let step = std::time::Duration::from_millis(20);
    for _ in 0..limit.as_millis() / step.as_millis() {
        if check() {
            return;
        }
        tokio::time::sleep(step).await;
    }
    panic!("timed out waiting for: {what}");
}

/// [`eventually_within`] 10 s.
pub async fn eventually(what: &str, check: impl FnMut() -> bool) {
    eventually_within(std::time::Duration::from_secs(10), what, check).await
}
