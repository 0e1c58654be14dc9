//! The process-wide budget of buffered bytes (`--max-buffered-bytes`): request bodies as they
//! arrive and answers until the connection takes them. Per-request limits do not bound the
//! sum: many connections each holding a body just under `--max-body-bytes` would. Every
//! buffer is reserved before it is filled ([`Reservation`], given back when dropped), so the
//! sum never passes the budget; a request that would pass it is answered 503.
//!
//! What the budget does not see: an HTTP/2 answer leaves it once hyper has taken its last
//! frame, but h2 keeps the bytes the client's window does not admit yet until the window
//! opens or the stream ends. That is at most the rest of one answer per open stream (an
//! answer is one buffer, small: warnings and messages are capped), and no longer than the
//! connection lives: with its answers taken, it counts as idle, so the idle timeout (then
//! the client timeout of the graceful close) ends it. Counting them would mean following
//! h2's send buffers, which hyper does not expose.
//!
//! A quarter of the budget is kept for small requests: past [`SMALL_REQUEST`] bytes a body
//! may fill only three quarters of it, so that clients holding large bodies cannot keep the
//! API server's usual reviews (a few kilobytes) out.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// The bytes of each request that may use the whole budget; the rest of a body may use
/// only the bulk share.
pub const SMALL_REQUEST: usize = 64 << 10;

/// What may be reserved at once.
#[derive(Debug)]
pub struct Budget {
    limit: usize,
    used: AtomicUsize,
}

/// How much of the budget a reservation may fill.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Share {
    /// The whole budget: answers, and the first [`SMALL_REQUEST`] bytes of each request.
    Whole,
    /// Three quarters: request bytes past the first [`SMALL_REQUEST`].
    Bulk,
}

impl Budget {
    pub fn new(limit: usize) -> Arc<Budget> {
        Arc::new(Budget {
            limit,
            used: AtomicUsize::new(0),
        })
    }

    /// Bytes reserved now.
    pub fn used(&self) -> usize {
        self.used.load(Ordering::Acquire)
    }

    /// The most bytes a [`Share::Bulk`] reservation may bring the total to.
    pub fn bulk_limit(&self) -> usize {
        self.limit - self.limit / 4
    }

    fn ceiling(&self, share: Share) -> usize {
        match share {
            Share::Whole => self.limit,
            Share::Bulk => self.bulk_limit(),
        }
    }

    /// Reserves `n` more bytes if the total stays within `share`'s ceiling.
    fn take(&self, n: usize, share: Share) -> bool {
        let ceiling = self.ceiling(share);
        self.used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                used.checked_add(n).filter(|total| *total <= ceiling)
            })
            .is_ok()
    }

    fn give(&self, n: usize) {
        self.used.fetch_sub(n, Ordering::AcqRel);
    }

    /// An empty reservation, grown as bytes arrive.
    pub fn reservation(self: &Arc<Self>) -> Reservation {
        Reservation {
            budget: self.clone(),
            held: 0,
        }
    }
}

/// Bytes of the budget held by one buffer; given back when dropped.
#[derive(Debug)]
pub struct Reservation {
    budget: Arc<Budget>,
    held: usize,
}

/// The budget has no room for a reservation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("buffered bytes would pass --max-buffered-bytes")]
pub struct Exhausted;

impl Reservation {
    /// Bytes held.
    pub fn held(&self) -> usize {
        self.held
    }

    /// Holds `total` bytes in all (more, or the same), within `share`'s ceiling.
    pub fn grow_to(&mut self, total: usize, share: Share) -> Result<(), Exhausted> {
        let more = total.saturating_sub(self.held);
        if more == 0 {
            return Ok(());
        }
        if !self.budget.take(more, share) {
            return Err(Exhausted);
        }
        self.held = total;
        Ok(())
    }

    /// Gives back `n` of the bytes held (at most all of them).
    pub fn release(&mut self, n: usize) {
        let n = n.min(self.held);
        self.budget.give(n);
        self.held -= n;
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.budget.give(self.held);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reservations_stay_within_the_budget_and_are_given_back() {
        let b = Budget::new(1000);
        let mut bulk = b.reservation();
        assert_eq!(bulk.grow_to(750, Share::Bulk), Ok(()));
        assert_eq!(
            bulk.grow_to(751, Share::Bulk),
            Err(Exhausted),
            "3/4 for bulk"
        );
        let mut small = b.reservation();
        assert_eq!(small.grow_to(250, Share::Whole), Ok(()));
        assert_eq!(small.grow_to(251, Share::Whole), Err(Exhausted));
        assert_eq!(b.used(), 1000);
        small.release(100);
        assert_eq!((small.held(), b.used()), (150, 900));
        drop(bulk);
        assert_eq!(b.used(), 150);
        drop(small);
        assert_eq!(b.used(), 0);
    }
}
