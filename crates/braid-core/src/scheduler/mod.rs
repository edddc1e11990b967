//! Multipath stream scheduling: stream specs, path views, the PGOS mapping
//! and dispatch, and the seed's baselines (seed 000 §V; experiments §VI).
//!
//! An application opens streams with a [`StreamSpec`] (a rate with a
//! probability, a window constraint, a violation bound, or best effort). The
//! driver feeds each path's bandwidth distribution and RTT as a [`PathView`]
//! and queues messages; a [`Scheduler`] answers, per packet, which stream's
//! head message goes on which path.
//!
//! Main types:
//! * [`StreamSpec`], [`SpecError`] — what a stream needs, validated.
//! * [`PathDistribution`], [`EmpiricalDistribution`], [`PathView`] — what a
//!   path can promise.
//! * [`mapping::map_streams`] — PGOS resource mapping (Fig. 6), with the
//!   probability-combination rule, upcall figures and re-map hysteresis.
//! * [`Pgos`] — PGOS dispatch: VP/VS virtual deadlines, Table I precedence,
//!   spare capacity to unscheduled traffic, blocked-path back-off.
//! * Baselines behind the same [`Scheduler`] trait: [`Wfq`], [`Msfq`],
//!   [`RoundRobin`] (GridFTP blocked / partitioned), [`MinRtt`], and the
//!   simulation-only [`OptSched`].
//!
//! Invariants: the mapping never promises a path more than its guarantee at
//! the strictest probability of the streams on it; no decision puts a
//! stream's message on a path outside the set given by
//! [`Scheduler::handle_stream_paths`]; every queue is bounded
//! ([`MAX_STREAMS`], shared with the wire, and a per-stream backlog bound); no clock reads —
//! every call takes `now`.
//!
//! # Driving a scheduler
//! * `handle_path_update` whenever a path's estimate changes, and
//!   `handle_path_remove` when a path is gone;
//! * `handle_stream_open` / `handle_stream_close`, `handle_enqueue` per message;
//! * `handle_stream_paths` to restrict a stream to some paths (pinning, or
//!   the paths whose measured RTT and loss meet its spec — seed 000 §V's
//!   other guarantees, decided by the session);
//! * `poll_dispatch_on(path, now)` when `path` can take one packet (pull), or
//!   `poll_dispatch(now)` to let the scheduler pick the path (push); if the
//!   driver then cannot send, it hands the packet back with `handle_blocked`;
//! * `poll_event` for mapping changes and upcalls, `poll_timeout` for the next
//!   time the scheduler wants to be asked again (a blocked path's back-off).

mod lowering;
pub mod mapping;
mod optsched;
pub mod path;
mod pgos;
pub(crate) mod queues;
mod simple;
pub mod spec;

pub use crate::id::{PathId, StreamId, MAX_STREAMS};
pub use lowering::UpcallPolicy;
pub use mapping::{BestAchievable, Combine, MapperConfig, Mapping, Part};
pub use optsched::{OptSched, OptSchedConfig};
pub use path::{EmpiricalDistribution, PathDistribution, PathView, ScaledDistribution};
pub use pgos::{Pgos, PgosConfig, PgosStats, UpcallAnswer};
pub use queues::{DEFAULT_MAX_BACKLOG, MAX_STREAM_PATHS};
pub use simple::{MinRtt, Msfq, RoundRobin, Wfq};
pub use spec::{SpecError, StreamSpec};

use crate::time::Instant;
use core::fmt;

/// Why a packet was chosen (Table I's precedence classes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum Class {
    /// 1: scheduled on this path.
    Scheduled,
    /// 2: scheduled on another path that is behind, sent here instead.
    OtherPath,
    /// 3: not scheduled (best effort, or beyond the stream's mapped rate).
    Unscheduled,
}

/// One dispatch decision: send the head message of `stream` on `path`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dispatch {
    /// Path to send on.
    pub path: PathId,
    /// Stream whose head message to send.
    pub stream: StreamId,
    /// Size of that message in bytes.
    pub bytes: u32,
    /// Precedence class of the decision.
    pub class: Class,
}

/// What the scheduler tells the application.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum SchedulerEvent {
    /// A stream's mapping changed (also on first mapping).
    Mapped {
        /// The stream.
        stream: StreamId,
        /// Its parts now.
        parts: Vec<Part>,
    },
    /// The spec cannot be met; the stream runs best effort until
    /// [`Pgos::handle_upcall_answer`].
    Upcall {
        /// The stream.
        stream: StreamId,
        /// What it asked for.
        spec: StreamSpec,
        /// What could be had instead.
        best: BestAchievable,
    },
    /// The mapping was recomputed.
    Remapped {
        /// Why.
        reason: RemapReason,
        /// When.
        at: Instant,
    },
}

/// Why a re-map ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum RemapReason {
    /// A stream opened, closed or changed its spec.
    StreamsChanged,
    /// A path's distribution moved beyond the tolerance band.
    PathDegraded(PathId),
    /// A path was added or removed.
    PathsChanged,
    /// Periodic retry for streams left unmapped.
    Retry,
}

/// Errors from the scheduler API.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum SchedError {
    /// The spec is invalid.
    #[error("invalid stream spec: {0}")]
    Spec(#[from] SpecError),
    /// No such stream is open.
    #[error("{0} is not open")]
    UnknownStream(StreamId),
    /// The stream is already open.
    #[error("{0} is already open")]
    DuplicateStream(StreamId),
    /// The stream's queue is full.
    #[error("{stream} has {bound} messages queued (the bound)")]
    BacklogFull {
        /// The stream.
        stream: StreamId,
        /// The bound.
        bound: usize,
    },
    /// Too many streams.
    #[error("at most {0} streams")]
    TooManyStreams(usize),
    /// The stream id is not below [`MAX_STREAMS`] (it could not be encoded).
    #[error("{0} is not below {max}", max = MAX_STREAMS)]
    StreamOutOfRange(StreamId),
    /// No such path.
    #[error("{0} is not known")]
    UnknownPath(PathId),
    /// A stream's path restriction names more paths than the bound
    /// ([`MAX_STREAM_PATHS`]).
    #[error("a stream may be restricted to at most {0} paths")]
    TooManyPaths(usize),
}

/// A multipath packet scheduler (see the module docs for the driving contract).
pub trait Scheduler: fmt::Debug {
    /// Short name for reports ("pgos", "msfq", …).
    fn name(&self) -> &'static str;
    /// A path's estimate changed (adds the path if new).
    fn handle_path_update(&mut self, path: PathId, view: PathView, now: Instant);
    /// The path is gone (its connection closed, its interface went down).
    ///
    /// No later decision names it. Messages stay queued on their streams and
    /// go out on the remaining paths; a scheduler that maps streams onto
    /// paths re-maps them ([`RemapReason::PathsChanged`]) or raises an upcall.
    /// A dispatch for the path that the driver hands back afterwards with
    /// [`Scheduler::handle_blocked`] still returns its message to its queue.
    ///
    /// # Errors
    /// [`SchedError::UnknownPath`] if the path is not known.
    fn handle_path_remove(&mut self, path: PathId, now: Instant) -> Result<(), SchedError>;
    /// Open a stream.
    ///
    /// # Errors
    /// Invalid spec, duplicate id, too many streams.
    fn handle_stream_open(
        &mut self,
        stream: StreamId,
        spec: StreamSpec,
        now: Instant,
    ) -> Result<(), SchedError>;
    /// Restrict the paths `stream` may use: `None` is any path (the state at
    /// open), `Some(v)` only the paths in `v` (an empty `v`: none, so the
    /// stream is unmappable and its messages stay queued). Paths not yet
    /// known are allowed in `v`; they count once they join.
    ///
    /// No later decision puts a message of `stream` on a path outside its
    /// set, whatever the precedence class. A scheduler that maps streams
    /// onto paths maps the stream over its set only, and re-maps
    /// ([`RemapReason::StreamsChanged`]) when the set changes, or raises an
    /// upcall with the best achievable over the set. Setting the same set
    /// again changes nothing.
    ///
    /// # Errors
    /// [`SchedError::UnknownStream`] if the stream is not open;
    /// [`SchedError::TooManyPaths`] above [`MAX_STREAM_PATHS`] distinct paths.
    fn handle_stream_paths(
        &mut self,
        stream: StreamId,
        paths: Option<Vec<PathId>>,
        now: Instant,
    ) -> Result<(), SchedError>;
    /// Close a stream; its queued messages are dropped.
    ///
    /// # Errors
    /// Unknown stream.
    fn handle_stream_close(&mut self, stream: StreamId, now: Instant) -> Result<(), SchedError>;
    /// Queue one message of `bytes` on `stream`.
    ///
    /// # Errors
    /// Unknown stream, backlog full.
    fn handle_enqueue(
        &mut self,
        stream: StreamId,
        bytes: u32,
        now: Instant,
    ) -> Result<(), SchedError>;
    /// `path` can take one packet now: which message? `None` if nothing
    /// should go on it.
    fn poll_dispatch_on(&mut self, path: PathId, now: Instant) -> Option<Dispatch>;
    /// As [`Scheduler::poll_dispatch_on`], but never a best-effort
    /// stream's message: what the path owes a guarantee
    /// ([`Class::Scheduled`] or [`Class::OtherPath`]), then the excess of
    /// a guarantee the paths could not carry whole (a spec lowered after
    /// an upcall; as [`Class::Unscheduled`]). What a driver asks
    /// when the path has no room left for best effort. Schedulers without
    /// guarantees have none (the default).
    fn poll_dispatch_scheduled_on(&mut self, path: PathId, now: Instant) -> Option<Dispatch> {
        let _ = (path, now);
        None
    }
    /// Pick the path and the message (push mode). `None` if nothing to send or
    /// every path with work is backing off.
    fn poll_dispatch(&mut self, now: Instant) -> Option<Dispatch>;
    /// The driver could not send `t` (its path is blocked): the message goes
    /// back to the head of its stream and the path backs off.
    fn handle_blocked(&mut self, t: Dispatch, now: Instant);
    /// Next event for the application.
    fn poll_event(&mut self) -> Option<SchedulerEvent> {
        None
    }
    /// When the scheduler next wants to be polled without new input.
    fn poll_timeout(&self) -> Option<Instant> {
        None
    }
    /// The time [`poll_timeout`](Self::poll_timeout) named (or a later one)
    /// has come: what waited for it is over, and `poll_timeout` names
    /// only what is still ahead. A driver calls it before dispatching.
    fn handle_timeout(&mut self, now: Instant) {
        let _ = now;
    }
    /// Messages queued on `stream` (0 if unknown).
    fn backlog(&self, stream: StreamId) -> usize;
}

#[cfg(test)]
#[path = "path_remove_tests.rs"]
mod path_remove_tests;
#[cfg(test)]
#[path = "path_restrict_tests.rs"]
mod path_restrict_tests;
