//! Time, always passed in.
//!
//! [`Instant`] is a point on a monotonic time line measured in nanoseconds from
//! an arbitrary origin (the simulator starts at zero; the runtime maps the
//! wall clock onto it in `braid::clock`). [`Duration`] is a non-negative span
//! in nanoseconds. Both are plain `u64` newtypes so that arithmetic is exact
//! and simulation output is byte-stable.
//!
//! Arithmetic saturates instead of wrapping or panicking: `a - b` with
//! `b > a` is [`Duration::ZERO`], and adding to [`Instant::MAX`] stays there.
//! That choice keeps network-driven arithmetic (timestamps echoed by a peer)
//! from ever panicking.

use core::fmt;
use core::ops::{Add, AddAssign, Div, Mul, Sub, SubAssign};

/// A span of time in nanoseconds.
#[derive(
    Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, serde::Serialize, serde::Deserialize,
)]
pub struct Duration(u64);

impl Duration {
    /// No time at all.
    pub const ZERO: Duration = Duration(0);
    /// The longest representable span (about 584 years).
    pub const MAX: Duration = Duration(u64::MAX);

    /// A span of `ns` nanoseconds.
    pub const fn from_nanos(ns: u64) -> Self {
        Duration(ns)
    }
    /// A span of `us` microseconds (saturating).
    pub const fn from_micros(us: u64) -> Self {
        Duration(us.saturating_mul(1_000))
    }
    /// A span of `ms` milliseconds (saturating).
    pub const fn from_millis(ms: u64) -> Self {
        Duration(ms.saturating_mul(1_000_000))
    }
    /// A span of `s` seconds (saturating).
    pub const fn from_secs(s: u64) -> Self {
        Duration(s.saturating_mul(1_000_000_000))
    }
    /// A span of `s` seconds given as a float, rounded to the nearest
    /// nanosecond. Negative and NaN inputs give zero; huge ones saturate.
    pub fn from_secs_f64(s: f64) -> Self {
        if s.is_nan() || s <= 0.0 {
            return Duration::ZERO;
        }
        let ns = (s * 1e9).round();
        if ns >= u64::MAX as f64 {
            Duration::MAX
        } else {
            Duration(ns as u64)
        }
    }
    /// Whole nanoseconds.
    pub const fn as_nanos(self) -> u64 {
        self.0
    }
    /// Whole microseconds (truncated).
    pub const fn as_micros(self) -> u64 {
        self.0 / 1_000
    }
    /// Whole milliseconds (truncated).
    pub const fn as_millis(self) -> u64 {
        self.0 / 1_000_000
    }
    /// Seconds as a float.
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / 1e9
    }
    /// True for a zero-length span.
    pub const fn is_zero(self) -> bool {
        self.0 == 0
    }
    /// `self - rhs`, or zero if `rhs` is longer.
    pub const fn saturating_sub(self, rhs: Duration) -> Duration {
        Duration(self.0.saturating_sub(rhs.0))
    }
    /// `self * k`, saturating.
    pub const fn saturating_mul(self, k: u64) -> Duration {
        Duration(self.0.saturating_mul(k))
    }
    /// `self * f` for a non-negative factor, rounded; NaN or negative gives zero.
    pub fn mul_f64(self, f: f64) -> Duration {
        Duration::from_secs_f64(self.as_secs_f64() * f)
    }
    /// The number of whole `rhs` spans in `self`; `None` if `rhs` is zero.
    pub const fn checked_div_duration(self, rhs: Duration) -> Option<u64> {
        self.0.checked_div(rhs.0)
    }
}

impl From<core::time::Duration> for Duration {
    fn from(d: core::time::Duration) -> Self {
        Duration(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
    }
}

impl From<Duration> for core::time::Duration {
    fn from(d: Duration) -> Self {
        core::time::Duration::from_nanos(d.0)
    }
}

impl Add for Duration {
    type Output = Duration;
    fn add(self, rhs: Duration) -> Duration {
        Duration(self.0.saturating_add(rhs.0))
    }
}
impl AddAssign for Duration {
    fn add_assign(&mut self, rhs: Duration) {
        *self = *self + rhs;
    }
}
impl Sub for Duration {
    type Output = Duration;
    fn sub(self, rhs: Duration) -> Duration {
        self.saturating_sub(rhs)
    }
}
impl SubAssign for Duration {
    fn sub_assign(&mut self, rhs: Duration) {
        *self = *self - rhs;
    }
}
impl Mul<u64> for Duration {
    type Output = Duration;
    fn mul(self, rhs: u64) -> Duration {
        self.saturating_mul(rhs)
    }
}
impl Div<u64> for Duration {
    type Output = Duration;
    /// Division by zero gives [`Duration::MAX`] rather than panicking.
    fn div(self, rhs: u64) -> Duration {
        match self.0.checked_div(rhs) {
            Some(v) => Duration(v),
            None => Duration::MAX,
        }
    }
}

impl fmt::Debug for Duration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl fmt::Display for Duration {
    /// Human form with a unit chosen by size: `850ns`, `12.5us`, `30ms`, `1.5s`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ns = self.0;
        if ns < 1_000 {
            write!(f, "{ns}ns")
        } else if ns < 1_000_000 {
            write!(f, "{}us", trim(ns as f64 / 1e3))
        } else if ns < 1_000_000_000 {
            write!(f, "{}ms", trim(ns as f64 / 1e6))
        } else {
            write!(f, "{}s", trim(ns as f64 / 1e9))
        }
    }
}

/// Formats with up to three decimals and no trailing zeros.
fn trim(v: f64) -> String {
    let s = format!("{v:.3}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    s.to_string()
}

/// An error from parsing a [`Duration`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ParseDurationError {
    /// The text was empty.
    #[error("empty duration")]
    Empty,
    /// The number part could not be read.
    #[error(
        "invalid duration {0:?}: expected a number followed by ns, us, ms, s, m or h (e.g. 100ms)"
    )]
    Invalid(String),
    /// The unit is not one we know.
    #[error("unknown duration unit {unit:?} in {text:?}: use ns, us, ms, s, m or h")]
    UnknownUnit {
        /// The whole input.
        text: String,
        /// The unit that was not recognised.
        unit: String,
    },
}

impl core::str::FromStr for Duration {
    type Err = ParseDurationError;

    /// Parses `100ms`, `1.5s`, `250us`, `20ns`, `2m`, `1h`. A bare number is
    /// rejected: a unit is required so `--interval 100` is never ambiguous.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let t = s.trim();
        if t.is_empty() {
            return Err(ParseDurationError::Empty);
        }
        let split = t
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(|| ParseDurationError::Invalid(s.to_string()))?;
        let (num, unit) = t.split_at(split);
        let value: f64 = num
            .parse()
            .map_err(|_| ParseDurationError::Invalid(s.to_string()))?;
        let scale = match unit.trim() {
            "ns" => 1e-9,
            "us" | "µs" => 1e-6,
            "ms" => 1e-3,
            "s" | "sec" => 1.0,
            "m" | "min" => 60.0,
            "h" => 3600.0,
            other => {
                return Err(ParseDurationError::UnknownUnit {
                    text: s.to_string(),
                    unit: other.to_string(),
                })
            }
        };
        Ok(Duration::from_secs_f64(value * scale))
    }
}

/// A point in time, in nanoseconds since an arbitrary origin.
#[derive(
    Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, serde::Serialize, serde::Deserialize,
)]
pub struct Instant(u64);

impl Instant {
    /// The origin: simulations start here.
    pub const ZERO: Instant = Instant(0);
    /// The far future; useful as "never" for timers.
    pub const MAX: Instant = Instant(u64::MAX);

    /// The instant `ns` nanoseconds after the origin.
    pub const fn from_nanos(ns: u64) -> Self {
        Instant(ns)
    }
    /// Nanoseconds since the origin.
    pub const fn as_nanos(self) -> u64 {
        self.0
    }
    /// Time since the origin as a [`Duration`].
    pub const fn since_origin(self) -> Duration {
        Duration(self.0)
    }
    /// Seconds since the origin as a float (for reports).
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / 1e9
    }
    /// `self - earlier`, or zero if `earlier` is later.
    pub const fn saturating_duration_since(self, earlier: Instant) -> Duration {
        Duration(self.0.saturating_sub(earlier.0))
    }
    /// `self - earlier` if `earlier` is not later than `self`.
    pub const fn checked_duration_since(self, earlier: Instant) -> Option<Duration> {
        match self.0.checked_sub(earlier.0) {
            Some(d) => Some(Duration(d)),
            None => None,
        }
    }
}

impl Add<Duration> for Instant {
    type Output = Instant;
    fn add(self, rhs: Duration) -> Instant {
        Instant(self.0.saturating_add(rhs.0))
    }
}
impl AddAssign<Duration> for Instant {
    fn add_assign(&mut self, rhs: Duration) {
        *self = *self + rhs;
    }
}
impl Sub<Duration> for Instant {
    type Output = Instant;
    fn sub(self, rhs: Duration) -> Instant {
        Instant(self.0.saturating_sub(rhs.0))
    }
}
impl Sub for Instant {
    type Output = Duration;
    fn sub(self, rhs: Instant) -> Duration {
        self.saturating_duration_since(rhs)
    }
}

impl fmt::Debug for Instant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "t+{}", Duration(self.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_units() {
        assert_eq!(
            "100ms".parse::<Duration>().unwrap(),
            Duration::from_millis(100)
        );
        assert_eq!(
            "1.5s".parse::<Duration>().unwrap(),
            Duration::from_millis(1500)
        );
        assert_eq!(
            "250us".parse::<Duration>().unwrap(),
            Duration::from_micros(250)
        );
        assert_eq!("2m".parse::<Duration>().unwrap(), Duration::from_secs(120));
        assert!(matches!(
            "100".parse::<Duration>(),
            Err(ParseDurationError::Invalid(_))
        ));
        assert!(matches!(
            "3 fortnights".parse::<Duration>(),
            Err(ParseDurationError::UnknownUnit { .. })
        ));
        assert_eq!("".parse::<Duration>(), Err(ParseDurationError::Empty));
    }

    #[test]
    fn arithmetic_saturates() {
        let a = Instant::from_nanos(5);
        let b = Instant::from_nanos(9);
        assert_eq!(a - b, Duration::ZERO);
        assert_eq!(b - a, Duration::from_nanos(4));
        assert_eq!(Instant::MAX + Duration::from_secs(1), Instant::MAX);
        assert_eq!(Duration::from_secs(1) / 0, Duration::MAX);
        assert_eq!(a.checked_duration_since(b), None);
    }

    #[test]
    fn displays_human_units() {
        assert_eq!(Duration::from_millis(30).to_string(), "30ms");
        assert_eq!(Duration::from_millis(1500).to_string(), "1.5s");
        assert_eq!(Duration::from_nanos(850).to_string(), "850ns");
        assert_eq!(Duration::from_micros(12_500).to_string(), "12.5ms");
    }
}
