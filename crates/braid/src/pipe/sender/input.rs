//! The blocking reader: one block per request from the owner. Each block's
//! check — in the header, and the end-to-end digest's input
//! ([`crate::pipe::digest`]) — is computed here, off the owner: the
//! sender's one hashing pass, piece by piece as the block is read, so each
//! piece is hashed while it is still in the cache. On resume it first reads and hashes the
//! receiver's prefix (the digest covers the whole input) and checks it
//! against the receiver's.

use super::{Block, Input, Req};
use crate::pipe::digest::{CheckKind, StreamDigest};
use crate::pipe::frame;
use std::io::Read;
use tokio::sync::mpsc;

/// Bytes read (and hashed) at a time: a quarter of a core's L2 on the
/// machines measured, so the hash finds each piece still cached.
const PIECE: usize = 256 << 10;

/// The blocking reader: one block per request, its check (`kind`) here.
pub(super) fn reader(
    mut input: Box<dyn Read + Send>,
    kind: CheckKind,
    mut requests: mpsc::Receiver<Req>,
    out: mpsc::Sender<Input>,
) {
    let mut digest = StreamDigest::fresh();
    let mut total: u64 = 0;
    while let Some(req) = requests.blocking_recv() {
        let (len, buf) = match req {
            Req::Block { len, buf } => (len, buf),
            Req::Skip {
                bytes,
                digest: theirs,
            } => {
                let mut prefix = blake3::Hasher::new();
                let ok = match std::io::copy(&mut (&mut input).take(bytes), &mut prefix) {
                    Ok(n) => {
                        let hash = prefix.finalize();
                        digest = StreamDigest::after_prefix(bytes, &hash);
                        n == bytes && frame::digest_prefix(hash.as_bytes()) == theirs
                    }
                    Err(e) => {
                        let _ = out.blocking_send(Input::Failed(e));
                        return;
                    }
                };
                total = bytes;
                let reply = if ok {
                    Input::Resumed { bytes }
                } else {
                    Input::Mismatch { bytes }
                };
                if out.blocking_send(reply).is_err() || !ok {
                    return;
                }
                continue;
            }
        };
        let (buf, check) = match read_block(&mut input, len, kind, buf) {
            Ok(b) => b,
            Err(e) => {
                let _ = out.blocking_send(Input::Failed(e));
                return;
            }
        };
        if buf.is_empty() {
            let _ = out.blocking_send(Input::Eof {
                bytes: total,
                digest: digest.finish(),
            });
            return;
        }
        // A block is at most `len` (a u32) long.
        digest.add(buf.len() as u32, &check);
        total += buf.len() as u64;
        if out
            .blocking_send(Input::Block(Block { data: buf, check }))
            .is_err()
        {
            return;
        }
    }
}

/// Reads up to `len` bytes (fewer only at the end of input) into `buf`
/// and their check, hashing each [`PIECE`] as soon as it is read.
///
/// `buf` is a spare buffer whose bytes are initialized already (only what
/// it lacks is zeroed: all of a fresh one), so each `read` fills straight
/// into it, as much as the input gives at once.
fn read_block(
    input: &mut dyn Read,
    len: u32,
    kind: CheckKind,
    mut buf: Vec<u8>,
) -> std::io::Result<(Vec<u8>, [u8; 32])> {
    let len = len as usize;
    buf.resize(len, 0);
    let mut hash = kind.hasher();
    let mut filled = 0;
    while filled < len {
        let piece = (filled + PIECE).min(len);
        let mut at = filled;
        while at < piece {
            match input.read(&mut buf[at..piece]) {
                Ok(0) => break,
                Ok(n) => at += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        hash.update(&buf[filled..at]);
        let end_of_input = at < piece;
        filled = at;
        if end_of_input {
            break;
        }
    }
    buf.truncate(filled);
    Ok((buf, hash.finish()))
}
