//! Bulk-transfer nodes: seed 003's multipath pipe on simulated links.
//!
//! [`BulkSender`] runs [`braid_core::bulk::BlockScheduler`] over N simulated
//! connections; [`BulkReceiver`] runs the [`braid_core::bulk::Reorder`]
//! window. Both are the same sans-IO code the `braid send` / `braid recv`
//! runtime drives, here over links with any rate and delay on virtual time.
//!
//! The connection model is a window-limited byte stream, like a TCP
//! connection in steady state: connection `c` sends its blocks as
//! [`MSS`]-byte packets on its forward route while at most
//! `window_bytes[c]` bytes are unacknowledged; the receiver acknowledges
//! every packet (cumulative bytes, on the reverse route) and, with the last
//! packet of a block, the block itself and how many blocks it has written
//! (the pipe's `Ack { seq, written }`). Like the pipe's
//! `TCP_NOTSENT_LOWAT`, a connection asks the scheduler for its next block
//! only while fewer than [`BulkConfig::lowat`] of its bytes are still
//! unsent. There is no loss (the links' queues hold every window), so no
//! retransmission is modelled; the output is written as soon as blocks are
//! in order.
//!
//! Invariants: a connection's packets never exceed its window; the sender
//! holds at most the receiver's window of blocks (the scheduler bounds
//! reading); the receiver writes each block once, in order.

use crate::node::{Datagram, Node, RouteId, Transmit};
use braid_core::bulk::{BlockLen, BlockScheduler, Layout, Mode, Reorder, Verdict};
use braid_core::Instant;
use std::collections::VecDeque;

/// Payload bytes per data packet.
pub const MSS: u32 = 1448;
/// Bytes on the wire per data packet beyond its payload (IP + TCP headers).
pub const HEADER_BYTES: u32 = 52;
/// Bytes on the wire of an acknowledgement.
pub const ACK_BYTES: u32 = 64;
/// Length of the encoded data-packet header carried in a datagram.
const DATA_HEADER_LEN: usize = 1 + 8 + 4 + 4 + 4;
/// Length of the encoded acknowledgement.
const ACK_LEN: usize = 1 + 8 + 8 + 8;

/// Settings of a simulated bulk transfer.
#[derive(Debug, Clone)]
pub struct BulkConfig {
    /// Scheduling mode.
    pub mode: Mode,
    /// Largest block, bytes.
    pub block_size: u32,
    /// Bytes to send.
    pub total_bytes: u64,
    /// The receiver's window in blocks.
    pub window_blocks: u64,
    /// The receiver's window in bytes.
    pub window_bytes: u64,
    /// Per connection: the transport window (bytes unacknowledged at once).
    pub conn_windows: Vec<u64>,
    /// A connection asks for a new block while fewer bytes than this are
    /// unsent (the pipe uses one block).
    pub lowat: u64,
}

/// A block being sent on one connection.
#[derive(Debug, Clone, Copy)]
struct Outgoing {
    seq: u64,
    len: u32,
    offset: u32,
}

#[derive(Debug, Clone)]
struct SendConn {
    route: RouteId,
    window: u64,
    sent: u64,
    acked: u64,
    unsent: VecDeque<Outgoing>,
    unsent_bytes: u64,
}

/// The sending side; see the module docs.
#[derive(Debug)]
pub struct BulkSender {
    cfg: BulkConfig,
    sched: BlockScheduler,
    conns: Vec<SendConn>,
    read_bytes: u64,
    now: Instant,
    /// When the last block was acknowledged (the transfer's end).
    pub completed_at: Option<Instant>,
    rotate: usize,
}

impl BulkSender {
    /// A sender over `routes` (one per connection, towards the receiver).
    pub fn new(cfg: BulkConfig, routes: Vec<RouteId>) -> Self {
        let n = routes.len();
        let mut sched = BlockScheduler::new(
            cfg.mode,
            Layout::Interleaved,
            n,
            cfg.block_size,
            cfg.window_blocks,
            None,
            Instant::ZERO,
        );
        sched.set_window(cfg.window_blocks, cfg.window_bytes);
        for c in 0..n {
            sched.handle_conn_up(c, Instant::ZERO);
        }
        let conns = routes
            .into_iter()
            .enumerate()
            .map(|(c, route)| SendConn {
                route,
                window: cfg.conn_windows.get(c).copied().unwrap_or(64 << 10),
                sent: 0,
                acked: 0,
                unsent: VecDeque::new(),
                unsent_bytes: 0,
            })
            .collect();
        BulkSender {
            cfg,
            sched,
            conns,
            read_bytes: 0,
            now: Instant::ZERO,
            completed_at: None,
            rotate: 0,
        }
    }

    /// The scheduler (for its counters).
    pub fn scheduler(&self) -> &BlockScheduler {
        &self.sched
    }

    /// Reads as far as the scheduler allows (the input is `total_bytes` of
    /// nothing in particular).
    fn read(&mut self) {
        while self.sched.may_read() {
            let left = self.cfg.total_bytes - self.read_bytes;
            if left == 0 {
                self.sched.handle_eof();
                return;
            }
            let len = u64::from(self.sched.next_len()).min(left);
            self.read_bytes += len;
            // `len` ≤ next_len, a u32.
            self.sched.handle_block_read(len as u32);
        }
    }

    /// Lets every connection whose unsent bytes are below the low-water
    /// mark take blocks.
    fn fill(&mut self, now: Instant) {
        loop {
            self.read();
            let mut took = false;
            for c in 0..self.conns.len() {
                if self.conns[c].unsent_bytes >= self.cfg.lowat {
                    continue;
                }
                if let Some(t) = self.sched.poll_send(c, now) {
                    let k = &mut self.conns[c];
                    k.unsent.push_back(Outgoing {
                        seq: t.seq,
                        len: t.len,
                        offset: 0,
                    });
                    k.unsent_bytes += u64::from(t.len);
                    took = true;
                }
            }
            if !took {
                return;
            }
        }
    }
}

impl Node for BulkSender {
    fn handle_datagram(&mut self, now: Instant, _route: RouteId, d: Datagram) {
        self.now = now;
        let b = d.data();
        if b.len() < ACK_LEN {
            return;
        }
        let c = usize::from(b[0]);
        let acked = u64::from_le_bytes(b[1..9].try_into().unwrap_or([0; 8]));
        let seq = u64::from_le_bytes(b[9..17].try_into().unwrap_or([0; 8]));
        let written = u64::from_le_bytes(b[17..25].try_into().unwrap_or([0; 8]));
        if let Some(k) = self.conns.get_mut(c) {
            k.acked = k.acked.max(acked);
        }
        if seq != u64::MAX {
            self.sched.handle_ack(c, seq, written, now);
            if self.sched.is_complete() && self.completed_at.is_none() {
                self.completed_at = Some(now);
            }
        }
    }

    fn handle_timeout(&mut self, now: Instant) {
        self.now = now;
    }

    fn poll_transmit(&mut self, now: Instant) -> Option<Transmit> {
        self.now = now;
        self.fill(now);
        let n = self.conns.len();
        for i in 0..n {
            let c = (self.rotate + i) % n;
            let k = &mut self.conns[c];
            let Some(o) = k.unsent.front_mut() else {
                continue;
            };
            let chunk = MSS.min(o.len - o.offset);
            if k.sent - k.acked + u64::from(chunk) > k.window {
                continue;
            }
            let mut h = Vec::with_capacity(DATA_HEADER_LEN);
            h.push(c as u8);
            h.extend_from_slice(&o.seq.to_le_bytes());
            h.extend_from_slice(&o.len.to_le_bytes());
            h.extend_from_slice(&o.offset.to_le_bytes());
            h.extend_from_slice(&chunk.to_le_bytes());
            o.offset += chunk;
            if o.offset == o.len {
                k.unsent.pop_front();
            }
            k.unsent_bytes -= u64::from(chunk);
            k.sent += u64::from(chunk);
            self.rotate = (c + 1) % n;
            return Some(Transmit {
                route: k.route,
                datagram: Datagram::sized(chunk + HEADER_BYTES, h),
            });
        }
        None
    }

    fn poll_timeout(&self) -> Option<Instant> {
        // A path that stalls may make a copy worth sending.
        self.sched.poll_timeout(self.now)
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        let c = (0..self.conns.len()).map(|c| self.sched.counters(c));
        let copies = c.clone().map(|k| k.copies).sum();
        let sent = c.map(|k| k.sent_bytes).sum();
        vec![("sent_bytes", sent), ("copies", copies)]
    }
}

/// The receiving side; see the module docs.
#[derive(Debug)]
pub struct BulkReceiver {
    reorder: Reorder<BlockLen>,
    back: Vec<RouteId>,
    received: Vec<u64>,
    acks: VecDeque<Transmit>,
    /// Block numbers in the order they were written.
    pub written_log: Vec<u64>,
    /// Bytes written.
    pub written_bytes: u64,
    /// When the last byte was written.
    pub last_write: Option<Instant>,
    /// Blocks refused as beyond the window.
    pub violations: u64,
}

impl BulkReceiver {
    /// A receiver with the given window that acknowledges connection `c`
    /// on `back[c]`.
    pub fn new(window_blocks: u64, window_bytes: u64, back: Vec<RouteId>) -> Self {
        BulkReceiver {
            reorder: Reorder::new(window_blocks, window_bytes),
            received: vec![0; back.len()],
            back,
            acks: VecDeque::new(),
            written_log: Vec::new(),
            written_bytes: 0,
            last_write: None,
            violations: 0,
        }
    }

    /// (peak blocks, peak bytes, duplicates) of the reorder window.
    pub fn peaks(&self) -> (u64, u64, u64) {
        self.reorder.peaks()
    }
}

impl Node for BulkReceiver {
    fn handle_datagram(&mut self, now: Instant, _route: RouteId, d: Datagram) {
        let b = d.data();
        if b.len() < DATA_HEADER_LEN {
            return;
        }
        let c = usize::from(b[0]);
        let seq = u64::from_le_bytes(b[1..9].try_into().unwrap_or([0; 8]));
        let len = u32::from_le_bytes(b[9..13].try_into().unwrap_or([0; 4]));
        let offset = u32::from_le_bytes(b[13..17].try_into().unwrap_or([0; 4]));
        let chunk = u32::from_le_bytes(b[17..21].try_into().unwrap_or([0; 4]));
        let Some(route) = self.back.get(c).copied() else {
            return;
        };
        self.received[c] += u64::from(chunk);
        let mut block_seq = u64::MAX;
        if offset + chunk == len {
            // The last packet of the block: it is complete (a connection's
            // packets arrive in order).
            match self.reorder.verdict(seq, u64::from(len)) {
                Verdict::Take => {
                    self.reorder.insert(seq, BlockLen(len));
                }
                Verdict::Duplicate => self.reorder.count_duplicate(),
                Verdict::Violation => self.violations += 1,
            }
            let ready = self.reorder.pop_ready();
            if !ready.is_empty() {
                let bytes: u64 = ready.iter().map(|(_, l)| u64::from(l.0)).sum();
                self.written_log.extend(ready.iter().map(|(s, _)| *s));
                self.reorder.mark_written(ready.len() as u64, bytes);
                self.written_bytes += bytes;
                self.last_write = Some(now);
            }
            block_seq = seq;
        }
        let mut a = Vec::with_capacity(ACK_LEN);
        a.push(c as u8);
        a.extend_from_slice(&self.received[c].to_le_bytes());
        a.extend_from_slice(&block_seq.to_le_bytes());
        a.extend_from_slice(&self.reorder.written().to_le_bytes());
        self.acks.push_back(Transmit {
            route,
            datagram: Datagram::sized(ACK_BYTES, a),
        });
    }

    fn handle_timeout(&mut self, _now: Instant) {}

    fn poll_transmit(&mut self, _now: Instant) -> Option<Transmit> {
        self.acks.pop_front()
    }

    fn poll_timeout(&self) -> Option<Instant> {
        None
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        let (_, _, dups) = self.reorder.peaks();
        vec![
            ("written_bytes", self.written_bytes),
            ("duplicates", dups),
            ("violations", self.violations),
        ]
    }
}
