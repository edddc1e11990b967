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
}
