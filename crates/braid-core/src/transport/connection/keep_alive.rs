//! Keep-alive PINGs that cost an idle connection as little as they can.
//!
//! An idle connection lives on its keep-alives: nothing else refreshes
//! either side's idle timer. One side pinging is enough — the PING
//! refreshes the peer's timer, its ACK the pinger's — so the **client**
//! pings, and the **server** pings only when it has heard nothing for
//! twice the client's longest interval (a peer that stopped pinging, or
//! lost pings), still well inside the idle timeout. A server with a
//! thousand idle clients then wakes once per client ping instead of
//! twice.
//!
//! While nothing but PINGs goes out, the interval **backs off**: it
//! doubles after each lone PING, up to a third of the idle timeout (two
//! PINGs may be lost before it fires), and falls back to the configured
//! `Config::keep_alive` as soon as anything else is sent.

use super::Side;
use crate::time::{Duration, Instant};

/// The keep-alive timer of one connection (see the module docs).
#[derive(Debug, Clone, Copy)]
pub(super) struct KeepAlive {
    base: Duration,
    every: Duration,
}

impl KeepAlive {
    /// Pings after `base` without sending, backing off from there.
    pub(super) fn new(base: Duration) -> Self {
        KeepAlive { base, every: base }
    }

    /// The longest interval for an idle timeout of `idle` (0: none).
    fn ceiling(&self, idle: Duration) -> Duration {
        if idle.is_zero() {
            self.base * 8
        } else {
            (idle / 3).max(self.base)
        }
    }

    /// The interval now.
    #[cfg(test)]
    fn every(&self) -> Duration {
        self.every
    }

    /// When `side` pings next, having last sent something ack-eliciting
    /// at `sent` and last received anything at `received`.
    pub(super) fn deadline(
        &self,
        side: Side,
        sent: Instant,
        received: Instant,
        idle: Duration,
    ) -> Instant {
        let own = sent + self.every;
        match side {
            Side::Client => own,
            Side::Server => {
                let mut wait = self.ceiling(idle) * 2;
                if !idle.is_zero() {
                    wait = wait.min(idle * 5 / 6);
                }
                own.max(received + wait)
            }
        }
    }

    /// An ack-eliciting packet went out: a lone PING (`lone_ping`), which
    /// backs the interval off, or anything more, which resets it.
    pub(super) fn on_sent(&mut self, lone_ping: bool, idle: Duration) {
        self.every = if lone_ping {
            (self.every * 2).min(self.ceiling(idle))
        } else {
            self.base
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lone_pings_back_off_to_a_third_of_the_idle_timeout_and_data_resets() {
        let idle = Duration::from_secs(30);
        let mut k = KeepAlive::new(Duration::from_secs(2));
        let mut seen = Vec::new();
        for _ in 0..5 {
            k.on_sent(true, idle);
            seen.push(k.every().as_millis() / 1000);
        }
        assert_eq!(seen, [4, 8, 10, 10, 10]);
        k.on_sent(false, idle);
        assert_eq!(k.every(), Duration::from_secs(2));
    }

    #[test]
    fn a_server_waits_for_its_client_to_ping() {
        let idle = Duration::from_secs(30);
        let k = KeepAlive::new(Duration::from_secs(10));
        let t0 = Instant::ZERO;
        let heard = t0 + Duration::from_secs(5);
        assert_eq!(
            k.deadline(Side::Client, t0, heard, idle),
            t0 + Duration::from_secs(10)
        );
        // Twice the client's longest interval (20 s), within 5/6 of the
        // idle timeout (25 s), after it last heard anything.
        assert_eq!(
            k.deadline(Side::Server, t0, heard, idle),
            heard + Duration::from_secs(20)
        );
    }
}
