//! The blocking reader: one block per request from the owner; the stream's
//! BLAKE3 and, on an `--insecure` pipe, the block's CRC-32 are computed
//! here, off the owner (with a key the record's AEAD tag is the block's
//! check and the header's crc is 0: one pass over the bytes fewer). On
//! resume it first reads and hashes the receiver's prefix (the digest
//! covers the whole input) and checks it against the receiver's.

use super::{Block, Input, Req};
use crate::pipe::frame;
use std::io::Read;
use tokio::sync::mpsc;

/// The blocking reader: one block per request, BLAKE3 here, and the CRC
/// when `crc` (an insecure pipe; otherwise each block's crc is 0).
pub(super) fn reader(
    mut input: Box<dyn Read + Send>,
    mut requests: mpsc::Receiver<Req>,
    out: mpsc::Sender<Input>,
    crc: bool,
) {
    let mut hasher = blake3::Hasher::new();
    let mut total: u64 = 0;
    while let Some(req) = requests.blocking_recv() {
        let len = match req {
            Req::Block(len) => len,
            Req::Skip { bytes, digest } => {
                let ok = match std::io::copy(&mut (&mut input).take(bytes), &mut hasher) {
                    Ok(n) => {
                        n == bytes
                            && frame::digest_prefix(hasher.clone().finalize().as_bytes()) == digest
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
        // read_to_end fills spare capacity without zeroing it first.
        let mut buf = Vec::with_capacity(len as usize);
        if let Err(e) = (&mut input).take(u64::from(len)).read_to_end(&mut buf) {
            let _ = out.blocking_send(Input::Failed(e));
            return;
        }
        if buf.is_empty() {
            let digest = *hasher.finalize().as_bytes();
            let _ = out.blocking_send(Input::Eof {
                bytes: total,
                digest,
            });
            return;
        }
        hasher.update(&buf);
        total += buf.len() as u64;
        let crc = if crc { crc32fast::hash(&buf) } else { 0 };
        if out
            .blocking_send(Input::Block(Block { data: buf, crc }))
            .is_err()
        {
            return;
        }
    }
}
