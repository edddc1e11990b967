//! The broker's one clock site and its time formats.
//!
//! Reservations are made in wall-clock time, so the broker maps
//! [`braid_core::Instant`] onto nanoseconds since the Unix epoch (one time
//! line across restarts: a hold deadline stored before a crash means the same
//! instant after it). Times travel as RFC 3339 text, or `"now"`.

use braid_core::Instant;
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

/// The current wall-clock time on the book's time line.
pub fn now() -> Instant {
    // The broker's one clock read: reservations are in wall time.
    #[allow(clippy::disallowed_methods)]
    let now = std::time::SystemTime::now();
    let since = now
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    Instant::from_nanos(u64::try_from(since.as_nanos()).unwrap_or(u64::MAX))
}

/// An RFC 3339 time (or `"now"`, which is `now`) on the book's time line;
/// `None` when it is neither, or before 1970.
pub fn parse(text: &str, now: Instant) -> Option<Instant> {
    if text.trim() == "now" {
        return Some(now);
    }
    let t = OffsetDateTime::parse(text.trim(), &Rfc3339).ok()?;
    let nanos = u64::try_from(t.unix_timestamp_nanos()).ok()?;
    Some(Instant::from_nanos(nanos))
}

/// `t` as RFC 3339 text in UTC.
pub fn format(t: Instant) -> String {
    let nanos = i128::from(t.as_nanos());
    OffsetDateTime::from_unix_timestamp_nanos(nanos)
        .ok()
        .and_then(|t| t.format(&Rfc3339).ok())
        .unwrap_or_else(|| "invalid".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_rfc3339_and_now() {
        let t = parse("2026-11-25T03:00:00Z", Instant::ZERO).unwrap();
        assert_eq!(t.as_nanos(), 1_795_575_600 * 1_000_000_000);
        assert_eq!(format(t), "2026-11-25T03:00:00Z");
        assert_eq!(parse("2026-11-25T04:00:00+01:00", Instant::ZERO), Some(t));
        assert_eq!(parse("now", t), Some(t));
        assert_eq!(parse("tomorrow", t), None);
        assert_eq!(parse("1960-01-01T00:00:00Z", t), None);
    }
}
