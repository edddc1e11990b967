//! Per-message cost of the session layer (issue 10's target: < 1 µs per
//! side; seed 001 Table 1 reports 6–10.7 µs for its middleware).
//!
//! Two pipelines carry the same traffic in memory — 1 KB messages, three
//! streams — from the application on one side to the application on the
//! other, datagrams moved by hand with no delay:
//! * `transport`: one IQ-RUDP connection, the three streams on its
//!   transport streams (`Connection::send` → `Connection::recv`);
//! * `session`: a source and a sink session over **two** paths (two
//!   connections), PGOS mapping the streams, session frames, reassembly
//!   (`Session::send` → `Session::recv`).
//!
//! The difference per message is what the session layer costs for both
//! sides together. Run: `cargo bench -p braid-core --bench session`.
#![allow(missing_docs)]

use braid_core::scheduler::StreamSpec;
use braid_core::session::{Session, SessionConfig, SessionId, StreamConfig};
use braid_core::transport::{
    Config, CongestionKind, ConnectionHandle, Endpoint, FourTuple, SendOptions,
};
use braid_core::{Bandwidth, Duration, Instant, PathId, StreamId};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use std::hint::black_box;
use std::net::SocketAddr;

const MESSAGE: usize = 1000;
/// Messages sent between two moves of the datagrams.
const BATCH: usize = 32;

fn addr(a: u8, port: u16) -> SocketAddr {
    SocketAddr::from(([10, 0, 0, a], port))
}

fn transport_config() -> Config {
    Config {
        pacing: false,
        congestion: CongestionKind::Fixed(Bandwidth::from_mbps(100_000)),
        send_queue_bytes: 64 << 20,
        recv_window: 64 << 20,
        ..Config::default()
    }
}

struct Sessions {
    source: Session,
    sink: Session,
    now: Instant,
    buf: Vec<u8>,
    streams: Vec<StreamId>,
    paths: Vec<(FourTuple, FourTuple)>,
    next: usize,
}

impl Sessions {
    fn new() -> Self {
        let config = SessionConfig {
            transport: transport_config(),
            ..SessionConfig::default()
        };
        let now = Instant::ZERO;
        let mut source = Session::source(SessionId(1), config.clone(), [1; 32], now).unwrap();
        let sink = Session::sink(config, [2; 32], now).unwrap();
        let mut paths = Vec::new();
        for i in 0..2u8 {
            let out = FourTuple::new(addr(1, 100 + u16::from(i)), addr(2, 200));
            let back = FourTuple::new(addr(2, 200), addr(1, 100 + u16::from(i)));
            source.add_path(now, PathId(u32::from(i)), out).unwrap();
            paths.push((out, back));
        }
        let mut s = Sessions {
            source,
            sink,
            now,
            buf: Vec::with_capacity(2048),
            streams: Vec::new(),
            paths,
            next: 0,
        };
        for _ in 0..3 {
            let id = s
                .source
                .open_stream(
                    s.now,
                    StreamConfig::new(StreamSpec::best_effort(1).unwrap()).with_window(1 << 16),
                )
                .unwrap();
            s.streams.push(id);
        }
        for _ in 0..50 {
            s.shuttle();
        }
        s
    }

    /// Moves every datagram both ways, lets 1 ms pass, fires timers, and
    /// takes every message at the sink.
    fn shuttle(&mut self) -> usize {
        let mut got = 0;
        for _ in 0..64 {
            let mut moved = false;
            while let Some(t) = self.source.poll_transmit(self.now, &mut self.buf) {
                let back = self
                    .paths
                    .iter()
                    .find(|p| p.0 == t.path)
                    .map_or(self.paths[0].1, |p| p.1);
                self.sink
                    .handle_datagram(self.now, back, &self.buf[..t.size]);
                moved = true;
            }
            while let Some(t) = self.sink.poll_transmit(self.now, &mut self.buf) {
                let out = self
                    .paths
                    .iter()
                    .find(|p| p.0.local == Some(t.path.remote))
                    .map_or(self.paths[0].0, |p| p.0);
                self.source
                    .handle_datagram(self.now, out, &self.buf[..t.size]);
                moved = true;
            }
            while let Some(m) = self.sink.recv(self.now) {
                black_box(&m);
                got += 1;
            }
            if !moved {
                break;
            }
        }
        self.now += Duration::from_millis(1);
        self.source.handle_timeout(self.now);
        self.sink.handle_timeout(self.now);
        while self.source.poll_event().is_some() {}
        while self.sink.poll_event().is_some() {}
        got
    }

    fn send_batch(&mut self) {
        for _ in 0..BATCH {
            let s = self.streams[self.next % 3];
            self.next += 1;
            let _ = self.source.send(self.now, s, vec![7u8; MESSAGE]);
        }
        self.shuttle();
    }
}

struct Transport {
    client: Endpoint,
    server: Endpoint,
    conn: ConnectionHandle,
    srv: Option<ConnectionHandle>,
    now: Instant,
    buf: Vec<u8>,
    next: u32,
    out: FourTuple,
    back: FourTuple,
}

impl Transport {
    fn new() -> Self {
        let now = Instant::ZERO;
        let mut client = Endpoint::new(transport_config(), [1; 32], false).unwrap();
        let server = Endpoint::new(transport_config(), [2; 32], true).unwrap();
        let out = FourTuple::new(addr(1, 100), addr(2, 200));
        let back = FourTuple::new(addr(2, 200), addr(1, 100));
        let conn = client.connect_on(now, out).unwrap();
        let mut t = Transport {
            client,
            server,
            conn,
            srv: None,
            now,
            buf: Vec::with_capacity(2048),
            next: 0,
            out,
            back,
        };
        for _ in 0..50 {
            t.shuttle();
        }
        t
    }

    fn shuttle(&mut self) -> usize {
        let mut got = 0;
        for _ in 0..64 {
            let mut moved = false;
            while let Some(t) = self.client.poll_transmit(self.now, &mut self.buf) {
                self.server
                    .handle_datagram(self.now, self.back, &self.buf[..t.size]);
                moved = true;
            }
            if self.srv.is_none() {
                self.srv = self.server.accept();
            }
            while let Some(t) = self.server.poll_transmit(self.now, &mut self.buf) {
                self.client
                    .handle_datagram(self.now, self.out, &self.buf[..t.size]);
                moved = true;
            }
            if let Some(c) = self.srv.and_then(|h| self.server.connection_mut(h)) {
                while let Some(m) = c.recv(self.now) {
                    black_box(&m);
                    got += 1;
                }
            }
            if !moved {
                break;
            }
        }
        self.now += Duration::from_millis(1);
        self.client.handle_timeout(self.now);
        self.server.handle_timeout(self.now);
        got
    }

    fn send_batch(&mut self) {
        for _ in 0..BATCH {
            let s = StreamId(1 + self.next % 3);
            self.next += 1;
            if let Some(c) = self.client.connection_mut(self.conn) {
                let _ = c.send(self.now, s, vec![7u8; MESSAGE], SendOptions::RELIABLE);
            }
        }
        self.shuttle();
    }
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("pipeline_1KB_3_streams");
    g.throughput(Throughput::Elements(BATCH as u64));
    let mut t = Transport::new();
    g.bench_function("transport_1_connection", |b| b.iter(|| t.send_batch()));
    let mut s = Sessions::new();
    g.bench_function("session_2_paths", |b| b.iter(|| s.send_batch()));
    g.finish();
}

/// The session pipeline delivers everything it is given (checked before
/// timing, so the figure is for work that happened).
fn check() {
    let mut s = Sessions::new();
    let mut got = 0;
    for _ in 0..100 {
        for _ in 0..BATCH {
            let st = s.streams[s.next % 3];
            s.next += 1;
            s.source
                .send(s.now, st, vec![7u8; MESSAGE])
                .expect("window has room");
        }
        got += s.shuttle();
    }
    for _ in 0..200 {
        got += s.shuttle();
    }
    assert_eq!(got, 100 * BATCH, "every message delivered");
}

fn all(c: &mut Criterion) {
    check();
    bench(c);
}

criterion_group!(benches, all);
criterion_main!(benches);
