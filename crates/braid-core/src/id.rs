//! Identities shared across braid-core: the one [`StreamId`] that the wire
//! format, the transport and the schedulers all use, its bound
//! [`MAX_STREAMS`], the scheduler's [`PathId`], and the reservation book's
//! [`ReservationId`].
//!
//! Invariant: a stream id that crosses the wire or is held by a scheduler is
//! in `0..MAX_STREAMS`; decoders reject larger ids and schedulers refuse to
//! open them, so an id a scheduler accepts can always be encoded.

use core::fmt;

/// Number of stream ids (`0..MAX_STREAMS`): the wire's decode limit, and the
/// most streams a scheduler or a connection holds at once.
///
/// 1024 is the wire format's limit (seed 002 §2); raising it would change
/// what decoders accept, so the schedulers use it too.
pub const MAX_STREAMS: u32 = 1024;

/// A stream of messages, named by the application (`0..MAX_STREAMS`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct StreamId(pub u32);

/// A path (overlay route or connection), named by the driver.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PathId(pub u32);

/// A reservation in a [`crate::reserve::Book`], assigned by the book in
/// increasing order and never reused by it.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(transparent)]
pub struct ReservationId(pub u64);

impl fmt::Display for ReservationId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "reservation {}", self.0)
    }
}

impl From<u64> for ReservationId {
    fn from(id: u64) -> Self {
        ReservationId(id)
    }
}

impl StreamId {
    /// Whether the id is below [`MAX_STREAMS`], i.e. can be encoded.
    pub fn in_range(self) -> bool {
        self.0 < MAX_STREAMS
    }
}

impl fmt::Display for StreamId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "stream {}", self.0)
    }
}

impl fmt::Display for PathId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "path {}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn range_and_display() {
        assert!(StreamId(MAX_STREAMS - 1).in_range());
        assert!(!StreamId(MAX_STREAMS).in_range());
        assert_eq!(StreamId(3).to_string(), "stream 3");
        assert_eq!(PathId(2).to_string(), "path 2");
        assert_eq!(ReservationId(7).to_string(), "reservation 7");
    }
}
