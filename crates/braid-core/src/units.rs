//! Units: [`Bandwidth`].
//!
//! A bandwidth is stored as whole bits per second in a `u64`, which covers
//! 1 bit/s to 18 Ebit/s exactly and keeps simulation arithmetic deterministic.
//! Conversions to and from bytes over a [`Duration`] round down (bytes) and up
//! (time to send), so a pacer built on them never sends faster than the rate.
//!
//! Parsing follows the conventions of `tc` and iperf: decimal prefixes
//! (`k` = 1000), bits unless the unit says bytes (`B`, `bytes`):
//! `10mbit`, `1.5gbit`, `300kbit`, `10Mbit/s`, `10mbps`, `12MB/s`, `64KiB/s`.

use crate::time::Duration;
use core::fmt;

/// A data rate in bits per second.
#[derive(
    Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, serde::Serialize, serde::Deserialize,
)]
pub struct Bandwidth(u64);

impl Bandwidth {
    /// Zero bits per second.
    pub const ZERO: Bandwidth = Bandwidth(0);
    /// The largest representable rate.
    pub const MAX: Bandwidth = Bandwidth(u64::MAX);

    /// A rate of `bps` bits per second.
    pub const fn from_bps(bps: u64) -> Self {
        Bandwidth(bps)
    }
    /// A rate of `kbps` kilobits (1000 bit) per second, saturating.
    pub const fn from_kbps(kbps: u64) -> Self {
        Bandwidth(kbps.saturating_mul(1_000))
    }
    /// A rate of `mbps` megabits per second, saturating.
    pub const fn from_mbps(mbps: u64) -> Self {
        Bandwidth(mbps.saturating_mul(1_000_000))
    }
    /// A rate of `bytes_per_sec` bytes per second, saturating.
    pub const fn from_bytes_per_sec(bytes_per_sec: u64) -> Self {
        Bandwidth(bytes_per_sec.saturating_mul(8))
    }
    /// A rate in megabits per second given as a float, rounded to a whole
    /// bit per second. Negative or NaN gives zero; huge values saturate.
    pub fn from_mbps_f64(mbps: f64) -> Self {
        Self::from_bps_f64(mbps * 1e6)
    }
    /// A rate in bits per second given as a float (see [`Self::from_mbps_f64`]).
    pub fn from_bps_f64(bps: f64) -> Self {
        if bps.is_nan() || bps <= 0.0 {
            Bandwidth::ZERO
        } else if bps >= u64::MAX as f64 {
            Bandwidth::MAX
        } else {
            Bandwidth(bps.round() as u64)
        }
    }
    /// The rate that delivers `bytes` in `over`; zero if `over` is zero.
    pub fn from_delivery(bytes: u64, over: Duration) -> Self {
        if over.is_zero() {
            return Bandwidth::ZERO;
        }
        let bps = (bytes as u128 * 8 * 1_000_000_000) / over.as_nanos() as u128;
        Bandwidth(u64::try_from(bps).unwrap_or(u64::MAX))
    }
    /// Bits per second.
    pub const fn bps(self) -> u64 {
        self.0
    }
    /// Bytes per second (truncated).
    pub const fn bytes_per_sec(self) -> u64 {
        self.0 / 8
    }
    /// Megabits per second as a float (for reports).
    pub fn mbps(self) -> f64 {
        self.0 as f64 / 1e6
    }
    /// Whole bytes this rate delivers in `d` (rounded down).
    pub fn bytes_in(self, d: Duration) -> u64 {
        let bytes = (self.0 as u128 * d.as_nanos() as u128) / (8 * 1_000_000_000);
        u64::try_from(bytes).unwrap_or(u64::MAX)
    }
    /// The time this rate needs to send `bytes` (rounded up to a whole
    /// nanosecond); [`Duration::MAX`] at zero rate.
    pub fn transmit_time(self, bytes: u64) -> Duration {
        if self.0 == 0 {
            return Duration::MAX;
        }
        let num = bytes as u128 * 8 * 1_000_000_000;
        let ns = num.div_ceil(self.0 as u128);
        Duration::from_nanos(u64::try_from(ns).unwrap_or(u64::MAX))
    }
    /// `self - rhs`, or zero.
    pub const fn saturating_sub(self, rhs: Bandwidth) -> Bandwidth {
        Bandwidth(self.0.saturating_sub(rhs.0))
    }
    /// `self + rhs`, saturating.
    pub const fn saturating_add(self, rhs: Bandwidth) -> Bandwidth {
        Bandwidth(self.0.saturating_add(rhs.0))
    }
    /// `self * f` for a non-negative factor, rounded; NaN or negative gives zero.
    pub fn mul_f64(self, f: f64) -> Bandwidth {
        Self::from_bps_f64(self.0 as f64 * f)
    }
}

impl fmt::Debug for Bandwidth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl fmt::Display for Bandwidth {
    /// `950 bit/s`, `300 kbit/s`, `12.5 Mbit/s`, `1.5 Gbit/s`; up to three decimals.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let v = self.0 as f64;
        let (scaled, unit) = if self.0 < 1_000 {
            (v, "bit/s")
        } else if self.0 < 1_000_000 {
            (v / 1e3, "kbit/s")
        } else if self.0 < 1_000_000_000 {
            (v / 1e6, "Mbit/s")
        } else {
            (v / 1e9, "Gbit/s")
        };
        let s = format!("{scaled:.3}");
        let s = s.trim_end_matches('0').trim_end_matches('.');
        write!(f, "{s} {unit}")
    }
}

/// An error from parsing a [`Bandwidth`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ParseBandwidthError {
    /// The text was empty.
    #[error("empty rate")]
    Empty,
    /// The number part could not be read or was negative.
    #[error("invalid rate {0:?}: expected a number followed by a unit such as 10mbit, 1.5gbit or 12MB/s")]
    Invalid(String),
    /// The unit is not one we know.
    #[error("unknown rate unit {unit:?} in {text:?}: use bit, kbit, mbit, gbit (or kbps, Mbit/s, ...) or B/s, KB/s, MB/s, GB/s, KiB/s, MiB/s")]
    UnknownUnit {
        /// The whole input.
        text: String,
        /// The unit that was not recognised.
        unit: String,
    },
}

impl core::str::FromStr for Bandwidth {
    type Err = ParseBandwidthError;

    /// Parses a rate with a required unit; see the module docs for the forms.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let t = s.trim();
        if t.is_empty() {
            return Err(ParseBandwidthError::Empty);
        }
        let split = t
            .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == 'e' || c == 'E'))
            // "1e" is not a number: the split must not swallow a unit starting with e
            .ok_or_else(|| ParseBandwidthError::Invalid(s.to_string()))?;
        let (num, unit) = t.split_at(split);
        let value: f64 = num
            .parse()
            .map_err(|_| ParseBandwidthError::Invalid(s.to_string()))?;
        if !value.is_finite() || value < 0.0 {
            return Err(ParseBandwidthError::Invalid(s.to_string()));
        }
        let scale = unit_scale(unit.trim()).ok_or_else(|| ParseBandwidthError::UnknownUnit {
            text: s.to_string(),
            unit: unit.trim().to_string(),
        })?;
        let bps = value * scale;
        if bps >= u64::MAX as f64 {
            return Err(ParseBandwidthError::Invalid(s.to_string()));
        }
        Ok(Bandwidth::from_bps_f64(bps))
    }
}

/// Bits per second for one unit of `unit`, or `None` if unknown.
fn unit_scale(unit: &str) -> Option<f64> {
    // Byte units are case-sensitive on the `B` so that `mb` (ambiguous) is
    // rejected rather than silently read as megabits or megabytes.
    let bytes = |u: &str| -> Option<f64> {
        Some(match u {
            "B/s" | "Bps" | "bytes/s" => 8.0,
            "KB/s" | "kB/s" | "kBps" | "KBps" => 8e3,
            "MB/s" | "MBps" => 8e6,
            "GB/s" | "GBps" => 8e9,
            "KiB/s" => 8.0 * 1024.0,
            "MiB/s" => 8.0 * 1024.0 * 1024.0,
            "GiB/s" => 8.0 * 1024.0 * 1024.0 * 1024.0,
            _ => return None,
        })
    };
    if let Some(s) = bytes(unit) {
        return Some(s);
    }
    let lower = unit.to_ascii_lowercase();
    let stripped = lower
        .strip_suffix("/s")
        .or_else(|| lower.strip_suffix("ps"));
    // Bare `b`, `kb`, `mb`, `gb` are ambiguous (tc reads `kb` as kilobytes,
    // most people as kilobits) and are refused; `kbps`, `Mb/s`, `mbit` are not.
    let bits = match stripped {
        Some(b) => b,
        None if matches!(lower.as_str(), "b" | "kb" | "mb" | "gb") => return None,
        None => lower.as_str(),
    };
    Some(match bits {
        "bit" | "b" | "bits" => 1.0,
        "kbit" | "kb" | "kbits" => 1e3,
        "mbit" | "mb" | "mbits" => 1e6,
        "gbit" | "gb" | "gbits" => 1e9,
        "tbit" => 1e12,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Bandwidth {
        s.parse().unwrap()
    }

    #[test]
    fn parses_tc_and_iperf_forms() {
        assert_eq!(p("10mbit"), Bandwidth::from_mbps(10));
        assert_eq!(p("1.5gbit"), Bandwidth::from_bps(1_500_000_000));
        assert_eq!(p("300kbit"), Bandwidth::from_kbps(300));
        assert_eq!(p("12MB/s"), Bandwidth::from_bytes_per_sec(12_000_000));
        assert_eq!(p("10Mbit/s"), Bandwidth::from_mbps(10));
        assert_eq!(p("10mbps"), Bandwidth::from_mbps(10));
        assert_eq!(p("64KiB/s"), Bandwidth::from_bytes_per_sec(65_536));
        assert_eq!(p("800bit"), Bandwidth::from_bps(800));
        assert_eq!(p(" 2 mbit "), Bandwidth::from_mbps(2));
    }

    #[test]
    fn rejects_bad_rates_clearly() {
        assert_eq!("".parse::<Bandwidth>(), Err(ParseBandwidthError::Empty));
        assert!(matches!(
            "10".parse::<Bandwidth>(),
            Err(ParseBandwidthError::Invalid(_))
        ));
        assert!(matches!(
            "fast".parse::<Bandwidth>(),
            Err(ParseBandwidthError::Invalid(_))
        ));
        assert!(matches!(
            "10 furlongs".parse::<Bandwidth>(),
            Err(ParseBandwidthError::UnknownUnit { .. })
        ));
        // "mb" is ambiguous (megabit or megabyte?) and is refused.
        assert!(matches!(
            "10mb".parse::<Bandwidth>(),
            Err(ParseBandwidthError::UnknownUnit { .. })
        ));
        let msg = "10 furlongs".parse::<Bandwidth>().unwrap_err().to_string();
        assert!(msg.contains("furlongs") && msg.contains("mbit"), "{msg}");
    }

    #[test]
    fn converts_bytes_and_time() {
        let r = Bandwidth::from_mbps(100);
        assert_eq!(r.bytes_in(Duration::from_secs(1)), 12_500_000);
        assert_eq!(r.transmit_time(1500), Duration::from_micros(120));
        assert_eq!(Bandwidth::ZERO.transmit_time(1), Duration::MAX);
        assert_eq!(
            Bandwidth::from_delivery(1_250_000, Duration::from_millis(100)),
            Bandwidth::from_mbps(100)
        );
        assert_eq!(Bandwidth::from_delivery(1, Duration::ZERO), Bandwidth::ZERO);
    }

    #[test]
    fn displays_human_units() {
        assert_eq!(Bandwidth::from_mbps(10).to_string(), "10 Mbit/s");
        assert_eq!(Bandwidth::from_kbps(1500).to_string(), "1.5 Mbit/s");
        assert_eq!(Bandwidth::from_bps(950).to_string(), "950 bit/s");
    }
}
