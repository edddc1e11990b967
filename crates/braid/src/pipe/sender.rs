//! The sending side: tokio tasks around one [`Scheduler`].
//!
//! One task owns the state (the `Owner`: scheduler, the blocks not yet
//! acknowledged, per-connection slots, the outcome); every other task talks
//! to it over bounded channels, so nothing is shared behind a lock:
//! - the **reader** (one blocking task, [`tokio::task::spawn_blocking`]):
//!   asked for one block of a given length at a time, it reads the input,
//!   computes the block's CRC-32 and feeds the stream's BLAKE3, so the
//!   per-byte work stays off the owner;
//! - one **connection task** per connection: connect (TCP or MPTCP), hello,
//!   then ask the owner for a job, write it, ask again; reconnect with
//!   backoff when the connection dies; its **ack reader** task decodes the
//!   receiver's control frames and hands them to the owner.
//!
//! Wake-ups are messages: the owner answers a connection that asked for
//! work as soon as an event (an ack, a block read, a connection down) lets
//! the scheduler give it something, and otherwise at
//! [`Scheduler::poll_timeout`] (when a stalled path makes a copy worth
//! sending). Timers exist only for real timeouts: connect, reconnect
//! backoff, progress reports.
//!
//! Invariants: a block's bytes are kept until it is acknowledged; at most
//! `window` blocks are held (the scheduler bounds reading); success is
//! declared only when the receiver reports `Done(Verified)`; the stop signal
//! is the typed `Stop` value the owner publishes to every task.

use super::frame::{
    self, Control, DataHeader, DataKind, Hello, HelloAck, HelloStatus, SessionId, FLAG_REJOIN,
};
use super::net::{self, SockOpts};
use super::sched::{Layout, Mode, Scheduler, MIN_ADAPTIVE_BLOCK};
use super::stats::{Progress, SendConn, SendReport};
use super::{ConfigError, PipeError, ProtocolViolation, MAX_CONNECTIONS, MAX_WINDOW_BLOCKS};
use crate::clock;
use braid_core::Instant;
use std::collections::BTreeMap;
use std::io::Read;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration as StdDuration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot, watch};

/// Timeout of one connection attempt (including the hello).
const CONNECT_TIMEOUT: StdDuration = StdDuration::from_secs(3);
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
/// Read requests queued for the reader: one block at a time (the
/// scheduler fixes a block's length when it is read).
const READ_QUEUE: usize = 1;

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
    /// Block size in bytes.
    pub block_size: u32,
    /// Reorder window to ask for, bytes.
    pub window_bytes: u64,
    /// Input size if known.
    pub total_size: Option<u64>,
    /// Socket options.
    pub sock: SockOpts,
    /// Reconnect attempts per connection before it gives up.
    pub reconnect_attempts: u32,
    /// Test hook: corrupt the first copy of this block on the wire.
    pub corrupt_block: Option<u64>,
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
    crc: u32,
}

/// What a connection is told to write next.
enum Job {
    Block {
        seq: u64,
        block: Arc<Block>,
        copy: bool,
    },
    End {
        blocks: u64,
        bytes: u64,
        digest: [u8; 32],
    },
}

/// What the reader hands back.
enum Input {
    Block(Block),
    Eof { bytes: u64, digest: [u8; 32] },
    Failed(std::io::Error),
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
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(PipeError::Runtime)?;
    let res = rt.block_on(send_async(input, cfg, observer));
    // The reader may be blocked on an idle input: do not wait for it.
    rt.shutdown_background();
    res
}

/// The async form of [`send`]; call it inside a tokio runtime with time and
/// I/O enabled.
///
/// # Errors
/// As [`send`].
pub async fn send_async(
    input: Box<dyn Read + Send>,
    cfg: SendConfig,
    observer: &mut dyn FnMut(&Progress),
) -> Result<SendReport, PipeError> {
    validate(&cfg)?;
    let start = clock::now();
    let total_blocks = cfg
        .total_size
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
    let sched = Scheduler::new(
        cfg.mode,
        cfg.layout,
        cfg.connections,
        cfg.block_size,
        window,
        total_blocks,
        start,
    );
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
    drop(tokio::task::spawn_blocking(move || {
        reader(input, read_rx, input_tx)
    }));
    let mut tasks = Vec::new();
    for c in 0..cfg.connections {
        tasks.push(tokio::spawn(conn_task(
            Arc::clone(&cfg),
            session,
            c,
            ev_tx.clone(),
            pub_rx.clone(),
        )));
    }
    drop(ev_tx);
    let mut owner = Owner {
        slots: (0..cfg.connections).map(|_| Slot::default()).collect(),
        cfg,
        sched,
        blocks: BTreeMap::new(),
        outcome: None,
        session_up: false,
        end: None,
        acked_bytes: 0,
        sent_wire: 0,
        window_blocks: window,
        reading: false,
        read_tx,
        pub_tx,
        rotate: 0,
        reweights: 0,
    };
    let result = owner.run(ev_rx, input_rx, start, observer).await;
    // Stop everything: kill the connections, then wait for their tasks.
    owner.publish(Stop::Finished);
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
    Ok(())
}

fn session_id(cfg: &SendConfig) -> SessionId {
    // Unique per process and start time; not a secret.
    let mut h = blake3::Hasher::new();
    h.update(&std::process::id().to_be_bytes());
    h.update(&clock::now().as_nanos().to_be_bytes());
    h.update(format!("{:?}{:p}", cfg.to, cfg).as_bytes());
    let mut id = [0u8; 16];
    id.copy_from_slice(&h.finalize().as_bytes()[..16]);
    id
}

fn addr_of(cfg: &SendConfig, c: usize) -> SocketAddr {
    cfg.to[c % cfg.to.len()]
}

/// The task that owns the sender's state; see the module docs.
struct Owner {
    cfg: Arc<SendConfig>,
    sched: Scheduler,
    blocks: BTreeMap<u64, Arc<Block>>,
    slots: Vec<Slot>,
    outcome: Option<Result<(), PipeError>>,
    session_up: bool,
    end: Option<(u64, [u8; 32])>,
    acked_bytes: u64,
    sent_wire: u64,
    window_blocks: u64,
    /// A read request is out to the reader.
    reading: bool,
    read_tx: mpsc::Sender<u32>,
    pub_tx: watch::Sender<Published>,
    /// Where the next round of job offers starts (fairness).
    rotate: usize,
    reweights: u64,
}

impl Owner {
    async fn run(
        &mut self,
        mut events: mpsc::Receiver<Event>,
        mut input: mpsc::Receiver<Input>,
        start: Instant,
        observer: &mut dyn FnMut(&Progress),
    ) -> Result<(), PipeError> {
        let mut tick = tokio::time::interval(PROGRESS_TICK);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        // The first tick is immediate; the first report comes one tick in.
        tick.tick().await;
        loop {
            if let Some(o) = self.outcome.take() {
                return o;
            }
            if self.slots.iter().all(|s| s.given_up) {
                let last = self.slots.iter().rev().find_map(|s| s.last_error.clone());
                return Err(PipeError::LostReceiver {
                    conns: self.slots.len(),
                    acked_bytes: self.acked_bytes,
                    last_error: last.unwrap_or_else(|| "no connection".into()),
                });
            }
            self.service();
            // A waiting connection may get a copy once a path stalls.
            let stall = self
                .slots
                .iter()
                .any(|s| s.wants)
                .then(|| {
                    let now = clock::now();
                    let due = self.sched.poll_timeout(now)?;
                    Some(StdDuration::from(due.saturating_duration_since(now)))
                })
                .flatten();
            tokio::select! {
                ev = events.recv() => match ev {
                    Some(ev) => self.handle_event(ev),
                    // Every connection task ended: they all gave up.
                    None => self.slots.iter_mut().for_each(|s| s.given_up = true),
                },
                inp = input.recv(), if self.reading => self.handle_input(inp),
                _ = tick.tick() => {
                    let p = self.progress(start, clock::now());
                    observer(&p);
                }
                _ = sleep_opt(stall) => {}
            }
        }
    }

    /// Starts a read if the scheduler allows and offers jobs to every
    /// connection that asked for one.
    fn service(&mut self) {
        if !self.reading && self.session_up && self.sched.may_read() {
            // The reader owns the other end until the transfer ends; a full
            // queue cannot happen (one request at a time).
            if self.read_tx.try_send(self.sched.next_len()).is_ok() {
                self.reading = true;
            }
        }
        let n = self.slots.len();
        let now = clock::now();
        for i in 0..n {
            let c = (self.rotate + i) % n;
            if !self.slots[c].wants {
                continue;
            }
            let Some(job) = self.next_job(c, now) else {
                continue;
            };
            let slot = &mut self.slots[c];
            slot.wants = false;
            let sent = slot.jobs.as_ref().is_some_and(|j| j.try_send(job).is_ok());
            if !sent {
                tracing::debug!(conn = c, "job channel closed");
            }
        }
        self.rotate = (self.rotate + 1) % n.max(1);
    }

    fn next_job(&mut self, c: usize, now: Instant) -> Option<Job> {
        if let Some(t) = self.sched.poll_send(c, now) {
            if let Some(b) = self.blocks.get(&t.seq) {
                self.sent_wire += u64::from(t.len);
                return Some(Job::Block {
                    seq: t.seq,
                    block: Arc::clone(b),
                    copy: t.copy,
                });
            }
        }
        if self.sched.all_sent() && !self.slots[c].end_sent {
            if let (Some(blocks), Some((bytes, digest))) = (self.sched.total_blocks(), self.end) {
                self.slots[c].end_sent = true;
                return Some(Job::End {
                    blocks,
                    bytes,
                    digest,
                });
            }
        }
        None
    }

    fn handle_input(&mut self, inp: Option<Input>) {
        self.reading = false;
        match inp {
            Some(Input::Block(b)) => {
                let seq = self.sched.next_seq();
                // A block is at most `next_len` (a u32) long.
                let n = b.data.len() as u32;
                self.blocks.insert(seq, Arc::new(b));
                self.sched.handle_block_read(n);
            }
            Some(Input::Eof { bytes, digest }) => {
                self.sched.handle_eof();
                self.end = Some((bytes, digest));
            }
            Some(Input::Failed(e)) => {
                self.outcome.get_or_insert(Err(PipeError::Input(e)));
            }
            None => {
                self.outcome
                    .get_or_insert(Err(PipeError::Input(std::io::Error::other(
                        "the input reader stopped",
                    ))));
            }
        }
    }

    fn handle_event(&mut self, ev: Event) {
        match ev {
            Event::Up {
                c,
                gen,
                granted,
                granted_bytes,
                jobs,
                kill,
            } => {
                if !self.session_up {
                    self.window_blocks = granted;
                    let bytes = granted_bytes.min(self.cfg.window_bytes);
                    self.sched.set_window(granted, bytes);
                    self.session_up = true;
                    self.publish(Stop::Running);
                }
                let slot = &mut self.slots[c];
                slot.gen = gen;
                slot.up = true;
                slot.end_sent = false;
                slot.wants = false;
                slot.jobs = Some(jobs);
                slot.kill = Some(kill);
                slot.connects += 1;
                self.sched.handle_conn_up(c, clock::now());
            }
            Event::Want { c, gen } => {
                let slot = &mut self.slots[c];
                if slot.gen == gen && slot.up {
                    slot.wants = true;
                }
            }
            Event::Down { c, gen, error } => self.mark_down(c, gen, error),
            Event::ConnectFailed { c, error } => self.slots[c].last_error = Some(error),
            Event::GaveUp { c } => self.slots[c].given_up = true,
            Event::Control { c, msg } => self.handle_control(c, msg),
        }
    }

    fn mark_down(&mut self, c: usize, gen: u64, error: String) {
        let slot = &mut self.slots[c];
        if slot.gen != gen || !slot.up {
            return;
        }
        slot.up = false;
        slot.wants = false;
        slot.jobs = None;
        slot.kill = None;
        tracing::info!(conn = c, error = %error, "connection lost");
        slot.last_error = Some(error);
        self.sched.handle_conn_down(c);
    }

    fn handle_control(&mut self, c: usize, msg: Result<Control, ProtocolViolation>) {
        match msg {
            Ok(Control::Ack { seq, written }) => {
                let was = seq != u64::MAX && self.sched.is_unacked(seq);
                self.sched.handle_ack(c, seq, written, clock::now());
                if self.sched.reweights() != self.reweights {
                    self.reweights = self.sched.reweights();
                    tracing::debug!(lens = ?self.sched.weighted_lens(), "re-weighted");
                }
                if was {
                    if let Some(b) = self.blocks.remove(&seq) {
                        self.acked_bytes += b.data.len() as u64;
                    }
                }
            }
            Ok(Control::Done {
                reason: frame::StopReason::Verified,
                bytes,
            }) => {
                // The receiver wrote and verified every byte: its count is
                // exact, while the per-block ack tally can lag it (acks of
                // the last blocks still in flight on other connections).
                self.acked_bytes = bytes;
                self.outcome.get_or_insert(Ok(()));
            }
            Ok(Control::Done { reason, bytes }) | Ok(Control::Abort { reason, bytes, .. }) => {
                self.outcome
                    .get_or_insert(Err(PipeError::ReceiverStopped { reason, bytes }));
            }
            Err(e) => {
                self.outcome.get_or_insert(Err(e.into()));
            }
        }
    }

    fn publish(&self, stop: Stop) {
        let p = Published {
            session_up: self.session_up,
            window_blocks: self.window_blocks,
            stop,
        };
        self.pub_tx.send_replace(p);
    }

    fn progress(&self, start: Instant, now: Instant) -> Progress {
        Progress {
            bytes: self.acked_bytes,
            total: None,
            seconds: now.saturating_duration_since(start).as_secs_f64(),
            per_conn: (0..self.slots.len())
                .map(|c| self.sched.counters(c).acked_bytes)
                .collect(),
        }
    }

    fn report(&self, start: Instant, now: Instant) -> SendReport {
        let secs = now.saturating_duration_since(start).as_secs_f64().max(1e-9);
        let (blocks, digest) = match (self.sched.total_blocks(), self.end) {
            (Some(b), Some((_, d))) => (b, d),
            _ => (0, [0; 32]),
        };
        SendReport {
            side: "send",
            mode: self.cfg.mode,
            bytes: self.acked_bytes,
            blocks,
            seconds: secs,
            bps: self.acked_bytes as f64 * 8.0 / secs,
            wire_overhead: self.sent_wire as f64 / (self.acked_bytes.max(1)) as f64,
            window_blocks: self.window_blocks,
            reweights: self.sched.reweights(),
            blake3: blake3::Hash::from_bytes(digest).to_hex().to_string(),
            connections: (0..self.slots.len())
                .map(|c| {
                    let k = self.sched.counters(c);
                    SendConn {
                        index: c,
                        addr: addr_of(&self.cfg, c).to_string(),
                        counters: k,
                        acked_bps: k.acked_bytes as f64 * 8.0 / secs,
                        connects: self.slots[c].connects,
                    }
                })
                .collect(),
        }
    }
}

/// Sleeps for `d`, or forever if `None`.
async fn sleep_opt(d: Option<StdDuration>) {
    match d {
        Some(d) => tokio::time::sleep(d).await,
        None => std::future::pending().await,
    }
}

/// The blocking reader: one block per request, CRC and BLAKE3 here.
fn reader(
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

/// Connects and exchanges hellos.
async fn open(
    cfg: &SendConfig,
    session: SessionId,
    c: usize,
    rejoin: bool,
    window: u64,
) -> Result<(TcpStream, u64, u64), String> {
    let addr = addr_of(cfg, c);
    let hello = Hello {
        flags: if rejoin { FLAG_REJOIN } else { 0 },
        session,
        conn_index: c as u16,
        max_block: cfg.block_size,
        window_blocks: window.min(u64::from(u32::MAX)) as u32,
        total_size: cfg.total_size.unwrap_or(u64::MAX),
    };
    let attempt = async {
        let mut s = net::connect_async(&addr, &cfg.sock)
            .await
            .map_err(|e| format!("connecting to {addr}: {e}"))?;
        let io = |e: std::io::Error| format!("hello with {addr}: {e}");
        s.write_all(&hello.encode()).await.map_err(io)?;
        let mut b = [0u8; frame::HELLO_ACK_LEN];
        s.read_exact(&mut b).await.map_err(io)?;
        Ok::<_, String>((s, b))
    };
    let (s, b) = match tokio::time::timeout(CONNECT_TIMEOUT, attempt).await {
        Ok(r) => r?,
        Err(_) => return Err(format!("connecting to {addr}: timed out")),
    };
    let ack = HelloAck::decode(&b).map_err(|e| format!("{addr}: {e}"))?;
    match ack.status {
        HelloStatus::Ok if ack.window_blocks >= 2 => {
            Ok((s, u64::from(ack.window_blocks), ack.window_bytes))
        }
        HelloStatus::Ok => Err(format!("{addr}: receiver window too small")),
        st => Err(format!("{addr} refused the connection: {st:?}")),
    }
}

/// One connection's life: connect, run, reconnect with backoff.
async fn conn_task(
    cfg: Arc<SendConfig>,
    session: SessionId,
    c: usize,
    events: mpsc::Sender<Event>,
    mut published: watch::Receiver<Published>,
) {
    let mut attempts = 0u32;
    let mut gen = 0u64;
    loop {
        let p = *published.borrow_and_update();
        if p.stop != Stop::Running {
            return;
        }
        let opened = tokio::select! {
            r = open(&cfg, session, c, p.session_up, p.window_blocks) => r,
            _ = stopped(&mut published) => return,
        };
        match opened {
            Ok((stream, granted, granted_bytes)) => {
                attempts = 0;
                gen += 1;
                let (jobs_tx, jobs_rx) = mpsc::channel(JOB_QUEUE);
                let (kill_tx, kill_rx) = oneshot::channel();
                let up = Event::Up {
                    c,
                    gen,
                    granted,
                    granted_bytes,
                    jobs: jobs_tx,
                    kill: kill_tx,
                };
                if events.send(up).await.is_err() {
                    return;
                }
                let (rd, wr) = stream.into_split();
                let acks = tokio::spawn(ack_reader(rd, c, gen, cfg.clone(), events.clone()));
                let err = run_conn(&cfg, c, gen, wr, jobs_rx, kill_rx, &events).await;
                acks.abort();
                if let Some(error) = err {
                    let _ = events.send(Event::Down { c, gen, error }).await;
                }
            }
            Err(error) => {
                attempts += 1;
                if events
                    .send(Event::ConnectFailed { c, error })
                    .await
                    .is_err()
                {
                    return;
                }
                if attempts > cfg.reconnect_attempts {
                    let _ = events.send(Event::GaveUp { c }).await;
                    return;
                }
                let backoff = BACKOFF_START * 2u32.saturating_pow(attempts - 1);
                tokio::select! {
                    _ = tokio::time::sleep(backoff) => {}
                    _ = stopped(&mut published) => return,
                }
            }
        }
    }
}

/// Resolves once the owner publishes a stop (or is gone).
async fn stopped(published: &mut watch::Receiver<Published>) {
    let _ = published.wait_for(|p| p.stop != Stop::Running).await;
}

/// Asks for jobs and writes them until the connection fails (returns the
/// error) or the owner ends it (returns `None`).
async fn run_conn(
    cfg: &SendConfig,
    c: usize,
    gen: u64,
    mut s: OwnedWriteHalf,
    mut jobs: mpsc::Receiver<Job>,
    mut kill: oneshot::Receiver<()>,
    events: &mpsc::Sender<Event>,
) -> Option<String> {
    loop {
        if events.send(Event::Want { c, gen }).await.is_err() {
            return None;
        }
        let job = tokio::select! {
            j = jobs.recv() => j?,
            _ = &mut kill => return None,
        };
        let res = tokio::select! {
            r = write_job(cfg, &mut s, job) => r,
            _ = &mut kill => return None,
        };
        if let Err(e) = res {
            return Some(format!("sending to {}: {e}", addr_of(cfg, c)));
        }
    }
}

async fn write_job(cfg: &SendConfig, s: &mut OwnedWriteHalf, job: Job) -> std::io::Result<()> {
    match job {
        Job::Block { seq, block, copy } => {
            let h = DataHeader {
                kind: DataKind::Data,
                seq,
                len: block.data.len() as u32,
                crc: block.crc,
            };
            s.write_all(&h.encode()).await?;
            if !copy && cfg.corrupt_block == Some(seq) {
                let mut bad = block.data.clone();
                bad[0] ^= 0xff;
                s.write_all(&bad).await
            } else {
                s.write_all(&block.data).await
            }
        }
        Job::End {
            blocks,
            bytes,
            digest,
        } => {
            let payload = frame::encode_end(bytes, &digest);
            let h = DataHeader {
                kind: DataKind::End,
                seq: blocks,
                len: frame::END_PAYLOAD_LEN,
                crc: crc32fast::hash(&payload),
            };
            s.write_all(&h.encode()).await?;
            s.write_all(&payload).await
        }
    }
}

async fn ack_reader(
    mut s: OwnedReadHalf,
    c: usize,
    gen: u64,
    cfg: Arc<SendConfig>,
    events: mpsc::Sender<Event>,
) {
    let mut b = [0u8; frame::CONTROL_LEN];
    loop {
        let msg = match s.read_exact(&mut b).await {
            Ok(_) => Control::decode(&b),
            Err(e) => {
                let msg = if e.kind() == std::io::ErrorKind::UnexpectedEof {
                    "the receiver closed the connection".to_string()
                } else {
                    e.to_string()
                };
                let error = format!("{}: {msg}", addr_of(&cfg, c));
                let _ = events.send(Event::Down { c, gen, error }).await;
                return;
            }
        };
        let last = !matches!(msg, Ok(Control::Ack { .. }));
        if events.send(Event::Control { c, msg }).await.is_err() || last {
            return;
        }
    }
}
