//! One direction of an emulated link: packets read from one TUN device go
//! through a [`Link`] model and are written to the other device when they
//! arrive.
//!
//! The loop, on its own OS thread:
//! 1. serve: complete every packet whose (model) service finish time has
//!    passed, moving it to the delay line at its arrival time;
//! 2. read: take up to [`READ_BATCH`] packets from the ingress device and
//!    offer each to the model at the current time (tail drop when full);
//! 3. deliver: write every packet whose arrival time has come (or comes
//!    within [`DELIVER_EARLY`]) to the egress device;
//! 4. sleep in `ppoll` until the ingress device is readable or the next
//!    finish or arrival time, at most [`MAX_SLEEP`].
//!
//! The model runs on exact event times: a late wake-up completes packets at
//! their finish times, not at the wake-up time, so lateness shifts delivery
//! by at most the wake-up latency and never changes the delivered rate.
//! Buffers come from a free list that grows to the peak in flight and is
//! then reused: no allocation per packet once warm.

use super::tun::Tun;
use super::Counters;
use braid_core::link::{Enqueued, Link, LinkConfig};
use braid_core::{Duration, Instant};
use std::collections::VecDeque;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Receiver;
use std::sync::Arc;

/// Most packets read per wake-up before the model is served again.
pub const READ_BATCH: usize = 64;
/// Packets due this soon are written now (saves a wake-up per packet at
/// high rates; far below the 1 ms fidelity target).
pub const DELIVER_EARLY: Duration = Duration::from_micros(20);
/// Longest sleep, so stop requests and new configurations are seen.
pub const MAX_SLEEP: Duration = Duration::from_millis(20);
/// Most packets between the link and the far device (in propagation): the
/// bandwidth-delay bound of the delay line (1 Gbit/s × 780 ms of 1500-byte
/// packets). Beyond it packets are dropped and counted.
pub const MAX_IN_FLIGHT: usize = 1 << 16;

/// A packet buffer and the length of the packet in it.
#[derive(Debug)]
pub(super) struct Packet {
    buf: Box<[u8]>,
    len: usize,
}

/// One direction's state (see the module docs).
pub(super) struct Pump {
    pub from: Arc<Tun>,
    pub to: Arc<Tun>,
    pub link: Link<Packet>,
    pub epoch: Instant,
    pub mtu: usize,
    pub control: Receiver<LinkConfig>,
    pub stop: Arc<AtomicBool>,
    pub counters: Arc<Counters>,
}

impl std::fmt::Debug for Pump {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pump")
            .field("from", &self.from.name())
            .field("to", &self.to.name())
            .finish()
    }
}

impl Pump {
    /// Runs until stopped or a device fails (then the error says which).
    pub fn run(mut self) -> io::Result<()> {
        set_timer_slack();
        let mut pool: Vec<Box<[u8]>> = Vec::new();
        let mut next_finish: Option<Instant> = None;
        let mut in_flight: VecDeque<(Instant, Packet)> = VecDeque::new();
        let mut last_arrival = Instant::ZERO;
        while !self.stop.load(Ordering::Relaxed) {
            while let Ok(cfg) = self.control.try_recv() {
                self.link.set_config(cfg);
            }
            let now = self.now();
            // 1. Serve.
            while let Some(t) = next_finish.filter(|&t| t <= now) {
                let Some(dep) = self.link.complete(t) else {
                    next_finish = None;
                    break;
                };
                next_finish = dep.next_finish.flatten();
                if dep.lost {
                    pool.push(dep.packet.buf);
                } else if in_flight.len() >= MAX_IN_FLIGHT {
                    self.counters.add(&self.counters.overflow_drops, 1);
                    pool.push(dep.packet.buf);
                } else {
                    // A delay lowered at run time must not reorder packets.
                    last_arrival = last_arrival.max(dep.arrive_at);
                    in_flight.push_back((last_arrival, dep.packet));
                }
            }
            // 2. Read.
            for _ in 0..READ_BATCH {
                let mut buf = pool
                    .pop()
                    .unwrap_or_else(|| vec![0u8; self.mtu].into_boxed_slice());
                match self.from.read(&mut buf) {
                    Ok(len) => {
                        self.counters.add(&self.counters.read_packets, 1);
                        self.counters.add(&self.counters.read_bytes, len as u64);
                        match self.link.enqueue(now, len as u32, Packet { buf, len }) {
                            Enqueued::Started(t) => next_finish = t,
                            Enqueued::Queued => {}
                            Enqueued::Dropped(p) => pool.push(p.buf),
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                        pool.push(buf);
                        break;
                    }
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => pool.push(buf),
                    Err(e) => {
                        return Err(io::Error::new(
                            e.kind(),
                            format!("reading from {}: {e}", self.from.name()),
                        ))
                    }
                }
            }
            // 3. Deliver.
            while let Some((at, _)) = in_flight.front() {
                if *at > now + DELIVER_EARLY {
                    break;
                }
                let (_, p) = in_flight.pop_front().expect("front exists");
                match self.to.write(&p.buf[..p.len]) {
                    Ok(_) => {
                        self.counters.add(&self.counters.delivered_packets, 1);
                        self.counters
                            .add(&self.counters.delivered_bytes, p.len as u64);
                    }
                    // The far device is down (`ip link set … down`): the
                    // packet is lost, as on a cable to a port that is off.
                    Err(_) => self.counters.add(&self.counters.write_errors, 1),
                }
                pool.push(p.buf);
            }
            self.publish();
            // 4. Sleep.
            let mut wake = now + MAX_SLEEP;
            if let Some(t) = next_finish {
                wake = wake.min(t);
            }
            if let Some((at, _)) = in_flight.front() {
                wake = wake.min(*at);
            }
            let now = self.now();
            if wake > now {
                wait_readable(&self.from, wake - now)?;
            }
        }
        Ok(())
    }

    /// Model time: zero when the emulator started, so a trace starts then.
    fn now(&self) -> Instant {
        Instant::ZERO + (crate::clock::now() - self.epoch)
    }

    fn publish(&self) {
        let s = self.link.stats();
        let c = &self.counters;
        c.queue_drops.store(s.queue_drops, Ordering::Relaxed);
        c.random_losses.store(s.random_losses, Ordering::Relaxed);
        c.max_queue_bytes
            .store(s.max_queue_bytes, Ordering::Relaxed);
        c.queued_bytes
            .store(self.link.queued_bytes(), Ordering::Relaxed);
    }
}

/// Timer slack of 1 µs for this thread (the default 50 µs would add
/// jitter to every wake-up).
fn set_timer_slack() {
    // SAFETY: PR_SET_TIMERSLACK takes one integer argument.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1000 as libc::c_ulong);
    }
}

/// Blocks until `tun` is readable or `timeout` passes.
fn wait_readable(tun: &Tun, timeout: Duration) -> io::Result<()> {
    let ns = timeout.as_nanos();
    let ts = libc::timespec {
        tv_sec: (ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (ns % 1_000_000_000) as libc::c_long,
    };
    let mut pfd = libc::pollfd {
        fd: tun.raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd, a valid timespec, no signal mask.
    let rc = unsafe { libc::ppoll(&mut pfd, 1, &ts, std::ptr::null()) };
    if rc < 0 {
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
    Ok(())
}
