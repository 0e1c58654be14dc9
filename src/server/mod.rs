//! The webhook service: `POST /validate` over TLS (HTTP/1.1 and HTTP/2), `/healthz`,
//! `/readyz`, and `/metrics` on a separate plain-HTTP port.
//!
//! Requests read the current snapshot through an `ArcSwap` (no locks); a review is first
//! evaluated on its connection's task for at most `--inline-eval-time` (the hand-over costs
//! more than a cheap review), then on the [`pool`]'s threads (one per core, and a spare
//! beside each slow evaluation), whose stack is sized for the engine, so the async workers
//! never block and never run an evaluation longer than that.
//! The evaluation stops at the request's deadline, so that its thread is free for other
//! reviews soon after. Bad input gets a clear
//! HTTP answer: 415 for a wrong content type, 413 over the body limit, 400 for malformed JSON
//! or a review without a request, 429 when too many reviews are in flight, 503 before the
//! policy source first loaded or when buffered bytes would pass the [`budget`] (with
//! `Retry-After`), 504 past the API server's `?timeout=`. Connections are capped and timed by
//! [`conn`].
//!
//! The server knows no policy source: the composition root ([`crate::app`]) fills the
//! [`AppState`] (snapshot handle, readiness, metrics) and calls [`listen`].

pub mod budget;
pub mod conn;
pub mod metrics;
pub mod pool;
pub mod tls;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use arc_swap::ArcSwap;
use axum::body::{Body, Bytes};
use axum::extract::{Query, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use http_body_util::BodyExt;
use hyper::body::Body as HttpBody;
use tokio::net::TcpListener;
use tokio::sync::{watch, Semaphore};
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;

use crate::admission::{AdmitContext, EvalLimits, Services};
use crate::policy::snapshot::Snapshot;
use metrics::Metrics;

/// `--max-buffered-bytes`'s default: 128 MiB.
pub const DEFAULT_MAX_BUFFERED: usize = 128 << 20;

/// What a refusal for the buffer budget asks the client to wait, in seconds.
const RETRY_AFTER_SECONDS: &str = "1";

/// The frames an answer is handed to the connection in: it asks for more only as it writes,
/// so that the answer's reservation is held until it is about written.
const ANSWER_FRAME: usize = 16 << 10;

/// Limits and timeouts of the service.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Largest request body; the default fits a 3 MiB object with its old object.
    pub max_body: usize,
    /// Request and answer bytes buffered at once, by all connections ([`budget`]). The
    /// default is a quarter of the chart's 512 MiB memory limit: the rest is for the
    /// snapshot, the parsed reviews and their evaluation (up to `--cel-memory-limit` per
    /// expression on each evaluating thread).
    pub max_buffered: usize,
    /// Bytes of a request head, and of each HTTP/1.1 connection's buffers (see
    /// [`conn::ConnLimits::max_header_bytes`]).
    pub max_header_bytes: usize,
    /// Reviews evaluated at once; more get 429 at once rather than queueing.
    pub max_inflight: usize,
    /// Deadline when the API server sends no `?timeout=`.
    pub default_timeout: Duration,
    /// Time a client has to finish the TLS handshake, to start its first request, to send a
    /// request's headers and body, and to take its answers (the write timeout).
    pub client_timeout: Duration,
    /// Time in-flight requests get to finish on shutdown.
    pub drain_timeout: Duration,
    /// Webhook connections open at once; at the cap the one idle the longest is closed.
    pub max_connections: usize,
    /// Metrics connections open at once.
    pub metrics_max_connections: usize,
    /// A connection without a request for this long is closed. Longer than the API server's
    /// own idle timeout for webhook connections (Go's `IdleConnTimeout`, 90 s), so that the
    /// client closes first and never sends on a connection the server is closing.
    pub idle_timeout: Duration,
    /// Bytes one expression's evaluation may build (and one JSON patch may copy).
    pub memory_per_expression: u64,
    /// How deep a mutation's apply-configuration merge may go.
    pub max_apply_depth: usize,
    /// Evaluation threads at most: one per core runs at a time, the others serve beside slow
    /// evaluations (see [`pool`]).
    pub eval_threads: usize,
    /// How long a review is evaluated on its connection's task before it goes to the pool
    /// (see `evaluate_inline`); zero: every review goes to the pool.
    pub inline_eval_time: Duration,
}

/// The default `--inline-eval-time`: a typical review evaluates in tens of microseconds; one
/// that needs longer than this goes to the pool, so a connection's worker is never held for
/// longer (an async worker should not run this long without yielding; well under a
/// millisecond keeps the others' latency).
pub const DEFAULT_INLINE_EVAL_TIME: Duration = Duration::from_micros(500);

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_body: 16 << 20,
            max_buffered: DEFAULT_MAX_BUFFERED,
            max_header_bytes: 32 << 10,
            max_inflight: 512,
            default_timeout: Duration::from_secs(10),
            client_timeout: Duration::from_secs(10),
            drain_timeout: Duration::from_secs(25),
            max_connections: 1024,
            metrics_max_connections: 16,
            idle_timeout: Duration::from_secs(120),
            memory_per_expression: crate::cel::DEFAULT_MEMORY_LIMIT,
            max_apply_depth: crate::mutating::DEFAULT_MAX_APPLY_DEPTH,
            eval_threads: pool::default_eval_threads(
                std::thread::available_parallelism().map_or(2, |n| n.get()),
                false,
            ),
            inline_eval_time: DEFAULT_INLINE_EVAL_TIME,
        }
    }
}

impl Limits {
    fn connections(&self, max_connections: usize) -> conn::ConnLimits {
        conn::ConnLimits {
            max_connections,
            idle_timeout: self.idle_timeout,
            client_timeout: self.client_timeout,
            drain_timeout: self.drain_timeout,
            max_header_bytes: self.max_header_bytes,
        }
    }
}

/// How reviews are answered.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Answering {
    /// Enforce (the verdict's answer) or observe (always allowed, results recorded only).
    pub mode: crate::review::Mode,
    /// Log each failed or errored result at info level (always in observe mode).
    pub log_results: bool,
}

impl Answering {
    fn logs_results(&self) -> bool {
        self.log_results || self.mode == crate::review::Mode::Observe
    }
}

/// Receives each admission's results when policy reports are written (the cluster's report
/// writer).
pub trait ResultSink: Send + Sync {
    /// A review answered on `snapshot`, traced (see [`crate::review::AnswerOptions::trace`]).
    fn admitted(&self, snapshot: &Snapshot, answer: &crate::review::Answer);
    /// `snapshot` is about to serve: results of policies and bindings it lacks go.
    fn installed(&self, snapshot: &Snapshot);
}

/// What the handlers share.
pub struct AppState {
    pub snapshot: ArcSwap<Snapshot>,
    /// Set once the policy source has loaded.
    pub ready: AtomicBool,
    pub metrics: Metrics,
    pub limits: Limits,
    pub answering: Answering,
    /// Compiled policies kept across reloads.
    pub compiled: crate::policy::snapshot::CompileCache,
    /// The live services evaluations may call (the cluster's authorizer and namespace
    /// lookup); unset: none (a policy folder).
    services: std::sync::OnceLock<Services>,
    /// Where admission results go when policy reports are written; unset: nowhere.
    sink: std::sync::OnceLock<Arc<dyn ResultSink>>,
    inflight: Arc<Semaphore>,
    evaluators: pool::EvalPool,
    /// Request and answer bytes buffered now, within `--max-buffered-bytes`.
    budget: Arc<budget::Budget>,
}

impl AppState {
    pub fn new(limits: Limits, answering: Answering) -> Arc<AppState> {
        Arc::new(AppState {
            snapshot: ArcSwap::from_pointee(Snapshot::default()),
            ready: AtomicBool::new(false),
            metrics: Metrics::new(),
            sink: std::sync::OnceLock::new(),
            inflight: Arc::new(Semaphore::new(limits.max_inflight)),
            evaluators: pool::EvalPool::new(
                std::thread::available_parallelism().map_or(2, |n| n.get()),
                limits.eval_threads,
            ),
            compiled: Default::default(),
            services: std::sync::OnceLock::new(),
            budget: budget::Budget::new(limits.max_buffered),
            limits,
            answering,
        })
    }

    /// Gives evaluations the live services of the cluster; the first call wins.
    pub fn set_services(&self, services: Services) {
        // Set once, at start: a second call would be a wiring bug, and the first services
        // are still valid ones.
        let _ = self.services.set(services);
    }

    /// Sends every answered review's results to `sink` (set once, at start).
    pub fn set_result_sink(&self, sink: Arc<dyn ResultSink>) {
        let _ = self.sink.set(sink);
    }

    /// What one review's evaluation may wait on: the services and a deadline.
    fn admit_context(&self, deadline: Instant) -> AdmitContext<'_> {
        let mut context = AdmitContext::default();
        if let Some(services) = self.services.get() {
            context.services = services;
        }
        context.limits = EvalLimits {
            deadline: Some(deadline),
            memory_per_expression: self.limits.memory_per_expression,
            max_apply_depth: self.limits.max_apply_depth,
        };
        context
    }

    /// Installs a new snapshot, atomically, and marks the service ready.
    pub fn install(&self, snapshot: Snapshot) {
        if let Some(sink) = self.sink.get() {
            sink.installed(&snapshot);
        }
        self.metrics.policies.set(snapshot.policies.len() as i64);
        self.metrics
            .mutating_policies
            .set(snapshot.mutating.len() as i64);
        self.metrics.mutating_bindings.set(
            snapshot
                .mutating
                .iter()
                .map(|p| p.bindings.len() as i64)
                .sum(),
        );
        self.metrics.bindings.set(
            snapshot
                .policies
                .iter()
                .map(|p| p.bindings.len() as i64)
                .sum(),
        );
        let errors = snapshot
            .policies
            .iter()
            .map(|p| p.policy.compile_errors() as i64)
            .sum::<i64>()
            + snapshot
                .policies
                .iter()
                .flat_map(|p| &p.bindings)
                .filter(|b| b.invalid.is_some())
                .count() as i64;
        self.metrics.compile_errors.set(errors);
        self.metrics.snapshot_built(SystemTime::now());
        self.snapshot.store(Arc::new(snapshot));
        self.ready.store(true, Ordering::Release);
    }
}

/// The webhook's routes.
pub fn router(state: Arc<AppState>) -> Router {
    Router::new()
        .route("/validate", post(validate))
        .route("/mutate", post(mutate))
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .with_state(state)
}

/// The metrics listener's routes.
pub fn metrics_router(state: Arc<AppState>) -> Router {
    Router::new()
        .route("/metrics", get(metrics_text))
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .with_state(state)
}

async fn readyz(State(s): State<Arc<AppState>>) -> Response {
    if s.ready.load(Ordering::Acquire) {
        (StatusCode::OK, "ok").into_response()
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            "the policy source has not loaded yet",
        )
            .into_response()
    }
}

async fn metrics_text(State(s): State<Arc<AppState>>) -> Response {
    s.metrics
        .buffered_bytes
        .set(i64::try_from(s.budget.used()).unwrap_or(i64::MAX));
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        s.metrics.encode(),
    )
        .into_response()
}

fn refuse(s: &AppState, status: StatusCode, reason: &'static str, message: String) -> Response {
    debug_assert!(
        metrics::REFUSAL_REASONS.contains(&reason),
        "{reason} is not in REFUSAL_REASONS"
    );
    s.metrics.bad_requests.with_label_values(&[reason]).inc();
    // No field is called `message`: the JSON log already has the event's message under that
    // key, and would repeat it.
    // A body cut short is a client that went away (the API server cancelling at its own
    // deadline, a load generator stopping): counted, but not worth a warning each.
    if reason == "body" {
        tracing::debug!(reason, answer = %message, "refused request");
    } else {
        tracing::warn!(reason, answer = %message, "refused request");
    }
    (status, message).into_response()
}

/// The API server's `?timeout=10s` (Go duration), or the default.
fn deadline(query: &std::collections::HashMap<String, String>, default: Duration) -> Duration {
    query
        .get("timeout")
        .and_then(|t| crate::apimachinery::duration::parse_go_duration(t))
        .filter(|n| *n > 0)
        .map_or(default, |n| Duration::from_nanos(n as u64))
}

/// Which webhook a review was sent to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// `/validate`: ValidatingAdmissionPolicies.
    Validating,
    /// `/mutate`: MutatingAdmissionPolicies.
    Mutating,
}

/// A review answered by either webhook.
enum Answered {
    Validating(crate::review::Answer),
    Mutating(crate::review::MutatingAnswer),
}

impl Answered {
    /// The answer's bytes (taken out of it): the validating answer comes encoded; the
    /// mutating one is encoded here.
    fn take_body(&mut self) -> Result<Vec<u8>, serde_json::Error> {
        match self {
            Answered::Validating(a) => Ok(std::mem::take(&mut a.body)),
            Answered::Mutating(a) => serde_json::to_vec(&a.review),
        }
    }

    fn operation(&self) -> &str {
        match self {
            Answered::Validating(a) => &a.operation,
            Answered::Mutating(a) => &a.operation,
        }
    }

    fn timed_out(&self) -> bool {
        match self {
            Answered::Validating(a) => a.verdict.timed_out,
            Answered::Mutating(a) => a.verdict.timed_out,
        }
    }

    fn allowed(&self) -> bool {
        match self {
            Answered::Validating(a) => a.verdict.allowed(),
            Answered::Mutating(a) => a.verdict.allowed(),
        }
    }

    /// The check metrics of what was evaluated.
    fn record(&self, metrics: &metrics::Metrics) {
        match self {
            Answered::Validating(a) => metrics.record(&a.verdict.checks, &a.operation),
            Answered::Mutating(a) => metrics.record_mutations(&a.verdict.checks),
        }
    }

    /// Logs a denial at debug level (not in observe mode, where nothing is denied): under
    /// load one line per denied review was a sixth of the CPU of a denial and hundreds of MB
    /// of log an hour; `celgate_requests_total{decision="denied"}` counts them, and
    /// `--log-results` logs each failed result at info level.
    fn log_denial(&self) {
        let (policy, binding, message) = match self {
            Answered::Validating(a) => match a.verdict.denials.first() {
                Some(d) => (
                    d.policy.as_str(),
                    d.binding.as_deref().unwrap_or(""),
                    d.message.as_str(),
                ),
                None => return,
            },
            Answered::Mutating(a) => match &a.verdict.denial {
                Some(d) => ("", "", d.message.as_str()),
                None => return,
            },
        };
        let (uid, operation) = match self {
            Answered::Validating(a) => (&a.uid, &a.operation),
            Answered::Mutating(a) => (&a.uid, &a.operation),
        };
        tracing::debug!(
            uid = %Clipped(uid),
            operation = %operation,
            policy = %policy,
            binding = binding,
            denial = %message,
            "request denied"
        );
    }
}

async fn validate(
    State(s): State<Arc<AppState>>,
    query: Query<std::collections::HashMap<String, String>>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    serve_review(s, query, headers, body, Phase::Validating).await
}

async fn mutate(
    State(s): State<Arc<AppState>>,
    query: Query<std::collections::HashMap<String, String>>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    serve_review(s, query, headers, body, Phase::Mutating).await
}

/// One AdmissionReview at either webhook, with the same limits: readiness, content type,
/// body size and read time, the buffer budget, the in-flight bound, the evaluation pool
/// and the request's deadline.
async fn serve_review(
    s: Arc<AppState>,
    Query(query): Query<std::collections::HashMap<String, String>>,
    headers: HeaderMap,
    body: Body,
    phase: Phase,
) -> Response {
    let started = Instant::now();
    // The API server gives up at its `?timeout=`, counted from when it sent the request.
    let timeout = deadline(&query, s.limits.default_timeout);
    let deadline_at = started
        .checked_add(timeout)
        .unwrap_or(started + s.limits.default_timeout);
    // Before the first complete snapshot there is nothing to enforce yet: answering "allowed"
    // would let everything through. A 503 makes the API server apply the webhook's own
    // failurePolicy (the readiness probe normally keeps requests away until then).
    if !s.ready.load(Ordering::Acquire) {
        drain(&s, body);
        return refuse(
            &s,
            StatusCode::SERVICE_UNAVAILABLE,
            "not_ready",
            "not yet ready to handle request".into(),
        );
    }
    let json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.split(';')
                .next()
                .is_some_and(|t| t.trim().eq_ignore_ascii_case("application/json"))
        });
    if !json {
        drain(&s, body);
        return refuse(
            &s,
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "content_type",
            "an AdmissionReview must be sent as application/json".into(),
        );
    }
    let limit = s.limits.max_body;
    let mut body = body;
    let mut reservation = s.budget.reservation();
    let read = read_body(&mut body, limit, &mut reservation);
    let bytes: Bytes = match tokio::time::timeout(s.limits.client_timeout, read).await {
        Err(_) => {
            return refuse(
                &s,
                StatusCode::REQUEST_TIMEOUT,
                "slow_client",
                "the request body was not received in time".into(),
            )
        }
        Ok(Err(BodyError::TooLarge)) => {
            drain(&s, body);
            return refuse(
                &s,
                StatusCode::PAYLOAD_TOO_LARGE,
                "too_large",
                format!("the request body exceeds {limit} bytes"),
            );
        }
        Ok(Err(BodyError::Budget)) => {
            drop(reservation);
            drain(&s, body);
            return over_budget(&s);
        }
        Ok(Err(BodyError::Read(e))) => {
            return refuse(
                &s,
                StatusCode::BAD_REQUEST,
                "body",
                format!("cannot read the request body: {e}"),
            )
        }
        Ok(Ok(b)) => b,
    };
    let Ok(permit) = s.inflight.clone().try_acquire_owned() else {
        return refuse(
            &s,
            StatusCode::TOO_MANY_REQUESTS,
            "overloaded",
            "too many reviews in flight".into(),
        );
    };
    let snapshot = s.snapshot.load_full();
    // A cheap review is answered here, on the connection's task: handing it to the pool and
    // back costs more than evaluating it (futex wake-ups on both sides). The try stops at
    // `--inline-eval-time`; a review that needs longer starts over on the pool.
    let finished = match evaluate_inline(&s, &snapshot, &bytes, phase, deadline_at) {
        Some(done) => done,
        None => {
            let state = s.clone();
            let mut work = s.evaluators.spawn(move || {
                // Held while the evaluation runs, past a 504 too: max_inflight bounds the
                // threads really busy.
                let _permit = permit;
                // The body's bytes stay buffered until the evaluation is done with them.
                let _reservation = reservation;
                // Waited in the pool's queue past the deadline: nobody waits for the answer.
                if Instant::now() >= deadline_at {
                    return None;
                }
                let answer = evaluate(&state, &snapshot, &bytes, phase, deadline_at);
                if let Ok(a) = &answer {
                    evaluated(&state, &snapshot, a);
                }
                Some(answer)
            });
            // Until the deadline; meanwhile, once the evaluation has run for SLOW_EVALUATION,
            // it is marked slow so that a spare thread serves the reviews queued behind it.
            let mut check_at = Some(Instant::now() + pool::SLOW_EVALUATION);
            loop {
                let wake = check_at.map_or(deadline_at, |c| c.min(deadline_at));
                match tokio::time::timeout_at(wake.into(), &mut work).await {
                    Ok(done) => break done,
                    Err(_) if wake >= deadline_at => {
                        // The evaluation stops at the deadline too, within a few
                        // milliseconds: its checks and the request are counted when it has.
                        let s2 = s.clone();
                        let elapsed = started.elapsed();
                        tokio::spawn(async move {
                            let operation = match work.await {
                                Ok(Some(Ok(a))) => {
                                    a.record(&s2.metrics);
                                    a.operation().to_string()
                                }
                                _ => String::new(),
                            };
                            s2.metrics.answered(&operation, "timeout", elapsed);
                        });
                        return timed_out(timeout);
                    }
                    Err(_) => check_at = work.check(Instant::now()),
                }
            }
        }
    };
    let mut answer = match finished {
        Err(e) => {
            return refuse(
                &s,
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal",
                format!("evaluation failed: {e}"),
            )
        }
        Ok(None) => {
            s.metrics.answered("", "timeout", started.elapsed());
            return timed_out(timeout);
        }
        Ok(Some(Err(e))) => return refuse(&s, StatusCode::BAD_REQUEST, "malformed", e.to_string()),
        Ok(Some(Ok(a))) => a,
    };
    answer.record(&s.metrics);
    // Stopped at the deadline (the timer had not fired yet): the verdict is incomplete.
    if answer.timed_out() {
        s.metrics
            .answered(answer.operation(), "timeout", started.elapsed());
        return timed_out(timeout);
    }
    // The answer is buffered until written: within the budget, or not sent (and not counted
    // as answered).
    // Encoding a review cannot fail today (string keys, finite numbers); if it ever does, the
    // API server gets an error it applies failurePolicy to, never a 200 with an empty body.
    let body = match answer.take_body() {
        Ok(body) if !body.is_empty() => body,
        Ok(_) => {
            return refuse(
                &s,
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal",
                "cannot encode the answer".to_string(),
            )
        }
        Err(e) => {
            return refuse(
                &s,
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal",
                format!("cannot encode the answer: {e}"),
            )
        }
    };
    let mut reservation = s.budget.reservation();
    if reservation
        .grow_to(body.len(), budget::Share::Whole)
        .is_err()
    {
        return over_budget(&s);
    }
    let body = Body::new(Reserved {
        rest: Bytes::from(body),
        _reservation: reservation,
    });
    // What was answered: in observe mode, always allowed.
    let observing = s.answering.mode == crate::review::Mode::Observe;
    let decision = if observing || answer.allowed() {
        "allowed"
    } else {
        "denied"
    };
    s.metrics
        .answered(answer.operation(), decision, started.elapsed());
    if !observing {
        answer.log_denial();
    }
    ([(header::CONTENT_TYPE, "application/json")], body).into_response()
}

/// What the pool's answer may be: lost (the evaluation panicked), none (it waited past the
/// deadline), or the review's answer or why it could not be read.
type Finished = Result<Option<Result<Answered, crate::review::ReviewError>>, pool::Lost>;

/// Tries `bytes` on the calling task, for at most `--inline-eval-time`: the finished
/// evaluation, or `None` when it needs longer (or may wait on the API server), for the pool.
///
/// Every guarantee of the pool holds: the try stops by the request's deadline (sooner: its
/// own end), a panic loses only this review's answer (500), and since it stops at its end
/// (every loop over the input watches it) a costly review holds the connection's worker for
/// that long at most before it goes to the pool, so slow reviews cannot starve the runtime.
/// Evaluations that may call the API server (the cluster's namespace lookup, authorizer) are
/// not tried here: a wait on the network would block the worker.
fn evaluate_inline(
    s: &AppState,
    snapshot: &Snapshot,
    bytes: &[u8],
    phase: Phase,
    deadline_at: Instant,
) -> Option<Finished> {
    let budget = s.limits.inline_eval_time;
    if budget.is_zero() || s.services.get().is_some_and(Services::may_wait) {
        return None;
    }
    let stop_at = Instant::now().checked_add(budget)?;
    if stop_at >= deadline_at {
        return None;
    }
    let tried = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        evaluate(s, snapshot, bytes, phase, stop_at)
    }));
    match tried {
        // Stopped at the try's end: nothing of it is counted; the pool starts over.
        Ok(Ok(a)) if a.timed_out() => None,
        Ok(answer) => {
            if let Ok(a) = &answer {
                evaluated(s, snapshot, a);
            }
            Some(Ok(Some(answer)))
        }
        Err(_) => Some(Err(pool::Lost)),
    }
}

/// One review's evaluation on `snapshot`, stopped at `stop_at`.
fn evaluate(
    state: &AppState,
    snapshot: &Snapshot,
    bytes: &[u8],
    phase: Phase,
    stop_at: Instant,
) -> Result<Answered, crate::review::ReviewError> {
    let context = state.admit_context(stop_at);
    if phase == Phase::Mutating {
        let observing = state.answering.mode == crate::review::Mode::Observe;
        return crate::review::answer_mutating(snapshot, bytes, &context)
            .map(|a| if observing { a.observed() } else { a })
            .map(Answered::Mutating);
    }
    let options = crate::review::AnswerOptions {
        mode: state.answering.mode,
        trace: state.sink.get().is_some(),
    };
    crate::review::answer(snapshot, bytes, &context, options).map(Answered::Validating)
}

/// Reports a validating answer's results: the result metrics, the result log lines, the
/// sink.
fn evaluated(state: &AppState, snapshot: &Snapshot, answer: &Answered) {
    let Answered::Validating(a) = answer else {
        return;
    };
    // Counted on the snapshot the verdict was reached on: its indices name its policies and
    // bindings.
    state.metrics.results(
        snapshot,
        &a.verdict.evaluated,
        metrics::ResultSource::Admission,
    );
    if state.answering.logs_results() {
        log_results(snapshot, a);
    }
    // A timed-out verdict is incomplete: not a result to report.
    if let Some(sink) = state.sink.get().filter(|_| !a.verdict.timed_out) {
        sink.admitted(snapshot, a);
    }
}

/// 503 with `Retry-After`: buffering the request or its answer would pass
/// `--max-buffered-bytes` (counted as `celgate_bad_requests_total{reason="buffer_budget"}`).
fn over_budget(s: &AppState) -> Response {
    let mut r = refuse(
        s,
        StatusCode::SERVICE_UNAVAILABLE,
        "buffer_budget",
        "too many bytes buffered for other requests; retry".into(),
    );
    r.headers_mut().insert(
        header::RETRY_AFTER,
        header::HeaderValue::from_static(RETRY_AFTER_SECONDS),
    );
    r
}

/// An answer's bytes and their reservation, held until the connection has taken the last
/// frame (and so has written all but its own buffer of them).
struct Reserved {
    rest: Bytes,
    _reservation: budget::Reservation,
}

impl HttpBody for Reserved {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Bytes>, Self::Error>>> {
        let this = self.get_mut();
        if this.rest.is_empty() {
            return std::task::Poll::Ready(None);
        }
        let frame = this.rest.split_to(this.rest.len().min(ANSWER_FRAME));
        std::task::Poll::Ready(Some(Ok(hyper::body::Frame::data(frame))))
    }

    fn is_end_stream(&self) -> bool {
        self.rest.is_empty()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        hyper::body::SizeHint::with_exact(self.rest.len() as u64)
    }
}

/// A request string in a log line: at most [`crate::review::encode::MAX_ECHOED`] bytes, then
/// how many more there were, so that a client cannot write megabyte log lines.
struct Clipped<'a>(&'a str);

impl std::fmt::Display for Clipped<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kept = crate::review::encode::cut_bytes(self.0, crate::review::encode::MAX_ECHOED);
        f.write_str(kept)?;
        match self.0.len() - kept.len() {
            0 => Ok(()),
            more => write!(f, "... ({more} more bytes)"),
        }
    }
}

/// One info line per failed or errored (policy, binding) result of a review, for log
/// pipelines (with `--log-format json`, one JSON object each).
fn log_results(snapshot: &Snapshot, answer: &crate::review::Answer) {
    let Some(subject) = &answer.subject else {
        return;
    };
    let verdict = &answer.verdict;
    for (i, e) in verdict.evaluated.iter().enumerate() {
        if e.result < crate::admission::PolicyResult::Fail || verdict.evaluated[..i].contains(e) {
            continue;
        }
        let Some(entry) = snapshot.policies.get(e.policy) else {
            continue;
        };
        let Some(binding) = entry.bindings.get(e.binding) else {
            continue;
        };
        let (policy, name) = (entry.policy.name.as_str(), binding.name.as_str());
        tracing::info!(
            uid = %Clipped(&answer.uid),
            operation = %answer.operation,
            resource = %Clipped(&subject.resource),
            namespace = %Clipped(&subject.namespace),
            name = %Clipped(&subject.name),
            policy,
            binding = name,
            actions = %binding.action_names.join(","),
            result = e.result.label(),
            failure = failure_message(verdict, policy, name),
            "policy result"
        );
    }
}

/// The message of a (policy, binding)'s failure: its denial, audited failure or warning, in
/// that order (a policy-level configuration error is a denial without a binding).
fn failure_message<'v>(
    verdict: &'v crate::admission::AdmissionVerdict,
    policy: &str,
    binding: &str,
) -> &'v str {
    let denial = |b: Option<&str>| {
        verdict
            .denials
            .iter()
            .find(|d| d.policy == policy && d.binding.as_deref() == b)
            .map(|d| d.message.as_str())
    };
    let warning = || {
        let prefix = format!(
            "Validation failed for ValidatingAdmissionPolicy '{policy}' with binding '{binding}': "
        );
        verdict
            .warnings
            .iter()
            .find_map(|w| w.strip_prefix(&prefix))
    };
    denial(Some(binding))
        .or_else(|| {
            verdict
                .audited
                .iter()
                .find(|a| a.policy == policy && a.binding == binding)
                .map(|a| a.message.as_str())
        })
        .or_else(warning)
        .or_else(|| denial(None))
        .unwrap_or("")
}

/// Why a request body was not read whole.
enum BodyError {
    /// It is longer than the limit (what was read of it is gone; the rest is not read).
    TooLarge,
    /// Buffering more of it would pass `--max-buffered-bytes` (what was read of it is gone).
    Budget,
    /// The client went away or broke the framing.
    Read(axum::Error),
}

/// Holds `total` bytes of a request body in `reservation`: its first [`budget::SMALL_REQUEST`]
/// bytes from the whole budget, more from the bulk share.
fn reserve_body(reservation: &mut budget::Reservation, total: usize) -> Result<(), BodyError> {
    let share = if total <= budget::SMALL_REQUEST {
        budget::Share::Whole
    } else {
        budget::Share::Bulk
    };
    reservation
        .grow_to(total, share)
        .map_err(|_| BodyError::Budget)
}

/// Reads a request body of at most `limit` bytes, reserving every byte in `reservation`
/// before it is buffered. A body that arrives in one frame (the usual case) is kept as it
/// came, without a copy.
async fn read_body(
    body: &mut Body,
    limit: usize,
    reservation: &mut budget::Reservation,
) -> Result<Bytes, BodyError> {
    let mut first: Option<Bytes> = None;
    let mut more: Option<Vec<u8>> = None;
    let mut total = 0usize;
    while let Some(frame) = body.frame().await {
        let Ok(data) = frame.map_err(BodyError::Read)?.into_data() else {
            continue; // trailers: not part of the review
        };
        total = total.saturating_add(data.len());
        if total > limit {
            return Err(BodyError::TooLarge);
        }
        match (&mut first, &mut more) {
            (None, _) => {
                reserve_body(reservation, total)?;
                first = Some(data);
            }
            (Some(head), None) => {
                // The declared length is reserved up front, as it is allocated.
                let hint = usize::try_from(HttpBody::size_hint(&*body).lower()).unwrap_or(0);
                let capacity = total.saturating_add(hint).min(limit);
                reserve_body(reservation, capacity)?;
                let mut buf = Vec::with_capacity(capacity);
                buf.extend_from_slice(head);
                buf.extend_from_slice(&data);
                more = Some(buf);
            }
            (Some(_), Some(buf)) => {
                if total > buf.capacity() {
                    // Doubling, as Vec would, but reserved first.
                    let capacity = total.max(buf.capacity().saturating_mul(2)).min(limit);
                    reserve_body(reservation, capacity)?;
                    buf.reserve_exact(capacity - buf.len());
                }
                buf.extend_from_slice(&data);
            }
        }
    }
    Ok(match (first, more) {
        (_, Some(buf)) => Bytes::from(buf),
        (Some(b), None) => b,
        (None, None) => Bytes::new(),
    })
}

/// Reads and discards what is left of a refused request's body, in the background, up to
/// `--max-body-bytes` more bytes and for at most `--client-timeout`, so that the answer
/// sent before the body was read ends the exchange cleanly. Dropping the body instead makes
/// HTTP/2 reset the stream while the client is still sending (RST_STREAM NO_ERROR, which
/// RFC 9113 allows but curl and other clients report as a stream error without showing the
/// answer), and HTTP/1.1 close the connection. Past either bound the body is dropped.
fn drain(s: &AppState, mut body: Body) {
    if HttpBody::is_end_stream(&body) {
        return;
    }
    let (cap, time) = (s.limits.max_body, s.limits.client_timeout);
    tokio::spawn(async move {
        let mut left = cap;
        let discard = async {
            while let Some(Ok(frame)) = body.frame().await {
                let len = frame.data_ref().map_or(0, Bytes::len);
                match left.checked_sub(len) {
                    Some(l) => left = l,
                    None => return,
                }
            }
        };
        let _ = tokio::time::timeout(time, discard).await;
    });
}

/// 504: no decision by the deadline (counted as the `timeout` decision of
/// `celgate_requests_total`).
fn timed_out(timeout: Duration) -> Response {
    let message = format!("no decision within {timeout:?}");
    tracing::warn!(answer = %message, "request timed out");
    (StatusCode::GATEWAY_TIMEOUT, message).into_response()
}

/// Serves `app` over TLS on `listener` until `shutdown` turns true, then stops accepting and
/// lets in-flight requests finish (up to the drain timeout). HTTP/2 when the client picked it
/// by ALPN, else HTTP/1.1.
pub async fn serve_tls(
    listener: TcpListener,
    tls: Arc<rustls::ServerConfig>,
    app: Router,
    limits: Limits,
    shutdown: watch::Receiver<bool>,
) {
    let acceptor = TlsAcceptor::from(tls);
    let handshake = move |tcp| {
        let accept = acceptor.accept(tcp);
        async move {
            let stream = accept.await?;
            let protocol = if stream.get_ref().1.alpn_protocol() == Some(b"h2") {
                conn::Protocol::Http2
            } else {
                conn::Protocol::Http1
            };
            Ok((stream, protocol))
        }
    };
    let limits = limits.connections(limits.max_connections);
    conn::serve(listener, handshake, app, limits, "webhook", shutdown).await;
}

/// Serves plain HTTP/1.1 (the metrics port) until `shutdown` turns true.
pub async fn serve_plain(
    listener: TcpListener,
    app: Router,
    limits: Limits,
    shutdown: watch::Receiver<bool>,
) {
    let handshake = |tcp| std::future::ready(Ok((tcp, conn::Protocol::Http1)));
    let limits = limits.connections(limits.metrics_max_connections);
    conn::serve(listener, handshake, app, limits, "metrics", shutdown).await;
}

/// Where the listeners are bound (port 0 picks a free port, for tests).
#[derive(Debug, Clone, Copy)]
pub struct Bound {
    pub webhook: SocketAddr,
    pub metrics: Option<SocketAddr>,
}

/// Why the listeners could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// The webhook or metrics address cannot be bound (in use, not local, no permission).
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    /// The bound webhook socket has no local address (should not happen once bound).
    #[error("{0}")]
    LocalAddr(#[source] std::io::Error),
}

/// Where to listen.
#[derive(Debug, Clone)]
pub struct Listen {
    /// The webhook's HTTPS address.
    pub webhook: SocketAddr,
    /// The plain-HTTP metrics address; `None`: no metrics listener.
    pub metrics: Option<SocketAddr>,
}

/// Binds both listeners and serves `state` on them until `shutdown` turns true; returns where
/// they are bound and their tasks (which end once in-flight requests are done).
pub async fn listen(
    state: &Arc<AppState>,
    tls: Arc<rustls::ServerConfig>,
    at: &Listen,
    shutdown: watch::Receiver<bool>,
) -> Result<(Bound, Vec<JoinHandle<()>>), ServerError> {
    let bind = |addr: SocketAddr| async move {
        TcpListener::bind(addr)
            .await
            .map_err(|source| ServerError::Bind { addr, source })
    };
    let listener = bind(at.webhook).await?;
    let webhook = listener.local_addr().map_err(ServerError::LocalAddr)?;
    let metrics_listener = match at.metrics {
        Some(addr) => Some(bind(addr).await?),
        None => None,
    };
    let metrics = metrics_listener.as_ref().and_then(|l| l.local_addr().ok());
    let limits = state.limits.clone();
    let mut tasks = vec![tokio::spawn(serve_tls(
        listener,
        tls,
        router(state.clone()),
        limits.clone(),
        shutdown.clone(),
    ))];
    if let Some(l) = metrics_listener {
        tasks.push(tokio::spawn(serve_plain(
            l,
            metrics_router(state.clone()),
            limits,
            shutdown,
        )));
    }
    Ok((Bound { webhook, metrics }, tasks))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Binding, Policy};
    use crate::policy::snapshot::SnapshotBuilder;
    use serde_json::json;

    /// A policy denying configmaps with `data.debug`, bound twice (Deny, Warn); a second
    /// policy whose matchConditions exclude everything.
    pub(crate) fn snapshot() -> Snapshot {
        let mut b = SnapshotBuilder::new();
        let policy = |name: &str, condition: &str| {
            serde_json::from_value::<Policy>(json!({
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "ValidatingAdmissionPolicy",
                "metadata": {"name": name},
                "spec": {
                    "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["configmaps"]}]},
                    "matchConditions": [{"name": "c", "expression": condition}],
                    "validations": [{"expression": "!has(object.data) || !('debug' in object.data)", "message": "no debug configmaps"}]
                }
            }))
            .unwrap()
        };
        let binding = |name: &str, policy: &str, action: &str| {
            serde_json::from_value::<Binding>(json!({
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "ValidatingAdmissionPolicyBinding",
                "metadata": {"name": name},
                "spec": {"policyName": policy, "validationActions": [action]}
            }))
            .unwrap()
        };
        b.add_policy(policy("no-debug", "true"));
        b.add_policy(policy("never", "false"));
        b.add_binding(binding("no-debug", "no-debug", "Deny"));
        b.add_binding(binding("no-debug-warn", "no-debug", "Warn"));
        b.add_binding(binding("never", "never", "Deny"));
        b.add_object(Arc::new(
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}}),
        ));
        b.build(crate::cel::NEWEST_MINOR)
    }

    pub(crate) fn review(data: serde_json::Value) -> Vec<u8> {
        serde_json::to_vec(&json!({
            "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {
                "uid": "u-1", "kind": {"group": "", "version": "v1", "kind": "ConfigMap"},
                "resource": {"group": "", "version": "v1", "resource": "configmaps"},
                "name": "cm", "namespace": "default", "operation": "CREATE",
                "userInfo": {"username": "alice"},
                "object": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm", "namespace": "default"}, "data": data},
                "oldObject": null
            }
        }))
        .unwrap()
    }

    /// A snapshot whose one policy runs 10,000 comprehension steps on every configmap.
    fn costly_snapshot() -> Snapshot {
        let list = (1..=100)
            .map(|i| i.to_string())
            .collect::<Vec<_>>()
            .join(",");
        let mut b = SnapshotBuilder::new();
        b.add_policy(
            serde_json::from_value::<Policy>(json!({
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "ValidatingAdmissionPolicy",
                "metadata": {"name": "costly"},
                "spec": {
                    "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["configmaps"]}]},
                    "validations": [{"expression": format!("[{list}].all(a, [{list}].all(b, a * b > 0))")}]
                }
            }))
            .unwrap(),
        );
        b.add_binding(
            serde_json::from_value::<Binding>(json!({
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "ValidatingAdmissionPolicyBinding",
                "metadata": {"name": "costly"},
                "spec": {"policyName": "costly", "validationActions": ["Deny"]}
            }))
            .unwrap(),
        );
        b.build(crate::cel::NEWEST_MINOR)
    }

    fn state_with(snapshot: Snapshot, inline_eval_time: Duration) -> Arc<AppState> {
        let limits = Limits {
            inline_eval_time,
            eval_threads: 2,
            ..Limits::default()
        };
        let state = AppState::new(limits, Answering::default());
        state.install(snapshot);
        state
    }

    fn allowed(done: Option<Finished>) -> Option<bool> {
        match done {
            Some(Ok(Some(Ok(a)))) => Some(a.allowed()),
            Some(_) => panic!("not an answer"),
            None => None,
        }
    }

    /// `--inline-eval-time`: a review done within it is answered on the calling task; one
    /// that needs longer is not (its partial verdict is dropped, nothing counted), and 0s
    /// sends every review to the pool.
    #[test]
    fn cheap_reviews_are_answered_inline_and_costly_ones_go_to_the_pool() {
        let later = Instant::now() + Duration::from_secs(60);
        // A loaded machine may preempt a try past its end (then it goes to the pool): whether
        // `body` was allowed the first time one of 100 tries answered inline.
        let tried_inline = |state: &AppState, snap: &Snapshot, body: &[u8]| {
            (0..100)
                .find_map(|_| allowed(evaluate_inline(state, snap, body, Phase::Validating, later)))
        };
        let state = state_with(snapshot(), DEFAULT_INLINE_EVAL_TIME);
        let snap = state.snapshot.load_full();
        let deny = review(json!({"debug": "1"}));
        let tried = tried_inline(&state, &snap, &deny);
        assert_eq!(tried, Some(false), "never answered inline");
        // Past the try's end (1 ns): the costly review is not answered inline, and none of
        // its checks is counted.
        let state = state_with(costly_snapshot(), Duration::from_nanos(1));
        let snap = state.snapshot.load_full();
        let body = review(json!({"ok": "1"}));
        assert!(evaluate_inline(&state, &snap, &body, Phase::Validating, later).is_none());
        assert!(
            !String::from_utf8_lossy(&state.metrics.encode()).contains("policy=\"costly\""),
            "the dropped try was counted"
        );
        // Off: nothing is tried inline.
        let state = state_with(snapshot(), Duration::ZERO);
        let snap = state.snapshot.load_full();
        assert!(evaluate_inline(&state, &snap, &deny, Phase::Validating, later).is_none());
        // Services answering from memory (a folder's bare namespaces) allow it; a lookup
        // that may wait on the API server does not.
        let state = state_with(snapshot(), DEFAULT_INLINE_EVAL_TIME);
        state.set_services(Services {
            authorizer: None,
            namespace_lookup: Some(Arc::new(crate::admission::bare::BareNamespaces::default())),
        });
        let snap = state.snapshot.load_full();
        let tried = tried_inline(&state, &snap, &deny);
        assert_eq!(
            tried,
            Some(false),
            "never answered inline beside bare namespaces"
        );
        #[derive(Debug)]
        struct Live;
        impl crate::admission::NamespaceLookup for Live {
            fn get(&self, _: &str) -> Option<serde_json::Value> {
                None
            }
        }
        let state = state_with(snapshot(), DEFAULT_INLINE_EVAL_TIME);
        state.set_services(Services {
            authorizer: None,
            namespace_lookup: Some(Arc::new(Live)),
        });
        let snap = state.snapshot.load_full();
        assert!(evaluate_inline(&state, &snap, &deny, Phase::Validating, later).is_none());
        // A try that would end past the request's deadline is left to the pool.
        let state = state_with(snapshot(), DEFAULT_INLINE_EVAL_TIME);
        let snap = state.snapshot.load_full();
        let soon = Instant::now() + Duration::from_micros(1);
        assert!(evaluate_inline(&state, &snap, &deny, Phase::Validating, soon).is_none());
    }

    /// A review too costly for the inline try is answered by the pool, whole.
    #[test]
    fn a_costly_review_is_answered_by_the_pool() {
        let state = state_with(costly_snapshot(), Duration::from_nanos(1));
        let mut headers = HeaderMap::new();
        headers.insert(
            header::CONTENT_TYPE,
            header::HeaderValue::from_static("application/json"),
        );
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let response = runtime.block_on(serve_review(
            state.clone(),
            Query(Default::default()),
            headers,
            Body::from(review(json!({"ok": "1"}))),
            Phase::Validating,
        ));
        assert_eq!(response.status(), StatusCode::OK);
        let body = runtime
            .block_on(response.into_body().collect())
            .unwrap()
            .to_bytes();
        let answer: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(answer["response"]["allowed"], true, "{answer}");
    }

    /// Writes log lines into a shared buffer.
    #[derive(Clone, Default)]
    struct Buffer(Arc<std::sync::Mutex<Vec<u8>>>);

    impl std::io::Write for Buffer {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// A denial is logged at debug level only (counted by `celgate_requests_total`).
    #[test]
    fn denials_are_logged_at_debug_level() {
        let snap = snapshot();
        let denied = crate::review::answer(
            &snap,
            &review(json!({"debug": "1"})),
            &AdmitContext::default(),
            Default::default(),
        )
        .unwrap();
        let denied = Answered::Validating(denied);
        assert!(!denied.allowed());
        let logged = |level| {
            let buffer = Buffer::default();
            let writer = buffer.clone();
            let subscriber = tracing_subscriber::fmt()
                .with_max_level(level)
                .with_writer(move || writer.clone())
                .finish();
            tracing::subscriber::with_default(subscriber, || denied.log_denial());
            let text = String::from_utf8(buffer.0.lock().unwrap().clone()).unwrap();
            text
        };
        assert_eq!(logged(tracing::Level::INFO), "");
        let debug = logged(tracing::Level::DEBUG);
        assert!(
            debug.contains("request denied") && debug.contains("no debug configmaps"),
            "{debug}"
        );
    }

    #[test]
    fn one_json_line_per_failing_result() {
        let snap = snapshot();
        let context = AdmitContext::default();
        let observe = crate::review::AnswerOptions {
            mode: crate::review::Mode::Observe,
            ..Default::default()
        };
        let failing =
            crate::review::answer(&snap, &review(json!({"debug": "1"})), &context, observe)
                .unwrap();
        let passing =
            crate::review::answer(&snap, &review(json!({"ok": "1"})), &context, observe).unwrap();
        assert!(
            passing.subject.is_none(),
            "nothing copied for a review that passed"
        );
        let buffer = Buffer::default();
        let writer = buffer.clone();
        let subscriber = tracing_subscriber::fmt()
            .json()
            .with_writer(move || writer.clone())
            .finish();
        tracing::subscriber::with_default(subscriber, || {
            log_results(&snap, &failing);
            log_results(&snap, &passing);
        });
        let text = String::from_utf8(buffer.0.lock().unwrap().clone()).unwrap();
        let lines: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 2, "{text}");
        let fields: Vec<_> = lines.iter().map(|l| l["fields"].clone()).collect();
        assert_eq!(lines[0]["level"], "INFO");
        assert_eq!(fields[0]["message"], "policy result");
        assert_eq!(fields[0]["uid"], "u-1");
        assert_eq!(fields[0]["operation"], "CREATE");
        assert_eq!(fields[0]["resource"], "configmaps");
        assert_eq!(fields[0]["namespace"], "default");
        assert_eq!(fields[0]["name"], "cm");
        assert_eq!(fields[0]["policy"], "no-debug");
        assert_eq!(fields[0]["binding"], "no-debug");
        assert_eq!(fields[0]["actions"], "Deny");
        assert_eq!(fields[0]["result"], "fail");
        assert_eq!(
            fields[0]["failure"],
            "ValidatingAdmissionPolicy 'no-debug' with binding 'no-debug' denied request: no debug configmaps"
        );
        assert_eq!(fields[1]["binding"], "no-debug-warn");
        assert_eq!(fields[1]["actions"], "Warn");
        assert_eq!(fields[1]["failure"], "no debug configmaps");
    }

    #[test]
    fn results_are_counted_by_policy_binding_action_result_and_source() {
        let snap = snapshot();
        let metrics = Metrics::new();
        let context = AdmitContext::default();
        for data in [
            json!({"debug": "1"}),
            json!({"ok": "1"}),
            json!({"ok": "2"}),
        ] {
            let a =
                crate::review::answer(&snap, &review(data), &context, Default::default()).unwrap();
            metrics.results(
                &snap,
                &a.verdict.evaluated,
                metrics::ResultSource::Admission,
            );
        }
        let a = crate::review::answer(
            &snap,
            &review(json!({"debug": "1"})),
            &context,
            Default::default(),
        )
        .unwrap();
        metrics.results(&snap, &a.verdict.evaluated, metrics::ResultSource::Scan);
        let text = String::from_utf8(metrics.encode()).unwrap();
        let count = |labels: &str| {
            let prefix = format!("celgate_policy_results_total{{{labels}}} ");
            text.lines()
                .find_map(|l| l.strip_prefix(&prefix))
                .unwrap_or_else(|| panic!("no {prefix} in {text}"))
                .to_string()
        };
        assert_eq!(
            count(
                r#"action="deny",binding="no-debug",policy="no-debug",result="fail",source="admission""#
            ),
            "1"
        );
        assert_eq!(
            count(
                r#"action="deny",binding="no-debug",policy="no-debug",result="pass",source="admission""#
            ),
            "2"
        );
        assert_eq!(
            count(
                r#"action="warn",binding="no-debug-warn",policy="no-debug",result="fail",source="admission""#
            ),
            "1"
        );
        assert_eq!(
            count(
                r#"action="deny",binding="never",policy="never",result="skip",source="admission""#
            ),
            "3"
        );
        assert_eq!(
            count(
                r#"action="deny",binding="no-debug",policy="no-debug",result="fail",source="scan""#
            ),
            "1"
        );
        assert!(!text.contains(r#"result="error""#), "{text}");
    }
}
