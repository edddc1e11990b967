//! Scenarios: a network and its traffic, described in TOML.
//!
//! Main types: [`Scenario`] (validated, traces loaded), [`LinkSpec`],
//! [`FlowSpec`], [`ScenarioError`]. Invariants of a [`Scenario`]: every name
//! is unique and defined; every flow's route is a connected chain of links
//! from its `from` node to its `to` node; every value is in range; relative
//! trace paths were resolved against the scenario file's directory.
//!
//! # Format
//! ```toml
//! name = "one bottleneck"        # optional (default: the file name)
//! seed = 7                       # optional (default 1); BRAID_SIM_SEED overrides
//! duration = "30s"
//! bin = "100ms"                  # optional report bin; must divide 1 s
//! nodes = ["a", "b"]
//!
//! [[link]]
//! name = "fwd"
//! from = "a"
//! to = "b"
//! rate = "10mbit"                # exactly one of rate, trace, synthetic
//! # trace = "../shared/data/traces/mahimahi/ATT-LTE-driving.down"
//! # trace_format = "mahimahi"    # mahimahi | series | 5g-csv (default: detect)
//! # trace_bin = "10ms"           # resolution of the capacity schedule
//! # scale = 1.0                  # multiply the trace's rates
//! # synthetic = { mean = "10mbit", cov = 0.4, corr_time = "2s", step = "100ms" }
//! delay = "20ms"                 # propagation delay (default 0)
//! queue = "100KB"                # drop-tail bound: bytes (B, KB, MB, KiB, MiB)
//!                                # or a time at the mean rate ("50ms");
//!                                # default 100 ms at the mean rate, >= 15 KB
//! loss = 0.01                    # random loss probability (default 0)
//! duplicate = 0.0                # duplication probability
//! reorder = 0.0                  # probability of holding a packet back...
//! reorder_delay = "1ms"          # ...by this much
//!
//! [[link]]
//! name = "back"
//! from = "b"
//! to = "a"
//! rate = "10mbit"
//! delay = "20ms"
//!
//! [[flow]]
//! name = "bulk"
//! kind = "greedy"                # greedy | cbr | trace
//! from = "a"
//! to = "b"
//! # route = ["fwd"]              # default: fewest links (declaration order breaks ties)
//! # ack_route = ["back"]         # greedy only; default: fewest links back
//! start = "0s"                   # default 0
//! # stop = "30s"                 # default: the end
//! packet = 1500                  # bytes on the wire (default 1500)
//! # rate = "5mbit"               # cbr
//! # trace = "x.tsv"              # trace: replay this rate series (+ trace_format, trace_bin, scale)
//! # queue_target = "20ms"        # greedy: standing queue it aims for
//! # window = 40                  # greedy: fixed window in packets instead
//! # ack_size = 40                # greedy: ack bytes on the wire
//! ```

mod bytes;
mod error;
pub(crate) mod raw;
mod route;

pub use bytes::parse_bytes;
pub use error::{ScenarioError, ScenarioErrorKind};
use route::shortest_route;

use crate::stats::MAX_BINS;
use crate::trace_file::{load_schedule, parse_format, TraceFileError};
use braid_core::link::RateSchedule;
use braid_core::link::SyntheticSpec;
use braid_core::{Bandwidth, Duration};
pub(crate) use error::Locator;
use raw::{RawFlow, RawLink, RawScenario, RawSynthetic};

/// A trace's keys as written: file, `trace_format`, `trace_bin`, `scale`.
pub(crate) type TraceKeys<'a> = (
    &'a Option<Spanned<String>>,
    &'a Option<Spanned<String>>,
    &'a Option<Spanned<String>>,
    &'a Option<Spanned<f64>>,
);
use std::ops::Range;
use std::path::{Path, PathBuf};
use toml::Spanned;
use ScenarioErrorKind as K;

/// Longest run a scenario may ask for.
pub const MAX_DURATION: Duration = Duration::from_secs(24 * 3600);
/// Most links, nodes or flows in one scenario.
pub const MAX_ELEMENTS: usize = 10_000;
/// Default seed when a scenario names none.
pub const DEFAULT_SEED: u64 = 1;
/// Default capacity resolution for trace-driven links and sources.
pub const DEFAULT_TRACE_BIN: Duration = Duration::from_millis(10);
/// Default step of a synthetic capacity.
pub const DEFAULT_SYNTHETIC_STEP: Duration = Duration::from_millis(100);
/// Default correlation time of a synthetic capacity.
pub const DEFAULT_CORR_TIME: Duration = Duration::from_secs(2);

/// How a link's capacity is defined.
#[derive(Clone, Debug, PartialEq)]
pub enum CapacitySpec {
    /// A constant rate.
    Constant(Bandwidth),
    /// A trace file, already loaded into a schedule.
    Trace {
        /// The file (resolved).
        path: PathBuf,
        /// Its rates.
        schedule: RateSchedule,
    },
    /// A synthetic variable rate, drawn when the simulation is built (so it
    /// follows the run's seed).
    Synthetic(SyntheticSpec),
}

/// How big a link queue is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QueueSpec {
    /// The default (100 ms at the mean rate, at least 15,000 bytes).
    Default,
    /// A number of bytes.
    Bytes(u64),
    /// This long at the link's mean rate.
    Time(Duration),
}

/// A validated link.
#[derive(Clone, Debug, PartialEq)]
pub struct LinkSpec {
    /// Name.
    pub name: String,
    /// Node it leaves.
    pub from: String,
    /// Node it reaches.
    pub to: String,
    /// Capacity.
    pub capacity: CapacitySpec,
    /// Propagation delay.
    pub delay: Duration,
    /// Queue bound.
    pub queue: QueueSpec,
    /// Loss probability.
    pub loss: f64,
    /// Duplication probability.
    pub duplicate: f64,
    /// Reordering probability.
    pub reorder: f64,
    /// Extra delay of a reordered packet.
    pub reorder_delay: Duration,
}

/// What a flow sends.
#[derive(Clone, Debug, PartialEq)]
pub enum FlowKind {
    /// Always has data; window-limited with acks ([`crate::GreedySource`]).
    Greedy {
        /// Links of the ack route (indices into [`Scenario::links`]).
        ack_route: Vec<usize>,
        /// Standing queue to aim for.
        queue_target: Duration,
        /// Fixed window in packets, if set.
        window: Option<u32>,
        /// Ack size on the wire.
        ack_size: u32,
    },
    /// Constant bit rate.
    Cbr {
        /// The rate.
        rate: Bandwidth,
    },
    /// Replays a trace's rate series (cross traffic).
    Trace {
        /// The file (resolved).
        path: PathBuf,
        /// Its rates.
        schedule: RateSchedule,
    },
}

impl FlowKind {
    /// `greedy`, `cbr` or `trace`.
    pub fn label(&self) -> &'static str {
        match self {
            FlowKind::Greedy { .. } => "greedy",
            FlowKind::Cbr { .. } => "cbr",
            FlowKind::Trace { .. } => "trace",
        }
    }
}

/// A validated flow.
#[derive(Clone, Debug, PartialEq)]
pub struct FlowSpec {
    /// Name.
    pub name: String,
    /// What it sends.
    pub kind: FlowKind,
    /// Sending node.
    pub from: String,
    /// Receiving node.
    pub to: String,
    /// Links of the data route (indices into [`Scenario::links`]).
    pub route: Vec<usize>,
    /// When it starts.
    pub start: Duration,
    /// When it stops (at most the scenario's duration).
    pub stop: Duration,
    /// Packet size on the wire.
    pub packet: u32,
}

/// A validated scenario (see the module docs for the file format).
#[derive(Clone, Debug, PartialEq)]
pub struct Scenario {
    /// Display name.
    pub name: String,
    /// The file it came from, as given (or `<inline>`).
    pub file: String,
    /// Seed of the run.
    pub seed: u64,
    /// Length of the run.
    pub duration: Duration,
    /// Report bin width.
    pub bin: Duration,
    /// Node names.
    pub nodes: Vec<String>,
    /// Links.
    pub links: Vec<LinkSpec>,
    /// Flows.
    pub flows: Vec<FlowSpec>,
}

impl Scenario {
    /// Parses a scenario from text; relative trace paths resolve against the
    /// current directory and errors name the file `<inline>`.
    ///
    /// # Errors
    /// See [`Scenario::from_toml_str_at`].
    pub fn from_toml_str(text: &str) -> Result<Scenario, ScenarioError> {
        Self::parse(text, "<inline>".to_string(), Path::new("."), "inline")
    }

    /// Parses a scenario's text as if it were the file `path`: errors name
    /// `path`, relative trace paths resolve against its directory.
    ///
    /// # Errors
    /// [`ScenarioError`] for malformed TOML, unknown or missing keys, an
    /// unknown unit, an undefined or duplicated name, a broken route, or a
    /// trace file that is missing or invalid. The error names the file and,
    /// where there is one, the line.
    pub fn from_toml_str_at(text: &str, path: &Path) -> Result<Scenario, ScenarioError> {
        let (dir, stem) = dir_and_stem(path, "scenario");
        Self::parse(text, path.display().to_string(), dir, &stem)
    }

    /// Reads and parses the scenario file at `path`.
    ///
    /// # Errors
    /// As [`Scenario::from_toml_str_at`], plus an unreadable file.
    pub fn from_path(path: impl AsRef<Path>) -> Result<Scenario, ScenarioError> {
        let path = path.as_ref();
        Self::from_toml_str_at(&read_file(path)?, path)
    }

    /// The same scenario with another seed.
    pub fn with_seed(mut self, seed: u64) -> Scenario {
        self.seed = seed;
        self
    }

    /// The index of the link called `name`.
    pub fn link_index(&self, name: &str) -> Option<usize> {
        self.links.iter().position(|l| l.name == name)
    }

    fn parse(text: &str, file: String, dir: &Path, stem: &str) -> Result<Scenario, ScenarioError> {
        let loc = Locator { file, text };
        let raw: RawScenario = toml::from_str(text)
            .map_err(|e| loc.err(e.span(), K::Syntax, e.message().to_string()))?;
        Builder { loc: &loc, dir }.build(raw, stem)
    }
}

/// A scenario file's text, or an I/O error naming it.
pub(crate) fn read_file(path: &Path) -> Result<String, ScenarioError> {
    std::fs::read_to_string(path).map_err(|e| ScenarioError {
        file: path.display().to_string(),
        line: None,
        kind: K::Io,
        message: e.to_string(),
    })
}

/// The directory relative paths in the file at `path` resolve against, and
/// the file's stem (the scenario's default name; `default` without one).
pub(crate) fn dir_and_stem<'a>(path: &'a Path, default: &str) -> (&'a Path, String) {
    let dir = path.parent().unwrap_or(Path::new("."));
    let stem = path
        .file_stem()
        .map_or_else(|| default.to_string(), |s| s.to_string_lossy().into_owned());
    (dir, stem)
}

/// Checks raw values against their spans; shared with the session scenario
/// format ([`crate::session::scenario`]).
pub(crate) struct Builder<'a> {
    pub(crate) loc: &'a Locator<'a>,
    pub(crate) dir: &'a Path,
}

pub(crate) fn sp<T>(s: &Spanned<T>) -> Option<Range<usize>> {
    Some(s.span())
}

impl Builder<'_> {
    pub(crate) fn err(
        &self,
        span: Option<Range<usize>>,
        kind: K,
        msg: impl Into<String>,
    ) -> ScenarioError {
        self.loc.err(span, kind, msg)
    }

    pub(crate) fn duration(
        &self,
        v: &Spanned<String>,
        what: &str,
    ) -> Result<Duration, ScenarioError> {
        v.get_ref()
            .parse::<Duration>()
            .map_err(|e| self.err(sp(v), K::Value, format!("{what}: {e}")))
    }

    pub(crate) fn rate(&self, v: &Spanned<String>, what: &str) -> Result<Bandwidth, ScenarioError> {
        v.get_ref()
            .parse::<Bandwidth>()
            .map_err(|e| self.err(sp(v), K::Value, format!("{what}: {e}")))
    }

    pub(crate) fn probability(
        &self,
        v: &Option<Spanned<f64>>,
        what: &str,
    ) -> Result<f64, ScenarioError> {
        match v {
            None => Ok(0.0),
            Some(p) if (0.0..=1.0).contains(p.get_ref()) => Ok(*p.get_ref()),
            Some(p) => Err(self.err(
                sp(p),
                K::Value,
                format!(
                    "{what} must be a probability between 0 and 1, got {}",
                    p.get_ref()
                ),
            )),
        }
    }

    pub(crate) fn scale(&self, v: &Option<Spanned<f64>>) -> Result<f64, ScenarioError> {
        match v {
            None => Ok(1.0),
            Some(s) if s.get_ref().is_finite() && *s.get_ref() >= 0.0 => Ok(*s.get_ref()),
            Some(s) => Err(self.err(sp(s), K::Value, "scale must be a non-negative number")),
        }
    }

    pub(crate) fn trace(
        &self,
        path: &Spanned<String>,
        format: &Option<Spanned<String>>,
        bin: &Option<Spanned<String>>,
        scale: &Option<Spanned<f64>>,
    ) -> Result<(PathBuf, RateSchedule), ScenarioError> {
        let format = match format {
            None => None,
            Some(f) => Some(parse_format(f.get_ref()).ok_or_else(|| {
                self.err(
                    sp(f),
                    K::Value,
                    format!(
                        "unknown trace_format {:?}: use mahimahi, series or 5g-csv",
                        f.get_ref()
                    ),
                )
            })?),
        };
        let bin = match bin {
            None => DEFAULT_TRACE_BIN,
            Some(b) => {
                let d = self.duration(b, "trace_bin")?;
                if d.is_zero() {
                    return Err(self.err(sp(b), K::Value, "trace_bin must be positive"));
                }
                d
            }
        };
        let scale = self.scale(scale)?;
        let resolved = self.dir.join(path.get_ref());
        let schedule = load_schedule(&resolved, format, bin, scale).map_err(|e| {
            let what = match &e {
                TraceFileError::Io { .. } => "cannot read trace",
                _ => "bad trace",
            };
            self.err(sp(path), K::Trace, format!("{what} {e}"))
        })?;
        Ok((resolved, schedule))
    }

    pub(crate) fn names(
        &self,
        items: &[&Spanned<String>],
        what: &str,
    ) -> Result<Vec<String>, ScenarioError> {
        let mut out: Vec<String> = Vec::with_capacity(items.len());
        if items.len() > MAX_ELEMENTS {
            return Err(self.err(None, K::Value, format!("more than {MAX_ELEMENTS} {what}s")));
        }
        for n in items {
            let name = n.get_ref().trim();
            if name.is_empty() {
                return Err(self.err(sp(n), K::Value, format!("{what} name is empty")));
            }
            if out.iter().any(|o| o == name) {
                return Err(self.err(
                    sp(n),
                    K::Duplicate,
                    format!("{what} `{name}` is defined twice"),
                ));
            }
            out.push(name.to_string());
        }
        Ok(out)
    }

    fn node(
        &self,
        nodes: &[String],
        n: &Spanned<String>,
        ctx: &str,
    ) -> Result<String, ScenarioError> {
        let name = n.get_ref().trim();
        if nodes.iter().any(|x| x == name) {
            Ok(name.to_string())
        } else {
            Err(self.err(
                sp(n),
                K::Undefined,
                format!(
                    "{ctx} names undefined node `{name}` (nodes: {})",
                    nodes.join(", ")
                ),
            ))
        }
    }

    fn build(&self, raw: RawScenario, stem: &str) -> Result<Scenario, ScenarioError> {
        let duration = self.duration(&raw.duration, "duration")?;
        if duration.is_zero() || duration > MAX_DURATION {
            return Err(self.err(
                sp(&raw.duration),
                K::Value,
                format!("duration must be between 1ns and {MAX_DURATION}"),
            ));
        }
        let bin = match &raw.bin {
            None => crate::sim::DEFAULT_BIN,
            Some(b) => {
                let d = self.duration(b, "bin")?;
                if d.is_zero() || Duration::from_secs(1).as_nanos() % d.as_nanos() != 0 {
                    return Err(self.err(
                        sp(b),
                        K::Value,
                        "bin must be positive and divide 1s (e.g. 100ms, 250ms, 1s)",
                    ));
                }
                d
            }
        };
        if duration.as_nanos() / bin.as_nanos() >= MAX_BINS as u64 {
            return Err(self.err(
                sp(&raw.duration),
                K::Value,
                "duration / bin is too many bins; use a larger bin",
            ));
        }
        let node_refs: Vec<_> = raw.nodes.get_ref().iter().collect();
        let nodes = self.names(&node_refs, "node")?;
        if nodes.is_empty() {
            return Err(self.err(sp(&raw.nodes), K::Value, "nodes is empty"));
        }
        let link_names: Vec<_> = raw.links.iter().map(|l| &l.name).collect();
        self.names(&link_names, "link")?;
        let flow_names: Vec<_> = raw.flows.iter().map(|f| &f.name).collect();
        self.names(&flow_names, "flow")?;

        let mut links = Vec::with_capacity(raw.links.len());
        for l in &raw.links {
            links.push(self.link(&nodes, l)?);
        }
        let mut flows = Vec::with_capacity(raw.flows.len());
        for f in &raw.flows {
            flows.push(self.flow(&nodes, &links, f, duration)?);
        }
        Ok(Scenario {
            name: raw.name.unwrap_or_else(|| stem.to_string()),
            file: self.loc.file.clone(),
            seed: raw.seed.unwrap_or(DEFAULT_SEED),
            duration,
            bin,
            nodes,
            links,
            flows,
        })
    }

    fn link(&self, nodes: &[String], l: &RawLink) -> Result<LinkSpec, ScenarioError> {
        let name = l.name.get_ref().trim().to_string();
        let ctx = format!("link `{name}`");
        let from = self.node(nodes, &l.from, &ctx)?;
        let to = self.node(nodes, &l.to, &ctx)?;
        let given = [l.rate.is_some(), l.trace.is_some(), l.synthetic.is_some()]
            .iter()
            .filter(|&&b| b)
            .count();
        if given != 1 {
            return Err(self.err(
                sp(&l.name),
                K::Value,
                format!("{ctx}: give exactly one of rate, trace or synthetic"),
            ));
        }
        let capacity = self.capacity(
            &ctx,
            &l.rate,
            (&l.trace, &l.trace_format, &l.trace_bin, &l.scale),
            &l.synthetic,
        )?;
        let delay = match &l.delay {
            None => Duration::ZERO,
            Some(d) => self.duration(d, &format!("{ctx} delay"))?,
        };
        let queue = match &l.queue {
            None => QueueSpec::Default,
            Some(q) => self.queue(q, &ctx)?,
        };
        let reorder_delay = match &l.reorder_delay {
            None => Duration::from_millis(1),
            Some(d) => self.duration(d, &format!("{ctx} reorder_delay"))?,
        };
        Ok(LinkSpec {
            name,
            from,
            to,
            capacity,
            delay,
            queue,
            loss: self.probability(&l.loss, "loss")?,
            duplicate: self.probability(&l.duplicate, "duplicate")?,
            reorder: self.probability(&l.reorder, "reorder")?,
            reorder_delay,
        })
    }

    /// A capacity from exactly one of `rate`, `trace` (with its format, bin
    /// and scale) or `synthetic` (the caller checks that one is given).
    pub(crate) fn capacity(
        &self,
        ctx: &str,
        rate: &Option<Spanned<String>>,
        trace: TraceKeys<'_>,
        synthetic: &Option<Spanned<RawSynthetic>>,
    ) -> Result<CapacitySpec, ScenarioError> {
        let capacity = if let Some(r) = rate {
            CapacitySpec::Constant(self.rate(r, &format!("{ctx} rate"))?)
        } else if let Some(t) = trace.0 {
            let (path, schedule) = self.trace(t, trace.1, trace.2, trace.3)?;
            CapacitySpec::Trace { path, schedule }
        } else if let Some(spanned) = synthetic {
            let s = spanned.get_ref();
            let mean = self.rate(&s.mean, &format!("{ctx} synthetic mean"))?;
            let cov = *s.cov.get_ref();
            if !(0.0..=10.0).contains(&cov) {
                return Err(self.err(
                    sp(&s.cov),
                    K::Value,
                    format!("{ctx}: cov must be between 0 and 10"),
                ));
            }
            let corr_time = match &s.corr_time {
                None => DEFAULT_CORR_TIME,
                Some(c) => self.duration(c, "corr_time")?,
            };
            let step = match &s.step {
                None => DEFAULT_SYNTHETIC_STEP,
                Some(c) => self.duration(c, "step")?,
            };
            if corr_time.is_zero() || step.is_zero() {
                return Err(self.err(
                    sp(spanned),
                    K::Value,
                    format!("{ctx}: corr_time and step must be positive"),
                ));
            }
            CapacitySpec::Synthetic(SyntheticSpec {
                mean,
                cov,
                corr_time,
                step,
            })
        } else {
            unreachable_capacity()
        };
        Ok(capacity)
    }

    pub(crate) fn queue(&self, q: &Spanned<String>, ctx: &str) -> Result<QueueSpec, ScenarioError> {
        let text = q.get_ref().trim();
        if let Ok(d) = text.parse::<Duration>() {
            return Ok(QueueSpec::Time(d));
        }
        parse_bytes(text).map(QueueSpec::Bytes).map_err(|e| {
            self.err(
                sp(q),
                K::Value,
                format!("{ctx} queue {text:?}: expected bytes (1500B, 64KB = 64000, 64KiB = 65536) or a time at the mean rate (50ms): {e}"),
            )
        })
    }

    fn route(
        &self,
        links: &[LinkSpec],
        given: &Option<Spanned<Vec<Spanned<String>>>>,
        from: &str,
        to: &str,
        ctx: &str,
        span: Option<Range<usize>>,
    ) -> Result<Vec<usize>, ScenarioError> {
        let Some(given) = given else {
            return shortest_route(links, from, to).ok_or_else(|| {
                self.err(
                    span,
                    K::Route,
                    format!("{ctx}: no chain of links leads from `{from}` to `{to}`"),
                )
            });
        };
        let mut route = Vec::new();
        let mut at = from.to_string();
        for l in given.get_ref() {
            let name = l.get_ref().trim();
            let Some(i) = links.iter().position(|x| x.name == name) else {
                return Err(self.err(
                    sp(l),
                    K::Undefined,
                    format!("{ctx} names undefined link `{name}`"),
                ));
            };
            if links[i].from != at {
                return Err(self.err(
                    sp(l),
                    K::Route,
                    format!(
                        "{ctx}: link `{name}` leaves `{}`, but the route is at `{at}`",
                        links[i].from
                    ),
                ));
            }
            at = links[i].to.clone();
            route.push(i);
        }
        if at != to {
            return Err(self.err(
                sp(given),
                K::Route,
                format!("{ctx}: route ends at `{at}`, not at `{to}`"),
            ));
        }
        Ok(route)
    }

    fn flow(
        &self,
        nodes: &[String],
        links: &[LinkSpec],
        f: &RawFlow,
        duration: Duration,
    ) -> Result<FlowSpec, ScenarioError> {
        let name = f.name.get_ref().trim().to_string();
        let ctx = format!("flow `{name}`");
        let from = self.node(nodes, &f.from, &ctx)?;
        let to = self.node(nodes, &f.to, &ctx)?;
        let route = self.route(links, &f.route, &from, &to, &ctx, sp(&f.name))?;
        let start = match &f.start {
            None => Duration::ZERO,
            Some(s) => self.duration(s, &format!("{ctx} start"))?,
        };
        let stop = match &f.stop {
            None => duration,
            Some(s) => self.duration(s, &format!("{ctx} stop"))?.min(duration),
        };
        if stop <= start {
            return Err(self.err(
                sp(&f.name),
                K::Value,
                format!("{ctx}: stop must be after start"),
            ));
        }
        let packet = match &f.packet {
            None => 1500,
            Some(p) if (crate::wire::HEADER_LEN as u32..=65_535).contains(p.get_ref()) => {
                *p.get_ref()
            }
            Some(p) => {
                return Err(self.err(
                    sp(p),
                    K::Value,
                    format!(
                        "{ctx}: packet must be between {} and 65535 bytes",
                        crate::wire::HEADER_LEN
                    ),
                ))
            }
        };
        let kind = match f.kind.get_ref().as_str() {
            "greedy" => {
                let ack_route = self.route(
                    links,
                    &f.ack_route,
                    &to,
                    &from,
                    &format!("{ctx} (acks)"),
                    sp(&f.name),
                )?;
                let queue_target = match &f.queue_target {
                    None => Duration::from_millis(20),
                    Some(q) => self.duration(q, "queue_target")?,
                };
                let window = match &f.window {
                    None => None,
                    Some(w) if *w.get_ref() >= 1 => Some(*w.get_ref()),
                    Some(w) => {
                        return Err(self.err(sp(w), K::Value, "window must be at least 1 packet"))
                    }
                };
                let ack_size = f
                    .ack_size
                    .as_ref()
                    .map_or(40, |a| (*a.get_ref()).max(crate::wire::HEADER_LEN as u32));
                FlowKind::Greedy {
                    ack_route,
                    queue_target,
                    window,
                    ack_size,
                }
            }
            "cbr" => {
                let Some(r) = &f.rate else {
                    return Err(self.err(
                        sp(&f.kind),
                        K::Value,
                        format!("{ctx}: a cbr flow needs `rate`"),
                    ));
                };
                FlowKind::Cbr {
                    rate: self.rate(r, &format!("{ctx} rate"))?,
                }
            }
            "trace" => {
                let Some(t) = &f.trace else {
                    return Err(self.err(
                        sp(&f.kind),
                        K::Value,
                        format!("{ctx}: a trace flow needs `trace`"),
                    ));
                };
                let (path, schedule) = self.trace(t, &f.trace_format, &f.trace_bin, &f.scale)?;
                FlowKind::Trace { path, schedule }
            }
            other => {
                return Err(self.err(
                    sp(&f.kind),
                    K::Value,
                    format!("{ctx}: unknown kind {other:?}: use greedy, cbr or trace"),
                ))
            }
        };
        Ok(FlowSpec {
            name,
            kind,
            from,
            to,
            route,
            start,
            stop,
            packet,
        })
    }
}

#[allow(clippy::unreachable)]
fn unreachable_capacity() -> CapacitySpec {
    // Guarded above: exactly one of rate, trace, synthetic is present.
    unreachable!("exactly one capacity form was checked")
}
