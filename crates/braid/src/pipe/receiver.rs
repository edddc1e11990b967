//! The receiving side: accept connections, verify, reorder, write in order.
//!
//! Threads: one accept loop per listening address, one reader per accepted
//! connection (hello, then frames: verify each block's CRC, store it in the
//! [`Reorder`] window, acknowledge it), and the caller's thread, which writes
//! blocks strictly in order, feeds the BLAKE3 digest, broadcasts how far it
//! has written, and at the end compares length and digest and answers
//! `Done`. They share one `Mutex<State>` + `Condvar`; socket I/O and output
//! writes happen outside the lock.
//!
//! Invariants: a connection gets per-peer state only after a hello with the
//! right magic, version and session; a block is allocated only if it is new
//! and inside the window; a block is written only after its CRC matched; a
//! block outside the window, a bad CRC or an output error stops the
//! transfer with an `Abort` to the sender and an error here.

use super::frame::{
    self, Control, DataHeader, DataKind, Hello, HelloAck, HelloStatus, SessionId, StopReason,
    FLAG_REJOIN,
};
use super::net::{self, SockOpts};
use super::reorder::{Reorder, Verdict};
use super::stats::{Progress, RecvConn, RecvReport};
use super::{PipeError, MAX_CONNECTIONS, MAX_WINDOW_BLOCKS};
use crate::clock;
use braid_core::{Duration, Instant};
use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration as StdDuration;

/// How long a new connection has to send its hello.
const HELLO_TIMEOUT: StdDuration = StdDuration::from_secs(5);
/// Accept-loop and writer wake-up period.
const TICK: StdDuration = StdDuration::from_millis(20);
/// After `Done`, how long to wait for the sender to close.
const DRAIN: Duration = Duration::from_secs(2);
/// Accepted connections ever (bounds the per-connection table).
const MAX_ACCEPTED: usize = 4 * MAX_CONNECTIONS;
/// A control write (ack) blocked this long means the path is dead; the
/// connection is then closed so acks go over the others.
const ACK_WRITE_TIMEOUT: StdDuration = StdDuration::from_secs(2);
/// Size of the scratch buffer for dropping duplicate payloads.
const DISCARD_CHUNK: usize = 64 << 10;

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

struct Session {
    id: SessionId,
    max_block: u32,
}

struct ConnSlot {
    peer: SocketAddr,
    ctl: Arc<Mutex<TcpStream>>,
    open: bool,
    bytes: u64,
}

struct State {
    session: Option<Session>,
    reorder: Reorder,
    end: Option<(u64, u64, [u8; 32])>,
    fatal: Option<PipeError>,
    conns: Vec<ConnSlot>,
    open: usize,
    last_close: Option<Instant>,
    first_conn: Option<Instant>,
    done: bool,
    bytes: u64,
}

struct Shared {
    st: Mutex<State>,
    cv: Condvar,
    window_bytes: u64,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // See sender: a poisoned state is still reportable.
        self.st.lock().unwrap_or_else(|e| e.into_inner())
    }
    fn wait<'a>(&self, g: MutexGuard<'a, State>, d: StdDuration) -> MutexGuard<'a, State> {
        match self.cv.wait_timeout(g, d) {
            Ok((g, _)) => g,
            Err(e) => e.into_inner().0,
        }
    }
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
            return Err(PipeError::Config("no listening address given".into()));
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
    /// # Errors
    /// [`PipeError`]: a corrupt block, an output error, a protocol violation,
    /// a digest mismatch, or the sender gone for `idle_limit`.
    pub fn run(
        self,
        mut output: Box<dyn Write + Send>,
        observer: &mut dyn FnMut(&Progress),
    ) -> Result<RecvReport, PipeError> {
        let sh = Arc::new(Shared {
            st: Mutex::new(State {
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
            }),
            cv: Condvar::new(),
            window_bytes: self.cfg.window_bytes,
        });
        let mut acceptors = Vec::new();
        for l in self.listeners {
            let sh = Arc::clone(&sh);
            acceptors.push(std::thread::spawn(move || accept_loop(sh, l)));
        }
        let result = write_loop(&sh, &mut *output, self.cfg.idle_limit, observer);
        // Tell the sender, let it close, then close everything.
        let (msg, ctls) = {
            let mut g = sh.lock();
            let bytes = bytes_written(&g);
            let msg = match &result {
                Ok(_) => Control::Done {
                    reason: StopReason::Verified,
                    bytes,
                },
                Err(PipeError::Digest(_)) => Control::Done {
                    reason: StopReason::DigestMismatch,
                    bytes,
                },
                Err(e) => Control::Abort {
                    reason: stop_reason(e),
                    bytes,
                    seq: u64::MAX,
                },
            };
            g.done = true;
            let ctls: Vec<_> = g
                .conns
                .iter()
                .filter(|c| c.open)
                .map(|c| Arc::clone(&c.ctl))
                .collect();
            (msg, ctls)
        };
        for c in &ctls {
            let mut s = c.lock().unwrap_or_else(|e| e.into_inner());
            let _ = s.write_all(&msg.encode());
            let _ = s.shutdown(Shutdown::Write);
        }
        let until = clock::now() + DRAIN;
        let mut g = sh.lock();
        while g.open > 0 && clock::now() < until {
            g = sh.wait(g, TICK);
        }
        for c in &g.conns {
            let s = c.ctl.lock().unwrap_or_else(|e| e.into_inner());
            let _ = s.shutdown(Shutdown::Both);
        }
        drop(g);
        sh.cv.notify_all();
        for a in acceptors {
            let _ = a.join();
        }
        result
    }
}

fn stop_reason(e: &PipeError) -> StopReason {
    match e {
        PipeError::Corrupt { .. } => StopReason::BadChecksum,
        PipeError::Output { .. } => StopReason::OutputFailed,
        PipeError::Digest(_) => StopReason::DigestMismatch,
        _ => StopReason::Protocol,
    }
}

fn bytes_written(g: &State) -> u64 {
    g.bytes
}

fn write_loop(
    sh: &Shared,
    out: &mut dyn Write,
    idle_limit: Duration,
    observer: &mut dyn FnMut(&Progress),
) -> Result<RecvReport, PipeError> {
    let mut hasher = blake3::Hasher::new();
    let mut bytes: u64 = 0;
    let mut last_obs = clock::now();
    loop {
        let batch = {
            let mut g = sh.lock();
            loop {
                if let Some(e) = g.fatal.take() {
                    return Err(with_bytes(e, bytes));
                }
                let ready = g.reorder.pop_ready();
                if !ready.is_empty() {
                    break ready;
                }
                if let Some((blocks, total, digest)) = g.end {
                    if g.reorder.written() >= blocks && g.session.is_some() {
                        out.flush()
                            .map_err(|e| PipeError::Output { bytes, source: e })?;
                        let mine = *hasher.finalize().as_bytes();
                        if total != bytes || mine != digest {
                            return Err(PipeError::Digest(format!(
                                "sender sent {total} bytes, {bytes} written; digests {}",
                                if mine == digest { "match" } else { "differ" }
                            )));
                        }
                        return Ok(report(&g, bytes, &mine));
                    }
                }
                let now = clock::now();
                if g.open == 0 {
                    if let Some(t) = g.last_close {
                        if now.saturating_duration_since(t) > idle_limit {
                            return Err(PipeError::LostSender {
                                secs: idle_limit.as_secs_f64() as u64,
                                bytes,
                            });
                        }
                    }
                }
                if now.saturating_duration_since(last_obs).as_nanos() >= 150_000_000 {
                    last_obs = now;
                    let p = progress(&g, bytes, now);
                    drop(g);
                    observer(&p);
                    g = sh.lock();
                    continue;
                }
                g = sh.wait(g, TICK);
            }
        };
        let n = batch.len() as u64;
        let before = bytes;
        for (_, data) in &batch {
            out.write_all(data)
                .map_err(|e| PipeError::Output { bytes, source: e })?;
            hasher.update(data);
            bytes += data.len() as u64;
        }
        drop(batch);
        let (written, ctls) = {
            let mut g = sh.lock();
            g.reorder.mark_written(n, bytes - before);
            g.bytes = bytes;
            let ctls: Vec<_> = g
                .conns
                .iter()
                .filter(|c| c.open)
                .map(|c| Arc::clone(&c.ctl))
                .collect();
            (g.reorder.written(), ctls)
        };
        let ack = Control::Ack {
            seq: u64::MAX,
            written,
        }
        .encode();
        for c in ctls {
            let mut s = c.lock().unwrap_or_else(|e| e.into_inner());
            if s.write_all(&ack).is_err() {
                // Dead path: closing it ends its reader, which unregisters it.
                let _ = s.shutdown(Shutdown::Both);
            }
        }
    }
}

fn with_bytes(e: PipeError, bytes: u64) -> PipeError {
    match e {
        PipeError::Corrupt { seq, conn, .. } => PipeError::Corrupt { seq, conn, bytes },
        PipeError::SenderAborted { .. } => PipeError::SenderAborted { bytes },
        e => e,
    }
}

fn progress(g: &State, bytes: u64, now: Instant) -> Progress {
    let start = g.first_conn.unwrap_or(now);
    Progress {
        bytes,
        total: None,
        seconds: now.saturating_duration_since(start).as_secs_f64(),
        per_conn: g.conns.iter().map(|c| c.bytes).collect(),
    }
}

fn report(g: &State, bytes: u64, digest: &[u8; 32]) -> RecvReport {
    let now = clock::now();
    let secs = now
        .saturating_duration_since(g.first_conn.unwrap_or(now))
        .as_secs_f64()
        .max(1e-9);
    let (pb, pby, dups) = g.reorder.peaks();
    RecvReport {
        side: "recv",
        bytes,
        blocks: g.reorder.written(),
        seconds: secs,
        bps: bytes as f64 * 8.0 / secs,
        window_blocks: g.reorder.window(),
        reorder_peak_blocks: pb,
        reorder_peak_bytes: pby,
        duplicates: dups,
        blake3: blake3::Hash::from_bytes(*digest).to_hex().to_string(),
        connections: g
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

fn accept_loop(sh: Arc<Shared>, l: TcpListener) {
    loop {
        if sh.lock().done {
            return;
        }
        match l.accept() {
            Ok((s, peer)) => {
                let sh2 = Arc::clone(&sh);
                std::thread::spawn(move || serve(sh2, s, peer));
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                let g = sh.lock();
                drop(sh.wait(g, TICK));
            }
            Err(e) => {
                tracing::warn!(error = %e, "accept failed");
                let g = sh.lock();
                drop(sh.wait(g, TICK));
            }
        }
    }
}

/// Hello: check it and register the connection; `Err` closes it.
fn admit(sh: &Shared, s: &mut TcpStream, peer: SocketAddr) -> Result<(usize, u32), String> {
    s.set_nonblocking(false).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(HELLO_TIMEOUT))
        .map_err(|e| e.to_string())?;
    let mut b = [0u8; frame::HELLO_LEN];
    s.read_exact(&mut b).map_err(|e| format!("no hello: {e}"))?;
    let hello = Hello::decode(&b).map_err(|e| e.to_string())?;
    s.set_write_timeout(Some(ACK_WRITE_TIMEOUT))
        .map_err(|e| e.to_string())?;
    let ctl = s.try_clone().map_err(|e| e.to_string())?;
    let mut g = sh.lock();
    let status = match &g.session {
        _ if g.done => HelloStatus::Busy,
        None if hello.flags & FLAG_REJOIN != 0 => HelloStatus::UnknownSession,
        Some(ses) if ses.id != hello.session => HelloStatus::Busy,
        _ if g.open >= MAX_CONNECTIONS || g.conns.len() >= MAX_ACCEPTED => {
            HelloStatus::TooManyConnections
        }
        _ => HelloStatus::Ok,
    };
    let (window, window_bytes) = if status != HelloStatus::Ok {
        (0, 0)
    } else if g.session.is_some() {
        (g.reorder.window(), g.reorder.window_bytes())
    } else {
        // At least two full blocks; memory is bounded by the byte window.
        let bytes = sh.window_bytes.max(2 * u64::from(hello.max_block));
        let w = u64::from(hello.window_blocks).clamp(2, MAX_WINDOW_BLOCKS);
        g.session = Some(Session {
            id: hello.session,
            max_block: hello.max_block,
        });
        g.reorder = Reorder::new(w, bytes);
        (w, bytes)
    };
    let ack = HelloAck {
        status,
        window_blocks: window as u32,
        window_bytes,
    };
    if status != HelloStatus::Ok {
        drop(g);
        let _ = s.write_all(&ack.encode());
        return Err(format!("hello refused: {status:?}"));
    }
    let max_block = g.session.as_ref().map_or(0, |ses| ses.max_block);
    let idx = g.conns.len();
    g.conns.push(ConnSlot {
        peer,
        ctl: Arc::new(Mutex::new(ctl)),
        open: true,
        bytes: 0,
    });
    g.open += 1;
    g.first_conn.get_or_insert(clock::now());
    let ctl = Arc::clone(&g.conns[idx].ctl);
    drop(g);
    let mut c = ctl.lock().unwrap_or_else(|e| e.into_inner());
    c.write_all(&ack.encode()).map_err(|e| e.to_string())?;
    drop(c);
    s.set_read_timeout(None).map_err(|e| e.to_string())?;
    Ok((idx, max_block))
}

fn serve(sh: Arc<Shared>, mut s: TcpStream, peer: SocketAddr) {
    let (idx, max_block) = match admit(&sh, &mut s, peer) {
        Ok(x) => x,
        Err(e) => {
            tracing::info!(%peer, error = %e, "connection rejected");
            return;
        }
    };
    let res = serve_frames(&sh, &mut s, idx, max_block);
    if let Err(e) = res {
        {
            let mut g = sh.lock();
            if !g.done {
                tracing::warn!(%peer, error = %e, "stopping: bad input from the sender");
                g.fatal.get_or_insert(e);
            }
            sh.cv.notify_all();
        }
        // Stay open and keep reading until the sender closes: the ABORT goes
        // out on this connection too, and closing with unread data would
        // send a reset that destroys it before the sender reads it.
        drain(&mut s);
    }
    let mut g = sh.lock();
    g.conns[idx].open = false;
    g.open -= 1;
    g.last_close = Some(clock::now());
    sh.cv.notify_all();
}

/// Reads and discards until the peer closes, the socket fails, or
/// [`DRAIN`] has passed (the writer thread shuts every socket down then).
fn drain(s: &mut TcpStream) {
    let until = clock::now() + DRAIN;
    let _ = s.set_read_timeout(Some(TICK));
    let mut buf = [0u8; 64 * 1024];
    while clock::now() < until {
        match s.read(&mut buf) {
            Ok(0) => return,
            Ok(_) => {}
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(_) => return,
        }
    }
}

/// Reads frames until the connection closes (`Ok`) or the peer sends
/// something that must stop the transfer (`Err`).
fn serve_frames(
    sh: &Shared,
    s: &mut TcpStream,
    idx: usize,
    max_block: u32,
) -> Result<(), PipeError> {
    let ctl = Arc::clone(&sh.lock().conns[idx].ctl);
    let mut hb = [0u8; frame::HEADER_LEN];
    loop {
        if s.read_exact(&mut hb).is_err() {
            return Ok(());
        }
        let h = DataHeader::decode(&hb, max_block)?;
        match h.kind {
            DataKind::Abort => return Err(PipeError::SenderAborted { bytes: 0 }),
            DataKind::End => {
                let mut p = [0u8; frame::END_PAYLOAD_LEN as usize];
                if s.read_exact(&mut p).is_err() {
                    return Ok(());
                }
                let (total, digest) = match frame::decode_end(&p) {
                    Some(x) if crc32fast::hash(&p) == h.crc => x,
                    _ => return Err(PipeError::Protocol("END frame failed its checksum".into())),
                };
                let mut g = sh.lock();
                match g.end {
                    None => g.end = Some((h.seq, total, digest)),
                    Some(e) if e == (h.seq, total, digest) => {}
                    Some(_) => return Err(PipeError::Protocol("two different END frames".into())),
                }
                sh.cv.notify_all();
            }
            DataKind::Data => {
                let verdict = sh.lock().reorder.verdict(h.seq, u64::from(h.len));
                match verdict {
                    Verdict::Violation => {
                        return Err(PipeError::Protocol(format!(
                            "block {} is beyond the reorder window",
                            h.seq
                        )))
                    }
                    Verdict::Duplicate => {
                        if discard(s, h.len as usize).is_err() {
                            return Ok(());
                        }
                        let mut g = sh.lock();
                        g.reorder.count_duplicate();
                        g.conns[idx].bytes += u64::from(h.len);
                    }
                    Verdict::Take => {
                        // read_to_end fills spare capacity without zeroing it.
                        let mut data = Vec::with_capacity(h.len as usize);
                        match (&mut *s).take(u64::from(h.len)).read_to_end(&mut data) {
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
                        let mut g = sh.lock();
                        g.conns[idx].bytes += u64::from(h.len);
                        g.reorder.insert(h.seq, data);
                        sh.cv.notify_all();
                    }
                }
                let written = sh.lock().reorder.written();
                let ack = Control::Ack {
                    seq: h.seq,
                    written,
                }
                .encode();
                let mut c = ctl.lock().unwrap_or_else(|e| e.into_inner());
                if c.write_all(&ack).is_err() {
                    return Ok(());
                }
            }
        }
    }
}

fn discard(s: &mut TcpStream, mut n: usize) -> std::io::Result<()> {
    let mut buf = vec![0u8; DISCARD_CHUNK.min(n)];
    while n > 0 {
        let k = n.min(buf.len());
        s.read_exact(&mut buf[..k])?;
        n -= k;
    }
    Ok(())
}
