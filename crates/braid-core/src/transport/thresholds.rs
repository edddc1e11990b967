//! Threshold events: conditions the application registers on the
//! connection's metrics, evaluated once per measurement interval, with
//! hysteresis (seed 002 §2.1 "application-registered callbacks"; the
//! experiments of §3.3-3.5 use loss-ratio thresholds such as upper 15 %,
//! lower 1 %).
//!
//! Main types: [`Condition`], [`Thresholds`], [`ThresholdEvent`].
//!
//! Two modes: *edge* conditions ([`Thresholds::add`]) report each crossing
//! once — `crossed` then `cleared`, strictly alternating; *repeating*
//! conditions ([`Thresholds::add_repeating`]) also report every further
//! interval in which the condition still holds (the seed's callbacks,
//! which an application that adapts step by step needs, §3.4).
//!
//! Invariants: at most [`MAX_THRESHOLDS`] conditions; the clear level lies
//! on the safe side of the trigger; a `cleared` event only ever follows a
//! `crossed` one.

use crate::estimate::RateSample;
use crate::time::Duration;
use crate::units::Bandwidth;

/// Most conditions one connection holds.
pub const MAX_THRESHOLDS: usize = 32;
/// Fewest packets (acked + lost) an interval needs before its loss ratio
/// may trigger or clear a loss condition; sparser intervals say nothing.
pub const MIN_LOSS_SAMPLES: u64 = 10;

/// A condition on a metric, with the level at which it clears.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub enum Condition {
    /// Loss ratio rises above `above`; clears when it falls below `clear`.
    LossAbove {
        /// Trigger level (fraction).
        above: f64,
        /// Clear level (fraction, ≤ `above`).
        clear: f64,
    },
    /// Loss ratio falls below `below`; clears when it rises above `clear`.
    LossBelow {
        /// Trigger level.
        below: f64,
        /// Clear level (≥ `below`).
        clear: f64,
    },
    /// Delivery rate falls below `below` in an interval that was not
    /// application-limited; clears above `clear`.
    RateBelow {
        /// Trigger level.
        below: Bandwidth,
        /// Clear level (≥ `below`).
        clear: Bandwidth,
    },
    /// Smoothed RTT rises above `above`; clears below `clear`.
    RttAbove {
        /// Trigger level.
        above: Duration,
        /// Clear level (≤ `above`).
        clear: Duration,
    },
}

impl Condition {
    fn valid(&self) -> bool {
        let frac = |v: f64| (0.0..=1.0).contains(&v);
        match *self {
            Condition::LossAbove { above, clear } => frac(above) && frac(clear) && clear <= above,
            Condition::LossBelow { below, clear } => frac(below) && frac(clear) && clear >= below,
            Condition::RateBelow { below, clear } => clear >= below,
            Condition::RttAbove { above, clear } => clear <= above,
        }
    }

    /// (triggered, cleared) for this interval; `None` if the interval says
    /// nothing about the metric (rate in an app-limited interval).
    fn check(&self, s: &RateSample, srtt: Duration) -> Option<(bool, bool)> {
        let loss_known = s.packets() >= MIN_LOSS_SAMPLES;
        let loss = s.loss_ratio();
        Some(match *self {
            Condition::LossAbove { .. } | Condition::LossBelow { .. } if !loss_known => {
                return None
            }
            Condition::LossAbove { above, clear } => (loss > above, loss < clear),
            Condition::LossBelow { below, clear } => (loss < below, loss > clear),
            Condition::RateBelow { below, clear } => {
                if s.app_limited {
                    return None;
                }
                (s.rate < below, s.rate > clear)
            }
            Condition::RttAbove { above, clear } => (srtt > above, srtt < clear),
        })
    }
}

/// Identifies a registered condition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ThresholdId(pub u32);

/// What happened to a condition.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ThresholdEvent {
    /// Which condition.
    pub id: ThresholdId,
    /// The condition itself.
    pub condition: Condition,
    /// True when it started to hold, false when it cleared.
    pub crossed: bool,
    /// The interval's loss ratio.
    pub loss_ratio: f64,
    /// The interval's delivery rate.
    pub delivery_rate: Bandwidth,
    /// The smoothed RTT.
    pub srtt: Duration,
}

/// Why a condition was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ThresholdError {
    /// [`MAX_THRESHOLDS`] are registered already.
    #[error("too many thresholds")]
    TooMany,
    /// A level is out of range or the clear level is on the wrong side.
    #[error("invalid threshold levels")]
    Invalid,
}

/// One registered condition.
#[derive(Debug, Clone, Copy)]
struct Entry {
    id: ThresholdId,
    condition: Condition,
    /// The condition currently holds (`crossed` was reported last).
    active: bool,
    /// Reports every interval while it holds.
    repeat: bool,
}

/// The registered conditions and whether each currently holds.
#[derive(Debug, Default)]
pub struct Thresholds {
    entries: Vec<Entry>,
    next_id: u32,
}

impl Thresholds {
    /// Registers a condition.
    ///
    /// # Errors
    /// [`ThresholdError`] if full or invalid.
    pub fn add(&mut self, c: Condition) -> Result<ThresholdId, ThresholdError> {
        self.insert(c, false)
    }

    /// Registers a condition that reports every interval while it holds
    /// (after the first `crossed`, further `crossed` events each interval
    /// until it clears).
    ///
    /// # Errors
    /// [`ThresholdError`] if full or invalid.
    pub fn add_repeating(&mut self, c: Condition) -> Result<ThresholdId, ThresholdError> {
        self.insert(c, true)
    }

    fn insert(&mut self, c: Condition, repeat: bool) -> Result<ThresholdId, ThresholdError> {
        if self.entries.len() >= MAX_THRESHOLDS {
            return Err(ThresholdError::TooMany);
        }
        if !c.valid() {
            return Err(ThresholdError::Invalid);
        }
        let id = ThresholdId(self.next_id);
        self.next_id += 1;
        self.entries.push(Entry {
            id,
            condition: c,
            active: false,
            repeat,
        });
        Ok(id)
    }

    /// Removes a condition; false if unknown.
    pub fn remove(&mut self, id: ThresholdId) -> bool {
        let n = self.entries.len();
        self.entries.retain(|e| e.id != id);
        self.entries.len() != n
    }

    /// Evaluates every condition on one interval's sample.
    pub fn evaluate(
        &mut self,
        s: &RateSample,
        srtt: Duration,
        mut emit: impl FnMut(ThresholdEvent),
    ) {
        for Entry {
            id,
            condition: c,
            active,
            repeat,
        } in self.entries.iter_mut()
        {
            let Some((trig, clear)) = c.check(s, srtt) else {
                continue;
            };
            let flip = if *active { clear } else { trig };
            // A repeating condition reports again while it holds, i.e. when
            // it is active, does not clear, and still meets its trigger.
            let again = *repeat && *active && !clear && trig;
            if flip || again {
                if flip {
                    *active = !*active;
                }
                emit(ThresholdEvent {
                    id: *id,
                    condition: *c,
                    crossed: *active,
                    loss_ratio: s.loss_ratio(),
                    delivery_rate: s.rate,
                    srtt,
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::Instant;

    /// A sample of 100 packets with loss ratio `loss` (a whole percentage).
    fn sample(loss: f64, mbps: u64, app_limited: bool) -> RateSample {
        let lost = (loss * 100.0).round() as u64;
        RateSample {
            start: Instant::ZERO,
            duration: Duration::from_millis(100),
            bytes: 0,
            rate: Bandwidth::from_mbps(mbps),
            app_limited,
            acked_packets: 100 - lost,
            lost_packets: lost,
        }
    }

    fn run(t: &mut Thresholds, s: RateSample, rtt_ms: u64) -> Vec<bool> {
        let mut v = Vec::new();
        t.evaluate(&s, Duration::from_millis(rtt_ms), |e| v.push(e.crossed));
        v
    }

    #[test]
    fn loss_above_with_hysteresis() {
        let mut t = Thresholds::default();
        t.add(Condition::LossAbove {
            above: 0.15,
            clear: 0.10,
        })
        .unwrap();
        assert!(run(&mut t, sample(0.12, 1, false), 10).is_empty());
        assert_eq!(run(&mut t, sample(0.2, 1, false), 10), vec![true]);
        assert!(
            run(&mut t, sample(0.3, 1, false), 10).is_empty(),
            "no repeat"
        );
        assert!(
            run(&mut t, sample(0.12, 1, false), 10).is_empty(),
            "in band"
        );
        assert_eq!(run(&mut t, sample(0.05, 1, false), 10), vec![false]);
    }

    #[test]
    fn loss_below_rate_below_and_rtt_above() {
        let mut t = Thresholds::default();
        t.add(Condition::LossBelow {
            below: 0.01,
            clear: 0.02,
        })
        .unwrap();
        t.add(Condition::RateBelow {
            below: Bandwidth::from_mbps(5),
            clear: Bandwidth::from_mbps(6),
        })
        .unwrap();
        t.add(Condition::RttAbove {
            above: Duration::from_millis(50),
            clear: Duration::from_millis(40),
        })
        .unwrap();
        assert_eq!(
            run(&mut t, sample(0.0, 4, false), 60),
            vec![true, true, true]
        );
        assert_eq!(
            run(&mut t, sample(0.05, 9, false), 30),
            vec![false, false, false]
        );
        // An app-limited interval says nothing about the path's rate.
        assert!(run(&mut t, sample(0.05, 1, true), 30).is_empty());
    }

    #[test]
    fn repeating_conditions_report_every_interval_while_holding() {
        let mut t = Thresholds::default();
        t.add_repeating(Condition::LossAbove {
            above: 0.15,
            clear: 0.10,
        })
        .unwrap();
        assert_eq!(run(&mut t, sample(0.2, 1, false), 10), vec![true]);
        assert_eq!(run(&mut t, sample(0.3, 1, false), 10), vec![true]);
        // In the hysteresis band: neither holds nor clears.
        assert!(run(&mut t, sample(0.12, 1, false), 10).is_empty());
        assert_eq!(run(&mut t, sample(0.05, 1, false), 10), vec![false]);
        assert!(run(&mut t, sample(0.05, 1, false), 10).is_empty());
    }

    #[test]
    fn refuses_bad_levels_and_too_many() {
        let mut t = Thresholds::default();
        assert_eq!(
            t.add(Condition::LossAbove {
                above: 0.1,
                clear: 0.2
            }),
            Err(ThresholdError::Invalid)
        );
        for _ in 0..MAX_THRESHOLDS {
            t.add(Condition::LossAbove {
                above: 0.1,
                clear: 0.05,
            })
            .unwrap();
        }
        assert_eq!(
            t.add(Condition::LossAbove {
                above: 0.1,
                clear: 0.05
            }),
            Err(ThresholdError::TooMany)
        );
        assert!(t.remove(ThresholdId(0)));
        assert!(!t.remove(ThresholdId(0)));
    }
}
