//! What a session tells its application: typed events and statistics.
//!
//! Main types: [`Event`], [`StreamStats`], [`PathPromise`].

use super::error::CloseReason;
use crate::id::{PathId, StreamId};
use crate::scheduler::{BestAchievable, Part, RemapReason, StreamSpec};
use crate::time::{Duration, Instant};
use crate::units::Bandwidth;

/// Most events queued for the application; the oldest are dropped (and
/// counted in [`SessionStats::events_dropped`](super::SessionStats)).
pub const MAX_SESSION_EVENTS: usize = 4096;

/// What one path promises one stream.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PathPromise {
    /// The path.
    pub path: PathId,
    /// The rate mapped onto it.
    pub rate: Bandwidth,
    /// With this probability (`None` for a violation-bound part).
    pub probability: Option<f64>,
}

impl PathPromise {
    pub(crate) fn from_part(p: &Part) -> Self {
        PathPromise {
            path: p.path,
            rate: p.rate,
            probability: p.probability,
        }
    }
}

/// One stream's statistics over the last interval (sink: what arrived;
/// source: what was sent).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct StreamStats {
    /// Interval covered.
    pub interval: Duration,
    /// Rate delivered to the application (sink) or handed to connections (source).
    pub rate: Bandwidth,
    /// Messages in the interval.
    pub messages: u64,
    /// Share of the stream's spec windows (of `t_w`, or 1 s for rate specs)
    /// that met the spec, since the stream opened (sink; 1.0 on the source).
    pub windows_met: f64,
    /// Windows judged since the stream opened (sink; 0 on the source and
    /// for streams without a guarantee).
    pub windows_judged: u64,
    /// Of them, windows that missed the spec (sink).
    pub windows_missed: u64,
    /// Messages short of the spec over the judged windows (sink; a
    /// violation bound's Σ Z, 0 for rate specs).
    pub messages_missed: u64,
    /// Messages lost or dropped late, since the stream opened (sink); on
    /// the source, messages of a window-constrained stream dropped at
    /// dispatch because their window had passed.
    pub lost: u64,
    /// Median one-way delay of the messages delivered in the interval
    /// (sink; source clock to sink clock, exact when both share an origin
    /// as in braid-sim; zero when nothing arrived).
    pub delay_p50: Duration,
    /// 95th percentile of the same delays.
    pub delay_p95: Duration,
    /// 99th percentile of the same delays.
    pub delay_p99: Duration,
    /// Duplicate copies dropped, since the stream opened (sink).
    pub duplicates: u64,
    /// Messages re-sent on another path after a path failure (source).
    pub resent: u64,
}

/// Something the application should know (drain with `Session::poll_event`).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Event {
    /// A path's connection is established (source: and greeted).
    PathUp {
        /// The path.
        path: PathId,
    },
    /// A path stopped answering (no acknowledgement for max(3 × SRTT,
    /// 200 ms) after data was sent) or its connection closed.
    PathDown {
        /// The path.
        path: PathId,
        /// Reliable messages moved to the other paths.
        resent: u64,
    },
    /// Source: the sink accepted a stream; data flows. Sink: a source
    /// opened a stream (its config, name included, is in
    /// [`Session::snapshot`](super::Session::snapshot)).
    StreamOpened {
        /// The stream.
        stream: StreamId,
    },
    /// The scheduler mapped a stream (or changed its mapping).
    StreamMapped {
        /// The stream.
        stream: StreamId,
        /// What each path promises it.
        paths: Vec<PathPromise>,
    },
    /// The stream's guarantee cannot be met (seed 000's upcall): it runs
    /// best effort until answered with `Session::answer_upcall`.
    GuaranteeUnmet {
        /// The stream.
        stream: StreamId,
        /// What it asked for.
        spec: StreamSpec,
        /// What could be had.
        best: BestAchievable,
    },
    /// Source: a path has been up for [`SessionConfig::warmup_limit`]
    /// without giving the estimator `min_samples` usable samples (it
    /// carried too little, or only app-limited traffic, to be measured).
    /// Upcalls no longer wait for it: guarantees are mapped and judged on
    /// the paths that were measured. Raised once per path.
    ///
    /// [`SessionConfig::warmup_limit`]: super::SessionConfig::warmup_limit
    PathUnmeasured {
        /// The path.
        path: PathId,
        /// Usable samples it gave.
        samples: u64,
    },
    /// Source: a path that carries guarantees delivers less than half of
    /// its promise (see [`super::dip`]). With another path up, the
    /// guarantees are re-mapped at once.
    PathDip {
        /// The path.
        path: PathId,
        /// What it delivers in the dip.
        delivered: Bandwidth,
        /// What was promised on it.
        promised: Bandwidth,
        /// From the dip's first short interval to its detection.
        detected_after: Duration,
    },
    /// Source: the dip on this path is over.
    PathRecovered {
        /// The path.
        path: PathId,
    },
    /// The scheduler re-ran its mapping.
    Remapped {
        /// Why.
        reason: RemapReason,
        /// When.
        at: Instant,
    },
    /// Periodic statistics of one stream.
    Stats {
        /// The stream.
        stream: StreamId,
        /// The figures.
        stats: StreamStats,
    },
    /// The stream is finished. Source: the sink kept it whole (its
    /// verdict). Sink: every message was handed to the application
    /// (reliable) or the source's close has arrived (others); a sink that
    /// confirms streams (`SessionConfig::confirm_streams`) now keeps or
    /// refuses it.
    StreamClosed {
        /// The stream.
        stream: StreamId,
    },
    /// The sink refused the stream: the source has dropped what it still
    /// held of it, and nothing of it counts as delivered.
    StreamRefused {
        /// The stream.
        stream: StreamId,
        /// The sink's reason.
        reason: String,
    },
    /// The session is over.
    Closed(CloseReason),
}
