//! The task that owns the sender's state: the scheduler, the blocks not
//! yet acknowledged, the connection slots and the outcome (see the parent
//! module).

use super::{
    addr_of, is_paced, Block, Event, Input, Job, Published, RateCap, Req, SendConfig, Slot, Stop,
    PROGRESS_TICK, READ_QUEUE, SPARE_BYTES,
};
use crate::clock;
use crate::pipe::frame::{self, Control};
use crate::pipe::sched::BlockScheduler;
use crate::pipe::stats::{Progress, SendConn, SendReport};
use crate::pipe::{PipeError, ProtocolViolation};
use braid_core::Instant;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration as StdDuration;
use tokio::sync::{mpsc, watch};

/// The task that owns the sender's state; see the module docs.
pub(super) struct Owner {
    pub(super) cfg: Arc<SendConfig>,
    pub(super) sched: BlockScheduler,
    pub(super) blocks: BTreeMap<u64, Arc<Block>>,
    /// Buffers of acknowledged blocks, for the reader's next requests (at
    /// most [`SPARE_BYTES`] of capacity; none once the input has ended).
    pub(super) spare: Vec<Vec<u8>>,
    pub(super) slots: Vec<Slot>,
    pub(super) outcome: Option<Result<(), PipeError>>,
    pub(super) session_up: bool,
    pub(super) end: Option<(u64, [u8; 32])>,
    pub(super) acked_bytes: u64,
    pub(super) sent_wire: u64,
    pub(super) window_blocks: u64,
    /// Read requests out to the reader (at most [`READ_QUEUE`]).
    pub(super) reads: usize,
    pub(super) read_tx: mpsc::Sender<Req>,
    pub(super) pub_tx: watch::Sender<Published>,
    /// Where the next round of job offers starts (fairness).
    pub(super) rotate: usize,
    pub(super) reweights: u64,
    /// The `--rate` cap, if any.
    pub(super) pacer: Option<RateCap>,
    /// The cap of the connections `pacer` does not pace
    /// ([`SendConfig::rest_rate`]).
    pub(super) rest_pacer: Option<RateCap>,
    /// Where new rates for the pacer come from (`None` once closed).
    pub(super) rate_updates: Option<watch::Receiver<braid_core::Bandwidth>>,
    /// Resume: the receiver's prefix (length, digest prefix) the reader
    /// has yet to be asked to check.
    pub(super) skip: Option<(u64, u64)>,
    /// Where this run's blocks start in the input: `Some(0)` without
    /// resume; `None` until the reader has checked the receiver's prefix.
    pub(super) resumed_from: Option<u64>,
}

impl Owner {
    pub(super) async fn run(
        &mut self,
        events: &mut mpsc::Receiver<Event>,
        mut input: mpsc::Receiver<Input>,
        start: Instant,
        observer: &mut (dyn FnMut(&Progress) + Send),
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
            // A waiting connection may get a copy once a path stalls, or
            // a block once the rate cap allows.
            let stall = self
                .slots
                .iter()
                .any(|s| s.wants)
                .then(|| {
                    let now = clock::now();
                    let stall = self
                        .sched
                        .poll_timeout(now)
                        .map(|due| due.saturating_duration_since(now));
                    let pace = [self.pacer.as_mut(), self.rest_pacer.as_mut()]
                        .into_iter()
                        .flatten()
                        .map(|p| p.wait(now))
                        .filter(|w| !w.is_zero())
                        .min();
                    let wake = match (stall, pace) {
                        (Some(a), Some(b)) => Some(a.min(b)),
                        (a, b) => a.or(b),
                    };
                    wake.map(StdDuration::from)
                })
                .flatten();
            tokio::select! {
                ev = events.recv() => match ev {
                    Some(ev) => self.handle_event(ev),
                    // Every connection task ended: they all gave up.
                    None => self.slots.iter_mut().for_each(|s| s.given_up = true),
                },
                inp = input.recv(), if self.reads > 0 => self.handle_input(inp),
                _ = tick.tick() => {
                    let p = self.progress(start, clock::now());
                    observer(&p);
                }
                _ = sleep_opt(stall) => {}
                r = rate_changed(&mut self.rate_updates) => self.handle_rate(r),
            }
        }
    }

    /// Starts a read if the scheduler allows and offers jobs to every
    /// connection that asked for one.
    fn service(&mut self) {
        if self.session_up {
            // The reader owns the other end until the transfer ends; the
            // queue holds READ_QUEUE requests, never more than are out.
            if let Some((bytes, digest)) = self.skip.filter(|_| self.reads == 0) {
                if self.read_tx.try_send(Req::Skip { bytes, digest }).is_ok() {
                    self.reads = 1;
                    self.skip = None;
                }
            }
            while self.skip.is_none()
                && self.resumed_from.is_some()
                && self.reads < READ_QUEUE
                && self.sched.may_read()
            {
                let len = self.sched.next_len();
                let buf = self.take_spare(len as usize);
                if let Err(e) = self.read_tx.try_send(Req::Block { len, buf }) {
                    if let Req::Block { buf, .. } = e.into_inner() {
                        self.keep_spare(buf);
                    }
                    break;
                }
                self.sched.handle_read_requested(len);
                self.reads += 1;
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

    /// A new rate from [`SendConfig::rate_updates`] (`None`: the channel
    /// closed; the rate in force stays).
    fn handle_rate(&mut self, rate: Option<braid_core::Bandwidth>) {
        match (rate, &mut self.pacer) {
            (Some(r), Some(p)) => {
                tracing::info!(rate = %r, "pace changed");
                p.set_rate(r, clock::now());
            }
            (Some(_), None) => {}
            (None, _) => self.rate_updates = None,
        }
    }

    /// The bucket that paces connection `c`, if any.
    fn pacer_of(&mut self, c: usize) -> Option<&mut RateCap> {
        if is_paced(&self.cfg, c) {
            self.pacer.as_mut()
        } else {
            self.rest_pacer.as_mut()
        }
    }

    fn next_job(&mut self, c: usize, now: Instant) -> Option<Job> {
        let pacer = self.pacer_of(c);
        let max_pacing = pacer
            .as_ref()
            .map(|p| p.rate().bytes_per_sec())
            .filter(|&r| r > 0);
        let paced = pacer.is_some_and(|p| !p.wait(now).is_zero());
        if let Some(t) = (!paced).then(|| self.sched.poll_send(c, now)).flatten() {
            if let Some(b) = self.blocks.get(&t.seq).map(Arc::clone) {
                self.sent_wire += u64::from(t.len);
                if let Some(p) = self.pacer_of(c) {
                    p.take(u64::from(t.len), now);
                }
                let lowat = self
                    .cfg
                    .sock
                    .notsent_lowat
                    .map(|max| self.sched.notsent_lowat(c, max));
                return Some(Job::Block {
                    seq: t.seq,
                    block: b,
                    copy: t.copy,
                    max_pacing,
                    lowat,
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
        self.reads = self.reads.saturating_sub(1);
        match inp {
            Some(Input::Block(b)) => {
                let seq = self.sched.next_seq();
                // A block is at most `next_len` (a u32) long.
                let n = b.data.len() as u32;
                self.blocks.insert(seq, Arc::new(b));
                self.sched.handle_block_read(n);
            }
            Some(Input::Eof { bytes, digest }) => {
                // The reader has stopped: requests still out are void, and
                // spare buffers have no use.
                self.reads = 0;
                self.spare = Vec::new();
                self.sched.handle_eof();
                self.end = Some((bytes, digest));
            }
            Some(Input::Failed(e)) => {
                self.outcome.get_or_insert(Err(PipeError::Input(e)));
            }
            Some(Input::Resumed { bytes }) => {
                tracing::info!(bytes, "resuming after the receiver's verified prefix");
                self.resumed_from = Some(bytes);
            }
            Some(Input::Mismatch { bytes }) => {
                self.outcome
                    .get_or_insert(Err(PipeError::ResumeMismatch { bytes }));
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
                resume,
            } => {
                if self.cfg.resume && self.resumed_from.is_none() && self.reads == 0 {
                    self.skip = self.skip.or(resume);
                }
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

    /// Keeps an acknowledged block's buffer for a later read, while the
    /// input goes on and [`SPARE_BYTES`] allow.
    fn keep_spare(&mut self, buf: Vec<u8>) {
        let held: usize = self.spare.iter().map(Vec::capacity).sum();
        if self.end.is_none() && held + buf.capacity() <= SPARE_BYTES {
            self.spare.push(buf);
        }
    }

    /// A spare buffer for a block of `len` bytes: one that holds it
    /// without growing and is at most twice its size (memory is counted
    /// by blocks' lengths, not their buffers'), else a fresh one — and
    /// then the spares too small for it go (blocks grow as a transfer
    /// starts: those would only hold the budget).
    fn take_spare(&mut self, len: usize) -> Vec<u8> {
        let fits = |b: &Vec<u8>| (len..=len.saturating_mul(2)).contains(&b.capacity());
        if let Some(i) = self.spare.iter().position(fits) {
            return self.spare.swap_remove(i);
        }
        self.spare.retain(|b| b.capacity() >= len);
        Vec::new()
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
                        // A connection may still hold a copy in flight:
                        // then the buffer is freed when it is done.
                        if let Ok(b) = Arc::try_unwrap(b) {
                            self.keep_spare(b.data);
                        }
                    }
                }
            }
            Ok(Control::Done {
                reason: frame::StopReason::Verified,
                bytes,
                digest,
            }) => {
                // Success only at this side's end of input, with the
                // receiver's count and digest equal to its own.
                let r = match self.end {
                    None => Err(PipeError::EarlyDone { bytes }),
                    Some((sent, d)) if sent == bytes && frame::digest_prefix(&d) == digest => {
                        // The receiver wrote and verified every byte: its
                        // count is exact, while the per-block ack tally can
                        // lag it (acks of the last blocks in flight).
                        self.acked_bytes = bytes - self.resumed_from.unwrap_or(0).min(bytes);
                        Ok(())
                    }
                    Some((sent, d)) => Err(PipeError::DoneMismatch {
                        sent,
                        confirmed: bytes,
                        digests_match: frame::digest_prefix(&d) == digest,
                    }),
                };
                self.outcome.get_or_insert(r);
            }
            Ok(Control::Resume { .. }) => {
                // A resuming sender reads these while connecting; here
                // one means only the receiver is resuming.
                self.outcome.get_or_insert(Err(PipeError::ResumeOneSided(
                    "the receiver was started with --resume: start braid send with --resume too",
                )));
            }
            Ok(Control::Done { reason, bytes, .. }) | Ok(Control::Abort { reason, bytes, .. }) => {
                self.outcome
                    .get_or_insert(Err(PipeError::ReceiverStopped { reason, bytes }));
            }
            Err(e) => {
                self.outcome.get_or_insert(Err(e.into()));
            }
        }
    }

    pub(super) fn publish(&self, stop: Stop) {
        let p = Published {
            session_up: self.session_up,
            window_blocks: self.window_blocks,
            stop,
        };
        self.pub_tx.send_replace(p);
    }

    pub(super) fn progress(&self, start: Instant, now: Instant) -> Progress {
        Progress {
            bytes: self.acked_bytes,
            total: None,
            seconds: now.saturating_duration_since(start).as_secs_f64(),
            per_conn: (0..self.slots.len())
                .map(|c| self.sched.counters(c).acked_bytes)
                .collect(),
        }
    }

    pub(super) fn report(&self, start: Instant, now: Instant) -> SendReport {
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
            window_bytes: self.sched.granted_window_bytes(),
            window_auto_peak_bytes: self.sched.window_peak_bytes(),
            window_final_bytes: self.sched.effective_window_bytes(),
            reweights: self.sched.reweights(),
            blake3: blake3::Hash::from_bytes(digest).to_hex().to_string(),
            resumed_from: self.resumed_from.unwrap_or(0),
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
/// The next rate on `updates` (`None` when it closed); never resolves
/// without a channel.
async fn rate_changed(
    updates: &mut Option<watch::Receiver<braid_core::Bandwidth>>,
) -> Option<braid_core::Bandwidth> {
    match updates {
        Some(rx) => match rx.changed().await {
            Ok(()) => Some(*rx.borrow_and_update()),
            Err(_) => None,
        },
        None => std::future::pending().await,
    }
}

async fn sleep_opt(d: Option<StdDuration>) {
    match d {
        Some(d) => tokio::time::sleep(d).await,
        None => std::future::pending().await,
    }
}
