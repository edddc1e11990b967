//! The blocking reader: one block per request from the owner, read into a
//! buffer the owner hands back from an acknowledged block. Each block's
//! check — in the header, and the end-to-end digest's input
//! ([`crate::pipe::digest`]) — is computed here, off the owner: the
//! sender's one hashing pass, as the block is read, so each piece is hashed
//! while it is still in the cache. On resume it first
//! reads and hashes the receiver's prefix (the digest covers the whole
//! input) and checks it against the receiver's.

use super::{Block, Input, Req};
use crate::pipe::digest::{CheckKind, StreamDigest};
use crate::pipe::frame;
use std::io::Read;
use tokio::sync::mpsc;

/// The blocking reader: one block per request, its check (`kind`) here.
/// An input that ends short of, or runs past, the size `announced` to the
/// receiver (a file that changed during the send) fails the transfer.
pub(super) fn reader(
    mut input: Box<dyn Read + Send>,
    kind: CheckKind,
    announced: Option<u64>,
    mut requests: mpsc::Receiver<Req>,
    out: mpsc::Sender<Input>,
) {
    let changed = |bytes: u64, size: u64| {
        std::io::Error::other(format!(
            "the input changed during the send: it was {size} bytes when the send began, and {} {bytes}",
            if bytes < size { "ended at" } else { "went past" }
        ))
    };
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
            if let Some(size) = announced.filter(|&s| s != total) {
                let _ = out.blocking_send(Input::Failed(changed(total, size)));
                return;
            }
            let _ = out.blocking_send(Input::Eof {
                bytes: total,
                digest: digest.finish(),
            });
            return;
        }
        // A block is at most `len` (a u32) long.
        digest.add(buf.len() as u32, &check);
        total += buf.len() as u64;
        if let Some(size) = announced.filter(|&s| total > s) {
            let _ = out.blocking_send(Input::Failed(changed(total, size)));
            return;
        }
        if out
            .blocking_send(Input::Block(Block { data: buf, check }))
            .is_err()
        {
            return;
        }
    }
}

/// Reads up to `len` bytes (fewer only at the end of input) into `buf`
/// and their check, hashing what each `read` brought (in whole
/// `HASH_STEP`s, the rest at the end: [`BlockHasher::update_steps`]) while
/// it is still in the cache.
///
/// [`BlockHasher::update_steps`]: crate::pipe::digest::BlockHasher::update_steps
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
    if buf.capacity() < len {
        // Growing would copy the old bytes first.
        buf.clear();
    }
    buf.resize(len, 0);
    let mut hash = kind.hasher();
    let (mut filled, mut hashed) = (0, 0);
    while filled < len {
        match input.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
        hash.update_steps(&buf[..filled], &mut hashed, false);
    }
    hash.update_steps(&buf[..filled], &mut hashed, true);
    buf.truncate(filled);
    Ok((buf, hash.finish()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reader that gives at most `step` bytes a call and is interrupted
    /// every third call, as a pipe or a signal may.
    struct Trickle {
        data: Vec<u8>,
        at: usize,
        step: usize,
        calls: usize,
    }

    impl Read for Trickle {
        fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
            self.calls += 1;
            if self.calls % 3 == 0 {
                return Err(std::io::ErrorKind::Interrupted.into());
            }
            let n = self.step.min(out.len()).min(self.data.len() - self.at);
            out[..n].copy_from_slice(&self.data[self.at..self.at + n]);
            self.at += n;
            Ok(n)
        }
    }

    /// Runs the reader on `data` announced as `announced` bytes, asking
    /// for blocks of 400 until it answers something but a block.
    fn read_all(data: Vec<u8>, announced: Option<u64>) -> Input {
        let (req_tx, req_rx) = mpsc::channel(4);
        let (out_tx, mut out_rx) = mpsc::channel(4);
        let input: Box<dyn Read + Send> = Box::new(std::io::Cursor::new(data));
        let t =
            std::thread::spawn(move || reader(input, CheckKind::Blake3, announced, req_rx, out_tx));
        loop {
            req_tx
                .blocking_send(Req::Block {
                    len: 400,
                    buf: Vec::new(),
                })
                .expect("the reader takes requests");
            match out_rx.blocking_recv().expect("an answer") {
                Input::Block(_) => continue,
                other => {
                    drop(req_tx);
                    t.join().expect("the reader ends");
                    return other;
                }
            }
        }
    }

    /// Issue 29 §3: an input that ends short of (or runs past) the size
    /// announced to the receiver fails, saying so; one of its announced
    /// size, or of unknown size, ends normally.
    #[test]
    fn an_input_that_changed_during_the_send_fails() {
        for (len, announced) in [(500, 1_000), (1_500, 1_000)] {
            match read_all(vec![7; len], Some(announced)) {
                Input::Failed(e) => {
                    assert!(
                        e.to_string().contains("the input changed during the send"),
                        "{e}"
                    )
                }
                _ => panic!("{len} bytes announced as {announced}: not refused"),
            }
        }
        for announced in [Some(1_000), None] {
            match read_all(vec![7; 1_000], announced) {
                Input::Eof { bytes, .. } => assert_eq!(bytes, 1_000),
                _ => panic!("{announced:?}: not a clean end"),
            }
        }
    }

    #[test]
    fn blocks_read_into_spare_buffers_carry_the_check_of_their_bytes() {
        let data: Vec<u8> = (0..700_000u32).map(|i| (i % 251) as u8).collect();
        for kind in [CheckKind::Blake3, CheckKind::Xxh3] {
            for step in [1_000, 65_536, 100_003, 1 << 20] {
                let mut input = Trickle {
                    data: data.clone(),
                    at: 0,
                    step,
                    calls: 0,
                };
                // A spare longer than the block, one shorter, a fresh one;
                // then the input ends inside the last block.
                let spares = [vec![9u8; 400_000], vec![7u8; 10], Vec::new()];
                let mut got = Vec::new();
                for spare in spares {
                    let (b, check) = read_block(&mut input, 300_000, kind, spare).unwrap();
                    assert_eq!(check, kind.hash(&b), "{kind:?}, reads of {step}");
                    got.extend_from_slice(&b);
                }
                assert_eq!(got, data, "{kind:?}, reads of {step}");
                let (b, _) = read_block(&mut input, 300_000, kind, vec![1; 5]).unwrap();
                assert!(b.is_empty(), "the end of input is an empty block");
            }
        }
    }
}
