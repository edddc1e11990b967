//! PGOS resource mapping (seed 000 §V-B.2a, Fig. 6): which part of which
//! stream goes on which path, so that every guarantee holds.
//!
//! [`map_streams`] is a pure function from stream specs and path views to a
//! [`Mapping`]. Rules, and why:
//!
//! * **Order.** Probabilistic streams by decreasing probability, then tighter
//!   message deadline (t_w/x), then id; then violation-bound streams by
//!   increasing E\[Z\] bound (a mean bound is weaker than a percentile bound).
//!   Best-effort streams are not mapped; they take spare capacity.
//! * **What a path can promise.** Dispatch on a path is EDF among the packets
//!   scheduled there (Table I), not strict priority, so a shortfall hits every
//!   stream on the path. The path must therefore carry the *sum* C_j of what
//!   is mapped on it at the *strictest* probability among those streams:
//!   `P(B_j ≥ C_j) ≥ max_k P_k`. "Guarantee at P minus what is mapped" is
//!   this rule seen from the next stream.
//! * **One path when one suffices, chosen by margin.** Among paths that can
//!   take the whole stream, keep the stream's current path if it still fits
//!   (no reordering, no flapping); otherwise take the one with the largest
//!   probability slack `P(B_j ≥ C_j + r) − P`, ties to the larger rate headroom.
//!   Why slack and not best fit: the strictest streams are mapped first, and a
//!   promise with the most probability to spare survives the most estimation
//!   error and drift, so it needs the fewest remaps; later (weaker) streams
//!   can still be split. One step of lookahead comes first: among the paths
//!   that fit, keep those that leave the fewest later streams without a
//!   single path (mapped greedily by the same rule), so a margin choice does
//!   not force a later split another choice would avoid.
//! * **Split only when needed, combining with a union bound** (default,
//!   [`Combine::UnionBound`]): part j fails with probability ε_j =
//!   1 − P(B_j ≥ C_j + r_j); the stream's rate holds whenever every part
//!   holds, so P(fail) ≤ Σ ε_j whatever the dependence between paths; the
//!   split is accepted when Σ ε_j ≤ 1 − P. [`Combine::Independent`] uses
//!   Π (1 − ε_j) ≥ P, valid only for independent paths. The seed's Theorem 1
//!   sums the parts' probabilities to P, which is not a bound at all. The
//!   failure budget is divided by an exact dynamic programme over `quanta`
//!   steps, using as few paths as possible.
//! * **Violation bounds** (Lemma 2): part j of stream k loses at most
//!   `min(r_kj, (C_j − B_j)⁺)`, so E\[Z_k\] ≤ t_w/(8s) · Σ_j
//!   (S_j(C_j) − S_j(C_j − r_kj)) with S_j(c) = E\[(c − B_j)⁺\]. This is
//!   linearity of expectation, valid across paths whatever the dependence
//!   (the seed's weighted sum is replaced by it). Lemma 2 counts capacity
//!   only; a part also loses the share `loss_j` ([`PathView::loss`]) of
//!   its messages that the path drops, so each part adds
//!   t_w/(8s) · r_kj · loss_j (an upper bound: what the shortfall already
//!   took is not dropped twice, and a reliable stream's retransmission may
//!   still arrive in its window). At packet level this term is most of the
//!   misses of a stream far below its paths' capacity.
//! * **A violation bound may ask for more than a path has shown.** A
//!   probability needs its rate inside the distribution, but a part beyond
//!   the largest sample only adds shortfall (each bit/s past it counts in
//!   full), so a violation-bound part is capped only by the other streams'
//!   constraints on the path. Its E\[Z\] is then finite and honest, and a
//!   stream on paths the session has measured only app-limited still gets
//!   a promise (a cautious one) instead of none.
//! * **Path restrictions** ([`MapRequest::paths`]): a stream restricted to
//!   some paths (pinned, or only the paths whose measured RTT and loss meet
//!   its spec) is placed, split and scored over those paths only; the
//!   others count as paths with no room for it.
//! * **Infeasible**: the stream is listed in [`Mapping::infeasible`] with the
//!   best achievable figures (rate at its P, P at its rate, or E\[Z\]) over
//!   the paths it may use, for the upcall.
//!
//! [`MappingHealth`] and [`check_health`] implement the re-map trigger with
//! hysteresis (a tolerance band and a minimum dwell time; see [`MapperConfig`]).

use super::path::PathView;
use super::spec::StreamSpec;
use super::{PathId, StreamId};
use crate::time::Duration;
use crate::units::Bandwidth;

/// How the guarantees of a split stream's parts combine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Combine {
    /// Σ ε_j ≤ 1 − P: valid whatever the dependence between paths.
    #[default]
    UnionBound,
    /// Π (1 − ε_j) ≥ P: valid only if the paths are independent.
    Independent,
}

/// Mapper settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MapperConfig {
    /// Rule for combining probabilities across the parts of a split stream.
    pub combine: Combine,
    /// Steps the failure budget is divided into when splitting (≥ 1).
    pub quanta: u32,
    /// Hysteresis band: a mapping is kept while every path's load stays
    /// within `(1 + remap_tolerance)` × its guarantee at the strictest
    /// probability on it, `C_j ≤ g_j(P)·(1 + remap_tolerance)`.
    pub remap_tolerance: f64,
    /// Minimum time between two re-maps triggered by distribution shifts.
    pub min_remap_interval: Duration,
    /// How often an unmapped guaranteed stream is retried.
    pub retry_interval: Duration,
}

impl Default for MapperConfig {
    fn default() -> Self {
        MapperConfig {
            combine: Combine::UnionBound,
            quanta: 100,
            remap_tolerance: 0.05,
            min_remap_interval: Duration::from_secs(1),
            retry_interval: Duration::from_secs(5),
        }
    }
}

/// One stream to map.
#[derive(Debug, Clone, PartialEq)]
pub struct MapRequest {
    /// The stream.
    pub id: StreamId,
    /// What it needs.
    pub spec: StreamSpec,
    /// The single path it is on now, kept if it still fits.
    pub sticky: Option<PathId>,
    /// The paths it may use (`None`: any; empty: none).
    pub paths: Option<Vec<PathId>>,
}

impl MapRequest {
    /// A request for `spec` on any path, with no current path.
    pub fn new(id: StreamId, spec: StreamSpec) -> Self {
        MapRequest {
            id,
            spec,
            sticky: None,
            paths: None,
        }
    }
}

/// One part of a mapped stream.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Part {
    /// Path carrying the part.
    pub path: PathId,
    /// Rate of the part.
    pub rate: Bandwidth,
    /// Probability with which the path must carry its load for this part to
    /// hold: the stream's P on a single path; for a split part, the part's
    /// own probability 1 − ε_j (with Σ ε_j ≤ 1 − P under the union bound).
    /// `None` for violation-bound parts.
    pub probability: Option<f64>,
}

/// The best a stream could get, for the upcall.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct BestAchievable {
    /// Largest rate mappable at the spec's probability (or, for a violation
    /// bound, within its E\[Z\] bound).
    pub rate: Bandwidth,
    /// Largest probability at which the spec's rate is mappable (probabilistic
    /// specs; 0 when not even a tiny probability works).
    pub probability: Option<f64>,
    /// Smallest E\[Z\] achievable at the spec's rate (violation-bound specs).
    pub expected_misses: Option<f64>,
}

/// The result of [`map_streams`].
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Mapping {
    /// Parts per mapped stream, in mapping order.
    pub assigned: Vec<(StreamId, Vec<Part>)>,
    /// Guaranteed streams that could not be mapped, with what is achievable.
    pub infeasible: Vec<(StreamId, BestAchievable)>,
}

impl Mapping {
    /// The parts of `id`, if mapped.
    pub fn parts(&self, id: StreamId) -> Option<&[Part]> {
        self.assigned
            .iter()
            .find(|(s, _)| *s == id)
            .map(|(_, p)| p.as_slice())
    }

    /// Total rate mapped onto `path`.
    pub fn load(&self, path: PathId) -> Bandwidth {
        self.assigned
            .iter()
            .flat_map(|(_, ps)| ps.iter())
            .filter(|p| p.path == path)
            .fold(Bandwidth::ZERO, |a, p| a.saturating_add(p.rate))
    }
}

/// Slack for floating-point comparisons of E[Z] against its bound.
const EPS: f64 = 1e-9;

/// A violation-bound stream's constants.
#[derive(Debug, Clone, Copy)]
struct Vb {
    /// t_w / (8 s): misses per window per bit/s of shortfall.
    coeff: f64,
    bound: f64,
}

fn vb_of(spec: &StreamSpec) -> Option<Vb> {
    match *spec {
        StreamSpec::ViolationBound {
            window,
            message_size,
            max_expected_misses,
            ..
        } => Some(Vb {
            coeff: window.as_secs_f64() / (8.0 * f64::from(message_size)),
            bound: max_expected_misses,
        }),
        _ => None,
    }
}

/// Mapper working state: committed load and constraints per path.
#[derive(Clone)]
struct State<'a> {
    views: Vec<&'a PathView>,
    ids: Vec<PathId>,
    committed: Vec<u64>,
    /// Strictest probability on each path (0 = none).
    max_prob: Vec<f64>,
    /// Violation-bound streams mapped so far: constants and parts (path index, rate).
    vbs: Vec<(Vb, Vec<(usize, u64)>)>,
}

impl<'a> State<'a> {
    fn new(paths: &[(PathId, &'a PathView)]) -> Self {
        State {
            views: paths.iter().map(|p| p.1).collect(),
            ids: paths.iter().map(|p| p.0).collect(),
            committed: vec![0; paths.len()],
            max_prob: vec![0.0; paths.len()],
            vbs: Vec::new(),
        }
    }

    /// Which of the mapper's paths `req` may use, by path index.
    fn allowed(&self, req: &MapRequest) -> Vec<bool> {
        self.ids
            .iter()
            .map(|id| req.paths.as_ref().is_none_or(|v| v.contains(id)))
            .collect()
    }

    /// [`State::max_add`] for every path, zero where the stream may not go.
    fn max_adds(&self, allowed: &[bool]) -> Vec<u64> {
        (0..self.ids.len())
            .map(|j| if allowed[j] { self.max_add(j) } else { 0 })
            .collect()
    }

    fn p_at_least(&self, j: usize, c: u64) -> f64 {
        self.views[j]
            .distribution
            .probability_at_least(Bandwidth::from_bps(c))
    }

    fn shortfall(&self, j: usize, c: u64) -> f64 {
        self.views[j]
            .distribution
            .expected_shortfall_bps(Bandwidth::from_bps(c))
    }

    fn guarantee(&self, j: usize, p: f64) -> u64 {
        self.views[j].guarantee(p).bps()
    }

    /// The bit/s a part of `r` loses on path `k` carrying `c` in all (the
    /// part included): its share of the shortfall, and its packets the
    /// path drops (see the module docs).
    fn part_loss(&self, k: usize, c: u64, r: u64) -> f64 {
        self.shortfall(k, c) - self.shortfall(k, c.saturating_sub(r))
            + r as f64 * self.views[k].loss
    }

    /// E[Z] of a violation-bound stream if path `j` carried `c_j` instead.
    fn vb_misses(&self, vb: &Vb, parts: &[(usize, u64)], j: usize, c_j: u64) -> f64 {
        parts
            .iter()
            .map(|&(k, r)| {
                let c = if k == j { c_j } else { self.committed[k] };
                self.part_loss(k, c, r)
            })
            .sum::<f64>()
            * vb.coeff
    }

    /// The most a violation-bound part may add on path `j`, up to `need`:
    /// [`State::max_add`], or `need` when the streams already on `j` hold
    /// with it (a violation bound is not capped by the largest sample).
    fn max_add_violation(&self, j: usize, need: u64) -> u64 {
        if self.existing_ok(j, need) {
            need
        } else {
            self.max_add(j)
        }
    }

    /// Whether every violation-bound stream already mapped still holds if
    /// `parts` are added at once. `max_add` checks one path at a time with
    /// the others fixed, which is exact for a single path but not when a new
    /// split raises the load on several paths that one split violation-bound
    /// stream also uses (its E[Z] sums over its paths).
    fn jointly_ok(&self, parts: &[(usize, u64)]) -> bool {
        if parts.len() < 2 {
            return true;
        }
        let mut sim = self.clone();
        for &(j, r) in parts {
            sim.committed[j] = sim.committed[j].saturating_add(r);
        }
        sim.vbs
            .iter()
            .all(|(vb, vparts)| sim.vb_misses(vb, vparts, usize::MAX, 0) <= vb.bound + EPS)
    }

    /// Whether the streams already on path `j` still hold with `add` more.
    fn existing_ok(&self, j: usize, add: u64) -> bool {
        let c = self.committed[j].saturating_add(add);
        if self.max_prob[j] > 0.0 && self.p_at_least(j, c) < self.max_prob[j] {
            return false;
        }
        self.vbs.iter().all(|(vb, parts)| {
            !parts.iter().any(|&(k, _)| k == j) || self.vb_misses(vb, parts, j, c) <= vb.bound + EPS
        })
    }

    /// Largest `add` that keeps the existing streams on `j` whole (binary search;
    /// the constraints are monotone in the load).
    fn max_add(&self, j: usize) -> u64 {
        let top = self.guarantee(j, 0.0).saturating_sub(self.committed[j]);
        if self.existing_ok(j, top) {
            return top;
        }
        let (mut lo, mut hi) = (0u64, top);
        if !self.existing_ok(j, 0) {
            return 0;
        }
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if self.existing_ok(j, mid) {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// Largest part path `j` can take for a stream that needs probability `p`
    /// on that part.
    fn cap_at(&self, j: usize, p: f64, max_add: u64) -> u64 {
        self.guarantee(j, p)
            .saturating_sub(self.committed[j])
            .min(max_add)
    }

    /// Part probabilities for `parts` of a probabilistic stream at `p`: `p`
    /// for a single path; for a split, each part's realised probability
    /// P(B_j ≥ C_j + r_j), which later streams on j must not lower.
    fn part_probs(&self, parts: &[(usize, u64)], p: f64) -> Vec<Option<f64>> {
        if parts.len() == 1 {
            return vec![Some(p)];
        }
        parts
            .iter()
            .map(|&(j, r)| Some(self.p_at_least(j, self.committed[j].saturating_add(r))))
            .collect()
    }

    fn commit(&mut self, parts: &[(usize, u64)], probs: &[Option<f64>], spec: &StreamSpec) {
        for (&(j, r), prob) in parts.iter().zip(probs) {
            self.committed[j] = self.committed[j].saturating_add(r);
            if let Some(p) = prob {
                self.max_prob[j] = self.max_prob[j].max(*p);
            }
        }
        if let Some(vb) = vb_of(spec) {
            self.vbs.push((vb, parts.to_vec()));
        }
    }
}

/// Per-path caps for `q` quanta of failure budget, for every q in 0..=k.
fn cap_table(st: &State<'_>, j: usize, p: f64, cfg: &MapperConfig, max_add: u64) -> Vec<u64> {
    let k = cfg.quanta.max(1);
    (0..=k)
        .map(|q| {
            let part_p = match cfg.combine {
                Combine::UnionBound => 1.0 - (1.0 - p) * f64::from(q) / f64::from(k),
                Combine::Independent => (p.ln() * f64::from(q) / f64::from(k)).exp(),
            };
            st.cap_at(j, part_p.clamp(0.0, 1.0), max_add)
        })
        .collect()
}

/// Best split of the failure budget over `subset`: (total rate, per-path caps).
fn best_split(tables: &[Vec<u64>], subset: &[usize], k: usize) -> (u64, Vec<u64>) {
    // dp[q] = best total using the paths so far with q quanta; choice per layer.
    let mut dp = vec![0u64; k + 1];
    let mut choices: Vec<Vec<usize>> = Vec::with_capacity(subset.len());
    for &j in subset {
        let t = &tables[j];
        let mut next = vec![0u64; k + 1];
        let mut choice = vec![0usize; k + 1];
        for q in 0..=k {
            for use_q in 0..=q {
                let v = dp[q - use_q].saturating_add(t[use_q]);
                if v > next[q] {
                    next[q] = v;
                    choice[q] = use_q;
                }
            }
        }
        dp = next;
        choices.push(choice);
    }
    let total = dp[k];
    // Walk back the choices.
    let mut caps = vec![0u64; subset.len()];
    let mut q = k;
    for (idx, &j) in subset.iter().enumerate().rev() {
        let use_q = choices[idx][q];
        caps[idx] = tables[j][use_q];
        q -= use_q;
    }
    (total, caps)
}

/// Subsets of `0..n` of size `size`, in lexicographic order.
fn subsets(n: usize, size: usize) -> Vec<Vec<usize>> {
    let mut out = Vec::new();
    let mut cur = Vec::with_capacity(size);
    fn rec(start: usize, n: usize, size: usize, cur: &mut Vec<usize>, out: &mut Vec<Vec<usize>>) {
        if cur.len() == size {
            out.push(cur.clone());
            return;
        }
        for i in start..n {
            cur.push(i);
            rec(i + 1, n, size, cur, out);
            cur.pop();
        }
    }
    rec(0, n, size, &mut cur, &mut out);
    out
}

/// Spread `need` over the caps in proportion (each part ≤ its cap).
fn spread(need: u64, subset: &[usize], caps: &[u64]) -> Vec<(usize, u64)> {
    let total: u128 = caps.iter().map(|&c| u128::from(c)).sum();
    let mut parts: Vec<(usize, u64)> = subset
        .iter()
        .zip(caps)
        .map(|(&j, &c)| {
            let r = (u128::from(need) * u128::from(c))
                .checked_div(total)
                .map_or(0, |r| r as u64);
            (j, r.min(c))
        })
        .collect();
    // Hand the rounding remainder to parts with room, in order.
    let mut left = need.saturating_sub(parts.iter().map(|p| p.1).sum());
    for (i, part) in parts.iter_mut().enumerate() {
        let room = caps[i] - part.1;
        let add = room.min(left);
        part.1 += add;
        left -= add;
    }
    parts.retain(|p| p.1 > 0);
    parts
}

/// Probabilistic placement of `need` at probability `p` on the `allowed`
/// paths: parts, or None.
fn place_probabilistic(
    st: &State<'_>,
    need: u64,
    p: f64,
    sticky: Option<usize>,
    allowed: &[bool],
    rest: &[&MapRequest],
    cfg: &MapperConfig,
) -> Option<Vec<(usize, u64)>> {
    let n = st.ids.len();
    let max_adds = st.max_adds(allowed);
    // Single path.
    let fits = |j: usize| allowed[j] && st.cap_at(j, p, max_adds[j]) >= need;
    if let Some(j) = sticky.filter(|&j| fits(j)) {
        return Some(vec![(j, need)]);
    }
    let candidates: Vec<usize> = (0..n).filter(|&j| fits(j)).collect();
    let best = if candidates.len() > 1 && !rest.is_empty() {
        // Lookahead: prefer the path that leaves the fewest later streams
        // without a single path; ties by margin.
        let misses: Vec<usize> = candidates
            .iter()
            .map(|&j| {
                let mut sim = st.clone();
                sim.commit(
                    &[(j, need)],
                    &[Some(p)],
                    &StreamSpec::MinRate {
                        rate: Bandwidth::from_bps(need),
                        probability: p,
                    },
                );
                single_path_misses(sim, rest)
            })
            .collect();
        let fewest = misses.iter().copied().min().unwrap_or(0);
        let kept: Vec<usize> = candidates
            .iter()
            .zip(&misses)
            .filter(|(_, &m)| m == fewest)
            .map(|(&j, _)| j)
            .collect();
        by_margin(st, &kept, need, p, &max_adds)
    } else {
        by_margin(st, &candidates, need, p, &max_adds)
    };
    if let Some(j) = best {
        return Some(vec![(j, need)]);
    }
    // Split over as few paths as possible.
    let k = cfg.quanta.max(1) as usize;
    let tables: Vec<Vec<u64>> = (0..n)
        .map(|j| cap_table(st, j, p, cfg, max_adds[j]))
        .collect();
    let usable: Vec<usize> = (0..n).filter(|&j| allowed[j]).collect();
    for size in 2..=usable.len() {
        let mut best: Option<(u64, Vec<usize>, Vec<u64>)> = None;
        for picks in subsets(usable.len(), size) {
            let subset: Vec<usize> = picks.iter().map(|&i| usable[i]).collect();
            let (total, caps) = best_split(&tables, &subset, k);
            if total >= need && best.as_ref().is_none_or(|b| total > b.0) {
                best = Some((total, subset, caps));
            }
        }
        if let Some((_, subset, caps)) = best {
            return Some(spread(need, &subset, &caps));
        }
    }
    None
}

/// The candidate with the largest probability slack P(B_j ≥ C_j + need),
/// ties to the larger rate headroom, then the lower index.
fn by_margin(
    st: &State<'_>,
    candidates: &[usize],
    need: u64,
    p: f64,
    max_adds: &[u64],
) -> Option<usize> {
    candidates.iter().copied().max_by(|&a, &b| {
        let slack = |j: usize| st.p_at_least(j, st.committed[j].saturating_add(need));
        let head = |j: usize| st.cap_at(j, p, max_adds[j]);
        slack(a)
            .total_cmp(&slack(b))
            .then(head(a).cmp(&head(b)))
            .then(b.cmp(&a))
    })
}

/// How many of the later probabilistic streams `rest` would find no single
/// path if mapped greedily by margin on `sim` (the lookahead's score).
fn single_path_misses(mut sim: State<'_>, rest: &[&MapRequest]) -> usize {
    let n = sim.ids.len();
    let mut misses = 0;
    for req in rest {
        let (Some(p), Some(rate)) = (req.spec.probability(), req.spec.required_rate()) else {
            continue;
        };
        let need = rate.bps();
        let allowed = sim.allowed(req);
        let max_adds = sim.max_adds(&allowed);
        let candidates: Vec<usize> = (0..n)
            .filter(|&j| allowed[j] && sim.cap_at(j, p, max_adds[j]) >= need)
            .collect();
        match by_margin(&sim, &candidates, need, p, &max_adds) {
            Some(j) => sim.commit(&[(j, need)], &[Some(p)], &req.spec),
            None => misses += 1,
        }
    }
    misses
}

/// Largest rate placeable at probability `p` on the `allowed` paths
/// (single path or split).
fn achievable_rate(st: &State<'_>, p: f64, allowed: &[bool], cfg: &MapperConfig) -> u64 {
    let n = st.ids.len();
    let max_adds = st.max_adds(allowed);
    let all: Vec<usize> = (0..n).filter(|&j| allowed[j]).collect();
    let single = all
        .iter()
        .map(|&j| st.cap_at(j, p, max_adds[j]))
        .max()
        .unwrap_or(0);
    let tables: Vec<Vec<u64>> = (0..n)
        .map(|j| cap_table(st, j, p, cfg, max_adds[j]))
        .collect();
    let (split, _) = best_split(&tables, &all, cfg.quanta.max(1) as usize);
    single.max(split)
}

/// Violation-bound placement on the `allowed` paths by greedy water-filling
/// on the (convex) loss. Returns parts and the resulting E[Z].
fn place_violation(
    st: &State<'_>,
    need: u64,
    vb: &Vb,
    allowed: &[bool],
) -> (Vec<(usize, u64)>, f64) {
    let n = st.ids.len();
    let max_adds: Vec<u64> = (0..n)
        .map(|j| {
            if allowed[j] {
                st.max_add_violation(j, need)
            } else {
                0
            }
        })
        .collect();
    let loss = |j: usize, r: u64| {
        let c = st.committed[j].saturating_add(r);
        st.part_loss(j, c, r)
    };
    // One path first: fewest misses among paths that can take it all.
    let single = (0..n)
        .filter(|&j| allowed[j] && max_adds[j] >= need)
        .map(|j| (j, loss(j, need)))
        .min_by(|a, b| a.1.total_cmp(&b.1));
    if let Some((j, l)) = single {
        if l * vb.coeff <= vb.bound + EPS {
            return (vec![(j, need)], l * vb.coeff);
        }
    }
    const CHUNKS: u64 = 200;
    let step = need.div_ceil(CHUNKS).max(1);
    let mut parts = vec![0u64; n];
    let mut left = need;
    while left > 0 {
        let s = step.min(left);
        let pick = (0..n)
            .filter(|&j| allowed[j] && parts[j].saturating_add(s) <= max_adds[j])
            .min_by(|&a, &b| {
                let da = loss(a, parts[a].saturating_add(s)) - loss(a, parts[a]);
                let db = loss(b, parts[b].saturating_add(s)) - loss(b, parts[b]);
                da.total_cmp(&db)
            });
        let Some(j) = pick else {
            return (Vec::new(), f64::INFINITY);
        };
        parts[j] += s;
        left -= s;
    }
    let z = (0..n).map(|j| loss(j, parts[j])).sum::<f64>() * vb.coeff;
    let placed = parts
        .iter()
        .enumerate()
        .filter(|p| *p.1 > 0)
        .map(|(j, &r)| (j, r))
        .collect();
    (placed, z)
}

fn order_key(spec: &StreamSpec) -> (u8, f64, Duration) {
    let interval = spec.message_interval().unwrap_or(Duration::MAX);
    match (spec.probability(), vb_of(spec)) {
        (Some(p), _) => (0, -p, interval),
        (None, Some(vb)) => (1, vb.bound, interval),
        _ => (2, 0.0, interval),
    }
}

/// The upcall figures for a stream that could not be placed on `st`.
/// (For probabilistic specs the bisection uses the per-path checks, so when
/// split violation-bound streams share paths the figures may be optimistic.)
fn best_achievable(
    st: &State<'_>,
    spec: &StreamSpec,
    need: u64,
    allowed: &[bool],
    cfg: &MapperConfig,
) -> BestAchievable {
    if let Some(p) = spec.probability() {
        let rate = achievable_rate(st, p, allowed, cfg);
        // Largest probability at which `need` fits: bisection. A placement
        // exists iff the best total over all paths (the split programme,
        // which includes every subset and the single paths) reaches `need`.
        let (mut lo, mut hi) = (0.0f64, p);
        for _ in 0..24 {
            let mid = 0.5 * (lo + hi);
            if achievable_rate(st, mid, allowed, cfg) >= need {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        return BestAchievable {
            rate: Bandwidth::from_bps(rate),
            probability: Some(lo),
            expected_misses: None,
        };
    }
    let Some(vb) = vb_of(spec) else {
        return BestAchievable::default();
    };
    let (_, z_at_need) = place_violation(st, need, &vb, allowed);
    // Largest rate within the bound: bisection on the rate.
    let (mut lo, mut hi) = (0u64, need);
    while hi - lo > need / 1000 + 1 {
        let mid = lo + (hi - lo) / 2;
        let (ps, z) = place_violation(st, mid, &vb, allowed);
        if !ps.is_empty() && z <= vb.bound + EPS && st.jointly_ok(&ps) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    BestAchievable {
        rate: Bandwidth::from_bps(lo),
        probability: None,
        expected_misses: Some(z_at_need),
    }
}

/// Map `requests` onto `paths` (see the module docs for the rules).
pub fn map_streams(
    requests: &[MapRequest],
    paths: &[(PathId, &PathView)],
    cfg: &MapperConfig,
) -> Mapping {
    let mut order: Vec<&MapRequest> = requests.iter().filter(|r| r.spec.is_guaranteed()).collect();
    order.sort_by(|a, b| {
        let (ka, kb) = (order_key(&a.spec), order_key(&b.spec));
        ka.0.cmp(&kb.0)
            .then(ka.1.total_cmp(&kb.1))
            .then(ka.2.cmp(&kb.2))
            .then(a.id.cmp(&b.id))
    });
    let mut st = State::new(paths);
    let mut out = Mapping::default();
    for (i, req) in order.iter().enumerate() {
        // Every guaranteed spec has a required rate (validated specs).
        let need = req.spec.required_rate().unwrap_or(Bandwidth::ZERO).bps();
        let sticky = req
            .sticky
            .and_then(|s| st.ids.iter().position(|&id| id == s));
        let rest = &order[i + 1..];
        let allowed = st.allowed(req);
        let placed = if let Some(p) = req.spec.probability() {
            place_probabilistic(&st, need, p, sticky, &allowed, rest, cfg)
        } else if let Some(vb) = vb_of(&req.spec) {
            let (parts, z) = place_violation(&st, need, &vb, &allowed);
            (z <= vb.bound + EPS && !parts.is_empty()).then_some(parts)
        } else {
            continue;
        };
        // A split that breaks an earlier violation-bound stream jointly is
        // refused (conservative).
        let placed = placed
            .filter(|parts| st.jointly_ok(parts))
            .ok_or_else(|| best_achievable(&st, &req.spec, need, &allowed, cfg));
        match placed {
            Ok(parts) => {
                let probs = match req.spec.probability() {
                    Some(p) => st.part_probs(&parts, p),
                    None => vec![None; parts.len()],
                };
                st.commit(&parts, &probs, &req.spec);
                let parts = parts
                    .into_iter()
                    .zip(probs)
                    .map(|((j, r), probability)| Part {
                        path: st.ids[j],
                        rate: Bandwidth::from_bps(r),
                        probability,
                    })
                    .collect();
                out.assigned.push((req.id, parts));
            }
            Err(best) => out.infeasible.push((req.id, best)),
        }
    }
    out
}

#[path = "mapping_health.rs"]
mod health;
pub use health::{check_health, expected_misses, MappingHealth};

#[cfg(test)]
#[path = "mapping_tests.rs"]
mod tests;
