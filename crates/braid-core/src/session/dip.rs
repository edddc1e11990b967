//! Capacity dips: a path that carries guarantees and delivers far less
//! than it promised, noticed within two estimator intervals (issue 28 §3).
//!
//! Main type: [`DipDetector`] (one per path, source side).
//!
//! The path's estimate is a distribution over 1 s
//! ([`SessionConfig::estimate_scale`](super::SessionConfig)), and PGOS
//! re-maps at most once a second when an estimate degrades: a path whose
//! capacity falls from 20 to 1 Mbit/s keeps its promises for seconds. The
//! detector reads every finished interval of the connection (100 ms): a
//! dip begins when [`DIP_SAMPLES`] intervals in a row, each with data
//! waiting (not app-limited), delivered less than [`DIP_SHARE`] of what is
//! promised on the path. It ends when an interval delivers the promise
//! again, or after [`DIP_HOLD`] (by then the estimate has the dip in its
//! own samples).
//!
//! While a dip lasts, the scheduler sees the path's distribution scaled so
//! that its mean is what the path delivers now, and PGOS re-maps at once
//! (`Pgos::handle_path_dip`): the guarantees move to the other paths, or
//! the upcall says what is left. On a session with one path there is
//! nowhere to move to, and the dip is only reported
//! ([`Event::PathDip`](super::Event::PathDip)).
//!
//! Sans-IO and deterministic; memory: a few words per path.

use crate::estimate::RateSample;
use crate::time::{Duration, Instant};
use crate::units::Bandwidth;

/// A dip: intervals delivering less than this share of the promise.
pub const DIP_SHARE: f64 = 0.5;
/// Consecutive short intervals that make a dip (200 ms at the default
/// 100 ms statistics interval).
pub const DIP_SAMPLES: u8 = 2;
/// Longest a dip scales the path's view.
pub const DIP_HOLD: Duration = Duration::from_secs(10);

/// A dip in progress.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Dip {
    /// When its first short interval began.
    pub since: Instant,
    /// When it was detected.
    pub detected: Instant,
    /// The mean rate of its short intervals.
    pub delivered: Bandwidth,
    /// What was promised on the path when it began.
    pub promised: Bandwidth,
}

/// What one interval changed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum DipChange {
    /// A dip began (see [`Dip`]).
    Began(Dip),
    /// The dip ended: the path delivers its promise again, or the hold
    /// time passed.
    Ended,
}

/// One path's dip detector (see the [module docs](self)).
#[derive(Debug, Clone, Default)]
pub struct DipDetector {
    short: u8,
    short_since: Option<Instant>,
    short_bytes: u64,
    short_time: Duration,
    dip: Option<Dip>,
}

impl DipDetector {
    /// The dip in progress, if any.
    pub fn dip(&self) -> Option<Dip> {
        self.dip
    }

    /// Takes one finished interval of the path's connection, with the
    /// rate promised on the path now; `now` is when it was taken.
    pub fn handle_sample(
        &mut self,
        now: Instant,
        s: &RateSample,
        promised: Bandwidth,
    ) -> Option<DipChange> {
        if let Some(d) = self.dip {
            let recovered = !s.app_limited && s.rate >= d.promised;
            if recovered || now.saturating_duration_since(d.detected) >= DIP_HOLD {
                self.dip = None;
                self.reset();
                return Some(DipChange::Ended);
            }
            return None;
        }
        let threshold = promised.bps() as f64 * DIP_SHARE;
        if promised == Bandwidth::ZERO || s.app_limited || s.rate.bps() as f64 >= threshold {
            self.reset();
            return None;
        }
        self.short += 1;
        self.short_since.get_or_insert(s.start);
        self.short_bytes += s.bytes;
        self.short_time += s.duration;
        if self.short < DIP_SAMPLES {
            return None;
        }
        let secs = self.short_time.as_secs_f64().max(1e-9);
        let dip = Dip {
            since: self.short_since.unwrap_or(s.start),
            detected: now,
            delivered: Bandwidth::from_bps_f64(self.short_bytes as f64 * 8.0 / secs),
            promised,
        };
        self.dip = Some(dip);
        Some(DipChange::Began(dip))
    }

    fn reset(&mut self) {
        self.short = 0;
        self.short_since = None;
        self.short_bytes = 0;
        self.short_time = Duration::ZERO;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(ms: u64, mbps: f64, app_limited: bool) -> RateSample {
        let duration = Duration::from_millis(100);
        let bytes = (mbps * 1e6 / 8.0 * 0.1) as u64;
        RateSample {
            start: Instant::ZERO + Duration::from_millis(ms),
            duration,
            bytes,
            rate: Bandwidth::from_bps_f64(mbps * 1e6),
            app_limited,
            acked_packets: 0,
            lost_packets: 0,
        }
    }

    fn at(ms: u64) -> Instant {
        Instant::ZERO + Duration::from_millis(ms)
    }

    /// A path promised 3 Mbit/s that drops to 1 Mbit/s at 1 s: the dip is
    /// known at the end of its second interval (1.2 s), with what it
    /// delivers; it ends when an interval carries the promise again.
    #[test]
    fn a_dip_is_detected_within_two_intervals_and_ends_on_recovery() {
        let promised = Bandwidth::from_mbps(3);
        let mut d = DipDetector::default();
        for k in 0..10 {
            assert_eq!(
                d.handle_sample(at(k * 100 + 100), &sample(k * 100, 10.0, false), promised),
                None
            );
        }
        assert_eq!(
            d.handle_sample(at(1100), &sample(1000, 1.0, false), promised),
            None
        );
        let Some(DipChange::Began(dip)) =
            d.handle_sample(at(1200), &sample(1100, 1.0, false), promised)
        else {
            panic!("no dip after two short intervals");
        };
        assert_eq!(dip.since, at(1000));
        assert_eq!(dip.detected - dip.since, Duration::from_millis(200));
        assert_eq!(dip.delivered, Bandwidth::from_mbps(1));
        assert_eq!(
            d.handle_sample(at(1300), &sample(1200, 1.0, false), promised),
            None
        );
        assert_eq!(
            d.handle_sample(at(1400), &sample(1300, 4.0, false), promised),
            Some(DipChange::Ended)
        );
        assert_eq!(d.dip(), None);
    }

    /// One short interval, app-limited intervals and a path with nothing
    /// promised are not dips; a dip ends after the hold time at the latest.
    #[test]
    fn noise_idle_paths_and_no_promise_are_not_dips() {
        let promised = Bandwidth::from_mbps(3);
        let mut d = DipDetector::default();
        for k in 0..20 {
            let mbps = if k % 2 == 0 { 0.5 } else { 8.0 };
            assert_eq!(
                d.handle_sample(at(k * 100), &sample(k * 100, mbps, false), promised),
                None
            );
        }
        for k in 20..30 {
            assert_eq!(
                d.handle_sample(at(k * 100), &sample(k * 100, 0.1, true), promised),
                None
            );
            assert_eq!(
                d.handle_sample(at(k * 100), &sample(k * 100, 0.1, false), Bandwidth::ZERO),
                None
            );
        }
        assert!(d
            .handle_sample(at(3000), &sample(3000, 0.1, false), promised)
            .is_none());
        assert!(matches!(
            d.handle_sample(at(3100), &sample(3100, 0.1, false), promised),
            Some(DipChange::Began(_))
        ));
        assert_eq!(
            d.handle_sample(at(3100) + DIP_HOLD, &sample(3100, 0.1, false), promised),
            Some(DipChange::Ended)
        );
    }
}
