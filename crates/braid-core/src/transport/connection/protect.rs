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

/// Room to open one datagram in; filled (and zeroed first) only for a
/// packet that must be opened.
pub(crate) type OpenScratch = Option<[u8; MAX_DATAGRAM_SIZE]>;

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

    /// The datagram `data` (decoded header `header`, `header_len` bytes)
    /// in the clear: `data` itself unless this connection requires
    /// protection and it is a DATA packet, which is then opened into
    /// `scratch`. `None` if it does not open (counted). The header reads
    /// the same either way.
    pub(crate) fn open<'a>(
        &mut self,
        header: &Header,
        header_len: usize,
        data: &'a [u8],
        scratch: &'a mut OpenScratch,
    ) -> Option<&'a [u8]> {
        if header.ty != PacketType::Data || !self.requires_protection() {
            return Some(data);
        }
        let scratch = scratch.insert([0; MAX_DATAGRAM_SIZE]);
        let (Some(keys), Some(dst)) = (self.keys.as_ref(), scratch.get_mut(..data.len())) else {
            // No keys yet (a client before the server proved the key), or
            // longer than any datagram: nothing can open it.
            self.stats.decrypt_failed += 1;
            return None;
        };
        dst.copy_from_slice(data);
        let Ok(n) = keys.packet.open(header.pn, dst, header_len) else {
            self.stats.decrypt_failed += 1;
            return None;
        };
        let clear: &'a [u8; MAX_DATAGRAM_SIZE] = scratch;
        Some(&clear[..n])
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
        let mut scratch = None;
        let Some(bytes) = self.open(&header, header_len, data, &mut scratch) else {
            return;
        };
        if data.len() > MAX_DATAGRAM_SIZE {
            self.stats.malformed += 1;
            return;
        }
        let payload = bytes.get(header_len..).unwrap_or(&[]);
        let Ok(packet) = Packet::decode_payload(header, payload) else {
            self.stats.malformed += 1;
            return;
        };
        self.handle_packet(now, path, &packet, data.len());
    }
}
