//! Session scenarios, part two: the `[[stream]]` tables — spec, delivery,
//! per-path bounds, pinning, copies and source — validated into
//! [`SourceStream`]s (the format is documented on [`super::scenario`];
//! seed 000 §V-A's stream specs).

use super::apps::{SourceStream, Workload};
use super::frames::{load_frames, FrameFormat, FrameTraceError};
use super::raw::{RawSource, RawSourceTable, RawStream};
use super::scenario::{Session, DEFAULT_GREEDY_MESSAGE, DEFAULT_MESSAGE};
use crate::scenario::{sp, Builder, ScenarioError, ScenarioErrorKind as K};
use braid_core::scheduler::StreamSpec;
use braid_core::session::source_spec::SourceSpec;
use braid_core::session::{Delivery, SessionConfig, StreamConfig, StreamConfigError};
use braid_core::{Bandwidth, Duration, Instant, PathId};
use toml::Spanned;

/// A probability strictly inside (0, 1), as the specs need.
fn open_probability(b: &Builder<'_>, p: &Spanned<f64>, what: &str) -> Result<f64, ScenarioError> {
    let v = *p.get_ref();
    if v > 0.0 && v < 1.0 {
        Ok(v)
    } else {
        Err(b.err(
            sp(p),
            K::Value,
            format!("{what} must be strictly between 0 and 1, got {v}"),
        ))
    }
}

impl Session<'_> {
    fn need<'v, T>(
        &self,
        v: &'v Option<Spanned<T>>,
        kind: &Spanned<String>,
        ctx: &str,
        key: &str,
    ) -> Result<&'v Spanned<T>, ScenarioError> {
        v.as_ref().ok_or_else(|| {
            self.b.err(
                sp(kind),
                K::Value,
                format!("{ctx}: kind {:?} needs `{key}`", kind.get_ref()),
            )
        })
    }

    /// The table keys of the deprecated spec form that `s` sets.
    fn table_keys(s: &RawStream) -> Vec<&'static str> {
        let set = [
            ("rate", s.rate.is_some()),
            ("probability", s.probability.is_some()),
            ("x", s.x.is_some()),
            ("y", s.y.is_some()),
            ("window", s.window.is_some()),
            ("size", s.size.is_some()),
            ("max_misses", s.max_misses.is_some()),
            ("weight", s.weight.is_some()),
            ("delivery", s.delivery.is_some()),
            ("deadline", s.deadline.is_some()),
            ("rtt", s.rtt.is_some()),
            ("loss", s.loss.is_some()),
            ("delay", s.delay.is_some()),
            ("copies", s.copies.is_some()),
            ("inflight", s.inflight.is_some()),
        ];
        set.iter().filter(|(_, on)| *on).map(|(k, _)| *k).collect()
    }

    /// The stream's configuration, from `spec = "…"` or the deprecated
    /// `kind` table (with a warning that gives the spec string).
    fn config(&self, s: &RawStream, ctx: &str) -> Result<StreamConfig, ScenarioError> {
        let b = self.b;
        match (&s.spec, &s.kind) {
            (Some(text), None) => {
                let keys = Self::table_keys(s);
                if !keys.is_empty() {
                    return Err(b.err(
                        sp(text),
                        K::Value,
                        format!(
                            "{ctx}: `spec` holds the whole spec; write {} inside it, not as keys",
                            keys.join(", ")
                        ),
                    ));
                }
                text.get_ref()
                    .trim()
                    .parse::<StreamConfig>()
                    .map_err(|e| b.err(sp(text), K::Value, format!("{ctx}: {e}")))
            }
            (None, Some(kind)) => {
                let config = self.table_config(s, kind, ctx)?;
                self.warn(
                    sp(kind),
                    format!("{ctx}: `kind` and its keys are deprecated: write spec = \"{config}\""),
                );
                Ok(config)
            }
            (Some(text), Some(_)) => Err(b.err(
                sp(text),
                K::Value,
                format!("{ctx}: give `spec` or the deprecated `kind`, not both"),
            )),
            (None, None) => Err(b.err(
                sp(&s.name),
                K::Value,
                format!("{ctx}: needs spec = \"…\" (e.g. rate=3mbit@0.95 or best-effort)"),
            )),
        }
    }

    /// Records a deprecation warning at `span`.
    fn warn(&self, span: Option<std::ops::Range<usize>>, message: String) {
        let text = self.b.err(span, K::Value, message).to_string();
        self.warnings.borrow_mut().push(text);
    }

    fn spec(
        &self,
        s: &RawStream,
        kind: &Spanned<String>,
        ctx: &str,
    ) -> Result<StreamSpec, ScenarioError> {
        let b = self.b;
        let prob = |v: &Option<Spanned<f64>>| -> Result<f64, ScenarioError> {
            open_probability(
                b,
                self.need(v, kind, ctx, "probability")?,
                &format!("{ctx} probability"),
            )
        };
        let window = |v: &Option<Spanned<String>>| -> Result<Duration, ScenarioError> {
            b.duration(self.need(v, kind, ctx, "window")?, &format!("{ctx} window"))
        };
        let count = |v: &Option<Spanned<u32>>, key: &str| -> Result<u32, ScenarioError> {
            Ok(*self.need(v, kind, ctx, key)?.get_ref())
        };
        let spec = match kind.get_ref().as_str() {
            "rate" => {
                let r = self.need(&s.rate, kind, ctx, "rate")?;
                StreamSpec::min_rate(b.rate(r, &format!("{ctx} rate"))?, prob(&s.probability)?)
            }
            "window" => StreamSpec::window(
                count(&s.x, "x")?,
                count(&s.y, "y")?,
                window(&s.window)?,
                count(&s.size, "size")?,
                prob(&s.probability)?,
            ),
            "violation" => {
                let m = *self.need(&s.max_misses, kind, ctx, "max_misses")?.get_ref();
                StreamSpec::violation_bound(
                    count(&s.x, "x")?,
                    window(&s.window)?,
                    count(&s.size, "size")?,
                    m,
                )
            }
            "best-effort" | "best_effort" => {
                StreamSpec::best_effort(s.weight.as_ref().map_or(1, |w| *w.get_ref()))
            }
            other => {
                return Err(b.err(
                    sp(kind),
                    K::Value,
                    format!(
                        "{ctx}: unknown kind {other:?}: use rate, window, violation or best-effort"
                    ),
                ))
            }
        };
        spec.map_err(|e| b.err(sp(kind), K::Value, format!("{ctx}: {e}")))
    }

    /// The deprecated `kind` table's configuration.
    fn table_config(
        &self,
        s: &RawStream,
        kind: &Spanned<String>,
        ctx: &str,
    ) -> Result<StreamConfig, ScenarioError> {
        let b = self.b;
        let spec = self.spec(s, kind, ctx)?;
        let delivery = match s.delivery.as_ref().map(|d| (d, d.get_ref().as_str())) {
            None | Some((_, "reliable")) => Delivery::Reliable,
            Some((_, "unreliable")) => Delivery::Unreliable,
            Some((d, "deadline")) => {
                let Some(t) = &s.deadline else {
                    return Err(b.err(
                        sp(d),
                        K::Value,
                        format!("{ctx}: delivery = \"deadline\" needs `deadline`"),
                    ));
                };
                Delivery::Deadline {
                    ttl: b.duration(t, &format!("{ctx} deadline"))?,
                }
            }
            Some((d, other)) => {
                return Err(b.err(
                    sp(d),
                    K::Value,
                    format!(
                        "{ctx}: unknown delivery {other:?}: use reliable, unreliable or deadline"
                    ),
                ))
            }
        };
        if let (Some(t), false) = (&s.deadline, matches!(delivery, Delivery::Deadline { .. })) {
            return Err(b.err(
                sp(t),
                K::Value,
                format!("{ctx}: `deadline` needs delivery = \"deadline\""),
            ));
        }
        let mut config = StreamConfig::new(spec).with_delivery(delivery);
        if let Some(r) = &s.rtt {
            let r = r.get_ref();
            config = config.with_rtt(
                b.duration(&r.max, &format!("{ctx} rtt max"))?,
                open_probability(b, &r.probability, &format!("{ctx} rtt probability"))?,
            );
        }
        if let Some(d) = &s.delay {
            let d = d.get_ref();
            config = config.with_delay(
                b.duration(&d.max, &format!("{ctx} delay max"))?,
                open_probability(b, &d.probability, &format!("{ctx} delay probability"))?,
            );
        }
        if let Some(l) = &s.loss {
            let l = l.get_ref();
            let max = *l.max.get_ref();
            if !(0.0..=1.0).contains(&max) {
                return Err(b.err(
                    sp(&l.max),
                    K::Value,
                    format!("{ctx}: loss max must be between 0 and 1, got {max}"),
                ));
            }
            config = config.with_loss(
                max,
                open_probability(b, &l.probability, &format!("{ctx} loss probability"))?,
            );
        }
        if let Some(c) = &s.copies {
            config = config.with_copies(*c.get_ref());
        }
        if let Some(w) = &s.inflight {
            config = config.with_window(*w.get_ref());
        }
        Ok(config)
    }

    pub(super) fn stream(
        &self,
        s: &RawStream,
        paths: &[String],
        duration: Duration,
    ) -> Result<SourceStream, ScenarioError> {
        let b = self.b;
        let name = s.name.get_ref().trim().to_string();
        let ctx = format!("stream `{name}`");
        let mut config = self.config(s, &ctx)?;
        if let Some(pin) = &s.pin {
            let mut ids = Vec::new();
            for n in pin.get_ref() {
                let name = n.get_ref().trim();
                let Some(i) = paths.iter().position(|p| p == name) else {
                    return Err(b.err(
                        sp(n),
                        K::Undefined,
                        format!(
                            "{ctx}: pin names undefined path `{name}` (paths: {})",
                            paths.join(", ")
                        ),
                    ));
                };
                ids.push(PathId(i as u32));
            }
            config = config.pinned_to(ids);
        }
        config.validate().map_err(|e| {
            let span = s
                .copies
                .as_ref()
                .filter(|_| matches!(e, StreamConfigError::Copies(_)))
                .map(|c| c.span())
                .or_else(|| {
                    s.inflight
                        .as_ref()
                        .map(|w| w.span())
                        .filter(|_| matches!(e, StreamConfigError::Window(_)))
                })
                .or_else(|| {
                    s.deadline
                        .as_ref()
                        .map(|d| d.span())
                        .filter(|_| matches!(e, StreamConfigError::Ttl(_)))
                })
                .unwrap_or_else(|| s.name.span());
            b.err(Some(span), K::Value, format!("{ctx}: {e}"))
        })?;
        let workload = match &s.source {
            Some(src) => self.source(src, &ctx)?,
            None => default_workload(&config.spec),
        };
        let start = match &s.start {
            None => Duration::ZERO,
            Some(t) => b.duration(t, &format!("{ctx} start"))?,
        };
        let stop = match &s.stop {
            None => duration,
            Some(t) => b.duration(t, &format!("{ctx} stop"))?.min(duration),
        };
        if stop <= start {
            return Err(b.err(
                sp(&s.name),
                K::Value,
                format!("{ctx}: stop must be after start"),
            ));
        }
        Ok(SourceStream {
            name,
            config,
            workload,
            start: Instant::ZERO + start,
            stop: Instant::ZERO + stop,
        })
    }

    /// A stream's workload from `source = "…"` (braid's one SOURCE
    /// grammar), or from the deprecated table (with a warning that gives
    /// the string).
    fn source(&self, src: &Spanned<RawSource>, ctx: &str) -> Result<Workload, ScenarioError> {
        let b = self.b;
        let ctx = format!("{ctx} source");
        let text = match src.get_ref() {
            RawSource::Text(t) => t,
            RawSource::Table(r) => {
                let w = self.source_table(r, &ctx)?;
                let spec = match &w {
                    Workload::Cbr { rate, size } => Some(SourceSpec::Cbr {
                        rate: *rate,
                        size: *size,
                    }),
                    Workload::Greedy { size } => Some(SourceSpec::Greedy { size: *size }),
                    Workload::Frames { size, .. } => r.trace.as_ref().map(|t| SourceSpec::Trace {
                        path: t.get_ref().into(),
                        fps: r.fps.as_ref().map(|f| *f.get_ref()),
                        size: *size,
                    }),
                };
                if let Some(spec) = spec {
                    self.warn(
                        sp(src),
                        format!("{ctx}: source tables are deprecated: write source = \"{spec}\""),
                    );
                }
                return Ok(w);
            }
        };
        let spec: SourceSpec = text
            .trim()
            .parse()
            .map_err(|e| b.err(sp(src), K::Value, format!("{ctx}: {e}")))?;
        Ok(match spec {
            SourceSpec::Cbr { rate, size } => Workload::Cbr { rate, size },
            SourceSpec::Greedy { size } => Workload::Greedy { size },
            SourceSpec::Trace { path, fps, size } => {
                let file = b.dir.join(&path);
                let trace = load_frames(&file, None).map_err(|e| {
                    let what = match &e {
                        FrameTraceError::Io { .. } => "cannot read frame trace",
                        _ => "bad frame trace",
                    };
                    b.err(sp(src), K::Trace, format!("{what} {e}"))
                })?;
                let fps = fps.unwrap_or(trace.fps);
                if !(fps > 0.0 && fps <= 1000.0) {
                    return Err(b.err(sp(src), K::Value, format!("{ctx}: fps must be in (0, 1000]")));
                }
                Workload::Frames {
                    frames: trace.sizes,
                    period: Duration::from_nanos((1e9 / fps).round() as u64),
                    size,
                }
            }
            other => {
                return Err(b.err(
                    sp(src),
                    K::Value,
                    format!("{ctx}: {other:?} is not a simulated source: use cbr:RATE[:SIZE], greedy[:SIZE] or trace:FILE[:FPS][:SIZE]"),
                ))
            }
        })
    }

    fn source_table(&self, r: &RawSourceTable, ctx: &str) -> Result<Workload, ScenarioError> {
        let b = self.b;
        let ctx = ctx.to_string();
        let size = |default: u32| -> Result<u32, ScenarioError> {
            match &r.size {
                None => Ok(default),
                Some(s)
                    if (1..=SessionConfig::default().max_message as u32).contains(s.get_ref()) =>
                {
                    Ok(*s.get_ref())
                }
                Some(s) => Err(b.err(
                    sp(s),
                    K::Value,
                    format!("{ctx}: size must be between 1 byte and 1 MiB"),
                )),
            }
        };
        let need = |v: bool, key: &str| -> Result<(), ScenarioError> {
            if v {
                Ok(())
            } else {
                Err(b.err(
                    sp(&r.kind),
                    K::Value,
                    format!("{ctx}: kind {:?} needs `{key}`", r.kind.get_ref()),
                ))
            }
        };
        Ok(match r.kind.get_ref().as_str() {
            "cbr" => {
                need(r.rate.is_some(), "rate")?;
                let rate = r.rate.as_ref().map(|v| b.rate(v, &format!("{ctx} rate")));
                let rate = rate.unwrap_or(Ok(Bandwidth::ZERO))?;
                if rate == Bandwidth::ZERO {
                    return Err(b.err(
                        sp(&r.kind),
                        K::Value,
                        format!("{ctx}: rate must be positive"),
                    ));
                }
                Workload::Cbr {
                    rate,
                    size: size(DEFAULT_MESSAGE)?,
                }
            }
            "greedy" => Workload::Greedy {
                size: size(DEFAULT_GREEDY_MESSAGE)?,
            },
            "frames" => {
                need(r.trace.is_some(), "trace")?;
                let Some(t) = &r.trace else {
                    return Err(b.err(sp(&r.kind), K::Value, format!("{ctx}: needs `trace`")));
                };
                let format = match &r.format {
                    None => None,
                    Some(f) => Some(FrameFormat::parse(f.get_ref()).ok_or_else(|| {
                        b.err(
                            sp(f),
                            K::Value,
                            format!("{ctx}: unknown format {:?}: use mmgc or asu", f.get_ref()),
                        )
                    })?),
                };
                let file = b.dir.join(t.get_ref());
                let trace = load_frames(&file, format).map_err(|e| {
                    let what = match &e {
                        FrameTraceError::Io { .. } => "cannot read frame trace",
                        _ => "bad frame trace",
                    };
                    b.err(sp(t), K::Trace, format!("{what} {e}"))
                })?;
                let fps = match &r.fps {
                    None => trace.fps,
                    Some(f)
                        if f.get_ref().is_finite()
                            && *f.get_ref() > 0.0
                            && *f.get_ref() <= 1000.0 =>
                    {
                        *f.get_ref()
                    }
                    Some(f) => {
                        return Err(b.err(
                            sp(f),
                            K::Value,
                            format!("{ctx}: fps must be in (0, 1000]"),
                        ))
                    }
                };
                Workload::Frames {
                    frames: trace.sizes,
                    period: Duration::from_nanos((1e9 / fps).round() as u64),
                    size: size(DEFAULT_GREEDY_MESSAGE)?,
                }
            }
            other => {
                return Err(b.err(
                    sp(&r.kind),
                    K::Value,
                    format!("{ctx}: unknown kind {other:?}: use cbr, greedy or frames"),
                ))
            }
        })
    }
}

/// What feeds a stream with no `source`: its spec's rate, or greedy.
fn default_workload(spec: &StreamSpec) -> Workload {
    let size = match *spec {
        StreamSpec::Window { message_size, .. }
        | StreamSpec::ViolationBound { message_size, .. } => message_size,
        _ => DEFAULT_MESSAGE,
    };
    match spec.required_rate() {
        Some(rate) => Workload::Cbr { rate, size },
        None => Workload::Greedy {
            size: DEFAULT_GREEDY_MESSAGE,
        },
    }
}
