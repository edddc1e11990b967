//! Sessions at packet level: streams over measured paths, reassembly,
//! failover, upcalls and path bounds (issue 10's acceptance).

use braid_core::scheduler::StreamSpec;
use braid_core::session::{Delivery, Event, SessionConfig, StreamConfig};
#[allow(unused_imports)]
use braid_core::PathId;
use braid_core::{Bandwidth, Duration, Instant, StreamId};
use braid_sim::session::{
    build, HopDef, PathDef, SessionNode, SessionSim, SinkApp, SourceApp, SourceStream, Workload,
};
use braid_sim::{Capacity, LinkConfig, Simulation};

fn link(name: &str, mbps: u64, delay_ms: u64) -> LinkConfig {
    LinkConfig::new(
        name,
        Capacity::Constant(Bandwidth::from_mbps(mbps)),
        Duration::from_millis(delay_ms),
    )
}

fn path(name: &str, mbps: u64, delay_ms: u64) -> PathDef {
    PathDef {
        name: name.into(),
        hops: vec![HopDef {
            forward: link(&format!("{name}:fwd"), mbps, delay_ms),
            back: link(&format!("{name}:back"), mbps, delay_ms),
        }],
    }
}

fn stream(name: &str, config: StreamConfig, workload: Workload, secs: u64) -> SourceStream {
    SourceStream {
        name: name.into(),
        config,
        workload,
        start: Instant::ZERO,
        stop: Instant::ZERO + Duration::from_secs(secs),
    }
}

fn cbr(mbps: u64) -> Workload {
    Workload::Cbr {
        rate: Bandwidth::from_mbps(mbps),
        size: 1000,
    }
}

fn rate(mbps: u64, p: f64) -> StreamSpec {
    StreamSpec::min_rate(Bandwidth::from_mbps(mbps), p).unwrap()
}

/// Longest time after a run's end to let the source drain: a generated
/// case may offer six times what a lossy 2 Mbit/s path carries (12 Mbit/s
/// for 6 s over 2 Mbit/s at 3 % loss takes about a minute to deliver).
const DRAIN_LIMIT_S: u64 = 300;

/// Runs `def` to its end, then on until every stream the source opened is
/// closed and acknowledged (at most [`DRAIN_LIMIT_S`] more), so
/// completeness is checked on a finished transfer.
fn run(def: &SessionSim) -> Simulation {
    let mut long = def.clone();
    long.duration = def.duration + Duration::from_secs(DRAIN_LIMIT_S);
    let mut sim = build(&long).expect("valid config").sim;
    let mut t = Instant::ZERO + def.duration;
    sim.run_until(t);
    for _ in 0..DRAIN_LIMIT_S {
        if source(&sim).session().is_idle() {
            break;
        }
        t += Duration::from_secs(1);
        sim.run_until(t);
    }
    sim
}

fn source(sim: &Simulation) -> &SessionNode<SourceApp> {
    sim.node(sim.node_id("source").unwrap()).unwrap()
}

fn sink(sim: &Simulation) -> &SessionNode<SinkApp> {
    sim.node(sim.node_id("sink").unwrap()).unwrap()
}

/// Every reliable stream arrived complete, in order, exactly once, intact.
fn assert_reliable_intact(sim: &Simulation) {
    let sent = source(sim).app().sent();
    let got = sink(sim).app().streams();
    for (name, id, n, _dropped, digest) in sent {
        let id = id.expect("stream opened");
        let g = got
            .get(&id)
            .unwrap_or_else(|| panic!("{name}: nothing arrived"));
        if g.delivery != Some(Delivery::Reliable) {
            continue;
        }
        if g.messages != n {
            for (t, e) in source(sim).app().events() {
                if !matches!(e, Event::Stats { .. }) {
                    eprintln!("source {t:?} {e:?}");
                }
            }
            for (t, e) in sink(sim).app().events() {
                if !matches!(e, Event::Stats { .. }) {
                    eprintln!("sink {t:?} {e:?}");
                }
            }
        }
        assert_eq!(g.messages, n, "{name}: messages");
        assert_eq!(g.out_of_order, 0, "{name}: order");
        assert_eq!(g.corrupt, 0, "{name}: bytes");
        assert_eq!(g.digest, digest, "{name}: digest");
    }
}

fn base(paths: Vec<PathDef>, streams: Vec<SourceStream>, secs: u64) -> SessionSim {
    SessionSim {
        name: "test".into(),
        seed: 7,
        duration: Duration::from_secs(secs),
        bin: Duration::from_secs(1),
        paths,
        streams,
        cross: vec![],
        config: SessionConfig::default(),
        on_infeasible: None,
    }
}

#[test]
fn three_streams_over_two_paths_arrive_intact() {
    let def = base(
        vec![path("a", 20, 10), path("b", 10, 40)],
        vec![
            stream("critical", StreamConfig::new(rate(3, 0.95)), cbr(3), 12),
            stream(
                "bulk",
                StreamConfig::new(StreamSpec::best_effort(1).unwrap()),
                Workload::Greedy { size: 1200 },
                12,
            ),
            stream(
                "video",
                StreamConfig::new(StreamSpec::best_effort(1).unwrap()).with_delivery(
                    Delivery::Deadline {
                        ttl: Duration::from_millis(300),
                    },
                ),
                cbr(1),
                12,
            ),
        ],
        15,
    );
    let sim = run(&def);
    assert_reliable_intact(&sim);
    let got = sink(&sim).app().streams();
    let video = &got[&StreamId(3)];
    assert_eq!(video.late, 0);
    assert_eq!(video.duplicates, 0);
    // The bulk stream used both paths: more than either alone could carry.
    let bulk = &got[&StreamId(2)];
    let mbps = bulk.bytes as f64 * 8.0 / 12e6;
    assert!(mbps > 20.0, "bulk {mbps:.1} Mbit/s");
}

fn cut(mut p: PathDef, from_s: u64, to_s: u64) -> PathDef {
    let w = (
        Instant::ZERO + Duration::from_secs(from_s),
        Instant::ZERO + Duration::from_secs(to_s),
    );
    for h in &mut p.hops {
        h.forward.outages.push(w);
        h.back.outages.push(w);
    }
    p
}

#[test]
fn a_cut_path_is_detected_and_reliable_streams_survive_it() {
    // 50 ms RTT on path a; it is cut from 5 s to 9 s.
    let def = base(
        vec![cut(path("a", 20, 25), 5, 9), path("b", 20, 25)],
        vec![
            stream("critical", StreamConfig::new(rate(3, 0.95)), cbr(3), 12),
            stream(
                "bulk",
                StreamConfig::new(StreamSpec::best_effort(1).unwrap()),
                Workload::Greedy { size: 1200 },
                12,
            ),
        ],
        16,
    );
    let sim = run(&def);
    assert_reliable_intact(&sim);
    let events = source(&sim).app().events();
    let cut_at = Instant::ZERO + Duration::from_secs(5);
    let down = events
        .iter()
        .find_map(|(t, e)| match e {
            Event::PathDown { path, resent } if *path == PathId(0) => Some((*t, *resent)),
            _ => None,
        })
        .expect("a PathDown event names path 0");
    let detect = down.0.saturating_duration_since(cut_at);
    eprintln!(
        "path 0 down at {:?} (cut at 5 s), {} messages moved",
        down.0, down.1
    );
    assert!(down.0 >= cut_at, "not before the cut");
    assert!(
        detect <= Duration::from_secs(1),
        "detected after {detect:?}"
    );
    assert!(down.1 > 0, "unacknowledged messages were moved");
    let remapped = events.iter().any(|(t, e)| {
        *t >= down.0 && *t <= cut_at + Duration::from_secs(1) && matches!(e, Event::Remapped { .. })
    });
    assert!(remapped, "streams re-mapped within 1 s of the cut");
    // It comes back after the cut ends.
    let up_again = events
        .iter()
        .any(|(t, e)| *t > down.0 && matches!(e, Event::PathUp { path } if *path == PathId(0)));
    assert!(up_again, "the path came back");
}

#[test]
fn an_infeasible_spec_raises_the_upcall_with_the_best_achievable() {
    // 30 Mbit/s at 95 % over 10 + 5 Mbit/s cannot be met.
    let def = base(
        vec![path("a", 10, 10), path("b", 5, 20)],
        vec![stream(
            "too-much",
            StreamConfig::new(rate(30, 0.95)),
            cbr(30),
            8,
        )],
        10,
    );
    let sim = run(&def);
    let events = source(&sim).app().events();
    let best = events
        .iter()
        .find_map(|(_, e)| match e {
            Event::GuaranteeUnmet { stream, best, .. } if *stream == StreamId(1) => Some(*best),
            _ => None,
        })
        .expect("the upcall");
    let at_p = best.rate.bps() as f64 / 1e6;
    eprintln!("best achievable: {best:?}");
    assert!(
        at_p > 5.0 && at_p < 16.0,
        "best achievable at 95 % is {at_p:.1} Mbit/s (paths sum to 15)"
    );
}

mod properties {
    use super::*;
    use proptest::prelude::*;

    fn lossy(name: &str, mbps: u64, delay_ms: u64, loss: f64) -> PathDef {
        let mut p = path(name, mbps, delay_ms);
        p.hops[0].forward.loss = loss;
        p.hops[0].back.loss = loss / 2.0;
        p
    }

    fn delivery(k: u8, ttl_ms: u64) -> Delivery {
        match k % 3 {
            0 => Delivery::Reliable,
            1 => Delivery::Unreliable,
            _ => Delivery::Deadline {
                ttl: Duration::from_millis(ttl_ms),
            },
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

        /// Reliable: exactly once, in order, intact. Unreliable and
        /// deadline: never twice, never late. Redundant: delivered once.
        #[test]
        fn streams_keep_their_delivery_promises(
            paths in proptest::collection::vec((2u64..30, 1u64..60, 0u32..4), 1..4),
            streams in proptest::collection::vec((0u8..3, 1u64..5, 80u64..400, 1u8..3), 1..4),
            cut_at in proptest::option::of(2u64..5),
            seed in 0u64..1000,
        ) {
            let mut ps: Vec<PathDef> = paths
                .iter()
                .enumerate()
                .map(|(i, &(mbps, d, loss))| lossy(&format!("p{i}"), mbps, d, f64::from(loss) / 100.0))
                .collect();
            if let (Some(at), true) = (cut_at, ps.len() > 1) {
                let p = ps.remove(0);
                ps.insert(0, cut(p, at, at + 2));
            }
            let ss: Vec<SourceStream> = streams
                .iter()
                .enumerate()
                .map(|(i, &(k, mbps, ttl, copies))| {
                    let c = StreamConfig::new(StreamSpec::best_effort(1).unwrap())
                        .with_delivery(delivery(k, ttl))
                        .with_copies(copies);
                    stream(&format!("s{i}"), c, cbr(mbps), 6)
                })
                .collect();
            let mut def = base(ps, ss, 12);
            def.seed = seed;
            let sim = run(&def);
            assert_reliable_intact(&sim);
            for (id, g) in sink(&sim).app().streams() {
                prop_assert_eq!(g.duplicates, 0, "{:?} delivered a message twice", id);
                prop_assert_eq!(g.late, 0, "{:?} delivered a message late", id);
                prop_assert_eq!(g.corrupt, 0, "{:?} corrupted", id);
            }
        }
    }
}

/// The paths the latest `StreamMapped` event of `stream` promises.
fn mapped_paths(sim: &Simulation, stream: StreamId) -> Vec<PathId> {
    source(sim)
        .app()
        .events()
        .iter()
        .rev()
        .find_map(|(_, e)| match e {
            Event::StreamMapped { stream: s, paths } if *s == stream => {
                Some(paths.iter().map(|p| p.path).collect())
            }
            _ => None,
        })
        .unwrap_or_default()
}

/// A 4 Mbit/s critical stream that opens at 12 s, once bulk traffic has
/// filled both paths' estimate windows (10 s) past their start-up: where
/// does PGOS map it?
fn steer_case(config: StreamConfig, near_mbps: u64, other: PathDef) -> Vec<PathId> {
    let mut critical = stream("critical", config, cbr(4), 20);
    critical.start = Instant::ZERO + Duration::from_secs(12);
    let def = base(
        vec![path("near", near_mbps, 10), other],
        vec![
            stream(
                "bulk",
                StreamConfig::new(StreamSpec::best_effort(1).unwrap()),
                Workload::Greedy { size: 1200 },
                20,
            ),
            critical,
        ],
        21,
    );
    let sim = run(&def);
    if std::env::var("DBG").is_ok() {
        for (t, e) in source(&sim).app().events() {
            if !matches!(e, Event::Stats { .. }) {
                eprintln!("src {t:?} {e:?}");
            }
        }
        eprintln!("sent {:?}", source(&sim).app().sent());
        eprintln!("paths {:?}", source(&sim).session().paths());
    }
    assert_reliable_intact(&sim);
    mapped_paths(&sim, StreamId(2))
}

#[test]
fn an_rtt_bound_steers_a_stream_off_a_path_that_violates_it() {
    // The far path is bigger (PGOS prefers it by its distribution) but its
    // RTT is 120 ms before any queueing; the near one's is 20 ms plus the
    // queue its own bulk traffic builds (50–90 ms measured).
    let far = || path("far", 40, 60);
    let free = steer_case(StreamConfig::new(rate(4, 0.9)), 10, far());
    assert!(free.contains(&PathId(1)), "without a bound: {free:?}");
    let bound = steer_case(
        StreamConfig::new(rate(4, 0.9)).with_rtt(Duration::from_millis(130), 0.9),
        10,
        far(),
    );
    assert_eq!(bound, vec![PathId(0)], "RTT ≤ 130 ms at 0.9 keeps it near");
}

#[test]
fn a_loss_bound_steers_a_stream_off_a_lossy_path() {
    // 8 Mbit/s does not fit the 5 Mbit/s clean path: without a bound it
    // goes on the lossy one (0.5 % random loss); with "loss ≤ 0.3 % at 0.9"
    // it may not, so it is never mapped there (the upcall says so).
    let lossy = || {
        let mut p = path("lossy", 40, 10);
        p.hops[0].forward.loss = 0.005;
        p
    };
    let free = steer_case(StreamConfig::new(rate(8, 0.9)), 5, lossy());
    assert!(free.contains(&PathId(1)), "without a bound: {free:?}");
    let bound = steer_case(
        StreamConfig::new(rate(8, 0.9)).with_loss(0.003, 0.9),
        5,
        lossy(),
    );
    assert!(
        !bound.contains(&PathId(1)),
        "loss ≤ 0.3 % at 0.9: {bound:?}"
    );
}

#[test]
fn a_pinned_stream_stays_on_its_path() {
    let got = steer_case(
        StreamConfig::new(rate(4, 0.9)).pinned_to(vec![PathId(0)]),
        10,
        path("big", 40, 10),
    );
    assert_eq!(got, vec![PathId(0)]);
}

#[test]
fn a_window_stream_drops_what_its_windows_can_no_longer_use() {
    // 20 messages of 1000 B per 100 ms offered (1.6 Mbit/s), 8 of 20 must
    // make each window, over a 1 Mbit/s path: the queue would grow without
    // bound; messages whose window has passed are dropped at dispatch, so
    // what arrives is recent and the windows keep their 8.
    let spec = StreamSpec::window(8, 20, Duration::from_millis(100), 1000, 0.9).unwrap();
    let def = base(
        vec![path("thin", 1, 10)],
        vec![stream(
            "window",
            StreamConfig::new(spec).with_delivery(Delivery::Unreliable),
            Workload::Cbr {
                rate: Bandwidth::from_kbps(1600),
                size: 1000,
            },
            12,
        )],
        12,
    );
    let sim = run(&def);
    let last = |app_events: &[(Instant, Event)]| {
        app_events
            .iter()
            .rev()
            .find_map(|(_, e)| match e {
                Event::Stats { stream, stats } if *stream == StreamId(1) => Some(*stats),
                _ => None,
            })
            .expect("stats")
    };
    let src = last(source(&sim).app().events());
    let snk = last(sink(&sim).app().events());
    assert!(
        src.lost > 100,
        "stale messages dropped at the source: {src:?}"
    );
    assert!(
        snk.delay_p95 < Duration::from_millis(400),
        "arrivals stay recent: {snk:?}"
    );
    assert!(snk.windows_met >= 0.9, "windows met: {snk:?}");
}

/// The `p`-quantile of a stream's message delays at the sink, in ms.
fn delay_ms(s: &braid_sim::session::apps::SinkStream, p: f64) -> f64 {
    let mut d = s.delays_us.clone();
    d.sort_unstable();
    let i = ((d.len() as f64 * p) as usize).min(d.len().saturating_sub(1));
    d.get(i).map_or(f64::NAN, |&us| us as f64 / 1e3)
}

#[test]
fn with_scheduled_first_a_guarantee_does_not_wait_behind_bulk_data() {
    // One path shared by a guaranteed stream and a greedy bulk one. The
    // bulk stream keeps a congestion window queued in the connection;
    // what PGOS owes the path goes in beyond it and out first, so the
    // guaranteed messages see the path's delay (its bottleneck queue
    // included), not a window of bulk data drained ahead of them.
    let def = base(
        vec![path("a", 20, 20)],
        vec![
            stream("critical", StreamConfig::new(rate(3, 0.95)), cbr(3), 20),
            stream(
                "bulk",
                StreamConfig::new(StreamSpec::best_effort(1).unwrap()),
                Workload::Greedy { size: 1200 },
                20,
            ),
        ],
        22,
    );
    let mut def = def;
    def.config.scheduled_first = true;
    let mut sim = build(&def).expect("valid config").sim;
    sim.run_until(Instant::ZERO + Duration::from_secs(22));
    let got = sink(&sim).app().streams();
    let (critical, bulk) = (&got[&StreamId(1)], &got[&StreamId(2)]);
    let (c50, c95, b50) = (
        delay_ms(critical, 0.5),
        delay_ms(critical, 0.95),
        delay_ms(bulk, 0.5),
    );
    eprintln!("critical p50 {c50:.1} ms p95 {c95:.1} ms; bulk p50 {b50:.1} ms");
    assert!(critical.messages > 0 && bulk.messages > 0);
    // The bulk stream waits in the connection's queue, the guarantee not:
    // its delay is the path's (the bottleneck queue included) with a
    // spread of 19 ms from median to p95 here; without `scheduled_first`
    // the same (deterministic) run has 40 ms, a window of bulk ahead.
    assert!(c95 < b50, "critical p95 {c95:.1} ms, bulk p50 {b50:.1} ms");
    assert!(
        c95 - c50 < 30.0,
        "critical p50 {c50:.1} ms, p95 {c95:.1} ms"
    );
}

/// Greedy best-effort bulk for `secs`.
fn greedy_bulk(secs: u64) -> SourceStream {
    stream(
        "bulk",
        StreamConfig::new(StreamSpec::best_effort(1).unwrap()),
        Workload::Greedy { size: 1200 },
        secs,
    )
}

/// `streams` for `secs` over one 20 Mbit/s path (20 ms one way) behind a
/// 1 s drop-tail buffer, with `config` applied.
fn deep_buffer(
    streams: Vec<SourceStream>,
    secs: u64,
    config: impl FnOnce(&mut SessionConfig),
) -> Simulation {
    let mut p = path("a", 20, 20);
    p.hops[0].forward.queue_bytes = 20_000_000 / 8; // 1 s at 20 Mbit/s
    let mut def = base(vec![p], streams, secs);
    config(&mut def.config);
    let mut sim = build(&def).expect("valid config").sim;
    sim.run_until(Instant::ZERO + Duration::from_secs(secs));
    sim
}

#[test]
fn bulk_yields_before_the_queue_it_builds_costs_a_guarantee() {
    // A 3 Mbit/s guarantee and greedy bulk, with bulk that yields or not.
    let run_with = |bulk_yield| {
        let critical = stream("critical", StreamConfig::new(rate(3, 0.95)), cbr(3), 20);
        deep_buffer(vec![critical, greedy_bulk(20)], 20, |c| {
            c.bulk_yield = bulk_yield;
        })
    };
    let yielding = run_with(SessionConfig::default().bulk_yield);
    let greedy = run_with(None);
    let figures = |sim: &Simulation| {
        let got = sink(sim).app().streams();
        let (c, b) = (&got[&StreamId(1)], &got[&StreamId(2)]);
        (delay_ms(c, 0.5), delay_ms(c, 0.95), b.bytes)
    };
    let (y50, y95, y_bulk) = figures(&yielding);
    let (g50, g95, g_bulk) = figures(&greedy);
    eprintln!(
        "critical p50/p95: yielding {y50:.1}/{y95:.1} ms, greedy {g50:.1}/{g95:.1} ms; bulk {y_bulk} vs {g_bulk} B"
    );
    // Greedy bulk fills the buffer: the guarantee waits most of a second.
    assert!(g50 > 500.0, "greedy bulk: critical p50 {g50:.1} ms");
    // Yielding bulk holds the queue near its 20 ms target: the guarantee
    // sees the path's 20 ms and a little queue.
    assert!(y95 < 100.0, "yielding bulk: critical p95 {y95:.1} ms");
    // And bulk still moves: at least 90 % of what greedy bulk moved.
    assert!(
        y_bulk as f64 >= 0.9 * g_bulk as f64,
        "bulk {y_bulk} B yielding vs {g_bulk} B greedy"
    );
}

#[test]
fn without_guarantees_bulk_does_not_yield() {
    // MSFQ promises nothing, so nothing holds its bulk back: the same
    // deep buffer fills whatever `bulk_yield` says.
    let run_msfq = |bulk_yield| {
        let sim = deep_buffer(vec![greedy_bulk(10)], 10, |c| {
            c.bulk_yield = bulk_yield;
            c.scheduler = braid_core::session::SchedulerKind::Msfq;
        });
        let got = &sink(&sim).app().streams()[&StreamId(1)];
        (got.bytes, delay_ms(got, 0.5))
    };
    let on = run_msfq(SessionConfig::default().bulk_yield);
    let off = run_msfq(None);
    assert_eq!(on, off, "no promise, no yield");
    assert!(on.1 > 500.0, "the buffer fills: p50 {:.1} ms", on.1);
}
