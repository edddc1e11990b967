//! The blocking output writer: in-order batches to the output, BLAKE3 here.

use super::{Event, Out};
use std::io::Write;
use tokio::sync::mpsc;

/// The blocking output writer: batches in order, BLAKE3 here.
pub(super) fn output_writer(
    mut out: Box<dyn Write + Send>,
    mut jobs: mpsc::Receiver<Out>,
    events: mpsc::Sender<Event>,
    resume: Option<(u64, blake3::Hasher)>,
) {
    // On resume the output already holds a prefix: the digest and the
    // count go on from it.
    let (mut bytes, mut hasher) = resume.unwrap_or((0, blake3::Hasher::new()));
    while let Some(job) = jobs.blocking_recv() {
        let ev = match job {
            Out::Batch(batch) => {
                let before = bytes;
                let mut failed = None;
                for (_, data) in &batch {
                    if let Err(e) = out.write_all(data) {
                        failed = Some(e);
                        break;
                    }
                    hasher.update(data);
                    bytes += data.len() as u64;
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
                    digest: *hasher.finalize().as_bytes(),
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
