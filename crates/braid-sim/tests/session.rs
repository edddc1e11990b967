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

fn run(def: &SessionSim) -> Simulation {
    build(def).expect("valid config").sim.run()
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
