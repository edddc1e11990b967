//! [`SlidingWindow`]: the empirical bandwidth distribution of the last N
//! samples (seed 000, section IV; the F and M\[b\] of section V.B).
//!
//! The window keeps samples in arrival order (a ring) and, beside them, an
//! order-statistic treap with subtree counts and sums. Pushing a sample
//! evicts the oldest once the window is full; both cost O(log N). Queries:
//!
//! | method | meaning | cost |
//! | --- | --- | --- |
//! | [`SlidingWindow::quantile`] | F⁻¹(q), the ⌈qN⌉-th smallest sample | O(log N) |
//! | [`SlidingWindow::cdf`] | F(b) = fraction of samples ≤ b | O(log N) |
//! | [`SlidingWindow::partial_mean`] | M\[b\] = E\[b·1{b ≤ b0}\], the partial expectation | O(log N) |
//! | [`SlidingWindow::mean`] | mean of all samples | O(1) |
//!
//! The guarantee API built on these (Lemma 1 and Lemma 2) is in
//! [`super::guarantee`].

use std::collections::VecDeque;

use super::tree::OrderTree;
use super::EstimateError;
use crate::Bandwidth;

/// The largest window accepted: 16 Mi samples (27 days of 100 ms samples).
/// Larger requests are clamped to it so that a typo cannot ask for terabytes.
pub const MAX_WINDOW: usize = 1 << 24;

/// How many slots are allocated up front; the rest grow on demand.
const INITIAL_RESERVE: usize = 4096;

/// The last `capacity` bandwidth samples, with their empirical distribution.
///
/// Invariants: `len() ≤ capacity()`, `capacity() ≥ 1`; the ring and the tree
/// hold the same multiset of values; each entry has a unique sequence tag.
///
/// # Example
/// ```
/// use braid_core::{estimate::SlidingWindow, Bandwidth};
/// let mut w = SlidingWindow::new(3);
/// for mbps in [4, 1, 3] {
///     assert_eq!(w.push(Bandwidth::from_mbps(mbps)), None);
/// }
/// assert_eq!(w.push(Bandwidth::from_mbps(2)), Some(Bandwidth::from_mbps(4)));
/// assert_eq!(w.quantile(0.5), Some(Bandwidth::from_mbps(2))); // ⌈1.5⌉ = 2nd of {1,2,3}
/// assert_eq!(w.cdf(Bandwidth::from_mbps(2)), 2.0 / 3.0);
/// ```
#[derive(Debug, Clone)]
pub struct SlidingWindow {
    capacity: usize,
    /// `(value in bit/s, sequence tag)` in arrival order.
    ring: VecDeque<(u64, u64)>,
    tree: OrderTree,
    next_seq: u64,
}

impl SlidingWindow {
    /// A window over the last `capacity` samples.
    ///
    /// Never fails: a capacity of 0 is read as 1 and one above
    /// [`MAX_WINDOW`] as [`MAX_WINDOW`]. Use [`Self::try_new`] to have those
    /// refused instead.
    pub fn new(capacity: usize) -> Self {
        let capacity = capacity.clamp(1, MAX_WINDOW);
        let reserve = capacity.min(INITIAL_RESERVE);
        SlidingWindow {
            capacity,
            ring: VecDeque::with_capacity(reserve),
            tree: OrderTree::with_capacity(reserve),
            next_seq: 0,
        }
    }

    /// A window over the last `capacity` samples.
    ///
    /// # Errors
    /// [`EstimateError::WindowCapacity`] if `capacity` is 0 or above
    /// [`MAX_WINDOW`].
    pub fn try_new(capacity: usize) -> Result<Self, EstimateError> {
        if capacity == 0 || capacity > MAX_WINDOW {
            return Err(EstimateError::WindowCapacity(capacity));
        }
        Ok(Self::new(capacity))
    }

    /// Adds a sample; when the window was full, evicts and returns the oldest.
    pub fn push(&mut self, sample: Bandwidth) -> Option<Bandwidth> {
        let evicted = if self.ring.len() >= self.capacity {
            self.ring.pop_front().map(|(value, seq)| {
                let removed = self.tree.remove(value, seq);
                debug_assert!(removed, "ring and tree hold the same entries");
                Bandwidth::from_bps(value)
            })
        } else {
            None
        };
        let seq = self.next_seq;
        // 2^64 pushes will not happen; wrapping keeps it panic-free and tags
        // stay unique as long as fewer than 2^64 entries are live.
        self.next_seq = self.next_seq.wrapping_add(1);
        self.ring.push_back((sample.bps(), seq));
        self.tree.insert(sample.bps(), seq);
        debug_assert_eq!(self.tree.len(), self.ring.len());
        evicted
    }

    /// Removes and returns the oldest sample (the one [`Self::push`] would
    /// evict next); `None` on an empty window. An adaptive window
    /// ([`super::AdaptiveWindow`]) shrinks the window with it.
    pub fn pop_oldest(&mut self) -> Option<Bandwidth> {
        let (value, seq) = self.ring.pop_front()?;
        let removed = self.tree.remove(value, seq);
        debug_assert!(removed, "ring and tree hold the same entries");
        Some(Bandwidth::from_bps(value))
    }

    /// Removes every sample.
    pub fn clear(&mut self) {
        self.ring.clear();
        self.tree.clear();
    }

    /// Number of samples held (≤ capacity).
    pub fn len(&self) -> usize {
        self.ring.len()
    }

    /// True when no sample is held.
    pub fn is_empty(&self) -> bool {
        self.ring.is_empty()
    }

    /// True when the window holds `capacity` samples.
    pub fn is_full(&self) -> bool {
        self.ring.len() >= self.capacity
    }

    /// The window size N.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Samples in arrival order, oldest first.
    pub fn iter(&self) -> impl Iterator<Item = Bandwidth> + '_ {
        self.ring.iter().map(|&(v, _)| Bandwidth::from_bps(v))
    }

    /// The most recent sample.
    pub fn latest(&self) -> Option<Bandwidth> {
        self.ring.back().map(|&(v, _)| Bandwidth::from_bps(v))
    }

    /// The `k`-th smallest sample, 0-based (`k = 0` is the minimum).
    pub fn order_statistic(&self, k: usize) -> Option<Bandwidth> {
        self.tree.select(k).map(Bandwidth::from_bps)
    }

    /// The smallest sample.
    pub fn min(&self) -> Option<Bandwidth> {
        self.order_statistic(0)
    }

    /// The largest sample.
    pub fn max(&self) -> Option<Bandwidth> {
        self.order_statistic(self.len().checked_sub(1)?)
    }

    /// The empirical quantile F⁻¹(q) = min{ b : F(b) ≥ q }.
    ///
    /// Exactly: with N samples sorted ascending as s₁ ≤ … ≤ s_N, the result
    /// is s_k with k = max(1, ⌈q·N⌉) — the *lower* order statistic, no
    /// interpolation. q = 0 gives the minimum and q = 1 the maximum. So that
    /// `q = 1 − 0.9` (which is 0.09999999999999998 in floating point) with
    /// N = 500 gives k = 50 and not 50 − ε rounded up differently, a product
    /// q·N within 10⁻⁹ (relative) of an integer is taken as that integer.
    ///
    /// Why the lower statistic: for i.i.d. samples, a fresh sample falls
    /// below s_k with probability k/(N+1) ≤ q, so the promise "at least
    /// F⁻¹(1−P)" is calibrated (violated at most 1−P of the time).
    ///
    /// Returns `None` on an empty window and when q is NaN or outside [0, 1].
    pub fn quantile(&self, q: f64) -> Option<Bandwidth> {
        let k = quantile_rank(q, self.len())?;
        self.order_statistic(k)
    }

    /// Number of samples ≤ `b`.
    pub fn count_le(&self, b: Bandwidth) -> usize {
        self.tree.prefix(b.bps(), true).0
    }

    /// Number of samples < `b`.
    pub fn count_lt(&self, b: Bandwidth) -> usize {
        self.tree.prefix(b.bps(), false).0
    }

    /// Sum of the samples ≤ `b`, in bit/s (exact).
    pub fn sum_le(&self, b: Bandwidth) -> u128 {
        self.tree.prefix(b.bps(), true).1
    }

    /// Sum of all samples in bit/s (exact).
    pub fn sum(&self) -> u128 {
        self.tree.total()
    }

    /// F(b): the fraction of samples ≤ `b`; 0.0 on an empty window.
    pub fn cdf(&self, b: Bandwidth) -> f64 {
        ratio(self.count_le(b) as f64, self.len())
    }

    /// F(b−): the fraction of samples strictly below `b`; 0.0 on an empty
    /// window. The seed defines F(b) = P{avail_bw ∈ (0, b)}, an open
    /// interval, which is this function; it differs from [`Self::cdf`] only
    /// at values that occur in the window.
    pub fn cdf_below(&self, b: Bandwidth) -> f64 {
        ratio(self.count_lt(b) as f64, self.len())
    }

    /// M\[b0\], the **partial expectation** E\[b · 1{b ≤ b0}\] in bit/s:
    /// (sum of the samples ≤ b0) / N. 0.0 on an empty window.
    ///
    /// Lemma 2's text calls M\[b0\] "the mean of b for all b ≤ b0", but its
    /// proof integrates ∫_{−∞}^{b0} b f(b) db, which is the partial
    /// expectation — the conditional mean times F(b0). Only that reading
    /// makes E\[Z\] = x·F(b0) − (t_w/s)·M\[b0\] true, so it is what this returns.
    /// The conditional mean is [`Self::conditional_mean_le`].
    pub fn partial_mean(&self, b0: Bandwidth) -> f64 {
        ratio(self.sum_le(b0) as f64, self.len())
    }

    /// The conditional mean E\[b | b ≤ b0\] in bit/s (the literal wording of
    /// Lemma 2); `None` when no sample is ≤ b0.
    pub fn conditional_mean_le(&self, b0: Bandwidth) -> Option<f64> {
        let (count, sum) = self.tree.prefix(b0.bps(), true);
        (count > 0).then(|| sum as f64 / count as f64)
    }

    /// The mean of all samples in bit/s; `None` on an empty window.
    pub fn mean(&self) -> Option<f64> {
        (!self.is_empty()).then(|| self.sum() as f64 / self.len() as f64)
    }
}

impl Extend<Bandwidth> for SlidingWindow {
    /// Pushes every sample in order (evicting as [`SlidingWindow::push`] does).
    fn extend<I: IntoIterator<Item = Bandwidth>>(&mut self, iter: I) {
        for b in iter {
            self.push(b);
        }
    }
}

/// `num / den`, or 0.0 when `den` is 0.
fn ratio(num: f64, den: usize) -> f64 {
    if den == 0 {
        0.0
    } else {
        num / den as f64
    }
}

/// The 0-based rank used by [`SlidingWindow::quantile`] for `n` samples:
/// `max(1, ⌈q·n⌉) − 1`, with q·n within 10⁻⁹ (relative) of an integer
/// snapped to it. `None` if `n == 0` or q is NaN or outside [0, 1].
pub fn quantile_rank(q: f64, n: usize) -> Option<usize> {
    if n == 0 || !(0.0..=1.0).contains(&q) {
        return None;
    }
    let x = q * n as f64;
    let nearest = x.round();
    let k = if (x - nearest).abs() <= 1e-9 * x.max(1.0) {
        nearest
    } else {
        x.ceil()
    };
    // 0 ≤ k ≤ n here, as 0 ≤ q ≤ 1; the float-to-int cast saturates anyway.
    let k = (k as usize).clamp(1, n);
    Some(k - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bw(v: u64) -> Bandwidth {
        Bandwidth::from_bps(v)
    }

    #[test]
    fn evicts_oldest_and_keeps_arrival_order() {
        let mut w = SlidingWindow::new(3);
        assert!(w.is_empty());
        assert_eq!(w.push(bw(10)), None);
        assert_eq!(w.push(bw(30)), None);
        assert_eq!(w.push(bw(20)), None);
        assert!(w.is_full());
        assert_eq!(w.push(bw(5)), Some(bw(10)));
        assert_eq!(w.iter().collect::<Vec<_>>(), vec![bw(30), bw(20), bw(5)]);
        assert_eq!(w.len(), 3);
        assert_eq!(w.min(), Some(bw(5)));
        assert_eq!(w.max(), Some(bw(30)));
        assert_eq!(w.latest(), Some(bw(5)));
        assert_eq!(w.sum(), 55);
        w.extend([bw(1), bw(2)]);
        assert_eq!(w.iter().collect::<Vec<_>>(), vec![bw(5), bw(1), bw(2)]);
        w.clear();
        assert!(w.is_empty());
        assert_eq!(w.max(), None);
    }

    #[test]
    fn capacity_is_clamped_or_refused() {
        assert_eq!(SlidingWindow::new(0).capacity(), 1);
        assert_eq!(SlidingWindow::new(usize::MAX).capacity(), MAX_WINDOW);
        assert!(matches!(
            SlidingWindow::try_new(0),
            Err(EstimateError::WindowCapacity(0))
        ));
        assert!(SlidingWindow::try_new(500).is_ok());
        let mut one = SlidingWindow::new(0);
        assert_eq!(one.push(bw(1)), None);
        assert_eq!(one.push(bw(2)), Some(bw(1)));
    }

    #[test]
    fn quantile_is_lower_order_statistic() {
        let mut w = SlidingWindow::new(10);
        for v in 1..=10 {
            w.push(bw(v * 100));
        }
        // k = ⌈q·10⌉: q = 0.1 → 1st, 0.15 → 2nd, 0.5 → 5th, 1 → 10th, 0 → 1st.
        assert_eq!(w.quantile(0.1), Some(bw(100)));
        assert_eq!(w.quantile(1.0 - 0.9), Some(bw(100)));
        assert_eq!(w.quantile(0.15), Some(bw(200)));
        assert_eq!(w.quantile(0.5), Some(bw(500)));
        assert_eq!(w.quantile(0.7), Some(bw(700)));
        assert_eq!(w.quantile(1.0), Some(bw(1000)));
        assert_eq!(w.quantile(0.0), Some(bw(100)));
        assert_eq!(w.quantile(f64::NAN), None);
        assert_eq!(w.quantile(-0.1), None);
        assert_eq!(w.quantile(1.5), None);
        assert_eq!(SlidingWindow::new(4).quantile(0.5), None);
    }

    #[test]
    fn rank_snaps_float_noise() {
        // 0.7·10 = 7.000000000000001 in f64; it must be rank 7 (index 6).
        assert_eq!(quantile_rank(0.7, 10), Some(6));
        assert_eq!(quantile_rank(1.0 - 0.9, 500), Some(49));
        assert_eq!(quantile_rank(1.0 - 0.99, 500), Some(4));
        assert_eq!(quantile_rank(0.101, 500), Some(50));
        assert_eq!(quantile_rank(0.5, 0), None);
        for n in 1..200usize {
            for i in 0..=n {
                let q = i as f64 / n as f64;
                assert_eq!(quantile_rank(q, n), Some(i.max(1) - 1), "q={q} n={n}");
            }
        }
    }

    #[test]
    fn cdf_and_partial_mean() {
        let mut w = SlidingWindow::new(4);
        for v in [4, 1, 3, 3] {
            w.push(bw(v));
        }
        assert_eq!(w.cdf(bw(3)), 0.75);
        assert_eq!(w.cdf_below(bw(3)), 0.25);
        assert_eq!(w.cdf(bw(0)), 0.0);
        assert_eq!(w.cdf(bw(100)), 1.0);
        // M[3] = (1 + 3 + 3) / 4 = 1.75; conditional mean = 7/3.
        assert_eq!(w.partial_mean(bw(3)), 1.75);
        assert_eq!(w.conditional_mean_le(bw(3)), Some(7.0 / 3.0));
        assert_eq!(w.conditional_mean_le(bw(0)), None);
        assert_eq!(w.mean(), Some(2.75));
        let empty = SlidingWindow::new(4);
        assert_eq!(empty.cdf(bw(3)), 0.0);
        assert_eq!(empty.partial_mean(bw(3)), 0.0);
        assert_eq!(empty.mean(), None);
    }

    mod props {
        use super::*;
        use proptest::prelude::*;
        use std::collections::VecDeque;

        /// Small values so that ties are common.
        fn values() -> impl Strategy<Value = Vec<u64>> {
            prop::collection::vec(prop_oneof![0u64..20, 0u64..u64::MAX], 0..300)
        }

        proptest! {
            /// Pushing (and so evicting) in any order agrees with a plain
            /// Vec model: contents, order statistics, cdf, partial_mean, mean.
            #[test]
            fn agrees_with_vec_model(cap in 1usize..40, vals in values(), probes in prop::collection::vec(0u64..25, 1..8)) {
                let mut w = SlidingWindow::new(cap);
                let mut model: VecDeque<u64> = VecDeque::new();
                for v in vals {
                    let evicted = w.push(Bandwidth::from_bps(v));
                    model.push_back(v);
                    let expect = (model.len() > cap).then(|| model.pop_front()).flatten();
                    prop_assert_eq!(evicted.map(|b| b.bps()), expect);
                    prop_assert_eq!(w.len(), model.len());
                    prop_assert_eq!(w.iter().map(|b| b.bps()).collect::<Vec<_>>(), model.iter().copied().collect::<Vec<_>>());
                    let mut sorted: Vec<u64> = model.iter().copied().collect();
                    sorted.sort_unstable();
                    for (k, &v) in sorted.iter().enumerate() {
                        prop_assert_eq!(w.order_statistic(k).map(|b| b.bps()), Some(v));
                    }
                    let n = sorted.len() as f64;
                    for &b in probes.iter().chain(sorted.first()) {
                        let le: Vec<u64> = sorted.iter().copied().filter(|&x| x <= b).collect();
                        prop_assert_eq!(w.cdf(Bandwidth::from_bps(b)), le.len() as f64 / n);
                        let sum: u128 = le.iter().map(|&x| u128::from(x)).sum();
                        prop_assert_eq!(w.partial_mean(Bandwidth::from_bps(b)), sum as f64 / n);
                        prop_assert_eq!(w.count_lt(Bandwidth::from_bps(b)), sorted.iter().filter(|&&x| x < b).count());
                    }
                    let total: u128 = sorted.iter().map(|&x| u128::from(x)).sum();
                    prop_assert_eq!(w.sum(), total);
                    prop_assert_eq!(w.mean(), Some(total as f64 / n));
                }
            }

            /// Quantiles equal the same rank of a sorted copy, and are
            /// monotone in q.
            #[test]
            fn quantiles_match_sort_and_are_monotone(vals in prop::collection::vec(any::<u64>(), 1..200), mut qs in prop::collection::vec(0.0f64..=1.0, 1..20)) {
                let mut w = SlidingWindow::new(vals.len());
                for &v in &vals {
                    w.push(Bandwidth::from_bps(v));
                }
                let mut sorted = vals.clone();
                sorted.sort_unstable();
                qs.sort_by(f64::total_cmp);
                let mut prev = None;
                for q in qs {
                    let got = w.quantile(q);
                    let k = quantile_rank(q, sorted.len()).unwrap();
                    prop_assert_eq!(got.map(|b| b.bps()), Some(sorted[k]));
                    // ⌈qN⌉-th smallest: at least qN samples are ≤ it.
                    prop_assert!(w.cdf(got.unwrap()) + 1e-9 >= q);
                    prop_assert!(prev <= got);
                    prev = got;
                }
            }

            /// The tree itself under arbitrary insert/remove interleavings.
            #[test]
            fn tree_any_order(ops in prop::collection::vec((any::<bool>(), 0u64..30, any::<prop::sample::Index>()), 0..300)) {
                let mut t = OrderTree::with_capacity(4);
                let mut live: Vec<(u64, u64)> = Vec::new();
                for (seq, (insert, v, idx)) in ops.into_iter().enumerate() {
                    if insert || live.is_empty() {
                        t.insert(v, seq as u64);
                        live.push((v, seq as u64));
                    } else {
                        let (v, s) = live.swap_remove(idx.index(live.len()));
                        prop_assert!(t.remove(v, s));
                    }
                    t.check();
                    let mut sorted: Vec<u64> = live.iter().map(|&(v, _)| v).collect();
                    sorted.sort_unstable();
                    prop_assert_eq!(t.len(), sorted.len());
                    for (k, &v) in sorted.iter().enumerate() {
                        prop_assert_eq!(t.select(k), Some(v));
                    }
                    let (c, s) = t.prefix(15, true);
                    prop_assert_eq!(c, sorted.iter().filter(|&&x| x <= 15).count());
                    prop_assert_eq!(s, sorted.iter().filter(|&&x| x <= 15).map(|&x| u128::from(x)).sum::<u128>());
                }
            }
        }
    }
}
