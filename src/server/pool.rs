//! The evaluation pool: the threads that run reviews' evaluations, off the async workers and
//! with a stack sized for the engine.
//!
//! One thread per core takes jobs from a queue, so a burst of reviews queues instead of
//! multiplying threads that then share the cores by context switches and convoy on the queue's
//! lock (with tokio's blocking pool at four threads per core: a third more CPU per review under
//! load, measured with `perf stat`). A job that has run for [`SLOW_EVALUATION`] no longer
//! counts against the cores: the server marks it slow ([`Ticket::check`]), and while it runs a
//! spare thread serves the queue, so a few slow reviews (expensive policies, a wait on the API
//! server) never hold up the fast ones behind them. Threads above one per core plus one per
//! slow job leave once they finish their job; the total never exceeds `max_threads`.
//!
//! A job that panics loses its answer (the ticket reports [`Lost`]); its thread goes on.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

/// How long an evaluation keeps its core before the next review may start beside it on a
/// spare thread. Reviews take well under a millisecond; one past this is slow.
pub const SLOW_EVALUATION: Duration = Duration::from_millis(10);

/// Slow evaluations that may each hold a thread while spares serve the queue beside them, by
/// default (`--eval-threads` is this plus one per core). A slow evaluation runs until its
/// deadline at most; its memory is bounded by `--cel-memory-limit` per expression, and in
/// practice small (a slow review is slow by CPU: a long comprehension, a long format); its
/// stack is virtual memory, touched as deep as the expression recurses. 32 slow reviews at
/// once leave the fast ones their cores; past that many, new reviews queue until one ends.
pub const DEFAULT_SLOW_EVALUATIONS: usize = 32;

/// The default `--eval-threads`: one per core for the queue, and [`DEFAULT_SLOW_EVALUATIONS`]
/// spares (twice as many when evaluations may wait on the API server, which is not CPU).
pub fn default_eval_threads(cores: usize, waits_on_api_server: bool) -> usize {
    let spares = if waits_on_api_server {
        2 * DEFAULT_SLOW_EVALUATIONS
    } else {
        DEFAULT_SLOW_EVALUATIONS
    };
    cores.max(1) + spares
}

/// Stack of each evaluation thread: the evaluator recurses once per nesting level of an
/// expression, and the deepest expression the compiler accepts fits.
const STACK: usize = 32 << 20;

/// The job panicked or the pool closed before running it: no answer will come.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the evaluation ended without an answer")]
pub struct Lost;

/// Phases of a job, changed under the pool's lock.
const QUEUED: u8 = 0;
const RUNNING: u8 = 1;
const SLOW: u8 = 2;
const DONE: u8 = 3;

/// What the pool and the waiting request share about one job.
struct JobCell {
    phase: AtomicU8,
    /// When it started running, in microseconds since the pool's epoch.
    started: AtomicU64,
}

struct Job {
    run: Box<dyn FnOnce() + Send>,
    cell: Arc<JobCell>,
}

#[derive(Default)]
struct State {
    queue: VecDeque<Job>,
    threads: usize,
    idle: usize,
    slow: usize,
    closed: bool,
}

struct Shared {
    state: Mutex<State>,
    work: Condvar,
    cores: usize,
    max_threads: usize,
    epoch: Instant,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // Jobs run outside the lock and panics are caught there: a poisoned lock can only
        // come from a panic in this module's own bookkeeping, which leaves consistent counts.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn micros(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_micros()).unwrap_or(u64::MAX)
    }

    /// Threads wanted for the queue as it stands: one per core, one more per slow job.
    fn wanted(&self, s: &State) -> usize {
        (self.cores + s.slow).min(self.max_threads)
    }

    /// Starts a thread when jobs wait, none is idle and fewer run than wanted.
    fn grow(self: &Arc<Self>, s: &mut State) {
        if s.idle == 0 && !s.queue.is_empty() && s.threads < self.wanted(s) {
            let shared = self.clone();
            let started = std::thread::Builder::new()
                .name("celgate-eval".into())
                .stack_size(STACK)
                .spawn(move || shared.serve());
            match started {
                Ok(_) => s.threads += 1,
                // Out of threads or memory: the jobs wait for the threads there are.
                Err(e) => tracing::warn!(error = %e, "cannot start an evaluation thread"),
            }
        } else if s.idle > 0 && !s.queue.is_empty() {
            self.work.notify_one();
        }
    }

    fn serve(self: Arc<Self>) {
        let mut finished: Option<Arc<JobCell>> = None;
        let mut s = self.lock();
        loop {
            if let Some(cell) = finished.take() {
                if cell.phase.swap(DONE, Ordering::Relaxed) == SLOW {
                    s.slow -= 1;
                }
            }
            // A spare started for a slow job that has ended leaves.
            if s.threads > self.wanted(&s) || (s.closed && s.queue.is_empty()) {
                s.threads -= 1;
                return;
            }
            let Some(job) = s.queue.pop_front() else {
                s.idle += 1;
                s = self.work.wait(s).unwrap_or_else(|e| e.into_inner());
                s.idle -= 1;
                continue;
            };
            job.cell.started.store(self.micros(), Ordering::Relaxed);
            job.cell.phase.store(RUNNING, Ordering::Relaxed);
            drop(s);
            // A panic drops the job's answer sender: the request sees `Lost`.
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job.run));
            finished = Some(job.cell);
            s = self.lock();
        }
    }
}

/// The pool; dropping it lets its threads finish the queue and leave.
pub struct EvalPool {
    shared: Arc<Shared>,
}

impl EvalPool {
    /// A pool running `cores` jobs at once (at least 1), on at most `max_threads` threads (at
    /// least `cores`).
    pub fn new(cores: usize, max_threads: usize) -> EvalPool {
        let cores = cores.max(1);
        EvalPool {
            shared: Arc::new(Shared {
                state: Mutex::new(State::default()),
                work: Condvar::new(),
                cores,
                max_threads: max_threads.max(cores),
                epoch: Instant::now(),
            }),
        }
    }

    /// Queues `f`; its answer comes through the ticket.
    pub fn spawn<T: Send + 'static>(&self, f: impl FnOnce() -> T + Send + 'static) -> Ticket<T> {
        let (tx, rx) = oneshot::channel();
        let cell = Arc::new(JobCell {
            phase: AtomicU8::new(QUEUED),
            started: AtomicU64::new(0),
        });
        let job = Job {
            run: Box::new(move || {
                let _ = tx.send(f());
            }),
            cell: cell.clone(),
        };
        let mut s = self.shared.lock();
        s.queue.push_back(job);
        self.shared.grow(&mut s);
        Ticket {
            answer: rx,
            cell,
            shared: self.shared.clone(),
        }
    }
}

impl Drop for EvalPool {
    fn drop(&mut self) {
        self.shared.lock().closed = true;
        self.shared.work.notify_all();
    }
}

/// A queued or running job: await it for the answer.
pub struct Ticket<T> {
    answer: oneshot::Receiver<T>,
    cell: Arc<JobCell>,
    shared: Arc<Shared>,
}

impl<T> Ticket<T> {
    /// Marks the job slow when it has run for [`SLOW_EVALUATION`] (a spare thread then serves
    /// the queue); returns when to check again, `None` once it is marked or done.
    pub fn check(&self, now: Instant) -> Option<Instant> {
        let mut s = self.shared.lock();
        match self.cell.phase.load(Ordering::Relaxed) {
            QUEUED => Some(now + SLOW_EVALUATION),
            RUNNING => {
                let started = self.shared.epoch
                    + Duration::from_micros(self.cell.started.load(Ordering::Relaxed));
                let slow_at = started + SLOW_EVALUATION;
                if now < slow_at {
                    return Some(slow_at);
                }
                self.cell.phase.store(SLOW, Ordering::Relaxed);
                s.slow += 1;
                self.shared.grow(&mut s);
                None
            }
            _ => None,
        }
    }

    /// Threads of the pool, and how many of its jobs are marked slow (for tests).
    #[cfg(test)]
    fn counts(&self) -> (usize, usize) {
        let s = self.shared.lock();
        (s.threads, s.slow)
    }
}

impl<T> std::future::Future for Ticket<T> {
    type Output = Result<T, Lost>;

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        std::pin::Pin::new(&mut self.answer)
            .poll(cx)
            .map(|r| r.map_err(|_| Lost))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    fn block_on<F: std::future::Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime")
            .block_on(f)
    }

    #[test]
    fn jobs_run_one_per_core_and_answer() {
        let pool = EvalPool::new(2, 8);
        let running = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let tickets: Vec<_> = (0..50)
            .map(|i| {
                let (running, most) = (running.clone(), most.clone());
                pool.spawn(move || {
                    let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(now, Ordering::SeqCst);
                    std::thread::sleep(Duration::from_micros(200));
                    running.fetch_sub(1, Ordering::SeqCst);
                    i * 2
                })
            })
            .collect();
        let answers: Vec<usize> = block_on(async {
            let mut out = Vec::new();
            for t in tickets {
                out.push(t.await.expect("an answer"));
            }
            out
        });
        assert_eq!(answers, (0..50).map(|i| i * 2).collect::<Vec<_>>());
        assert!(most.load(Ordering::SeqCst) <= 2, "{most:?} at once");
    }

    #[test]
    fn a_slow_job_lends_its_core_to_a_spare_thread() {
        let pool = EvalPool::new(1, 4);
        let (release, hold) = std::sync::mpsc::channel::<()>();
        let slow = pool.spawn(move || hold.recv().is_ok());
        // Running, not yet slow: the next job queues behind it.
        let started = Instant::now();
        while slow.cell.phase.load(Ordering::Relaxed) != RUNNING {
            assert!(started.elapsed() < Duration::from_secs(10), "never started");
            std::thread::yield_now();
        }
        let fast = pool.spawn(|| 7);
        // Checked as of the moment it started (a loaded machine may be past 10 ms already).
        let began =
            slow.shared.epoch + Duration::from_micros(slow.cell.started.load(Ordering::Relaxed));
        let next = slow.check(began).expect("not slow yet");
        assert_eq!(next, began + SLOW_EVALUATION);
        assert_eq!(slow.counts(), (1, 0));
        // Past SLOW_EVALUATION: marked slow, and a spare serves the queue.
        assert_eq!(slow.check(next + SLOW_EVALUATION), None);
        assert_eq!(slow.counts().1, 1);
        assert_eq!(block_on(fast), Ok(7));
        release.send(()).expect("the slow job waits");
        assert_eq!(block_on(slow), Ok(true));
        // The spare leaves once the slow job is done: one thread per core again.
        let started = Instant::now();
        loop {
            let t = pool.spawn(|| ());
            let (threads, slow) = t.counts();
            block_on(t).expect("an answer");
            if threads == 1 && slow == 0 {
                break;
            }
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "{threads} threads"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    #[test]
    fn a_queued_job_is_not_slow_and_threads_stay_under_the_cap() {
        let pool = EvalPool::new(1, 2);
        let (release, hold) = std::sync::mpsc::channel::<()>();
        let holds = Arc::new(Mutex::new(hold));
        let tickets: Vec<_> = (0..4)
            .map(|_| {
                let holds = holds.clone();
                pool.spawn(move || {
                    let _ = holds.lock().map(|h| h.recv());
                })
            })
            .collect();
        let later = Instant::now() + Duration::from_secs(1);
        for t in &tickets {
            t.check(later);
        }
        let (threads, _) = tickets[0].counts();
        assert!(threads <= 2, "{threads} threads over a cap of 2");
        for _ in 0..4 {
            release.send(()).expect("jobs wait");
        }
        for t in tickets {
            assert_eq!(block_on(t), Ok(()));
        }
    }

    /// Issue 24 item 10: sixteen slow reviews at once (each held on a channel, marked slow as
    /// the server marks them) on a two-core pool of the default size: a normal review still
    /// gets a thread and answers while all sixteen are running.
    #[test]
    fn a_fast_job_is_served_beside_sixteen_slow_ones() {
        let pool = EvalPool::new(2, default_eval_threads(2, false));
        let (release, hold) = std::sync::mpsc::channel::<()>();
        let holds = Arc::new(Mutex::new(hold));
        let running = Arc::new(AtomicUsize::new(0));
        let slow: Vec<_> = (0..16)
            .map(|_| {
                let (holds, running) = (holds.clone(), running.clone());
                pool.spawn(move || {
                    running.fetch_add(1, Ordering::SeqCst);
                    // Each waits for its own release (the lock is held only to take one).
                    loop {
                        let got = holds.lock().map(|h| h.try_recv());
                        match got {
                            Ok(Ok(())) | Ok(Err(std::sync::mpsc::TryRecvError::Disconnected)) => {
                                break
                            }
                            _ => std::thread::sleep(Duration::from_millis(1)),
                        }
                    }
                })
            })
            .collect();
        // Mark the running ones slow (as the server does past SLOW_EVALUATION) until all run.
        let started = Instant::now();
        while running.load(Ordering::SeqCst) < 16 {
            let later = Instant::now() + Duration::from_secs(3600);
            for t in &slow {
                t.check(later);
            }
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "only {} of 16 slow jobs started",
                running.load(Ordering::SeqCst)
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        for t in &slow {
            t.check(Instant::now() + Duration::from_secs(3600));
        }
        let (done, answered) = std::sync::mpsc::channel();
        let _fast = pool.spawn(move || done.send(7).is_ok());
        assert_eq!(
            answered.recv_timeout(Duration::from_secs(30)),
            Ok(7),
            "a normal review waits behind sixteen slow ones"
        );
        for _ in 0..16 {
            release.send(()).expect("the slow jobs wait");
        }
        for t in slow {
            assert_eq!(block_on(t), Ok(()));
        }
    }

    #[test]
    fn a_panicking_job_loses_its_answer_and_the_pool_goes_on() {
        let pool = EvalPool::new(1, 1);
        let lost = pool.spawn(|| -> u8 { panic!("boom") });
        assert_eq!(block_on(lost), Err(Lost));
        assert_eq!(block_on(pool.spawn(|| 3)), Ok(3));
    }
}
