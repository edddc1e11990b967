//! The book's background shares: recomputed at every change of what is
//! active on a resource, announced as [`Event::Share`] (seed 004's
//! callbacks; the formula is in [`crate::reserve::class`]).

use std::collections::BTreeMap;

use super::Book;
use crate::id::ReservationId;
use crate::reserve::class::{background_shares, Class};
use crate::reserve::record::Event;
use crate::units::Bandwidth;

/// What is active on one resource at an instant, for the shares.
#[derive(Debug, Default)]
struct Active {
    /// Sum of the active foreground rates.
    foreground: Bandwidth,
    /// The active background holders and their minimum rates.
    minimums: Vec<(ReservationId, Bandwidth)>,
}

impl Book {
    /// Recomputes the shares after a change of a `class` reservation on
    /// `resource`: needed for a background one, or when the resource has
    /// background holders (shares are recomputed at every change of the
    /// active set, so no announced shares means no active holder).
    pub(super) fn refresh_shares_after(&mut self, resource: &str, class: Class) {
        let holders = self
            .resources
            .get(resource)
            .is_some_and(|r| !r.shares.is_empty());
        if class == Class::Background || holders {
            self.refresh_shares();
        }
    }

    /// Recomputes every resource's background shares at `now` and
    /// announces those that changed (seed 004's callbacks).
    pub(super) fn refresh_shares(&mut self) {
        let now = self.now;
        let mut active: BTreeMap<&str, Active> = BTreeMap::new();
        for r in self.live.values() {
            let Some(v) = r.committed.filter(|v| v.is_active(now)) else {
                continue;
            };
            let entry = active.entry(r.resource.as_str()).or_default();
            match r.class {
                Class::Foreground => entry.foreground = entry.foreground.saturating_add(v.rate),
                Class::Background => entry.minimums.push((r.id, v.rate)),
            }
        }
        let mut events = Vec::new();
        for (name, res) in &mut self.resources {
            let Active {
                foreground: fg,
                minimums,
            } = active.remove(name.as_str()).unwrap_or_default();
            let fraction = self.config.background_fraction;
            let shares: BTreeMap<ReservationId, Bandwidth> =
                background_shares(res.table.capacity(), fg, &minimums, fraction)
                    .into_iter()
                    .collect();
            for (&id, &share) in &shares {
                if res.shares.get(&id) != Some(&share) {
                    events.push(Event::Share {
                        id,
                        resource: name.clone(),
                        share,
                    });
                }
            }
            for &id in res.shares.keys().filter(|id| !shares.contains_key(id)) {
                events.push(Event::Share {
                    id,
                    resource: name.clone(),
                    share: Bandwidth::ZERO,
                });
            }
            res.shares = shares;
        }
        for e in events {
            self.push_event(e);
        }
    }
}
