//! Enforcement: what turns a provisioned reservation into kernel state and
//! removes it again (seed 004 §3 "resource-specific routines to enable and
//! cancel reservations"; issue 14 §3).
//!
//! The owner task hands the [`Enforcer`] every reservation a batch changed
//! ([`Enforcer::apply`]) with what should be in force ([`want`]): a
//! committed, provisioned, live reservation with a [`Binding`] on a resource
//! the broker enforces. The enforcer compares with what it applied and
//! creates, changes or removes:
//!
//! - network resources with a `device`: an htb class and a u32 filter
//!   ([`net`]);
//! - CPU resources: a cgroup with a quota and the process moved in ([`cpu`]).
//!
//! Release, terminate, passing the end time and failure all make [`want`]
//! `None`, which removes; a committed modification changes the class rate
//! or the quota. At start [`Enforcer::reconcile`] removes every class,
//! filter and group of a reservation no longer provisioned (a crash leaks
//! nothing) and applies the rest. An error here fails the reservation
//! (the owner task moves its life to `failed`, which removes what was made).
//!
//! Runs only with `braid broker --enforce` (root); [`Enforcer::new`] says in
//! one line what is missing (root, `tc`, htb, u32, a `cpu` cgroup).

pub mod cpu;
pub use crate::flow;
pub mod net;

use std::collections::BTreeMap;

use braid_core::reserve::{Class, ProvisionState, Reservation};
use braid_core::{Bandwidth, ReservationId};

pub use crate::flow::{Binding, Flow, FlowError};

use crate::config::{Config, ResourceKind};
use cpu::{Cgroups, CpuError};
use net::{Device, NetError};

/// Why enforcement failed, in one line.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EnforceError {
    /// Not running as root.
    #[error("--enforce needs root (to run tc and write cgroups); run the broker as root, or without --enforce")]
    NotRoot,
    /// A `tc` step failed.
    #[error(transparent)]
    Net(#[from] NetError),
    /// A cgroup step failed.
    #[error(transparent)]
    Cpu(#[from] CpuError),
    /// Two provisioned reservations map to one htb class.
    #[error("reservation {id}: its htb class is taken by reservation {other} on the same device")]
    ClassTaken {
        /// The reservation refused.
        id: u64,
        /// The one holding the class.
        other: u64,
    },
}

/// What should be in force for one reservation.
#[derive(Debug, Clone, PartialEq)]
pub struct Want {
    /// The resource.
    pub resource: String,
    /// The rate in force.
    pub rate: Bandwidth,
    /// What it is enforced on.
    pub binding: Binding,
}

/// What should be in force for `r` with `binding`: `None` unless it is
/// live, committed and provisioned with something to enforce on. A
/// background reservation is enforced at its current `share` of the
/// premium capacity foreground leaves unused (seed 004 §5: B_i, never
/// below its committed minimum b_i), so that its class follows the
/// callbacks its holder follows; a foreground one at its committed rate.
pub fn want(r: &Reservation, binding: Option<&Binding>, share: Option<Bandwidth>) -> Option<Want> {
    let binding = binding.filter(|b| !b.is_empty())?;
    if !r.life.is_created() || r.provision != ProvisionState::Provisioned {
        return None;
    }
    let committed = r.committed.as_ref()?.rate;
    let rate = match (r.class, share) {
        (Class::Background, Some(share)) => share.max(committed),
        _ => committed,
    };
    Some(Want {
        resource: r.resource.clone(),
        rate,
        binding: binding.clone(),
    })
}

/// What was applied for a reservation.
#[derive(Debug, Clone, PartialEq)]
enum Applied {
    Net {
        resource: String,
        minor: u16,
        rate: Bandwidth,
        flow: Flow,
    },
    Cpu {
        cpus: f64,
        pid: u32,
    },
}

/// A CPU resource: how many CPUs its capacity stands for.
#[derive(Debug, Clone, Copy)]
struct CpuResource {
    capacity: Bandwidth,
    cpus: f64,
}

/// The broker's enforcement: devices, cgroups and what it applied.
///
/// Driving: [`Enforcer::reconcile`] once at start, then
/// [`Enforcer::apply`] for each reservation a batch changed. Every call
/// runs `tc` or writes cgroup files synchronously (milliseconds); the
/// owner task calls it on a blocking thread.
#[derive(Debug)]
pub struct Enforcer {
    devices: BTreeMap<String, Device>,
    cpus: BTreeMap<String, CpuResource>,
    cgroups: Option<Cgroups>,
    applied: BTreeMap<ReservationId, Applied>,
}

/// Whether this process runs as root (effective uid 0, from
/// /proc/self/status).
pub fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status").is_ok_and(|s| {
        s.lines()
            .find_map(|l| l.strip_prefix("Uid:"))
            .and_then(|l| l.split_whitespace().nth(1))
            == Some("0")
    })
}

impl Enforcer {
    /// Checks that enforcement can work here for `config`'s resources:
    /// root, `tc` (when a network resource has a device), a `cpu` cgroup
    /// (when there is a CPU resource).
    ///
    /// # Errors
    /// [`EnforceError`], saying what is missing.
    pub fn new(config: &Config) -> Result<Enforcer, EnforceError> {
        if !is_root() {
            return Err(EnforceError::NotRoot);
        }
        let mut devices = BTreeMap::new();
        let mut cpus = BTreeMap::new();
        let host_cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        for r in &config.resources {
            match (r.kind, &r.device) {
                (ResourceKind::Network, Some(d)) => {
                    devices.insert(
                        r.name.clone(),
                        Device {
                            name: d.clone(),
                            netns: r.netns.clone(),
                            link: r.link_rate(),
                            borrow: r.borrow.unwrap_or(true),
                            overhead: r.overhead.unwrap_or(net::DEFAULT_OVERHEAD_PERCENT) / 100.0,
                        },
                    );
                }
                (ResourceKind::Cpu, _) => {
                    let n = r.cpus.map_or(host_cpus, |c| c as usize);
                    cpus.insert(
                        r.name.clone(),
                        CpuResource {
                            capacity: r.capacity,
                            cpus: n as f64,
                        },
                    );
                }
                _ => {}
            }
        }
        if !devices.is_empty() {
            net::check_tc()?;
        }
        let cgroups = if cpus.is_empty() {
            None
        } else {
            Some(Cgroups::detect()?)
        };
        Ok(Enforcer {
            devices,
            cpus,
            cgroups,
            applied: BTreeMap::new(),
        })
    }

    /// At start: sets up each device's htb tree, removes every class,
    /// filter and cgroup the broker made for a reservation not in `wants`,
    /// and applies `wants`.
    ///
    /// # Errors
    /// A device or the cgroup parent that cannot be set up (the broker
    /// does not start); per-reservation failures are returned in the `Ok`
    /// list, to fail those reservations.
    pub fn reconcile(
        &mut self,
        wants: &BTreeMap<ReservationId, Want>,
    ) -> Result<Vec<(ReservationId, EnforceError)>, EnforceError> {
        for (resource, dev) in &self.devices {
            let reserved = self.reserved_on(resource, wants);
            dev.ensure_root(reserved)?;
            let keep: Vec<u16> = wants
                .iter()
                .filter(|(_, w)| &w.resource == resource && w.binding.flow.is_some())
                .map(|(id, _)| net::minor(*id))
                .collect();
            let (classes, prefs) = dev.listed()?;
            for m in classes.union(&prefs) {
                if !keep.contains(m) {
                    tracing::info!(device = %dev.name, class = m, "removing a stale reservation class");
                    dev.remove_class(*m)?;
                }
            }
        }
        if let Some(cg) = &self.cgroups {
            for id in cg.listed()? {
                let wanted = wants
                    .get(&id)
                    .is_some_and(|w| self.cpus.contains_key(&w.resource));
                if !wanted {
                    tracing::info!(id = id.0, "removing a stale reservation cgroup");
                    cg.remove(id)?;
                }
            }
        }
        let mut failed = Vec::new();
        for (id, w) in wants {
            if let Err(e) = self.apply(*id, Some(w)) {
                failed.push((*id, e));
            }
        }
        Ok(failed)
    }

    fn reserved_on(&self, resource: &str, wants: &BTreeMap<ReservationId, Want>) -> Bandwidth {
        let wire = |r: Bandwidth| self.devices.get(resource).map_or(r, |d| d.wire(r));
        let sum = wants
            .values()
            .filter(|w| w.resource == resource && w.binding.flow.is_some())
            .map(|w| wire(w.rate).bps())
            .fold(0_u64, u64::saturating_add);
        Bandwidth::from_bps(sum)
    }

    fn reserved_applied(&self, resource: &str) -> Bandwidth {
        let sum = self
            .applied
            .values()
            .filter_map(|a| match a {
                Applied::Net {
                    resource: r, rate, ..
                } if r == resource => Some(rate.bps()),
                _ => None,
            })
            .fold(0_u64, u64::saturating_add);
        Bandwidth::from_bps(sum)
    }

    /// Brings reservation `id` to `want`: creates, changes or removes its
    /// class and filter or its cgroup. On an error, what was made for it
    /// is removed again (best effort) before the error is returned.
    ///
    /// # Errors
    /// [`EnforceError`].
    pub fn apply(&mut self, id: ReservationId, want: Option<&Want>) -> Result<(), EnforceError> {
        let target = want.and_then(|w| self.target(id, w));
        let current = self.applied.get(&id).cloned();
        if target == current {
            return Ok(());
        }
        let result = self.change(id, current.as_ref(), target.as_ref());
        match &result {
            Ok(()) => {}
            // The class is another reservation's: leave it alone.
            Err(EnforceError::ClassTaken { .. }) => {}
            Err(_) => {
                if let Some(t) = &target {
                    let _ = self.undo(id, t);
                }
                self.applied.remove(&id);
            }
        }
        result
    }

    /// What `want` means here, if the broker enforces its resource.
    fn target(&self, id: ReservationId, w: &Want) -> Option<Applied> {
        if let Some(d) = self.devices.get(&w.resource) {
            return w.binding.flow.map(|flow| Applied::Net {
                resource: w.resource.clone(),
                minor: net::minor(id),
                rate: d.wire(w.rate),
                flow,
            });
        }
        let c = self.cpus.get(&w.resource)?;
        let pid = w.binding.pid?;
        let share = w.rate.bps() as f64 / c.capacity.bps().max(1) as f64;
        Some(Applied::Cpu {
            cpus: share * c.cpus,
            pid,
        })
    }

    fn change(
        &mut self,
        id: ReservationId,
        current: Option<&Applied>,
        target: Option<&Applied>,
    ) -> Result<(), EnforceError> {
        // A different kind or resource: remove the old first.
        let same_place = match (current, target) {
            (Some(Applied::Net { resource: a, .. }), Some(Applied::Net { resource: b, .. })) => {
                a == b
            }
            (Some(Applied::Cpu { .. }), Some(Applied::Cpu { .. })) => true,
            _ => false,
        };
        if let (Some(c), false) = (current, same_place) {
            self.undo(id, c)?;
            self.applied.remove(&id);
            if let Applied::Net { resource, .. } = c {
                let left = self.reserved_applied(resource);
                if let Some(dev) = self.devices.get(resource) {
                    dev.set_default(left)?;
                }
            }
        }
        match target {
            None => Ok(()),
            Some(Applied::Net {
                resource,
                minor,
                rate,
                flow,
            }) => {
                if let Some((other, _)) = self.applied.iter().find(|(o, a)| {
                    **o != id
                        && matches!(a, Applied::Net { resource: r, minor: m, .. } if r == resource && m == minor)
                }) {
                    return Err(EnforceError::ClassTaken {
                        id: id.0,
                        other: other.0,
                    });
                }
                let Some(dev) = self.devices.get(resource) else {
                    return Ok(());
                };
                let new_flow = !matches!(current, Some(Applied::Net { flow: f, .. }) if same_place && f == flow);
                dev.set_class(*minor, *rate, flow, new_flow)?;
                self.applied.insert(
                    id,
                    Applied::Net {
                        resource: resource.clone(),
                        minor: *minor,
                        rate: *rate,
                        flow: *flow,
                    },
                );
                let reserved = self.reserved_applied(resource);
                dev.set_default(reserved)?;
                tracing::info!(id = id.0, device = %dev.name, class = minor, %rate, "reservation enforced (htb class + u32 filter)");
                Ok(())
            }
            Some(Applied::Cpu { cpus, pid }) => {
                let Some(cg) = &self.cgroups else {
                    return Ok(());
                };
                cg.set(id, *cpus, *pid)?;
                self.applied.insert(
                    id,
                    Applied::Cpu {
                        cpus: *cpus,
                        pid: *pid,
                    },
                );
                tracing::info!(id = id.0, cpus, pid, "reservation enforced (cgroup)");
                Ok(())
            }
        }
    }

    fn undo(&self, id: ReservationId, a: &Applied) -> Result<(), EnforceError> {
        match a {
            Applied::Net {
                resource, minor, ..
            } => {
                if let Some(dev) = self.devices.get(resource) {
                    dev.remove_class(*minor)?;
                    tracing::info!(id = id.0, device = %dev.name, class = minor, "reservation class removed");
                }
            }
            Applied::Cpu { .. } => {
                if let Some(cg) = &self.cgroups {
                    cg.remove(id)?;
                    tracing::info!(id = id.0, "reservation cgroup removed");
                }
            }
        }
        Ok(())
    }
}
