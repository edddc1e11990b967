//! The sender's rate cap (`braid send --rate`): one token bucket in the
//! owner for the total over every connection.
//!
//! A block may start when the bucket is not in debt; starting it takes its
//! whole length (the bucket may go into debt by one block), so the average
//! stays at the rate and the largest burst is one block plus
//! [`BURST`] worth of the rate. Each socket also gets `SO_MAX_PACING_RATE`
//! at the total rate, so the kernel spreads a block's packets out instead
//! of sending it at line rate. Time is passed in.
//!
//! The rate may change while the transfer runs ([`RateCap::set_rate`]: a
//! reservation modified, a background share announced); a rate of zero
//! holds every new block until the next change.

use braid_core::{Bandwidth, Duration, Instant};

/// How much sending time the bucket may save up while idle.
const BURST: Duration = Duration::from_millis(10);
/// At a rate of zero, how long until the bucket is looked at again.
const PAUSED_RECHECK: Duration = Duration::from_secs(1);

/// A token bucket over bytes; see the module docs.
#[derive(Debug, Clone)]
pub(super) struct RateCap {
    rate: Bandwidth,
    /// Bytes that may be sent now (negative: debt).
    tokens: f64,
    last: Instant,
}

impl RateCap {
    /// A bucket at `rate` (not zero), empty at `now`.
    pub(super) fn new(rate: Bandwidth, now: Instant) -> Self {
        RateCap {
            rate,
            tokens: 0.0,
            last: now,
        }
    }

    /// The rate in force.
    pub(super) fn rate(&self) -> Bandwidth {
        self.rate
    }

    /// From `now` on, refill at `rate` (what was saved up or owed so far
    /// stays).
    pub(super) fn set_rate(&mut self, rate: Bandwidth, now: Instant) {
        self.refill(now);
        self.rate = rate;
    }

    fn refill(&mut self, now: Instant) {
        let dt = now.saturating_duration_since(self.last).as_secs_f64();
        self.last = now;
        let cap = self.rate.bytes_per_sec() as f64 * BURST.as_secs_f64();
        self.tokens = (self.tokens + dt * self.rate.bytes_per_sec() as f64).min(cap);
    }

    /// How long until a block may start (zero: now).
    pub(super) fn wait(&mut self, now: Instant) -> Duration {
        self.refill(now);
        if self.rate.bytes_per_sec() == 0 {
            // Paused: look again later (a rate change wakes the owner).
            return PAUSED_RECHECK;
        }
        if self.tokens >= 0.0 {
            return Duration::ZERO;
        }
        let per_sec = self.rate.bytes_per_sec().max(1) as f64;
        Duration::from_secs_f64(-self.tokens / per_sec)
    }

    /// A block of `len` bytes starts now.
    pub(super) fn take(&mut self, len: u64, now: Instant) {
        self.refill(now);
        self.tokens -= len as f64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn average_rate_holds_and_bursts_are_one_block() {
        let rate = Bandwidth::from_bytes_per_sec(1_000_000);
        let mut now = Instant::ZERO;
        let mut p = RateCap::new(rate, now);
        let mut sent = 0u64;
        // Send 100 blocks of 50 kB as fast as the bucket allows.
        for _ in 0..100 {
            now = now + p.wait(now);
            assert!(p.wait(now).is_zero());
            p.take(50_000, now);
            sent += 50_000;
        }
        // The last block starts after (sent - one block) / rate.
        let secs = now.saturating_duration_since(Instant::ZERO).as_secs_f64();
        assert!((secs - 4.95).abs() < 0.02, "{secs}");
        assert!(p.wait(now) > Duration::ZERO);
        assert_eq!(sent, 5_000_000);
    }

    #[test]
    fn a_new_rate_applies_from_the_change_and_zero_pauses() {
        let mut now = Instant::ZERO;
        let mut p = RateCap::new(Bandwidth::from_bytes_per_sec(1_000_000), now);
        p.take(1_000_000, now);
        // One second of debt at 1 MB/s; at 2 MB/s it is half a second.
        p.set_rate(Bandwidth::from_bytes_per_sec(2_000_000), now);
        let w = p.wait(now).as_secs_f64();
        assert!((w - 0.5).abs() < 1e-6, "{w}");
        p.set_rate(Bandwidth::from_bytes_per_sec(0), now);
        now += Duration::from_secs(100);
        assert!(!p.wait(now).is_zero(), "a zero rate never lets a block go");
        assert_eq!(p.rate().bytes_per_sec(), 0);
    }
}
