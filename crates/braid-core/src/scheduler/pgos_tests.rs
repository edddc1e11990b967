//! Tests of PGOS dispatch, upcalls and re-map hysteresis.

use super::*;
use crate::scheduler::path::EmpiricalDistribution;
use crate::scheduler::Class;
use crate::units::Bandwidth;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

fn mb(x: f64) -> Bandwidth {
    Bandwidth::from_mbps_f64(x)
}

fn steady(mbps: f64) -> PathView {
    PathView::new(
        EmpiricalDistribution::from_mbps(&[mbps]),
        Duration::from_millis(10),
    )
}

fn ms(x: u64) -> Instant {
    Instant::from_nanos(x * 1_000_000)
}

fn events(s: &mut Pgos) -> Vec<SchedulerEvent> {
    std::iter::from_fn(|| s.poll_event()).collect()
}

#[test]
fn precedence_follows_table_1() {
    let mut s = Pgos::new(PgosConfig::default());
    let t = Instant::ZERO;
    s.handle_path_update(PathId(1), steady(10.0), t);
    s.handle_path_update(PathId(2), steady(10.0), t);
    let s1 = StreamSpec::min_rate(mb(8.0), 0.9).unwrap();
    let s2 = StreamSpec::min_rate(mb(8.0), 0.8).unwrap();
    s.handle_stream_open(StreamId(1), s1, t).unwrap();
    s.handle_stream_open(StreamId(2), s2, t).unwrap();
    s.handle_stream_open(StreamId(3), StreamSpec::best_effort(1).unwrap(), t)
        .unwrap();
    assert_eq!(s.mapping().parts(StreamId(1)).unwrap()[0].path, PathId(1));
    assert_eq!(s.mapping().parts(StreamId(2)).unwrap()[0].path, PathId(2));
    for id in 1..=3 {
        s.handle_enqueue(StreamId(id), 1000, t).unwrap();
    }
    // 1. Scheduled on this path.
    let a = s.poll_dispatch_on(PathId(1), t).unwrap();
    assert_eq!((a.stream, a.class), (StreamId(1), Class::Scheduled));
    // S2's packet (deadline 1 ms, on path 2) is not late at t = 0, so
    // path 1 sends unscheduled traffic rather than reorder S2.
    let b = s.poll_dispatch_on(PathId(1), t).unwrap();
    assert_eq!((b.stream, b.class), (StreamId(3), Class::Unscheduled));
    // 2. At 2 ms S2 is late on path 2: path 1 takes it.
    let c = s.poll_dispatch_on(PathId(1), ms(2)).unwrap();
    assert_eq!((c.stream, c.class), (StreamId(2), Class::OtherPath));
    assert!(s.poll_dispatch_on(PathId(1), ms(2)).is_none());
    assert_eq!(s.stats().decisions, [1, 1, 1]);
}

#[test]
fn scheduled_only_dispatch_holds_unscheduled_traffic_back() {
    let mut s = Pgos::new(PgosConfig::default());
    let t = Instant::ZERO;
    s.handle_path_update(PathId(1), steady(10.0), t);
    let g = StreamSpec::min_rate(mb(4.0), 0.9).unwrap();
    s.handle_stream_open(StreamId(1), g, t).unwrap();
    s.handle_stream_open(StreamId(2), StreamSpec::best_effort(1).unwrap(), t)
        .unwrap();
    s.handle_enqueue(StreamId(2), 1000, t).unwrap();
    // Only best effort is waiting: nothing the path owes a guarantee.
    assert!(s.poll_dispatch_scheduled_on(PathId(1), t).is_none());
    s.handle_enqueue(StreamId(1), 1000, t).unwrap();
    let a = s.poll_dispatch_scheduled_on(PathId(1), t).unwrap();
    assert_eq!((a.stream, a.class), (StreamId(1), Class::Scheduled));
    assert!(s.poll_dispatch_scheduled_on(PathId(1), t).is_none());
    // The held best effort still goes when asked without the limit.
    let b = s.poll_dispatch_on(PathId(1), t).unwrap();
    assert_eq!((b.stream, b.class), (StreamId(2), Class::Unscheduled));
    // A guarantee the path could carry only in part (lowered after its
    // upcall) is not held with the bulk: its excess comes before best
    // effort.
    s.handle_stream_close(StreamId(1), t).unwrap();
    let big = StreamSpec::min_rate(mb(40.0), 0.9).unwrap();
    s.handle_stream_open(StreamId(3), big, t).unwrap();
    let best = std::iter::from_fn(|| s.poll_event())
        .find_map(|e| match e {
            SchedulerEvent::Upcall { best, .. } => Some(best),
            _ => None,
        })
        .expect("40 Mbit/s does not fit a 10 Mbit/s path");
    s.handle_upcall_answer(
        StreamId(3),
        UpcallAnswer::Lower(best.lowered(&big).unwrap()),
        t,
    )
    .unwrap();
    s.handle_enqueue(StreamId(2), 1000, t).unwrap();
    // 2 MB: more than its lowered rate's deadlines within the window.
    for _ in 0..2000 {
        s.handle_enqueue(StreamId(3), 1000, t).unwrap();
    }
    let got: Vec<Dispatch> =
        std::iter::from_fn(|| s.poll_dispatch_scheduled_on(PathId(1), t)).collect();
    assert!(got.iter().all(|d| d.stream == StreamId(3)));
    assert!(got.iter().any(|d| d.class == Class::Unscheduled));
}

#[test]
fn equal_deadlines_go_to_the_higher_window_constraint() {
    let mut s = Pgos::new(PgosConfig::default());
    let t = Instant::ZERO;
    s.handle_path_update(PathId(1), steady(10.0), t);
    // Both 800 kbit/s with 1000-byte messages: equal virtual deadlines.
    let lo = StreamSpec::window(5, 10, Duration::from_millis(50), 1000, 0.9).unwrap();
    let hi = StreamSpec::window(9, 10, Duration::from_millis(90), 1000, 0.9).unwrap();
    s.handle_stream_open(StreamId(1), lo, t).unwrap();
    s.handle_stream_open(StreamId(2), hi, t).unwrap();
    s.handle_enqueue(StreamId(1), 1000, t).unwrap();
    s.handle_enqueue(StreamId(2), 1000, t).unwrap();
    let order: Vec<StreamId> = (0..2)
        .filter_map(|_| s.poll_dispatch_on(PathId(1), t))
        .map(|x| x.stream)
        .collect();
    assert_eq!(order, vec![StreamId(2), StreamId(1)]);
}

#[test]
fn spare_capacity_goes_to_best_effort_and_excess_to_the_guaranteed_stream_first() {
    let setup = || {
        let mut s = Pgos::new(PgosConfig::default());
        let t = Instant::ZERO;
        s.handle_path_update(PathId(1), steady(10.0), t);
        s.handle_stream_open(StreamId(1), StreamSpec::min_rate(mb(2.0), 0.95).unwrap(), t)
            .unwrap();
        s.handle_stream_open(StreamId(2), StreamSpec::best_effort(1).unwrap(), t)
            .unwrap();
        for _ in 0..2000 {
            s.handle_enqueue(StreamId(2), 1250, t).unwrap();
        }
        s
    };
    // The guaranteed source offers its 2 Mbit/s (one 1250-byte message per
    // 5 ms); the path (10 Mbit/s) takes one packet per ms for 1 s.
    let mut s = setup();
    let mut got = [0u32; 2];
    for k in 0..1000 {
        if k % 5 == 0 {
            s.handle_enqueue(StreamId(1), 1250, ms(k)).unwrap();
        }
        let x = s.poll_dispatch_on(PathId(1), ms(k)).unwrap();
        got[(x.stream.0 - 1) as usize] += 1;
    }
    assert_eq!(got, [200, 800]);
    // A guaranteed source that offers more than its rate gets its excess on
    // its own path before best effort (Table I 3.2), and the path never idles.
    let mut s = setup();
    for _ in 0..300 {
        s.handle_enqueue(StreamId(1), 1250, Instant::ZERO).unwrap();
    }
    let mut got = [0u32; 2];
    for k in 0..1000 {
        let x = s.poll_dispatch_on(PathId(1), ms(k)).unwrap();
        got[(x.stream.0 - 1) as usize] += 1;
    }
    assert_eq!(got, [300, 700]);
}

#[test]
fn infeasible_stream_upcalls_and_runs_best_effort_until_answered() {
    let mut s = Pgos::new(PgosConfig::default());
    let t = Instant::ZERO;
    let samples: Vec<f64> = (1..=100).map(f64::from).collect();
    s.handle_path_update(
        PathId(1),
        PathView::new(EmpiricalDistribution::from_mbps(&samples), Duration::ZERO),
        t,
    );
    events(&mut s);
    let spec = StreamSpec::min_rate(mb(50.0), 0.99).unwrap();
    s.handle_stream_open(StreamId(9), spec, t).unwrap();
    let ev = events(&mut s);
    let up = ev
        .iter()
        .find_map(|e| match e {
            SchedulerEvent::Upcall { stream, best, .. } => Some((*stream, *best)),
            _ => None,
        })
        .expect("upcall");
    assert_eq!(up.0, StreamId(9));
    assert_eq!(up.1.rate, mb(2.0));
    assert!((up.1.probability.unwrap() - 0.51).abs() < 1e-6);
    // Runs best effort meanwhile.
    s.handle_enqueue(StreamId(9), 1000, t).unwrap();
    let x = s.poll_dispatch_on(PathId(1), t).unwrap();
    assert_eq!((x.stream, x.class), (StreamId(9), Class::Unscheduled));
    // The application lowers its spec to what is achievable.
    let lower = StreamSpec::min_rate(mb(2.0), 0.99).unwrap();
    s.handle_upcall_answer(StreamId(9), UpcallAnswer::Lower(lower), t)
        .unwrap();
    let ev = events(&mut s);
    assert!(ev
        .iter()
        .any(|e| matches!(e, SchedulerEvent::Mapped { stream, .. } if *stream == StreamId(9))));
    s.handle_enqueue(StreamId(9), 1000, t).unwrap();
    let x = s.poll_dispatch_on(PathId(1), t).unwrap();
    assert_eq!(x.class, Class::Scheduled);
    // Close via the answer.
    s.handle_upcall_answer(StreamId(9), UpcallAnswer::Close, t)
        .unwrap();
    assert_eq!(
        s.handle_enqueue(StreamId(9), 1, t),
        Err(SchedError::UnknownStream(StreamId(9)))
    );
}

/// An answer that "lowers" to the spec that could not be met (a best
/// achievable no better than the ask) runs the stream best effort instead
/// of mapping the same spec again: each attempt would raise the same
/// upcall, and an application that answers every upcall at once would
/// never return.
#[test]
fn lowering_to_the_same_spec_raises_no_new_upcall() {
    let mut s = Pgos::new(PgosConfig::default());
    let t = Instant::ZERO;
    let samples: Vec<f64> = (1..=100).map(f64::from).collect();
    s.handle_path_update(
        PathId(1),
        PathView::new(EmpiricalDistribution::from_mbps(&samples), Duration::ZERO),
        t,
    );
    events(&mut s);
    let spec = StreamSpec::min_rate(mb(50.0), 0.99).unwrap();
    s.handle_stream_open(StreamId(9), spec, t).unwrap();
    assert!(events(&mut s)
        .iter()
        .any(|e| matches!(e, SchedulerEvent::Upcall { .. })));
    s.handle_upcall_answer(StreamId(9), UpcallAnswer::Lower(spec), t)
        .unwrap();
    assert!(
        !events(&mut s)
            .iter()
            .any(|e| matches!(e, SchedulerEvent::Upcall { .. })),
        "no second upcall for the same spec"
    );
    assert_eq!(s.spec_of(StreamId(9)), Some(spec));
    s.handle_enqueue(StreamId(9), 1000, t).unwrap();
    let x = s.poll_dispatch_on(PathId(1), t).unwrap();
    assert_eq!(x.class, Class::Unscheduled, "best effort meanwhile");
}

/// A block that has run out stops naming a time: a driver whose path is
/// still full when the back-off ends polls nothing on it, and a timeout
/// left in the past would wake it at that instant forever.
#[test]
fn a_back_off_that_ran_out_names_no_timeout() {
    let mut s = Pgos::new(PgosConfig::default());
    let t = Instant::ZERO;
    s.handle_path_update(PathId(1), steady(10.0), t);
    s.handle_stream_open(StreamId(1), StreamSpec::best_effort(1).unwrap(), t)
        .unwrap();
    s.handle_enqueue(StreamId(1), 1000, t).unwrap();
    let d = s.poll_dispatch_on(PathId(1), t).unwrap();
    s.handle_blocked(d, t);
    let until = s.poll_timeout().expect("backing off");
    assert!(until > t);
    s.handle_timeout(until - Duration::from_micros(1));
    assert_eq!(s.poll_timeout(), Some(until), "not yet");
    s.handle_timeout(until);
    assert_eq!(s.poll_timeout(), None);
    // The path is offered again.
    assert!(s.poll_dispatch_on(PathId(1), until).is_some());
}

/// Feed a stationary noisy path for `secs` seconds (a 500-sample window
/// updated every 100 ms); return the mapping changes after the first mapping.
fn remaps_on_stationary_path(cfg: PgosConfig, seed: u64, secs: u64) -> u64 {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let draw = |rng: &mut ChaCha8Rng| 8.0 + 4.0 * rng.random::<f64>();
    let mut window: Vec<f64> = (0..500).map(|_| draw(&mut rng)).collect();
    let mut s = Pgos::new(cfg);
    let view = |w: &[f64]| PathView::new(EmpiricalDistribution::from_mbps(w), Duration::ZERO);
    s.handle_path_update(PathId(1), view(&window), Instant::ZERO);
    // A tight mapping: exactly the path's current guarantee at 0.95.
    let g = view(&window).guarantee(0.95);
    s.handle_stream_open(
        StreamId(1),
        StreamSpec::min_rate(g, 0.95).unwrap(),
        Instant::ZERO,
    )
    .unwrap();
    let base = s.stats().mapping_changes;
    for k in 1..=secs * 10 {
        window.remove(0);
        window.push(draw(&mut rng));
        s.handle_path_update(PathId(1), view(&window), ms(k * 100));
    }
    s.stats().mapping_changes - base
}

#[test]
fn noisy_stationary_path_does_not_flap() {
    for seed in 0..4 {
        assert_eq!(
            remaps_on_stationary_path(PgosConfig::default(), seed, 120),
            0,
            "seed {seed}"
        );
    }
    // Without the band and the dwell time the same noise does flap, so the
    // test above is not vacuous.
    let mut cfg = PgosConfig::default();
    cfg.mapper.remap_tolerance = 0.0;
    cfg.mapper.min_remap_interval = Duration::ZERO;
    cfg.mapper.retry_interval = Duration::ZERO;
    assert!(remaps_on_stationary_path(cfg, 0, 120) > 10);
}

#[test]
fn degraded_path_triggers_one_remap_to_the_other_path() {
    let mut s = Pgos::new(PgosConfig::default());
    s.handle_path_update(PathId(1), steady(20.0), Instant::ZERO);
    s.handle_path_update(PathId(2), steady(15.0), Instant::ZERO);
    s.handle_stream_open(
        StreamId(1),
        StreamSpec::min_rate(mb(10.0), 0.95).unwrap(),
        Instant::ZERO,
    )
    .unwrap();
    assert_eq!(s.mapping().parts(StreamId(1)).unwrap()[0].path, PathId(1));
    let before = s.stats().remaps;
    // Path 1 collapses to 5 Mbit/s; within the dwell time nothing happens.
    s.handle_path_update(PathId(1), steady(5.0), ms(500));
    assert_eq!(s.stats().remaps, before);
    s.handle_path_update(PathId(1), steady(5.0), ms(2000));
    assert_eq!(s.stats().remaps, before + 1);
    assert_eq!(s.mapping().parts(StreamId(1)).unwrap()[0].path, PathId(2));
}

#[test]
fn blocked_path_is_skipped_with_exponential_backoff() {
    let mut s = Pgos::new(PgosConfig::default());
    let t = Instant::ZERO;
    s.handle_path_update(PathId(1), steady(10.0), t);
    s.handle_path_update(PathId(2), steady(10.0), t);
    s.handle_stream_open(StreamId(1), StreamSpec::best_effort(1).unwrap(), t)
        .unwrap();
    for _ in 0..10 {
        s.handle_enqueue(StreamId(1), 100, t).unwrap();
    }
    let x = s.poll_dispatch(t).unwrap();
    let blocked = x.path;
    s.handle_blocked(x, t);
    assert_eq!(s.backlog(StreamId(1)), 10, "message handed back");
    assert_eq!(s.poll_timeout(), Some(t + Duration::from_millis(1)));
    // Until the back-off ends every push decision avoids the blocked path.
    for _ in 0..3 {
        let y = s.poll_dispatch(t).unwrap();
        assert_ne!(y.path, blocked);
    }
    // Blocked again after the first back-off: the next one is twice as long.
    let at = t + Duration::from_millis(1);
    let mut y = s.poll_dispatch(at).unwrap();
    while y.path != blocked {
        y = s.poll_dispatch(at).unwrap();
    }
    s.handle_blocked(y, at);
    let until = s.poll_timeout().unwrap();
    assert_eq!(until, at + Duration::from_millis(2));
}

/// 100 ms rates (Mbit/s) from a normalised `.tsv` trace, or `None` (with the
/// reason printed) when the shared data is absent.
fn tsv(rel: &str) -> Option<Vec<f64>> {
    let root = std::env::var("BRAID_DATA").unwrap_or_else(|_| "../../../shared/data".into());
    let path = std::path::Path::new(&root).join(rel);
    let Ok(text) = std::fs::read_to_string(&path) else {
        eprintln!("skipping: {} not found (set BRAID_DATA)", path.display());
        return None;
    };
    Some(
        text.lines()
            .filter(|l| !l.starts_with('#'))
            .filter_map(|l| l.split_whitespace().nth(1)?.parse().ok())
            .collect(),
    )
}

/// Re-maps while a real, stationary path (100 Mbit/s minus the FCC "yahoo"
/// trace as cross traffic, 1 s samples in a 300-sample window) is monitored
/// for 1100 s, with a stream mapped at exactly its initial 95 % guarantee.
fn remaps_on_real_path(cfg: PgosConfig) -> Option<u64> {
    let x = tsv("traces/fcc/fcc_trace_7289_http---www.yahoo.com.tsv")?;
    let mean = x.iter().sum::<f64>() / x.len() as f64;
    let secs: Vec<f64> = x
        .chunks(10)
        .map(|c| {
            c.iter()
                .map(|v| (100.0 - 58.0 * v / mean).max(0.0))
                .sum::<f64>()
                / 10.0
        })
        .collect();
    let mut w = crate::estimate::SlidingWindow::new(300);
    for &v in &secs[..300] {
        w.push(mb(v));
    }
    let mut s = Pgos::new(cfg);
    s.handle_path_update(
        PathId(1),
        PathView::new(w.clone(), Duration::ZERO),
        Instant::ZERO,
    );
    let g = PathView::new(w.clone(), Duration::ZERO).guarantee(0.95);
    s.handle_stream_open(
        StreamId(1),
        StreamSpec::min_rate(g, 0.95).unwrap(),
        Instant::ZERO,
    )
    .unwrap();
    let base = s.stats().mapping_changes;
    for (k, &v) in secs[300..].iter().enumerate() {
        w.push(mb(v));
        s.handle_path_update(
            PathId(1),
            PathView::new(w.clone(), Duration::ZERO),
            ms((k as u64 + 1) * 1000),
        );
    }
    Some(s.stats().mapping_changes - base)
}

#[test]
fn real_stationary_path_does_not_flap() {
    let Some(with_band) = remaps_on_real_path(PgosConfig::default()) else {
        return;
    };
    let mut cfg = PgosConfig::default();
    cfg.mapper.remap_tolerance = 0.0;
    cfg.mapper.min_remap_interval = Duration::ZERO;
    cfg.mapper.retry_interval = Duration::ZERO;
    let without = remaps_on_real_path(cfg).unwrap_or(0);
    eprintln!("mapping changes on the yahoo path: {with_band} with hysteresis, {without} without");
    assert!(with_band <= 2, "{with_band} mapping changes");
    // This real path drifts slowly (its 300 s p5 moves by about 5 %), so
    // even without the band it changes little; the synthetic test above is
    // the one that shows flapping. Here: at most one unmap and one re-map.
    assert!(with_band <= without, "{with_band} vs {without}");
}

#[test]
fn a_handed_back_packet_does_not_cost_its_stream_virtual_time() {
    let mut s = Pgos::new(PgosConfig::default());
    let t = Instant::ZERO;
    s.handle_path_update(PathId(1), steady(10.0), t);
    s.handle_stream_open(StreamId(1), StreamSpec::min_rate(mb(2.0), 0.95).unwrap(), t)
        .unwrap();
    // 20 packets of 5 ms each at 2 Mbit/s: exactly one 100 ms window.
    for _ in 0..20 {
        s.handle_enqueue(StreamId(1), 1250, t).unwrap();
    }
    // Handing the same packet back 30 times must not push the stream's
    // deadline out of the window (without the rollback it would after 20).
    for _ in 0..30 {
        let x = s.poll_dispatch_on(PathId(1), t).unwrap();
        assert_eq!(x.class, Class::Scheduled);
        s.handle_blocked(x, t);
    }
    assert_eq!(s.backlog(StreamId(1)), 20);
    let classes: Vec<Class> = (0..20)
        .map(|_| s.poll_dispatch_on(PathId(1), t).unwrap().class)
        .collect();
    assert!(
        classes.iter().all(|&c| c == Class::Scheduled),
        "{classes:?}"
    );
}

#[derive(Debug, Clone)]
enum Op {
    Path(u32, Vec<u16>),
    Open(u32, u8, u32, u16),
    Close(u32),
    Enqueue(u32, u32),
    Pull(u32),
    Push,
    Block,
    Tick(u16),
}

fn op() -> impl proptest::strategy::Strategy<Value = Op> {
    use proptest::prelude::*;
    prop_oneof![
        (0u32..4, proptest::collection::vec(any::<u16>(), 0..20)).prop_map(|(p, v)| Op::Path(p, v)),
        (0u32..6, any::<u8>(), any::<u32>(), any::<u16>())
            .prop_map(|(s, k, r, p)| Op::Open(s, k, r, p)),
        (0u32..6).prop_map(Op::Close),
        (0u32..6, any::<u32>()).prop_map(|(s, b)| Op::Enqueue(s, b)),
        (0u32..5).prop_map(Op::Pull),
        Just(Op::Push),
        Just(Op::Block),
        any::<u16>().prop_map(Op::Tick),
    ]
}

fn spec_of(kind: u8, rate: u32, p: u16) -> StreamSpec {
    let prob = f64::from(p) / f64::from(u16::MAX);
    let made = match kind % 4 {
        0 => StreamSpec::min_rate(Bandwidth::from_bps(u64::from(rate)), prob),
        1 => StreamSpec::window(rate % 50, 50, Duration::from_millis(40), rate % 3000, prob),
        2 => StreamSpec::violation_bound(rate % 100, Duration::from_millis(100), 1200, prob * 5.0),
        _ => StreamSpec::best_effort(u64::from(rate % 7)),
    };
    // Invalid random specs fall back to a valid best-effort one.
    made.unwrap_or(StreamSpec::BestEffort { weight: 1 })
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(48))]
    /// No sequence of API calls panics, on PGOS or on any baseline, and the
    /// backlog accounting stays consistent (what goes out was queued).
    #[test]
    fn random_api_use_never_panics(ops in proptest::collection::vec(op(), 1..80)) {
        let scheds: Vec<Box<dyn Scheduler>> = vec![
            Box::new(Pgos::new(PgosConfig::default())),
            Box::new(crate::scheduler::Wfq::new(None)),
            Box::new(crate::scheduler::Msfq::new()),
            Box::new(crate::scheduler::RoundRobin::blocked()),
            Box::new(crate::scheduler::MinRtt::new()),
            Box::new(crate::scheduler::OptSched::new(Default::default())),
        ];
        for mut s in scheds {
            let mut now = Instant::ZERO;
            let mut last: Option<Dispatch> = None;
            let mut queued = [0i64; 6];
            for o in &ops {
                match o {
                    Op::Path(p, v) => {
                        let d = EmpiricalDistribution::from_samples(
                            v.iter().map(|&x| Bandwidth::from_kbps(u64::from(x))),
                        );
                        s.handle_path_update(PathId(*p), PathView::new(d, Duration::from_millis(5)), now);
                    }
                    Op::Open(id, k, r, p) => {
                        let _ = s.handle_stream_open(StreamId(*id), spec_of(*k, *r, *p), now);
                    }
                    Op::Close(id) => {
                        if s.handle_stream_close(StreamId(*id), now).is_ok() {
                            queued[*id as usize] = 0;
                        }
                    }
                    Op::Enqueue(id, b) => {
                        if s.handle_enqueue(StreamId(*id), *b, now).is_ok() {
                            queued[*id as usize] += 1;
                        }
                    }
                    Op::Pull(p) => {
                        last = s.poll_dispatch_on(PathId(*p), now);
                        if let Some(t) = last { queued[t.stream.0 as usize] -= 1; }
                    }
                    Op::Push => {
                        last = s.poll_dispatch(now);
                        if let Some(t) = last { queued[t.stream.0 as usize] -= 1; }
                    }
                    Op::Block => {
                        if let Some(t) = last.take() {
                            s.handle_blocked(t, now);
                            if s.backlog(t.stream) > 0 { queued[t.stream.0 as usize] += 1; }
                        }
                    }
                    Op::Tick(ms) => now += Duration::from_millis(u64::from(*ms)),
                }
                while s.poll_event().is_some() {}
                let _ = s.poll_timeout();
                for (i, &q) in queued.iter().enumerate() {
                    proptest::prop_assert!(q >= 0);
                    proptest::prop_assert_eq!(s.backlog(StreamId(i as u32)) as i64, q, "{} stream {}", s.name(), i);
                }
            }
        }
    }
}
