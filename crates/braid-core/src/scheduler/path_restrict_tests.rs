//! Tests of [`Scheduler::handle_stream_paths`] on PGOS and the baselines:
//! a restricted stream is mapped and dispatched only onto its set.

use super::*;
use crate::scheduler::path::EmpiricalDistribution;
use crate::time::Duration;
use crate::units::Bandwidth;
use std::collections::{BTreeMap, BTreeSet};

fn steady(mbps: f64) -> PathView {
    steady_rtt(mbps, 10)
}

fn steady_rtt(mbps: f64, rtt_ms: u64) -> PathView {
    PathView::new(
        EmpiricalDistribution::from_mbps(&[mbps]),
        Duration::from_millis(rtt_ms),
    )
}

fn ms(x: u64) -> Instant {
    Instant::from_nanos(x * 1_000_000)
}

fn mb(x: u64) -> Bandwidth {
    Bandwidth::from_mbps(x)
}

fn all() -> Vec<Box<dyn Scheduler>> {
    vec![
        Box::new(Pgos::new(PgosConfig::default())),
        Box::new(Wfq::new(None)),
        Box::new(Msfq::new()),
        Box::new(RoundRobin::blocked()),
        Box::new(RoundRobin::partitioned(3)),
        Box::new(MinRtt::new()),
        Box::new(OptSched::new(OptSchedConfig::default())),
    ]
}

fn events(s: &mut dyn Scheduler) -> Vec<SchedulerEvent> {
    std::iter::from_fn(|| s.poll_event()).collect()
}

/// Pull on `path` until nothing comes; the decisions.
fn drain_on(s: &mut dyn Scheduler, path: PathId, t: Instant) -> Vec<Dispatch> {
    std::iter::from_fn(|| s.poll_dispatch_on(path, t))
        .take(10_000)
        .collect()
}

fn best_effort() -> StreamSpec {
    StreamSpec::best_effort(1).unwrap()
}

#[test]
fn unknown_stream_and_too_many_paths_are_errors_everywhere() {
    for mut s in all() {
        let t = Instant::ZERO;
        assert_eq!(
            s.handle_stream_paths(StreamId(3), None, t),
            Err(SchedError::UnknownStream(StreamId(3))),
            "{}",
            s.name()
        );
        s.handle_stream_open(StreamId(3), best_effort(), t).unwrap();
        // Paths not known yet are allowed; duplicates collapse.
        let r = s.handle_stream_paths(StreamId(3), Some(vec![PathId(9), PathId(9)]), t);
        assert_eq!(r, Ok(()), "{}", s.name());
        let many = (0..=MAX_STREAM_PATHS as u32).map(PathId).collect();
        assert_eq!(
            s.handle_stream_paths(StreamId(3), Some(many), t),
            Err(SchedError::TooManyPaths(MAX_STREAM_PATHS)),
            "{}",
            s.name()
        );
    }
}

#[test]
fn pgos_maps_a_restricted_stream_only_onto_its_set() {
    let mut s = Pgos::new(PgosConfig::default());
    let t = Instant::ZERO;
    s.handle_path_update(PathId(1), steady(50.0), t);
    s.handle_path_update(PathId(2), steady(10.0), t);
    let spec = StreamSpec::min_rate(mb(4), 0.9).unwrap();
    s.handle_stream_open(StreamId(1), spec, t).unwrap();
    // Unrestricted, it takes the roomier path.
    assert_eq!(s.mapping().parts(StreamId(1)).unwrap()[0].path, PathId(1));
    events(&mut s);
    s.handle_stream_paths(StreamId(1), Some(vec![PathId(2)]), t)
        .unwrap();
    let evs = events(&mut s);
    assert!(evs.iter().any(|e| matches!(
        e,
        SchedulerEvent::Remapped {
            reason: RemapReason::StreamsChanged,
            ..
        }
    )));
    assert!(evs
        .iter()
        .any(|e| matches!(e, SchedulerEvent::Mapped { stream, parts }
        if *stream == StreamId(1) && parts.iter().all(|p| p.path == PathId(2)))));
    // The same set again changes nothing.
    s.handle_stream_paths(StreamId(1), Some(vec![PathId(2)]), t)
        .unwrap();
    assert!(events(&mut s).is_empty());
    // Backlogged well beyond its rate, with a best-effort stream beside it:
    // path 1 takes the best-effort stream only, never the restricted one,
    // not even as spare capacity.
    s.handle_stream_open(StreamId(2), best_effort(), t).unwrap();
    for _ in 0..50 {
        s.handle_enqueue(StreamId(1), 1000, t).unwrap();
        s.handle_enqueue(StreamId(2), 1000, t).unwrap();
    }
    let on1 = drain_on(&mut s, PathId(1), ms(200));
    assert_eq!(on1.len(), 50);
    assert!(on1.iter().all(|x| x.stream == StreamId(2)));
    assert_eq!(s.backlog(StreamId(1)), 50, "queued, not lost");
    let on2 = drain_on(&mut s, PathId(2), ms(200));
    assert_eq!(on2.len(), 50);
    assert!(on2.iter().all(|x| x.stream == StreamId(1)));
    assert_eq!(on2[0].class, Class::Scheduled);
}

#[test]
fn pgos_best_achievable_is_over_the_allowed_paths() {
    let mut s = Pgos::new(PgosConfig::default());
    let t = Instant::ZERO;
    s.handle_path_update(PathId(1), steady(10.0), t);
    s.handle_path_update(PathId(2), steady(10.0), t);
    // 15 Mbit/s needs both paths.
    let spec = StreamSpec::min_rate(mb(15), 0.9).unwrap();
    s.handle_stream_open(StreamId(1), spec, t).unwrap();
    assert_eq!(s.mapping().parts(StreamId(1)).unwrap().len(), 2);
    events(&mut s);
    s.handle_stream_paths(StreamId(1), Some(vec![PathId(1), PathId(7)]), t)
        .unwrap();
    let best = events(&mut s).into_iter().find_map(|e| match e {
        SchedulerEvent::Upcall {
            stream: StreamId(1),
            best,
            ..
        } => Some(best),
        _ => None,
    });
    let best = best.expect("an upcall");
    assert_eq!(best.rate, mb(10), "one 10 Mbit/s path, not two");
    // Path 7 joins: the set now holds enough again (a retry re-maps it).
    s.handle_path_update(PathId(7), steady(10.0), t);
    assert_eq!(
        s.mapping()
            .parts(StreamId(1))
            .unwrap()
            .iter()
            .map(|p| p.path)
            .collect::<BTreeSet<_>>(),
        BTreeSet::from([PathId(1), PathId(7)])
    );
}

#[test]
fn pgos_an_rtt_restriction_steers_the_stream_to_the_other_path() {
    let mut s = Pgos::new(PgosConfig::default());
    let t = Instant::ZERO;
    // Path 1 has more bandwidth but (the session measured) too much delay
    // for the stream's RTT guarantee.
    s.handle_path_update(PathId(1), steady_rtt(80.0, 160), t);
    s.handle_path_update(PathId(2), steady_rtt(20.0, 20), t);
    let spec = StreamSpec::min_rate(mb(8), 0.95).unwrap();
    s.handle_stream_open(StreamId(1), spec, t).unwrap();
    assert_eq!(s.mapping().parts(StreamId(1)).unwrap()[0].path, PathId(1));
    for _ in 0..10 {
        s.handle_enqueue(StreamId(1), 1000, t).unwrap();
    }
    // The paths whose RTT at P is ≤ d: only path 2.
    s.handle_stream_paths(StreamId(1), Some(vec![PathId(2)]), t)
        .unwrap();
    assert_eq!(
        s.mapping().parts(StreamId(1)).unwrap(),
        &[Part {
            path: PathId(2),
            rate: mb(8),
            probability: Some(0.95)
        }]
    );
    let sent: Vec<Dispatch> = std::iter::from_fn(|| s.poll_dispatch(ms(1))).collect();
    assert_eq!(sent.len(), 10);
    assert!(sent.iter().all(|x| x.path == PathId(2)));
    // Lifting the restriction re-maps; the stream keeps the path it is on
    // (no reordering), but path 1 may now take its late packets.
    events(&mut s);
    s.handle_stream_paths(StreamId(1), None, ms(2)).unwrap();
    assert!(events(&mut s).iter().any(|e| matches!(
        e,
        SchedulerEvent::Remapped {
            reason: RemapReason::StreamsChanged,
            ..
        }
    )));
    assert_eq!(s.mapping().parts(StreamId(1)).unwrap()[0].path, PathId(2));
    s.handle_enqueue(StreamId(1), 1000, ms(50)).unwrap();
    let x = s.poll_dispatch_on(PathId(1), ms(50)).unwrap();
    assert_eq!((x.stream, x.class), (StreamId(1), Class::OtherPath));
}

#[test]
fn pgos_an_empty_set_raises_the_upcall_and_holds_the_messages() {
    let mut s = Pgos::new(PgosConfig::default());
    let t = Instant::ZERO;
    s.handle_path_update(PathId(1), steady(10.0), t);
    s.handle_path_update(PathId(2), steady(10.0), t);
    let spec = StreamSpec::min_rate(mb(4), 0.9).unwrap();
    s.handle_stream_open(StreamId(1), spec, t).unwrap();
    s.handle_stream_open(StreamId(2), best_effort(), t).unwrap();
    events(&mut s);
    s.handle_stream_paths(StreamId(1), Some(Vec::new()), t)
        .unwrap();
    s.handle_stream_paths(StreamId(2), Some(Vec::new()), t)
        .unwrap();
    let evs = events(&mut s);
    let best = evs.iter().find_map(|e| match e {
        SchedulerEvent::Upcall { stream, best, .. } if *stream == StreamId(1) => Some(*best),
        _ => None,
    });
    assert_eq!(best.map(|b| b.rate), Some(Bandwidth::ZERO));
    for _ in 0..5 {
        s.handle_enqueue(StreamId(1), 1000, t).unwrap();
        s.handle_enqueue(StreamId(2), 1000, t).unwrap();
    }
    assert!(s.poll_dispatch(ms(1)).is_none());
    assert!(s.poll_dispatch_on(PathId(1), ms(1)).is_none());
    assert!(s.poll_dispatch_on(PathId(2), ms(1)).is_none());
    assert_eq!((s.backlog(StreamId(1)), s.backlog(StreamId(2))), (5, 5));
    // A lowered spec keeps the restriction.
    let lower = StreamSpec::min_rate(mb(2), 0.9).unwrap();
    s.handle_upcall_answer(StreamId(1), UpcallAnswer::Lower(lower), ms(1))
        .unwrap();
    assert!(s.mapping().parts(StreamId(1)).is_none());
    assert!(s.poll_dispatch(ms(1)).is_none());
    // Given a path back, everything goes out there.
    s.handle_stream_paths(StreamId(1), Some(vec![PathId(2)]), ms(2))
        .unwrap();
    s.handle_stream_paths(StreamId(2), Some(vec![PathId(2)]), ms(2))
        .unwrap();
    assert_eq!(s.mapping().parts(StreamId(1)).unwrap()[0].path, PathId(2));
    assert!(s.poll_dispatch_on(PathId(1), ms(2)).is_none());
    let sent = drain_on(&mut s, PathId(2), ms(300));
    assert_eq!(sent.len(), 10);
}

#[test]
fn pgos_late_packets_are_not_taken_by_a_path_outside_the_set() {
    // Table I class 2: a late packet scheduled on path 2 is taken by path 1
    // only if its stream may use path 1.
    let run = |restrict: bool| {
        let mut s = Pgos::new(PgosConfig::default());
        let t = Instant::ZERO;
        s.handle_path_update(PathId(1), steady(10.0), t);
        s.handle_path_update(PathId(2), steady(10.0), t);
        let s1 = StreamSpec::min_rate(mb(8), 0.9).unwrap();
        let s2 = StreamSpec::min_rate(mb(8), 0.8).unwrap();
        s.handle_stream_open(StreamId(1), s1, t).unwrap();
        s.handle_stream_open(StreamId(2), s2, t).unwrap();
        if restrict {
            s.handle_stream_paths(StreamId(2), Some(vec![PathId(2)]), t)
                .unwrap();
        }
        assert_eq!(s.mapping().parts(StreamId(2)).unwrap()[0].path, PathId(2));
        s.handle_enqueue(StreamId(2), 1000, t).unwrap();
        s.poll_dispatch_on(PathId(1), ms(2))
    };
    assert_eq!(run(false).map(|x| x.class), Some(Class::OtherPath));
    assert_eq!(run(true), None);
}

#[test]
fn fair_queues_send_only_on_allowed_paths() {
    let t = Instant::ZERO;
    // MSFQ: stream 1 only on path 2; stream 2 anywhere.
    let mut s = Msfq::new();
    s.handle_path_update(PathId(1), steady(10.0), t);
    s.handle_path_update(PathId(2), steady(10.0), t);
    s.handle_stream_open(StreamId(1), best_effort(), t).unwrap();
    s.handle_stream_open(StreamId(2), best_effort(), t).unwrap();
    s.handle_stream_paths(StreamId(1), Some(vec![PathId(2)]), t)
        .unwrap();
    for _ in 0..4 {
        s.handle_enqueue(StreamId(1), 100, t).unwrap();
        s.handle_enqueue(StreamId(2), 100, t).unwrap();
    }
    let on1 = drain_on(&mut s, PathId(1), t);
    assert_eq!(on1.len(), 4);
    assert!(on1.iter().all(|x| x.stream == StreamId(2)));
    // Push mode finds path 2 for stream 1.
    let pushed: Vec<Dispatch> = std::iter::from_fn(|| s.poll_dispatch(t)).collect();
    assert_eq!(pushed.len(), 4);
    assert!(pushed
        .iter()
        .all(|x| x.stream == StreamId(1) && x.path == PathId(2)));

    // WFQ runs on one path: a stream not allowed there never goes out.
    let mut w = Wfq::new(Some(PathId(1)));
    w.handle_path_update(PathId(1), steady(10.0), t);
    w.handle_stream_open(StreamId(1), best_effort(), t).unwrap();
    w.handle_stream_paths(StreamId(1), Some(vec![PathId(2)]), t)
        .unwrap();
    w.handle_enqueue(StreamId(1), 100, t).unwrap();
    assert!(w.poll_dispatch_on(PathId(1), t).is_none());
    assert!(w.poll_dispatch(t).is_none());
    assert_eq!(w.backlog(StreamId(1)), 1);
    w.handle_stream_paths(StreamId(1), None, t).unwrap();
    assert_eq!(
        w.poll_dispatch(t).map(|x| (x.stream, x.path)),
        Some((StreamId(1), PathId(1)))
    );

    // An empty set holds the messages; lifting it releases them.
    let mut s = Msfq::new();
    s.handle_path_update(PathId(1), steady(10.0), t);
    s.handle_stream_open(StreamId(1), best_effort(), t).unwrap();
    s.handle_enqueue(StreamId(1), 100, t).unwrap();
    s.handle_stream_paths(StreamId(1), Some(Vec::new()), t)
        .unwrap();
    assert!(s.poll_dispatch(t).is_none());
    s.handle_stream_paths(StreamId(1), Some(vec![PathId(1)]), t)
        .unwrap();
    assert_eq!(s.poll_dispatch(t).map(|x| x.path), Some(PathId(1)));
}

#[test]
fn round_robin_deals_only_to_allowed_paths_and_deals_again_on_a_change() {
    let t = Instant::ZERO;
    for mut s in [RoundRobin::blocked(), RoundRobin::partitioned(3)] {
        s.handle_path_update(PathId(1), steady(10.0), t);
        s.handle_path_update(PathId(2), steady(10.0), t);
        s.handle_stream_open(StreamId(1), best_effort(), t).unwrap();
        s.handle_stream_open(StreamId(2), best_effort(), t).unwrap();
        s.handle_stream_paths(StreamId(1), Some(vec![PathId(2)]), t)
            .unwrap();
        for _ in 0..6 {
            s.handle_enqueue(StreamId(1), 100, t).unwrap();
        }
        assert!(s.poll_dispatch_on(PathId(1), t).is_none(), "{}", s.name());
        assert_eq!(drain_on(&mut s, PathId(2), t).len(), 6, "{}", s.name());
        // Dealt over both paths, then restricted to path 1: what path 2
        // held is dealt again to path 1.
        for _ in 0..6 {
            s.handle_enqueue(StreamId(2), 100, t).unwrap();
        }
        s.handle_stream_paths(StreamId(2), Some(vec![PathId(1)]), t)
            .unwrap();
        assert!(s.poll_dispatch_on(PathId(2), t).is_none(), "{}", s.name());
        assert_eq!(drain_on(&mut s, PathId(1), t).len(), 6, "{}", s.name());
        // With no usable path a message is held, then dealt when one joins.
        s.handle_stream_paths(StreamId(2), Some(vec![PathId(3)]), t)
            .unwrap();
        s.handle_enqueue(StreamId(2), 100, t).unwrap();
        assert!(s.poll_dispatch(t).is_none());
        assert_eq!(s.backlog(StreamId(2)), 1);
        s.handle_path_update(PathId(3), steady(10.0), t);
        assert_eq!(s.poll_dispatch(t).map(|x| x.path), Some(PathId(3)));
    }
}

#[test]
fn min_rtt_keeps_fifo_order_within_the_allowed_paths() {
    let t = Instant::ZERO;
    let mut s = MinRtt::new();
    s.handle_path_update(PathId(1), steady_rtt(10.0, 50), t);
    s.handle_path_update(PathId(2), steady_rtt(10.0, 5), t);
    s.handle_stream_open(StreamId(1), best_effort(), t).unwrap();
    s.handle_stream_open(StreamId(2), best_effort(), t).unwrap();
    s.handle_stream_paths(StreamId(1), Some(vec![PathId(1)]), t)
        .unwrap();
    s.handle_enqueue(StreamId(1), 100, t).unwrap();
    s.handle_enqueue(StreamId(2), 100, t).unwrap();
    // Pull on the fast path: stream 1's head waits in place, stream 2 goes.
    assert_eq!(
        s.poll_dispatch_on(PathId(2), t).map(|x| x.stream),
        Some(StreamId(2))
    );
    assert!(s.poll_dispatch_on(PathId(2), t).is_none());
    // Push: the head goes on the lowest-RTT path it may use.
    s.handle_enqueue(StreamId(2), 100, t).unwrap();
    let x = s.poll_dispatch(t).unwrap();
    assert_eq!((x.stream, x.path), (StreamId(1), PathId(1)));
    let y = s.poll_dispatch(t).unwrap();
    assert_eq!((y.stream, y.path), (StreamId(2), PathId(2)));
}

#[test]
fn optsched_budgets_and_sends_only_on_allowed_paths() {
    let t = Instant::ZERO;
    let mut s = OptSched::new(OptSchedConfig::default());
    s.handle_path_update(PathId(1), steady(10.0), t);
    s.handle_path_update(PathId(2), steady(10.0), t);
    let spec = StreamSpec::min_rate(mb(4), 0.95).unwrap();
    s.handle_stream_open(StreamId(1), spec, t).unwrap();
    s.handle_stream_paths(StreamId(1), Some(vec![PathId(2)]), t)
        .unwrap();
    // Path 1 has the more spare capacity, but the stream may not use it.
    s.handle_window(t, &[(PathId(1), mb(50)), (PathId(2), mb(10))], &[]);
    for _ in 0..600 {
        s.handle_enqueue(StreamId(1), 1000, t).unwrap();
    }
    assert!(s.poll_dispatch_on(PathId(1), t).is_none());
    let on2 = drain_on(&mut s, PathId(2), t);
    assert_eq!(on2.len(), 600);
    assert_eq!(on2[0].class, Class::Scheduled);
    assert_eq!(
        on2.iter().filter(|x| x.class == Class::Scheduled).count(),
        500,
        "4 Mbit/s for 1 s on path 2"
    );
}

#[derive(Debug, Clone)]
enum Op {
    Add(u32, u16),
    Remove(u32),
    Open(u32, bool),
    Close(u32),
    /// Restrict a stream: `None` any path, else a bit mask over paths 0..4.
    Restrict(u32, Option<u8>),
    Enqueue(u32, u16),
    Pull(u32),
    Push,
    Block,
    Tick(u8),
}

fn op() -> impl proptest::strategy::Strategy<Value = Op> {
    use proptest::prelude::*;
    prop_oneof![
        (0u32..4, 1u16..200).prop_map(|(p, m)| Op::Add(p, m)),
        (0u32..4).prop_map(Op::Remove),
        (0u32..4, any::<bool>()).prop_map(|(s, g)| Op::Open(s, g)),
        (0u32..4).prop_map(Op::Close),
        (0u32..4, proptest::option::of(0u8..16)).prop_map(|(s, m)| Op::Restrict(s, m)),
        (0u32..4, proptest::option::of(0u8..16)).prop_map(|(s, m)| Op::Restrict(s, m)),
        (0u32..4, 1u16..1500).prop_map(|(s, b)| Op::Enqueue(s, b)),
        (0u32..4, 1u16..1500).prop_map(|(s, b)| Op::Enqueue(s, b)),
        (0u32..4).prop_map(Op::Pull),
        (0u32..4).prop_map(Op::Pull),
        Just(Op::Push),
        Just(Op::Block),
        any::<u8>().prop_map(Op::Tick),
    ]
}

fn set_of(mask: u8) -> Vec<PathId> {
    (0..4)
        .filter(|j| mask & (1 << j) != 0)
        .map(PathId)
        .collect()
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]
    /// After any sequence of path, stream and restriction changes, no
    /// decision names a path outside its stream's set (or a removed path),
    /// no queued message is lost, and once the restrictions are lifted
    /// every queued message goes out.
    #[test]
    fn no_dispatch_leaves_the_streams_set(ops in proptest::collection::vec(op(), 1..160)) {
        for mut s in all() {
            let name = s.name();
            let mut now = Instant::ZERO;
            let mut live: BTreeSet<PathId> = BTreeSet::new();
            let mut open: BTreeMap<u32, Option<Vec<PathId>>> = BTreeMap::new();
            let mut last: Option<Dispatch> = None;
            let mut queued = [0i64; 4];
            for o in &ops {
                match o {
                    Op::Add(p, m) => {
                        s.handle_path_update(PathId(*p), steady(f64::from(*m)), now);
                        live.insert(PathId(*p));
                    }
                    Op::Remove(p) => {
                        let r = s.handle_path_remove(PathId(*p), now);
                        proptest::prop_assert_eq!(r.is_ok(), live.remove(&PathId(*p)), "{}", name);
                    }
                    Op::Open(id, g) => {
                        let spec = if *g {
                            StreamSpec::min_rate(mb(2), 0.9).unwrap()
                        } else {
                            best_effort()
                        };
                        if s.handle_stream_open(StreamId(*id), spec, now).is_ok() {
                            open.insert(*id, None);
                        }
                    }
                    Op::Close(id) => {
                        let r = s.handle_stream_close(StreamId(*id), now);
                        proptest::prop_assert_eq!(r.is_ok(), open.remove(id).is_some(), "{}", name);
                        if r.is_ok() {
                            queued[*id as usize] = 0;
                        }
                    }
                    Op::Restrict(id, mask) => {
                        let set = mask.map(set_of);
                        let r = s.handle_stream_paths(StreamId(*id), set.clone(), now);
                        proptest::prop_assert_eq!(r.is_ok(), open.contains_key(id), "{}", name);
                        if let Some(v) = open.get_mut(id) {
                            *v = set;
                        }
                    }
                    Op::Enqueue(id, b) => {
                        if s.handle_enqueue(StreamId(*id), u32::from(*b), now).is_ok() {
                            queued[*id as usize] += 1;
                        }
                    }
                    Op::Pull(p) => {
                        last = s.poll_dispatch_on(PathId(*p), now);
                    }
                    Op::Push => {
                        last = s.poll_dispatch(now);
                    }
                    Op::Block => {
                        if let Some(t) = last.take() {
                            s.handle_blocked(t, now);
                            if open.contains_key(&t.stream.0) {
                                queued[t.stream.0 as usize] += 1;
                            }
                        }
                        continue;
                    }
                    Op::Tick(ms) => now += Duration::from_millis(u64::from(*ms)),
                }
                if let Some(t) = last.filter(|_| matches!(o, Op::Pull(_) | Op::Push)) {
                    proptest::prop_assert!(live.contains(&t.path), "{} sent on removed {}", name, t.path);
                    let set = open.get(&t.stream.0);
                    proptest::prop_assert!(set.is_some(), "{} sent closed {}", name, t.stream);
                    let allowed = set.and_then(Option::as_ref).is_none_or(|v| v.contains(&t.path));
                    proptest::prop_assert!(allowed, "{} sent {} on {} outside {:?}", name, t.stream, t.path, set);
                    queued[t.stream.0 as usize] -= 1;
                }
                // A dispatch handed back after its stream closed is dropped.
                if let Op::Close(id) = o {
                    if last.is_some_and(|t| t.stream.0 == *id) {
                        last = None;
                    }
                }
                while s.poll_event().is_some() {}
                for (i, &q) in queued.iter().enumerate() {
                    proptest::prop_assert_eq!(s.backlog(StreamId(i as u32)) as i64, q, "{} stream {}", name, i);
                }
            }
            // Lift every restriction, make sure a path exists, and pull: all
            // that is queued goes out.
            for id in open.keys() {
                s.handle_stream_paths(StreamId(*id), None, now).unwrap();
            }
            if live.is_empty() {
                s.handle_path_update(PathId(0), steady(100.0), now);
                live.insert(PathId(0));
            }
            let total: i64 = queued.iter().sum();
            let mut sent = 0i64;
            for _ in 0..=total {
                now += Duration::from_millis(10);
                for &p in &live {
                    sent += drain_on(&mut *s, p, now).len() as i64;
                }
            }
            proptest::prop_assert_eq!(sent, total, "{} left messages behind", name);
        }
    }
}
