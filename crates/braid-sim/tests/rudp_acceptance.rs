//! Issue 3 acceptance on virtual time: reliable data crosses a path with
//! 5 % loss, duplication and reordering intact (every byte compared, and a
//! running digest of sent vs delivered bytes); unreliable and discardable
//! messages with deadlines are never delivered late or twice.
//!
//! The 100 MB run is `#[ignore]`d (slow in debug builds):
//! `cargo test --release -p braid-sim --test rudp_acceptance -- --ignored`.

use braid_core::transport::{Config, Connection, Reliability};
use braid_core::{Bandwidth, Duration, Instant};
use braid_sim::rudp::app::{BulkSender, Receiver, SideTraffic, BULK_STREAM, SIDE_STREAM};
use braid_sim::rudp::{add_links, add_pair, RudpNode};
use braid_sim::{Capacity, LinkConfig, Simulation};

fn impaired(name: &str, mbps: u64, delay_ms: u64) -> LinkConfig {
    let mut l = LinkConfig::new(
        name,
        Capacity::Constant(Bandwidth::from_mbps(mbps)),
        Duration::from_millis(delay_ms),
    );
    l.loss = 0.05;
    l.duplicate = 0.05;
    l.reorder = 0.05;
    l.reorder_delay = Duration::from_millis(8);
    l
}

struct Outcome {
    sent_digest: u64,
    got_digest: u64,
    sent_bytes: u64,
    got_bytes: u64,
    finished: Option<Instant>,
    violations: Vec<String>,
    violation_count: u64,
    side_delivered: u64,
    dup_links: u64,
    reordered: u64,
    lost: u64,
    late: u64,
    max_lateness: Duration,
    /// Side messages the sender gave up on (deadline too close to send)
    /// and the receiver skipped (deadline passed before delivery).
    side_expired_at_sender: u64,
    side_expired_at_receiver: u64,
}

fn transfer(seed: u64, bytes: u64, side: Option<SideTraffic>, secs: u64) -> Outcome {
    transfer_over(seed, bytes, side, secs, (10, 10))
}

/// [`transfer`] over a path whose one-way delays (forward, back) are
/// `delays_ms`.
fn transfer_over(
    seed: u64,
    bytes: u64,
    side: Option<SideTraffic>,
    secs: u64,
    delays_ms: (u64, u64),
) -> Outcome {
    let mut sim = Simulation::empty(
        "rudp-acceptance",
        seed,
        Duration::from_secs(secs),
        Duration::ZERO,
    );
    let fwd = add_links(&mut sim, vec![impaired("fwd", 50, delays_ms.0)]);
    let back = add_links(&mut sim, vec![impaired("back", 50, delays_ms.1)]);
    let mut send = BulkSender::new(seed, bytes, 16 * 1024);
    if let Some(s) = side {
        send = send.with_side(s);
    }
    let pair = add_pair(
        &mut sim,
        "bulk",
        fwd,
        back,
        Config::default(),
        Config::default(),
        send,
        Receiver::new(seed, true, false).with_deadline_slack(Duration::MAX),
    )
    .unwrap();
    sim.run_until(sim.end());
    let sender = sim.node::<RudpNode<BulkSender>>(pair.sender).unwrap();
    let receiver = sim.node::<RudpNode<Receiver>>(pair.receiver).unwrap();
    let (s, r) = (sender.app(), receiver.app());
    let (_, got_bytes, got_digest) = r.stream_totals(BULK_STREAM);
    let fs = sim.link_stats(braid_sim::LinkId(0)).unwrap();
    // Non-reliable messages expired by one side (only side traffic has
    // deadlines).
    let expired = |c: Option<&Connection>| {
        c.map_or(0, |c| {
            let k = c.stats().classes;
            k[1].expired + k[2].expired
        })
    };
    Outcome {
        sent_digest: s.digest().0,
        got_digest: got_digest.0,
        sent_bytes: s.queued_total(),
        got_bytes,
        finished: s.finished_at(),
        violations: r.violations().to_vec(),
        violation_count: r.violation_count(),
        side_delivered: r.stream_totals(SIDE_STREAM).0,
        dup_links: fs.duplicates,
        reordered: fs.reordered,
        lost: fs.random_losses,
        late: r.lateness().0,
        max_lateness: r.lateness().1,
        side_expired_at_sender: expired(sender.connection()),
        side_expired_at_receiver: expired(receiver.connection()),
    }
}

fn check(o: &Outcome, bytes: u64) {
    assert_eq!(o.sent_bytes, bytes);
    assert_eq!(o.got_bytes, bytes, "not everything arrived");
    assert_eq!(o.got_digest, o.sent_digest, "digest differs");
    assert!(
        o.finished.is_some(),
        "sender never saw everything acknowledged"
    );
    assert_eq!(o.violation_count, 0, "{:?}", o.violations);
    // The path really impaired the transfer.
    assert!(o.lost > 0 && o.dup_links > 0 && o.reordered > 0);
}

#[test]
fn rudp_reliable_transfer_survives_loss_duplication_and_reordering() {
    let bytes = 2 << 20;
    let o = transfer(1, bytes, None, 120);
    check(&o, bytes);
}

#[test]
fn rudp_unreliable_and_expired_messages_are_never_late_or_twice() {
    let bytes = 1 << 20;
    for (seed, class) in [(2, Reliability::Unreliable), (3, Reliability::Discardable)] {
        let side = SideTraffic {
            period: Duration::from_millis(20),
            size: 1000,
            ttl: Duration::from_millis(60),
            reliability: class,
            count: 500,
        };
        let o = transfer(seed, bytes, Some(side), 120);
        // Nothing twice, out of order or corrupt (checked by the receiver).
        check(&o, bytes);
        // Never late: the sender takes the one-way transit off the TTL it
        // writes (see `rudp_expired_messages_are_never_delivered_late`).
        assert_eq!(o.late, 0, "worst {:?}", o.max_lateness);
        // Most side messages arrive, not all (5 % loss, never resent).
        assert!(o.side_delivered > 250, "{}", o.side_delivered);
        assert!(o.side_delivered < 500, "{}", o.side_delivered);
    }
}

/// Side traffic heavier than the path carries beside the bulk transfer
/// (3000-byte unreliable messages every 5 ms, 40 ms to live): most expire
/// in the send queue, and many that are sent leave with little of their
/// deadline left. The receiver only learns the time to live when the
/// fragment was sent, so the sender takes a conservative one-way transit
/// (one RTT) off it; no message may then be handed over after the deadline
/// the sender set, measured on the simulator's own clock. Before that rule
/// 79 messages were delivered late, by up to 10.4 ms.
fn deadline_scenario(delays_ms: (u64, u64)) -> Outcome {
    let side = SideTraffic {
        period: Duration::from_millis(5),
        size: 3000,
        ttl: Duration::from_millis(40),
        reliability: Reliability::Unreliable,
        count: 2000,
    };
    let o = transfer_over(2, 1 << 20, Some(side), 120, delays_ms);
    println!(
        "path {delays_ms:?} ms: {} delivered, {} late (worst {:?}); \
         expired at the sender {}, at the receiver {}",
        o.side_delivered,
        o.late,
        o.max_lateness,
        o.side_expired_at_sender,
        o.side_expired_at_receiver
    );
    o
}

#[test]
fn rudp_expired_messages_are_never_delivered_late() {
    let o = deadline_scenario((10, 10));
    assert_eq!(o.late, 0, "{} late, worst {:?}", o.late, o.max_lateness);
    // The scenario does test deadlines: both sides expired messages, and
    // some still arrived in time.
    assert!(o.side_expired_at_sender > 0 && o.side_expired_at_receiver > 0);
    assert!(o.side_delivered > 0);
}

/// The same with 18 ms forward and 2 ms back: the forward transit is 90 %
/// of the RTT, so an estimate of half the RTT (plus variance) would let
/// messages through late; one whole RTT does not.
#[test]
fn rudp_deadlines_hold_on_an_asymmetric_path() {
    let o = deadline_scenario((18, 2));
    assert_eq!(o.late, 0, "{} late, worst {:?}", o.late, o.max_lateness);
    assert!(o.side_delivered > 0);
}

#[test]
fn rudp_same_seed_same_run() {
    let a = transfer(4, 256 << 10, None, 60);
    let b = transfer(4, 256 << 10, None, 60);
    assert_eq!(a.finished, b.finished);
    assert_eq!(a.lost, b.lost);
}

/// The acceptance line as written: 100 MB. Run with
/// `cargo test --release -p braid-sim --test rudp_acceptance -- --ignored`.
#[test]
#[ignore = "100 MB: slow in debug builds; run in release (see module docs)"]
fn rudp_reliable_100_mb_arrives_intact() {
    let bytes = 100_000_000;
    let o = transfer(5, bytes, None, 3600);
    check(&o, bytes);
    println!(
        "100 MB intact: finished at {:.1} s virtual, link lost {} dup {} reordered {}",
        o.finished.unwrap().as_secs_f64(),
        o.lost,
        o.dup_links,
        o.reordered
    );
}
