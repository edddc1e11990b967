//! The seed's weighted-buffer controller (seed 003, sections 2, 3, 3.1, 3.2).
//!
//! [`Weighted`] decides the buffer (block) size `B_i` of every connection in
//! the seed's fork-join layout: block `seq` belongs to connection `seq % N`,
//! and its length is that connection's current `B_i`. It is sans-IO: it is
//! handed one sojourn time per acknowledged block and the time.
//!
//! The algorithm, as the seed states it:
//! 1. **Equal phase**: all `B_i = B`; average each connection's sojourn time
//!    over `m = max(2, ⌈STEPS_NUMERATOR / N⌉)` steps (inversely proportional
//!    to N, never fewer than two) → `t_i`, their mean `μ₀` and deviation `σ₀`.
//! 2. **Weighting** (eq. 2): `B_i = B · r_i / r_max` with `r_i = B_i / t_i`.
//! 3. **Settle**: skip one step per connection so TCP reaches steady state.
//! 4. **Check** (§3.1): measure `m` steps again (`μ_w`, `σ_w`). Both worse
//!    than with equal buffers → go back to equal buffers. Only the mean
//!    worse → early re-weighting from the new measurements (at most
//!    [`MAX_EARLY_REWEIGHTS`] times), without entering the loop.
//! 5. **Feedback loop** (§3, §3.2): every `m` steps compute the mean sojourn
//!    time; the reference is the rolling mean of the last three means; a rise
//!    of more than 33 % re-weights (decreases are discounted). An alarm
//!    re-weights on a clock ([`ALARM`]) for the rare case where the slowest
//!    connection drives the rate wrongly.
//!
//! Invariants: every `B_i` is in `[MIN_BLOCK, B]`; the controller never
//! divides by a zero time (sojourn samples are floored at 1 µs).

use crate::{Duration, Instant};

/// Steps in one measurement for N = 1; divided by N, floored at 2.
pub const STEPS_NUMERATOR: usize = 12;
/// A rise of the mean sojourn time above this factor × reference re-weights.
pub const REWEIGHT_FACTOR: f64 = 1.33;
/// How many rolling means form the loop's reference.
pub const REFERENCE_LEN: usize = 3;
/// The alarm: re-weight at least this often.
pub const ALARM: Duration = Duration::from_secs(10);
/// Early re-weightings allowed in a row before entering the loop.
pub const MAX_EARLY_REWEIGHTS: u32 = 3;
/// The smallest buffer a weight can give (4 KiB).
pub const MIN_BLOCK: u32 = 4096;
/// A step lasts at least this long: sojourn times of consecutive buffers of
/// one connection are averaged until they add up to it. The seed's step is
/// one buffer; with 256 KiB buffers at 100+ Mbit/s that is a few ms of TCP
/// noise, so a step here is "one buffer, or as many as fill 100 ms".
pub const STEP_MIN: Duration = Duration::from_millis(100);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Equal,
    Settle,
    Check,
    Loop,
}

/// The seed's weighted-buffer controller; see the module docs.
///
/// Drive it with [`Weighted::handle_sojourn`] for every acknowledged block
/// and read the buffer size of a connection with [`Weighted::block_len`].
#[derive(Debug, Clone)]
pub struct Weighted {
    base: u32,
    lens: Vec<u32>,
    phase: Phase,
    steps: usize,
    samples: Vec<Vec<f64>>,
    acc: Vec<(f64, u32)>,
    equal_stats: Option<(f64, f64)>,
    history: Vec<f64>,
    early: u32,
    last_weighting: Instant,
    reweights: u64,
}

impl Weighted {
    /// A controller for `n` connections with base buffer `base` bytes.
    pub fn new(n: usize, base: u32, now: Instant) -> Self {
        let n = n.max(1);
        Weighted {
            base,
            lens: vec![base; n],
            phase: Phase::Equal,
            steps: STEPS_NUMERATOR.div_ceil(n).max(2),
            samples: vec![Vec::new(); n],
            acc: vec![(0.0, 0); n],
            equal_stats: None,
            history: Vec::new(),
            early: 0,
            last_weighting: now,
            reweights: 0,
        }
    }

    /// The current buffer size of connection `conn`.
    pub fn block_len(&self, conn: usize) -> u32 {
        self.lens.get(conn).copied().unwrap_or(self.base)
    }

    /// The current buffer size of every connection (the driver logs it
    /// when [`Self::reweights`] grows; braid-core itself does not log).
    pub fn lens(&self) -> &[u32] {
        &self.lens
    }

    /// How many times the weights were recomputed.
    pub fn reweights(&self) -> u64 {
        self.reweights
    }

    /// Feeds the sojourn time of one block of `conn`.
    pub fn handle_sojourn(&mut self, conn: usize, t: Duration, now: Instant) {
        let Some(a) = self.acc.get_mut(conn) else {
            return;
        };
        a.0 += t.as_secs_f64().max(1e-6);
        a.1 += 1;
        if a.0 < STEP_MIN.as_secs_f64() {
            return;
        }
        let step = a.0 / f64::from(a.1);
        *a = (0.0, 0);
        let Some(s) = self.samples.get_mut(conn) else {
            return;
        };
        s.push(step);
        let need = if self.phase == Phase::Settle {
            1
        } else {
            self.steps
        };
        if self.samples.iter().any(|s| s.len() < need) {
            return;
        }
        // One full measurement: mean of the first `need` samples each.
        let t_i: Vec<f64> = self
            .samples
            .iter()
            .map(|s| s[..need].iter().sum::<f64>() / need as f64)
            .collect();
        for s in &mut self.samples {
            s.clear();
        }
        let (mean, dev) = mean_dev(&t_i);
        match self.phase {
            Phase::Equal => {
                self.equal_stats = Some((mean, dev));
                self.weigh(&t_i, now);
                self.phase = Phase::Settle;
            }
            Phase::Settle => {
                self.phase = if self.history.is_empty() && self.equal_stats.is_some() {
                    Phase::Check
                } else {
                    Phase::Loop
                };
            }
            Phase::Check => {
                let (m0, d0) = self.equal_stats.unwrap_or((mean, dev));
                if mean > m0 && dev > d0 {
                    // Weighting made things worse: keep equal buffers.
                    self.lens.iter_mut().for_each(|l| *l = self.base);
                    self.history = vec![m0];
                    self.phase = Phase::Loop;
                } else if mean > m0 && self.early < MAX_EARLY_REWEIGHTS {
                    self.early += 1;
                    self.weigh(&t_i, now);
                    self.phase = Phase::Settle;
                } else {
                    self.history = vec![mean];
                    self.phase = Phase::Loop;
                }
            }
            Phase::Loop => {
                let reference = self.history.iter().sum::<f64>() / self.history.len().max(1) as f64;
                let alarm = now.saturating_duration_since(self.last_weighting) >= ALARM;
                if (!self.history.is_empty() && mean > REWEIGHT_FACTOR * reference) || alarm {
                    self.weigh(&t_i, now);
                    self.history.clear();
                    self.phase = Phase::Settle;
                } else {
                    self.history.push(mean);
                    if self.history.len() > REFERENCE_LEN {
                        self.history.remove(0);
                    }
                }
            }
        }
    }

    /// Eq. 2: `B_i = B · r_i / r_max`, with `r_i = B_i / t_i` measured
    /// under the current buffers.
    fn weigh(&mut self, t_i: &[f64], now: Instant) {
        let rates: Vec<f64> = self
            .lens
            .iter()
            .zip(t_i)
            .map(|(&b, &t)| f64::from(b) / t.max(1e-6))
            .collect();
        let r_max = rates.iter().cloned().fold(0.0, f64::max);
        if r_max <= 0.0 {
            return;
        }
        for (l, r) in self.lens.iter_mut().zip(&rates) {
            let b = (f64::from(self.base) * r / r_max).round();
            *l = (b as u32).clamp(MIN_BLOCK.min(self.base), self.base);
        }
        self.last_weighting = now;
        self.reweights += 1;
    }
}

fn mean_dev(x: &[f64]) -> (f64, f64) {
    let n = x.len().max(1) as f64;
    let mean = x.iter().sum::<f64>() / n;
    let var = x.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n;
    (mean, var.sqrt())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed(w: &mut Weighted, rates: &[f64], rounds: usize, now: &mut Instant) {
        for _ in 0..rounds {
            for (c, r) in rates.iter().enumerate() {
                let t = f64::from(w.block_len(c)) / r;
                *now += Duration::from_secs_f64(t);
                w.handle_sojourn(c, Duration::from_secs_f64(t), *now);
            }
        }
    }

    #[test]
    fn weights_follow_rates() {
        let mut now = Instant::ZERO;
        let mut w = Weighted::new(3, 300_000, now);
        feed(&mut w, &[1e6, 2e6, 3e6], 10, &mut now);
        assert_eq!(w.block_len(2), 300_000);
        assert!((w.block_len(1) as i64 - 200_000).abs() < 2000);
        assert!((w.block_len(0) as i64 - 100_000).abs() < 2000);
    }

    #[test]
    fn slowdown_triggers_reweight() {
        let mut now = Instant::ZERO;
        let mut w = Weighted::new(2, 200_000, now);
        feed(&mut w, &[1e6, 2e6], 20, &mut now);
        let before = w.reweights();
        // The fast channel halves: its sojourn time doubles (mean +50 %).
        feed(&mut w, &[1e6, 0.5e6], 20, &mut now);
        assert!(w.reweights() > before);
        assert_eq!(w.block_len(0), 200_000);
        assert!((w.block_len(1) as i64 - 100_000).abs() < 2000);
    }

    #[test]
    fn steps_inverse_to_n() {
        assert_eq!(Weighted::new(2, 1000, Instant::ZERO).steps, 6);
        assert_eq!(Weighted::new(9, 1000, Instant::ZERO).steps, 2);
        assert_eq!(Weighted::new(40, 1000, Instant::ZERO).steps, 2);
    }
}
