//! [`CalibratedLevel`]: the quantile level of a percentile promise, corrected
//! online from the promises that were kept or broken — adaptive conformal
//! inference, ACI (I. Gibbs and E. Candès, *Adaptive Conformal Inference
//! Under Distribution Shift*, NeurIPS 2021, section 2, update (2)). It serves
//! seed 000, section IV's promise b = F⁻¹(1 − P) on paths whose rate drifts,
//! where no window (fixed or [adaptive](super::AdaptiveWindow)) is
//! calibrated on its own.
//!
//! # Method
//! The promise at level αₜ is b = F⁻¹(αₜ) of the window (the lower order
//! statistic of [`SlidingWindow::quantile`]); αₜ starts at the nominal
//! α = 1 − P. When a promise's outcome is known (errₜ = 1 if the path gave
//! less than b, else 0):
//!
//! ```text
//! αₜ₊₁ = αₜ + γ · (α − errₜ)
//! ```
//!
//! A broken promise lowers the level (a more cautious b); a kept one raises
//! it slowly. A level ≤ 0 promises nothing (b = 0, which cannot be broken);
//! a level ≥ 1 promises the window's largest sample. Gibbs and Candès
//! (Proposition 4.1) show that for *any* sequence, fed every outcome,
//! |(1/T)·Σ errₜ − α| ≤ (max(α₁, 1 − α₁) + γ) / (γ·T): the long-run share of
//! broken promises tends to α without any assumption on the path. With the
//! outcome of a promise over a horizon of h samples known h samples later,
//! αₜ is updated from errₜ₋ₕ; the bound gains a term of order h/T.
//!
//! The price is in the promise: where the window undercuts the path's
//! future, αₜ falls and so does b (the study reports the mean promised rate
//! beside the violations). γ = [`DEFAULT_ACI_GAMMA`] = 0.005 is the value of
//! the paper's experiments; it was not tuned on braid's traces.
//!
//! Sans-IO and deterministic: the caller decides when an outcome is known.
//! Memory: two floats.

use super::{EstimateError, SlidingWindow};
use crate::Bandwidth;

/// Default step size γ: 0.005, the value of Gibbs and Candès' experiments.
pub const DEFAULT_ACI_GAMMA: f64 = 0.005;

/// The level αₜ of one percentile promise (probability P), corrected from
/// outcomes (see the [module docs](self)).
///
/// # Driving contract
/// Read [`promise`](Self::promise) (or [`level`](Self::level)) when a
/// promise is made; call [`handle_outcome`](Self::handle_outcome) once per
/// promise when it is known whether the path gave at least what was
/// promised.
///
/// # Example
/// ```
/// use braid_core::estimate::{CalibratedLevel, SlidingWindow};
/// use braid_core::Bandwidth;
/// let mut w = SlidingWindow::new(10);
/// w.extend((1..=10).map(Bandwidth::from_mbps));
/// let mut level = CalibratedLevel::new(0.9, 0.05).unwrap();
/// assert_eq!(level.promise(&w), Some(Bandwidth::from_mbps(1)));
/// level.handle_outcome(true); // the path gave less: be more careful
/// assert!(level.level() < 0.1);
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CalibratedLevel {
    /// α = 1 − P.
    target: f64,
    gamma: f64,
    level: f64,
}

impl CalibratedLevel {
    /// A level for promises at probability `probability`, with step `gamma`.
    ///
    /// # Errors
    /// [`EstimateError::Probability`] unless 0 ≤ P ≤ 1;
    /// [`EstimateError::AciGamma`] unless 0 < γ ≤ 1.
    pub fn new(probability: f64, gamma: f64) -> Result<Self, EstimateError> {
        if !(0.0..=1.0).contains(&probability) {
            return Err(EstimateError::Probability(probability));
        }
        if !(gamma > 0.0 && gamma <= 1.0) {
            return Err(EstimateError::AciGamma(gamma));
        }
        let target = 1.0 - probability;
        Ok(CalibratedLevel {
            target,
            gamma,
            level: target,
        })
    }

    /// The current level αₜ (may leave [0, 1]; see [`Self::promise`]).
    pub fn level(&self) -> f64 {
        self.level
    }

    /// The nominal level α = 1 − P.
    pub fn target(&self) -> f64 {
        self.target
    }

    /// The step size γ.
    pub fn gamma(&self) -> f64 {
        self.gamma
    }

    /// The promise at the current level: F⁻¹(αₜ) of `window`; zero when
    /// αₜ ≤ 0 (nothing can be promised safely), the largest sample when
    /// αₜ ≥ 1. `None` on an empty window.
    pub fn promise(&self, window: &SlidingWindow) -> Option<Bandwidth> {
        if window.is_empty() {
            return None;
        }
        if self.level <= 0.0 {
            Some(Bandwidth::ZERO)
        } else {
            window.quantile(self.level.min(1.0))
        }
    }

    /// One promise's outcome: `violated` if the path gave less than was
    /// promised. αₜ₊₁ = αₜ + γ·(α − errₜ).
    pub fn handle_outcome(&mut self, violated: bool) {
        let err = if violated { 1.0 } else { 0.0 };
        self.level += self.gamma * (self.target - err);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    #[test]
    fn bad_parameters_are_refused() {
        assert_eq!(
            CalibratedLevel::new(1.5, 0.01),
            Err(EstimateError::Probability(1.5))
        );
        assert_eq!(
            CalibratedLevel::new(0.9, 0.0),
            Err(EstimateError::AciGamma(0.0))
        );
        assert!(CalibratedLevel::new(0.9, f64::NAN).is_err());
        let l = CalibratedLevel::new(0.95, DEFAULT_ACI_GAMMA).unwrap();
        assert!((l.target() - 0.05).abs() < 1e-12);
        assert_eq!(l.gamma(), DEFAULT_ACI_GAMMA);
        assert_eq!(l.promise(&SlidingWindow::new(3)), None);
    }

    #[test]
    fn level_limits() {
        let mut w = SlidingWindow::new(4);
        w.extend([3, 1, 4, 2].map(Bandwidth::from_mbps));
        let mut l = CalibratedLevel::new(0.5, 1.0).unwrap();
        assert_eq!(l.promise(&w), Some(Bandwidth::from_mbps(2)));
        l.handle_outcome(true); // 0.5 + (0.5 − 1) = 0
        assert_eq!(l.promise(&w), Some(Bandwidth::ZERO));
        l.handle_outcome(false); // 0.5
        l.handle_outcome(false); // 1.0
        l.handle_outcome(false); // 1.5
        assert_eq!(l.promise(&w), Some(Bandwidth::from_mbps(4)));
    }

    /// On a series whose level falls steadily, the fixed level's promises
    /// are broken far more often than 1 − P; the corrected level's share of
    /// broken promises comes back to about 1 − P (Gibbs and Candès,
    /// Proposition 4.1).
    #[test]
    fn calibrates_under_drift() {
        let mut rng = ChaCha8Rng::seed_from_u64(21);
        let series: Vec<u64> = (0..20_000u64)
            .map(|t| 100_000_000 - t * 4_000 + rng.random_range(0..10_000_000))
            .collect();
        let p = 0.9;
        let mut w = SlidingWindow::new(500);
        let mut level = CalibratedLevel::new(p, DEFAULT_ACI_GAMMA).unwrap();
        let (mut fixed_broken, mut aci_broken, mut n) = (0u32, 0u32, 0u32);
        for &x in &series {
            if w.is_full() {
                let actual = Bandwidth::from_bps(x);
                let fixed = w.rate_at_probability(p).unwrap();
                let aci = level.promise(&w).unwrap();
                n += 1;
                fixed_broken += u32::from(actual < fixed);
                aci_broken += u32::from(actual < aci);
                level.handle_outcome(actual < aci);
            }
            w.push(Bandwidth::from_bps(x));
        }
        let (fixed, aci) = (
            f64::from(fixed_broken) / f64::from(n),
            f64::from(aci_broken) / f64::from(n),
        );
        assert!(fixed > 0.15, "fixed {fixed}");
        assert!((aci - 0.1).abs() < 0.01, "aci {aci}");
    }
}
