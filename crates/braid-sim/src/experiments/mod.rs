//! Seed 000 §VI experiments, reproduced on real traces: each table is a
//! function that runs every algorithm on the same paths and workload and
//! prints our numbers beside the seed's.
//!
//! * [`table3`](mod@table3) — SmartPointer streams (Atom 3.249 Mbit/s at 95 %, Bond1
//!   22.148 Mbit/s at 95 %, Bond2 best effort) over two paths: WFQ on one
//!   path, MSFQ, PGOS and OptSched over both (seed Table III).
//! * [`table2`] — the same two critical streams on path A vs on path B
//!   (seed Table II: choose the path by distribution, not by mean).
//! * [`table4`] — GridFTP record streams: blocked and partitioned layouts
//!   vs PGOS (seed Table IV).
//! * [`table5`] — layered video from real frame traces: MSFQ vs PGOS (seed
//!   Table V).
//! * [`violation()`] — violation-bound streams: Lemma 2's E\[Z\] from the
//!   monitor's window vs the misses the next windows produce.
//!
//! Paths are built as the seed built them — a 100 Mbit/s link minus replayed
//! cross traffic — with real traces from `../shared/data` as the cross
//! traffic ([`cross_traffic_path`]). The harness ([`harness`]) runs each
//! experiment on [`crate::Simulation`]: a sender node
//! ([`sched_node::SchedulerNode`]: sources, scheduler, monitor) and a
//! receiver node ([`stream_sink::StreamSink`]) joined by one link per path;
//! see its docs for what it does and does not model. Main types: [`harness::PathSpec`], [`harness::StreamDef`],
//! [`harness::Algo`], [`ExperimentError`].

pub mod harness;
pub mod packet;
mod packet_tables;
pub mod sched_node;
pub mod setup;
pub mod stream_sink;
pub mod table3;
pub mod table45;
pub mod violation;

pub use packet_tables::{
    table2_packet, table3_packet, table4_packet, table5_packet, violation_packet, PacketOptions,
};
pub use table3::{table2, table3, CrossTraces, TableReport};
pub use table45::{table4, table5};
pub use violation::violation;

use crate::trace_file::{load_schedule, TraceFileError};
use braid_core::link::{Capacity, RateSchedule};
use braid_core::scheduler::SchedError;
use braid_core::{Bandwidth, Duration};
use harness::PathSpec;
use std::path::{Path, PathBuf};

/// Why an experiment could not run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ExperimentError {
    /// A trace the experiment needs is not there.
    #[error("trace {} is missing (the experiments read ../shared/data; pass --data)", .0.display())]
    MissingTrace(PathBuf),
    /// A trace could not be loaded.
    #[error(transparent)]
    Trace(#[from] TraceFileError),
    /// The scheduler refused a stream.
    #[error(transparent)]
    Sched(#[from] SchedError),
    /// A capacity schedule could not be built.
    #[error("capacity: {0}")]
    Capacity(String),
}

/// When the sources start (after the monitor's warm-up) and how long the run
/// is measured. The default, 300 s + 900 s, is what the docs report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunSpan {
    /// Seconds of monitor warm-up before the sources start (≥ the window).
    pub warmup_s: u64,
    /// Seconds measured after that.
    pub measure_s: u64,
}

impl Default for RunSpan {
    fn default() -> Self {
        RunSpan {
            warmup_s: 300,
            measure_s: 900,
        }
    }
}

/// Cross-traffic bin width (the `.tsv` copies are 100 ms bins).
pub const CROSS_BIN: Duration = Duration::from_millis(100);

/// A path of `link` capacity minus cross traffic replayed from `trace`
/// (relative to `data`), scaled so that the cross traffic's mean is
/// `cross_mean`; the available bandwidth is clipped to `[0, link]`.
///
/// # Errors
/// The trace is missing or unreadable.
pub fn cross_traffic_path(
    name: &str,
    data: &Path,
    trace: &str,
    link: Bandwidth,
    cross_mean: Bandwidth,
    delay: Duration,
) -> Result<PathSpec, ExperimentError> {
    let file = data.join(trace);
    if !file.exists() {
        return Err(ExperimentError::MissingTrace(file));
    }
    let cross = load_schedule(&file, None, CROSS_BIN, 1.0)?;
    let mean = Capacity::Schedule(cross.clone()).mean().bps().max(1) as f64;
    let k = cross_mean.bps() as f64 / mean;
    let avail: Vec<Bandwidth> = cross
        .rates()
        .iter()
        .map(|r| link.saturating_sub(r.mul_f64(k)))
        .collect();
    let schedule = RateSchedule::new(CROSS_BIN, avail)
        .map_err(|e| ExperimentError::Capacity(e.to_string()))?;
    Ok(PathSpec {
        name: name.to_string(),
        capacity: Capacity::Schedule(schedule),
        delay,
    })
}
