//! Stream specs as one line of text: what `braid stream --stream
//! NAME:SPEC:SOURCE` and session files take, and what live views print.
//!
//! Main items: `impl FromStr for StreamConfig`, `impl Display for
//! StreamConfig`, [`SpecStrError`], [`split_spec`].
//!
//! A spec string is terms joined by `,`: exactly one **kind** term (what the
//! scheduler guarantees, seed 000 §V-A) and any number of **modifiers**
//! (delivery, path bounds, redundancy, window), each at most once:
//!
//! | term | meaning |
//! | --- | --- |
//! | `rate=RATE@P` | at least RATE with probability P (`rate=3.2mbit@0.95`) |
//! | `window=X/Y:TW:SIZE@P` | X of every Y messages of SIZE bytes within each window TW, with probability P (`window=9/10:100ms:1400B@0.99`) |
//! | `violation=X:TW:SIZE<=E` | X messages of SIZE per window TW, expected misses per window E\[Z\] ≤ E (`violation=8:100ms:1000B<=0.5`) |
//! | `best-effort[=W]` | no guarantee; spare capacity shared by weight W (default 1) |
//! | `reliable` / `unreliable` / `deadline=D` | delivery: in order and complete (the default) / as it arrives / as it arrives, never later than D after sending |
//! | `copies=N` | 1 (default) or 2: each message also on the best other path |
//! | `rtt<=D@P` | only paths whose RTT is ≤ D with probability P (`rtt<=80ms@0.95`) |
//! | `loss<=L@P` | only paths whose loss ratio is ≤ L with probability P; L as a ratio or a percentage (`loss<=1%@0.9`) |
//! | `delay<=D@P` | only paths whose one-way delay is ≤ D with probability P (`delay<=150ms@0.95`) |
//! | `window-msgs=N` | messages in flight, at most (default 4096) |
//!
//! RATE uses [`Bandwidth`]'s units (`10mbit`, `1.5gbit`, `12MB/s`), D and
//! TW [`Duration`]'s (`100ms`, `1.5s`), SIZE [`ByteSize`]'s (`1400B`,
//! `64KiB`). A stream's name and pinned paths are not part of the string.
//!
//! `Display` writes the kind first, then the modifiers that differ from
//! [`StreamConfig::new`]'s defaults, with exact numbers, so that
//! `s.to_string().parse()` gives `s` back (a property test checks it).

use super::stream::{Delivery, PathBound, StreamConfig, StreamConfigError, DEFAULT_STREAM_WINDOW};
use crate::scheduler::StreamSpec;
use crate::time::Duration;
use crate::units::{Bandwidth, ByteSize};
use std::fmt;
use std::str::FromStr;

/// Why a spec string was refused. Every message is one line that names
/// the term and the form it expected.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum SpecStrError {
    /// Nothing was given.
    #[error("empty spec: expected e.g. rate=3.2mbit@0.95 or best-effort")]
    Empty,
    /// A term that is not one of the forms.
    #[error("unknown spec term {0:?}: expected rate=, window=, violation=, best-effort, reliable, unreliable, deadline=, copies=, rtt<=, loss<=, delay<= or window-msgs=")]
    UnknownTerm(String),
    /// A known term whose value does not read.
    #[error("spec term {term:?}: {reason} (expected {expected})")]
    BadValue {
        /// The term as written.
        term: String,
        /// Its form.
        expected: &'static str,
        /// What was wrong.
        reason: String,
    },
    /// No kind term (rate, window, violation, best-effort).
    #[error("spec {0:?} has no kind: add one of rate=RATE@P, window=X/Y:TW:SIZE@P, violation=X:TW:SIZE<=E or best-effort")]
    NoKind(String),
    /// A term given twice (or two kinds, or two deliveries).
    #[error("spec term {0:?} repeats an earlier one of its sort")]
    Repeated(String),
    /// Every term read but the whole is not a valid stream.
    #[error("spec {text:?}: {source}")]
    Invalid {
        /// The spec as written.
        text: String,
        /// What [`StreamConfig::validate`] said.
        source: StreamConfigError,
    },
}

const RATE_FORM: &str = "rate=RATE@P, e.g. rate=3.2mbit@0.95";
const WINDOW_FORM: &str = "window=X/Y:TW:SIZE@P, e.g. window=9/10:100ms:1400B@0.99";
const VIOLATION_FORM: &str = "violation=X:TW:SIZE<=E, e.g. violation=8:100ms:1000B<=0.5";
const BEST_EFFORT_FORM: &str = "best-effort or best-effort=WEIGHT, e.g. best-effort=2";
const DEADLINE_FORM: &str = "deadline=DURATION, e.g. deadline=150ms";
const COPIES_FORM: &str = "copies=1 or copies=2";
const RTT_FORM: &str = "rtt<=DURATION@P, e.g. rtt<=80ms@0.95";
const LOSS_FORM: &str = "loss<=RATIO@P or loss<=PERCENT%@P, e.g. loss<=1%@0.9";
const DELAY_FORM: &str = "delay<=DURATION@P, e.g. delay<=150ms@0.95";
const WINDOW_MSGS_FORM: &str = "window-msgs=MESSAGES, e.g. window-msgs=1024";

/// Splits `text` into a spec string and what follows the `:` that ends it,
/// for `NAME:SPEC:SOURCE` arguments whose SOURCE may hold `:` itself.
///
/// The spec ends at the first `:` that is not inside a `window=` or
/// `violation=` term (those hold exactly two). Returns `(text, None)` when
/// no `:` ends it.
///
/// ```
/// use braid_core::session::split_spec;
/// assert_eq!(
///     split_spec("window=9/10:100ms:1400B@0.99,copies=2:cbr:1mbit"),
///     ("window=9/10:100ms:1400B@0.99,copies=2", Some("cbr:1mbit"))
/// );
/// assert_eq!(split_spec("best-effort"), ("best-effort", None));
/// ```
pub fn split_spec(text: &str) -> (&str, Option<&str>) {
    let mut colons_left = inner_colons(text);
    for (i, c) in text.char_indices() {
        match c {
            ',' => colons_left = inner_colons(&text[i + 1..]),
            ':' if colons_left > 0 => colons_left -= 1,
            ':' => return (&text[..i], Some(&text[i + 1..])),
            _ => {}
        }
    }
    (text, None)
}

/// The `:` a term starting at `term` holds inside itself.
fn inner_colons(term: &str) -> usize {
    if term.starts_with("window=") || term.starts_with("violation=") {
        2
    } else {
        0
    }
}

impl FromStr for StreamConfig {
    type Err = SpecStrError;

    /// Reads a spec string (see the module docs for the forms).
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let text = text.trim();
        if text.is_empty() {
            return Err(SpecStrError::Empty);
        }
        let mut spec: Option<StreamSpec> = None;
        let mut delivery: Option<Delivery> = None;
        let mut copies: Option<u8> = None;
        let mut rtt: Option<PathBound<Duration>> = None;
        let mut loss: Option<PathBound<f64>> = None;
        let mut delay: Option<PathBound<Duration>> = None;
        let mut window: Option<u32> = None;
        for term in text.split(',').map(str::trim) {
            let (key, value) = split_term(term);
            let repeated = || SpecStrError::Repeated(term.to_string());
            match key {
                "rate" | "window" | "violation" | "best-effort" => {
                    if spec.is_some() {
                        return Err(repeated());
                    }
                    spec = Some(kind_term(term, key, value)?);
                }
                "reliable" | "unreliable" | "deadline" => {
                    if delivery.is_some() {
                        return Err(repeated());
                    }
                    delivery = Some(delivery_term(term, key, value)?);
                }
                "copies" => {
                    if copies.replace(copies_term(term, value)?).is_some() {
                        return Err(repeated());
                    }
                }
                "rtt" | "delay" => {
                    let (slot, form) = if key == "rtt" {
                        (&mut rtt, RTT_FORM)
                    } else {
                        (&mut delay, DELAY_FORM)
                    };
                    let (max, p) = bound_term(term, value, form)?;
                    let max = parse_duration(term, max, form)?;
                    if slot
                        .replace(PathBound {
                            max,
                            probability: p,
                        })
                        .is_some()
                    {
                        return Err(repeated());
                    }
                }
                "loss" => {
                    let (max, p) = bound_term(term, value, LOSS_FORM)?;
                    let max = parse_loss(term, max)?;
                    if loss
                        .replace(PathBound {
                            max,
                            probability: p,
                        })
                        .is_some()
                    {
                        return Err(repeated());
                    }
                }
                "window-msgs" => {
                    let v = value.ok_or_else(|| bad(term, WINDOW_MSGS_FORM, "no value"))?;
                    let n = parse_count(term, v.text, WINDOW_MSGS_FORM)?;
                    if v.le || window.replace(n).is_some() {
                        return Err(if v.le {
                            bad(term, WINDOW_MSGS_FORM, "use '=' here")
                        } else {
                            repeated()
                        });
                    }
                }
                _ => return Err(SpecStrError::UnknownTerm(term.to_string())),
            }
        }
        let spec = spec.ok_or_else(|| SpecStrError::NoKind(text.to_string()))?;
        let mut config = StreamConfig::new(spec);
        config.delivery = delivery.unwrap_or(config.delivery);
        config.copies = copies.unwrap_or(config.copies);
        config.rtt = rtt;
        config.loss = loss;
        config.delay = delay;
        config.window = window.unwrap_or(config.window);
        config.validate().map_err(|source| SpecStrError::Invalid {
            text: text.to_string(),
            source,
        })?;
        Ok(config)
    }
}

/// A term's value and whether it followed `<=` rather than `=`.
#[derive(Debug, Clone, Copy)]
struct Value<'a> {
    text: &'a str,
    le: bool,
}

/// `key`, `key=value` or `key<=value`.
fn split_term(term: &str) -> (&str, Option<Value<'_>>) {
    match (term.find("<="), term.find('=')) {
        (Some(i), Some(j)) if i < j => (
            &term[..i],
            Some(Value {
                text: &term[i + 2..],
                le: true,
            }),
        ),
        (_, Some(j)) => (
            &term[..j],
            Some(Value {
                text: &term[j + 1..],
                le: false,
            }),
        ),
        _ => (term, None),
    }
}

fn bad(term: &str, expected: &'static str, reason: impl fmt::Display) -> SpecStrError {
    SpecStrError::BadValue {
        term: term.to_string(),
        expected,
        reason: reason.to_string(),
    }
}

/// The value after `=` (not `<=`) of a term of form `form`.
fn eq_value<'a>(
    term: &str,
    value: Option<Value<'a>>,
    form: &'static str,
) -> Result<&'a str, SpecStrError> {
    match value {
        Some(Value { text, le: false }) => Ok(text),
        Some(Value { le: true, .. }) if form == VIOLATION_FORM => {
            Err(bad(term, form, "write violation=X:TW:SIZE<=E"))
        }
        Some(Value { le: true, .. }) => Err(bad(term, form, "use '=' here")),
        None => Err(bad(term, form, "no value")),
    }
}

fn kind_term(term: &str, key: &str, value: Option<Value<'_>>) -> Result<StreamSpec, SpecStrError> {
    let spec = match key {
        "rate" => {
            let v = eq_value(term, value, RATE_FORM)?;
            let (rate, p) = at_probability(term, v, RATE_FORM)?;
            let rate = rate
                .parse::<Bandwidth>()
                .map_err(|e| bad(term, RATE_FORM, e))?;
            StreamSpec::min_rate(rate, p).map_err(|e| bad(term, RATE_FORM, e))?
        }
        "window" => {
            let v = eq_value(term, value, WINDOW_FORM)?;
            let (body, p) = at_probability(term, v, WINDOW_FORM)?;
            let [xy, tw, size] = three_parts(term, body, WINDOW_FORM)?;
            let (x, y) = xy
                .split_once('/')
                .ok_or_else(|| bad(term, WINDOW_FORM, format!("{xy:?} is not X/Y")))?;
            let x = parse_count(term, x, WINDOW_FORM)?;
            let y = parse_count(term, y, WINDOW_FORM)?;
            let tw = parse_duration(term, tw, WINDOW_FORM)?;
            let size = parse_size(term, size, WINDOW_FORM)?;
            StreamSpec::window(x, y, tw, size, p).map_err(|e| bad(term, WINDOW_FORM, e))?
        }
        "violation" => {
            // The key splits at the first '=', so the value is
            // "X:TW:SIZE<=E" with the bound inside it.
            let v = eq_value(term, value, VIOLATION_FORM)?;
            let (body, e) = v
                .split_once("<=")
                .ok_or_else(|| bad(term, VIOLATION_FORM, "no '<=E' bound"))?;
            let [x, tw, size] = three_parts(term, body, VIOLATION_FORM)?;
            let x = parse_count(term, x, VIOLATION_FORM)?;
            let tw = parse_duration(term, tw, VIOLATION_FORM)?;
            let size = parse_size(term, size, VIOLATION_FORM)?;
            let e = parse_f64(term, e, VIOLATION_FORM)?;
            StreamSpec::violation_bound(x, tw, size, e).map_err(|e| bad(term, VIOLATION_FORM, e))?
        }
        _ => {
            let weight = match value {
                None => 1,
                Some(_) => {
                    let w = eq_value(term, value, BEST_EFFORT_FORM)?;
                    w.parse::<u64>()
                        .map_err(|e| bad(term, BEST_EFFORT_FORM, format!("weight {w:?}: {e}")))?
                }
            };
            StreamSpec::best_effort(weight).map_err(|e| bad(term, BEST_EFFORT_FORM, e))?
        }
    };
    Ok(spec)
}

fn delivery_term(
    term: &str,
    key: &str,
    value: Option<Value<'_>>,
) -> Result<Delivery, SpecStrError> {
    match (key, value) {
        ("reliable", None) => Ok(Delivery::Reliable),
        ("unreliable", None) => Ok(Delivery::Unreliable),
        ("deadline", v) => {
            let d = eq_value(term, v, DEADLINE_FORM)?;
            Ok(Delivery::Deadline {
                ttl: parse_duration(term, d, DEADLINE_FORM)?,
            })
        }
        _ => Err(bad(
            term,
            "reliable, unreliable or deadline=DURATION",
            "takes no value",
        )),
    }
}

fn copies_term(term: &str, value: Option<Value<'_>>) -> Result<u8, SpecStrError> {
    let v = eq_value(term, value, COPIES_FORM)?;
    v.parse::<u8>()
        .map_err(|e| bad(term, COPIES_FORM, format!("{v:?}: {e}")))
}

/// `MAX@P` after `<=`.
fn bound_term<'a>(
    term: &str,
    value: Option<Value<'a>>,
    form: &'static str,
) -> Result<(&'a str, f64), SpecStrError> {
    match value {
        Some(Value { text, le: true }) => at_probability(term, text, form),
        _ => Err(bad(term, form, "write the bound with '<='")),
    }
}

/// `BODY@P`.
fn at_probability<'a>(
    term: &str,
    value: &'a str,
    form: &'static str,
) -> Result<(&'a str, f64), SpecStrError> {
    let (body, p) = value
        .rsplit_once('@')
        .ok_or_else(|| bad(term, form, "no '@P' probability"))?;
    let p = parse_f64(term, p, form)?;
    if !(p > 0.0 && p < 1.0) {
        return Err(bad(
            term,
            form,
            format!("probability {p} is outside (0, 1)"),
        ));
    }
    Ok((body, p))
}

fn three_parts<'a>(
    term: &str,
    body: &'a str,
    form: &'static str,
) -> Result<[&'a str; 3], SpecStrError> {
    let mut it = body.split(':');
    match (it.next(), it.next(), it.next(), it.next()) {
        (Some(a), Some(b), Some(c), None) => Ok([a, b, c]),
        _ => Err(bad(term, form, "needs three ':'-separated parts")),
    }
}

fn parse_count(term: &str, s: &str, form: &'static str) -> Result<u32, SpecStrError> {
    s.trim()
        .parse::<u32>()
        .map_err(|e| bad(term, form, format!("{s:?} is not a count: {e}")))
}

fn parse_f64(term: &str, s: &str, form: &'static str) -> Result<f64, SpecStrError> {
    match s.trim().parse::<f64>() {
        Ok(v) if v.is_finite() => Ok(v),
        _ => Err(bad(term, form, format!("{s:?} is not a number"))),
    }
}

fn parse_duration(term: &str, s: &str, form: &'static str) -> Result<Duration, SpecStrError> {
    s.parse::<Duration>().map_err(|e| bad(term, form, e))
}

fn parse_size(term: &str, s: &str, form: &'static str) -> Result<u32, SpecStrError> {
    let size = s.parse::<ByteSize>().map_err(|e| bad(term, form, e))?;
    u32::try_from(size.bytes())
        .map_err(|_| bad(term, form, format!("message size {s} is over 4 GiB")))
}

/// `0.01` or `1%`.
fn parse_loss(term: &str, s: &str) -> Result<f64, SpecStrError> {
    match s.strip_suffix('%') {
        Some(pct) => Ok(parse_f64(term, pct, LOSS_FORM)? / 100.0),
        None => parse_f64(term, s, LOSS_FORM),
    }
}

impl fmt::Display for StreamConfig {
    /// The spec string: kind first, then the modifiers that differ from
    /// the defaults (see the module docs). Name and pinned paths are left
    /// out.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.spec {
            StreamSpec::MinRate { rate, probability } => {
                write!(f, "rate={}@{probability}", Rate(rate))?;
            }
            StreamSpec::Window {
                x,
                y,
                window,
                message_size,
                probability,
            } => write!(
                f,
                "window={x}/{y}:{}:{}@{probability}",
                Exact(window),
                Size(message_size)
            )?,
            StreamSpec::ViolationBound {
                x,
                window,
                message_size,
                max_expected_misses,
            } => write!(
                f,
                "violation={x}:{}:{}<={max_expected_misses}",
                Exact(window),
                Size(message_size)
            )?,
            StreamSpec::BestEffort { weight: 1 } => f.write_str("best-effort")?,
            StreamSpec::BestEffort { weight } => write!(f, "best-effort={weight}")?,
        }
        match self.delivery {
            Delivery::Reliable => {}
            Delivery::Unreliable => f.write_str(",unreliable")?,
            Delivery::Deadline { ttl } => write!(f, ",deadline={}", Exact(ttl))?,
        }
        if self.copies != 1 {
            write!(f, ",copies={}", self.copies)?;
        }
        if let Some(b) = self.rtt {
            write!(f, ",rtt<={}@{}", Exact(b.max), b.probability)?;
        }
        if let Some(b) = self.loss {
            write!(f, ",loss<={}@{}", Loss(b.max), b.probability)?;
        }
        if let Some(b) = self.delay {
            write!(f, ",delay<={}@{}", Exact(b.max), b.probability)?;
        }
        if self.window != DEFAULT_STREAM_WINDOW {
            write!(f, ",window-msgs={}", self.window)?;
        }
        Ok(())
    }
}

/// A rate written exactly, in the largest unit that keeps it short:
/// `950bit`, `300kbit`, `3.2mbit`, `1.5gbit`.
pub(crate) struct Rate(pub(crate) Bandwidth);

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let bps = self.0.bps();
        let (scale, digits, unit) = match bps {
            0..1_000 => return write!(f, "{bps}bit"),
            1_000..1_000_000 => (1_000, 3, "kbit"),
            1_000_000..1_000_000_000 => (1_000_000, 6, "mbit"),
            _ => (1_000_000_000, 9, "gbit"),
        };
        write!(f, "{}", bps / scale)?;
        let frac = bps % scale;
        if frac != 0 {
            let text = format!("{frac:0digits$}");
            write!(f, ".{}", text.trim_end_matches('0'))?;
        }
        f.write_str(unit)
    }
}

/// A duration written exactly, in the largest of s, ms, us, ns that
/// divides it.
struct Exact(Duration);

impl fmt::Display for Exact {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ns = self.0.as_nanos();
        for (unit, mult) in [("s", 1_000_000_000), ("ms", 1_000_000), ("us", 1_000)] {
            if ns != 0 && ns % mult == 0 {
                return write!(f, "{}{unit}", ns / mult);
            }
        }
        write!(f, "{ns}ns")
    }
}

/// A message size in bytes (`1400B`), or in binary units when it is a
/// whole number of KiB (`64KiB`), without the space [`ByteSize`] puts in.
struct Size(u32);

impl fmt::Display for Size {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0 % 1024 != 0 {
            return write!(f, "{}B", self.0);
        }
        let text = ByteSize::from_bytes(u64::from(self.0)).to_string();
        f.write_str(&text.replace(' ', ""))
    }
}

/// A loss ratio as a percentage when that reads back exactly, else as a
/// ratio.
struct Loss(f64);

impl fmt::Display for Loss {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let pct = self.0 * 100.0;
        let back = format!("{pct}").parse::<f64>().map(|p| p / 100.0);
        if back == Ok(self.0) {
            write!(f, "{pct}%")
        } else {
            write!(f, "{}", self.0)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> StreamConfig {
        s.parse().unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    #[test]
    fn the_issue_forms_read() {
        let c = parse("rate=3.2mbit@0.95");
        assert_eq!(
            c.spec,
            StreamSpec::min_rate(Bandwidth::from_kbps(3200), 0.95).unwrap()
        );
        assert_eq!(c, StreamConfig::new(c.spec));
        let c = parse("window=9/10:100ms:1400B@0.99");
        assert_eq!(
            c.spec,
            StreamSpec::window(9, 10, Duration::from_millis(100), 1400, 0.99).unwrap()
        );
        let c = parse("violation=8:100ms:1000B<=0.5");
        assert_eq!(
            c.spec,
            StreamSpec::violation_bound(8, Duration::from_millis(100), 1000, 0.5).unwrap()
        );
        assert_eq!(
            parse("best-effort").spec,
            StreamSpec::best_effort(1).unwrap()
        );
        assert_eq!(
            parse("best-effort=3").spec,
            StreamSpec::best_effort(3).unwrap()
        );
        let c = parse(
            "rate=3.2mbit@0.95,copies=2,deadline=150ms,rtt<=80ms@0.95,loss<=1%@0.9,window-msgs=512",
        );
        assert_eq!(c.copies, 2);
        assert_eq!(
            c.delivery,
            Delivery::Deadline {
                ttl: Duration::from_millis(150)
            }
        );
        assert_eq!(
            c.rtt,
            Some(PathBound {
                max: Duration::from_millis(80),
                probability: 0.95
            })
        );
        assert_eq!(c.loss.map(|b| b.max), Some(0.01));
        assert_eq!(c.window, 512);
        assert_eq!(
            parse("rate=3mbit@0.95,delay<=150ms@0.9").delay,
            Some(PathBound {
                max: Duration::from_millis(150),
                probability: 0.9
            })
        );
        assert_eq!(
            parse("unreliable, best-effort").delivery,
            Delivery::Unreliable
        );
    }

    #[test]
    fn display_is_short_and_reads_back() {
        for s in [
            "rate=3.2mbit@0.95",
            "window=9/10:100ms:1400B@0.99,copies=2",
            "violation=8:100ms:1000B<=0.5,unreliable",
            "best-effort",
            "best-effort=7,deadline=1500ms,rtt<=80ms@0.95,loss<=1%@0.9,window-msgs=16",
            "rate=3mbit@0.95,delay<=150ms@0.95",
            "rate=1.5gbit@0.5",
            "window=1/1:1s:64KiB@0.9",
        ] {
            assert_eq!(parse(s).to_string(), s);
        }
        assert_eq!(
            parse("rate=3200kbit@0.95,reliable").to_string(),
            "rate=3.2mbit@0.95"
        );
    }

    #[test]
    fn errors_name_the_term_and_the_form() {
        let err = |s: &str| s.parse::<StreamConfig>().unwrap_err().to_string();
        let e = err("rate=3.2mbit");
        assert!(
            e.contains("\"rate=3.2mbit\"") && e.contains("rate=RATE@P"),
            "{e}"
        );
        let e = err("rate=3.2furlongs@0.9");
        assert!(e.contains("furlongs") && e.contains("rate=RATE@P"), "{e}");
        let e = err("window=9:100ms:1400B@0.99");
        assert!(e.contains("X/Y"), "{e}");
        let e = err("window=11/10:100ms:1400B@0.99");
        assert!(e.contains("11 of 10"), "{e}");
        let e = err("rate=1mbit@1.5");
        assert!(e.contains("outside (0, 1)"), "{e}");
        let e = err("speed=9");
        assert!(e.contains("unknown spec term \"speed=9\""), "{e}");
        assert!(err("copies=2").contains("no kind"));
        assert!(err("best-effort,rate=1mbit@0.9").contains("repeats"));
        assert!(err("best-effort,copies=3").contains("copies = 3"));
        assert!(err("best-effort,rtt=80ms@0.9").contains("'<='"));
        assert!(err("").contains("empty spec"));
        for s in ["rate=1mbit@0.9", "window=9/10:100ms:1400B@0.99"] {
            assert!(!err(&format!("{s},loss<=2@0.9")).contains('\n'));
        }
    }

    #[test]
    fn a_spec_is_split_from_its_source() {
        assert_eq!(
            split_spec("rate=3.2mbit@0.95,copies=2:trace:f.txt:30"),
            ("rate=3.2mbit@0.95,copies=2", Some("trace:f.txt:30"))
        );
        assert_eq!(
            split_spec("best-effort,window=1/2:1s:1B@0.5:-"),
            ("best-effort,window=1/2:1s:1B@0.5", Some("-"))
        );
        assert_eq!(
            split_spec("violation=8:100ms:1000B<=0.5:/tmp/x"),
            ("violation=8:100ms:1000B<=0.5", Some("/tmp/x"))
        );
        assert_eq!(split_spec("window=1/2:1s"), ("window=1/2:1s", None));
    }
}

#[cfg(test)]
mod properties {
    use super::*;
    use proptest::prelude::*;

    fn spec() -> impl Strategy<Value = StreamSpec> {
        let p = 0.001f64..0.999;
        let tw = (1u64..3_600_000_000_000).prop_map(Duration::from_nanos);
        prop_oneof![
            ((1u64..10_000_000_000_000), p.clone()).prop_map(|(r, p)| StreamSpec::MinRate {
                rate: Bandwidth::from_bps(r),
                probability: p
            }),
            ((1u32..1000), (0u32..1000), tw.clone(), (1u32..u32::MAX), p).prop_map(
                |(x, extra, window, message_size, probability)| StreamSpec::Window {
                    x,
                    y: x.saturating_add(extra),
                    window,
                    message_size,
                    probability
                }
            ),
            ((1u32..1000), tw, (1u32..u32::MAX), 0.0f64..100.0).prop_map(
                |(x, window, message_size, max_expected_misses)| StreamSpec::ViolationBound {
                    x,
                    window,
                    message_size,
                    max_expected_misses
                }
            ),
            (1u64..u64::MAX).prop_map(|weight| StreamSpec::BestEffort { weight }),
        ]
    }

    fn config() -> impl Strategy<Value = StreamConfig> {
        let delivery = prop_oneof![
            Just(Delivery::Reliable),
            Just(Delivery::Unreliable),
            (1u64..3_600_000_000_000).prop_map(|ns| Delivery::Deadline {
                ttl: Duration::from_nanos(ns)
            }),
        ];
        let rtt = proptest::option::of((1u64..10_000_000_000, 0.001f64..0.999).prop_map(
            |(ns, probability)| PathBound {
                max: Duration::from_nanos(ns),
                probability,
            },
        ));
        let loss = proptest::option::of(
            (0.0f64..=1.0, 0.001f64..0.999)
                .prop_map(|(max, probability)| PathBound { max, probability }),
        );
        let delay = rtt.clone();
        (
            spec(),
            delivery,
            1u8..=2,
            rtt,
            loss,
            delay,
            1u32..=super::super::stream::MAX_STREAM_WINDOW,
        )
            .prop_map(|(spec, delivery, copies, rtt, loss, delay, window)| {
                let mut c = StreamConfig::new(spec)
                    .with_delivery(delivery)
                    .with_copies(copies)
                    .with_window(window);
                c.rtt = rtt;
                c.loss = loss;
                c.delay = delay;
                c
            })
    }

    proptest! {
        /// Every valid config without a name or pins reads back from its
        /// display.
        #[test]
        fn display_round_trips(c in config()) {
            let text = c.to_string();
            let back: StreamConfig = text.parse().map_err(|e| TestCaseError::fail(format!("{text}: {e}")))?;
            prop_assert_eq!(back, c, "{}", text);
        }

        /// Any text is a config or one line of error; it never panics.
        #[test]
        fn any_text_reads_or_is_refused(text in "[a-z0-9=<@:/%.,-]{0,40}") {
            if let Err(e) = text.parse::<StreamConfig>() {
                prop_assert!(!e.to_string().contains('\n'));
            }
        }
    }
}
