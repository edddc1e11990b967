//! Turning a [`Scenario`] into a ready-to-run [`Simulation`].
//!
//! One link per `[[link]]`; per flow a data route named after the flow, a
//! source node `<flow>.src`, a sink node `<flow>.sink`, and for greedy flows
//! an ack route `<flow>.ack`. Synthetic capacities are drawn here, from the
//! run's seed and the link's name (`capacity:<link>`), so a new seed gives a
//! new synthetic path.

use crate::node::LinkId;
use crate::scenario::{
    CapacitySpec, FlowKind, LinkSpec, QueueSpec, Scenario, ScenarioError, ScenarioErrorKind,
};
use crate::seed::rng_for;
use crate::sim::{FlowInfo, Simulation};
use crate::sink::Sink;
use crate::sources::{GreedyConfig, GreedySource, PacedSource};
use braid_core::link::{default_queue_bytes, LinkConfig};
use braid_core::link::{Capacity, CapacityError};
use braid_core::{Duration, Instant};

/// The capacity a spec describes; a synthetic one is drawn from `seed` and
/// the link's name (`capacity:<name>`), long enough for `duration`.
pub(crate) fn realise_capacity(
    spec: &CapacitySpec,
    seed: u64,
    name: &str,
    duration: Duration,
) -> Result<Capacity, CapacityError> {
    Ok(match spec {
        CapacitySpec::Constant(r) => Capacity::Constant(*r),
        CapacitySpec::Trace { schedule, .. } => Capacity::Schedule(schedule.clone()),
        CapacitySpec::Synthetic(spec) => {
            let mut rng = rng_for(seed, &format!("capacity:{name}"));
            Capacity::Schedule(spec.generate(duration, &mut rng)?)
        }
    })
}

/// A queue spec in bytes for a link of `capacity`.
pub(crate) fn queue_bytes(queue: QueueSpec, capacity: &Capacity) -> u64 {
    match queue {
        QueueSpec::Default => default_queue_bytes(capacity),
        QueueSpec::Bytes(b) => b,
        QueueSpec::Time(d) => capacity.mean().bytes_in(d),
    }
}

impl Scenario {
    /// The link model of `[[link]]` `l` as the simulator runs it (a
    /// synthetic capacity drawn from the scenario's seed and the link's
    /// name). `braid emulate --scenario` runs the same configuration on a
    /// real kernel.
    ///
    /// # Errors
    /// A synthetic capacity that cannot be drawn (too many steps for the run).
    pub fn link_config(&self, l: &LinkSpec) -> Result<LinkConfig, ScenarioError> {
        let capacity =
            realise_capacity(&l.capacity, self.seed, &l.name, self.duration).map_err(|e| {
                ScenarioError {
                    file: self.file.clone(),
                    line: None,
                    kind: ScenarioErrorKind::Value,
                    message: format!("link `{}`: {e}", l.name),
                }
            })?;
        let queue_bytes = queue_bytes(l.queue, &capacity);
        Ok(LinkConfig {
            name: l.name.clone(),
            capacity,
            delay: l.delay,
            queue_bytes,
            loss: l.loss,
            duplicate: l.duplicate,
            reorder: l.reorder,
            reorder_delay: l.reorder_delay,
            outages: Vec::new(),
        })
    }
}

impl Simulation {
    /// Builds the network and traffic of `scenario`, seeded with its seed.
    ///
    /// # Errors
    /// A synthetic capacity that cannot be drawn (too many steps for the run).
    pub fn new(scenario: &Scenario) -> Result<Simulation, ScenarioError> {
        let mut sim = Simulation::empty(
            scenario.name.clone(),
            scenario.seed,
            scenario.duration,
            scenario.bin,
        );
        let mut link_ids: Vec<LinkId> = Vec::with_capacity(scenario.links.len());
        for l in &scenario.links {
            link_ids.push(sim.add_link(scenario.link_config(l)?));
        }
        let ids = |route: &[usize]| route.iter().map(|&i| link_ids[i]).collect::<Vec<_>>();
        for f in &scenario.flows {
            let start = Instant::ZERO + f.start;
            let stop = Instant::ZERO + f.stop;
            let data = sim.add_route(f.name.clone(), ids(&f.route));
            match &f.kind {
                FlowKind::Greedy {
                    ack_route,
                    queue_target,
                    window,
                    ack_size,
                } => {
                    let ack = sim.add_route(format!("{}.ack", f.name), ids(ack_route));
                    let src = sim.add_node(
                        format!("{}.src", f.name),
                        Box::new(GreedySource::new(
                            data,
                            GreedyConfig {
                                packet: f.packet,
                                start,
                                stop,
                                queue_target: *queue_target,
                                window: *window,
                            },
                        )),
                    );
                    let sink = sim.add_node(
                        format!("{}.sink", f.name),
                        Box::new(Sink::new(Some(ack), *ack_size)),
                    );
                    sim.bind_route(data, sink);
                    sim.bind_route(ack, src);
                }
                FlowKind::Cbr { rate } => {
                    let src =
                        PacedSource::new(data, f.packet, Capacity::Constant(*rate), start, stop);
                    sim.add_node(format!("{}.src", f.name), Box::new(src));
                    let sink =
                        sim.add_node(format!("{}.sink", f.name), Box::new(Sink::new(None, 0)));
                    sim.bind_route(data, sink);
                }
                FlowKind::Trace { schedule, .. } => {
                    let src = PacedSource::new(
                        data,
                        f.packet,
                        Capacity::Schedule(schedule.clone()),
                        start,
                        stop,
                    );
                    sim.add_node(format!("{}.src", f.name), Box::new(src));
                    let sink =
                        sim.add_node(format!("{}.sink", f.name), Box::new(Sink::new(None, 0)));
                    sim.bind_route(data, sink);
                }
            }
            sim.add_flow(FlowInfo {
                name: f.name.clone(),
                kind: f.kind.label().to_string(),
                routes: vec![data],
                start,
                stop,
            });
        }
        Ok(sim)
    }
}
