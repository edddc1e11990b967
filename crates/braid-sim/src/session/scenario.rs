//! Session scenarios: paths, relays, cross traffic, cuts and streams with
//! their specs and sources, described in TOML (issue 10 §2; the streams
//! and guarantees of seed 000 §III-B and §V-A).
//!
//! Main types: [`SessionScenario`] (validated, traces loaded),
//! [`SessionPathSpec`], [`CrossSpec`]. It becomes a runnable
//! [`SessionSim`] with [`SessionScenario::sim`]. Errors are the simulator's
//! [`ScenarioError`]: one line naming the file and, where known, the line.
//!
//! Invariants of a [`SessionScenario`]: path and stream names are unique;
//! every pinned path exists; every stream config passed
//! `StreamConfig::validate` (streams are read in `scenario_streams`); relative trace paths were resolved against
//! the scenario file's directory and every trace loaded.
//!
//! # Format
//! ```toml
//! name = "two paths"          # optional (default: the file name)
//! seed = 1                    # optional (default 1); --seed / BRAID_SIM_SEED override
//! duration = "40s"
//! warmup = "5s"               # optional: 1 s windows before it are left out of the report
//!                             # (default 5 s, at most a quarter of the run)
//! scheduler = "pgos"          # optional: pgos | msfq | wfq | rr | minrtt (--scheduler overrides)
//! bulk_yield = "30ms"         # optional: best effort's delay target on paths with guarantees, or "off"
//! calibration = "0.05"        # optional: step of the promises' correction from outcomes, or "off"
//! on_infeasible = "lower"     # optional: how the source answers an upcall: lower | accept | drop
//! react_to_dips = true        # optional: re-map at once when a path dips below half its promise
//!
//! [[path]]
//! name = "a"
//! rate = "20mbit"             # exactly one of rate, trace, synthetic (as for [[link]]):
//! # trace = "../../shared/data/traces/norway_hsdpa/norway_bus_11"
//! # trace_format = "series"; trace_bin = "100ms"; scale = 4.0
//! # synthetic = { mean = "20mbit", cov = 0.3, corr_time = "2s", step = "100ms" }
//! delay = "10ms"              # one way, per hop (default 0)
//! loss = 0.0                  # random loss on the forward links (default 0)
//! queue = "100ms"             # per link: bytes or a time at the mean rate (default 100 ms)
//! relays = 1                  # optional: N + 1 hops of this link with a relay between hops
//! cross = { trace = "../../shared/data/traces/x", scale = 0.5, trace_bin = "100ms", packet = 1200 }
//! # cross = { rate = "5mbit" } | { synthetic = { mean = "5mbit", cov = 0.5 } }
//! #                           # cross traffic on the path's FIRST hop (source side)
//! cut = { at = "20s", for = "5s" }  # optional: the first hop, both ways, is cut
//!
//! [[stream]]
//! name = "critical"
//! spec = "rate=3mbit@0.95,rtt<=60ms@0.9"  # the spec string (braid_core::session::spec_str)
//! pin = ["a"]                 # optional: only these paths
//! source = "cbr:3mbit:1000B"  # the SOURCE string (braid_core::session::source_spec):
//! # source = "greedy:1200B" | "trace:../../shared/data/video/mmgc2019_live_sports/frame_trace_0:1200B"
//! start = "0s"                # default 0
//! stop = "40s"                # default: the end
//! ```
//! `spec` and `source` are braid's one grammar of streams, as `braid
//! stream` takes them: a stream with `name`, `spec` and `source` pastes
//! into `braid stream --config` unchanged. The older table form (`kind`,
//! `rate`, `probability`, `x`, `y`, `window`, `size`, `max_misses`,
//! `weight`, `delivery`, `deadline`, `rtt`, `loss`, `delay`, `copies`,
//! `inflight`; `source = { kind = "cbr" | "greedy" | "frames", … }`)
//! still reads the same, with one [`SessionScenario::warnings`] line per
//! use giving the string that replaces it.
//!
//! A stream with no `source` is fed at the rate its spec asks for
//! (constant rate, messages of the spec's `size` or 1000 bytes); a
//! best-effort stream with no source is greedy (1200-byte messages).

use super::apps::{Infeasible, SourceStream};
use super::raw::{RawCross, RawPath, RawSession};
use super::setup::{CrossDef, HopDef, PathDef, SessionSim};
use crate::build::{queue_bytes, realise_capacity};
use crate::scenario::{
    sp, Builder, CapacitySpec, Locator, QueueSpec, ScenarioError, ScenarioErrorKind as K,
    DEFAULT_SEED, MAX_DURATION,
};
use braid_core::link::Capacity;
use braid_core::link::LinkConfig;
use braid_core::session::{SchedulerKind, SessionConfig};
use braid_core::{Duration, Instant};
use std::path::Path;
use toml::Spanned;

/// Most paths in a session scenario (the session's own bound).
pub const MAX_SCENARIO_PATHS: usize = braid_core::session::MAX_PATHS;
/// Most streams in a session scenario.
pub const MAX_SCENARIO_STREAMS: usize = 256;
/// Most relays on one path.
pub const MAX_RELAYS: u32 = 16;
/// Default warm-up left out of the report's 1 s windows.
pub const DEFAULT_WARMUP: Duration = Duration::from_secs(5);
/// Default message size of a source with none given.
pub const DEFAULT_MESSAGE: u32 = 1000;
/// Default message size of a greedy source.
pub const DEFAULT_GREEDY_MESSAGE: u32 = 1200;
/// Default packet size of cross traffic.
pub const DEFAULT_CROSS_PACKET: u32 = 1200;

/// Cross traffic on a path's first hop.
#[derive(Debug, Clone, PartialEq)]
pub struct CrossSpec {
    /// Its rate over time.
    pub rate: CapacitySpec,
    /// Packet size on the wire.
    pub packet: u32,
}

/// One validated `[[path]]`.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionPathSpec {
    /// Name (unique).
    pub name: String,
    /// Capacity of every hop, both ways.
    pub capacity: CapacitySpec,
    /// One-way delay per hop.
    pub delay: Duration,
    /// Random loss on forward links.
    pub loss: f64,
    /// Queue bound of every link.
    pub queue: QueueSpec,
    /// Relays (the path has `relays + 1` hops).
    pub relays: u32,
    /// Cross traffic on the first hop.
    pub cross: Option<CrossSpec>,
    /// The first hop is cut (both ways) during `[from, to)`.
    pub cut: Option<(Duration, Duration)>,
}

/// A validated session scenario (see the module docs for the format).
#[derive(Debug, Clone)]
pub struct SessionScenario {
    /// Display name.
    pub name: String,
    /// The file it came from, as given (or `<inline>`).
    pub file: String,
    /// Seed of the run.
    pub seed: u64,
    /// Length of the run.
    pub duration: Duration,
    /// 1 s windows before this are left out of reports.
    pub warmup: Duration,
    /// The scheduler of the source.
    pub scheduler: SchedulerKind,
    /// Best effort's queueing-delay target on paths with guarantees
    /// (`bulk_yield = "30ms"`, or `"off"`; [`SessionConfig::bulk_yield`]).
    pub bulk_yield: Option<Duration>,
    /// The step size of the promises' correction from outcomes
    /// (`calibration = "0.05"`, or `"off"`; [`SessionConfig::calibration`]).
    pub calibration: Option<f64>,
    /// Re-map at once when a path dips below half its promise
    /// (`react_to_dips = false` to wait for the estimate;
    /// [`SessionConfig::react_to_dips`]).
    pub react_to_dips: bool,
    /// How the source answers an upcall (`on_infeasible = "lower"`, the
    /// default as in `braid stream`; `"accept"`: best effort; `"drop"`).
    pub on_infeasible: Infeasible,
    /// The paths; path `i` is `PathId(i)`.
    pub paths: Vec<SessionPathSpec>,
    /// The streams; stream `i` is `StreamId(i + 1)`.
    pub streams: Vec<SourceStream>,
    /// Deprecated forms the file used, one line each with the form that
    /// replaces it (`FILE: line N: stream `x`: … write spec = "…"`).
    pub warnings: Vec<String>,
}

impl SessionScenario {
    /// Parses a scenario from text; relative paths resolve against the
    /// current directory and errors name the file `<inline>`.
    ///
    /// # Errors
    /// See [`SessionScenario::from_toml_str_at`].
    pub fn from_toml_str(text: &str) -> Result<SessionScenario, ScenarioError> {
        parse(text, "<inline>".to_string(), Path::new("."), "inline")
    }

    /// Parses a scenario's text as if it were the file `path`.
    ///
    /// # Errors
    /// [`ScenarioError`] for malformed TOML, unknown or missing keys, a
    /// value that does not parse or validate (a probability of 1.5), an
    /// unknown or duplicated path or stream name, or a trace that is
    /// missing or invalid; it names the file and, where known, the line.
    pub fn from_toml_str_at(text: &str, path: &Path) -> Result<SessionScenario, ScenarioError> {
        let (dir, stem) = crate::scenario::dir_and_stem(path, "session");
        parse(text, path.display().to_string(), dir, &stem)
    }

    /// Reads and parses the scenario file at `path`.
    ///
    /// # Errors
    /// As [`SessionScenario::from_toml_str_at`], plus an unreadable file.
    pub fn from_path(path: impl AsRef<Path>) -> Result<SessionScenario, ScenarioError> {
        let path = path.as_ref();
        Self::from_toml_str_at(&crate::scenario::read_file(path)?, path)
    }

    /// The same scenario with another seed.
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// The same scenario with another scheduler.
    pub fn with_scheduler(mut self, scheduler: SchedulerKind) -> Self {
        self.scheduler = scheduler;
        self
    }

    /// The same scenario with best effort's queueing-delay target set
    /// (`None`: best effort does not yield).
    pub fn with_bulk_yield(mut self, target: Option<Duration>) -> Self {
        self.bulk_yield = target;
        self
    }

    /// The same scenario with the promises' correction set (`None`: off).
    pub fn with_calibration(mut self, gamma: Option<f64>) -> Self {
        self.calibration = gamma;
        self
    }

    /// The runnable description: links per hop (named
    /// `<path>:hop<k>:fwd|back`), cross traffic (`<path>:cross`) and the
    /// streams. Synthetic capacities are drawn from the seed and the
    /// path's name, so every hop of a path has the same capacity series.
    ///
    /// # Errors
    /// A synthetic capacity too long to draw for the run.
    pub fn sim(&self) -> Result<SessionSim, ScenarioError> {
        let err = |what: String| ScenarioError {
            file: self.file.clone(),
            line: None,
            kind: K::Value,
            message: what,
        };
        let mut paths = Vec::with_capacity(self.paths.len());
        let mut cross = Vec::new();
        for (i, p) in self.paths.iter().enumerate() {
            let capacity = realise_capacity(&p.capacity, self.seed, &p.name, self.duration)
                .map_err(|e| err(format!("path `{}`: {e}", p.name)))?;
            let queue = queue_bytes(p.queue, &capacity);
            let outages = p
                .cut
                .map(|(a, b)| vec![(Instant::ZERO + a, Instant::ZERO + b)])
                .unwrap_or_default();
            let hops = (0..=p.relays)
                .map(|k| {
                    let link = |dir: &str, loss: f64, cut: bool| LinkConfig {
                        loss,
                        queue_bytes: queue,
                        outages: if cut && k == 0 {
                            outages.clone()
                        } else {
                            Vec::new()
                        },
                        ..LinkConfig::new(
                            format!("{}:hop{k}:{dir}", p.name),
                            capacity.clone(),
                            p.delay,
                        )
                    };
                    HopDef {
                        forward: link("fwd", p.loss, true),
                        back: link("back", 0.0, true),
                    }
                })
                .collect();
            paths.push(PathDef {
                name: p.name.clone(),
                hops,
            });
            if let Some(c) = &p.cross {
                let label = format!("{}:cross", p.name);
                let rate: Capacity = realise_capacity(&c.rate, self.seed, &label, self.duration)
                    .map_err(|e| err(format!("path `{}` cross: {e}", p.name)))?;
                cross.push(CrossDef {
                    name: label,
                    path: i,
                    hop: 0,
                    rate,
                    packet: c.packet,
                });
            }
        }
        Ok(SessionSim {
            name: self.name.clone(),
            seed: self.seed,
            duration: self.duration,
            bin: Duration::from_secs(1),
            paths,
            streams: self.streams.clone(),
            cross,
            config: SessionConfig {
                scheduler: self.scheduler,
                bulk_yield: self.bulk_yield,
                calibration: self.calibration,
                react_to_dips: self.react_to_dips,
                ..SessionConfig::default()
            },
            on_infeasible: Some(self.on_infeasible),
        })
    }
}

fn parse(
    text: &str,
    file: String,
    dir: &Path,
    stem: &str,
) -> Result<SessionScenario, ScenarioError> {
    let loc = Locator { file, text };
    let raw: RawSession =
        toml::from_str(text).map_err(|e| loc.err(e.span(), K::Syntax, e.message().to_string()))?;
    let b = Builder { loc: &loc, dir };
    Session {
        b: &b,
        warnings: Default::default(),
    }
    .build(raw, stem)
}

/// Validates a raw session scenario (streams: [`super::scenario_streams`]).
pub(super) struct Session<'a> {
    pub(super) b: &'a Builder<'a>,
    /// Deprecation warnings, one line each (`FILE: line N: …`).
    pub(super) warnings: std::cell::RefCell<Vec<String>>,
}

impl Session<'_> {
    fn build(&self, raw: RawSession, stem: &str) -> Result<SessionScenario, ScenarioError> {
        let b = self.b;
        let duration = b.duration(&raw.duration, "duration")?;
        if duration < Duration::from_secs(1) || duration > MAX_DURATION {
            return Err(b.err(
                sp(&raw.duration),
                K::Value,
                format!("duration must be between 1s and {MAX_DURATION}"),
            ));
        }
        let warmup = match &raw.warmup {
            None => DEFAULT_WARMUP.min(Duration::from_nanos(duration.as_nanos() / 4)),
            Some(w) => {
                let d = b.duration(w, "warmup")?;
                if d >= duration {
                    return Err(b.err(sp(w), K::Value, "warmup must be shorter than the run"));
                }
                d
            }
        };
        let scheduler = match &raw.scheduler {
            None => SchedulerKind::default(),
            Some(s) => s
                .get_ref()
                .parse::<SchedulerKind>()
                .map_err(|e| b.err(sp(s), K::Value, e.to_string()))?,
        };
        let bulk_yield = match &raw.bulk_yield {
            None => SessionConfig::default().bulk_yield,
            Some(s) => braid_core::session::bulk_yield::parse_target(s.get_ref())
                .map_err(|e| b.err(sp(s), K::Value, e))?,
        };
        let calibration = match &raw.calibration {
            None => SessionConfig::default().calibration,
            Some(s) => braid_core::estimate::parse_gamma(s.get_ref())
                .map_err(|e| b.err(sp(s), K::Value, e))?,
        };
        let on_infeasible = match &raw.on_infeasible {
            None => Infeasible::default(),
            Some(s) => s
                .get_ref()
                .parse::<Infeasible>()
                .ok()
                .filter(|p| *p != Infeasible::Fail)
                .ok_or_else(|| {
                    // `fail` ends a real run; a simulated source cannot.
                    format!(
                        "unknown answer `{}` (lower, accept or drop)",
                        s.get_ref().trim()
                    )
                })
                .map_err(|e: String| b.err(sp(s), K::Value, format!("on_infeasible: {e}")))?,
        };
        if raw.paths.is_empty() {
            return Err(b.err(None, K::Value, "a session needs at least one [[path]]"));
        }
        if raw.paths.len() > MAX_SCENARIO_PATHS {
            return Err(b.err(
                None,
                K::Value,
                format!("more than {MAX_SCENARIO_PATHS} paths"),
            ));
        }
        if raw.streams.is_empty() {
            return Err(b.err(None, K::Value, "a session needs at least one [[stream]]"));
        }
        if raw.streams.len() > MAX_SCENARIO_STREAMS {
            return Err(b.err(
                None,
                K::Value,
                format!("more than {MAX_SCENARIO_STREAMS} streams"),
            ));
        }
        let path_names = b.names(
            &raw.paths.iter().map(|p| &p.name).collect::<Vec<_>>(),
            "path",
        )?;
        b.names(
            &raw.streams.iter().map(|s| &s.name).collect::<Vec<_>>(),
            "stream",
        )?;
        let mut paths = Vec::with_capacity(raw.paths.len());
        for p in &raw.paths {
            paths.push(self.path(p, duration)?);
        }
        let mut streams = Vec::with_capacity(raw.streams.len());
        for s in &raw.streams {
            streams.push(self.stream(s, &path_names, duration)?);
        }
        Ok(SessionScenario {
            name: raw.name.unwrap_or_else(|| stem.to_string()),
            file: b.loc.file.clone(),
            seed: raw.seed.unwrap_or(DEFAULT_SEED),
            duration,
            warmup,
            scheduler,
            bulk_yield,
            calibration,
            react_to_dips: raw
                .react_to_dips
                .unwrap_or(SessionConfig::default().react_to_dips),
            on_infeasible,
            paths,
            streams,
            warnings: self.warnings.take(),
        })
    }

    fn one_capacity(
        &self,
        ctx: &str,
        span: Option<std::ops::Range<usize>>,
        given: [bool; 3],
    ) -> Result<(), ScenarioError> {
        if given.iter().filter(|&&g| g).count() != 1 {
            return Err(self.b.err(
                span,
                K::Value,
                format!("{ctx}: give exactly one of rate, trace or synthetic"),
            ));
        }
        Ok(())
    }

    fn path(&self, p: &RawPath, duration: Duration) -> Result<SessionPathSpec, ScenarioError> {
        let b = self.b;
        let name = p.name.get_ref().trim().to_string();
        let ctx = format!("path `{name}`");
        self.one_capacity(
            &ctx,
            sp(&p.name),
            [p.rate.is_some(), p.trace.is_some(), p.synthetic.is_some()],
        )?;
        let capacity = b.capacity(
            &ctx,
            &p.rate,
            (&p.trace, &p.trace_format, &p.trace_bin, &p.scale),
            &p.synthetic,
        )?;
        let delay = match &p.delay {
            None => Duration::ZERO,
            Some(d) => b.duration(d, &format!("{ctx} delay"))?,
        };
        let queue = match &p.queue {
            None => QueueSpec::Default,
            Some(q) => b.queue(q, &ctx)?,
        };
        let relays = match &p.relays {
            None => 0,
            Some(r) if *r.get_ref() <= MAX_RELAYS => *r.get_ref(),
            Some(r) => {
                return Err(b.err(
                    sp(r),
                    K::Value,
                    format!("{ctx}: at most {MAX_RELAYS} relays"),
                ))
            }
        };
        let cross = match &p.cross {
            None => None,
            Some(c) => Some(self.cross(c, &ctx)?),
        };
        let cut = match &p.cut {
            None => None,
            Some(c) => {
                let c = c.get_ref();
                let at = b.duration(&c.at, &format!("{ctx} cut at"))?;
                let len = b.duration(&c.length, &format!("{ctx} cut for"))?;
                if len.is_zero() || at >= duration {
                    return Err(b.err(
                        sp(&c.at),
                        K::Value,
                        format!("{ctx}: a cut must start within the run and last a while"),
                    ));
                }
                Some((at, at + len))
            }
        };
        Ok(SessionPathSpec {
            name,
            capacity,
            delay,
            loss: b.probability(&p.loss, "loss")?,
            queue,
            relays,
            cross,
            cut,
        })
    }

    fn cross(&self, c: &Spanned<RawCross>, ctx: &str) -> Result<CrossSpec, ScenarioError> {
        let b = self.b;
        let ctx = format!("{ctx} cross");
        let r = c.get_ref();
        self.one_capacity(
            &ctx,
            sp(c),
            [r.rate.is_some(), r.trace.is_some(), r.synthetic.is_some()],
        )?;
        let rate = b.capacity(
            &ctx,
            &r.rate,
            (&r.trace, &r.trace_format, &r.trace_bin, &r.scale),
            &r.synthetic,
        )?;
        let packet = match &r.packet {
            None => DEFAULT_CROSS_PACKET,
            Some(p) if (crate::wire::HEADER_LEN as u32..=65_535).contains(p.get_ref()) => {
                *p.get_ref()
            }
            Some(p) => {
                return Err(b.err(
                    sp(p),
                    K::Value,
                    format!(
                        "{ctx}: packet must be between {} and 65535 bytes",
                        crate::wire::HEADER_LEN
                    ),
                ))
            }
        };
        Ok(CrossSpec { rate, packet })
    }
}
