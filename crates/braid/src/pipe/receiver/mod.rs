//! The receiving side: accept connections, verify, reorder, write in order.
//!
//! One task owns the state (the `Owner`: the session, the [`Reorder`]
//! window, per-connection slots, the outcome); the others talk to it over
//! bounded channels. The owner runs on the runtime's workers like the
//! others (the blocking [`Receiver::run`] only relays its progress
//! reports):
//! - one **accept** task per listening address, which spawns
//! - one **connection task** per accepted connection: hello (admitted by
//!   the owner), then frames: it reads and checks each block's payload
//!   itself (its check against the header's: the receiver's one hashing
//!   pass, off the owner),
//!   hands it to the owner in one message (the owner keeps it if it is new
//!   and inside the window; no round trip per block for a verdict first)
//!   and queues the acknowledgement; its **control writer** task writes the hello-ack and
//!   then every control frame for that connection;
//! - the **output writer** (one blocking task): writes the batches of
//!   in-order blocks the owner hands it, feeds their hashes to the
//!   end-to-end digest ([`super::digest`]), and at the end flushes and
//!   returns the digest.
//!
//! Files: `owner` (the state and its event handling), `conn` (accept,
//! per-connection and control-writer tasks), `output` (the output writer).
//!
//! Timers exist only for real timeouts: the hello, the idle limit (counted
//! as silence: no byte on any connection, open or not), a connection's
//! silence, the keepalive ack every `KEEPALIVE` (1 s), the linger after a
//! verified outcome (`LINGER`, ended by the sender's answer), the drain
//! after a failed one, progress reports.
//!
//! Connections waiting for their hello are bounded (`MAX_PENDING` = 64 per
//! listening address, `MAX_PENDING_PER_SOURCE` = 16 per IP address; a new
//! one beyond evicts the oldest). On resume ([`RecvConfig::resume`]) the
//! output already holds a verified prefix; the sender is told after every
//! hello-ack and the digest goes on from the prefix's.
//!
//! Invariants: a connection gets per-peer state only after its handshake
//! verified the key (`secure`; unless `--insecure`) and a hello with the
//! right magic, version and session; a connection holds at most
//! `BLOCKS_IN_HAND` (2) blocks the owner has not judged, and the owner keeps
//! a block only if it is new and inside the window (so memory is the
//! window plus two blocks per connection); a block is written only after
//! its check matched its header's; a block outside the window, an output
//! error, or a bad hash stops the transfer with an `Abort` to the sender
//! and an error here — except a `--no-encrypt` payload altered on the
//! wire, which ends only its connection (the block is re-sent) until the
//! same block has failed `MAX_TAMPERED` (3) times in a row.

use super::frame::{self, Control, Hello, HelloAck, TransferId};
use super::net::{self, SockOpts};
use super::reorder::{Payload, Reorder};
use super::secure::{self, Authenticator, SecureStats, Security};
use super::stats::{Progress, RecvReport};
use super::{ConfigError, PipeError, ProtocolViolation, MAX_CONNECTIONS};
use crate::clock;
use braid_core::Duration;
use std::io::Write;
use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration as StdDuration;
use tokio::sync::{mpsc, oneshot, OwnedSemaphorePermit};

mod conn;
mod output;
mod owner;

use conn::accept_loop;
use output::output_writer;
use owner::Owner;

/// How long a new connection has to complete its handshake and send its
/// hello (and a code pairing its exchange).
const HELLO_TIMEOUT: StdDuration = StdDuration::from_secs(5);
/// Connections per listening address that may wait for their hello at
/// once (a new one beyond evicts the oldest).
const MAX_PENDING: usize = 64;
/// Connections from one IP address that may wait for their hello at once.
const MAX_PENDING_PER_SOURCE: usize = 16;
/// After a failed outcome, how long to wait for the sender to close.
const DRAIN: Duration = Duration::from_secs(2);
/// After a verified outcome, how long the listeners stay open for a sender
/// that missed the DONE: a sender that rejoins is told again. The
/// sender's answer (BYE, or ABORT if it rejected the outcome) ends it at
/// once. The idle limit if shorter, but at least [`DRAIN`]. It covers a
/// connection closed or reset with the DONE unread: the sender rejoins at
/// once, then backs off 0.2 + 0.4 + 0.8 + 1.6 s. A path that goes silent
/// instead is noticed by the sender only after its silence limit (10 s by
/// default), after this: that sender still reports the receiver lost.
const LINGER: Duration = Duration::from_secs(5);
/// Accepted connections ever (bounds the per-connection table).
const MAX_ACCEPTED: usize = 4 * MAX_CONNECTIONS;
/// A control write (ack) blocked this long means the path is dead; the
/// connection is then closed so acks go over the others.
const ACK_WRITE_TIMEOUT: StdDuration = StdDuration::from_secs(2);
/// Size of the scratch buffer for dropping duplicate payloads.
const DISCARD_CHUNK: usize = 64 << 10;
/// How often the owner repeats its cumulative ack on every connection
/// (the receiver's keepalive).
const KEEPALIVE: Duration = Duration::from_secs(1);
/// How often the observer is called.
const PROGRESS_TICK: StdDuration = StdDuration::from_millis(150);
/// Bound of the channel into the owner: a few messages per connection.
const EVENT_QUEUE: usize = 4 * MAX_CONNECTIONS;
/// Blocks a connection may have read and handed over before the owner has
/// judged them: it reads the next payload while the owner takes the last,
/// and the receiver's memory stays within the window plus this many
/// blocks per connection.
const BLOCKS_IN_HAND: usize = 2;
/// The same block failing its authenticated hash this many times in a row
/// (each on a fresh connection) stops the transfer: the bytes are bad at
/// the sender, not on the wire.
const MAX_TAMPERED: u32 = 3;
/// Control frames queued for one connection. Per-block acks wait for room
/// (the connection's reader stalls, and TCP pushes back on the sender);
/// the owner's cumulative "written" acks are dropped when it is full (the
/// next one carries a newer count).
const CTL_QUEUE: usize = 64;
/// Batches of in-order blocks handed to the output writer at once.
const OUTPUT_QUEUE: usize = 2;

/// How long a stopped transfer waits for its output writer to finish the
/// writes it holds ([`Receiver::run_until`]).
pub const STOP_DRAIN: Duration = Duration::from_secs(10);

/// How a stoppable transfer ended: done, with its report, or stopped,
/// with what the stop said.
#[derive(Debug)]
pub enum Ended<R, S> {
    /// It ran to its end.
    Done(R),
    /// The stop came first.
    Stopped(S),
}

/// Settings of a receiver.
#[derive(Debug, Clone)]
pub struct RecvConfig {
    /// Addresses to listen on.
    pub listen: Vec<SocketAddr>,
    /// Largest reorder window, bytes.
    pub window_bytes: u64,
    /// Socket options.
    pub sock: SockOpts,
    /// Give up when the sender has been silent (no connection open, or
    /// open connections delivering nothing, not even the keepalive it
    /// sends every [`KEEPALIVE`](super::KEEPALIVE)) for this long
    /// mid-stream; a connection silent this long is closed.
    pub idle_limit: Duration,
    /// What a sender must prove (a key, a code) or `Insecure`.
    pub security: Security,
    /// Resume (`--resume`): the output already holds this verified
    /// prefix of the stream; the sender is told, sends only the rest, and
    /// the end-to-end digest covers both.
    pub resume: Option<ResumePoint>,
}

/// Where a resuming receiver starts: its output already holds `bytes`
/// bytes of the stream (every one verified when it was written) and
/// `prefix` has hashed them.
#[derive(Debug, Clone)]
pub struct ResumePoint {
    /// Length of the prefix.
    pub bytes: u64,
    /// BLAKE3 state after the prefix.
    pub prefix: blake3::Hasher,
}

impl ResumePoint {
    /// Reads `existing` (the output of an earlier, interrupted run) to
    /// its end, hashing it.
    ///
    /// # Errors
    /// The read error.
    pub fn read(existing: &mut impl std::io::Read) -> std::io::Result<Self> {
        let mut prefix = blake3::Hasher::new();
        let bytes = std::io::copy(existing, &mut prefix)?;
        Ok(ResumePoint { bytes, prefix })
    }
}

/// A bound receiver; [`Receiver::run`] serves one transfer.
#[derive(Debug)]
pub struct Receiver {
    listeners: Vec<TcpListener>,
    cfg: RecvConfig,
    stats: Arc<SecureStats>,
}

impl Receiver {
    /// Binds every listening address.
    ///
    /// # Errors
    /// [`PipeError::Listen`] if an address cannot be bound.
    pub fn bind(cfg: RecvConfig) -> Result<Self, PipeError> {
        if cfg.listen.is_empty() {
            return Err(ConfigError::NoListenAddress.into());
        }
        cfg.sock.validate()?;
        let mut listeners = Vec::new();
        for a in &cfg.listen {
            let l = net::listen(a, &cfg.sock).map_err(|e| PipeError::Listen {
                addr: *a,
                source: e,
            })?;
            l.set_nonblocking(true).map_err(|e| PipeError::Listen {
                addr: *a,
                source: e,
            })?;
            listeners.push(l);
        }
        Ok(Receiver {
            listeners,
            cfg,
            stats: Arc::default(),
        })
    }

    /// The counters of refused connections and records (live during
    /// [`Receiver::run`]; keep a clone to read them after).
    pub fn security_stats(&self) -> Arc<SecureStats> {
        Arc::clone(&self.stats)
    }

    /// The bound addresses (useful with port 0).
    pub fn local_addrs(&self) -> Vec<SocketAddr> {
        self.listeners
            .iter()
            .filter_map(|l| l.local_addr().ok())
            .collect()
    }

    /// Receives one stream into `output`, verified, in order.
    ///
    /// This blocking entry point builds a tokio runtime for the transfer.
    ///
    /// # Errors
    /// [`PipeError`]: a corrupt block, an output error, a protocol violation,
    /// a digest mismatch, or the sender gone for `idle_limit`.
    pub fn run(
        self,
        output: Box<dyn Write + Send>,
        observer: &mut dyn FnMut(&Progress),
    ) -> Result<RecvReport, PipeError> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .map_err(PipeError::Runtime)?;
        let res = rt.block_on(crate::pipe::stats::on_workers(
            observer,
            move |mut obs| async move { self.run_async(output, &mut obs).await },
        ));
        // The output writer may be blocked on a stalled output.
        rt.shutdown_background();
        res
    }

    /// [`Receiver::run`] until `stop` (built inside the transfer's
    /// runtime, so it may register signal handlers) finishes first. A
    /// stopped transfer drops its connections, and its output writer
    /// finishes the writes it holds (waited for up to
    /// [`STOP_DRAIN`]): what `output` holds is a prefix of the
    /// stream, from which `--resume` ([`RecvConfig::resume`]) goes on.
    ///
    /// # Errors
    /// As [`Receiver::run`], when the transfer fails before `stop`.
    pub fn run_until<S: std::future::Future>(
        self,
        output: Box<dyn Write + Send>,
        observer: &mut dyn FnMut(&Progress),
        stop: impl FnOnce() -> S,
    ) -> Result<Ended<RecvReport, S::Output>, PipeError> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .map_err(PipeError::Runtime)?;
        let stop = {
            let _entered = rt.enter();
            stop()
        };
        let res = rt.block_on(async {
            tokio::select! {
                r = crate::pipe::stats::on_workers(
                    observer,
                    move |mut obs| async move { self.run_async(output, &mut obs).await },
                ) => r.map(Ended::Done),
                s = stop => Ok(Ended::Stopped(s)),
            }
        });
        match res {
            // The output writer may be blocked on a stalled output.
            Ok(Ended::Done(_)) | Err(_) => rt.shutdown_background(),
            Ok(Ended::Stopped(_)) => rt.shutdown_timeout(STOP_DRAIN.into()),
        }
        res
    }

    /// The async form of [`Receiver::run`]; call it inside a tokio runtime
    /// with time and I/O enabled.
    ///
    /// # Errors
    /// As [`Receiver::run`].
    pub async fn run_async(
        self,
        output: Box<dyn Write + Send>,
        observer: &mut (dyn FnMut(&Progress) + Send),
    ) -> Result<RecvReport, PipeError> {
        let (ev_tx, ev_rx) = mpsc::channel(EVENT_QUEUE);
        let shared = Arc::new(Shared {
            written: AtomicU64::new(0),
            activity: AtomicU64::new(0),
            silence: StdDuration::from(self.cfg.idle_limit),
        });
        let mut listeners = Vec::new();
        for (l, &addr) in self.listeners.into_iter().zip(&self.cfg.listen) {
            let l = tokio::net::TcpListener::from_std(l)
                .map_err(|source| PipeError::Listen { addr, source })?;
            listeners.push(l);
        }
        let key = match &self.cfg.security {
            Security::Insecure => None,
            Security::Key { psk, encrypt } => Some((psk.clone(), *encrypt)),
            Security::Code { code, encrypt } => {
                let psk =
                    secure::pair_accept(&listeners, code, *encrypt, HELLO_TIMEOUT, &self.stats)
                        .await?;
                Some((psk, *encrypt))
            }
        };
        let auth = Arc::new(Authenticator::new(key, Arc::clone(&self.stats)));
        let mut acceptors = Vec::new();
        for l in listeners {
            acceptors.push(tokio::spawn(accept_loop(
                l,
                ev_tx.clone(),
                Arc::clone(&shared),
                Arc::clone(&auth),
            )));
        }
        let (out_tx, out_rx) = mpsc::channel(OUTPUT_QUEUE + 1);
        let resume = self.cfg.resume;
        let prefix = resume.as_ref().map(|r| (r.bytes, r.prefix.finalize()));
        {
            let ev = ev_tx.clone();
            drop(tokio::task::spawn_blocking(move || {
                output_writer(output, out_rx, ev, prefix)
            }));
        }
        let mut owner = Owner {
            window_bytes: self.cfg.window_bytes,
            idle_limit: self.cfg.idle_limit,
            session: None,
            reorder: Reorder::new(0, 0),
            end: None,
            fatal: None,
            tampered: None,
            conns: Vec::new(),
            open: 0,
            last_close: None,
            first_conn: None,
            outcome: None,
            bye: false,
            answered: false,
            told: 0,
            bytes: resume.as_ref().map_or(0, |r| r.bytes),
            shared,
            heard: (0, clock::now()),
            last_keepalive: clock::now(),
            out_tx,
            out_busy: 0,
            finishing: false,
            result: None,
            digest: None,
            resume: resume.as_ref().map(|r| {
                (
                    r.bytes,
                    frame::digest_prefix(r.prefix.finalize().as_bytes()),
                )
            }),
        };
        let mut ev_rx = ev_rx;
        let mut result = owner.run(&mut ev_rx, observer).await;
        // Tell the sender, let it close, then close everything. After a
        // verified outcome, keep listening until the sender says BYE (or
        // LINGER): a sender whose connections all died with the DONE in
        // them rejoins and is told again, instead of failing a transfer
        // that succeeded.
        owner.finish(&result).await;
        let verified = result.is_ok();
        let until = clock::now()
            + if verified {
                LINGER.min(owner.idle_limit).max(DRAIN)
            } else {
                DRAIN
            };
        while !owner.answered && (verified || owner.open > 0) {
            let left = until.saturating_duration_since(clock::now());
            if left.is_zero() {
                break;
            }
            match tokio::time::timeout(StdDuration::from(left), ev_rx.recv()).await {
                Ok(Some(ev)) => owner.handle_event(ev),
                Ok(None) | Err(_) => break,
            }
        }
        if let Ok(r) = &mut result {
            r.sender_confirmed = owner.bye;
        }
        drop(ev_tx);
        // Aborting an acceptor drops its connection tasks (and sockets).
        for a in acceptors {
            a.abort();
        }
        result
    }
}

/// What the connection tasks share with the owner (counters only, no
/// lock).
struct Shared {
    /// Blocks written, for the connection tasks' acks.
    written: AtomicU64,
    /// Reads that returned bytes, on any connection: the owner counts
    /// silence (a path down with its connections still open) as no change.
    activity: AtomicU64,
    /// A connection that delivers nothing (not even a keepalive) for this
    /// long is closed.
    silence: StdDuration,
}

struct Session {
    id: TransferId,
    max_block: u32,
    /// The size the sender's first hello announced (`None`: unknown, a
    /// pipe); an END that disagrees fails the transfer.
    announced: Option<u64>,
}

/// A control frame to write on one connection.
enum Ctl {
    /// Write it and go on.
    Frame(Control),
    /// Write it, then shut the sending direction.
    Final(Control),
}

/// The owner's answer to a hello.
enum Admit {
    /// Refused: the hello-ack says why.
    Refused(HelloAck),
    /// Accepted into the session.
    Conn {
        ack: HelloAck,
        /// The connection's index.
        idx: usize,
        /// The session's largest block.
        max_block: u32,
        /// Both ends of its control queue.
        ctl: (mpsc::Sender<Ctl>, mpsc::Receiver<Ctl>),
    },
    /// The session's sender rejoining after the outcome: told it again.
    TellAgain {
        ack: HelloAck,
        /// RESUME if resuming, then the DONE or ABORT.
        told: Vec<Control>,
        /// The session's largest block (to skip what it may still send).
        max_block: u32,
    },
}

/// What the output writer is told.
enum Out {
    Batch(Vec<(u64, Checked)>),
    Finish,
}

/// A block its connection read and checked: the bytes and their check
/// (the header's, and the end-to-end digest's input).
struct Checked {
    data: Vec<u8>,
    check: [u8; 32],
}

impl Payload for Checked {
    fn len_bytes(&self) -> u64 {
        self.data.len() as u64
    }
}

/// A message to the owner.
enum Event {
    Hello {
        peer: SocketAddr,
        hello: Hello,
        reply: oneshot::Sender<Admit>,
    },
    Block {
        idx: usize,
        seq: u64,
        block: Checked,
        /// One of its connection's [`BLOCKS_IN_HAND`] slots, freed once
        /// the owner has kept or dropped the block.
        slot: OwnedSemaphorePermit,
    },
    /// A `--no-encrypt` payload that did not match its authenticated hash.
    /// The reply says whether to stop the transfer (the same block failed
    /// [`MAX_TAMPERED`] times in a row); if not, the connection closes and
    /// the block will be re-sent.
    Tampered {
        idx: usize,
        seq: u64,
        reply: oneshot::Sender<bool>,
    },
    End {
        blocks: u64,
        total: u64,
        digest: [u8; 32],
        reply: oneshot::Sender<Result<(), ProtocolViolation>>,
    },
    Fatal {
        peer: SocketAddr,
        error: PipeError,
    },
    Closed {
        idx: usize,
    },
    /// The sender answered the outcome: BYE (`accepted`) or, after it,
    /// ABORT (it rejected it).
    Bye {
        accepted: bool,
    },
    Written {
        blocks: u64,
        bytes: u64,
    },
    OutputFailed {
        bytes: u64,
        source: std::io::Error,
    },
    Flushed {
        digest: [u8; 32],
    },
}
