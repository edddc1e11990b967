//! Round-trip time estimation in the style of RFC 6298 (smoothed RTT and
//! variance with gains 1/8 and 1/4), with the ack-delay correction of
//! RFC 9002 §5.3 and a running minimum.
//!
//! Main type: [`RttEstimator`]. Invariant: before the first sample, `srtt`
//! is the configured initial RTT and `rttvar` half of it.

use crate::time::Duration;

/// Smoothed RTT, its variation, the latest and minimum samples.
#[derive(Debug, Clone, Copy)]
pub struct RttEstimator {
    srtt: Duration,
    rttvar: Duration,
    latest: Duration,
    /// `latest` less the peer's ack delay, as it entered `srtt`.
    latest_adjusted: Duration,
    min: Duration,
    has_sample: bool,
}

impl RttEstimator {
    /// An estimator that assumes `initial` until the first sample.
    pub fn new(initial: Duration) -> Self {
        RttEstimator {
            srtt: initial,
            rttvar: initial / 2,
            latest: initial,
            latest_adjusted: initial,
            min: initial,
            has_sample: false,
        }
    }

    /// Adds a sample measured as `sample` (send to ack), of which the peer
    /// says it held the packet for `ack_delay` (already capped by the
    /// caller at the negotiated maximum).
    pub fn update(&mut self, sample: Duration, ack_delay: Duration) {
        self.latest = sample;
        if !self.has_sample {
            self.has_sample = true;
            self.min = sample;
            self.latest_adjusted = sample;
            self.srtt = sample;
            self.rttvar = sample / 2;
            return;
        }
        self.min = self.min.min(sample);
        // Subtract the ack delay only if that does not go below the minimum.
        let adjusted = if sample >= self.min + ack_delay {
            sample - ack_delay
        } else {
            sample
        };
        self.latest_adjusted = adjusted;
        let diff = if self.srtt > adjusted {
            self.srtt - adjusted
        } else {
            adjusted - self.srtt
        };
        // rttvar = 3/4 rttvar + 1/4 |srtt - r|; srtt = 7/8 srtt + 1/8 r
        self.rttvar = (self.rttvar * 3 + diff) / 4;
        self.srtt = (self.srtt * 7 + adjusted) / 8;
    }

    /// Smoothed RTT.
    pub fn srtt(&self) -> Duration {
        self.srtt
    }
    /// RTT variation.
    pub fn rttvar(&self) -> Duration {
        self.rttvar
    }
    /// The most recent sample.
    pub fn latest(&self) -> Duration {
        self.latest
    }
    /// The smallest sample seen.
    pub fn min(&self) -> Duration {
        self.min
    }
    /// True once a sample has been taken.
    pub fn has_sample(&self) -> bool {
        self.has_sample
    }

    /// A conservative estimate of the one-way transit of a packet sent
    /// now: `max(srtt, latest)`, both net of the peer's ack delay — a whole
    /// round trip, not half of one.
    ///
    /// The sender writes a message's time to live as its deadline minus
    /// now minus this estimate, so that the receiver's deadline (arrival +
    /// TTL) does not fall after the sender's (issue 3: "never delivered
    /// late"). Without synchronised clocks the forward transit cannot be
    /// measured, only bounded: a round trip is the forward transit plus a
    /// non-negative return transit, so one RTT bounds the forward transit
    /// whatever the path's asymmetry, whereas `srtt / 2` (+ k·rttvar) is
    /// the mean only on a symmetric path (on an 18 ms / 2 ms simulated path
    /// it let messages through up to 8 ms late; docs/rudp-experiments.md).
    /// The price: a message goes out only while more than one RTT of its
    /// deadline is left. The ack delay is time the packet
    /// spent at the receiver, not in transit, so it is left out. `latest`
    /// catches a queue that has grown since `srtt` last moved (as loss
    /// detection's `max(srtt, latest)` does, RFC 9002 §6.1.2). It is still
    /// a bound on *past* packets: a queue that grows suddenly after the
    /// last sample can make a packet slower than this, so the guarantee is
    /// best-effort. Before the first sample both are the initial RTT.
    pub fn transit_bound(&self) -> Duration {
        self.srtt.max(self.latest_adjusted)
    }

    /// The probe timeout before backoff: `srtt + max(4·rttvar, 1 ms) +
    /// max_ack_delay` (RFC 6298's RTO without its 1 s floor, as in RFC 9002).
    pub fn pto_base(&self, max_ack_delay: Duration) -> Duration {
        self.srtt + (self.rttvar * 4).max(Duration::from_millis(1)) + max_ack_delay
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_sample_sets_srtt_and_half_var() {
        let mut r = RttEstimator::new(Duration::from_millis(100));
        assert!(!r.has_sample());
        r.update(Duration::from_millis(40), Duration::ZERO);
        assert_eq!(r.srtt(), Duration::from_millis(40));
        assert_eq!(r.rttvar(), Duration::from_millis(20));
        assert_eq!(r.min(), Duration::from_millis(40));
    }

    #[test]
    fn smooths_with_rfc6298_gains() {
        let mut r = RttEstimator::new(Duration::from_millis(100));
        r.update(Duration::from_millis(40), Duration::ZERO);
        r.update(Duration::from_millis(80), Duration::ZERO);
        // rttvar = 3/4*20 + 1/4*40 = 25; srtt = 7/8*40 + 1/8*80 = 45
        assert_eq!(r.rttvar(), Duration::from_millis(25));
        assert_eq!(r.srtt(), Duration::from_millis(45));
    }

    #[test]
    fn transit_bound_is_a_whole_round_trip_and_follows_the_latest_sample() {
        let mut r = RttEstimator::new(Duration::from_millis(100));
        // Before any sample: the initial RTT.
        assert_eq!(r.transit_bound(), Duration::from_millis(100));
        r.update(Duration::from_millis(40), Duration::ZERO);
        assert_eq!(r.transit_bound(), Duration::from_millis(40));
        // A queue builds: the latest sample leads the smoothed RTT.
        r.update(Duration::from_millis(80), Duration::ZERO);
        assert_eq!(r.srtt(), Duration::from_millis(45));
        assert_eq!(r.transit_bound(), Duration::from_millis(80));
        // It drains: the smoothed RTT still remembers it.
        r.update(Duration::from_millis(40), Duration::ZERO);
        assert_eq!(r.transit_bound(), r.srtt());
        assert!(r.srtt() > Duration::from_millis(40));
        // Time the peer held the ack is not transit.
        r.update(Duration::from_millis(150), Duration::from_millis(60));
        assert_eq!(r.latest(), Duration::from_millis(150));
        assert_eq!(r.transit_bound(), Duration::from_millis(90));
    }

    #[test]
    fn ack_delay_is_subtracted_only_above_min() {
        let mut r = RttEstimator::new(Duration::from_millis(100));
        r.update(Duration::from_millis(40), Duration::ZERO);
        r.update(Duration::from_millis(50), Duration::from_millis(10));
        assert_eq!(r.srtt(), Duration::from_millis(40));
        r.update(Duration::from_millis(42), Duration::from_millis(10));
        // 42 - 10 < min 40: delay ignored, sample 42 used.
        assert_eq!(r.srtt(), Duration::from_nanos(40_250_000));
    }
}
