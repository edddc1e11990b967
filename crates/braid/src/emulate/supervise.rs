//! Running an emulated link until something ends it: a stop request (a
//! signal), a duration, the end of a watched process, a device or
//! namespace failure; meanwhile applying control lines and reporting
//! counters. `braid emulate` is flags around [`supervise`].

use super::control::Control;
use super::model::{apply_control, LinkModel};
use super::{CountersSnapshot, Direction, EmulateError, Emulator};
use braid_core::link::Capacity;
use braid_core::Duration;
use std::path::Path;

/// How often the supervisor looks at stop requests, the watched process
/// and the control FIFO.
pub const TICK: std::time::Duration = std::time::Duration::from_millis(20);

/// What ends the run, and what happens while it runs.
#[derive(Debug, Default)]
pub struct Supervision {
    /// Stop after this long.
    pub duration: Option<Duration>,
    /// Stop when this process ends.
    pub watch_pid: Option<u32>,
    /// Apply the lines written here.
    pub control: Option<Control>,
    /// Report both directions' counters this often (and at the end).
    pub every: Option<Duration>,
    /// The link's MTU (a changed model's queue is at least one).
    pub mtu: u32,
}

/// Why a supervised run ended (without failing).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Ended {
    /// A stop was requested.
    Stopped,
    /// The duration passed.
    Duration,
    /// The watched process ended.
    WatchedEnded,
}

impl Ended {
    /// `signal`, `duration reached`, `watched process ended`.
    pub fn describe(self) -> &'static str {
        match self {
            Ended::Stopped => "signal",
            Ended::Duration => "duration reached",
            Ended::WatchedEnded => "watched process ended",
        }
    }
}

/// What the supervisor asks of and tells its caller.
pub trait Hooks {
    /// Whether a stop was requested (a signal arrived).
    fn stop_requested(&mut self) -> bool;
    /// A trace file's capacity, for a control line `trace FILE`.
    ///
    /// # Errors
    /// The file cannot be used, as one line.
    fn load_trace(&self, path: &Path) -> Result<Capacity, String>;
    /// A control line was applied (`Ok`: what changed) or refused.
    fn on_control(&mut self, line: &str, outcome: Result<String, String>);
    /// Both directions' counters, `elapsed` after the start.
    fn on_counters(
        &mut self,
        elapsed: Duration,
        a_to_b: CountersSnapshot,
        b_to_a: CountersSnapshot,
    );
}

/// The run's end: why, and how long it ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outcome {
    /// Why.
    pub ended: Ended,
    /// How long it ran.
    pub elapsed: Duration,
}

/// Runs `emu` until [`Supervision`] or `hooks` end it, applying control
/// lines to `models` (A→B, B→A) and reporting counters on the way.
///
/// # Errors
/// The emulator's failure ([`Emulator::check`]): a device or direction
/// failed, a namespace was deleted.
pub fn supervise(
    emu: &Emulator,
    models: &mut [LinkModel; 2],
    mut s: Supervision,
    hooks: &mut dyn Hooks,
) -> Result<Outcome, (EmulateError, Duration)> {
    let started = crate::clock::now();
    let mut next_report = s.every;
    let report = |hooks: &mut dyn Hooks, elapsed| {
        hooks.on_counters(
            elapsed,
            emu.counters(Direction::AtoB),
            emu.counters(Direction::BtoA),
        );
    };
    let ended = loop {
        std::thread::park_timeout(TICK);
        let elapsed = crate::clock::now() - started;
        if hooks.stop_requested() {
            break Ended::Stopped;
        }
        if let Err(e) = emu.check() {
            if s.every.is_some() {
                report(hooks, elapsed);
            }
            return Err((e, elapsed));
        }
        if s.duration.is_some_and(|d| elapsed >= d) {
            break Ended::Duration;
        }
        if s.watch_pid.is_some_and(|pid| !pid_alive(pid)) {
            break Ended::WatchedEnded;
        }
        if let Some(c) = s.control.as_mut() {
            for line in c.lines() {
                let loader = |p: &Path| hooks.load_trace(p);
                let outcome = apply_control(&line, models, emu, s.mtu, &loader);
                hooks.on_control(&line, outcome);
            }
        }
        if let (Some(at), Some(every)) = (next_report, s.every) {
            if elapsed >= at {
                report(hooks, elapsed);
                next_report = Some(at + every);
            }
        }
    };
    let elapsed = crate::clock::now() - started;
    if s.every.is_some() {
        report(hooks, elapsed);
    }
    Ok(Outcome { ended, elapsed })
}

/// Whether process `pid` exists (signal 0: nothing is sent).
pub fn pid_alive(pid: u32) -> bool {
    // SAFETY: kill with signal 0 only checks; no signal is sent.
    let rc = unsafe { libc::kill(pid as libc::pid_t, 0) };
    rc == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// `at` (on braid's time line) as CLOCK_MONOTONIC nanoseconds, the clock
/// every namespace of this machine shares, so that measurements taken in
/// the namespaces (testbed/udp-probe.py) can be aligned with the model's time
/// (a trace's first bin). Accurate to the time between two clock reads.
pub fn monotonic_ns_of(at: braid_core::Instant) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec, which `ts` is. This is a
    // report of where braid's clock sits on the system clock, not a second
    // clock for the model.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    let mono_now = ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64;
    let since = crate::clock::now() - at;
    mono_now.saturating_sub(since.as_nanos())
}
