//! Guarantees from a path's window: seed 000, section V.B, Lemma 1 and
//! Lemma 2 (proofs in the appendix), as methods on [`SlidingWindow`].
//!
//! Notation as in the seed: s is the packet size, t_w the scheduling window,
//! x the packets a stream needs served per window, b the available
//! bandwidth, b0 = x·s/t_w the rate that serves exactly x packets, F the
//! bandwidth distribution and M\[b0\] the partial expectation (see below).
//!
//! - **Lemma 1.** x packets are served in t_w with probability
//!   P = P{b ≥ b0}. The seed writes 1 − F(b0) with F(b) = P{b ∈ (0, b)} —
//!   an open interval, so F(b0) counts only rates strictly below b0, and a
//!   path at exactly b0 does serve x packets. Here:
//!   [`probability_at_least(b0)`](SlidingWindow::probability_at_least) =
//!   fraction of samples ≥ b0 = 1 − F(b0−). Inverted:
//!   [`rate_at_probability(P)`](SlidingWindow::rate_at_probability) =
//!   F⁻¹(1 − P) (the lower order statistic of
//!   [`SlidingWindow::quantile`]); the two agree in that
//!   `probability_at_least(rate_at_probability(P)) ≥ P` always holds
//!   (samples at ranks ⌈(1−P)N⌉ … N are all ≥ the promised rate, and there
//!   are N − ⌈(1−P)N⌉ + 1 > P·N of them).
//! - **Lemma 2.** Z = max(0, x − b·t_w/s) packets miss per window and
//!   E\[Z\] = x·F(b0) − (t_w/s)·M\[b0\]. The proof integrates
//!   ∫_{−∞}^{b0} b f(b) db, so M\[b0\] = E\[b·1{b ≤ b0}\] — the *partial*
//!   expectation, not the conditional mean "of b for all b ≤ b0" that the
//!   lemma's wording suggests (that would overstate E\[Z\] by a factor of
//!   roughly 1/F(b0) in the second term). Whether F counts b = b0 does not
//!   matter here: a sample at b0 contributes x − b0·t_w/s = 0.
//!   [`expected_shortfall`](SlidingWindow::expected_shortfall) computes the
//!   lemma exactly in integers, as (t_w/s)·Σ_{bᵢ ≤ b0}(b0 − bᵢ)/N, which is
//!   the same quantity rearranged; a test checks it against the formula
//!   and against a direct average of Z over the samples.
//!
//! Units: [`Bandwidth`] is in bit/s and the packet size in bytes, so
//! x = rate·t_w / (8·s) and (t_w/s)·M\[b0\] uses M in bytes/s = bit/s ÷ 8.
//! x is kept real (not rounded to whole packets).

use super::SlidingWindow;
use crate::{Bandwidth, Duration};

/// x of Lemma 2: the packets of `packet_size` bytes that `rate` fills in
/// `window` (real-valued). A `packet_size` of 0 is read as 1 byte.
pub fn required_packets(rate: Bandwidth, window: Duration, packet_size: u64) -> f64 {
    let s = packet_size.max(1) as f64;
    rate.bps() as f64 * window.as_secs_f64() / (8.0 * s)
}

impl SlidingWindow {
    /// The largest rate the path gives with probability at least `p`:
    /// b = F⁻¹(1 − p) (Lemma 1 inverted; see the [module docs](super::guarantee)).
    ///
    /// `None` on an empty window or when `p` is NaN or outside [0, 1].
    /// `p = 1` gives the smallest sample, `p = 0` the largest.
    pub fn rate_at_probability(&self, p: f64) -> Option<Bandwidth> {
        if !(0.0..=1.0).contains(&p) {
            return None;
        }
        self.quantile(1.0 - p)
    }

    /// P{b ≥ rate}: the fraction of samples at or above `rate`, i.e.
    /// 1 − F(rate−), the P of Lemma 1 for b0 = `rate`.
    ///
    /// 0.0 on an empty window (nothing can be promised without evidence);
    /// 1.0 for a zero rate on a non-empty window.
    pub fn probability_at_least(&self, rate: Bandwidth) -> f64 {
        if self.is_empty() {
            return 0.0;
        }
        (self.len() - self.count_lt(rate)) as f64 / self.len() as f64
    }

    /// E\[Z\] of Lemma 2: the expected number of packets (of `packet_size`
    /// bytes) per scheduling `window` that a stream needing `rate` fails to
    /// get, i.e. E\[max(0, x − b·t_w/s)\] with x = rate·t_w/(8·s), which
    /// equals x·F(b0) − (t_w/s)·M\[b0\] with M the partial expectation
    /// ([`SlidingWindow::partial_mean`]).
    ///
    /// An empty window is taken as a path with no capacity: the result is
    /// x (every packet misses). A `packet_size` of 0 is read as 1 byte.
    ///
    /// # Example
    /// ```
    /// use braid_core::{estimate::SlidingWindow, Bandwidth, Duration};
    /// let mut w = SlidingWindow::new(5);
    /// for mbps in [2, 4, 6, 8, 10] {
    ///     w.push(Bandwidth::from_mbps(mbps));
    /// }
    /// let ez = w.expected_shortfall(Bandwidth::from_mbps(6), Duration::from_secs(1), 1500);
    /// assert!((ez - 100.0).abs() < 1e-9);
    /// ```
    pub fn expected_shortfall(&self, rate: Bandwidth, window: Duration, packet_size: u64) -> f64 {
        let x = required_packets(rate, window, packet_size);
        if self.is_empty() {
            return x;
        }
        let count = self.count_le(rate) as u128;
        let sum = self.sum_le(rate);
        // Every counted sample is ≤ rate, so the deficit is ≥ 0 and exact;
        // rate·count < 2^64·2^24 fits in u128.
        let deficit_bps = u128::from(rate.bps()) * count - sum;
        let s = packet_size.max(1) as f64;
        (deficit_bps as f64 / self.len() as f64) * window.as_secs_f64() / (8.0 * s)
    }

    /// The largest rate whose [`expected_shortfall`](Self::expected_shortfall)
    /// stays at or below `max_missed` packets per window — the rate a
    /// "violation bounded" stream can be given on this path.
    ///
    /// `None` on an empty window or when `max_missed` is NaN or negative.
    /// E\[Z\] grows with the rate, so this is a binary search (64 steps of
    /// O(log N)).
    pub fn max_rate_for_shortfall(
        &self,
        max_missed: f64,
        window: Duration,
        packet_size: u64,
    ) -> Option<Bandwidth> {
        if self.is_empty() || max_missed.is_nan() || max_missed < 0.0 {
            return None;
        }
        let ok = |r: u64| {
            self.expected_shortfall(Bandwidth::from_bps(r), window, packet_size) <= max_missed
        };
        let (mut lo, mut hi) = (0u64, u64::MAX);
        if ok(hi) {
            return Some(Bandwidth::MAX);
        }
        // Invariant: ok(lo) (E[Z] at rate 0 is 0) and !ok(hi).
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if ok(mid) {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        Some(Bandwidth::from_bps(lo))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn window_of(mbps: &[u64]) -> SlidingWindow {
        let mut w = SlidingWindow::new(mbps.len().max(1));
        for &m in mbps {
            w.push(Bandwidth::from_mbps(m));
        }
        w
    }

    /// Hand-computed Lemma 2 example.
    ///
    /// Samples {2, 4, 6, 8, 10} Mbit/s; the stream needs b0 = 6 Mbit/s;
    /// t_w = 1 s; s = 1500 bytes = 12 000 bit.
    /// - x = 6e6 · 1 / 12 000 = 500 packets.
    /// - F(b0) = #{2, 4, 6} / 5 = 0.6.
    /// - M[b0] = (2 + 4 + 6) / 5 = 2.4 Mbit/s = 300 000 bytes/s (partial
    ///   expectation: divided by N = 5, not by the 3 samples ≤ b0).
    /// - (t_w/s)·M[b0] = 300 000 / 1500 = 200 packets.
    /// - E[Z] = 500 · 0.6 − 200 = 100 packets.
    ///
    /// Directly: Z per sample = (6 − b)·1e6/12 000 for b < 6, i.e. 333.33…,
    /// 166.66…, 0, 0, 0, whose average is 500 / 5 = 100.
    #[test]
    fn lemma2_hand_computed() {
        let w = window_of(&[2, 4, 6, 8, 10]);
        let b0 = Bandwidth::from_mbps(6);
        let tw = Duration::from_secs(1);
        assert_eq!(required_packets(b0, tw, 1500), 500.0);
        assert_eq!(w.cdf(b0), 0.6);
        assert_eq!(w.partial_mean(b0), 2.4e6);
        let formula = 500.0 * w.cdf(b0) - (1.0 / 1500.0) * (w.partial_mean(b0) / 8.0);
        assert!((formula - 100.0).abs() < 1e-9, "{formula}");
        let ez = w.expected_shortfall(b0, tw, 1500);
        assert!((ez - 100.0).abs() < 1e-9, "{ez}");
        // The conditional-mean reading (mean of {2, 4, 6} = 4 Mbit/s =
        // 500 000 B/s) would give 300 − 500 000/1500 = −33.3: impossible,
        // as Z ≥ 0.
        let cond = w.conditional_mean_le(b0).unwrap();
        assert!(500.0 * 0.6 - (cond / 8.0) / 1500.0 < 0.0);
    }

    #[test]
    fn lemma1_probabilities() {
        let w = window_of(&[1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
        // P = 0.9 → F⁻¹(0.1) = 1st smallest of 10.
        assert_eq!(w.rate_at_probability(0.9), Some(Bandwidth::from_mbps(1)));
        assert_eq!(w.rate_at_probability(0.8), Some(Bandwidth::from_mbps(2)));
        assert_eq!(w.rate_at_probability(1.0), Some(Bandwidth::from_mbps(1)));
        assert_eq!(w.rate_at_probability(0.0), Some(Bandwidth::from_mbps(10)));
        assert_eq!(w.rate_at_probability(f64::NAN), None);
        assert_eq!(w.rate_at_probability(1.01), None);
        // A path at exactly the needed rate serves it: ≥, not >.
        assert_eq!(w.probability_at_least(Bandwidth::from_mbps(2)), 0.9);
        assert_eq!(w.probability_at_least(Bandwidth::from_bps(2_000_001)), 0.8);
        assert_eq!(w.probability_at_least(Bandwidth::ZERO), 1.0);
        assert_eq!(w.probability_at_least(Bandwidth::from_mbps(11)), 0.0);
        let empty = SlidingWindow::new(3);
        assert_eq!(empty.probability_at_least(Bandwidth::ZERO), 0.0);
        assert_eq!(empty.rate_at_probability(0.5), None);
    }

    #[test]
    fn shortfall_edges() {
        let empty = SlidingWindow::new(3);
        let r = Bandwidth::from_mbps(12);
        let tw = Duration::from_millis(100);
        assert_eq!(empty.expected_shortfall(r, tw, 1500), 100.0);
        let w = window_of(&[5, 5]);
        assert_eq!(w.expected_shortfall(Bandwidth::ZERO, tw, 1500), 0.0);
        assert_eq!(w.expected_shortfall(Bandwidth::from_mbps(5), tw, 1500), 0.0);
        assert!(w.expected_shortfall(r, tw, 0).is_finite());
        assert_eq!(
            w.max_rate_for_shortfall(0.0, tw, 1500),
            Some(Bandwidth::from_mbps(5))
        );
        assert_eq!(w.max_rate_for_shortfall(f64::NAN, tw, 1500), None);
        assert_eq!(empty.max_rate_for_shortfall(1.0, tw, 1500), None);
        assert_eq!(
            w.max_rate_for_shortfall(f64::INFINITY, tw, 1500),
            Some(Bandwidth::MAX)
        );
        // E[Z] at +1 Mbit/s over 5: x = 1e6·0.1/12 000 = 8.33 packets more.
        let r6 = w.max_rate_for_shortfall(8.0, tw, 1500).unwrap();
        assert!(w.expected_shortfall(r6, tw, 1500) <= 8.0);
        assert!(w.expected_shortfall(r6.saturating_add(Bandwidth::from_bps(1)), tw, 1500) > 8.0);
    }

    proptest! {
        /// E[Z] equals the direct average of max(0, x − b·t_w/s) over the
        /// samples, and the lemma's formula x·F(b0) − (t_w/s)·M[b0].
        #[test]
        fn shortfall_matches_direct_average(
            samples in prop::collection::vec(0u64..200_000_000, 1..60),
            rate in 0u64..200_000_000,
            tw_ms in 1u64..5_000,
            s in 1u64..9_000,
        ) {
            let mut w = SlidingWindow::new(samples.len());
            for &v in &samples {
                w.push(Bandwidth::from_bps(v));
            }
            let rate = Bandwidth::from_bps(rate);
            let tw = Duration::from_millis(tw_ms);
            let x = required_packets(rate, tw, s);
            let direct: f64 = samples
                .iter()
                .map(|&b| (x - b as f64 * tw.as_secs_f64() / (8.0 * s as f64)).max(0.0))
                .sum::<f64>()
                / samples.len() as f64;
            let formula = x * w.cdf(rate)
                - (tw.as_secs_f64() / s as f64) * (w.partial_mean(rate) / 8.0);
            let ez = w.expected_shortfall(rate, tw, s);
            let tol = 1e-9 * x.max(1.0);
            prop_assert!((ez - direct).abs() <= tol, "ez {} direct {}", ez, direct);
            prop_assert!((ez - formula).abs() <= tol, "ez {} formula {}", ez, formula);
            prop_assert!(ez >= 0.0);
        }

        /// The promise of Lemma 1 inverted is kept on the window itself.
        #[test]
        fn promise_is_kept_in_sample(
            samples in prop::collection::vec(0u64..1_000, 1..80),
            p in 0.0f64..=1.0,
        ) {
            let mut w = SlidingWindow::new(samples.len());
            for &v in &samples {
                w.push(Bandwidth::from_bps(v));
            }
            let b = w.rate_at_probability(p).unwrap();
            prop_assert!(w.probability_at_least(b) >= p - 1e-12);
        }
    }
}
