//! Reports and progress snapshots of a pipe transfer (`--stats json`).
//!
//! All types serialize with serde; rates are bits per second.

use super::sched::{ConnCounters, Mode};

/// One connection in a sender report.
#[derive(Debug, Clone, serde::Serialize)]
pub struct SendConn {
    /// Connection index.
    pub index: usize,
    /// The address it went to.
    pub addr: String,
    /// Counters from the scheduler.
    #[serde(flatten)]
    pub counters: ConnCounters,
    /// Average rate of acknowledged bytes over the transfer, bit/s.
    pub acked_bps: f64,
    /// Times it (re)connected.
    pub connects: u64,
}

/// The sender's summary.
#[derive(Debug, Clone, serde::Serialize)]
pub struct SendReport {
    /// Always "send".
    pub side: &'static str,
    /// Scheduling mode.
    pub mode: Mode,
    /// Bytes sent and acknowledged in this run (on resume, after the
    /// receiver's prefix).
    pub bytes: u64,
    /// Where this run started in the input: the receiver's verified
    /// prefix on `--resume`, else 0.
    pub resumed_from: u64,
    /// Blocks.
    pub blocks: u64,
    /// Wall time in seconds.
    pub seconds: f64,
    /// Overall rate, bit/s.
    pub bps: f64,
    /// Payload bytes put on the wire (including copies and re-sends)
    /// divided by `bytes`.
    pub wire_overhead: f64,
    /// The receiver's window in blocks.
    pub window_blocks: u64,
    /// The window granted by the receiver, bytes (the upper bound).
    pub window_bytes: u64,
    /// The largest automatic window the sender computed (0: off or never
    /// measured), bytes.
    pub window_auto_peak_bytes: u64,
    /// The window in use at the end, bytes.
    pub window_final_bytes: u64,
    /// Re-weightings (weighted mode).
    pub reweights: u64,
    /// The stream digest (hex): BLAKE3 over the blocks' lengths and
    /// checks ([`crate::pipe::digest`]; the checks are XXH3-128 under
    /// encryption). It follows how the stream was cut into blocks and the
    /// mode: compare the two sides of one transfer, not runs or `b3sum`.
    pub blake3: String,
    /// Per connection.
    pub connections: Vec<SendConn>,
}

/// One connection in a receiver report.
#[derive(Debug, Clone, serde::Serialize)]
pub struct RecvConn {
    /// Accept order.
    pub index: usize,
    /// The peer address.
    pub peer: String,
    /// Payload bytes received (including duplicates).
    pub bytes: u64,
    /// Average rate over the transfer, bit/s.
    pub bps: f64,
}

/// The receiver's summary.
#[derive(Debug, Clone, serde::Serialize)]
pub struct RecvReport {
    /// Always "recv".
    pub side: &'static str,
    /// Bytes written (all verified).
    pub bytes: u64,
    /// Blocks written.
    pub blocks: u64,
    /// Wall time in seconds from the first connection.
    pub seconds: f64,
    /// Overall rate, bit/s.
    pub bps: f64,
    /// Reorder window granted, blocks.
    pub window_blocks: u64,
    /// Most blocks held at once.
    pub reorder_peak_blocks: u64,
    /// Most bytes held at once.
    pub reorder_peak_bytes: u64,
    /// Duplicate blocks received (head-of-line copies, re-sends).
    pub duplicates: u64,
    /// The stream digest (hex): BLAKE3 over the blocks' lengths and
    /// checks ([`crate::pipe::digest`]; the checks are XXH3-128 under
    /// encryption). It follows how the stream was cut into blocks and the
    /// mode: compare the two sides of one transfer, not runs or `b3sum`.
    pub blake3: String,
    /// Per connection.
    pub connections: Vec<RecvConn>,
    /// The sender said BYE: it read this receiver's DONE and accepted it
    /// (false: it may not know the transfer succeeded, e.g. its
    /// connections died right after the DONE left and it did not rejoin
    /// in time; its own exit status says).
    pub sender_confirmed: bool,
}

/// A progress snapshot handed to an observer a few times per second.
#[derive(Debug, Clone, Default)]
pub struct Progress {
    /// Bytes done (acknowledged at the sender, written at the receiver).
    pub bytes: u64,
    /// Total bytes if known.
    pub total: Option<u64>,
    /// Seconds since the start.
    pub seconds: f64,
    /// Per-connection byte counters (sent or received).
    pub per_conn: Vec<u64>,
}

/// Runs a transfer's owner as a task on the runtime's workers (its
/// hand-offs to the connection tasks then stay on the workers instead of
/// waking the thread that called `block_on`), and calls `observer` on that
/// thread with each progress snapshot the task publishes.
pub(crate) async fn on_workers<T, F, Fut>(
    observer: &mut dyn FnMut(&Progress),
    run: F,
) -> Result<T, super::PipeError>
where
    T: Send + 'static,
    F: FnOnce(Box<dyn FnMut(&Progress) + Send>) -> Fut,
    Fut: std::future::Future<Output = Result<T, super::PipeError>> + Send + 'static,
{
    let (tx, mut rx) = tokio::sync::watch::channel(None::<Progress>);
    let task = tokio::spawn(run(Box::new(move |p: &Progress| {
        let _ = tx.send(Some(p.clone()));
    })));
    while rx.changed().await.is_ok() {
        if let Some(p) = rx.borrow_and_update().clone() {
            observer(&p);
        }
    }
    match task.await {
        Ok(r) => r,
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        // Cancelled: only a runtime shutting down does that.
        Err(e) => Err(super::PipeError::Runtime(std::io::Error::other(e))),
    }
}
