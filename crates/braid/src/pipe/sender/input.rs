//! The blocking reader: one block per request from the owner; the block's
//! CRC-32 and the stream's BLAKE3 are computed here, off the owner.

use super::{Block, Input};
use std::io::Read;
use tokio::sync::mpsc;

/// The blocking reader: one block per request, CRC and BLAKE3 here.
pub(super) fn reader(
    mut input: Box<dyn Read + Send>,
    mut requests: mpsc::Receiver<u32>,
    out: mpsc::Sender<Input>,
) {
    let mut hasher = blake3::Hasher::new();
    let mut total: u64 = 0;
    while let Some(len) = requests.blocking_recv() {
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
        let crc = crc32fast::hash(&buf);
        if out
            .blocking_send(Input::Block(Block { data: buf, crc }))
            .is_err()
        {
            return;
        }
    }
}
