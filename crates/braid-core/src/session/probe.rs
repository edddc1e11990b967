//! Probing: how a source measures a path its application does not fill.
//!
//! A path's estimate (seed 000 §IV) is built only from intervals in which
//! the sender was not app-limited: an interval in which the application
//! had less to send than the path could carry says nothing about what the
//! path can carry. A session whose streams are light (a 4 Mbit/s stream on
//! a 100 Mbit/s path) would therefore never get an estimate, never map its
//! guaranteed streams and never raise an upcall. IQ-Paths measures the
//! available bandwidth actively for this reason (its refs. 17 and 29,
//! available-bandwidth probing).
//!
//! With [`ProbeConfig`] set ([`SessionConfig::probe`](super::SessionConfig),
//! on by default in the tokio runtime, off in braid-sim), a source pads an
//! up path whose last interval was app-limited: for
//! [`ProbeConfig::length`] every [`ProbeConfig::every`], and continuously
//! while the path has fewer than `min_samples` usable samples (so a new
//! session maps within about a second). Padding is PAD frames on
//! [`PROBE_STREAM`], discardable, sent only when the scheduler has nothing
//! for the path, and only while the connection holds less than
//! [`PROBE_QUEUE`] bytes: enough that the sender never runs dry (so the
//! interval is not app-limited and congestion control finds the path's
//! rate), little enough that application data waits behind at most two
//! packets of padding. The cost is at most `length / every` of an idle
//! path's capacity (15 % by default) and nothing on a path the
//! application fills.

use super::frame::Frame;
use super::Session;
use crate::id::{PathId, StreamId, MAX_STREAMS};
use crate::time::{Duration, Instant};
use crate::transport::SendOptions;

/// The transport stream padding travels on (the last stream id; sessions
/// open streams below it).
pub const PROBE_STREAM: StreamId = StreamId(MAX_STREAMS - 1);
/// Bytes of one padding message.
pub const PROBE_MESSAGE: usize = 1200;
/// Padding keeps a probed connection's queue at least this full, and no
/// fuller.
pub const PROBE_QUEUE: u64 = 3000;

/// When a source probes an app-limited path (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProbeConfig {
    /// A probe starts this long after the last one started.
    pub every: Duration,
    /// A probe lasts this long (a few estimator intervals).
    pub length: Duration,
}

impl Default for ProbeConfig {
    fn default() -> Self {
        ProbeConfig {
            every: Duration::from_secs(2),
            length: Duration::from_millis(300),
        }
    }
}

impl Session {
    /// Pads `path` if it is being probed, or starts a probe when one is
    /// due. Runs after the scheduler had nothing more for the path.
    pub(super) fn probe_path(&mut self, now: Instant, path: PathId) {
        let Some(cfg) = self.config.probe else {
            return;
        };
        let min_samples = self.config.min_samples;
        let Some(p) = self.paths.get_mut(&path) else {
            return;
        };
        if p.probe_until.is_none_or(|u| now >= u) {
            let warming = p.usable_samples() < min_samples as u64;
            let due = warming || p.next_probe.is_none_or(|t| now >= t);
            if !(due && p.last_app_limited) {
                return;
            }
            p.probe_until = Some(now + cfg.length);
            p.next_probe = Some(now + cfg.every);
        }
        let Some(h) = p.conn else {
            return;
        };
        while let Some(c) = self.endpoint.connection_mut(h) {
            if c.queued_bytes() >= PROBE_QUEUE {
                break;
            }
            let pad = Frame::Pad(PROBE_MESSAGE).to_vec();
            if c.send(now, PROBE_STREAM, pad, SendOptions::DISCARDABLE)
                .is_err()
            {
                break;
            }
            self.stats.probe_bytes += PROBE_MESSAGE as u64;
        }
    }
}
