//! The source side of a session: stream queues, dispatch onto paths,
//! session acknowledgements, failover.
//!
//! Each open stream keeps, in send order, the messages the scheduler has
//! not dispatched yet (`queue`, the same FIFO as the scheduler's queue of
//! sizes) and, for reliable streams, every dispatched message the sink
//! application has not consumed (`unacked`, with the path it went on). A
//! stream enters the scheduler only once the sink has acknowledged its
//! STREAM_OPEN, so no data can reach a sink that does not know the stream.
//!
//! Dispatch pulls: a path whose connection has less than a congestion
//! window (plus [`DISPATCH_SLACK`]) queued asks the scheduler for the next
//! message, so the transport's own queue stays short and the scheduler
//! decides late. With [`SessionConfig::scheduled_first`](super::SessionConfig)
//! (an experiment, off by default), up to one window more may be queued for
//! what the scheduler owes the path, which the connection then sends ahead
//! of best effort. A message refused by the connection goes back to the head
//! of its stream ([`Scheduler::handle_blocked`]).
//!
//! Failover: when a path goes down it leaves the scheduler (which re-maps),
//! and its unacknowledged reliable messages go back to the head of their
//! streams, in order, to be sent on the remaining paths.

use super::config::Sched;
use super::dip::DipChange;
use super::error::{SendRefusal, SendRefused, SessionError};
use super::frame::{data_frame, Frame};
use super::snapshot::Outcomes;
use super::stream::{Delivery, StreamConfig};
use super::{CloseCode, CloseReason, Event, Session, StreamStats, CONTROL_STREAM};
use crate::id::{PathId, StreamId, MAX_STREAMS};
use crate::scheduler::{Class, Dispatch, SchedError, StreamSpec};
use crate::time::{Duration, Instant};
use crate::transport::{ConnectionHandle, SendOptions};
use crate::units::Bandwidth;
use std::collections::{BTreeMap, VecDeque};

/// Most window outcomes one STREAM_REPORT may feed to the promise factors
/// (a report covers one statistics interval: a few windows at most).
const MAX_OUTCOMES_PER_REPORT: u64 = 64;

/// Bytes a path's connection may hold beyond its congestion window before
/// the scheduler stops handing it messages: about one packet more, so the
/// transport never sits on data another path could carry now.
pub const DISPATCH_SLACK: u64 = 1500;

/// One message waiting for dispatch.
#[derive(Debug)]
pub(super) struct OutMsg {
    pub seq: u64,
    pub data: Vec<u8>,
    /// When the application sent it.
    pub sent_at: Instant,
}

/// A dispatched reliable message not yet consumed by the sink.
#[derive(Debug)]
struct Unacked {
    path: PathId,
    data: Vec<u8>,
    sent_at: Instant,
}

#[derive(Debug)]
pub(super) struct OutStream {
    pub config: StreamConfig,
    next_seq: u64,
    queue: VecDeque<OutMsg>,
    unacked: BTreeMap<u64, Unacked>,
    /// The sink's cumulative count.
    acked: u64,
    /// The sink acknowledged the STREAM_OPEN; the scheduler has the stream.
    accepted: bool,
    closing: bool,
    /// The path set last given to the scheduler.
    allowed: Option<Vec<PathId>>,
    /// Start of the first spec window (the first message's send time) of a
    /// window-constrained stream.
    window_origin: Option<Instant>,
    /// Messages dropped at dispatch because their spec window had ended.
    window_stale: u64,
    // Counters for the current stats interval and in all.
    interval_bytes: u64,
    interval_messages: u64,
    resent: u64,
}

impl OutStream {
    /// Whether `m` can no longer count for its spec window: the stream has
    /// a window constraint (x of y within t_w, or a violation bound on the
    /// misses of each t_w), is not reliable, and the window `m` was sent in
    /// has ended. Such a message could only arrive late; the session drops
    /// it at dispatch so the capacity goes to windows that can still be met.
    fn window_passed(&mut self, m: &OutMsg, now: Instant) -> bool {
        let tw = match self.config.spec {
            StreamSpec::Window { window, .. } | StreamSpec::ViolationBound { window, .. } => window,
            _ => return false,
        };
        if self.config.delivery.is_reliable() || tw.is_zero() {
            return false;
        }
        let origin = *self.window_origin.get_or_insert(m.sent_at);
        let k = m.sent_at.saturating_duration_since(origin).as_nanos() / tw.as_nanos();
        let end = origin + Duration::from_nanos(tw.as_nanos().saturating_mul(k + 1));
        now >= end
    }

    fn outstanding(&self) -> u64 {
        if self.config.delivery.is_reliable() {
            self.next_seq - self.acked
        } else {
            self.queue.len() as u64
        }
    }
}

impl Session {
    // ---- application API (source) ----------------------------------------

    /// Opens a stream with `config`; returns its id (from 1 up). Data may
    /// be sent at once; it flows once the sink has acknowledged the stream.
    ///
    /// # Errors
    /// Wrong role, an invalid config, no stream id left.
    pub fn open_stream(
        &mut self,
        now: Instant,
        config: StreamConfig,
    ) -> Result<StreamId, SessionError> {
        self.check_role(super::Role::Source, "open_stream")?;
        config.validate()?;
        // The last id is the probes' (`probe::PROBE_STREAM`).
        if self.next_stream >= MAX_STREAMS - 1 {
            return Err(SessionError::TooManyStreams(MAX_STREAMS - 2));
        }
        let id = StreamId(self.next_stream);
        if let Some(taken) = self.name_taken(id, &config) {
            return Err(SessionError::NameTaken(taken));
        }
        self.next_stream += 1;
        self.ledger
            .insert(id, super::snapshot::StreamLedger::new(config.clone()));
        self.out.insert(
            id,
            OutStream {
                config,
                next_seq: 0,
                queue: VecDeque::new(),
                unacked: BTreeMap::new(),
                acked: 0,
                accepted: false,
                closing: false,
                allowed: None,
                window_origin: None,
                window_stale: 0,
                interval_bytes: 0,
                interval_messages: 0,
                resent: 0,
            },
        );
        let ids: Vec<PathId> = self
            .paths
            .values()
            .filter(|p| p.is_up())
            .map(|p| p.id)
            .collect();
        for p in ids {
            self.send_control(now, p, &self.open_frame(id));
        }
        Ok(id)
    }

    fn open_frame(&self, id: StreamId) -> Vec<u8> {
        match self.out.get(&id) {
            Some(s) => Frame::StreamOpen {
                stream: id,
                config: s.config.clone(),
            }
            .to_vec(),
            None => Vec::new(),
        }
    }

    /// Sends one message on `stream`.
    ///
    /// # Errors
    /// [`SendRefused`], with the message handed back: the stream's window
    /// or the session's byte bound is full, the message is too large, or
    /// the stream is unknown or closing.
    pub fn send(
        &mut self,
        now: Instant,
        stream: StreamId,
        data: Vec<u8>,
    ) -> Result<(), SendRefused> {
        let refuse = |error: SendRefusal, data: Vec<u8>| Err(SendRefused { error, data });
        if let Err(e) = self.check_role(super::Role::Source, "send") {
            return refuse(e.into(), data);
        }
        if data.len() > self.config.max_message {
            let (size, max) = (data.len(), self.config.max_message);
            return refuse(SendRefusal::TooLarge { size, max }, data);
        }
        let held = self.held;
        let bound = self.config.max_bytes;
        let Some(s) = self.out.get_mut(&stream) else {
            let e = match self.ledger.get(&stream).and_then(|l| l.refused.clone()) {
                Some(reason) => SessionError::StreamRefused { stream, reason },
                None => SessionError::UnknownStream(stream),
            };
            return refuse(e.into(), data);
        };
        if s.closing {
            return refuse(SessionError::StreamClosing(stream).into(), data);
        }
        if s.outstanding() >= u64::from(s.config.window) {
            let window = s.config.window;
            return refuse(SendRefusal::WindowFull { stream, window }, data);
        }
        if held + data.len() as u64 > bound {
            return refuse(SendRefusal::SessionFull { held, bound }, data);
        }
        let data = self.stage.process(stream, data);
        let bytes = data.len() as u32;
        // Re-borrow after the stage (it may be stateful).
        let Some(s) = self.out.get_mut(&stream) else {
            return refuse(SessionError::UnknownStream(stream).into(), data);
        };
        if s.accepted {
            if let Err(e) = self.sched.get().handle_enqueue(stream, bytes, now) {
                return refuse(SessionError::Scheduler(e).into(), data);
            }
        }
        let seq = s.next_seq;
        s.next_seq += 1;
        self.held += data.len() as u64;
        self.stats.messages += 1;
        self.stats.bytes += data.len() as u64;
        if let Some(l) = self.ledger.get_mut(&stream) {
            l.count(data.len());
        }
        s.queue.push_back(OutMsg {
            seq,
            data,
            sent_at: now,
        });
        self.dispatch(now);
        Ok(())
    }

    /// Closes `stream` once what was sent is through; queued messages still go.
    ///
    /// # Errors
    /// Wrong role or unknown stream.
    pub fn close_stream(&mut self, now: Instant, stream: StreamId) -> Result<(), SessionError> {
        self.check_role(super::Role::Source, "close_stream")?;
        let s = self
            .out
            .get_mut(&stream)
            .ok_or(SessionError::UnknownStream(stream))?;
        s.closing = true;
        self.maybe_finish_stream(now, stream);
        Ok(())
    }

    /// Messages of `stream` queued or unacknowledged at the source.
    pub fn outstanding(&self, stream: StreamId) -> u64 {
        self.out.get(&stream).map_or(0, OutStream::outstanding)
    }

    /// Source: `stream` was opened, closed by the application, every
    /// message of it is through (reliable: consumed by the sink), and the
    /// sink kept it (its STREAM_VERDICT).
    pub fn is_stream_finished(&self, stream: StreamId) -> bool {
        !self.out.contains_key(&stream)
            && self
                .ledger
                .get(&stream)
                .is_some_and(|l| l.finished && l.refused.is_none())
    }

    /// Why the sink refused `stream`, if it did.
    pub fn stream_refused(&self, stream: StreamId) -> Option<&str> {
        self.ledger.get(&stream)?.refused.as_deref()
    }

    /// True when every stream the source opened has been closed,
    /// acknowledged and given its verdict by the sink.
    pub fn is_idle(&self) -> bool {
        self.out.is_empty() && !self.ledger.values().any(|l| l.awaiting_verdict)
    }

    /// Source under PGOS: the spec `stream` runs under now — the one it
    /// was opened with, or a lowered one after an upcall.
    pub fn spec_in_force(&self, stream: StreamId) -> Option<StreamSpec> {
        match &self.sched {
            Sched::Pgos(p) => p.spec_of(stream),
            Sched::Other(_) => self.out.get(&stream).map(|s| s.config.spec),
        }
    }

    /// Source under PGOS: what the mapping of violation-bound `stream`
    /// predicts on the paths' current, calibrated views — Lemma 2's
    /// E\[Z\] per window (`None` for other specs and while unmapped).
    pub fn expected_misses(&self, stream: StreamId) -> Option<f64> {
        match &self.sched {
            Sched::Pgos(p) => p.expected_misses(stream),
            Sched::Other(_) => None,
        }
    }

    // ---- frames from the sink ---------------------------------------------

    pub(super) fn source_frame(&mut self, now: Instant, f: Frame<'_>) -> Result<(), CloseReason> {
        match f {
            Frame::Ack { stream, consumed } => self.handle_ack(now, stream, consumed),
            Frame::StreamVerdict {
                stream,
                kept,
                reason,
            } => self.handle_verdict(now, stream, kept, reason),
            Frame::StreamReport {
                stream,
                windows_met_ppm,
                rate,
                lost,
                windows_judged,
                windows_missed,
                messages_missed,
            } => {
                if let Some(l) = self.ledger.get_mut(&stream) {
                    l.reported = Some((f64::from(windows_met_ppm) / 1e6, rate, lost));
                }
                self.calibrate(
                    stream,
                    Outcomes {
                        judged: windows_judged,
                        missed: windows_missed,
                        misses: messages_missed,
                    },
                );
                Ok(())
            }
            other => Err(violation(format!(
                "a sink sent a frame only a source may send: {other:?}"
            ))),
        }
    }

    /// Feeds the windows the sink judged since its last report to the
    /// promise factor of every path the stream is mapped on (see
    /// [`crate::estimate::PromiseScale`]). Counts are cumulative, so a
    /// lost report loses nothing; counts that go back are ignored, and at
    /// most [`MAX_OUTCOMES_PER_REPORT`] windows are taken from one report.
    fn calibrate(&mut self, stream: StreamId, now: Outcomes) {
        let Some(l) = self.ledger.get_mut(&stream) else {
            return;
        };
        let was = l.judged;
        if now.judged < was.judged
            || now.missed < was.missed
            || now.misses < was.misses
            || now.missed - was.missed > now.judged - was.judged
        {
            return;
        }
        l.judged = now;
        let judged = now.judged - was.judged;
        if judged == 0 || l.promises.is_empty() {
            return;
        }
        let spec = l.config.spec;
        let paths: Vec<PathId> = l.promises.iter().map(|p| p.path).collect();
        // The outcome is the stream's, so the target is the stream's
        // 1 − P (not its parts' higher probabilities).
        let Some(prob) = spec.probability() else {
            // A violation bound: the promise is the E[Z] its mapping
            // gives on today's views, whatever bound it runs under.
            let (StreamSpec::ViolationBound { x, .. }, Sched::Pgos(p)) = (spec, &self.sched) else {
                return;
            };
            let Some(predicted) = p.expected_misses(stream) else {
                return;
            };
            let windows = judged.min(MAX_OUTCOMES_PER_REPORT);
            let z = (now.misses - was.misses) as f64 / judged as f64;
            for id in &paths {
                if let Some(p) = self.paths.get_mut(id) {
                    for _ in 0..windows {
                        p.handle_misses(z, predicted, f64::from(x));
                    }
                }
            }
            return;
        };
        // The sink judges the spec the stream was opened with: its
        // outcomes speak for the paths' promises only while those carry
        // all of it (not while it is unmapped, or mapped at a lowered
        // spec after an upcall).
        let promised: u64 = l.promises.iter().map(|p| p.rate.bps()).sum();
        let asked = spec.required_rate().map_or(u64::MAX, |r| r.bps());
        if u128::from(promised) * 100 < u128::from(asked) * 99 {
            return;
        }
        let new_missed = (now.missed - was.missed).min(MAX_OUTCOMES_PER_REPORT);
        let new_kept =
            (judged - (now.missed - was.missed)).min(MAX_OUTCOMES_PER_REPORT - new_missed);
        for id in &paths {
            let Some(p) = self.paths.get_mut(id) else {
                continue;
            };
            // Kept first: a report with both ends on the cautious side.
            for _ in 0..new_kept {
                p.handle_outcome(prob, false);
            }
            for _ in 0..new_missed {
                p.handle_outcome(prob, true);
            }
        }
    }

    fn handle_ack(
        &mut self,
        now: Instant,
        stream: StreamId,
        consumed: u64,
    ) -> Result<(), CloseReason> {
        let Some(s) = self.out.get_mut(&stream) else {
            // A late ACK of a stream that has finished.
            return Ok(());
        };
        if consumed > s.next_seq {
            return Err(violation(format!(
                "ACK of {consumed} messages on {stream}, only {} sent",
                s.next_seq
            )));
        }
        if !s.accepted {
            s.accepted = true;
            let sizes: Vec<u32> = s.queue.iter().map(|m| m.data.len() as u32).collect();
            let spec = s.config.spec;
            let sched = self.sched.get();
            if let Err(e) = sched.handle_stream_open(stream, spec, now) {
                return Err(CloseReason::Local {
                    code: CloseCode::Application,
                    reason: format!("scheduler refused {stream}: {e}"),
                });
            }
            for b in sizes {
                // The session's window bounds the queue below the
                // scheduler's backlog bound, so this is not refused.
                let _ = sched.handle_enqueue(stream, b, now);
            }
            self.push_event(Event::StreamOpened { stream });
            self.refresh_stream_paths(now, stream);
        }
        if let Some(s) = self.out.get_mut(&stream) {
            if s.config.delivery.is_reliable() && consumed > s.acked {
                let rest = s.unacked.split_off(&consumed);
                let done = std::mem::replace(&mut s.unacked, rest);
                let freed: u64 = done.values().map(|u| u.data.len() as u64).sum();
                s.acked = consumed;
                self.held = self.held.saturating_sub(freed);
            } else {
                s.acked = s.acked.max(consumed);
            }
        }
        self.maybe_finish_stream(now, stream);
        Ok(())
    }

    /// A closing stream whose every message is through is closed: the
    /// scheduler forgets it, the sink is told how many were sent.
    fn maybe_finish_stream(&mut self, now: Instant, stream: StreamId) {
        let Some(s) = self.out.get(&stream) else {
            return;
        };
        let through = s.queue.is_empty() && s.unacked.is_empty();
        if !(s.closing && through) {
            return;
        }
        let sent = s.next_seq;
        let reliable = s.config.delivery.is_reliable();
        if reliable && s.acked < sent {
            // Wait for the sink to consume the rest.
            return;
        }
        if s.accepted {
            let _ = self.sched.get().handle_stream_close(stream, now);
        }
        self.out.remove(&stream);
        if let Some(l) = self.ledger.get_mut(&stream) {
            // Finished once the sink's verdict says it kept the stream.
            l.awaiting_verdict = true;
            l.promises.clear();
            l.unmet = None;
        }
        self.refresh_promised();
        // On every connection, not only the paths up now: one that looks
        // down may be slow, not dead; and every path that comes up later
        // is told again (`announce_streams`), so the close is not lost
        // with a path.
        self.ended_out.insert(stream, sent);
        let frame = Frame::StreamClose { stream, sent }.to_vec();
        let ids: Vec<PathId> = self
            .paths
            .values()
            .filter(|p| p.conn.is_some())
            .map(|p| p.id)
            .collect();
        for p in ids {
            self.send_control(now, p, &frame);
        }
    }

    /// The sink's STREAM_VERDICT on `stream`: kept (the stream is finished
    /// now), or refused (it ends at once, with what is left of it dropped).
    fn handle_verdict(
        &mut self,
        now: Instant,
        stream: StreamId,
        kept: bool,
        reason: &[u8],
    ) -> Result<(), CloseReason> {
        let Some(l) = self.ledger.get_mut(&stream) else {
            return Err(violation(format!(
                "a verdict on {stream}, which was never opened"
            )));
        };
        if l.finished {
            // Told again on another path.
            return Ok(());
        }
        if kept {
            if !l.awaiting_verdict {
                return Err(violation(format!("{stream} kept before it ended")));
            }
            l.awaiting_verdict = false;
            l.finished = true;
            l.complete = true;
            self.push_event(Event::StreamClosed { stream });
            return Ok(());
        }
        let reason = String::from_utf8_lossy(reason).into_owned();
        tracing::debug!(stream = stream.0, %reason, "session: the sink refused a stream");
        l.refused = Some(reason.clone());
        l.awaiting_verdict = false;
        l.finished = true;
        l.promises.clear();
        l.unmet = None;
        if let Some(s) = self.out.remove(&stream) {
            let queued: u64 = s.queue.iter().map(|m| m.data.len() as u64).sum();
            let unacked: u64 = s.unacked.values().map(|u| u.data.len() as u64).sum();
            self.held = self.held.saturating_sub(queued + unacked);
            if s.accepted {
                let _ = self.sched.get().handle_stream_close(stream, now);
            }
            self.refresh_promised();
        }
        self.push_event(Event::StreamRefused { stream, reason });
        Ok(())
    }

    /// The name `config` would take as stream `id` if another stream of
    /// the session has it already (see [`super::stream::stream_name`]).
    pub(super) fn name_taken(&self, id: StreamId, config: &StreamConfig) -> Option<String> {
        let name = super::stream::stream_name(id, config);
        let reserved = super::stream::reserved_id(&name).is_some_and(|k| k != id.0);
        let clash = self
            .ledger
            .iter()
            .any(|(&other, l)| other != id && super::stream::stream_name(other, &l.config) == name);
        (reserved || clash).then_some(name)
    }

    // ---- paths and the scheduler -------------------------------------------

    /// A path just became usable: tell the sink about every open stream,
    /// and again about every ended one (both frames are idempotent).
    pub(super) fn announce_streams(&mut self, now: Instant, path: PathId) {
        let mut frames: Vec<Vec<u8>> = self.out.keys().map(|&id| self.open_frame(id)).collect();
        frames.extend(
            self.ended_out
                .iter()
                .map(|(&stream, &sent)| Frame::StreamClose { stream, sent }.to_vec()),
        );
        for f in frames {
            self.send_control(now, path, &f);
        }
    }

    /// Sends a control frame on `path`'s connection (reliable).
    pub(super) fn send_control(&mut self, now: Instant, path: PathId, frame: &[u8]) {
        let Some(h) = self.paths.get(&path).and_then(|p| p.conn) else {
            return;
        };
        if let Some(c) = self.endpoint.connection_mut(h) {
            let _ = c.send(now, CONTROL_STREAM, frame.to_vec(), super::CONTROL);
        }
    }

    /// Keeps the scheduler's paths in step with the up paths and their
    /// estimates, and each stream's allowed set with its bounds.
    pub(super) fn refresh_scheduler_paths(&mut self, now: Instant) {
        let mut changed = false;
        let only = self.paths.len() == 1;
        for p in self.paths.values_mut() {
            let sched = self.sched.get();
            // A session's only path stays schedulable while silent, if
            // still established: there is nowhere else to send, and its
            // connection holds what it is given until it answers.
            if p.is_up() || (only && p.established) {
                let version = p.view_version();
                if !p.in_scheduler || p.pushed_version != version {
                    sched.handle_path_update(p.id, p.view(), now);
                    p.in_scheduler = true;
                    p.pushed_version = version;
                    changed = true;
                }
            } else if p.in_scheduler {
                let _ = sched.handle_path_remove(p.id, now);
                p.in_scheduler = false;
                changed = true;
            }
        }
        if changed {
            let ids: Vec<StreamId> = self.out.keys().copied().collect();
            for s in ids {
                self.refresh_stream_paths(now, s);
            }
        }
    }

    /// The paths `stream` may use now: its pinned set, narrowed to the
    /// paths whose measured RTT and loss at the stream's probabilities meet
    /// its bounds (a path without samples yet is given the benefit of the
    /// doubt). Given to the scheduler when it changes.
    pub(super) fn refresh_stream_paths(&mut self, now: Instant, stream: StreamId) {
        let Some(s) = self.out.get(&stream) else {
            return;
        };
        if !s.accepted {
            return;
        }
        let c = &s.config;
        // A path in a capacity dip carries no guarantee while another
        // path is up and not dipped (see `super::dip`).
        let avoid_dips = c.spec.is_guaranteed()
            && self.paths.values().any(|p| p.dip_factor < 1.0)
            && self
                .paths
                .values()
                .any(|p| p.is_up() && p.dip_factor >= 1.0);
        let constrained = c.pinned.is_some()
            || c.rtt.is_some()
            || c.loss.is_some()
            || c.delay.is_some()
            || avoid_dips;
        let allowed = constrained.then(|| {
            self.paths
                .values()
                .filter(|p| c.pinned.as_ref().is_none_or(|v| v.contains(&p.id)))
                .filter(|p| !avoid_dips || p.dip_factor >= 1.0)
                .filter(|p| {
                    c.rtt
                        .is_none_or(|b| p.rtt_quantile(b.probability).is_none_or(|r| r <= b.max))
                })
                .filter(|p| {
                    c.loss
                        .is_none_or(|b| p.loss_quantile(b.probability).is_none_or(|l| l <= b.max))
                })
                .filter(|p| {
                    c.delay.is_none_or(|b| {
                        // What waits in the path's connection at the source
                        // is part of a message's delay too.
                        let queued = p
                            .conn
                            .and_then(|h| self.endpoint.connection(h))
                            .map_or(0, |c| c.queued_bytes());
                        p.delay_quantile(b.probability)
                            .is_none_or(|d| d + p.drain_time(queued) <= b.max)
                    })
                })
                .map(|p| p.id)
                .collect::<Vec<PathId>>()
        });
        if allowed != s.allowed {
            let _ = self
                .sched
                .get()
                .handle_stream_paths(stream, allowed.clone(), now);
            if let Some(s) = self.out.get_mut(&stream) {
                s.allowed = allowed;
            }
        }
    }

    /// Moves the unacknowledged reliable messages of `path` back to the
    /// head of their streams; returns how many. With no other path up
    /// they stay where they are: the path's connection keeps re-sending
    /// them, and sending them again on the same path when it answers would
    /// only add a second copy to its queue.
    pub(super) fn failover(&mut self, now: Instant, path: PathId) -> u64 {
        if self.paths.len() == 1 {
            // The only path: it stays with the scheduler (see
            // `refresh_scheduler_paths`), and its messages with it.
            return 0;
        }
        if let Some(p) = self.paths.get_mut(&path) {
            if p.in_scheduler {
                let _ = self.sched.get().handle_path_remove(path, now);
                p.in_scheduler = false;
            }
        }
        if !self.paths.values().any(|p| p.id != path && p.is_up()) {
            return 0;
        }
        let moved = self.move_unacked(now, path, false);
        let ids: Vec<StreamId> = self.out.keys().copied().collect();
        for s in ids {
            self.refresh_stream_paths(now, s);
        }
        moved
    }

    fn refresh_all_stream_paths(&mut self, now: Instant) {
        let ids: Vec<StreamId> = self.out.keys().copied().collect();
        for s in ids {
            self.refresh_stream_paths(now, s);
        }
    }

    /// Moves the unacknowledged reliable messages sent on `path` (of
    /// guaranteed streams only, if `guaranteed_only`) back to the head of
    /// their streams; returns how many. Should `path` deliver its copies
    /// after all, the sink drops them as duplicates.
    fn move_unacked(&mut self, now: Instant, path: PathId, guaranteed_only: bool) -> u64 {
        let mut moved = 0;
        let sched = self.sched.get();
        for (&id, s) in self.out.iter_mut() {
            if guaranteed_only && !s.config.spec.is_guaranteed() {
                continue;
            }
            let seqs: Vec<u64> = s
                .unacked
                .iter()
                .filter(|(_, u)| u.path == path)
                .map(|(&q, _)| q)
                .collect();
            // Back to the head in reverse so the lowest goes out first.
            for q in seqs.into_iter().rev() {
                let Some(u) = s.unacked.remove(&q) else {
                    continue;
                };
                let bytes = u.data.len() as u32;
                s.queue.push_front(OutMsg {
                    seq: q,
                    data: u.data,
                    sent_at: u.sent_at,
                });
                // The path is gone from the scheduler; handing back a
                // dispatch for it returns the message to its queue.
                sched.handle_blocked(
                    Dispatch {
                        path,
                        stream: id,
                        bytes,
                        class: Class::Scheduled,
                    },
                    now,
                );
                s.resent += 1;
                moved += 1;
            }
        }
        self.stats.resent += moved;
        moved
    }

    /// A capacity dip began or ended on `path` (see [`super::dip`]).
    pub(super) fn handle_dip(&mut self, now: Instant, path: PathId, change: DipChange) {
        let others_up = self.paths.values().any(|p| p.id != path && p.is_up());
        let Some(p) = self.paths.get_mut(&path) else {
            return;
        };
        match change {
            DipChange::Began(d) => {
                tracing::debug!(path = path.0, delivered = %d.delivered, promised = %d.promised, "session: capacity dip");
                self.push_event(Event::PathDip {
                    path,
                    delivered: d.delivered,
                    promised: d.promised,
                    detected_after: d.detected.saturating_duration_since(d.since),
                });
                let Some(p) = self.paths.get_mut(&path) else {
                    return;
                };
                if !others_up || !p.in_scheduler {
                    // Nowhere to move to: reported only.
                    return;
                }
                // The view's mean becomes what the path delivers now.
                let mean = p.estimate.window().mean().unwrap_or(0.0);
                if mean > 0.0 {
                    p.set_dip_factor(d.delivered.bps() as f64 / (mean * p.promise_scale()));
                }
                let (view, version) = (p.view(), p.view_version());
                p.pushed_version = version;
                if let Sched::Pgos(s) = &mut self.sched {
                    s.handle_path_dip(path, view, now);
                }
                // What the guarantees already sent waits behind the dip:
                // send it again on the paths they moved to, and keep them
                // off the dipped path until it recovers.
                self.move_unacked(now, path, true);
                self.refresh_all_stream_paths(now);
            }
            DipChange::Ended => {
                p.set_dip_factor(1.0);
                self.push_event(Event::PathRecovered { path });
                self.refresh_all_stream_paths(now);
            }
        }
    }

    // ---- dispatch -------------------------------------------------------

    /// Fills every up path's connection up to its congestion window.
    pub(super) fn dispatch(&mut self, now: Instant) {
        if self.closed.is_some() {
            return;
        }
        let mut ids = std::mem::take(&mut self.scratch_paths);
        ids.clear();
        let only = self.paths.len() == 1;
        ids.extend(
            self.paths
                .values()
                .filter(|p| p.in_scheduler && (p.is_up() || (only && p.established)))
                .map(|p| p.id),
        );
        for &path in &ids {
            self.fill_path(now, path);
        }
        self.scratch_paths = ids;
    }

    fn fill_path(&mut self, now: Instant, path: PathId) {
        let Some(h) = self.paths.get(&path).and_then(|p| p.conn) else {
            return;
        };
        let unmapped = self.config.bulk_yield.is_some() && self.guarantee_unmapped();
        loop {
            let Some(c) = self.endpoint.connection(h) else {
                return;
            };
            let limit = c.window() + DISPATCH_SLACK;
            let queued = c.queued_bytes();
            // A connection holding a window of best effort makes the
            // guarantees wait a round trip behind it; with `scheduled_first`
            // what the scheduler owes the path goes in up to one window more
            // (and out first, transport priority 1), best effort waits.
            let allowance = if self.config.scheduled_first { 2 } else { 1 };
            if queued >= limit.saturating_mul(allowance) {
                return;
            }
            let full = queued >= limit;
            // Room for unscheduled traffic: not while it would hold the
            // queue the path's guarantees wait in above the target, nor
            // beyond the spare estimate (if capped).
            let yields = self.bulk_yields(now, path, h, queued, unmapped);
            let cap = self.config.cap_unscheduled;
            let spare = !full
                && !yields
                && cap.is_none_or(|q| {
                    self.paths.get_mut(&path).is_some_and(|p| {
                        p.spare_for(now, crate::session::probe::PROBE_MESSAGE as u64, q)
                    })
                });
            let d = if spare {
                self.sched.get().poll_dispatch_on(path, now)
            } else {
                self.sched.get().poll_dispatch_scheduled_on(path, now)
            };
            let Some(d) = d else {
                if spare {
                    self.probe_path(now, path);
                }
                return;
            };
            if cap.is_some() && d.class == crate::scheduler::Class::Unscheduled {
                if let Some(p) = self.paths.get_mut(&path) {
                    p.spend_spare(u64::from(d.bytes));
                }
            }
            if !self.send_dispatch(now, d) {
                return;
            }
        }
    }

    /// Whether unscheduled traffic waits on `path` now: it guards a promise
    /// (or an unmapped guarantee) and its connection (`h`, `queued` bytes)
    /// holds the delay window of `SessionConfig::bulk_yield` already. Tells
    /// the connection whether it is holding data back, so that the
    /// interval's sample still measures the path. A path that guards
    /// nothing leaves its window where it was: an update covers at most
    /// one round trip, so it resumes from there when guarantees come.
    fn bulk_yields(
        &mut self,
        now: Instant,
        path: PathId,
        h: ConnectionHandle,
        queued: u64,
        unmapped: bool,
    ) -> bool {
        let (Some(target), Some(c)) = (self.config.bulk_yield, self.endpoint.connection(h)) else {
            return false;
        };
        let (srtt, min_rtt, cwnd) = (c.rtt().srtt(), c.rtt().min(), c.window());
        let yields = self.paths.get_mut(&path).is_some_and(|p| {
            (p.promised_bps > 0 || unmapped)
                && queued >= p.bulk.update(now, srtt, min_rtt, cwnd, target)
        });
        let holding = yields && self.out.values().any(|s| !s.queue.is_empty());
        if let Some(c) = self.endpoint.connection_mut(h) {
            c.set_holding(holding);
        }
        yields
    }

    /// Whether PGOS has an open guaranteed stream that it has not mapped
    /// (yet, or at all): until it has, every path may be the one that
    /// carries it, so best effort yields on all of them.
    fn guarantee_unmapped(&self) -> bool {
        matches!(self.sched, super::config::Sched::Pgos(_))
            && self.ledger.values().any(|l| {
                !l.finished
                    && l.promises.is_empty()
                    && !matches!(l.config.spec, StreamSpec::BestEffort { .. })
            })
    }

    /// Sends the message `d` names. Returns false if the path could not
    /// take it (it went back to its stream).
    fn send_dispatch(&mut self, now: Instant, d: Dispatch) -> bool {
        let Some(s) = self.out.get_mut(&d.stream) else {
            return true;
        };
        let Some(m) = s.queue.pop_front() else {
            // The scheduler and the queue disagree; nothing to send.
            return true;
        };
        if s.window_passed(&m, now) {
            s.window_stale += 1;
            self.held = self.held.saturating_sub(m.data.len() as u64);
            self.stats.expired += 1;
            self.maybe_finish_stream(now, d.stream);
            return true;
        }
        let delivery = s.config.delivery;
        // With `scheduled_first`, what the scheduler promised goes ahead of
        // best effort inside the connection too: a stream dispatched as
        // scheduled traffic gets the higher transport priority (MSFQ and
        // min-RTT dispatch everything unscheduled: no change).
        let priority = u8::from(
            self.config.scheduled_first && d.class != crate::scheduler::Class::Unscheduled,
        );
        let opts = match delivery {
            Delivery::Reliable => SendOptions::RELIABLE,
            Delivery::Unreliable => SendOptions::UNRELIABLE,
            Delivery::Deadline { ttl } => {
                let deadline = m.sent_at + ttl;
                if now >= deadline {
                    self.held = self.held.saturating_sub(m.data.len() as u64);
                    self.stats.expired += 1;
                    self.maybe_finish_stream(now, d.stream);
                    return true;
                }
                SendOptions {
                    ttl: Some(deadline.saturating_duration_since(now)),
                    ..SendOptions::UNRELIABLE
                }
            }
        };
        let opts = SendOptions { priority, ..opts };
        let sent_us = m.sent_at.since_origin().as_micros();
        let frame = data_frame(d.stream, m.seq, sent_us, &m.data);
        let copy = (s.config.copies > 1).then(|| frame.clone());
        let Some(h) = self.paths.get(&d.path).and_then(|p| p.conn) else {
            return false;
        };
        let Some(c) = self.endpoint.connection_mut(h) else {
            return false;
        };
        if let Err(r) = c.send(now, d.stream, frame, opts) {
            tracing::trace!(path = d.path.0, error = %r, "session: connection refused a message");
            if let Some(s) = self.out.get_mut(&d.stream) {
                s.queue.push_front(m);
            }
            self.sched.get().handle_blocked(d, now);
            return false;
        }
        if let Some(frame) = copy {
            self.send_copy(now, d.stream, d.path, frame, opts);
        }
        let Some(s) = self.out.get_mut(&d.stream) else {
            return true;
        };
        s.interval_bytes += m.data.len() as u64;
        s.interval_messages += 1;
        if delivery.is_reliable() {
            s.unacked.insert(
                m.seq,
                Unacked {
                    path: d.path,
                    data: m.data,
                    sent_at: m.sent_at,
                },
            );
        } else {
            self.held = self.held.saturating_sub(m.data.len() as u64);
            self.maybe_finish_stream(now, d.stream);
        }
        true
    }

    /// The redundant copy of a `copies = 2` stream: on the best other up
    /// path the stream may use (highest estimated mean).
    fn send_copy(
        &mut self,
        now: Instant,
        stream: StreamId,
        first: PathId,
        frame: Vec<u8>,
        opts: SendOptions,
    ) {
        let allowed = self.out.get(&stream).and_then(|s| s.allowed.clone());
        let best = self
            .paths
            .values()
            .filter(|p| p.id != first && p.is_up())
            .filter(|p| allowed.as_ref().is_none_or(|v| v.contains(&p.id)))
            .max_by_key(|p| p.estimate.window().mean().map_or(0, |m| m as u64))
            .and_then(|p| p.conn);
        let Some(h) = best else { return };
        if let Some(c) = self.endpoint.connection_mut(h) {
            if c.send(now, stream, frame, opts).is_ok() {
                self.stats.copies += 1;
            }
        }
    }

    /// Source statistics of one interval, per stream.
    pub(super) fn source_stats(&mut self) -> Vec<(StreamId, StreamStats)> {
        let interval = self.config.stats_interval;
        self.out
            .iter_mut()
            .map(|(&id, s)| {
                let st = StreamStats {
                    interval,
                    rate: rate_of(s.interval_bytes, interval),
                    messages: s.interval_messages,
                    windows_met: 1.0,
                    lost: s.window_stale,
                    resent: s.resent,
                    ..StreamStats::default()
                };
                s.interval_bytes = 0;
                s.interval_messages = 0;
                (id, st)
            })
            .collect()
    }
}

pub(super) fn rate_of(bytes: u64, interval: crate::time::Duration) -> Bandwidth {
    let ns = interval.as_nanos().max(1);
    Bandwidth::from_bps((u128::from(bytes) * 8 * 1_000_000_000 / u128::from(ns)) as u64)
}

pub(super) fn violation(reason: String) -> CloseReason {
    CloseReason::Local {
        code: CloseCode::ProtocolViolation,
        reason,
    }
}

impl From<SchedError> for SendRefusal {
    fn from(e: SchedError) -> Self {
        SendRefusal::Session(SessionError::Scheduler(e))
    }
}
