//! Reservations: the sans-IO book a bandwidth broker keeps (seed 004,
//! GARA; OGF NSI Connection Service v2 for the state machines).
//!
//! A [`Book`] is one domain's set of resources (network links, CPUs,
//! storage bandwidth), each with a [`SlotTable`]: a timeline of held and
//! committed reservations, admitted when the peak of what overlaps plus the
//! request fits the reservable capacity. Reservations are immediate or in
//! advance, are held then committed (or aborted, or time out after
//! [`DEFAULT_HOLD_TIME`]), provisioned and released, modified as new
//! versions, and terminated. Foreground reservations get their rate;
//! background ones a proportional share of what foreground leaves unused,
//! announced as [`Event::Share`]. A [`Coordinator`] holds one request over
//! several resources and books, then commits all or aborts all. A
//! [`Policy`] limits users and domains before capacity is looked at.
//!
//! | module | what it is for |
//! | --- | --- |
//! | [`timeline`] | [`Interval`], [`Footprint`], [`SlotTable`]: admission and enquiries on one resource |
//! | [`state`] | the reservation, provisioning and life state machines and their [`TransitionError`] |
//! | [`class`] | [`Class`] and seed 004's background share formula |
//! | [`policy`] | [`Policy`], [`Limits`], the rule named in a [`PolicyError`] |
//! | [`record`] | the plain data in and out: [`ReserveRequest`], [`Modify`], [`Reservation`], [`Event`] |
//! | [`book`] | [`Book`]: runs the machines over the slot tables, timers, events |
//! | [`coreserve`] | [`Coordinator`]: two-phase co-reservation across resources and books |
//! | [`error`] | [`ReserveError`] |
//!
//! Time is passed in as [`crate::Instant`]; the broker maps wall-clock time
//! onto it. Everything here is plain data, serde-friendly, for the broker's
//! API and store.
//!
//! # Example
//!
//! ```
//! use braid_core::reserve::{
//!     Book, BookConfig, Class, LifeState, Owner, ReservationState, ReserveRequest,
//! };
//! use braid_core::{Bandwidth, Duration, Instant};
//!
//! let mut book = Book::new(BookConfig::default());
//! book.add_resource("link", Bandwidth::from_mbps(100)).unwrap();
//! let now = Instant::ZERO;
//! let req = ReserveRequest {
//!     owner: Owner::new("alice", "lab"),
//!     resource: "link".into(),
//!     rate: Bandwidth::from_mbps(60),
//!     start: now,
//!     end: now + Duration::from_secs(600),
//!     class: Class::Foreground,
//! };
//! let id = book.reserve(req.clone(), now).unwrap();
//! book.commit(id, now).unwrap();
//! assert_eq!(book.reservation(id).unwrap().state, ReservationState::Committed);
//! // A second 60 Mbit/s over the same time does not fit on 100 Mbit/s …
//! assert!(book.reserve(req, now).is_err());
//! // … but 40 Mbit/s does, and the book can say so beforehand.
//! let free = book.max_free("link", now, now + Duration::from_secs(600)).unwrap();
//! assert_eq!(free, Bandwidth::from_mbps(40));
//! // The driver wakes at `poll_timeout` (at or before the next timer) and
//! // calls `handle_timeout`; at the end the capacity is free again.
//! assert!(book.poll_timeout().is_some_and(|t| t <= now + Duration::from_secs(600)));
//! book.handle_timeout(now + Duration::from_secs(600));
//! assert_eq!(book.reservation(id).unwrap().life, LifeState::PassedEndTime);
//! assert_eq!(book.reservations().count(), 0);
//! ```

pub mod book;
pub mod class;
pub mod coreserve;
pub mod error;
pub mod policy;
pub mod record;
pub mod state;
pub mod timeline;

pub use book::{Book, BookConfig, BookStats, DEFAULT_HOLD_TIME};
pub use class::{background_shares, Class};
pub use coreserve::{
    Action, CoError, Command, Coordinator, DomainId, Part, PartState, Phase, Reply,
};
pub use error::ReserveError;
pub use policy::{Limits, Owner, Policy, PolicyError, PolicyRule};
pub use record::{Event, Modify, Reservation, ReserveRequest, Version};
pub use state::{LifeState, ProvisionState, ReservationState, TransitionError};
pub use timeline::{Footprint, Interval, Overbooked, SlotTable};

#[cfg(test)]
mod model_tests;
