//! Units: [`Bandwidth`] and [`ByteSize`].
//!
//! A bandwidth is stored as whole bits per second in a `u64`, which covers
//! 1 bit/s to 18 Ebit/s exactly and keeps simulation arithmetic deterministic.
//! Conversions to and from bytes over a [`Duration`] round down (bytes) and up
//! (time to send), so a pacer built on them never sends faster than the rate.
//!
//! Parsing follows the conventions of `tc` and iperf: decimal prefixes
//! (`k` = 1000), bits unless the unit says bytes (`B`, `bytes`):
//! `10mbit`, `1.5gbit`, `300kbit`, `10Mbit/s`, `10mbps`, `12MB/s`, `64KiB/s`.
//!
//! Sizes ([`ByteSize`]) use the same byte units: SI for `KB`, `MB`, `GB`
//! (1000-based), IEC for `KiB`, `MiB`, `GiB` (1024-based); a unit that
//! could be either (`64K`, `64k`, `64kb`) is refused, never guessed.

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

/// A size in bytes: block sizes, windows, buffers, queue bounds.
///
/// # Units
/// The same convention as [`Bandwidth`]'s byte units: **SI** prefixes for
/// `KB`/`kB` (1000), `MB` (1000²), `GB` (1000³), `TB` (1000⁴) and **IEC**
/// prefixes for `KiB` (1024), `MiB` (1024²), `GiB` (1024³), `TiB` (1024⁴);
/// `B`, `bytes` or no unit for plain bytes. So `64KB` is 64,000 bytes and
/// `64KiB` is 65,536 everywhere braid reads a size (CLI flags, scenarios).
///
/// Units that could mean either (`K`, `k`, `kb`, `M`, `mb`, `G`, ...) are
/// refused with an error that names both readings, rather than guessed.
/// Decimals are allowed when the result is a whole number of bytes
/// (`1.5MiB`, `0.5KB`); `1.5B` is refused.
///
/// [`Display`](fmt::Display) writes a whole number of the largest unit
/// that divides the size exactly (`64 KiB`, `1500 B`), so display → parse
/// round-trips.
///
/// ```
/// use braid_core::units::ByteSize;
/// assert_eq!("64KB".parse::<ByteSize>().unwrap().bytes(), 64_000);
/// assert_eq!("64KiB".parse::<ByteSize>().unwrap().bytes(), 65_536);
/// assert!("64K".parse::<ByteSize>().is_err());
/// assert_eq!(ByteSize::from_bytes(65_536).to_string(), "64 KiB");
/// ```
#[derive(
    Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, serde::Serialize, serde::Deserialize,
)]
pub struct ByteSize(u64);

/// The units a [`ByteSize`] is written in, largest first (display picks the
/// first that divides exactly).
const BYTE_UNITS: [(&str, u64); 8] = [
    ("TiB", 1 << 40),
    ("TB", 1_000_000_000_000),
    ("GiB", 1 << 30),
    ("GB", 1_000_000_000),
    ("MiB", 1 << 20),
    ("MB", 1_000_000),
    ("KiB", 1 << 10),
    ("KB", 1_000),
];

impl ByteSize {
    /// Zero bytes.
    pub const ZERO: ByteSize = ByteSize(0);

    /// A size of `bytes` bytes.
    pub const fn from_bytes(bytes: u64) -> Self {
        ByteSize(bytes)
    }

    /// The size in bytes.
    pub const fn bytes(self) -> u64 {
        self.0
    }
}

impl fmt::Debug for ByteSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl fmt::Display for ByteSize {
    /// `0 B`, `1500 B`, `64 KB`, `64 KiB`, `3 MiB`: the largest unit that
    /// divides the size exactly, so the text parses back to the same size.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0 != 0 {
            for (unit, mult) in BYTE_UNITS {
                if self.0 % mult == 0 {
                    return write!(f, "{} {unit}", self.0 / mult);
                }
            }
        }
        write!(f, "{} B", self.0)
    }
}

/// An error from parsing a [`ByteSize`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ParseByteSizeError {
    /// The text was empty.
    #[error("empty size")]
    Empty,
    /// The number part could not be read.
    #[error("invalid size {0:?}: expected a number and a unit such as 1500B, 64KB or 64KiB")]
    Invalid(String),
    /// The unit could mean a power of 1000 or of 1024.
    #[error("ambiguous unit '{unit}' in {text:?}: write {si} or {iec}")]
    Ambiguous {
        /// The whole input.
        text: String,
        /// The unit as written.
        unit: String,
        /// The SI reading, e.g. `KB (1000)`.
        si: &'static str,
        /// The IEC reading, e.g. `KiB (1024)`.
        iec: &'static str,
    },
    /// The unit is not one we know.
    #[error("unknown size unit {unit:?} in {text:?}: use B, KB, MB, GB (1000-based) or KiB, MiB, GiB (1024-based)")]
    UnknownUnit {
        /// The whole input.
        text: String,
        /// The unit that was not recognised.
        unit: String,
    },
    /// The size is not a whole number of bytes (`1.5B`).
    #[error("size {0:?} is not a whole number of bytes")]
    Fractional(String),
    /// The size does not fit in 64 bits.
    #[error("size {0:?} is too large")]
    TooLarge(String),
}

impl core::str::FromStr for ByteSize {
    type Err = ParseByteSizeError;

    /// Parses a size; see [`ByteSize`] for the units.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let t = s.trim();
        if t.is_empty() {
            return Err(ParseByteSizeError::Empty);
        }
        let split = t
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(t.len());
        let (num, unit) = t.split_at(split);
        if num.is_empty() {
            return Err(ParseByteSizeError::Invalid(s.to_string()));
        }
        let unit = unit.trim();
        let mult = byte_unit(unit).map_err(|amb| match amb {
            Some((si, iec)) => ParseByteSizeError::Ambiguous {
                text: s.to_string(),
                unit: unit.to_string(),
                si,
                iec,
            },
            None => ParseByteSizeError::UnknownUnit {
                text: s.to_string(),
                unit: unit.to_string(),
            },
        })?;
        exact_product(num, mult)
            .map(ByteSize)
            .map_err(|e| e.with_text(s))
    }
}

/// Why [`exact_product`] failed, before the input text is attached.
enum ProductError {
    Invalid,
    Fractional,
    TooLarge,
}

impl ProductError {
    fn with_text(self, s: &str) -> ParseByteSizeError {
        let s = s.to_string();
        match self {
            ProductError::Invalid => ParseByteSizeError::Invalid(s),
            ProductError::Fractional => ParseByteSizeError::Fractional(s),
            ProductError::TooLarge => ParseByteSizeError::TooLarge(s),
        }
    }
}

/// `num × mult` computed exactly in integers (`num` is `123` or `1.25`).
fn exact_product(num: &str, mult: u64) -> Result<u64, ProductError> {
    let (int, frac) = num.split_once('.').unwrap_or((num, ""));
    let digits_ok = |d: &str| d.bytes().all(|b| b.is_ascii_digit());
    if (int.is_empty() && frac.is_empty()) || !digits_ok(int) || !digits_ok(frac) {
        return Err(ProductError::Invalid);
    }
    // More than 38 fractional digits would overflow 10^len; none are needed.
    if frac.len() > 30 {
        return Err(ProductError::Invalid);
    }
    let parse = |d: &str| -> Result<u128, ProductError> {
        if d.is_empty() {
            Ok(0)
        } else {
            d.parse::<u128>().map_err(|_| ProductError::TooLarge)
        }
    };
    let scale = 10u128.pow(frac.len() as u32);
    let whole = parse(int)?
        .checked_mul(u128::from(mult))
        .ok_or(ProductError::TooLarge)?;
    let part = parse(frac)?
        .checked_mul(u128::from(mult))
        .ok_or(ProductError::TooLarge)?;
    if part % scale != 0 {
        return Err(ProductError::Fractional);
    }
    let total = whole
        .checked_add(part / scale)
        .ok_or(ProductError::TooLarge)?;
    u64::try_from(total).map_err(|_| ProductError::TooLarge)
}

/// Bytes in one `unit`; `Err(Some((si, iec)))` for an ambiguous unit,
/// `Err(None)` for an unknown one.
fn byte_unit(unit: &str) -> Result<u64, Option<(&'static str, &'static str)>> {
    match unit {
        "" | "B" | "bytes" => return Ok(1),
        "KB" | "kB" => return Ok(1_000),
        "KiB" => return Ok(1 << 10),
        "MB" => return Ok(1_000_000),
        "MiB" => return Ok(1 << 20),
        "GB" => return Ok(1_000_000_000),
        "GiB" => return Ok(1 << 30),
        "TB" => return Ok(1_000_000_000_000),
        "TiB" => return Ok(1 << 40),
        _ => {}
    }
    // Anything else that starts with a prefix letter and otherwise spells a
    // size (`K`, `k`, `kb`, `Mb`, `kib`, `MIB`, ...) is ambiguous or
    // miscased; name both readings.
    let lower = unit.to_ascii_lowercase();
    let rest = lower.get(1..).unwrap_or("");
    if !matches!(rest, "" | "b" | "ib") {
        return Err(None);
    }
    Err(Some(match lower.chars().next() {
        Some('k') => ("KB (1000)", "KiB (1024)"),
        Some('m') => ("MB (1000²)", "MiB (1024²)"),
        Some('g') => ("GB (1000³)", "GiB (1024³)"),
        Some('t') => ("TB (1000⁴)", "TiB (1024⁴)"),
        _ => return Err(None),
    }))
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

#[cfg(test)]
mod byte_size_tests {
    use super::*;
    use proptest::prelude::*;

    fn p(s: &str) -> Result<u64, ParseByteSizeError> {
        s.parse::<ByteSize>().map(ByteSize::bytes)
    }

    #[test]
    fn parses_si_and_iec_units() {
        assert_eq!(p("1500"), Ok(1500));
        assert_eq!(p("1500B"), Ok(1500));
        assert_eq!(p("1500 bytes"), Ok(1500));
        assert_eq!(p("64KB"), Ok(64_000));
        assert_eq!(p("64kB"), Ok(64_000));
        assert_eq!(p("64KiB"), Ok(65_536));
        assert_eq!(p("1.5MB"), Ok(1_500_000));
        assert_eq!(p("1.5MiB"), Ok(3 << 19));
        assert_eq!(p("256KiB"), Ok(256 << 10));
        assert_eq!(p("64MiB"), Ok(64 << 20));
        assert_eq!(p("2GB"), Ok(2_000_000_000));
        assert_eq!(p("2GiB"), Ok(2 << 30));
        assert_eq!(p(" 100KB "), Ok(100_000));
        assert_eq!(p("0.5KB"), Ok(500));
        assert_eq!(p(".5KiB"), Ok(512));
    }

    #[test]
    fn refuses_ambiguous_units_naming_both_readings() {
        for text in ["64K", "64k", "64kb", "64Kb", "1M", "1mb", "2G", "64kib"] {
            let e = p(text).unwrap_err();
            assert!(
                matches!(e, ParseByteSizeError::Ambiguous { .. }),
                "{text}: {e:?}"
            );
        }
        assert_eq!(
            p("64K").unwrap_err().to_string(),
            "ambiguous unit 'K' in \"64K\": write KB (1000) or KiB (1024)"
        );
        assert!(p("1M").unwrap_err().to_string().contains("MiB"));
    }

    #[test]
    fn refuses_bad_sizes_clearly() {
        assert_eq!(p(""), Err(ParseByteSizeError::Empty));
        assert!(matches!(p("KB"), Err(ParseByteSizeError::Invalid(_))));
        assert!(matches!(p("1.2.3KB"), Err(ParseByteSizeError::Invalid(_))));
        assert!(matches!(p("-1KB"), Err(ParseByteSizeError::Invalid(_))));
        assert!(matches!(
            p("12 parsecs"),
            Err(ParseByteSizeError::UnknownUnit { .. })
        ));
        assert!(matches!(p("1.5B"), Err(ParseByteSizeError::Fractional(_))));
        assert!(matches!(
            p("99999999TiB"),
            Err(ParseByteSizeError::TooLarge(_))
        ));
        assert!(matches!(
            p("18446744073709551616"),
            Err(ParseByteSizeError::TooLarge(_))
        ));
        assert_eq!(p("18446744073709551615"), Ok(u64::MAX));
    }

    #[test]
    fn displays_the_largest_exact_unit() {
        let d = |b: u64| ByteSize::from_bytes(b).to_string();
        assert_eq!(d(0), "0 B");
        assert_eq!(d(1500), "1500 B");
        assert_eq!(d(64_000), "64 KB");
        assert_eq!(d(65_536), "64 KiB");
        assert_eq!(d(3 << 19), "1536 KiB");
        assert_eq!(d(64 << 20), "64 MiB");
        assert_eq!(d(1_000_000_000), "1 GB");
    }

    proptest! {
        #[test]
        fn display_parse_round_trips(b in any::<u64>()) {
            let s = ByteSize::from_bytes(b);
            prop_assert_eq!(s.to_string().parse::<ByteSize>(), Ok(s));
        }

        #[test]
        fn round_multiples_round_trip(n in 0u64..1_000_000, u in 0usize..BYTE_UNITS.len()) {
            let s = ByteSize::from_bytes(n * BYTE_UNITS[u].1);
            prop_assert_eq!(s.to_string().parse::<ByteSize>(), Ok(s));
        }
    }
}
