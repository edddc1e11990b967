//! The plain data that goes in and out of a [`crate::reserve::Book`]:
//! requests ([`ReserveRequest`], [`Modify`]), what the book keeps about a
//! reservation ([`Reservation`], [`Version`]) and what it announces
//! ([`Event`]). All serde-friendly, for the broker's API and storage.

use crate::id::ReservationId;
use crate::reserve::class::Class;
use crate::reserve::policy::Owner;
use crate::reserve::state::{LifeState, ProvisionState, ReservationState};
use crate::reserve::timeline::{Footprint, Interval, Piece};
use crate::time::Instant;
use crate::units::Bandwidth;

/// A request for a new reservation.
///
/// A `start` at or before now makes an immediate reservation (it starts
/// now); a later one an advance reservation.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ReserveRequest {
    /// Who asks.
    pub owner: Owner,
    /// The resource's name in the book.
    pub resource: String,
    /// The rate (a guaranteed rate, or a background minimum).
    pub rate: Bandwidth,
    /// When it starts.
    pub start: Instant,
    /// When it ends (exclusive).
    pub end: Instant,
    /// Foreground or background.
    #[serde(default)]
    pub class: Class,
}

/// A modification of a committed reservation: a new rate, a new end, or
/// both. Held as a new version until committed; aborted or timed out, the
/// old version stays in force.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Modify {
    /// The new rate, if it changes.
    pub rate: Option<Bandwidth>,
    /// The new end, if it changes.
    pub end: Option<Instant>,
}

/// One version of a reservation: a rate over an interval.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Version {
    /// 0 for the first version, one more for each modification.
    pub number: u32,
    /// When it starts.
    pub start: Instant,
    /// When it ends (exclusive).
    pub end: Instant,
    /// The rate.
    pub rate: Bandwidth,
}

impl Version {
    /// The version as one piece of a timeline; `None` if its interval is
    /// empty (the book never makes such a version).
    pub fn piece(&self) -> Option<Piece> {
        Some(Piece {
            interval: Interval::new(self.start, self.end)?,
            rate: self.rate,
        })
    }

    /// Whether the version is in effect at `t`.
    pub fn is_active(&self, t: Instant) -> bool {
        self.start <= t && t < self.end
    }
}

/// What the book knows about one reservation.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Reservation {
    /// Its id.
    pub id: ReservationId,
    /// Who made it.
    pub owner: Owner,
    /// The resource.
    pub resource: String,
    /// Foreground or background.
    pub class: Class,
    /// The reservation machine's state.
    pub state: ReservationState,
    /// The provisioning machine's state.
    pub provision: ProvisionState,
    /// The life machine's state.
    pub life: LifeState,
    /// The committed version in force, if any.
    pub committed: Option<Version>,
    /// The held version (a first version or a modification), if any.
    pub pending: Option<Version>,
    /// The highest version number handed out (committed, held, aborted or
    /// timed out); the next modification gets one more, so numbers are
    /// never reused, as NSI asks.
    #[serde(default)]
    pub latest_version: u32,
    /// When the held version's hold runs out.
    pub hold_expires: Option<Instant>,
}

impl Reservation {
    /// What the reservation occupies on its resource's timeline: the
    /// committed version, the held one, or while a modification is held the
    /// pointwise maximum of both (either may end up in force). Empty once
    /// its life is over.
    pub fn footprint(&self) -> Footprint {
        if !self.life.is_created() {
            return Footprint::default();
        }
        let committed = self.committed.as_ref().and_then(Version::piece);
        let pending = self.pending.as_ref().and_then(Version::piece);
        match (committed, pending) {
            (Some(a), Some(b)) => Footprint::max_of(a, b),
            (Some(p), None) | (None, Some(p)) => Footprint::single(p.interval, p.rate),
            (None, None) => Footprint::default(),
        }
    }
}

/// What the book announces (see [`crate::reserve::Book::poll_event`]).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    /// A held version was not committed in time: a first version is gone
    /// ([`ReservationState::TimedOut`]); a modification is dropped and the
    /// old version stays in force.
    HoldTimedOut {
        /// The reservation.
        id: ReservationId,
        /// The version that timed out.
        version: u32,
    },
    /// The committed version's end time passed; the capacity is free.
    PassedEndTime {
        /// The reservation.
        id: ReservationId,
    },
    /// A background holder's share changed (seed 004's callback); zero when
    /// the holder is no longer active.
    Share {
        /// The background reservation.
        id: ReservationId,
        /// Its resource.
        resource: String,
        /// The rate it may now use.
        share: Bandwidth,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_round_trips() {
        let req = ReserveRequest {
            owner: Owner::new("alice", "lab"),
            resource: "link".into(),
            rate: Bandwidth::from_mbps(10),
            start: Instant::from_nanos(5),
            end: Instant::from_nanos(9),
            class: Class::Background,
        };
        let json = serde_json::to_string(&req).unwrap();
        assert!(json.contains(r#""class":"background""#), "{json}");
        assert_eq!(serde_json::from_str::<ReserveRequest>(&json).unwrap(), req);
        let e = Event::Share {
            id: ReservationId(3),
            resource: "link".into(),
            share: Bandwidth::from_mbps(8),
        };
        let json = serde_json::to_string(&e).unwrap();
        assert_eq!(
            json,
            r#"{"event":"share","id":3,"resource":"link","share":8000000}"#
        );
        assert_eq!(serde_json::from_str::<Event>(&json).unwrap(), e);
        // A request without a class is foreground.
        let bare =
            r#"{"owner":{"user":"a","domain":"d"},"resource":"r","rate":1,"start":0,"end":1}"#;
        assert_eq!(
            serde_json::from_str::<ReserveRequest>(bare).unwrap().class,
            Class::Foreground
        );
        assert!(serde_json::from_str::<Modify>(r#"{"rate":1,"colour":2}"#).is_err());
    }
}
