//! Seed 003's multipath pipe on the simulator: `braid_core::bulk`'s
//! scheduler over two simulated connections whose one-way delays differ
//! eightfold (10 ms and 80 ms; 20 and 10 Mbit/s), and the receiver's
//! reorder window. Virtual time; deterministic.

use braid_core::bulk::Mode;
use braid_core::{Bandwidth, Duration, Instant};
use braid_sim::bulk::{BulkConfig, BulkReceiver, BulkSender};
use braid_sim::{Capacity, LinkConfig, Simulation};

/// Bytes to move: about 13 s at the links' 30 Mbit/s.
const TOTAL: u64 = 48 << 20;
/// The links: (rate Mbit/s, one-way delay ms).
const LINKS: [(u64, u64); 2] = [(20, 10), (10, 80)];

struct Outcome {
    seconds: f64,
    mbps: f64,
    copies: u64,
    duplicates: u64,
}

fn run(mode: Mode) -> Outcome {
    let mut sim = Simulation::empty("bulk", 3, Duration::from_secs(120), Duration::ZERO);
    let mut fwd = Vec::new();
    let mut back = Vec::new();
    let mut windows = Vec::new();
    for (i, &(mbps, ms)) in LINKS.iter().enumerate() {
        let delay = Duration::from_millis(ms);
        let mut data = LinkConfig::new(
            format!("data{i}"),
            Capacity::Constant(Bandwidth::from_mbps(mbps)),
            delay,
        );
        // A queue that holds the whole window: no loss.
        data.queue_bytes = 8 << 20;
        let ack = LinkConfig::new(
            format!("ack{i}"),
            Capacity::Constant(Bandwidth::from_mbps(1000)),
            delay,
        );
        let d = sim.add_link(data);
        let a = sim.add_link(ack);
        fwd.push(sim.add_route(format!("fwd{i}"), vec![d]));
        back.push(sim.add_route(format!("back{i}"), vec![a]));
        // Twice the bandwidth-delay product: the link, not the window,
        // limits each connection.
        let bdp = mbps * 1_000_000 / 8 * (2 * ms) / 1000;
        windows.push(2 * bdp);
    }
    let block = 256 << 10;
    let window_bytes = 16 << 20;
    let cfg = BulkConfig {
        mode,
        block_size: block,
        total_bytes: TOTAL,
        window_blocks: window_bytes / (16 << 10),
        window_bytes,
        conn_windows: windows,
        lowat: u64::from(block),
    };
    let rx = sim.add_node(
        "recv",
        Box::new(BulkReceiver::new(
            cfg.window_blocks,
            window_bytes,
            back.clone(),
        )),
    );
    let tx = sim.add_node("send", Box::new(BulkSender::new(cfg, fwd.clone())));
    for &r in &fwd {
        sim.bind_route(r, rx);
    }
    for &r in &back {
        sim.bind_route(r, tx);
    }
    sim.run_until(Instant::ZERO + Duration::from_secs(120));
    let r = sim.node::<BulkReceiver>(rx).expect("receiver node");
    let s = sim.node::<BulkSender>(tx).expect("sender node");
    // Every block written exactly once, in order.
    let blocks = r.written_log.len() as u64;
    assert!(
        r.written_log.iter().copied().eq(0..blocks),
        "{mode:?}: blocks written out of order or twice"
    );
    assert_eq!(r.written_bytes, TOTAL, "{mode:?}: not everything arrived");
    assert_eq!(r.violations, 0, "{mode:?}: a block beyond the window");
    let done = s
        .completed_at
        .expect("the sender saw every block acknowledged");
    let end = r.last_write.expect("something was written");
    assert!(done >= end);
    let seconds = end.saturating_duration_since(Instant::ZERO).as_secs_f64();
    let copies = (0..LINKS.len())
        .map(|c| s.scheduler().counters(c).copies)
        .sum();
    Outcome {
        seconds,
        mbps: TOTAL as f64 * 8.0 / seconds / 1e6,
        copies,
        duplicates: r.peaks().2,
    }
}

#[test]
fn adaptive_fills_an_rtt_skewed_pair_and_beats_round_robin() {
    let sum: f64 = LINKS.iter().map(|l| l.0 as f64).sum();
    let adaptive = run(Mode::Adaptive);
    let rr = run(Mode::RoundRobin);
    println!(
        "adaptive: {:.2} Mbit/s ({:.1} % of {sum} Mbit/s) in {:.2} s, {} copies, {} duplicates",
        adaptive.mbps,
        100.0 * adaptive.mbps / sum,
        adaptive.seconds,
        adaptive.copies,
        adaptive.duplicates
    );
    println!(
        "round-robin: {:.2} Mbit/s ({:.1} %) in {:.2} s",
        rr.mbps,
        100.0 * rr.mbps / sum,
        rr.seconds
    );
    assert!(
        adaptive.mbps >= 0.85 * sum,
        "adaptive reached {:.2} of {sum} Mbit/s",
        adaptive.mbps
    );
    assert!(
        adaptive.mbps > rr.mbps,
        "adaptive {:.2} vs round-robin {:.2} Mbit/s",
        adaptive.mbps,
        rr.mbps
    );
}

#[test]
fn weighted_mode_also_delivers_every_block_in_order() {
    let w = run(Mode::Weighted);
    assert!(w.mbps > 0.0);
}

#[test]
fn the_run_is_deterministic() {
    let a = run(Mode::Adaptive);
    let b = run(Mode::Adaptive);
    assert_eq!(a.seconds.to_bits(), b.seconds.to_bits());
    assert_eq!((a.copies, a.duplicates), (b.copies, b.duplicates));
}
