//! [`Ctx`]: what a library function gets besides its arguments (the evaluation's meter and
//! its cache of run-time regexes). Kept apart from the evaluator so that the libraries the
//! evaluator calls do not depend on it.

use std::sync::Arc;

use super::error::EvalError;
use super::meter::{Meter, Ticker};
use super::regex::{Regex, RegexCache};
use super::value::VALUE_BYTES;

/// The heap a shared string of `len` bytes takes (see [`Ctx::alloc_string`]).
pub fn shared_string_bytes(len: usize) -> u64 {
    let block = (len as u64).saturating_add(2 * std::mem::size_of::<usize>() as u64);
    block.div_ceil(16).saturating_mul(16).max(32)
}

/// What a library function that builds or scans in proportion to its input gets besides its
/// arguments: the evaluation's meter (memory ceiling, deadline) and its cache of run-time
/// regexes. Passed explicitly, so the engine keeps no hidden state.
pub struct Ctx<'c> {
    /// Reached directly by the evaluator to charge a call's cost on the hot path.
    pub(super) meter: &'c mut Meter,
    regexes: &'c mut RegexCache,
}

impl<'c> Ctx<'c> {
    /// What a call during an evaluation with `meter` and `regexes` gets.
    pub fn new(meter: &'c mut Meter, regexes: &'c mut RegexCache) -> Self {
        Ctx { meter, regexes }
    }

    /// Counts `bytes` about to be built (see [`Meter::alloc`]).
    #[inline]
    pub fn alloc(&mut self, bytes: usize) -> Result<(), EvalError> {
        self.meter.alloc(bytes as u64)
    }

    /// Counts a shared string of `len` bytes about to be built at its real size: its own heap
    /// block, with the two reference counts before the text, in the allocator's 16-byte
    /// units and at least 32 bytes. (Counted as `len` alone, a list of one-character pieces
    /// was about half its real size.)
    #[inline]
    pub fn alloc_string(&mut self, len: usize) -> Result<(), EvalError> {
        self.meter.alloc(shared_string_bytes(len))
    }

    /// Counts `n` element slots of a list about to be built.
    #[inline]
    pub fn alloc_values(&mut self, n: usize) -> Result<(), EvalError> {
        self.meter.alloc((n as u64).saturating_mul(VALUE_BYTES))
    }

    /// A deadline check for a loop of `every` steps between two looks at the clock, knowing
    /// the room left under the memory ceiling (for a regex search's lists).
    pub fn ticker(&self, every: u32) -> Ticker {
        Ticker::new(self.meter.deadline, every)
            .with_memory_room(self.meter.memory_limit.saturating_sub(self.meter.memory))
    }

    /// `Err` once the deadline has passed.
    pub fn check_deadline(&self) -> Result<(), EvalError> {
        self.meter.check_deadline()
    }

    /// What the meter may still spend before the cost limit.
    pub fn remaining_cost(&self) -> u64 {
        self.meter.limit.saturating_sub(self.meter.cost)
    }

    /// `pattern` compiled, from this evaluation's cache (a failure is cached too).
    pub fn regex(&mut self, pattern: &str) -> Result<Arc<Regex>, EvalError> {
        self.regexes.get(pattern, self.meter)
    }
}
