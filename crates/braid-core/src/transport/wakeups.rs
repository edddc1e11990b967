//! Which of an endpoint's connections need a look: the ones touched since
//! they last had nothing to send, and the timers of all the others.
//!
//! A connection changes only when something calls it — a datagram for
//! it, a timer of its own, the application through
//! [`Endpoint::connection_mut`](super::Endpoint::connection_mut) — and a
//! connection that has nothing to send has nothing until one of those
//! happens (every wait it has, pacing included, is a timer in its
//! `poll_timeout`). So the endpoint keeps:
//!
//! * **active**: connections touched since `poll_transmit` last found
//!   nothing to send in them. Only these are asked for datagrams and for
//!   their timers.
//! * **timers**: for every other connection, the deadline its
//!   `poll_timeout` gave when it went quiet, in deadline order.
//!
//! Each datagram, timeout and transmit then costs the connections it
//! concerns (a B-tree step each), not a walk over all of them: a thousand
//! idle connections cost their keep-alives and nothing else.

use crate::time::Instant;
use std::collections::BTreeSet;

/// Where one connection stands, kept beside it (so a touch of a
/// connection that is already active costs one test, no lookup).
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Slot {
    active: bool,
    /// Its entry in `Wakeups::timers`, while quiet.
    deadline: Option<Instant>,
}

/// The active set and the quiet connections' timers (see the module docs).
#[derive(Debug, Default)]
pub(super) struct Wakeups {
    active: BTreeSet<u64>,
    timers: BTreeSet<(Instant, u64)>,
}

impl Wakeups {
    /// Connection `h` was (or may have been) changed: it is active.
    pub(super) fn touch(&mut self, h: u64, slot: &mut Slot) {
        if slot.active {
            return;
        }
        slot.active = true;
        if let Some(t) = slot.deadline.take() {
            self.timers.remove(&(t, h));
        }
        self.active.insert(h);
    }

    /// Connection `h` has nothing to send until `timeout` (or until it is
    /// touched).
    pub(super) fn quiet(&mut self, h: u64, slot: &mut Slot, timeout: Option<Instant>) {
        if slot.active {
            slot.active = false;
            self.active.remove(&h);
        }
        if slot.deadline != timeout {
            if let Some(t) = slot.deadline.take() {
                self.timers.remove(&(t, h));
            }
            if let Some(t) = timeout {
                self.timers.insert((t, h));
            }
            slot.deadline = timeout;
        }
    }

    /// Connection `h` is gone.
    pub(super) fn forget(&mut self, h: u64, slot: &Slot) {
        self.active.remove(&h);
        if let Some(t) = slot.deadline {
            self.timers.remove(&(t, h));
        }
    }

    /// A connection whose timer is due at `now`, taken off the timers
    /// (its slot must then be [`Slot::unscheduled`] and touched).
    pub(super) fn pop_due(&mut self, now: Instant) -> Option<u64> {
        let &(t, h) = self.timers.first()?;
        if t > now {
            return None;
        }
        self.timers.pop_first();
        Some(h)
    }

    /// Handle `h` has no connection any more: it is not active.
    pub(super) fn forget_handle(&mut self, h: u64) {
        self.active.remove(&h);
    }

    /// The earliest timer of a quiet connection.
    pub(super) fn first_timer(&self) -> Option<Instant> {
        self.timers.first().map(|&(t, _)| t)
    }

    /// The active connections, in handle order.
    pub(super) fn active(&self) -> impl Iterator<Item = u64> + '_ {
        self.active.iter().copied()
    }

    /// The first active connection at or after `from`, wrapping around.
    pub(super) fn next_active(&self, from: u64) -> Option<u64> {
        self.active
            .range(from..)
            .next()
            .or_else(|| self.active.first())
            .copied()
    }

    /// Active connections now.
    #[cfg(test)]
    pub(super) fn active_count(&self) -> usize {
        self.active.len()
    }
}

impl Slot {
    /// Its timer left the set (taken as due): it is no longer scheduled.
    pub(super) fn unscheduled(&mut self) {
        self.deadline = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::Duration;

    fn at(ms: u64) -> Instant {
        Instant::ZERO + Duration::from_millis(ms)
    }

    #[test]
    fn quiet_connections_wake_at_their_timer_and_touched_ones_at_once() {
        let mut w = Wakeups::default();
        let mut slots = [Slot::default(); 4];
        for (h, s) in slots.iter_mut().enumerate().skip(1) {
            w.touch(h as u64, s);
        }
        w.quiet(1, &mut slots[1], Some(at(30)));
        w.quiet(2, &mut slots[2], Some(at(10)));
        w.quiet(3, &mut slots[3], None);
        assert_eq!(w.first_timer(), Some(at(10)));
        assert_eq!(w.next_active(0), None);
        assert_eq!(w.pop_due(at(20)), Some(2));
        assert_eq!(w.pop_due(at(20)), None);
        slots[2].unscheduled();
        w.touch(2, &mut slots[2]);
        assert_eq!(w.active().collect::<Vec<_>>(), vec![2]);
        assert_eq!(w.first_timer(), Some(at(30)));
        // A touch replaces the connection's timer.
        w.touch(1, &mut slots[1]);
        assert_eq!(w.first_timer(), None);
        assert_eq!(w.next_active(2), Some(2));
        assert_eq!(w.next_active(3), Some(1), "wraps around");
        w.forget(1, &slots[1]);
        w.forget(2, &slots[2]);
        assert_eq!(w.next_active(0), None);
        w.touch(3, &mut slots[3]);
        assert_eq!(w.active().collect::<Vec<_>>(), vec![3]);
    }
}
