//! What a session looks like now, as plain data: every path and every
//! stream, for live views, JSON lines and metrics.
//!
//! Main types: [`Snapshot`], [`PathSnapshot`], [`HopSnapshot`],
//! [`StreamSnapshot`]. [`Session::snapshot`](super::Session::snapshot)
//! builds one; it reads state and changes nothing.
//!
//! Rates named "delivered" cover the last finished statistics interval
//! ([`SessionConfig::stats_interval`](super::SessionConfig)); counters
//! (`messages`, `bytes`, …) run from the start.

use super::event::{PathPromise, StreamStats};
use super::frame::SessionId;
use super::stream::StreamConfig;
use super::{Role, SessionStats};
use crate::id::{PathId, StreamId};
use crate::scheduler::BestAchievable;
use crate::time::{Duration, Instant};
use crate::transport::FourTuple;
use crate::units::Bandwidth;

/// A session's state at one instant.
#[derive(Debug, Clone, PartialEq)]
pub struct Snapshot {
    /// When it was taken.
    pub at: Instant,
    /// Source or sink.
    pub role: Role,
    /// The session.
    pub session: SessionId,
    /// The scheduler's short name (source; the sink runs none).
    pub scheduler: &'static str,
    /// Every path, in id order.
    pub paths: Vec<PathSnapshot>,
    /// Every stream the session knows, in id order.
    pub streams: Vec<StreamSnapshot>,
    /// Session-wide counters.
    pub stats: SessionStats,
}

/// One path.
#[derive(Debug, Clone, PartialEq)]
pub struct PathSnapshot {
    /// The path.
    pub id: PathId,
    /// Its first hop's addresses (the relay's, on a relayed path).
    pub addr: FourTuple,
    /// Established and answering.
    pub up: bool,
    /// Sum of the rates the scheduler promised streams on this path.
    pub promised: Bandwidth,
    /// What the estimator guarantees with probability 0.95 (its
    /// 5th-percentile sample), once it has samples.
    pub guaranteed: Option<Bandwidth>,
    /// Rate the path delivered in the last interval (acknowledged bytes).
    pub delivered: Bandwidth,
    /// Smoothed RTT of the whole path: the first hop's plus every hop
    /// a relay reported.
    pub srtt: Duration,
    /// Loss ratio of the last interval, over the whole path.
    pub loss: f64,
    /// Usable samples in its bandwidth estimate.
    pub samples: usize,
    /// The hops after the first, as their relays reported them (empty on
    /// a direct path).
    pub hops: Vec<HopSnapshot>,
    /// Bytes sent on the path's connections (payload and headers).
    pub bytes_sent: u64,
    /// Packets declared lost on the path's connections.
    pub packets_lost: u64,
    /// Why its connection last closed, if it did.
    pub error: Option<String>,
}

/// One hop of a relayed path beyond the first, as its relay measured it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HopSnapshot {
    /// Its place on the path: 1 is the hop leaving the first relay.
    pub index: u8,
    /// Smoothed RTT of the hop.
    pub srtt: Duration,
    /// Loss ratio in the relay's last interval.
    pub loss: f64,
    /// Rate the hop delivered in the relay's last interval.
    pub delivered: Bandwidth,
    /// Bytes the relay holds for this path towards the hop.
    pub queued_bytes: u64,
    /// How long ago the report arrived.
    pub age: Duration,
}

/// One stream.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamSnapshot {
    /// The stream.
    pub id: StreamId,
    /// Its configuration (spec, delivery, name …).
    pub config: StreamConfig,
    /// Last interval: the source's rate handed to connections, or the
    /// sink's rate delivered to the application.
    pub last: StreamStats,
    /// Share of the spec's windows that met the spec since the stream
    /// opened: the sink's own figure, or on a source the last figure the
    /// sink reported (`None` before the first window is judged, and for
    /// best effort).
    pub windows_met: Option<f64>,
    /// What each path promises the stream now (source).
    pub paths: Vec<PathPromise>,
    /// The guarantee cannot be met: the best the paths could do, from the
    /// last upcall not yet answered or superseded by a mapping (source).
    pub unmet: Option<BestAchievable>,
    /// Messages sent (source) or delivered (sink) in all.
    pub messages: u64,
    /// Payload bytes likewise.
    pub bytes: u64,
    /// The stream has ended (source: closed by the application; sink: the
    /// source's close arrived).
    pub finished: bool,
    /// Sink: every message the source sent was delivered (reliable) or
    /// accounted for. Source: the sink kept the stream whole (its verdict).
    pub complete: bool,
    /// The sink refused the stream, and why.
    pub refused: Option<String>,
}

/// A stream's outcomes as the sink counts them, since the stream opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) struct Outcomes {
    /// Windows judged.
    pub judged: u64,
    /// Of them, windows that missed the spec.
    pub missed: u64,
    /// Messages short of the spec over them (Σ Z).
    pub misses: u64,
}

/// What a session remembers of every stream it has known, for
/// [`Session::snapshot`]: at most [`MAX_STREAMS`](crate::id::MAX_STREAMS)
/// entries, kept after the stream ends.
#[derive(Debug, Clone)]
pub(super) struct StreamLedger {
    pub config: StreamConfig,
    pub last: StreamStats,
    pub promises: Vec<PathPromise>,
    pub unmet: Option<BestAchievable>,
    /// Source: the sink's last STREAM_REPORT (windows met, rate, lost).
    pub reported: Option<(f64, Bandwidth, u64)>,
    /// Source: the sink's cumulative outcomes at its last report (the
    /// calibration's place in them).
    pub judged: Outcomes,
    pub messages: u64,
    pub bytes: u64,
    pub finished: bool,
    pub complete: bool,
    /// The sink refused the stream (source and sink), and why.
    pub refused: Option<String>,
    /// Source: STREAM_CLOSE went out; the sink's verdict is awaited.
    /// Sink: the stream ended and waits for the application's verdict.
    pub awaiting_verdict: bool,
}

impl StreamLedger {
    pub fn new(config: StreamConfig) -> Self {
        StreamLedger {
            config,
            last: StreamStats::default(),
            promises: Vec::new(),
            unmet: None,
            reported: None,
            judged: Outcomes::default(),
            messages: 0,
            bytes: 0,
            finished: false,
            complete: false,
            refused: None,
            awaiting_verdict: false,
        }
    }

    pub fn count(&mut self, bytes: usize) {
        self.messages += 1;
        self.bytes += bytes as u64;
    }
}

impl super::Session {
    /// Every path and stream now (see [`Snapshot`]).
    pub fn snapshot(&self, now: Instant) -> Snapshot {
        let mut promised: std::collections::BTreeMap<PathId, u64> = Default::default();
        for l in self.ledger.values() {
            for p in &l.promises {
                *promised.entry(p.path).or_default() += p.rate.bps();
            }
        }
        let paths = self
            .paths
            .values()
            .map(|p| {
                let conn = p.conn.and_then(|h| self.endpoint.connection(h));
                let stats = conn.map(|c| c.stats());
                PathSnapshot {
                    id: p.id,
                    addr: p.addr,
                    up: p.is_up(),
                    promised: Bandwidth::from_bps(promised.get(&p.id).copied().unwrap_or(0)),
                    guaranteed: p.estimate.window().quantile(0.05),
                    delivered: p.last_rate,
                    srtt: p.path_srtt(),
                    loss: p.path_loss(),
                    samples: p.samples(),
                    hops: p
                        .hops
                        .iter()
                        .flatten()
                        .map(|(r, at)| HopSnapshot {
                            index: r.index,
                            srtt: r.srtt,
                            loss: r.loss,
                            delivered: r.delivered,
                            queued_bytes: r.queued_bytes,
                            age: now.saturating_duration_since(*at),
                        })
                        .collect(),
                    bytes_sent: stats.map_or(0, |s| s.bytes_sent),
                    packets_lost: stats.map_or(0, |s| s.packets_lost),
                    error: p.last_error.clone(),
                }
            })
            .collect();
        let streams = self
            .ledger
            .iter()
            .map(|(&id, l)| StreamSnapshot {
                id,
                config: l.config.clone(),
                last: l.last,
                // None until a window has been judged (and always for best
                // effort, which has none to meet).
                windows_met: match self.role {
                    Role::Sink => (l.last.windows_judged > 0).then_some(l.last.windows_met),
                    Role::Source => l
                        .reported
                        .filter(|_| l.judged.judged > 0)
                        .map(|(m, _, _)| m),
                },
                paths: l.promises.clone(),
                unmet: l.unmet,
                messages: l.messages,
                bytes: l.bytes,
                finished: l.finished,
                complete: l.complete,
                refused: l.refused.clone(),
            })
            .collect();
        Snapshot {
            at: now,
            role: self.role,
            session: self.id,
            scheduler: match self.role {
                Role::Source => self.scheduler_name(),
                Role::Sink => "",
            },
            paths,
            streams,
            stats: self.stats,
        }
    }
}
