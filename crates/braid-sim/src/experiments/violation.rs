//! Violation-bound run (seed 000 Lemma 2): expected misses per window as
//! PGOS predicts them from the monitor's window, against the misses the next
//! 900 s actually produce.
//!
//! Streams of `x` 1500-byte messages per 1 s window, violation-bound specs.
//! PGOS maps each stream (alone) onto Table III's two paths with
//! [`map_streams`]; the bound given is the smallest E\[Z\] the mapper can
//! reach (found by asking it), so the mapping is as tight as it gets. The
//! realised misses of window k are those of the Lemma 2 model: every part j
//! loses `max(0, r_j − b_j(k))` where b_j(k) is path j's mean available rate in
//! window k (the part alone on its path, late messages dropped at the window
//! end), so Z_k = t_w/(8s) · Σ_j max(0, r_j − b_j(k)).

use super::table3::{config, TableReport};
use super::{ExperimentError, RunSpan};
use braid_core::scheduler::mapping::{map_streams, MapRequest, MapperConfig};
use braid_core::scheduler::{PathId, PathView, StreamId, StreamSpec};
use braid_core::{Bandwidth, Duration, Instant};
use std::fmt::Write as _;
use std::path::Path;

/// Message size of the violation-bound streams.
pub(super) const MSG: u32 = 1500;

/// The violation-bound run (see the module docs).
///
/// # Errors
/// Missing or unreadable traces.
pub fn violation(data: &Path, span: RunSpan) -> Result<TableReport, ExperimentError> {
    let paths = super::table3::paths(data)?;
    let cfg = config(span);
    let tw = Duration::from_secs(1);
    let views = monitor_views(&paths, &cfg);
    let pv: Vec<(PathId, &PathView)> = views
        .iter()
        .enumerate()
        .map(|(j, v)| (PathId(j as u32), v))
        .collect();
    let mut t = String::new();
    let _ = writeln!(
        t,
        "Violation bound (Lemma 2): predicted vs realised misses per 1 s window ({} s measured after {} s)",
        span.measure_s,
        span.warmup_s
    );
    let _ = writeln!(
        t,
        "{:>7} {:>6} {:>22} {:>10} {:>10} {:>8} {:>9}",
        "Mbit/s", "x", "mapping", "bound", "realised", "ratio", "P(Z>0)"
    );
    let mut rep = TableReport::default();
    for mbps in [20u64, 35, 45, 60, 75] {
        let rate = Bandwidth::from_mbps(mbps);
        let x = (rate.bytes_in(tw) / u64::from(MSG)) as u32;
        let Some((bound, parts)) = tightest(&pv, x, tw)? else {
            let _ = writeln!(t, "{mbps:>7} {x:>6} {:>22}", "no path can take it");
            continue;
        };
        let layout = parts
            .iter()
            .map(|p| format!("{}:{:.1}", paths[p.path.0 as usize].name, p.rate.mbps()))
            .collect::<Vec<_>>()
            .join("+");
        let zs = fluid_misses(&paths, &parts, &cfg, tw);
        let realised = zs.iter().sum::<f64>() / zs.len().max(1) as f64;
        let p_miss = zs.iter().filter(|&&z| z > 0.0).count() as f64 / zs.len().max(1) as f64;
        let ratio = if bound > 0.0 { realised / bound } else { 0.0 };
        let _ = writeln!(
            t,
            "{mbps:>7} {x:>6} {layout:>22} {bound:>10.2} {realised:>10.2} {ratio:>8.2} {:>8.1}%",
            100.0 * p_miss
        );
        rep.checks.push((
            format!("{mbps} Mbit/s: realised E[Z] within 2× of the bound"),
            realised <= 2.0 * bound.max(0.5),
            format!("{realised:.2} vs {bound:.2}"),
        ));
    }
    let _ = writeln!(
        t,
        "(bound = the smallest E[Z] the mapper reaches, i.e. Lemma 2 on the 300 s window; the realised\n column is the next {} s; a ratio above 1 means the window was optimistic about the future)",
        span.measure_s
    );
    for (c, ok, d) in &rep.checks {
        let _ = writeln!(t, "[{}] {c}: {d}", if *ok { "ok" } else { "MISS" });
    }
    rep.text = t;
    Ok(rep)
}

/// Each path's monitor window as the harness builds it (1 s samples of the
/// available bandwidth before the start), as a path view.
pub(super) fn monitor_views(
    paths: &[super::harness::PathSpec],
    cfg: &super::setup::HarnessConfig,
) -> Vec<PathView> {
    paths
        .iter()
        .map(|p| {
            let mut w = braid_core::estimate::SlidingWindow::new(cfg.window_samples);
            let mut t = Instant::ZERO;
            while t + cfg.sample <= cfg.start {
                w.push(p.capacity.mean_rate(t, t + cfg.sample));
                t += cfg.sample;
            }
            PathView::new(w, p.delay * 2)
        })
        .collect()
}

/// The smallest E[Z] the mapper reaches for `x` messages of [`MSG`] bytes
/// per `tw` on `pv`, and the mapping at that bound (`None`: no path can
/// take the stream).
///
/// # Errors
/// An invalid spec.
pub(super) fn tightest(
    pv: &[(PathId, &PathView)],
    x: u32,
    tw: Duration,
) -> Result<Option<(f64, Vec<braid_core::scheduler::Part>)>, ExperimentError> {
    let cfg_map = MapperConfig::default();
    let req = |bound: f64| -> Result<MapRequest, ExperimentError> {
        Ok(MapRequest {
            id: StreamId(1),
            spec: StreamSpec::violation_bound(x, tw, MSG, bound).map_err(super::table3::sched)?,
            sticky: None,
            paths: None,
        })
    };
    let probe = map_streams(&[req(0.0)?], pv, &cfg_map);
    let bound = match probe.infeasible.first() {
        Some((_, best)) => best.expected_misses.unwrap_or(f64::INFINITY),
        None => 0.0,
    };
    if !bound.is_finite() {
        return Ok(None);
    }
    let m = map_streams(&[req(bound)?], pv, &cfg_map);
    Ok(m.parts(StreamId(1)).map(|p| (bound, p.to_vec())))
}

/// The Lemma 2 model's misses in each window `tw` of `[cfg.start, cfg.end)`:
/// every part loses `max(0, r_j − b_j(k))` of path j's mean available rate
/// in window k, counted in messages of [`MSG`] bytes.
pub(super) fn fluid_misses(
    paths: &[super::harness::PathSpec],
    parts: &[braid_core::scheduler::Part],
    cfg: &super::setup::HarnessConfig,
    tw: Duration,
) -> Vec<f64> {
    let coeff = tw.as_secs_f64() / (8.0 * f64::from(MSG));
    let mut zs = Vec::new();
    let mut w = cfg.start;
    while w + tw <= cfg.end {
        let loss: f64 = parts
            .iter()
            .map(|p| {
                let b = paths[p.path.0 as usize].capacity.mean_rate(w, w + tw);
                p.rate.saturating_sub(b).bps() as f64
            })
            .sum();
        zs.push(loss * coeff);
        w += tw;
    }
    zs
}
