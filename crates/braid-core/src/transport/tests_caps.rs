//! Scenario tests of the server's connection caps and handshake timeout
//! on virtual time: one party cannot take every slot, a full server says
//! so, silent half-open connections go away and stop costing sends, and a
//! party without the key holds no slot.

use super::auth::REASON_KEY_MISMATCH;

use super::*;
use crate::time::{Duration, Instant};
use crate::wire::{Header, PacketType, Reader};
use std::collections::VecDeque;
use std::net::SocketAddr;

const SERVER: SocketAddr = SocketAddr::new(
    std::net::IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 0, 2)),
    2,
);
/// Most steps a scenario may take (a runaway guard, not a timing bound).
const MAX_STEPS: u64 = 1_000_000;
/// One-way delay of every datagram.
const DELAY: Duration = Duration::from_millis(10);

/// Client `i` on host `host`.
fn client_addr(host: u8, port: u16) -> SocketAddr {
    SocketAddr::from(([10, 0, 1, host], port))
}

/// A lossless network of one server and many client endpoints.
struct Lan {
    now: Instant,
    server: Endpoint,
    clients: Vec<(SocketAddr, Endpoint)>,
    /// Clients that go silent once the server has answered: everything
    /// but their INITIALs is lost.
    silent: Vec<SocketAddr>,
    /// Arrival, from, to, bytes.
    pipe: VecDeque<(Instant, SocketAddr, SocketAddr, Vec<u8>)>,
    /// Datagrams the server sent to silent clients, with when.
    sent_to_silent: Vec<Instant>,
    /// Clients whose next N HANDSHAKE datagrams from the server are lost.
    lose_handshakes: Vec<(SocketAddr, usize)>,
    buf: Vec<u8>,
    steps: u64,
}

impl Lan {
    fn new(server: Config) -> Self {
        Lan {
            now: Instant::ZERO,
            server: Endpoint::new(server, [2; 32], true).unwrap(),
            clients: Vec::new(),
            silent: Vec::new(),
            pipe: VecDeque::new(),
            sent_to_silent: Vec::new(),
            lose_handshakes: Vec::new(),
            buf: Vec::new(),
            steps: 0,
        }
    }

    /// A new client endpoint at `from` connecting to the server; returns
    /// its index.
    fn connect(&mut self, from: SocketAddr, config: Config, silent: bool) -> usize {
        let seed = [self.clients.len() as u8 + 10; 32];
        let mut ep = Endpoint::new(config, seed, false).unwrap();
        ep.connect(self.now, SERVER).unwrap();
        self.clients.push((from, ep));
        if silent {
            self.silent.push(from);
        }
        self.clients.len() - 1
    }

    fn flush(&mut self) {
        let arrive = self.now + DELAY;
        while let Some(t) = self.server.poll_transmit(self.now, &mut self.buf) {
            if self.silent.contains(&t.path.remote) {
                self.sent_to_silent.push(self.now);
            }
            let handshake = Header::decode(&mut Reader::new(&self.buf[..t.size]))
                .is_ok_and(|h| h.ty == PacketType::Handshake);
            if let Some((_, n)) = self
                .lose_handshakes
                .iter_mut()
                .find(|(a, n)| handshake && *a == t.path.remote && *n > 0)
            {
                *n -= 1;
                continue;
            }
            self.pipe
                .push_back((arrive, SERVER, t.path.remote, self.buf[..t.size].to_vec()));
        }
        for (from, ep) in &mut self.clients {
            while let Some(t) = ep.poll_transmit(self.now, &mut self.buf) {
                let bytes = &self.buf[..t.size];
                let initial = Header::decode(&mut Reader::new(bytes))
                    .is_ok_and(|h| h.ty == PacketType::Initial);
                if self.silent.contains(from) && !initial {
                    continue;
                }
                self.pipe.push_back((arrive, *from, SERVER, bytes.to_vec()));
            }
        }
    }

    /// Runs to `limit`, reaping closed server connections as the driver
    /// does; `done` may stop it earlier.
    fn run_until(&mut self, limit: Instant, mut done: impl FnMut(&mut Lan) -> bool) {
        loop {
            self.steps += 1;
            assert!(self.steps < MAX_STEPS, "runaway simulation");
            self.flush();
            if done(self) {
                return;
            }
            let next = self
                .pipe
                .front()
                .map(|p| p.0)
                .into_iter()
                .chain(self.server.poll_timeout())
                .chain(self.clients.iter().filter_map(|(_, e)| e.poll_timeout()))
                .min();
            match next {
                Some(t) if t <= limit => self.now = self.now.max(t),
                _ => {
                    self.now = limit;
                    return;
                }
            }
            while self.pipe.front().is_some_and(|p| p.0 <= self.now) {
                let Some((_, from, to, bytes)) = self.pipe.pop_front() else {
                    break;
                };
                if to == SERVER {
                    self.server
                        .handle_datagram(self.now, FourTuple::from_remote(from), &bytes);
                } else if let Some((_, ep)) = self.clients.iter_mut().find(|(a, _)| *a == to) {
                    ep.handle_datagram(self.now, FourTuple::from_remote(from), &bytes);
                }
            }
            self.server.handle_timeout(self.now);
            for (_, ep) in &mut self.clients {
                ep.handle_timeout(self.now);
            }
            while self.server.accept().is_some() {}
            for h in self.server.handles() {
                if self.server.connection(h).is_some_and(|c| c.is_closed()) {
                    self.server.remove(h);
                }
            }
        }
    }

    /// The only connection of client `i`.
    fn conn(&self, i: usize) -> &Connection {
        let ep = &self.clients[i].1;
        ep.connection(ep.handles()[0]).unwrap()
    }

    /// Runs until client `i` is established or closed (at most 20 s).
    fn settle(&mut self, i: usize) {
        let limit = self.now + Duration::from_secs(20);
        self.run_until(limit, |l| {
            let c = l.conn(i);
            c.is_established() || c.is_closed()
        });
    }

    /// The events of client `i`'s connection.
    fn events(&mut self, i: usize) -> Vec<Event> {
        let ep = &mut self.clients[i].1;
        let h = ep.handles()[0];
        let c = ep.connection_mut(h).unwrap();
        std::iter::from_fn(|| c.poll_event()).collect()
    }

    /// Asserts client `i` was refused with `code` and `reason`.
    fn assert_refused(&mut self, i: usize, code: ErrorCode, reason: &str) {
        let evs = self.events(i);
        assert!(!evs.contains(&Event::Connected), "{evs:?}");
        assert_eq!(
            evs.last(),
            Some(&Event::Closed(CloseReason::Peer {
                code,
                reason: reason.into()
            }))
        );
    }
}

fn capped(total: usize, per_source: usize) -> Config {
    Config {
        max_connections: total,
        max_connections_per_source: per_source,
        ..Config::default()
    }
}

#[test]
fn one_address_cannot_take_more_than_its_share() {
    let mut lan = Lan::new(capped(16, 3));
    for port in 0..3 {
        let i = lan.connect(client_addr(1, 100 + port), Config::default(), false);
        lan.settle(i);
        assert!(lan.conn(i).is_established(), "client {i} within the cap");
    }
    // A fourth from the same host (another port) is refused at once...
    let i = lan.connect(client_addr(1, 200), Config::default(), false);
    lan.settle(i);
    assert!(lan.conn(i).is_closed());
    lan.assert_refused(i, ErrorCode::SERVER_BUSY, REASON_SERVER_FULL_SOURCE);
    assert!(REASON_SERVER_FULL_SOURCE.starts_with(REASON_SERVER_FULL_PREFIX));
    let st = lan.server.stats();
    assert_eq!((st.accepted, st.refused_full), (3, 1));
    assert_eq!(lan.server.connection_count(), 3, "the refusal kept nothing");
    // ...while another address still connects.
    let j = lan.connect(client_addr(2, 100), Config::default(), false);
    lan.settle(j);
    assert!(lan.conn(j).is_established());
    assert_eq!(lan.server.stats().accepted, 4);
}

#[test]
fn connections_this_endpoint_opened_do_not_count_against_a_source() {
    // A relay's endpoint is a server and a client at once: its own
    // connections to a next hop on host 1 must not refuse host 1's
    // sources (they still count towards the total).
    let mut lan = Lan::new(capped(16, 2));
    for port in 0..3 {
        lan.server
            .connect(lan.now, client_addr(1, 7000 + port))
            .expect("room for it");
    }
    for port in 0..2 {
        let i = lan.connect(client_addr(1, 100 + port), Config::default(), false);
        lan.settle(i);
        assert!(lan.conn(i).is_established(), "source {port} of host 1");
    }
    let i = lan.connect(client_addr(1, 200), Config::default(), false);
    lan.settle(i);
    lan.assert_refused(i, ErrorCode::SERVER_BUSY, REASON_SERVER_FULL_SOURCE);
}

#[test]
fn a_full_server_says_so() {
    let mut lan = Lan::new(capped(4, 4));
    for host in 1..=4 {
        let i = lan.connect(client_addr(host, 100), Config::default(), false);
        lan.settle(i);
        assert!(lan.conn(i).is_established());
    }
    let i = lan.connect(client_addr(9, 100), Config::default(), false);
    lan.settle(i);
    lan.assert_refused(i, ErrorCode::SERVER_BUSY, REASON_SERVER_FULL);
    let st = lan.server.stats();
    assert_eq!((st.accepted, st.refused_full), (4, 1));
    assert_eq!(lan.server.connection_count(), 4);
}

#[test]
fn silent_half_open_connections_go_away_and_stop_costing_sends() {
    let timeout = Duration::from_secs(3);
    let mut lan = Lan::new(Config {
        handshake_timeout: timeout,
        ..capped(8, 8)
    });
    // Eight parties complete the handshake and then say nothing.
    for host in 1..=8 {
        lan.connect(client_addr(host, 100), Config::default(), true);
    }
    let started = lan.now;
    lan.run_until(started + Duration::from_secs(1), |l| {
        l.server.stats().accepted == 8
    });
    assert_eq!(lan.server.stats().accepted, 8);
    assert_eq!(lan.server.connection_count(), 8, "the server is full");
    // Run well past the handshake timeout (but short of the idle timeout).
    lan.run_until(started + timeout + Duration::from_secs(2), |_| false);
    assert_eq!(lan.server.connection_count(), 0, "every slot is free again");
    // Each got one RETRY and at most MAX_HANDSHAKE_SENDS HANDSHAKEs.
    assert!(
        lan.sent_to_silent.len() <= 8 * (1 + MAX_HANDSHAKE_SENDS as usize),
        "{} sends",
        lan.sent_to_silent.len()
    );
    let deadline = started + DELAY + timeout + DELAY;
    assert!(
        lan.sent_to_silent.iter().all(|t| *t <= deadline),
        "nothing sent after the handshake timeout"
    );
    assert_eq!(lan.server.poll_timeout(), None, "no timers left to run");
    // A real client gets a slot now.
    let i = lan.connect(client_addr(20, 100), Config::default(), false);
    lan.settle(i);
    assert!(lan.conn(i).is_established());
}

#[test]
fn a_party_without_the_key_holds_no_slot() {
    let keyed = |k: u8| Config {
        psk: Some(Psk::from_bytes([k; 32])),
        ..capped(1, 1)
    };
    let mut lan = Lan::new(keyed(7));
    // Strangers with the wrong key, all from one host, and one without a
    // key: each is refused, and none takes the only slot.
    for port in 0..5 {
        let i = lan.connect(client_addr(1, 100 + port), keyed(8), false);
        lan.settle(i);
        lan.assert_refused(i, ErrorCode::AUTH_FAILED, REASON_KEY_MISMATCH);
        assert_eq!(lan.server.connection_count(), 0);
    }
    let st = lan.server.stats();
    assert_eq!((st.auth_failed, st.accepted, st.refused_full), (5, 0, 0));
    // The holder of the key, from that same host, gets the slot.
    let i = lan.connect(client_addr(1, 300), keyed(7), false);
    lan.settle(i);
    assert!(lan.conn(i).is_established() && lan.conn(i).is_authenticated());
}

#[test]
fn a_client_whose_handshakes_are_lost_is_answered_while_it_tries() {
    // Every timer-driven HANDSHAKE is lost, and one more: the client's
    // repeated INITIALs still get answers, so it gets in.
    let mut lan = Lan::new(Config {
        handshake_timeout: Duration::from_secs(60),
        ..capped(8, 8)
    });
    let from = client_addr(1, 100);
    lan.lose_handshakes
        .push((from, MAX_HANDSHAKE_SENDS as usize + 1));
    let i = lan.connect(from, Config::default(), false);
    lan.settle(i);
    assert!(lan.conn(i).is_established(), "{:?}", lan.events(i));
    assert_eq!(lan.lose_handshakes[0].1, 0, "every loss happened");
}

#[test]
fn a_client_that_outlives_its_handshake_hears_it_expired() {
    // Every HANDSHAKE is lost; the server gives up after its handshake
    // timeout, and the client's next INITIAL (a used cookie) is told so
    // instead of being dropped until the client's own timeout.
    let mut lan = Lan::new(Config {
        handshake_timeout: Duration::from_secs(1),
        ..capped(8, 8)
    });
    let from = client_addr(1, 100);
    lan.lose_handshakes.push((from, usize::MAX));
    let i = lan.connect(from, Config::default(), false);
    lan.settle(i);
    lan.assert_refused(i, ErrorCode::IDLE_TIMEOUT, REASON_HANDSHAKE_EXPIRED);
    assert_eq!(lan.server.connection_count(), 0);
}
