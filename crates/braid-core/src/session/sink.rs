//! The sink side of a session: paths greeted in, per-stream reassembly
//! across paths, duplicates and deadlines, acknowledgements, statistics.
//!
//! Reliable streams release messages in sequence order into the
//! application's queue; a message beyond the stream's window (counted from
//! what the application has consumed) breaks the protocol and closes the
//! session, so reassembly never holds more than `window` messages. All
//! streams together hold at most [`SessionConfig::max_bytes`](super::SessionConfig)
//! (reordering and unread): a reliable message beyond it closes the session
//! (an honest source with the same bound never sends it, since the sink's
//! unread messages are the source's unacknowledged ones), an unreliable one
//! is dropped.
//! Unreliable and deadline streams release each message on arrival, at most
//! once (a window of seen sequence numbers drops duplicates and stragglers
//! older than the window), and a deadline message whose deadline has passed
//! is dropped on arrival or when the application asks for it — never handed
//! over late. The sink's ACK carries, per stream, how many messages the
//! application consumed (reliable) or the highest seen plus one (others).
//!
//! Delay and deadlines compare the source's `sent_us` with the sink's
//! clock: exact when both clocks share an origin (braid-sim); the runtime
//! aligns them when it greets a path.

use super::error::CloseReason;
use super::frame::{Frame, SessionId};
use super::meter::RollingMeter;
use super::quota::{Quota, Usage, Who};
use super::source::{rate_of, violation};
use super::stream::{Delivery, StreamConfig};
use super::{Event, Session, SessionError, StreamStats, CONTROL_STREAM, MAX_PATHS};
use crate::id::{PathId, StreamId};
use crate::time::{Duration, Instant};
use crate::transport::{ConnectionHandle, SendOptions};
use std::collections::{BTreeMap, BTreeSet};

/// Interval at which a sink repeats its acknowledgements (they travel
/// unreliably, so a lost one is replaced).
pub const ACK_REPEAT: Duration = Duration::from_millis(100);
/// Most delay samples kept per stream per statistics interval.
pub const MAX_DELAY_SAMPLES: usize = 4096;

/// A message handed to the sink application.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivered {
    /// Its stream.
    pub stream: StreamId,
    /// Its number in the stream.
    pub seq: u64,
    /// Its bytes.
    pub data: Vec<u8>,
    /// When the source application sent it (source clock).
    pub sent_at: Instant,
    /// When it arrived here.
    pub arrived_at: Instant,
    /// The path it came over.
    pub path: PathId,
}

#[derive(Debug)]
pub(super) struct InStream {
    config: StreamConfig,
    /// Reliable: next sequence to release; others: highest seen + 1.
    next: u64,
    /// Reliable: messages the application has taken.
    consumed: u64,
    reorder: BTreeMap<u64, Delivered>,
    /// Others: sequence numbers seen at or above `next − window`.
    seen: BTreeSet<u64>,
    /// Messages of this stream waiting in the application queue.
    in_ready: u64,
    /// The source's final count, once STREAM_CLOSE arrived.
    sent: Option<u64>,
    ack_sent: Option<u64>,
    // Statistics.
    received: u64,
    lost: u64,
    duplicates: u64,
    interval_bytes: u64,
    interval_messages: u64,
    delays_us: Vec<u64>,
    /// The spec's windows, judged by braid's one definition
    /// ([`super::meter`]); none for best effort.
    meter: Option<RollingMeter>,
    /// Not reliable: the highest sequence number counted as offered (a
    /// jump past it offers the gap: messages lost on the way).
    offered_to: Option<u64>,
}

impl InStream {
    fn new(config: StreamConfig) -> Self {
        InStream {
            meter: RollingMeter::for_spec(&config.spec, config.delivery),
            offered_to: None,
            config,
            next: 0,
            consumed: 0,
            reorder: BTreeMap::new(),
            seen: BTreeSet::new(),
            in_ready: 0,
            sent: None,
            ack_sent: None,
            received: 0,
            lost: 0,
            duplicates: 0,
            interval_bytes: 0,
            interval_messages: 0,
            delays_us: Vec::new(),
        }
    }

    /// The cumulative count the ACK carries.
    fn ack_value(&self) -> u64 {
        if self.config.delivery.is_reliable() {
            self.consumed
        } else {
            self.next
        }
    }

    /// Counts a message that arrived (not a duplicate) as offered; on a
    /// stream that is not reliable, a jump in sequence numbers offers the
    /// messages skipped too (lost on the way), at this one's time and size.
    fn count_offer(&mut self, m: &Delivered) {
        let Some(meter) = self.meter.as_mut() else {
            return;
        };
        let len = m.data.len() as u64;
        if self.config.delivery.is_reliable() {
            meter.offer(m.sent_at, len);
            return;
        }
        match self.offered_to {
            Some(top) if m.seq <= top => return, // a gap, offered already
            Some(top) => meter.offer_gap(m.sent_at, m.seq - top - 1, len),
            None => meter.offer_gap(m.sent_at, m.seq, len),
        }
        meter.offer(m.sent_at, len);
        self.offered_to = Some(m.seq);
    }

    fn count_arrival(&mut self, now: Instant, m: &Delivered) {
        self.count_offer(m);
        self.interval_bytes += m.data.len() as u64;
        self.interval_messages += 1;
        self.received += 1;
        if self.delays_us.len() < MAX_DELAY_SAMPLES {
            self.delays_us
                .push(now.saturating_duration_since(m.sent_at).as_micros());
        }
    }

    fn finished(&self) -> bool {
        match self.sent {
            Some(n) if self.config.delivery.is_reliable() => self.next >= n,
            Some(_) => true,
            None => false,
        }
    }
}

impl Session {
    /// Sink: the next message for the application, if any. Deadline
    /// messages whose deadline has passed are dropped, never returned.
    pub fn recv(&mut self, now: Instant) -> Option<Delivered> {
        while let Some(m) = self.ready.pop_front() {
            self.held = self.held.saturating_sub(m.data.len() as u64);
            let Some(s) = self.inc.get_mut(&m.stream) else {
                continue;
            };
            s.in_ready = s.in_ready.saturating_sub(1);
            let reliable = s.config.delivery.is_reliable();
            if reliable {
                s.consumed += 1;
            }
            let late =
                matches!(s.config.delivery, Delivery::Deadline { ttl } if now > m.sent_at + ttl);
            if late {
                s.lost += 1;
            } else if let Some(meter) = s.meter.as_mut() {
                meter.deliver(m.sent_at, now, m.data.len() as u64);
            }
            if reliable {
                self.schedule_ack(now);
            }
            if late {
                self.stats.expired += 1;
                continue;
            }
            self.stats.messages += 1;
            self.stats.bytes += m.data.len() as u64;
            if let Some(l) = self.ledger.get_mut(&m.stream) {
                l.count(m.data.len());
            }
            let stream = m.stream;
            self.maybe_finish_in(now, stream);
            return Some(m);
        }
        None
    }

    fn schedule_ack(&mut self, now: Instant) {
        let at = now + self.config.ack_interval;
        self.next_ack = Some(self.next_ack.map_or(at, |t| t.min(at)));
    }

    pub(super) fn sink_frame(
        &mut self,
        now: Instant,
        h: ConnectionHandle,
        f: Frame<'_>,
    ) -> Result<(), CloseReason> {
        match (self.conns.contains_key(&h), &f) {
            (_, Frame::PathHello { session, path }) => {
                return self.handle_hello(now, h, *session, *path);
            }
            (true, _) => {}
            (false, Frame::Route(_)) => {
                return Err(violation(
                    "this is a braid session sink, not a relay".to_string(),
                ));
            }
            (false, _) => {
                return Err(violation("a frame before PATH_HELLO".to_string()));
            }
        }
        match f {
            // A source's probe: measured by the transport, dropped here.
            Frame::Pad(_) => Ok(()),
            Frame::StreamOpen { stream, config } => {
                if self.finished.contains(&stream) {
                    // A late copy of the open of a stream that has ended.
                    return Ok(());
                }
                match self.inc.get(&stream) {
                    Some(s) if s.config != config => {
                        return Err(violation(format!("{stream} re-opened with another config")));
                    }
                    Some(_) => {}
                    None => {
                        let taken = self.name_taken(stream, &config);
                        self.ledger
                            .insert(stream, super::snapshot::StreamLedger::new(config.clone()));
                        self.inc.insert(stream, InStream::new(config));
                        self.push_event(Event::StreamOpened { stream });
                        if let Some(name) = taken {
                            // Names are unique by construction; a source
                            // that breaks that loses the stream, not the
                            // session.
                            let reason = format!("stream name {name:?} is taken in this session");
                            let _ = self.refuse_stream(now, stream, &reason);
                        } else if let Some(reason) =
                            over_quota(&self.config.quota, self.usage, self.source_share, 1, 0)
                        {
                            let _ = self.refuse_stream(now, stream, &reason);
                        } else {
                            self.usage.streams += 1;
                        }
                    }
                }
                self.schedule_ack(now);
                Ok(())
            }
            Frame::StreamClose { stream, sent } => {
                if let Some(s) = self.inc.get_mut(&stream) {
                    if sent < s.next && s.config.delivery.is_reliable() {
                        return Err(violation(format!(
                            "{stream} closed at {sent}, below what arrived"
                        )));
                    }
                    s.sent = Some(sent);
                }
                self.maybe_finish_in(now, stream);
                Ok(())
            }
            other => Err(violation(format!(
                "a source sent a frame only a sink may send: {other:?}"
            ))),
        }
    }

    /// A DATA frame's payload (already cut out of its message).
    pub(super) fn sink_data(
        &mut self,
        now: Instant,
        h: ConnectionHandle,
        stream: StreamId,
        seq: u64,
        sent_us: u64,
        data: Vec<u8>,
    ) -> Result<(), CloseReason> {
        let Some(path) = self.conns.get(&h).copied() else {
            return Err(violation("a frame before PATH_HELLO".to_string()));
        };
        let m = Delivered {
            stream,
            seq,
            data,
            sent_at: Instant::from_nanos(sent_us.saturating_mul(1000)),
            arrived_at: now,
            path,
        };
        self.handle_data(now, m)
    }

    pub(super) fn handle_hello(
        &mut self,
        now: Instant,
        h: ConnectionHandle,
        session: SessionId,
        path: PathId,
    ) -> Result<(), CloseReason> {
        if self.hosting == super::host::Hosting::Lobby {
            // The host places it (a session it serves, a new one, or
            // "busy"); this session never becomes one.
            self.pending.retain(|&x| x != h);
            self.foreign.push(super::host::Greeting {
                connection: h,
                session,
                path,
            });
            return Ok(());
        }
        if self.id == SessionId(0) && self.paths.is_empty() {
            self.id = session;
        }
        if session != self.id {
            self.stats.stray_connections += 1;
            self.pending.retain(|&x| x != h);
            if let Some(c) = self.endpoint.connection_mut(h) {
                c.close(now, crate::transport::ErrorCode(0), b"another session");
            }
            return Ok(());
        }
        let Some(addr) = self.endpoint.connection(h).map(|c| c.path()) else {
            return Ok(());
        };
        if !self.paths.contains_key(&path) && self.paths.len() >= MAX_PATHS {
            return Err(violation(format!("more than {MAX_PATHS} paths")));
        }
        self.pending.retain(|&x| x != h);
        // A path that reconnects replaces its old connection.
        if let Some(old) = self.paths.get(&path).and_then(|p| p.conn) {
            self.conns.remove(&old);
        }
        if !self.paths.contains_key(&path) {
            let p = self.new_path(path, addr, now);
            self.paths.insert(path, p);
        }
        self.conns.insert(h, path);
        if let Some(p) = self.paths.get_mut(&path) {
            p.conn = Some(h);
            p.addr = addr;
            p.established = true;
            p.down_since = None;
        }
        self.ever_up = true;
        if let Some(c) = self.endpoint.connection_mut(h) {
            let status = Frame::PathStatus { path, up: true }.to_vec();
            let _ = c.send(now, CONTROL_STREAM, status, super::CONTROL);
            // Verdicts a lost path may have taken with it.
            for f in self.verdicts.values() {
                let _ = c.send(now, CONTROL_STREAM, f.clone(), super::CONTROL);
            }
        }
        self.push_event(Event::PathUp { path });
        self.schedule_ack(now);
        Ok(())
    }

    fn handle_data(&mut self, now: Instant, m: Delivered) -> Result<(), CloseReason> {
        let stream = m.stream;
        let Some(s) = self.inc.get_mut(&stream) else {
            if self.finished.contains(&stream) {
                // A straggler (an unreliable message or a redundant copy)
                // of a stream that has ended.
                self.stats.copies += 1;
                return Ok(());
            }
            return Err(violation(format!(
                "data on {stream}, which was never opened"
            )));
        };
        let window = u64::from(s.config.window);
        if s.config.delivery.is_reliable() {
            if m.seq < s.next || s.reorder.contains_key(&m.seq) {
                s.duplicates += 1;
                self.stats.copies += 1;
                return Ok(());
            }
            if m.seq >= s.consumed + window {
                return Err(violation(format!(
                    "{stream}: message {} beyond the window ({} consumed, window {window})",
                    m.seq, s.consumed
                )));
            }
            let len = m.data.len() as u64;
            if let Some(reason) =
                over_quota(&self.config.quota, self.usage, self.source_share, 0, len)
            {
                let _ = self.refuse_stream(now, stream, &reason);
                return Ok(());
            }
            if self.held + len > self.config.max_bytes {
                return Err(violation(format!(
                    "the sink would hold {} bytes, above its bound of {} (SessionConfig::max_bytes)",
                    self.held + len,
                    self.config.max_bytes
                )));
            }
            self.held += len;
            self.usage.bytes += len;
            s.count_arrival(now, &m);
            s.reorder.insert(m.seq, m);
            while let Some(m) = s.reorder.remove(&s.next) {
                s.next += 1;
                s.in_ready += 1;
                self.ready.push_back(m);
            }
        } else {
            let floor = s.next.saturating_sub(window);
            if m.seq < floor || !s.seen.insert(m.seq) {
                s.duplicates += 1;
                self.stats.copies += 1;
                return Ok(());
            }
            if let Delivery::Deadline { ttl } = s.config.delivery {
                if now > m.sent_at + ttl {
                    self.stats.expired += 1;
                    s.count_offer(&m);
                    return Ok(());
                }
            }
            if m.seq >= s.next {
                s.next = m.seq + 1;
                // Forget what fell below the window, oldest first (no new
                // tree per message, as `split_off` would build).
                let floor = s.next.saturating_sub(window);
                while s.seen.first().is_some_and(|&q| q < floor) {
                    s.seen.pop_first();
                }
            }
            if s.in_ready >= window {
                // The application is not reading: the newest is dropped
                // (and counted lost: it was never received).
                return Ok(());
            }
            let len = m.data.len() as u64;
            if self.held + len > self.config.max_bytes {
                // Unread messages fill the sink's bound: the newest is
                // dropped (and counted lost: it was never received).
                return Ok(());
            }
            if let Some(reason) =
                over_quota(&self.config.quota, self.usage, self.source_share, 0, len)
            {
                let _ = self.refuse_stream(now, stream, &reason);
                return Ok(());
            }
            self.held += len;
            self.usage.bytes += len;
            s.count_arrival(now, &m);
            s.in_ready += 1;
            self.ready.push_back(m);
            self.schedule_ack(now);
        }
        Ok(())
    }

    /// A stream whose every message has been handed over is done.
    fn maybe_finish_in(&mut self, now: Instant, stream: StreamId) {
        let Some(s) = self.inc.get(&stream) else {
            return;
        };
        if s.finished() && s.in_ready == 0 {
            self.inc.remove(&stream);
            self.finished.insert(stream);
            let confirm = self.config.confirm_streams;
            if let Some(l) = self.ledger.get_mut(&stream) {
                l.finished = true;
                l.complete = true;
                l.awaiting_verdict = confirm;
            }
            self.push_event(Event::StreamClosed { stream });
            if !confirm {
                self.send_verdict(now, stream, true, "");
            }
        }
    }

    /// Sink: the application has kept `stream` whole (written it out);
    /// the source now hears it was delivered. Only with
    /// `SessionConfig::confirm_streams`, once the stream has ended
    /// (`Event::StreamClosed`).
    ///
    /// # Errors
    /// Wrong role; [`SessionError::NotEnded`] before the stream ended or
    /// after its verdict.
    pub fn keep_stream(&mut self, now: Instant, stream: StreamId) -> Result<(), SessionError> {
        self.check_role(super::Role::Sink, "keep_stream")?;
        match self.ledger.get_mut(&stream) {
            Some(l) if l.awaiting_verdict => l.awaiting_verdict = false,
            _ => return Err(SessionError::NotEnded(stream)),
        }
        self.send_verdict(now, stream, true, "");
        Ok(())
    }

    /// Sink: the application cannot keep `stream` (its file exists, the
    /// disk is full …): the source ends the stream with `reason`, nothing
    /// of it counts as delivered, and what is left of it here is dropped.
    /// Any time before the stream's verdict.
    ///
    /// # Errors
    /// Wrong role; [`SessionError::UnknownStream`] for a stream never
    /// opened; [`SessionError::NotEnded`] once it has a verdict.
    pub fn refuse_stream(
        &mut self,
        now: Instant,
        stream: StreamId,
        reason: &str,
    ) -> Result<(), SessionError> {
        self.check_role(super::Role::Sink, "refuse_stream")?;
        let Some(l) = self.ledger.get_mut(&stream) else {
            return Err(SessionError::UnknownStream(stream));
        };
        let open = self.inc.contains_key(&stream);
        if !(open || l.awaiting_verdict) {
            return Err(SessionError::NotEnded(stream));
        }
        l.refused = Some(reason.to_string());
        l.awaiting_verdict = false;
        l.finished = true;
        l.complete = false;
        if open {
            self.inc.remove(&stream);
            self.finished.insert(stream);
            let mut freed = 0;
            self.ready.retain(|m| {
                let drop = m.stream == stream;
                if drop {
                    freed += m.data.len() as u64;
                }
                !drop
            });
            self.held = self.held.saturating_sub(freed);
        }
        self.send_verdict(now, stream, false, reason);
        Ok(())
    }

    /// Tells the source `stream`'s verdict on every path, and remembers it
    /// for paths that greet later.
    fn send_verdict(&mut self, now: Instant, stream: StreamId, kept: bool, reason: &str) {
        let frame = Frame::StreamVerdict {
            stream,
            kept,
            reason: reason.as_bytes(),
        }
        .to_vec();
        self.verdicts.insert(stream, frame.clone());
        let handles: Vec<ConnectionHandle> = self.paths.values().filter_map(|p| p.conn).collect();
        for h in handles {
            if let Some(c) = self.endpoint.connection_mut(h) {
                let _ = c.send(now, CONTROL_STREAM, frame.clone(), super::CONTROL);
            }
        }
    }

    /// Sends due acknowledgements on every up path.
    pub(super) fn flush_acks(&mut self, now: Instant) {
        let due = self.next_ack.is_some_and(|t| now >= t);
        if !due {
            return;
        }
        let mut frames = Vec::new();
        for (&id, s) in self.inc.iter_mut() {
            let v = s.ack_value();
            if s.ack_sent != Some(v) {
                frames.push(
                    Frame::Ack {
                        stream: id,
                        consumed: v,
                    }
                    .to_vec(),
                );
                s.ack_sent = Some(v);
            }
        }
        let repeat = !self.inc.is_empty();
        self.next_ack = repeat.then_some(now + ACK_REPEAT);
        if frames.is_empty() {
            // Nothing changed: repeat every ACK (a lost one is replaced).
            for (&id, s) in &self.inc {
                frames.push(
                    Frame::Ack {
                        stream: id,
                        consumed: s.ack_value(),
                    }
                    .to_vec(),
                );
            }
        }
        let handles: Vec<ConnectionHandle> = self
            .paths
            .values()
            .filter(|p| p.is_up())
            .filter_map(|p| p.conn)
            .collect();
        for h in handles {
            if let Some(c) = self.endpoint.connection_mut(h) {
                for f in &frames {
                    let _ = c.send(now, CONTROL_STREAM, f.clone(), SendOptions::UNRELIABLE);
                }
            }
        }
    }

    /// Sink statistics of one interval, per stream.
    pub(super) fn sink_stats(&mut self, now: Instant) -> Vec<(StreamId, StreamStats)> {
        let interval = self.config.stats_interval;
        self.inc
            .iter_mut()
            .map(|(&id, s)| {
                if let Some(m) = s.meter.as_mut() {
                    m.roll(now);
                }
                // Others: what never arrived (gaps, late or overflowing
                // arrivals) plus what expired before the application took it.
                let lost = if s.config.delivery.is_reliable() {
                    0
                } else {
                    s.next.saturating_sub(s.received) + s.lost
                };
                let mut d = std::mem::take(&mut s.delays_us);
                d.sort_unstable();
                let pct = |p: usize| {
                    let us = d
                        .get((d.len() * p).div_ceil(100).saturating_sub(1))
                        .copied()
                        .unwrap_or(0);
                    Duration::from_micros(us)
                };
                let st = StreamStats {
                    interval,
                    rate: rate_of(s.interval_bytes, interval),
                    messages: s.interval_messages,
                    windows_met: s
                        .meter
                        .as_ref()
                        .and_then(RollingMeter::share_met)
                        .unwrap_or(1.0),
                    windows_judged: s.meter.as_ref().map_or(0, RollingMeter::judged),
                    windows_missed: s.meter.as_ref().map_or(0, RollingMeter::missed),
                    messages_missed: s.meter.as_ref().map_or(0, RollingMeter::misses),
                    lost,
                    delay_p50: pct(50),
                    delay_p95: pct(95),
                    delay_p99: pct(99),
                    duplicates: s.duplicates,
                    resent: 0,
                };
                s.interval_bytes = 0;
                s.interval_messages = 0;
                (id, st)
            })
            .collect()
    }
}

impl Session {
    pub(super) fn emit_stats(&mut self, now: Instant) {
        let v = match self.role {
            super::Role::Source => self.source_stats(),
            super::Role::Sink => self.sink_stats(now),
        };
        let report_on = match self.role {
            super::Role::Sink => self.paths.values().find(|p| p.is_up()).and_then(|p| p.conn),
            super::Role::Source => None,
        };
        for (stream, stats) in v {
            if let Some(l) = self.ledger.get_mut(&stream) {
                l.last = stats;
            }
            if let Some(c) = report_on.and_then(|h| self.endpoint.connection_mut(h)) {
                let f = Frame::StreamReport {
                    stream,
                    windows_met_ppm: (stats.windows_met.clamp(0.0, 1.0) * 1e6).round() as u32,
                    rate: stats.rate,
                    lost: stats.lost,
                    windows_judged: stats.windows_judged,
                    windows_missed: stats.windows_missed,
                    messages_missed: stats.messages_missed,
                };
                // Best effort: a report lost or refused is replaced next interval.
                let _ = c.send(now, CONTROL_STREAM, f.to_vec(), SendOptions::UNRELIABLE);
            }
            self.push_event(Event::Stats { stream, stats });
        }
    }
}

/// Why taking `streams` more streams and `bytes` more bytes beyond `used`
/// would go past the session's quota or its source's (`share`: the
/// source's quota and what its other sessions took), if it would.
fn over_quota(
    quota: &Quota,
    used: Usage,
    share: Option<(Quota, Usage)>,
    streams: u64,
    bytes: u64,
) -> Option<String> {
    quota.check(Who::Session, used, streams, bytes).or_else(|| {
        let (quota, others) = share?;
        quota.check(Who::Source, others.plus(used), streams, bytes)
    })
}
