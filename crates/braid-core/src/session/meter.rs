//! When a window meets a stream's spec: the one definition braid's reports
//! use (issue 28 §4; seed 000 §VI measures rates over 1 s windows and
//! window constraints over their `t_w`).
//!
//! Counting what *arrives* in each fixed window makes the verdict depend
//! on where the window edges fall: a source that offers exactly 3 Mbit/s
//! and has every byte delivered still sees windows short by whatever the
//! delay grew across the window (10 ms more delay at the end of a 1 s
//! window than at its start is 1 % less in it), and the next window long
//! by as much; a stream of 10 messages per 100 ms window loses two of them
//! to a 20 ms swing. That measures delay jitter, not what was carried, and
//! calls a stream that got everything it offered a failure.
//!
//! So a window is judged by what was **offered in it**:
//!
//! > Window `k` is `[origin + k·len, origin + (k+1)·len)` of the time the
//! > application offered its messages. It meets the spec when the messages
//! > offered in it that reached the other end's application **no later
//! > than the allowance after they were offered** carry at least
//! > * a rate spec `r`: `min(r · len, offered bytes) − m` bytes, where `m`
//! >   is the largest message offered in the window (one message of slack:
//! >   a stream cut into messages cannot be cut exactly at a window's
//! >   edge); windows of 1 s;
//! > * a window spec `x` of `y` within `t_w` (or a violation bound of `x`
//! >   per `t_w`): `min(x, offered messages)` messages; windows of `t_w`.
//!
//! The allowance is the stream's delivery deadline when it has one (the
//! application said when a message stops being of use), else the window's
//! length and at least a second: a window spec without a deadline asks
//! for `x` messages per `t_w`, a rate, and a steady delay of a few hundred
//! milliseconds does not take that rate away; a message a second late did
//! not count towards what the application saw when it needed it. A source
//! offering less than the spec asks is judged on what it offered (a
//! guarantee is "up to r", not "r whether you send it or not"); a source
//! held back at the sender has offered what it generated, so the queue's
//! delay counts against it. The seed's own figure — the delivered rate's
//! percentiles over arrival-time windows as a share of the target — is
//! reported beside this one.
//!
//! Main types: [`WindowMeter`] (one stream's windows; offers and
//! deliveries in any order; a window is final once
//! [`WindowMeter::decided`]) and [`RollingMeter`], which judges windows as
//! they are decided and keeps only the open ones (a session sink's running
//! count, bounded whatever the stream's length).

use super::stream::Delivery;
use crate::scheduler::StreamSpec;
use crate::time::{Duration, Instant};
use crate::units::Bandwidth;
use std::collections::VecDeque;

/// The most windows a meter keeps open (beyond it, offers and deliveries
/// are ignored): about 12 days of 1 s windows, 29 hours of 100 ms ones.
pub const MAX_WINDOWS: usize = 1 << 20;

/// The window of a rate spec.
pub const RATE_WINDOW: Duration = Duration::from_secs(1);

/// What a window must carry.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Need {
    /// At least this rate (bytes over the window, one message of slack).
    Rate(Bandwidth),
    /// At least this many messages.
    Messages(u32),
}

/// One window's figures and verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MeteredWindow {
    /// Bytes the application offered in the window.
    pub offered_bytes: u64,
    /// Messages the application offered in the window.
    pub offered_messages: u64,
    /// Of those, bytes delivered within the allowance.
    pub on_time_bytes: u64,
    /// Of those, messages delivered within the allowance.
    pub on_time_messages: u64,
    /// What the spec asked of the window, in bytes (rate) or messages.
    pub needed: u64,
    /// Whether the window carried what it needed.
    pub met: bool,
}

impl MeteredWindow {
    /// Messages short of what the window needed (0 when met); a
    /// violation bound's `Z` for the window.
    pub fn misses(&self) -> u64 {
        self.needed.saturating_sub(self.on_time_messages)
    }
}

#[derive(Debug, Clone, Copy, Default)]
struct Tally {
    offered_bytes: u64,
    offered_messages: u64,
    on_time_bytes: u64,
    on_time_messages: u64,
    largest: u64,
}

/// One stream's windows (module docs).
#[derive(Debug, Clone)]
pub struct WindowMeter {
    need: Need,
    origin: Instant,
    len: Duration,
    allowance: Duration,
    /// Windows `first..first + windows.len()`; those before `first` were
    /// forgotten ([`WindowMeter::forget_before`]).
    first: usize,
    windows: VecDeque<Tally>,
}

impl WindowMeter {
    /// Windows of `len` from `origin` that must carry `need`, with an
    /// allowance of one window.
    pub fn new(need: Need, origin: Instant, len: Duration) -> Self {
        let len = len.max(Duration::from_nanos(1));
        WindowMeter {
            need,
            origin,
            len,
            allowance: len,
            first: 0,
            windows: VecDeque::new(),
        }
    }

    /// The meter of a stream with this spec and delivery: 1 s windows for
    /// a rate spec, `t_w` for window and violation specs; the allowance is
    /// the deadline of a deadline stream, else the window and at least 1 s.
    /// `None` for best effort.
    pub fn for_spec(spec: &StreamSpec, delivery: Delivery, origin: Instant) -> Option<Self> {
        let (need, len) = match *spec {
            StreamSpec::MinRate { rate, .. } => (Need::Rate(rate), RATE_WINDOW),
            StreamSpec::Window { x, window, .. } | StreamSpec::ViolationBound { x, window, .. } => {
                (Need::Messages(x), window)
            }
            _ => return None,
        };
        let meter = WindowMeter::new(need, origin, len);
        Some(match delivery {
            Delivery::Deadline { ttl } => meter.with_allowance(ttl),
            _ => meter.with_allowance(len.max(RATE_WINDOW)),
        })
    }

    /// The same with another delay allowance.
    pub fn with_allowance(mut self, allowance: Duration) -> Self {
        self.allowance = allowance;
        self
    }

    /// The windows' length.
    pub fn len(&self) -> Duration {
        self.len
    }

    /// The delay allowance.
    pub fn allowance(&self) -> Duration {
        self.allowance
    }

    /// The window that holds `at`, if it is at or after the origin and
    /// within [`MAX_WINDOWS`].
    pub fn index(&self, at: Instant) -> Option<usize> {
        if at < self.origin {
            return None;
        }
        let k = at.saturating_duration_since(self.origin).as_nanos() / self.len.as_nanos();
        usize::try_from(k).ok().filter(|&k| k < MAX_WINDOWS)
    }

    fn tally(&mut self, at: Instant) -> Option<&mut Tally> {
        let i = self.index(at)?.checked_sub(self.first)?;
        if i >= MAX_WINDOWS {
            return None;
        }
        if self.windows.len() <= i {
            self.windows.resize(i + 1, Tally::default());
        }
        self.windows.get_mut(i)
    }

    /// The windows kept: `first..end` (empty before the first offer).
    pub fn kept(&self) -> std::ops::Range<usize> {
        self.first..self.first + self.windows.len()
    }

    /// Forgets windows before `k`: later offers and deliveries in them are
    /// ignored, and [`WindowMeter::window`] reports them empty.
    pub fn forget_before(&mut self, k: usize) {
        while self.first < k {
            self.windows.pop_front();
            self.first += 1;
        }
    }

    /// The application offered a message of `bytes` at `at`.
    pub fn offer(&mut self, at: Instant, bytes: u64) {
        if let Some(t) = self.tally(at) {
            t.offered_bytes += bytes;
            t.offered_messages += 1;
            t.largest = t.largest.max(bytes);
        }
    }

    /// A message of `bytes` offered at `offered_at` reached the other
    /// end's application at `arrived_at`.
    pub fn deliver(&mut self, offered_at: Instant, arrived_at: Instant, bytes: u64) {
        if arrived_at.saturating_duration_since(offered_at) > self.allowance {
            return;
        }
        if let Some(t) = self.tally(offered_at) {
            t.on_time_bytes += bytes;
            t.on_time_messages += 1;
        }
    }

    /// Whether window `k` is final at `now`: it and its allowance are over.
    pub fn decided(&self, k: usize, now: Instant) -> bool {
        self.origin + self.len * (k as u64 + 1) + self.allowance <= now
    }

    /// Window `k`'s figures and verdict (module docs); a window nothing
    /// was offered in is met.
    pub fn window(&self, k: usize) -> MeteredWindow {
        let t = k
            .checked_sub(self.first)
            .and_then(|i| self.windows.get(i))
            .copied()
            .unwrap_or_default();
        let (needed, met) = match self.need {
            Need::Rate(rate) => {
                let full =
                    (u128::from(rate.bps()) * self.len.as_nanos() as u128 / 8_000_000_000) as u64;
                let needed = full.min(t.offered_bytes).saturating_sub(t.largest);
                (needed, t.on_time_bytes >= needed)
            }
            Need::Messages(x) => {
                let needed = u64::from(x).min(t.offered_messages);
                (needed, t.on_time_messages >= needed)
            }
        };
        MeteredWindow {
            offered_bytes: t.offered_bytes,
            offered_messages: t.offered_messages,
            on_time_bytes: t.on_time_bytes,
            on_time_messages: t.on_time_messages,
            needed,
            met,
        }
    }
}

/// A stream's windows judged as they are decided (module docs), for a
/// session sink: only the windows still open are kept, so memory is
/// bounded by the allowance, not the stream's length.
///
/// The sink sees the source's offer times (`sent_at`, the source's clock)
/// and its own arrival times. A window is decided once the sink's clock,
/// less the smallest transit seen (arrival − offer), has passed the
/// window's end and its allowance: the messages still on their way by
/// then could only be late. Offers the sink never sees (messages lost on
/// the way) are counted from the gaps in the sequence numbers of streams
/// that are not reliable (`offer_gap`).
#[derive(Debug, Clone)]
pub struct RollingMeter {
    need: Need,
    len: Duration,
    allowance: Duration,
    meter: Option<WindowMeter>,
    transit: Option<Duration>,
    judged: u64,
    met: u64,
    misses: u64,
}

impl RollingMeter {
    /// The rolling meter of a stream with this spec and delivery (as
    /// [`WindowMeter::for_spec`]); windows start at its first offer.
    pub fn for_spec(spec: &StreamSpec, delivery: Delivery) -> Option<Self> {
        let m = WindowMeter::for_spec(spec, delivery, Instant::ZERO)?;
        Some(RollingMeter {
            need: m.need,
            len: m.len,
            allowance: m.allowance,
            meter: None,
            transit: None,
            judged: 0,
            met: 0,
            misses: 0,
        })
    }

    fn meter(&mut self, at: Instant) -> &mut WindowMeter {
        let (need, len, allowance) = (self.need, self.len, self.allowance);
        self.meter
            .get_or_insert_with(|| WindowMeter::new(need, at, len).with_allowance(allowance))
    }

    /// The source offered a message of `bytes` at `at` (its clock).
    pub fn offer(&mut self, at: Instant, bytes: u64) {
        self.meter(at).offer(at, bytes);
    }

    /// The source offered `n` messages of about `bytes` each near `at`
    /// that never arrived (a gap in the sequence numbers).
    pub fn offer_gap(&mut self, at: Instant, n: u64, bytes: u64) {
        let m = self.meter(at);
        for _ in 0..n.min(1 << 16) {
            m.offer(at, bytes);
        }
    }

    /// A message offered at `offered_at` reached the application at
    /// `arrived_at` (the sink's clock).
    pub fn deliver(&mut self, offered_at: Instant, arrived_at: Instant, bytes: u64) {
        let transit = arrived_at.saturating_duration_since(offered_at);
        self.transit = Some(self.transit.map_or(transit, |t| t.min(transit)));
        self.meter(offered_at)
            .deliver(offered_at, arrived_at, bytes);
    }

    /// Judges every kept window that is decided at `now` (the sink's
    /// clock) and forgets it.
    pub fn roll(&mut self, now: Instant) {
        let Some(m) = self.meter.as_mut() else {
            return;
        };
        let at = now
            - self
                .transit
                .unwrap_or(Duration::ZERO)
                .min(now.since_origin());
        let kept = m.kept();
        let mut k = kept.start;
        while k < kept.end && m.decided(k, at) {
            let w = m.window(k);
            self.judged += 1;
            self.met += u64::from(w.met);
            if matches!(self.need, Need::Messages(_)) {
                self.misses += w.misses();
            }
            k += 1;
        }
        m.forget_before(k);
    }

    /// Windows judged so far.
    pub fn judged(&self) -> u64 {
        self.judged
    }

    /// Windows judged so far that missed the spec.
    pub fn missed(&self) -> u64 {
        self.judged - self.met
    }

    /// Messages short of the spec over the windows judged so far: the sum
    /// of a violation bound's `Z` (0 for a rate spec, whose windows are
    /// judged in bytes).
    pub fn misses(&self) -> u64 {
        self.misses
    }

    /// The share of judged windows that met the spec (`None` before the
    /// first is judged).
    pub fn share_met(&self) -> Option<f64> {
        (self.judged > 0).then(|| self.met as f64 / self.judged as f64)
    }

    /// The mean shortfall per judged window in messages (a violation
    /// bound's realised E\[Z\]).
    pub fn mean_misses(&self) -> Option<f64> {
        (self.judged > 0).then(|| self.misses as f64 / self.judged as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    fn at_ms(ms: u64) -> Instant {
        Instant::ZERO + Duration::from_millis(ms)
    }

    fn rate_meter() -> WindowMeter {
        WindowMeter::new(Need::Rate(Bandwidth::from_mbps(3)), Instant::ZERO, S)
    }

    /// 3 Mbit/s in 1000 B messages (one every 8/3 ms) over `secs`, each
    /// delivered after `delay(i)`.
    fn cbr(meter: &mut WindowMeter, secs: u64, delay: impl Fn(u64) -> Duration) {
        for i in 0..secs * 375 {
            let t = Instant::ZERO + Duration::from_micros(i * 8000 / 3);
            meter.offer(t, 1000);
            meter.deliver(t, t + delay(i), 1000);
        }
    }

    #[test]
    fn jitter_that_delays_nothing_past_the_allowance_meets_every_window() {
        let mut m = rate_meter();
        // Delay swinging 10..90 ms: arrival-time windows would see ±3 %.
        cbr(&mut m, 10, |i| Duration::from_millis(10 + (i * 7) % 80));
        for k in 0..10 {
            let w = m.window(k);
            assert!(w.met, "window {k}: {w:?}");
            assert_eq!(w.offered_bytes, 375_000);
        }
    }

    #[test]
    fn a_message_later_than_the_allowance_does_not_count() {
        let mut m = rate_meter();
        // Window 3's messages sit in a 1.5 s queue.
        cbr(&mut m, 6, |i| {
            if (3 * 375..4 * 375).contains(&i) {
                Duration::from_millis(1500)
            } else {
                Duration::from_millis(20)
            }
        });
        assert!(m.window(2).met && m.window(4).met);
        let w = m.window(3);
        assert!(!w.met && w.on_time_bytes == 0, "{w:?}");
    }

    #[test]
    fn one_message_short_is_met_two_are_not() {
        for (skip, met) in [(1, true), (2, false)] {
            let mut m = rate_meter();
            for i in 0..375u64 {
                m.offer(at_ms(i * 2), 1000);
                if i >= skip {
                    m.deliver(at_ms(i * 2), at_ms(i * 2 + 5), 1000);
                }
            }
            assert_eq!(m.window(0).met, met, "{skip} missing: {:?}", m.window(0));
        }
    }

    #[test]
    fn judged_on_what_was_offered_up_to_the_rate() {
        let mut m = rate_meter();
        // Half the rate offered, all of it delivered: met.
        for i in 0..100u64 {
            m.offer(at_ms(i * 10), 1800);
            m.deliver(at_ms(i * 10), at_ms(i * 10 + 30), 1800);
        }
        assert!(m.window(0).met);
        assert_eq!(m.window(0).needed, 180_000 - 1800);
        // Twice the rate offered, 80 % of the rate delivered: not met.
        for i in 0..500u64 {
            let t = Instant::ZERO + S + Duration::from_millis(i * 2);
            m.offer(t, 1500);
            if i < 200 {
                m.deliver(t, t + Duration::from_millis(30), 1500);
            }
        }
        let w = m.window(1);
        assert_eq!((w.offered_bytes, w.needed), (750_000, 375_000 - 1500));
        assert!(!w.met);
        assert!(m.window(7).met, "nothing offered: met");
    }

    #[test]
    fn a_window_spec_counts_messages_offered_in_its_window() {
        let spec = StreamSpec::window(8, 10, Duration::from_millis(100), 1000, 0.9).unwrap();
        let ttl = Duration::from_millis(60);
        let mut m =
            WindowMeter::for_spec(&spec, Delivery::Deadline { ttl }, Instant::ZERO).unwrap();
        assert_eq!((m.len(), m.allowance()), (Duration::from_millis(100), ttl));
        // Ten messages per window; window 0 all at 20 ms, window 1 four of
        // them at 70 ms (past the deadline), window 2 three at 70 ms.
        for w in 0..3u64 {
            for i in 0..10u64 {
                let t = at_ms(w * 100 + i * 10);
                m.offer(t, 1000);
                let late = (w == 1 && i < 2) || (w == 2 && i < 3);
                m.deliver(
                    t,
                    t + Duration::from_millis(if late { 70 } else { 20 }),
                    1000,
                );
            }
        }
        assert!(m.window(0).met);
        assert!(m.window(1).met, "8 of 10 on time");
        let w = m.window(2);
        assert!(!w.met && w.misses() == 1, "{w:?}");
    }

    #[test]
    fn best_effort_has_no_meter_and_the_allowance_is_the_deadline_or_the_window() {
        let be = StreamSpec::best_effort(1).unwrap();
        assert!(WindowMeter::for_spec(&be, Delivery::Reliable, Instant::ZERO).is_none());
        let rate = StreamSpec::min_rate(Bandwidth::from_mbps(1), 0.9).unwrap();
        let ttl = Duration::from_millis(1500);
        let m = WindowMeter::for_spec(&rate, Delivery::Deadline { ttl }, Instant::ZERO).unwrap();
        assert_eq!((m.len(), m.allowance()), (S, ttl));
        let m = WindowMeter::for_spec(&rate, Delivery::Unreliable, Instant::ZERO).unwrap();
        assert_eq!((m.len(), m.allowance()), (S, S));
        let tw = Duration::from_millis(100);
        let window = StreamSpec::window(8, 10, tw, 1000, 0.9).unwrap();
        let m = WindowMeter::for_spec(&window, Delivery::Unreliable, Instant::ZERO).unwrap();
        assert_eq!(
            (m.len(), m.allowance()),
            (tw, S),
            "no deadline: at least 1 s"
        );
    }

    #[test]
    fn decided_once_the_window_and_its_allowance_are_over() {
        let m = rate_meter().with_allowance(Duration::from_millis(250));
        assert!(!m.decided(0, at_ms(1249)));
        assert!(m.decided(0, at_ms(1250)));
    }

    #[test]
    fn ignores_what_falls_before_the_origin_or_past_the_bound() {
        let mut m = WindowMeter::new(Need::Messages(1), at_ms(1000), S);
        m.offer(at_ms(10), 100);
        m.offer(Instant::ZERO + S * (MAX_WINDOWS as u64 + 5), 100);
        assert!(m.windows.is_empty());
    }

    #[test]
    fn a_rolling_meter_judges_as_windows_close_and_keeps_only_open_ones() {
        let spec = StreamSpec::window(8, 10, Duration::from_millis(100), 1000, 0.9).unwrap();
        let ttl = Duration::from_millis(50);
        let mut r = RollingMeter::for_spec(&spec, Delivery::Deadline { ttl }).unwrap();
        assert_eq!(r.share_met(), None);
        // 30 s of 10 messages per 100 ms, 20 ms transit; every 10th window
        // loses three messages on the way (a gap the sink counts).
        for w in 0..300u64 {
            for i in 0..10u64 {
                let t = at_ms(5_000 + w * 100 + i * 10);
                let lost = w % 10 == 0 && i >= 7;
                if lost {
                    continue;
                }
                if w % 10 == 0 && i == 6 {
                    r.offer(t, 1000);
                    r.deliver(t, t + Duration::from_millis(20), 1000);
                    r.offer_gap(t, 3, 1000);
                    continue;
                }
                r.offer(t, 1000);
                r.deliver(t, t + Duration::from_millis(20), 1000);
            }
            r.roll(at_ms(5_000 + w * 100 + 100 + 20));
            assert!(
                r.meter.as_ref().unwrap().kept().len() <= 3,
                "only open windows kept"
            );
        }
        r.roll(at_ms(60_000));
        assert_eq!(r.judged(), 300);
        assert_eq!(r.share_met(), Some(0.9));
        assert!((r.mean_misses().unwrap() - 0.1).abs() < 1e-9);
    }

    #[test]
    fn a_rolling_meter_waits_for_the_transit_and_the_allowance() {
        let rate = StreamSpec::min_rate(Bandwidth::from_mbps(1), 0.9).unwrap();
        let mut r = RollingMeter::for_spec(&rate, Delivery::Reliable).unwrap();
        // Source clock 10 s ahead of ours would make every delay zero; here
        // ours is 3 s ahead of the source's (plus 40 ms transit).
        let skew = Duration::from_millis(3_040);
        for i in 0..125u64 {
            let t = at_ms(i * 8);
            r.offer(t, 1000);
            r.deliver(t, t + skew, 1000);
        }
        // Window 0 ends at 1 s of source time, its allowance at 2 s: decided
        // at 2 s + 3.04 s of ours.
        r.roll(at_ms(5_039));
        assert_eq!(r.judged(), 0);
        r.roll(at_ms(5_040));
        assert_eq!(r.judged(), 1);
    }
}
