//! The packet-protection step of [`Connection`]: opening what comes in and
//! sealing what goes out, with the keys of the handshake
//! ([`crate::transport::protection`]).
//!
//! Invariants: on a keyed connection ([`Config::psk`](crate::transport::Config::psk))
//! no DATA packet reaches frame processing unless it opened; a packet that
//! does not open is counted in `Stats::decrypt_failed` and changes nothing
//! else (no ACK, no RTT sample, no idle-timer reset). Nothing here
//! allocates: packets are opened in a caller-provided buffer and sealed in
//! place.

use super::Connection;
use crate::time::Instant;
use crate::transport::protection::TAG_LEN;
use crate::transport::FourTuple;
use crate::wire::{Header, Packet, PacketType, Reader, MAX_DATAGRAM_SIZE};

/// What became of a datagram handed to [`Connection::open`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Opened {
    /// The connection takes no protected packets: decode `data` as is.
    Unprotected,
    /// Opened: the cleartext packet is the first this-many bytes of the
    /// scratch buffer.
    Clear(usize),
    /// Dropped and counted.
    Failed,
}

impl Connection {
    /// True if this connection's DATA packets must be protected: it was set
    /// up with a key.
    pub(crate) fn requires_protection(&self) -> bool {
        self.config.psk.is_some()
    }

    /// Bytes protection adds to each DATA packet this side sends now.
    pub(super) fn protection_overhead(&self) -> usize {
        if self.keys.is_some() {
            TAG_LEN
        } else {
            0
        }
    }

    /// Opens the datagram `data` whose decoded header is `header`
    /// (`header_len` bytes) into `scratch`, if this connection requires
    /// protection and it is a DATA packet.
    pub(crate) fn open(
        &mut self,
        header: &Header,
        header_len: usize,
        data: &[u8],
        scratch: &mut [u8; MAX_DATAGRAM_SIZE],
    ) -> Opened {
        if header.ty != PacketType::Data || !self.requires_protection() {
            return Opened::Unprotected;
        }
        let (Some(keys), Some(dst)) = (self.keys.as_ref(), scratch.get_mut(..data.len())) else {
            // No keys yet (a client before the server proved the key), or
            // longer than any datagram: nothing can open it.
            self.stats.decrypt_failed += 1;
            return Opened::Failed;
        };
        dst.copy_from_slice(data);
        match keys.packet.open(header.pn, dst, header_len) {
            Ok(n) => Opened::Clear(n),
            Err(_) => {
                self.stats.decrypt_failed += 1;
                Opened::Failed
            }
        }
    }

    /// Seals the packet of `size` bytes from `start` to the end of `buf`
    /// (header of `header_len` bytes, number `pn`) if this side has keys,
    /// and returns its size on the wire. `None` only if sealing failed (a
    /// bug); the packet must then not be sent.
    pub(super) fn seal(
        &self,
        buf: &mut Vec<u8>,
        start: usize,
        pn: u64,
        header_len: usize,
        size: usize,
    ) -> Option<usize> {
        let Some(keys) = self.keys.as_ref() else {
            return Some(size);
        };
        keys.packet.seal(pn, buf, start, header_len).ok()?;
        Some(size + TAG_LEN)
    }

    /// Handles one datagram that travelled `path`, received at `now`, when
    /// the connection is driven without an endpoint. Anything malformed,
    /// misaddressed, unauthentic or duplicated is counted in
    /// [`crate::transport::Stats`] and dropped.
    pub fn handle_datagram(&mut self, now: Instant, path: FourTuple, data: &[u8]) {
        if self.is_closed() {
            return;
        }
        let mut r = Reader::new(data);
        let Ok(header) = Header::decode(&mut r) else {
            self.stats.malformed += 1;
            return;
        };
        let header_len = r.position();
        // Filled (and zeroed first) only for a packet that must be opened.
        let mut scratch;
        let mut bytes = data;
        if header.ty == PacketType::Data && self.requires_protection() {
            scratch = [0u8; MAX_DATAGRAM_SIZE];
            match self.open(&header, header_len, data, &mut scratch) {
                Opened::Unprotected => {}
                Opened::Clear(n) => bytes = &scratch[..n],
                Opened::Failed => return,
            }
        }
        if data.len() > MAX_DATAGRAM_SIZE {
            self.stats.malformed += 1;
            return;
        }
        // The header reads the same in the clear: only the payload again.
        let payload = bytes.get(header_len..).unwrap_or(&[]);
        let Ok(packet) = Packet::decode_payload(header, payload) else {
            self.stats.malformed += 1;
            return;
        };
        self.handle_packet(now, path, &packet, data.len());
    }
}
