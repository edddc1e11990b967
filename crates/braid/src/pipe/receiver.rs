//! The receiving side: accept connections, verify, reorder, write in order.
//!
//! One task owns the state (the `Owner`: the session, the [`Reorder`]
//! window, per-connection slots, the outcome); the others talk to it over
//! bounded channels:
//! - one **accept** task per listening address, which spawns
//! - one **connection task** per accepted connection: hello (admitted by
//!   the owner), then frames: it asks the owner for the verdict on each
//!   block header, reads and CRC-checks the payload itself (per-byte work
//!   off the owner), hands verified blocks to the owner and queues the
//!   acknowledgement; its **control writer** task writes the hello-ack and
//!   then every control frame for that connection;
//! - the **output writer** (one blocking task): writes the batches of
//!   in-order blocks the owner hands it, feeds the BLAKE3 digest, and at the
//!   end flushes and returns the digest.
//!
//! Timers exist only for real timeouts: the hello, the idle limit, the
//! drain after the outcome, progress reports.
//!
//! Invariants: a connection gets per-peer state only after a hello with the
//! right magic, version and session; a block is allocated only if the
//! window's verdict says it is new and inside the window; a block is
//! written only after its CRC matched; a block outside the window, a bad
//! CRC or an output error stops the transfer with an `Abort` to the sender
//! and an error here.

use super::frame::{
    self, Control, DataHeader, DataKind, Hello, HelloAck, HelloStatus, SessionId, StopReason,
    FLAG_REJOIN,
};
use super::net::{self, SockOpts};
use super::reorder::{Reorder, Verdict};
use super::stats::{Progress, RecvConn, RecvReport};
use super::{ConfigError, PipeError, ProtocolViolation, MAX_CONNECTIONS, MAX_WINDOW_BLOCKS};
use crate::clock;
use braid_core::{Duration, Instant};
use std::io::Write;
use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration as StdDuration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot};

/// How long a new connection has to send its hello.
const HELLO_TIMEOUT: StdDuration = StdDuration::from_secs(5);
/// After the outcome, how long to wait for the sender to close.
const DRAIN: Duration = Duration::from_secs(2);
/// Accepted connections ever (bounds the per-connection table).
const MAX_ACCEPTED: usize = 4 * MAX_CONNECTIONS;
/// A control write (ack) blocked this long means the path is dead; the
/// connection is then closed so acks go over the others.
const ACK_WRITE_TIMEOUT: StdDuration = StdDuration::from_secs(2);
/// Size of the scratch buffer for dropping duplicate payloads.
const DISCARD_CHUNK: usize = 64 << 10;
/// How often the observer is called.
const PROGRESS_TICK: StdDuration = StdDuration::from_millis(150);
/// Bound of the channel into the owner: a few messages per connection.
const EVENT_QUEUE: usize = 4 * MAX_CONNECTIONS;
/// Control frames queued for one connection. Per-block acks wait for room
/// (the connection's reader stalls, and TCP pushes back on the sender);
/// the owner's cumulative "written" acks are dropped when it is full (the
/// next one carries a newer count).
const CTL_QUEUE: usize = 64;
/// Batches of in-order blocks handed to the output writer at once.
const OUTPUT_QUEUE: usize = 2;

/// Settings of a receiver.
#[derive(Debug, Clone)]
pub struct RecvConfig {
    /// Addresses to listen on.
    pub listen: Vec<SocketAddr>,
    /// Largest reorder window, bytes.
    pub window_bytes: u64,
    /// Socket options.
    pub sock: SockOpts,
    /// Give up when no connection is open for this long mid-stream.
    pub idle_limit: Duration,
}

/// A bound receiver; [`Receiver::run`] serves one transfer.
#[derive(Debug)]
pub struct Receiver {
    listeners: Vec<TcpListener>,
    cfg: RecvConfig,
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
        Ok(Receiver { listeners, cfg })
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
        let res = rt.block_on(self.run_async(output, observer));
        // The output writer may be blocked on a stalled output.
        rt.shutdown_background();
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
        observer: &mut dyn FnMut(&Progress),
    ) -> Result<RecvReport, PipeError> {
        let (ev_tx, ev_rx) = mpsc::channel(EVENT_QUEUE);
        let written = Arc::new(AtomicU64::new(0));
        let mut acceptors = Vec::new();
        for (l, &addr) in self.listeners.into_iter().zip(&self.cfg.listen) {
            let l = tokio::net::TcpListener::from_std(l)
                .map_err(|source| PipeError::Listen { addr, source })?;
            acceptors.push(tokio::spawn(accept_loop(
                l,
                ev_tx.clone(),
                Arc::clone(&written),
            )));
        }
        let (out_tx, out_rx) = mpsc::channel(OUTPUT_QUEUE + 1);
        {
            let ev = ev_tx.clone();
            drop(tokio::task::spawn_blocking(move || {
                output_writer(output, out_rx, ev)
            }));
        }
        let mut owner = Owner {
            window_bytes: self.cfg.window_bytes,
            idle_limit: self.cfg.idle_limit,
            session: None,
            reorder: Reorder::new(0, 0),
            end: None,
            fatal: None,
            conns: Vec::new(),
            open: 0,
            last_close: None,
            first_conn: None,
            done: false,
            bytes: 0,
            written,
            out_tx,
            out_busy: 0,
            finishing: false,
            result: None,
        };
        let mut ev_rx = ev_rx;
        let result = owner.run(&mut ev_rx, observer).await;
        // Tell the sender, let it close, then close everything.
        owner.finish(&result).await;
        let until = clock::now() + DRAIN;
        while owner.open > 0 {
            let left = until.saturating_duration_since(clock::now());
            if left.is_zero() {
                break;
            }
            match tokio::time::timeout(StdDuration::from(left), ev_rx.recv()).await {
                Ok(Some(ev)) => owner.handle_event(ev),
                Ok(None) | Err(_) => break,
            }
        }
        drop(ev_tx);
        // Aborting an acceptor drops its connection tasks (and sockets).
        for a in acceptors {
            a.abort();
        }
        result
    }
}

struct Session {
    id: SessionId,
    max_block: u32,
}

/// A control frame to write on one connection.
enum Ctl {
    /// Write it and go on.
    Frame(Control),
    /// Write it, then shut the sending direction.
    Final(Control),
}

/// The owner's answer to a hello.
struct Admit {
    ack: HelloAck,
    /// For an accepted connection: its index, the session's largest block,
    /// and both ends of its control queue.
    conn: Option<(usize, u32, mpsc::Sender<Ctl>, mpsc::Receiver<Ctl>)>,
}

/// What the output writer is told.
enum Out {
    Batch(Vec<(u64, Vec<u8>)>),
    Finish,
}

/// A message to the owner.
enum Event {
    Hello {
        peer: SocketAddr,
        hello: Hello,
        reply: oneshot::Sender<Admit>,
    },
    Header {
        seq: u64,
        len: u32,
        reply: oneshot::Sender<Verdict>,
    },
    Block {
        idx: usize,
        seq: u64,
        data: Vec<u8>,
    },
    Duplicate {
        idx: usize,
        len: u32,
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

struct ConnSlot {
    peer: SocketAddr,
    /// The connection's control queue; dropped when it closes, which ends
    /// its control writer.
    ctl: Option<mpsc::Sender<Ctl>>,
    open: bool,
    bytes: u64,
}

/// The task that owns the receiver's state; see the module docs.
struct Owner {
    window_bytes: u64,
    idle_limit: Duration,
    session: Option<Session>,
    reorder: Reorder,
    end: Option<(u64, u64, [u8; 32])>,
    fatal: Option<PipeError>,
    conns: Vec<ConnSlot>,
    open: usize,
    last_close: Option<Instant>,
    first_conn: Option<Instant>,
    done: bool,
    /// Bytes written (all verified).
    bytes: u64,
    /// Blocks written, for the connection tasks' acks.
    written: Arc<AtomicU64>,
    out_tx: mpsc::Sender<Out>,
    out_busy: usize,
    finishing: bool,
    result: Option<Result<RecvReport, PipeError>>,
}

impl Owner {
    async fn run(
        &mut self,
        events: &mut mpsc::Receiver<Event>,
        observer: &mut dyn FnMut(&Progress),
    ) -> Result<RecvReport, PipeError> {
        let mut tick = tokio::time::interval(PROGRESS_TICK);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        // The first tick is immediate; the first report comes one tick in.
        tick.tick().await;
        loop {
            if let Some(r) = self.result.take() {
                return r;
            }
            if self.out_busy == 0 {
                if let Some(e) = self.fatal.take() {
                    return Err(with_bytes(e, self.bytes));
                }
            }
            self.service();
            let idle = match (self.open, self.last_close) {
                (0, Some(t)) => {
                    let due = t + self.idle_limit;
                    Some(StdDuration::from(
                        due.saturating_duration_since(clock::now()) + Duration::from_millis(1),
                    ))
                }
                _ => None,
            };
            tokio::select! {
                ev = events.recv() => match ev {
                    Some(ev) => self.handle_event(ev),
                    None => return Err(PipeError::LostSender { secs: 0, bytes: self.bytes }),
                },
                _ = tick.tick() => {
                    let p = self.progress(clock::now());
                    observer(&p);
                }
                _ = sleep_opt(idle) => {
                    let now = clock::now();
                    if let (0, Some(t)) = (self.open, self.last_close) {
                        if now.saturating_duration_since(t) > self.idle_limit {
                            return Err(PipeError::LostSender {
                                secs: self.idle_limit.as_secs_f64() as u64,
                                bytes: self.bytes,
                            });
                        }
                    }
                }
            }
        }
    }

    /// Hands ready blocks to the output writer; at the end, asks it to
    /// flush.
    fn service(&mut self) {
        if self.fatal.is_some() || self.finishing {
            return;
        }
        if self.out_busy < OUTPUT_QUEUE {
            let ready = self.reorder.pop_ready();
            if !ready.is_empty() {
                if self.out_tx.try_send(Out::Batch(ready)).is_ok() {
                    self.out_busy += 1;
                } else {
                    self.fatal.get_or_insert(PipeError::Output {
                        bytes: self.bytes,
                        source: std::io::Error::other("the output writer stopped"),
                    });
                }
                return;
            }
        }
        if let Some((blocks, _, _)) = self.end {
            if self.out_busy == 0 && self.reorder.written() >= blocks && self.session.is_some() {
                self.finishing = true;
                if self.out_tx.try_send(Out::Finish).is_err() {
                    self.fatal.get_or_insert(PipeError::Output {
                        bytes: self.bytes,
                        source: std::io::Error::other("the output writer stopped"),
                    });
                }
            }
        }
    }

    fn handle_event(&mut self, ev: Event) {
        match ev {
            Event::Hello { peer, hello, reply } => {
                let _ = reply.send(self.admit(peer, &hello));
            }
            Event::Header { seq, len, reply } => {
                let _ = reply.send(self.reorder.verdict(seq, u64::from(len)));
            }
            Event::Block { idx, seq, data } => {
                self.conns[idx].bytes += data.len() as u64;
                self.reorder.insert(seq, data);
            }
            Event::Duplicate { idx, len } => {
                self.reorder.count_duplicate();
                self.conns[idx].bytes += u64::from(len);
            }
            Event::End {
                blocks,
                total,
                digest,
                reply,
            } => {
                let r = match self.end {
                    None => {
                        self.end = Some((blocks, total, digest));
                        Ok(())
                    }
                    Some(e) if e == (blocks, total, digest) => Ok(()),
                    Some(_) => Err(ProtocolViolation::TwoEnds),
                };
                let _ = reply.send(r);
            }
            Event::Fatal { peer, error } => {
                if !self.done {
                    tracing::warn!(%peer, error = %error, "stopping: bad input from the sender");
                    self.fatal.get_or_insert(error);
                }
            }
            Event::Closed { idx } => {
                self.conns[idx].open = false;
                self.conns[idx].ctl = None;
                self.open -= 1;
                self.last_close = Some(clock::now());
            }
            Event::Written { blocks, bytes } => {
                self.out_busy = self.out_busy.saturating_sub(1);
                self.reorder.mark_written(blocks, bytes);
                self.bytes += bytes;
                let written = self.reorder.written();
                self.written.store(written, Ordering::Relaxed);
                let ack = Control::Ack {
                    seq: u64::MAX,
                    written,
                };
                for ctl in self.conns.iter().filter_map(|c| c.ctl.as_ref()) {
                    // Cumulative: if the queue is full, the next one will do.
                    let _ = ctl.try_send(Ctl::Frame(ack));
                }
            }
            Event::OutputFailed { bytes, source } => {
                self.out_busy = self.out_busy.saturating_sub(1);
                self.result
                    .get_or_insert(Err(PipeError::Output { bytes, source }));
            }
            Event::Flushed { digest } => {
                let Some((_, total, sent_digest)) = self.end else {
                    return;
                };
                let r = if total != self.bytes || digest != sent_digest {
                    Err(PipeError::Digest {
                        sent: total,
                        written: self.bytes,
                        digests_match: digest == sent_digest,
                    })
                } else {
                    Ok(self.report(&digest))
                };
                self.result.get_or_insert(r);
            }
        }
    }

    /// Checks a hello and registers the connection.
    fn admit(&mut self, peer: SocketAddr, hello: &Hello) -> Admit {
        let status = match &self.session {
            _ if self.done => HelloStatus::Busy,
            None if hello.flags & FLAG_REJOIN != 0 => HelloStatus::UnknownSession,
            Some(ses) if ses.id != hello.session => HelloStatus::Busy,
            _ if self.open >= MAX_CONNECTIONS || self.conns.len() >= MAX_ACCEPTED => {
                HelloStatus::TooManyConnections
            }
            _ => HelloStatus::Ok,
        };
        let (window, window_bytes) = if status != HelloStatus::Ok {
            (0, 0)
        } else if self.session.is_some() {
            (self.reorder.window(), self.reorder.window_bytes())
        } else {
            // At least two full blocks; memory is bounded by the byte window.
            let bytes = self.window_bytes.max(2 * u64::from(hello.max_block));
            let w = u64::from(hello.window_blocks).clamp(2, MAX_WINDOW_BLOCKS);
            self.session = Some(Session {
                id: hello.session,
                max_block: hello.max_block,
            });
            self.reorder = Reorder::new(w, bytes);
            (w, bytes)
        };
        let ack = HelloAck {
            status,
            window_blocks: window as u32,
            window_bytes,
        };
        if status != HelloStatus::Ok {
            return Admit { ack, conn: None };
        }
        let max_block = self.session.as_ref().map_or(0, |ses| ses.max_block);
        let idx = self.conns.len();
        let (ctl_tx, ctl_rx) = mpsc::channel(CTL_QUEUE);
        self.conns.push(ConnSlot {
            peer,
            ctl: Some(ctl_tx.clone()),
            open: true,
            bytes: 0,
        });
        self.open += 1;
        self.first_conn.get_or_insert(clock::now());
        Admit {
            ack,
            conn: Some((idx, max_block, ctl_tx, ctl_rx)),
        }
    }

    /// Sends the outcome (`Done` or `Abort`) on every open connection and
    /// refuses new ones.
    async fn finish(&mut self, result: &Result<RecvReport, PipeError>) {
        let bytes = self.bytes;
        let msg = match result {
            Ok(_) => Control::Done {
                reason: StopReason::Verified,
                bytes,
            },
            Err(PipeError::Digest { .. }) => Control::Done {
                reason: StopReason::DigestMismatch,
                bytes,
            },
            Err(e) => Control::Abort {
                reason: stop_reason(e),
                bytes,
                seq: u64::MAX,
            },
        };
        self.done = true;
        for ctl in self.conns.iter().filter_map(|c| c.ctl.as_ref()) {
            let send = ctl.send(Ctl::Final(msg));
            let _ = tokio::time::timeout(ACK_WRITE_TIMEOUT, send).await;
        }
    }

    fn progress(&self, now: Instant) -> Progress {
        let start = self.first_conn.unwrap_or(now);
        Progress {
            bytes: self.bytes,
            total: None,
            seconds: now.saturating_duration_since(start).as_secs_f64(),
            per_conn: self.conns.iter().map(|c| c.bytes).collect(),
        }
    }

    fn report(&self, digest: &[u8; 32]) -> RecvReport {
        let now = clock::now();
        let secs = now
            .saturating_duration_since(self.first_conn.unwrap_or(now))
            .as_secs_f64()
            .max(1e-9);
        let (pb, pby, dups) = self.reorder.peaks();
        RecvReport {
            side: "recv",
            bytes: self.bytes,
            blocks: self.reorder.written(),
            seconds: secs,
            bps: self.bytes as f64 * 8.0 / secs,
            window_blocks: self.reorder.window(),
            reorder_peak_blocks: pb,
            reorder_peak_bytes: pby,
            duplicates: dups,
            blake3: blake3::Hash::from_bytes(*digest).to_hex().to_string(),
            connections: self
                .conns
                .iter()
                .enumerate()
                .map(|(i, c)| RecvConn {
                    index: i,
                    peer: c.peer.to_string(),
                    bytes: c.bytes,
                    bps: c.bytes as f64 * 8.0 / secs,
                })
                .collect(),
        }
    }
}

fn stop_reason(e: &PipeError) -> StopReason {
    match e {
        PipeError::Corrupt { .. } => StopReason::BadChecksum,
        PipeError::Output { .. } => StopReason::OutputFailed,
        PipeError::Digest { .. } => StopReason::DigestMismatch,
        _ => StopReason::Protocol,
    }
}

fn with_bytes(e: PipeError, bytes: u64) -> PipeError {
    match e {
        PipeError::Corrupt { seq, conn, .. } => PipeError::Corrupt { seq, conn, bytes },
        PipeError::SenderAborted { .. } => PipeError::SenderAborted { bytes },
        e => e,
    }
}

/// Sleeps for `d`, or forever if `None`.
async fn sleep_opt(d: Option<StdDuration>) {
    match d {
        Some(d) => tokio::time::sleep(d).await,
        None => std::future::pending().await,
    }
}

/// The blocking output writer: batches in order, BLAKE3 here.
fn output_writer(
    mut out: Box<dyn Write + Send>,
    mut jobs: mpsc::Receiver<Out>,
    events: mpsc::Sender<Event>,
) {
    let mut hasher = blake3::Hasher::new();
    let mut bytes: u64 = 0;
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

/// Accepts connections until aborted; dropping it drops its connections.
async fn accept_loop(
    l: tokio::net::TcpListener,
    events: mpsc::Sender<Event>,
    written: Arc<AtomicU64>,
) {
    let mut conns = tokio::task::JoinSet::new();
    loop {
        while conns.try_join_next().is_some() {}
        match l.accept().await {
            Ok((s, peer)) => {
                conns.spawn(serve(s, peer, events.clone(), Arc::clone(&written)));
            }
            Err(e) => {
                tracing::warn!(error = %e, "accept failed");
                // Out of descriptors and the like: do not spin.
                tokio::time::sleep(StdDuration::from_millis(20)).await;
            }
        }
    }
}

/// One accepted connection: hello, then frames until it closes.
async fn serve(
    mut s: TcpStream,
    peer: SocketAddr,
    events: mpsc::Sender<Event>,
    written: Arc<AtomicU64>,
) {
    let mut b = [0u8; frame::HELLO_LEN];
    let hello = match tokio::time::timeout(HELLO_TIMEOUT, s.read_exact(&mut b)).await {
        Ok(Ok(_)) => Hello::decode(&b).map_err(|e| e.to_string()),
        Ok(Err(e)) => Err(format!("no hello: {e}")),
        Err(_) => Err("no hello: timed out".to_string()),
    };
    let hello = match hello {
        Ok(h) => h,
        Err(e) => {
            tracing::info!(%peer, error = %e, "connection rejected");
            return;
        }
    };
    let (reply_tx, reply_rx) = oneshot::channel();
    let ask = Event::Hello {
        peer,
        hello,
        reply: reply_tx,
    };
    if events.send(ask).await.is_err() {
        return;
    }
    let Ok(admit) = reply_rx.await else {
        return;
    };
    let Some((idx, max_block, ctl_tx, ctl_rx)) = admit.conn else {
        let _ = tokio::time::timeout(ACK_WRITE_TIMEOUT, s.write_all(&admit.ack.encode())).await;
        tracing::info!(%peer, status = ?admit.ack.status, "connection rejected: hello refused");
        return;
    };
    let (mut rd, wr) = s.into_split();
    let writer = tokio::spawn(ctl_writer(wr, admit.ack.encode(), ctl_rx));
    let res = serve_frames(&mut rd, idx, max_block, &events, ctl_tx, &written).await;
    if let Err(error) = res {
        let _ = events.send(Event::Fatal { peer, error }).await;
        // Stay open and keep reading until the sender closes: the ABORT goes
        // out on this connection too, and closing with unread data would
        // send a reset that destroys it before the sender reads it.
        drain(&mut rd).await;
    }
    // The control writer ends once the owner drops its queue; it cannot
    // outlive this task's socket by more than that.
    drop(writer);
    let _ = events.send(Event::Closed { idx }).await;
}

/// Writes the hello-ack, then every control frame queued for this
/// connection; a write that fails or blocks for [`ACK_WRITE_TIMEOUT`]
/// closes the connection (its reader then sees the end).
async fn ctl_writer(
    mut wr: OwnedWriteHalf,
    hello_ack: [u8; frame::HELLO_ACK_LEN],
    mut queue: mpsc::Receiver<Ctl>,
) {
    let ok = matches!(
        tokio::time::timeout(ACK_WRITE_TIMEOUT, wr.write_all(&hello_ack)).await,
        Ok(Ok(()))
    );
    if !ok {
        shutdown_both(&wr);
        return;
    }
    while let Some(m) = queue.recv().await {
        let (c, last) = match m {
            Ctl::Frame(c) => (c, false),
            Ctl::Final(c) => (c, true),
        };
        let w = tokio::time::timeout(ACK_WRITE_TIMEOUT, wr.write_all(&c.encode())).await;
        if !matches!(w, Ok(Ok(()))) {
            // Dead path: closing it ends its reader, which unregisters it.
            shutdown_both(&wr);
            return;
        }
        if last {
            let _ = wr.shutdown().await;
            return;
        }
    }
}

fn shutdown_both(wr: &OwnedWriteHalf) {
    let s: &TcpStream = wr.as_ref();
    let _ = socket2::SockRef::from(s).shutdown(std::net::Shutdown::Both);
}

/// Reads and discards until the peer closes, the socket fails, or
/// [`DRAIN`] has passed (the owner closes every socket then).
async fn drain(s: &mut OwnedReadHalf) {
    let mut buf = vec![0u8; DISCARD_CHUNK];
    let _ = tokio::time::timeout(StdDuration::from(DRAIN), async {
        loop {
            match s.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    })
    .await;
}

/// Reads frames until the connection closes (`Ok`) or the peer sends
/// something that must stop the transfer (`Err`).
async fn serve_frames(
    s: &mut OwnedReadHalf,
    idx: usize,
    max_block: u32,
    events: &mpsc::Sender<Event>,
    ctl: mpsc::Sender<Ctl>,
    written: &AtomicU64,
) -> Result<(), PipeError> {
    let mut hb = [0u8; frame::HEADER_LEN];
    let mut scratch = Vec::new();
    loop {
        if s.read_exact(&mut hb).await.is_err() {
            return Ok(());
        }
        let h = DataHeader::decode(&hb, max_block)?;
        match h.kind {
            DataKind::Abort => return Err(PipeError::SenderAborted { bytes: 0 }),
            DataKind::End => {
                let mut p = [0u8; frame::END_PAYLOAD_LEN as usize];
                if s.read_exact(&mut p).await.is_err() {
                    return Ok(());
                }
                let (total, digest) = match frame::decode_end(&p) {
                    Some(x) if crc32fast::hash(&p) == h.crc => x,
                    _ => return Err(ProtocolViolation::EndChecksum.into()),
                };
                let (tx, rx) = oneshot::channel();
                let ev = Event::End {
                    blocks: h.seq,
                    total,
                    digest,
                    reply: tx,
                };
                if events.send(ev).await.is_err() {
                    return Ok(());
                }
                if let Ok(r) = rx.await {
                    r?;
                }
            }
            DataKind::Data => {
                let (tx, rx) = oneshot::channel();
                let ev = Event::Header {
                    seq: h.seq,
                    len: h.len,
                    reply: tx,
                };
                if events.send(ev).await.is_err() {
                    return Ok(());
                }
                let Ok(verdict) = rx.await else {
                    return Ok(());
                };
                let ev = match verdict {
                    Verdict::Violation => return Err(ProtocolViolation::BeyondWindow(h.seq).into()),
                    Verdict::Duplicate => {
                        if discard(s, h.len as usize, &mut scratch).await.is_err() {
                            return Ok(());
                        }
                        Event::Duplicate { idx, len: h.len }
                    }
                    Verdict::Take => {
                        // read_to_end fills spare capacity without zeroing it.
                        let mut data = Vec::with_capacity(h.len as usize);
                        match (&mut *s)
                            .take(u64::from(h.len))
                            .read_to_end(&mut data)
                            .await
                        {
                            Ok(n) if n == h.len as usize => {}
                            _ => return Ok(()),
                        }
                        if crc32fast::hash(&data) != h.crc {
                            return Err(PipeError::Corrupt {
                                seq: h.seq,
                                conn: idx,
                                bytes: 0,
                            });
                        }
                        Event::Block {
                            idx,
                            seq: h.seq,
                            data,
                        }
                    }
                };
                if events.send(ev).await.is_err() {
                    return Ok(());
                }
                let ack = Control::Ack {
                    seq: h.seq,
                    written: written.load(Ordering::Relaxed),
                };
                if ctl.send(Ctl::Frame(ack)).await.is_err() {
                    return Ok(());
                }
            }
        }
    }
}

async fn discard(s: &mut OwnedReadHalf, mut n: usize, buf: &mut Vec<u8>) -> std::io::Result<()> {
    if buf.len() < DISCARD_CHUNK.min(n) {
        buf.resize(DISCARD_CHUNK.min(n), 0);
    }
    while n > 0 {
        let k = n.min(buf.len());
        s.read_exact(&mut buf[..k]).await?;
        n -= k;
    }
    Ok(())
}
