//! The programmatic API later issues use: build a network by hand, plug in
//! your own [`Node`]s, step the run, inspect and command nodes.

use braid_core::{Bandwidth, Duration, Instant};
use braid_sim::{
    Capacity, Datagram, FlowInfo, LinkConfig, Node, Report, RouteId, Simulation, Transmit,
};

/// Sends `count` numbered datagrams of real bytes, one per millisecond.
struct Pinger {
    route: RouteId,
    next: u32,
    count: u32,
    next_at: Instant,
}

impl Node for Pinger {
    fn handle_datagram(&mut self, _: Instant, _: RouteId, _: Datagram) {}
    fn handle_timeout(&mut self, _: Instant) {}
    fn poll_transmit(&mut self, now: Instant) -> Option<Transmit> {
        if self.next >= self.count || now < self.next_at {
            return None;
        }
        let n = self.next;
        self.next += 1;
        self.next_at = now + Duration::from_millis(1);
        let mut data = n.to_le_bytes().to_vec();
        data.resize(1000, 0xab);
        Some(Transmit {
            route: self.route,
            datagram: Datagram::from_bytes(data),
        })
    }
    fn poll_timeout(&self) -> Option<Instant> {
        (self.next < self.count).then_some(self.next_at)
    }
}

/// Records what arrives.
#[derive(Default)]
struct Recorder {
    got: Vec<(Instant, RouteId, u32, usize)>,
}

impl Node for Recorder {
    fn handle_datagram(&mut self, now: Instant, route: RouteId, d: Datagram) {
        let n = u32::from_le_bytes(d.data()[..4].try_into().unwrap());
        self.got.push((now, route, n, d.data().len()));
    }
    fn handle_timeout(&mut self, _: Instant) {}
    fn poll_transmit(&mut self, _: Instant) -> Option<Transmit> {
        None
    }
    fn poll_timeout(&self) -> Option<Instant> {
        None
    }
    fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![("received", self.got.len() as u64)]
    }
}

fn network(cfg: LinkConfig, count: u32) -> (Simulation, braid_sim::NodeId, braid_sim::NodeId) {
    let mut sim = Simulation::empty("custom", 9, Duration::from_secs(10), Duration::ZERO);
    let l1 = sim.add_link(cfg);
    let l2 = sim.add_link(LinkConfig::new(
        "second",
        Capacity::Constant(Bandwidth::from_mbps(100)),
        Duration::from_millis(5),
    ));
    let route = sim.add_route("path", vec![l1, l2]);
    let tx = sim.add_node(
        "pinger",
        Box::new(Pinger {
            route,
            next: 0,
            count,
            next_at: Instant::ZERO,
        }),
    );
    let rx = sim.add_node("recorder", Box::new(Recorder::default()));
    sim.bind_route(route, rx);
    sim.add_flow(FlowInfo {
        name: "pings".into(),
        kind: "custom".into(),
        routes: vec![route],
        start: Instant::ZERO,
        stop: Instant::ZERO + Duration::from_secs(10),
    });
    (sim, tx, rx)
}

fn first_link(reorder: f64, duplicate: f64) -> LinkConfig {
    let mut cfg = LinkConfig::new(
        "first",
        Capacity::Constant(Bandwidth::from_mbps(10)),
        Duration::from_millis(10),
    );
    cfg.reorder = reorder;
    cfg.reorder_delay = Duration::from_millis(5);
    cfg.duplicate = duplicate;
    cfg
}

#[test]
fn datagrams_cross_a_chain_of_links_intact() {
    let (mut sim, _, rx) = network(first_link(0.0, 0.0), 100);
    sim.run_until(Instant::ZERO + Duration::from_secs(10));
    let got = &sim.node::<Recorder>(rx).unwrap().got;
    assert_eq!(got.len(), 100);
    // 0.8 ms + 10 ms on the first link, 0.08 ms + 5 ms on the second.
    assert_eq!(
        got[0].0,
        Instant::from_nanos(800_000 + 10_000_000 + 80_000 + 5_000_000)
    );
    assert!(got
        .iter()
        .enumerate()
        .all(|(i, g)| g.2 == i as u32 && g.3 == 1000));
    let report = Report::from_run(&sim);
    let f = report.flow("pings").unwrap();
    assert_eq!((f.sent_packets, f.delivered_packets), (100, 100));
    assert_eq!(f.route, "first>second");
}

#[test]
fn reordering_and_duplication_are_seeded_and_counted() {
    let (mut sim, _, rx) = network(first_link(0.2, 0.1), 2000);
    sim.run_until(Instant::ZERO + Duration::from_secs(10));
    let got = &sim.node::<Recorder>(rx).unwrap().got;
    let stats = sim.link_stats(braid_sim::LinkId(0)).unwrap().clone();
    assert_eq!(got.len() as u64, 2000 + stats.duplicates);
    assert!(stats.reordered > 300 && stats.reordered < 500, "{stats:?}");
    assert!(
        stats.duplicates > 130 && stats.duplicates < 270,
        "{stats:?}"
    );
    let inversions = got.windows(2).filter(|w| w[1].2 < w[0].2).count();
    assert!(inversions > 100, "{inversions}");
    // Same seed, same order.
    let (mut again, _, rx2) = network(first_link(0.2, 0.1), 2000);
    again.run_until(Instant::ZERO + Duration::from_secs(10));
    assert_eq!(&again.node::<Recorder>(rx2).unwrap().got, got);
}

#[test]
fn stepping_and_commanding_a_node() {
    let (mut sim, tx, rx) = network(first_link(0.0, 0.0), 10);
    sim.run_until(Instant::ZERO + Duration::from_secs(1));
    assert_eq!(sim.node::<Recorder>(rx).unwrap().got.len(), 10);
    // Ask for ten more; the simulator re-polls the node when it continues.
    let p = sim.node_mut::<Pinger>(tx).unwrap();
    p.count = 20;
    p.next_at = Instant::ZERO + Duration::from_secs(2);
    assert!(
        sim.node::<Pinger>(rx).is_none(),
        "wrong type is None, not a panic"
    );
    sim.run_until(Instant::ZERO + Duration::from_secs(5));
    let got = &sim.node::<Recorder>(rx).unwrap().got;
    assert_eq!(got.len(), 20);
    assert!(got[10].0 > Instant::ZERO + Duration::from_secs(2));
    assert_eq!(sim.node_counters(rx), vec![("received", 20)]);
}

#[test]
fn a_zero_rate_link_stalls_without_panicking() {
    let mut cfg = first_link(0.0, 0.0);
    cfg.capacity = Capacity::Constant(Bandwidth::ZERO);
    cfg.queue_bytes = 5000;
    let (mut sim, _, rx) = network(cfg, 50);
    sim.run_until(Instant::ZERO + Duration::from_secs(10));
    assert!(sim.node::<Recorder>(rx).unwrap().got.is_empty());
    let s = sim.link_stats(braid_sim::LinkId(0)).unwrap();
    assert_eq!(s.sent_packets, 0);
    assert_eq!(s.queue_drops, 50 - 1 - 5);
    let r = Report::from_run(&sim);
    assert_eq!(r.link("first").unwrap().utilization, 0.0);
}
