//! The source's promises follow the outcomes the sink reports
//! ([`crate::estimate::PromiseScale`] behind `SessionConfig::calibration`).

use super::fuzzing::Pair;
use super::{Event, Frame, SessionConfig, StreamConfig, CONTROL_STREAM};
use crate::id::{PathId, StreamId};
use crate::scheduler::StreamSpec;
use crate::time::Duration;
use crate::transport::SendOptions;
use crate::units::Bandwidth;

/// A pair with one 1 Mbit/s @ 0.95 stream, run until PGOS maps it.
fn mapped_pair(config: SessionConfig) -> (Pair, StreamId) {
    mapped_pair_with(
        config,
        StreamSpec::min_rate(Bandwidth::from_mbps(1), 0.95).unwrap(),
    )
}

/// A pair with one stream of `spec`, run until PGOS maps it.
fn mapped_pair_with(config: SessionConfig, spec: StreamSpec) -> (Pair, StreamId) {
    let mut p = Pair::new(config);
    let s = p
        .source
        .open_stream(p.now, StreamConfig::new(spec))
        .unwrap();
    let mut mapped = false;
    for _ in 0..2_000 {
        for _ in 0..20 {
            let _ = p.source.send(p.now, s, vec![0; 1000]);
        }
        p.step(Duration::from_millis(5));
        while p.sink.recv(p.now).is_some() {}
        while let Some(e) = p.source.poll_event() {
            mapped |= matches!(e, Event::StreamMapped { stream, .. } if stream == s);
        }
        if mapped {
            return (p, s);
        }
    }
    panic!("the stream was never mapped");
}

fn report(p: &mut Pair, stream: StreamId, judged: u64, missed: u64) {
    report_misses(p, stream, judged, missed, 0);
}

fn report_misses(p: &mut Pair, stream: StreamId, judged: u64, missed: u64, misses: u64) {
    let f = Frame::StreamReport {
        stream,
        windows_met_ppm: 0,
        rate: Bandwidth::ZERO,
        lost: 0,
        windows_judged: judged,
        windows_missed: missed,
        messages_missed: misses,
    };
    p.sink.inject_raw(
        p.now,
        PathId(0),
        CONTROL_STREAM,
        f.to_vec(),
        SendOptions::UNRELIABLE,
    );
    p.step(Duration::from_millis(5));
}

fn scale(p: &Pair) -> f64 {
    p.source.paths()[0].promise_scale
}

#[test]
fn missed_windows_lower_the_paths_promises_and_kept_ones_raise_them() {
    let (mut p, s) = mapped_pair(SessionConfig::default());
    // The sink's own reports so far (cumulative): ours count on from them.
    let base = p.source.ledger[&s].judged;
    let at = |p: &mut Pair, judged: u64, missed: u64| {
        report(p, s, base.judged + judged, base.missed + missed);
    };
    at(&mut p, 10, 0);
    assert_eq!(
        scale(&p),
        1.0,
        "kept windows never promise above the estimate"
    );
    at(&mut p, 15, 5);
    let low = scale(&p);
    // Five misses at γ = 0.05: e^(−5 · 0.05 · 0.95) ≈ 0.79.
    assert!((low - (-0.25f64 * 0.95).exp()).abs() < 1e-9, "{low}");
    // The same cumulative counts again (a repeated report) change nothing;
    // counts that go back are ignored, and so are more windows missed
    // than judged since the last report.
    at(&mut p, 15, 5);
    at(&mut p, 12, 5);
    at(&mut p, 16, 7);
    assert_eq!(scale(&p), low);
    at(&mut p, 55, 5);
    assert!(scale(&p) > low, "kept windows climb back");
}

#[test]
fn a_violation_bounds_misses_above_its_prediction_lower_the_promises() {
    // 100 messages of 1000 bytes per second, at most 1 missed on average.
    let spec = StreamSpec::violation_bound(100, Duration::from_secs(1), 1000, 1.0).unwrap();
    let (mut p, s) = mapped_pair_with(SessionConfig::default(), spec);
    let predicted = p.source.expected_misses(s).expect("mapped");
    assert!(predicted <= 1.0, "{predicted}");
    assert_eq!(p.source.spec_in_force(s), Some(spec));
    let factor = scale(&p);
    // The sink's own reports so far (cumulative): ours count on from them.
    let base = p.source.ledger[&s].judged;
    let at = |judged: u64, missed: u64, misses: u64| {
        (
            base.judged + judged,
            base.missed + missed,
            base.misses + misses,
        )
    };
    // Windows that miss nothing (at most the prediction) keep the factor.
    let (j, m, z) = at(10, 0, 0);
    report_misses(&mut p, s, j, m, z);
    assert_eq!(scale(&p), factor);
    // Ten windows that miss 30 of their 100 messages each, where about
    // none were predicted: θ falls by γ·G·(30 − Ẑ)/100 per window.
    let (j, m, z) = at(20, 10, 300);
    report_misses(&mut p, s, j, m, z);
    let low = scale(&p);
    let step = 0.05 * crate::estimate::MISS_GAIN * (0.3 - predicted / 100.0);
    let expect = factor * (-10.0 * step).exp();
    assert!((low - expect).abs() < 1e-6, "{low} vs {expect}");
    // Counts that go back are ignored.
    let (j, m, z) = at(20, 10, 200);
    report_misses(&mut p, s, j, m, z);
    assert_eq!(scale(&p), low);
}

#[test]
fn without_calibration_reports_change_nothing() {
    let config = SessionConfig {
        calibration: None,
        ..SessionConfig::default()
    };
    let (mut p, s) = mapped_pair(config);
    report(&mut p, s, 30, 30);
    assert_eq!(scale(&p), 1.0);
}

#[test]
fn a_bad_step_size_is_refused() {
    let config = SessionConfig {
        calibration: Some(0.0),
        ..SessionConfig::default()
    };
    let e = super::Session::sink(config, [0; 32], crate::time::Instant::ZERO).unwrap_err();
    assert!(e.to_string().contains("calibration"), "{e}");
}
