//! One simulated link: capacity, propagation delay, a drop-tail queue and
//! seeded impairments.
//!
//! Main types: [`LinkConfig`] (what a scenario says), [`LinkStats`] (what
//! happened), and the crate-internal `Link` state machine the simulator
//! drives with `Link::enqueue` and `Link::complete`.
//!
//! # Model
//! - **Queue**: drop-tail, bounded by `queue_bytes` over the packets
//!   *waiting* (the packet in service is not counted). A packet that does
//!   not fit is dropped on arrival.
//! - **Serialization**: one packet at a time at the momentary capacity (see
//!   [`crate::capacity`] for rate changes and zero rates).
//! - **Impairments**, decided when a packet leaves the link, in this order
//!   and each from the link's own `ChaCha8Rng`: random *loss* with
//!   probability `loss` (the packet used capacity, then vanished on the
//!   wire); *duplication* with probability `duplicate` (a second copy arrives
//!   at the same instant, right after the first); *reordering* with
//!   probability `reorder`: the packet is held an extra `reorder_delay` on
//!   top of the propagation delay, so packets sent after it within that time
//!   overtake it (netem's "delay some packets" model).
//! - **Propagation**: every copy arrives `delay` after it finished serializing.

use crate::capacity::Capacity;
use crate::stats::BinSeries;
use braid_core::{Duration, Instant};
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use std::collections::VecDeque;

/// Most packets a link queue may hold regardless of bytes (guards against
/// floods of tiny datagrams).
pub const MAX_QUEUE_PACKETS: usize = 1 << 20;

/// A link's configuration.
#[derive(Clone, Debug, PartialEq)]
pub struct LinkConfig {
    /// Name (unique within a scenario).
    pub name: String,
    /// Capacity over time.
    pub capacity: Capacity,
    /// One-way propagation delay.
    pub delay: Duration,
    /// Bound of the waiting queue, in bytes.
    pub queue_bytes: u64,
    /// Probability that a packet is lost after serialization.
    pub loss: f64,
    /// Probability that a packet is delivered twice.
    pub duplicate: f64,
    /// Probability that a packet is held back by `reorder_delay`.
    pub reorder: f64,
    /// Extra delay of a reordered packet.
    pub reorder_delay: Duration,
    /// Intervals `[from, to)` during which the link is cut: every packet
    /// that finishes serialization then is lost (a path failure).
    pub outages: Vec<(Instant, Instant)>,
}

impl LinkConfig {
    /// A link with no impairments and a queue of 100 ms at its mean rate
    /// (at least 15,000 bytes).
    pub fn new(name: impl Into<String>, capacity: Capacity, delay: Duration) -> Self {
        let queue_bytes = default_queue_bytes(&capacity);
        LinkConfig {
            name: name.into(),
            capacity,
            delay,
            queue_bytes,
            loss: 0.0,
            duplicate: 0.0,
            reorder: 0.0,
            reorder_delay: Duration::from_millis(1),
            outages: Vec::new(),
        }
    }
}

/// 100 ms at the mean rate, at least 15,000 bytes (ten full-size packets).
pub fn default_queue_bytes(capacity: &Capacity) -> u64 {
    capacity
        .mean()
        .bytes_in(Duration::from_millis(100))
        .max(15_000)
}

/// Counters of one link.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct LinkStats {
    /// Packets offered to the link.
    pub arrived_packets: u64,
    /// Packets dropped because the queue was full.
    pub queue_drops: u64,
    /// Packets lost at random after serialization.
    pub random_losses: u64,
    /// Extra copies created.
    pub duplicates: u64,
    /// Packets held back for reordering.
    pub reordered: u64,
    /// Packets fully serialized.
    pub sent_packets: u64,
    /// Bytes fully serialized.
    pub sent_bytes: u64,
    /// Largest waiting queue seen, in bytes.
    pub max_queue_bytes: u64,
}

/// What happened to a packet offered to [`Link::enqueue`].
#[derive(Debug)]
pub(crate) enum Enqueued<P> {
    /// The link was idle: service started and finishes at this instant
    /// (`None`: never, capacity is zero forever).
    Started(Option<Instant>),
    /// Waiting in the queue.
    Queued,
    /// Dropped (queue full); the packet is handed back.
    Dropped(P),
}

/// Where a served packet goes.
#[derive(Debug)]
pub(crate) struct Departure<P> {
    /// The packet that finished serializing.
    pub packet: P,
    /// Lost on the wire (then `arrive_at` and `duplicate` mean nothing).
    pub lost: bool,
    /// When it (and a duplicate) arrive at the far end.
    pub arrive_at: Instant,
    /// Whether a duplicate arrives too.
    pub duplicate: bool,
    /// The next packet's service finish time, if one started.
    pub next_finish: Option<Option<Instant>>,
}

/// The link state machine.
#[derive(Debug)]
pub(crate) struct Link<P> {
    pub cfg: LinkConfig,
    rng: ChaCha8Rng,
    queue: VecDeque<(u32, P)>,
    queued_bytes: u64,
    in_service: Option<(u32, P)>,
    pub stats: LinkStats,
    /// Bytes fully serialized per report bin.
    pub sent_series: BinSeries,
    /// Drops (queue + random) per report bin.
    pub drop_series: BinSeries,
    /// Largest waiting queue (bytes) per report bin.
    pub queue_series: BinSeries,
}

impl<P> Link<P> {
    pub fn new(cfg: LinkConfig, rng: ChaCha8Rng, bin: Duration) -> Self {
        Link {
            cfg,
            rng,
            queue: VecDeque::new(),
            queued_bytes: 0,
            in_service: None,
            stats: LinkStats::default(),
            sent_series: BinSeries::new(bin),
            drop_series: BinSeries::new(bin),
            queue_series: BinSeries::new(bin),
        }
    }

    /// Offers a packet of `size` bytes at `now`.
    pub fn enqueue(&mut self, now: Instant, size: u32, packet: P) -> Enqueued<P> {
        self.stats.arrived_packets += 1;
        if self.in_service.is_none() {
            self.in_service = Some((size, packet));
            return Enqueued::Started(self.cfg.capacity.finish_time(now, size as u64));
        }
        if self.queued_bytes + size as u64 > self.cfg.queue_bytes
            || self.queue.len() >= MAX_QUEUE_PACKETS
        {
            self.stats.queue_drops += 1;
            self.drop_series.add(now, 1);
            return Enqueued::Dropped(packet);
        }
        self.queued_bytes += size as u64;
        self.queue.push_back((size, packet));
        self.stats.max_queue_bytes = self.stats.max_queue_bytes.max(self.queued_bytes);
        self.queue_series.max(now, self.queued_bytes);
        Enqueued::Queued
    }

    /// The packet in service finished at `now`: applies impairments and
    /// starts the next one. `None` if nothing was in service.
    pub fn complete(&mut self, now: Instant) -> Option<Departure<P>> {
        let (size, packet) = self.in_service.take()?;
        self.stats.sent_packets += 1;
        self.stats.sent_bytes += size as u64;
        self.sent_series.add(now, size as u64);

        let next_finish = self.queue.pop_front().map(|(s, p)| {
            self.queued_bytes -= s as u64;
            self.in_service = Some((s, p));
            self.cfg.capacity.finish_time(now, s as u64)
        });

        let cut = self.cfg.outages.iter().any(|&(a, b)| now >= a && now < b);
        let lost = cut || (self.cfg.loss > 0.0 && self.rng.random::<f64>() < self.cfg.loss);
        if lost {
            self.stats.random_losses += 1;
            self.drop_series.add(now, 1);
            return Some(Departure {
                packet,
                lost: true,
                arrive_at: now,
                duplicate: false,
                next_finish,
            });
        }
        let duplicate = self.cfg.duplicate > 0.0 && self.rng.random::<f64>() < self.cfg.duplicate;
        let reorder = self.cfg.reorder > 0.0 && self.rng.random::<f64>() < self.cfg.reorder;
        if duplicate {
            self.stats.duplicates += 1;
        }
        let mut arrive_at = now + self.cfg.delay;
        if reorder {
            self.stats.reordered += 1;
            arrive_at += self.cfg.reorder_delay;
        }
        Some(Departure {
            packet,
            lost: false,
            arrive_at,
            duplicate,
            next_finish,
        })
    }

    /// Bytes waiting (not counting the packet in service).
    pub fn queued_bytes(&self) -> u64 {
        self.queued_bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use braid_core::Bandwidth;
    use rand::SeedableRng;

    fn link(queue: u64) -> Link<u32> {
        let mut cfg = LinkConfig::new(
            "l",
            Capacity::Constant(Bandwidth::from_mbps(12)),
            Duration::from_millis(10),
        );
        cfg.queue_bytes = queue;
        Link::new(
            cfg,
            ChaCha8Rng::seed_from_u64(1),
            Duration::from_millis(100),
        )
    }

    #[test]
    fn serves_in_order_and_drops_tail() {
        let mut l = link(3000);
        let t0 = Instant::ZERO;
        assert!(matches!(
            l.enqueue(t0, 1500, 1),
            Enqueued::Started(Some(t)) if t == Instant::from_nanos(1_000_000)
        ));
        assert!(matches!(l.enqueue(t0, 1500, 2), Enqueued::Queued));
        assert!(matches!(l.enqueue(t0, 1500, 3), Enqueued::Queued));
        assert!(matches!(l.enqueue(t0, 1500, 4), Enqueued::Dropped(4)));
        assert_eq!(l.queued_bytes(), 3000);
        let d = l.complete(Instant::from_nanos(1_000_000)).unwrap();
        assert_eq!(d.packet, 1);
        assert!(!d.lost);
        assert_eq!(d.arrive_at, Instant::from_nanos(11_000_000));
        assert_eq!(d.next_finish, Some(Some(Instant::from_nanos(2_000_000))));
        assert_eq!(l.stats.queue_drops, 1);
        assert_eq!(l.stats.max_queue_bytes, 3000);
    }
}
