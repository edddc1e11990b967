//! The event queue: a min-heap ordered by (time, sequence number).
//!
//! Main type: [`EventQueue`]. Invariant: events come out in time order, and
//! events scheduled for the same instant come out in the order they were
//! scheduled (the sequence number breaks ties), so a run is a pure function
//! of its inputs. Bounded by [`MAX_PENDING_EVENTS`]: a push beyond it is
//! refused and counted, which the simulator reports instead of growing
//! without limit.

use braid_core::Instant;
use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;

/// Most events that may be pending at once.
pub const MAX_PENDING_EVENTS: usize = 16 * 1024 * 1024;

struct Entry<E> {
    at: Instant,
    seq: u64,
    event: E,
}

impl<E> PartialEq for Entry<E> {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}
impl<E> Eq for Entry<E> {}
impl<E> PartialOrd for Entry<E> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl<E> Ord for Entry<E> {
    fn cmp(&self, other: &Self) -> Ordering {
        (self.at, self.seq).cmp(&(other.at, other.seq))
    }
}

/// A deterministic priority queue of timed events.
pub struct EventQueue<E> {
    heap: BinaryHeap<Reverse<Entry<E>>>,
    next_seq: u64,
    refused: u64,
}

impl<E> std::fmt::Debug for EventQueue<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventQueue")
            .field("pending", &self.heap.len())
            .field("next_seq", &self.next_seq)
            .field("refused", &self.refused)
            .finish()
    }
}

impl<E> Default for EventQueue<E> {
    fn default() -> Self {
        Self::new()
    }
}

impl<E> EventQueue<E> {
    /// An empty queue.
    pub fn new() -> Self {
        EventQueue {
            heap: BinaryHeap::new(),
            next_seq: 0,
            refused: 0,
        }
    }

    /// Schedules `event` at `at`. Returns false (and counts it) if the queue
    /// already holds [`MAX_PENDING_EVENTS`].
    pub fn push(&mut self, at: Instant, event: E) -> bool {
        if self.heap.len() >= MAX_PENDING_EVENTS {
            self.refused += 1;
            return false;
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        self.heap.push(Reverse(Entry { at, seq, event }));
        true
    }

    /// The earliest event, if any.
    pub fn pop(&mut self) -> Option<(Instant, E)> {
        self.heap.pop().map(|Reverse(e)| (e.at, e.event))
    }

    /// When the earliest event is due.
    pub fn peek_time(&self) -> Option<Instant> {
        self.heap.peek().map(|Reverse(e)| e.at)
    }

    /// Number of pending events.
    pub fn len(&self) -> usize {
        self.heap.len()
    }

    /// True when nothing is pending.
    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }

    /// Pushes refused because the queue was full.
    pub fn refused(&self) -> u64 {
        self.refused
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn orders_by_time_then_insertion() {
        let mut q = EventQueue::new();
        q.push(Instant::from_nanos(5), "b");
        q.push(Instant::from_nanos(1), "a");
        q.push(Instant::from_nanos(5), "c");
        q.push(Instant::from_nanos(5), "d");
        let order: Vec<_> = std::iter::from_fn(|| q.pop()).map(|(_, e)| e).collect();
        assert_eq!(order, ["a", "b", "c", "d"]);
    }
}
