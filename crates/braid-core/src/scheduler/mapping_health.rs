//! The re-map trigger for a PGOS mapping (seed 000 §V-B.2a), with
//! hysteresis: [`check_health`] says whether a [`Mapping`] still holds on the
//! current path views, within a tolerance band ([`MapperConfig`]), so that
//! sampling noise on a stationary path does not flap the mapping.

use super::{MapRequest, MapperConfig, Mapping, State};
use crate::scheduler::path::PathView;
use crate::scheduler::{PathId, StreamId};

/// Whether a mapping still holds on the current path views.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub enum MappingHealth {
    /// Every path carries its load within the tolerance band.
    Holds,
    /// A path no longer carries its load, even with the tolerance.
    Degraded {
        /// The first degraded path.
        path: PathId,
    },
}

/// Check `mapping` against the current `paths`: a path is degraded when its
/// load exceeds the guarantee at the strictest probability on it by more than
/// `cfg.remap_tolerance`, or a violation-bound stream's E\[Z\] exceeds its
/// bound by more than that fraction. Inside the band the mapping is kept, so
/// sampling noise in a stationary path does not flap it.
pub fn check_health(
    mapping: &Mapping,
    requests: &[MapRequest],
    paths: &[(PathId, &PathView)],
    cfg: &MapperConfig,
) -> MappingHealth {
    let mut st = State::new(paths);
    commit_all(&mut st, mapping, requests, |_, _| {});
    let tol = 1.0 + cfg.remap_tolerance.max(0.0);
    for j in 0..st.ids.len() {
        if st.max_prob[j] > 0.0 {
            let g = st.guarantee(j, st.max_prob[j]) as f64;
            if st.committed[j] as f64 > g * tol {
                return MappingHealth::Degraded { path: st.ids[j] };
            }
        }
    }
    for (vb, parts) in &st.vbs {
        let z = st.vb_misses(vb, parts, usize::MAX, 0);
        if z > vb.bound * tol + 1e-9 {
            let path = parts.first().map_or(PathId(0), |p| st.ids[p.0]);
            return MappingHealth::Degraded { path };
        }
    }
    MappingHealth::Holds
}

/// Lemma 2's E\[Z\] per window of violation-bound `stream` under `mapping`
/// on the current `paths`, with every other mapped stream's load on the
/// paths it shares (as [`check_health`] judges it). `None` when the stream
/// is not a mapped violation-bound stream.
pub fn expected_misses(
    mapping: &Mapping,
    requests: &[MapRequest],
    paths: &[(PathId, &PathView)],
    stream: StreamId,
) -> Option<f64> {
    let mut st = State::new(paths);
    let mut at = None;
    commit_all(&mut st, mapping, requests, |id, st| {
        if id == stream && vb_of_request(requests, id).is_some() {
            at = st.vbs.len().checked_sub(1);
        }
    });
    let (vb, parts) = st.vbs.get(at?)?;
    Some(st.vb_misses(vb, parts, usize::MAX, 0))
}

fn vb_of_request(requests: &[MapRequest], id: StreamId) -> Option<f64> {
    requests
        .iter()
        .find(|r| r.id == id)
        .and_then(|r| r.spec.max_expected_misses())
}

/// Commits every assigned stream of `mapping` to `st`, calling `after`
/// with each stream's id once it is committed.
fn commit_all(
    st: &mut State<'_>,
    mapping: &Mapping,
    requests: &[MapRequest],
    mut after: impl FnMut(StreamId, &State<'_>),
) {
    for (id, parts) in &mapping.assigned {
        let Some(req) = requests.iter().find(|r| r.id == *id) else {
            continue;
        };
        let mut idx = Vec::with_capacity(parts.len());
        let mut probs = Vec::with_capacity(parts.len());
        for p in parts {
            if let Some(j) = st.ids.iter().position(|&q| q == p.path) {
                idx.push((j, p.rate.bps()));
                probs.push(p.probability);
            }
        }
        st.commit(&idx, &probs, &req.spec);
        after(*id, st);
    }
}
