//! Packet protection: what makes every DATA packet of a keyed connection
//! authentic (and, by default, confidential).
//!
//! After the Noise handshake ([`super::auth`]) both ends hold the two
//! cipher keys of Noise's `Split()`: the initiator (client) seals with the
//! first and opens with the second, the responder the other way round.
//! Every DATA packet is then one Noise `EncryptWithAd` under its
//! direction's key, ChaCha20-Poly1305 as the protocol name
//! (`…_ChaChaPoly_…`) says, with an explicit nonce, as WireGuard does:
//!
//! ```text
//! nonce = 32 zero bits || packet number (64 bits, little-endian)   (Noise ChaChaPoly)
//! ad    = the cleartext header (type, version, destination id, packet number)
//!
//! encrypting:   header || ChaCha20(frames) || tag(16)
//! --no-encrypt: header || frames || tag(16)          the tag over an empty
//!                                                     plaintext, ad = header || frames
//! ```
//!
//! The packet number is the header's full 62-bit number, never truncated,
//! and a sender never reuses one, so no nonce repeats under a key.
//! ChaCha20-Poly1305 has no practical per-key packet limit at these counts
//! (RFC 9001 §6.6: confidentiality beyond 2^62 packets, integrity after
//! 2^36 forgery attempts), so no key update is needed.
//!
//! Main type: `PacketKeys` (crate-internal: built only by the
//! handshake); [`Protection`] (the negotiated mode); [`TAG_LEN`].
//!
//! Invariants: sealing and opening work in place on the caller's buffer
//! and allocate nothing; a packet that does not open leaves the buffer's
//! contents unspecified and must be dropped whole.

use super::suite::Suite;
use aws_lc_rs::aead::{Aad, LessSafeKey, Tag};

/// Bytes the AEAD adds to every protected packet.
pub const TAG_LEN: usize = 16;

/// How a keyed connection protects its packets; both ends must agree (the
/// handshake carries each side's choice inside its Noise messages and
/// refuses a mismatch).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Protection {
    /// Encrypted and authenticated (the default).
    #[default]
    Encrypt,
    /// Authenticated only (`--no-encrypt`): frames travel in clear, the tag
    /// covers header and frames.
    IntegrityOnly,
}

impl Protection {
    /// The byte that stands for the mode in the handshake's payloads.
    pub(crate) const fn code(self) -> u8 {
        match self {
            Protection::Encrypt => 1,
            Protection::IntegrityOnly => 2,
        }
    }

    /// The mode of a handshake payload byte, if it is one.
    pub(crate) const fn from_code(c: u8) -> Option<Self> {
        match c {
            1 => Some(Protection::Encrypt),
            2 => Some(Protection::IntegrityOnly),
            _ => None,
        }
    }

    /// How the mode reads in an error message.
    pub const fn describe(self) -> &'static str {
        match self {
            Protection::Encrypt => "encrypts",
            Protection::IntegrityOnly => "does not encrypt (--no-encrypt)",
        }
    }
}

/// Why a packet could not be sealed or opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProtectionError {
    /// The packet is shorter than a header and a tag, or its tag does not
    /// verify: forged, altered, or sealed under another key.
    #[error("packet does not open under the connection's key")]
    Unauthentic,
    /// The key bytes were refused by the AEAD (a bug, not the peer's
    /// doing).
    #[error("packet key could not be set up")]
    Setup,
}

/// The two directions' AEAD keys of one connection.
pub(crate) struct PacketKeys {
    seal: LessSafeKey,
    open: LessSafeKey,
    mode: Protection,
    suite: Suite,
}

impl core::fmt::Debug for PacketKeys {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("PacketKeys")
            .field("mode", &self.mode)
            .finish_non_exhaustive()
    }
}

impl PacketKeys {
    /// Keys from the raw split of a handshake with cipher `suite`: `send`
    /// seals what this side sends, `recv` opens what it receives.
    pub(crate) fn new(
        send: &[u8; 32],
        recv: &[u8; 32],
        mode: Protection,
        suite: Suite,
    ) -> Result<Self, ProtectionError> {
        let key = |k: &[u8; 32]| suite.key(k).map_err(|_| ProtectionError::Setup);
        Ok(PacketKeys {
            seal: key(send)?,
            open: key(recv)?,
            mode,
            suite,
        })
    }

    /// The negotiated mode.
    pub(crate) fn mode(&self) -> Protection {
        self.mode
    }

    /// Seals the packet in `buf[start..]` (its header is the first
    /// `header_len` bytes, packet number `pn`) in place and appends the
    /// tag. The caller leaves [`TAG_LEN`] bytes of room under its size
    /// limit; `buf` only grows within its capacity after the first packet.
    pub(crate) fn seal(
        &self,
        pn: u64,
        buf: &mut Vec<u8>,
        start: usize,
        header_len: usize,
    ) -> Result<(), ProtectionError> {
        let packet = buf.get_mut(start..).ok_or(ProtectionError::Setup)?;
        let tag: Tag = match self.mode {
            Protection::Encrypt => {
                if packet.len() < header_len {
                    return Err(ProtectionError::Setup);
                }
                let (header, body) = packet.split_at_mut(header_len);
                self.seal.seal_in_place_separate_tag(
                    self.suite.nonce(pn),
                    Aad::from(&*header),
                    body,
                )
            }
            Protection::IntegrityOnly => self.seal.seal_in_place_separate_tag(
                self.suite.nonce(pn),
                Aad::from(&*packet),
                &mut [],
            ),
        }
        .map_err(|_| ProtectionError::Setup)?;
        buf.extend_from_slice(tag.as_ref());
        Ok(())
    }

    /// Opens the datagram in `packet` (header of `header_len` bytes, packet
    /// number `pn`) in place. Returns the length of the cleartext packet,
    /// header and frames, at the front of `packet`.
    ///
    /// # Errors
    /// [`ProtectionError::Unauthentic`] for anything that does not verify;
    /// the packet must then be dropped without looking further.
    pub(crate) fn open(
        &self,
        pn: u64,
        packet: &mut [u8],
        header_len: usize,
    ) -> Result<usize, ProtectionError> {
        let len = packet.len();
        if len < header_len + TAG_LEN {
            return Err(ProtectionError::Unauthentic);
        }
        match self.mode {
            Protection::Encrypt => {
                let (header, body) = packet.split_at_mut(header_len);
                let plain = self
                    .open
                    .open_in_place(self.suite.nonce(pn), Aad::from(&*header), body)
                    .map_err(|_| ProtectionError::Unauthentic)?;
                Ok(header_len + plain.len())
            }
            Protection::IntegrityOnly => {
                let (covered, tag) = packet.split_at_mut(len - TAG_LEN);
                self.open
                    .open_in_place(self.suite.nonce(pn), Aad::from(&*covered), tag)
                    .map_err(|_| ProtectionError::Unauthentic)?;
                Ok(len - TAG_LEN)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair(mode: Protection) -> (PacketKeys, PacketKeys) {
        let (a, b) = ([1u8; 32], [2u8; 32]);
        (
            PacketKeys::new(&a, &b, mode, Suite::ChaChaPoly).unwrap(),
            PacketKeys::new(&b, &a, mode, Suite::ChaChaPoly).unwrap(),
        )
    }

    fn sealed(k: &PacketKeys, pn: u64) -> Vec<u8> {
        let mut buf = b"HEADERframes in clear".to_vec();
        k.seal(pn, &mut buf, 0, 6).unwrap();
        buf
    }

    #[test]
    fn round_trips_in_both_modes() {
        for mode in [Protection::Encrypt, Protection::IntegrityOnly] {
            let (client, server) = pair(mode);
            let mut buf = sealed(&client, 7);
            assert_eq!(buf.len(), 21 + TAG_LEN);
            let visible = buf.windows(6).any(|w| w == b"frames");
            assert_eq!(visible, mode == Protection::IntegrityOnly);
            let n = server.open(7, &mut buf, 6).unwrap();
            assert_eq!(&buf[..n], b"HEADERframes in clear");
        }
    }

    #[test]
    fn tampering_wrong_number_or_direction_do_not_open() {
        for mode in [Protection::Encrypt, Protection::IntegrityOnly] {
            let (client, server) = pair(mode);
            let good = sealed(&client, 7);
            for i in 0..good.len() {
                let mut bad = good.clone();
                bad[i] ^= 0x40;
                assert_eq!(
                    server.open(7, &mut bad, 6),
                    Err(ProtectionError::Unauthentic),
                    "flipped byte {i}"
                );
            }
            assert!(server.open(8, &mut good.clone(), 6).is_err());
            // What a side sealed, it cannot open itself (per-direction keys).
            assert!(client.open(7, &mut good.clone(), 6).is_err());
            assert!(server.open(7, &mut good.clone()[..20], 6).is_err());
            assert!(server.open(7, &mut [], 0).is_err());
        }
    }
}
