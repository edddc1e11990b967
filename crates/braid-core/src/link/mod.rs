//! One link model: capacity (constant or trace-driven), propagation delay, a
//! drop-tail queue and seeded impairments.
//!
//! The same model has two drivers: braid-sim moves simulated packets through
//! it on virtual time, and `braid emulate` moves real IP packets between two
//! TUN devices through it on the wall clock. A scenario therefore means the
//! same thing in the simulator and on a real kernel.
//!
//! Main types: [`LinkConfig`] (what a scenario says), [`LinkStats`] (what
//! happened), [`Capacity`] (rate over time, in [`capacity`]) and the [`Link`]
//! state machine.
//!
//! # Driving a [`Link`]
//! Offer each packet with [`Link::enqueue`] at the time it arrives. When it
//! answers [`Enqueued::Started`] with a finish time, call [`Link::complete`]
//! at that time; each [`Departure`] says whether the packet was lost, when
//! it arrives at the far end, and the finish time of the next packet whose
//! service started (call `complete` again then). The link never reads a
//! clock: time is what the driver passes in, so a late driver still gets
//! exact departure times.
//!
//! # Model
//! - **Queue**: drop-tail, bounded by `queue_bytes` over the packets
//!   *waiting* (the packet in service is not counted). A packet that does
//!   not fit is dropped on arrival.
//! - **Serialization**: one packet at a time at the momentary capacity (see
//!   [`capacity`] for rate changes and zero rates).
//! - **Impairments**, decided when a packet leaves the link, in this order
//!   and each from the link's own `ChaCha8Rng`: random *loss* with
//!   probability `loss` (the packet used capacity, then vanished on the
//!   wire); *duplication* with probability `duplicate` (a second copy arrives
//!   at the same instant, right after the first); *reordering* with
//!   probability `reorder`: the packet is held an extra `reorder_delay` on
//!   top of the propagation delay, so packets sent after it within that time
//!   overtake it (netem's "delay some packets" model).
//! - **Propagation**: every copy arrives `delay` after it finished serializing.

pub mod capacity;

pub use capacity::{Capacity, CapacityError, RateSchedule, SyntheticSpec};

use crate::{Duration, Instant};
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
pub enum Enqueued<P> {
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
pub struct Departure<P> {
    /// The packet that finished serializing.
    pub packet: P,
    /// Its size in bytes, as offered.
    pub size: u32,
    /// Lost on the wire (then `arrive_at` and `duplicate` mean nothing).
    pub lost: bool,
    /// When it (and a duplicate) arrive at the far end.
    pub arrive_at: Instant,
    /// Whether a duplicate arrives too.
    pub duplicate: bool,
    /// The next packet's service finish time, if one started.
    pub next_finish: Option<Option<Instant>>,
}

/// The link state machine: one direction of one link, carrying packets of
/// any type `P` (see the module docs for how to drive it).
///
/// Invariant: at most [`MAX_QUEUE_PACKETS`] packets and `cfg.queue_bytes`
/// bytes wait, plus the one in service; nothing else is held.
#[derive(Debug)]
pub struct Link<P> {
    cfg: LinkConfig,
    rng: ChaCha8Rng,
    queue: VecDeque<(u32, P)>,
    queued_bytes: u64,
    in_service: Option<(u32, P)>,
    stats: LinkStats,
}

impl<P> Link<P> {
    /// A link with `cfg`, drawing its impairments from `rng`.
    pub fn new(cfg: LinkConfig, rng: ChaCha8Rng) -> Self {
        Link {
            cfg,
            rng,
            queue: VecDeque::new(),
            queued_bytes: 0,
            in_service: None,
            stats: LinkStats::default(),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &LinkConfig {
        &self.cfg
    }

    /// Changes the configuration from now on (a new rate, delay, loss or
    /// queue bound). The packet in service keeps its finish time; packets
    /// already waiting stay even if the new bound is smaller.
    pub fn set_config(&mut self, cfg: LinkConfig) {
        self.cfg = cfg;
    }

    /// The counters so far.
    pub fn stats(&self) -> &LinkStats {
        &self.stats
    }

    /// Whether a packet is in service.
    pub fn busy(&self) -> bool {
        self.in_service.is_some()
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
            return Enqueued::Dropped(packet);
        }
        self.queued_bytes += size as u64;
        self.queue.push_back((size, packet));
        self.stats.max_queue_bytes = self.stats.max_queue_bytes.max(self.queued_bytes);
        Enqueued::Queued
    }

    /// The packet in service finished at `now`: applies impairments and
    /// starts the next one. `None` if nothing was in service.
    pub fn complete(&mut self, now: Instant) -> Option<Departure<P>> {
        let (size, packet) = self.in_service.take()?;
        self.stats.sent_packets += 1;
        self.stats.sent_bytes += size as u64;

        let next_finish = self.queue.pop_front().map(|(s, p)| {
            self.queued_bytes -= s as u64;
            self.in_service = Some((s, p));
            self.cfg.capacity.finish_time(now, s as u64)
        });

        let cut = self.cfg.outages.iter().any(|&(a, b)| now >= a && now < b);
        let lost = cut || (self.cfg.loss > 0.0 && self.rng.random::<f64>() < self.cfg.loss);
        if lost {
            self.stats.random_losses += 1;
            return Some(Departure {
                packet,
                size,
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
            size,
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
    use crate::Bandwidth;
    use rand::SeedableRng;

    fn link(queue: u64) -> Link<u32> {
        let mut cfg = LinkConfig::new(
            "l",
            Capacity::Constant(Bandwidth::from_mbps(12)),
            Duration::from_millis(10),
        );
        cfg.queue_bytes = queue;
        Link::new(cfg, ChaCha8Rng::seed_from_u64(1))
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
        assert_eq!(l.stats().queue_drops, 1);
        assert_eq!(l.stats().max_queue_bytes, 3000);
    }

    /// Drives `n` back-to-back packets through a fresh link; returns which
    /// were lost.
    fn losses(seed: u64, loss: f64, n: usize) -> Vec<bool> {
        let mut cfg = LinkConfig::new(
            "l",
            Capacity::Constant(Bandwidth::from_mbps(100)),
            Duration::ZERO,
        );
        cfg.loss = loss;
        let mut l = Link::new(cfg, ChaCha8Rng::seed_from_u64(seed));
        let mut out = Vec::with_capacity(n);
        let mut now = Instant::ZERO;
        for i in 0..n {
            let Enqueued::Started(Some(t)) = l.enqueue(now, 1500, i) else {
                panic!("an idle link starts service at once");
            };
            now = t;
            out.push(l.complete(now).expect("in service").lost);
        }
        out
    }

    #[test]
    fn seeded_loss_repeats_and_matches_its_rate() {
        let a = losses(7, 0.01, 100_000);
        assert_eq!(a, losses(7, 0.01, 100_000), "same seed, same losses");
        assert_ne!(a, losses(8, 0.01, 100_000), "another seed, other losses");
        let lost = a.iter().filter(|&&x| x).count() as f64;
        // Binomial(100000, 0.01): mean 1000, sd 31.5; 4 sd either side.
        assert!((874.0..=1126.0).contains(&lost), "{lost} losses");
    }

    #[test]
    fn a_new_config_applies_to_the_next_packet() {
        let mut l = link(100_000);
        let Enqueued::Started(Some(t1)) = l.enqueue(Instant::ZERO, 1500, 1) else {
            panic!("idle link");
        };
        assert_eq!(t1, Instant::from_nanos(1_000_000)); // 1500 B at 12 Mbit/s
        let mut cfg = l.config().clone();
        cfg.capacity = Capacity::Constant(Bandwidth::from_mbps(24));
        cfg.delay = Duration::from_millis(50);
        l.set_config(cfg);
        assert!(matches!(
            l.enqueue(Instant::ZERO, 1500, 2),
            Enqueued::Queued
        ));
        let d1 = l.complete(t1).expect("in service");
        // The packet in service keeps its finish time but leaves with the
        // delay in force when it leaves; the next one is served at 24 Mbit/s.
        assert_eq!(d1.arrive_at, t1 + Duration::from_millis(50));
        assert_eq!(d1.next_finish, Some(Some(Instant::from_nanos(1_500_000))));
        assert_eq!(d1.size, 1500);
        assert!(l.busy());
    }
}
