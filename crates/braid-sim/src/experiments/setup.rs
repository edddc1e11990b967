//! What a multipath experiment is made of: its paths, its streams, its
//! settings and the scheduler under test. Main types: [`PathSpec`],
//! [`StreamDef`], [`HarnessConfig`], [`Algo`]. The harness
//! ([`super::harness`]) runs them; the sender node
//! ([`super::sched_node`]) drives the scheduler.

use braid_core::link::Capacity;
use braid_core::scheduler::{OptSched, Pgos, Scheduler, StreamSpec};
use braid_core::{Bandwidth, Duration, Instant};

/// Largest packet in bytes.
pub const PACKET: u32 = 1500;

/// One path of the experiment.
#[derive(Debug, Clone)]
pub struct PathSpec {
    /// Name for reports.
    pub name: String,
    /// Available bandwidth over time.
    pub capacity: Capacity,
    /// One-way propagation delay.
    pub delay: Duration,
}

/// One stream of the experiment.
#[derive(Debug, Clone)]
pub struct StreamDef {
    /// Name for reports.
    pub name: String,
    /// What the stream asks of the scheduler.
    pub spec: StreamSpec,
    /// Source frame sizes in bytes, one per frame period, looped.
    pub frames: Vec<u32>,
    /// Frame period (40 ms at 25 frames/s).
    pub period: Duration,
    /// The rate the source offers, for reports ("target").
    pub target: Bandwidth,
}

/// Harness settings.
#[derive(Debug, Clone)]
pub struct HarnessConfig {
    /// Sources start at this time (the monitor runs from zero, so the
    /// scheduler's window is already full).
    pub start: Instant,
    /// End of the run; throughput is measured over `[start, end)`.
    pub end: Instant,
    /// Measurement bin and monitor sample interval.
    pub sample: Duration,
    /// Samples in each path's sliding window.
    pub window_samples: usize,
    /// A stream's backlog bound, as a duration of its own target rate.
    pub max_backlog: Duration,
    /// OptSched's window (capacity oracle and feedback period).
    pub opt_window: Duration,
    /// Packet level only: the sessions' `SessionConfig::bulk_yield`.
    pub bulk_yield: Option<Duration>,
    /// Packet level only: the bottleneck's drop-tail queue as a time at
    /// the link's rate (`None`: the seed's 50 packets).
    pub queue: Option<Duration>,
}

impl HarnessConfig {
    /// The same with the packet-level knobs of `opts` set: the sessions'
    /// `bulk_yield` and the bottleneck queue.
    pub fn with_packet(
        &self,
        bulk_yield: Option<Duration>,
        queue: Option<Duration>,
    ) -> HarnessConfig {
        HarnessConfig {
            bulk_yield,
            queue,
            ..self.clone()
        }
    }
}

/// A scheduler under test: the trait object, plus OptSched's oracle hook
/// and PGOS's upcall answers.
#[derive(Debug)]
pub enum Algo {
    /// Any online scheduler.
    Online(Box<dyn Scheduler>),
    /// PGOS; the harness answers upcalls as an application would: keep the
    /// rate at the best probability achievable if that is at least 0.5,
    /// else accept best effort.
    Pgos(Box<Pgos>),
    /// OptSched, which also needs the capacity oracle.
    Opt(Box<OptSched>),
}
