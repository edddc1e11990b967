//! Application models for sessions: a source that feeds its streams from
//! workloads ([`Workload`]: constant rate, greedy, video frame sizes), and a
//! sink that records what arrived and checks it.
//!
//! Every message's bytes are a function of (stream, sequence number)
//! ([`payload`]), so the sink can check each message and both ends keep a
//! digest of each reliable stream in order ([`StreamDigest`]).

use braid_core::session::meter::WindowMeter;
use braid_core::session::{Delivery, Event, Session, StreamConfig};
use braid_core::{Bandwidth, Duration, Instant, StreamId};
use std::collections::BTreeSet;

use super::node::SessionApp;

/// Most events a model keeps (the oldest are dropped).
pub const MAX_EVENT_LOG: usize = 100_000;
/// Most messages a workload keeps waiting when the session refuses
/// (beyond it, the workload drops at the source and counts).
pub const MAX_APP_BACKLOG: usize = 4096;
/// Most messages per stream whose offer and arrival times the models keep
/// for the rate windows ([`braid_core::session::meter`]); beyond it the
/// rest go unmetered.
pub const MAX_METERED: usize = 1 << 22;

/// How a source model answers the scheduler's upcall
/// ([`Event::GuaranteeUnmet`]): braid-core's one policy, as `braid stream
/// --on-infeasible` uses it. A simulated source cannot end the run, so
/// scenarios refuse `fail`.
pub use braid_core::scheduler::UpcallPolicy as Infeasible;

/// What feeds one stream.
#[derive(Debug, Clone, PartialEq)]
pub enum Workload {
    /// Messages of `size` bytes at `rate`.
    Cbr {
        /// Offered rate.
        rate: Bandwidth,
        /// Message size.
        size: u32,
    },
    /// Always has a message of `size` bytes ready.
    Greedy {
        /// Message size.
        size: u32,
    },
    /// One frame per `period` of the next size in `frames` (looped), cut
    /// into messages of at most `size` bytes.
    Frames {
        /// Frame sizes in bytes.
        frames: Vec<u32>,
        /// Frame period.
        period: Duration,
        /// Largest message.
        size: u32,
    },
}

impl Workload {
    /// The rate it offers (greedy: `None`).
    pub fn offered(&self) -> Option<Bandwidth> {
        match self {
            Workload::Cbr { rate, .. } => Some(*rate),
            Workload::Greedy { .. } => None,
            Workload::Frames { frames, period, .. } => {
                let n = frames.len().max(1) as f64;
                let mean = frames.iter().map(|&f| f64::from(f)).sum::<f64>() / n;
                Some(Bandwidth::from_bps(
                    (mean * 8.0 / period.as_secs_f64().max(1e-9)) as u64,
                ))
            }
        }
    }
}

/// The bytes of message `seq` of `stream`, `len` long.
pub fn payload(stream: StreamId, seq: u64, len: usize) -> Vec<u8> {
    let mut v = Vec::with_capacity(len);
    let head = [u64::from(stream.0).to_be_bytes(), seq.to_be_bytes()].concat();
    v.extend(head.iter().take(len));
    let fill = (seq as u8) ^ (stream.0 as u8);
    v.resize(len, fill);
    v
}

/// Whether `data` is message `seq` of `stream` as [`payload`] makes it,
/// without building the expected bytes.
pub fn payload_matches(stream: StreamId, seq: u64, data: &[u8]) -> bool {
    let head = [u64::from(stream.0).to_be_bytes(), seq.to_be_bytes()];
    let head = head.iter().flatten();
    let n = data.len().min(16);
    let fill = (seq as u8) ^ (stream.0 as u8);
    if !data[..n].iter().zip(head).all(|(a, b)| a == b) {
        return false;
    }
    // Word-wise over the fill (this runs for every message the sink gets).
    let word = u64::from_ne_bytes([fill; 8]);
    let mut words = data[n..].chunks_exact(8);
    let ok = words.all(|w| {
        let mut b = [0u8; 8];
        b.copy_from_slice(w);
        u64::from_ne_bytes(b) == word
    });
    ok && words.remainder().iter().all(|&b| b == fill)
}

/// An FNV-1a-style hash over a stream's messages in order (a digest both
/// ends can keep without holding the data). It folds eight bytes per step
/// (then the tail bytewise), which keeps it off the simulator's profile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamDigest(pub u64);

impl Default for StreamDigest {
    fn default() -> Self {
        StreamDigest(0xcbf2_9ce4_8422_2325)
    }
}

impl StreamDigest {
    /// Folds in one message.
    pub fn update(&mut self, data: &[u8]) {
        const PRIME: u64 = DIGEST_PRIME;
        let mut words = data.chunks_exact(8);
        for w in &mut words {
            let mut b = [0u8; 8];
            b.copy_from_slice(w);
            self.0 ^= u64::from_le_bytes(b);
            self.0 = self.0.wrapping_mul(PRIME);
        }
        for &b in words.remainder() {
            self.0 ^= u64::from(b);
            self.0 = self.0.wrapping_mul(PRIME);
        }
        self.fold_len(data.len());
    }

    /// The length, so messages that split the same bytes differently differ.
    fn fold_len(&mut self, len: usize) {
        self.0 ^= len as u64;
        self.0 = self.0.wrapping_mul(DIGEST_PRIME);
    }

    /// Folds in the message `payload(stream, seq, len)` by its three
    /// defining numbers (a payload is a function of them, and the sink checks
    /// the bytes with [`payload_matches`] before folding them this way; a
    /// message that does not match is folded with [`StreamDigest::update`]
    /// and so breaks the digest). Three steps instead of one per 8 bytes.
    pub fn update_payload(&mut self, stream: StreamId, seq: u64, len: usize) {
        for w in [PAYLOAD_TAG ^ u64::from(stream.0), seq] {
            self.0 ^= w;
            self.0 = self.0.wrapping_mul(DIGEST_PRIME);
        }
        self.fold_len(len);
    }
}

/// The digest's multiplier (FNV-1a's 64-bit prime).
const DIGEST_PRIME: u64 = 0x0100_0000_01b3;

/// Marks a word folded by [`StreamDigest::update_payload`] (bytes folded by
/// `update` are never tagged).
const PAYLOAD_TAG: u64 = 0x7061_796c_6f61_6400;

/// One stream of a source model.
#[derive(Debug, Clone, PartialEq)]
pub struct SourceStream {
    /// Name for reports.
    pub name: String,
    /// Its config.
    pub config: StreamConfig,
    /// What feeds it.
    pub workload: Workload,
    /// When it starts sending.
    pub start: Instant,
    /// When it stops (and closes).
    pub stop: Instant,
}

#[derive(Debug)]
struct SourceState {
    def: SourceStream,
    id: Option<StreamId>,
    next_at: Instant,
    frame: usize,
    /// Sizes of messages generated and not yet accepted by the session,
    /// with when they were generated.
    backlog: std::collections::VecDeque<(u32, Instant)>,
    /// Metered streams ([`is_metered`]): every message generated (when,
    /// bytes), dropped ones included, and when each sequence number was
    /// generated.
    metered: Option<Metered>,
    seq: u64,
    digest: StreamDigest,
    /// The message the session last refused (the backlog's front, built).
    refused: Option<Vec<u8>>,
    sent: u64,
    dropped: u64,
    closed: bool,
}

/// Whether a stream's windows are judged ([`WindowMeter::for_spec`]: every
/// spec but best effort), so the models keep what it takes.
pub fn is_metered(config: &StreamConfig) -> bool {
    WindowMeter::for_spec(&config.spec, config.delivery, Instant::ZERO).is_some()
}

/// What a source model keeps of a metered stream for its windows.
#[derive(Debug, Clone, Default)]
pub struct Metered {
    /// Every message generated: when, and its bytes (at most [`MAX_METERED`]).
    pub offers: Vec<(Instant, u32)>,
    /// When message `seq` was generated, by sequence number.
    pub generated_at: Vec<Instant>,
}

/// A violation-bound stream's promise at one statistics interval (see
/// [`SourceApp::violation_promises`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ViolationPromise {
    /// When.
    pub at: Instant,
    /// The stream.
    pub stream: StreamId,
    /// The bound E\[Z\] it ran under (asked, or lowered after an upcall).
    pub bound: f64,
    /// The E\[Z\] its mapping predicted on the calibrated views (`None`
    /// while unmapped).
    pub expected: Option<f64>,
}

/// A source application: opens its streams at time zero and feeds them.
#[derive(Debug)]
pub struct SourceApp {
    streams: Vec<SourceState>,
    on_infeasible: Option<Infeasible>,
    events: Vec<(Instant, Event)>,
    promises: Vec<ViolationPromise>,
    wakeup: Option<Instant>,
}

impl SourceApp {
    /// A source for `streams`.
    pub fn new(streams: Vec<SourceStream>) -> Self {
        SourceApp {
            streams: streams
                .into_iter()
                .map(|def| SourceState {
                    next_at: def.start,
                    metered: is_metered(&def.config).then(Metered::default),
                    def,
                    id: None,
                    frame: 0,
                    backlog: Default::default(),
                    seq: 0,
                    digest: StreamDigest::default(),
                    refused: None,
                    sent: 0,
                    dropped: 0,
                    closed: false,
                })
                .collect(),
            events: Vec::new(),
            promises: Vec::new(),
            wakeup: Some(Instant::ZERO),
            on_infeasible: None,
        }
    }

    /// Answers upcalls so (`None`, the default: leaves them unanswered).
    pub fn with_on_infeasible(mut self, answer: Option<Infeasible>) -> Self {
        self.on_infeasible = answer;
        self
    }

    fn answer(&self, now: Instant, session: &mut Session, e: &Event) {
        let (Some(policy), Event::GuaranteeUnmet { stream, spec, best }) = (self.on_infeasible, e)
        else {
            return;
        };
        let Some(answer) = policy.answer(spec, best) else {
            // `fail`: nobody answers (scenarios refuse it).
            return;
        };
        // An upcall for a stream that has since closed has nobody to answer.
        let _ = session.answer_upcall(*stream, answer, now);
    }

    /// Events the session raised, with their times.
    pub fn events(&self) -> &[(Instant, Event)] {
        &self.events
    }

    /// What each violation-bound stream was promised, once per statistics
    /// interval: the bound it ran under and the E\[Z\] its mapping
    /// predicted (`None` while unmapped).
    pub fn violation_promises(&self) -> &[ViolationPromise] {
        &self.promises
    }

    fn record_violation_promise(&mut self, now: Instant, session: &Session, stream: StreamId) {
        let Some(bound) = session
            .spec_in_force(stream)
            .and_then(|s| s.max_expected_misses())
        else {
            return;
        };
        if self.promises.len() < MAX_EVENT_LOG {
            self.promises.push(ViolationPromise {
                at: now,
                stream,
                bound,
                expected: session.expected_misses(stream),
            });
        }
    }

    /// (name, stream id, messages accepted by the session, dropped at the
    /// source, digest of what was sent) per stream.
    pub fn sent(&self) -> Vec<(String, Option<StreamId>, u64, u64, StreamDigest)> {
        self.streams
            .iter()
            .map(|s| (s.def.name.clone(), s.id, s.sent, s.dropped, s.digest))
            .collect()
    }

    /// Per stream in order, what was kept for its windows (metered streams
    /// only).
    pub fn metered(&self) -> Vec<Option<&Metered>> {
        self.streams.iter().map(|s| s.metered.as_ref()).collect()
    }

    /// Queues a generated message of `size` (or drops it at a full backlog).
    fn offer(s: &mut SourceState, size: u32, at: Instant) {
        if let Some(m) = &mut s.metered {
            if m.offers.len() < MAX_METERED {
                m.offers.push((at, size));
            }
        }
        if s.backlog.len() < MAX_APP_BACKLOG {
            s.backlog.push_back((size, at));
        } else {
            s.dropped += 1;
        }
    }

    fn generate(s: &mut SourceState, now: Instant) {
        if s.id.is_none() {
            return;
        }
        match &s.def.workload {
            Workload::Cbr { rate, size } => {
                let gap = rate
                    .transmit_time(u64::from(*size))
                    .max(Duration::from_nanos(1));
                let size = *size;
                while s.next_at <= now && s.next_at < s.def.stop {
                    let at = s.next_at;
                    Self::offer(s, size, at);
                    s.next_at += gap;
                }
            }
            Workload::Greedy { size } => {
                if now < s.def.stop && s.backlog.is_empty() {
                    let size = *size;
                    Self::offer(s, size, now);
                }
            }
            Workload::Frames { period, size, .. } => {
                let (period, size) = (*period, *size);
                while s.next_at <= now && s.next_at < s.def.stop {
                    let Workload::Frames { frames, .. } = &s.def.workload else {
                        break;
                    };
                    let Some(&frame) = frames.get(s.frame % frames.len().max(1)) else {
                        break;
                    };
                    let mut left = frame;
                    s.frame += 1;
                    let at = s.next_at;
                    while left > 0 {
                        let n = left.min(size);
                        left -= n;
                        Self::offer(s, n, at);
                    }
                    s.next_at += period;
                }
            }
        }
    }
}

impl SessionApp for SourceApp {
    fn drive(&mut self, now: Instant, session: &mut Session) {
        let mut stats = Vec::new();
        while let Some(e) = session.poll_event() {
            self.answer(now, session, &e);
            if let Event::Stats { stream, .. } = e {
                stats.push(stream);
            }
            if self.events.len() < MAX_EVENT_LOG {
                self.events.push((now, e));
            }
        }
        // The promise in force once this instant's upcalls are answered: a
        // statistics event ahead of an upcall in the queue would otherwise
        // record the moment between a re-map and its answer as unmapped.
        for stream in stats {
            self.record_violation_promise(now, session, stream);
        }
        let mut wake: Option<Instant> = None;
        // Streams open at their start, in list order (so stream i is
        // always `StreamId(i + 1)`): one waits for those before it.
        let mut earlier_unopened = false;
        for s in &mut self.streams {
            if s.id.is_none() && !s.closed {
                if earlier_unopened || now < s.def.start {
                    earlier_unopened = true;
                    let t = s.def.start.max(now);
                    wake = Some(wake.map_or(t, |w| w.min(t)));
                    continue;
                }
                match session.open_stream(now, s.def.config.clone()) {
                    Ok(id) => s.id = Some(id),
                    Err(_) => {
                        s.closed = true;
                        continue;
                    }
                }
            }
            let Some(id) = s.id else { continue };
            Self::generate(s, now);
            // Hand the backlog over; the real payload is stamped with the
            // sequence the session will give it.
            while let Some((len, generated)) = s.backlog.pop_front() {
                // A refused message comes back next time as it was (same
                // sequence, same length: the backlog's front).
                let m = s
                    .refused
                    .take()
                    .unwrap_or_else(|| payload(id, s.seq, len as usize));
                match session.send(now, id, m) {
                    Ok(()) => {
                        if let Some(m) = &mut s.metered {
                            if m.generated_at.len() < MAX_METERED {
                                m.generated_at.push(generated);
                            }
                        }
                        s.digest.update_payload(id, s.seq, len as usize);
                        s.seq += 1;
                        s.sent += 1;
                    }
                    Err(r) => {
                        s.refused = Some(r.into_data());
                        s.backlog.push_front((len, generated));
                        break;
                    }
                }
                if matches!(s.def.workload, Workload::Greedy { .. }) && now < s.def.stop {
                    Self::generate(s, now);
                }
            }
            if now >= s.def.stop && s.backlog.is_empty() && !s.closed {
                s.closed = true;
                let _ = session.close_stream(now, id);
            }
            if !s.closed {
                let t =
                    if s.backlog.is_empty() && !matches!(s.def.workload, Workload::Greedy { .. }) {
                        s.next_at.min(s.def.stop)
                    } else {
                        // Refused: try again shortly (acks also wake us).
                        now + Duration::from_millis(5)
                    };
                wake = Some(wake.map_or(t, |w| w.min(t)));
            }
        }
        self.wakeup = wake;
    }

    fn next_wakeup(&self) -> Option<Instant> {
        self.wakeup
    }
}

/// What a sink saw of one stream.
#[derive(Debug, Clone, Default)]
pub struct SinkStream {
    /// Delivery class (from the first message's stream config, when known).
    pub delivery: Option<Delivery>,
    /// Messages handed over.
    pub messages: u64,
    /// Bytes handed over.
    pub bytes: u64,
    /// Bytes per 1 s bin, by arrival time.
    pub bins: Vec<u64>,
    /// One-way delays (µs), a bounded sample.
    pub delays_us: Vec<u64>,
    /// Streams being metered ([`SinkApp::meter`]): each message's sequence
    /// number, arrival and bytes (at most [`MAX_METERED`]).
    pub arrivals: Option<Vec<(u64, Instant, u32)>>,
    /// Digest of the messages in order of delivery.
    pub digest: StreamDigest,
    /// Next sequence expected (reliable order check).
    pub next_seq: u64,
    /// Messages out of order (reliable streams must have none).
    pub out_of_order: u64,
    /// Messages delivered twice (must be none).
    pub duplicates: u64,
    /// Messages whose bytes were not what the source sent (must be none).
    pub corrupt: u64,
    /// Messages handed over after their deadline (must be none).
    pub late: u64,
    seen: BTreeSet<u64>,
}

/// Most delay samples a sink keeps per stream.
pub const MAX_SINK_DELAYS: usize = 200_000;

/// A sink application: takes every message, checks and records it.
#[derive(Debug, Default)]
pub struct SinkApp {
    streams: std::collections::BTreeMap<StreamId, SinkStream>,
    ttl: std::collections::BTreeMap<StreamId, Duration>,
    reliable: BTreeSet<StreamId>,
    events: Vec<(Instant, Event)>,
    bin: Duration,
}

impl SinkApp {
    /// A sink that bins throughput by `bin`.
    pub fn new(bin: Duration) -> Self {
        SinkApp {
            bin,
            ..SinkApp::default()
        }
    }

    /// Tells the sink a stream's delivery class (for its checks).
    pub fn expect(&mut self, stream: StreamId, delivery: Delivery) {
        match delivery {
            Delivery::Reliable => {
                self.reliable.insert(stream);
            }
            Delivery::Deadline { ttl } => {
                self.ttl.insert(stream, ttl);
            }
            _ => {}
        }
        self.streams.entry(stream).or_default().delivery = Some(delivery);
    }

    /// Keeps each message's arrival on `stream`, for its rate windows.
    pub fn meter(&mut self, stream: StreamId) {
        self.streams.entry(stream).or_default().arrivals = Some(Vec::new());
    }

    /// Per-stream records.
    pub fn streams(&self) -> &std::collections::BTreeMap<StreamId, SinkStream> {
        &self.streams
    }

    /// Events the session raised.
    pub fn events(&self) -> &[(Instant, Event)] {
        &self.events
    }
}

impl SessionApp for SinkApp {
    fn drive(&mut self, now: Instant, session: &mut Session) {
        while let Some(e) = session.poll_event() {
            if self.events.len() < MAX_EVENT_LOG {
                self.events.push((now, e));
            }
        }
        while let Some(m) = session.recv(now) {
            let st = self.streams.entry(m.stream).or_default();
            st.messages += 1;
            st.bytes += m.data.len() as u64;
            let b = (now.since_origin().as_nanos() / self.bin.as_nanos().max(1)) as usize;
            if st.bins.len() <= b {
                st.bins.resize(b + 1, 0);
            }
            st.bins[b] += m.data.len() as u64;
            let delay = now.saturating_duration_since(m.sent_at);
            if st.delays_us.len() < MAX_SINK_DELAYS {
                st.delays_us.push(delay.as_micros());
            }
            if let Some(a) = &mut st.arrivals {
                if a.len() < MAX_METERED {
                    a.push((m.seq, now, m.data.len() as u32));
                }
            }
            if payload_matches(m.stream, m.seq, &m.data) {
                st.digest.update_payload(m.stream, m.seq, m.data.len());
            } else {
                st.corrupt += 1;
                st.digest.update(&m.data);
            }
            if self.reliable.contains(&m.stream) {
                if m.seq != st.next_seq {
                    st.out_of_order += 1;
                }
                st.next_seq = m.seq + 1;
            } else if !st.seen.insert(m.seq) {
                st.duplicates += 1;
            }
            if let Some(ttl) = self.ttl.get(&m.stream) {
                if delay > *ttl {
                    st.late += 1;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payload_matches_exactly_its_own_bytes() {
        for len in [0usize, 1, 8, 15, 16, 17, 1200] {
            let m = payload(StreamId(3), 77, len);
            assert!(payload_matches(StreamId(3), 77, &m), "len {len}");
            assert!(
                len < 16 || !payload_matches(StreamId(3), 78, &m),
                "len {len}"
            );
            if len > 16 {
                let mut bad = m.clone();
                bad[len - 1] ^= 1;
                assert!(!payload_matches(StreamId(3), 77, &bad));
            }
        }
    }

    #[test]
    fn digest_depends_on_bytes_order_and_split() {
        let d = |parts: &[&[u8]]| {
            let mut d = StreamDigest::default();
            for p in parts {
                d.update(p);
            }
            d
        };
        let a: &[u8] = b"0123456789abcdef!";
        assert_eq!(d(&[a]), d(&[a]));
        assert_ne!(d(&[a]), d(&[b"0123456789abcdef?"]));
        assert_ne!(d(&[&a[..8], &a[8..]]), d(&[&a[..9], &a[9..]]));
        assert_ne!(d(&[b"ab", b"cd"]), d(&[b"cd", b"ab"]));
    }

    #[test]
    fn payload_digest_depends_on_stream_sequence_and_length() {
        let d = |stream: u32, seq: u64, len: usize| {
            let mut d = StreamDigest::default();
            d.update_payload(StreamId(stream), seq, len);
            d
        };
        assert_eq!(d(3, 77, 1200), d(3, 77, 1200));
        assert_ne!(d(3, 77, 1200), d(3, 78, 1200));
        assert_ne!(d(3, 77, 1200), d(4, 77, 1200));
        assert_ne!(d(3, 77, 1200), d(3, 77, 1199));
        let mut bytes = StreamDigest::default();
        bytes.update(&payload(StreamId(3), 77, 1200));
        assert_ne!(bytes, d(3, 77, 1200), "a corrupt message breaks the digest");
    }
}
