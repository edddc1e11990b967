//! Connect latency of IQ-RUDP on loopback, with and without a pre-shared
//! key: one server endpoint, one client endpoint, `N` connections opened one
//! after another (each waits for `connect` to return, then closes); prints
//! the median, 90th percentile and maximum per mode, both modes in the same
//! run, interleaved in rounds so machine load hits both alike.
//!
//! Run: `cargo run --release -p braid --example connect_latency [N]`
//! (docs/BENCHMARKS.md, "Issue 12: authenticated handshake").

use braid::clock;
use braid::rudp::{Endpoint, EndpointConfig, ErrorCode};
use braid_core::transport::Psk;
use braid_core::Duration;
use std::net::SocketAddr;

/// Connections per round and mode.
const ROUND: usize = 20;

fn config(server: bool, key: Option<&Psk>) -> EndpointConfig {
    let mut c = if server {
        EndpointConfig::server()
    } else {
        EndpointConfig::default()
    };
    c.transport.psk = key.cloned();
    c
}

async fn measure(key: Option<&Psk>, n: usize, out: &mut Vec<Duration>) {
    let local: SocketAddr = "127.0.0.1:0".parse().expect("literal");
    let mut server = Endpoint::bind(local, config(true, key)).expect("bind server");
    let client = Endpoint::bind(local, config(false, key)).expect("bind client");
    let to = server.local_addr();
    tokio::spawn(async move {
        while let Ok(c) = server.accept().await {
            drop(c);
        }
    });
    for _ in 0..n {
        let t0 = clock::now();
        let c = client.connect(to).await.expect("connect");
        out.push(clock::now().saturating_duration_since(t0));
        let _ = c.close(ErrorCode::NO_ERROR, b"").await;
    }
}

fn summary(name: &str, d: &mut [Duration]) {
    d.sort();
    let at = |q: f64| d[((d.len() - 1) as f64 * q).round() as usize];
    println!(
        "{name:>8}: n={} median {:.1} µs, p90 {:.1} µs, max {:.1} µs",
        d.len(),
        at(0.5).as_nanos() as f64 / 1e3,
        at(0.9).as_nanos() as f64 / 1e3,
        at(1.0).as_nanos() as f64 / 1e3
    );
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(200);
    let key = Psk::from_bytes([7; 32]);
    let (mut plain, mut keyed) = (Vec::new(), Vec::new());
    // Warm up both paths once.
    measure(None, 5, &mut Vec::new()).await;
    measure(Some(&key), 5, &mut Vec::new()).await;
    while plain.len() < n {
        measure(None, ROUND, &mut plain).await;
        measure(Some(&key), ROUND, &mut keyed).await;
    }
    summary("no key", &mut plain);
    summary("key", &mut keyed);
}
