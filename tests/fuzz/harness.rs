//! The fuzz runner: proptest rounds for a bounded count (CI) or for `CELGATE_FUZZ_SECONDS`,
//! shrinking of failures, failing inputs kept as plain files under `tests/fuzz-regressions/`,
//! their replay, and the guards a long run needs: a per-thread allocation meter (with a hard
//! ceiling so that a runaway cannot take the machine), a hang watchdog, and a panic hook that
//! keeps the message and place of panics caught on other threads.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::collections::BTreeMap;
use std::fmt::Debug;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use proptest::strategy::Strategy;
use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestError, TestRng, TestRunner};

/// The evaluation threads' stack in the server (`src/main.rs`): properties run on a thread
/// with this stack, so a stack overflow here is one in production.
pub const EVAL_STACK: usize = 32 << 20;

// ---------------------------------------------------------------------------------------
// Allocation meter.

/// Live bytes the process may hold before its allocations fail (and the process aborts,
/// which `make fuzz` records as a crash): a runaway must not take the machine. Counted for
/// the whole process: a value built on one thread and dropped on another (inputs go to the
/// evaluation thread and back) would make per-thread counts drift over a long run.
const HARD_LIMIT: i64 = 3 << 30;

static PROCESS_LIVE: AtomicI64 = AtomicI64::new(0);

thread_local! {
    static LIVE: Cell<isize> = const { Cell::new(0) };
    static PEAK: Cell<isize> = const { Cell::new(0) };
}

fn grow(n: isize) -> bool {
    let before = PROCESS_LIVE.fetch_add(n as i64, Ordering::Relaxed);
    if n > 0 && before + n as i64 > HARD_LIMIT {
        PROCESS_LIVE.fetch_sub(n as i64, Ordering::Relaxed);
        return false;
    }
    LIVE.try_with(|live| {
        let v = live.get() + n;
        live.set(v);
        let _ = PEAK.try_with(|p| {
            if v > p.get() {
                p.set(v)
            }
        });
        true
    })
    .unwrap_or(true)
}

/// The system allocator, counting each thread's live bytes.
pub struct Counting;

// SAFETY: every call is forwarded to `System` with the same arguments; the counters are
// plain thread-local cells with constant initialisers (no allocation, no destructor).
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        if !grow(l.size() as isize) {
            return std::ptr::null_mut();
        }
        // SAFETY: forwarded as received.
        let p = unsafe { System.alloc(l) };
        if p.is_null() {
            grow(-(l.size() as isize));
        }
        p
    }

    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        if !grow(l.size() as isize) {
            return std::ptr::null_mut();
        }
        // SAFETY: forwarded as received.
        let p = unsafe { System.alloc_zeroed(l) };
        if p.is_null() {
            grow(-(l.size() as isize));
        }
        p
    }

    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: forwarded as received.
        unsafe { System.dealloc(p, l) };
        grow(-(l.size() as isize));
    }

    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        let d = new as isize - l.size() as isize;
        if !grow(d) {
            return std::ptr::null_mut();
        }
        // SAFETY: forwarded as received.
        let q = unsafe { System.realloc(p, l, new) };
        if q.is_null() {
            grow(-d);
        }
        q
    }
}

/// Runs `f`, returning its result and the most bytes it held live at once on this thread.
pub fn measure<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let start = LIVE.with(Cell::get);
    PEAK.with(|p| p.set(start));
    let r = f();
    let peak = PEAK.with(Cell::get) - start;
    (r, peak.max(0) as usize)
}

/// More than this for one evaluation (under the 1,000,000 cost limit) is a finding.
pub const MEMORY_LIMIT: usize = 256 << 20;

// ---------------------------------------------------------------------------------------
// Panic hook.

static LAST_PANIC: Mutex<Option<String>> = Mutex::new(None);

fn install_hook() {
    static ONCE: OnceLock<()> = OnceLock::new();
    ONCE.get_or_init(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let name = std::thread::current().name().unwrap_or("").to_string();
            let quiet = name.starts_with("fuzz-") || name == "cel-compile";
            *LAST_PANIC.lock().unwrap_or_else(|e| e.into_inner()) = Some(format!("{info}"));
            if !quiet {
                previous(info);
            }
        }));
    });
}

/// The message and place of the last panic (on any thread), taken.
pub fn take_panic() -> String {
    LAST_PANIC
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .take()
        .unwrap_or_else(|| "(no panic message recorded)".into())
        .replace('\n', " ")
}

// ---------------------------------------------------------------------------------------
// Settings.

struct Settings {
    /// `CELGATE_FUZZ_SECONDS`: run each target for this long (a fuzzing session).
    seconds: Option<u64>,
    /// `CELGATE_FUZZ_CASES`: the bounded count (CI) instead of each target's default.
    cases: Option<u32>,
    /// `CELGATE_FUZZ_SEED`: the first seed (default: fixed per target in CI, the clock in a
    /// session).
    seed: Option<u64>,
    /// `CELGATE_FUZZ_HANG_SECONDS`: one execution running longer aborts the process.
    hang: u64,
    /// `CELGATE_FUZZ_SLOW_SECONDS`: one execution taking longer is a failure (sessions only).
    slow: Option<u64>,
}

fn settings() -> &'static Settings {
    static S: OnceLock<Settings> = OnceLock::new();
    S.get_or_init(|| {
        let num = |k: &str| {
            std::env::var(k)
                .ok()
                .and_then(|v| v.trim().parse::<u64>().ok())
        };
        let seconds = num("CELGATE_FUZZ_SECONDS");
        Settings {
            seconds,
            cases: num("CELGATE_FUZZ_CASES").map(|n| n.min(u32::MAX as u64) as u32),
            seed: num("CELGATE_FUZZ_SEED"),
            hang: num("CELGATE_FUZZ_HANG_SECONDS").unwrap_or(if seconds.is_some() {
                60
            } else {
                600
            }),
            slow: num("CELGATE_FUZZ_SLOW_SECONDS").or(seconds.map(|_| 10)),
        }
    })
}

pub fn session() -> bool {
    settings().seconds.is_some()
}

// ---------------------------------------------------------------------------------------
// Watchdog.

static SLOTS: Mutex<Vec<(&'static str, Arc<AtomicU64>)>> = Mutex::new(Vec::new());

fn epoch() -> Instant {
    static E: OnceLock<Instant> = OnceLock::new();
    *E.get_or_init(Instant::now)
}

fn now_ms() -> u64 {
    epoch().elapsed().as_millis() as u64 + 1
}

fn watch(name: &'static str) -> Arc<AtomicU64> {
    static STARTED: OnceLock<()> = OnceLock::new();
    STARTED.get_or_init(|| {
        let limit = settings().hang * 1000;
        let _ = std::thread::Builder::new()
            .name("fuzz-watchdog".into())
            .spawn(move || loop {
                std::thread::sleep(Duration::from_millis(500));
                let slots = SLOTS.lock().unwrap_or_else(|e| e.into_inner());
                for (name, started) in slots.iter() {
                    let s = started.load(Ordering::Relaxed);
                    if s != 0 && now_ms().saturating_sub(s) > limit {
                        eprintln!(
                            "fuzz {name}: one execution has run for over {} s: a hang. \
                             Aborting; the input is {}",
                            limit / 1000,
                            current_file(name).display()
                        );
                        std::process::abort();
                    }
                }
            });
    });
    let slot = Arc::new(AtomicU64::new(0));
    SLOTS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push((name, slot.clone()));
    slot
}

// ---------------------------------------------------------------------------------------
// Files.

pub fn regressions_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz-regressions")
}

/// Where a session writes each input before running it, so that `make fuzz` can keep the
/// input of a crash (an abort, a stack overflow) that no in-process handler sees.
pub fn current_file(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("fuzz-current")
        .join(name)
}

pub fn fnv(data: &[u8]) -> u64 {
    data.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ *b as u64).wrapping_mul(0x0100_0000_01b3)
    })
}

/// A failure's signature, to keep one input per distinct failure: the panic place, else
/// the message (up to a ` — ` that starts its details) with its numbers and quoted parts
/// blanked.
fn signature(reason: &str) -> String {
    let reason = reason.split(" — ").next().unwrap_or(reason);
    if let Some(i) = reason.find("panicked at ") {
        let rest = &reason[i + 12..];
        let place: String = rest.chars().take_while(|c| !c.is_whitespace()).collect();
        return format!("panic {place}");
    }
    let mut out = String::new();
    let mut quoted = false;
    for ch in reason.chars().take(100) {
        match ch {
            '\'' | '"' | '`' => {
                quoted = !quoted;
                out.push('_');
            }
            _ if quoted => {}
            c if c.is_ascii_digit() => {
                if !out.ends_with('#') {
                    out.push('#');
                }
            }
            c => out.push(c),
        }
    }
    out
}

// ---------------------------------------------------------------------------------------
// The runner.

/// One fuzz target.
pub struct Target<I> {
    pub name: &'static str,
    /// Cases for the bounded (CI) run.
    pub cases: u32,
    /// File extension of a kept input.
    pub ext: &'static str,
    /// The input as the file that is kept.
    pub encode: fn(&I) -> Vec<u8>,
    /// The property: `Err` is a finding.
    pub check: fn(&I) -> Result<(), String>,
    /// Smaller candidates of an input, for the reducer that follows proptest's shrinking
    /// (which, on a choice sequence, stalls on long inputs).
    pub shrink: fn(&I) -> Vec<I>,
    /// The property on a kept file (the regression replay).
    pub replay: fn(&[u8]) -> Result<(), String>,
}

/// The failure signatures of the pending inputs of `name` (not `crash-*` ones, which would
/// stop the process): failures with these signatures are known, counted and not kept.
fn known_failures(name: &str, replay: fn(&[u8]) -> Result<(), String>) -> Vec<String> {
    list(&regressions_dir().join("pending").join(name))
        .iter()
        .filter(|f| {
            !f.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("crash-"))
        })
        .filter_map(|f| {
            let data = std::fs::read(f).ok()?;
            guarded(replay, &data).err().map(|e| signature(&e))
        })
        .collect()
}

/// Candidates of `items` with one chunk removed: halves first, down to single items.
pub fn chunk_removals<T: Clone>(items: &[T]) -> Vec<Vec<T>> {
    let mut out = Vec::new();
    let mut size = items.len() / 2;
    while size >= 1 {
        let mut at = 0;
        while at < items.len() {
            let end = (at + size).min(items.len());
            let mut v = items[..at].to_vec();
            v.extend_from_slice(&items[end..]);
            out.push(v);
            at += size;
        }
        if out.len() > 4000 {
            break;
        }
        size /= 2;
    }
    if items.len() == 1 {
        out.push(Vec::new());
    }
    out
}

/// Text candidates: lines removed, then characters.
pub fn text_removals(s: &str) -> Vec<String> {
    let lines: Vec<&str> = s.split_inclusive('\n').collect();
    let mut out: Vec<String> = if lines.len() > 1 {
        chunk_removals(&lines)
            .into_iter()
            .map(|l| l.concat())
            .collect()
    } else {
        Vec::new()
    };
    let chars: Vec<char> = s.chars().collect();
    out.extend(
        chunk_removals(&chars)
            .into_iter()
            .map(|c| c.into_iter().collect::<String>()),
    );
    out
}

/// Statistics the properties count, printed per target.
static STATS: Mutex<BTreeMap<(String, String), u64>> = Mutex::new(BTreeMap::new());

thread_local! {
    static CURRENT: Cell<&'static str> = const { Cell::new("") };
}

/// Counts one occurrence of `what` for the running target.
pub fn stat(what: &str) {
    let target = CURRENT.with(Cell::get);
    *STATS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .entry((target.to_string(), what.to_string()))
        .or_default() += 1;
}

fn print_stats(name: &str) {
    let stats = STATS.lock().unwrap_or_else(|e| e.into_inner());
    let line: Vec<String> = stats
        .iter()
        .filter(|((t, _), _)| t == name)
        .map(|((_, k), v)| format!("{k} {v}"))
        .collect();
    if !line.is_empty() {
        println!("fuzz {name}: {}", line.join(", "));
    }
}

/// CPU time of this thread (Linux: user and system ticks of `/proc/thread-self/stat`,
/// 10 ms each), else the wall clock: on a shared machine, wall time would make slowness
/// findings flaky.
fn thread_cpu() -> Duration {
    let ticks = std::fs::read_to_string("/proc/thread-self/stat")
        .ok()
        .and_then(|s| {
            // Fields after the command name, which is in parentheses: state is the first,
            // utime the 12th and stime the 13th.
            let rest = &s[s.rfind(')')? + 1..];
            let f: Vec<&str> = rest.split_whitespace().collect();
            Some(f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?)
        });
    ticks.map_or_else(|| epoch().elapsed(), |t| Duration::from_millis(t * 10))
}

/// Runs `f` on a thread with the server's evaluation stack.
pub fn on_eval_stack<T: Send>(name: &str, f: impl FnOnce() -> T + Send) -> T {
    std::thread::scope(|s| {
        let h = std::thread::Builder::new()
            .name(format!("fuzz-{name}"))
            .stack_size(EVAL_STACK)
            .spawn_scoped(s, f)
            .unwrap_or_else(|e| panic!("cannot start a fuzz thread: {e}"));
        match h.join() {
            Ok(v) => v,
            Err(p) => std::panic::resume_unwind(p),
        }
    })
}

/// Runs `check`, turning a panic into an `Err` that names its place.
pub fn guarded<I: ?Sized>(check: fn(&I) -> Result<(), String>, input: &I) -> Result<(), String> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| check(input))) {
        Ok(r) => r,
        Err(_) => Err(format!("panic: {}", take_panic())),
    }
}

/// Fuzzes `t` with inputs from `make()`'s strategy: a bounded count of cases, or, with
/// `CELGATE_FUZZ_SECONDS`, rounds with fresh seeds until the time is up. Each distinct
/// failure is shrunk and kept under `tests/fuzz-regressions/<target>/`; the test fails if
/// there was any.
pub fn fuzz<S, F>(t: Target<S::Value>, make: F)
where
    S: Strategy,
    S::Value: Debug + 'static,
    F: FnOnce() -> S + Send,
{
    install_hook();
    let name = t.name;
    let failures = on_eval_stack(name, move || run(t, make()));
    print_stats(name);
    if !failures.is_empty() {
        let list: Vec<String> = failures
            .iter()
            .map(|(p, r)| format!("  {}\n    {r}", p.display()))
            .collect();
        panic!(
            "fuzz {name}: {} failing input(s), kept in tests/fuzz-regressions/{name}/ \
             (move to pending/{name}/ while the fix is elsewhere):\n{}",
            failures.len(),
            list.join("\n")
        );
    }
}

fn run<S>(t: Target<S::Value>, strategy: S) -> Vec<(PathBuf, String)>
where
    S: Strategy,
    S::Value: Debug,
{
    CURRENT.with(|c| c.set(t.name));
    let set = settings();
    let started = Instant::now();
    let deadline = set.seconds.map(|s| started + Duration::from_secs(s));
    let slot = watch(t.name);
    let known = known_failures(t.name, t.replay);
    let execs = Cell::new(0u64);
    let failing = Cell::new(false);
    let slowest = Cell::new(Duration::ZERO);
    let slowest_input: std::cell::RefCell<String> = Default::default();
    let current = current_file(t.name);
    if session() {
        if let Some(dir) = current.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
    }
    let execute = |input: &S::Value| -> (Result<(), String>, Duration) {
        execs.set(execs.get() + 1);
        if session() {
            let _ = std::fs::write(&current, (t.encode)(input));
        }
        let begin = thread_cpu();
        slot.store(now_ms(), Ordering::Relaxed);
        let r = guarded(t.check, input);
        slot.store(0, Ordering::Relaxed);
        (r, thread_cpu().saturating_sub(begin))
    };
    let property = |input: S::Value| -> Result<(), TestCaseError> {
        if let Some(d) = deadline {
            if !failing.get() && Instant::now() > d {
                return Ok(());
            }
        }
        let (mut r, took) = execute(&input);
        if let Err(e) = &r {
            if known.contains(&signature(e)) {
                stat("known failures (pending)");
                r = Ok(());
            }
        }
        if took > slowest.get() {
            slowest.set(took);
            let text = format!("{input:?}");
            *slowest_input.borrow_mut() = text.chars().take(300).collect();
        }
        if let (Ok(()), Some(slow)) = (&r, set.slow) {
            if took > Duration::from_secs(slow) {
                r = Err(format!(
                    "slow: one execution took {took:.1?} of this thread's CPU (over {slow} s)"
                ));
            }
        }
        r.map_err(|msg| {
            failing.set(true);
            TestCaseError::fail(msg)
        })
    };
    let base_seed = set.seed.unwrap_or_else(|| match set.seconds {
        Some(_) => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64),
        None => fnv(t.name.as_bytes()),
    });
    let mut seen: BTreeMap<String, u64> = BTreeMap::new();
    let mut failures = Vec::new();
    let mut round = 0u64;
    let mut last_report = Instant::now();
    loop {
        let cases = match (set.seconds, set.cases) {
            (Some(_), _) => 256,
            (None, Some(n)) => n,
            (None, None) => t.cases,
        };
        let config = Config {
            cases,
            failure_persistence: None,
            max_shrink_iters: 1024,
            max_shrink_time: 120_000,
            max_local_rejects: 1 << 20,
            max_global_rejects: 1 << 20,
            ..Config::default()
        };
        let seed = base_seed.wrapping_add(round.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        let mut bytes = [0u8; 32];
        for (i, b) in bytes.iter_mut().enumerate() {
            *b = (seed.rotate_left(i as u32 * 8) >> 56) as u8 ^ i as u8;
        }
        let mut runner =
            TestRunner::new_with_rng(config, TestRng::from_seed(RngAlgorithm::ChaCha, &bytes));
        failing.set(false);
        match runner.run(&strategy, property) {
            Ok(()) => {}
            Err(TestError::Fail(reason, input)) => {
                let reason = reason.to_string();
                let sig = signature(&reason);
                let count = seen.entry(sig).or_default();
                *count += 1;
                if *count == 1 {
                    let input = reduce(&t, input, &reason, &execute);
                    let data = (t.encode)(&input);
                    let dir = regressions_dir().join(t.name);
                    let path = dir.join(format!("{:016x}.{}", fnv(&data), t.ext));
                    let saved =
                        std::fs::create_dir_all(&dir).and_then(|()| std::fs::write(&path, &data));
                    eprintln!(
                        "fuzz {}: FAILURE (seed {seed}, round {round}): {reason}\n  minimal input: {:?}\n  kept in {}{}",
                        t.name,
                        truncate(&format!("{input:?}"), 2000),
                        path.display(),
                        saved.err().map_or(String::new(), |e| format!(" (NOT SAVED: {e})"))
                    );
                    failures.push((path, reason));
                }
            }
            Err(TestError::Abort(reason)) => {
                failures.push((PathBuf::from("(none)"), format!("aborted: {reason}")));
            }
        }
        round += 1;
        if session() && last_report.elapsed() > Duration::from_secs(300) {
            // A crash loses the final line: say how far the session got now and then.
            last_report = Instant::now();
            println!(
                "fuzz {}: {} executions after {:.0} s, {} distinct failure(s)",
                t.name,
                execs.get(),
                started.elapsed().as_secs_f64(),
                failures.len()
            );
        }
        match deadline {
            Some(d) if Instant::now() < d => continue,
            _ => break,
        }
    }
    let secs = started.elapsed().as_secs_f64();
    println!(
        "fuzz {}: {} executions in {secs:.1} s ({:.0}/s), {} round(s), {} distinct failure(s) ({} in all); slowest execution {:.1?}: {}",
        t.name,
        execs.get(),
        execs.get() as f64 / secs.max(1e-9),
        round,
        failures.len(),
        seen.values().sum::<u64>(),
        slowest.get(),
        slowest_input.borrow()
    );
    failures
}

/// Runs one input: its result and the CPU time it took.
type Execute<'e, I> = dyn Fn(&I) -> (Result<(), String>, Duration) + 'e;

/// Greedy reduction after proptest's shrinking: a candidate that fails the same way (same
/// signature) replaces the input, until none does or a minute has passed.
fn reduce<I>(t: &Target<I>, input: I, reason: &str, execute: &Execute<I>) -> I {
    let sig = signature(reason);
    let deadline = Instant::now() + Duration::from_secs(if session() { 60 } else { 20 });
    let mut cur = input;
    'outer: loop {
        for cand in (t.shrink)(&cur) {
            if Instant::now() > deadline {
                break 'outer;
            }
            if let (Err(r), _) = execute(&cand) {
                if signature(&r) == sig {
                    cur = cand;
                    continue 'outer;
                }
            }
        }
        break;
    }
    cur
}

fn truncate(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(n).collect();
        t.push('…');
        t
    }
}

/// Replays every kept input of `name` with `check`; inputs under `pending/<name>/` are
/// listed, not run (their fix is elsewhere, and a crash would stop this test).
pub fn replay(name: &'static str, check: fn(&[u8]) -> Result<(), String>) {
    install_hook();
    let files = list(&regressions_dir().join(name));
    let failures: Vec<String> = on_eval_stack(name, || {
        CURRENT.with(|c| c.set(name));
        files
            .iter()
            .filter_map(|f| {
                let data = std::fs::read(f).ok()?;
                guarded(check, &data)
                    .err()
                    .map(|e| format!("  {}\n    {e}", f.display()))
            })
            .collect()
    });
    println!("replay {name}: {} kept input(s)", files.len());
    let pending = list(&regressions_dir().join("pending").join(name));
    if std::env::var_os("CELGATE_FUZZ_PENDING").is_some() {
        // Asked for: run them too, and say which pass now (a crash still stops the binary).
        let results: Vec<String> = on_eval_stack(name, || {
            CURRENT.with(|c| c.set(name));
            pending
                .iter()
                .map(|f| {
                    let r = std::fs::read(f)
                        .map_err(|e| e.to_string())
                        .and_then(|data| guarded(check, &data));
                    match r {
                        Ok(()) => format!("passes now (move it back): {}", f.display()),
                        Err(e) => format!("still fails: {}\n    {e}", f.display()),
                    }
                })
                .collect()
        });
        for r in results {
            println!("replay {name}: pending input {r}");
        }
    } else {
        for p in pending {
            println!(
                "replay {name}: pending, not replayed (CELGATE_FUZZ_PENDING=1 runs it): {}",
                p.display()
            );
        }
    }
    assert!(
        failures.is_empty(),
        "replay {name}: {} kept input(s) fail:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

fn list(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| {
                    p.is_file()
                        && !p
                            .file_name()
                            .is_some_and(|n| n.to_string_lossy().starts_with('.'))
                })
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}
