//! Quotas: how much one session, or one source, may give a sink.
//!
//! A sink counts what it takes ([`Usage`]): every stream a source opens
//! and every byte of message it accepts (a duplicate copy counts once,
//! nothing refused counts). [`SessionConfig::quota`](super::SessionConfig::quota)
//! bounds one session's usage over its life; a [`SinkHost`](super::SinkHost)'s
//! [`SourceQuota`] bounds one source's, over every session it runs on the
//! host while the host lives, and how many of them run at once. A source
//! is the IP address its session's first path came from (behind a relay,
//! the relay's).
//!
//! What goes past a quota is refused, never dropped quietly: a stream
//! opened beyond the streams quota, or whose message would take the bytes
//! past it, is refused with a STREAM_VERDICT whose reason names the quota
//! (the source's application sees
//! [`Event::StreamRefused`](super::Event::StreamRefused)), and the other
//! streams go on; a session beyond the sessions quota is refused at its
//! first PATH_HELLO ("sink busy").

use std::fmt;

/// Most of a session's or a source's usage; `None`: no bound.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Quota {
    /// Streams opened.
    pub streams: Option<u64>,
    /// Bytes of messages accepted.
    pub bytes: Option<u64>,
}

impl Quota {
    /// No bound at all.
    pub const UNLIMITED: Quota = Quota {
        streams: None,
        bytes: None,
    };

    /// Why taking `streams` more streams and `bytes` more bytes beyond
    /// `used` would break this quota of one `who`, if it would.
    pub(crate) fn check(&self, who: Who, used: Usage, streams: u64, bytes: u64) -> Option<String> {
        if let Some(limit) = self.streams {
            if streams > 0 && used.streams.saturating_add(streams) > limit {
                return Some(format!(
                    "quota: this sink takes at most {limit} stream{} per {who}",
                    if limit == 1 { "" } else { "s" }
                ));
            }
        }
        if let Some(limit) = self.bytes {
            if bytes > 0 && used.bytes.saturating_add(bytes) > limit {
                return Some(format!(
                    "quota: this sink takes at most {} per {who} ({} taken)",
                    Bytes(limit),
                    Bytes(used.bytes)
                ));
            }
        }
        None
    }
}

/// A [`SinkHost`](super::SinkHost)'s bounds on one source (see the module
/// docs).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SourceQuota {
    /// Sessions of one source served at once (open ones; those winding
    /// down do not count). `None`: up to the host's `max_sessions`.
    pub sessions: Option<usize>,
    /// Streams and bytes over all its sessions while the host lives.
    pub total: Quota,
}

/// What a sink has taken from a session or a source.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    /// Streams opened (those refused by a quota not counted).
    pub streams: u64,
    /// Bytes of messages accepted.
    pub bytes: u64,
}

impl Usage {
    /// What `self` has taken since `before`.
    pub(crate) fn since(self, before: Usage) -> Usage {
        Usage {
            streams: self.streams.saturating_sub(before.streams),
            bytes: self.bytes.saturating_sub(before.bytes),
        }
    }

    /// `self` and `more` together.
    pub(crate) fn plus(self, more: Usage) -> Usage {
        Usage {
            streams: self.streams.saturating_add(more.streams),
            bytes: self.bytes.saturating_add(more.bytes),
        }
    }
}

/// Whose quota a reason names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Who {
    Session,
    Source,
}

impl fmt::Display for Who {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Who::Session => "session",
            Who::Source => "source",
        })
    }
}

/// A byte count for people: `1.5 GB`, `300 kB`, `12 bytes`.
struct Bytes(u64);

impl fmt::Display for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const UNITS: [(&str, f64); 4] = [("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)];
        let b = self.0 as f64;
        match UNITS.iter().find(|(_, u)| b >= *u) {
            Some((name, u)) => write!(f, "{} {name}", (b / u * 10.0).round() / 10.0),
            None => write!(f, "{} bytes", self.0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_quota_refuses_only_what_goes_past_it() {
        let q = Quota {
            streams: Some(2),
            bytes: Some(1000),
        };
        let used = Usage {
            streams: 1,
            bytes: 900,
        };
        assert_eq!(q.check(Who::Session, used, 1, 0), None);
        assert_eq!(
            q.check(Who::Session, Usage { streams: 2, ..used }, 1, 0)
                .as_deref(),
            Some("quota: this sink takes at most 2 streams per session")
        );
        assert_eq!(q.check(Who::Source, used, 0, 100), None);
        assert_eq!(
            q.check(Who::Source, used, 0, 101).as_deref(),
            Some("quota: this sink takes at most 1 kB per source (900 bytes taken)")
        );
        assert_eq!(Quota::UNLIMITED.check(Who::Source, used, 5, u64::MAX), None);
    }

    #[test]
    fn byte_counts_read_as_people_write_them() {
        assert_eq!(Bytes(12).to_string(), "12 bytes");
        assert_eq!(Bytes(300_000).to_string(), "300 kB");
        assert_eq!(Bytes(1_500_000_000).to_string(), "1.5 GB");
    }
}
