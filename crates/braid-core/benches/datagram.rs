//! Cost of the receive datagram path: an established client/server pair in
//! memory; the server takes a burst of data datagrams through
//! `Endpoint::handle_datagram` and sends its acknowledgements with
//! `poll_transmit`.
//!
//! Run: `cargo bench -p braid-core --bench datagram`. Each iteration is one
//! burst of [`BURST`] fresh datagrams (a fresh pair per batch, built outside
//! the timing, so no datagram is a duplicate); a second bench decodes one
//! short-header data datagram alone.
#![allow(missing_docs)]

use braid_core::transport::{Config, CongestionKind, Endpoint, FourTuple, SendOptions, StreamId};
use braid_core::wire::Packet;
use braid_core::{Bandwidth, Duration, Instant};
use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use std::hint::black_box;
use std::net::SocketAddr;

/// Data datagrams per iteration.
const BURST: usize = 32;

fn client_addr() -> SocketAddr {
    SocketAddr::from(([10, 0, 0, 1], 1))
}

fn server_addr() -> SocketAddr {
    SocketAddr::from(([10, 0, 0, 2], 2))
}

fn config() -> Config {
    Config {
        pacing: false,
        congestion: CongestionKind::Fixed(Bandwidth::from_mbps(100_000)),
        ..Config::default()
    }
}

/// An established pair and a burst of client datagrams the server has not
/// seen yet.
struct Pair {
    server: Endpoint,
    burst: Vec<Vec<u8>>,
    now: Instant,
}

/// Delivers everything each side has to send until both are quiet, 5 ms
/// one way (so the round trip, and with it the window, is realistic).
fn exchange(now: &mut Instant, client: &mut Endpoint, server: &mut Endpoint) {
    let mut buf = Vec::new();
    loop {
        let mut moved = false;
        let mut to_server = Vec::new();
        while let Some(t) = client.poll_transmit(*now, &mut buf) {
            to_server.push(buf[..t.size].to_vec());
        }
        *now += Duration::from_millis(5);
        for d in &to_server {
            server.handle_datagram(*now, FourTuple::from_remote(client_addr()), d);
            moved = true;
        }
        let mut to_client = Vec::new();
        while let Some(t) = server.poll_transmit(*now, &mut buf) {
            to_client.push(buf[..t.size].to_vec());
        }
        *now += Duration::from_millis(5);
        for d in &to_client {
            client.handle_datagram(*now, FourTuple::from_remote(server_addr()), d);
            moved = true;
        }
        if !moved {
            return;
        }
    }
}

fn pair() -> Pair {
    let mut now = Instant::ZERO;
    let mut client = Endpoint::new(config(), [1; 32], false).expect("valid config");
    let mut server = Endpoint::new(config(), [2; 32], true).expect("valid config");
    let h = client.connect(now, server_addr()).expect("room");
    exchange(&mut now, &mut client, &mut server);
    let sh = server.accept().expect("server accepted the client");
    assert!(client.connection(h).expect("client conn").is_established());
    // The server is established once data follows the handshake.
    client
        .connection_mut(h)
        .expect("client conn")
        .send(now, StreamId(0), vec![1u8; 10], SendOptions::RELIABLE)
        .expect("room in the send queue");
    exchange(&mut now, &mut client, &mut server);
    assert!(server.connection(sh).expect("server conn").is_established());
    now += Duration::from_millis(1);
    let conn = client.connection_mut(h).expect("client conn");
    // More bytes than the burst carries: datagrams are packed full.
    for _ in 0..2 * BURST {
        conn.send(now, StreamId(0), vec![7u8; 1200], SendOptions::RELIABLE)
            .expect("room in the send queue");
    }
    let mut burst = Vec::new();
    let mut buf = Vec::new();
    while burst.len() < BURST {
        let Some(t) = client.poll_transmit(now, &mut buf) else {
            break;
        };
        burst.push(buf[..t.size].to_vec());
    }
    assert_eq!(burst.len(), BURST, "client sent a whole burst");
    Pair { server, burst, now }
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("datagram");
    g.bench_function("server_burst_32", |b| {
        b.iter_batched(
            pair,
            |mut p| {
                let mut buf = Vec::with_capacity(1500);
                let mut acks = 0usize;
                for d in &p.burst {
                    p.server
                        .handle_datagram(p.now, FourTuple::from_remote(client_addr()), d);
                    while let Some(t) = p.server.poll_transmit(p.now, &mut buf) {
                        acks += t.size;
                    }
                }
                // Let the delayed ACK timer fire so the ack work is counted.
                let later = p.now + Duration::from_millis(30);
                p.server.handle_timeout(later);
                while let Some(t) = p.server.poll_transmit(later, &mut buf) {
                    acks += t.size;
                }
                black_box(acks);
                p
            },
            BatchSize::SmallInput,
        )
    });
    let p = pair();
    let d = p.burst[0].clone();
    g.bench_function("packet_decode", |b| {
        b.iter(|| black_box(Packet::decode(black_box(&d)).map(|p| p.header.pn)))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
