//! How every long-running command ends on a signal: one mechanism, one set
//! of exit codes (issue 30 §8).
//!
//! SIGINT (Ctrl-C) or SIGTERM asks a command to stop. It finishes what it
//! owes first — a sink flushes and closes its files and reports its
//! streams, a source closes its session once what it sent is delivered, a
//! relay or broker closes its sockets and prints its last line — and then
//! exits:
//!
//! * **0** when stopping was the normal end of the command's work: a
//!   server (`serve`, `relay`, `broker`, `emulate`) stopped with nothing
//!   left unfinished;
//! * **128 + the signal's number** (130 for SIGINT, 143 for SIGTERM, the
//!   shell's convention) when the signal cut work short: a `braid stream`
//!   whose sources had more to send, or a `braid serve` with streams left
//!   incomplete. The command returns [`Stopped`] and `main` maps it.
//!
//! A second signal while the first is being handled exits at once with the
//! same code. Async commands wait on [`requested`]; the emulator's blocking
//! loop polls [`signalled`] after [`watch_blocking`].

use std::sync::atomic::{AtomicI32, Ordering};

/// Which signal asked the command to stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// SIGINT (Ctrl-C).
    Interrupt,
    /// SIGTERM (what `kill`, systemd and container runtimes send).
    Terminate,
    /// SIGHUP (the terminal went away; the emulator only).
    HangUp,
}

impl Stop {
    fn from_signo(signo: i32) -> Option<Stop> {
        match signo {
            libc::SIGINT => Some(Stop::Interrupt),
            libc::SIGTERM => Some(Stop::Terminate),
            libc::SIGHUP => Some(Stop::HangUp),
            _ => None,
        }
    }

    fn signo(self) -> i32 {
        match self {
            Stop::Interrupt => libc::SIGINT,
            Stop::Terminate => libc::SIGTERM,
            Stop::HangUp => libc::SIGHUP,
        }
    }

    /// The exit code of a command this signal cut short: 128 + its number.
    pub fn exit_code(self) -> u8 {
        u8::try_from(128 + self.signo()).unwrap_or(1)
    }

    /// The signal's name (`SIGINT`, …).
    pub fn name(self) -> &'static str {
        match self {
            Stop::Interrupt => "SIGINT",
            Stop::Terminate => "SIGTERM",
            Stop::HangUp => "SIGHUP",
        }
    }
}

/// A command stopped by a signal before its work was done: `main` prints
/// the message and exits with [`Stop::exit_code`].
#[derive(Debug, thiserror::Error)]
#[error("stopped by {}: {what}", stop.name())]
pub struct Stopped {
    /// The signal.
    pub stop: Stop,
    /// What was left undone.
    pub what: String,
}

impl Stopped {
    /// `stop` cut `what` short.
    pub fn new(stop: Stop, what: impl Into<String>) -> Self {
        Stopped {
            stop,
            what: what.into(),
        }
    }
}

/// The exit code for `err` if a signal stopped the command.
pub fn exit_code(err: &anyhow::Error) -> Option<u8> {
    err.chain()
        .find_map(|c| c.downcast_ref::<Stopped>())
        .map(|s| s.stop.exit_code())
}

/// Watches SIGINT and SIGTERM from this call on (call it before saying
/// that the command is ready, so a signal that follows is never missed);
/// the future resolves at the first one, and from then on a second one
/// exits the process at once. Call it once per command, inside its tokio
/// runtime.
pub fn requested() -> impl std::future::Future<Output = Stop> + Send + 'static {
    use tokio::signal::unix::{signal, SignalKind};
    // Registering fails only if the OS refuses the handler (tokio panics
    // instead when called outside a runtime); then the default action,
    // ending the process, stays for both signals.
    let handlers =
        signal(SignalKind::interrupt()).and_then(|i| Ok((i, signal(SignalKind::terminate())?)));
    async move {
        let Ok((mut int, mut term)) = handlers else {
            return std::future::pending().await;
        };
        let first = tokio::select! {
            _ = int.recv() => Stop::Interrupt,
            _ = term.recv() => Stop::Terminate,
        };
        tokio::spawn(async move {
            tokio::select! {
                _ = int.recv() => {}
                _ = term.recv() => {}
            }
            eprintln!("braid: a second signal: exiting now");
            std::process::exit(i32::from(first.exit_code()));
        });
        first
    }
}

/// The signal [`watch_blocking`]'s handlers saw first (0: none).
static SIGNALLED: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_signal(signo: libc::c_int) {
    // The first signal is kept; a second exits at once, with the first's
    // code as the async path does (both calls are async-signal-safe).
    if let Err(first) = SIGNALLED.compare_exchange(0, signo, Ordering::Relaxed, Ordering::Relaxed) {
        // SAFETY: _exit is async-signal-safe.
        unsafe { libc::_exit(128 + first) };
    }
}

/// For a blocking command: SIGINT, SIGTERM and SIGHUP set the flag
/// [`signalled`] reads instead of ending the process.
pub fn watch_blocking() {
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: the handler only touches an atomic and calls _exit, both
        // async-signal-safe.
        unsafe {
            libc::signal(sig, on_signal as *const () as libc::sighandler_t);
        }
    }
}

/// The first signal since [`watch_blocking`], if any.
pub fn signalled() -> Option<Stop> {
    Stop::from_signo(SIGNALLED.load(Ordering::Relaxed))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signal_that_cut_work_short_exits_with_the_shells_code() {
        assert_eq!(Stop::Interrupt.exit_code(), 130);
        assert_eq!(Stop::Terminate.exit_code(), 143);
        let err = anyhow::Error::new(Stopped::new(Stop::Terminate, "2 streams incomplete"))
            .context("braid serve");
        assert_eq!(exit_code(&err), Some(143));
        assert_eq!(
            format!("{:#}", err),
            "braid serve: stopped by SIGTERM: 2 streams incomplete"
        );
        assert_eq!(exit_code(&anyhow::anyhow!("other")), None);
    }
}
