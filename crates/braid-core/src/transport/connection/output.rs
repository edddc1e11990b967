//! The output half of [`Connection`]: building INITIAL, HANDSHAKE, DATA
//! and CLOSE packets in `poll_transmit`.
//!
//! Invariants: a DATA packet is built only when it carries at least one
//! frame; stream data is written only when the congestion window and the
//! pacer allow; ACK-only and CLOSE packets take a packet number but are not
//! recorded in flight.

use super::{Connection, State, DISCARD_QUEUE_WINDOWS};
use crate::time::Instant;
use crate::transport::recovery::{SentFrame, SentFrames, SentPacket};
use crate::transport::send::{DiscardPolicy, PACKET_FULL_BELOW};
use crate::transport::Transmit;
use crate::wire::{CloseFrame, Frame, Header, PacketBuilder, PacketType, MIN_DATAGRAM_SIZE};

impl Connection {
    /// Writes the next datagram to send into `buf` (cleared first), if any.
    pub fn poll_transmit(&mut self, now: Instant, buf: &mut Vec<u8>) -> Option<Transmit> {
        buf.clear();
        self.poll_transmit_append(now, buf)
    }

    /// As [`Connection::poll_transmit`], but appends the datagram after
    /// what `buf` holds (`Transmit::size` is the datagram's own size), so a
    /// driver can build a GSO batch in place; `buf` is left as it was when
    /// nothing is sent.
    pub fn poll_transmit_append(&mut self, now: Instant, buf: &mut Vec<u8>) -> Option<Transmit> {
        let start = buf.len();
        let size = match self.state {
            State::Closed | State::Draining => None,
            State::Closing => self.write_close(buf, start),
            State::Initial => self.write_initial(now, buf),
            State::HandshakeSent => self.write_handshake(now, buf),
            State::Established => self.write_data(now, buf, start),
        };
        let Some(size) = size else {
            // A builder that failed half way may have written a little.
            buf.truncate(start);
            return None;
        };
        self.stats.packets_sent += 1;
        self.stats.bytes_sent += size as u64;
        Some(Transmit {
            path: self.path,
            size,
        })
    }

    /// `poll_transmit_append` for batching: appends the next datagram to
    /// `buf` only if it will be at most `max` bytes long, returning its
    /// size. Datagrams are never larger than the path's datagram size,
    /// which the first datagram of a batch normally has, so this only
    /// refuses when a later one would be larger than an earlier short one.
    pub(crate) fn poll_append_fits(
        &mut self,
        now: Instant,
        buf: &mut Vec<u8>,
        max: usize,
    ) -> Option<usize> {
        if self.mss() > max {
            // A full-size datagram might not fit the batch: stop here.
            return None;
        }
        let t = self.poll_transmit_append(now, buf)?;
        Some(t.size)
    }

    fn header(&self, ty: PacketType, pn: u64) -> Header {
        Header {
            ty,
            dst_cid: self.remote_cid,
            src_cid: ty.is_long().then_some(self.local_cid),
            pn,
        }
    }

    fn write_close(&mut self, buf: &mut Vec<u8>, start: usize) -> Option<usize> {
        if !self.close_send {
            return None;
        }
        self.close_send = false;
        let (code, reason) = self.close_frame.clone()?;
        let pn = self.recovery.on_sent_unrecorded();
        let h = self.header(PacketType::Data, pn);
        let limit = self.mss() - self.protection_overhead();
        let mut b = PacketBuilder::new(buf, &h, limit).ok()?;
        b.push(&Frame::Close(CloseFrame {
            code,
            reason: &reason,
        }))
        .ok()?;
        let size = b.finish();
        self.seal(buf, start, pn, h.encoded_len(), size)
    }

    fn write_initial(&mut self, now: Instant, buf: &mut Vec<u8>) -> Option<usize> {
        if !self.initial_pending {
            return None;
        }
        self.initial_pending = false;
        self.initial_count += 1;
        let backoff = 1u64 << self.initial_count.min(10);
        self.next_initial = now + self.config.initial_rtt * backoff;
        let h = self.header(PacketType::Initial, 0);
        let mut b = PacketBuilder::new(buf, &h, MIN_DATAGRAM_SIZE).ok()?;
        let cookie = self.cookie.clone().unwrap_or_default();
        b.push(&Frame::Initial {
            params: self.params(),
            cookie: &cookie,
        })
        .ok()?;
        // Message 1 rides only with the cookie: the server reads nothing
        // before it has validated our address.
        if let Some(m) = self.auth_message.as_deref().filter(|_| !cookie.is_empty()) {
            b.push(&Frame::Auth { message: m }).ok()?;
        }
        b.pad_to(MIN_DATAGRAM_SIZE);
        Some(b.finish())
    }

    fn write_handshake(&mut self, now: Instant, buf: &mut Vec<u8>) -> Option<usize> {
        if !self.handshake_pending {
            return None;
        }
        self.handshake_pending = false;
        self.probe_pending = false;
        let answering = std::mem::take(&mut self.handshake_answer);
        if self.handshake_sends >= super::MAX_HANDSHAKE_SENDS && !answering {
            return None;
        }
        self.handshake_sends = self.handshake_sends.saturating_add(1);
        let pn = self.recovery.next_pn();
        let h = self.header(PacketType::Handshake, pn);
        let mut b = PacketBuilder::new(buf, &h, self.mss()).ok()?;
        b.push(&Frame::Handshake {
            params: self.params(),
        })
        .ok()?;
        if let Some(m) = self.auth_message.as_deref() {
            b.push(&Frame::Auth { message: m }).ok()?;
        }
        let size = b.finish();
        self.record(
            now,
            pn,
            size,
            SentFrames::from_elem(SentFrame::Handshake, 1),
            true,
            false,
        );
        Some(size)
    }

    fn record(
        &mut self,
        now: Instant,
        pn: u64,
        size: usize,
        frames: SentFrames,
        in_flight: bool,
        app_limited: bool,
    ) {
        self.last_eliciting_sent = now;
        self.recovery.on_sent(
            pn,
            SentPacket {
                time_sent: now,
                size: size as u64,
                ack_eliciting: true,
                in_flight,
                app_limited,
                delivered: 0,
                delivered_time: now,
                frames,
            },
        );
    }

    fn write_data(&mut self, now: Instant, buf: &mut Vec<u8>, start: usize) -> Option<usize> {
        // Expire first, so that nothing is built for messages that can no
        // longer arrive in time (`write` would drop them anyway).
        self.expire_send(now);
        let mss = self.mss();
        let ack_due = self.ack.should_send(now);
        let window_open = !self.recovery.is_full()
            && self.recovery.bytes_in_flight() + mss as u64 <= self.cc.window();
        let control = self.max_data_pending || !self.adapt_out.is_empty();
        let want_data = window_open && self.send.has_sendable();
        let mut paced = false;
        if want_data && self.config.pacing {
            // The rate (a division) only when the pacer needs it: once per
            // clock reading, not once per datagram.
            let (cc, rtt) = (&self.cc, self.recovery.rtt());
            if let Some(t) = self
                .pacer
                .delay_with(now, mss as u64, || cc.pacing_rate(rtt))
            {
                self.pacing_wait = Some(t);
                paced = true;
            }
        }
        let send_data = want_data && !paced;
        if window_open && !self.send.has_sendable() && !self.holding {
            self.rate.handle_app_limited(now);
        }
        if !(ack_due || self.probe_pending || self.ping_pending || send_data || control) {
            return None;
        }
        let pn = self.recovery.next_pn();
        let h = self.header(PacketType::Data, pn);
        let mut b = PacketBuilder::new(buf, &h, mss - self.protection_overhead()).ok()?;
        let mut log = SentFrames::new();
        let mut wrote_ack = false;
        if self.ack.has_pending() {
            if let Some(a) = self.ack.build(now) {
                wrote_ack = b.push(&Frame::Ack(a)).ok()?;
            }
        }
        if self.max_data_pending
            && b.push(&Frame::MaxData {
                limit: self.recv.advertised(),
            })
            .ok()?
        {
            self.max_data_pending = false;
            log.push(SentFrame::MaxData);
        }
        while let Some(a) = self.adapt_out.front().copied() {
            if !b.push(&Frame::Adapt(a)).ok()? {
                break;
            }
            self.adapt_out.pop_front();
            log.push(SentFrame::Adapt(a));
        }
        let pinged = self.probe_pending || self.ping_pending;
        if pinged {
            b.push(&Frame::Ping).ok()?;
            log.push(SentFrame::Other);
            self.probe_pending = false;
            self.ping_pending = false;
        }
        if send_data {
            let congested = self.rate.last().is_some_and(|s| s.loss_ratio() > 0.0)
                || self.send.queued_bytes() > DISCARD_QUEUE_WINDOWS * self.cc.window();
            let policy = DiscardPolicy {
                congested,
                discard_unmarked: self.discard_unmarked,
                tolerance: self.peer_tolerance.as_f64(),
            };
            self.send.write(now, &mut b, &mut log, &policy).ok()?;
            // Full by the write loop's measure but not to the byte, with
            // more data waiting: pad to the full size. A bulk transfer's
            // datagrams are then all one size, and a GSO send, which may
            // end only at a shorter datagram, is not cut at every message
            // boundary (it was: a 16 KiB message's last packet fell a few
            // bytes short, so one `sendmsg` carried one message). quinn pads
            // the datagrams of its GSO batches the same way.
            if self.send.has_sendable() && b.remaining() < PACKET_FULL_BELOW {
                b.pad_to(usize::MAX);
            }
        }
        let size = b.finish();
        if log.is_empty() && !wrote_ack {
            buf.truncate(start);
            return None;
        }
        let size = self.seal(buf, start, pn, h.encoded_len(), size)?;
        if log.is_empty() {
            // ACK only: not in flight, never acknowledged or retransmitted.
            self.recovery.on_sent_unrecorded();
            return Some(size);
        }
        if self.config.pacing {
            self.pacer.on_sent(size as u64);
        }
        // Application-limited (no window growth on its ack, RFC 7661 in
        // spirit): nothing more to send, or less than half the window used.
        let app_limited = !self.send.has_sendable()
            || self.recovery.bytes_in_flight() + (size as u64) < self.cc.window() / 2;
        let lone_ping = pinged && log.len() == 1;
        self.stats.lone_pings += u64::from(lone_ping);
        if let Some(k) = &mut self.keep_alive {
            k.on_sent(lone_ping, self.idle_timeout);
        }
        self.record(now, pn, size, log, true, app_limited);
        Some(size)
    }
}
