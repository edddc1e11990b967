//! The sending side: threads over blocking sockets around a [`Scheduler`].
//!
//! Threads: one reader (input → numbered blocks with CRC and BLAKE3), one
//! writer per connection (connect, hello, then pull blocks from the
//! scheduler; reconnect with backoff when the connection dies), one
//! acknowledgement reader per connection, and the caller's thread, which
//! reports progress and decides the outcome. They share one
//! `Mutex<State>` + `Condvar`; the lock is taken per block event, never per
//! byte, and never across socket I/O.
//!
//! Invariants: a block's bytes are kept until it is acknowledged; at most
//! `window` blocks are held (the scheduler bounds reading); success is
//! declared only when the receiver reports `Done(Verified)`.

use super::frame::{
    self, Control, DataHeader, DataKind, Hello, HelloAck, HelloStatus, SessionId, FLAG_REJOIN,
};
use super::net::{self, SockOpts};
use super::sched::{Layout, Mode, Scheduler, MIN_ADAPTIVE_BLOCK};
use super::stats::{Progress, SendConn, SendReport};
use super::{PipeError, MAX_CONNECTIONS, MAX_WINDOW_BLOCKS};
use crate::clock;
use braid_core::Instant;
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration as StdDuration;

/// How long a writer waits before asking the scheduler again.
const POLL_TICK: StdDuration = StdDuration::from_millis(20);
/// Timeout of one connection attempt (including the hello).
const CONNECT_TIMEOUT: StdDuration = StdDuration::from_secs(3);
/// First reconnect backoff; doubles per failed attempt.
const BACKOFF_START: StdDuration = StdDuration::from_millis(200);
/// How often the observer is called.
const PROGRESS_TICK: StdDuration = StdDuration::from_millis(200);

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

struct Block {
    data: Vec<u8>,
    crc: u32,
}

#[derive(Default)]
struct Slot {
    gen: u64,
    up: bool,
    given_up: bool,
    stream: Option<TcpStream>,
    last_error: Option<String>,
    end_sent: bool,
    connects: u64,
}

struct State {
    sched: Scheduler,
    blocks: BTreeMap<u64, Arc<Block>>,
    slots: Vec<Slot>,
    outcome: Option<Result<(), PipeError>>,
    session_up: bool,
    end: Option<(u64, [u8; 32])>,
    acked_bytes: u64,
    sent_wire: u64,
    window_blocks: u64,
}

struct Shared {
    st: Mutex<State>,
    cv: Condvar,
    cfg: SendConfig,
    session: SessionId,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A poisoned lock means a thread panicked; the state is still
        // consistent enough to report, so take it.
        self.st.lock().unwrap_or_else(|e| e.into_inner())
    }
    fn wait<'a>(&self, g: MutexGuard<'a, State>, d: StdDuration) -> MutexGuard<'a, State> {
        match self.cv.wait_timeout(g, d) {
            Ok((g, _)) => g,
            Err(e) => e.into_inner().0,
        }
    }
}

/// Sends `input` to a receiver and waits until it confirms the stream
/// arrived verified. `observer` is called a few times per second.
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
        return Err(PipeError::Config(
            "--layout partitioned needs a file whose size is known and fits in the window".into(),
        ));
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
    let shared = Arc::new(Shared {
        st: Mutex::new(State {
            sched,
            blocks: BTreeMap::new(),
            slots: (0..cfg.connections).map(|_| Slot::default()).collect(),
            outcome: None,
            session_up: false,
            end: None,
            acked_bytes: 0,
            sent_wire: 0,
            window_blocks: window,
        }),
        cv: Condvar::new(),
        session: session_id(&cfg),
        cfg,
    });
    {
        let sh = Arc::clone(&shared);
        // Detached: a reader blocked on an idle pipe cannot be interrupted.
        std::thread::spawn(move || reader(sh, input));
    }
    let mut workers = Vec::new();
    for c in 0..shared.cfg.connections {
        let sh = Arc::clone(&shared);
        workers.push(std::thread::spawn(move || worker(sh, c)));
    }
    let mut last_progress = clock::now();
    let result = loop {
        let mut g = shared.lock();
        if let Some(o) = g.outcome.take() {
            g.outcome = Some(Err(PipeError::Config("finished".into())));
            break o;
        }
        if g.slots.iter().all(|s| s.given_up) {
            let last = g.slots.iter().rev().find_map(|s| s.last_error.clone());
            let e = PipeError::LostReceiver {
                conns: g.slots.len(),
                acked_bytes: g.acked_bytes,
                last_error: last.unwrap_or_else(|| "no connection".into()),
            };
            g.outcome = Some(Err(PipeError::Config("finished".into())));
            break Err(e);
        }
        let g = shared.wait(g, PROGRESS_TICK);
        let now = clock::now();
        if now.saturating_duration_since(last_progress).as_nanos() >= 150_000_000 {
            last_progress = now;
            let p = progress(&g, start, now);
            drop(g);
            observer(&p);
        }
    };
    // Stop everything: wake blocked socket calls, then wait for the writers.
    {
        let g = shared.lock();
        for s in &g.slots {
            if let Some(st) = &s.stream {
                let _ = st.shutdown(Shutdown::Both);
            }
        }
        shared.cv.notify_all();
    }
    for w in workers {
        let _ = w.join();
    }
    result?;
    let g = shared.lock();
    let now = clock::now();
    observer(&progress(&g, start, now));
    Ok(report(&shared, &g, start, now))
}

fn validate(cfg: &SendConfig) -> Result<(), PipeError> {
    if cfg.to.is_empty() {
        return Err(PipeError::Config("no receiver address given".into()));
    }
    if cfg.connections == 0 || cfg.connections > MAX_CONNECTIONS {
        return Err(PipeError::Config(format!(
            "connections must be 1..={MAX_CONNECTIONS}"
        )));
    }
    if cfg.block_size < 4096 || cfg.block_size > frame::MAX_BLOCK_LEN {
        return Err(PipeError::Config(format!(
            "block size must be 4 KiB..={} MiB",
            frame::MAX_BLOCK_LEN >> 20
        )));
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

fn progress(g: &State, start: Instant, now: Instant) -> Progress {
    Progress {
        bytes: g.acked_bytes,
        total: None,
        seconds: now.saturating_duration_since(start).as_secs_f64(),
        per_conn: (0..g.slots.len())
            .map(|c| g.sched.counters(c).acked_bytes)
            .collect(),
    }
}

fn report(sh: &Shared, g: &State, start: Instant, now: Instant) -> SendReport {
    let secs = now.saturating_duration_since(start).as_secs_f64().max(1e-9);
    let (blocks, digest) = match (g.sched.total_blocks(), g.end) {
        (Some(b), Some((_, d))) => (b, d),
        _ => (0, [0; 32]),
    };
    SendReport {
        side: "send",
        mode: sh.cfg.mode,
        bytes: g.acked_bytes,
        blocks,
        seconds: secs,
        bps: g.acked_bytes as f64 * 8.0 / secs,
        wire_overhead: g.sent_wire as f64 / (g.acked_bytes.max(1)) as f64,
        window_blocks: g.window_blocks,
        reweights: g.sched.reweights(),
        blake3: blake3::Hash::from_bytes(digest).to_hex().to_string(),
        connections: (0..g.slots.len())
            .map(|c| {
                let k = g.sched.counters(c);
                SendConn {
                    index: c,
                    addr: addr_of(&sh.cfg, c).to_string(),
                    counters: k,
                    acked_bps: k.acked_bytes as f64 * 8.0 / secs,
                    connects: g.slots[c].connects,
                }
            })
            .collect(),
    }
}

fn addr_of(cfg: &SendConfig, c: usize) -> SocketAddr {
    cfg.to[c % cfg.to.len()]
}

fn reader(sh: Arc<Shared>, mut input: Box<dyn Read + Send>) {
    let mut hasher = blake3::Hasher::new();
    let mut total: u64 = 0;
    loop {
        let len = {
            let mut g = sh.lock();
            loop {
                if g.outcome.is_some() {
                    return;
                }
                if g.session_up && g.sched.may_read() {
                    break;
                }
                g = sh.wait(g, POLL_TICK);
            }
            g.sched.next_len()
        };
        // read_to_end fills spare capacity without zeroing it first.
        let mut buf = Vec::with_capacity(len as usize);
        if let Err(e) = (&mut input).take(u64::from(len)).read_to_end(&mut buf) {
            let mut g = sh.lock();
            g.outcome.get_or_insert(Err(PipeError::Input(e)));
            sh.cv.notify_all();
            return;
        }
        let n = buf.len();
        let mut g = sh.lock();
        if n == 0 {
            g.sched.handle_eof();
            g.end = Some((total, *hasher.finalize().as_bytes()));
            sh.cv.notify_all();
            return;
        }
        hasher.update(&buf);
        total += n as u64;
        let crc = crc32fast::hash(&buf);
        let seq = g.sched.next_seq();
        g.blocks.insert(seq, Arc::new(Block { data: buf, crc }));
        // `n` ≤ len, which is a u32.
        g.sched.handle_block_read(n as u32);
        sh.cv.notify_all();
    }
}

/// Connects and exchanges hellos.
fn open(sh: &Shared, c: usize, rejoin: bool, window: u64) -> Result<(TcpStream, u64, u64), String> {
    let addr = addr_of(&sh.cfg, c);
    let mut s = net::connect(&addr, &sh.cfg.sock, CONNECT_TIMEOUT)
        .map_err(|e| format!("connecting to {addr}: {e}"))?;
    let hello = Hello {
        flags: if rejoin { FLAG_REJOIN } else { 0 },
        session: sh.session,
        conn_index: c as u16,
        max_block: sh.cfg.block_size,
        window_blocks: window.min(u64::from(u32::MAX)) as u32,
        total_size: sh.cfg.total_size.unwrap_or(u64::MAX),
    };
    let io = |e: std::io::Error| format!("hello with {addr}: {e}");
    s.set_read_timeout(Some(CONNECT_TIMEOUT)).map_err(io)?;
    s.write_all(&hello.encode()).map_err(io)?;
    let mut b = [0u8; frame::HELLO_ACK_LEN];
    s.read_exact(&mut b).map_err(io)?;
    s.set_read_timeout(None).map_err(io)?;
    let ack = HelloAck::decode(&b).map_err(|e| format!("{addr}: {e}"))?;
    match ack.status {
        HelloStatus::Ok if ack.window_blocks >= 2 => {
            Ok((s, u64::from(ack.window_blocks), ack.window_bytes))
        }
        HelloStatus::Ok => Err(format!("{addr}: receiver window too small")),
        st => Err(format!("{addr} refused the connection: {st:?}")),
    }
}

fn worker(sh: Arc<Shared>, c: usize) {
    let mut attempts = 0u32;
    loop {
        let (rejoin, window) = {
            let g = sh.lock();
            if g.outcome.is_some() {
                return;
            }
            (g.session_up, g.window_blocks)
        };
        match open(&sh, c, rejoin, window) {
            Ok((stream, granted, granted_bytes)) => {
                attempts = 0;
                let Ok(ctl) = stream.try_clone() else {
                    continue;
                };
                let Ok(keep) = stream.try_clone() else {
                    continue;
                };
                let gen = {
                    let mut g = sh.lock();
                    if g.outcome.is_some() {
                        return;
                    }
                    if !g.session_up {
                        g.window_blocks = granted;
                        let bytes = granted_bytes.min(sh.cfg.window_bytes);
                        g.sched.set_window(granted, bytes);
                        g.session_up = true;
                    }
                    let slot = &mut g.slots[c];
                    slot.gen += 1;
                    slot.up = true;
                    slot.end_sent = false;
                    slot.stream = Some(keep);
                    slot.connects += 1;
                    let gen = slot.gen;
                    g.sched.handle_conn_up(c, clock::now());
                    sh.cv.notify_all();
                    gen
                };
                let sh2 = Arc::clone(&sh);
                std::thread::spawn(move || ack_reader(sh2, c, gen, ctl));
                let err = run_conn(&sh, c, gen, stream);
                mark_down(&sh, c, gen, err);
            }
            Err(e) => {
                attempts += 1;
                let mut g = sh.lock();
                g.slots[c].last_error = Some(e);
                if attempts > sh.cfg.reconnect_attempts {
                    g.slots[c].given_up = true;
                    sh.cv.notify_all();
                    return;
                }
                let backoff = BACKOFF_START * 2u32.saturating_pow(attempts - 1);
                let until = clock::now() + braid_core::Duration::from(backoff);
                while g.outcome.is_none() && clock::now() < until {
                    g = sh.wait(g, POLL_TICK);
                }
            }
        }
    }
}

fn mark_down(sh: &Shared, c: usize, gen: u64, err: Option<String>) {
    let mut g = sh.lock();
    let slot = &mut g.slots[c];
    if slot.gen == gen && slot.up {
        slot.up = false;
        if let Some(s) = slot.stream.take() {
            let _ = s.shutdown(Shutdown::Both);
        }
        if let Some(e) = err {
            tracing::info!(conn = c, error = %e, "connection lost");
            slot.last_error = Some(e);
        }
        g.sched.handle_conn_down(c);
        sh.cv.notify_all();
    }
}

enum Job {
    Block(u64, Arc<Block>, bool),
    End(u64, u64, [u8; 32]),
}

/// Pulls blocks for connection `c` until it fails (returns the error) or
/// the transfer ends (returns `None`).
fn run_conn(sh: &Shared, c: usize, gen: u64, mut s: TcpStream) -> Option<String> {
    loop {
        let job = {
            let mut g = sh.lock();
            loop {
                if g.outcome.is_some() {
                    return None;
                }
                if g.slots[c].gen != gen || !g.slots[c].up {
                    return Some("connection closed".into());
                }
                if let Some(t) = g.sched.poll_send(c, clock::now()) {
                    if let Some(b) = g.blocks.get(&t.seq) {
                        let b = Arc::clone(b);
                        g.sent_wire += u64::from(t.len);
                        break Job::Block(t.seq, b, t.copy);
                    }
                }
                if g.sched.all_sent() && !g.slots[c].end_sent {
                    if let (Some(blocks), Some((bytes, d))) = (g.sched.total_blocks(), g.end) {
                        g.slots[c].end_sent = true;
                        break Job::End(blocks, bytes, d);
                    }
                }
                g = sh.wait(g, POLL_TICK);
            }
        };
        let res = match job {
            Job::Block(seq, b, copy) => {
                let h = DataHeader {
                    kind: DataKind::Data,
                    seq,
                    len: b.data.len() as u32,
                    crc: b.crc,
                };
                let r = s.write_all(&h.encode());
                if r.is_ok() && !copy && sh.cfg.corrupt_block == Some(seq) {
                    let mut bad = b.data.clone();
                    bad[0] ^= 0xff;
                    s.write_all(&bad)
                } else {
                    r.and_then(|_| s.write_all(&b.data))
                }
            }
            Job::End(blocks, bytes, d) => {
                let payload = frame::encode_end(bytes, &d);
                let h = DataHeader {
                    kind: DataKind::End,
                    seq: blocks,
                    len: frame::END_PAYLOAD_LEN,
                    crc: crc32fast::hash(&payload),
                };
                s.write_all(&h.encode()).and_then(|_| s.write_all(&payload))
            }
        };
        if let Err(e) = res {
            return Some(format!("sending to {}: {e}", addr_of(&sh.cfg, c)));
        }
    }
}

fn ack_reader(sh: Arc<Shared>, c: usize, gen: u64, mut s: TcpStream) {
    let mut b = [0u8; frame::CONTROL_LEN];
    loop {
        let msg = match s.read_exact(&mut b) {
            Ok(()) => Control::decode(&b),
            Err(e) => {
                let msg = if e.kind() == std::io::ErrorKind::UnexpectedEof {
                    "the receiver closed the connection".to_string()
                } else {
                    e.to_string()
                };
                mark_down(&sh, c, gen, Some(format!("{}: {msg}", addr_of(&sh.cfg, c))));
                return;
            }
        };
        let mut g = sh.lock();
        match msg {
            Ok(Control::Ack { seq, written }) => {
                let was = seq != u64::MAX && g.sched.is_unacked(seq);
                g.sched.handle_ack(c, seq, written, clock::now());
                if was {
                    if let Some(b) = g.blocks.remove(&seq) {
                        // Once the receiver has said how it ended, its count
                        // stands; a late ack on another connection must not
                        // add to it.
                        if g.outcome.is_none() {
                            g.acked_bytes += b.data.len() as u64;
                        }
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
                g.acked_bytes = bytes;
                g.outcome.get_or_insert(Ok(()));
            }
            Ok(Control::Done { reason, bytes }) | Ok(Control::Abort { reason, bytes, .. }) => {
                g.outcome
                    .get_or_insert(Err(PipeError::ReceiverStopped { reason, bytes }));
            }
            Err(e) => {
                g.outcome.get_or_insert(Err(e));
            }
        }
        sh.cv.notify_all();
        if g.outcome.is_some() {
            return;
        }
    }
}
