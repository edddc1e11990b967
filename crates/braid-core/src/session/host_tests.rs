//! Tests of [`SinkHost`]: sessions at once, back to back, a second path,
//! and "busy", over lossless in-memory paths in virtual time.

use super::*;
use crate::id::StreamId;
use crate::scheduler::StreamSpec;
use crate::session::{Event, StreamConfig};
use crate::time::Duration;
use std::net::SocketAddr;

fn addr(last: u8) -> SocketAddr {
    SocketAddr::from(([10, 0, 0, last], 4433))
}

const SINK: u8 = 1;

/// A host at 10.0.0.1 and sources at other addresses, in lock step.
struct Net {
    host: SinkHost,
    sources: Vec<Session>,
    now: Instant,
    buf: Vec<u8>,
}

impl Net {
    fn new(max_sessions: usize) -> Net {
        let host = SinkHost::new(
            SessionConfig::default(),
            [9; 32],
            Instant::ZERO,
            max_sessions,
        )
        .expect("valid config");
        Net {
            host,
            sources: Vec::new(),
            now: Instant::ZERO,
            buf: Vec::with_capacity(2048),
        }
    }

    /// A source of session `id` with one path from each of `from`.
    fn connect(&mut self, id: u64, from: &[u8]) -> usize {
        let mut s = Session::source(
            SessionId(id),
            SessionConfig::default(),
            [id as u8; 32],
            self.now,
        )
        .expect("valid config");
        for (k, &a) in from.iter().enumerate() {
            s.add_path(
                self.now,
                PathId(k as u32),
                FourTuple::new(addr(a), addr(SINK)),
            )
            .expect("a fresh path");
        }
        self.sources.push(s);
        self.sources.len() - 1
    }

    /// Moves every datagram (no delay), then advances time by `dt`.
    fn step(&mut self, dt: Duration) {
        for _ in 0..1000 {
            let mut moved = false;
            for s in &mut self.sources {
                while let Some(t) = s.poll_transmit(self.now, &mut self.buf) {
                    let local = t.path.local.expect("sources bind their paths");
                    let back = FourTuple::new(addr(SINK), local);
                    self.host
                        .handle_datagram(self.now, back, &self.buf[..t.size]);
                    moved = true;
                }
            }
            loop {
                self.buf.clear();
                let Some(t) = self.host.poll_transmit_append(self.now, &mut self.buf) else {
                    break;
                };
                moved = true;
                let to = t.path.remote;
                for s in &mut self.sources {
                    let path = FourTuple::new(to, addr(SINK));
                    if s.paths().iter().any(|p| p.addr.local == Some(to)) {
                        s.handle_datagram(self.now, path, &self.buf[..t.size]);
                    }
                }
            }
            if !moved {
                break;
            }
        }
        self.now += dt;
        for s in &mut self.sources {
            s.handle_timeout(self.now);
        }
        if self.host.poll_timeout().is_some_and(|t| t <= self.now) {
            self.host.handle_timeout(self.now);
        }
    }

    fn run(&mut self, ms: u64) {
        for _ in 0..ms / 5 {
            self.step(Duration::from_millis(5));
        }
    }

    /// Every message session `id` has delivered, as bytes.
    fn drain(&mut self, id: SessionId) -> Vec<u8> {
        let now = self.now;
        let mut got = Vec::new();
        self.host.with_session(id, |s| {
            while let Some(m) = s.recv(now) {
                got.extend_from_slice(&m.data);
            }
        });
        got
    }
}

fn best_effort() -> StreamConfig {
    StreamConfig::new(StreamSpec::best_effort(1).unwrap())
}

/// Opens a stream on source `k` and sends `n` messages of `tag`.
fn send(net: &mut Net, k: usize, tag: u8, n: usize) -> StreamId {
    let now = net.now;
    let s = net.sources[k].open_stream(now, best_effort()).unwrap();
    for _ in 0..n {
        net.sources[k].send(now, s, vec![tag; 500]).unwrap();
    }
    s
}

#[test]
fn two_sessions_at_once_each_get_their_own_messages() {
    let mut net = Net::new(4);
    let a = net.connect(11, &[2]);
    let b = net.connect(22, &[3]);
    net.run(100);
    let mut ids = Vec::new();
    while let Some(id) = net.host.accept() {
        ids.push(id);
    }
    ids.sort();
    assert_eq!(ids, vec![SessionId(11), SessionId(22)]);
    send(&mut net, a, b'a', 40);
    send(&mut net, b, b'b', 60);
    let (mut got_a, mut got_b) = (Vec::new(), Vec::new());
    for _ in 0..100 {
        net.run(20);
        got_a.extend(net.drain(SessionId(11)));
        got_b.extend(net.drain(SessionId(22)));
    }
    assert_eq!(got_a, vec![b'a'; 40 * 500]);
    assert_eq!(got_b, vec![b'b'; 60 * 500]);
}

#[test]
fn the_next_source_is_served_while_the_last_session_winds_down() {
    // One session at most: the closed one does not count.
    let mut net = Net::new(1);
    let a = net.connect(11, &[2]);
    net.run(100);
    send(&mut net, a, b'a', 10);
    net.run(200);
    assert_eq!(net.drain(SessionId(11)).len(), 10 * 500);
    let now = net.now;
    net.sources[a].close(now, crate::session::CloseCode::Done, "done");
    net.run(20);
    // Session 11 is closed but still served (not removed): the next
    // source, from the same address, comes up at once.
    assert!(net
        .host
        .with_session(SessionId(11), |s| s.is_closed())
        .unwrap());
    let b = net.connect(22, &[2]);
    net.run(100);
    assert!(
        net.sources[b].paths().iter().all(|p| p.up),
        "the second source is up"
    );
    send(&mut net, b, b'b', 10);
    net.run(200);
    assert_eq!(net.drain(SessionId(22)), vec![b'b'; 10 * 500]);
    assert!(net.host.remove(SessionId(11)).is_some());
    assert_eq!(net.host.sessions(), vec![SessionId(22)]);
}

#[test]
fn a_second_path_joins_its_own_session() {
    let mut net = Net::new(4);
    let a = net.connect(11, &[2, 3]);
    let b = net.connect(22, &[4]);
    net.run(200);
    assert!(net.sources[a].paths().iter().all(|p| p.up));
    assert!(net.sources[b].paths().iter().all(|p| p.up));
    let paths = net.host.with_session(SessionId(11), |s| s.paths().len());
    assert_eq!(paths, Some(2));
    assert_eq!(
        net.host.with_session(SessionId(22), |s| s.paths().len()),
        Some(1)
    );
    send(&mut net, a, b'a', 200);
    let mut got = Vec::new();
    for _ in 0..100 {
        net.run(20);
        got.extend(net.drain(SessionId(11)));
    }
    assert_eq!(got, vec![b'a'; 200 * 500]);
}

#[test]
fn beyond_max_sessions_a_source_hears_busy() {
    let mut net = Net::new(1);
    net.connect(11, &[2]);
    net.run(100);
    let b = net.connect(22, &[3]);
    net.run(300);
    assert_eq!(net.host.sessions(), vec![SessionId(11)]);
    assert_eq!(net.host.refused_busy(), 1);
    let mut why = None;
    while let Some(e) = net.sources[b].poll_event() {
        if let Event::PathDown { .. } = e {
            why = net.sources[b].snapshot(net.now).paths[0].error.clone();
        }
    }
    let why = why.expect("the refused path went down");
    assert!(why.contains("sink busy"), "{why}");
}

/// Session `id`'s messages until nothing more comes.
fn drain_all(net: &mut Net, id: SessionId) -> usize {
    let mut got = 0;
    for _ in 0..50 {
        net.run(20);
        got += net.drain(id).len();
    }
    got
}

fn refusals(s: &mut Session) -> Vec<String> {
    std::iter::from_fn(|| s.poll_event())
        .filter_map(|e| match e {
            Event::StreamRefused { reason, .. } => Some(reason),
            _ => None,
        })
        .collect()
}

#[test]
fn a_source_beyond_its_sessions_quota_hears_busy_and_others_are_served() {
    let mut net = Net::new(8);
    net.host
        .set_source_quota(crate::session::quota::SourceQuota {
            sessions: Some(1),
            ..Default::default()
        });
    net.connect(11, &[2]);
    net.run(100);
    // The same source (10.0.0.2, another port) again, and another source.
    let again = net.connect(12, &[2]);
    let other = net.connect(22, &[3]);
    net.run(300);
    assert_eq!(net.host.sessions(), vec![SessionId(11), SessionId(22)]);
    assert!(net.sources[other].paths()[0].up);
    let why = net.sources[again].snapshot(net.now).paths[0].error.clone();
    let why = why.expect("the refused path says why");
    assert!(
        why.contains("at most 1 session from one source (10.0.0.2)"),
        "{why}"
    );
}

#[test]
fn a_source_quota_counts_every_session_of_the_source() {
    let mut net = Net::new(8);
    let quota = crate::session::quota::Quota {
        streams: None,
        bytes: Some(30_000),
    };
    net.host
        .set_source_quota(crate::session::quota::SourceQuota {
            sessions: None,
            total: quota,
        });
    // Two sessions of 10.0.0.2 at once, and one of 10.0.0.3.
    let a = net.connect(11, &[2]);
    let b = net.connect(12, &[2]);
    let c = net.connect(22, &[3]);
    net.run(100);
    send(&mut net, a, b'a', 40); // 20,000 bytes
    let got_a = drain_all(&mut net, SessionId(11));
    assert_eq!(got_a, 20_000);
    send(&mut net, b, b'b', 40); // 20,000 more: only 10,000 fit
    let got_b = drain_all(&mut net, SessionId(12));
    // The source's quota, not the session's: 10,000 bytes fit, then the
    // stream is refused whole (what was not read of it is dropped).
    assert!(got_b <= 10_000, "{got_b}");
    send(&mut net, c, b'c', 40); // another source: its own quota
    assert_eq!(drain_all(&mut net, SessionId(22)), 20_000);
    assert!(refusals(&mut net.sources[a]).is_empty());
    let r = refusals(&mut net.sources[b]);
    assert_eq!(r.len(), 1, "{r:?}");
    assert!(
        r[0].starts_with("quota: this sink takes at most 30 kB per source (30 kB taken)"),
        "{}",
        r[0]
    );
    assert!(refusals(&mut net.sources[c]).is_empty());
    let ip = std::net::IpAddr::from([10, 0, 0, 2]);
    assert_eq!(net.host.source_usage(ip).bytes, 30_000);
    assert_eq!(net.host.source_of(SessionId(12)), Some(ip));
}

#[test]
fn sessions_ended_in_quick_succession_do_not_turn_the_next_away() {
    // Twelve sources, one after another, each ending its session before
    // the next: none is removed yet (the application is slow to), and
    // every one is still served.
    let mut net = Net::new(2);
    for k in 0..12u64 {
        let i = net.connect(100 + k, &[2 + (k % 3) as u8]);
        net.run(60);
        assert!(
            net.sources[i].paths().iter().all(|p| p.up),
            "source {k} was turned away"
        );
        let now = net.now;
        net.sources[i].close(now, crate::session::CloseCode::Done, "done");
        net.run(20);
    }
    assert_eq!(net.host.len(), 12);
    assert_eq!(net.host.refused_busy(), 0);
}
