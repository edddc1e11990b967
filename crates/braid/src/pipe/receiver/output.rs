//! The blocking output writer: in-order batches to the output; the
//! end-to-end digest from the blocks' hashes (the connections hashed them).

use super::{Event, Out};
use crate::pipe::digest::StreamDigest;
use std::io::Write;
use tokio::sync::mpsc;

/// The blocking output writer: batches in order, the digest here.
pub(super) fn output_writer(
    mut out: Box<dyn Write + Send>,
    mut jobs: mpsc::Receiver<Out>,
    events: mpsc::Sender<Event>,
    resume: Option<(u64, blake3::Hash)>,
) {
    // On resume the output already holds a prefix: the digest and the
    // count go on from it.
    let (mut bytes, mut digest) = match resume {
        Some((bytes, hash)) => (bytes, StreamDigest::after_prefix(bytes, &hash)),
        None => (0, StreamDigest::fresh()),
    };
    while let Some(job) = jobs.blocking_recv() {
        let ev = match job {
            Out::Batch(batch) => {
                let before = bytes;
                let mut failed = None;
                for (_, block) in &batch {
                    if let Err(e) = out.write_all(&block.data) {
                        failed = Some(e);
                        break;
                    }
                    // A block is at most the hello's max block (a u32).
                    digest.add(block.data.len() as u32, &block.check);
                    bytes += block.data.len() as u64;
                }
                match failed {
                    Some(source) => Event::OutputFailed { bytes, source },
                    None => Event::Written {
                        blocks: batch.len() as u64,
                        bytes: bytes - before,
                    },
                }
            }
            Out::Finish => match out.flush() {
                Ok(()) => Event::Flushed {
                    digest: digest.finish(),
                },
                Err(source) => Event::OutputFailed { bytes, source },
            },
        };
        let stop = matches!(ev, Event::OutputFailed { .. } | Event::Flushed { .. });
        if events.blocking_send(ev).is_err() || stop {
            return;
        }
    }
}
