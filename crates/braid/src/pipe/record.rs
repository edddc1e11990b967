//! The pipe's record layer: every byte of an authenticated connection, in
//! both directions, travels in AEAD-protected records — except, with
//! `--no-encrypt`, the payloads of blocks, which travel as clear bytes
//! right after the record of their header (below).
//!
//! After the handshake (`secure`) each connection holds two fresh keys, one
//! per direction (Noise's split of that connection's own handshake). A
//! record is
//!
//! ```text
//! len: u32 BE (1..=RECORD_MAX) | body: len bytes | tag: 16 bytes
//! ```
//!
//! sealed with the cipher of the connection's Noise protocol name
//! ([`suite`]: AES-256-GCM when encrypting, ChaCha20-Poly1305 with
//! `--no-encrypt`; AWS-LC's implementations) under the direction's key and
//! the nonce `0x00000000 || n` (`n` the record's number on this connection
//! and direction, 64 bits from 0, big-endian for AESGCM and little-endian
//! for ChaChaPoly: Noise's own nonce formats). Encrypted records
//! carry the ciphertext in `body` with `len` as associated data;
//! `--no-encrypt` records carry the plaintext in `body` and authenticate
//! `len || body` as associated data over an empty plaintext (the tag only).
//!
//! Clear payloads (`--no-encrypt` only): a block's header — a record, so
//! authenticated — carries the BLAKE3 of the block's payload, and the
//! payload follows the record as `len` clear bytes outside any record
//! ([`WriteHalf::send_clear`], [`ReadHalf::expect_clear`]). The receiver
//! checks it against that hash before anything uses it, so the payload is
//! authenticated through the hash (hash, then authenticate the hash), and
//! each side passes over a payload once — with the BLAKE3 the end-to-end
//! digest needs anyway — instead of a Poly1305 pass plus a copy into and
//! out of a record buffer.
//!
//! Rules (docs/SECURITY.md, "The pipe"): a key is used on one connection
//! attempt and one direction only, and `n` only grows, so no nonce repeats
//! under a key — a block re-sent on another connection travels under that
//! connection's keys. The receiver of a record does not read `n` from the
//! wire: it counts, so a record replayed, dropped or moved by an attacker
//! fails to open. A record that fails to open ends the connection (and is
//! counted); nothing of it reaches the caller.
//!
//! Main types: [`ReadHalf`] ([`AsyncRead`]; [`ReadHalf::read_payload`]
//! reads a block payload, opening encrypted records in place in the
//! block's own buffer) and [`WriteHalf`] ([`AsyncWrite`]; it encrypts what
//! it is given out of place, from the caller's bytes into its record
//! buffer in one pass), which pass bytes through unchanged on an insecure
//! connection; [`RecordKeys`].
//! Invariants: at most one record buffer per direction ([`RECORD_MAX`]
//! plus framing), allocated only after the peer was verified; a writer
//! must be flushed (`flush`) after a message the peer is waiting for.

use super::refusals::SecureStats;
use aws_lc_rs::aead::{Aad, LessSafeKey, Nonce};
use braid_core::transport::suite::Suite;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};

/// Records sealed under one key before both sides move to the next with
/// Noise's `Rekey()`: 2^20 records, at most 2^38 bytes (256 GiB) at
/// [`RECORD_MAX`], under TLS 1.3's usage limit for AES-GCM (RFC 8446
/// §5.5: 2^24.5 records of 2^14 bytes, about 2^38.5 bytes). Both sides
/// count records, so the switch needs no message.
pub const REKEY_EVERY: u64 = 1 << 20;

/// The largest record body (256 KiB: a fixed-mode default block is one
/// record, an adaptive block up to 8).
pub const RECORD_MAX: usize = 256 << 10;
/// Bytes of a record's length field.
pub const LEN_BYTES: usize = 4;
/// Bytes of a record's tag.
pub const TAG_BYTES: usize = 16;

/// The Noise cipher of a pipe connection (its handshake and its records):
/// AES-256-GCM when it encrypts, ChaCha20-Poly1305 when it only
/// authenticates (`--no-encrypt`: records there are small — headers,
/// acks — since block payloads travel outside them). The cipher follows
/// the mode the preface names, and the preface is in the handshake's
/// prologue.
pub fn suite(encrypt: bool) -> Suite {
    if encrypt {
        Suite::AesGcm
    } else {
        Suite::ChaChaPoly
    }
}

/// One direction's key and whether records are encrypted.
#[derive(Clone)]
pub struct RecordKeys {
    key: [u8; 32],
    encrypt: bool,
    rekey_every: u64,
}

impl std::fmt::Debug for RecordKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecordKeys")
            .field("encrypt", &self.encrypt)
            .finish_non_exhaustive()
    }
}

impl RecordKeys {
    /// One direction's 32-byte key; `encrypt: false` authenticates only.
    pub fn new(key: [u8; 32], encrypt: bool) -> Self {
        RecordKeys {
            key,
            encrypt,
            rekey_every: REKEY_EVERY,
        }
    }

    /// The same with a short key life, for tests of the rekeying.
    #[cfg(test)]
    fn rekeying_every(mut self, records: u64) -> Self {
        self.rekey_every = records;
        self
    }
}

/// A record direction's cipher and its next nonce.
struct Cipher {
    aead: LessSafeKey,
    encrypt: bool,
    next: u64,
    rekey_every: u64,
}

impl Cipher {
    fn new(k: &RecordKeys) -> Self {
        // Both AEADs take exactly 32-byte keys and `k.key` is `[u8; 32]`,
        // so making the key cannot fail.
        let aead = suite(k.encrypt).key(&k.key).unwrap();
        Cipher {
            aead,
            encrypt: k.encrypt,
            next: 0,
            rekey_every: k.rekey_every,
        }
    }

    /// Whether records are encrypted (else authenticated only).
    fn encrypts(&self) -> bool {
        self.encrypt
    }

    /// The next nonce (the cipher's Noise format: four zero bytes, then
    /// the counter), moving to the next key first every
    /// [`REKEY_EVERY`] records; `None` once the counter is spent.
    fn take_nonce(&mut self) -> Option<Nonce> {
        let n = self.next;
        self.next = n.checked_add(1)?;
        if n > 0 && n % self.rekey_every == 0 {
            self.rekey()?;
        }
        Some(suite(self.encrypt).nonce(n))
    }

    /// Noise's `Rekey()` (§11.3): the new key is the first 32 bytes of
    /// encrypting 32 zero bytes with nonce 2^64 − 1 (never a record's:
    /// the counter is spent before it) and no associated data.
    fn rekey(&mut self) -> Option<()> {
        let suite = suite(self.encrypt);
        let mut k = [0u8; 32];
        // The tag is not part of the new key.
        let _tag = self
            .aead
            .seal_in_place_separate_tag(suite.nonce(u64::MAX), Aad::empty(), &mut k)
            .ok()?;
        self.aead = suite.key(&k).ok()?;
        Some(())
    }

    /// Seals `plain` into the record `rec` (`LEN_BYTES + plain.len() +
    /// TAG_BYTES` bytes): writes the length field, the body and the tag.
    /// Encrypted records are sealed out of place, from `plain` straight
    /// into `rec` (one pass over the bytes, no copy before it); an
    /// authenticate-only record copies `plain` into its body and tags
    /// `len || body`.
    fn seal_record(&mut self, plain: &[u8], rec: &mut [u8]) -> io::Result<()> {
        let n = plain.len();
        if rec.len() != LEN_BYTES + n + TAG_BYTES || n == 0 || n > RECORD_MAX {
            return Err(io::Error::other("record buffer of the wrong size"));
        }
        let nonce = self.take_nonce().ok_or_else(spent)?;
        let (covered, tag) = rec.split_at_mut(LEN_BYTES + n);
        let (len, body) = covered.split_at_mut(LEN_BYTES);
        len.copy_from_slice(&(n as u32).to_be_bytes());
        let r = if self.encrypt {
            self.aead
                .seal_out_of_place_scatter(nonce, Aad::from(&*len), plain, body, &[], tag)
        } else {
            body.copy_from_slice(plain);
            self.aead
                .seal_in_place_separate_tag(nonce, Aad::from(&*covered), &mut [])
                .map(|t| tag.copy_from_slice(t.as_ref()))
        };
        r.map_err(|_| io::Error::other("record sealing failed"))
    }

    /// Opens a record in place: `rec` is the length, the body and the
    /// tag (at least `LEN_BYTES + TAG_BYTES` long).
    fn open(&mut self, rec: &mut [u8]) -> Result<(), ()> {
        if rec.len() < LEN_BYTES + TAG_BYTES {
            return Err(());
        }
        if self.encrypt {
            let (len, body_tag) = rec.split_at_mut(LEN_BYTES);
            self.open_encrypted(len, body_tag)
        } else {
            let nonce = self.take_nonce().ok_or(())?;
            let (covered, tag) = rec.split_at_mut(rec.len() - TAG_BYTES);
            self.aead
                .open_in_place(nonce, Aad::from(&*covered), tag)
                .map(drop)
                .map_err(drop)
        }
    }

    /// Opens an encrypted record whose length field and body-and-tag lie
    /// apart (a payload record read into the caller's buffer).
    fn open_encrypted(&mut self, len: &[u8], body_tag: &mut [u8]) -> Result<(), ()> {
        if !self.encrypt || body_tag.len() < TAG_BYTES {
            return Err(());
        }
        let nonce = self.take_nonce().ok_or(())?;
        self.aead
            .open_in_place(nonce, Aad::from(len), body_tag)
            .map(drop)
            .map_err(drop)
    }
}

fn spent() -> io::Error {
    io::Error::other("record counter exhausted")
}

/// The receiving half of a pipe connection: plain, or opening records.
pub struct ReadHalf {
    inner: OwnedReadHalf,
    open: Option<Box<Opener>>,
    /// Bytes still to pass through unopened ([`ReadHalf::expect_clear`]).
    clear: u64,
}

struct Opener {
    cipher: Cipher,
    stats: Arc<SecureStats>,
    /// Length field, body and tag of the record being read.
    buf: Vec<u8>,
    /// Bytes of `buf` read so far.
    filled: usize,
    /// Bytes of `buf` the current record needs.
    need: usize,
    /// Opened plaintext not yet handed out: `buf[start..end]`.
    start: usize,
    end: usize,
    /// A record failed: every later read fails too.
    failed: bool,
    /// Reading a payload ([`ReadHalf::read_payload`]): the current
    /// record's body and tag go into the caller's buffer from this offset
    /// instead of into `buf` (its length field is in `buf[..LEN_BYTES]`).
    in_place_at: Option<usize>,
    /// Records opened in the caller's buffer.
    #[cfg(test)]
    opened_in_place: usize,
}

impl std::fmt::Debug for ReadHalf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReadHalf")
            .field("protected", &self.open.is_some())
            .finish_non_exhaustive()
    }
}

impl Opener {
    fn new(keys: &RecordKeys, stats: Arc<SecureStats>) -> Self {
        Opener {
            cipher: Cipher::new(keys),
            stats,
            buf: vec![0; LEN_BYTES + RECORD_MAX + TAG_BYTES],
            filled: 0,
            need: LEN_BYTES,
            start: 0,
            end: 0,
            failed: false,
            in_place_at: None,
            #[cfg(test)]
            opened_in_place: 0,
        }
    }

    /// Where the next bytes from the socket go (never empty while no
    /// plaintext is pending and nothing failed).
    fn room(&mut self) -> &mut [u8] {
        &mut self.buf[self.filled..self.need]
    }

    /// Accounts for `got` bytes read into [`Opener::room`]: checks the
    /// length once it is complete, opens the record once it is complete
    /// (its plaintext is then `buf[start..end]`).
    fn advance(&mut self, got: usize) -> io::Result<()> {
        self.filled += got;
        if self.filled == LEN_BYTES && self.need == LEN_BYTES {
            let mut lb = [0u8; LEN_BYTES];
            lb.copy_from_slice(&self.buf[..LEN_BYTES]);
            let len = u32::from_be_bytes(lb) as usize;
            if len == 0 || len > RECORD_MAX {
                return Err(self.fail());
            }
            self.need = LEN_BYTES + len + TAG_BYTES;
        } else if self.filled == self.need && self.need > LEN_BYTES {
            let body_end = self.need - TAG_BYTES;
            if self.cipher.open(&mut self.buf[..self.need]).is_err() {
                return Err(self.fail());
            }
            self.start = LEN_BYTES;
            self.end = body_end;
            self.filled = 0;
            self.need = LEN_BYTES;
        }
        Ok(())
    }

    fn fail(&mut self) -> io::Error {
        self.failed = true;
        self.stats.count_unverified();
        unverified()
    }

    /// Hands out pending plaintext into `out`; how much.
    fn take(&mut self, out: &mut [u8]) -> usize {
        let n = (self.end - self.start).min(out.len());
        out[..n].copy_from_slice(&self.buf[self.start..self.start + n]);
        self.start += n;
        n
    }

    /// What a payload read ([`ReadHalf::read_payload`]) with `at` of
    /// `want` bytes in the caller's buffer does next.
    fn payload_next(&self, at: usize, want: usize) -> PayloadNext {
        if let (Some(start), Some(end)) = (self.in_place_at, self.in_place_end()) {
            return PayloadNext::InPlace { start, end };
        }
        if at >= want {
            return PayloadNext::Done;
        }
        // A record's length field is next, with nothing pending: the
        // record that follows may go straight into the caller's buffer.
        let reading_len = self.cipher.encrypts()
            && !self.failed
            && self.start == self.end
            && self.need == LEN_BYTES;
        if reading_len {
            PayloadNext::ReadLen
        } else {
            PayloadNext::Through
        }
    }

    /// After `got` bytes of a length field arrived in [`Self::room`]
    /// during a payload read with `at` of `want` bytes in the caller's
    /// buffer: once the length is known, the record's body and tag go
    /// into the caller's buffer at `at` if the body fits in what the
    /// payload still wants (else the record is read into `buf` as usual
    /// and handed out by copy).
    fn after_len(&mut self, got: usize, at: usize, want: usize) -> io::Result<PayloadStep> {
        self.advance(got)?;
        let known = self.filled == LEN_BYTES && self.need > LEN_BYTES;
        if known && self.need - LEN_BYTES - TAG_BYTES <= want.saturating_sub(at) {
            self.in_place_at = Some(at);
        }
        Ok(PayloadStep {
            plain: at..at,
            done: false,
        })
    }

    /// Where the record being read into the caller's buffer ends there.
    fn in_place_end(&self) -> Option<usize> {
        self.in_place_at.map(|at| at + self.need - LEN_BYTES)
    }

    /// After bytes of the record being read in place arrived in `data`
    /// (a payload of `want` bytes): opens it once it is whole, in place,
    /// and drops its tag.
    fn after_in_place(&mut self, data: &mut Vec<u8>, want: usize) -> io::Result<PayloadStep> {
        let (Some(start), Some(end)) = (self.in_place_at, self.in_place_end()) else {
            return Err(self.broken("no record is being read in place"));
        };
        if data.len() < end {
            // Ciphertext so far: the plaintext still ends where this
            // record starts.
            return Ok(PayloadStep {
                plain: start..start,
                done: false,
            });
        }
        if data.len() > end {
            return Err(self.broken("a payload read went past its record"));
        }
        self.in_place_at = None;
        let mut len = [0u8; LEN_BYTES];
        len.copy_from_slice(&self.buf[..LEN_BYTES]);
        if self
            .cipher
            .open_encrypted(&len, &mut data[start..])
            .is_err()
        {
            return Err(self.fail());
        }
        let plain_end = end - TAG_BYTES;
        data.truncate(plain_end);
        self.filled = 0;
        self.need = LEN_BYTES;
        #[cfg(test)]
        {
            self.opened_in_place += 1;
        }
        Ok(PayloadStep {
            plain: start..plain_end,
            done: plain_end == want,
        })
    }

    /// The caller broke the reading protocol: every later read fails too
    /// (not counted as an attack).
    fn broken(&mut self, why: &'static str) -> io::Error {
        self.failed = true;
        io::Error::other(why)
    }
}

/// The next step of a payload read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PayloadNext {
    /// The payload is complete.
    Done,
    /// Read a record's length field into the opener's buffer.
    ReadLen,
    /// Read the record going into the caller's buffer (its body from
    /// `start`) up to `end`.
    InPlace { start: usize, end: usize },
    /// Read through [`AsyncRead`] (pending plaintext, a clear payload, an
    /// insecure connection, a record reaching past the payload).
    Through,
}

/// What one step of [`ReadHalf::read_payload`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PayloadStep {
    /// Bytes of the buffer that became plaintext in this step (empty while
    /// a record is still arriving).
    pub plain: std::ops::Range<usize>,
    /// The payload is complete: the buffer holds exactly the bytes asked
    /// for, all of them plaintext.
    pub done: bool,
}

/// Entry points for the fuzz targets (`fuzz/`, corpus replayed in tests).
#[doc(hidden)]
pub mod fuzzing {
    use super::*;

    /// Feeds `data` as a received byte stream to a record opener: the first
    /// byte picks the mode and the read size, the second whether the
    /// stream is read as block payloads ([`ReadHalf::read_payload`]'s
    /// steps, records opened in the caller's buffer) or through
    /// [`AsyncRead`]; the rest is the stream. Nothing may panic or read
    /// outside a buffer.
    pub fn open_records(data: &[u8]) {
        let [first, second, rest @ ..] = data else {
            return;
        };
        let keys = RecordKeys::new([*first; 32], first & 1 == 0);
        let chunk = usize::from(first >> 1).max(1);
        let mut o = Opener::new(&keys, Arc::default());
        if second & 1 == 1 {
            read_payloads(&mut o, chunk, usize::from(*second).max(1), rest);
            return;
        }
        let mut rest = rest;
        let mut out = [0u8; 97];
        while !rest.is_empty() && !o.failed {
            while o.start < o.end {
                o.take(&mut out);
            }
            if !feed(&mut o, chunk, &mut rest) {
                return;
            }
        }
    }

    /// Moves up to `chunk` bytes of `rest` into the opener's buffer;
    /// false once a record failed.
    fn feed(o: &mut Opener, chunk: usize, rest: &mut &[u8]) -> bool {
        let room = o.room();
        let n = room.len().min(chunk).min(rest.len());
        room[..n].copy_from_slice(&rest[..n]);
        *rest = &rest[n..];
        o.advance(n).is_ok()
    }

    /// [`ReadHalf::read_payload`]'s steps over an in-memory stream: payloads
    /// of `unit`, 3 × `unit` + 1 and 17 bytes in turn, each socket read at
    /// most `chunk` bytes; each payload's plaintext checked against what
    /// the opener accounted for.
    fn read_payloads(o: &mut Opener, chunk: usize, unit: usize, mut rest: &[u8]) {
        let wants = [unit, 3 * unit + 1, 17];
        let mut data = Vec::new();
        let mut turn = 0;
        let mut covered = 0;
        while !o.failed {
            let want = wants[turn % wants.len()];
            let at = data.len();
            let step = match o.payload_next(at, want) {
                PayloadNext::Done => PayloadStep {
                    plain: at..at,
                    done: true,
                },
                _ if rest.is_empty() => return,
                PayloadNext::ReadLen => {
                    let room = o.room();
                    let n = room.len().min(chunk).min(rest.len());
                    room[..n].copy_from_slice(&rest[..n]);
                    rest = &rest[n..];
                    match o.after_len(n, at, want) {
                        Ok(step) => step,
                        Err(_) => return,
                    }
                }
                PayloadNext::InPlace { end, .. } => {
                    let n = (end - at).min(chunk).min(rest.len());
                    data.extend_from_slice(&rest[..n]);
                    rest = &rest[n..];
                    match o.after_in_place(&mut data, want) {
                        Ok(step) => step,
                        Err(_) => return,
                    }
                }
                // AsyncRead's own path (fuzzed by the other mode too).
                PayloadNext::Through if o.start < o.end => {
                    let n = (o.end - o.start).min(want - at);
                    data.extend_from_slice(&o.buf[o.start..o.start + n]);
                    o.start += n;
                    PayloadStep {
                        plain: at..data.len(),
                        done: data.len() == want,
                    }
                }
                PayloadNext::Through => {
                    if !feed(o, chunk, &mut rest) {
                        return;
                    }
                    PayloadStep {
                        plain: at..at,
                        done: false,
                    }
                }
            };
            assert_eq!(step.plain.start, covered, "plaintext reported in order");
            assert!(step.plain.end <= want.min(data.len()), "within the payload");
            covered = step.plain.end;
            if step.done {
                assert_eq!((covered, data.len()), (want, want), "exactly the payload");
                data.clear();
                covered = 0;
                turn += 1;
            }
        }
    }

    /// Seals `plain` into records with `keys` as a connection would (for
    /// the seed corpus and tests).
    pub fn seal_records(keys: &RecordKeys, plain: &[&[u8]]) -> Vec<u8> {
        let mut c = Cipher::new(keys);
        let mut wire = Vec::new();
        for p in plain {
            let mut rec = vec![0; LEN_BYTES + p.len() + TAG_BYTES];
            if c.seal_record(p, &mut rec).is_err() {
                return wire;
            }
            wire.extend_from_slice(&rec);
        }
        wire
    }
}

impl ReadHalf {
    /// Bytes pass through unchanged (an `--insecure` connection).
    pub fn plain(inner: OwnedReadHalf) -> Self {
        ReadHalf {
            inner,
            open: None,
            clear: 0,
        }
    }

    /// Opens records with `keys`; counts failures in `stats`.
    pub fn protected(inner: OwnedReadHalf, keys: &RecordKeys, stats: Arc<SecureStats>) -> Self {
        ReadHalf {
            inner,
            open: Some(Box::new(Opener::new(keys, stats))),
            clear: 0,
        }
    }

    /// Whether block payloads arrive as clear bytes outside the records
    /// (`--no-encrypt`: the record that carried the block's header
    /// authenticated its BLAKE3, and the caller checks the payload against
    /// it; see the module docs). False when encrypting (payloads are
    /// sealed) and on an insecure connection (nothing is).
    pub fn carries_clear_payloads(&self) -> bool {
        self.open.as_ref().is_some_and(|o| !o.cipher.encrypts())
    }

    /// The next `n` bytes are a block payload sent outside the records
    /// (only where [`Self::carries_clear_payloads`]): they pass through
    /// unopened, unchecked — the caller checks them against the hash the
    /// last record authenticated. Must come at a record boundary, with no
    /// opened bytes pending.
    ///
    /// # Errors
    /// `InvalidData` if records are encrypted here, a record is only
    /// partly read, or the last clear payload is not through yet (the
    /// sender broke the framing).
    pub fn expect_clear(&mut self, n: u64) -> io::Result<()> {
        let at_boundary = self.clear == 0
            && self.open.as_ref().is_some_and(|o| {
                !o.cipher.encrypts() && !o.failed && o.start == o.end && o.filled == 0
            });
        if !at_boundary {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "a clear payload where records were expected",
            ));
        }
        self.clear = n;
        Ok(())
    }

    /// Counts a clear payload that did not match its authenticated hash
    /// (as a record that failed to open is counted).
    pub fn count_unverified(&self) {
        if let Some(o) = &self.open {
            o.stats.count_unverified();
        }
    }

    /// The socket underneath.
    pub fn socket(&self) -> &OwnedReadHalf {
        &self.inner
    }

    /// Records opened in place by [`Self::read_payload`] so far.
    #[cfg(test)]
    fn opened_in_place(&self) -> usize {
        self.open.as_ref().map_or(0, |o| o.opened_in_place)
    }

    /// Whether records are encrypted here (else authenticated only, or
    /// nothing at all on an insecure connection).
    pub fn encrypts(&self) -> bool {
        self.open.as_ref().is_some_and(|o| o.cipher.encrypts())
    }

    /// One step of reading a block payload of `want` bytes, appended to
    /// `data`: at most one read from the socket where records are opened
    /// in place; otherwise one [`AsyncRead`] read, which may hand out
    /// plaintext already opened or read a whole record first. Call it until
    /// [`PayloadStep::done`]; in between, `data` may hold a record still
    /// arriving past the plaintext, and nothing else may read this half.
    ///
    /// Where records are encrypted, each record that lies within the
    /// payload is read straight into `data` and opened there: no copy out
    /// of a record buffer (reserve `want + TAG_BYTES` so that the last tag
    /// fits without a reallocation). Anything else — a clear payload, an
    /// insecure connection, a record that reaches past the payload or
    /// plaintext already pending — goes through [`AsyncRead`].
    ///
    /// # Errors
    /// `UnexpectedEof` if the connection ends first; a record that fails
    /// to open, as for [`AsyncRead`]. After an error, or a step dropped
    /// before it finished (a timeout), the half is not to be read again
    /// (every later read of an opened record fails).
    pub async fn read_payload(
        &mut self,
        data: &mut Vec<u8>,
        want: usize,
    ) -> io::Result<PayloadStep> {
        use tokio::io::AsyncReadExt;
        let at = data.len();
        let eof = || io::Error::from(io::ErrorKind::UnexpectedEof);
        let inner = &mut self.inner;
        let opener = self.open.as_deref_mut().filter(|_| self.clear == 0);
        let Some((next, o)) = opener.map(|o| (o.payload_next(at, want), o)) else {
            return self.read_payload_through(data, want).await;
        };
        let step = match next {
            PayloadNext::Done => Ok(PayloadStep {
                plain: at..at,
                done: true,
            }),
            PayloadNext::Through => return self.read_payload_through(data, want).await,
            PayloadNext::ReadLen => match inner.read(o.room()).await {
                Ok(0) => Err(eof()),
                Ok(got) => o.after_len(got, at, want),
                Err(e) => Err(e),
            },
            PayloadNext::InPlace { end, .. } => {
                match inner.take((end - at) as u64).read_buf(data).await {
                    Ok(0) => Err(eof()),
                    Ok(_) => o.after_in_place(data, want),
                    Err(e) => Err(e),
                }
            }
        };
        if step.is_err() {
            o.failed = true;
        }
        step
    }

    /// A payload step through [`AsyncRead`].
    async fn read_payload_through(
        &mut self,
        data: &mut Vec<u8>,
        want: usize,
    ) -> io::Result<PayloadStep> {
        use tokio::io::AsyncReadExt;
        let at = data.len();
        if at < want {
            let got = (&mut *self).take((want - at) as u64).read_buf(data).await?;
            if got == 0 {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
        }
        Ok(PayloadStep {
            plain: at..data.len(),
            done: data.len() == want,
        })
    }
}

fn unverified() -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        "a record failed authentication (altered, replayed or reordered on the way)",
    )
}

impl AsyncRead for ReadHalf {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        out: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let me = self.get_mut();
        if me.clear > 0 {
            // A clear payload: straight from the socket into the caller's
            // buffer, no copy (the caller reads the payload through a
            // `take` of its length, so its buffer never reaches past it).
            if out.remaining() as u64 <= me.clear {
                let before = out.filled().len();
                ready!(Pin::new(&mut me.inner).poll_read(cx, out))?;
                me.clear -= (out.filled().len() - before) as u64;
            } else {
                // `clear` < `out.remaining()`, a usize.
                let n = me.clear as usize;
                let mut part = ReadBuf::new(out.initialize_unfilled_to(n));
                ready!(Pin::new(&mut me.inner).poll_read(cx, &mut part))?;
                let got = part.filled().len();
                out.advance(got);
                me.clear -= got as u64;
            }
            return Poll::Ready(Ok(()));
        }
        let Some(o) = me.open.as_deref_mut() else {
            return Pin::new(&mut me.inner).poll_read(cx, out);
        };
        loop {
            if o.failed {
                return Poll::Ready(Err(unverified()));
            }
            if o.start < o.end {
                // put_slice: no zeroing of the caller's spare capacity.
                let n = (o.end - o.start).min(out.remaining());
                out.put_slice(&o.buf[o.start..o.start + n]);
                o.start += n;
                return Poll::Ready(Ok(()));
            }
            let mut rb = ReadBuf::new(o.room());
            ready!(Pin::new(&mut me.inner).poll_read(cx, &mut rb))?;
            let got = rb.filled().len();
            if got == 0 {
                return Poll::Ready(if o.filled == 0 {
                    Ok(()) // a clean end between records
                } else {
                    Err(io::ErrorKind::UnexpectedEof.into())
                });
            }
            o.advance(got)?;
        }
    }
}

/// The sending half of a pipe connection: plain, or sealing records.
pub struct WriteHalf {
    inner: OwnedWriteHalf,
    seal: Option<Box<Sealer>>,
    /// Bytes still to pass through unsealed ([`WriteHalf::send_clear`]).
    clear: u64,
}

struct Sealer {
    cipher: Cipher,
    /// Room for one record (`LEN_BYTES + RECORD_MAX + TAG_BYTES`); the
    /// sealed record being written is `buf[..end]`, of which
    /// `buf[pos..end]` is still to go.
    buf: Box<[u8]>,
    pos: usize,
    end: usize,
    /// A record failed to seal: its nonce is spent, so the peer would
    /// fail every later record; every later write fails too.
    failed: bool,
}

impl std::fmt::Debug for WriteHalf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WriteHalf")
            .field("protected", &self.seal.is_some())
            .finish_non_exhaustive()
    }
}

impl WriteHalf {
    /// Bytes pass through unchanged (an `--insecure` connection).
    pub fn plain(inner: OwnedWriteHalf) -> Self {
        WriteHalf {
            inner,
            seal: None,
            clear: 0,
        }
    }

    /// Seals everything written into records with `keys`.
    pub fn protected(inner: OwnedWriteHalf, keys: &RecordKeys) -> Self {
        let s = Sealer {
            cipher: Cipher::new(keys),
            buf: vec![0; LEN_BYTES + RECORD_MAX + TAG_BYTES].into_boxed_slice(),
            pos: 0,
            end: 0,
            failed: false,
        };
        WriteHalf {
            inner,
            seal: Some(Box::new(s)),
            clear: 0,
        }
    }

    /// Whether block payloads go out as clear bytes outside the records
    /// (see [`ReadHalf::carries_clear_payloads`]).
    pub fn carries_clear_payloads(&self) -> bool {
        self.seal.as_ref().is_some_and(|s| !s.cipher.encrypts())
    }

    /// The next `n` bytes written are a block payload whose BLAKE3 the
    /// last record (its header) carried: they go out unsealed, straight
    /// from the caller's buffer. Only where
    /// [`Self::carries_clear_payloads`].
    ///
    /// # Errors
    /// `InvalidInput` where records are encrypted (a payload must never
    /// leave in clear text there), on an insecure connection, or while the
    /// last clear payload is not written yet.
    pub fn send_clear(&mut self, n: u64) -> io::Result<()> {
        if !self.carries_clear_payloads() || self.clear != 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "clear payloads only on an authenticate-only connection",
            ));
        }
        self.clear = n;
        Ok(())
    }

    /// The socket underneath (socket options).
    pub fn socket(&self) -> &OwnedWriteHalf {
        &self.inner
    }

    /// Writes out the sealed record still buffered, if any.
    fn poll_drain(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let Some(s) = self.seal.as_deref_mut() else {
            return Poll::Ready(Ok(()));
        };
        while s.pos < s.end {
            let n = ready!(Pin::new(&mut self.inner).poll_write(cx, &s.buf[s.pos..s.end]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            s.pos += n;
        }
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for WriteHalf {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let me = self.get_mut();
        if me.seal.is_none() {
            return Pin::new(&mut me.inner).poll_write(cx, data);
        }
        ready!(me.poll_drain(cx))?;
        if me.clear > 0 {
            let n = usize::try_from(me.clear)
                .unwrap_or(usize::MAX)
                .min(data.len());
            let put = ready!(Pin::new(&mut me.inner).poll_write(cx, &data[..n]))?;
            me.clear -= put as u64;
            return Poll::Ready(Ok(put));
        }
        if data.is_empty() {
            return Poll::Ready(Ok(0));
        }
        let Some(s) = me.seal.as_deref_mut() else {
            return Poll::Ready(Ok(0)); // unreachable: checked above
        };
        if s.failed {
            return Poll::Ready(Err(io::Error::other("an earlier record failed to seal")));
        }
        let n = data.len().min(RECORD_MAX);
        let end = LEN_BYTES + n + TAG_BYTES;
        if let Err(e) = s.cipher.seal_record(&data[..n], &mut s.buf[..end]) {
            s.failed = true;
            return Poll::Ready(Err(e));
        }
        (s.pos, s.end) = (0, end);
        // Start writing now; what the socket does not take goes out on
        // the next write or flush.
        if let Poll::Ready(Err(e)) = me.poll_drain(cx) {
            return Poll::Ready(Err(e));
        }
        Poll::Ready(Ok(n))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let me = self.get_mut();
        ready!(me.poll_drain(cx))?;
        Pin::new(&mut me.inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let me = self.get_mut();
        ready!(me.poll_drain(cx))?;
        Pin::new(&mut me.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::fuzzing::seal_records;
    use super::*;

    /// Opens a wire image with a fresh opener; returns the plaintext or
    /// the first failure.
    fn open_all(keys: &RecordKeys, mut wire: &[u8]) -> Result<Vec<u8>, ()> {
        let mut o = Opener::new(keys, Arc::default());
        let mut plain = Vec::new();
        let mut out = [0u8; 1000];
        while !wire.is_empty() {
            let room = o.room();
            let n = room.len().min(wire.len());
            room[..n].copy_from_slice(&wire[..n]);
            wire = &wire[n..];
            o.advance(n).map_err(|_| ())?;
            while o.start < o.end {
                let k = o.take(&mut out);
                plain.extend_from_slice(&out[..k]);
            }
        }
        Ok(plain)
    }

    #[test]
    fn records_roundtrip_in_both_modes() {
        for encrypt in [true, false] {
            let k = RecordKeys::new([3; 32], encrypt);
            let wire = seal_records(&k, &[b"hello", b" ", b"world"]);
            assert_eq!(open_all(&k, &wire).unwrap(), b"hello world");
            assert_eq!(contains(&wire, b"hello"), !encrypt);
        }
    }

    #[test]
    fn both_sides_rekey_at_the_same_record_and_the_key_changes() {
        for encrypt in [true, false] {
            let k = RecordKeys::new([3; 32], encrypt).rekeying_every(2);
            let msgs: [&[u8]; 5] = [b"a", b"b", b"c", b"d", b"e"];
            let wire = seal_records(&k, &msgs);
            assert_eq!(open_all(&k, &wire).unwrap(), b"abcde");
            // Records 0 and 1 are under the first key either way; record 2
            // is under the next one, so a side that never rekeys fails it.
            let plain = RecordKeys::new([3; 32], encrypt);
            let first_two = (4 + 1 + 16) * 2;
            assert_eq!(seal_records(&plain, &msgs)[..first_two], wire[..first_two]);
            assert!(open_all(&plain, &wire).is_err());
        }
    }

    #[test]
    fn encrypted_records_are_aes_256_gcm_with_the_noise_nonce() {
        // Record 1 of an encrypted connection, sealed by hand with AWS-LC's
        // AES-256-GCM and Noise's AESGCM nonce (big-endian counter).
        let k = RecordKeys::new([5; 32], true);
        let wire = seal_records(&k, &[b"x", b"hello"]);
        let key = Suite::AesGcm.key(&[5; 32]).unwrap();
        let mut body = *b"hello";
        let len = 5u32.to_be_bytes();
        let tag = key
            .seal_in_place_separate_tag(Suite::AesGcm.nonce(1), Aad::from(&len), &mut body)
            .unwrap();
        let second = &wire[4 + 1 + 16..];
        assert_eq!(&second[..4], &len);
        assert_eq!(&second[4..9], &body);
        assert_eq!(&second[9..], tag.as_ref());
        assert_eq!(suite(false), Suite::ChaChaPoly);
    }

    /// Record 1 of each mode against bytes computed by another
    /// implementation (Python's `cryptography` 48: `AESGCM` and
    /// `ChaCha20Poly1305`), so a change of AEAD library cannot change the
    /// wire unnoticed.
    #[test]
    fn records_match_an_independent_implementation() {
        let hex = |s: &str| -> Vec<u8> {
            (0..s.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
                .collect()
        };
        for (encrypt, want) in [
            (true, "00000005a982ede10e84a0af196f13b7acac93a42f9080db2f"),
            (false, "0000000568656c6c6f753fb57590f57f200a985af67ffb6060"),
        ] {
            let k = RecordKeys::new([5; 32], encrypt);
            let wire = seal_records(&k, &[b"x", b"hello"]);
            assert_eq!(&wire[4 + 1 + 16..], &hex(want)[..], "encrypt: {encrypt}");
        }
    }

    /// [`WriteHalf`] over a socket that takes a little at a time: records
    /// longer than [`RECORD_MAX`] are cut, a record the socket took only
    /// part of is finished before the next is sealed, and all of it opens
    /// in order on the far side.
    #[tokio::test]
    async fn the_writer_finishes_each_record_before_sealing_the_next() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let keys = RecordKeys::new([3; 32], true);
        let data: Vec<u8> = (0..RECORD_MAX + 10 + 3).map(|i| (i % 253) as u8).collect();
        let (a, b) = data.split_at(RECORD_MAX + 10);
        let (a, b) = (a.to_vec(), b.to_vec());
        let k = keys.clone();
        let writer = tokio::spawn(async move {
            let s = tokio::net::TcpStream::connect(addr).await.unwrap();
            socket2::SockRef::from(&s)
                .set_send_buffer_size(4096)
                .unwrap();
            let (_rd, wr) = s.into_split();
            let mut w = WriteHalf::protected(wr, &k);
            w.write_all(&a).await.unwrap();
            w.write_all(&b).await.unwrap();
            w.flush().await.unwrap();
            w.shutdown().await.unwrap();
        });
        // A send buffer of a few KiB takes a 256 KiB record over many
        // writes, however fast this side reads.
        let (s, _) = l.accept().await.unwrap();
        let (rd, _wr) = s.into_split();
        let mut r = ReadHalf::protected(rd, &keys, Arc::default());
        let mut got = Vec::new();
        r.read_to_end(&mut got).await.unwrap();
        writer.await.unwrap();
        assert_eq!(got, data);
    }

    /// A loopback TCP connection whose far end sends `wire` in pieces of
    /// `piece` bytes, a millisecond apart (so records arrive over several
    /// reads), then closes; read through a protected [`ReadHalf`].
    async fn reader_of(
        keys: &RecordKeys,
        wire: Vec<u8>,
        piece: usize,
    ) -> (ReadHalf, Arc<SecureStats>) {
        use tokio::io::AsyncWriteExt;
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        tokio::spawn(async move {
            let mut c = tokio::net::TcpStream::connect(addr).await.unwrap();
            for p in wire.chunks(piece) {
                c.write_all(p).await.unwrap();
                tokio::time::sleep(std::time::Duration::from_millis(1)).await;
            }
        });
        let (s, _) = l.accept().await.unwrap();
        let stats = Arc::<SecureStats>::default();
        let (rd, _wr) = s.into_split();
        (ReadHalf::protected(rd, keys, Arc::clone(&stats)), stats)
    }

    /// Reads one payload of `want` bytes to the end; the plaintext ranges
    /// the steps reported must tile it.
    async fn payload(r: &mut ReadHalf, want: usize) -> io::Result<Vec<u8>> {
        let mut data = Vec::with_capacity(want + TAG_BYTES);
        let mut covered = 0;
        loop {
            let step = r.read_payload(&mut data, want).await?;
            assert_eq!(step.plain.start, covered, "plaintext reported in order");
            covered = step.plain.end;
            if step.done {
                assert_eq!((covered, data.len()), (want, want));
                return Ok(data);
            }
        }
    }

    fn bytes(n: usize, seed: u8) -> Vec<u8> {
        (0..n).map(|i| (i as u8).wrapping_mul(31) ^ seed).collect()
    }

    #[tokio::test]
    async fn payloads_open_in_place_whatever_the_record_cut() {
        use tokio::io::AsyncReadExt;
        let k = RecordKeys::new([9; 32], true);
        let (head, a, b, c) = (
            bytes(10, 1),
            bytes(200_000, 2),
            bytes(70_000, 3),
            bytes(5_000, 4),
        );
        let wire = seal_records(
            &k,
            &[
                &head,         // a header, read through AsyncRead
                &a[..150_000], // payload `a` in two records: in place
                &a[150_000..],
                &b[..40_000], // payload `b`: one record in place, then
                &[&b[40_000..], &c[..]].concat(), // one that reaches into `c`
            ],
        );
        let (mut r, stats) = reader_of(&k, wire, 60_000).await;
        let mut h = [0u8; 10];
        r.read_exact(&mut h).await.unwrap();
        assert_eq!(h[..], head[..]);
        assert_eq!(payload(&mut r, a.len()).await.unwrap(), a);
        assert_eq!(r.opened_in_place(), 2, "both of a's records in place");
        assert_eq!(payload(&mut r, b.len()).await.unwrap(), b);
        assert_eq!(r.opened_in_place(), 3, "b's first record in place");
        // `c` was opened with b's tail: handed out from the record buffer.
        assert_eq!(payload(&mut r, c.len()).await.unwrap(), c);
        assert_eq!(r.opened_in_place(), 3);
        assert_eq!(payload(&mut r, 0).await.unwrap(), b"");
        let end = payload(&mut r, 1).await.unwrap_err();
        assert_eq!(end.kind(), io::ErrorKind::UnexpectedEof);
        assert_eq!(stats.snapshot().unverified, 0);
    }

    #[tokio::test]
    async fn a_payload_record_altered_or_cut_short_is_refused() {
        let k = RecordKeys::new([9; 32], true);
        let p = bytes(100_000, 5);
        let mut wire = seal_records(&k, &[&p]);
        let whole = wire.clone();
        wire[50_000] ^= 1;
        let (mut r, stats) = reader_of(&k, wire, 30_000).await;
        let e = payload(&mut r, p.len()).await.unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData);
        assert_eq!(stats.snapshot().unverified, 1, "counted");
        // Whatever comes next fails too.
        assert!(payload(&mut r, 1).await.is_err());
        let (mut r, _) = reader_of(&k, whole[..whole.len() - 1].to_vec(), 1 << 20).await;
        let e = payload(&mut r, p.len()).await.unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof);
        // Another key's record fails to open in place.
        let (mut r, stats) = reader_of(&RecordKeys::new([8; 32], true), whole, 1 << 20).await;
        assert!(payload(&mut r, p.len()).await.is_err());
        assert_eq!(stats.snapshot().unverified, 1);
    }

    #[tokio::test]
    async fn authenticate_only_payloads_read_through_the_records() {
        // Without encryption payloads are never opened in place: a payload
        // read of record contents goes through AsyncRead.
        let k = RecordKeys::new([9; 32], false);
        let p = bytes(3_000, 6);
        let (mut r, _) = reader_of(&k, seal_records(&k, &[&p[..1000], &p[1000..]]), 700).await;
        assert!(!r.encrypts());
        assert_eq!(payload(&mut r, p.len()).await.unwrap(), p);
        assert_eq!(r.opened_in_place(), 0);
    }

    fn contains(h: &[u8], n: &[u8]) -> bool {
        h.windows(n.len()).any(|w| w == n)
    }

    #[test]
    fn altered_replayed_reordered_or_other_key_records_fail() {
        let k = RecordKeys::new([3; 32], true);
        let a = seal_records(&k, &[b"one", b"two"]);
        let one = a[..4 + 3 + 16].to_vec();
        let two = a[4 + 3 + 16..].to_vec();
        let mut flipped = a.clone();
        flipped[6] ^= 1;
        assert!(open_all(&k, &flipped).is_err(), "altered");
        assert!(
            open_all(&k, &[one.clone(), one.clone()].concat()).is_err(),
            "replayed"
        );
        assert!(open_all(&k, &[two, one].concat()).is_err(), "reordered");
        assert!(
            open_all(&RecordKeys::new([4; 32], true), &a).is_err(),
            "other key"
        );
        // Authenticate-only: the length and the clear body are covered too.
        let k = RecordKeys::new([3; 32], false);
        let mut clear = seal_records(&k, &[b"one"]);
        clear[5] ^= 1;
        assert!(open_all(&k, &clear).is_err(), "altered clear text");
        assert!(open_all(&k, &[0, 0, 0, 0]).is_err(), "empty record");
        assert!(
            open_all(&k, &[0xff, 0xff, 0xff, 0xff]).is_err(),
            "huge record"
        );
    }
}
