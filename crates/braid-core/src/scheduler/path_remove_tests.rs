//! Tests of [`Scheduler::handle_path_remove`] on PGOS and the baselines.

use super::*;
use crate::scheduler::path::EmpiricalDistribution;
use crate::time::Duration;
use crate::units::Bandwidth;
use std::collections::BTreeSet;

fn steady(mbps: f64) -> PathView {
    PathView::new(
        EmpiricalDistribution::from_mbps(&[mbps]),
        Duration::from_millis(10),
    )
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

#[test]
fn unknown_path_is_an_error_everywhere() {
    for mut s in all() {
        let t = Instant::ZERO;
        assert_eq!(
            s.handle_path_remove(PathId(7), t),
            Err(SchedError::UnknownPath(PathId(7))),
            "{}",
            s.name()
        );
        s.handle_path_update(PathId(7), steady(10.0), t);
        assert_eq!(s.handle_path_remove(PathId(7), t), Ok(()), "{}", s.name());
        assert_eq!(
            s.handle_path_remove(PathId(7), t),
            Err(SchedError::UnknownPath(PathId(7))),
            "{}",
            s.name()
        );
    }
}

#[test]
fn pgos_remaps_a_stream_off_a_removed_path() {
    let mut s = Pgos::new(PgosConfig::default());
    let t = Instant::ZERO;
    s.handle_path_update(PathId(1), steady(10.0), t);
    s.handle_path_update(PathId(2), steady(10.0), t);
    let spec = StreamSpec::min_rate(Bandwidth::from_mbps(4), 0.9).unwrap();
    s.handle_stream_open(StreamId(1), spec, t).unwrap();
    let on = s.mapping().parts(StreamId(1)).unwrap()[0].path;
    for _ in 0..5 {
        s.handle_enqueue(StreamId(1), 1000, t).unwrap();
    }
    while s.poll_event().is_some() {}
    s.handle_path_remove(on, t).unwrap();
    let events: Vec<_> = std::iter::from_fn(|| s.poll_event()).collect();
    assert!(events.iter().any(|e| matches!(
        e,
        SchedulerEvent::Remapped {
            reason: RemapReason::PathsChanged,
            ..
        }
    )));
    let other = if on == PathId(1) {
        PathId(2)
    } else {
        PathId(1)
    };
    assert!(events.iter().any(
        |e| matches!(e, SchedulerEvent::Mapped { stream, parts } if *stream == StreamId(1) && parts.iter().all(|p| p.path == other))
    ));
    assert_eq!(s.backlog(StreamId(1)), 5, "queued messages stay queued");
    assert!(s.poll_dispatch_on(on, t).is_none());
    let x = s.poll_dispatch(t).unwrap();
    assert_eq!(
        (x.path, x.stream, x.class),
        (other, StreamId(1), Class::Scheduled)
    );
}

/// With every path gone the paths are out, not short: the stream is
/// unmapped without an upcall (issue 28: an outage of the only path used to
/// lower a guarantee for good), and mapped again when a path is back.
#[test]
fn pgos_unmaps_without_an_upcall_when_the_last_path_goes() {
    let mut s = Pgos::new(PgosConfig::default());
    let t = Instant::ZERO;
    s.handle_path_update(PathId(1), steady(10.0), t);
    let spec = StreamSpec::min_rate(Bandwidth::from_mbps(4), 0.9).unwrap();
    s.handle_stream_open(StreamId(1), spec, t).unwrap();
    s.handle_enqueue(StreamId(1), 1000, t).unwrap();
    let x = s.poll_dispatch(t).unwrap();
    while s.poll_event().is_some() {}
    s.handle_path_remove(PathId(1), t).unwrap();
    let events: Vec<_> = std::iter::from_fn(|| s.poll_event()).collect();
    assert!(!events
        .iter()
        .any(|e| matches!(e, SchedulerEvent::Upcall { .. })));
    assert!(events.iter().any(
        |e| matches!(e, SchedulerEvent::Mapped { stream, parts } if *stream == StreamId(1) && parts.is_empty())
    ));
    // A decision handed back after its path went is queued again.
    s.handle_blocked(x, t);
    assert_eq!(s.backlog(StreamId(1)), 1);
    assert!(s.poll_dispatch(t).is_none(), "no path left");
    s.handle_path_update(PathId(1), steady(10.0), t);
    let events: Vec<_> = std::iter::from_fn(|| s.poll_event()).collect();
    assert!(events.iter().any(
        |e| matches!(e, SchedulerEvent::Mapped { stream, parts } if *stream == StreamId(1) && !parts.is_empty())
    ));
}

/// A spec lowered after an upcall is restored once the paths carry the
/// asked one again, and only then.
#[test]
fn pgos_restores_a_lowered_spec_when_the_paths_carry_it_again() {
    let mut s = Pgos::new(PgosConfig::default());
    let mut t = Instant::ZERO;
    s.handle_path_update(PathId(1), steady(10.0), t);
    let spec = StreamSpec::min_rate(Bandwidth::from_mbps(12), 0.9).unwrap();
    s.handle_stream_open(StreamId(1), spec, t).unwrap();
    let events: Vec<_> = std::iter::from_fn(|| s.poll_event()).collect();
    let best = events
        .iter()
        .find_map(|e| match e {
            SchedulerEvent::Upcall { best, .. } => Some(*best),
            _ => None,
        })
        .expect("12 Mbit/s does not fit a 10 Mbit/s path");
    let lowered = best.lowered(&spec).unwrap();
    s.handle_upcall_answer(StreamId(1), UpcallAnswer::Lower(lowered), t)
        .unwrap();
    while s.poll_event().is_some() {}
    // Retries while the path is as it was change nothing.
    t += Duration::from_secs(6);
    s.handle_path_update(PathId(1), steady(10.0), t);
    assert_eq!(s.stats().restored, 0);
    while s.poll_event().is_some() {}
    // The path grows: the asked 12 Mbit/s maps again and is restored.
    t += Duration::from_secs(6);
    s.handle_path_update(PathId(1), steady(20.0), t);
    assert_eq!(s.stats().restored, 1);
    let events: Vec<_> = std::iter::from_fn(|| s.poll_event()).collect();
    let mapped: u64 = events
        .iter()
        .find_map(|e| match e {
            SchedulerEvent::Mapped { stream, parts } if *stream == StreamId(1) => {
                Some(parts.iter().map(|p| p.rate.bps()).sum())
            }
            _ => None,
        })
        .expect("mapped again");
    assert_eq!(mapped, 12_000_000);
}

#[test]
fn round_robin_deals_a_removed_paths_messages_again() {
    let mut s = RoundRobin::blocked();
    let t = Instant::ZERO;
    s.handle_path_update(PathId(1), steady(10.0), t);
    s.handle_path_update(PathId(2), steady(10.0), t);
    s.handle_stream_open(StreamId(1), StreamSpec::best_effort(1).unwrap(), t)
        .unwrap();
    for _ in 0..4 {
        s.handle_enqueue(StreamId(1), 100, t).unwrap();
    }
    s.handle_path_remove(PathId(2), t).unwrap();
    assert!(s.poll_dispatch_on(PathId(2), t).is_none());
    let sent = std::iter::from_fn(|| s.poll_dispatch_on(PathId(1), t)).count();
    assert_eq!(sent, 4, "every message goes out on the path that is left");
    assert_eq!(s.backlog(StreamId(1)), 0);
}

#[derive(Debug, Clone)]
enum Op {
    Add(u32, u16),
    Remove(u32),
    Open(u32, bool),
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
        (0u32..4, 1u16..1500).prop_map(|(s, b)| Op::Enqueue(s, b)),
        (0u32..4).prop_map(Op::Pull),
        Just(Op::Push),
        Just(Op::Block),
        any::<u8>().prop_map(Op::Tick),
    ]
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]
    /// After any sequence of path additions and removals, no decision names
    /// a path that is not there, and no queued message is lost.
    #[test]
    fn no_dispatch_names_a_removed_path(ops in proptest::collection::vec(op(), 1..120)) {
        for mut s in all() {
            let mut now = Instant::ZERO;
            let mut live: BTreeSet<PathId> = BTreeSet::new();
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
                        proptest::prop_assert_eq!(r.is_ok(), live.remove(&PathId(*p)), "{}", s.name());
                    }
                    Op::Open(id, g) => {
                        let spec = if *g {
                            StreamSpec::min_rate(Bandwidth::from_mbps(2), 0.9).unwrap()
                        } else {
                            StreamSpec::best_effort(1).unwrap()
                        };
                        let _ = s.handle_stream_open(StreamId(*id), spec, now);
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
                            queued[t.stream.0 as usize] += 1;
                        }
                        continue;
                    }
                    Op::Tick(ms) => now += Duration::from_millis(u64::from(*ms)),
                }
                if let Some(t) = last.filter(|_| matches!(o, Op::Pull(_) | Op::Push)) {
                    proptest::prop_assert!(live.contains(&t.path), "{} sent on removed {}", s.name(), t.path);
                    queued[t.stream.0 as usize] -= 1;
                }
                while s.poll_event().is_some() {}
                for (i, &q) in queued.iter().enumerate() {
                    proptest::prop_assert_eq!(s.backlog(StreamId(i as u32)) as i64, q, "{} stream {}", s.name(), i);
                }
            }
        }
    }
}
