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
    let mut p = Pair::new(config);
    let spec = StreamSpec::min_rate(Bandwidth::from_mbps(1), 0.95).unwrap();
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
    let f = Frame::StreamReport {
        stream,
        windows_met_ppm: 0,
        rate: Bandwidth::ZERO,
        lost: 0,
        windows_judged: judged,
        windows_missed: missed,
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
    assert_eq!(scale(&p), 1.0);
    report(&mut p, s, 10, 0);
    assert_eq!(
        scale(&p),
        1.0,
        "kept windows never promise above the estimate"
    );
    report(&mut p, s, 15, 5);
    let low = scale(&p);
    // Five misses at γ = 0.05: e^(−5 · 0.05 · 0.95) ≈ 0.79.
    assert!((low - (-0.25f64 * 0.95).exp()).abs() < 1e-9, "{low}");
    // The same cumulative counts again (a repeated report) change nothing;
    // counts that go back are ignored.
    report(&mut p, s, 15, 5);
    report(&mut p, s, 12, 5);
    assert_eq!(scale(&p), low);
    report(&mut p, s, 55, 5);
    assert!(scale(&p) > low, "kept windows climb back");
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
