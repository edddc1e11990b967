//! Path views: what the scheduler knows about one path.
//!
//! [`PathDistribution`] is the scheduler's narrow view of a path's available
//! bandwidth distribution F (seed 000 §IV and §V-A): the guarantee at
//! probability P (`F⁻¹(1 − P)`), the probability of at least a rate, and the
//! expected shortfall `E[(r − B)⁺]` that Lemma 2 needs. The estimate module's
//! sliding window implements it; [`EmpiricalDistribution`] is a sorted-sample
//! implementation used by tests, benches and the simulator.
//!
//! A [`PathView`] is a distribution plus the path's RTT and packet loss.
//! What a path can still
//! promise at P is its guarantee at P minus what is already mapped onto it;
//! the mapper ([`super::mapping`]) tightens this further (see there).
//!
//! Conventions (empirical, n samples b_0 ≤ … ≤ b_{n−1}):
//! `probability_at_least(r) = #{b_k ≥ r}/n`, and `rate_at_probability(p)` is
//! the largest sample r with `probability_at_least(r) ≥ p`, so
//! `probability_at_least(rate_at_probability(p)) ≥ p` always holds.

use crate::time::Duration;
use crate::units::Bandwidth;
use core::fmt;
use std::sync::Arc;

/// A path's available-bandwidth distribution, as the scheduler reads it.
pub trait PathDistribution: fmt::Debug + Send + Sync {
    /// The largest rate r with P(B ≥ r) ≥ `p`, for `p` in \[0, 1\] (p = 1 is
    /// the smallest sample). `None` without samples or for `p` outside \[0, 1\].
    fn rate_at_probability(&self, p: f64) -> Option<Bandwidth>;
    /// P(B ≥ `rate`); 0 without samples.
    fn probability_at_least(&self, rate: Bandwidth) -> f64;
    /// E\[(rate − B)⁺\] in bit/s: the mean shortfall below `rate` (Lemma 2:
    /// `rate·F(rate) − M[rate]` with M the partial expectation).
    fn expected_shortfall_bps(&self, rate: Bandwidth) -> f64;
    /// The mean rate; `None` without samples.
    fn mean(&self) -> Option<Bandwidth>;
    /// Number of samples behind the distribution.
    fn samples(&self) -> usize;
}

/// An empirical distribution over a sorted copy of bandwidth samples.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EmpiricalDistribution {
    /// Samples in bit/s, sorted ascending.
    sorted: Vec<u64>,
    /// Prefix sums of `sorted` (`prefix[k]` = sum of the first k), as u128.
    prefix: Vec<u128>,
}

impl EmpiricalDistribution {
    /// Build from samples in any order.
    pub fn from_samples<I: IntoIterator<Item = Bandwidth>>(samples: I) -> Self {
        let mut sorted: Vec<u64> = samples.into_iter().map(Bandwidth::bps).collect();
        sorted.sort_unstable();
        let mut prefix = Vec::with_capacity(sorted.len() + 1);
        let mut acc: u128 = 0;
        prefix.push(0);
        for &b in &sorted {
            acc += u128::from(b);
            prefix.push(acc);
        }
        EmpiricalDistribution { sorted, prefix }
    }

    /// Build from samples in Mbit/s (test and report convenience).
    pub fn from_mbps(samples: &[f64]) -> Self {
        Self::from_samples(samples.iter().map(|&m| Bandwidth::from_mbps_f64(m)))
    }

    /// A shifted copy: every sample moved by `delta` bit/s (clamped at 0).
    pub fn shifted(&self, delta_bps: i64) -> Self {
        Self::from_samples(
            self.sorted
                .iter()
                .map(|&b| Bandwidth::from_bps(b.saturating_add_signed(delta_bps))),
        )
    }

    /// Index of the first sample ≥ `r`.
    fn first_at_least(&self, r: u64) -> usize {
        self.sorted.partition_point(|&b| b < r)
    }
}

impl PathDistribution for EmpiricalDistribution {
    fn rate_at_probability(&self, p: f64) -> Option<Bandwidth> {
        let n = self.sorted.len();
        if n == 0 || !(0.0..=1.0).contains(&p) {
            return None;
        }
        // Need at least c = ceil(n·p) samples ≥ r; the largest such r is
        // sorted[n − c]. The epsilon keeps 0.95·100 from rounding up to 96.
        let c = ((n as f64 * p) - 1e-9).ceil().max(1.0) as usize;
        let c = c.min(n);
        Some(Bandwidth::from_bps(self.sorted[n - c]))
    }

    fn probability_at_least(&self, rate: Bandwidth) -> f64 {
        let n = self.sorted.len();
        if n == 0 {
            return 0.0;
        }
        (n - self.first_at_least(rate.bps())) as f64 / n as f64
    }

    fn expected_shortfall_bps(&self, rate: Bandwidth) -> f64 {
        let n = self.sorted.len();
        if n == 0 {
            return rate.bps() as f64;
        }
        // Samples strictly below rate: k of them, sum prefix[k].
        let k = self.first_at_least(rate.bps());
        let below = rate.bps() as f64 * k as f64 - self.prefix[k] as f64;
        below / n as f64
    }

    fn mean(&self) -> Option<Bandwidth> {
        let n = self.sorted.len();
        // `prefix` always has n + 1 entries.
        let total = *self.prefix.last()?;
        if n == 0 {
            return None;
        }
        Some(Bandwidth::from_bps(
            u64::try_from(total / n as u128).unwrap_or(u64::MAX),
        ))
    }

    fn samples(&self) -> usize {
        self.sorted.len()
    }
}

/// The estimate module's window, read through the same conventions
/// (its `rate_at_probability` is F⁻¹(1 − p) with the lower order statistic).
impl PathDistribution for crate::estimate::SlidingWindow {
    fn rate_at_probability(&self, p: f64) -> Option<Bandwidth> {
        crate::estimate::SlidingWindow::rate_at_probability(self, p)
    }

    fn probability_at_least(&self, rate: Bandwidth) -> f64 {
        crate::estimate::SlidingWindow::probability_at_least(self, rate)
    }

    fn expected_shortfall_bps(&self, rate: Bandwidth) -> f64 {
        let n = self.len();
        if n == 0 {
            return rate.bps() as f64;
        }
        // Samples equal to `rate` add nothing; every counted sample is ≤ rate.
        let count = self.count_le(rate) as u128;
        let deficit = (u128::from(rate.bps()) * count).saturating_sub(self.sum_le(rate));
        deficit as f64 / n as f64
    }

    fn mean(&self) -> Option<Bandwidth> {
        crate::estimate::SlidingWindow::mean(self).map(Bandwidth::from_bps_f64)
    }

    fn samples(&self) -> usize {
        self.len()
    }
}

impl PathDistribution for crate::estimate::AdaptiveWindow {
    fn rate_at_probability(&self, p: f64) -> Option<Bandwidth> {
        PathDistribution::rate_at_probability(self.window(), p)
    }

    fn probability_at_least(&self, rate: Bandwidth) -> f64 {
        PathDistribution::probability_at_least(self.window(), rate)
    }

    fn expected_shortfall_bps(&self, rate: Bandwidth) -> f64 {
        PathDistribution::expected_shortfall_bps(self.window(), rate)
    }

    fn mean(&self) -> Option<Bandwidth> {
        PathDistribution::mean(self.window())
    }

    fn samples(&self) -> usize {
        self.window().len()
    }
}

/// A distribution with every sample multiplied by `factor` (a path's
/// [`PromiseScale`](crate::estimate::PromiseScale)): B' = c·B, so
/// F'⁻¹(q) = c·F⁻¹(q), P(B' ≥ r) = P(B ≥ r/c) and
/// E\[(r − B')⁺\] = c·E\[(r/c − B)⁺\] — exact, with no copy of the samples.
#[derive(Debug, Clone)]
pub struct ScaledDistribution {
    inner: Arc<dyn PathDistribution>,
    factor: f64,
}

impl ScaledDistribution {
    /// `inner` scaled by `factor`, clamped to \[1e-6, 1\] (NaN reads as 1).
    pub fn new(inner: Arc<dyn PathDistribution>, factor: f64) -> Self {
        let factor = if factor.is_nan() {
            1.0
        } else {
            factor.clamp(1e-6, 1.0)
        };
        ScaledDistribution { inner, factor }
    }

    /// The factor.
    pub fn factor(&self) -> f64 {
        self.factor
    }

    fn unscale(&self, rate: Bandwidth) -> Bandwidth {
        Bandwidth::from_bps_f64(rate.bps() as f64 / self.factor)
    }
}

impl PathDistribution for ScaledDistribution {
    fn rate_at_probability(&self, p: f64) -> Option<Bandwidth> {
        let r = self.inner.rate_at_probability(p)?;
        Some(Bandwidth::from_bps_f64(r.bps() as f64 * self.factor))
    }

    fn probability_at_least(&self, rate: Bandwidth) -> f64 {
        self.inner.probability_at_least(self.unscale(rate))
    }

    fn expected_shortfall_bps(&self, rate: Bandwidth) -> f64 {
        self.factor * self.inner.expected_shortfall_bps(self.unscale(rate))
    }

    fn mean(&self) -> Option<Bandwidth> {
        let m = self.inner.mean()?;
        Some(Bandwidth::from_bps_f64(m.bps() as f64 * self.factor))
    }

    fn samples(&self) -> usize {
        self.inner.samples()
    }
}

/// One path as the scheduler sees it: a distribution, an RTT and a loss
/// ratio.
#[derive(Debug, Clone)]
pub struct PathView {
    /// Available-bandwidth distribution.
    pub distribution: Arc<dyn PathDistribution>,
    /// Smoothed round-trip time.
    pub rtt: Duration,
    /// Share of the path's packets lost (0 to 1), which a violation bound's
    /// E\[Z\] counts beside the capacity shortfall (Lemma 2 has no loss
    /// term; see [`super::mapping`]). 0 unless set with
    /// [`PathView::with_loss`].
    pub loss: f64,
}

impl PathView {
    /// A view from any distribution.
    pub fn new<D: PathDistribution + 'static>(distribution: D, rtt: Duration) -> Self {
        PathView {
            distribution: Arc::new(distribution),
            rtt,
            loss: 0.0,
        }
    }

    /// This view with a packet loss ratio of `loss` (clamped to \[0, 1\];
    /// NaN reads as 0).
    pub fn with_loss(mut self, loss: f64) -> PathView {
        self.loss = if loss.is_nan() {
            0.0
        } else {
            loss.clamp(0.0, 1.0)
        };
        self
    }

    /// The guarantee at `p`: F⁻¹(1 − p), zero without samples.
    pub fn guarantee(&self, p: f64) -> Bandwidth {
        self.distribution
            .rate_at_probability(p)
            .unwrap_or(Bandwidth::ZERO)
    }

    /// What the path can still promise at `p` once `mapped` is on it:
    /// `guarantee(p) − mapped`, or zero.
    pub fn remaining_at(&self, p: f64, mapped: Bandwidth) -> Bandwidth {
        self.guarantee(p).saturating_sub(mapped)
    }

    /// Mean rate, zero without samples.
    pub fn mean(&self) -> Bandwidth {
        self.distribution.mean().unwrap_or(Bandwidth::ZERO)
    }

    /// This view with its distribution scaled by `factor` (see
    /// [`ScaledDistribution`]); the same view when `factor` is 1.
    pub fn scaled(self, factor: f64) -> PathView {
        if factor >= 1.0 || factor.is_nan() {
            return self;
        }
        PathView {
            distribution: Arc::new(ScaledDistribution::new(self.distribution, factor)),
            ..self
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one_to_hundred() -> EmpiricalDistribution {
        EmpiricalDistribution::from_samples((1..=100).map(Bandwidth::from_mbps))
    }

    #[test]
    fn quantile_conventions() {
        let d = one_to_hundred();
        // 95 % of samples are ≥ 6 Mbit/s (6..=100).
        assert_eq!(d.rate_at_probability(0.95), Some(Bandwidth::from_mbps(6)));
        assert_eq!(d.probability_at_least(Bandwidth::from_mbps(6)), 0.95);
        assert_eq!(d.rate_at_probability(1.0), Some(Bandwidth::from_mbps(1)));
        assert_eq!(d.rate_at_probability(0.0), Some(Bandwidth::from_mbps(100)));
        assert_eq!(d.rate_at_probability(1.5), None);
        assert_eq!(d.mean(), Some(Bandwidth::from_bps(50_500_000)));
        for p in [0.01, 0.33, 0.5, 0.9, 0.951, 0.99] {
            let r = d.rate_at_probability(p).unwrap();
            assert!(d.probability_at_least(r) >= p, "p = {p}");
        }
        let empty = EmpiricalDistribution::default();
        assert_eq!(empty.rate_at_probability(0.5), None);
        assert_eq!(empty.mean(), None);
    }

    #[test]
    fn shortfall_is_lemma_2() {
        let d = one_to_hundred();
        // E[(10 − B)+] over B = 1..100 Mbit/s: (9+8+…+1)/100 = 0.45 Mbit/s.
        let s = d.expected_shortfall_bps(Bandwidth::from_mbps(10));
        assert!((s - 450_000.0).abs() < 1e-6);
        // Lemma 2 form: b0·F(b0−) − M[b0] (partial expectation below b0).
        let b0 = 10e6;
        let f = 9.0 / 100.0;
        let m = (1..10).map(|k| k as f64 * 1e6).sum::<f64>() / 100.0;
        assert!((s - (b0 * f - m)).abs() < 1e-6);
    }

    proptest::proptest! {
        /// The estimate module's window and the sorted-sample distribution
        /// read the same samples the same way.
        #[test]
        fn sliding_window_agrees_with_empirical(
            mbps in proptest::collection::vec(0u64..200, 1..300),
            p in 0.0f64..=1.0,
            r in 0u64..200,
        ) {
            let samples: Vec<Bandwidth> = mbps.iter().map(|&m| Bandwidth::from_kbps(m * 100)).collect();
            let e = EmpiricalDistribution::from_samples(samples.iter().copied());
            let mut w = crate::estimate::SlidingWindow::new(samples.len());
            for &b in &samples {
                w.push(b);
            }
            let w: &dyn PathDistribution = &w;
            let rate = Bandwidth::from_kbps(r * 100);
            proptest::prop_assert_eq!(w.rate_at_probability(p), e.rate_at_probability(p));
            proptest::prop_assert_eq!(w.probability_at_least(rate), e.probability_at_least(rate));
            let (a, b) = (w.expected_shortfall_bps(rate), e.expected_shortfall_bps(rate));
            proptest::prop_assert!((a - b).abs() <= 1e-6 * b.max(1.0));
        }
    }

    /// A scaled view reads like the distribution of the scaled samples.
    #[test]
    fn scaled_view_is_the_scaled_samples() {
        let d = one_to_hundred();
        let v = PathView::new(d, Duration::from_millis(20)).scaled(0.5);
        let half =
            EmpiricalDistribution::from_samples((1..=100).map(|m| Bandwidth::from_kbps(m * 500)));
        let s = &v.distribution;
        for p in [0.5, 0.9, 0.95, 1.0] {
            assert_eq!(
                s.rate_at_probability(p),
                half.rate_at_probability(p),
                "p {p}"
            );
        }
        for kbps in [400, 3_000, 3_250, 10_000, 60_000] {
            let r = Bandwidth::from_kbps(kbps);
            assert_eq!(
                s.probability_at_least(r),
                half.probability_at_least(r),
                "r {kbps}"
            );
            let (a, b) = (s.expected_shortfall_bps(r), half.expected_shortfall_bps(r));
            assert!((a - b).abs() <= 1e-6 * b.max(1.0), "shortfall {a} vs {b}");
        }
        assert_eq!(s.mean(), half.mean());
        assert_eq!(s.samples(), 100);
    }

    #[test]
    fn remaining_promise() {
        let v = PathView::new(one_to_hundred(), Duration::from_millis(20));
        assert_eq!(v.guarantee(0.95), Bandwidth::from_mbps(6));
        assert_eq!(
            v.remaining_at(0.95, Bandwidth::from_mbps(4)),
            Bandwidth::from_mbps(2)
        );
        assert_eq!(
            v.remaining_at(0.95, Bandwidth::from_mbps(9)),
            Bandwidth::ZERO
        );
    }
}
