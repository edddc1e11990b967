//! Session settings and the choice of scheduler.
//!
//! Main types: [`SessionConfig`], [`SchedulerKind`].

use crate::scheduler::{MinRtt, Msfq, Pgos, PgosConfig, RoundRobin, Scheduler, Wfq};
use crate::time::Duration;
use crate::transport::Config as TransportConfig;
use std::fmt;
use std::str::FromStr;

/// Which scheduler a source runs.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub enum SchedulerKind {
    /// PGOS (seed 000 §V), the default.
    Pgos(PgosConfig),
    /// Multi-server fair queueing over all paths.
    Msfq,
    /// Weighted fair queueing over all paths.
    Wfq,
    /// Round-robin over paths.
    RoundRobin,
    /// GridFTP's layouts: round-robin in runs of `chunk` packets per path
    /// (44 ≈ 64 KB blocks; a second of data = partitioned).
    Partitioned(u32),
    /// Always the path with the lowest RTT that can take a packet.
    MinRtt,
}

impl Default for SchedulerKind {
    fn default() -> Self {
        SchedulerKind::Pgos(PgosConfig::default())
    }
}

impl SchedulerKind {
    /// The short name (`pgos`, `msfq`, `wfq`, `rr`, `minrtt`).
    pub fn name(&self) -> &'static str {
        match self {
            SchedulerKind::Pgos(_) => "pgos",
            SchedulerKind::Msfq => "msfq",
            SchedulerKind::Wfq => "wfq",
            SchedulerKind::RoundRobin => "rr",
            SchedulerKind::Partitioned(_) => "partitioned",
            SchedulerKind::MinRtt => "minrtt",
        }
    }

    pub(super) fn build(&self) -> Sched {
        match self {
            SchedulerKind::Pgos(c) => Sched::Pgos(Box::new(Pgos::new(*c))),
            SchedulerKind::Msfq => Sched::Other(Box::new(Msfq::new())),
            SchedulerKind::Wfq => Sched::Other(Box::new(Wfq::new(None))),
            SchedulerKind::RoundRobin => Sched::Other(Box::new(RoundRobin::blocked())),
            SchedulerKind::Partitioned(chunk) => {
                Sched::Other(Box::new(RoundRobin::partitioned(*chunk)))
            }
            SchedulerKind::MinRtt => Sched::Other(Box::new(MinRtt::new())),
        }
    }
}

impl fmt::Display for SchedulerKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A scheduler name that is not one of `pgos|msfq|wfq|rr|minrtt`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown scheduler {0:?} (expected pgos, msfq, wfq, rr or minrtt)")]
pub struct UnknownScheduler(pub String);

impl FromStr for SchedulerKind {
    type Err = UnknownScheduler;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match s {
            "pgos" => SchedulerKind::default(),
            "msfq" => SchedulerKind::Msfq,
            "wfq" => SchedulerKind::Wfq,
            "rr" | "round-robin" => SchedulerKind::RoundRobin,
            "minrtt" | "min-rtt" => SchedulerKind::MinRtt,
            other => return Err(UnknownScheduler(other.to_string())),
        })
    }
}

/// Session settings. The defaults suit paths of 1–1000 Mbit/s and 1–500 ms.
#[derive(Debug, Clone)]
pub struct SessionConfig {
    /// Settings of every path's connection (its `stats_interval` is the
    /// estimator's sample interval).
    pub transport: TransportConfig,
    /// Samples in each path's estimate window (and RTT / loss histories).
    pub estimate_window: usize,
    /// The time scale of each path's estimate: the connection's samples
    /// (one per `transport.stats_interval`) enter it as means over this
    /// long, so that the promise at P is the rate at P over windows of
    /// this length — 1 s, the windows a rate guarantee is judged over
    /// (`PathEstimate::with_scale`). At most the interval: the samples as
    /// they are (the seed's rule; what braid did before issue 28).
    pub estimate_scale: Duration,
    /// Samples a path needs before upcalls are believed: until every path
    /// has them, an infeasible stream runs best effort quietly and is
    /// re-mapped when they are in.
    pub min_samples: usize,
    /// Longest a path that is up may keep upcalls waiting for its
    /// `min_samples`: past it the path is named in
    /// [`Event::PathUnmeasured`](super::Event::PathUnmeasured) and the
    /// session warms up without it.
    pub warmup_limit: Duration,
    /// The scheduler.
    pub scheduler: SchedulerKind,
    /// Lower bound of the silence that takes a path down (with 3 × SRTT).
    pub down_min: Duration,
    /// Wait before a closed path connection is re-opened.
    pub reconnect_after: Duration,
    /// Most bytes of messages a source holds (queued or unacknowledged), or
    /// a sink holds (in reassembly or unread). A sink's bound must be at
    /// least its source's.
    pub max_bytes: u64,
    /// Largest message.
    pub max_message: usize,
    /// Interval of [`Event::Stats`](super::Event::Stats).
    pub stats_interval: Duration,
    /// Interval of the sink's acknowledgements.
    pub ack_interval: Duration,
    /// Close the session ([`CloseReason::PeerLost`](super::CloseReason))
    /// once every path has been down this long, after at least one was
    /// up. `None` (the default): keep trying for ever, as braid-sim's
    /// outage scenarios need; the runtime sets a few seconds.
    pub peer_timeout: Option<Duration>,
    /// Probe paths the application leaves app-limited (see
    /// [`super::probe`]). `None` (the default, as braid-sim needs): never;
    /// the tokio runtime turns it on.
    pub probe: Option<super::probe::ProbeConfig>,
    /// On a path that carries guarantees, hold unscheduled traffic (best
    /// effort, excess, other paths' backlog) to what the path's estimate
    /// leaves after them: the estimate's quantile `q` (e.g. 0.05) minus the
    /// rates promised on it (see `source::fill_path`). `None` (the
    /// default): the seed's rule, spare capacity to unscheduled traffic up
    /// to what the transport takes.
    pub cap_unscheduled: Option<f64>,
    /// Serve what the scheduler owes a path first (an experiment, off by
    /// default): such messages go into the path's connection up to one
    /// window beyond the dispatch limit and out at transport priority 1,
    /// ahead of best effort. It cut PGOS's Table III deviation 3.5× on
    /// real sockets (docs/BENCHMARKS.md), but starves best effort while a
    /// guarantee wants the whole path, so it is not the default.
    pub scheduled_first: bool,
    /// On a path that carries guarantees, unscheduled traffic yields to
    /// them: it may keep only a delay-based window queued in the path's
    /// connection, which holds the connection's queueing delay near this
    /// target ([`super::bulk_yield`], LEDBAT-like). `None`: unscheduled
    /// traffic takes whatever the congestion window allows, as in the
    /// seed (and braid before issue 28). Paths that carry no promise
    /// (every path under MSFQ, WFQ, round-robin and min-RTT) are never
    /// held.
    pub bulk_yield: Option<Duration>,
    /// Correct each path's promises from the outcomes of the guarantees
    /// mapped onto it (the sink's judged windows), with this step size γ
    /// ([`crate::estimate::PromiseScale`]; 0 < γ ≤ 1). `None`: promise
    /// from the estimate alone, as before issue 28.
    pub calibration: Option<f64>,
    /// React to capacity dips ([`super::dip`]): a path that delivers less
    /// than half its promise for two intervals is re-mapped at once, its
    /// view scaled to what it delivers. `false`: wait for the estimate.
    pub react_to_dips: bool,
    /// Sink: the application confirms each stream it kept
    /// ([`Session::keep_stream`](super::Session::keep_stream), after
    /// writing it out) before the source hears it was delivered. `false`
    /// (the default): a stream counts as kept once the application has
    /// taken every message of it. Either way the application may refuse a
    /// stream ([`Session::refuse_stream`](super::Session::refuse_stream)).
    pub confirm_streams: bool,
    /// Sink: the most streams and bytes of messages one session may give
    /// it ([`super::quota`]); past it a stream is refused with a reason
    /// that names the quota. Default: unlimited (the protocol's own bounds
    /// hold: [`MAX_STREAMS`](crate::id::MAX_STREAMS), `max_bytes` held at once).
    pub quota: super::quota::Quota,
}

impl Default for SessionConfig {
    fn default() -> Self {
        SessionConfig {
            transport: TransportConfig::default(),
            estimate_window: 100,
            estimate_scale: Duration::from_secs(1),
            min_samples: 10,
            warmup_limit: Duration::from_secs(3),
            scheduler: SchedulerKind::default(),
            down_min: Duration::from_millis(200),
            reconnect_after: Duration::from_secs(1),
            max_bytes: 64 << 20,
            max_message: 1 << 20,
            stats_interval: Duration::from_secs(1),
            ack_interval: Duration::from_millis(5),
            peer_timeout: None,
            probe: None,
            cap_unscheduled: None,
            scheduled_first: false,
            bulk_yield: Some(super::bulk_yield::DEFAULT_TARGET),
            calibration: Some(crate::estimate::DEFAULT_SCALE_GAMMA),
            react_to_dips: true,
            confirm_streams: false,
            quota: super::quota::Quota::UNLIMITED,
        }
    }
}

#[derive(Debug)]
pub(super) enum Sched {
    Pgos(Box<Pgos>),
    Other(Box<dyn Scheduler + Send>),
}

impl Sched {
    pub(super) fn get(&mut self) -> &mut dyn Scheduler {
        match self {
            Sched::Pgos(p) => p.as_mut(),
            Sched::Other(s) => s.as_mut(),
        }
    }
    pub(super) fn get_ref(&self) -> &dyn Scheduler {
        match self {
            Sched::Pgos(p) => p.as_ref(),
            Sched::Other(s) => s.as_ref(),
        }
    }
}
