//! FAST (Wei, Jin, Low and Hegde, IEEE/ACM ToN 2006): a delay-based window
//! rule for paths that carry guarantees.
//!
//! A loss-based controller (CUBIC, NewReno) grows its window until the
//! bottleneck queue overflows, so the queueing delay swings between empty
//! and full every loss epoch and every packet of the path — a guarantee's
//! too — rides those swings. FAST aims instead at `alpha` packets queued
//! at the bottleneck: once per round trip
//!
//! ```text
//! w ← min(2w, (1 − γ) w + γ (baseRTT / RTT · w + α))
//! ```
//!
//! with `baseRTT` the smallest RTT seen (the path's propagation delay) and
//! `RTT` the smoothed one. At equilibrium `w (1 − baseRTT/RTT) = α`: the
//! flow keeps α packets in the queue, whatever the capacity, and follows a
//! capacity change within a few round trips (the update is proportional,
//! not one packet per RTT as Vegas's). A loss still halves the window
//! (through [`WindowController`](super::congestion::WindowController),
//! once per recovery epoch). The price: against loss-based flows on the
//! same bottleneck FAST yields (it backs off at a queue they keep filling),
//! so it is for paths whose traffic is braid's own or reserved — not the
//! default. Main type: [`Fast`], a [`WindowRule`].

use super::congestion::WindowRule;
use super::rtt::RttEstimator;
use crate::time::Instant;

/// FAST's window rule.
#[derive(Debug, Clone)]
pub struct Fast {
    alpha_packets: f64,
    gamma: f64,
    next_update: Option<Instant>,
}

impl Fast {
    /// Packets kept queued at the bottleneck (α).
    pub const ALPHA_PACKETS: f64 = 20.0;
    /// Step toward the target per RTT (γ).
    pub const GAMMA: f64 = 0.5;

    /// FAST with α = [`Fast::ALPHA_PACKETS`], γ = [`Fast::GAMMA`].
    pub fn new() -> Self {
        Fast {
            alpha_packets: Self::ALPHA_PACKETS,
            gamma: Self::GAMMA,
            next_update: None,
        }
    }

    /// The window one update makes of `cwnd` (bytes), given the RTTs.
    fn target(&self, cwnd: u64, mss: u64, rtt: &RttEstimator) -> u64 {
        let base = rtt.min().as_secs_f64();
        let now = rtt.srtt().as_secs_f64();
        if base <= 0.0 || now <= 0.0 {
            return cwnd;
        }
        let w = cwnd as f64;
        let aim = (base / now).min(1.0) * w + self.alpha_packets * mss as f64;
        let next = (1.0 - self.gamma) * w + self.gamma * aim;
        next.min(2.0 * w) as u64
    }
}

impl Default for Fast {
    fn default() -> Self {
        Self::new()
    }
}

impl WindowRule for Fast {
    fn increase(
        &mut self,
        now: Instant,
        cwnd: u64,
        _acked: u64,
        mss: u64,
        rtt: &RttEstimator,
    ) -> u64 {
        if !rtt.has_sample() || self.next_update.is_some_and(|t| now < t) {
            return cwnd;
        }
        self.next_update = Some(now + rtt.srtt());
        self.target(cwnd, mss, rtt)
    }

    fn decrease(&mut self, _now: Instant, cwnd: u64, _mss: u64) -> u64 {
        self.next_update = None;
        cwnd / 2
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::Duration;

    fn rtt(base_ms: u64, now_ms: u64) -> RttEstimator {
        let mut r = RttEstimator::new(Duration::from_millis(base_ms));
        r.update(Duration::from_millis(base_ms), Duration::ZERO);
        for _ in 0..64 {
            r.update(Duration::from_millis(now_ms), Duration::ZERO);
        }
        r
    }

    #[test]
    fn keeps_alpha_packets_queued_at_equilibrium() {
        let f = Fast::new();
        let mss = 1000;
        // No queue (RTT = base): grows by γ·α packets per RTT.
        let r = rtt(40, 40);
        assert_eq!(f.target(100_000, mss, &r), 110_000);
        // RTT twice the base: the window that keeps α packets queued is
        // 2α; a larger window shrinks toward it, a smaller one grows.
        let r = rtt(40, 80);
        let eq = (2.0 * Fast::ALPHA_PACKETS) as u64 * mss;
        assert!(f.target(4 * eq, mss, &r) < 4 * eq);
        assert!(f.target(eq / 2, mss, &r) > eq / 2);
        let near = f.target(eq, mss, &r);
        assert!(near.abs_diff(eq) <= mss, "{near} vs {eq}");
        // Never more than doubling.
        assert!(f.target(1_000, mss, &rtt(40, 40)) <= 2_000);
    }

    #[test]
    fn updates_once_per_round_trip_and_halves_on_loss() {
        let mut f = Fast::new();
        let r = rtt(40, 40);
        let t0 = Instant::ZERO + Duration::from_secs(1);
        let w1 = f.increase(t0, 100_000, 1000, 1000, &r);
        assert!(w1 > 100_000);
        // Within the same RTT nothing changes.
        assert_eq!(
            f.increase(t0 + Duration::from_millis(10), w1, 1000, 1000, &r),
            w1
        );
        let w2 = f.increase(t0 + Duration::from_millis(41), w1, 1000, 1000, &r);
        assert!(w2 > w1);
        assert_eq!(f.decrease(t0, w2, 1000), w2 / 2);
    }
}
