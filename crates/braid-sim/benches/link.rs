//! Cost of simulating one second of a 100 Mbit/s link with 1500-byte
//! packets (≈ 8,333 packets), the issue-2 speed target ("well under one
//! second of CPU"). Two workloads: a CBR source that exactly fills the link
//! (one datagram per packet), and a greedy source with per-packet acks over
//! a return link (twice the datagrams plus window logic).
//!
//! Run: `cargo bench -p braid-sim`.
#![allow(missing_docs)] // criterion_group! generates an undocumented pub fn

use braid_sim::{Report, Scenario, Simulation};
use criterion::{criterion_group, criterion_main, Criterion};

fn scenario(flow: &str) -> Scenario {
    let text = format!(
        r#"
duration = "1s"
nodes = ["a", "b"]
[[link]]
name = "fwd"
from = "a"
to = "b"
rate = "100mbit"
delay = "10ms"
[[link]]
name = "back"
from = "b"
to = "a"
rate = "100mbit"
delay = "10ms"
{flow}
"#
    );
    Scenario::from_toml_str(&text).expect("valid bench scenario")
}

fn bench(c: &mut Criterion) {
    let cbr = scenario(
        r#"[[flow]]
name = "f"
kind = "cbr"
from = "a"
to = "b"
rate = "100mbit"
packet = 1500"#,
    );
    let greedy = scenario(
        r#"[[flow]]
name = "f"
kind = "greedy"
from = "a"
to = "b"
packet = 1500"#,
    );
    let packets = Report::from_run(&Simulation::new(&cbr).unwrap().run())
        .flow("f")
        .unwrap()
        .delivered_packets;
    eprintln!("cbr: {packets} packets delivered in one simulated second");
    c.bench_function("one_second_100mbit_cbr_1500B", |b| {
        b.iter(|| Simulation::new(&cbr).unwrap().run())
    });
    c.bench_function("one_second_100mbit_greedy_acks_1500B", |b| {
        b.iter(|| Simulation::new(&greedy).unwrap().run())
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
