//! What one evaluation may spend and what it spent: the cost meter with its limit, the
//! memory ceiling and the deadline, and the [`Ticker`] that lets a long loop look at the clock
//! every few steps. A leaf of `cel` (it knows only the error type), so that the evaluator,
//! the regex cache and every library function can meter without depending on each other.

use std::time::Instant;

use super::error::EvalError;

/// cel-go's `CostLimit` for one expression in Kubernetes (`PerCallLimit`).
pub const PER_CALL_LIMIT: u64 = 1_000_000;

/// The default memory ceiling of one evaluation, in bytes built (see [`Meter::memory`]).
///
/// The largest value a policy within cel-go's cost limit can legitimately build is a list of
/// about a million elements (`lists.range(n)` costs n + 11): 32 MiB of element slots. Twice
/// that leaves room for the strings around it, and four evaluations at the ceiling still fit
/// the 512 MiB the chart gives the webhook.
pub const DEFAULT_MEMORY_LIMIT: u64 = 64 << 20;

/// What one evaluation may spend, and what it spent.
#[derive(Debug, Clone)]
pub struct Meter {
    /// Cost spent so far, in cel-go's units.
    pub cost: u64,
    /// Past it, the evaluation stops with `operation cancelled: actual cost limit exceeded`.
    pub limit: u64,
    /// Past it, the evaluation stops with `operation interrupted`: comprehensions look every
    /// 100 iterations (cel-go's interrupt check), long builders and scans every few
    /// thousand steps, and a regex is never compiled past it.
    pub deadline: Option<Instant>,
    /// Bytes built so far: owned strings and bytes, the slots of built lists and maps,
    /// run-time regexes. Cumulative (nothing is given back when a temporary is dropped), and
    /// counted where values are built, never on values borrowed from the request.
    pub memory: u64,
    /// Past it, the evaluation stops with `operation cancelled: memory limit exceeded`,
    /// before the allocation that would exceed it.
    pub memory_limit: u64,
    /// Patterns compiled at run time (not counting compile-time constants and cache hits).
    pub regexes_compiled: u64,
}

impl Default for Meter {
    fn default() -> Self {
        Meter::with_limit(PER_CALL_LIMIT)
    }
}

impl Meter {
    /// A meter with cost limit `limit`, no deadline and the [`DEFAULT_MEMORY_LIMIT`].
    pub fn with_limit(limit: u64) -> Self {
        Meter {
            cost: 0,
            limit,
            deadline: None,
            memory: 0,
            memory_limit: DEFAULT_MEMORY_LIMIT,
            regexes_compiled: 0,
        }
    }

    #[inline]
    pub(crate) fn charge(&mut self, n: u64) -> Result<(), EvalError> {
        self.cost = self.cost.saturating_add(n);
        if self.cost > self.limit {
            return Err(EvalError::cost_limit());
        }
        Ok(())
    }

    /// Takes back `n` charged a moment ago, where cel-go's tracker turns out not to observe a
    /// step celgate charged on the way (an attribute branch of `?:`; an attribute used as an
    /// optional index that found nothing).
    #[inline]
    pub(crate) fn refund(&mut self, n: u64) {
        self.cost = self.cost.saturating_sub(n);
    }

    /// `n` charges of 1 in a row, as cel-go's tracker observes them one by one: past the
    /// limit it stops at the first, so the cost reported is the limit plus one.
    #[inline]
    pub(crate) fn charge_units(&mut self, n: u64) -> Result<(), EvalError> {
        self.cost = self.cost.saturating_add(n);
        if self.cost > self.limit {
            self.cost = self.cost.min(self.limit.saturating_add(1));
            return Err(EvalError::cost_limit());
        }
        Ok(())
    }

    /// Counts `bytes` about to be built; refuses them (uncounted) past the memory ceiling.
    #[inline]
    pub fn alloc(&mut self, bytes: u64) -> Result<(), EvalError> {
        let memory = self.memory.saturating_add(bytes);
        if memory > self.memory_limit {
            return Err(EvalError::memory_limit());
        }
        self.memory = memory;
        Ok(())
    }

    /// `operation interrupted` once the deadline has passed.
    pub fn check_deadline(&self) -> Result<(), EvalError> {
        match self.deadline {
            Some(d) if Instant::now() >= d => Err(EvalError::deadline()),
            _ => Ok(()),
        }
    }
}

/// How many steps of a library builder or scan (an element, or a kilobyte of text) run
/// between two looks at the clock: tens of microseconds of work, so that a deadline stops it
/// within a millisecond, while a short input never reads the clock.
pub const STEPS_PER_CHECK: u32 = 1024;

/// Counts steps of work down to the next look at the clock; for a loop with no deadline
/// nothing but a decrement.
#[derive(Debug, Clone, Copy)]
pub struct Ticker {
    deadline: Option<Instant>,
    left: u32,
    every: u32,
    /// The bytes left under the memory ceiling, for a temporary a scan allocates and frees
    /// (a regex search's thread lists): unbounded unless set.
    room: u64,
}

impl Ticker {
    pub fn new(deadline: Option<Instant>, every: u32) -> Self {
        let every = every.max(1);
        Ticker {
            deadline,
            left: every,
            every,
            room: u64::MAX,
        }
    }

    /// The same, with `room` bytes left under the memory ceiling.
    pub fn with_memory_room(self, room: u64) -> Self {
        Ticker { room, ..self }
    }

    /// Whether a temporary of `bytes` fits beside what the evaluation has built: the memory
    /// error if not. Not counted cumulatively, since it is freed when the scan ends.
    pub fn room_for(&self, bytes: u64) -> Result<(), EvalError> {
        if bytes > self.room {
            return Err(EvalError::memory_limit());
        }
        Ok(())
    }

    /// One step.
    #[inline]
    pub fn tick(&mut self) -> Result<(), EvalError> {
        self.steps(1)
    }

    /// `n` steps at once; the clock is read when the count runs out.
    #[inline]
    pub fn steps(&mut self, n: u32) -> Result<(), EvalError> {
        if self.left > n {
            self.left -= n;
            return Ok(());
        }
        self.left = self.every;
        if self.deadline.is_some_and(|d| Instant::now() >= d) {
            return Err(EvalError::deadline());
        }
        Ok(())
    }

    /// The steps for handling `bytes` bytes of text: one per kilobyte, at least one.
    #[inline]
    pub fn bytes(&mut self, bytes: usize) -> Result<(), EvalError> {
        self.steps(
            u32::try_from(bytes >> 10)
                .unwrap_or(u32::MAX)
                .saturating_add(1),
        )
    }
}
