//! How the cluster source waits between tries while the API server does not answer (watch,
//! list and discovery retries): exponential, jittered, and capped low, so that the source
//! follows within about the cap once the API server is back, however long it was away.
//!
//! The cap trades recovery time for load on an unreachable server: with the default 1 s a
//! server that comes back is seen within 1 s, at the cost of one try every 0.5-1 s per watch
//! while it is away (a refused connection or a quick error; a handful of watches). An
//! overloaded server is not pushed harder by this: kube's client already retries 429, 503
//! and 504 answers inside each request, honouring `Retry-After`.

use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBackoff, ExponentialBuilder};

/// The first delay: a dropped connection is usually back at once.
const FIRST: Duration = Duration::from_millis(100);

/// Delays of 100 ms, 200 ms, 400 ms, ... up to `max`, each jittered down to at most half its
/// length (so that the watches of several replicas do not retry in step).
pub struct Backoff {
    builder: ExponentialBuilder,
    delays: ExponentialBackoff,
    max: Duration,
}

impl Backoff {
    pub fn new(max: Duration) -> Backoff {
        // backon's jitter adds up to 100% of the delay: halve the bounds so that a jittered
        // delay stays within `max`.
        let half = max / 2;
        let builder = ExponentialBuilder::default()
            .with_min_delay((FIRST / 2).min(half))
            .with_max_delay(half)
            .with_factor(2.0)
            .with_jitter()
            .without_max_times();
        Backoff {
            builder,
            delays: builder.build(),
            max,
        }
    }

    /// The wait before the next try.
    pub fn next_delay(&mut self) -> Duration {
        // Without a limit on tries the iterator never ends; `max` is the safe answer anyway.
        self.delays.next().unwrap_or(self.max).min(self.max)
    }

    /// The server answered: the next failure starts again from the first delay.
    pub fn reset(&mut self) {
        self.delays = self.builder.build();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_to_the_cap_and_resets() {
        let max = Duration::from_secs(1);
        let mut b = Backoff::new(max);
        let first = b.next_delay();
        assert!(
            first >= Duration::from_millis(50) && first <= FIRST,
            "{first:?}"
        );
        let delays: Vec<Duration> = (0..50).map(|_| b.next_delay()).collect();
        assert!(delays.iter().all(|d| *d <= max), "{delays:?}");
        // At the cap, jittered within its upper half.
        assert!(delays[10..].iter().all(|d| *d >= max / 2), "{delays:?}");
        // Jittered: not all the same.
        assert!(delays[10..].iter().any(|d| *d != delays[10]), "{delays:?}");
        b.reset();
        assert!(b.next_delay() <= FIRST);
    }

    #[test]
    fn a_small_cap_is_kept() {
        let max = Duration::from_millis(10);
        let mut b = Backoff::new(max);
        assert!((0..20).all(|_| b.next_delay() <= max));
    }
}
