//! Per-message timing at the perf server: when each message arrived and how
//! long it took from the client's write to the server's read.
//!
//! Main types: [`Arrivals`] (the accumulator, constant memory) and
//! [`ArrivalSummary`] (what it reports). The client stamps the first
//! [`STAMP_LEN`] bytes of every message with [`stamp_ns`], a reading of the
//! host's `CLOCK_MONOTONIC`; the server reads the same clock on arrival.
//! The latency is therefore meaningful only when both ends run on one host
//! (network namespaces, loopback), which is how the testbed runs them; across
//! hosts it is reported but means nothing.
//!
//! The inter-arrival mean and standard deviation are seed 002's "delay" and
//! "jitter" (§3.3: the mean and the deviation of the packet inter-arrival
//! time at the receiver), here per application message.
//!
//! Invariant: memory is constant — sums for the inter-arrival moments and a
//! log-linear histogram of [`BUCKETS`] counters for the latency (relative
//! error below 1/[`SUB_BUCKETS`]).

/// Bytes of the send stamp at the start of every message that has room.
pub const STAMP_LEN: usize = 8;
/// Sub-buckets per power of two in the latency histogram.
pub const SUB_BUCKETS: usize = 32;
/// Powers of two of microseconds the histogram covers (2^40 µs ≈ 12 days).
const OCTAVES: usize = 40;
/// Counters in the latency histogram.
pub const BUCKETS: usize = SUB_BUCKETS * (OCTAVES + 1);

/// The host's monotonic clock in nanoseconds, the same in every process on
/// the host (unlike [`crate::clock::now`], whose origin is per process).
/// Used only to stamp perf messages, never by the transport.
pub fn stamp_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one `timespec` into the value we own;
    // CLOCK_MONOTONIC always exists on Linux, and on failure the zero stays.
    unsafe {
        libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts);
    }
    (ts.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(ts.tv_nsec as u64)
}

/// Writes the send stamp `ns` into the start of `msg` (if it has room).
pub fn write_stamp(msg: &mut [u8], ns: u64) {
    if let Some(head) = msg.get_mut(..STAMP_LEN) {
        head.copy_from_slice(&ns.to_be_bytes());
    }
}

/// The send stamp at the start of `msg`, if it has room for one.
pub fn read_stamp(msg: &[u8]) -> Option<u64> {
    let head: [u8; STAMP_LEN] = msg.get(..STAMP_LEN)?.try_into().ok()?;
    Some(u64::from_be_bytes(head))
}

/// Accumulates message arrival times and latencies in constant memory.
#[derive(Debug, Clone)]
pub struct Arrivals {
    messages: u64,
    last_ns: Option<u64>,
    gaps: u64,
    gap_sum: f64,
    gap_sq: f64,
    latency: Box<[u64; BUCKETS]>,
    latency_n: u64,
    latency_sum_us: f64,
    latency_max_us: u64,
}

impl Default for Arrivals {
    fn default() -> Self {
        Arrivals {
            messages: 0,
            last_ns: None,
            gaps: 0,
            gap_sum: 0.0,
            gap_sq: 0.0,
            latency: Box::new([0; BUCKETS]),
            latency_n: 0,
            latency_sum_us: 0.0,
            latency_max_us: 0,
        }
    }
}

/// What [`Arrivals`] measured; times in milliseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ArrivalSummary {
    /// Messages counted.
    pub messages: u64,
    /// Mean time between consecutive arrivals (seed 002's "delay").
    pub inter_arrival_mean_ms: f64,
    /// Standard deviation of it (seed 002's "jitter").
    pub inter_arrival_sd_ms: f64,
    /// Messages with a latency sample.
    pub latency_samples: u64,
    /// Mean write-to-read latency.
    pub latency_mean_ms: f64,
    /// Median latency (histogram resolution).
    pub latency_p50_ms: f64,
    /// 95th percentile latency.
    pub latency_p95_ms: f64,
    /// 99th percentile latency.
    pub latency_p99_ms: f64,
    /// Largest latency.
    pub latency_max_ms: f64,
}

fn bucket(us: u64) -> usize {
    if us < SUB_BUCKETS as u64 {
        return us as usize;
    }
    // us >= 32: octave e = floor(log2 us) >= 5; keep the top 6 bits.
    let e = 63 - us.leading_zeros() as usize;
    let shift = e - 5;
    let sub = ((us >> shift) as usize) - SUB_BUCKETS;
    ((shift + 1) * SUB_BUCKETS + sub).min(BUCKETS - 1)
}

/// The smallest latency (µs) that falls in bucket `i`.
fn bucket_floor(i: usize) -> u64 {
    if i < SUB_BUCKETS {
        return i as u64;
    }
    let shift = i / SUB_BUCKETS - 1;
    ((SUB_BUCKETS + i % SUB_BUCKETS) as u64) << shift
}

impl Arrivals {
    /// A message arrived at `now_ns` (on [`stamp_ns`]'s clock), carrying
    /// the send stamp `sent_ns` if it had one.
    pub fn add(&mut self, now_ns: u64, sent_ns: Option<u64>) {
        self.messages += 1;
        if let Some(prev) = self.last_ns {
            let gap = now_ns.saturating_sub(prev) as f64 / 1e6;
            self.gaps += 1;
            self.gap_sum += gap;
            self.gap_sq += gap * gap;
        }
        self.last_ns = Some(now_ns);
        if let Some(sent) = sent_ns {
            let us = now_ns.saturating_sub(sent) / 1000;
            self.latency[bucket(us)] += 1;
            self.latency_n += 1;
            self.latency_sum_us += us as f64;
            self.latency_max_us = self.latency_max_us.max(us);
        }
    }

    fn percentile_ms(&self, q: f64) -> f64 {
        if self.latency_n == 0 {
            return 0.0;
        }
        let rank = ((q * self.latency_n as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, &c) in self.latency.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return bucket_floor(i) as f64 / 1e3;
            }
        }
        self.latency_max_us as f64 / 1e3
    }

    /// The summary so far.
    pub fn summary(&self) -> ArrivalSummary {
        let (mean, sd) = if self.gaps > 0 {
            let n = self.gaps as f64;
            let m = self.gap_sum / n;
            (m, (self.gap_sq / n - m * m).max(0.0).sqrt())
        } else {
            (0.0, 0.0)
        };
        ArrivalSummary {
            messages: self.messages,
            inter_arrival_mean_ms: mean,
            inter_arrival_sd_ms: sd,
            latency_samples: self.latency_n,
            latency_mean_ms: if self.latency_n > 0 {
                self.latency_sum_us / self.latency_n as f64 / 1e3
            } else {
                0.0
            },
            latency_p50_ms: self.percentile_ms(0.50),
            latency_p95_ms: self.percentile_ms(0.95),
            latency_p99_ms: self.percentile_ms(0.99),
            latency_max_ms: self.latency_max_us as f64 / 1e3,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamps_round_trip_and_short_messages_have_none() {
        let mut m = vec![0u8; 20];
        write_stamp(&mut m, 0x0102_0304_0506_0708);
        assert_eq!(read_stamp(&m), Some(0x0102_0304_0506_0708));
        let mut short = [0u8; 5];
        write_stamp(&mut short, 7);
        assert_eq!(short, [0; 5]);
        assert_eq!(read_stamp(&short), None);
    }

    #[test]
    fn buckets_are_monotonic_and_floors_bound_their_values() {
        let mut prev = 0;
        for us in (0..100_000u64).chain([1 << 20, (1 << 30) + 12345, u64::MAX]) {
            let b = bucket(us);
            assert!(b >= prev, "bucket({us}) = {b} < {prev}");
            prev = b;
            assert!(b < BUCKETS);
            let f = bucket_floor(b);
            if b < BUCKETS - 1 {
                assert!(f <= us, "floor {f} > {us}");
                // Relative error below 1/32.
                assert!((us - f) as f64 <= us as f64 / SUB_BUCKETS as f64 + 1.0);
            }
        }
    }

    #[test]
    fn summary_of_regular_arrivals() {
        let mut a = Arrivals::default();
        // Ten messages 100 ms apart, each 50 ms after its stamp.
        for k in 0..10u64 {
            let now = 1_000_000_000 + k * 100_000_000;
            a.add(now, Some(now - 50_000_000));
        }
        let s = a.summary();
        assert_eq!(s.messages, 10);
        assert!((s.inter_arrival_mean_ms - 100.0).abs() < 1e-6);
        assert!(s.inter_arrival_sd_ms < 1e-3);
        assert_eq!(s.latency_samples, 10);
        assert!((s.latency_mean_ms - 50.0).abs() < 1e-6);
        assert!(s.latency_p50_ms <= 50.0 && s.latency_p50_ms > 48.0);
        assert!((s.latency_max_ms - 50.0).abs() < 1e-6);
    }

    #[test]
    fn percentiles_follow_the_distribution() {
        let mut a = Arrivals::default();
        // 99 messages at 10 ms, one at 1 s.
        for k in 0..100u64 {
            let lat = if k == 99 { 1_000_000_000 } else { 10_000_000 };
            a.add(10_000_000_000 + k, Some(10_000_000_000 + k - lat));
        }
        let s = a.summary();
        assert!(s.latency_p50_ms <= 10.0 && s.latency_p50_ms > 9.5);
        assert!(s.latency_p99_ms <= 10.0, "{s:?}");
        assert!((s.latency_max_ms - 1000.0).abs() < 1e-6);
        assert_eq!(Arrivals::default().summary(), ArrivalSummary::default());
    }
}
