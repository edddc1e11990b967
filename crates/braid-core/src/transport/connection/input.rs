//! The input half of [`Connection`]: `handle_packet`, frame processing,
//! and what acknowledgements and losses do to recovery, congestion control
//! and the streams.
//!
//! Invariants: a datagram changes state only after it opened (on a keyed
//! connection, see `protect`), decoded completely, came on the
//! connection's path with this connection's id, and carried a packet
//! number not seen before; a frame that breaks the protocol closes the
//! connection with a [`CloseReason::ProtocolViolation`]. The datagram is
//! decoded once: the endpoint hands the checked [`Packet`] on.

use super::{CloseReason, Connection, Event, Side, State, CLOSE_PTOS, MAX_ADAPT_OUT};
use crate::time::Instant;
use crate::transport::auth::{self, ClientHandshake};
use crate::transport::recovery::{SentFrame, SentPacket};
use crate::transport::recv::{RecvError, Taken};
use crate::transport::FourTuple;
use crate::wire::{AdaptAction, ErrorCode, Frame, Header, Packet, PacketType};
use core::ops::ControlFlow;
use tracing::{debug, trace};

impl Connection {
    /// Handles one datagram the endpoint already opened (if protected),
    /// decoded and checked: `packet` is its view, `len` its size in bytes.
    pub(crate) fn handle_packet(
        &mut self,
        now: Instant,
        path: FourTuple,
        packet: &Packet<'_>,
        len: usize,
    ) {
        if self.state == State::Closed {
            return;
        }
        if !self.path.admits(&path) {
            self.stats.malformed += 1;
            return;
        }
        let h = packet.header;
        match (self.side, h.ty) {
            (Side::Client, PacketType::Retry) | (Side::Client, PacketType::Handshake)
                if h.dst_cid != self.local_cid =>
            {
                self.stats.malformed += 1;
                return;
            }
            (Side::Client, PacketType::Retry) => {
                self.on_retry(now, packet);
                return;
            }
            (Side::Server, PacketType::Initial) => {
                // The client did not get our HANDSHAKE: send it again.
                if self.state == State::HandshakeSent {
                    self.handshake_pending = true;
                }
                return;
            }
            (_, PacketType::Data) | (Side::Client, PacketType::Handshake)
                if h.dst_cid == self.local_cid => {}
            _ => {
                self.stats.malformed += 1;
                return;
            }
        }
        if self.state == State::Draining {
            return;
        }
        if h.ty == PacketType::Handshake
            && self.requires_protection()
            && self.state != State::Initial
        {
            // Unprotected, and only message 2 made it authentic: after the
            // handshake it is a retransmission (or an injection) and
            // changes nothing.
            self.stats.duplicates += 1;
            return;
        }
        if self.state == State::Closing {
            // Answer with our CLOSE again (at most one per packet in).
            self.close_send = true;
            return;
        }
        if h.ty == PacketType::Data && self.state == State::Initial {
            // Data before the HANDSHAKE (reordered): the sender retransmits.
            self.stats.malformed += 1;
            return;
        }
        if self.ack.is_duplicate(h.pn) {
            self.stats.duplicates += 1;
            if h.ty == PacketType::Data && self.requires_protection() {
                // It opened, so it is authentic: a replay (or a copy the
                // network made), rejected by its number.
                self.stats.replayed += 1;
            }
            return;
        }
        self.last_received = now;
        if self.path.local.is_none() {
            // The first datagram that names our local address fixes it.
            self.path.local = path.local;
        }
        self.stats.packets_received += 1;
        self.stats.bytes_received += len as u64;
        if h.ty == PacketType::Handshake
            && self.state == State::Initial
            && !self.verify_server(packet)
        {
            // Invariant: long headers always carry a source id; our CLOSE
            // must reach the connection the server created.
            self.remote_cid = h.src_cid.unwrap_or(self.remote_cid);
            self.close(
                now,
                ErrorCode::AUTH_FAILED,
                auth::REASON_SERVER_UNVERIFIED.as_bytes(),
            );
            return;
        }
        let mut eliciting = false;
        let mut done = false;
        self.no_room = false;
        packet.visit_frames(|f| {
            eliciting |= f.is_ack_eliciting();
            if let Err(code) = self.on_frame(now, &h, f) {
                self.fail(now, code);
                done = true;
            }
            done |= matches!(self.state, State::Draining | State::Closed);
            if done {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        });
        if done {
            return;
        }
        if self.no_room {
            // A reliable message found no room: leave the packet
            // unacknowledged so that its data comes again (every frame is
            // idempotent: what was taken from it is recognised then).
            self.stats.refused_packets += 1;
        } else {
            self.ack
                .on_packet(now, h.pn, eliciting, self.config.max_ack_delay);
        }
        if self.side == Side::Server && self.state == State::HandshakeSent {
            debug!(cid = ?self.local_cid, ?now, "server handshake complete: established");
            self.state = State::Established;
            self.push_event(Event::Connected);
        }
        self.check_finish(now);
    }

    /// The client sent its INITIAL again: it has not got our HANDSHAKE.
    /// Past the timer-driven sends, each such INITIAL still gets one
    /// HANDSHAKE: under heavy loss a live client is not left to its own
    /// connect timeout, and an INITIAL (padded) is larger than the answer.
    pub(crate) fn on_initial_retransmit(&mut self) {
        if self.state == State::HandshakeSent {
            self.handshake_pending = true;
            self.handshake_answer = self.handshake_sends_exhausted();
        }
    }

    /// A stateless answer from the server: a RETRY with the cookie to
    /// echo, or (after we echoed one) a CLOSE refusing us.
    fn on_retry(&mut self, now: Instant, p: &Packet<'_>) {
        if self.state != State::Initial || p.header.src_cid != Some(self.remote_cid) {
            self.stats.malformed += 1;
            return;
        }
        for f in p.frames() {
            match f {
                Ok(Frame::Retry { cookie }) if self.cookie.is_none() => {
                    self.cookie = Some(cookie.to_vec());
                    self.initial_pending = true;
                    if let Err(e) = self.start_auth() {
                        debug!(cid = ?self.local_cid, ?now, error = %e, "cannot start the handshake");
                        self.close(now, ErrorCode::AUTH_FAILED, b"");
                    }
                }
                Ok(Frame::Close(c)) if self.cookie.is_some() => {
                    // Refused before the server kept any state: nothing to
                    // answer, nothing to drain.
                    debug!(cid = ?self.local_cid, ?now, code = ?c.code, "refused by the server: closed");
                    self.state = State::Closed;
                    self.recovery.drain();
                    self.push_event(Event::Closed(CloseReason::Peer {
                        code: c.code,
                        reason: String::from_utf8_lossy(c.reason).into_owned(),
                    }));
                }
                _ => self.stats.malformed += 1,
            }
        }
    }

    /// With a key: writes Noise message 1, bound to our ids and parameters,
    /// to send with the cookie.
    fn start_auth(&mut self) -> Result<(), auth::AuthError> {
        let (Some(psk), Some(seed)) = (self.config.psk.as_ref(), self.auth_seed.take()) else {
            return Ok(());
        };
        let mut params = Vec::new();
        self.params().encode(&mut params);
        let prologue = auth::prologue(
            self.remote_cid.as_bytes(),
            self.local_cid.as_bytes(),
            &params,
        );
        let hs = ClientHandshake::start(
            psk,
            seed,
            &prologue,
            self.config.protection,
            auth::Suite::ChaChaPoly,
        )?;
        self.auth_message = Some(hs.message().to_vec());
        self.client_auth = Some(hs);
        Ok(())
    }

    /// Checks the server's HANDSHAKE packet against our key: with one, it
    /// must carry a message 2 that verifies and whose payload is the
    /// packet's own server id and parameters; without one, it must carry
    /// none. On success the derived keys are kept.
    fn verify_server(&mut self, p: &Packet<'_>) -> bool {
        let mut message2 = None;
        let mut params = None;
        for f in p.frames() {
            match f {
                Ok(Frame::Auth { message }) => message2 = Some(message),
                Ok(Frame::Handshake { params: q }) => params = Some(q),
                _ => {}
            }
        }
        let Some(hs) = self.client_auth.take() else {
            // Without a key we accept only a HANDSHAKE without message 2;
            // with one, only a verified message 2 (never none).
            return message2.is_none() && self.config.psk.is_none();
        };
        let (Some(m2), Some(params), Some(src)) = (message2, params, p.header.src_cid) else {
            return false;
        };
        let expected = auth::server_payload(&src, &params, self.config.protection);
        match hs.finish(m2, &expected) {
            Ok(keys) => {
                self.keys = Some(keys);
                true
            }
            Err(_) => false,
        }
    }

    fn on_frame(&mut self, now: Instant, h: &Header, f: &Frame<'_>) -> Result<(), ErrorCode> {
        match f {
            Frame::Handshake { params } if self.state == State::Initial => {
                // Invariant: long headers always carry a source id.
                self.remote_cid = h.src_cid.unwrap_or(self.remote_cid);
                self.apply_peer_params(*params);
                debug!(cid = ?self.local_cid, ?now, "client handshake complete: established");
                self.state = State::Established;
                self.initial_pending = false;
                self.push_event(Event::Connected);
            }
            Frame::Ack(a) => {
                // One outcome buffer for the connection's life: nothing is
                // allocated per ACK.
                let mut out = std::mem::take(&mut self.ack_outcome);
                self.recovery
                    .on_ack_into(now, a, &mut out)
                    .map_err(|_| ErrorCode::PROTOCOL_VIOLATION)?;
                // The RTT may have moved: so does the transit the send
                // side takes off every deadline it writes.
                self.send.set_transit(self.recovery.rtt().transit_bound());
                for (_, p) in &out.acked {
                    if p.in_flight {
                        self.cc.on_ack(
                            now,
                            p.time_sent,
                            p.size,
                            p.app_limited,
                            self.recovery.rtt(),
                        );
                        self.rate.handle_ack(now, p.size);
                    }
                    for fr in &p.frames {
                        if let SentFrame::Stream {
                            stream,
                            message,
                            len,
                            reliability,
                            ..
                        } = *fr
                        {
                            self.send.on_acked(stream, message, len, reliability);
                        }
                    }
                }
                self.on_lost(now, &mut out.lost);
                out.clear();
                self.ack_outcome = out;
            }
            Frame::Stream(s) => {
                let taken = self.recv.on_stream(now, s).map_err(recv_code)?;
                self.no_room |= taken == Taken::NoRoom;
            }
            Frame::MessageSkip {
                stream,
                message,
                message_len,
                reliability,
                depends_back,
            } => {
                let taken = self
                    .recv
                    .on_skip(*stream, *message, *message_len, *reliability, *depends_back)
                    .map_err(recv_code)?;
                self.no_room |= taken == Taken::NoRoom;
            }
            Frame::MaxData { limit } => self.send.on_max_data(*limit),
            Frame::Close(c) => {
                debug!(cid = ?self.local_cid, ?now, code = ?c.code, "peer closed: draining");
                self.state = State::Draining;
                self.close_deadline = Some(now + self.recovery.pto() * CLOSE_PTOS);
                self.recovery.drain();
                self.push_event(Event::Closed(CloseReason::Peer {
                    code: c.code,
                    reason: String::from_utf8_lossy(c.reason).into_owned(),
                }));
            }
            Frame::Adapt(a) => {
                if let AdaptAction::LossTolerance { tolerance } = a.action {
                    self.peer_tolerance = tolerance;
                }
                self.push_event(Event::PeerAdapt(*a));
            }
            _ => {}
        }
        Ok(())
    }

    /// Acts on the packets in `lost` (emptied).
    pub(super) fn on_lost(&mut self, now: Instant, lost: &mut Vec<(u64, SentPacket)>) {
        let Some(latest) = lost.iter().map(|(_, p)| p.time_sent).max() else {
            return;
        };
        let mut bytes = 0;
        for (_, p) in lost.drain(..) {
            if !p.ack_eliciting {
                continue;
            }
            self.stats.packets_lost += 1;
            trace!(cid = ?self.local_cid, size = p.size, "packet lost");
            self.rate.handle_loss(now, 1);
            if p.in_flight {
                bytes += p.size;
            }
            for fr in p.frames {
                match fr {
                    SentFrame::Stream {
                        stream,
                        message,
                        offset,
                        len,
                        reliability,
                    } => self
                        .send
                        .on_lost(now, stream, message, offset, len, reliability),
                    SentFrame::Skip {
                        stream,
                        message,
                        len,
                        depends_back,
                    } => self.send.on_skip_lost(stream, message, len, depends_back),
                    SentFrame::MaxData => self.max_data_pending = true,
                    SentFrame::Adapt(a) if self.adapt_out.len() < MAX_ADAPT_OUT => {
                        self.adapt_out.push_back(a)
                    }
                    SentFrame::Handshake => self.handshake_pending = true,
                    _ => {}
                }
            }
        }
        if bytes > 0 {
            let before = self.cc.window();
            self.cc.on_loss(now, latest, bytes);
            let after = self.cc.window();
            if after != before {
                // A window reduction starts a recovery episode.
                debug!(cid = ?self.local_cid, ?now, lost_bytes = bytes, cwnd_before = before, cwnd = after, "congestion event: recovery episode");
            }
        }
        if self.recovery.take_persistent_congestion() {
            self.cc.on_persistent_congestion(now);
            debug!(cid = ?self.local_cid, ?now, cwnd = self.cc.window(), "persistent congestion: window collapsed");
        }
    }
}

fn recv_code(e: RecvError) -> ErrorCode {
    match e {
        RecvError::FlowControl => ErrorCode::FLOW_CONTROL,
        _ => ErrorCode::PROTOCOL_VIOLATION,
    }
}
