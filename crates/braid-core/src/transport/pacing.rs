//! Packet pacing: a token bucket refilled at the congestion controller's
//! pacing rate, so a window is spread over the round trip instead of leaving
//! back to back (seed 002 §3.3 notes the jitter a window-sized burst causes).
//!
//! Main type: [`Pacer`]. Invariant: tokens never exceed the burst size
//! (`BURST_PACKETS` datagrams), so at most one burst leaves at line rate.

use crate::time::{Duration, Instant};
use crate::units::Bandwidth;

/// Datagrams that may leave back to back.
pub const BURST_PACKETS: u64 = 10;

/// A token bucket in bytes.
#[derive(Debug, Clone)]
pub struct Pacer {
    tokens: u64,
    capacity: u64,
    last: Option<Instant>,
}

impl Pacer {
    /// A pacer for datagrams of up to `mss` bytes, starting with a full burst.
    pub fn new(mss: u64) -> Self {
        let capacity = BURST_PACKETS * mss.max(1);
        Pacer {
            tokens: capacity,
            capacity,
            last: None,
        }
    }

    fn refill(&mut self, now: Instant, rate: Bandwidth) {
        if let Some(last) = self.last {
            let add = rate.bytes_in(now.saturating_duration_since(last));
            if add > 0 {
                self.tokens = self.tokens.saturating_add(add).min(self.capacity);
                self.last = Some(now);
            }
        } else {
            self.last = Some(now);
        }
    }

    /// When a packet of `bytes` may leave at `rate`: `None` if now.
    pub fn delay(&mut self, now: Instant, rate: Bandwidth, bytes: u64) -> Option<Instant> {
        if rate == Bandwidth::MAX {
            return None;
        }
        self.refill(now, rate);
        if self.tokens >= bytes {
            return None;
        }
        let missing = bytes - self.tokens;
        let wait = rate.transmit_time(missing).max(Duration::from_nanos(1));
        Some(now + wait)
    }

    /// [`Pacer::delay`] with the rate computed only where the answer
    /// depends on it: not when no time has passed since the last refill
    /// and the tokens suffice (the answer is then "now" at any rate, and
    /// nothing changes). A sender that reads the clock once per batch of
    /// datagrams computes the rate once per batch, not once per datagram.
    pub fn delay_with(
        &mut self,
        now: Instant,
        bytes: u64,
        rate: impl FnOnce() -> Bandwidth,
    ) -> Option<Instant> {
        if self.last.is_some_and(|l| now <= l) && self.tokens >= bytes {
            return None;
        }
        self.delay(now, rate(), bytes)
    }

    /// Takes `bytes` of tokens for a packet sent now.
    pub fn on_sent(&mut self, bytes: u64) {
        self.tokens = self.tokens.saturating_sub(bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allows_a_burst_then_spaces_packets() {
        let mut p = Pacer::new(1000);
        let rate = Bandwidth::from_mbps(8); // 1000 bytes per ms
        let t0 = Instant::ZERO;
        for _ in 0..BURST_PACKETS {
            assert_eq!(p.delay(t0, rate, 1000), None);
            p.on_sent(1000);
        }
        let next = p.delay(t0, rate, 1000).unwrap();
        assert_eq!(next, t0 + Duration::from_millis(1));
        assert_eq!(p.delay(next, rate, 1000), None);
    }

    #[test]
    fn the_rate_is_asked_only_when_time_moved_or_tokens_ran_short() {
        let mut p = Pacer::new(1000);
        let rate = Bandwidth::from_mbps(8);
        let mut asked = 0;
        let t0 = Instant::ZERO;
        // A burst at one instant: the first call sets the clock (and asks),
        // the rest find the tokens and the same time.
        for _ in 0..BURST_PACKETS {
            let d = p.delay_with(t0, 1000, || {
                asked += 1;
                rate
            });
            assert_eq!(d, None);
            p.on_sent(1000);
        }
        assert_eq!(asked, 1);
        // Out of tokens: the wait needs the rate.
        let next = p.delay_with(t0, 1000, || {
            asked += 1;
            rate
        });
        assert_eq!((next, asked), (Some(t0 + Duration::from_millis(1)), 2));
        // Time moved: the refill needs it, and the packet may go.
        let d = p.delay_with(t0 + Duration::from_millis(1), 1000, || {
            asked += 1;
            rate
        });
        assert_eq!((d, asked), (None, 3));
    }

    proptest::proptest! {
        /// `delay_with` answers as `delay` does and leaves the same state,
        /// for any sequence of times (backwards too), sizes and rates
        /// (the unpaced maximum among them).
        #[test]
        fn delay_with_is_delay(
            steps in proptest::collection::vec((0u64..3_000_000, 0u64..3000, 0u8..4, proptest::bool::ANY), 1..80),
        ) {
            let (mut a, mut b) = (Pacer::new(1200), Pacer::new(1200));
            let mut t = 1_000_000_000u64;
            for (dt, bytes, r, back) in steps {
                t = if back { t.saturating_sub(dt / 4) } else { t + dt };
                let now = Instant::from_nanos(t);
                let rate = match r {
                    0 => Bandwidth::MAX,
                    1 => Bandwidth::from_mbps(1),
                    2 => Bandwidth::from_mbps(100),
                    _ => Bandwidth::from_mbps(10_000),
                };
                let da = a.delay(now, rate, bytes);
                let db = b.delay_with(now, bytes, || rate);
                proptest::prop_assert_eq!(da, db);
                proptest::prop_assert_eq!((a.tokens, a.last), (b.tokens, b.last));
                if da.is_none() {
                    a.on_sent(bytes);
                    b.on_sent(bytes);
                }
            }
        }
    }

    #[test]
    fn tokens_are_capped() {
        let mut p = Pacer::new(1000);
        let rate = Bandwidth::from_mbps(8);
        p.delay(Instant::ZERO, rate, 0);
        p.delay(Instant::from_nanos(10_000_000_000), rate, 0);
        assert_eq!(p.tokens, BURST_PACKETS * 1000);
    }
}
