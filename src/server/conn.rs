//! The connections of both listeners: how many may be open, when one is closed, and an accept
//! loop that survives running out of file descriptors.
//!
//! - A cap on open connections. At the cap the listener accepts nothing (new connections wait
//!   in the kernel's backlog, no descriptor is used) and asks one connection to close, so that
//!   connections that send nothing cannot lock the API server out. Never one with a request
//!   under way (its head arriving, the request being answered, or its answer not yet written):
//!   first a TLS handshake older than a second, then the connection that never sent a
//!   request the longest, and a kept-alive connection (idle between requests, as the API
//!   server's are) only when no handshake is about to come of age. A connection still in its
//!   TLS handshake is left alone for its first second: in a burst of new connections, closing
//!   the oldest handshakes would fail good clients one after another while the ones that
//!   finished sit idle.
//! - Per connection, a watchdog that requests and reads keep informed: the TLS handshake and
//!   the first request must come within the client timeout; an HTTP/1.1 request head within
//!   the client timeout of its first byte; and a connection without a request in flight for the
//!   idle timeout is closed gracefully (HTTP/1.1: closed; HTTP/2: GOAWAY), forcibly if it has not
//!   ended one client timeout later. The protocol comes from ALPN (HTTP/2 over TLS requires it).
//! - A write timeout: an answer the client does not take for the client timeout (HTTP/1.1:
//!   the socket does not accept bytes; HTTP/2: the stream's or the connection's window stays
//!   zero, so the answer is not even sent) closes the connection at once, which drops what it
//!   buffered. Each answer's progress is timed on its own (`Answers`): on HTTP/2, answers
//!   moving on other streams do not hide one stream that takes nothing.
//! - Accept errors (EMFILE, ENFILE: out of descriptors) pause the loop, 10 ms doubling up to
//!   1 s, and are logged at most once a second with the number left unlogged.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Notify, OwnedSemaphorePermit, Semaphore};

/// The protocol a connection speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    Http1,
    Http2,
}

/// Limits of one listener's connections.
#[derive(Debug, Clone)]
pub struct ConnLimits {
    /// Connections open at once (at least 1).
    pub max_connections: usize,
    /// A connection without a request in flight for this long is closed.
    pub idle_timeout: Duration,
    /// Time for the TLS handshake, for the first request to start, for a request head, and
    /// for answers to move (the write timeout).
    pub client_timeout: Duration,
    /// Time in-flight requests get to finish on shutdown.
    pub drain_timeout: Duration,
    /// Bytes of a request head (HTTP/1.1: also the connection's read and write buffers;
    /// HTTP/2: the header list); at least [`MIN_HEADER_BYTES`].
    pub max_header_bytes: usize,
}

/// hyper's least HTTP/1.1 buffer (it panics below it).
pub const MIN_HEADER_BYTES: usize = 8192;

/// Why a connection whose answers do not move is closed (at once: a graceful close would
/// wait for them).
const ANSWER_NOT_TAKEN: &str = "answer not taken in time";
/// How often, at the cap, one more idle connection is asked to close while none has ended.
const EVICT_EVERY: Duration = Duration::from_millis(100);
/// How long, at the cap, a connection in its TLS handshake is not picked to close.
const HANDSHAKE_GRACE_MS: u64 = 1000;
/// HTTP/2 pings find peers that went away without closing.
const H2_PING: Duration = Duration::from_secs(30);
/// Accept errors: the first pause, and the longest.
const FIRST_PAUSE: Duration = Duration::from_millis(10);
const LONGEST_PAUSE: Duration = Duration::from_secs(1);

/// What the watchdog of one connection knows. Times are milliseconds since the listener's
/// start, so that connections compare.
struct Activity {
    epoch: Instant,
    http1: AtomicBool,
    /// Requests whose answer is not produced yet.
    inflight: AtomicU32,
    /// The accept, the handshake's end, or the end of the last request.
    last: AtomicU64,
    /// One more than the time of the first byte read while no request was in flight (HTTP/1.1:
    /// a request head has started); 0 when none.
    head: AtomicU64,
    /// Whether a request was seen.
    served: AtomicBool,
    /// Asked to close at the cap (not picked again).
    evicted: AtomicBool,
    /// The TLS handshake has not finished.
    handshaking: AtomicBool,
    /// One more than the time a write to the client was refused (the socket full) with no
    /// write accepted since; 0 when none.
    write_blocked: AtomicU64,
    /// Answers produced but not yet taken whole by the connection ([`Sending`]).
    answers: Answers,
    close: Notify,
}

/// Where a connection stands for the cap, in the order it is picked to close (the
/// `Option` in [`Activity::standing`] is `None` for a connection never picked).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Standing {
    /// In its TLS handshake for longer than [`HANDSHAKE_GRACE_MS`].
    StalledHandshake,
    /// Handshaken, and no request ever started.
    Silent,
    /// Idle between requests.
    KeptAlive,
}

impl Activity {
    fn new(epoch: Instant) -> Activity {
        let a = Activity {
            epoch,
            http1: AtomicBool::new(false),
            inflight: AtomicU32::new(0),
            last: AtomicU64::new(0),
            head: AtomicU64::new(0),
            served: AtomicBool::new(false),
            evicted: AtomicBool::new(false),
            handshaking: AtomicBool::new(true),
            write_blocked: AtomicU64::new(0),
            answers: Answers::default(),
            close: Notify::new(),
        };
        a.last.store(a.now(), Ordering::Relaxed);
        a
    }

    fn now(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    fn at(&self, ms: u64) -> Instant {
        self.epoch + Duration::from_millis(ms)
    }

    fn handshaken(&self, protocol: Protocol) {
        self.http1
            .store(protocol == Protocol::Http1, Ordering::Relaxed);
        self.last.store(self.now(), Ordering::Relaxed);
        self.handshaking.store(false, Ordering::Relaxed);
    }

    /// Whether the handshake has not finished and started less than a second ago.
    fn young_handshake(&self) -> bool {
        self.handshaking.load(Ordering::Relaxed)
            && self.now().saturating_sub(self.last.load(Ordering::Relaxed)) < HANDSHAKE_GRACE_MS
    }

    /// Whether a request is under way: being answered, its head arriving (HTTP/1.1), or its
    /// answer not yet written.
    fn mid_request(&self) -> bool {
        !self.idle()
            || self.head.load(Ordering::Relaxed) != 0
            || self.answers.oldest_progress().is_some()
            || self.write_blocked.load(Ordering::Relaxed) != 0
    }

    /// Where the cap may pick this connection to close; `None`: never (picked already, mid
    /// request, or a young handshake).
    fn standing(&self) -> Option<Standing> {
        if self.evicted.load(Ordering::Relaxed) || self.mid_request() || self.young_handshake() {
            return None;
        }
        Some(if self.handshaking.load(Ordering::Relaxed) {
            Standing::StalledHandshake
        } else if !self.served.load(Ordering::Relaxed) {
            Standing::Silent
        } else {
            Standing::KeptAlive
        })
    }

    /// A write to the client was refused (`blocked`) or accepted.
    fn wrote(&self, blocked: bool) {
        if !blocked {
            self.write_blocked.store(0, Ordering::Relaxed);
        } else if self.write_blocked.load(Ordering::Relaxed) == 0 {
            self.write_blocked.store(self.now() + 1, Ordering::Relaxed);
        }
    }

    /// When the answers stopped moving (a write refused, or the answer that moved the least
    /// recently: no frame of it taken since); `None` while there are none. The oldest, not
    /// the latest: on HTTP/2 other streams may move while one stream's answer never does.
    fn stalled_since(&self) -> Option<u64> {
        match self.write_blocked.load(Ordering::Relaxed) {
            0 => self.answers.oldest_progress(),
            blocked => Some(blocked - 1),
        }
    }

    fn begin(&self) {
        self.inflight.fetch_add(1, Ordering::Relaxed);
        self.head.store(0, Ordering::Relaxed);
        self.served.store(true, Ordering::Relaxed);
    }

    fn end(&self) {
        self.last.store(self.now(), Ordering::Relaxed);
        self.inflight.fetch_sub(1, Ordering::Relaxed);
    }

    /// Bytes arrived: on an idle HTTP/1.1 connection, the start of a request head. (HTTP/2
    /// frames arrive on idle connections too: pings, settings.)
    fn read(&self) {
        if self.http1.load(Ordering::Relaxed)
            && self.inflight.load(Ordering::Relaxed) == 0
            && self.head.load(Ordering::Relaxed) == 0
        {
            self.head.store(self.now() + 1, Ordering::Relaxed);
        }
    }

    fn idle(&self) -> bool {
        self.inflight.load(Ordering::Relaxed) == 0
    }

    /// When the connection times out as it stands, and why; `None` while a request is in
    /// flight and its answers move.
    fn deadline(&self, limits: &ConnLimits) -> Option<(Instant, &'static str)> {
        if let Some(since) = self.stalled_since() {
            return Some((self.at(since) + limits.client_timeout, ANSWER_NOT_TAKEN));
        }
        if !self.idle() {
            return None;
        }
        let head = self.head.load(Ordering::Relaxed);
        let last = self.at(self.last.load(Ordering::Relaxed));
        Some(if head != 0 {
            (
                self.at(head - 1) + limits.client_timeout,
                "request head not received in time",
            )
        } else if !self.served.load(Ordering::Relaxed) {
            (last + limits.client_timeout, "no request in time")
        } else {
            (last + limits.idle_timeout, "idle")
        })
    }

    /// When to look again: the deadline, or sooner (a request head may start meanwhile).
    fn next_check(&self, limits: &ConnLimits) -> Instant {
        let soon = Instant::now() + limits.client_timeout.min(limits.idle_timeout);
        self.deadline(limits).map_or(soon, |(d, _)| d.min(soon))
    }

    fn expired(&self, limits: &ConnLimits) -> Option<&'static str> {
        self.deadline(limits)
            .filter(|(d, _)| Instant::now() >= *d)
            .map(|(_, why)| why)
    }
}

/// The open connections of a listener, for picking one to close at the cap.
struct Registry {
    epoch: Instant,
    next: AtomicU64,
    open: Mutex<std::collections::HashMap<u64, Arc<Activity>>>,
}

/// A connection's place in the registry, given up when it ends.
struct Entry {
    registry: Arc<Registry>,
    id: u64,
}

impl Drop for Entry {
    fn drop(&mut self) {
        self.registry.lock().remove(&self.id);
    }
}

impl Registry {
    fn new() -> Registry {
        Registry {
            epoch: Instant::now(),
            next: AtomicU64::new(0),
            open: Mutex::new(Default::default()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, std::collections::HashMap<u64, Arc<Activity>>> {
        // A panic while holding the lock leaves a consistent map: keep using it.
        self.open.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn add(self: &Arc<Self>) -> (Arc<Activity>, Entry) {
        let activity = Arc::new(Activity::new(self.epoch));
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        self.lock().insert(id, activity.clone());
        (
            activity,
            Entry {
                registry: self.clone(),
                id,
            },
        )
    }

    /// Asks one connection (not asked yet) to close, in the order of [`Standing`], the one
    /// in it the longest first; false when none may be picked now. A kept-alive connection
    /// is picked only when no handshake is young: closing one risks the request its client
    /// may be sending at that moment, while a young handshake is picked within a second.
    fn evict_one(&self) -> bool {
        let open = self.lock();
        let mut young = false;
        let mut best: Option<(Standing, u64, &Arc<Activity>)> = None;
        for a in open.values() {
            young |= a.young_handshake();
            let Some(standing) = a.standing() else {
                continue;
            };
            let key = (standing, a.last.load(Ordering::Relaxed));
            if best.is_none_or(|(s, l, _)| key < (s, l)) {
                best = Some((key.0, key.1, a));
            }
        }
        let pick = best
            .filter(|(standing, _, _)| !(young && *standing == Standing::KeptAlive))
            .map(|(_, _, a)| a);
        match pick {
            Some(a) => {
                a.evicted.store(true, Ordering::Relaxed);
                a.close.notify_one();
                true
            }
            None => false,
        }
    }
}

/// A line at most once a second, with how many were left out.
#[derive(Debug, Default)]
pub struct RateLimited {
    last: Option<Instant>,
    suppressed: u64,
}

impl RateLimited {
    /// `Some(suppressed since the last line)` when a line may be written now.
    pub fn ready(&mut self, now: Instant) -> Option<u64> {
        if self
            .last
            .is_some_and(|l| now.duration_since(l) < Duration::from_secs(1))
        {
            self.suppressed += 1;
            return None;
        }
        self.last = Some(now);
        Some(std::mem::take(&mut self.suppressed))
    }
}

/// The pause after each failed accept: 10 ms, doubling up to 1 s; reset by a success.
#[derive(Debug, Default)]
pub struct Backoff {
    pause: Option<Duration>,
}

impl Backoff {
    pub fn failed(&mut self) -> Duration {
        let next = self
            .pause
            .map_or(FIRST_PAUSE, |p| (p * 2).min(LONGEST_PAUSE));
        self.pause = Some(next);
        next
    }

    pub fn succeeded(&mut self) {
        self.pause = None;
    }
}

/// Serves `app` on the connections of `listener`, each set up by `handshake` (TLS, or none),
/// until `shutdown` turns true; then stops accepting, asks every connection to finish and
/// waits for them (up to the drain timeout). `name` names the listener in logs.
pub async fn serve<H, F, S>(
    listener: TcpListener,
    handshake: H,
    app: Router,
    limits: ConnLimits,
    name: &'static str,
    mut shutdown: watch::Receiver<bool>,
) where
    H: Fn(TcpStream) -> F + Send + Sync + 'static,
    F: Future<Output = io::Result<(S, Protocol)>> + Send + 'static,
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let handshake = Arc::new(handshake);
    let max = limits.max_connections.clamp(1, u32::MAX as usize);
    let slots = Arc::new(Semaphore::new(max));
    let registry = Arc::new(Registry::new());
    let mut backoff = Backoff::default();
    let mut error_log = RateLimited::default();
    let mut cap_log = RateLimited::default();
    'accept: loop {
        if *shutdown.borrow() {
            break;
        }
        let permit = match slots.clone().try_acquire_owned() {
            Ok(p) => p,
            // At the cap: accept nothing until a connection ends, and ask the one idle the
            // longest to end (one more every EVICT_EVERY while none has).
            Err(_) => loop {
                let evicted = registry.evict_one();
                if let Some(suppressed) = cap_log.ready(Instant::now()) {
                    tracing::warn!(
                        listener = name,
                        max_connections = max,
                        evicted,
                        suppressed,
                        "connection limit reached; closing the connection idle the longest"
                    );
                }
                tokio::select! {
                    p = slots.clone().acquire_owned() => match p {
                        Ok(p) => break p,
                        Err(_) => break 'accept,
                    },
                    _ = tokio::time::sleep(EVICT_EVERY) => {}
                    _ = shutdown.changed() => break 'accept,
                }
            },
        };
        let (tcp, peer) = tokio::select! {
            _ = shutdown.changed() => break,
            accepted = listener.accept() => match accepted {
                Ok(a) => {
                    backoff.succeeded();
                    a
                }
                Err(e) => {
                    // Out of descriptors (EMFILE, ENFILE) or memory: retrying at once would
                    // spin. Pause, and log once a second at most.
                    let pause = backoff.failed();
                    if let Some(suppressed) = error_log.ready(Instant::now()) {
                        tracing::warn!(listener = name, error = %e, ?pause, suppressed, "accept failed");
                    }
                    drop(permit);
                    tokio::select! {
                        _ = shutdown.changed() => break,
                        _ = tokio::time::sleep(pause) => {}
                    }
                    continue;
                }
            },
        };
        // Without this, Nagle's algorithm holds back the last segment of a TLS flight until
        // the client's delayed ACK (40 ms): every new connection's first answer would wait.
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!(%peer, error = %e, "cannot set TCP_NODELAY");
        }
        let (activity, entry) = registry.add();
        tokio::spawn(connection(
            tcp,
            peer,
            handshake.clone(),
            app.clone(),
            limits.clone(),
            activity,
            (entry, permit),
            shutdown.clone(),
        ));
    }
    drop(listener);
    // Every connection saw the shutdown and finishes; each gives its slot back as it ends.
    let all = u32::try_from(max).unwrap_or(u32::MAX);
    if tokio::time::timeout(limits.drain_timeout, slots.acquire_many(all))
        .await
        .is_err()
    {
        tracing::warn!(
            listener = name,
            "shutdown: in-flight requests did not finish in time"
        );
    }
}

/// One connection: the handshake, then HTTP until it ends or the watchdog ends it. `slot` is
/// held until then.
#[allow(clippy::too_many_arguments)]
async fn connection<H, F, S>(
    tcp: TcpStream,
    peer: std::net::SocketAddr,
    handshake: Arc<H>,
    app: Router,
    limits: ConnLimits,
    activity: Arc<Activity>,
    slot: (Entry, OwnedSemaphorePermit),
    mut shutdown: watch::Receiver<bool>,
) where
    H: Fn(TcpStream) -> F + Send + Sync + 'static,
    F: Future<Output = io::Result<(S, Protocol)>> + Send + 'static,
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let _slot = slot;
    let (io, protocol) = tokio::select! {
        r = tokio::time::timeout(limits.client_timeout, handshake(tcp)) => match r {
            Ok(Ok(x)) => x,
            Ok(Err(e)) => {
                tracing::debug!(%peer, error = %e, "handshake failed");
                return;
            }
            Err(_) => {
                tracing::debug!(%peer, "handshake timed out");
                return;
            }
        },
        _ = activity.close.notified() => return,
        _ = shutdown.changed() => return,
    };
    activity.handshaken(protocol);
    let io = TokioIo::new(Watched {
        inner: io,
        activity: activity.clone(),
    });
    let service = Tracked {
        inner: TowerToHyperService::new(app),
        activity: activity.clone(),
    };
    let result = match protocol {
        Protocol::Http1 => {
            // The watchdog times request heads: hyper's own header timer would also run
            // between requests and cut keep-alive at the client timeout.
            // hyper's buffer would otherwise grow to about 400 KiB for a head, on every
            // connection at once: far past --max-buffered-bytes.
            let conn = hyper::server::conn::http1::Builder::new()
                .header_read_timeout(None)
                .max_header_size(limits.max_header_bytes)
                .max_buf_size(limits.max_header_bytes.max(MIN_HEADER_BYTES))
                .serve_connection(io, service);
            drive(
                conn,
                |c| c.graceful_shutdown(),
                &activity,
                &limits,
                &mut shutdown,
            )
            .await
        }
        Protocol::Http2 => {
            let conn = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                .timer(TokioTimer::new())
                .keep_alive_interval(Some(H2_PING))
                .max_header_list_size(u32::try_from(limits.max_header_bytes).unwrap_or(u32::MAX))
                .serve_connection(io, service);
            drive(
                conn,
                |c| c.graceful_shutdown(),
                &activity,
                &limits,
                &mut shutdown,
            )
            .await
        }
    };
    if let Err(e) = result {
        tracing::debug!(%peer, error = %e, "connection ended with an error");
    }
}

/// Runs `conn` until it ends, or until the watchdog, the cap or the shutdown ends it: then
/// gracefully, and forcibly (dropped) if it has not ended in time.
async fn drive<C, E>(
    conn: C,
    graceful: impl FnOnce(Pin<&mut C>),
    activity: &Activity,
    limits: &ConnLimits,
    shutdown: &mut watch::Receiver<bool>,
) -> Result<(), E>
where
    C: Future<Output = Result<(), E>>,
{
    let mut conn = std::pin::pin!(conn);
    let (why, grace) = loop {
        let wake = activity.next_check(limits);
        tokio::select! {
            r = conn.as_mut() => return r,
            _ = tokio::time::sleep_until(wake.into()) => {
                match activity.expired(limits) {
                    Some(ANSWER_NOT_TAKEN) => {
                        tracing::debug!(why = ANSWER_NOT_TAKEN, "closing connection");
                        return Ok(());
                    }
                    Some(why) => break (why, limits.client_timeout),
                    None => {}
                }
            }
            _ = activity.close.notified() => break ("connection limit", limits.client_timeout),
            _ = shutdown.changed() => break ("shutting down", limits.drain_timeout),
        }
    };
    tracing::debug!(why, "closing connection");
    graceful(conn.as_mut());
    tokio::time::timeout(grace, conn).await.unwrap_or(Ok(()))
}

/// The connection's stream, telling the watchdog when bytes arrive.
struct Watched<S> {
    inner: S,
    activity: Arc<Activity>,
}

impl<S: AsyncRead + Unpin> AsyncRead for Watched<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let r = Pin::new(&mut this.inner).poll_read(cx, buf);
        if buf.filled().len() > before {
            this.activity.read();
        }
        r
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Watched<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.inner).poll_write(cx, buf);
        this.activity.wrote(r.is_pending());
        r
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.inner).poll_flush(cx);
        this.activity.wrote(r.is_pending());
        r
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        this.activity.wrote(r.is_pending());
        r
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

/// The service, counting requests in flight for the watchdog.
struct Tracked<S> {
    inner: S,
    activity: Arc<Activity>,
}

/// A request in flight, until its answer is produced (or it is dropped).
struct Busy(Arc<Activity>);

impl Busy {
    fn new(activity: &Arc<Activity>) -> Busy {
        activity.begin();
        Busy(activity.clone())
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.end();
    }
}

impl<S, R, B> hyper::service::Service<R> for Tracked<S>
where
    S: hyper::service::Service<R, Response = axum::http::Response<B>>,
{
    type Response = axum::http::Response<Sending<B>>;
    type Error = S::Error;
    type Future = TrackedFuture<S::Future>;

    fn call(&self, req: R) -> Self::Future {
        TrackedFuture {
            busy: Busy::new(&self.activity),
            inner: self.inner.call(req),
        }
    }
}

pin_project_lite::pin_project! {
    struct TrackedFuture<F> {
        #[pin]
        inner: F,
        busy: Busy,
    }
}

impl<F, B, E> Future for TrackedFuture<F>
where
    F: Future<Output = Result<axum::http::Response<B>, E>>,
{
    type Output = Result<axum::http::Response<Sending<B>>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let activity = &this.busy.0;
        this.inner
            .poll(cx)
            .map_ok(|r| r.map(|body| Sending::new(body, activity.clone())))
    }
}

/// The answers of one connection not yet taken whole: for each, when the connection last
/// took a frame of it (or when it was produced). A slot per answer, reused once it is taken;
/// there are at most as many as requests in flight (HTTP/2: the concurrent streams).
#[derive(Default)]
struct Answers {
    slots: Mutex<Vec<Option<u64>>>,
}

impl Answers {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Option<u64>>> {
        // Every update is a single store: a panic while holding the lock leaves it consistent.
        self.slots.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A new answer, produced at `now`; its slot.
    fn add(&self, now: u64) -> usize {
        let mut slots = self.lock();
        match slots.iter().position(Option::is_none) {
            Some(free) => {
                slots[free] = Some(now);
                free
            }
            None => {
                slots.push(Some(now));
                slots.len() - 1
            }
        }
    }

    /// A frame of the answer in `slot` was taken at `now`.
    fn moved(&self, slot: usize, now: u64) {
        if let Some(progress) = self.lock().get_mut(slot) {
            *progress = Some(now);
        }
    }

    /// The answer in `slot` was taken whole (or dropped).
    fn remove(&self, slot: usize) {
        if let Some(progress) = self.lock().get_mut(slot) {
            *progress = None;
        }
    }

    /// When the answer that moved the least recently last moved; `None` when there are none.
    fn oldest_progress(&self) -> Option<u64> {
        self.lock().iter().flatten().min().copied()
    }
}

/// An answer's body, telling the watchdog that an answer is not yet taken whole and when
/// the connection last took a frame of it (the write timeout of HTTP/2, whose connection
/// does not ask for the body while the client's window is zero).
///
/// On HTTP/2 "taken" means taken by h2, which may still hold the last frames until the
/// client's window opens; those bytes are then out of both the watchdog's and the budget's
/// view (see [`super::budget`]).
pub struct Sending<B> {
    inner: B,
    activity: Arc<Activity>,
    /// This answer's place in [`Activity::answers`]; `None` once taken whole.
    slot: Option<usize>,
}

impl<B> Sending<B> {
    fn new(inner: B, activity: Arc<Activity>) -> Sending<B> {
        let slot = activity.answers.add(activity.now());
        Sending {
            inner,
            activity,
            slot: Some(slot),
        }
    }

    fn finish(&mut self) {
        if let Some(slot) = self.slot.take() {
            self.activity.answers.remove(slot);
        }
    }
}

impl<B> Drop for Sending<B> {
    fn drop(&mut self) {
        self.finish();
    }
}

impl<B: hyper::body::Body + Unpin> hyper::body::Body for Sending<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<hyper::body::Frame<B::Data>, B::Error>>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.inner).poll_frame(cx);
        match &r {
            Poll::Ready(Some(_)) => {
                if let Some(slot) = this.slot {
                    this.activity.answers.moved(slot, this.activity.now());
                }
            }
            Poll::Ready(None) => this.finish(),
            Poll::Pending => {}
        }
        r
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.inner.size_hint()
    }
}

/// Raises the soft limit on open files to the hard limit (as Go programs do at start), and
/// returns the soft limit then in force; `None` where it cannot be read.
#[allow(unsafe_code)]
pub fn raise_fd_limit() -> Option<u64> {
    #[cfg(unix)]
    {
        let mut lim = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit writes into the struct it is given, which lives across the call.
        if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
            return None;
        }
        if lim.rlim_cur < lim.rlim_max {
            let raised = libc::rlimit {
                rlim_cur: lim.rlim_max,
                rlim_max: lim.rlim_max,
            };
            // SAFETY: setrlimit only reads the struct it is given.
            if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
                lim = raised;
            }
        }
        #[allow(clippy::unnecessary_cast)] // rlim_t is u64 on Linux, not everywhere
        Some(lim.rlim_cur as u64)
    }
    #[cfg(not(unix))]
    {
        None
    }
}

/// Descriptors kept for everything but connections: listeners, the runtime, policy and
/// certificate files, API server clients, standard streams.
pub const RESERVED_FDS: usize = 64;

/// The connection caps that fit `fd_limit`: the webhook's is lowered (to at least 1) when the
/// webhook's and the metrics listener's caps and the reserve do not fit.
pub fn fit_to_fd_limit(webhook: usize, metrics: usize, fd_limit: Option<u64>) -> usize {
    let Some(limit) = fd_limit.and_then(|l| usize::try_from(l).ok()) else {
        return webhook;
    };
    webhook
        .min(limit.saturating_sub(RESERVED_FDS + metrics))
        .max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accept_errors_back_off_and_are_logged_once_a_second() {
        let mut b = Backoff::default();
        let pauses: Vec<u64> = (0..9).map(|_| b.failed().as_millis() as u64).collect();
        assert_eq!(pauses, [10, 20, 40, 80, 160, 320, 640, 1000, 1000]);
        b.succeeded();
        assert_eq!(b.failed(), Duration::from_millis(10));

        let mut log = RateLimited::default();
        let t = Instant::now();
        assert_eq!(log.ready(t), Some(0));
        for ms in 1..1000 {
            assert_eq!(log.ready(t + Duration::from_millis(ms)), None);
        }
        assert_eq!(log.ready(t + Duration::from_millis(1000)), Some(999));
        assert_eq!(log.ready(t + Duration::from_millis(1001)), None);
    }

    #[test]
    fn caps_fit_the_descriptor_limit() {
        assert_eq!(fit_to_fd_limit(1024, 16, None), 1024);
        assert_eq!(fit_to_fd_limit(1024, 16, Some(1 << 20)), 1024);
        assert_eq!(fit_to_fd_limit(1024, 16, Some(128)), 48);
        assert_eq!(fit_to_fd_limit(1024, 16, Some(10)), 1);
    }

    #[test]
    fn the_watchdog_times_heads_first_requests_and_idleness() {
        let limits = ConnLimits {
            max_connections: 1,
            idle_timeout: Duration::from_secs(100),
            client_timeout: Duration::from_secs(10),
            drain_timeout: Duration::from_secs(1),
            max_header_bytes: MIN_HEADER_BYTES,
        };
        let a = Activity::new(Instant::now());
        a.handshaken(Protocol::Http1);
        let start = a.at(a.last.load(Ordering::Relaxed));
        assert_eq!(
            a.deadline(&limits),
            Some((start + limits.client_timeout, "no request in time"))
        );
        a.begin();
        assert_eq!(a.deadline(&limits), None);
        a.read(); // the body of a request in flight
        a.end();
        let last = a.at(a.last.load(Ordering::Relaxed));
        assert_eq!(
            a.deadline(&limits),
            Some((last + limits.idle_timeout, "idle"))
        );
        a.read(); // the next request's head starts
        let head = a.at(a.head.load(Ordering::Relaxed) - 1);
        assert_eq!(
            a.deadline(&limits),
            Some((
                head + limits.client_timeout,
                "request head not received in time"
            ))
        );
        // HTTP/2 frames on an idle connection are not request heads.
        let h2 = Activity::new(Instant::now());
        h2.handshaken(Protocol::Http2);
        h2.begin();
        h2.end();
        h2.read();
        assert_eq!(h2.deadline(&limits).map(|(_, why)| why), Some("idle"));
    }

    #[test]
    fn at_the_cap_the_longest_idle_connection_is_asked_to_close() {
        let r = Arc::new(Registry::new());
        let handshaken = || {
            let (a, e) = r.add();
            a.handshaken(Protocol::Http1);
            std::thread::sleep(Duration::from_millis(5));
            (a, e)
        };
        let (busy, _e1) = handshaken();
        let (old, _e2) = handshaken();
        let (young, _e3) = handshaken();
        busy.begin();
        assert!(r.evict_one());
        assert!(old.evicted.load(Ordering::Relaxed));
        assert!(!young.evicted.load(Ordering::Relaxed));
        assert!(r.evict_one());
        assert!(young.evicted.load(Ordering::Relaxed));
        assert!(
            !r.evict_one(),
            "a connection with a request in flight stays"
        );
        drop(_e2);
        assert_eq!(r.lock().len(), 2);
    }

    /// Issue 24 item 12(d): a burst of silent TLS connections evicted keep-alive connections
    /// in the middle of a request. Never a connection with a request under way (its head
    /// arriving, or its answer not yet written); handshakes past their grace first, then
    /// connections that never sent a request, and a kept-alive one only when no handshake is
    /// about to come of age.
    #[test]
    fn the_cap_never_closes_a_connection_mid_request() {
        let Some(epoch) = Instant::now().checked_sub(Duration::from_secs(50)) else {
            return; // a machine up for less than 50 s: nothing to test against
        };
        let r = Arc::new(Registry {
            epoch,
            ..Registry::new()
        });
        let kept_alive = |since: u64| {
            let (a, e) = r.add();
            a.handshaken(Protocol::Http1);
            a.begin();
            a.end();
            a.last.store(since, Ordering::Relaxed);
            (a, e)
        };
        // Idle since 10 s after the epoch: the longest idle, but a request head is arriving.
        let (heading, _e1) = kept_alive(10_000);
        heading.read();
        // Its answer produced but not yet taken by the connection.
        let (answering, _e2) = kept_alive(11_000);
        let sending = Sending::new(
            http_body_util::Empty::<axum::body::Bytes>::new(),
            answering.clone(),
        );
        // Between two requests.
        let (idle, _e3) = kept_alive(12_000);
        // A handshake that has just started.
        let (young, _e4) = r.add();
        assert!(
            !r.evict_one(),
            "a kept-alive connection waits while a handshake comes of age"
        );
        // Handshakes past their grace, and connections that never sent a request, go first.
        let (stalled, _e5) = r.add();
        stalled.last.store(20_000, Ordering::Relaxed);
        let (silent, _e6) = r.add();
        silent.handshaken(Protocol::Http2);
        silent.last.store(5_000, Ordering::Relaxed);
        assert!(r.evict_one());
        assert!(stalled.evicted.load(Ordering::Relaxed));
        assert!(r.evict_one());
        assert!(silent.evicted.load(Ordering::Relaxed));
        young.handshaken(Protocol::Http1);
        young.last.store(30_000, Ordering::Relaxed);
        assert!(r.evict_one());
        assert!(young.evicted.load(Ordering::Relaxed));
        // No handshake left: the idle kept-alive one, never the two mid-request.
        assert!(r.evict_one());
        assert!(idle.evicted.load(Ordering::Relaxed));
        assert!(!r.evict_one());
        assert!(!heading.evicted.load(Ordering::Relaxed));
        assert!(!answering.evicted.load(Ordering::Relaxed));
        drop(sending);
        assert!(r.evict_one(), "once its answer is taken, idle again");
        assert!(answering.evicted.load(Ordering::Relaxed));
    }

    /// Review item 2: the write timeout runs from the answer that moved the least recently,
    /// not the latest, so one HTTP/2 stream taking nothing is not hidden by busy ones.
    #[test]
    fn the_write_timeout_runs_from_the_oldest_answer() {
        let a = Arc::new(Activity::new(Instant::now()));
        a.handshaken(Protocol::Http2);
        assert_eq!(a.stalled_since(), None);
        let body = || http_body_util::Full::new(axum::body::Bytes::from_static(b"x"));
        let stalled = Sending::new(body(), a.clone());
        let stalled_at = a.answers.oldest_progress();
        std::thread::sleep(Duration::from_millis(5));
        let mut busy = Sending::new(body(), a.clone());
        let waker = std::task::Waker::noop();
        let mut cx = Context::from_waker(waker);
        use hyper::body::Body;
        while let Poll::Ready(Some(_)) = Pin::new(&mut busy).poll_frame(&mut cx) {}
        drop(busy);
        assert_eq!(a.stalled_since(), stalled_at, "the stalled answer's time");
        assert!(a.mid_request());
        drop(stalled);
        assert_eq!(a.stalled_since(), None);
        assert!(!a.mid_request());
    }

    #[test]
    fn a_young_handshake_is_not_picked_at_the_cap() {
        let Some(epoch) = Instant::now().checked_sub(Duration::from_secs(5)) else {
            return; // a machine up for less than 5 s: nothing to test against
        };
        let r = Arc::new(Registry {
            epoch,
            ..Registry::new()
        });
        let (fresh, _e1) = r.add(); // accepted now, handshaking
        assert!(!r.evict_one(), "a handshake under a second old stays");
        assert!(!fresh.evicted.load(Ordering::Relaxed));
        let (stalled, _e2) = r.add();
        stalled.last.store(0, Ordering::Relaxed); // accepted 5 s ago, still handshaking
        assert!(r.evict_one());
        assert!(stalled.evicted.load(Ordering::Relaxed));
        fresh.handshaken(Protocol::Http2);
        assert!(
            r.evict_one(),
            "once handshaken, an idle connection may be picked"
        );
        assert!(fresh.evicted.load(Ordering::Relaxed));
    }
}
