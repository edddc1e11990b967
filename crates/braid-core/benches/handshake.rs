//! CPU cost of the IQ-RUDP handshake with and without a pre-shared key
//! (`transport::auth`, Noise NNpsk0): a client and a server endpoint in
//! memory exchange INITIAL, RETRY, INITIAL (+ message 1), HANDSHAKE
//! (+ message 2) and the first DATA packet, until both are established.
//! A third bench measures what refusing a wrong key costs the server
//! (cookie check plus message 1's failed decryption, no Diffie-Hellman).
//!
//! Run: `cargo bench -p braid-core --bench handshake`.
#![allow(missing_docs)]

use braid_core::transport::{Config, Endpoint, FourTuple, Psk};
use braid_core::Instant;
use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use std::net::SocketAddr;

fn client_addr() -> SocketAddr {
    SocketAddr::from(([10, 0, 0, 1], 1))
}

fn server_addr() -> SocketAddr {
    SocketAddr::from(([10, 0, 0, 2], 2))
}

fn config(key: Option<u8>) -> Config {
    Config {
        psk: key.map(|k| Psk::from_bytes([k; 32])),
        ..Config::default()
    }
}

/// One whole handshake between fresh endpoints; true if both ended
/// established.
fn handshake(client: &mut Endpoint, server: &mut Endpoint) -> bool {
    let mut now = Instant::ZERO;
    let h = client.connect(now, server_addr()).expect("room");
    let mut buf = Vec::new();
    for _ in 0..4 {
        while let Some(t) = client.poll_transmit(now, &mut buf) {
            server.handle_datagram(now, FourTuple::from_remote(client_addr()), &buf[..t.size]);
        }
        while let Some(t) = server.poll_transmit(now, &mut buf) {
            client.handle_datagram(now, FourTuple::from_remote(server_addr()), &buf[..t.size]);
        }
        // The client confirms with a DATA packet (an ACK of the HANDSHAKE)
        // once its ack delay has passed.
        now += braid_core::Duration::from_millis(30);
        client.handle_timeout(now);
    }
    let up = |ep: &Endpoint| {
        ep.handles()
            .first()
            .and_then(|h| ep.connection(*h))
            .is_some_and(|c| c.is_established())
    };
    client.connection(h).is_some_and(|c| c.is_established()) && up(server)
}

fn pair(client_key: Option<u8>, server_key: Option<u8>) -> (Endpoint, Endpoint) {
    (
        Endpoint::new(config(client_key), [1; 32], false).expect("valid"),
        Endpoint::new(config(server_key), [2; 32], true).expect("valid"),
    )
}

fn bench(c: &mut Criterion) {
    let (mut a, mut b) = pair(None, None);
    assert!(handshake(&mut a, &mut b), "keyless handshake completes");
    let (mut a, mut b) = pair(Some(7), Some(7));
    assert!(handshake(&mut a, &mut b), "keyed handshake completes");
    c.bench_function("handshake/no_key", |bn| {
        bn.iter_batched(
            || pair(None, None),
            |(mut a, mut b)| handshake(&mut a, &mut b),
            BatchSize::SmallInput,
        )
    });
    c.bench_function("handshake/psk", |bn| {
        bn.iter_batched(
            || pair(Some(7), Some(7)),
            |(mut a, mut b)| handshake(&mut a, &mut b),
            BatchSize::SmallInput,
        )
    });
    // The server's cost of refusing: a client with another key's echo
    // (captured once), replayed to fresh servers at the same time bucket.
    let echo = {
        let (mut client, mut server) = pair(Some(1), Some(2));
        let now = Instant::ZERO;
        client.connect(now, server_addr()).expect("room");
        let mut buf = Vec::new();
        let t = client.poll_transmit(now, &mut buf).expect("initial");
        server.handle_datagram(now, FourTuple::from_remote(client_addr()), &buf[..t.size]);
        let t = server.poll_transmit(now, &mut buf).expect("retry");
        client.handle_datagram(now, FourTuple::from_remote(server_addr()), &buf[..t.size]);
        let t = client.poll_transmit(now, &mut buf).expect("echo");
        buf[..t.size].to_vec()
    };
    c.bench_function("handshake/refuse_wrong_key", |bn| {
        bn.iter_batched(
            || Endpoint::new(config(Some(2)), [2; 32], true).expect("valid"),
            |mut server| {
                server.handle_datagram(Instant::ZERO, FourTuple::from_remote(client_addr()), &echo);
                assert_eq!(server.stats().auth_failed, 1);
                server
            },
            BatchSize::SmallInput,
        )
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
