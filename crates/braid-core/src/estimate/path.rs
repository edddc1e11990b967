//! [`PathEstimate`]: one path's [`RateSampler`] feeding its
//! [`SlidingWindow`] — what a scheduler asks "what can this path promise?"
//! (seed 000, section IV: "for each overlay path, IQ-Paths network
//! monitoring tracks the past distribution of path bandwidth").
//!
//! The window is a [`WindowPolicy`]: the fixed window of the last N samples
//! (the default, seed 000's), or an [`AdaptiveWindow`] that ADWIN shrinks
//! when the path's rate distribution moves.
//!
//! Invariant: only samples that are not app-limited enter the window, so an
//! idle path keeps the distribution it had while busy.

use super::SlidingWindow;
use super::{AdaptiveStats, AdaptiveWindow, AdwinConfig, EstimateError, RateSample, RateSampler};
use crate::{Bandwidth, Duration, Instant};
use std::collections::VecDeque;

/// Which window a [`PathEstimate`] keeps its samples in.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
#[non_exhaustive]
pub enum WindowPolicy {
    /// The last N samples (seed 000, section IV). The default, N = 500:
    /// on the trace study the adaptive window is not at least as good on
    /// every trace (see docs/predictor-study.md).
    Fixed(usize),
    /// The last samples since ADWIN last detected a change, between
    /// `min_window` and `max_window` of them ([`AdaptiveWindow`]).
    Adaptive(AdwinConfig),
}

impl Default for WindowPolicy {
    fn default() -> Self {
        WindowPolicy::Fixed(super::DEFAULT_MAX_WINDOW)
    }
}

/// The window behind a [`PathEstimate`].
#[derive(Debug, Clone)]
enum Window {
    Fixed(SlidingWindow),
    Adaptive(AdaptiveWindow),
}

impl Window {
    fn new(policy: WindowPolicy) -> Result<Self, EstimateError> {
        Ok(match policy {
            WindowPolicy::Fixed(n) => Window::Fixed(SlidingWindow::try_new(n)?),
            WindowPolicy::Adaptive(config) => Window::Adaptive(AdaptiveWindow::new(config)?),
        })
    }

    fn push(&mut self, sample: crate::Bandwidth) {
        match self {
            Window::Fixed(w) => {
                w.push(sample);
            }
            Window::Adaptive(w) => {
                w.push(sample);
            }
        }
    }

    fn clear(&mut self) {
        match self {
            Window::Fixed(w) => w.clear(),
            Window::Adaptive(w) => w.clear(),
        }
    }

    fn samples(&self) -> &SlidingWindow {
        match self {
            Window::Fixed(w) => w,
            Window::Adaptive(w) => w.window(),
        }
    }
}

/// Counters of a [`PathEstimate`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct PathEstimateStats {
    /// Samples pushed into the window.
    pub samples_used: u64,
    /// App-limited samples kept out of the window.
    pub samples_app_limited: u64,
}

/// The bandwidth distribution of one path, fed by its deliveries.
///
/// # Driving contract (sans-IO)
/// The same as [`RateSampler`]'s: [`handle_delivery`](Self::handle_delivery)
/// on every delivery, [`handle_timeout`](Self::handle_timeout) at
/// [`poll_timeout`](Self::poll_timeout). Finished samples go straight into
/// the window; so do samples handed in with
/// [`handle_sample`](Self::handle_sample) (from a transport connection). Read
/// the window with [`window`](Self::window) (quantiles, CDF and the
/// guarantee methods of [`super::guarantee`]).
/// [`version`](Self::version) changes whenever the window does, so a
/// scheduler can tell when to re-map.
///
/// # Example
/// ```
/// use braid_core::{estimate::PathEstimate, Bandwidth, Duration, Instant};
/// let mut path = PathEstimate::new(Duration::from_millis(100), 500, Instant::ZERO).unwrap();
/// for k in 0..20 {
///     // 125 kB in the middle of every 100 ms interval: 10 Mbit/s.
///     path.handle_delivery(Instant::ZERO + Duration::from_millis(100 * k + 50), 125_000, false);
/// }
/// path.handle_timeout(path.poll_timeout()); // closes the 20th interval
/// assert_eq!(path.window().len(), 20);
/// assert_eq!(path.window().rate_at_probability(0.95), Some(Bandwidth::from_mbps(10)));
/// ```
#[derive(Debug, Clone)]
pub struct PathEstimate {
    sampler: RateSampler,
    policy: WindowPolicy,
    window: Window,
    last: Option<RateSample>,
    stats: PathEstimateStats,
    version: u64,
    /// Samples enter the window as means of the last `scale` usable ones
    /// ([`Self::with_scale`]); 1: as they are.
    scale: usize,
    /// The last `scale` usable rates (bit/s) and their sum.
    recent: VecDeque<u64>,
    recent_sum: u128,
    /// The window holds means (its provisional single samples are gone).
    scaled: bool,
}

/// Largest [`PathEstimate::with_scale`] factor.
pub const MAX_SCALE: usize = 1000;

impl PathEstimate {
    /// Samples every `interval` starting at `now`, over a window of
    /// `window` samples.
    ///
    /// # Errors
    /// [`EstimateError::ZeroInterval`] or [`EstimateError::WindowCapacity`].
    pub fn new(interval: Duration, window: usize, now: Instant) -> Result<Self, EstimateError> {
        Self::with_policy(interval, WindowPolicy::Fixed(window), now)
    }

    /// Samples every `interval` starting at `now`, into the window `policy`
    /// chooses.
    ///
    /// # Errors
    /// [`EstimateError::ZeroInterval`], or the window's own errors
    /// ([`EstimateError::WindowCapacity`], [`EstimateError::AdwinDelta`]).
    pub fn with_policy(
        interval: Duration,
        policy: WindowPolicy,
        now: Instant,
    ) -> Result<Self, EstimateError> {
        Ok(PathEstimate {
            sampler: RateSampler::new(interval, now)?,
            policy,
            window: Window::new(policy)?,
            last: None,
            stats: PathEstimateStats::default(),
            version: 0,
            scale: 1,
            recent: VecDeque::new(),
            recent_sum: 0,
            scaled: false,
        })
    }

    /// The same estimate at a longer time scale: each usable sample enters
    /// the window as the mean of the last `k` usable samples (clamped to
    /// 1..=[`MAX_SCALE`]), so the window is the distribution of the rate
    /// over `k` sampling intervals — the length of the windows a guarantee
    /// is judged over. On a cellular trace whose 100 ms rate is 0 a tenth
    /// of the time the 5th percentile over 100 ms is 0, while over 1 s it
    /// is 2.9 Mbit/s. Until `k` usable samples have been seen the samples
    /// enter as they are (a provisional, more cautious distribution); the
    /// window is emptied of them when the first mean enters.
    pub fn with_scale(mut self, k: usize) -> Self {
        self.scale = k.clamp(1, MAX_SCALE);
        self.recent = VecDeque::with_capacity(self.scale);
        self
    }

    /// The time-scale factor of [`Self::with_scale`].
    pub fn scale(&self) -> usize {
        self.scale
    }

    /// Records `bytes` delivered at `now`; `app_limited` is the sender's
    /// state from `now` on (true: nothing waiting to be sent).
    pub fn handle_delivery(&mut self, now: Instant, bytes: u64, app_limited: bool) {
        self.sampler.handle_delivery(now, bytes, app_limited);
        self.drain();
    }

    /// Takes a sample measured elsewhere, e.g. one a transport connection
    /// delivered through `Connection::poll_rate_sample`: it enters the
    /// window unless it is app-limited, exactly as this estimate's own
    /// samples do. The estimate's own sampler is not involved.
    pub fn handle_sample(&mut self, sample: RateSample) {
        self.take(sample);
    }

    /// Closes every sampling interval that ended at or before `now`.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.sampler.handle_timeout(now);
        self.drain();
    }

    /// When the current sampling interval ends.
    pub fn poll_timeout(&self) -> Instant {
        self.sampler.poll_timeout()
    }

    /// The distribution of the path's recent throughput samples.
    pub fn window(&self) -> &SlidingWindow {
        self.window.samples()
    }

    /// The window policy this estimate was made with.
    pub fn policy(&self) -> WindowPolicy {
        self.policy
    }

    /// The adaptive window's counters (cuts, samples dropped); `None` for a
    /// fixed window.
    pub fn adaptive_stats(&self) -> Option<AdaptiveStats> {
        match &self.window {
            Window::Fixed(_) => None,
            Window::Adaptive(w) => Some(w.stats()),
        }
    }

    /// The sampler (for its interval and counters).
    pub fn sampler(&self) -> &RateSampler {
        &self.sampler
    }

    /// The most recent finished sample, app-limited or not.
    pub fn last_sample(&self) -> Option<RateSample> {
        self.last
    }

    /// Counters.
    pub fn stats(&self) -> PathEstimateStats {
        self.stats
    }

    /// Increases by one for every sample that enters the window.
    pub fn version(&self) -> u64 {
        self.version
    }

    fn drain(&mut self) {
        while let Some(s) = self.sampler.poll_sample() {
            self.take(s);
        }
    }

    fn take(&mut self, s: RateSample) {
        self.last = Some(s);
        if s.app_limited {
            self.stats.samples_app_limited += 1;
        } else {
            let rate = self.scaled_rate(s.rate);
            self.window.push(rate);
            self.stats.samples_used += 1;
            self.version = self.version.wrapping_add(1);
        }
    }

    /// What a usable sample of `rate` enters the window as (see
    /// [`Self::with_scale`]).
    fn scaled_rate(&mut self, rate: Bandwidth) -> Bandwidth {
        if self.scale == 1 {
            return rate;
        }
        if self.recent.len() == self.scale {
            let old = self.recent.pop_front().unwrap_or(0);
            self.recent_sum -= u128::from(old);
        }
        self.recent.push_back(rate.bps());
        self.recent_sum += u128::from(rate.bps());
        if self.recent.len() < self.scale {
            return rate;
        }
        if !self.scaled {
            self.scaled = true;
            self.window.clear();
        }
        let mean = self.recent_sum / self.scale as u128;
        Bandwidth::from_bps(u64::try_from(mean).unwrap_or(u64::MAX))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Bandwidth;

    /// At a scale of 10 the window is the distribution of 10-sample means:
    /// a path that delivers nothing in one interval of ten promises 90 %
    /// of its rate at 0.95, not 0; before ten samples the raw ones stand.
    #[test]
    fn a_longer_time_scale_promises_what_its_windows_carry() {
        let ms = |v: u64| Instant::ZERO + Duration::from_millis(v);
        let mut raw = PathEstimate::new(Duration::from_millis(100), 100, ms(0)).unwrap();
        let mut scaled = raw.clone().with_scale(10);
        assert_eq!(scaled.scale(), 10);
        for k in 1..=200u64 {
            let bytes = if k % 10 == 0 { 0 } else { 125_000 }; // 10 Mbit/s or nothing
            for p in [&mut raw, &mut scaled] {
                p.handle_delivery(ms(k * 100 - 50), bytes, false);
                p.handle_timeout(ms(k * 100));
            }
            if k == 5 {
                assert_eq!(scaled.window().len(), 5, "provisional samples");
                assert_eq!(scaled.window().min(), Some(Bandwidth::from_mbps(10)));
            }
        }
        assert_eq!(
            raw.window().rate_at_probability(0.95),
            Some(Bandwidth::ZERO)
        );
        assert_eq!(
            scaled.window().rate_at_probability(0.95),
            Some(Bandwidth::from_mbps(9))
        );
        assert_eq!(scaled.window().len(), 100);
        assert_eq!(scaled.stats().samples_used, 200);
        assert_eq!(
            PathEstimate::new(Duration::from_millis(100), 1, ms(0))
                .unwrap()
                .with_scale(0)
                .scale(),
            1
        );
    }

    #[test]
    fn idle_path_is_not_a_slow_path() {
        let ms = |v: u64| Instant::ZERO + Duration::from_millis(v);
        let mut p = PathEstimate::new(Duration::from_millis(100), 100, ms(0)).unwrap();
        // Busy at 8 Mbit/s for 1 s: 100 kB per 100 ms.
        for k in 1..=10 {
            p.handle_delivery(ms(k * 100 - 50), 100_000, false);
        }
        p.handle_timeout(ms(1000));
        assert_eq!(p.window().len(), 10);
        assert_eq!(p.version(), 10);
        // Then the application has nothing to send for 5 s.
        p.handle_delivery(ms(1000), 0, true);
        p.handle_timeout(ms(6000));
        assert_eq!(p.window().len(), 10);
        assert_eq!(p.stats().samples_app_limited, 50);
        assert_eq!(p.window().min(), Some(Bandwidth::from_mbps(8)));
        assert!(p.last_sample().is_some_and(|s| s.app_limited));
        // A stalled path with data waiting is a slow path: zero samples count.
        p.handle_delivery(ms(6000), 0, false);
        p.handle_timeout(ms(6300));
        assert_eq!(p.window().len(), 13);
        assert_eq!(p.window().min(), Some(Bandwidth::ZERO));
        assert_eq!(p.poll_timeout(), ms(6400));
        assert_eq!(p.sampler().interval(), Duration::from_millis(100));
    }

    #[test]
    fn adaptive_policy_follows_a_drop() {
        let ms = |v: u64| Instant::ZERO + Duration::from_millis(v);
        let config = crate::estimate::AdwinConfig {
            max_window: 500,
            min_window: 50,
            delta: 0.002,
        };
        let policy = WindowPolicy::Adaptive(config);
        let mut p = PathEstimate::with_policy(Duration::from_millis(100), policy, ms(0)).unwrap();
        let mut fixed = PathEstimate::new(Duration::from_millis(100), 500, ms(0)).unwrap();
        assert_eq!(p.policy(), policy);
        assert_eq!(fixed.policy(), WindowPolicy::Fixed(500));
        assert_eq!(fixed.adaptive_stats(), None);
        // 8 Mbit/s (100 kB per 100 ms) for 50 s, then 2 Mbit/s for 20 s,
        // with a little variation so the variance is not zero.
        for k in 1..=700u64 {
            let bytes = if k <= 500 { 100_000 } else { 25_000 } + (k % 3) * 1_000;
            p.handle_delivery(ms(k * 100 - 50), bytes, false);
            fixed.handle_delivery(ms(k * 100 - 50), bytes, false);
        }
        p.handle_timeout(ms(70_000));
        fixed.handle_timeout(ms(70_000));
        assert!(p.adaptive_stats().is_some_and(|s| s.cuts > 0));
        assert!(p.window().len() < 500);
        // The fixed window still promises from the old regime at P = 0.5.
        let two_and_a_bit = Bandwidth::from_bps(2_200_000);
        assert!(p.window().rate_at_probability(0.5) < Some(two_and_a_bit));
        assert!(fixed.window().rate_at_probability(0.5) > Some(two_and_a_bit));
        assert_eq!(p.stats().samples_used, 700);
        assert!(PathEstimate::with_policy(
            Duration::from_millis(100),
            WindowPolicy::Adaptive(crate::estimate::AdwinConfig {
                delta: 2.0,
                ..config
            }),
            ms(0)
        )
        .is_err());
        assert_eq!(WindowPolicy::default(), WindowPolicy::Fixed(500));
    }

    #[test]
    fn bad_config_is_refused() {
        assert!(PathEstimate::new(Duration::ZERO, 10, Instant::ZERO).is_err());
        assert!(PathEstimate::new(Duration::from_millis(1), 0, Instant::ZERO).is_err());
    }

    mod props {
        use super::*;
        use proptest::prelude::*;

        proptest! {
            /// Only samples that are not app-limited reach the window, and
            /// every sample is either used or counted as app-limited.
            #[test]
            fn window_gets_exactly_the_busy_samples(
                events in prop::collection::vec((0u64..300, 0u64..50_000, any::<bool>()), 0..80),
            ) {
                let ms = |v: u64| Instant::ZERO + Duration::from_millis(v);
                let mut p = PathEstimate::new(Duration::from_millis(100), 10_000, ms(0)).unwrap();
                let mut check = RateSampler::new(Duration::from_millis(100), ms(0)).unwrap();
                let mut t = 0;
                for (dt, bytes, limited) in events {
                    t += dt;
                    p.handle_delivery(ms(t), bytes, limited);
                    check.handle_delivery(ms(t), bytes, limited);
                }
                p.handle_timeout(ms(t + 500));
                check.handle_timeout(ms(t + 500));
                let busy: Vec<_> = std::iter::from_fn(|| check.poll_sample())
                    .filter(|s| !s.app_limited)
                    .map(|s| s.rate)
                    .collect();
                prop_assert_eq!(p.window().iter().collect::<Vec<_>>(), busy);
                let st = p.stats();
                prop_assert_eq!(st.samples_used + st.samples_app_limited, p.sampler().stats().samples);
            }
        }
    }
}
