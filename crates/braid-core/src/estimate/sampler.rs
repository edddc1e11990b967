//! [`RateSampler`]: bytes delivered over time → one throughput sample per
//! fixed interval (seed 000, section IV: "each sample is the bandwidth
//! measured in 0.1 to 1 second").
//!
//! Time is cut into back-to-back intervals `[start + k·I, start + (k+1)·I)`.
//! Every interval becomes one [`RateSample`], including intervals in which
//! nothing was delivered (rate 0: a stalled path is a slow path). An interval
//! in which the sender had nothing to send for any part of it is marked
//! [`RateSample::app_limited`]: its rate says how much the application
//! offered, not what the path can carry, so it must be kept out of the
//! distribution ([`super::PathEstimate`] does that).
//!
//! A sampler can instead close intervals only when its driver says so
//! ([`Closing::OnTimeout`]): that is how a transport connection measures
//! its delivery rate and loss ratio (seed 002 §2.1), and it then hands
//! every finished sample out through `Connection::poll_rate_sample`, where a
//! [`super::PathEstimate`] can take it ([`super::PathEstimate::handle_sample`]).
//!
//! Invariants: bytes are conserved — every byte handed in is in exactly one
//! emitted sample, in [`SamplerStats::bytes_dropped`] (a sample pushed out of
//! the full output queue) or in [`RateSampler::pending_bytes`]; the output
//! queue never holds more than its bound; nothing here panics or loops for
//! longer than the queue bound, whatever the time stamps.

use std::collections::VecDeque;

use super::EstimateError;
use crate::{Bandwidth, Duration, Instant};

/// Default bound of the output queue of a [`RateSampler`].
pub const DEFAULT_SAMPLE_QUEUE: usize = 1024;

/// One interval's throughput (and, from a transport connection, its losses):
/// the one rate-sample type of braid.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct RateSample {
    /// Start of the interval.
    pub start: Instant,
    /// Length of the interval: the sampler's interval, or a whole multiple
    /// of it when [`Closing::OnTimeout`] folded intervals that passed without
    /// a timeout into one sample.
    pub duration: Duration,
    /// Bytes delivered in the interval.
    pub bytes: u64,
    /// `bytes` over `duration`, rounded down to a whole bit/s.
    pub rate: Bandwidth,
    /// The sender had nothing to send during some part of the interval; the
    /// sample does not measure the path and is kept out of distributions.
    pub app_limited: bool,
    /// Packets acknowledged in the interval (counted through
    /// [`RateSampler::handle_ack`]; 0 for plain deliveries).
    pub acked_packets: u64,
    /// Packets declared lost in the interval ([`RateSampler::handle_loss`]).
    pub lost_packets: u64,
}

impl RateSample {
    /// The end of the interval (exclusive).
    pub fn end(&self) -> Instant {
        self.start + self.duration
    }

    /// Packets acknowledged or declared lost: the loss ratio's sample size.
    pub fn packets(&self) -> u64 {
        self.acked_packets.saturating_add(self.lost_packets)
    }

    /// Lost over (acknowledged + lost) packets; 0 when neither.
    pub fn loss_ratio(&self) -> f64 {
        let total = self.packets();
        if total == 0 {
            0.0
        } else {
            self.lost_packets as f64 / total as f64
        }
    }
}

/// When a [`RateSampler`] closes an interval.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Closing {
    /// Every call first closes the intervals that ended at or before its
    /// `now`; events land in the interval their time stamp falls in, and
    /// every interval is one sample, empty ones included (the default).
    #[default]
    Stamped,
    /// Only [`RateSampler::handle_timeout`] closes, once the open interval
    /// has ended; events go in the interval open when they are handled, and
    /// whole intervals that passed without a timeout are folded into one
    /// sample as long as all of them. A transport connection measures this
    /// way: its driver calls `handle_timeout` at the interval's end, and a
    /// burst of acks handled together is never split between samples.
    OnTimeout,
}

/// Counters of a [`RateSampler`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct SamplerStats {
    /// Bytes handed in through `handle_delivery` (saturating).
    pub bytes_in: u64,
    /// Samples produced (including app-limited and dropped ones).
    pub samples: u64,
    /// Of those, samples marked app-limited.
    pub app_limited_samples: u64,
    /// Samples discarded because the output queue was full (the oldest go).
    pub samples_dropped: u64,
    /// Bytes in the discarded samples.
    pub bytes_dropped: u64,
    /// Deliveries stamped before the current interval (clock went back);
    /// their bytes are counted in the current interval.
    pub late_events: u64,
}

/// Cuts a delivery stream into fixed-interval throughput samples.
///
/// # Driving contract (sans-IO)
/// - [`handle_delivery(now, bytes, app_limited)`](Self::handle_delivery)
///   whenever bytes are acknowledged as delivered. `app_limited` is the
///   sender's state from `now` on: `true` when it has nothing waiting to be
///   sent. Call it with `bytes = 0` to report a change of state alone.
/// - [`handle_timeout(now)`](Self::handle_timeout) when the time from
///   [`poll_timeout`](Self::poll_timeout) has come (calling it late or early
///   is harmless: every interval that ended at or before `now` is closed).
/// - [`poll_sample`](Self::poll_sample) until it returns `None` after any
///   `handle_*` call.
///
/// An event at exactly an interval's end belongs to the next interval, and
/// a state given at exactly an interval's start holds for all of it (a
/// sender that has data again at that instant was not idle in it). The
/// sampler starts in the "sender has data" state.
///
/// # Example
/// ```
/// use braid_core::{estimate::RateSampler, Bandwidth, Duration, Instant};
/// let t0 = Instant::ZERO;
/// let mut s = RateSampler::new(Duration::from_millis(100), t0).unwrap();
/// s.handle_delivery(t0 + Duration::from_millis(50), 125_000, false);
/// s.handle_timeout(s.poll_timeout());
/// let sample = s.poll_sample().unwrap();
/// assert_eq!(sample.rate, Bandwidth::from_mbps(10));
/// assert!(!sample.app_limited);
/// ```
#[derive(Debug, Clone)]
pub struct RateSampler {
    interval: Duration,
    /// Start of the open interval.
    start: Instant,
    /// Bytes delivered in the open interval.
    bytes: u64,
    /// The sender's state since the last event.
    limited_now: bool,
    /// The sender's state at the start of the open interval (events stamped
    /// exactly at the start, or late, set it).
    start_limited: bool,
    /// An event inside the open interval (after its start) made the sender
    /// app-limited.
    seen_limited: bool,
    /// Packets acknowledged and lost in the open interval.
    acked_packets: u64,
    lost_packets: u64,
    closing: Closing,
    /// The most recent finished sample.
    last: Option<RateSample>,
    queue: VecDeque<RateSample>,
    queue_bound: usize,
    stats: SamplerStats,
}

impl RateSampler {
    /// A sampler with intervals of `interval`, the first starting at `now`.
    ///
    /// # Errors
    /// [`EstimateError::ZeroInterval`] if `interval` is zero.
    pub fn new(interval: Duration, now: Instant) -> Result<Self, EstimateError> {
        if interval.is_zero() {
            return Err(EstimateError::ZeroInterval);
        }
        Ok(RateSampler {
            interval,
            start: now,
            bytes: 0,
            limited_now: false,
            start_limited: false,
            seen_limited: false,
            acked_packets: 0,
            lost_packets: 0,
            closing: Closing::Stamped,
            last: None,
            queue: VecDeque::new(),
            queue_bound: DEFAULT_SAMPLE_QUEUE,
            stats: SamplerStats::default(),
        })
    }

    /// Sets the output queue bound (at least 1; default
    /// [`DEFAULT_SAMPLE_QUEUE`]). When full, the oldest sample is dropped.
    pub fn with_queue_bound(mut self, bound: usize) -> Self {
        self.queue_bound = bound.max(1);
        while self.queue.len() > self.queue_bound {
            self.drop_oldest();
        }
        self
    }

    /// Sets when intervals close (default [`Closing::Stamped`]).
    pub fn with_closing(mut self, closing: Closing) -> Self {
        self.closing = closing;
        self
    }

    /// The most recent finished sample, even if it was already polled.
    pub fn last(&self) -> Option<RateSample> {
        self.last
    }

    /// The sampling interval.
    pub fn interval(&self) -> Duration {
        self.interval
    }

    /// Counters.
    pub fn stats(&self) -> SamplerStats {
        self.stats
    }

    /// Bytes delivered in the interval that is still open.
    pub fn pending_bytes(&self) -> u64 {
        self.bytes
    }

    /// Samples waiting in the output queue.
    pub fn queued(&self) -> usize {
        self.queue.len()
    }

    /// Nothing to measure: the open interval holds nothing and is
    /// app-limited, and so was the last sample. A sender may then skip
    /// [`Self::handle_timeout`] until it has something again; with
    /// [`Closing::OnTimeout`] the idle intervals are folded into one
    /// app-limited sample then, instead of one empty sample each.
    pub fn is_quiet(&self) -> bool {
        let empty = self.bytes == 0 && self.acked_packets == 0 && self.lost_packets == 0;
        let last_empty = self
            .last
            .is_some_and(|s| s.bytes == 0 && s.app_limited && s.packets() == 0);
        empty && (self.start_limited || self.seen_limited) && last_empty
    }

    /// Records `bytes` delivered at `now`; `app_limited` is the sender's
    /// state from `now` on (see the type's driving contract).
    pub fn handle_delivery(&mut self, now: Instant, bytes: u64, app_limited: bool) {
        self.advance_stamped(now);
        if now < self.start {
            self.stats.late_events += 1;
        }
        self.stats.bytes_in = self.stats.bytes_in.saturating_add(bytes);
        self.bytes = self.bytes.saturating_add(bytes);
        self.limited_now = app_limited;
        if now <= self.start {
            // The state from the interval's first instant on: no idle time
            // before it within this interval.
            self.start_limited = app_limited;
        } else {
            self.seen_limited |= app_limited;
        }
    }

    /// One packet of `bytes` was acknowledged at `now`: a delivery that is
    /// also counted in [`RateSample::acked_packets`]. The sender's state is
    /// left as it was.
    pub fn handle_ack(&mut self, now: Instant, bytes: u64) {
        self.handle_delivery(now, bytes, self.limited_now);
        self.acked_packets = self.acked_packets.saturating_add(1);
    }

    /// `packets` packets were declared lost at `now`.
    pub fn handle_loss(&mut self, now: Instant, packets: u64) {
        self.advance_stamped(now);
        self.lost_packets = self.lost_packets.saturating_add(packets);
    }

    /// The sender had room to send at `now` but nothing to send: the open
    /// interval is app-limited. The sender's state afterwards is unchanged.
    pub fn handle_app_limited(&mut self, now: Instant) {
        self.advance_stamped(now);
        self.seen_limited = true;
    }

    /// Closes every interval that ended at or before `now` (with
    /// [`Closing::OnTimeout`]: them all, as one sample).
    pub fn handle_timeout(&mut self, now: Instant) {
        match self.closing {
            Closing::Stamped => self.advance(now),
            Closing::OnTimeout => self.fold(now),
        }
    }

    /// When the open interval ends: call [`Self::handle_timeout`] then.
    pub fn poll_timeout(&self) -> Instant {
        self.start + self.interval
    }

    /// True if a finished sample waits for [`Self::poll_sample`].
    pub fn has_sample(&self) -> bool {
        !self.queue.is_empty()
    }

    /// The next finished sample, oldest first.
    pub fn poll_sample(&mut self) -> Option<RateSample> {
        self.queue.pop_front()
    }

    fn advance_stamped(&mut self, now: Instant) {
        if self.closing == Closing::Stamped {
            self.advance(now);
        }
    }

    /// [`Closing::OnTimeout`]: closes the open interval and every whole
    /// interval after it that ended by `now`, as one sample.
    fn fold(&mut self, now: Instant) {
        let elapsed = now.saturating_duration_since(self.start);
        let closed = elapsed.checked_div_duration(self.interval).unwrap_or(0);
        if closed == 0 {
            return;
        }
        let span = self.interval.saturating_mul(closed);
        let limited = self.start_limited || self.seen_limited;
        let mut sample = self.make_sample(self.start, self.bytes, limited);
        sample.duration = span;
        sample.rate = Bandwidth::from_delivery(self.bytes, span);
        sample.acked_packets = self.acked_packets;
        sample.lost_packets = self.lost_packets;
        self.emit(sample);
        self.start += span;
        self.reset_open();
    }

    /// Empties the open interval after it was closed.
    fn reset_open(&mut self) {
        self.bytes = 0;
        self.acked_packets = 0;
        self.lost_packets = 0;
        self.start_limited = self.limited_now;
        self.seen_limited = false;
    }

    fn advance(&mut self, now: Instant) {
        let elapsed = now.saturating_duration_since(self.start);
        let Some(closed) = elapsed.checked_div_duration(self.interval) else {
            return; // interval is never zero (checked in `new`)
        };
        if closed == 0 {
            return;
        }
        // The open interval, with whatever it holds.
        let limited = self.start_limited || self.seen_limited;
        let mut first = self.make_sample(self.start, self.bytes, limited);
        first.acked_packets = self.acked_packets;
        first.lost_packets = self.lost_packets;
        self.emit(first);
        self.start += self.interval;
        // The rest are empty and all alike: the sender's state has not
        // changed since the last event. Only the newest `queue_bound` of them
        // could survive the queue, so the older ones are counted, not built.
        let empties = closed - 1;
        let bound = self.queue_bound as u64;
        if empties > bound {
            let skip = empties - bound;
            self.stats.samples += skip;
            self.stats.samples_dropped += skip;
            if self.limited_now {
                self.stats.app_limited_samples += skip;
            }
            self.start += self.interval.saturating_mul(skip);
        }
        for _ in 0..empties.min(bound) {
            let s = self.make_sample(self.start, 0, self.limited_now);
            self.emit(s);
            self.start += self.interval;
        }
        self.reset_open();
    }

    fn make_sample(&self, start: Instant, bytes: u64, app_limited: bool) -> RateSample {
        RateSample {
            start,
            duration: self.interval,
            bytes,
            rate: Bandwidth::from_delivery(bytes, self.interval),
            app_limited,
            acked_packets: 0,
            lost_packets: 0,
        }
    }

    fn emit(&mut self, sample: RateSample) {
        self.last = Some(sample);
        self.stats.samples += 1;
        if sample.app_limited {
            self.stats.app_limited_samples += 1;
        }
        if self.queue.len() >= self.queue_bound {
            self.drop_oldest();
        }
        self.queue.push_back(sample);
    }

    fn drop_oldest(&mut self) {
        if let Some(old) = self.queue.pop_front() {
            self.stats.samples_dropped += 1;
            self.stats.bytes_dropped = self.stats.bytes_dropped.saturating_add(old.bytes);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ms(v: u64) -> Instant {
        Instant::ZERO + Duration::from_millis(v)
    }

    fn drain(s: &mut RateSampler) -> Vec<RateSample> {
        std::iter::from_fn(|| s.poll_sample()).collect()
    }

    /// The transport's way of measuring (the former `IntervalMeter`): acks
    /// and losses go in the open interval, a late timeout folds the
    /// intervals it skipped into one sample.
    #[test]
    fn on_timeout_samples_loss_and_rate_per_interval() {
        let t0 = Instant::ZERO;
        let mut m = RateSampler::new(Duration::from_millis(100), t0)
            .unwrap()
            .with_closing(Closing::OnTimeout);
        for _ in 0..9 {
            m.handle_ack(t0, 1250);
        }
        m.handle_loss(t0, 1);
        m.handle_timeout(ms(99));
        assert!(m.poll_sample().is_none());
        // Handled after the interval's end but before the timeout: still in it.
        m.handle_ack(ms(100), 0);
        m.handle_timeout(ms(100));
        let s = m.poll_sample().unwrap();
        assert_eq!(m.last(), Some(s));
        assert!((s.loss_ratio() - 1.0 / 11.0).abs() < 1e-9);
        assert_eq!((s.acked_packets, s.lost_packets), (10, 1));
        // 11 250 bytes in 100 ms = 900 kbit/s
        assert_eq!(s.rate, Bandwidth::from_kbps(900));
        assert!(!s.app_limited);
        m.handle_app_limited(ms(120));
        m.handle_timeout(ms(350));
        let s = m.poll_sample().unwrap();
        assert!(s.app_limited);
        assert_eq!(s.loss_ratio(), 0.0);
        assert_eq!(s.duration, Duration::from_millis(200));
        assert_eq!(s.end(), ms(300));
        assert!(m.poll_sample().is_none());
        m.handle_timeout(ms(400));
        assert!(!m.poll_sample().unwrap().app_limited);
    }

    #[test]
    fn zero_interval_is_refused() {
        assert!(matches!(
            RateSampler::new(Duration::ZERO, Instant::ZERO),
            Err(EstimateError::ZeroInterval)
        ));
    }

    #[test]
    fn one_sample_per_interval_with_empty_ones() {
        let mut s = RateSampler::new(Duration::from_millis(100), ms(0)).unwrap();
        s.handle_delivery(ms(10), 1000, false);
        s.handle_delivery(ms(99), 250, false);
        s.handle_delivery(ms(100), 500, false); // belongs to the 2nd interval
        assert_eq!(s.poll_timeout(), ms(200));
        s.handle_timeout(ms(450));
        let out = drain(&mut s);
        assert_eq!(out.len(), 4);
        assert_eq!(out[0].bytes, 1250);
        assert_eq!(out[0].rate, Bandwidth::from_bps(100_000));
        assert_eq!(out[1].bytes, 500);
        assert_eq!((out[2].bytes, out[3].bytes), (0, 0));
        assert_eq!(out[3].start, ms(300));
        assert_eq!(out[3].end(), ms(400));
        assert!(out.iter().all(|x| !x.app_limited));
        assert_eq!(s.poll_timeout(), ms(500));
    }

    #[test]
    fn idle_intervals_are_app_limited() {
        let mut s = RateSampler::new(Duration::from_millis(100), ms(0)).unwrap();
        s.handle_delivery(ms(20), 1000, false);
        s.handle_delivery(ms(60), 1000, true); // queue ran dry at 60 ms
        s.handle_delivery(ms(250), 0, false); // data again at 250 ms
        s.handle_delivery(ms(320), 700, false);
        s.handle_timeout(ms(400));
        let out = drain(&mut s);
        let limited: Vec<bool> = out.iter().map(|x| x.app_limited).collect();
        // [0,100) idle from 60; [100,200) idle; [200,300) idle until 250;
        // [300,400) busy throughout.
        assert_eq!(limited, vec![true, true, true, false]);
        assert_eq!(out[3].bytes, 700);
        assert_eq!(s.stats().app_limited_samples, 3);
        // Idle from 400; data again exactly at 500: [500, 600) is busy.
        s.handle_delivery(ms(400), 0, true);
        s.handle_delivery(ms(500), 0, false);
        s.handle_delivery(ms(500), 10, false);
        s.handle_timeout(ms(600));
        let limited: Vec<bool> = drain(&mut s).iter().map(|x| x.app_limited).collect();
        assert_eq!(limited, vec![true, false]);
    }

    #[test]
    fn long_gaps_are_bounded() {
        let mut s = RateSampler::new(Duration::from_millis(1), ms(0))
            .unwrap()
            .with_queue_bound(8);
        s.handle_delivery(ms(0), 42, false);
        // A year of 1 ms intervals must not be built one by one.
        s.handle_timeout(Instant::ZERO + Duration::from_secs(365 * 86_400));
        assert_eq!(s.queued(), 8);
        let st = s.stats();
        assert_eq!(st.samples, 365 * 86_400 * 1000);
        assert_eq!(st.samples_dropped, st.samples - 8);
        assert_eq!(st.bytes_dropped, 42);
        // The end of time does not hang either.
        s.handle_timeout(Instant::MAX);
        s.handle_timeout(Instant::MAX);
        assert_eq!(s.queued(), 8);
    }

    #[test]
    fn late_events_count_in_open_interval() {
        let mut s = RateSampler::new(Duration::from_millis(100), ms(1000)).unwrap();
        s.handle_delivery(ms(5), 10, false);
        assert_eq!(s.pending_bytes(), 10);
        assert_eq!(s.stats().late_events, 1);
    }

    proptest! {
        /// Bytes in = bytes in samples + bytes dropped + bytes pending, and
        /// samples tile time without gaps.
        #[test]
        fn conserves_bytes(
            interval_ms in 1u64..50,
            bound in 1usize..20,
            events in prop::collection::vec((0u64..400, 0u64..100_000, any::<bool>()), 0..60),
        ) {
            let mut s = RateSampler::new(Duration::from_millis(interval_ms), ms(0))
                .unwrap()
                .with_queue_bound(bound);
            let mut t = 0;
            let mut total = 0u64;
            let mut out = Vec::new();
            for (dt, bytes, limited) in events {
                t += dt;
                s.handle_delivery(ms(t), bytes, limited);
                total += bytes;
                if dt % 3 == 0 {
                    out.extend(std::iter::from_fn(|| s.poll_sample()));
                }
                prop_assert!(s.queued() <= bound);
            }
            s.handle_timeout(ms(t + 1000));
            out.extend(std::iter::from_fn(|| s.poll_sample()));
            let emitted: u64 = out.iter().map(|x| x.bytes).sum();
            let st = s.stats();
            prop_assert_eq!(st.bytes_in, total);
            prop_assert_eq!(emitted + st.bytes_dropped + s.pending_bytes(), total);
            prop_assert_eq!(out.len() as u64 + st.samples_dropped, st.samples);
            for pair in out.windows(2) {
                prop_assert!(pair[0].end() <= pair[1].start);
            }
            if st.samples_dropped == 0 {
                for pair in out.windows(2) {
                    prop_assert_eq!(pair[0].end(), pair[1].start);
                }
            }
        }
    }
}
