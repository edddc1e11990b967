//! The protocol and the two ends of `braid perf`: an iperf-like measurement
//! of one connection, over braid's RUDP transport or over TCP for
//! comparison. The `braid` binary adds only its flags and its printing.
//!
//! The exchange: the client sends data messages (RUDP: on stream 0 with the
//! chosen class; TCP: a byte stream). The server sends a [`Report`] every
//! [`REPORT_EVERY`] (RUDP: on its own reliable stream; TCP: on the same
//! connection). At the end the client says how much it sent (RUDP: an
//! `END` message on a reliable control stream; TCP: shutting down its
//! write side); the server then waits for the data still in flight (all of
//! it for reliable data, up to [`GRACE`] of silence otherwise) and sends a
//! final report, after which both close.
//!
//! Every message starts with the client's send stamp
//! ([`arrivals::STAMP_LEN`] bytes, when it has room), so the server can
//! report per-message latency and inter-arrival times
//! ([`arrivals::ArrivalSummary`]); TCP messages are framed for this (see
//! [`tcp`]). The workload is either back-to-back messages of one size or
//! frames at a fixed rate ([`frames::Frames`], seed 002's "changing
//! application").
//!
//! | module | what it is for |
//! | --- | --- |
//! | this one | the [`Report`] and its encoding, [`ClientOptions`], [`Summary`], [`Sample`], the [`Progress`] callback, [`PerfError`], [`cpu_us`] |
//! | [`arrivals`] | send stamps, [`arrivals::Arrivals`]: inter-arrival and latency statistics at the server |
//! | [`frames`] | [`frames::Frames`]: the fixed-frame-rate workload from a frame-size trace |
//! | [`rudp`] | the RUDP server side ([`rudp::serve`]) and client ([`rudp::client`]) |
//! | [`tcp`] | the TCP server side ([`tcp::serve`]) and client ([`tcp::client`]) |
//! | [`server`] | [`server::PerfServer`]: RUDP and TCP on one port, each test in its own task |

pub mod arrivals;
pub mod frames;
pub mod rudp;
pub mod server;
pub mod tcp;

use crate::clock;
use crate::rudp::{Reliability, RudpError};
use braid_core::transport::CongestionKind;
use braid_core::{Bandwidth, Duration, Instant};

/// How often the server reports what it received.
pub const REPORT_EVERY: std::time::Duration = std::time::Duration::from_millis(100);
/// After the client's END, how long the server waits for more non-reliable
/// data before its final report.
pub const GRACE: std::time::Duration = std::time::Duration::from_millis(500);
/// How long the client waits for the final report after it stopped sending:
/// long enough for a full [`SEND_QUEUE_BYTES`] backlog to drain at
/// 0.2 Mbit/s (a lossy wide-area path or a shared one).
pub const FINAL_WAIT: std::time::Duration = std::time::Duration::from_secs(120);
/// Size of one encoded [`Report`].
pub const REPORT_LEN: usize = 33;
/// The RUDP client's send queue (the core's `send_queue_bytes`).
pub const SEND_QUEUE_BYTES: u64 = 2 << 20;
/// TCP read and write buffer size, and the TCP client's default message.
pub const TCP_CHUNK: usize = 128 << 10;
/// Default RUDP message size for reliable messages.
pub const RELIABLE_MESSAGE: u64 = 16 << 10;
/// Default RUDP message size for other classes: one datagram.
pub const DATAGRAM_MESSAGE: u64 = 1200;
/// Largest TCP message the client sends in one write.
pub const MAX_TCP_MESSAGE: u64 = 64 << 20;

/// What can go wrong in a perf test. Each variant's text is one line; the
/// cause, if any, is its [`std::error::Error::source`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PerfError {
    /// An RUDP operation failed.
    #[error(transparent)]
    Rudp(#[from] RudpError),
    /// An RUDP operation failed while doing what `context` says.
    #[error("{context}")]
    RudpDuring {
        /// What was being done.
        context: String,
        /// Why it failed.
        source: RudpError,
    },
    /// A socket operation failed while doing what `context` says.
    #[error("{context}")]
    Io {
        /// What was being done.
        context: String,
        /// Why it failed.
        source: std::io::Error,
    },
    /// The peer broke the exchange or went away (the text says how).
    #[error("{0}")]
    Protocol(String),
    /// The client's sending task failed.
    #[error("sender task")]
    Task(#[source] tokio::task::JoinError),
}

impl PerfError {
    fn rudp(context: impl Into<String>) -> impl FnOnce(RudpError) -> PerfError {
        let context = context.into();
        move |source| PerfError::RudpDuring { context, source }
    }

    fn io(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> PerfError {
        let context = context.into();
        move |source| PerfError::Io { context, source }
    }
}

/// What the server's application received so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Report {
    /// The last report of the test.
    pub last: bool,
    /// Payload bytes received.
    pub bytes: u64,
    /// Messages received (RUDP; TCP counts reads).
    pub messages: u64,
    /// From the first to the last byte received, in nanoseconds.
    pub elapsed_ns: u64,
    /// Server process CPU time (user + system) during the test, in µs.
    pub cpu_us: u64,
}

impl Report {
    /// The fixed-size encoding.
    pub fn encode(&self) -> [u8; REPORT_LEN] {
        let mut b = [0u8; REPORT_LEN];
        b[0] = u8::from(self.last);
        b[1..9].copy_from_slice(&self.bytes.to_be_bytes());
        b[9..17].copy_from_slice(&self.messages.to_be_bytes());
        b[17..25].copy_from_slice(&self.elapsed_ns.to_be_bytes());
        b[25..33].copy_from_slice(&self.cpu_us.to_be_bytes());
        b
    }

    /// Decodes a report; `None` unless exactly [`REPORT_LEN`] bytes.
    pub fn decode(b: &[u8]) -> Option<Report> {
        if b.len() != REPORT_LEN || b[0] > 1 {
            return None;
        }
        let u = |r: std::ops::Range<usize>| {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[r]);
            u64::from_be_bytes(a)
        };
        Some(Report {
            last: b[0] == 1,
            bytes: u(1..9),
            messages: u(9..17),
            elapsed_ns: u(17..25),
            cpu_us: u(25..33),
        })
    }
}

/// Messages the receiving core dropped (buffer full, incomplete, late,
/// expired), per class: reliable, unreliable, discardable.
pub type Drops = [u64; 3];

/// What the server measured in one test.
#[derive(Debug, Clone, Copy, Default)]
pub struct Served {
    /// The final report (as sent to the client).
    pub report: Report,
    /// Messages the receiving core dropped (RUDP only).
    pub drops: Option<Drops>,
    /// Per-message inter-arrival and latency statistics.
    pub arrivals: arrivals::ArrivalSummary,
}

/// Process CPU time (user + system) in microseconds.
pub fn cpu_us() -> u64 {
    let mut ru = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage writes a `rusage` into the pointer we own; on
    // failure we read the zeroed value.
    let ru = unsafe {
        libc::getrusage(libc::RUSAGE_SELF, ru.as_mut_ptr());
        ru.assume_init()
    };
    let tv = |t: libc::timeval| t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// Receive-side counters of one test.
#[derive(Debug, Default)]
struct Counter {
    bytes: u64,
    messages: u64,
    first: Option<Instant>,
    last: Instant,
    cpu_start: u64,
    arrivals: arrivals::Arrivals,
}

impl Counter {
    fn new() -> Counter {
        Counter {
            cpu_start: cpu_us(),
            ..Counter::default()
        }
    }
    /// `n` bytes arrived (part of a message or a whole one).
    fn add_bytes(&mut self, n: usize) {
        let now = clock::now();
        self.first.get_or_insert(now);
        self.last = now;
        self.bytes += n as u64;
    }
    /// A whole message arrived, with its send stamp if it had one.
    fn add_message(&mut self, stamp: Option<u64>) {
        self.messages += 1;
        self.arrivals.add(arrivals::stamp_ns(), stamp);
    }
    fn report(&self, last: bool) -> Report {
        Report {
            last,
            bytes: self.bytes,
            messages: self.messages,
            elapsed_ns: self
                .first
                .map_or(0, |f| self.last.saturating_duration_since(f).as_nanos()),
            cpu_us: cpu_us().saturating_sub(self.cpu_start),
        }
    }
}

/// What a client test does.
#[derive(Debug, Clone)]
pub struct ClientOptions {
    /// How long to send (positive).
    pub duration: Duration,
    /// Limit on the sending rate; `None` sends as fast as allowed.
    pub rate: Option<Bandwidth>,
    /// Message class (RUDP).
    pub reliability: Reliability,
    /// Bytes per message (RUDP: at most the transport's maximum message
    /// size; TCP: bytes per write, at most [`MAX_TCP_MESSAGE`]).
    pub message_size: u64,
    /// How often [`Progress::on_interval`] is called (positive).
    pub interval: Duration,
    /// Congestion controller (RUDP).
    pub congestion: CongestionKind,
    /// Whether to pace packets (RUDP).
    pub pacing: bool,
    /// Frames at a fixed rate instead of back-to-back messages: each frame
    /// is one message of the frame's size (`message_size` is then unused).
    pub frames: Option<frames::Frames>,
    /// TCP congestion control to set on the client's socket (e.g. `cubic`);
    /// `None` keeps the namespace's default.
    pub tcp_congestion: Option<String>,
    /// RUDP: bound the send queue by [`AUTOTUNE_CWNDS`] congestion windows
    /// (`Config::send_queue_cwnds`) and hand messages to the driver one at
    /// a time, like TCP's send-buffer autotuning; otherwise the queue holds
    /// [`SEND_QUEUE_BYTES`] plus the driver's message channel.
    pub autotune: bool,
    /// RUDP: the pre-shared key to authenticate with (`--key FILE`); the
    /// server must hold the same one.
    pub key: Option<braid_core::transport::Psk>,
    /// RUDP, with a key: encrypt (the default) or authenticate only
    /// (`--no-encrypt`); the server must agree.
    pub protection: braid_core::transport::Protection,
}

/// Congestion windows the RUDP send queue holds with
/// [`ClientOptions::autotune`].
pub const AUTOTUNE_CWNDS: u64 = 2;

impl ClientOptions {
    /// The size of message `k`.
    fn size_of(&self, k: u64) -> u64 {
        self.frames
            .as_ref()
            .map_or(self.message_size, |f| f.size(k))
    }

    /// The largest message the workload writes.
    fn max_size(&self) -> u64 {
        self.frames
            .as_ref()
            .map_or(self.message_size, frames::Frames::max_size)
    }
}

/// Sleeps until message `k` is due: frame `k`'s time for the frame
/// workload, or as `rate` allows after `sent` bytes otherwise; never past
/// `end` (the test's duration bounds every wait, however low the rate).
async fn wait_due(o: &ClientOptions, start: Instant, end: Instant, k: u64, sent: u64) {
    let due = match &o.frames {
        Some(f) => start + f.due(k),
        None if k > 0 => match o.rate {
            Some(rate) => start + rate.transmit_time(sent),
            None => return,
        },
        None => return,
    };
    let now = clock::now();
    let due = due.min(end);
    if due > now + Duration::from_millis(1) {
        tokio::time::sleep(due.saturating_duration_since(now).into()).await;
    }
}

/// One interval as the client's transport saw it.
#[derive(Debug, Clone, Copy, Default)]
pub struct Sample {
    /// Smoothed round-trip time.
    pub rtt_ms: f64,
    /// Packets lost over packets sent in the interval, in percent.
    pub loss_pct: f64,
    /// Congestion window in bytes.
    pub cwnd: u64,
    /// Bytes retransmitted in the interval.
    pub retrans: u64,
}

/// What a client hears while a test runs.
pub trait Progress: Send {
    /// The test starts: the connection is up, the first interval begins.
    fn on_start(&mut self);
    /// Every [`ClientOptions::interval`]: the bytes the server reported
    /// delivered so far, and the transport's sample.
    fn on_interval(&mut self, delivered: u64, sample: Sample);
}

/// What the client measured.
#[derive(Debug, Clone, Copy, Default)]
pub struct Summary {
    /// Payload bytes the client sent.
    pub sent_bytes: u64,
    /// Messages (writes) the client sent.
    pub sent_messages: u64,
    /// How long the client sent, in seconds.
    pub send_seconds: f64,
    /// The server's last report before the client stopped sending: the
    /// goodput over the test's duration (what is still queued then only
    /// drains afterwards).
    pub at_stop: Report,
    /// The final report (everything delivered, drain included).
    pub report: Report,
    /// Client process CPU time during the test, in µs.
    pub client_cpu_us: u64,
    /// Round-trip time at the end, in ms.
    pub rtt_ms: f64,
    /// Bytes retransmitted over the test.
    pub retrans: u64,
    /// Packets lost over packets sent over the test, in percent.
    pub loss_pct: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn report_round_trip() {
        let r = Report {
            last: true,
            bytes: 1 << 40,
            messages: 7,
            elapsed_ns: 123,
            cpu_us: 9,
        };
        assert_eq!(Report::decode(&r.encode()), Some(r));
        assert_eq!(Report::decode(&[0; 5]), None);
        let mut bad = r.encode();
        bad[0] = 2;
        assert_eq!(Report::decode(&bad), None);
    }

    #[test]
    fn cpu_time_is_readable() {
        let a = cpu_us();
        let mut x = 0u64;
        for i in 0..1_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        assert!(x != 1 || cpu_us() >= a);
    }
}
