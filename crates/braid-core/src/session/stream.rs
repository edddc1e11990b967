//! What a session stream is: its scheduling spec, how its messages are
//! delivered, and the per-path guarantees and placement it asks for.
//!
//! Main types: [`StreamConfig`], [`Delivery`], [`PathBound`], [`StreamConfigError`].
//!
//! A [`StreamConfig`] joins the scheduler's [`StreamSpec`] (rate at P,
//! window constraint, violation bound, best effort — seed 000 §V-A) with
//! what the session does per message and per path (seed 000 §III-B's other
//! guarantees):
//! * [`Delivery`]: reliable (in order, complete, exactly once), unreliable
//!   (as it arrives, at most once) or deadline (unreliable, never delivered
//!   after `ttl` from when the application sent it);
//! * `rtt` / `loss`: a path may carry the stream only while its RTT at
//!   probability P stays ≤ d (its loss ratio at P ≤ l) — the session
//!   measures both and narrows the stream's path set;
//! * `delay`: the same for the one-way delay at probability P (≤ d),
//!   estimated from the path's RTT history: the RTT at P less half the
//!   smallest RTT seen (the propagation one way, plus the queue);
//! * `pinned`: only these named paths;
//! * `copies`: 1, or 2 for small critical streams (each message on the two
//!   best allowed paths; the first copy wins, the sink drops the other).
//!
//! Invariants: [`StreamConfig::validate`] has passed for every config a
//! session holds; `window` bounds both the source's unacknowledged messages
//! and the sink's reorder buffer of the stream.

use crate::id::{PathId, StreamId};
use crate::scheduler::{SpecError, StreamSpec};
use crate::time::Duration;

/// Most messages a stream may have sent and not yet consumed by the sink
/// application (the largest `window`).
pub const MAX_STREAM_WINDOW: u32 = 1 << 16;
/// Default stream window, in messages.
pub const DEFAULT_STREAM_WINDOW: u32 = 4096;
/// Most paths a stream may be pinned to.
pub const MAX_PINNED: usize = 16;
/// The name a stream goes by in a session: its own, or `stream-ID` when it
/// has none (`braid serve` names its files after it). A session refuses a
/// stream whose name another of its streams has, and a name of the form
/// `stream-N` on any stream but N, so these names are unique in a session
/// by construction.
pub fn stream_name(id: StreamId, config: &StreamConfig) -> String {
    config
        .name
        .clone()
        .unwrap_or_else(|| format!("stream-{}", id.0))
}

/// N when `name` is of the form `stream-N` (decimal, no leading zero).
pub(super) fn reserved_id(name: &str) -> Option<u32> {
    let digits = name.strip_prefix("stream-")?;
    if digits.is_empty() || (digits.len() > 1 && digits.starts_with('0')) {
        return None;
    }
    if !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// Longest stream name, in bytes.
pub const MAX_STREAM_NAME: usize = 64;
/// The longest deadline a stream may ask for (the transport's TTL bound).
pub const MAX_TTL: Duration = Duration::from_secs(3600);

/// How a stream's messages are delivered at the sink.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Delivery {
    /// In order, complete, exactly once — across paths and path failures.
    Reliable,
    /// As they arrive, at most once; a lost message stays lost.
    Unreliable,
    /// As they arrive, at most once, and never later than `ttl` after the
    /// application handed the message to the source.
    Deadline {
        /// Time to live from `send`.
        ttl: Duration,
    },
}

impl Delivery {
    /// True for [`Delivery::Reliable`].
    pub fn is_reliable(self) -> bool {
        matches!(self, Delivery::Reliable)
    }

    /// The deadline's time to live, if any.
    pub fn ttl(self) -> Option<Duration> {
        match self {
            Delivery::Deadline { ttl } => Some(ttl),
            _ => None,
        }
    }
}

/// A bound on a path property that must hold with a probability: the
/// property's `probability`-quantile must not exceed `max`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PathBound<T> {
    /// The bound (d for RTT, l for loss).
    pub max: T,
    /// Probability in (0, 1) with which it must hold.
    pub probability: f64,
}

/// Why a [`StreamConfig`] was refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum StreamConfigError {
    /// The scheduling spec is invalid.
    #[error(transparent)]
    Spec(#[from] SpecError),
    /// `window` is zero or above [`MAX_STREAM_WINDOW`].
    #[error("stream window {0} is outside 1..={max}", max = MAX_STREAM_WINDOW)]
    Window(u32),
    /// `copies` is not 1 or 2.
    #[error("copies = {0}: only 1 or 2 are supported")]
    Copies(u8),
    /// A deadline of zero or above [`MAX_TTL`].
    #[error("deadline {0:?} is zero or longer than one hour")]
    Ttl(Duration),
    /// A bound's probability is outside (0, 1), or a loss bound outside [0, 1].
    #[error("{0} bound is invalid (probability in (0, 1), loss in [0, 1])")]
    Bound(&'static str),
    /// More than [`MAX_PINNED`] pinned paths, or none.
    #[error("pinned to {0} paths (need 1..={max})", max = MAX_PINNED)]
    Pinned(usize),
    /// A name that is empty, longer than [`MAX_STREAM_NAME`] bytes, or has
    /// a character other than ASCII letters, digits, `.`, `_` and `-`.
    #[error("stream name {0:?}: use 1-{max} ASCII letters, digits, '.', '_' or '-'", max = MAX_STREAM_NAME)]
    Name(String),
}

/// Everything a session needs to know about one stream (see the module docs).
#[derive(Debug, Clone, PartialEq)]
pub struct StreamConfig {
    /// What the scheduler must guarantee.
    pub spec: StreamSpec,
    /// How messages are delivered.
    pub delivery: Delivery,
    /// RTT ≤ d with probability P on every path that carries the stream.
    pub rtt: Option<PathBound<Duration>>,
    /// Loss ratio ≤ l with probability P on every path that carries it.
    pub loss: Option<PathBound<f64>>,
    /// One-way delay ≤ d with probability P on every path that carries it
    /// (issue 28; see the module docs for the estimate).
    pub delay: Option<PathBound<Duration>>,
    /// Only these paths (`None`: any).
    pub pinned: Option<Vec<PathId>>,
    /// 1, or 2 for redundant delivery.
    pub copies: u8,
    /// Messages sent and not yet consumed by the sink application, at most.
    pub window: u32,
    /// A name the application chose (the sink sees it; `braid serve`
    /// names its files after it). Safe as a file name: see
    /// [`StreamConfigError::Name`].
    pub name: Option<String>,
}

impl StreamConfig {
    /// A reliable stream with `spec`, no path constraints, one copy and the
    /// default window.
    pub fn new(spec: StreamSpec) -> Self {
        StreamConfig {
            spec,
            delivery: Delivery::Reliable,
            rtt: None,
            loss: None,
            delay: None,
            pinned: None,
            copies: 1,
            window: DEFAULT_STREAM_WINDOW,
            name: None,
        }
    }

    /// Named `name`.
    pub fn with_name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// With `delivery`.
    pub fn with_delivery(mut self, delivery: Delivery) -> Self {
        self.delivery = delivery;
        self
    }

    /// With an RTT bound: RTT ≤ `max` with `probability`.
    pub fn with_rtt(mut self, max: Duration, probability: f64) -> Self {
        self.rtt = Some(PathBound { max, probability });
        self
    }

    /// With a loss bound: loss ratio ≤ `max` with `probability`.
    pub fn with_loss(mut self, max: f64, probability: f64) -> Self {
        self.loss = Some(PathBound { max, probability });
        self
    }

    /// With a one-way delay bound: delay ≤ `max` with `probability`.
    pub fn with_delay(mut self, max: Duration, probability: f64) -> Self {
        self.delay = Some(PathBound { max, probability });
        self
    }

    /// Pinned to `paths`.
    pub fn pinned_to(mut self, paths: Vec<PathId>) -> Self {
        self.pinned = Some(paths);
        self
    }

    /// With `copies` copies of each message.
    pub fn with_copies(mut self, copies: u8) -> Self {
        self.copies = copies;
        self
    }

    /// With a window of `messages`.
    pub fn with_window(mut self, messages: u32) -> Self {
        self.window = messages;
        self
    }

    /// Checks every field.
    ///
    /// # Errors
    /// The first [`StreamConfigError`] found.
    pub fn validate(&self) -> Result<(), StreamConfigError> {
        self.spec.validate()?;
        if self.window == 0 || self.window > MAX_STREAM_WINDOW {
            return Err(StreamConfigError::Window(self.window));
        }
        if !(1..=2).contains(&self.copies) {
            return Err(StreamConfigError::Copies(self.copies));
        }
        if let Some(ttl) = self.delivery.ttl() {
            if ttl.is_zero() || ttl > MAX_TTL {
                return Err(StreamConfigError::Ttl(ttl));
            }
        }
        let p_ok = |p: f64| p > 0.0 && p < 1.0;
        if let Some(b) = self.rtt {
            if !p_ok(b.probability) {
                return Err(StreamConfigError::Bound("rtt"));
            }
        }
        if let Some(b) = self.loss {
            if !p_ok(b.probability) || !(0.0..=1.0).contains(&b.max) {
                return Err(StreamConfigError::Bound("loss"));
            }
        }
        if let Some(b) = self.delay {
            if !p_ok(b.probability) || b.max.is_zero() {
                return Err(StreamConfigError::Bound("delay"));
            }
        }
        if let Some(p) = &self.pinned {
            if p.is_empty() || p.len() > MAX_PINNED {
                return Err(StreamConfigError::Pinned(p.len()));
            }
        }
        if let Some(n) = &self.name {
            let ok = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
            // Not "." or "..", so the name is a plain file name.
            if n.is_empty()
                || n.len() > MAX_STREAM_NAME
                || !n.chars().all(ok)
                || n.chars().all(|c| c == '.')
            {
                return Err(StreamConfigError::Name(n.clone()));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::units::Bandwidth;

    fn rate() -> StreamSpec {
        StreamSpec::min_rate(Bandwidth::from_mbps(3), 0.95).unwrap()
    }

    #[test]
    fn defaults_validate_and_bad_fields_are_named() {
        assert!(StreamConfig::new(rate()).validate().is_ok());
        let bad = [
            (
                StreamConfig::new(rate()).with_window(0),
                StreamConfigError::Window(0),
            ),
            (
                StreamConfig::new(rate()).with_copies(3),
                StreamConfigError::Copies(3),
            ),
            (
                StreamConfig::new(rate()).with_delivery(Delivery::Deadline {
                    ttl: Duration::ZERO,
                }),
                StreamConfigError::Ttl(Duration::ZERO),
            ),
            (
                StreamConfig::new(rate()).with_loss(1.5, 0.9),
                StreamConfigError::Bound("loss"),
            ),
            (
                StreamConfig::new(rate()).with_rtt(Duration::from_millis(50), 1.0),
                StreamConfigError::Bound("rtt"),
            ),
            (
                StreamConfig::new(rate()).pinned_to(vec![]),
                StreamConfigError::Pinned(0),
            ),
            (
                StreamConfig::new(rate()).with_name("../etc"),
                StreamConfigError::Name("../etc".into()),
            ),
            (
                StreamConfig::new(rate()).with_name(".."),
                StreamConfigError::Name("..".into()),
            ),
        ];
        for (c, e) in bad {
            assert_eq!(c.validate(), Err(e));
        }
    }
}
