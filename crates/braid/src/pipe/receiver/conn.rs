//! The network side of the receiver: one accept task per listening
//! address, one task per connection (handshake, hello, then frames: a
//! block's payload is read and checked against the check in its header
//! here, then handed to the owner), and each connection's control writer.
//! On a secure pipe every byte after the handshake comes through
//! [`ReadHalf`] / goes through [`WriteHalf`], which open and seal the
//! records (and pass `--no-encrypt` payloads through in clear).

use super::{
    Admit, Checked, Ctl, Event, Shared, ACK_WRITE_TIMEOUT, BLOCKS_IN_HAND, DISCARD_CHUNK, DRAIN,
    HELLO_TIMEOUT, MAX_PENDING, MAX_PENDING_PER_SOURCE,
};
use crate::pipe::digest::{block_hash, CheckKind};
use crate::pipe::frame::{self, Control, DataHeader, DataKind, Hello};
use crate::pipe::record::{self, ReadHalf, WriteHalf};
use crate::pipe::secure::Authenticator;
use crate::pipe::{PipeError, ProtocolViolation};
use std::collections::VecDeque;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration as StdDuration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot, Semaphore};

/// A connection that has not sent its hello yet, as its acceptor tracks
/// it.
struct Pending {
    ip: IpAddr,
    task: tokio::task::AbortHandle,
    /// Set by the connection task once its hello arrived.
    hello: Arc<AtomicBool>,
}

/// Accepts connections until aborted; dropping it drops its connections.
///
/// Unverified connections are bounded: at most [`MAX_PENDING`] wait for
/// their hello at once, at most [`MAX_PENDING_PER_SOURCE`] from one IP
/// address; a new connection over a bound evicts the oldest waiting one
/// (from its own address first), so a flood of silent connections holds a
/// bounded number of sockets and tasks and cannot lock out a sender that
/// says hello at once. Each waits at most [`HELLO_TIMEOUT`].
pub(super) async fn accept_loop(
    l: tokio::net::TcpListener,
    events: mpsc::Sender<Event>,
    shared: Arc<Shared>,
    auth: Arc<Authenticator>,
) {
    let mut conns = tokio::task::JoinSet::new();
    let mut pending: VecDeque<Pending> = VecDeque::with_capacity(MAX_PENDING);
    loop {
        while conns.try_join_next().is_some() {}
        match l.accept().await {
            Ok((s, peer)) => {
                pending.retain(|p| !p.task.is_finished() && !p.hello.load(Ordering::Relaxed));
                let ip = peer.ip();
                let evict =
                    if pending.iter().filter(|p| p.ip == ip).count() >= MAX_PENDING_PER_SOURCE {
                        pending.iter().position(|p| p.ip == ip)
                    } else if pending.len() >= MAX_PENDING {
                        Some(0)
                    } else {
                        None
                    };
                if let Some(old) = evict.and_then(|i| pending.remove(i)) {
                    tracing::debug!(%peer, "too many connections without a hello: closing the oldest");
                    old.task.abort();
                }
                let hello = Arc::new(AtomicBool::new(false));
                let task = conns.spawn(serve(
                    s,
                    peer,
                    events.clone(),
                    Arc::clone(&shared),
                    Arc::clone(&auth),
                    Arc::clone(&hello),
                ));
                pending.push_back(Pending { ip, task, hello });
            }
            Err(e) => {
                tracing::warn!(error = %e, "accept failed");
                // Out of descriptors and the like: do not spin.
                tokio::time::sleep(StdDuration::from_millis(20)).await;
            }
        }
    }
}

/// One accepted connection: handshake, hello, then frames until it closes.
async fn serve(
    s: TcpStream,
    peer: SocketAddr,
    events: mpsc::Sender<Event>,
    shared: Arc<Shared>,
    auth: Arc<Authenticator>,
    said_hello: Arc<AtomicBool>,
) {
    let mut b = [0u8; frame::HELLO_LEN];
    let opened = async {
        // A refusal is counted and logged by the authenticator.
        let (mut rd, wr) = auth.accept(s).await.ok_or(None)?;
        match rd.read_exact(&mut b).await {
            Ok(_) => {
                said_hello.store(true, Ordering::Relaxed);
                Ok((rd, wr))
            }
            Err(e) => Err(Some(format!("no hello: {e}"))),
        }
    };
    let (hello, mut rd, mut wr) = match tokio::time::timeout(HELLO_TIMEOUT, opened).await {
        Ok(Ok((rd, wr))) => match Hello::decode(&b) {
            Ok(h) => (h, rd, wr),
            Err(e) => {
                tracing::info!(%peer, error = %e, "connection rejected");
                return;
            }
        },
        Ok(Err(None)) => return,
        Ok(Err(Some(e))) => {
            tracing::info!(%peer, error = %e, "connection rejected");
            return;
        }
        Err(_) => {
            tracing::info!(%peer, "connection rejected: no handshake or hello in time");
            auth.stats().count_refused();
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
    let (ack, idx, max_block, (ctl_tx, ctl_rx)) = match admit {
        Admit::Conn {
            ack,
            idx,
            max_block,
            ctl,
        } => (ack, idx, max_block, ctl),
        Admit::TellAgain {
            ack,
            told,
            max_block,
        } => {
            let silence = shared.silence;
            if serve_told(&mut rd, &mut wr, &ack, &told, max_block, &events, silence).await {
                tracing::info!(%peer, "the sender rejoined after the outcome: told it again");
            }
            return;
        }
        Admit::Refused(ack) => {
            let _ = tokio::time::timeout(ACK_WRITE_TIMEOUT, async {
                wr.write_all(&ack.encode()).await?;
                wr.flush().await
            })
            .await;
            tracing::info!(%peer, status = ?ack.status, "connection rejected: hello refused");
            return;
        }
    };
    let writer = tokio::spawn(ctl_writer(wr, ack.encode(), ctl_rx));
    let res = serve_frames(&mut rd, idx, max_block, &events, ctl_tx, &shared).await;
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

/// A sender that rejoined after the outcome (it missed the DONE): writes
/// the hello-ack and `told`, closes this direction, then reads until the
/// sender's answer — BYE, or ABORT if it rejected the outcome — which it
/// tells the owner, or the end, skipping whatever else the sender may
/// still send. Nothing it sends is kept; each read waits at most the idle
/// limit, and the owner's end bounds the whole.
async fn serve_told(
    rd: &mut ReadHalf,
    wr: &mut WriteHalf,
    ack: &frame::HelloAck,
    told: &[Control],
    max_block: u32,
    events: &mpsc::Sender<Event>,
    silence: StdDuration,
) -> bool {
    let said = tokio::time::timeout(ACK_WRITE_TIMEOUT, async {
        wr.write_all(&ack.encode()).await?;
        for c in told {
            wr.write_all(&c.encode()).await?;
        }
        wr.flush().await?;
        wr.shutdown().await
    })
    .await;
    if !matches!(said, Ok(Ok(()))) {
        return false;
    }
    let mut hb = [0u8; frame::HEADER_LEN];
    let mut skip = vec![0u8; DISCARD_CHUNK];
    loop {
        match tokio::time::timeout(silence, rd.read_exact(&mut hb)).await {
            Ok(Ok(_)) => {}
            _ => return true,
        }
        let Ok(h) = DataHeader::decode(&hb, max_block) else {
            return true;
        };
        let answer = match h.kind {
            DataKind::Bye => Some(Event::Bye { accepted: true }),
            DataKind::Abort => Some(Event::Bye { accepted: false }),
            DataKind::Keepalive => None,
            // Only a block's payload travels outside the records (under
            // --no-encrypt); END's is in its record, like the header.
            DataKind::Data | DataKind::End => {
                let clear = h.kind == DataKind::Data && rd.carries_clear_payloads();
                if clear && rd.expect_clear(u64::from(h.len)).is_err() {
                    return true;
                }
                let mut left = u64::from(h.len);
                while left > 0 {
                    let n = left.min(skip.len() as u64) as usize;
                    match tokio::time::timeout(silence, rd.read_exact(&mut skip[..n])).await {
                        Ok(Ok(_)) => left -= n as u64,
                        _ => return true,
                    }
                }
                None
            }
        };
        if let Some(ev) = answer {
            let _ = events.send(ev).await;
            return true;
        }
    }
}

/// Writes the hello-ack, then every control frame queued for this
/// connection; a write that fails or blocks for [`ACK_WRITE_TIMEOUT`]
/// closes the connection (its reader then sees the end).
async fn ctl_writer(
    mut wr: WriteHalf,
    hello_ack: [u8; frame::HELLO_ACK_LEN],
    mut queue: mpsc::Receiver<Ctl>,
) {
    let ok = matches!(
        tokio::time::timeout(ACK_WRITE_TIMEOUT, write_flush(&mut wr, &hello_ack)).await,
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
        let w = tokio::time::timeout(ACK_WRITE_TIMEOUT, write_flush(&mut wr, &c.encode())).await;
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

/// Writes `b` and flushes (a sealed record goes out at once).
async fn write_flush(wr: &mut WriteHalf, b: &[u8]) -> std::io::Result<()> {
    wr.write_all(b).await?;
    wr.flush().await
}

fn shutdown_both(wr: &WriteHalf) {
    let s: &TcpStream = wr.socket().as_ref();
    let _ = socket2::SockRef::from(s).shutdown(std::net::Shutdown::Both);
}

/// Reads and discards until the peer closes, the socket fails, or
/// [`DRAIN`] has passed (the owner closes every socket then).
async fn drain(s: &mut ReadHalf) {
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
    s: &mut ReadHalf,
    idx: usize,
    max_block: u32,
    events: &mpsc::Sender<Event>,
    ctl: mpsc::Sender<Ctl>,
    shared: &Shared,
) -> Result<(), PipeError> {
    let mut hb = [0u8; frame::HEADER_LEN];
    let in_hand = Arc::new(Semaphore::new(BLOCKS_IN_HAND));
    loop {
        // The sender writes a keepalive at least every KEEPALIVE: a
        // connection silent for the idle limit is a dead path; closing it
        // moves the acks to the others.
        match tokio::time::timeout(shared.silence, s.read_exact(&mut hb)).await {
            Ok(Ok(_)) => {}
            Ok(Err(_)) => return Ok(()),
            Err(_) => {
                tracing::info!(conn = idx, "closing a silent connection");
                return Ok(());
            }
        }
        shared.activity.fetch_add(1, Ordering::Relaxed);
        let h = DataHeader::decode(&hb, max_block)?;
        match h.kind {
            DataKind::Keepalive => {}
            DataKind::Bye => {
                let _ = events.send(Event::Bye { accepted: true }).await;
                return Ok(());
            }
            DataKind::Abort => return Err(PipeError::SenderAborted { bytes: 0 }),
            DataKind::End => {
                let mut p = [0u8; frame::END_PAYLOAD_LEN as usize];
                if s.read_exact(&mut p).await.is_err() {
                    return Ok(());
                }
                let (total, digest) = match frame::decode_end(&p) {
                    Some(x) if block_hash(&p) == h.check => x,
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
                // The payload is read before the owner sees the block (one
                // hand-off per block, not a round trip for a verdict first);
                // the owner keeps it, drops a duplicate, or stops the
                // transfer on a block beyond the window. A connection holds
                // at most BLOCKS_IN_HAND blocks the owner has not judged.
                let Ok(slot) = Arc::clone(&in_hand).acquire_owned().await else {
                    return Ok(());
                };
                // Authenticate-only: the payload comes as clear bytes after
                // the header's record, checked below against the BLAKE3
                // that record authenticated.
                let clear = s.carries_clear_payloads();
                if clear && s.expect_clear(u64::from(h.len)).is_err() {
                    return Err(ProtocolViolation::ClearPayload.into());
                }
                // The connection's one pass over the bytes: the block's
                // check here, the end-to-end digest from the same hash.
                let kind = CheckKind::for_records(s.encrypts());
                let Some((data, check)) = read_payload(s, h.len, kind, shared).await else {
                    return Ok(());
                };
                if check != h.check {
                    if clear {
                        // Altered on the wire, as a record that fails to
                        // open: counted, this connection ends, the block is
                        // re-sent — unless the same block keeps failing
                        // (the sender's bytes are bad): then the transfer
                        // stops, and this connection stays to carry the
                        // ABORT.
                        s.count_unverified();
                        tracing::warn!(conn = idx, seq = h.seq, "a block failed authentication");
                        let (reply, stop) = oneshot::channel();
                        let ev = Event::Tampered {
                            idx,
                            seq: h.seq,
                            reply,
                        };
                        if events.send(ev).await.is_err() || !stop.await.unwrap_or(false) {
                            return Ok(());
                        }
                    }
                    return Err(PipeError::Corrupt {
                        seq: h.seq,
                        conn: idx,
                        bytes: 0,
                    });
                }
                let ev = Event::Block {
                    idx,
                    seq: h.seq,
                    block: Checked { data, check },
                    slot,
                };
                if events.send(ev).await.is_err() {
                    return Ok(());
                }
                let ack = Control::Ack {
                    seq: h.seq,
                    written: shared.written.load(Ordering::Relaxed),
                };
                // The control writer is gone once it wrote the outcome
                // (or its path died, which ends these reads too): keep
                // reading, for the sender's BYE may still follow the
                // copies it had in flight.
                let _ = ctl.send(Ctl::Frame(ack)).await;
            }
        }
    }
}

/// Reads a block's `len` payload bytes and their check (`kind`, hashed in
/// [`HASH_STEP`](crate::pipe::digest::HASH_STEP)s as they arrive, while they are in the cache); `None` if
/// the connection ends, a record fails, or the connection stays silent for
/// the idle limit first. Each read that returns bytes counts as activity,
/// so a large block on a slow path is not silence.
async fn read_payload(
    s: &mut ReadHalf,
    len: u32,
    kind: CheckKind,
    shared: &Shared,
) -> Option<(Vec<u8>, [u8; 32])> {
    let want = len as usize;
    // Room for the last record's tag: records open in place.
    let mut data = Vec::with_capacity(want + record::TAG_BYTES);
    let mut hash = kind.hasher();
    let mut hashed = 0;
    loop {
        match tokio::time::timeout(shared.silence, s.read_payload(&mut data, want)).await {
            Ok(Ok(step)) => {
                shared.activity.fetch_add(1, Ordering::Relaxed);
                hash.update_steps(&data[..step.plain.end], &mut hashed, step.done);
                if step.done {
                    return Some((data, hash.finish()));
                }
            }
            _ => return None,
        }
    }
}
