//! The book's timers: holds running out, committed versions starting and
//! ending. Requests and [`Book::handle_timeout`] run what is due; the
//! earliest timer is kept as a lower bound so that requests between
//! timers skip the scan.

use super::Book;
use crate::id::ReservationId;
use crate::reserve::record::{Event, Reservation};
use crate::reserve::state::{LifeInput, ReservationInput};
use crate::time::Instant;

impl Book {
    pub(super) fn advance(&mut self, now: Instant) {
        self.now = self.now.max(now);
        let now = self.now;
        if now < self.next_due {
            return;
        }
        let expired: Vec<ReservationId> = self
            .live
            .values()
            .filter(|r| r.hold_expires.is_some_and(|t| t <= now))
            .map(|r| r.id)
            .collect();
        for id in expired {
            let Some(r) = self.live.get(&id) else {
                continue;
            };
            let version = r.pending.map_or(0, |v| v.number);
            // Held is the only state with a hold deadline.
            if let Ok(next) = r
                .state
                .step(ReservationInput::Expire, r.committed.is_some())
            {
                self.stats.timed_out += 1;
                self.drop_hold(id, next);
                self.push_event(Event::HoldTimedOut { id, version });
            }
        }
        let ended: Vec<ReservationId> = self
            .live
            .values()
            .filter(|r| r.pending.is_none() && r.committed.is_some_and(|v| v.end <= now))
            .map(|r| r.id)
            .collect();
        for id in ended {
            let Some(mut r) = self.live.remove(&id) else {
                continue;
            };
            if let Ok(life) = r.life.step(LifeInput::EndTime) {
                r.life = life;
            }
            self.untable(&r);
            self.finish(r);
            self.push_event(Event::PassedEndTime { id });
        }
        self.refresh_shares();
        self.next_due = self
            .live
            .values()
            .flat_map(|r| timers(r, now))
            .flatten()
            .min()
            .unwrap_or(Instant::MAX);
    }

    /// Lowers [`Book::next_due`] to `id`'s timers.
    pub(super) fn note_timers(&mut self, id: ReservationId) {
        if let Some(r) = self.live.get(&id) {
            let first = timers(r, self.now).into_iter().flatten().min();
            self.next_due = self.next_due.min(first.unwrap_or(Instant::MAX));
        }
    }
}

/// The instants at which `r` needs the book: its hold running out, its
/// committed version starting (after `now`; shares change) and ending
/// (unless a modification is held, whose hold comes first).
fn timers(r: &Reservation, now: Instant) -> [Option<Instant>; 3] {
    let start = r.committed.map(|v| v.start).filter(|s| *s > now);
    let end = r.committed.filter(|_| r.pending.is_none()).map(|v| v.end);
    [r.hold_expires, start, end]
}
