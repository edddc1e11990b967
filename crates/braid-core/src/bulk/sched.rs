//! Which block goes on which connection: the sender's sans-IO scheduler.
//!
//! [`BlockScheduler`] knows the blocks read from the input (numbers and lengths,
//! not bytes), what is in flight on each connection, what the receiver
//! acknowledged and wrote, and an estimate of each connection's rate. The
//! driver (`braid::pipe`'s sender, or a simulator node) tells it what happened (`handle_*`) and asks it
//! what a connection whose socket can take more should send next
//! ([`BlockScheduler::poll_send`]).
//!
//! Modes (see `docs/pipe.md` for the precise rules):
//! - [`Mode::RoundRobin`]: block `seq` belongs to connection `seq % N`
//!   ([`Layout::Partitioned`]: to connection `⌊seq·N/T⌋` of `T` blocks).
//! - [`Mode::Weighted`]: the same ownership, block lengths from the seed's
//!   controller ([`super::weighted::Weighted`]).
//! - [`Mode::Adaptive`]: any connection takes the lowest unsent block unless
//!   it is throttled; an idle connection re-sends the head-of-line block when
//!   it would deliver it sooner than the connection holding it.
//!
//! The reorder window: the receiver grants a window (blocks and bytes; the
//! user's `--window` is its upper bound). With
//! [`BlockScheduler::set_auto_window`] the adaptive mode uses only as much of it
//! as the measured paths need: [`WINDOW_HEADROOM`] × the sum of the live
//! connections' rates × (the longest block latency, send to ack, +
//! [`BLOCK_TIME`]), at least [`WINDOW_MIN_BLOCKS`] blocks per connection
//! ([`BlockScheduler::effective_window_bytes`]). That is the data in flight on
//! the slowest path plus what the faster paths deliver meanwhile (which the
//! receiver must hold), with room for a loss or a queue to double it.
//!
//! Invariants: the driver reads block `seq` only while
//! `seq < written + window` ([`BlockScheduler::may_read`]), so the sender holds and
//! the receiver buffers at most `window` blocks (and at most the effective
//! window's bytes); a block is sent on at most
//! [`MAX_COPIES`] connections at once; blocks in flight on a connection that
//! died go back to the unsent set unless already acknowledged.

use super::weighted::Weighted;
use crate::{Duration, Instant};
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// At most this many copies of one block are in flight at once.
pub const MAX_COPIES: usize = 2;
/// A throttled connection still takes a new block if it would deliver it
/// within this fraction of the time the whole aggregate needs to fill the
/// receiver's window.
pub const THROTTLE_FRACTION: f64 = 0.5;
/// A copy of the head-of-line block is sent only if it would arrive this many
/// times sooner than the first copy.
pub const DUP_MARGIN: f64 = 1.5;
/// A connection with data in flight and no acknowledgement for this long (or
/// four expected block times, whichever is longer) is stalled.
pub const STALL_MIN: Duration = Duration::from_millis(500);
/// Rate samples cover at least this much busy time.
pub const RATE_SAMPLE_MIN: Duration = Duration::from_millis(50);
/// How many of the lowest unacknowledged blocks an idle connection
/// considers for a copy.
pub const COPY_SCAN: usize = 64;
/// The reader stays at most this many rounds (N blocks each) ahead of what
/// the connections have taken.
pub const READ_AHEAD_ROUNDS: u64 = 2;
/// ... but may always read this many blocks ahead.
pub const READ_AHEAD_MIN: u64 = 8;
/// Adaptive mode sizes blocks so the slowest live connection sends one in
/// about this long ...
pub const BLOCK_TIME: Duration = Duration::from_millis(50);
/// ... but never smaller than this.
pub const MIN_ADAPTIVE_BLOCK: u32 = 16 << 10;
/// Adaptive mode's block length before any connection has a rate.
pub const INITIAL_ADAPTIVE_BLOCK: u32 = 256 << 10;
/// The automatic window is this many times the data the paths hold in
/// flight (see the module docs); 2 also makes the throttle's horizon
/// ([`THROTTLE_FRACTION`] of the window's time) equal to the slowest path's
/// latency, so no path that delivers within it is throttled.
pub const WINDOW_HEADROOM: f64 = 2.0;
/// The automatic window is never below this many full blocks per connection.
pub const WINDOW_MIN_BLOCKS: u64 = 4;
/// Adaptive mode asks each connection's socket to hold at most this much of
/// its measured rate unsent (see [`BlockScheduler::notsent_lowat`]) ...
pub const LOWAT_TIME: Duration = Duration::from_millis(50);
/// ... but never less than this.
pub const MIN_LOWAT: u32 = 16 << 10;
/// Weight of a new rate sample in the moving average.
///
/// The average is kept here in bytes per second as an `f64`
/// (`r += RATE_GAIN · (sample − r)`) rather than through
/// `estimate::predictor::Ewma`, which works in whole bits per second and
/// rounds each prediction: reusing it would change the scheduler's decisions
/// and the pipe's figures.
pub const RATE_GAIN: f64 = 0.25;

/// How blocks are spread over connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// Pull-based with head-of-line re-sending and throttling (default).
    Adaptive,
    /// The seed's weighted buffers with its PI re-weighting loop.
    Weighted,
    /// Equal blocks in turn (the seed's unweighted baseline).
    RoundRobin,
}

/// Block ownership in the fixed modes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Layout {
    /// Block `seq` to connection `seq % N`.
    Interleaved,
    /// Contiguous ranges of a known number of blocks.
    Partitioned,
}

/// What a connection should send next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockSend {
    /// Block number.
    pub seq: u64,
    /// Its length.
    pub len: u32,
    /// True if another connection already carries this block.
    pub copy: bool,
}

#[derive(Debug, Clone, Copy)]
struct Flight {
    seq: u64,
    len: u32,
    sent: Instant,
}

/// Per-connection counters the driver reports.
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub struct ConnCounters {
    /// Payload bytes handed to the socket.
    pub sent_bytes: u64,
    /// Payload bytes of blocks first acknowledged over this connection.
    pub acked_bytes: u64,
    /// Blocks sent as head-of-line copies.
    pub copies: u64,
    /// Blocks taken over from a connection that died.
    pub resent: u64,
    /// Current rate estimate in bytes per second (0 if none yet).
    pub rate: f64,
    /// Moving average of a block's latency on this connection, from being
    /// handed to the socket to its acknowledgement, in seconds (0 if none
    /// yet).
    pub latency: f64,
}

#[derive(Debug, Clone, Default)]
struct Conn {
    alive: bool,
    inflight: VecDeque<Flight>,
    inflight_bytes: u64,
    last_progress: Instant,
    prev_ack: Instant,
    rate: Option<f64>,
    latency: Option<f64>,
    acc_bytes: u64,
    acc_time: Duration,
    counters: ConnCounters,
}

/// The sender's scheduler; see the module docs.
#[derive(Debug)]
pub struct BlockScheduler {
    mode: Mode,
    layout: Layout,
    block: u32,
    window: u64,
    window_bytes: u64,
    auto_window: bool,
    window_peak: u64,
    read_bytes: u64,
    starts: BTreeMap<u64, u64>,
    total_hint: Option<u64>,
    conns: Vec<Conn>,
    read_upto: u64,
    /// Lengths of the blocks asked of the reader and not yet read, in
    /// order ([`Self::handle_read_requested`]).
    requested: VecDeque<u32>,
    unacked: BTreeMap<u64, u32>,
    unsent: BTreeSet<u64>,
    requeued: BTreeSet<u64>,
    written: u64,
    eof: Option<u64>,
    weighted: Option<Weighted>,
}

impl BlockScheduler {
    /// A scheduler for `n` connections (all down until
    /// [`Self::handle_conn_up`]), blocks of at most `block` bytes and a
    /// receiver window of `window` blocks. `total_blocks` is the number of
    /// blocks if the input size is known (needed by the partitioned layout).
    pub fn new(
        mode: Mode,
        layout: Layout,
        n: usize,
        block: u32,
        window: u64,
        total_blocks: Option<u64>,
        now: Instant,
    ) -> Self {
        let n = n.max(1);
        BlockScheduler {
            mode,
            layout,
            block,
            window: window.max(1),
            window_bytes: window.max(1).saturating_mul(u64::from(block)),
            auto_window: false,
            window_peak: 0,
            read_bytes: 0,
            starts: BTreeMap::new(),
            total_hint: total_blocks,
            conns: vec![Conn::default(); n],
            read_upto: 0,
            requested: VecDeque::new(),
            unacked: BTreeMap::new(),
            unsent: BTreeSet::new(),
            requeued: BTreeSet::new(),
            written: 0,
            eof: None,
            weighted: (mode == Mode::Weighted).then(|| Weighted::new(n, block, now)),
        }
    }

    /// Sets the receiver's window (blocks and bytes), as granted in its
    /// hello-ack.
    pub fn set_window(&mut self, window: u64, window_bytes: u64) {
        self.window = window.max(1);
        self.window_bytes = window_bytes.max(u64::from(self.block));
    }

    /// The byte window granted by the receiver (the upper bound).
    pub fn granted_window_bytes(&self) -> u64 {
        self.window_bytes
    }

    /// In adaptive mode, use only the part of the granted byte window the
    /// measured paths need ([`Self::effective_window_bytes`]); the granted
    /// window stays the upper bound. Other modes always use the granted
    /// window.
    pub fn set_auto_window(&mut self, on: bool) {
        self.auto_window = on;
    }

    /// The byte window the sender keeps to now: the granted one, or in
    /// adaptive mode with [`Self::set_auto_window`] and once every live
    /// connection has a rate and a latency, [`WINDOW_HEADROOM`] × (sum of
    /// their rates) × (longest latency + [`BLOCK_TIME`]), between
    /// [`WINDOW_MIN_BLOCKS`] full blocks per connection and the granted
    /// window.
    pub fn effective_window_bytes(&self) -> u64 {
        self.auto_window_bytes().unwrap_or(self.window_bytes)
    }

    /// The automatic window, if it is on and every live path is measured.
    fn auto_window_bytes(&self) -> Option<u64> {
        if !self.auto_window || self.mode != Mode::Adaptive {
            return None;
        }
        let mut rate = 0.0;
        let mut latency: f64 = 0.0;
        let mut live = 0u64;
        for k in self.conns.iter().filter(|k| k.alive) {
            match (k.rate, k.latency) {
                (Some(r), Some(d)) => {
                    rate += r;
                    latency = latency.max(d);
                    live += 1;
                }
                // A path not measured yet could need any window.
                _ => return None,
            }
        }
        if live == 0 || rate <= 0.0 {
            return None;
        }
        let want = WINDOW_HEADROOM * rate * (latency + BLOCK_TIME.as_secs_f64());
        // Full blocks: at least the initial length, so a cap above it
        // changes nothing where blocks stay below it (slow paths).
        let block = self
            .adaptive_len()
            .max(INITIAL_ADAPTIVE_BLOCK.min(self.block));
        let floor = (WINDOW_MIN_BLOCKS * live).saturating_mul(u64::from(block));
        // f64 → u64 saturates; the clamp keeps it within the granted window.
        Some((want as u64).clamp(floor.min(self.window_bytes), self.window_bytes))
    }

    /// How much unsent data connection `c`'s socket should hold at most
    /// (`TCP_NOTSENT_LOWAT`), given the driver's upper bound `max`: in
    /// adaptive mode [`LOWAT_TIME`] of its measured rate, at least
    /// [`MIN_LOWAT`], and before a rate is known at most
    /// [`INITIAL_ADAPTIVE_BLOCK`]; `max` in the other modes.
    ///
    /// A socket asks for its next block only when its unsent data falls
    /// below this mark, so on a slow path a fixed mark of one 256 KiB block
    /// is a queue of up to half a second (at 5 Mbit/s) in front of every
    /// block: head-of-line delay, reorder memory and a longer tail. Fast
    /// connections keep `max` (a writer that is not scheduled in time must
    /// not starve them).
    pub fn notsent_lowat(&self, c: usize, max: u32) -> u32 {
        if self.mode != Mode::Adaptive {
            return max;
        }
        match self.conns.get(c).and_then(|k| k.rate) {
            Some(r) if r > 0.0 => {
                // f64 → u32 saturates; the clamp keeps it within bounds.
                ((r * LOWAT_TIME.as_secs_f64()) as u32).clamp(MIN_LOWAT.min(max), max)
            }
            // Unmeasured: no more than a first block, so a slow path does
            // not queue seconds of data before its rate is known.
            _ => max.min(INITIAL_ADAPTIVE_BLOCK),
        }
    }

    /// The largest automatic window computed so far (0: none yet, or the
    /// automatic window is off), for reports.
    pub fn window_peak_bytes(&self) -> u64 {
        self.window_peak
    }

    /// True if the receiver's window (not the input) keeps the reader from
    /// reading the next block.
    fn window_blocked(&self) -> bool {
        self.eof.is_none()
            && (self.read_upto + self.requested.len() as u64
                >= self.written.saturating_add(self.window)
                || self.bytes_in_window() + self.requested_bytes() + u64::from(self.next_len())
                    > self.effective_window_bytes())
    }

    /// Bytes asked of the reader and not yet read.
    fn requested_bytes(&self) -> u64 {
        self.requested.iter().map(|&l| u64::from(l)).sum()
    }

    /// Bytes of the blocks read but not yet written by the receiver.
    fn bytes_in_window(&self) -> u64 {
        match self.starts.get(&self.written) {
            Some(start) => self.read_bytes - start,
            None => 0,
        }
    }

    /// True while the driver may read the next block from the input.
    ///
    /// A block's length is fixed when it is read (weighted: the owner's
    /// buffer; adaptive: sized to the slowest connection), so the reader
    /// stays at most [`READ_AHEAD_ROUNDS`] rounds (N blocks each, at least
    /// [`READ_AHEAD_MIN`] blocks) ahead of the connections; the seed, too,
    /// fills each connection's buffer just in time.
    ///
    /// Blocks asked of the reader but not yet read
    /// ([`Self::handle_read_requested`]) count as read, so a driver may keep
    /// several requests in flight and the limits still hold.
    pub fn may_read(&self) -> bool {
        let ahead = (READ_AHEAD_ROUNDS * self.conns.len() as u64).max(READ_AHEAD_MIN);
        let ahead_ok = ((self.unsent.len() + self.requested.len()) as u64) < ahead;
        self.eof.is_none() && ahead_ok && !self.window_blocked()
    }

    /// Number of the next block to read (the block the oldest request in
    /// flight will deliver).
    pub fn next_seq(&self) -> u64 {
        self.read_upto
    }

    /// Length of the next block to ask the reader for (after those
    /// already asked for).
    pub fn next_len(&self) -> u32 {
        let seq = self.read_upto + self.requested.len() as u64;
        match (&self.weighted, self.mode) {
            (Some(w), _) => w.block_len((seq % self.conns.len() as u64) as usize),
            (None, Mode::Adaptive) => self.adaptive_len(),
            (None, _) => self.block,
        }
    }

    /// Adaptive mode's block length now: [`BLOCK_TIME`] of the slowest
    /// measured connection, between [`MIN_ADAPTIVE_BLOCK`] and the largest
    /// block; [`INITIAL_ADAPTIVE_BLOCK`] (at most the largest) until a
    /// connection has a rate. So a large cap changes only fast paths: their
    /// per-block work (hand-offs, system calls) shrinks, while a slow
    /// path's block still takes [`BLOCK_TIME`] to send.
    fn adaptive_len(&self) -> u32 {
        let slowest = self
            .conns
            .iter()
            .filter(|k| k.alive)
            .filter_map(|k| k.rate)
            .fold(f64::INFINITY, f64::min);
        if slowest.is_finite() {
            let want = slowest * BLOCK_TIME.as_secs_f64();
            // f64 → u32 saturates; the bounds keep it in range.
            (want.min(f64::from(self.block)) as u32).max(MIN_ADAPTIVE_BLOCK.min(self.block))
        } else {
            INITIAL_ADAPTIVE_BLOCK.min(self.block)
        }
    }

    /// The driver asked its reader for a block of `len` bytes
    /// ([`Self::next_len`]), to arrive through [`Self::handle_block_read`]
    /// in the order asked. A driver that asks for one block at a time may
    /// skip this.
    pub fn handle_read_requested(&mut self, len: u32) {
        self.requested.push_back(len);
    }

    /// The driver read block [`Self::next_seq`] with `len` bytes.
    pub fn handle_block_read(&mut self, len: u32) {
        self.requested.pop_front();
        let seq = self.read_upto;
        self.starts.insert(seq, self.read_bytes);
        self.read_bytes += u64::from(len);
        self.unacked.insert(seq, len);
        self.unsent.insert(seq);
        self.read_upto += 1;
    }

    /// The input ended; [`Self::next_seq`] is the number of blocks.
    pub fn handle_eof(&mut self) {
        // Requests after the end will never be answered.
        self.requested.clear();
        self.eof = Some(self.read_upto);
    }

    /// The number of blocks if the input has ended.
    pub fn total_blocks(&self) -> Option<u64> {
        self.eof
    }

    /// Every block has been sent at least once.
    pub fn all_sent(&self) -> bool {
        self.eof.is_some() && self.unsent.is_empty()
    }

    /// Every block has been acknowledged.
    pub fn is_complete(&self) -> bool {
        self.eof.is_some() && self.unacked.is_empty()
    }

    /// Blocks the receiver has written in order.
    pub fn written(&self) -> u64 {
        self.written
    }

    /// True if block `seq` still waits for an acknowledgement.
    pub fn is_unacked(&self, seq: u64) -> bool {
        self.unacked.contains_key(&seq)
    }

    /// Connections currently up.
    pub fn alive(&self) -> usize {
        self.conns.iter().filter(|c| c.alive).count()
    }

    /// Counters of connection `c`.
    pub fn counters(&self, c: usize) -> ConnCounters {
        self.conns.get(c).map(|k| k.counters).unwrap_or_default()
    }

    /// Re-weightings done by the weighted controller.
    pub fn reweights(&self) -> u64 {
        self.weighted.as_ref().map_or(0, Weighted::reweights)
    }

    /// The weighted controller's current block length per connection
    /// (weighted mode only), for logging after a re-weighting.
    pub fn weighted_lens(&self) -> Option<&[u32]> {
        self.weighted.as_ref().map(Weighted::lens)
    }

    /// Connection `c` is up (connected, hello accepted).
    pub fn handle_conn_up(&mut self, c: usize, now: Instant) {
        if let Some(k) = self.conns.get_mut(c) {
            k.alive = true;
            k.last_progress = now;
            k.prev_ack = now;
        }
    }

    /// Connection `c` died: its unacknowledged blocks go back to be sent.
    pub fn handle_conn_down(&mut self, c: usize) {
        let Some(k) = self.conns.get_mut(c) else {
            return;
        };
        k.alive = false;
        k.inflight_bytes = 0;
        for f in k.inflight.drain(..) {
            if self.unacked.contains_key(&f.seq) {
                self.unsent.insert(f.seq);
                self.requeued.insert(f.seq);
            }
        }
    }

    /// The receiver acknowledged block `seq` (or `u64::MAX`: none) over
    /// connection `c` and has written `written` blocks.
    pub fn handle_ack(&mut self, c: usize, seq: u64, written: u64, now: Instant) {
        let written = written.min(self.read_upto);
        if written > self.written {
            self.written = written;
            self.starts = self.starts.split_off(&written);
        }
        if seq == u64::MAX {
            return;
        }
        let first = self.unacked.remove(&seq);
        if first.is_some() {
            self.unsent.remove(&seq);
            self.requeued.remove(&seq);
        }
        let Some(k) = self.conns.get_mut(c) else {
            return;
        };
        if let Some(pos) = k.inflight.iter().position(|f| f.seq == seq) {
            if let Some(f) = k.inflight.remove(pos) {
                k.inflight_bytes -= u64::from(f.len);
                let start = if f.sent > k.prev_ack {
                    f.sent
                } else {
                    k.prev_ack
                };
                let service = now.saturating_duration_since(start);
                let latency = now.saturating_duration_since(f.sent).as_secs_f64();
                let avg = match k.latency {
                    Some(d) => d + RATE_GAIN * (latency - d),
                    None => latency,
                };
                k.latency = Some(avg);
                k.counters.latency = avg;
                k.prev_ack = now;
                k.last_progress = now;
                k.acc_bytes += u64::from(f.len);
                k.acc_time += service;
                if k.acc_time >= RATE_SAMPLE_MIN || (k.inflight.is_empty() && !k.acc_time.is_zero())
                {
                    let sample = k.acc_bytes as f64 / k.acc_time.as_secs_f64();
                    k.rate = Some(match k.rate {
                        Some(r) => r + RATE_GAIN * (sample - r),
                        None => sample,
                    });
                    k.counters.rate = k.rate.unwrap_or(0.0);
                    k.acc_bytes = 0;
                    k.acc_time = Duration::ZERO;
                }
                if first.is_some() {
                    if let Some(w) = &mut self.weighted {
                        w.handle_sojourn(c, service, now);
                    }
                }
            }
        }
        if let Some(len) = first {
            // Another copy stays in its connection's flight list until its
            // own ack: its bytes are still in that pipe, and its ack is a
            // rate sample for that connection.
            k.counters.acked_bytes += u64::from(len);
        }
        if let Some(w) = self.auto_window_bytes() {
            self.window_peak = self.window_peak.max(w);
        }
    }

    /// What connection `c`, whose socket can take more, sends next; `None`:
    /// nothing for now (ask again after the next event or at
    /// [`Self::poll_timeout`]).
    pub fn poll_send(&mut self, c: usize, now: Instant) -> Option<BlockSend> {
        if !self.conns.get(c)?.alive {
            return None;
        }
        let pick = match self.mode {
            Mode::Adaptive => self.pick_adaptive(c, now),
            Mode::Weighted | Mode::RoundRobin => self.pick_fixed(c),
        }?;
        let len = *self.unacked.get(&pick.0)?;
        let k = &mut self.conns[c];
        if k.inflight.is_empty() {
            k.last_progress = now;
            k.prev_ack = now;
        }
        k.inflight.push_back(Flight {
            seq: pick.0,
            len,
            sent: now,
        });
        k.inflight_bytes += u64::from(len);
        k.counters.sent_bytes += u64::from(len);
        if pick.1 {
            k.counters.copies += 1;
        } else {
            if self.requeued.remove(&pick.0) {
                k.counters.resent += 1;
            }
            self.unsent.remove(&pick.0);
        }
        Some(BlockSend {
            seq: pick.0,
            len,
            copy: pick.1,
        })
    }

    fn owner(&self, seq: u64) -> usize {
        let n = self.conns.len() as u64;
        let o = match (self.layout, self.total_hint) {
            (Layout::Partitioned, Some(t)) if t > 0 => (seq.saturating_mul(n) / t).min(n - 1),
            _ => seq % n,
        };
        o as usize
    }

    fn pick_fixed(&self, c: usize) -> Option<(u64, bool)> {
        self.unsent
            .iter()
            .find(|&&s| {
                let o = self.owner(s);
                o == c || !self.conns[o].alive
            })
            .map(|&s| (s, false))
    }

    fn stalled(&self, d: usize, now: Instant) -> bool {
        match self.stall_limit(d) {
            Some(limit) => now.saturating_duration_since(self.conns[d].last_progress) > limit,
            None => false,
        }
    }

    /// How long connection `d` may go without progress before it counts as
    /// stalled; `None` while it has nothing in flight.
    fn stall_limit(&self, d: usize) -> Option<Duration> {
        let k = &self.conns[d];
        let f = k.inflight.front()?;
        let expected = match k.rate {
            Some(r) if r > 0.0 => Duration::from_secs_f64(f64::from(f.len) / r),
            // No rate yet (first block, slow start): be patient.
            _ => STALL_MIN.saturating_mul(4),
        };
        Some(STALL_MIN.max(expected.saturating_mul(4)))
    }

    /// The next time after `now` at which [`Self::poll_send`] may answer
    /// differently without any other event: the earliest moment a live
    /// connection with data in flight becomes stalled (strictly after its
    /// limit). `None`: only events change the answer.
    ///
    /// A driver whose connections wait for work asks again at this time
    /// instead of polling on a clock.
    pub fn poll_timeout(&self, now: Instant) -> Option<Instant> {
        (0..self.conns.len())
            .filter(|&d| self.conns[d].alive)
            .filter_map(|d| {
                let limit = self.stall_limit(d)?;
                Some(self.conns[d].last_progress + limit + Duration::from_nanos(1))
            })
            .filter(|&t| t > now)
            .min()
    }

    /// Expected time until a new block of `len` bytes taken by `c` arrives;
    /// `None` while `c` has no rate estimate.
    fn eta(&self, c: usize, len: u32, now: Instant) -> Option<f64> {
        if self.stalled(c, now) {
            return Some(f64::INFINITY);
        }
        let k = &self.conns[c];
        let r = k.rate.filter(|r| *r > 0.0)?;
        Some((k.inflight_bytes + u64::from(len)) as f64 / r)
    }

    fn throttled(&self, c: usize, len: u32, now: Instant) -> bool {
        let Some(mine) = self.eta(c, len, now) else {
            return false;
        };
        let mut best = f64::INFINITY;
        let mut sum_rate = 0.0;
        for d in 0..self.conns.len() {
            if !self.conns[d].alive {
                continue;
            }
            if let Some(e) = self.eta(d, len, now) {
                best = best.min(e);
                if e.is_finite() {
                    sum_rate += self.conns[d].rate.unwrap_or(0.0);
                }
            }
        }
        let window_bytes = self.effective_window_bytes() as f64;
        let horizon = if sum_rate > 0.0 {
            THROTTLE_FRACTION * window_bytes / sum_rate
        } else {
            0.0
        };
        mine > horizon.max(best)
    }

    fn pick_adaptive(&self, c: usize, now: Instant) -> Option<(u64, bool)> {
        if let Some(&s) = self.unsent.first() {
            let len = self.unacked.get(&s).copied().unwrap_or(self.block);
            if !self.throttled(c, len, now) {
                return Some((s, false));
            }
        }
        // Nothing new for this connection: copy the lowest unacknowledged
        // block that a copy here would deliver sooner (the head of line
        // first; at the end of the stream, the tail held by slow paths).
        // Copies only pay when the receiver waits: at the end of the stream,
        // when the window stops new blocks, or when a path stalled. A reader
        // that is merely behind (input-limited) is no reason to copy.
        let waiting = self.all_sent() || self.window_blocked();
        for (&h, &len) in self.unacked.iter().take(COPY_SCAN) {
            if self.unsent.contains(&h) {
                continue;
            }
            let mut holder = None;
            let mut copies = 0;
            let mut mine_already = false;
            for (d, k) in self.conns.iter().enumerate() {
                if k.inflight.iter().any(|f| f.seq == h) {
                    mine_already |= d == c;
                    copies += 1;
                    holder.get_or_insert(d);
                }
            }
            let Some(d) = holder else { continue };
            if mine_already || copies >= MAX_COPIES || !(waiting || self.stalled(d, now)) {
                continue;
            }
            let (Some(remaining), Some(mine)) = (self.remaining(d, h, now), self.eta(c, len, now))
            else {
                continue;
            };
            if mine * DUP_MARGIN < remaining {
                return Some((h, true));
            }
        }
        None
    }

    /// Expected time until block `h`, in flight on `d`, arrives.
    fn remaining(&self, d: usize, h: u64, now: Instant) -> Option<f64> {
        if self.stalled(d, now) {
            return Some(f64::INFINITY);
        }
        let k = &self.conns[d];
        let r = k.rate.filter(|r| *r > 0.0)?;
        let mut ahead = 0u64;
        for f in &k.inflight {
            ahead += u64::from(f.len);
            if f.seq == h {
                break;
            }
        }
        let since = now.saturating_duration_since(k.last_progress).as_secs_f64();
        Some((ahead as f64 / r - since).max(0.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(x: u64) -> Instant {
        Instant::ZERO + Duration::from_millis(x)
    }

    fn sched(mode: Mode, n: usize, window: u64) -> BlockScheduler {
        let mut s = BlockScheduler::new(mode, Layout::Interleaved, n, 1000, window, None, ms(0));
        for c in 0..n {
            s.handle_conn_up(c, ms(0));
        }
        s
    }

    #[test]
    fn round_robin_owns_blocks_in_turn() {
        let mut s = sched(Mode::RoundRobin, 3, 10);
        while s.may_read() {
            let len = s.next_len();
            s.handle_block_read(len);
        }
        assert_eq!(s.next_seq(), READ_AHEAD_MIN);
        assert_eq!(s.poll_send(1, ms(1)).unwrap().seq, 1);
        assert_eq!(s.poll_send(1, ms(1)).unwrap().seq, 4);
        assert_eq!(s.poll_send(0, ms(1)).unwrap().seq, 0);
        // Connection 2 dies: its blocks go to whoever asks.
        s.handle_conn_down(2);
        assert_eq!(s.poll_send(0, ms(1)).unwrap().seq, 2);
    }

    #[test]
    fn requests_in_flight_count_as_read() {
        // Asking ahead: the same limits as reading one block at a time.
        let mut s = sched(Mode::Adaptive, 2, 4);
        let mut asked = 0;
        while s.may_read() {
            let len = s.next_len();
            s.handle_read_requested(len);
            asked += 1;
        }
        assert_eq!(asked, 4, "the window of 4 blocks bounds the requests");
        for _ in 0..2 {
            s.handle_block_read(1000);
        }
        assert!(!s.may_read(), "two read and two asked: still the window");
        assert_eq!(s.next_seq(), 2);
        // The end of input voids the requests still out.
        s.handle_block_read(1000);
        s.handle_eof();
        assert_eq!(s.total_blocks(), Some(3));
        assert!(!s.may_read());
    }

    #[test]
    fn window_bounds_reading() {
        let mut s = sched(Mode::Adaptive, 2, 4);
        for _ in 0..4 {
            s.handle_block_read(1000);
        }
        assert!(!s.may_read());
        let t = s.poll_send(0, ms(0)).unwrap();
        s.handle_ack(0, t.seq, 1, ms(5));
        assert!(s.may_read());
    }

    #[test]
    fn dead_connection_blocks_are_resent() {
        let mut s = sched(Mode::Adaptive, 2, 8);
        s.handle_block_read(1000);
        s.handle_block_read(1000);
        let a = s.poll_send(0, ms(0)).unwrap();
        let b = s.poll_send(1, ms(0)).unwrap();
        assert_eq!((a.seq, b.seq), (0, 1));
        s.handle_ack(1, 1, 0, ms(10));
        s.handle_conn_down(0);
        let r = s.poll_send(1, ms(11)).unwrap();
        assert_eq!(r.seq, 0);
        assert!(!r.copy);
        s.handle_eof();
        s.handle_ack(1, 0, 2, ms(20));
        assert!(s.is_complete());
        assert_eq!(s.counters(1).resent, 1);
    }

    #[test]
    fn head_of_line_copied_to_faster_connection() {
        let mut s = sched(Mode::Adaptive, 2, 400);
        // Teach rates: conn 0 slow (10 kB/s), conn 1 fast (1 MB/s).
        for _ in 0..4 {
            s.handle_block_read(1000);
        }
        let a = s.poll_send(0, ms(0)).unwrap();
        let b = s.poll_send(1, ms(0)).unwrap();
        s.handle_ack(1, b.seq, 0, ms(1));
        s.handle_ack(0, a.seq, 2, ms(100));
        assert!(s.counters(0).rate < 20_000.0 && s.counters(1).rate > 500_000.0);
        // Slow connection takes the next block (it is the only one asking).
        let slow = s.poll_send(0, ms(100)).unwrap();
        assert_eq!(slow.seq, 2);
        let fast = s.poll_send(1, ms(100)).unwrap();
        assert_eq!(fast.seq, 3);
        s.handle_ack(1, 3, 2, ms(101));
        // Not at the end yet and the window is open: no copy.
        assert!(s.poll_send(1, ms(102)).is_none());
        // End of stream: the fast one copies block 2.
        s.handle_eof();
        let copy = s.poll_send(1, ms(102)).unwrap();
        assert_eq!((copy.seq, copy.copy), (2, true));
        // No third copy.
        assert!(s.poll_send(1, ms(103)).is_none());
        s.handle_ack(1, 2, 4, ms(104));
        assert!(!s.is_unacked(2));
    }

    #[test]
    fn slow_connection_is_throttled() {
        let mut s = sched(Mode::Adaptive, 2, 4);
        for _ in 0..4 {
            s.handle_block_read(1000);
        }
        let a = s.poll_send(0, ms(0)).unwrap();
        let b = s.poll_send(1, ms(0)).unwrap();
        s.handle_ack(1, b.seq, 0, ms(1));
        s.handle_ack(0, a.seq, 2, ms(1000));
        // Window 4 kB, aggregate ~1 MB/s: horizon 2 ms; slow ETA 100 ms.
        assert!(s.poll_send(0, ms(1000)).is_none());
        assert_eq!(s.poll_send(1, ms(1000)).unwrap().seq, 2);
    }

    #[test]
    fn poll_timeout_is_when_a_connection_stalls() {
        let mut s = sched(Mode::Adaptive, 2, 8);
        assert_eq!(s.poll_timeout(ms(0)), None);
        s.handle_block_read(1000);
        let t = s.poll_send(0, ms(10)).unwrap();
        assert_eq!(t.seq, 0);
        // No rate yet: the expected block time is taken as 4 × STALL_MIN,
        // and a connection stalls after four expected block times.
        let due = s.poll_timeout(ms(10)).unwrap();
        assert_eq!(
            due,
            ms(10) + STALL_MIN.saturating_mul(16) + Duration::from_nanos(1)
        );
        assert!(!s.stalled(0, due - Duration::from_nanos(1)));
        assert!(s.stalled(0, due));
        // Once stalled, time alone changes nothing more.
        assert_eq!(s.poll_timeout(due), None);
        s.handle_ack(0, 0, 1, ms(20));
        assert_eq!(s.poll_timeout(ms(20)), None);
    }

    /// Connection 0: 1000 bytes acknowledged after 100 ms; connection 1:
    /// after 10 ms.
    fn measured(s: &mut BlockScheduler) {
        s.handle_block_read(1000);
        s.handle_block_read(1000);
        let a = s.poll_send(0, ms(0)).unwrap();
        let b = s.poll_send(1, ms(0)).unwrap();
        s.handle_ack(1, b.seq, 0, ms(10));
        s.handle_ack(0, a.seq, 2, ms(100));
    }

    #[test]
    fn auto_window_follows_rates_and_latency() {
        let mut s = sched(Mode::Adaptive, 2, 400);
        s.set_auto_window(true);
        // Nothing measured yet: the granted window.
        assert_eq!(s.effective_window_bytes(), 400_000);
        measured(&mut s);
        // 2 × (10 kB/s + 100 kB/s) × (0.1 s + 0.05 s) ≈ 33 kB.
        let w = s.effective_window_bytes();
        assert!((32_000..=34_000).contains(&w), "{w}");
        assert_eq!(s.window_peak_bytes(), w);
        // The reader stops at the automatic window, not the granted one.
        let mut read = 0;
        while s.may_read() {
            s.handle_block_read(1000);
            read += 1;
            assert!(read <= 40, "read past the automatic window");
        }
        // The granted window stays the upper bound.
        s.set_window(400, 20_000);
        assert_eq!(s.effective_window_bytes(), 20_000);
    }

    #[test]
    fn auto_window_has_a_floor_and_is_off_by_default() {
        let mut s = sched(Mode::Adaptive, 2, 400);
        measured(&mut s);
        assert_eq!(s.effective_window_bytes(), 400_000);
        assert_eq!(s.window_peak_bytes(), 0);
        // Slow paths (2 × 1 kB/s, 1 s): 2 × 2 kB/s × 1.05 s = 4.2 kB is
        // below the floor of four blocks per connection.
        let mut f = sched(Mode::Adaptive, 2, 400);
        f.set_auto_window(true);
        f.handle_block_read(1000);
        f.handle_block_read(1000);
        let a = f.poll_send(0, ms(0)).unwrap();
        let b = f.poll_send(1, ms(0)).unwrap();
        f.handle_ack(0, a.seq, 0, ms(1000));
        f.handle_ack(1, b.seq, 2, ms(1000));
        assert_eq!(f.effective_window_bytes(), 8_000);
        // The fixed modes always use the granted window.
        let mut r = sched(Mode::RoundRobin, 2, 400);
        r.set_auto_window(true);
        measured(&mut r);
        assert_eq!(r.effective_window_bytes(), 400_000);
    }

    #[test]
    fn adaptive_blocks_start_small_and_follow_the_slowest_rate_up_to_the_cap() {
        let cap = 4 << 20;
        let mut s =
            BlockScheduler::new(Mode::Adaptive, Layout::Interleaved, 2, cap, 64, None, ms(0));
        s.handle_conn_up(0, ms(0));
        s.handle_conn_up(1, ms(0));
        // No rate yet: the initial length, not the cap.
        assert_eq!(s.next_len(), INITIAL_ADAPTIVE_BLOCK);
        s.handle_block_read(INITIAL_ADAPTIVE_BLOCK);
        s.handle_block_read(INITIAL_ADAPTIVE_BLOCK);
        let a = s.poll_send(0, ms(0)).unwrap();
        let b = s.poll_send(1, ms(0)).unwrap();
        // Connection 0: 256 KiB in 1 ms (≈ 262 MB/s); connection 1: in
        // 100 ms (≈ 2.6 MB/s: 50 ms of it ≈ 131 kB).
        s.handle_ack(0, a.seq, 0, ms(1));
        s.handle_ack(1, b.seq, 2, ms(100));
        let slow = s.next_len();
        assert!((130_000..=133_000).contains(&slow), "{slow}");
        // Only the fast path left: 50 ms of it is more than the cap.
        s.handle_conn_down(1);
        assert_eq!(s.next_len(), cap);
    }

    #[test]
    fn notsent_lowat_follows_the_rate_in_adaptive_mode() {
        let mut s = sched(Mode::Adaptive, 2, 400);
        assert_eq!(s.notsent_lowat(0, 256 << 10), 256 << 10);
        // Unmeasured: a first block at most, whatever the bound.
        assert_eq!(s.notsent_lowat(0, 2 << 20), INITIAL_ADAPTIVE_BLOCK);
        s.handle_block_read(1000);
        s.handle_block_read(1000);
        let a = s.poll_send(0, ms(0)).unwrap();
        let b = s.poll_send(1, ms(0)).unwrap();
        // Connection 0: 1000 bytes in 1 ms (1 MB/s: 50 ms = 50 kB);
        // connection 1: 1000 bytes in 100 ms (10 kB/s: the floor).
        s.handle_ack(0, a.seq, 0, ms(1));
        s.handle_ack(1, b.seq, 2, ms(100));
        let fast = s.notsent_lowat(0, 256 << 10);
        assert!((49_000..=51_000).contains(&fast), "{fast}");
        assert_eq!(s.notsent_lowat(1, 256 << 10), MIN_LOWAT);
        // Never above the driver's bound.
        assert_eq!(s.notsent_lowat(0, 20_000), 20_000);
        // The fixed modes keep the bound.
        let mut r = sched(Mode::RoundRobin, 2, 400);
        measured(&mut r);
        assert_eq!(r.notsent_lowat(1, 256 << 10), 256 << 10);
    }

    #[test]
    fn partitioned_layout_owns_ranges() {
        let mut s = BlockScheduler::new(
            Mode::RoundRobin,
            Layout::Partitioned,
            2,
            1000,
            8,
            Some(8),
            ms(0),
        );
        s.handle_conn_up(0, ms(0));
        s.handle_conn_up(1, ms(0));
        for _ in 0..8 {
            s.handle_block_read(1000);
        }
        assert_eq!(s.poll_send(1, ms(0)).unwrap().seq, 4);
        assert_eq!(s.poll_send(0, ms(0)).unwrap().seq, 0);
    }
}
