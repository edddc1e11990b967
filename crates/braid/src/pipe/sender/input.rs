//! The blocking reader: one block per request from the owner. Each block's
//! BLAKE3 — its check in the header, and the end-to-end digest's input
//! ([`crate::pipe::digest`]) — is computed here, off the owner: the
//! sender's one hashing pass. On resume it first reads and hashes the
//! receiver's prefix (the digest covers the whole input) and checks it
//! against the receiver's.

use super::{Block, Input, Req};
use crate::pipe::digest::{block_hash, StreamDigest};
use crate::pipe::frame;
use std::io::Read;
use tokio::sync::mpsc;

/// The blocking reader: one block per request, its BLAKE3 here.
pub(super) fn reader(
    mut input: Box<dyn Read + Send>,
    mut requests: mpsc::Receiver<Req>,
    out: mpsc::Sender<Input>,
) {
    let mut digest = StreamDigest::fresh();
    let mut total: u64 = 0;
    while let Some(req) = requests.blocking_recv() {
        let len = match req {
            Req::Block(len) => len,
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
        // read_to_end fills spare capacity without zeroing it first.
        let mut buf = Vec::with_capacity(len as usize);
        if let Err(e) = (&mut input).take(u64::from(len)).read_to_end(&mut buf) {
            let _ = out.blocking_send(Input::Failed(e));
            return;
        }
        if buf.is_empty() {
            let _ = out.blocking_send(Input::Eof {
                bytes: total,
                digest: digest.finish(),
            });
            return;
        }
        let check = block_hash(&buf);
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
