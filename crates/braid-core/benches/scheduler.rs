//! Cost of one PGOS dispatch decision: 8 streams × 4 paths, all backlogged.
//!
//! Run: `cargo bench -p braid-core --bench scheduler`. Each iteration is one
//! decision plus the enqueue that keeps the stream backlogged (so the queues
//! stay the same size); virtual time advances 10 µs per decision.
#![allow(missing_docs)]

use braid_core::scheduler::mapping::{map_streams, MapRequest};
use braid_core::scheduler::{
    EmpiricalDistribution, MapperConfig, Msfq, PathId, PathView, Pgos, PgosConfig, Scheduler,
    StreamId, StreamSpec,
};
use braid_core::{Bandwidth, Duration, Instant};
use criterion::{criterion_group, criterion_main, Criterion};
use std::hint::black_box;

fn setup<S: Scheduler>(mut s: S) -> S {
    let t = Instant::ZERO;
    for j in 0..4u32 {
        // 200 samples around 50·(j+1) Mbit/s, ±20 %.
        let base = 50.0 * f64::from(j + 1);
        let samples: Vec<f64> = (0..200)
            .map(|k| base * (0.8 + 0.4 * f64::from(k) / 200.0))
            .collect();
        let view = PathView::new(
            EmpiricalDistribution::from_mbps(&samples),
            Duration::from_millis(10 + u64::from(j) * 5),
        );
        s.handle_path_update(PathId(j), view, t);
    }
    let specs = [
        StreamSpec::min_rate(Bandwidth::from_mbps(20), 0.99),
        StreamSpec::min_rate(Bandwidth::from_mbps(30), 0.95),
        StreamSpec::min_rate(Bandwidth::from_mbps(40), 0.95),
        StreamSpec::min_rate(Bandwidth::from_mbps(150), 0.9),
        StreamSpec::window(9, 10, Duration::from_millis(40), 1400, 0.95),
        StreamSpec::window(20, 25, Duration::from_millis(100), 1400, 0.9),
        StreamSpec::best_effort(2),
        StreamSpec::best_effort(1),
    ];
    for (i, spec) in specs.into_iter().enumerate() {
        // The specs above are valid by construction.
        let spec = spec.expect("valid bench spec");
        s.handle_stream_open(StreamId(i as u32), spec, t)
            .expect("open");
        for _ in 0..64 {
            s.handle_enqueue(StreamId(i as u32), 1400, t)
                .expect("enqueue");
        }
    }
    while s.poll_event().is_some() {}
    s
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("scheduler_8x4");
    let mut pgos = setup(Pgos::new(PgosConfig::default()));
    let mut now = 0u64;
    g.bench_function("pgos_poll_transmit", |b| {
        b.iter(|| {
            now += 10_000;
            let t = Instant::from_nanos(now);
            // Every stream is backlogged, so there is always a decision.
            let x = pgos.poll_dispatch(t).expect("backlogged");
            pgos.handle_enqueue(x.stream, x.bytes, t).expect("refill");
            black_box(x)
        })
    });
    let mut pgos = setup(Pgos::new(PgosConfig::default()));
    let mut now = 0u64;
    let mut path = 0u32;
    g.bench_function("pgos_poll_transmit_on", |b| {
        b.iter(|| {
            now += 10_000;
            path = (path + 1) % 4;
            let t = Instant::from_nanos(now);
            let x = pgos.poll_dispatch_on(PathId(path), t).expect("backlogged");
            pgos.handle_enqueue(x.stream, x.bytes, t).expect("refill");
            black_box(x)
        })
    });
    let mut msfq = setup(Msfq::new());
    let mut now = 0u64;
    g.bench_function("msfq_poll_transmit", |b| {
        b.iter(|| {
            now += 10_000;
            let t = Instant::from_nanos(now);
            let x = msfq.poll_dispatch(t).expect("backlogged");
            msfq.handle_enqueue(x.stream, x.bytes, t).expect("refill");
            black_box(x)
        })
    });
    g.finish();

    // Resource mapping (off the fast path): 8 streams over 4 paths, with the
    // lookahead and one stream that has to be split.
    let views: Vec<PathView> = (0..4u32)
        .map(|j| {
            let base = 50.0 * f64::from(j + 1);
            let samples: Vec<f64> = (0..300)
                .map(|k| base * (0.8 + 0.4 * f64::from(k) / 300.0))
                .collect();
            PathView::new(
                EmpiricalDistribution::from_mbps(&samples),
                Duration::from_millis(10),
            )
        })
        .collect();
    let paths: Vec<(PathId, &PathView)> = views
        .iter()
        .enumerate()
        .map(|(j, v)| (PathId(j as u32), v))
        .collect();
    let rates = [20u64, 30, 40, 150, 45, 60, 35, 250];
    let reqs: Vec<MapRequest> = rates
        .iter()
        .enumerate()
        .map(|(i, &r)| MapRequest {
            id: StreamId(i as u32),
            // Valid by construction.
            spec: StreamSpec::min_rate(Bandwidth::from_mbps(r), 0.9 + 0.01 * i as f64)
                .expect("valid bench spec"),
            sticky: None,
            paths: None,
        })
        .collect();
    c.bench_function("map_streams_8x4", |b| {
        b.iter(|| black_box(map_streams(&reqs, &paths, &MapperConfig::default())))
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
