//! The predictor study behind `braid eval predictors` (seed 000, section
//! VI.A and Fig. 7): how well do average predictors guess the next
//! horizon's rate, and how often does the percentile predictor's promise
//! fail?
//!
//! Main items: [`run_study`] over a throughput series (one sample per
//! interval, e.g. 100 ms) with a [`StudyConfig`], giving a [`StudyReport`].
//! Pure computation: no I/O, no clock, deterministic.
//!
//! # Semantics
//! Let the series be x₀ … x_{T−1}, N = `window`, h = `horizon`. Every
//! position t with N ≤ t is used (stride 1, no sampling):
//!
//! - The **window** at t is the samples [t − N, t) (a [`SlidingWindow`]).
//!   SMA and the percentile predictor see exactly this window; MA sees its
//!   last [`DEFAULT_MA_LEN`] samples; EWMA has been fed every sample before t
//!   (its weight on samples older than N is (1 − α)^N ≈ 10⁻⁷⁸ at N = 500).
//!   See [`Predictor`] and its implementors for the exact definitions.
//! - The **actual** rate at t is the mean of the next h samples
//!   [t, t + h), for every t with t + h ≤ T.
//! - **Average predictors** (MA, EWMA, SMA): relative error
//!   |pred − actual| / actual, averaged over positions into
//!   `mean_relative_error` (the seed's Fig. 7 "mean prediction error";
//!   `mean_signed_relative_error` keeps the sign, to show bias;
//!   `median_relative_error` and `weighted_relative_error` =
//!   Σ|pred − actual| / Σ actual are beside it because a mean of ratios is
//!   ruled by the few positions where the actual rate is nearly zero, e.g.
//!   a stalled cellular link). Positions
//!   where actual = 0 are skipped and counted (`skipped_zero_actual`), as
//!   are positions where a predictor has no prediction yet
//!   (`skipped_no_prediction`; cannot happen for t ≥ N ≥ 1 but is
//!   counted rather than assumed). With no prediction left the mean is NaN.
//! - **Percentile predictor** at each probability P: the promise is
//!   b = F⁻¹(1 − P) over the window ([`SlidingWindow::rate_at_probability`],
//!   the lower order statistic ⌈(1 − P)·N⌉). A **violation** is a next-horizon
//!   mean strictly below b (the promise is "at least b", Lemma 1's ≥);
//!   compared exactly in integers. `violation_rate` = violations /
//!   predictions, beside `nominal_violation` = 1 − P.
//! - **The seed's own test**: X = F⁻¹(`seed_test_percentile`) of the window
//!   (10th percentile by default); for each n in `seed_test_n`, at every t
//!   with t + n ≤ T, a failure is any of the next n samples falling below X.
//!   The seed says "test whether the next n samples are larger than X"; read
//!   literally (strictly larger) a sample equal to X fails, which on
//!   quantised traces (mahimahi bins come in whole packets) and on any
//!   constant stretch fails promises that were kept. `failure_rate` uses
//!   "≥ X" (consistent with the percentile promise), and
//!   `strict_failure_rate` reports the literal "> X" reading beside it.
//!
//! The two percentile readings differ in kind: the per-P violation rate
//! tests a *mean* over the horizon, which is smoother than single samples,
//! so on i.i.d. data it falls well below 1 − P when h > 1 (and equals it,
//! ≈ ⌈(1 − P)N⌉/(N + 1), when h = 1); the seed's test asks *every one* of
//! n samples to clear X, which on i.i.d. data fails with probability
//! ≈ 1 − 0.9ⁿ (≈ 41 % at n = 5) — so the seed's "< 4 % failure" can only
//! hold on strongly autocorrelated series.
//!
//! - **Adaptive window** (when `adaptive` is set): the same promise and the
//!   same violation test, but b is taken from an [`AdaptiveWindow`] (ADWIN,
//!   Bifet and Gavaldà 2007) fed the same samples, which holds between
//!   `min_window` and `max_window` of the latest samples. Reported beside
//!   the fixed window in [`StudyReport::adaptive`], with the number of cuts
//!   and the mean window length at the scored positions.
//!
//! - **Calibrated level** (when `calibrated` is set): the promise is
//!   F⁻¹(αₜ) of the adaptive window (of the fixed window when `adaptive`
//!   is `None`), with αₜ corrected by [`CalibratedLevel`] (adaptive
//!   conformal inference, Gibbs and Candès 2021) from the outcomes of the
//!   earlier promises. The promise made at t is judged over [t, t + h), so
//!   its outcome is fed back at position t + h, never earlier: no position
//!   uses what happens after it. Reported in [`StudyReport::calibrated`].
//!
//! Cost: O(T·(|P| + 1)·log N + T·|n|) time and O(N + Σn) memory, through
//! [`SlidingWindow`] and a monotone deque per n for the forward minimum.

use std::collections::VecDeque;

use super::predictor::{Ewma, MovingAverage, Predictor, Sma, DEFAULT_MA_LEN};
use super::{
    AdaptiveWindow, AdwinConfig, CalibratedLevel, EstimateError, SlidingWindow, DEFAULT_ACI_GAMMA,
    MAX_WINDOW,
};
use crate::Bandwidth;

/// What to evaluate; see the [module docs](self) for the exact semantics.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct StudyConfig {
    /// N: samples in the window the distribution is taken from (default 500).
    pub window: usize,
    /// h: samples whose mean is the "actual" rate (≥ 1; default 10).
    pub horizon: usize,
    /// Guarantee probabilities P of the percentile predictor, each in [0, 1]
    /// (default 0.8, 0.9, 0.95, 0.99).
    pub probabilities: Vec<f64>,
    /// The seed's test percentile, in [0, 1] (default 0.10).
    pub seed_test_percentile: f64,
    /// The seed's test lengths n, each ≥ 1 (default 5 ..= 10).
    pub seed_test_n: Vec<usize>,
    /// The adaptive window evaluated beside the fixed one (`None`: only the
    /// fixed window). Default: [`AdwinConfig::default`], whose
    /// `max_window` is the default `window`.
    pub adaptive: Option<AdwinConfig>,
    /// Step size γ of the calibrated level evaluated beside them (`None`:
    /// not evaluated). Default: [`DEFAULT_ACI_GAMMA`].
    pub calibrated: Option<f64>,
}

impl Default for StudyConfig {
    fn default() -> Self {
        StudyConfig {
            window: 500,
            horizon: 10,
            probabilities: vec![0.8, 0.9, 0.95, 0.99],
            seed_test_percentile: 0.10,
            seed_test_n: (5..=10).collect(),
            adaptive: Some(AdwinConfig::default()),
            calibrated: Some(DEFAULT_ACI_GAMMA),
        }
    }
}

/// The study's results.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct StudyReport {
    /// T: samples in the series.
    pub samples: usize,
    /// Positions t evaluated for the horizon (T − N − h + 1).
    pub positions: usize,
    /// One row per average predictor: MA, EWMA, SMA.
    pub average: Vec<AverageResult>,
    /// One row per probability, in the configured order.
    pub percentile: Vec<PercentileResult>,
    /// One row per n, in the configured order.
    pub seed_test: Vec<SeedTestResult>,
    /// The percentile predictor over the adaptive window, when configured.
    pub adaptive: Option<AdaptiveResult>,
    /// The percentile predictor with a calibrated level, when configured.
    pub calibrated: Option<CalibratedResult>,
}

/// The percentile predictor with its level corrected by [`CalibratedLevel`].
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct CalibratedResult {
    /// The step size γ.
    pub gamma: f64,
    /// The window the quantile is taken from: `"adaptive"` or `"fixed"`.
    pub window: &'static str,
    /// One row per probability, in the configured order (same fields and
    /// test as [`StudyReport::percentile`]).
    pub percentile: Vec<PercentileResult>,
    /// The mean level αₜ over the scored positions, per probability.
    pub mean_level: Vec<f64>,
}

/// The percentile predictor over an [`AdaptiveWindow`].
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct AdaptiveResult {
    /// The window's parameters.
    pub config: AdwinConfig,
    /// One row per probability, in the configured order (same fields and
    /// test as [`StudyReport::percentile`]).
    pub percentile: Vec<PercentileResult>,
    /// Pushes after which the change test shrank the window.
    pub cuts: u64,
    /// Samples the change test dropped.
    pub dropped: u64,
    /// Mean window length over the scored positions.
    pub mean_window: f64,
    /// Shortest window at a scored position.
    pub min_window_seen: usize,
}

/// Accuracy of one average predictor.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct AverageResult {
    /// "MA", "EWMA" or "SMA".
    pub predictor: String,
    /// Mean of |pred − actual| / actual; NaN when `predictions` is 0.
    pub mean_relative_error: f64,
    /// Mean of (pred − actual) / actual (positive: over-prediction).
    pub mean_signed_relative_error: f64,
    /// Median of |pred − actual| / actual; NaN when `predictions` is 0.
    /// Unlike the mean it is not dominated by the few positions where the
    /// actual rate is nearly zero.
    pub median_relative_error: f64,
    /// Σ|pred − actual| / Σ actual over the scored positions: the error in
    /// proportion to the traffic (also robust to near-zero actuals); NaN
    /// when `predictions` is 0.
    pub weighted_relative_error: f64,
    /// Positions scored.
    pub predictions: usize,
    /// Positions skipped because the actual rate was 0.
    pub skipped_zero_actual: usize,
    /// Positions skipped because the predictor had nothing to say.
    pub skipped_no_prediction: usize,
}

/// Calibration of the percentile predictor at one probability.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct PercentileResult {
    /// P.
    pub probability: f64,
    /// 1 − P: the violation rate a calibrated promise may reach.
    pub nominal_violation: f64,
    /// Fraction of positions whose next-horizon mean fell below the promise.
    pub violation_rate: f64,
    /// Positions scored.
    pub predictions: usize,
    /// Mean promised rate b in bit/s (how much the promise gives away).
    pub mean_promised_bps: f64,
}

/// The seed's test at one n.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct SeedTestResult {
    /// Number of future samples that must clear X.
    pub n: usize,
    /// Fraction of positions where some of the next n samples were < X.
    pub failure_rate: f64,
    /// Fraction where some of the next n samples were ≤ X (the seed's
    /// literal "larger than X").
    pub strict_failure_rate: f64,
    /// Positions scored.
    pub predictions: usize,
}

/// Why a study cannot run.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum StudyError {
    /// Too few samples for one window plus one horizon (or seed-test n).
    #[error("series has {len} samples but the study needs at least {needed} (window + max(horizon, seed-test n)); use a longer trace or a smaller window")]
    SeriesTooShort {
        /// Samples given.
        len: usize,
        /// Samples needed.
        needed: usize,
    },
    /// A window of 0 or above [`MAX_WINDOW`] samples.
    #[error("window of {0} samples is out of range: use 1 to {MAX_WINDOW}")]
    Window(usize),
    /// A horizon of 0 samples.
    #[error("horizon must be at least one sample")]
    ZeroHorizon,
    /// A probability that is NaN or outside [0, 1].
    #[error("probability {0} is out of range: use numbers in [0, 1] such as 0.9")]
    Probability(f64),
    /// A seed-test percentile that is NaN or outside [0, 1].
    #[error("seed-test percentile {0} is out of range: use a number in [0, 1] such as 0.10")]
    SeedTestPercentile(f64),
    /// A seed-test length of 0.
    #[error("seed-test n must be at least 1")]
    SeedTestN,
    /// Adaptive-window or calibrated-level parameters out of range.
    #[error("adaptive estimator: {0}")]
    Adaptive(EstimateError),
}

/// Runs the study on `series` (one throughput sample per interval).
///
/// # Errors
/// [`StudyError`] for a configuration out of range or a series shorter
/// than `window + max(horizon, max seed_test_n)`.
pub fn run_study(series: &[Bandwidth], config: &StudyConfig) -> Result<StudyReport, StudyError> {
    let needed = validate(series.len(), config)?;
    debug_assert!(series.len() >= needed);
    let (n_win, h, t_len) = (config.window, config.horizon, series.len());

    // Prefix sums for O(1) horizon means, exact in integers.
    let mut prefix = Vec::with_capacity(t_len + 1);
    prefix.push(0u128);
    let mut acc = 0u128;
    for s in series {
        acc += u128::from(s.bps());
        prefix.push(acc);
    }

    let mut window = SlidingWindow::new(n_win);
    let mut adaptive = match config.adaptive {
        // validated above
        Some(c) => Some(AdaptiveWindow::new(c).map_err(StudyError::Adaptive)?),
        None => None,
    };
    let mut ad_pct = vec![PercentileAcc::default(); config.probabilities.len()];
    let (mut ad_len_sum, mut ad_len_min) = (0u128, usize::MAX);
    let mut cal: Vec<Calibrated> = match config.calibrated {
        Some(gamma) => config
            .probabilities
            .iter()
            .map(|&p| {
                CalibratedLevel::new(p, gamma)
                    .map(Calibrated::new)
                    .map_err(StudyError::Adaptive)
            })
            .collect::<Result<_, _>>()?,
        None => Vec::new(),
    };
    let mut predictors: Vec<Box<dyn Predictor>> = vec![
        Box::new(MovingAverage::new(DEFAULT_MA_LEN)),
        Box::new(Ewma::default()),
        Box::new(Sma::new(n_win)),
    ];
    let mut avg = vec![AverageAcc::default(); predictors.len()];
    let mut pct = vec![PercentileAcc::default(); config.probabilities.len()];
    let mut seed: Vec<(ForwardMin, SeedAcc)> = config
        .seed_test_n
        .iter()
        .map(|&n| (ForwardMin::new(n), SeedAcc::default()))
        .collect();

    for &s in series.iter().take(n_win) {
        window.push(s);
        if let Some(a) = adaptive.as_mut() {
            a.push(s);
        }
        predictors.iter_mut().for_each(|p| p.observe(s));
    }
    let mut positions = 0usize;
    for t in n_win..t_len {
        if t + h <= t_len {
            positions += 1;
            // In bounds: t + h ≤ T and `prefix` has T + 1 entries.
            let next_sum = prefix[t + h] - prefix[t];
            let actual = next_sum as f64 / h as f64;
            for (p, acc) in predictors.iter().zip(avg.iter_mut()) {
                acc.score(p.predict(), actual);
            }
            for (&prob, acc) in config.probabilities.iter().zip(pct.iter_mut()) {
                acc.score(window.rate_at_probability(prob), next_sum, h);
            }
            let from = adaptive.as_ref().map_or(&window, AdaptiveWindow::window);
            for c in cal.iter_mut() {
                // Outcomes known by now: promises whose horizon ended at t.
                while let Some(&(t0, b)) = c.pending.front().filter(|&&(t0, _)| t0 + h <= t) {
                    c.pending.pop_front();
                    let sum = prefix[t0 + h] - prefix[t0]; // t0 + h ≤ t < T
                    c.level
                        .handle_outcome(sum < u128::from(b.bps()) * h as u128);
                }
                let b = c.level.promise(from);
                c.level_sum += c.level.level();
                c.acc.score(b, next_sum, h);
                if let Some(b) = b {
                    c.pending.push_back((t, b));
                }
            }
            if let Some(a) = adaptive.as_ref() {
                let w = a.window();
                ad_len_sum += w.len() as u128;
                ad_len_min = ad_len_min.min(w.len());
                for (&prob, acc) in config.probabilities.iter().zip(ad_pct.iter_mut()) {
                    acc.score(w.rate_at_probability(prob), next_sum, h);
                }
            }
        }
        if let Some(x) = window.quantile(config.seed_test_percentile) {
            for (fmin, acc) in seed.iter_mut() {
                if let Some(m) = fmin.min_at(series, t) {
                    acc.predictions += 1;
                    acc.failures += usize::from(m < x);
                    acc.strict_failures += usize::from(m <= x);
                }
            }
        }
        let s = series[t]; // t < T
        window.push(s);
        if let Some(a) = adaptive.as_mut() {
            a.push(s);
        }
        predictors.iter_mut().for_each(|p| p.observe(s));
    }

    Ok(StudyReport {
        samples: t_len,
        positions,
        average: predictors
            .iter()
            .zip(avg)
            .map(|(p, a)| a.finish(p.name()))
            .collect(),
        percentile: config
            .probabilities
            .iter()
            .zip(pct)
            .map(|(&p, a)| a.finish(p))
            .collect(),
        seed_test: config
            .seed_test_n
            .iter()
            .zip(seed)
            .map(|(&n, (_, a))| a.finish(n))
            .collect(),
        calibrated: config.calibrated.map(|gamma| CalibratedResult {
            gamma,
            window: if config.adaptive.is_some() {
                "adaptive"
            } else {
                "fixed"
            },
            mean_level: cal
                .iter()
                .map(|c| c.level_sum / positions.max(1) as f64)
                .collect(),
            percentile: config
                .probabilities
                .iter()
                .zip(cal)
                .map(|(&p, c)| c.acc.finish(p))
                .collect(),
        }),
        adaptive: adaptive.map(|a| AdaptiveResult {
            config: a.config(),
            percentile: config
                .probabilities
                .iter()
                .zip(ad_pct)
                .map(|(&p, acc)| acc.finish(p))
                .collect(),
            cuts: a.stats().cuts,
            dropped: a.stats().dropped,
            mean_window: ad_len_sum as f64 / positions.max(1) as f64,
            min_window_seen: if positions == 0 { 0 } else { ad_len_min },
        }),
    })
}

/// Checks the configuration; returns the series length needed.
fn validate(len: usize, c: &StudyConfig) -> Result<usize, StudyError> {
    if c.window == 0 || c.window > MAX_WINDOW {
        return Err(StudyError::Window(c.window));
    }
    if c.horizon == 0 {
        return Err(StudyError::ZeroHorizon);
    }
    if let Some(&p) = c.probabilities.iter().find(|p| !(0.0..=1.0).contains(*p)) {
        return Err(StudyError::Probability(p));
    }
    if !(0.0..=1.0).contains(&c.seed_test_percentile) {
        return Err(StudyError::SeedTestPercentile(c.seed_test_percentile));
    }
    if c.seed_test_n.contains(&0) {
        return Err(StudyError::SeedTestN);
    }
    if let Some(a) = &c.adaptive {
        a.validate().map_err(StudyError::Adaptive)?;
    }
    if let Some(g) = c.calibrated {
        if !(g > 0.0 && g <= 1.0) {
            return Err(StudyError::Adaptive(EstimateError::AciGamma(g)));
        }
    }
    let ahead = c.seed_test_n.iter().copied().fold(c.horizon, usize::max);
    let needed = c.window.saturating_add(ahead);
    if len < needed {
        return Err(StudyError::SeriesTooShort { len, needed });
    }
    Ok(needed)
}

#[derive(Debug, Clone, Default)]
struct AverageAcc {
    abs_sum: f64,
    signed_sum: f64,
    /// Every relative error, for the median (O(T) floats).
    errors: Vec<f64>,
    abs_diff_sum: f64,
    actual_sum: f64,
    predictions: usize,
    zero_actual: usize,
    no_prediction: usize,
}

impl AverageAcc {
    fn score(&mut self, pred: Option<Bandwidth>, actual: f64) {
        let Some(pred) = pred else {
            self.no_prediction += 1;
            return;
        };
        if actual <= 0.0 {
            self.zero_actual += 1;
            return;
        }
        let diff = pred.bps() as f64 - actual;
        let rel = diff / actual;
        self.errors.push(rel.abs());
        self.abs_diff_sum += diff.abs();
        self.actual_sum += actual;
        self.abs_sum += rel.abs();
        self.signed_sum += rel;
        self.predictions += 1;
    }

    fn finish(mut self, name: &str) -> AverageResult {
        let n = self.predictions as f64;
        self.errors.sort_unstable_by(f64::total_cmp);
        let m = self.errors.len() / 2;
        // m < len, and m ≥ 1 in the even arm (len ≥ 2 there).
        let median = match self.errors.len() {
            0 => f64::NAN,
            len if len % 2 == 1 => self.errors[m],
            _ => (self.errors[m - 1] + self.errors[m]) / 2.0,
        };
        AverageResult {
            predictor: name.to_string(),
            mean_relative_error: self.abs_sum / n,
            mean_signed_relative_error: self.signed_sum / n,
            median_relative_error: median,
            weighted_relative_error: self.abs_diff_sum / self.actual_sum,
            predictions: self.predictions,
            skipped_zero_actual: self.zero_actual,
            skipped_no_prediction: self.no_prediction,
        }
    }
}

/// One probability's calibrated level, its promises awaiting an outcome
/// (at most h: one per position of the horizon) and its scores.
#[derive(Debug, Clone)]
struct Calibrated {
    level: CalibratedLevel,
    pending: VecDeque<(usize, Bandwidth)>,
    level_sum: f64,
    acc: PercentileAcc,
}

impl Calibrated {
    fn new(level: CalibratedLevel) -> Self {
        Calibrated {
            level,
            pending: VecDeque::new(),
            level_sum: 0.0,
            acc: PercentileAcc::default(),
        }
    }
}

#[derive(Debug, Clone, Default)]
struct PercentileAcc {
    violations: usize,
    predictions: usize,
    promised_sum: f64,
}

impl PercentileAcc {
    /// Scores one promise `b` against the next horizon's sum over `h` bins.
    fn score(&mut self, b: Option<Bandwidth>, next_sum: u128, h: usize) {
        if let Some(b) = b {
            self.predictions += 1;
            self.promised_sum += b.bps() as f64;
            // mean < b  ⇔  sum < b·h, exactly.
            if next_sum < u128::from(b.bps()) * h as u128 {
                self.violations += 1;
            }
        }
    }

    fn finish(self, probability: f64) -> PercentileResult {
        PercentileResult {
            probability,
            // Rounded to 12 decimals so that 1 − 0.9 prints as 0.1.
            nominal_violation: ((1.0 - probability) * 1e12).round() / 1e12,
            violation_rate: rate(self.violations, self.predictions),
            predictions: self.predictions,
            mean_promised_bps: self.promised_sum / self.predictions.max(1) as f64,
        }
    }
}

#[derive(Debug, Clone, Default)]
struct SeedAcc {
    failures: usize,
    strict_failures: usize,
    predictions: usize,
}

impl SeedAcc {
    fn finish(self, n: usize) -> SeedTestResult {
        SeedTestResult {
            n,
            failure_rate: rate(self.failures, self.predictions),
            strict_failure_rate: rate(self.strict_failures, self.predictions),
            predictions: self.predictions,
        }
    }
}

/// `num / den`; 0.0 when nothing was counted (cannot happen after
/// validation, but must not divide by zero).
fn rate(num: usize, den: usize) -> f64 {
    if den == 0 {
        0.0
    } else {
        num as f64 / den as f64
    }
}

/// The minimum of `series[t .. t + n]` for increasing t, amortised O(1)
/// per step with a monotone deque of (index, value).
#[derive(Debug)]
struct ForwardMin {
    n: usize,
    /// Next index of the series to enter the deque.
    next: usize,
    deque: VecDeque<(usize, Bandwidth)>,
}

impl ForwardMin {
    fn new(n: usize) -> Self {
        ForwardMin {
            n,
            next: 0,
            deque: VecDeque::with_capacity(n.min(4096)),
        }
    }

    /// The minimum over `[t, t + n)`, or `None` if that runs past the end.
    /// Calls must come with non-decreasing `t`.
    fn min_at(&mut self, series: &[Bandwidth], t: usize) -> Option<Bandwidth> {
        let end = t.checked_add(self.n)?;
        if end > series.len() {
            return None;
        }
        self.next = self.next.max(t);
        while self.next < end {
            let v = series[self.next];
            while self.deque.back().is_some_and(|&(_, b)| b >= v) {
                self.deque.pop_back();
            }
            self.deque.push_back((self.next, v));
            self.next += 1;
        }
        while self.deque.front().is_some_and(|&(i, _)| i < t) {
            self.deque.pop_front();
        }
        self.deque.front().map(|&(_, v)| v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    fn mbps(v: &[u64]) -> Vec<Bandwidth> {
        v.iter().map(|&m| Bandwidth::from_mbps(m)).collect()
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-12
    }

    /// Series 10, 20, 30, 40, 10 Mbit/s; N = 2, h = 2 → t ∈ {2, 3}.
    /// t = 2: window {10, 20}, actual = (30 + 40)/2 = 35.
    /// t = 3: window {20, 30}, actual = (40 + 10)/2 = 25.
    /// SMA(2): 15 → |15 − 35|/35 = 4/7; 25 → 0; MRE = 2/7.
    /// MA(10): 15 → 4/7; mean(10, 20, 30) = 20 → 5/25 = 0.2; MRE = (4/7 + 0.2)/2.
    /// EWMA(0.3): t = 2: 0.3·20 + 0.7·10 = 13 → 22/35;
    ///            t = 3: 0.3·30 + 0.7·13 = 18.1 → 6.9/25; MRE = mean.
    /// Percentile P = 0.5: ⌈0.5·2⌉ = 1st smallest: 10 (t=2), 20 (t=3): no
    /// violation. P = 0: max: 20 < 35 fine; 30 > 25 violated → 0.5.
    /// Seed test, percentile 0.5, n = 1, t ∈ {2, 3, 4}: X = 10, 20, 30;
    /// next = 30, 40, 10 → one failure in three.
    #[test]
    fn hand_computed_small_study() {
        let series = mbps(&[10, 20, 30, 40, 10]);
        let config = StudyConfig {
            window: 2,
            horizon: 2,
            probabilities: vec![0.5, 0.0],
            seed_test_percentile: 0.5,
            seed_test_n: vec![1],
            adaptive: None,
            calibrated: None,
        };
        let r = run_study(&series, &config).unwrap();
        assert_eq!((r.samples, r.positions), (5, 2));
        let by = |name: &str| r.average.iter().find(|a| a.predictor == name).unwrap();
        assert!(close(by("SMA").mean_relative_error, 2.0 / 7.0));
        assert!(close(by("MA").mean_relative_error, (4.0 / 7.0 + 0.2) / 2.0));
        assert!(close(
            by("EWMA").mean_relative_error,
            (22.0 / 35.0 + 6.9 / 25.0) / 2.0
        ));
        assert!(close(by("SMA").mean_signed_relative_error, -2.0 / 7.0));
        // Median of {4/7, 0} = 2/7; weighted: (20 + 0) / (35 + 25) = 1/3.
        assert!(close(by("SMA").median_relative_error, 2.0 / 7.0));
        assert!(close(by("SMA").weighted_relative_error, 1.0 / 3.0));
        assert_eq!(by("MA").predictions, 2);
        assert_eq!(r.percentile[0].violation_rate, 0.0);
        assert_eq!(r.percentile[1].violation_rate, 0.5);
        assert_eq!(r.percentile[1].nominal_violation, 1.0);
        let d = run_study(&vec![Bandwidth::from_mbps(1); 600], &StudyConfig::default()).unwrap();
        let nominal: Vec<f64> = d.percentile.iter().map(|p| p.nominal_violation).collect();
        assert_eq!(nominal, [0.2, 0.1, 0.05, 0.01]);
        assert_eq!(r.percentile[0].mean_promised_bps, 15e6);
        assert_eq!(r.seed_test[0].predictions, 3);
        assert!(close(r.seed_test[0].failure_rate, 1.0 / 3.0));
    }

    #[test]
    fn constant_series_is_perfect() {
        let series = vec![Bandwidth::from_mbps(7); 700];
        let r = run_study(&series, &StudyConfig::default()).unwrap();
        assert_eq!(r.positions, 700 - 500 - 10 + 1);
        assert_eq!(r.average.len(), 3);
        for a in &r.average {
            assert_eq!(a.mean_relative_error, 0.0, "{}", a.predictor);
            assert_eq!(a.predictions, r.positions);
        }
        for p in &r.percentile {
            assert_eq!(p.violation_rate, 0.0);
            assert_eq!(p.predictions, r.positions);
        }
        for s in &r.seed_test {
            assert_eq!(s.failure_rate, 0.0);
            // The literal "larger than X" fails every kept promise here.
            assert_eq!(s.strict_failure_rate, 1.0);
            assert_eq!(s.predictions, 700 - 500 - s.n + 1);
        }
    }

    #[test]
    fn zero_actuals_are_skipped_and_counted() {
        let series = vec![Bandwidth::ZERO; 20];
        let config = StudyConfig {
            window: 5,
            horizon: 2,
            seed_test_n: vec![],
            ..StudyConfig::default()
        };
        let r = run_study(&series, &config).unwrap();
        for a in &r.average {
            assert_eq!(a.predictions, 0);
            assert_eq!(a.skipped_zero_actual, r.positions);
            assert!(a.mean_relative_error.is_nan());
            assert!(a.median_relative_error.is_nan());
        }
        assert!(r.percentile.iter().all(|p| p.violation_rate == 0.0));
    }

    #[test]
    fn iid_series_is_calibrated() {
        let mut rng = ChaCha8Rng::seed_from_u64(0x0000_ba1d);
        let series: Vec<Bandwidth> = (0..40_000)
            .map(|_| Bandwidth::from_bps(rng.random_range(1_000_000..100_000_000)))
            .collect();
        // h = 1: a fresh sample falls below the ⌈(1−P)N⌉-th smallest of N
        // with probability ⌈(1−P)N⌉/(N+1) ≈ 1 − P.
        let one = StudyConfig {
            horizon: 1,
            ..StudyConfig::default()
        };
        let r = run_study(&series, &one).unwrap();
        for p in &r.percentile {
            let tol = 0.1 * p.nominal_violation + 0.003;
            assert!(
                (p.violation_rate - p.nominal_violation).abs() < tol,
                "P={} violation {}",
                p.probability,
                p.violation_rate
            );
        }
        for a in &r.average {
            assert!(a.mean_relative_error.is_finite() && a.mean_relative_error > 0.0);
        }
        // Seed test on i.i.d. data: ≈ 1 − E[(1 − F(X))ⁿ] ≈ 1 − 0.9002ⁿ.
        for s in &r.seed_test {
            let expect = 1.0 - (1.0 - 50.0 / 501.0f64).powi(s.n as i32);
            assert!(
                (s.failure_rate - expect).abs() < 0.03,
                "n={} {}",
                s.n,
                s.failure_rate
            );
        }
        // h = 10: the mean of 10 samples is far steadier than one sample, so
        // the promise is kept more often than nominal.
        let r10 = run_study(&series, &StudyConfig::default()).unwrap();
        for p in &r10.percentile {
            assert!(p.violation_rate <= p.nominal_violation, "{p:?}");
        }
        // Byte-stable: same input, same report.
        assert_eq!(r10, run_study(&series, &StudyConfig::default()).unwrap());
    }

    #[test]
    fn bad_configs_are_errors() {
        let series = vec![Bandwidth::from_mbps(1); 600];
        let d = StudyConfig::default();
        let err = |c: StudyConfig| run_study(&series, &c).unwrap_err();
        assert_eq!(
            run_study(&series[..509], &d).unwrap_err(),
            StudyError::SeriesTooShort {
                len: 509,
                needed: 510
            }
        );
        assert!(matches!(
            err(StudyConfig { probabilities: vec![0.9, f64::NAN], ..d.clone() }),
            StudyError::Probability(p) if p.is_nan()
        ));
        assert_eq!(
            err(StudyConfig {
                probabilities: vec![1.5],
                ..d.clone()
            }),
            StudyError::Probability(1.5)
        );
        assert_eq!(
            err(StudyConfig {
                horizon: 0,
                ..d.clone()
            }),
            StudyError::ZeroHorizon
        );
        assert_eq!(
            err(StudyConfig {
                window: 0,
                ..d.clone()
            }),
            StudyError::Window(0)
        );
        assert_eq!(
            err(StudyConfig {
                seed_test_percentile: -0.1,
                ..d.clone()
            }),
            StudyError::SeedTestPercentile(-0.1)
        );
        assert_eq!(
            err(StudyConfig {
                seed_test_n: vec![5, 0],
                ..d.clone()
            }),
            StudyError::SeedTestN
        );
        assert_eq!(
            err(StudyConfig {
                seed_test_n: vec![200],
                ..d.clone()
            }),
            StudyError::SeriesTooShort {
                len: 600,
                needed: 700
            }
        );
        assert!(err(StudyConfig {
            window: usize::MAX,
            ..d
        })
        .to_string()
        .contains("window"));
    }

    #[test]
    fn forward_min_matches_naive() {
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let series: Vec<Bandwidth> = (0..300)
            .map(|_| Bandwidth::from_bps(rng.random_range(0..20)))
            .collect();
        for n in [1, 2, 5, 17] {
            let mut f = ForwardMin::new(n);
            for t in 0..series.len() {
                let naive = series.get(t..t + n).and_then(|w| w.iter().min().copied());
                assert_eq!(f.min_at(&series, t), naive, "n={n} t={t}");
            }
        }
    }
}
