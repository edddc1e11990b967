//! Link capacity over time: constant, trace-driven, or synthetic.
//!
//! Main types: [`Capacity`] (what a link or a paced source runs at),
//! [`RateSchedule`] (a piecewise-constant rate that loops, built from a
//! trace's rate series or from [`SyntheticSpec`]).
//!
//! # Serialization model
//! A link serves bits as a fluid at its momentary rate: a packet of `b` bits
//! whose service starts at `t0` finishes at the first `t` with
//! `∫[t0,t] rate = b`. A rate change while a packet is being served therefore
//! speeds up or slows down the rest of that packet, exactly; a rate of zero
//! stalls service until the rate comes back (never a division by zero), and
//! a schedule whose whole loop has zero capacity never finishes
//! ([`Capacity::finish_time`] returns `None`). All arithmetic is in integer
//! bit·nanoseconds (`u128`), so results are exact and reproducible.
//!
//! # Synthetic model
//! [`SyntheticSpec`] draws a log-normal AR(1) process: `ln rate` is a
//! Gaussian AR(1) with lag-one correlation `exp(-step / corr_time)` and
//! variance chosen so that the rate has the requested mean and coefficient of
//! variation. It is generated once, from a seeded `ChaCha8Rng`, for the
//! length of the run, and then loops like a trace.

use crate::{Bandwidth, Duration, Instant};
use rand::Rng;
use rand_chacha::ChaCha8Rng;

/// Most bins a schedule may hold (about 190 days at 1 s or 46 h at 10 ms).
pub const MAX_SCHEDULE_BINS: usize = 1 << 24;

const NS_PER_S: u128 = 1_000_000_000;

/// An error building a schedule.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum CapacityError {
    /// The series is empty.
    #[error("the rate series is empty")]
    Empty,
    /// The bin width is zero.
    #[error("the bin width must be positive")]
    ZeroBin,
    /// Too many bins.
    #[error(
        "the rate series has {0} bins; at most {MAX_SCHEDULE_BINS} are allowed (use a coarser bin)"
    )]
    TooLong(usize),
    /// A synthetic parameter is out of range.
    #[error("synthetic capacity: {0}")]
    BadSynthetic(String),
}

/// A piecewise-constant rate: `rates[i]` holds over `[i·bin, (i+1)·bin)`,
/// and the series loops after its last bin.
#[derive(Clone, Debug, PartialEq)]
pub struct RateSchedule {
    bin: Duration,
    rates: Vec<Bandwidth>,
    /// Work (bit·ns) one loop delivers.
    loop_work: u128,
}

impl RateSchedule {
    /// A schedule from a rate series.
    ///
    /// # Errors
    /// An empty series, a zero bin, or more than [`MAX_SCHEDULE_BINS`] bins.
    pub fn new(bin: Duration, rates: Vec<Bandwidth>) -> Result<Self, CapacityError> {
        if rates.is_empty() {
            return Err(CapacityError::Empty);
        }
        if bin.is_zero() {
            return Err(CapacityError::ZeroBin);
        }
        if rates.len() > MAX_SCHEDULE_BINS {
            return Err(CapacityError::TooLong(rates.len()));
        }
        let loop_work = rates
            .iter()
            .map(|r| r.bps() as u128 * bin.as_nanos() as u128)
            .sum();
        Ok(RateSchedule {
            bin,
            rates,
            loop_work,
        })
    }

    /// Bin width.
    pub fn bin(&self) -> Duration {
        self.bin
    }

    /// The rates, one per bin.
    pub fn rates(&self) -> &[Bandwidth] {
        &self.rates
    }

    /// Length of one loop.
    pub fn period(&self) -> Duration {
        self.bin.saturating_mul(self.rates.len() as u64)
    }

    /// Multiplies every rate by `k` (for scaled cross traffic).
    pub fn scaled(&self, k: f64) -> Self {
        let rates = self.rates.iter().map(|r| r.mul_f64(k)).collect();
        // Same length and bin as `self`, which was valid.
        RateSchedule::new(self.bin, rates).unwrap_or_else(|_| self.clone())
    }

    fn locate(&self, t: Instant) -> (usize, u64) {
        let bin = self.bin.as_nanos();
        let idx = (t.as_nanos() / bin) % self.rates.len() as u64;
        (idx as usize, t.as_nanos() % bin)
    }
}

/// What a link (or a paced source) can send over time.
#[derive(Clone, Debug, PartialEq)]
pub enum Capacity {
    /// The same rate forever.
    Constant(Bandwidth),
    /// A looping piecewise-constant schedule.
    Schedule(RateSchedule),
}

impl Capacity {
    /// The rate at instant `t`.
    pub fn rate_at(&self, t: Instant) -> Bandwidth {
        match self {
            Capacity::Constant(r) => *r,
            Capacity::Schedule(s) => s.rates[s.locate(t).0],
        }
    }

    /// The long-run mean rate.
    pub fn mean(&self) -> Bandwidth {
        match self {
            Capacity::Constant(r) => *r,
            Capacity::Schedule(s) => {
                let ns = s.period().as_nanos() as u128;
                Bandwidth::from_bps(u64::try_from(s.loop_work / ns.max(1)).unwrap_or(u64::MAX))
            }
        }
    }

    /// When a packet of `bytes` whose service starts at `start` is fully
    /// sent; `None` if it never is (zero capacity forever). See the module
    /// docs for the model.
    pub fn finish_time(&self, start: Instant, bytes: u64) -> Option<Instant> {
        let mut need = bytes as u128 * 8 * NS_PER_S;
        if need == 0 {
            return Some(start);
        }
        match self {
            Capacity::Constant(r) => {
                if r.bps() == 0 {
                    return None;
                }
                Some(start + ns_dur(need.div_ceil(r.bps() as u128)))
            }
            Capacity::Schedule(s) => {
                if s.loop_work == 0 {
                    return None;
                }
                let bin = s.bin.as_nanos();
                let n = s.rates.len();
                let (mut idx, offset) = s.locate(start);
                let mut t = start;
                let mut left_in_bin = bin - offset;
                let mut skipped = false;
                loop {
                    let rate = s.rates[idx].bps() as u128;
                    let avail = rate * left_in_bin as u128;
                    if avail >= need && rate > 0 {
                        return Some(t + ns_dur(need.div_ceil(rate)));
                    }
                    need -= avail;
                    t += Duration::from_nanos(left_in_bin);
                    idx = (idx + 1) % n;
                    left_in_bin = bin;
                    if !skipped && idx == 0 && need > s.loop_work {
                        // Skip whole loops at once; leave the last partial one.
                        let loops = (need - 1) / s.loop_work;
                        need -= loops * s.loop_work;
                        t += ns_dur(loops * s.period().as_nanos() as u128);
                        skipped = true;
                    }
                }
            }
        }
    }

    /// Work (bit·ns) deliverable over `[from, to)`.
    fn work_between(&self, from: Instant, to: Instant) -> u128 {
        if to <= from {
            return 0;
        }
        match self {
            Capacity::Constant(r) => r.bps() as u128 * (to - from).as_nanos() as u128,
            Capacity::Schedule(s) => {
                let bin = s.bin.as_nanos();
                let mut t = from.as_nanos();
                let end = to.as_nanos();
                let mut work = 0u128;
                while t < end {
                    let (idx, off) = s.locate(Instant::from_nanos(t));
                    let step = (bin - off).min(end - t);
                    work += s.rates[idx].bps() as u128 * step as u128;
                    t += step;
                }
                work
            }
        }
    }

    /// The mean rate over `[from, to)` (zero for an empty interval).
    pub fn mean_rate(&self, from: Instant, to: Instant) -> Bandwidth {
        let ns = (to - from).as_nanos() as u128;
        if ns == 0 {
            return Bandwidth::ZERO;
        }
        let bps = self.work_between(from, to) / ns;
        Bandwidth::from_bps(u64::try_from(bps).unwrap_or(u64::MAX))
    }
}

fn ns_dur(ns: u128) -> Duration {
    Duration::from_nanos(u64::try_from(ns).unwrap_or(u64::MAX))
}

/// Parameters of the synthetic log-normal AR(1) capacity (module docs).
#[derive(Clone, Debug, PartialEq)]
pub struct SyntheticSpec {
    /// Mean rate.
    pub mean: Bandwidth,
    /// Coefficient of variation (std / mean) of the rate, `0 ≤ cov ≤ 10`.
    pub cov: f64,
    /// Correlation time: the lag at which correlation of `ln rate` falls to 1/e.
    pub corr_time: Duration,
    /// Width of one constant-rate step.
    pub step: Duration,
}

impl SyntheticSpec {
    /// Draws a schedule covering at least `length` (then looping).
    ///
    /// # Errors
    /// A zero step or correlation time, a CoV outside `[0, 10]`, or a
    /// schedule longer than [`MAX_SCHEDULE_BINS`].
    pub fn generate(
        &self,
        length: Duration,
        rng: &mut ChaCha8Rng,
    ) -> Result<RateSchedule, CapacityError> {
        if self.step.is_zero() || self.corr_time.is_zero() {
            return Err(CapacityError::BadSynthetic(
                "step and corr_time must be positive".into(),
            ));
        }
        if !(0.0..=10.0).contains(&self.cov) {
            return Err(CapacityError::BadSynthetic(format!(
                "cov must be between 0 and 10, got {}",
                self.cov
            )));
        }
        let bins = length.as_nanos().div_ceil(self.step.as_nanos()).max(1);
        let bins = usize::try_from(bins).unwrap_or(usize::MAX);
        if bins > MAX_SCHEDULE_BINS {
            return Err(CapacityError::TooLong(bins));
        }
        let var = (1.0 + self.cov * self.cov).ln();
        let sigma = var.sqrt();
        let mu = (self.mean.bps() as f64).ln() - var / 2.0;
        let phi = (-self.step.as_secs_f64() / self.corr_time.as_secs_f64()).exp();
        let innov = (1.0 - phi * phi).sqrt() * sigma;
        let mut x = sigma * std_normal(rng);
        let mut rates = Vec::with_capacity(bins);
        for _ in 0..bins {
            rates.push(Bandwidth::from_bps_f64((mu + x).exp()));
            x = phi * x + innov * std_normal(rng);
        }
        RateSchedule::new(self.step, rates)
    }
}

/// A standard normal draw (Box–Muller; one of the pair is discarded so each
/// call consumes exactly two uniforms).
pub(crate) fn std_normal(rng: &mut ChaCha8Rng) -> f64 {
    let u1: f64 = 1.0 - rng.random::<f64>(); // (0, 1]
    let u2: f64 = rng.random::<f64>();
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn mbit(m: u64) -> Bandwidth {
        Bandwidth::from_mbps(m)
    }

    #[test]
    fn constant_finish_time() {
        let c = Capacity::Constant(mbit(100));
        assert_eq!(
            c.finish_time(Instant::ZERO, 1500),
            Some(Instant::from_nanos(120_000))
        );
        assert_eq!(
            Capacity::Constant(Bandwidth::ZERO).finish_time(Instant::ZERO, 1),
            None
        );
    }

    #[test]
    fn rate_change_mid_packet_is_exact() {
        // 1 ms at 8 Mbit/s (1000 bytes), then 16 Mbit/s.
        let s = RateSchedule::new(Duration::from_millis(1), vec![mbit(8), mbit(16)]).unwrap();
        let c = Capacity::Schedule(s);
        // 1500 bytes from t=0: 1000 bytes in the first ms, 500 bytes at 2 B/us = 250 us.
        assert_eq!(
            c.finish_time(Instant::ZERO, 1500),
            Some(Instant::from_nanos(1_250_000))
        );
    }

    #[test]
    fn zero_rate_stalls_then_resumes() {
        let s = RateSchedule::new(
            Duration::from_millis(1),
            vec![Bandwidth::ZERO, Bandwidth::ZERO, mbit(8)],
        )
        .unwrap();
        let c = Capacity::Schedule(s);
        assert_eq!(
            c.finish_time(Instant::ZERO, 500),
            Some(Instant::from_nanos(2_500_000))
        );
        // Large packets wrap around loops: 1000 bytes per 3 ms loop.
        assert_eq!(
            c.finish_time(Instant::ZERO, 2500),
            Some(Instant::from_nanos(8_500_000))
        );
        let dead = RateSchedule::new(Duration::from_millis(1), vec![Bandwidth::ZERO]).unwrap();
        assert_eq!(Capacity::Schedule(dead).finish_time(Instant::ZERO, 1), None);
    }

    #[test]
    fn skips_whole_loops() {
        let s =
            RateSchedule::new(Duration::from_millis(1), vec![mbit(8), Bandwidth::ZERO]).unwrap();
        let c = Capacity::Schedule(s);
        // 1000 bytes per 2 ms loop: 1,000,000 bytes take 999 loops + 1 ms.
        assert_eq!(
            c.finish_time(Instant::ZERO, 1_000_000),
            Some(Instant::from_nanos(999 * 2_000_000 + 1_000_000))
        );
        assert_eq!(c.mean(), mbit(4));
        assert_eq!(
            c.mean_rate(Instant::ZERO, Instant::from_nanos(3_000_000)),
            Bandwidth::from_bps(16_000_000 / 3)
        );
    }

    #[test]
    fn synthetic_has_requested_mean_and_cov() {
        let spec = SyntheticSpec {
            mean: mbit(10),
            cov: 0.4,
            corr_time: Duration::from_millis(500),
            step: Duration::from_millis(100),
        };
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let s = spec
            .generate(Duration::from_secs(20_000), &mut rng)
            .unwrap();
        let v: Vec<f64> = s.rates().iter().map(|r| r.mbps()).collect();
        let mean = v.iter().sum::<f64>() / v.len() as f64;
        let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / v.len() as f64;
        assert!((mean - 10.0).abs() < 0.3, "mean {mean}");
        assert!(
            (var.sqrt() / mean - 0.4).abs() < 0.03,
            "cov {}",
            var.sqrt() / mean
        );
        let mut rng2 = ChaCha8Rng::seed_from_u64(3);
        assert_eq!(
            spec.generate(Duration::from_secs(20_000), &mut rng2)
                .unwrap(),
            s
        );
    }

    proptest::proptest! {
        /// The finish time is the first instant at which the schedule has
        /// delivered the packet's bits: enough work by then, not enough 1 ns
        /// earlier.
        #[test]
        fn finish_time_is_exact(
            rates in proptest::collection::vec(0u64..50_000_000, 1..20),
            bin_us in 1u64..5_000,
            start_ns in 0u64..100_000_000,
            bytes in 1u64..200_000,
        ) {
            let s = RateSchedule::new(
                Duration::from_micros(bin_us),
                rates.iter().map(|&r| Bandwidth::from_bps(r)).collect(),
            ).unwrap();
            let c = Capacity::Schedule(s);
            let start = Instant::from_nanos(start_ns);
            let need = bytes as u128 * 8 * NS_PER_S;
            match c.finish_time(start, bytes) {
                None => proptest::prop_assert!(rates.iter().all(|&r| r == 0)),
                Some(t) => {
                    proptest::prop_assert!(t > start);
                    proptest::prop_assert!(c.work_between(start, t) >= need);
                    proptest::prop_assert!(c.work_between(start, t - Duration::from_nanos(1)) < need);
                }
            }
        }
    }
}
