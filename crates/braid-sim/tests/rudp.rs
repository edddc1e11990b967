//! braid's RUDP transport (`braid_core::transport`) driven by braid-sim:
//! a [`Node`] adapter around a transport `Endpoint`, and issue 3's
//! simulation checks (20 Mbit/s, 30 ms RTT, random loss; reliable data
//! intact; goodput against a Reno model).
//!
//! The adapter maps each simulated route to a synthetic socket address:
//! a node sends to its peer on its outgoing route and learns the sender of
//! an arriving datagram from the route it came on.

use braid_core::transport::{Config, ConnectionHandle, Endpoint, SendOptions, StreamId};
use braid_core::{Bandwidth, Duration, Instant};
use braid_sim::{Capacity, Datagram, FlowInfo, LinkConfig, Node, RouteId, Simulation, Transmit};
use std::net::SocketAddr;

fn addr(n: u8) -> SocketAddr {
    SocketAddr::from(([10, 0, 0, n], 4433))
}

/// What the application on a node does.
enum App {
    /// Sends `total` bytes of a deterministic pattern as reliable messages.
    Sender {
        total: u64,
        queued: u64,
        conn: Option<ConnectionHandle>,
    },
    /// Receives, checks the pattern, and records when the last byte came.
    Receiver {
        got: u64,
        intact: bool,
        done_at: Option<Instant>,
    },
}

/// A transport endpoint as a simulator node.
struct RudpNode {
    ep: Endpoint,
    out: RouteId,
    peer: SocketAddr,
    app: App,
    buf: Vec<u8>,
}

const MSG: u64 = 16 << 10;

fn pattern(offset: u64, len: u64) -> Vec<u8> {
    (offset..offset + len).map(|i| (i % 251) as u8).collect()
}

impl RudpNode {
    fn run_app(&mut self, now: Instant) {
        match &mut self.app {
            App::Sender {
                total,
                queued,
                conn,
            } => {
                let Some(h) = *conn else { return };
                let Some(c) = self.ep.connection_mut(h) else {
                    return;
                };
                while *queued < *total && c.queued_bytes() < 1 << 20 {
                    let len = MSG.min(*total - *queued);
                    c.send(
                        now,
                        StreamId(0),
                        pattern(*queued, len),
                        SendOptions::RELIABLE,
                    )
                    .expect("queue has room");
                    *queued += len;
                }
            }
            App::Receiver {
                got,
                intact,
                done_at,
            } => {
                if let Some(h) = self.ep.accept() {
                    let _ = h;
                }
                for h in self.ep.handles() {
                    let Some(c) = self.ep.connection_mut(h) else {
                        continue;
                    };
                    while let Some(m) = c.recv(now) {
                        let len = m.data.len() as u64;
                        *intact &= m.data == pattern(*got, len);
                        *got += len;
                        *done_at = Some(now);
                    }
                }
            }
        }
    }
}

impl Node for RudpNode {
    fn handle_datagram(&mut self, now: Instant, _route: RouteId, d: Datagram) {
        self.ep.handle_datagram(now, self.peer, d.data());
        self.run_app(now);
    }

    fn handle_timeout(&mut self, now: Instant) {
        self.ep.handle_timeout(now);
        self.run_app(now);
    }

    fn poll_transmit(&mut self, now: Instant) -> Option<Transmit> {
        if let App::Sender { conn: None, .. } = self.app {
            let h = self.ep.connect(now, self.peer).expect("room");
            self.app = App::Sender {
                total: match self.app {
                    App::Sender { total, .. } => total,
                    _ => 0,
                },
                queued: 0,
                conn: Some(h),
            };
            self.run_app(now);
        }
        let t = self.ep.poll_transmit(now, &mut self.buf)?;
        Some(Transmit {
            route: self.out,
            datagram: Datagram::from_bytes(self.buf[..t.size].to_vec()),
        })
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.ep.poll_timeout()
    }
}

/// A sender and a receiver over one bottleneck each way; returns
/// (bytes received, intact, time of the last byte).
fn transfer(loss: f64, total: u64, secs: u64) -> (u64, bool, Option<Instant>) {
    let mut sim = Simulation::empty("rudp", 5, Duration::from_secs(secs), Duration::ZERO);
    let mut fwd = LinkConfig::new(
        "fwd",
        Capacity::Constant(Bandwidth::from_mbps(20)),
        Duration::from_millis(15),
    );
    fwd.loss = loss;
    let rev = LinkConfig::new(
        "rev",
        Capacity::Constant(Bandwidth::from_mbps(20)),
        Duration::from_millis(15),
    );
    let lf = sim.add_link(fwd);
    let lr = sim.add_link(rev);
    let ab = sim.add_route("a>b", vec![lf]);
    let ba = sim.add_route("b>a", vec![lr]);
    let mut cfg = Config::default();
    if std::env::var("RUDP_NEWRENO").is_ok() {
        cfg.congestion = braid_core::transport::CongestionKind::NewReno;
    }
    let a = sim.add_node(
        "sender",
        Box::new(RudpNode {
            ep: Endpoint::new(cfg.clone(), [1; 32], false).unwrap(),
            out: ab,
            peer: addr(2),
            app: App::Sender {
                total,
                queued: 0,
                conn: None,
            },
            buf: Vec::new(),
        }),
    );
    let b = sim.add_node(
        "receiver",
        Box::new(RudpNode {
            ep: Endpoint::new(cfg, [2; 32], true).unwrap(),
            out: ba,
            peer: addr(1),
            app: App::Receiver {
                got: 0,
                intact: true,
                done_at: None,
            },
            buf: Vec::new(),
        }),
    );
    sim.bind_route(ab, b);
    sim.bind_route(ba, a);
    sim.add_flow(FlowInfo {
        name: "rudp".into(),
        kind: "custom".into(),
        routes: vec![ab],
        start: Instant::ZERO,
        stop: Instant::ZERO + Duration::from_secs(secs),
    });
    sim.run_until(Instant::ZERO + Duration::from_secs(secs));
    if std::env::var("RUDP_DEBUG").is_ok() {
        let sa = sim.node::<RudpNode>(a).unwrap();
        let h = sa.ep.handles()[0];
        eprintln!("{:?}", sa.ep.connection(h).unwrap().stats());
        eprintln!("{:?}", sim.link_stats(lf).unwrap());
    }
    match &sim.node::<RudpNode>(b).unwrap().app {
        App::Receiver {
            got,
            intact,
            done_at,
        } => (*got, *intact, *done_at),
        _ => unreachable!("node b is the receiver"),
    }
}

#[test]
fn reliable_data_crosses_a_lossy_20_mbit_path_intact() {
    let total = 4 << 20;
    let (got, intact, _) = transfer(0.01, total, 60);
    assert!(intact, "bytes differ from what was sent");
    assert_eq!(got, total);
}

/// Goodput with 1 % random loss against the Mathis et al. Reno model,
/// `MSS / RTT · sqrt(3/2) / sqrt(p)` (about 4.6 Mbit/s here), with the
/// default controller (CUBIC). Deterministic virtual time, so this is a
/// check of the controller's behaviour, not of machine speed.
///
/// The model's constant assumes periodic loss; Bernoulli loss as simulated
/// here gives Reno-like controllers less (CUBIC about 90 % of the model,
/// NewReno about 81 %, payload-only goodput). The bound below catches
/// regressions; reaching the model itself is open work (issue 3).
/// `RUDP_NEWRENO=1` runs NewReno instead.
#[test]
fn goodput_under_random_loss_against_reno_model() {
    let secs = 60;
    let (got, intact, _) = transfer(0.01, 1 << 40, secs);
    assert!(intact);
    let goodput = got as f64 * 8.0 / secs as f64;
    let model = 1400.0 * 8.0 / 0.030 * (1.5f64).sqrt() / 0.01f64.sqrt();
    eprintln!(
        "rudp goodput {:.2} Mbit/s; Reno model {:.2} Mbit/s",
        goodput / 1e6,
        model / 1e6
    );
    assert!(goodput >= 0.75 * model, "{goodput} < 0.75 · {model}");
}
