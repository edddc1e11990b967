//! The task that owns the receiver's state: the session, the reorder
//! window, the connection slots and the outcome (see the parent module).

use super::{
    Admit, Checked, Ctl, Event, Out, Session, Shared, ACK_WRITE_TIMEOUT, CTL_QUEUE, KEEPALIVE,
    MAX_ACCEPTED, MAX_TAMPERED, OUTPUT_QUEUE, PROGRESS_TICK,
};
use crate::clock;
use crate::pipe::frame::{self, Control, Hello, HelloAck, HelloStatus, StopReason, FLAG_REJOIN};
use crate::pipe::reorder::{Reorder, Verdict};
use crate::pipe::stats::{Progress, RecvConn, RecvReport};
use crate::pipe::{PipeError, ProtocolViolation, MAX_CONNECTIONS, MAX_WINDOW_BLOCKS};
use braid_core::{Duration, Instant};
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration as StdDuration;
use tokio::sync::mpsc;

pub(super) struct ConnSlot {
    peer: SocketAddr,
    /// The connection's control queue; dropped when it closes, which ends
    /// its control writer.
    ctl: Option<mpsc::Sender<Ctl>>,
    open: bool,
    bytes: u64,
}

/// The task that owns the receiver's state; see the module docs.
pub(super) struct Owner {
    pub(super) window_bytes: u64,
    pub(super) idle_limit: Duration,
    pub(super) session: Option<Session>,
    pub(super) reorder: Reorder<Checked>,
    /// The last block that failed its authenticated hash, and how many
    /// times in a row.
    pub(super) tampered: Option<(u64, u32)>,
    pub(super) end: Option<(u64, u64, [u8; 32])>,
    pub(super) fatal: Option<PipeError>,
    pub(super) conns: Vec<ConnSlot>,
    pub(super) open: usize,
    pub(super) last_close: Option<Instant>,
    pub(super) first_conn: Option<Instant>,
    /// The outcome told to the sender (DONE or ABORT), told again to a
    /// sender that rejoins after it; set once the transfer is over
    /// ([`Owner::done`]).
    pub(super) outcome: Option<Control>,
    /// The sender said BYE: it has the DONE and accepted it.
    pub(super) bye: bool,
    /// The sender answered the outcome (BYE, or ABORT: it rejected it), so
    /// the receiver need not wait for it to rejoin.
    pub(super) answered: bool,
    /// Connections of a rejoining sender told the outcome again (at most
    /// `MAX_CONNECTIONS`; more get BUSY).
    pub(super) told: usize,
    /// Bytes written (all verified).
    pub(super) bytes: u64,
    /// Counters shared with the connection tasks.
    pub(super) shared: Arc<Shared>,
    /// The activity count last seen, and when it last changed.
    pub(super) heard: (u64, Instant),
    /// When the cumulative ack was last repeated on every connection.
    pub(super) last_keepalive: Instant,
    pub(super) out_tx: mpsc::Sender<Out>,
    pub(super) out_busy: usize,
    pub(super) finishing: bool,
    pub(super) result: Option<Result<RecvReport, PipeError>>,
    /// The digest of what was written, once the output is flushed.
    pub(super) digest: Option<[u8; 32]>,
    /// Resume: the prefix the output holds (length, digest prefix), told
    /// to every connection after its hello-ack.
    pub(super) resume: Option<(u64, u64)>,
}

impl Owner {
    /// The transfer is over: its outcome was told to the sender.
    pub(super) fn done(&self) -> bool {
        self.outcome.is_some()
    }

    pub(super) async fn run(
        &mut self,
        events: &mut mpsc::Receiver<Event>,
        observer: &mut (dyn FnMut(&Progress) + Send),
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
                    let now = clock::now();
                    let p = self.progress(now);
                    observer(&p);
                    if now.saturating_duration_since(self.last_keepalive) >= KEEPALIVE {
                        self.ack_all();
                    }
                    self.check_silence(now)?;
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

    /// Sends the cumulative ack on every open connection: after each write,
    /// and every [`KEEPALIVE`] so the sender hears from a quiet receiver.
    fn ack_all(&mut self) {
        self.last_keepalive = clock::now();
        let ack = Control::Ack {
            seq: u64::MAX,
            written: self.reorder.written(),
        };
        for ctl in self.conns.iter().filter_map(|c| c.ctl.as_ref()) {
            // Cumulative: if the queue is full, the next one will do.
            let _ = ctl.try_send(Ctl::Frame(ack));
        }
    }

    /// Mid-stream, fails once nothing at all (no byte, no keepalive) has
    /// arrived on any connection for the idle limit: a path that went down
    /// with its connections still open.
    fn check_silence(&mut self, now: Instant) -> Result<(), PipeError> {
        let seen = self.shared.activity.load(Ordering::Relaxed);
        if seen != self.heard.0 || self.session.is_none() || self.done() || self.finishing {
            self.heard = (seen, now);
            return Ok(());
        }
        if now.saturating_duration_since(self.heard.1) > self.idle_limit {
            return Err(PipeError::SilentSender {
                secs: self.idle_limit.as_secs_f64() as u64,
                bytes: self.bytes,
            });
        }
        Ok(())
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

    pub(super) fn handle_event(&mut self, ev: Event) {
        match ev {
            Event::Hello { peer, hello, reply } => {
                let _ = reply.send(self.admit(peer, &hello));
            }
            Event::Bye { accepted } => {
                self.answered = true;
                self.bye |= accepted;
            }
            Event::Tampered { idx, seq, reply } => {
                let n = match self.tampered {
                    Some((s, n)) if s == seq => n + 1,
                    _ => 1,
                };
                self.tampered = Some((seq, n));
                // The connection then reports the block as corrupt (the
                // fatal path, which sends the ABORT).
                let stop = n >= MAX_TAMPERED && !self.done();
                if stop {
                    tracing::warn!(conn = idx, seq, "stopping: a block keeps failing its hash");
                }
                let _ = reply.send(stop);
            }
            // `_slot` goes when the block has been kept or dropped.
            Event::Block {
                idx,
                seq,
                block,
                slot: _slot,
            } => {
                self.conns[idx].bytes += block.data.len() as u64;
                match self.reorder.verdict(seq, block.data.len() as u64) {
                    Verdict::Take => {
                        self.reorder.insert(seq, block);
                    }
                    Verdict::Duplicate => self.reorder.count_duplicate(),
                    Verdict::Violation => {
                        if !self.done() {
                            tracing::warn!(conn = idx, seq, "stopping: a block beyond the window");
                            self.fatal
                                .get_or_insert(ProtocolViolation::BeyondWindow(seq).into());
                        }
                    }
                }
            }
            Event::End {
                blocks,
                total,
                digest,
                reply,
            } => {
                let announced = self.session.as_ref().and_then(|s| s.announced);
                let r = match self.end {
                    None if announced.is_some_and(|a| a != total) => {
                        Err(ProtocolViolation::SizeChanged {
                            announced: announced.unwrap_or_default(),
                            total,
                        })
                    }
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
                if !self.done() {
                    tracing::warn!(%peer, error = %error, "stopping: bad input from the sender");
                    self.fatal.get_or_insert(error);
                } else if matches!(error, PipeError::SenderAborted { .. }) {
                    // The sender rejected the outcome: it has its answer.
                    self.answered = true;
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
                self.shared.written.store(written, Ordering::Relaxed);
                self.ack_all();
            }
            Event::OutputFailed { bytes, source } => {
                self.out_busy = self.out_busy.saturating_sub(1);
                self.result
                    .get_or_insert(Err(PipeError::Output { bytes, source }));
            }
            Event::Flushed { digest } => {
                self.digest = Some(digest);
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
        if let Some(again) = self.tell_again(hello) {
            return again;
        }
        let status = match &self.session {
            _ if self.done() => HelloStatus::Busy,
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
                announced: (hello.total_size != u64::MAX).then_some(hello.total_size),
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
            return Admit::Refused(ack);
        }
        let max_block = self.session.as_ref().map_or(0, |ses| ses.max_block);
        let idx = self.conns.len();
        let (ctl_tx, ctl_rx) = mpsc::channel(CTL_QUEUE);
        if let Some((bytes, digest)) = self.resume {
            // A fresh queue has room: this goes right after the hello-ack.
            let _ = ctl_tx.try_send(Ctl::Frame(Control::Resume { bytes, digest }));
        }
        self.conns.push(ConnSlot {
            peer,
            ctl: Some(ctl_tx.clone()),
            open: true,
            bytes: 0,
        });
        self.open += 1;
        self.first_conn.get_or_insert(clock::now());
        Admit::Conn {
            ack,
            idx,
            max_block,
            ctl: (ctl_tx, ctl_rx),
        }
    }

    /// After the outcome, this session's sender rejoining (it missed the
    /// DONE) is accepted only to be told the outcome again. It proved the
    /// key in this connection's handshake, like every other.
    fn tell_again(&mut self, hello: &Hello) -> Option<Admit> {
        let outcome = self.outcome?;
        let ses = self.session.as_ref()?;
        if ses.id != hello.session || hello.flags & FLAG_REJOIN == 0 || self.told >= MAX_CONNECTIONS
        {
            return None;
        }
        let max_block = ses.max_block;
        self.told += 1;
        let mut told = Vec::with_capacity(2);
        if let Some((bytes, digest)) = self.resume {
            told.push(Control::Resume { bytes, digest });
        }
        told.push(outcome);
        let ack = HelloAck {
            status: HelloStatus::Ok,
            window_blocks: self.reorder.window() as u32,
            window_bytes: self.reorder.window_bytes(),
        };
        Some(Admit::TellAgain {
            ack,
            told,
            max_block,
        })
    }

    /// Sends the outcome (`Done` or `Abort`) on every open connection and
    /// refuses new ones.
    pub(super) async fn finish(&mut self, result: &Result<RecvReport, PipeError>) {
        let bytes = self.bytes;
        let msg = match result {
            Ok(_) => Control::Done {
                reason: StopReason::Verified,
                bytes,
                digest: self.digest.map_or(0, |d| frame::digest_prefix(&d)),
            },
            Err(PipeError::Digest { .. }) => Control::Done {
                reason: StopReason::DigestMismatch,
                bytes,
                digest: self.digest.map_or(0, |d| frame::digest_prefix(&d)),
            },
            Err(e) => Control::Abort {
                reason: stop_reason(e),
                bytes,
                seq: u64::MAX,
            },
        };
        self.outcome = Some(msg);
        for ctl in self.conns.iter().filter_map(|c| c.ctl.as_ref()) {
            let send = ctl.send(Ctl::Final(msg));
            if tokio::time::timeout(ACK_WRITE_TIMEOUT, send).await.is_err() {
                // A sender that misses it rejoins and is told again.
                tracing::warn!("the outcome could not be queued on a connection");
            }
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
            // Set once the sender's BYE arrives, after the outcome.
            sender_confirmed: false,
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
