//! Stream specifications: what an application asks of one stream.
//!
//! A [`StreamSpec`] is one of four kinds (seed 000 §V-A and §V-B.1):
//!
//! * [`StreamSpec::MinRate`]: at least `rate` with probability `probability`.
//! * [`StreamSpec::Window`]: `x` of every `y` messages of `message_size` bytes
//!   served within each window `window`, with probability `probability`.
//!   By Lemma 1 this is the rate `x·s/t_w` with that probability.
//! * [`StreamSpec::ViolationBound`]: the expected number of messages that miss
//!   the window, E\[Z\], stays below `max_expected_misses` (Lemma 2).
//! * [`StreamSpec::BestEffort`]: whatever is left, shared by `weight`.
//!
//! Every constructor validates; [`StreamSpec::validate`] checks a value built
//! by hand. Message deadlines follow from the spec: a stream whose demand is
//! `r` bit/s gets one virtual deadline every `s·8/r` seconds
//! ([`StreamSpec::required_rate`]).

use crate::time::Duration;
use crate::units::Bandwidth;

/// Why a [`StreamSpec`] was rejected.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum SpecError {
    /// The probability is not strictly between 0 and 1 (or is NaN).
    #[error("probability {0} is outside (0, 1)")]
    Probability(f64),
    /// The window length is zero.
    #[error("window length is zero")]
    ZeroWindow,
    /// `x` (messages that must make it) is zero or exceeds `y` (messages per window).
    #[error("window constraint {x} of {y} is invalid (need 0 < x <= y)")]
    WindowConstraint {
        /// Messages that must be served per window.
        x: u32,
        /// Messages that arrive per window.
        y: u32,
    },
    /// The required rate is zero.
    #[error("required rate is zero")]
    ZeroRate,
    /// The message size is zero.
    #[error("message size is zero")]
    ZeroMessageSize,
    /// The violation bound is negative, infinite or NaN.
    #[error("violation bound {0} is not a finite number ≥ 0")]
    ViolationBound(f64),
    /// A best-effort weight of zero.
    #[error("best-effort weight is zero")]
    ZeroWeight,
}

/// What one stream needs from the network (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub enum StreamSpec {
    /// At least `rate`, `probability` of the time.
    MinRate {
        /// The minimum rate.
        rate: Bandwidth,
        /// Probability in (0, 1) with which the rate must be met.
        probability: f64,
    },
    /// `x` of every `y` messages of `message_size` bytes within each `window`,
    /// with `probability`.
    Window {
        /// Messages that must be served per window.
        x: u32,
        /// Messages that arrive per window.
        y: u32,
        /// Scheduling window t_w.
        window: Duration,
        /// Message (packet) size s in bytes.
        message_size: u32,
        /// Probability in (0, 1) with which the window constraint must hold.
        probability: f64,
    },
    /// E\[Z\] ≤ `max_expected_misses`, where Z counts the messages of a
    /// window that miss it, for `x` messages of `message_size` per `window`.
    ViolationBound {
        /// Messages per window.
        x: u32,
        /// Scheduling window t_w.
        window: Duration,
        /// Message size s in bytes.
        message_size: u32,
        /// Bound on the expected misses per window.
        max_expected_misses: f64,
    },
    /// No guarantee; spare capacity shared in proportion to `weight`.
    BestEffort {
        /// Relative share of spare capacity (baselines read it as bit/s).
        weight: u64,
    },
}

fn check_probability(p: f64) -> Result<(), SpecError> {
    if p > 0.0 && p < 1.0 {
        Ok(())
    } else {
        Err(SpecError::Probability(p))
    }
}

impl StreamSpec {
    /// A minimum rate with a probability.
    ///
    /// # Errors
    /// [`SpecError::ZeroRate`] or [`SpecError::Probability`].
    pub fn min_rate(rate: Bandwidth, probability: f64) -> Result<Self, SpecError> {
        let s = StreamSpec::MinRate { rate, probability };
        s.validate()?;
        Ok(s)
    }

    /// A window constraint `x` of `y` messages within `window`, with a probability.
    ///
    /// # Errors
    /// Any [`SpecError`] that describes the bad field.
    pub fn window(
        x: u32,
        y: u32,
        window: Duration,
        message_size: u32,
        probability: f64,
    ) -> Result<Self, SpecError> {
        let s = StreamSpec::Window {
            x,
            y,
            window,
            message_size,
            probability,
        };
        s.validate()?;
        Ok(s)
    }

    /// A violation bound E\[Z\] ≤ `max_expected_misses` (Lemma 2).
    ///
    /// # Errors
    /// Any [`SpecError`] that describes the bad field.
    pub fn violation_bound(
        x: u32,
        window: Duration,
        message_size: u32,
        max_expected_misses: f64,
    ) -> Result<Self, SpecError> {
        let s = StreamSpec::ViolationBound {
            x,
            window,
            message_size,
            max_expected_misses,
        };
        s.validate()?;
        Ok(s)
    }

    /// Best effort with a weight.
    ///
    /// # Errors
    /// [`SpecError::ZeroWeight`].
    pub fn best_effort(weight: u64) -> Result<Self, SpecError> {
        let s = StreamSpec::BestEffort { weight };
        s.validate()?;
        Ok(s)
    }

    /// Check every field.
    ///
    /// # Errors
    /// The first [`SpecError`] found.
    pub fn validate(&self) -> Result<(), SpecError> {
        match *self {
            StreamSpec::MinRate { rate, probability } => {
                check_probability(probability)?;
                if rate == Bandwidth::ZERO {
                    return Err(SpecError::ZeroRate);
                }
            }
            StreamSpec::Window {
                x,
                y,
                window,
                message_size,
                probability,
            } => {
                check_probability(probability)?;
                if window.is_zero() {
                    return Err(SpecError::ZeroWindow);
                }
                if x == 0 || x > y {
                    return Err(SpecError::WindowConstraint { x, y });
                }
                if message_size == 0 {
                    return Err(SpecError::ZeroMessageSize);
                }
            }
            StreamSpec::ViolationBound {
                x,
                window,
                message_size,
                max_expected_misses,
            } => {
                if window.is_zero() {
                    return Err(SpecError::ZeroWindow);
                }
                if x == 0 {
                    return Err(SpecError::WindowConstraint { x, y: x });
                }
                if message_size == 0 {
                    return Err(SpecError::ZeroMessageSize);
                }
                if !max_expected_misses.is_finite() || max_expected_misses < 0.0 {
                    return Err(SpecError::ViolationBound(max_expected_misses));
                }
            }
            StreamSpec::BestEffort { weight } => {
                if weight == 0 {
                    return Err(SpecError::ZeroWeight);
                }
            }
        }
        Ok(())
    }

    /// The rate the spec asks for: `rate`, or `x·s/t_w` (Lemma 1's b0) for
    /// window and violation-bound specs; `None` for best effort.
    pub fn required_rate(&self) -> Option<Bandwidth> {
        match *self {
            StreamSpec::MinRate { rate, .. } => Some(rate),
            StreamSpec::Window {
                x,
                window,
                message_size,
                ..
            }
            | StreamSpec::ViolationBound {
                x,
                window,
                message_size,
                ..
            } => Some(Bandwidth::from_delivery(
                u64::from(x) * u64::from(message_size),
                window,
            )),
            StreamSpec::BestEffort { .. } => None,
        }
    }

    /// The probability of a probabilistic spec; `None` otherwise.
    pub fn probability(&self) -> Option<f64> {
        match *self {
            StreamSpec::MinRate { probability, .. } | StreamSpec::Window { probability, .. } => {
                Some(probability)
            }
            _ => None,
        }
    }

    /// The bound E\[Z\] of a violation-bound spec; `None` otherwise.
    pub fn max_expected_misses(&self) -> Option<f64> {
        match *self {
            StreamSpec::ViolationBound {
                max_expected_misses,
                ..
            } => Some(max_expected_misses),
            _ => None,
        }
    }

    /// Whether the spec asks for a guarantee (anything but best effort).
    pub fn is_guaranteed(&self) -> bool {
        !matches!(self, StreamSpec::BestEffort { .. })
    }

    /// Window constraint x/y used to break deadline ties (Table I, 2.2/3.2):
    /// `x/y` for window specs, 1 for rate and violation-bound specs (every
    /// message counts), 0 for best effort.
    pub fn window_constraint(&self) -> f64 {
        match *self {
            StreamSpec::Window { x, y, .. } => f64::from(x) / f64::from(y),
            StreamSpec::BestEffort { .. } => 0.0,
            _ => 1.0,
        }
    }

    /// Weight for fair-queueing baselines and for sharing spare capacity:
    /// the required rate in bit/s for guaranteed specs, `weight` for best effort.
    pub fn fair_weight(&self) -> u64 {
        match *self {
            StreamSpec::BestEffort { weight } => weight,
            _ => self.required_rate().map_or(1, |r| r.bps().max(1)),
        }
    }

    /// The per-message deadline spacing `s·8/r` for specs with a message size
    /// (t_w/x), used to order streams of equal probability (tighter first).
    pub fn message_interval(&self) -> Option<Duration> {
        match *self {
            StreamSpec::Window { x, window, .. } | StreamSpec::ViolationBound { x, window, .. } => {
                Some(window / u64::from(x))
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invalid_specs_rejected() {
        let mb = Bandwidth::from_mbps(1);
        assert_eq!(
            StreamSpec::min_rate(mb, 1.0),
            Err(SpecError::Probability(1.0))
        );
        assert_eq!(
            StreamSpec::min_rate(mb, 0.0),
            Err(SpecError::Probability(0.0))
        );
        assert!(matches!(
            StreamSpec::min_rate(mb, f64::NAN),
            Err(SpecError::Probability(_))
        ));
        assert_eq!(
            StreamSpec::min_rate(Bandwidth::ZERO, 0.9),
            Err(SpecError::ZeroRate)
        );
        assert_eq!(
            StreamSpec::window(3, 4, Duration::ZERO, 1000, 0.9),
            Err(SpecError::ZeroWindow)
        );
        assert_eq!(
            StreamSpec::window(5, 4, Duration::from_millis(40), 1000, 0.9),
            Err(SpecError::WindowConstraint { x: 5, y: 4 })
        );
        assert_eq!(
            StreamSpec::window(0, 4, Duration::from_millis(40), 1000, 0.9),
            Err(SpecError::WindowConstraint { x: 0, y: 4 })
        );
        assert_eq!(
            StreamSpec::window(3, 4, Duration::from_millis(40), 0, 0.9),
            Err(SpecError::ZeroMessageSize)
        );
        assert_eq!(
            StreamSpec::violation_bound(3, Duration::from_millis(40), 1000, -0.5),
            Err(SpecError::ViolationBound(-0.5))
        );
        assert_eq!(
            StreamSpec::violation_bound(10, Duration::from_secs(1), 1500, f64::INFINITY),
            Err(SpecError::ViolationBound(f64::INFINITY))
        );
        assert_eq!(StreamSpec::best_effort(0), Err(SpecError::ZeroWeight));
        // Hand-built values go through the same checks.
        let hand = StreamSpec::MinRate {
            rate: mb,
            probability: 1.5,
        };
        assert_eq!(hand.validate(), Err(SpecError::Probability(1.5)));
    }

    #[test]
    fn window_spec_is_lemma_1_rate() {
        // 10 messages of 1250 bytes per 100 ms = 1 Mbit/s.
        let s = StreamSpec::window(10, 12, Duration::from_millis(100), 1250, 0.95).unwrap();
        assert_eq!(s.required_rate(), Some(Bandwidth::from_mbps(1)));
        assert_eq!(s.probability(), Some(0.95));
        assert_eq!(s.message_interval(), Some(Duration::from_millis(10)));
        assert!((s.window_constraint() - 10.0 / 12.0).abs() < 1e-12);
        let be = StreamSpec::best_effort(7).unwrap();
        assert_eq!(be.required_rate(), None);
        assert_eq!(be.fair_weight(), 7);
        assert!(!be.is_guaranteed());
    }
}
