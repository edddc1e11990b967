//! Path estimation (seed 000, section IV "Statistical bandwidth prediction
//! and guarantees", and the quantities F and M\[b\] that section V.B's
//! Lemma 1 and Lemma 2 are stated in).
//!
//! A path's deliveries become throughput samples, the last N samples form an
//! empirical distribution F, and the guarantee "at least b with probability
//! P" is b = F⁻¹(1 − P). Everything here is sans-IO: time comes in as
//! [`Instant`](crate::Instant) arguments, nothing reads a clock or builds a
//! random-number generator.
//!
//! Main types:
//! - [`RateSampler`] — (time, bytes delivered, sender-had-data) events →
//!   one [`RateSample`] per fixed interval; app-limited intervals are marked.
//! - [`SlidingWindow`] — the last N samples with O(log N) push/evict and
//!   quantile F⁻¹(q), CDF F(b) and partial expectation M\[b\] queries, over an
//!   order-statistic treap with subtree counts and sums.
//! - [`guarantee`] — Lemma 1 and Lemma 2 on a window:
//!   [`SlidingWindow::rate_at_probability`],
//!   [`SlidingWindow::probability_at_least`],
//!   [`SlidingWindow::expected_shortfall`].
//! - [`AdaptiveWindow`] — a window that ADWIN (Bifet and Gavaldà, SDM 2007)
//!   shrinks when the rate distribution moves, for paths whose rate drifts.
//! - [`CalibratedLevel`] — the promise's quantile level corrected online
//!   from kept and broken promises (adaptive conformal inference, Gibbs and
//!   Candès, NeurIPS 2021).
//! - [`PromiseScale`] — the same correction as one factor on a whole
//!   path's distribution, driven by the outcomes of the guarantees a
//!   session mapped onto it.
//! - [`PathEstimate`] — a sampler feeding a window, for one path: the object
//!   a scheduler asks; [`WindowPolicy`] picks the fixed or the adaptive
//!   window.
//! - [`Predictor`] — one trait over [`PercentilePredictor`],
//!   [`MovingAverage`], [`Ewma`] and [`Sma`].
//! - [`study`] — the predictor study behind `braid eval predictors`
//!   (seed 000, section VI.A, Fig. 7).
//!
//! Invariants kept throughout: no input (NaN, zero sizes, clocks going back,
//! huge gaps) panics; every queue has a named bound; results depend only on
//! the inputs (byte-stable across runs).

pub mod aci;
pub mod adaptive;
pub mod guarantee;
mod path;
mod predictor;
mod sampler;
pub mod scale;
pub mod study;
mod tree;
mod window;

pub use aci::{CalibratedLevel, DEFAULT_ACI_GAMMA};
pub use adaptive::{
    AdaptiveStats, AdaptiveWindow, AdwinConfig, DEFAULT_ADWIN_DELTA, DEFAULT_MAX_WINDOW,
    DEFAULT_MIN_WINDOW, DEFAULT_MIN_WINDOW_DEN, DEFAULT_MIN_WINDOW_NUM, SPLIT_GROWTH_DIV,
};
pub use path::{PathEstimate, PathEstimateStats, WindowPolicy, MAX_SCALE};
pub use predictor::{
    Ewma, MovingAverage, PercentilePredictor, Predictor, Sma, DEFAULT_EWMA_ALPHA, DEFAULT_MA_LEN,
};
pub use sampler::{Closing, RateSample, RateSampler, SamplerStats, DEFAULT_SAMPLE_QUEUE};
pub use scale::{parse_gamma, PromiseScale, DEFAULT_SCALE_GAMMA, MIN_SCALE, MISS_GAIN};
pub use study::{run_study, StudyConfig, StudyError, StudyReport};

pub use window::{quantile_rank, SlidingWindow, MAX_WINDOW};

/// Configuration errors of the estimators.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum EstimateError {
    /// A sampling interval of zero length.
    #[error("sampling interval must be longer than zero")]
    ZeroInterval,
    /// A window size of zero or above [`MAX_WINDOW`].
    #[error("window size {0} is out of range: use 1 to {MAX_WINDOW} samples")]
    WindowCapacity(usize),
    /// A probability that is NaN or outside [0, 1].
    #[error("probability {0} is out of range: use a number in [0, 1]")]
    Probability(f64),
    /// An EWMA weight that is NaN or outside (0, 1].
    #[error("EWMA weight {0} is out of range: use a number in (0, 1]")]
    EwmaAlpha(f64),
    /// An ADWIN confidence δ that is NaN or outside (0, 1).
    #[error("ADWIN confidence {0} is out of range: use a number in (0, 1) such as 0.002")]
    AdwinDelta(f64),
    /// An ACI step size γ that is NaN or outside (0, 1].
    #[error("ACI step size {0} is out of range: use a number in (0, 1] such as 0.005")]
    AciGamma(f64),
}
