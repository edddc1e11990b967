//! The simulator's driver of braid-core's link model.
//!
//! The model itself (capacity, drop-tail queue, impairments) lives in
//! [`braid_core::link`], where `braid emulate` drives it too; this module
//! adds what only the simulator needs: per-bin series of bytes sent, drops
//! and queue occupancy for reports. Main type: the crate-internal `SimLink`.

use crate::stats::BinSeries;
use braid_core::link::{Departure, Enqueued, Link, LinkConfig, LinkStats};
use braid_core::{Duration, Instant};
use rand_chacha::ChaCha8Rng;

/// One simulated link: the core model plus report series.
#[derive(Debug)]
pub(crate) struct SimLink<P> {
    link: Link<P>,
    /// Bytes fully serialized per report bin.
    pub sent_series: BinSeries,
    /// Drops (queue + random) per report bin.
    pub drop_series: BinSeries,
    /// Largest waiting queue (bytes) per report bin.
    pub queue_series: BinSeries,
}

impl<P> SimLink<P> {
    pub fn new(cfg: LinkConfig, rng: ChaCha8Rng, bin: Duration) -> Self {
        SimLink {
            link: Link::new(cfg, rng),
            sent_series: BinSeries::new(bin),
            drop_series: BinSeries::new(bin),
            queue_series: BinSeries::new(bin),
        }
    }

    pub fn cfg(&self) -> &LinkConfig {
        self.link.config()
    }

    pub fn stats(&self) -> &LinkStats {
        self.link.stats()
    }

    pub fn queued_bytes(&self) -> u64 {
        self.link.queued_bytes()
    }

    /// [`Link::enqueue`], recording drops and queue occupancy.
    pub fn enqueue(&mut self, now: Instant, size: u32, packet: P) -> Enqueued<P> {
        let e = self.link.enqueue(now, size, packet);
        match &e {
            Enqueued::Dropped(_) => self.drop_series.add(now, 1),
            Enqueued::Queued => self.queue_series.max(now, self.link.queued_bytes()),
            Enqueued::Started(_) => {}
        }
        e
    }

    /// [`Link::complete`], recording bytes sent and random losses.
    pub fn complete(&mut self, now: Instant) -> Option<Departure<P>> {
        let d = self.link.complete(now)?;
        self.sent_series.add(now, d.size as u64);
        if d.lost {
            self.drop_series.add(now, 1);
        }
        Some(d)
    }
}
