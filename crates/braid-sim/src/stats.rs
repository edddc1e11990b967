//! Measurement containers: time-binned series and a bounded delay histogram.
//!
//! Main types: [`BinSeries`] (one value per fixed-width time bin, summed or
//! maximised), [`DelayHistogram`] (log-linear buckets with 1/128 relative
//! resolution; exact count, mean and max), and [`quantile`] / [`mean`] helpers for
//! percentiles. Invariant: memory is bounded by the run length over the bin
//! width ([`MAX_BINS`]) and by a fixed number of histogram buckets.

use braid_core::{Duration, Instant};

/// Most bins a series keeps; later samples are counted in the last bin.
pub const MAX_BINS: usize = 1 << 22;

/// A series of per-bin values over virtual time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BinSeries {
    bin: Duration,
    values: Vec<u64>,
}

impl BinSeries {
    /// An empty series with bins of `bin` (must be positive; zero is read as 1 ns).
    pub fn new(bin: Duration) -> Self {
        BinSeries {
            bin: if bin.is_zero() {
                Duration::from_nanos(1)
            } else {
                bin
            },
            values: Vec::new(),
        }
    }

    fn slot(&mut self, t: Instant) -> &mut u64 {
        let idx = (t.as_nanos() / self.bin.as_nanos()).min(MAX_BINS as u64 - 1) as usize;
        if self.values.len() <= idx {
            self.values.resize(idx + 1, 0);
        }
        &mut self.values[idx]
    }

    /// Adds `v` to the bin holding `t`.
    pub fn add(&mut self, t: Instant, v: u64) {
        let s = self.slot(t);
        *s = s.saturating_add(v);
    }

    /// Raises the bin holding `t` to at least `v`.
    pub fn max(&mut self, t: Instant, v: u64) {
        let s = self.slot(t);
        *s = (*s).max(v);
    }

    /// Bin width.
    pub fn bin(&self) -> Duration {
        self.bin
    }

    /// The value of bin `i` (zero past the end).
    pub fn get(&self, i: usize) -> u64 {
        self.values.get(i).copied().unwrap_or(0)
    }
}

const SUB_BITS: u32 = 7;
const SUB: u64 = 1 << SUB_BITS;
const BUCKETS: usize = ((64 - SUB_BITS as usize) + 1) * SUB as usize;

/// A histogram of durations with log-linear buckets (relative resolution
/// 1/128); count, sum and max are exact.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DelayHistogram {
    counts: Vec<u64>,
    count: u64,
    sum_ns: u128,
    max_ns: u64,
}

impl Default for DelayHistogram {
    fn default() -> Self {
        Self::new()
    }
}

fn bucket_of(v: u64) -> usize {
    if v < SUB {
        return v as usize;
    }
    let msb = 63 - v.leading_zeros(); // >= SUB_BITS
    let shift = msb - SUB_BITS;
    let mantissa = (v >> shift) - SUB; // 0..SUB
    ((shift as u64 + 1) * SUB + mantissa) as usize
}

fn bucket_high(b: usize) -> u64 {
    let b = b as u64;
    if b < SUB {
        return b;
    }
    let shift = b / SUB - 1;
    let mantissa = b % SUB + SUB;
    // Highest value that maps to this bucket.
    (((mantissa + 1) as u128) << shift)
        .saturating_sub(1)
        .min(u64::MAX as u128) as u64
}

impl DelayHistogram {
    /// An empty histogram.
    pub fn new() -> Self {
        DelayHistogram {
            counts: vec![0; BUCKETS],
            count: 0,
            sum_ns: 0,
            max_ns: 0,
        }
    }

    /// Records one sample.
    pub fn record(&mut self, d: Duration) {
        let v = d.as_nanos();
        self.counts[bucket_of(v)] += 1;
        self.count += 1;
        self.sum_ns += v as u128;
        self.max_ns = self.max_ns.max(v);
    }

    /// Adds all of `other`'s samples.
    pub fn merge(&mut self, other: &DelayHistogram) {
        for (a, b) in self.counts.iter_mut().zip(&other.counts) {
            *a += b;
        }
        self.count += other.count;
        self.sum_ns += other.sum_ns;
        self.max_ns = self.max_ns.max(other.max_ns);
    }

    /// Number of samples.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Exact mean (zero when empty).
    pub fn mean(&self) -> Duration {
        if self.count == 0 {
            return Duration::ZERO;
        }
        Duration::from_nanos((self.sum_ns / self.count as u128) as u64)
    }

    /// Exact maximum.
    pub fn max(&self) -> Duration {
        Duration::from_nanos(self.max_ns)
    }

    /// The `q` quantile (nearest rank, reported as the bucket's upper edge,
    /// capped at the exact max); zero when empty.
    pub fn quantile(&self, q: f64) -> Duration {
        if self.count == 0 {
            return Duration::ZERO;
        }
        let rank = ((q.clamp(0.0, 1.0) * self.count as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (b, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return Duration::from_nanos(bucket_high(b).min(self.max_ns));
            }
        }
        self.max()
    }
}

/// Linear-interpolated quantile of unsorted values (type 7); 0 when empty.
pub fn quantile(values: &[f64], q: f64) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let pos = q.clamp(0.0, 1.0) * (v.len() - 1) as f64;
    let lo = pos.floor() as usize;
    let hi = pos.ceil() as usize;
    v[lo] + (v[hi] - v[lo]) * (pos - lo as f64)
}

/// Arithmetic mean; 0 when empty.
pub fn mean(values: &[f64]) -> f64 {
    if values.is_empty() {
        0.0
    } else {
        values.iter().sum::<f64>() / values.len() as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_quantiles_are_close() {
        let mut h = DelayHistogram::new();
        for ms in 1..=1000u64 {
            h.record(Duration::from_millis(ms));
        }
        let p95 = h.quantile(0.95).as_nanos() as f64 / 1e6;
        assert!((p95 - 950.0).abs() / 950.0 < 0.01, "{p95}");
        assert_eq!(h.max(), Duration::from_millis(1000));
        assert_eq!(h.mean(), Duration::from_micros(500_500));
        for v in [0u64, 1, 127, 128, 129, 1000, 123_456_789, u64::MAX] {
            let b = bucket_of(v);
            assert!(bucket_high(b) >= v);
            assert!(b < BUCKETS);
        }
    }

    #[test]
    fn interpolated_quantile() {
        assert_eq!(quantile(&[3.0, 1.0, 2.0, 4.0], 0.5), 2.5);
        assert_eq!(quantile(&[], 0.5), 0.0);
    }
}
