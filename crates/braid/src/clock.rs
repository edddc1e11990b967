//! The runtime's one clock site.
//!
//! `braid-core` never reads time; everything it needs is passed in as a
//! [`braid_core::Instant`]. This module maps the process's monotonic clock onto
//! that time line, with the origin at the first read, so that a running braid
//! and a simulation share one representation of time.
//!
//! The clock is tokio's ([`tokio::time::Instant`]), the one its timers run
//! on: the same as the process's monotonic clock in a running braid, and
//! the paused, self-advancing clock in a test on
//! `#[tokio::test(start_paused = true)]` (quinn's runtime does the same), so
//! that a test of timeouts and keep-alives over in-memory sockets runs in
//! virtual time. Outside a runtime it is the process's clock.

use braid_core::Instant;
use std::sync::OnceLock;

static ORIGIN: OnceLock<tokio::time::Instant> = OnceLock::new();

/// The current time on braid's time line (nanoseconds since the first call).
pub fn now() -> Instant {
    // The one clock read in the runtime: everything else takes time as an
    // argument (see clippy.toml).
    #[allow(clippy::disallowed_methods)]
    let wall = tokio::time::Instant::now();
    let origin = *ORIGIN.get_or_init(|| wall);
    let ns = wall.saturating_duration_since(origin).as_nanos();
    Instant::from_nanos(u64::try_from(ns).unwrap_or(u64::MAX))
}

/// Tokio's own reading of the same clock, for a timer that must be set
/// relative to tokio's now (the socket driver's, when braid's time line
/// has not moved: a paused runtime that started before the origin reads
/// zero until its virtual time passes it).
pub(crate) fn tokio_now() -> tokio::time::Instant {
    #[allow(clippy::disallowed_methods)]
    tokio::time::Instant::now()
}

#[cfg(test)]
mod tests {
    #[test]
    fn is_monotonic() {
        let a = super::now();
        let b = super::now();
        assert!(b >= a);
    }
}
