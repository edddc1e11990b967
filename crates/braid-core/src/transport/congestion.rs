//! Congestion control behind a trait.
//!
//! Main types: [`CongestionController`] (what the connection calls),
//! [`WindowController`] (generic window bookkeeping: slow start, one
//! reduction per recovery epoch, no growth while application-limited) over
//! a [`WindowRule`] (the increase/decrease rule alone: [`Aimd`] for
//! NewReno-style AIMD, [`Cubic`] for RFC 9438 CUBIC, the default), and
//! [`FixedRate`] for reserved capacity (seed 004, later).
//!
//! Invariants: the window is always within
//! `[MIN_WINDOW_PACKETS · mss, MAX_WINDOW]`; a loss of a packet sent before
//! the current recovery epoch began does not reduce the window again.
//!
//! Seed 002 §2 says IQ-RUDP's control "resembles LDA", a TCP-friendly AIMD.
//! The default here is CUBIC, which is TCP-friendly by construction (its
//! Reno-friendly region) and is what the Linux TCP flows braid shares
//! links with run; on a simulated 20 Mbit/s, 30 ms, 1 % random-loss path
//! it reaches the Reno model's rate where plain NewReno AIMD stays about
//! 20 % below it (crates/braid-sim/tests/rudp.rs). [`CongestionController::scale_window`]
//! is how the coordination rules of seed 002 §3 re-adjust the window.

use super::rtt::RttEstimator;
use crate::time::{Duration, Instant};
use crate::units::Bandwidth;
use core::fmt::Debug;

/// Smallest window, in packets.
pub const MIN_WINDOW_PACKETS: u64 = 2;
/// Initial window, in packets (RFC 6928).
pub const INITIAL_WINDOW_PACKETS: u64 = 10;
/// Largest window in bytes (1 GiB).
pub const MAX_WINDOW: u64 = 1 << 30;
/// Pacing rate as a multiple of window/RTT (in percent), so that pacing
/// never holds back a window's worth of data for a whole RTT.
pub const PACING_GAIN_PERCENT: u64 = 125;

/// The interface the connection uses; implementations decide the window
/// and pacing rate from acknowledgements and losses.
pub trait CongestionController: Debug + Send {
    /// `bytes` acknowledged, of a packet sent at `sent_time`.
    fn on_ack(
        &mut self,
        now: Instant,
        sent_time: Instant,
        bytes: u64,
        app_limited: bool,
        rtt: &RttEstimator,
    );
    /// `bytes` declared lost, the latest of them sent at `sent_time`.
    fn on_loss(&mut self, now: Instant, sent_time: Instant, bytes: u64);
    /// Persistent congestion (RFC 9002 §7.6): everything sent over several
    /// probe timeouts was lost. Window-based controllers collapse to the
    /// minimum window; the default does nothing.
    fn on_persistent_congestion(&mut self, _now: Instant) {}
    /// The congestion window in bytes.
    fn window(&self) -> u64;
    /// The rate at which to pace packets.
    fn pacing_rate(&self, rtt: &RttEstimator) -> Bandwidth;
    /// Multiplies the window by `factor` (clamped to the window bounds):
    /// the hook for seed 002's coordinated re-adjustments.
    fn scale_window(&mut self, factor: f64);
    /// True while in slow start.
    fn in_slow_start(&self) -> bool {
        false
    }
}

/// The increase/decrease rule of a window-based controller, apart from the
/// generic bookkeeping in [`WindowController`].
pub trait WindowRule: Debug + Send {
    /// The new window after `acked` bytes are acknowledged in congestion
    /// avoidance.
    fn increase(
        &mut self,
        now: Instant,
        cwnd: u64,
        acked: u64,
        mss: u64,
        rtt: &RttEstimator,
    ) -> u64;
    /// The new window after a congestion event at `now`.
    fn decrease(&mut self, now: Instant, cwnd: u64, mss: u64) -> u64;
}

/// Additive increase (`alpha` packets per window per RTT), multiplicative
/// decrease by `beta` (NewReno: alpha 1, beta 0.5).
#[derive(Debug, Clone)]
pub struct Aimd {
    alpha: f64,
    beta: f64,
    acked_accum: u64,
}

impl Aimd {
    /// NewReno's rule (alpha = 1, beta = 0.5).
    pub fn new_reno() -> Self {
        Aimd {
            alpha: 1.0,
            beta: 0.5,
            acked_accum: 0,
        }
    }
}

impl WindowRule for Aimd {
    fn increase(&mut self, _: Instant, cwnd: u64, acked: u64, mss: u64, _: &RttEstimator) -> u64 {
        self.acked_accum += acked;
        // One increase of `mss` per `cwnd / alpha` bytes acknowledged.
        let per = ((cwnd as f64 / self.alpha) as u64).max(1);
        if self.acked_accum >= per {
            self.acked_accum -= per;
            cwnd + mss
        } else {
            cwnd
        }
    }
    fn decrease(&mut self, _: Instant, cwnd: u64, _: u64) -> u64 {
        self.acked_accum = 0;
        (cwnd as f64 * self.beta) as u64
    }
}

/// CUBIC (RFC 9438): `W(t) = C (t − K)³ + W_max` in packets, with the
/// Reno-friendly estimate as a floor.
#[derive(Debug, Clone)]
pub struct Cubic {
    w_max: f64,
    k: f64,
    epoch_start: Option<Instant>,
    reno: Aimd,
    w_est: u64,
}

impl Cubic {
    const C: f64 = 0.4;
    const BETA: f64 = 0.7;

    /// A CUBIC rule with RFC 9438's constants (C = 0.4, β = 0.7); the
    /// Reno-friendly estimate grows by α = 3(1 − β)/(1 + β) per RTT.
    pub fn new() -> Self {
        Cubic {
            w_max: 0.0,
            k: 0.0,
            epoch_start: None,
            reno: Aimd {
                alpha: 3.0 * (1.0 - Self::BETA) / (1.0 + Self::BETA),
                beta: Self::BETA,
                acked_accum: 0,
            },
            w_est: 0,
        }
    }
}

impl Default for Cubic {
    fn default() -> Self {
        Self::new()
    }
}

impl WindowRule for Cubic {
    fn increase(
        &mut self,
        now: Instant,
        cwnd: u64,
        acked: u64,
        mss: u64,
        rtt: &RttEstimator,
    ) -> u64 {
        let start = *self.epoch_start.get_or_insert_with(|| {
            self.w_est = cwnd;
            now
        });
        if self.w_max <= 0.0 {
            self.w_max = cwnd as f64 / mss as f64;
        }
        let t = (now - start + rtt.srtt()).as_secs_f64();
        let target_pkts = Self::C * (t - self.k).powi(3) + self.w_max;
        let target = (target_pkts * mss as f64).max(0.0) as u64;
        self.w_est = self
            .reno
            .increase(now, self.w_est.max(cwnd), acked, mss, rtt);
        let cubic = if target > cwnd {
            // Grow by at most half the window per RTT worth of acks.
            cwnd + ((target - cwnd) * acked / cwnd.max(1)).min(acked / 2 + 1)
        } else {
            cwnd
        };
        cubic.max(self.w_est)
    }

    fn decrease(&mut self, now: Instant, cwnd: u64, mss: u64) -> u64 {
        let w = cwnd as f64 / mss as f64;
        // Fast convergence (RFC 9438 §4.7, on by default in Linux): a loss
        // below the last W_max means the flow is losing ground to others
        // (or to random loss), so aim lower and release bandwidth sooner.
        // Without it, one braid CUBIC flow took 63 % of a 20 Mbit/s, 100 ms
        // link from a Linux CUBIC flow; with it, 51 % (docs/bench-rudp.md,
        // issue 11).
        self.w_max = if w < self.w_max {
            w * (1.0 + Self::BETA) / 2.0
        } else {
            w
        };
        self.k = (self.w_max * (1.0 - Self::BETA) / Self::C).cbrt();
        self.epoch_start = Some(now);
        let new = (cwnd as f64 * Self::BETA) as u64;
        self.w_est = new;
        new
    }
}

/// Generic window bookkeeping over a [`WindowRule`].
#[derive(Debug, Clone)]
pub struct WindowController<R> {
    rule: R,
    mss: u64,
    cwnd: u64,
    ssthresh: u64,
    recovery_start: Option<Instant>,
}

impl<R: WindowRule> WindowController<R> {
    /// A controller for packets of up to `mss` bytes.
    pub fn new(rule: R, mss: u64) -> Self {
        let mss = mss.max(1);
        WindowController {
            rule,
            mss,
            cwnd: INITIAL_WINDOW_PACKETS * mss,
            ssthresh: u64::MAX,
            recovery_start: None,
        }
    }

    fn clamp(&self, w: u64) -> u64 {
        w.clamp(MIN_WINDOW_PACKETS * self.mss, MAX_WINDOW)
    }

    fn in_recovery(&self, sent_time: Instant) -> bool {
        self.recovery_start.is_some_and(|r| sent_time <= r)
    }
}

/// NewReno: slow start, then AIMD.
pub type NewReno = WindowController<Aimd>;

impl NewReno {
    /// A NewReno controller for packets of up to `mss` bytes.
    pub fn new_reno(mss: u64) -> Self {
        WindowController::new(Aimd::new_reno(), mss)
    }
}

impl<R: WindowRule> CongestionController for WindowController<R> {
    fn on_ack(
        &mut self,
        now: Instant,
        sent_time: Instant,
        bytes: u64,
        app_limited: bool,
        rtt: &RttEstimator,
    ) {
        if app_limited || self.in_recovery(sent_time) {
            return;
        }
        let next = if self.cwnd < self.ssthresh {
            self.cwnd + bytes
        } else {
            self.rule.increase(now, self.cwnd, bytes, self.mss, rtt)
        };
        self.cwnd = self.clamp(next);
    }

    fn on_loss(&mut self, now: Instant, sent_time: Instant, _bytes: u64) {
        if self.in_recovery(sent_time) {
            return;
        }
        self.recovery_start = Some(now);
        let reduced = self.rule.decrease(now, self.cwnd, self.mss);
        self.cwnd = self.clamp(reduced);
        self.ssthresh = self.cwnd;
    }

    fn on_persistent_congestion(&mut self, now: Instant) {
        self.cwnd = MIN_WINDOW_PACKETS * self.mss;
        self.recovery_start = Some(now);
    }

    fn window(&self) -> u64 {
        self.cwnd
    }

    fn pacing_rate(&self, rtt: &RttEstimator) -> Bandwidth {
        let srtt = rtt.srtt().max(Duration::from_micros(1));
        Bandwidth::from_delivery(self.cwnd, srtt).mul_f64(PACING_GAIN_PERCENT as f64 / 100.0)
    }

    fn scale_window(&mut self, factor: f64) {
        if factor.is_finite() && factor > 0.0 {
            self.cwnd = self.clamp((self.cwnd as f64 * factor) as u64);
            // Outside slow start the scaled window is the new threshold, so
            // the controller stays in congestion avoidance from there.
            if self.ssthresh != u64::MAX {
                self.ssthresh = self.cwnd;
            }
        }
    }

    fn in_slow_start(&self) -> bool {
        self.cwnd < self.ssthresh
    }
}

/// Sends at a fixed rate regardless of acks and losses (for reserved
/// capacity). The window allows two round trips at that rate.
#[derive(Debug, Clone)]
pub struct FixedRate {
    rate: Bandwidth,
    mss: u64,
    srtt: Duration,
}

impl FixedRate {
    /// A controller pinned at `rate`.
    pub fn new(rate: Bandwidth, mss: u64) -> Self {
        FixedRate {
            rate,
            mss: mss.max(1),
            srtt: Duration::from_millis(100),
        }
    }
}

impl CongestionController for FixedRate {
    fn on_ack(&mut self, _: Instant, _: Instant, _: u64, _: bool, rtt: &RttEstimator) {
        self.srtt = rtt.srtt();
    }
    fn on_loss(&mut self, _: Instant, _: Instant, _: u64) {}
    fn window(&self) -> u64 {
        self.rate
            .bytes_in(self.srtt * 2)
            .clamp(MIN_WINDOW_PACKETS * self.mss, MAX_WINDOW)
    }
    fn pacing_rate(&self, _: &RttEstimator) -> Bandwidth {
        self.rate
    }
    /// A reservation's rate is not the transport's to change: no-op.
    fn scale_window(&mut self, _: f64) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    const MSS: u64 = 1000;

    fn rtt() -> RttEstimator {
        let mut r = RttEstimator::new(Duration::from_millis(100));
        r.update(Duration::from_millis(100), Duration::ZERO);
        r
    }

    #[test]
    fn cubic_fast_convergence_aims_lower_after_a_loss_below_w_max() {
        let mut c = Cubic::new();
        let t = Instant::ZERO;
        assert_eq!(c.decrease(t, 100 * MSS, MSS), 70 * MSS);
        assert_eq!(c.w_max, 100.0);
        // The next loss comes at 80 packets, below W_max = 100: the flow is
        // losing ground, so W_max = 80 (1 + 0.7) / 2 = 68, not 80.
        c.decrease(t + Duration::from_secs(1), 80 * MSS, MSS);
        assert!((c.w_max - 68.0).abs() < 1e-9, "{}", c.w_max);
        // A loss above W_max sets it to the window as before.
        c.decrease(t + Duration::from_secs(2), 120 * MSS, MSS);
        assert_eq!(c.w_max, 120.0);
    }

    #[test]
    fn slow_start_then_halving_once_per_epoch() {
        let mut c = NewReno::new_reno(MSS);
        let t0 = Instant::ZERO;
        assert_eq!(c.window(), 10 * MSS);
        c.on_ack(t0, t0, 5 * MSS, false, &rtt());
        assert_eq!(c.window(), 15 * MSS);
        let t1 = t0 + Duration::from_millis(10);
        c.on_loss(t1, t0, MSS);
        assert_eq!(c.window(), 7500);
        // A second loss from the same flight does not halve again.
        c.on_loss(t1 + Duration::from_millis(1), t0, MSS);
        assert_eq!(c.window(), 7500);
        assert!(!c.in_slow_start());
        // Acks of packets sent before recovery do not grow the window.
        c.on_ack(t1, t0, MSS, false, &rtt());
        assert_eq!(c.window(), 7500);
    }

    #[test]
    fn congestion_avoidance_adds_one_packet_per_window() {
        let mut c = NewReno::new_reno(MSS);
        let t0 = Instant::ZERO;
        c.on_loss(t0, t0, MSS); // cwnd 5000, ssthresh 5000
        let t1 = t0 + Duration::from_millis(1);
        for _ in 0..5 {
            c.on_ack(t1, t1, MSS, false, &rtt());
        }
        assert_eq!(c.window(), 6000);
    }

    #[test]
    fn persistent_congestion_collapses_to_the_minimum() {
        let mut c = NewReno::new_reno(MSS);
        c.on_ack(Instant::ZERO, Instant::ZERO, 40 * MSS, false, &rtt());
        c.on_persistent_congestion(Instant::ZERO);
        assert_eq!(c.window(), MIN_WINDOW_PACKETS * MSS);
        let mut f = FixedRate::new(Bandwidth::from_mbps(8), MSS);
        let w = f.window();
        f.on_persistent_congestion(Instant::ZERO);
        assert_eq!(f.window(), w, "a reservation ignores it");
    }

    #[test]
    fn app_limited_acks_do_not_grow() {
        let mut c = NewReno::new_reno(MSS);
        c.on_ack(Instant::ZERO, Instant::ZERO, 50 * MSS, true, &rtt());
        assert_eq!(c.window(), 10 * MSS);
    }

    #[test]
    fn window_stays_in_bounds() {
        let mut c = NewReno::new_reno(MSS);
        for i in 0..20 {
            let t = Instant::from_nanos(i * 1_000_000_000);
            c.on_loss(t, t, MSS);
        }
        assert_eq!(c.window(), MIN_WINDOW_PACKETS * MSS);
        c.scale_window(1e12);
        assert_eq!(c.window(), MAX_WINDOW);
        c.scale_window(f64::NAN);
        assert_eq!(c.window(), MAX_WINDOW);
    }

    #[test]
    fn cubic_reduces_by_beta_and_regrows() {
        let mut c = WindowController::new(Cubic::new(), MSS);
        let t0 = Instant::ZERO;
        c.on_loss(t0, t0, MSS);
        assert_eq!(c.window(), 7000);
        let mut t = t0;
        for _ in 0..200 {
            t += Duration::from_millis(10);
            c.on_ack(t, t, MSS, false, &rtt());
        }
        assert!(c.window() > 7000);
    }

    #[test]
    fn pacing_is_window_over_rtt_with_gain() {
        let c = NewReno::new_reno(MSS);
        // 10 000 bytes / 100 ms = 800 kbit/s; × 1.25 = 1 Mbit/s.
        assert_eq!(c.pacing_rate(&rtt()), Bandwidth::from_mbps(1));
        let f = FixedRate::new(Bandwidth::from_mbps(8), MSS);
        assert_eq!(f.pacing_rate(&rtt()), Bandwidth::from_mbps(8));
        assert_eq!(f.window(), 200_000);
    }
}
