//! Unit tests of the book: each request, each transition, each error.

use super::*;
use crate::reserve::class::Class;
use crate::reserve::policy::{LimitKind, Limits, Owner};
use crate::reserve::state::TransitionError;

fn secs(s: u64) -> Instant {
    Instant::from_nanos(s * 1_000_000_000)
}
fn mbit(m: u64) -> Bandwidth {
    Bandwidth::from_mbps(m)
}
fn req(rate: u64, start: u64, end: u64) -> ReserveRequest {
    ReserveRequest {
        owner: Owner::new("alice", "lab"),
        resource: "link".into(),
        rate: mbit(rate),
        start: secs(start),
        end: secs(end),
        class: Class::Foreground,
    }
}
fn book() -> Book {
    book_with(BookConfig::default())
}
fn book_with(config: BookConfig) -> Book {
    let mut b = Book::new(config);
    b.add_resource("link", mbit(100)).unwrap();
    b
}
fn events(b: &mut Book) -> Vec<Event> {
    core::iter::from_fn(|| b.poll_event()).collect()
}
fn state(b: &Book, id: ReservationId) -> (ReservationState, ProvisionState, LifeState) {
    let r = b.reservation(id).expect("the test's reservation is known");
    (r.state, r.provision, r.life)
}

#[test]
fn reserve_holds_then_commit_commits() {
    let mut b = book();
    let id = b.reserve(req(60, 0, 100), secs(0)).unwrap();
    assert_eq!(id, ReservationId(1));
    let r = b.reservation(id).unwrap();
    assert_eq!(r.state, ReservationState::Held);
    assert_eq!(r.hold_expires, Some(secs(120)));
    assert_eq!(b.usage_at("link", secs(0)).unwrap(), mbit(60));
    b.commit(id, secs(1)).unwrap();
    assert_eq!(
        state(&b, id),
        (
            ReservationState::Committed,
            ProvisionState::Released,
            LifeState::Created
        )
    );
    let r = b.reservation(id).unwrap();
    assert_eq!(
        (r.committed.unwrap().rate, r.pending, r.hold_expires),
        (mbit(60), None, None)
    );
    assert_eq!(b.stats().admitted, 1);
}

#[test]
fn hold_times_out_after_the_default_120_s() {
    let mut b = book();
    let id = b.reserve(req(60, 0, 1000), secs(0)).unwrap();
    assert_eq!(b.poll_timeout(), Some(secs(120)));
    b.handle_timeout(secs(119));
    assert_eq!(state(&b, id).0, ReservationState::Held);
    b.handle_timeout(secs(120));
    assert_eq!(
        state(&b, id),
        (
            ReservationState::TimedOut,
            ProvisionState::Released,
            LifeState::Terminated
        )
    );
    assert_eq!(events(&mut b), vec![Event::HoldTimedOut { id, version: 0 }]);
    assert_eq!(b.usage_at("link", secs(500)).unwrap(), Bandwidth::ZERO);
    assert_eq!(b.poll_timeout(), None);
    assert!(matches!(
        b.commit(id, secs(121)),
        Err(ReserveError::NotAlive { .. })
    ));
    assert_eq!(b.stats().timed_out, 1);
}

#[test]
fn a_late_commit_sees_the_timeout_first() {
    let mut b = book_with(BookConfig {
        hold_time: Duration::from_secs(5),
        ..BookConfig::default()
    });
    let id = b.reserve(req(60, 0, 1000), secs(0)).unwrap();
    // The driver never called handle_timeout; the commit at 5 s still fails.
    let e = b.commit(id, secs(5)).unwrap_err();
    assert_eq!(
        e,
        ReserveError::NotAlive {
            id,
            state: ReservationState::TimedOut,
            life: LifeState::Terminated
        }
    );
}

#[test]
fn abort_frees_a_first_version() {
    let mut b = book();
    let id = b.reserve(req(60, 0, 100), secs(0)).unwrap();
    b.abort(id, secs(1)).unwrap();
    assert_eq!(state(&b, id).0, ReservationState::Aborted);
    assert_eq!(b.usage_at("link", secs(1)).unwrap(), Bandwidth::ZERO);
    assert!(matches!(
        b.abort(id, secs(1)),
        Err(ReserveError::NotAlive { .. })
    ));
    assert_eq!(b.reservations().count(), 0);
}

#[test]
fn illegal_transitions_are_typed() {
    let mut b = book();
    let id = b.reserve(req(60, 0, 100), secs(0)).unwrap();
    // Modify needs a committed version.
    let e = b
        .modify(
            id,
            Modify {
                rate: Some(mbit(10)),
                end: None,
            },
            secs(0),
        )
        .unwrap_err();
    assert_eq!(
        e,
        ReserveError::Transition {
            id,
            source: TransitionError::Reservation {
                from: ReservationState::Held,
                input: ReservationInput::Modify
            }
        }
    );
    b.commit(id, secs(0)).unwrap();
    for e in [
        b.commit(id, secs(0)).unwrap_err(),
        b.abort(id, secs(0)).unwrap_err(),
    ] {
        assert!(matches!(
            e,
            ReserveError::Transition {
                source: TransitionError::Reservation {
                    from: ReservationState::Committed,
                    ..
                },
                ..
            }
        ));
    }
    assert_eq!(
        b.release(id, secs(0)).unwrap_err(),
        ReserveError::Transition {
            id,
            source: TransitionError::Provision {
                from: ProvisionState::Released,
                input: ProvisionInput::Release
            }
        }
    );
}

#[test]
fn bad_requests_are_refused_and_change_nothing() {
    let mut b = book_with(BookConfig {
        max_reservations: 1,
        ..BookConfig::default()
    });
    let now = secs(10);
    assert_eq!(b.reserve(req(0, 10, 20), now), Err(ReserveError::ZeroRate));
    assert_eq!(
        b.reserve(req(1, 0, 10), now),
        Err(ReserveError::EndInPast { end: secs(10), now })
    );
    assert_eq!(
        b.reserve(req(1, 30, 20), now),
        Err(ReserveError::EndBeforeStart {
            start: secs(30),
            end: secs(20)
        })
    );
    let mut other = req(1, 10, 20);
    other.resource = "disk".into();
    assert_eq!(
        b.reserve(other, now),
        Err(ReserveError::UnknownResource("disk".into()))
    );
    let e = b.reserve(req(101, 10, 20), now).unwrap_err();
    let ReserveError::Overbooked { resource, source } = e else {
        panic!("{e}")
    };
    assert_eq!(
        (resource.as_str(), source.free, source.capacity),
        ("link", mbit(100), mbit(100))
    );
    assert_eq!(b.reservations().count(), 0);
    assert_eq!(b.stats().refused_capacity, 1);
    b.reserve(req(1, 10, 20), now).unwrap();
    assert_eq!(
        b.reserve(req(1, 10, 20), now),
        Err(ReserveError::BookFull(1))
    );
    assert_eq!(
        b.commit(ReservationId(99), now),
        Err(ReserveError::UnknownReservation(ReservationId(99)))
    );
    assert_eq!(
        b.add_resource("link", mbit(1)),
        Err(ReserveError::DuplicateResource("link".into()))
    );
    assert_eq!(
        b.max_free("link", secs(5), secs(5)),
        Err(ReserveError::EndBeforeStart {
            start: secs(5),
            end: secs(5)
        })
    );
    // Ids are not spent on refusals.
    assert!(b.reservation(ReservationId(1)).is_some());
}

#[test]
fn immediate_and_advance_reservations() {
    let mut b = book();
    let now = secs(50);
    let imm = b.reserve(req(30, 0, 100), now).unwrap();
    assert_eq!(b.reservation(imm).unwrap().pending.unwrap().start, now);
    let adv = b.reserve(req(70, 200, 300), now).unwrap();
    b.commit(imm, now).unwrap();
    b.commit(adv, now).unwrap();
    assert_eq!(b.usage_at("link", secs(150)).unwrap(), Bandwidth::ZERO);
    assert_eq!(b.usage_at("link", secs(250)).unwrap(), mbit(70));
    assert_eq!(b.max_free("link", secs(60), secs(250)).unwrap(), mbit(30));
    assert_eq!(
        b.earliest_fit("link", mbit(80), Duration::from_secs(100), now)
            .unwrap(),
        Interval::new(secs(100), secs(200))
    );
    // Wakes: imm ends at 100, adv starts at 200 and ends at 300.
    assert_eq!(b.poll_timeout(), Some(secs(100)));
    b.handle_timeout(secs(100));
    assert_eq!(state(&b, imm).2, LifeState::PassedEndTime);
    assert_eq!(events(&mut b), vec![Event::PassedEndTime { id: imm }]);
    assert_eq!(b.poll_timeout(), Some(secs(200)));
    b.handle_timeout(secs(200));
    assert_eq!(b.poll_timeout(), Some(secs(300)));
    b.handle_timeout(secs(300));
    assert_eq!(b.poll_timeout(), None);
    assert_eq!(b.reservations().count(), 0);
}

#[test]
fn modify_holds_the_larger_of_both_versions_until_committed() {
    let mut b = book();
    let id = b.reserve(req(40, 0, 100), secs(0)).unwrap();
    b.commit(id, secs(0)).unwrap();
    let other = b.reserve(req(30, 0, 100), secs(0)).unwrap();
    b.commit(other, secs(0)).unwrap();
    // 40 → 70 fits beside 30 (its own 40 not counted) …
    let v = b
        .modify(
            id,
            Modify {
                rate: Some(mbit(70)),
                end: Some(secs(150)),
            },
            secs(10),
        )
        .unwrap();
    assert_eq!(v, 1);
    let r = b.reservation(id).unwrap();
    assert_eq!(
        (r.state, r.committed.unwrap().rate, r.pending.unwrap().rate),
        (ReservationState::Held, mbit(40), mbit(70))
    );
    assert_eq!(b.usage_at("link", secs(10)).unwrap(), mbit(100));
    assert_eq!(b.usage_at("link", secs(120)).unwrap(), mbit(70));
    b.commit(id, secs(11)).unwrap();
    let r = b.reservation(id).unwrap();
    assert_eq!(
        (r.committed.unwrap().number, r.committed.unwrap().end),
        (1, secs(150))
    );
    // … 70 → 71 does not; the old version stays in force.
    let e = b
        .modify(
            id,
            Modify {
                rate: Some(mbit(71)),
                end: None,
            },
            secs(12),
        )
        .unwrap_err();
    assert!(matches!(e, ReserveError::Overbooked { .. }));
    assert_eq!(state(&b, id).0, ReservationState::Committed);
    assert_eq!(b.usage_at("link", secs(12)).unwrap(), mbit(100));
    assert_eq!(
        b.modify(
            id,
            Modify {
                rate: Some(mbit(70)),
                end: None
            },
            secs(12)
        ),
        Err(ReserveError::EmptyModification)
    );
}

#[test]
fn an_aborted_or_expired_modification_leaves_the_old_version() {
    let mut b = book();
    let id = b.reserve(req(40, 0, 1000), secs(0)).unwrap();
    b.commit(id, secs(0)).unwrap();
    b.modify(
        id,
        Modify {
            rate: Some(mbit(10)),
            end: None,
        },
        secs(1),
    )
    .unwrap();
    b.abort(id, secs(2)).unwrap();
    let r = b.reservation(id).unwrap();
    assert_eq!(
        (r.state, r.committed.unwrap().rate, r.pending),
        (ReservationState::Committed, mbit(40), None)
    );
    b.modify(
        id,
        Modify {
            rate: None,
            end: Some(secs(2000)),
        },
        secs(3),
    )
    .unwrap();
    b.handle_timeout(secs(123));
    let r = b.reservation(id).unwrap();
    assert_eq!(
        (r.state, r.committed.unwrap().end, r.life),
        (ReservationState::Committed, secs(1000), LifeState::Created)
    );
    assert_eq!(
        events(&mut b),
        vec![Event::HoldTimedOut { id, version: 2 }],
        "version 1 was aborted, never reused"
    );
    assert_eq!(b.usage_at("link", secs(1500)).unwrap(), Bandwidth::ZERO);
}

#[test]
fn provisioning_needs_a_commit_and_toggles() {
    let mut b = book();
    let id = b.reserve(req(10, 0, 100), secs(0)).unwrap();
    assert_eq!(
        b.provision(id, secs(0)),
        Err(ReserveError::NotCommitted(id))
    );
    b.commit(id, secs(0)).unwrap();
    b.provision(id, secs(0)).unwrap();
    assert_eq!(state(&b, id).1, ProvisionState::Provisioned);
    assert!(matches!(
        b.provision(id, secs(0)),
        Err(ReserveError::Transition { .. })
    ));
    b.release(id, secs(1)).unwrap();
    b.provision(id, secs(2)).unwrap();
    b.terminate(id, secs(3)).unwrap();
    assert_eq!(
        state(&b, id),
        (
            ReservationState::Committed,
            ProvisionState::Released,
            LifeState::Terminated
        )
    );
    assert!(matches!(
        b.provision(id, secs(4)),
        Err(ReserveError::NotAlive { .. })
    ));
}

#[test]
fn terminate_and_fail_free_the_capacity_once() {
    let mut b = book();
    let a = b.reserve(req(50, 0, 100), secs(0)).unwrap();
    b.commit(a, secs(0)).unwrap();
    let held = b.reserve(req(50, 0, 100), secs(0)).unwrap();
    assert!(b.reserve(req(1, 0, 100), secs(0)).is_err());
    b.terminate(a, secs(1)).unwrap();
    b.terminate(held, secs(1)).unwrap();
    assert_eq!(
        state(&b, held),
        (
            ReservationState::Aborted,
            ProvisionState::Released,
            LifeState::Terminated
        )
    );
    assert_eq!(b.usage_at("link", secs(1)).unwrap(), Bandwidth::ZERO);
    assert_eq!(
        b.terminate(a, secs(2)),
        Err(ReserveError::Transition {
            id: a,
            source: TransitionError::Life {
                from: LifeState::Terminated,
                input: LifeInput::Terminate
            }
        })
    );
    let f = b.reserve(req(100, 0, 100), secs(2)).unwrap();
    b.commit(f, secs(2)).unwrap();
    b.fail(f, secs(3)).unwrap();
    assert_eq!(state(&b, f).2, LifeState::Failed);
    assert_eq!(b.usage_at("link", secs(3)).unwrap(), Bandwidth::ZERO);
    assert!(b.fail(f, secs(3)).is_err());
    b.terminate(f, secs(4)).unwrap();
    assert_eq!(state(&b, f).2, LifeState::Terminated);
    // Past its end, a reservation can still be terminated (once).
    let e = b.reserve(req(10, 0, 10), secs(4)).unwrap();
    b.commit(e, secs(4)).unwrap();
    b.handle_timeout(secs(10));
    assert_eq!(state(&b, e).2, LifeState::PassedEndTime);
    b.terminate(e, secs(11)).unwrap();
    assert_eq!(state(&b, e).2, LifeState::Terminated);
}

#[test]
fn background_share_follows_foreground_as_in_seed_fig5() {
    let mut b = Book::new(BookConfig::default());
    b.add_resource("premium", mbit(45)).unwrap();
    let mut bulk = req(1, 0, 185);
    bulk.resource = "premium".into();
    bulk.class = Class::Background;
    let bg = b.reserve(bulk, secs(0)).unwrap();
    assert_eq!(b.share(bg), None);
    b.commit(bg, secs(0)).unwrap();
    let share = |kbit| Event::Share {
        id: bg,
        resource: "premium".into(),
        share: Bandwidth::from_kbps(kbit),
    };
    assert_eq!(events(&mut b), vec![share(40_500)]);
    let mut fg = req(36, 25, 48);
    fg.resource = "premium".into();
    let f = b.reserve(fg, secs(25)).unwrap();
    assert!(events(&mut b).is_empty(), "a hold changes no share");
    b.commit(f, secs(25)).unwrap();
    assert_eq!(events(&mut b), vec![share(8_100)]);
    assert_eq!(b.share(bg), Some(Bandwidth::from_kbps(8_100)));
    assert_eq!(b.poll_timeout(), Some(secs(48)));
    b.handle_timeout(secs(48));
    assert_eq!(
        events(&mut b),
        vec![Event::PassedEndTime { id: f }, share(40_500)]
    );
    b.terminate(bg, secs(185)).unwrap_or_default();
    let ev = events(&mut b);
    assert!(ev.contains(&share(0)), "{ev:?}");
}

#[test]
fn policy_is_checked_before_capacity_and_counts_holds() {
    let mut config = BookConfig::default();
    config.policy.user_default = Limits {
        total: Some(mbit(50)),
        ..Limits::default()
    };
    let mut b = book_with(config);
    b.reserve(req(30, 0, 100), secs(0)).unwrap();
    let e = b.reserve(req(30, 50, 150), secs(0)).unwrap_err();
    let ReserveError::Policy(p) = e else {
        panic!("{e}")
    };
    assert_eq!(p.rule.kind, LimitKind::Total);
    assert_eq!(b.stats().refused_policy, 1);
    // Another user is not counted against alice.
    let mut bob = req(30, 50, 150);
    bob.owner = Owner::new("bob", "lab");
    b.reserve(bob, secs(0)).unwrap();
    // Nor is alice's reservation after its end.
    b.reserve(req(30, 100, 150), secs(0)).unwrap();
}

#[test]
fn restore_puts_back_holds_with_their_timers() {
    let mut a = book();
    let held = a.reserve(req(20, 0, 1000), secs(0)).unwrap();
    let done = a.reserve(req(30, 0, 1000), secs(0)).unwrap();
    a.commit(done, secs(1)).unwrap();
    let mut b = book();
    for r in a.reservations() {
        b.restore(r.clone()).unwrap();
    }
    assert_eq!(b.usage_at("link", secs(5)).unwrap(), mbit(50));
    assert_eq!(b.poll_timeout(), Some(secs(120)));
    b.handle_timeout(secs(120));
    assert_eq!(
        b.reservation(held).unwrap().state,
        ReservationState::TimedOut
    );
    assert_eq!(
        b.reservation(done).unwrap().state,
        ReservationState::Committed
    );
    assert_eq!(
        b.reserve(req(1, 0, 500), secs(121)).unwrap(),
        ReservationId(3)
    );
    let mut c = Book::new(BookConfig::default());
    c.add_resource("link", mbit(10)).unwrap();
    let r = b.reservation(done).unwrap().clone();
    assert!(matches!(
        c.restore(r.clone()),
        Err(ReserveError::Overbooked { .. })
    ));
    let mut bad = r;
    bad.id = ReservationId(50);
    if let Some(v) = bad.committed.as_mut() {
        v.end = v.start;
    }
    assert!(matches!(
        c.restore(bad),
        Err(ReserveError::EndBeforeStart { .. })
    ));
    assert_eq!(c.reservations().count(), 0);
}

#[test]
fn the_event_queue_is_bounded() {
    let mut b = Book::new(BookConfig {
        hold_time: Duration::from_secs(1),
        ..BookConfig::default()
    });
    b.add_resource("link", Bandwidth::from_bps(u64::MAX))
        .unwrap();
    for _ in 0..MAX_EVENTS + 10 {
        b.reserve(req(1, 0, 100), secs(0)).unwrap();
    }
    b.handle_timeout(secs(1));
    assert_eq!(events(&mut b).len(), MAX_EVENTS);
    assert_eq!(b.stats().events_dropped, 10);
}

#[test]
fn two_background_holders_share_in_proportion_to_their_minimums() {
    let mut b = Book::new(BookConfig {
        background_fraction: 1.0,
        ..BookConfig::default()
    });
    b.add_resource("premium", mbit(100)).unwrap();
    let mut ids = Vec::new();
    for min in [10, 30] {
        let mut r = req(min, 0, 1000);
        r.resource = "premium".into();
        r.class = Class::Background;
        let id = b.reserve(r, secs(0)).unwrap();
        b.commit(id, secs(0)).unwrap();
        ids.push(id);
    }
    assert_eq!(
        (b.share(ids[0]), b.share(ids[1])),
        (Some(mbit(25)), Some(mbit(75)))
    );
    // An advance foreground reservation changes the shares when it starts.
    let mut fg = req(60, 100, 200);
    fg.resource = "premium".into();
    let f = b.reserve(fg, secs(0)).unwrap();
    b.commit(f, secs(0)).unwrap();
    assert_eq!(b.share(ids[0]), Some(mbit(25)));
    // The minimums (40) take everything foreground leaves (40).
    assert!(b
        .reserve(
            ReserveRequest {
                resource: "premium".into(),
                ..req(1, 150, 160)
            },
            secs(0)
        )
        .is_err());
    while let Some(t) = b.poll_timeout().filter(|t| *t <= secs(100)) {
        b.handle_timeout(t);
    }
    assert_eq!(
        (b.share(ids[0]), b.share(ids[1])),
        (Some(mbit(10)), Some(mbit(30)))
    );
    b.handle_timeout(secs(200));
    assert_eq!(
        (b.share(ids[0]), b.share(ids[1])),
        (Some(mbit(25)), Some(mbit(75)))
    );
}
