//! The connection table: how many HTTP connections the broker holds, and
//! which one gives way when it is full.
//!
//! [`Slots::admit`] is asked for every accepted connection:
//!
//! - below `max − reserve` open connections: a **general** slot;
//! - otherwise the oldest connection with no request in flight (one that
//!   has not yet sent a whole request head, or sits idle between
//!   requests) is **evicted** and the new one takes its slot — so slow or
//!   idle connections can never keep a client with a request out;
//! - otherwise (every connection is serving a request) one of the last
//!   `reserve` slots, a **reserve** slot, whose connection is answered on
//!   `/healthz` only and closed after one answer;
//! - with all `max` taken: **refused** (closed at once).
//!
//! A [`Slot`] is released when dropped; [`Tracker::busy`] marks a request in
//! flight until its [`Busy`] guard is dropped (with the response body).
//! The table is a `std` mutex held for a few map operations, never across
//! an await.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::oneshot;

/// Open connections and their state.
#[derive(Debug)]
pub struct Slots {
    max: usize,
    reserve: usize,
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    /// The next connection's number (numbers grow with age).
    next: u64,
    open: BTreeMap<u64, Conn>,
}

#[derive(Debug)]
struct Conn {
    /// Requests in flight (0 or 1 on HTTP/1).
    busy: usize,
    /// Closes the connection.
    evict: Option<oneshot::Sender<()>>,
}

/// What a new connection gets.
#[derive(Debug)]
pub enum Admission {
    /// Served in full.
    General(Slot),
    /// Served `/healthz` only, then closed.
    Reserve(Slot),
    /// Closed at once: every slot is serving a request.
    Refused,
}

/// One open connection's place in the table.
#[derive(Debug)]
pub struct Slot {
    id: u64,
    slots: Arc<Slots>,
    /// Fires when the connection is evicted (or the broker stops).
    pub evicted: oneshot::Receiver<()>,
}

/// A request in flight on a connection; dropped with its response.
#[derive(Debug)]
pub struct Busy {
    id: u64,
    slots: Arc<Slots>,
}

impl Slots {
    /// A table of `max` connections, the last `reserve` kept for
    /// `/healthz`.
    pub fn new(max: usize, reserve: usize) -> Arc<Slots> {
        Arc::new(Slots {
            max,
            reserve: reserve.min(max),
            inner: Mutex::new(Inner::default()),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // The map stays consistent whatever panicked while it was held.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A place for a new connection (see the module doc).
    pub fn admit(self: &Arc<Self>) -> Admission {
        let mut inner = self.lock();
        let general = self.max - self.reserve;
        let reserve = if inner.open.len() < general {
            false
        } else if let Some(idle) = inner
            .open
            .iter()
            .find(|(_, c)| c.busy == 0)
            .map(|(id, _)| *id)
        {
            if let Some(c) = inner.open.remove(&idle) {
                if let Some(tx) = c.evict {
                    // A connection already closing is fine.
                    let _ = tx.send(());
                }
            }
            tracing::debug!(
                connection = idle,
                "evicted an idle connection for a new one"
            );
            false
        } else if inner.open.len() < self.max {
            true
        } else {
            return Admission::Refused;
        };
        let id = inner.next;
        inner.next += 1;
        let (tx, rx) = oneshot::channel();
        inner.open.insert(
            id,
            Conn {
                busy: 0,
                evict: Some(tx),
            },
        );
        let slot = Slot {
            id,
            slots: Arc::clone(self),
            evicted: rx,
        };
        if reserve {
            Admission::Reserve(slot)
        } else {
            Admission::General(slot)
        }
    }

    /// Closes every open connection (the broker stops).
    pub fn close_all(&self) {
        let mut inner = self.lock();
        for c in inner.open.values_mut() {
            if let Some(tx) = c.evict.take() {
                let _ = tx.send(());
            }
        }
    }

    /// How many connections are open.
    pub fn open(&self) -> usize {
        self.lock().open.len()
    }
}

/// Marks requests in flight on one connection (the connection's service
/// holds it; the [`Slot`] stays with the connection's task).
#[derive(Debug, Clone)]
pub struct Tracker {
    id: u64,
    slots: Arc<Slots>,
}

impl Slot {
    /// What marks this connection's requests in flight.
    pub fn tracker(&self) -> Tracker {
        Tracker {
            id: self.id,
            slots: Arc::clone(&self.slots),
        }
    }

    /// Marks a request in flight until the guard is dropped.
    pub fn busy(&self) -> Busy {
        self.tracker().busy()
    }
}

impl Tracker {
    /// Marks a request in flight until the guard is dropped.
    pub fn busy(&self) -> Busy {
        if let Some(c) = self.slots.lock().open.get_mut(&self.id) {
            c.busy += 1;
        }
        Busy {
            id: self.id,
            slots: Arc::clone(&self.slots),
        }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.slots.lock().open.remove(&self.id);
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        if let Some(c) = self.slots.lock().open.get_mut(&self.id) {
            c.busy = c.busy.saturating_sub(1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slot(a: Admission) -> (bool, Slot) {
        match a {
            Admission::General(s) => (false, s),
            Admission::Reserve(s) => (true, s),
            Admission::Refused => panic!("refused"),
        }
    }

    #[test]
    fn idle_connections_give_way_then_the_reserve_then_refusal() {
        let slots = Slots::new(4, 1);
        let (_, mut idle) = slot(slots.admit());
        let (_, a) = slot(slots.admit());
        let (_, b) = slot(slots.admit());
        let (_busy_a, _busy_b) = (a.busy(), b.busy());
        // Three general slots taken, one of them idle: it gives way.
        let (reserve, c) = slot(slots.admit());
        assert!(!reserve);
        assert!(
            idle.evicted.try_recv().is_ok(),
            "the idle one is told to close"
        );
        let _busy_c = c.busy();
        // Every general connection busy: the reserve slot.
        let (reserve, d) = slot(slots.admit());
        assert!(reserve);
        let _busy_d = d.busy();
        assert!(matches!(slots.admit(), Admission::Refused));
        // A request done: that connection is idle, and gives way.
        drop(_busy_a);
        assert!(matches!(slots.admit(), Admission::General(_)));
        drop(idle);
        assert_eq!(slots.open(), 4 - 1, "the new one was dropped at once");
    }
}
