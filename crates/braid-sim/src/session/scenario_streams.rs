//! Session scenarios, part two: the `[[stream]]` tables — spec, delivery,
//! per-path bounds, pinning, copies and source — validated into
//! [`SourceStream`]s (the format is documented on [`super::scenario`];
//! seed 000 §V-A's stream specs).

use super::apps::{SourceStream, Workload};
use super::frames::{load_frames, FrameFormat, FrameTraceError};
use super::raw::{RawSource, RawStream};
use super::scenario::{Session, DEFAULT_GREEDY_MESSAGE, DEFAULT_MESSAGE};
use crate::scenario::{sp, Builder, ScenarioError, ScenarioErrorKind as K};
use braid_core::scheduler::StreamSpec;
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
        s: &RawStream,
        ctx: &str,
        key: &str,
    ) -> Result<&'v Spanned<T>, ScenarioError> {
        v.as_ref().ok_or_else(|| {
            self.b.err(
                sp(&s.kind),
                K::Value,
                format!("{ctx}: kind {:?} needs `{key}`", s.kind.get_ref()),
            )
        })
    }

    fn spec(&self, s: &RawStream, ctx: &str) -> Result<StreamSpec, ScenarioError> {
        let b = self.b;
        let prob = |v: &Option<Spanned<f64>>| -> Result<f64, ScenarioError> {
            open_probability(
                b,
                self.need(v, s, ctx, "probability")?,
                &format!("{ctx} probability"),
            )
        };
        let window = |v: &Option<Spanned<String>>| -> Result<Duration, ScenarioError> {
            b.duration(self.need(v, s, ctx, "window")?, &format!("{ctx} window"))
        };
        let count = |v: &Option<Spanned<u32>>, key: &str| -> Result<u32, ScenarioError> {
            Ok(*self.need(v, s, ctx, key)?.get_ref())
        };
        let spec = match s.kind.get_ref().as_str() {
            "rate" => {
                let r = self.need(&s.rate, s, ctx, "rate")?;
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
                let m = *self.need(&s.max_misses, s, ctx, "max_misses")?.get_ref();
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
                    sp(&s.kind),
                    K::Value,
                    format!(
                        "{ctx}: unknown kind {other:?}: use rate, window, violation or best-effort"
                    ),
                ))
            }
        };
        spec.map_err(|e| b.err(sp(&s.kind), K::Value, format!("{ctx}: {e}")))
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
        let spec = self.spec(s, &ctx)?;
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
        if let Some(c) = &s.copies {
            config = config.with_copies(*c.get_ref());
        }
        if let Some(w) = &s.inflight {
            config = config.with_window(*w.get_ref());
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

    fn source(&self, src: &Spanned<RawSource>, ctx: &str) -> Result<Workload, ScenarioError> {
        let b = self.b;
        let r = src.get_ref();
        let ctx = format!("{ctx} source");
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
