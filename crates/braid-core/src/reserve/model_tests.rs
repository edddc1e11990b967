//! Property tests of the book against a plain model: the rate reserved on
//! each resource at each instant, summed by brute force from the
//! reservations the book reports, never exceeds the capacity, equals what
//! the slot table says, and every admission decision is the model's.

use proptest::prelude::*;

use crate::id::ReservationId;
use crate::reserve::{
    Book, BookConfig, Class, Modify, Owner, Reservation, ReserveError, ReserveRequest,
};
use crate::time::{Duration, Instant};
use crate::units::Bandwidth;

const CAPACITY: u64 = 100;
const RESOURCES: [&str; 2] = ["a", "b"];
/// Every start and end the generator makes is an integer second below this.
const HORIZON: u64 = 80;

fn secs(s: u64) -> Instant {
    Instant::from_nanos(s * 1_000_000_000)
}
fn bps(b: u64) -> Bandwidth {
    Bandwidth::from_bps(b)
}

#[derive(Debug, Clone)]
enum Op {
    Create {
        res: usize,
        rate: u64,
        start: u64,
        len: u64,
        background: bool,
    },
    Modify {
        pick: usize,
        rate: Option<u64>,
        end: Option<u64>,
    },
    Commit(usize),
    Abort(usize),
    Terminate(usize),
    Provision(usize),
    Fail(usize),
    Advance(u64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..RESOURCES.len(), 1..70u64, 0..30u64, 1..25u64, any::<bool>())
            .prop_map(|(res, rate, start, len, background)| Op::Create { res, rate, start, len, background }),
        2 => (any::<usize>(), proptest::option::of(1..70u64), proptest::option::of(1..HORIZON))
            .prop_map(|(pick, rate, end)| Op::Modify { pick, rate, end }),
        3 => any::<usize>().prop_map(Op::Commit),
        1 => any::<usize>().prop_map(Op::Abort),
        1 => any::<usize>().prop_map(Op::Terminate),
        1 => any::<usize>().prop_map(Op::Provision),
        1 => any::<usize>().prop_map(Op::Fail),
        2 => (0..8u64).prop_map(Op::Advance),
    ]
}

/// The model: rate reserved by `r` at `t`, from its versions alone.
fn model_rate(r: &Reservation, t: Instant) -> u64 {
    if !r.life.is_created() {
        return 0;
    }
    let at = |v: Option<crate::reserve::Version>| {
        v.filter(|v| v.is_active(t)).map_or(0, |v| v.rate.bps())
    };
    at(r.committed).max(at(r.pending))
}

fn model_sum(book: &Book, res: &str, t: Instant, except: Option<ReservationId>) -> u64 {
    book.reservations()
        .filter(|r| r.resource == res && Some(r.id) != except)
        .map(|r| model_rate(r, t))
        .sum()
}

/// Whether `rate` over `[start, end)` fits beside everything but `except`,
/// by brute force over every integer instant (all boundaries are integer).
fn model_fits(
    book: &Book,
    res: &str,
    start: u64,
    end: u64,
    rate: impl Fn(u64) -> u64,
    except: Option<ReservationId>,
) -> bool {
    (start..end).all(|t| model_sum(book, res, secs(t), except) + rate(t) <= CAPACITY)
}

fn check_invariants(book: &Book) -> Result<(), TestCaseError> {
    for res in RESOURCES {
        for t in 0..=HORIZON + 60 {
            let sum = model_sum(book, res, secs(t), None);
            prop_assert!(sum <= CAPACITY, "{res} over-admitted at {t}: {sum}");
            prop_assert_eq!(
                book.usage_at(res, secs(t)).unwrap().bps(),
                sum,
                "table and records disagree on {} at {}",
                res,
                t
            );
        }
    }
    // Background shares plus active foreground never exceed the capacity.
    for res in RESOURCES {
        let mut fg = 0u64;
        let mut shares = 0u64;
        for r in book.reservations().filter(|r| r.resource == res) {
            match r.class {
                Class::Foreground => {
                    fg += r
                        .committed
                        .filter(|v| v.is_active(book.now()))
                        .map_or(0, |v| v.rate.bps())
                }
                Class::Background => shares += book.share(r.id).map_or(0, Bandwidth::bps),
            }
        }
        prop_assert!(
            fg + shares <= CAPACITY,
            "{res}: foreground {fg} + shares {shares}"
        );
    }
    Ok(())
}

fn pick(ids: &[ReservationId], i: usize) -> Option<ReservationId> {
    (!ids.is_empty()).then(|| ids[i % ids.len()])
}

proptest! {
    #[test]
    fn never_over_admitted(ops in proptest::collection::vec(op(), 1..60)) {
        let mut book = Book::new(BookConfig { hold_time: Duration::from_secs(5), ..BookConfig::default() });
        for res in RESOURCES {
            book.add_resource(res, bps(CAPACITY)).unwrap();
        }
        let mut now = 0u64;
        let mut ids: Vec<ReservationId> = Vec::new();
        for op in ops {
            let t = secs(now);
            match op {
                Op::Create { res, rate, start, len, background } => {
                    // Timers due by now act first, as the book does.
                    book.handle_timeout(t);
                    let req = ReserveRequest {
                        owner: Owner::new("u", "d"),
                        resource: RESOURCES[res].into(),
                        rate: bps(rate),
                        start: secs(start),
                        end: secs(start + len),
                        class: if background { Class::Background } else { Class::Foreground },
                    };
                    let from = start.max(now);
                    let fits = start + len > now && model_fits(&book, RESOURCES[res], from, start + len, |_| rate, None);
                    match book.reserve(req, t) {
                        Ok(id) => { prop_assert!(fits, "admitted what the model refuses"); ids.push(id); }
                        Err(ReserveError::Overbooked { .. }) => prop_assert!(!fits, "refused what the model admits"),
                        Err(ReserveError::EndInPast { .. }) => prop_assert!(start + len <= now),
                        Err(e) => prop_assert!(false, "unexpected {e}"),
                    }
                }
                Op::Modify { pick: p, rate, end } => {
                    let Some(id) = pick(&ids, p) else { continue };
                    book.handle_timeout(t);
                    let before = book.reservation(id).cloned();
                    let r = book.modify(id, Modify { rate: rate.map(bps), end: end.map(secs) }, t);
                    if let (Some(old), Some(c)) = (before.as_ref(), before.as_ref().and_then(|b| b.committed)) {
                        let new_rate = rate.unwrap_or(c.rate.bps());
                        let new_end = end.map_or(c.end, secs);
                        let footprint = |x: u64| {
                            let tx = secs(x);
                            let o = if c.is_active(tx) { c.rate.bps() } else { 0 };
                            let n = if c.start <= tx && tx < new_end { new_rate } else { 0 };
                            o.max(n)
                        };
                        let hi = (new_end.as_nanos() / 1_000_000_000).max(c.end.as_nanos() / 1_000_000_000);
                        let lo = c.start.as_nanos() / 1_000_000_000;
                        let fits = model_fits(&book, &old.resource, lo, hi, footprint, Some(id));
                        match &r {
                            Ok(_) => prop_assert!(fits, "modification admitted beyond the model"),
                            Err(ReserveError::Overbooked { .. }) => prop_assert!(!fits, "modification refused though it fits"),
                            Err(_) => {}
                        }
                    }
                }
                Op::Commit(p) => { if let Some(id) = pick(&ids, p) { let _ = book.commit(id, t); } }
                Op::Abort(p) => { if let Some(id) = pick(&ids, p) { let _ = book.abort(id, t); } }
                Op::Terminate(p) => { if let Some(id) = pick(&ids, p) { let _ = book.terminate(id, t); } }
                Op::Provision(p) => { if let Some(id) = pick(&ids, p) { let _ = book.provision(id, t); } }
                Op::Fail(p) => { if let Some(id) = pick(&ids, p) { let _ = book.fail(id, t); } }
                Op::Advance(by) => {
                    now += by;
                    // Wake at every timer on the way, as a driver would.
                    while let Some(w) = book.poll_timeout().filter(|w| *w <= secs(now)) {
                        book.handle_timeout(w);
                    }
                    book.handle_timeout(secs(now));
                }
            }
            while book.poll_event().is_some() {}
            check_invariants(&book)?;
            // No hold outlives its deadline once the book has seen the time.
            prop_assert_eq!(book.now(), secs(now));
            // The book never sleeps through a timer: poll_timeout is at or
            // before every hold deadline, future start and end.
            let wake = book.poll_timeout().unwrap_or(Instant::MAX);
            for r in book.reservations() {
                if let Some(h) = r.hold_expires { prop_assert!(h > secs(now)); prop_assert!(wake <= h); }
                if let Some(c) = r.committed {
                    if c.start > secs(now) { prop_assert!(wake <= c.start); }
                    if r.pending.is_none() { prop_assert!(wake <= c.end, "{:?} sleeps through {:?}", wake, c.end); }
                }
            }
        }
    }
}

proptest! {
    /// Enquiries against brute force: the largest free rate over an
    /// interval, and the earliest start at which a rate fits for a length.
    #[test]
    fn enquiries_match_brute_force(
        slots in proptest::collection::vec((0..40u64, 1..20u64, 1..60u64), 0..12),
        (a, len) in (0..50u64, 1..20u64),
        rate in 1..=CAPACITY + 5,
    ) {
        let mut table = crate::reserve::SlotTable::new(bps(CAPACITY));
        let mut admitted: Vec<(u64, u64, u64)> = Vec::new();
        for (i, &(s, l, r)) in slots.iter().enumerate() {
            let iv = crate::reserve::Interval::new(secs(s), secs(s + l)).unwrap();
            if table.admit(ReservationId(i as u64), crate::reserve::Footprint::single(iv, bps(r))).is_ok() {
                admitted.push((s, s + l, r));
            }
        }
        let level = |t: u64| -> u64 { admitted.iter().filter(|&&(s, e, _)| s <= t && t < e).map(|&(_, _, r)| r).sum() };
        prop_assert!((0..70).all(|t| level(t) <= CAPACITY));
        let peak = (a..a + len).map(level).max().unwrap_or(0);
        let iv = crate::reserve::Interval::new(secs(a), secs(a + len)).unwrap();
        prop_assert_eq!(table.max_free(iv).bps(), CAPACITY - peak);
        let fits_at = |s: u64| (s..s + len).all(|t| level(t) + rate <= CAPACITY);
        let found = table.earliest_fit(bps(rate), Duration::from_secs(len), secs(a));
        if rate > CAPACITY {
            prop_assert_eq!(found, None);
        } else {
            let want = (a..).find(|&s| fits_at(s)).expect("free beyond the last slot");
            prop_assert_eq!(found, crate::reserve::Interval::new(secs(want), secs(want + len)));
        }
    }
}
