//! One direction of an emulated link: packets read from one TUN device go
//! through a [`Link`] model and are written to the other device when they
//! arrive.
//!
//! The loop, on its own OS thread:
//! 1. serve: complete every packet whose (model) service finish time has
//!    passed, moving it to the delay line at its arrival time;
//! 2. read: take up to [`READ_BATCH`] packets from the ingress device and
//!    offer each to the model at the time it was read, after serving the
//!    model up to then (tail drop when full);
//! 3. deliver: write every packet whose arrival time has come (or comes
//!    within [`DELIVER_EARLY`]) to the egress device;
//! 4. sleep in `ppoll` until the ingress device is readable or the next
//!    arrival time (of a packet in the delay line, or of the packet in
//!    service once it finishes), at most [`MAX_SLEEP`].
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
    /// `SCHED_FIFO` priority of this thread, if any.
    pub realtime: Option<u8>,
}

impl std::fmt::Debug for Pump {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pump")
            .field("from", &self.from.name())
            .field("to", &self.to.name())
            .finish()
    }
}

/// What a direction holds between wake-ups: the free buffers, the finish
/// time of the packet in service, and the delay line.
#[derive(Debug, Default)]
struct State {
    /// Free buffers; grows to the peak in flight, then only recycles.
    pool: Vec<Box<[u8]>>,
    /// When the packet in service finishes serializing.
    next_finish: Option<Instant>,
    /// Served packets by arrival time (non-decreasing).
    in_flight: VecDeque<(Instant, Packet)>,
    /// The latest arrival time handed out (arrivals never go back).
    last_arrival: Instant,
}

impl Pump {
    /// Runs until stopped or a device fails (then the error says which).
    pub fn run(mut self) -> io::Result<()> {
        set_timer_slack();
        if let Some(prio) = self.realtime {
            set_realtime(prio)?;
        }
        let mut st = State::default();
        while !self.stop.load(Ordering::Relaxed) {
            while let Ok(cfg) = self.control.try_recv() {
                self.link.set_config(cfg);
            }
            // 1. Serve.
            let now = self.now();
            self.serve(&mut st, now);
            // 2. Read.
            self.read_batch(&mut st)?;
            // 3. Deliver.
            let now = self.now();
            self.deliver(&mut st, now);
            self.publish();
            // 4. Sleep.
            let mut wake = now + MAX_SLEEP;
            if let Some(t) = st.next_finish {
                // Nothing outside sees a packet before it arrives at the far
                // end, and the model is served at exact event times: wake
                // for the arrival of the packet in service, not its finish
                // (half the wake-ups on a delayed link).
                wake = wake.min(t + self.link.config().delay);
            }
            if let Some((at, _)) = st.in_flight.front() {
                wake = wake.min(*at);
            }
            let now = self.now();
            if wake > now {
                wait_readable(&self.from, wake - now)?;
            }
        }
        Ok(())
    }

    /// Completes every packet whose service finished by `now`, at its exact
    /// finish time, moving it to the delay line.
    fn serve(&mut self, st: &mut State, now: Instant) {
        while let Some(t) = st.next_finish.filter(|&t| t <= now) {
            let Some(dep) = self.link.complete(t) else {
                st.next_finish = None;
                break;
            };
            st.next_finish = dep.next_finish.flatten();
            if dep.lost {
                st.pool.push(dep.packet.buf);
            } else if st.in_flight.len() >= MAX_IN_FLIGHT {
                self.counters.add(&self.counters.overflow_drops, 1);
                st.pool.push(dep.packet.buf);
            } else {
                // A delay lowered at run time must not reorder packets.
                st.last_arrival = st.last_arrival.max(dep.arrive_at);
                st.in_flight.push_back((st.last_arrival, dep.packet));
            }
        }
    }

    /// Reads up to [`READ_BATCH`] packets and offers each to the model at
    /// the time it was read: the clock is read after each `read`, and the
    /// model is served up to then first, so a packet never enters the link
    /// before it reached this process (however late this thread ran).
    fn read_batch(&mut self, st: &mut State) -> io::Result<()> {
        for _ in 0..READ_BATCH {
            let mut buf = st
                .pool
                .pop()
                .unwrap_or_else(|| vec![0u8; self.mtu].into_boxed_slice());
            match self.from.read(&mut buf) {
                Ok(len) => {
                    let now = self.now();
                    self.serve(st, now);
                    self.counters.add(&self.counters.read_packets, 1);
                    self.counters.add(&self.counters.read_bytes, len as u64);
                    match self.link.enqueue(now, len as u32, Packet { buf, len }) {
                        Enqueued::Started(t) => st.next_finish = t,
                        Enqueued::Queued => {}
                        Enqueued::Dropped(p) => st.pool.push(p.buf),
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    st.pool.push(buf);
                    break;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => st.pool.push(buf),
                Err(e) => {
                    return Err(io::Error::new(
                        e.kind(),
                        format!("reading from {}: {e}", self.from.name()),
                    ))
                }
            }
        }
        Ok(())
    }

    /// Writes every packet due by `now` (within [`DELIVER_EARLY`]).
    fn deliver(&mut self, st: &mut State, now: Instant) {
        while let Some((at, _)) = st.in_flight.front() {
            if *at > now + DELIVER_EARLY {
                break;
            }
            let Some((_, p)) = st.in_flight.pop_front() else {
                break;
            };
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
            st.pool.push(p.buf);
        }
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

/// Puts this thread in `SCHED_FIFO` at `prio` (1..=99), so that busy
/// neighbours on a shared machine cannot delay its wake-ups by a time
/// slice. The pump sleeps whenever it has nothing due, so it cannot starve
/// the machine (and the kernel keeps 5 % of each second for others).
fn set_realtime(prio: u8) -> io::Result<()> {
    let param = libc::sched_param {
        sched_priority: prio as libc::c_int,
    };
    // SAFETY: a valid sched_param for the calling thread (0).
    let rc = unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) };
    if rc != 0 {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(
            e.kind(),
            format!("setting SCHED_FIFO priority {prio}: {e}"),
        ));
    }
    Ok(())
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
