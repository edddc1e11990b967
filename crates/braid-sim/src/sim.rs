//! The simulator: links, routes and nodes on one virtual clock.
//!
//! Main type: [`Simulation`]. Build it from a [`crate::Scenario`] with
//! [`Simulation::new`], or by hand with [`Simulation::empty`] and
//! `add_link` / `add_route` / `add_node` / `bind_route` (how later issues
//! plug in transport connections and schedulers), then [`Simulation::run`]
//! (or [`Simulation::run_until`] in steps). The engine keeps plain counters
//! and series (per route [`RouteStats`], per link [`LinkStats`], per node
//! counters, [`SimStats`]); turning them into tables, JSON, CSV or SVG is
//! the report module's job (`Report::from_run`).
//!
//! # Model
//! A *route* is a chain of links that ends at one node; a node sends a
//! datagram by naming a route ([`crate::Transmit`]). The datagram enters the
//! first link's queue at once, is served, propagates, enters the next link,
//! and is finally handed to the route's destination node together with the
//! route id. Each route counts what it carried: sent, delivered, dropped
//! (queue or random), duplicates and one-way delay from hand-off to delivery.
//!
//! # Invariants
//! - Events run in (time, sequence) order ([`crate::event`]); nothing reads
//!   a clock or an unseeded RNG, so a run is a function of its inputs.
//! - Node timers are armed lazily: at most one live timer event per node plus
//!   stale ones from timers that moved earlier (ignored when they fire).

use crate::event::EventQueue;
use crate::link::SimLink;
use crate::node::{Datagram, LinkId, Node, NodeId, RouteId, Transmit, MAX_TRANSMITS_PER_POLL};
use crate::seed::rng_for;
use crate::stats::{BinSeries, DelayHistogram};
use braid_core::link::{Enqueued, LinkConfig, LinkStats};
use braid_core::{Duration, Instant};

/// Default width of report bins (throughput, delay, queue series).
pub const DEFAULT_BIN: Duration = Duration::from_millis(100);

/// A datagram travelling along a route.
#[derive(Clone, Debug)]
pub(crate) struct Packet {
    route: RouteId,
    /// Index of the next link to enter.
    hop: u32,
    sent_at: Instant,
    /// An extra copy made by a duplicating link.
    copy: bool,
    datagram: Datagram,
}

#[derive(Debug)]
enum Event {
    /// A node's timer.
    Timer(NodeId),
    /// Drain a node's transmit queue again (it hit the per-round bound).
    Poll(NodeId),
    /// A link finished serializing its packet in service.
    TxDone(LinkId),
    /// A packet reached the end of a hop (or was just sent, hop 0).
    Arrive(Packet),
}

/// Counters and series of one route.
#[derive(Clone, Debug)]
pub struct RouteStats {
    /// Datagrams handed to the route.
    pub sent_packets: u64,
    /// Bytes handed to the route.
    pub sent_bytes: u64,
    /// Datagrams delivered (first copies only).
    pub delivered_packets: u64,
    /// Bytes delivered (first copies only).
    pub delivered_bytes: u64,
    /// Extra copies delivered.
    pub duplicates: u64,
    /// Dropped at a full queue.
    pub queue_drops: u64,
    /// Lost at random on a link.
    pub random_losses: u64,
    /// One-way delay of delivered first copies.
    pub delay: DelayHistogram,
    /// Delivered bytes per report bin.
    pub delivered_series: BinSeries,
    /// Sum of delays (ns) per report bin.
    pub delay_sum_series: BinSeries,
    /// Delivered datagrams per report bin.
    pub delivered_count_series: BinSeries,
    /// Lost datagrams (queue or random) per report bin.
    pub lost_series: BinSeries,
}

impl RouteStats {
    fn new(bin: Duration) -> Self {
        RouteStats {
            sent_packets: 0,
            sent_bytes: 0,
            delivered_packets: 0,
            delivered_bytes: 0,
            duplicates: 0,
            queue_drops: 0,
            random_losses: 0,
            delay: DelayHistogram::new(),
            delivered_series: BinSeries::new(bin),
            delay_sum_series: BinSeries::new(bin),
            delivered_count_series: BinSeries::new(bin),
            lost_series: BinSeries::new(bin),
        }
    }
}

pub(crate) struct RouteState {
    pub name: String,
    pub links: Vec<LinkId>,
    pub dst: Option<NodeId>,
    pub stats: RouteStats,
}

pub(crate) struct NodeSlot {
    pub name: String,
    pub node: Box<dyn Node>,
    /// What the node asked for.
    timer: Option<Instant>,
    /// The earliest timer event in the queue that is still live.
    armed: Option<Instant>,
}

/// A flow as the report shows it: a name, a kind and its data routes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlowInfo {
    /// Name.
    pub name: String,
    /// Kind label (`greedy`, `cbr`, `trace`, or anything a caller chooses).
    pub kind: String,
    /// Routes whose deliveries count as this flow's data.
    pub routes: Vec<RouteId>,
    /// When the flow starts.
    pub start: Instant,
    /// When it stops (the end of the run if later).
    pub stop: Instant,
}

/// Simulator-wide counters.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct SimStats {
    /// Events processed.
    pub events: u64,
    /// Datagrams sent on an unknown route or to a route with no destination.
    pub unroutable: u64,
    /// Events refused because the event queue was full.
    pub refused_events: u64,
}

/// A deterministic network simulation (see the module docs).
pub struct Simulation {
    pub(crate) name: String,
    pub(crate) seed: u64,
    pub(crate) end: Instant,
    pub(crate) bin: Duration,
    now: Instant,
    started: bool,
    queue: EventQueue<Event>,
    pub(crate) links: Vec<SimLink<Packet>>,
    pub(crate) routes: Vec<RouteState>,
    pub(crate) nodes: Vec<NodeSlot>,
    pub(crate) flows: Vec<FlowInfo>,
    pub(crate) stats: SimStats,
}

impl std::fmt::Debug for Simulation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Simulation")
            .field("name", &self.name)
            .field("seed", &self.seed)
            .field("now", &self.now)
            .field("end", &self.end)
            .field("links", &self.links.len())
            .field("routes", &self.routes.len())
            .field("nodes", &self.nodes.len())
            .finish()
    }
}

impl Simulation {
    /// An empty network that will run for `duration`, with report bins of
    /// `bin` (zero means [`DEFAULT_BIN`]).
    pub fn empty(name: impl Into<String>, seed: u64, duration: Duration, bin: Duration) -> Self {
        Simulation {
            name: name.into(),
            seed,
            end: Instant::ZERO + duration,
            bin: if bin.is_zero() { DEFAULT_BIN } else { bin },
            now: Instant::ZERO,
            started: false,
            queue: EventQueue::new(),
            links: Vec::new(),
            routes: Vec::new(),
            nodes: Vec::new(),
            flows: Vec::new(),
            stats: SimStats::default(),
        }
    }

    /// Adds a link; its impairments draw from a generator seeded with the
    /// run's seed and the link's name.
    pub fn add_link(&mut self, cfg: LinkConfig) -> LinkId {
        let rng = rng_for(self.seed, &format!("link:{}", cfg.name));
        self.links.push(SimLink::new(cfg, rng, self.bin));
        LinkId(self.links.len() as u32 - 1)
    }

    /// The id of the link called `name`.
    pub fn link_id(&self, name: &str) -> Option<LinkId> {
        self.links
            .iter()
            .position(|l| l.cfg().name == name)
            .map(|i| LinkId(i as u32))
    }

    /// Adds a route over `links` (in order; may be empty for a direct
    /// hand-off). Bind its destination with [`Simulation::bind_route`].
    /// Unknown link ids are dropped.
    pub fn add_route(&mut self, name: impl Into<String>, links: Vec<LinkId>) -> RouteId {
        let links = links
            .into_iter()
            .filter(|l| (l.0 as usize) < self.links.len())
            .collect();
        self.routes.push(RouteState {
            name: name.into(),
            links,
            dst: None,
            stats: RouteStats::new(self.bin),
        });
        RouteId(self.routes.len() as u32 - 1)
    }

    /// Adds a route over the links called `links` (in order); `None` if a
    /// name is unknown. For plugging nodes into a network built from a
    /// scenario: `sim.add_route_by_names("fwd", &["access", "bottleneck"])`.
    pub fn add_route_by_names(
        &mut self,
        name: impl Into<String>,
        links: &[&str],
    ) -> Option<RouteId> {
        let ids = links
            .iter()
            .map(|l| self.link_id(l))
            .collect::<Option<Vec<_>>>()?;
        Some(self.add_route(name, ids))
    }

    /// Adds a node. It is first polled at time zero.
    pub fn add_node(&mut self, name: impl Into<String>, node: Box<dyn Node>) -> NodeId {
        self.nodes.push(NodeSlot {
            name: name.into(),
            node,
            timer: None,
            armed: None,
        });
        NodeId(self.nodes.len() as u32 - 1)
    }

    /// Makes `dst` the receiver of everything sent on `route`.
    pub fn bind_route(&mut self, route: RouteId, dst: NodeId) {
        if let Some(r) = self.routes.get_mut(route.0 as usize) {
            r.dst = Some(dst);
        }
    }

    /// Declares a flow for the report.
    pub fn add_flow(&mut self, flow: FlowInfo) {
        self.flows.push(flow);
    }

    /// The current virtual time.
    pub fn now(&self) -> Instant {
        self.now
    }

    /// When the run ends.
    pub fn end(&self) -> Instant {
        self.end
    }

    /// The seed of this run.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// The id of the route called `name`.
    pub fn route_id(&self, name: &str) -> Option<RouteId> {
        self.routes
            .iter()
            .position(|r| r.name == name)
            .map(|i| RouteId(i as u32))
    }

    /// Bytes waiting in a link's queue now.
    pub fn link_queue_bytes(&self, id: LinkId) -> Option<u64> {
        self.links.get(id.0 as usize).map(|l| l.queued_bytes())
    }

    /// A link's counters.
    pub fn link_stats(&self, id: LinkId) -> Option<&LinkStats> {
        self.links.get(id.0 as usize).map(|l| l.stats())
    }

    /// A route's counters.
    pub fn route_stats(&self, id: RouteId) -> Option<&RouteStats> {
        self.routes.get(id.0 as usize).map(|r| &r.stats)
    }

    /// The node `id` as its concrete type `T` (`None` if `id` is unknown or
    /// the node is not a `T`).
    pub fn node<T: Node + 'static>(&self, id: NodeId) -> Option<&T> {
        // Deref the box first: `Box<dyn Node>` is itself `Any`.
        let node: &dyn Node = &*self.nodes.get(id.0 as usize)?.node;
        node.as_any().downcast_ref()
    }

    /// The node `id` as its concrete type `T`, to hand it a command between
    /// [`Simulation::run_until`] steps. The simulator polls it again (drains
    /// its transmits and re-reads its timeout) at the current instant when
    /// the run continues.
    pub fn node_mut<T: Node + 'static>(&mut self, id: NodeId) -> Option<&mut T> {
        let now = self.now;
        let slot = self.nodes.get_mut(id.0 as usize)?;
        let node: &mut dyn Node = &mut *slot.node;
        let node = node.as_any_mut().downcast_mut::<T>()?;
        self.queue.push(now, Event::Poll(id));
        Some(node)
    }

    /// The id of the node called `name`.
    pub fn node_id(&self, name: &str) -> Option<NodeId> {
        self.nodes
            .iter()
            .position(|n| n.name == name)
            .map(|i| NodeId(i as u32))
    }

    /// A node's counters ([`Node::counters`]).
    pub fn node_counters(&self, id: NodeId) -> Vec<(&'static str, u64)> {
        self.nodes
            .get(id.0 as usize)
            .map(|n| n.node.counters())
            .unwrap_or_default()
    }

    /// Simulator-wide counters.
    pub fn stats(&self) -> &SimStats {
        &self.stats
    }

    /// Runs to the end and hands the finished simulation back, for its
    /// results to be read (e.g. by `Report::from_run`).
    pub fn run(mut self) -> Self {
        let end = self.end;
        tracing::info!(scenario = %self.name, seed = self.seed, end = ?end, "simulation starts");
        self.run_until(end);
        tracing::info!(
            events = self.stats.events,
            unroutable = self.stats.unroutable,
            refused_events = self.stats.refused_events,
            "simulation done"
        );
        self
    }

    /// Processes every event due at or before `until` (capped at the end of
    /// the run).
    pub fn run_until(&mut self, until: Instant) {
        let until = until.min(self.end);
        if !self.started {
            self.started = true;
            for i in 0..self.nodes.len() {
                self.service_node(NodeId(i as u32));
            }
        }
        while let Some(t) = self.queue.peek_time() {
            if t > until {
                break;
            }
            let Some((t, ev)) = self.queue.pop() else {
                break;
            };
            self.now = t;
            self.stats.events += 1;
            match ev {
                Event::Timer(n) => self.on_timer(n, t),
                Event::Poll(n) => self.service_node(n),
                Event::TxDone(l) => self.on_tx_done(l),
                Event::Arrive(p) => self.on_arrive(p),
            }
        }
        self.now = self.now.max(until);
        self.stats.refused_events = self.queue.refused();
    }

    fn push(&mut self, at: Instant, ev: Event) {
        if !self.queue.push(at, ev) && self.queue.refused() == 1 {
            tracing::warn!(
                "event queue full; events are being refused and results will be incomplete"
            );
        }
    }

    fn on_timer(&mut self, n: NodeId, t: Instant) {
        let slot = &mut self.nodes[n.0 as usize];
        if slot.armed != Some(t) {
            return; // stale
        }
        slot.armed = None;
        match slot.timer {
            Some(want) if want <= t => {
                slot.timer = None;
                slot.node.handle_timeout(t);
                self.service_node(n);
            }
            Some(want) => {
                slot.armed = Some(want);
                self.push(want, Event::Timer(n));
            }
            None => {}
        }
    }

    /// Drains a node's transmits and re-arms its timer.
    fn service_node(&mut self, n: NodeId) {
        let now = self.now;
        let mut drained = false;
        for _ in 0..MAX_TRANSMITS_PER_POLL {
            match self.nodes[n.0 as usize].node.poll_transmit(now) {
                Some(tx) => self.inject(tx),
                None => {
                    drained = true;
                    break;
                }
            }
        }
        if !drained {
            self.push(now, Event::Poll(n));
        }
        let slot = &mut self.nodes[n.0 as usize];
        let want = slot.node.poll_timeout().map(|t| t.max(now));
        slot.timer = want;
        if let Some(want) = want {
            if slot.armed.is_none_or(|a| want < a) {
                slot.armed = Some(want);
                self.push(want, Event::Timer(n));
            }
        }
    }

    fn inject(&mut self, tx: Transmit) {
        let Some(route) = self.routes.get_mut(tx.route.0 as usize) else {
            self.stats.unroutable += 1;
            tracing::debug!(route = tx.route.0, "datagram on an unknown route");
            return;
        };
        route.stats.sent_packets += 1;
        route.stats.sent_bytes += tx.datagram.wire_len() as u64;
        let p = Packet {
            route: tx.route,
            hop: 0,
            sent_at: self.now,
            copy: false,
            datagram: tx.datagram,
        };
        if route.links.is_empty() {
            // Direct hand-off: through the queue, so a node is never
            // re-entered from inside its own poll loop.
            let now = self.now;
            self.push(now, Event::Arrive(p));
        } else {
            self.forward(p);
        }
    }

    /// Moves a packet that is at the start of hop `p.hop` onwards.
    fn forward(&mut self, mut p: Packet) {
        let route = &self.routes[p.route.0 as usize];
        match route.links.get(p.hop as usize).copied() {
            Some(l) => {
                p.hop += 1;
                let size = p.datagram.wire_len();
                let now = self.now;
                match self.links[l.0 as usize].enqueue(now, size, p) {
                    Enqueued::Started(Some(t)) => self.push(t, Event::TxDone(l)),
                    Enqueued::Started(None) => {
                        tracing::debug!(link = l.0, "link has no capacity ever; packet stalls");
                    }
                    Enqueued::Queued => {}
                    Enqueued::Dropped(p) => {
                        let r = &mut self.routes[p.route.0 as usize].stats;
                        r.queue_drops += 1;
                        r.lost_series.add(now, 1);
                    }
                }
            }
            None => self.deliver(p),
        }
    }

    fn on_tx_done(&mut self, l: LinkId) {
        let now = self.now;
        let Some(dep) = self.links[l.0 as usize].complete(now) else {
            return;
        };
        if let Some(Some(t)) = dep.next_finish {
            self.push(t, Event::TxDone(l));
        }
        if dep.lost {
            let r = &mut self.routes[dep.packet.route.0 as usize].stats;
            r.random_losses += 1;
            r.lost_series.add(now, 1);
            return;
        }
        if dep.duplicate {
            let mut copy = dep.packet.clone();
            copy.copy = true;
            self.push(dep.arrive_at, Event::Arrive(dep.packet));
            self.push(dep.arrive_at, Event::Arrive(copy));
        } else {
            self.push(dep.arrive_at, Event::Arrive(dep.packet));
        }
    }

    fn on_arrive(&mut self, p: Packet) {
        self.forward(p);
    }

    fn deliver(&mut self, p: Packet) {
        let now = self.now;
        let route = &mut self.routes[p.route.0 as usize];
        let Some(dst) = route.dst else {
            self.stats.unroutable += 1;
            return;
        };
        let s = &mut route.stats;
        if p.copy {
            s.duplicates += 1;
        } else {
            let delay = now - p.sent_at;
            s.delivered_packets += 1;
            s.delivered_bytes += p.datagram.wire_len() as u64;
            s.delay.record(delay);
            s.delivered_series.add(now, p.datagram.wire_len() as u64);
            s.delay_sum_series.add(now, delay.as_nanos());
            s.delivered_count_series.add(now, 1);
        }
        self.nodes[dst.0 as usize]
            .node
            .handle_datagram(now, p.route, p.datagram);
        self.service_node(dst);
    }
}
