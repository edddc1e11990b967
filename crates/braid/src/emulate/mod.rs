//! `braid emulate`: an emulated wide-area link between two network
//! namespaces, for real kernels without netem (mahimahi's idea, for any IP
//! traffic).
//!
//! A TUN device is created in each namespace ([`tun`]); every IP packet one
//! side sends is read by this process and goes through the link model of
//! [`braid_core::link`] (the one braid-sim drives): a drop-tail queue
//! bounded in bytes, serialization at a constant or trace-driven rate,
//! seeded random loss, and a one-way propagation delay. Then it is written
//! to the other side's device. TCP, MPTCP, UDP and ICMP pass unchanged; each
//! direction has its own model.
//!
//! Main types: [`EmulatorConfig`] (both sides and both directions),
//! [`Emulator`] (the running link: change it, read its [`CountersSnapshot`],
//! stop it), [`model::LinkModel`] (a direction as a user describes it, and
//! the control language that changes it), [`supervise::supervise`] (run
//! until a stop, a duration or a watched process ends it, applying
//! [`control::Control`] lines). `braid emulate` is flags around these.
//!
//! # Concurrency
//! One OS thread per direction ([`pump`]), blocking in `ppoll` with a
//! nanosecond timeout: tokio's timer wheel ticks in milliseconds, and the
//! emulator must place packets to well under a millisecond. The threads
//! share nothing but their counters (atomics), a stop flag, and a channel of
//! new link configurations. The model never reads a clock; the pump hands
//! it the time from [`crate::clock`].
//!
//! # Lifetime
//! The TUN devices are not persistent: they vanish when this process exits,
//! is killed or crashes. Deleting a namespace (`ip netns del`) removes only
//! its name while a device's descriptor holds it, so [`Emulator::check`]
//! looks for the names too: a driver that polls it stops when a namespace
//! is gone or a direction failed, and the namespaces then really go.

pub mod control;
pub mod model;
pub mod netns;
pub mod pump;
pub mod supervise;
pub mod tun;

use braid_core::link::{Link, LinkConfig};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{channel, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;
pub use tun::{Ipv4Cidr, Tun};

/// Smallest MTU accepted (IPv6's minimum).
pub const MIN_MTU: u32 = 1280;
/// Largest MTU accepted.
pub const MAX_MTU: u32 = 65_535;

/// Why the emulator could not start or stopped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EmulateError {
    /// Not running as root (creating devices in namespaces needs
    /// CAP_NET_ADMIN and CAP_SYS_ADMIN).
    #[error("braid emulate needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN) to create devices in network namespaces")]
    NotRoot,
    /// `/dev/net/tun` is missing.
    #[error("/dev/net/tun is missing: this kernel or container has no TUN driver")]
    NoTun,
    /// A bad configuration.
    #[error("{0}")]
    Config(String),
    /// A direction's thread ended ([`Emulator::stop`] returns its error).
    #[error("a direction of the link stopped")]
    DirectionStopped,
    /// A namespace was deleted while the link ran.
    #[error("network namespace {0} was deleted")]
    NamespaceGone(String),
    /// A device could not be created or failed while running.
    #[error("{0}")]
    Device(#[from] std::io::Error),
}

/// One end of the emulated link.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Side {
    /// The network namespace: a name under /run/netns or a path.
    pub namespace: String,
    /// The TUN device's name in that namespace.
    pub device: String,
    /// An IPv4 address for the device (else configure it with `ip`).
    pub addr: Option<Ipv4Cidr>,
}

/// Which way packets go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// From side A to side B.
    AtoB,
    /// From side B to side A.
    BtoA,
}

/// A whole emulated link.
#[derive(Clone, Debug)]
pub struct EmulatorConfig {
    /// Side A.
    pub a: Side,
    /// Side B.
    pub b: Side,
    /// MTU of both devices (packets are at most this big).
    pub mtu: u32,
    /// The model from A to B.
    pub a_to_b: LinkConfig,
    /// The model from B to A.
    pub b_to_a: LinkConfig,
    /// Seed of the loss draws (each direction derives its own generator).
    pub seed: u64,
    /// Run both directions' threads in `SCHED_FIFO` at this priority
    /// (1..=99): wake-ups then stay on time when the machine is busy.
    pub realtime: Option<u8>,
}

/// Live counters of one direction (written by its pump).
#[derive(Debug, Default)]
pub struct Counters {
    read_packets: AtomicU64,
    read_bytes: AtomicU64,
    queue_drops: AtomicU64,
    random_losses: AtomicU64,
    overflow_drops: AtomicU64,
    delivered_packets: AtomicU64,
    delivered_bytes: AtomicU64,
    write_errors: AtomicU64,
    max_queue_bytes: AtomicU64,
    queued_bytes: AtomicU64,
}

impl Counters {
    fn add(&self, c: &AtomicU64, n: u64) {
        c.fetch_add(n, Ordering::Relaxed);
    }

    /// A copy of the counters now.
    pub fn snapshot(&self) -> CountersSnapshot {
        let l = |c: &AtomicU64| c.load(Ordering::Relaxed);
        CountersSnapshot {
            read_packets: l(&self.read_packets),
            read_bytes: l(&self.read_bytes),
            queue_drops: l(&self.queue_drops),
            random_losses: l(&self.random_losses),
            overflow_drops: l(&self.overflow_drops),
            delivered_packets: l(&self.delivered_packets),
            delivered_bytes: l(&self.delivered_bytes),
            write_errors: l(&self.write_errors),
            max_queue_bytes: l(&self.max_queue_bytes),
            queued_bytes: l(&self.queued_bytes),
        }
    }
}

/// What one direction has done so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct CountersSnapshot {
    /// Packets read from the ingress device.
    pub read_packets: u64,
    /// Their bytes (IP packets).
    pub read_bytes: u64,
    /// Dropped at the tail of the full queue.
    pub queue_drops: u64,
    /// Lost at random (the configured loss rate).
    pub random_losses: u64,
    /// Dropped because more than [`pump::MAX_IN_FLIGHT`] were in propagation.
    pub overflow_drops: u64,
    /// Written to the egress device.
    pub delivered_packets: u64,
    /// Their bytes.
    pub delivered_bytes: u64,
    /// Writes the egress device refused (it was down).
    pub write_errors: u64,
    /// Largest queue seen, in bytes.
    pub max_queue_bytes: u64,
    /// Queue now, in bytes.
    pub queued_bytes: u64,
}

/// A running emulated link (see the module docs). Dropping it stops the
/// pumps and removes the devices.
#[derive(Debug)]
pub struct Emulator {
    stop: Arc<AtomicBool>,
    control: [Sender<LinkConfig>; 2],
    counters: [Arc<Counters>; 2],
    threads: Vec<JoinHandle<std::io::Result<()>>>,
    devices: [Arc<Tun>; 2],
    epoch: braid_core::Instant,
}

impl Emulator {
    /// Creates both devices and starts both directions.
    ///
    /// # Errors
    /// [`EmulateError::NotRoot`], [`EmulateError::NoTun`], a bad MTU or
    /// equal device names in one namespace ([`EmulateError::Config`]), or
    /// the step that failed while creating a device.
    pub fn start(cfg: EmulatorConfig) -> Result<Emulator, EmulateError> {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            return Err(EmulateError::NotRoot);
        }
        if !std::path::Path::new("/dev/net/tun").exists() {
            return Err(EmulateError::NoTun);
        }
        if !(MIN_MTU..=MAX_MTU).contains(&cfg.mtu) {
            return Err(EmulateError::Config(format!(
                "MTU {} is outside {MIN_MTU}..={MAX_MTU}",
                cfg.mtu
            )));
        }
        if cfg.realtime.is_some_and(|p| !(1..=99).contains(&p)) {
            return Err(EmulateError::Config(
                "the real-time priority must be 1..=99".into(),
            ));
        }
        if cfg.a.namespace == cfg.b.namespace && cfg.a.device == cfg.b.device {
            return Err(EmulateError::Config(format!(
                "both sides are device {} in namespace {}",
                cfg.a.device, cfg.a.namespace
            )));
        }
        let a = Arc::new(Tun::create(
            &cfg.a.namespace,
            &cfg.a.device,
            cfg.mtu,
            cfg.a.addr,
        )?);
        let b = Arc::new(Tun::create(
            &cfg.b.namespace,
            &cfg.b.device,
            cfg.mtu,
            cfg.b.addr,
        )?);
        let stop = Arc::new(AtomicBool::new(false));
        let epoch = crate::clock::now();
        let mut threads = Vec::new();
        let mut counters = Vec::new();
        let mut control = Vec::new();
        for (i, (from, to, link)) in [
            (a.clone(), b.clone(), cfg.a_to_b),
            (b.clone(), a.clone(), cfg.b_to_a),
        ]
        .into_iter()
        .enumerate()
        {
            let (tx, rx) = channel();
            let c = Arc::new(Counters::default());
            let rng = ChaCha8Rng::seed_from_u64(cfg.seed.wrapping_mul(2).wrapping_add(i as u64));
            let pump = pump::Pump {
                from,
                to,
                link: Link::new(link, rng),
                epoch,
                mtu: cfg.mtu as usize,
                control: rx,
                stop: stop.clone(),
                counters: c.clone(),
                realtime: cfg.realtime,
            };
            let name = if i == 0 { "emulate a>b" } else { "emulate b>a" };
            threads.push(
                std::thread::Builder::new()
                    .name(name.into())
                    .spawn(move || pump.run())?,
            );
            counters.push(c);
            control.push(tx);
        }
        let [c0, c1]: [Arc<Counters>; 2] = counters.try_into().expect("two directions");
        let [t0, t1]: [Sender<LinkConfig>; 2] = control.try_into().expect("two directions");
        Ok(Emulator {
            stop,
            control: [t0, t1],
            counters: [c0, c1],
            threads,
            devices: [a, b],
            epoch,
        })
    }

    /// Replaces one direction's model from now on (see
    /// [`Link::set_config`]).
    pub fn set_link(&self, dir: Direction, cfg: LinkConfig) {
        // A send fails only if the pump has ended; `finished` reports that.
        let _ = self.control[dir as usize].send(cfg);
    }

    /// One direction's counters now.
    pub fn counters(&self, dir: Direction) -> CountersSnapshot {
        self.counters[dir as usize].snapshot()
    }

    /// The model's time zero on [`crate::clock`]'s time line: a trace's
    /// first bin starts then.
    pub fn epoch(&self) -> braid_core::Instant {
        self.epoch
    }

    /// The two devices (side A, side B).
    pub fn devices(&self) -> [&Tun; 2] {
        [&self.devices[0], &self.devices[1]]
    }

    /// Whether the link is still whole.
    ///
    /// # Errors
    /// A direction has ended (its device failed), or a namespace was
    /// deleted (its name is gone or names another namespace); the message
    /// says which.
    pub fn check(&self) -> Result<(), EmulateError> {
        if self.threads.iter().any(|t| t.is_finished()) {
            // The direction's own error comes out of `stop`.
            return Err(EmulateError::DirectionStopped);
        }
        for d in &self.devices {
            if !d.namespace_present() {
                return Err(EmulateError::NamespaceGone(d.namespace().to_string()));
            }
        }
        Ok(())
    }

    /// Stops both directions, removes the devices and returns the final
    /// counters (A→B, B→A).
    ///
    /// # Errors
    /// The first error a direction ended with (e.g. its device vanished
    /// because the namespace was deleted).
    pub fn stop(mut self) -> Result<[CountersSnapshot; 2], EmulateError> {
        let first_error = self.join();
        let out = [
            self.counters(Direction::AtoB),
            self.counters(Direction::BtoA),
        ];
        match first_error {
            Some(e) => Err(EmulateError::Device(e)),
            None => Ok(out),
        }
    }

    fn join(&mut self) -> Option<std::io::Error> {
        self.stop.store(true, Ordering::Relaxed);
        let mut first = None;
        for t in self.threads.drain(..) {
            let r = t
                .join()
                .unwrap_or_else(|_| Err(std::io::Error::other("emulator thread panicked")));
            if let Err(e) = r {
                first.get_or_insert(e);
            }
        }
        first
    }
}

impl Drop for Emulator {
    fn drop(&mut self) {
        self.join();
    }
}
