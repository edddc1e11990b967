//! The network side of the sender: one task per connection (connect, TCP
//! or MPTCP, handshake, hello, then ask the owner for a job and write it;
//! reconnect with backoff) and its ack reader, which decodes the
//! receiver's control frames for the owner. On a secure pipe every byte
//! after the handshake goes through [`WriteHalf`] / comes through
//! [`ReadHalf`] (sealed and opened records); a frame is flushed when
//! written.

use super::{
    addr_of, Event, Job, Published, SendConfig, Stop, BACKOFF_START, CONNECT_TIMEOUT, JOB_QUEUE,
};
use crate::pipe::frame::{
    self, Control, DataHeader, DataKind, Hello, HelloAck, HelloStatus, TransferId, FLAG_REJOIN,
};
use crate::pipe::record::{ReadHalf, WriteHalf};
use crate::pipe::secure::{Authenticator, SecureError};
use crate::pipe::{net, KEEPALIVE};
use std::sync::Arc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot, watch};

/// Why a connection attempt failed, and whether another may succeed.
struct OpenFailed {
    error: String,
    /// `false`: the receiver refused this sender's key, code or mode;
    /// reconnecting would be refused again.
    retry: bool,
}

impl From<String> for OpenFailed {
    fn from(error: String) -> Self {
        OpenFailed { error, retry: true }
    }
}

/// Connects, runs the handshake and exchanges hellos.
async fn open(
    cfg: &SendConfig,
    auth: &Authenticator,
    session: TransferId,
    c: usize,
    rejoin: bool,
    window: u64,
) -> Result<(ReadHalf, WriteHalf, u64, u64, Option<(u64, u64)>), OpenFailed> {
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
        let s = net::connect_async(&addr, &cfg.sock)
            .await
            .map_err(|e| format!("connecting to {addr}: {e}"))?;
        if let Some(r) = super::initial_rate(cfg, c) {
            // No connection alone may exceed the total cap; the owner's
            // bucket keeps the sum under it.
            net::set_max_pacing_rate(&s, r.bytes_per_sec());
        }
        let (mut rd, mut wr) = auth.connect(s).await.map_err(|e| match e {
            // The key was accepted earlier in this transfer: a close during
            // the handshake now is the receiver leaving (it has finished or
            // stopped), not a wrong key; another attempt may find it still
            // listening.
            SecureError::Refused if rejoin => OpenFailed::from(format!(
                "{addr}: the receiver closed the connection during the handshake \
                 (it has finished or stopped; it accepted the key earlier)"
            )),
            e => OpenFailed {
                error: format!("{addr}: {e}"),
                retry: !e.is_final(),
            },
        })?;
        let io = |e: std::io::Error| format!("hello with {addr}: {e}");
        wr.write_all(&hello.encode()).await.map_err(io)?;
        wr.flush().await.map_err(io)?;
        let mut b = [0u8; frame::HELLO_ACK_LEN];
        rd.read_exact(&mut b).await.map_err(io)?;
        let ack = HelloAck::decode(&b).map_err(|e| format!("{addr}: {e}"))?;
        // A resuming receiver follows its hello-ack with where to resume.
        let mut resume = None;
        if cfg.resume && ack.status == HelloStatus::Ok {
            let mut c = [0u8; frame::CONTROL_LEN];
            rd.read_exact(&mut c).await.map_err(io)?;
            match Control::decode(&c) {
                Ok(Control::Resume { bytes, digest }) => resume = Some((bytes, digest)),
                _ => {
                    return Err(format!(
                        "{addr}: the receiver is not resuming: start braid recv with --resume too"
                    )
                    .into())
                }
            }
        }
        Ok::<_, OpenFailed>((rd, wr, ack, resume))
    };
    let (rd, wr, ack, resume) = match tokio::time::timeout(CONNECT_TIMEOUT, attempt).await {
        Ok(r) => r?,
        Err(_) => return Err(format!("connecting to {addr}: timed out").into()),
    };
    if ack.status == HelloStatus::KeyRequired {
        return Err(OpenFailed {
            error: format!(
                "{addr}: the receiver requires a key or a code (it does not run --insecure)"
            ),
            retry: false,
        });
    }
    match ack.status {
        HelloStatus::Ok if ack.window_blocks >= 2 => Ok((
            rd,
            wr,
            u64::from(ack.window_blocks),
            ack.window_bytes,
            resume,
        )),
        HelloStatus::Ok => Err(format!("{addr}: receiver window too small").into()),
        st => Err(format!("{addr} refused the connection: {st:?}").into()),
    }
}

/// One connection's life: connect, run, reconnect with backoff.
pub(super) async fn conn_task(
    cfg: Arc<SendConfig>,
    session: TransferId,
    c: usize,
    events: mpsc::Sender<Event>,
    mut published: watch::Receiver<Published>,
    auth: Arc<Authenticator>,
) {
    let mut attempts = 0u32;
    let mut gen = 0u64;
    loop {
        let p = *published.borrow_and_update();
        if p.stop != Stop::Running {
            return;
        }
        let opened = tokio::select! {
            r = open(&cfg, &auth, session, c, p.session_up, p.window_blocks) => r,
            _ = stopped(&mut published) => return,
        };
        match opened {
            Ok((rd, wr, granted, granted_bytes, resume)) => {
                attempts = 0;
                gen += 1;
                let (jobs_tx, jobs_rx) = mpsc::channel(JOB_QUEUE);
                let (kill_tx, mut kill_rx) = oneshot::channel();
                let up = Event::Up {
                    c,
                    gen,
                    granted,
                    granted_bytes,
                    jobs: jobs_tx,
                    kill: kill_tx,
                    resume,
                };
                if events.send(up).await.is_err() {
                    return;
                }
                let mut acks = tokio::spawn(ack_reader(rd, c, gen, cfg.clone(), events.clone()));
                let ended = run_conn(&cfg, c, gen, wr, jobs_rx, &mut kill_rx, &events).await;
                match ended {
                    // The ABORT or BYE is out and the write side shut: keep
                    // reading until the receiver closes (or the owner's
                    // grace ends). Closing with its acks unread would send
                    // a reset, which can end the receiver's reader before
                    // it reads the last frame.
                    Ended::SaidLast => {
                        tokio::select! {
                            _ = &mut acks => {}
                            _ = &mut kill_rx => {}
                        }
                    }
                    // A write failed, but the receiver's outcome may already
                    // be in this socket (it, or a box on the way, closed
                    // right after it): let the reader hand it over first.
                    Ended::Failed(_) => {
                        tokio::select! {
                            _ = &mut acks => {}
                            _ = &mut kill_rx => {}
                            _ = tokio::time::sleep(KEEPALIVE) => {}
                        }
                    }
                    Ended::Stopped => {}
                }
                acks.abort();
                if let Ended::Failed(error) = ended {
                    let _ = events.send(Event::Down { c, gen, error }).await;
                }
            }
            Err(OpenFailed { error, retry }) => {
                attempts += 1;
                if events
                    .send(Event::ConnectFailed { c, error })
                    .await
                    .is_err()
                {
                    return;
                }
                if !retry || attempts > cfg.reconnect_attempts {
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

/// How [`run_conn`] ended.
enum Ended {
    /// The connection failed.
    Failed(String),
    /// The owner ended it (or is gone).
    Stopped,
    /// It wrote its last frame (ABORT or BYE) and shut its write side
    /// down.
    SaidLast,
}

/// Asks for jobs and writes them until the connection fails, the owner
/// ends it, or it has written its last frame (ABORT or BYE).
async fn run_conn(
    cfg: &SendConfig,
    c: usize,
    gen: u64,
    mut s: WriteHalf,
    mut jobs: mpsc::Receiver<Job>,
    kill: &mut oneshot::Receiver<()>,
    events: &mpsc::Sender<Event>,
) -> Ended {
    let failed = |e: std::io::Error| Ended::Failed(format!("sending to {}: {e}", addr_of(cfg, c)));
    // The mark the socket was opened with (net::connect_async).
    let mut lowat = cfg.sock.notsent_lowat;
    // The pacing rate the socket was opened with (`open`).
    let mut pacing = super::initial_rate(cfg, c).map(|r| r.bytes_per_sec());
    loop {
        if events.send(Event::Want { c, gen }).await.is_err() {
            return Ended::Stopped;
        }
        // While there is no job, show the receiver this side is alive.
        let job = loop {
            tokio::select! {
                j = jobs.recv() => match j {
                    Some(j) => break j,
                    None => return Ended::Stopped,
                },
                _ = &mut *kill => return Ended::Stopped,
                _ = tokio::time::sleep(KEEPALIVE) => {
                    let ka = DataHeader::signal(DataKind::Keepalive).encode();
                    let r = tokio::select! {
                        r = write_flush(&mut s, &ka) => r,
                        _ = &mut *kill => return Ended::Stopped,
                    };
                    if let Err(e) = r {
                        return failed(e);
                    }
                }
            }
        };
        if let Job::Block {
            max_pacing: Some(want),
            ..
        } = job
        {
            if pacing != Some(want) {
                net::set_max_pacing_rate(s.socket().as_ref(), want);
                pacing = Some(want);
            }
        }
        if let Job::Block {
            lowat: Some(want), ..
        } = job
        {
            // Only a change of more than a quarter is worth a system call.
            if lowat.is_none_or(|have| want.abs_diff(have) > have / 4) {
                net::set_notsent_lowat(s.socket().as_ref(), want);
                lowat = Some(want);
            }
        }
        let last = matches!(job, Job::Abort | Job::Bye);
        let res = tokio::select! {
            r = async {
                write_job(cfg, &mut s, job).await?;
                if last {
                    // A FIN right after the ABORT or BYE: the receiver
                    // reads it, then the end of the stream.
                    s.shutdown().await?;
                }
                Ok(())
            } => r,
            _ = &mut *kill => return Ended::Stopped,
        };
        if let Err(e) = res {
            return failed(e);
        }
        if last {
            return Ended::SaidLast;
        }
    }
}

/// Writes `b` and flushes (a sealed record goes out at once).
async fn write_flush(s: &mut WriteHalf, b: &[u8]) -> std::io::Result<()> {
    s.write_all(b).await?;
    s.flush().await
}

async fn write_job(cfg: &SendConfig, s: &mut WriteHalf, job: Job) -> std::io::Result<()> {
    write_frame(cfg, s, job).await?;
    s.flush().await
}

async fn write_frame(cfg: &SendConfig, s: &mut WriteHalf, job: Job) -> std::io::Result<()> {
    match job {
        Job::Block {
            seq, block, copy, ..
        } => {
            let h = DataHeader {
                kind: DataKind::Data,
                seq,
                len: block.data.len() as u32,
                check: block.check,
            };
            s.write_all(&h.encode()).await?;
            // Authenticate-only: the payload leaves unsealed, straight from
            // the block (the header's record authenticated its BLAKE3).
            if s.carries_clear_payloads() {
                s.send_clear(block.data.len() as u64)?;
            }
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
                check: crate::pipe::digest::block_hash(&payload),
            };
            s.write_all(&h.encode()).await?;
            s.write_all(&payload).await
        }
        Job::Abort => write_flush(s, &DataHeader::signal(DataKind::Abort).encode()).await,
        Job::Bye => write_flush(s, &DataHeader::signal(DataKind::Bye).encode()).await,
    }
}

async fn ack_reader(
    mut s: ReadHalf,
    c: usize,
    gen: u64,
    cfg: Arc<SendConfig>,
    events: mpsc::Sender<Event>,
) {
    let mut b = [0u8; frame::CONTROL_LEN];
    loop {
        let msg = match tokio::time::timeout(cfg.silence_limit.into(), s.read_exact(&mut b)).await {
            Ok(Ok(_)) => Control::decode(&b),
            Err(_) => {
                let error = format!(
                    "{}: no word from the receiver for {} s (the path may be down)",
                    addr_of(&cfg, c),
                    cfg.silence_limit.as_secs_f64()
                );
                let _ = events.send(Event::Down { c, gen, error }).await;
                return;
            }
            Ok(Err(e)) => {
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
