//! RUDP across a real rate-shaped link: two network namespaces joined by a
//! veth pair with a `tbf` 20 Mbit/s qdisc (testbed/netns.sh), a bulk
//! reliable transfer for a few seconds. The goodput must fill most of the
//! link (asserted loosely, ≥ 80 %; the exact figure is printed and recorded
//! in docs/bench-rudp.md) and the data must arrive in order.
//!
//! Needs root and `ip netns`; otherwise the test prints why and passes
//! without running (CI runs as root). The namespaces are
//! `bt<pid>-rudp-{s,r}` (the testbed's naming: owner pid, so parallel runs
//! never collide) and are torn down by a `Drop` guard. Addresses are
//! 198.18.1.1 (sender) and 198.18.1.2 (receiver), RFC 2544 benchmarking
//! range, existing only inside the namespaces.

mod common;

use braid::clock;
use braid::emulate::netns::in_namespace;
use braid::rudp::{Endpoint, EndpointConfig, SendOptions};
use common::{skip_reason, testbed};
use std::net::SocketAddr;

const LINK: &str = "20mbit";
const LINK_BPS: f64 = 20e6;
/// Seconds of transfer before measuring (slow start) and measured.
const WARMUP_S: f64 = 1.0;
const MEASURE_S: f64 = 5.0;
const MESSAGE: usize = 64 << 10;

/// The two namespaces and their link, torn down on drop.
struct Topology {
    name: &'static str,
}

impl Topology {
    fn up(name: &'static str) -> Topology {
        let out = testbed(&["up", name, LINK]);
        assert!(
            out.status.success(),
            "testbed up: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Topology { name }
    }
    fn ns(&self, side: &str) -> String {
        format!("bt{}-{}-{side}", std::process::id(), self.name)
    }
}

impl Drop for Topology {
    fn drop(&mut self) {
        let _ = testbed(&["down", self.name]);
    }
}

/// Binds an endpoint inside network namespace `ns` (a socket stays in the
/// namespace it was created in, whatever thread uses it later).
fn bind_in(ns: &str, addr: SocketAddr, config: EndpointConfig) -> Endpoint {
    let rt = tokio::runtime::Handle::current();
    in_namespace(ns, move || {
        let _guard = rt.enter();
        Endpoint::bind(addr, config).map_err(std::io::Error::other)
    })
    .expect("bind in namespace")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rudp_fills_a_20mbit_tbf_link() {
    if let Some(why) = skip_reason() {
        eprintln!("SKIP: network-namespace test needs root and ip netns: {why}");
        return;
    }
    let topo = Topology::up("rudp");
    let server_addr: SocketAddr = "198.18.1.2:0".parse().expect("literal");
    let client_addr: SocketAddr = "198.18.1.1:0".parse().expect("literal");
    let mut server = bind_in(&topo.ns("r"), server_addr, EndpointConfig::server());
    let client = bind_in(&topo.ns("s"), client_addr, EndpointConfig::default());
    let to = server.local_addr();
    let (c, s) = tokio::join!(client.connect(to), server.accept());
    let (c, mut s) = (c.expect("connect"), s.expect("accept"));
    let stream = c.open_stream(SendOptions::RELIABLE).expect("stream");
    let (stop_tx, mut stop_rx) = tokio::sync::watch::channel(false);
    let sender = tokio::spawn(async move {
        let mut i = 0u64;
        loop {
            let mut m = vec![0u8; MESSAGE];
            m[..8].copy_from_slice(&i.to_be_bytes());
            tokio::select! {
                r = stream.send(m) => r.expect("send"),
                _ = stop_rx.changed() => break,
            }
            i += 1;
        }
        c
    });
    let mut bytes = 0u64;
    let mut next = 0u64;
    let mut start = None;
    let mut at_warmup = None;
    while let Some(m) = s.recv().await {
        assert_eq!(m.number, next, "in order");
        assert_eq!(m.data[..8], next.to_be_bytes());
        next += 1;
        bytes += m.data.len() as u64;
        let now = clock::now();
        let t0 = *start.get_or_insert(now);
        let t = now.saturating_duration_since(t0).as_secs_f64();
        if at_warmup.is_none() && t >= WARMUP_S {
            at_warmup = Some((t, bytes));
        }
        if t >= WARMUP_S + MEASURE_S {
            let (tw, bw) = at_warmup.expect("set before");
            let goodput = (bytes - bw) as f64 * 8.0 / (t - tw);
            let stats = s.stats().await.expect("stats");
            eprintln!(
                "rudp over tbf {LINK}: goodput {:.2} Mbit/s = {:.1} % of the link \
                 over {:.2} s (receiver srtt {:?})",
                goodput / 1e6,
                100.0 * goodput / LINK_BPS,
                t - tw,
                stats.srtt
            );
            assert!(
                goodput >= 0.8 * LINK_BPS,
                "goodput {goodput} bit/s below 80 % of {LINK_BPS}"
            );
            break;
        }
    }
    assert!(at_warmup.is_some(), "the transfer ended early");
    let _ = stop_tx.send(true);
    let c = sender.await.expect("sender");
    let cs = c.stats().await.expect("client stats");
    eprintln!(
        "sender: cwnd {} B, srtt {:?}, lost {} of {} packets, retransmitted {} B",
        cs.cwnd, cs.srtt, cs.packets_lost, cs.packets_sent, cs.retransmitted_bytes
    );
    drop(topo);
}
