//! A source and a sink joined by in-memory paths with a one-way delay and
//! loss, driven in virtual time: the session's two-endpoint harness (as
//! quinn-proto's `Pair`). Tests only.
//!
//! Path `i` runs between `10.0.i.1:4433` (source) and `10.0.i.2:4433`
//! (sink). Each direction of it delays every datagram by the path's delay
//! and drops every `loss_every`-th one (deterministic, so a test replays
//! exactly); a cut path drops everything both ways until it is restored.
//! [`Net::run_for`] jumps from event to event (the next arrival or either
//! side's next timer), so a minute of session costs what its datagrams
//! cost. Messages the sink hands over are kept in [`Net::got`].

use super::{Delivered, Session, SessionConfig, SessionId};
use crate::id::PathId;
use crate::time::{Duration, Instant};
use crate::transport::FourTuple;
use crate::units::Bandwidth;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::net::SocketAddr;

/// How much waiting a rate-limited link queues before it drops.
pub(super) const QUEUE: Duration = Duration::from_millis(20);

/// One path's behaviour (both directions).
#[derive(Debug, Clone, Copy)]
pub(super) struct LinkSpec {
    /// One-way delay.
    pub delay: Duration,
    /// Every this-many-th datagram is dropped (`None`: none is).
    pub loss_every: Option<u32>,
    /// The link's rate: a datagram occupies it for its size at this rate
    /// before its delay starts (`None`: no limit), behind a drop-tail queue
    /// of [`QUEUE`] of it.
    pub rate: Option<Bandwidth>,
}

impl LinkSpec {
    /// A lossless path with this one-way delay.
    pub fn delay_ms(ms: u64) -> LinkSpec {
        LinkSpec {
            delay: Duration::from_millis(ms),
            loss_every: None,
            rate: None,
        }
    }

    /// The same at `rate`.
    pub fn at_rate(mut self, rate: Bandwidth) -> LinkSpec {
        self.rate = Some(rate);
        self
    }

    /// The same, dropping every `n`-th datagram each way.
    pub fn losing_every(mut self, n: u32) -> LinkSpec {
        self.loss_every = Some(n.max(2));
        self
    }
}

#[derive(Debug)]
struct Link {
    spec: LinkSpec,
    cut: bool,
    sent: [u32; 2],
    /// When each direction is free again (with a rate).
    busy_until: [Instant; 2],
}

/// A datagram in flight: when it arrives, a tie-breaking sequence, towards
/// the sink or not, over which path, and its bytes.
type Flight = Reverse<(Instant, u64, bool, usize, Vec<u8>)>;

/// The harness (see the module docs).
#[derive(Debug)]
pub(super) struct Net {
    /// The source.
    pub source: Session,
    /// The sink.
    pub sink: Session,
    /// The time now.
    pub now: Instant,
    /// What the sink's application took, in order.
    pub got: Vec<Delivered>,
    /// Datagrams dropped by loss or a cut.
    pub dropped: u64,
    links: Vec<Link>,
    flights: BinaryHeap<Flight>,
    seq: u64,
    buf: Vec<u8>,
}

fn source_addr(i: usize) -> SocketAddr {
    SocketAddr::from(([10, 0, i as u8, 1], 4433))
}

fn sink_addr(i: usize) -> SocketAddr {
    SocketAddr::from(([10, 0, i as u8, 2], 4433))
}

impl Net {
    /// A source with `config` and a sink with `sink_config`, one path per
    /// `links` entry, added at time zero.
    pub fn new(config: SessionConfig, sink_config: SessionConfig, links: &[LinkSpec]) -> Net {
        let now = Instant::ZERO;
        let mut source =
            Session::source(SessionId(11), config, [3; 32], now).expect("a valid source config");
        let sink = Session::sink(sink_config, [4; 32], now).expect("a valid sink config");
        for i in 0..links.len() {
            source
                .add_path(
                    now,
                    PathId(i as u32),
                    FourTuple::new(source_addr(i), sink_addr(i)),
                )
                .expect("a fresh path");
        }
        Net {
            source,
            sink,
            now,
            got: Vec::new(),
            dropped: 0,
            links: links
                .iter()
                .map(|&spec| Link {
                    spec,
                    cut: false,
                    sent: [0; 2],
                    busy_until: [Instant::ZERO; 2],
                })
                .collect(),
            flights: BinaryHeap::new(),
            seq: 0,
            buf: Vec::with_capacity(2048),
        }
    }

    /// Cuts path `i` both ways (`false`: restores it).
    pub fn set_cut(&mut self, i: usize, cut: bool) {
        self.links[i].cut = cut;
    }

    /// Runs the two sides for `d` of virtual time.
    pub fn run_for(&mut self, d: Duration) {
        let end = self.now + d;
        // Passes at one instant: a side whose timer stays due after it ran
        // would spin here forever; fail instead.
        let mut same = (self.now, 0u32);
        loop {
            if same.0 == self.now {
                same.1 += 1;
                assert!(same.1 < 100_000, "the sessions spin at {:?}", self.now);
            } else {
                same = (self.now, 0);
            }
            self.transmit();
            let next = [
                self.flights.peek().map(|f| f.0 .0),
                self.source.poll_timeout(),
                self.sink.poll_timeout(),
            ]
            .into_iter()
            .flatten()
            .min()
            .unwrap_or(end)
            .max(self.now);
            if next > end {
                self.now = end;
                break;
            }
            self.now = next;
            while self.flights.peek().is_some_and(|f| f.0 .0 <= self.now) {
                let Some(Reverse((_, _, to_sink, i, data))) = self.flights.pop() else {
                    break;
                };
                if to_sink {
                    let path = FourTuple::new(sink_addr(i), source_addr(i));
                    self.sink.handle_datagram(self.now, path, &data);
                } else {
                    let path = FourTuple::new(source_addr(i), sink_addr(i));
                    self.source.handle_datagram(self.now, path, &data);
                }
            }
            if self.source.poll_timeout().is_some_and(|t| t <= self.now) {
                self.source.handle_timeout(self.now);
            }
            if self.sink.poll_timeout().is_some_and(|t| t <= self.now) {
                self.sink.handle_timeout(self.now);
            }
            while let Some(m) = self.sink.recv(self.now) {
                self.got.push(m);
            }
        }
    }

    /// Puts every datagram either side has to send on its path.
    fn transmit(&mut self) {
        loop {
            let mut moved = false;
            while let Some(t) = self.source.poll_transmit(self.now, &mut self.buf) {
                let i = self.path_of(t.path.remote, true);
                self.fly(i, true);
                moved = true;
            }
            while let Some(t) = self.sink.poll_transmit(self.now, &mut self.buf) {
                let i = self.path_of(t.path.remote, false);
                self.fly(i, false);
                moved = true;
            }
            if !moved {
                break;
            }
        }
    }

    /// The path whose far end is `remote`.
    fn path_of(&self, remote: SocketAddr, to_sink: bool) -> usize {
        (0..self.links.len())
            .find(|&i| {
                remote
                    == if to_sink {
                        sink_addr(i)
                    } else {
                        source_addr(i)
                    }
            })
            .expect("a datagram to an address of the harness")
    }

    fn fly(&mut self, i: usize, to_sink: bool) {
        let link = &mut self.links[i];
        let dir = usize::from(to_sink);
        link.sent[dir] += 1;
        let lost = link
            .spec
            .loss_every
            .is_some_and(|n| link.sent[dir] % n == 0);
        if link.cut || lost {
            self.dropped += 1;
            return;
        }
        let mut leaves = self.now;
        if let Some(rate) = link.spec.rate {
            let start = link.busy_until[dir].max(self.now);
            if start.saturating_duration_since(self.now) > QUEUE {
                // The queue is full: drop-tail.
                self.dropped += 1;
                return;
            }
            leaves = start + rate.transmit_time(self.buf.len() as u64);
            link.busy_until[dir] = leaves;
        }
        self.seq += 1;
        self.flights.push(Reverse((
            leaves + link.spec.delay,
            self.seq,
            to_sink,
            i,
            self.buf.clone(),
        )));
    }
}
