//! The errors of the reservation book: one enum, [`ReserveError`], for every
//! refused request, wrapping the state machines' [`TransitionError`], the
//! slot table's [`Overbooked`] and policy's [`PolicyError`].

use crate::id::ReservationId;
use crate::reserve::policy::PolicyError;
use crate::reserve::state::{LifeState, ReservationState, TransitionError};
use crate::reserve::timeline::Overbooked;
use crate::time::Instant;

/// A request the book refused; the book is unchanged.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ReserveError {
    /// No resource of that name in the book.
    #[error("unknown resource {0:?}")]
    UnknownResource(String),
    /// A resource of that name is already in the book.
    #[error("resource {0:?} already exists")]
    DuplicateResource(String),
    /// No reservation with that id (never made, or forgotten).
    #[error("unknown {0}")]
    UnknownReservation(ReservationId),
    /// A rate of zero reserves nothing.
    #[error("the rate must be above zero")]
    ZeroRate,
    /// The end is not after the start.
    #[error("the end ({end:?}) is not after the start ({start:?})")]
    EndBeforeStart {
        /// The (effective) start.
        start: Instant,
        /// The requested end.
        end: Instant,
    },
    /// The end is already past.
    #[error("the end ({end:?}) is not after now ({now:?})")]
    EndInPast {
        /// The requested end.
        end: Instant,
        /// Now.
        now: Instant,
    },
    /// A modification changed nothing.
    #[error("the modification changes neither the rate nor the end")]
    EmptyModification,
    /// Not enough capacity free.
    #[error("resource {resource:?} is full: {source}")]
    Overbooked {
        /// The resource.
        resource: String,
        /// How full.
        source: Overbooked,
    },
    /// Refused by policy.
    #[error(transparent)]
    Policy(#[from] PolicyError),
    /// The state machines do not take this request now.
    #[error("{id}: {source}")]
    Transition {
        /// The reservation.
        id: ReservationId,
        /// The refused transition.
        source: TransitionError,
    },
    /// The reservation's life is over (terminated, failed or past its end):
    /// it can only be terminated.
    #[error("{id} is over ({state}, {life})")]
    NotAlive {
        /// The reservation.
        id: ReservationId,
        /// Where its reservation machine stopped.
        state: ReservationState,
        /// Where its life stands.
        life: LifeState,
    },
    /// Provisioning needs a committed version.
    #[error("{0} has no committed version to provision")]
    NotCommitted(ReservationId),
    /// The book holds as many live reservations as its bound allows.
    #[error("the book is full ({0} live reservations)")]
    BookFull(usize),
    /// The book holds as many resources as its bound allows.
    #[error("the book has too many resources ({0})")]
    TooManyResources(usize),
}
