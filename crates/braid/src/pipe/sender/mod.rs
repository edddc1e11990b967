//! The sending side: tokio tasks around one [`BlockScheduler`].
//!
//! One task owns the state (the `Owner`: scheduler, the blocks not yet
//! acknowledged, per-connection slots, the outcome); every other task talks
//! to it over bounded channels, so nothing is shared behind a lock. The
//! owner runs on the runtime's workers like the others (the blocking
//! [`send`] only relays its progress reports), so a hand-off between it and
//! a connection task rarely wakes another thread:
//! - the **reader** (one blocking task, [`tokio::task::spawn_blocking`]):
//!   asked for blocks of given lengths (two requests in flight), it reads
//!   the input,
//!   computes the block's check (its header's; [`CheckKind`]) and feeds it to the
//!   end-to-end digest, so the per-byte work stays off the owner;
//! - one **connection task** per connection: connect (TCP or MPTCP), hello,
//!   then ask the owner for a job, write it, ask again; reconnect with
//!   backoff when the connection dies; its **ack reader** task decodes the
//!   receiver's control frames and hands them to the owner.
//!
//! Files: `owner` (the state and its event handling), `conn` (connection
//! and ack-reader tasks), `input` (the blocking reader), `pace` (the
//! `--rate` token bucket, its rate changeable while running through
//! [`SendConfig::rate_updates`], over all connections or only the first
//! [`SendConfig::paced_connections`]).
//!
//! Wake-ups are messages: the owner answers a connection that asked for
//! work as soon as an event (an ack, a block read, a connection down) lets
//! the scheduler give it something, and otherwise at
//! [`BlockScheduler::poll_timeout`] (when a stalled path makes a copy worth
//! sending) or when the `--rate` bucket allows the next block. Timers
//! exist only for real timeouts: connect, reconnect backoff, keepalives,
//! silence, progress reports.
//!
//! Invariants: a block's bytes are kept until it is acknowledged; at most
//! `window` blocks are held (the scheduler bounds reading); success is
//! declared only when the receiver reports `Done(Verified)` after the
//! reader reached the end of input, with a count and digest equal to this
//! side's; when this side gives up while the receiver may still wait (the
//! input failed, a resume or DONE check failed) every open connection
//! writes an ABORT, shuts its write side and reads until the receiver
//! closes (closing with acks unread would reset the connection and could
//! destroy the ABORT before the receiver reads it); on success each
//! writes a BYE the same way, so a receiver keeping its listeners open for
//! a sender that missed the DONE stops at once; both end within
//! `LAST_FRAME_GRACE`. The stop signal is the typed `Stop` value the owner
//! publishes to every task. A connection waiting for work writes a
//! keepalive every [`KEEPALIVE`](super::KEEPALIVE); one the receiver is
//! silent on for [`SendConfig::silence_limit`] is dropped.

mod conn;
mod input;
mod owner;
mod pace;

use conn::conn_task;
use input::reader;
use owner::Owner;
use pace::RateCap;

use super::digest::CheckKind;
use super::frame::{self, Control, TransferId};
use super::net::{self, SockOpts};
use super::sched::{BlockScheduler, Layout, Mode, MIN_ADAPTIVE_BLOCK};
use super::secure::{self, Authenticator, SecureError, SecureStats, Security};
use super::stats::{Progress, SendReport};
use super::{ConfigError, PipeError, ProtocolViolation, MAX_CONNECTIONS, MAX_WINDOW_BLOCKS};
use crate::clock;
use std::collections::BTreeMap;
use std::io::Read;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration as StdDuration;
use tokio::sync::{mpsc, oneshot, watch};

/// Timeout of one connection attempt (including the hello).
const CONNECT_TIMEOUT: StdDuration = StdDuration::from_secs(3);
/// Timeout of the code pairing (connect, SPAKE2, confirmation).
const PAIRING_TIMEOUT: StdDuration = StdDuration::from_secs(10);
/// First reconnect backoff; doubles per failed attempt.
const BACKOFF_START: StdDuration = StdDuration::from_millis(200);
/// How often the observer is called.
const PROGRESS_TICK: StdDuration = StdDuration::from_millis(200);
/// Bound of the channel into the owner: a few messages per connection
/// (a job request, acks in flight, a state change).
const EVENT_QUEUE: usize = 4 * MAX_CONNECTIONS;
/// Jobs queued for one connection: it asks for the next only after it has
/// written the previous one, so one is enough.
const JOB_QUEUE: usize = 1;
/// At the end (the input failed, or the receiver's DONE accepted), how long
/// the connections have to finish the block they are writing, send the
/// ABORT or BYE and see the receiver close.
const LAST_FRAME_GRACE: StdDuration = StdDuration::from_secs(2);
/// Read requests the owner keeps in flight to the reader (and blocks the
/// reader may hand back before the owner takes them): the reader reads
/// and hashes the next block while the owner hands out the last one,
/// instead of waiting for a round trip per block. The scheduler counts
/// requested blocks as read, so its limits hold.
const READ_QUEUE: usize = 2;
/// Bytes of buffers of acknowledged blocks the owner keeps to hand back to
/// the reader with its next requests: the reader reads into memory it has
/// filled before (no allocation, no page faults, no zeroing) with plain
/// `read`s as large as the input gives. Acks come in bursts, reads in
/// pairs, so a few buffers would run dry; 32 MiB (16 blocks of 2 MiB, 2 of
/// the largest) keep up. None are kept once the input has ended.
const SPARE_BYTES: usize = 32 << 20;

/// Settings of a sender.
#[derive(Debug, Clone)]
pub struct SendConfig {
    /// Receiver addresses (one per path).
    pub to: Vec<SocketAddr>,
    /// Number of connections, spread over `to` in turn.
    pub connections: usize,
    /// Scheduling mode.
    pub mode: Mode,
    /// Block layout (fixed modes).
    pub layout: Layout,
    /// Block size in bytes: every block in the weighted and round-robin
    /// modes; in adaptive mode the largest, blocks starting at
    /// `min(256 KiB, block_size)` (see [`BlockScheduler::next_len`]).
    pub block_size: u32,
    /// Reorder window to ask for, bytes: the upper bound of the window the
    /// sender uses.
    pub window_bytes: u64,
    /// Adaptive mode: use only the part of the window the measured paths
    /// need ([`BlockScheduler::set_auto_window`]).
    pub auto_window: bool,
    /// Input size if known.
    pub total_size: Option<u64>,
    /// Socket options.
    pub sock: SockOpts,
    /// Reconnect attempts per connection before it gives up.
    pub reconnect_attempts: u32,
    /// Test hook: corrupt the first copy of this block on the wire.
    pub corrupt_block: Option<u64>,
    /// A connection on which the receiver says nothing (not even its
    /// keepalive, every [`KEEPALIVE`](super::KEEPALIVE)) for this long is
    /// declared dead; when every connection is dead and reconnecting fails,
    /// the transfer fails with [`PipeError::LostReceiver`].
    pub silence_limit: braid_core::Duration,
    /// Cap on the total sending rate over every connection (`None`: as
    /// fast as the paths allow); see `pace`.
    pub rate: Option<braid_core::Bandwidth>,
    /// Changes of the cap while the transfer runs (a reservation
    /// modified, a background share announced): each value replaces the
    /// rate from then on; zero holds new blocks until the next change. The
    /// initial rate is `rate`, or this channel's value when `rate` is
    /// `None`. See `pace`.
    pub rate_updates: Option<watch::Receiver<braid_core::Bandwidth>>,
    /// Which connections the cap applies to: `Some(k)` paces connections
    /// `0..k` together at the rate (a premium part, e.g. on a
    /// reservation) and leaves the others unpaced (a scavenger part that
    /// takes what the network gives); `None` paces them all.
    pub paced_connections: Option<usize>,
    /// With `paced_connections`, a separate cap on the other connections
    /// (together); `None` leaves them unpaced.
    pub rest_rate: Option<braid_core::Bandwidth>,
    /// Resume (`--resume`): the receiver reports the verified prefix it
    /// holds; after checking its digest against this input's first bytes,
    /// only the rest is sent (the end-to-end digest still covers it all).
    /// The input must be the same file from its start.
    pub resume: bool,
    /// What to prove to the receiver (a key, a code) or `Insecure`.
    pub security: Security,
}

/// Why the transfer stopped; published to every task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stop {
    /// Still running.
    Running,
    /// The outcome is decided (success or failure): every task ends.
    Finished,
}

/// What the owner publishes to the connection tasks.
#[derive(Debug, Clone, Copy)]
struct Published {
    /// A first connection was accepted: later ones rejoin the session.
    session_up: bool,
    /// The window to ask for (the granted one once the session is up).
    window_blocks: u64,
    /// Whether to stop.
    stop: Stop,
}

/// One block read from the input.
struct Block {
    data: Vec<u8>,
    /// The header's check of `data` ([`CheckKind`]).
    check: [u8; 32],
}

/// What a connection is told to write next.
enum Job {
    Block {
        seq: u64,
        block: Arc<Block>,
        copy: bool,
        /// SO_MAX_PACING_RATE the socket should have from now on (bytes
        /// per second), on a paced connection.
        max_pacing: Option<u64>,
        /// TCP_NOTSENT_LOWAT the socket should have from now on (bytes).
        lowat: Option<u32>,
    },
    End {
        blocks: u64,
        bytes: u64,
        digest: [u8; 32],
    },
    /// The input failed: tell the receiver to stop (after the block being
    /// written, so the framing stays intact).
    Abort,
    /// The receiver's DONE arrived and was accepted: tell it it may stop
    /// listening.
    Bye,
}

/// What the owner asks the reader for.
enum Req {
    /// The next block, of at most `len` bytes, read into `buf` (a spare
    /// buffer of an acknowledged block, or empty).
    Block { len: u32, buf: Vec<u8> },
    /// Resume: read and hash the first `bytes`, check them against the
    /// receiver's `digest` prefix.
    Skip { bytes: u64, digest: u64 },
}

/// What the reader hands back.
enum Input {
    Block(Block),
    Eof {
        bytes: u64,
        digest: [u8; 32],
    },
    Failed(std::io::Error),
    /// The prefix matched; blocks follow from `bytes` on.
    Resumed {
        bytes: u64,
    },
    /// The prefix differs (or the input is shorter).
    Mismatch {
        bytes: u64,
    },
}

/// A message to the owner.
enum Event {
    /// Connection `c` is up (generation `gen`): it takes jobs on `jobs` and
    /// ends when `kill` is dropped.
    Up {
        c: usize,
        gen: u64,
        granted: u64,
        granted_bytes: u64,
        jobs: mpsc::Sender<Job>,
        kill: oneshot::Sender<()>,
        /// The receiver's [`Control::Resume`] (length, digest prefix), if
        /// resuming.
        resume: Option<(u64, u64)>,
    },
    /// Connection `c` wants its next job.
    Want { c: usize, gen: u64 },
    /// A control frame (or a bad one) arrived on connection `c`.
    Control {
        c: usize,
        msg: Result<Control, ProtocolViolation>,
    },
    /// Connection `c`'s generation `gen` failed.
    Down { c: usize, gen: u64, error: String },
    /// A connection attempt failed.
    ConnectFailed { c: usize, error: String },
    /// Connection `c` gave up reconnecting.
    GaveUp { c: usize },
}

/// One connection as the owner sees it.
#[derive(Default)]
struct Slot {
    gen: u64,
    up: bool,
    given_up: bool,
    jobs: Option<mpsc::Sender<Job>>,
    kill: Option<oneshot::Sender<()>>,
    wants: bool,
    last_error: Option<String>,
    end_sent: bool,
    connects: u64,
}

/// Sends `input` to a receiver and waits until it confirms the stream
/// arrived verified. `observer` is called a few times per second.
///
/// This blocking entry point builds a tokio runtime for the transfer.
///
/// # Errors
/// [`PipeError`]: bad settings, input failure, the receiver stopping
/// (checksum, output, digest), or all connections lost.
pub fn send(
    input: Box<dyn Read + Send>,
    cfg: SendConfig,
    observer: &mut dyn FnMut(&Progress),
) -> Result<SendReport, PipeError> {
    validate(&cfg)?;
    let rt = runtime().map_err(PipeError::Runtime)?;
    let res = rt.block_on(crate::pipe::stats::on_workers(
        observer,
        move |mut obs| async move { send_async(input, cfg, &mut obs).await },
    ));
    // The reader may be blocked on an idle input: do not wait for it.
    rt.shutdown_background();
    res
}

/// [`send`] until `stop` (built inside the transfer's runtime, so it may
/// register signal handlers) finishes first; a stopped transfer drops its
/// connections, and the receiver keeps the verified prefix it wrote, from
/// which a `--resume` run goes on.
///
/// # Errors
/// As [`send`], when the transfer fails before `stop`.
pub fn send_until<S: std::future::Future>(
    input: Box<dyn Read + Send>,
    cfg: SendConfig,
    observer: &mut dyn FnMut(&Progress),
    stop: impl FnOnce() -> S,
) -> Result<crate::pipe::receiver::Ended<SendReport, S::Output>, PipeError> {
    use crate::pipe::receiver::Ended;
    validate(&cfg)?;
    let rt = runtime().map_err(PipeError::Runtime)?;
    let stop = {
        let _entered = rt.enter();
        stop()
    };
    let res = rt.block_on(async {
        tokio::select! {
            r = crate::pipe::stats::on_workers(
                observer,
                move |mut obs| async move { send_async(input, cfg, &mut obs).await },
            ) => r.map(Ended::Done),
            s = stop => Ok(Ended::Stopped(s)),
        }
    });
    // The reader may be blocked on an idle input: do not wait for it.
    rt.shutdown_background();
    res
}

/// The runtime a sender runs on: one worker per core but one, since the
/// blocking reader takes a core of its own (it copies the input and
/// hashes every byte, as much work per byte as the workers' sealing and
/// sending); at least one worker. `TOKIO_WORKER_THREADS`, when set, is
/// tokio's to apply as it always is.
///
/// Measured on 2 cores (docs/BENCHMARKS.md): one worker instead of two
/// moves the encrypted pipe from a `head` pipe on loopback 15.2 → 17.4
/// Gbit/s with 19 % less CPU per byte on the sending side (the source
/// gets room on the cores, the owner and the two connections hand blocks
/// to each other on one thread); from a file 2–5 % slower, within the
/// spread, and with six connections through namespaces, where the one
/// worker carries all their transmit paths, 3–6 % slower.
///
/// # Errors
/// The OS error of starting the runtime's threads.
pub fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    let mut b = tokio::runtime::Builder::new_multi_thread();
    if std::env::var_os("TOKIO_WORKER_THREADS").is_none() {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        b.worker_threads(workers(cores));
    }
    b.enable_all().build()
}

/// The sender's runtime workers on `cores` cores: all but the reader's.
fn workers(cores: usize) -> usize {
    cores.saturating_sub(1).max(1)
}

/// The async form of [`send`]; call it inside a tokio runtime with time and
/// I/O enabled ([`runtime`] builds the one [`send`] uses).
///
/// # Errors
/// As [`send`].
pub async fn send_async(
    input: Box<dyn Read + Send>,
    cfg: SendConfig,
    observer: &mut (dyn FnMut(&Progress) + Send),
) -> Result<SendReport, PipeError> {
    validate(&cfg)?;
    let start = clock::now();
    // On resume the count is unknown until the receiver says where to
    // start; the reader's end of input closes the stream then.
    let total_blocks = cfg
        .total_size
        .filter(|_| !cfg.resume)
        .map(|s| s.div_ceil(u64::from(cfg.block_size)));
    // Blocks may be as small as MIN_ADAPTIVE_BLOCK; the byte window bounds memory.
    let window = (cfg.window_bytes / u64::from(MIN_ADAPTIVE_BLOCK.min(cfg.block_size)))
        .clamp(2, MAX_WINDOW_BLOCKS);
    if cfg.layout == Layout::Partitioned
        && (total_blocks.is_none_or(|t| t > window)
            || cfg.total_size.is_none_or(|t| t > cfg.window_bytes))
    {
        return Err(ConfigError::PartitionedNeedsSize.into());
    }
    let mut sched = BlockScheduler::new(
        cfg.mode,
        cfg.layout,
        cfg.connections,
        cfg.block_size,
        window,
        total_blocks,
        start,
    );
    sched.set_auto_window(cfg.auto_window);
    let auth = Arc::new(authenticator(&cfg).await?);
    let cfg = Arc::new(cfg);
    let session = session_id(&cfg);
    let (pub_tx, pub_rx) = watch::channel(Published {
        session_up: false,
        window_blocks: window,
        stop: Stop::Running,
    });
    let (ev_tx, ev_rx) = mpsc::channel(EVENT_QUEUE);
    let (read_tx, read_rx) = mpsc::channel(READ_QUEUE);
    let (input_tx, input_rx) = mpsc::channel(READ_QUEUE);
    // Detached: a reader blocked on an idle pipe cannot be interrupted.
    let check = CheckKind::for_records(match &cfg.security {
        Security::Insecure => false,
        Security::Key { encrypt, .. } | Security::Code { encrypt, .. } => *encrypt,
    });
    let announced = cfg.total_size;
    drop(tokio::task::spawn_blocking(move || {
        reader(input, check, announced, read_rx, input_tx)
    }));
    let mut tasks = Vec::new();
    for c in 0..cfg.connections {
        tasks.push(tokio::spawn(conn_task(
            Arc::clone(&cfg),
            session,
            c,
            ev_tx.clone(),
            pub_rx.clone(),
            Arc::clone(&auth),
        )));
    }
    drop(ev_tx);
    let rate_updates = cfg.rate_updates.clone();
    let initial = cfg
        .rate
        .or_else(|| rate_updates.as_ref().map(|r| *r.borrow()));
    let pacer = initial.map(|r| RateCap::new(r, start));
    let rest_pacer = cfg
        .rest_rate
        .filter(|_| cfg.paced_connections.is_some())
        .map(|r| RateCap::new(r, start));
    let owner_resume = cfg.resume;
    let mut owner = Owner {
        slots: (0..cfg.connections).map(|_| Slot::default()).collect(),
        cfg,
        sched,
        blocks: BTreeMap::new(),
        spare: Vec::new(),
        outcome: None,
        session_up: false,
        end: None,
        acked_bytes: 0,
        sent_wire: 0,
        window_blocks: window,
        reads: 0,
        read_tx,
        pub_tx,
        rotate: 0,
        reweights: 0,
        pacer,
        rest_pacer,
        rate_updates,
        skip: None,
        resumed_from: (!owner_resume).then_some(0),
    };
    let mut ev_rx = ev_rx;
    let result = owner.run(&mut ev_rx, input_rx, start, observer).await;
    // Stop everything: kill the connections, then wait for their tasks.
    owner.publish(Stop::Finished);
    let tell_receiver = matches!(
        result,
        Err(PipeError::Input(_)
            | PipeError::ResumeMismatch { .. }
            | PipeError::ResumeOneSided(_)
            | PipeError::EarlyDone { .. }
            | PipeError::DoneMismatch { .. }
            | PipeError::Protocol(_))
    );
    // This side gave up while the receiver may still wait: tell it at once
    // (it would otherwise wait for its idle limit). Or it has the
    // receiver's DONE: say BYE, so a receiver keeping its listeners open
    // for a sender that missed the DONE stops at once. Every open
    // connection writes its last frame after its current block; events are
    // drained meanwhile so no task blocks on them.
    if tell_receiver || result.is_ok() {
        let jobs: Vec<_> = owner.slots.iter().filter_map(|s| s.jobs.clone()).collect();
        let abort = async {
            // Each connection on its own: one stuck behind a long write
            // must not hold back the others' last frame.
            for j in jobs {
                let last = if tell_receiver { Job::Abort } else { Job::Bye };
                tokio::spawn(async move {
                    let _ = j.send(last).await;
                });
            }
            // A handle popped but not finished at the timeout is detached:
            // its task ends when the kill below reaches it.
            while let Some(t) = tasks.pop() {
                let _ = t.await;
            }
        };
        let drain = async { while ev_rx.recv().await.is_some() {} };
        let _ = tokio::time::timeout(LAST_FRAME_GRACE, async {
            tokio::select! {
                _ = abort => {}
                _ = drain => {}
            }
        })
        .await;
    }
    for s in &mut owner.slots {
        s.jobs = None;
        s.kill = None;
    }
    for t in tasks {
        let _ = t.await;
    }
    result?;
    let now = clock::now();
    observer(&owner.progress(start, now));
    Ok(owner.report(start, now))
}

/// The authenticator of this transfer's connections; with a code, pairs
/// with the receiver first (on the first address) to get the key.
async fn authenticator(cfg: &SendConfig) -> Result<Authenticator, PipeError> {
    let stats = Arc::new(SecureStats::default());
    let key = match &cfg.security {
        Security::Insecure => None,
        Security::Key { psk, encrypt } => Some((psk.clone(), *encrypt)),
        Security::Code { code, encrypt } => {
            let addr = cfg.to[0];
            let pairing = async {
                let s = net::connect_async(&addr, &cfg.sock)
                    .await
                    .map_err(SecureError::Io)?;
                secure::pair_connect(s, code, *encrypt).await
            };
            let psk = tokio::time::timeout(PAIRING_TIMEOUT, pairing)
                .await
                .map_err(|_| SecureError::Io(std::io::ErrorKind::TimedOut.into()))??;
            Some((psk, *encrypt))
        }
    };
    Ok(Authenticator::new(key, stats))
}

fn validate(cfg: &SendConfig) -> Result<(), ConfigError> {
    if cfg.to.is_empty() {
        return Err(ConfigError::NoReceiverAddress);
    }
    if cfg.connections == 0 || cfg.connections > MAX_CONNECTIONS {
        return Err(ConfigError::Connections);
    }
    if cfg.block_size < 4096 || cfg.block_size > frame::MAX_BLOCK_LEN {
        return Err(ConfigError::BlockSize);
    }
    if cfg.resume && cfg.layout == Layout::Partitioned {
        return Err(ConfigError::ResumePartitioned);
    }
    if cfg.rate.is_some_and(|r| r.bytes_per_sec() == 0) {
        return Err(ConfigError::Rate);
    }
    if cfg.rest_rate.is_some_and(|r| r.bytes_per_sec() == 0) {
        return Err(ConfigError::Rate);
    }
    if cfg
        .paced_connections
        .is_some_and(|k| k == 0 || k > cfg.connections)
    {
        return Err(ConfigError::PacedConnections);
    }
    cfg.sock.validate()
}

fn session_id(cfg: &SendConfig) -> TransferId {
    // Unique per process and start time; not a secret.
    let mut h = blake3::Hasher::new();
    h.update(&std::process::id().to_be_bytes());
    h.update(&clock::now().as_nanos().to_be_bytes());
    h.update(format!("{:?}{:p}", cfg.to, cfg).as_bytes());
    let mut id = [0u8; 16];
    id.copy_from_slice(&h.finalize().as_bytes()[..16]);
    id
}

/// Whether the rate cap applies to connection `c`.
fn is_paced(cfg: &SendConfig, c: usize) -> bool {
    cfg.paced_connections.is_none_or(|k| c < k)
}

/// The rate connection `c`'s socket is opened with (its group's cap).
fn initial_rate(cfg: &SendConfig, c: usize) -> Option<braid_core::Bandwidth> {
    if is_paced(cfg, c) {
        cfg.rate
    } else {
        cfg.rest_rate
    }
}

fn addr_of(cfg: &SendConfig, c: usize) -> SocketAddr {
    cfg.to[c % cfg.to.len()]
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_runtime_leaves_the_reader_a_core() {
        if std::env::var_os("TOKIO_WORKER_THREADS").is_some() {
            eprintln!("TOKIO_WORKER_THREADS is set: tokio decides, nothing to check");
            return;
        }
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let rt = super::runtime().unwrap();
        assert_eq!(rt.metrics().num_workers(), super::workers(cores));
    }

    #[test]
    fn workers_are_the_cores_but_the_readers() {
        let table = [(0, 1), (1, 1), (2, 1), (3, 2), (4, 3), (64, 63)];
        for (cores, want) in table {
            assert_eq!(super::workers(cores), want, "{cores} cores");
        }
    }
}
