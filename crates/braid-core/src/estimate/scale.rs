//! [`PromiseScale`]: a path's promises corrected online from the outcomes
//! of the guarantees mapped onto it — adaptive conformal inference on a
//! scale (I. Gibbs and E. Candès, *Adaptive Conformal Inference Under
//! Distribution Shift*, NeurIPS 2021, section 2, in the form that updates
//! any parameter of a nested family of promises).
//!
//! [`CalibratedLevel`](super::CalibratedLevel) corrects the quantile level
//! of one promise at one probability. A session's path carries several
//! promises at once — streams at 0.95 and at 0.99, a rate split over two
//! paths by Lemma 1, a violation bound by Lemma 2 — and the mapper reads
//! the whole distribution, not one quantile. So the correction here is one
//! factor c = e^θ ≤ 1 by which every sample of the path's distribution is
//! scaled before the mapper reads it: every quantile, every probability and
//! every expected shortfall moves together, and a promise at c·F⁻¹(1 − P)
//! is the family's member θ.
//!
//! # Method
//! When the outcome of a window of a stream mapped at probability P is
//! known (err = 1 if the window missed its spec, else 0), each path of the
//! stream's mapping moves its θ by
//!
//! ```text
//! θ ← min(0, θ + γ · ((1 − P) − err))
//! ```
//!
//! A missed window lowers every promise of the path by about γ; a kept one
//! raises them by γ·(1 − P). As in Gibbs and Candès' Proposition 4.1, for
//! any sequence of outcomes the share of missed windows is at most 1 − P
//! plus a term that falls as 1/(γ·T): θ can only fall so far before the
//! path promises nothing, and a promise of nothing cannot be missed. The
//! cap at 0 (c ≤ 1) means braid never promises more than its estimate: the
//! correction only makes an optimistic estimate honest, it does not bet on
//! a pessimistic one.
//!
//! γ = [`DEFAULT_SCALE_GAMMA`] = 0.05: outcomes arrive once a second per
//! stream (1 s windows), so a path whose estimate is 20 % too high is
//! corrected within about five missed windows, and a false alarm costs
//! 5 % of its promise for about twenty seconds.
//!
//! Sans-IO and deterministic: the caller decides when an outcome is known.
//! Memory: two floats and a counter.

use super::EstimateError;

/// Default step size γ of a [`PromiseScale`] (see the module docs).
pub const DEFAULT_SCALE_GAMMA: f64 = 0.05;

/// How much more a violation bound's outcome weighs than a window's: a
/// window that lost all `x` of its messages beyond what was predicted
/// moves θ by γ·[`MISS_GAIN`] (see [`PromiseScale::handle_misses`]).
pub const MISS_GAIN: f64 = 20.0;

/// The lowest factor: a path whose promises keep failing promises 0.1 %
/// of its estimate (effectively nothing), and can climb back.
pub const MIN_SCALE: f64 = 1e-3;

/// A path's promise factor c = e^θ ∈ \[[`MIN_SCALE`], 1\] (see the
/// [module docs](self)).
///
/// # Example
/// ```
/// use braid_core::estimate::PromiseScale;
/// let mut s = PromiseScale::new(0.05).unwrap();
/// assert_eq!(s.factor(), 1.0);
/// s.handle_outcome(0.95, true); // a 0.95 window missed
/// assert!(s.factor() < 0.96);
/// for _ in 0..1000 {
///     s.handle_outcome(0.95, false);
/// }
/// assert_eq!(s.factor(), 1.0); // never above the estimate
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PromiseScale {
    gamma: f64,
    theta: f64,
    outcomes: u64,
}

impl PromiseScale {
    /// A factor of 1 with step `gamma`.
    ///
    /// # Errors
    /// [`EstimateError::AciGamma`] unless 0 < γ ≤ 1.
    pub fn new(gamma: f64) -> Result<Self, EstimateError> {
        if !(gamma > 0.0 && gamma <= 1.0) {
            return Err(EstimateError::AciGamma(gamma));
        }
        Ok(PromiseScale {
            gamma,
            theta: 0.0,
            outcomes: 0,
        })
    }

    /// The factor c = e^θ every sample is scaled by.
    pub fn factor(&self) -> f64 {
        self.theta.exp()
    }

    /// The step size γ.
    pub fn gamma(&self) -> f64 {
        self.gamma
    }

    /// Outcomes taken so far (a version for whoever caches the factor).
    pub fn outcomes(&self) -> u64 {
        self.outcomes
    }

    /// One window's outcome of a promise made at `probability`:
    /// θ ← min(0, θ + γ·((1 − P) − err)), and θ ≥ ln [`MIN_SCALE`].
    /// A probability outside \[0, 1\] (or NaN) is ignored.
    pub fn handle_outcome(&mut self, probability: f64, missed: bool) {
        if !(0.0..=1.0).contains(&probability) {
            return;
        }
        let err = if missed { 1.0 } else { 0.0 };
        self.theta =
            (self.theta + self.gamma * ((1.0 - probability) - err)).clamp(MIN_SCALE.ln(), 0.0);
        self.outcomes += 1;
    }
}

impl PromiseScale {
    /// One window's outcome of a violation bound (seed 000 Lemma 2): the
    /// window missed `misses` of its `x` messages where the mapping, on
    /// the distribution scaled by this factor, predicted `predicted`
    /// (its E\[Z\]):
    ///
    /// ```text
    /// θ ← min(0, θ − γ·G·(Z − Ẑ(θ))/x)        G = MISS_GAIN
    /// ```
    ///
    /// Ẑ(θ) grows as θ falls (a scaled-down distribution falls short of
    /// the same rate more often), so this is a stochastic approximation
    /// of the θ at which the prediction is the mean of the outcomes,
    /// E\[Z\] = Ẑ(θ), as [`handle_outcome`](Self::handle_outcome) finds
    /// the θ at which a quantile is missed 1 − P of the time. The step is
    /// linear in Z (no clipping), so the fixed point is the mean even
    /// when the misses are heavy-tailed (most windows lose nothing, a few
    /// lose most of their messages); dividing by `x` bounds one window's
    /// step by γ·G. Non-finite figures or `x` ≤ 0 are ignored.
    pub fn handle_misses(&mut self, misses: f64, predicted: f64, x: f64) {
        if !(misses.is_finite() && predicted.is_finite() && x.is_finite() && x > 0.0) {
            return;
        }
        let err = ((misses - predicted) / x).clamp(-1.0, 1.0);
        self.theta = (self.theta - self.gamma * MISS_GAIN * err).clamp(MIN_SCALE.ln(), 0.0);
        self.outcomes += 1;
    }
}

/// Parses a calibration setting as flags and scenario files write it:
/// `off` (no correction) or a step size γ in (0, 1] such as `0.05`.
///
/// # Errors
/// Anything else, in words that say what is accepted.
pub fn parse_gamma(s: &str) -> Result<Option<f64>, String> {
    let s = s.trim();
    if s.eq_ignore_ascii_case("off") {
        return Ok(None);
    }
    match s.parse::<f64>() {
        Ok(g) if g > 0.0 && g <= 1.0 => Ok(Some(g)),
        _ => Err(format!(
            "calibration {s:?}: give a step size in (0, 1] such as {DEFAULT_SCALE_GAMMA}, or off"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::estimate::SlidingWindow;
    use crate::Bandwidth;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    #[test]
    fn bad_gamma_is_refused_and_bad_probabilities_ignored() {
        assert_eq!(PromiseScale::new(0.0), Err(EstimateError::AciGamma(0.0)));
        assert!(PromiseScale::new(f64::NAN).is_err());
        assert!(PromiseScale::new(1.5).is_err());
        let mut s = PromiseScale::new(DEFAULT_SCALE_GAMMA).unwrap();
        s.handle_outcome(f64::NAN, true);
        s.handle_outcome(1.5, true);
        assert_eq!((s.factor(), s.outcomes()), (1.0, 0));
    }

    #[test]
    fn settings_parse() {
        assert_eq!(parse_gamma("off"), Ok(None));
        assert_eq!(parse_gamma(" 0.05 "), Ok(Some(0.05)));
        assert_eq!(parse_gamma("1"), Ok(Some(1.0)));
        for bad in ["0", "-0.1", "1.5", "NaN", "fast", ""] {
            let e = parse_gamma(bad).unwrap_err();
            assert!(e.contains("(0, 1]"), "{bad}: {e}");
        }
    }

    #[test]
    fn the_factor_stays_within_its_bounds() {
        let mut s = PromiseScale::new(1.0).unwrap();
        for _ in 0..100 {
            s.handle_outcome(0.95, true);
        }
        assert!((s.factor() - MIN_SCALE).abs() < 1e-12);
        for _ in 0..10_000 {
            s.handle_outcome(0.95, false);
        }
        assert_eq!(s.factor(), 1.0);
    }

    /// The calibration brings an optimistic estimate back within nominal:
    /// the window holds what the path gave in the past, the path now gives
    /// 25 % less (with the same spread). Promises at the window's
    /// F⁻¹(0.05) fail far more than 5 % of the time; scaled by the
    /// corrected factor they fail at most 5 % + 0.02, and the promise is
    /// not cut further than the shift needs.
    #[test]
    fn an_optimistic_estimate_is_brought_back_within_nominal() {
        let mut rng = ChaCha8Rng::seed_from_u64(28);
        let mut window = SlidingWindow::new(100);
        for _ in 0..100 {
            window.push(Bandwidth::from_bps(rng.random_range(8_000_000..12_000_000)));
        }
        let p = 0.95;
        let nominal = window.rate_at_probability(p).unwrap().bps() as f64;
        let mut scale = PromiseScale::new(DEFAULT_SCALE_GAMMA).unwrap();
        let (mut raw_missed, mut missed, mut promised, n) = (0u32, 0u32, 0.0, 4_000u32);
        for _ in 0..n {
            // One window of the path as it is now: 25 % below the window.
            let actual = 0.75 * rng.random_range(8_000_000.0..12_000_000.0);
            let promise = scale.factor() * nominal;
            raw_missed += u32::from(actual < nominal);
            missed += u32::from(actual < promise);
            promised += promise;
            scale.handle_outcome(p, actual < promise);
        }
        let raw = f64::from(raw_missed) / f64::from(n);
        let calibrated = f64::from(missed) / f64::from(n);
        assert!(raw > 0.5, "uncorrected misses {raw}");
        assert!(calibrated <= 0.05 + 0.02, "corrected misses {calibrated}");
        // The path's true 5th percentile is 0.75 × 8.2 Mbit/s ≈ 6.15;
        // the corrected promises average within 15 % of it.
        let mean = promised / f64::from(n);
        assert!(mean > 0.85 * 6.15e6, "mean promise {mean}");
    }

    /// A violation bound's promise follows its outcomes to their mean: the
    /// window holds what the path gave in the past, the path now gives
    /// 10 % less. Lemma 2 on the window predicts about a third of the
    /// misses that come; on the distribution scaled by the factor the
    /// misses realised stay within 1.25× of what was predicted for them.
    #[test]
    fn a_violation_bound_prediction_follows_the_mean_of_its_misses() {
        use crate::scheduler::{PathDistribution, ScaledDistribution};
        use std::sync::Arc;
        let mut rng = ChaCha8Rng::seed_from_u64(2);
        let mut window = SlidingWindow::new(300);
        for _ in 0..300 {
            window.push(Bandwidth::from_bps(
                rng.random_range(30_000_000..50_000_000),
            ));
        }
        let inner: Arc<dyn PathDistribution> = Arc::new(window);
        // 35 Mbit/s of 1500-byte messages per 1 s window.
        let (rate, x): (f64, f64) = (35e6, 2916.0);
        let coeff = 1.0 / (8.0 * 1500.0);
        let predict = |factor: f64| {
            let d = ScaledDistribution::new(inner.clone(), factor);
            d.expected_shortfall_bps(Bandwidth::from_bps(rate as u64)) * coeff
        };
        let raw = predict(1.0);
        let mut scale = PromiseScale::new(DEFAULT_SCALE_GAMMA).unwrap();
        let (mut realised, mut predicted, n) = (0.0, 0.0, 3_000);
        for k in 0..n {
            let z_hat = predict(scale.factor());
            let actual: f64 = 0.9 * rng.random_range(30e6..50e6);
            let z = ((rate - actual).max(0.0) * coeff).min(x);
            if k >= n / 3 {
                realised += z;
                predicted += z_hat;
            }
            scale.handle_misses(z, z_hat, x);
        }
        let m = f64::from(n - n / 3);
        let (realised, predicted) = (realised / m, predicted / m);
        assert!(
            realised > 2.0 * raw,
            "the raw prediction is optimistic: {raw} vs {realised}"
        );
        assert!(realised <= 1.25 * predicted, "{realised} vs {predicted}");
        assert!(
            predicted <= 1.25 * realised,
            "and not far too cautious: {predicted}"
        );
    }
}
