//! The pipe's record layer: every byte of an authenticated connection, in
//! both directions, travels in AEAD-protected records.
//!
//! After the handshake (`secure`) each connection holds two fresh keys, one
//! per direction (Noise's split of that connection's own handshake). A
//! record is
//!
//! ```text
//! len: u32 BE (1..=RECORD_MAX) | body: len bytes | tag: 16 bytes
//! ```
//!
//! sealed with ChaCha20-Poly1305 (the cipher of the Noise protocol name)
//! under the direction's key and the nonce `0x00000000 || n` (`n` the
//! record's number on this connection and direction, 64-bit
//! little-endian, from 0: Noise's own nonce format). Encrypted records
//! carry the ciphertext in `body` with `len` as associated data;
//! `--no-encrypt` records carry the plaintext in `body` and authenticate
//! `len || body` as associated data over an empty plaintext (the tag only).
//!
//! Rules (docs/SECURITY.md, "The pipe"): a key is used on one connection
//! attempt and one direction only, and `n` only grows, so no nonce repeats
//! under a key — a block re-sent on another connection travels under that
//! connection's keys. The receiver of a record does not read `n` from the
//! wire: it counts, so a record replayed, dropped or moved by an attacker
//! fails to open. A record that fails to open ends the connection (and is
//! counted); nothing of it reaches the caller.
//!
//! Main types: [`ReadHalf`] ([`AsyncRead`]) and [`WriteHalf`]
//! ([`AsyncWrite`]), which pass bytes through unchanged on an insecure
//! connection; [`RecordKeys`]. Invariants: at most one record buffer per
//! direction ([`RECORD_MAX`] plus framing), allocated only after the peer
//! was verified; a writer must be flushed (`flush`) after a message the
//! peer is waiting for.

use super::secure::SecureStats;
use chacha20poly1305::aead::AeadInPlace;
use chacha20poly1305::{ChaCha20Poly1305, KeyInit, Nonce, Tag};
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};

/// The largest record body (256 KiB: a default block is one record).
pub const RECORD_MAX: usize = 256 << 10;
/// Bytes of a record's length field.
pub const LEN_BYTES: usize = 4;
/// Bytes of a record's tag.
pub const TAG_BYTES: usize = 16;

/// One direction's key and whether records are encrypted.
#[derive(Clone)]
pub struct RecordKeys {
    key: [u8; 32],
    encrypt: bool,
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
        RecordKeys { key, encrypt }
    }
}

/// A record direction's cipher and its next nonce.
struct Cipher {
    aead: ChaCha20Poly1305,
    encrypt: bool,
    next: u64,
}

impl Cipher {
    fn new(k: &RecordKeys) -> Self {
        Cipher {
            aead: ChaCha20Poly1305::new(&k.key.into()),
            encrypt: k.encrypt,
            next: 0,
        }
    }

    /// The next nonce (Noise's format: four zero bytes, then the counter
    /// little-endian); `None` once the counter is spent.
    fn take_nonce(&mut self) -> Option<Nonce> {
        let n = self.next;
        self.next = n.checked_add(1)?;
        let mut b = [0u8; 12];
        b[4..].copy_from_slice(&n.to_le_bytes());
        Some(b.into())
    }

    /// Seals `rec[LEN_BYTES..]` (the body) in place, with `rec[..LEN_BYTES]`
    /// as the length; returns the tag.
    fn seal(&mut self, rec: &mut [u8]) -> io::Result<Tag> {
        let nonce = self.take_nonce().ok_or_else(spent)?;
        let r = if self.encrypt {
            let (len, body) = rec.split_at_mut(LEN_BYTES);
            self.aead.encrypt_in_place_detached(&nonce, len, body)
        } else {
            self.aead.encrypt_in_place_detached(&nonce, rec, &mut [])
        };
        r.map_err(|_| io::Error::other("record sealing failed"))
    }

    /// Opens a record (`rec` = length and body) with `tag`, in place.
    fn open(&mut self, rec: &mut [u8], tag: &Tag) -> Result<(), ()> {
        let nonce = self.take_nonce().ok_or(())?;
        if self.encrypt {
            let (len, body) = rec.split_at_mut(LEN_BYTES);
            self.aead
                .decrypt_in_place_detached(&nonce, len, body, tag)
                .map_err(|_| ())
        } else {
            self.aead
                .decrypt_in_place_detached(&nonce, rec, &mut [], tag)
                .map_err(|_| ())
        }
    }
}

fn spent() -> io::Error {
    io::Error::other("record counter exhausted")
}

/// The receiving half of a pipe connection: plain, or opening records.
pub struct ReadHalf {
    inner: OwnedReadHalf,
    open: Option<Box<Opener>>,
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
}

impl std::fmt::Debug for ReadHalf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReadHalf")
            .field("protected", &self.open.is_some())
            .finish_non_exhaustive()
    }
}

impl ReadHalf {
    /// Bytes pass through unchanged (an `--insecure` connection).
    pub fn plain(inner: OwnedReadHalf) -> Self {
        ReadHalf { inner, open: None }
    }

    /// Opens records with `keys`; counts failures in `stats`.
    pub fn protected(inner: OwnedReadHalf, keys: &RecordKeys, stats: Arc<SecureStats>) -> Self {
        let open = Opener {
            cipher: Cipher::new(keys),
            stats,
            buf: vec![0; LEN_BYTES + RECORD_MAX + TAG_BYTES],
            filled: 0,
            need: LEN_BYTES,
            start: 0,
            end: 0,
            failed: false,
        };
        ReadHalf {
            inner,
            open: Some(Box::new(open)),
        }
    }

    /// The socket underneath.
    pub fn socket(&self) -> &OwnedReadHalf {
        &self.inner
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
        let Some(o) = me.open.as_deref_mut() else {
            return Pin::new(&mut me.inner).poll_read(cx, out);
        };
        loop {
            if o.failed {
                return Poll::Ready(Err(unverified()));
            }
            if o.start < o.end {
                let n = (o.end - o.start).min(out.remaining());
                out.put_slice(&o.buf[o.start..o.start + n]);
                o.start += n;
                return Poll::Ready(Ok(()));
            }
            while o.filled < o.need {
                let mut rb = ReadBuf::new(&mut o.buf[o.filled..o.need]);
                ready!(Pin::new(&mut me.inner).poll_read(cx, &mut rb))?;
                let got = rb.filled().len();
                if got == 0 {
                    return Poll::Ready(if o.filled == 0 {
                        Ok(()) // a clean end between records
                    } else {
                        Err(io::ErrorKind::UnexpectedEof.into())
                    });
                }
                o.filled += got;
                if o.filled == LEN_BYTES && o.need == LEN_BYTES {
                    let mut lb = [0u8; LEN_BYTES];
                    lb.copy_from_slice(&o.buf[..LEN_BYTES]);
                    let len = u32::from_be_bytes(lb) as usize;
                    if len == 0 || len > RECORD_MAX {
                        o.failed = true;
                        o.stats.count_unverified();
                        return Poll::Ready(Err(unverified()));
                    }
                    o.need = LEN_BYTES + len + TAG_BYTES;
                }
            }
            let body_end = o.need - TAG_BYTES;
            let tag = Tag::clone_from_slice(&o.buf[body_end..o.need]);
            if o.cipher.open(&mut o.buf[..body_end], &tag).is_err() {
                o.failed = true;
                o.stats.count_unverified();
                return Poll::Ready(Err(unverified()));
            }
            o.start = LEN_BYTES;
            o.end = body_end;
            o.filled = 0;
            o.need = LEN_BYTES;
        }
    }
}

/// The sending half of a pipe connection: plain, or sealing records.
pub struct WriteHalf {
    inner: OwnedWriteHalf,
    seal: Option<Box<Sealer>>,
}

struct Sealer {
    cipher: Cipher,
    /// The sealed record being written: `buf[pos..]` is still to go.
    buf: Vec<u8>,
    pos: usize,
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
        WriteHalf { inner, seal: None }
    }

    /// Seals everything written into records with `keys`.
    pub fn protected(inner: OwnedWriteHalf, keys: &RecordKeys) -> Self {
        let s = Sealer {
            cipher: Cipher::new(keys),
            buf: Vec::with_capacity(LEN_BYTES + RECORD_MAX + TAG_BYTES),
            pos: 0,
        };
        WriteHalf {
            inner,
            seal: Some(Box::new(s)),
        }
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
        while s.pos < s.buf.len() {
            let n = ready!(Pin::new(&mut self.inner).poll_write(cx, &s.buf[s.pos..]))?;
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
        if data.is_empty() {
            return Poll::Ready(Ok(0));
        }
        let Some(s) = me.seal.as_deref_mut() else {
            return Poll::Ready(Ok(0)); // unreachable: checked above
        };
        let n = data.len().min(RECORD_MAX);
        s.buf.clear();
        s.pos = 0;
        s.buf.extend_from_slice(&(n as u32).to_be_bytes());
        s.buf.extend_from_slice(&data[..n]);
        let tag = s.cipher.seal(&mut s.buf)?;
        s.buf.extend_from_slice(&tag);
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
