//! Path liveness and the peer's: silent paths go down, answering ones
//! come back, closed ones reconnect, and a session whose every path has
//! been down for [`SessionConfig::peer_timeout`](super::SessionConfig)
//! ends (seed 000 §III; the rule itself is in `path`).

use super::path::{self, PathState};
use super::{CloseReason, Event, Role, Session};
use crate::id::PathId;
use crate::time::Instant;
use crate::transport::ConnectionHandle;

impl Session {
    /// Path liveness: silent paths go down, answering ones come back, closed
    /// ones reconnect.
    pub(super) fn check_paths(&mut self, now: Instant) {
        let mut ids = std::mem::take(&mut self.scratch_paths);
        ids.clear();
        ids.extend(self.paths.keys().copied());
        for &id in &ids {
            let Some(p) = self.paths.get(&id) else {
                continue;
            };
            if !p.hops.is_empty() {
                if let Some(p) = self.paths.get_mut(&id) {
                    p.refresh_hops(now, path::HOP_REPORT_MAX_AGE);
                }
            }
            let Some(p) = self.paths.get(&id) else {
                continue;
            };
            if p.reconnect_at.is_some_and(|t| now >= t) {
                if let Err(e) = self.connect(now, id) {
                    tracing::debug!(path = id.0, %e, "session: reconnect failed");
                }
                continue;
            }
            let Some(c) = p.conn.and_then(|h| self.endpoint.connection(h)) else {
                continue;
            };
            if p.is_up() && p.is_silent(c, now, self.config.down_min) {
                self.path_down(now, id);
            } else if p.established && p.answers_again(c) {
                self.path_up(now, id);
            }
        }
        self.scratch_paths = ids;
        if self.role == Role::Source {
            self.refresh_scheduler_paths(now);
        }
        self.check_peer(now);
    }

    /// Closes the session once every path has been down for
    /// [`SessionConfig::peer_timeout`] (after one was up).
    fn check_peer(&mut self, now: Instant) {
        let Some(limit) = self.config.peer_timeout else {
            return;
        };
        if self.paths.values().any(PathState::is_up) {
            self.all_down_since = None;
            return;
        }
        if !self.ever_up {
            return;
        }
        let since = *self.all_down_since.get_or_insert(now);
        if now.saturating_duration_since(since) >= limit {
            tracing::debug!(session = self.id.0, "session: peer lost");
            self.close_with(now, CloseReason::PeerLost(limit));
        }
    }

    pub(super) fn path_established(&mut self, now: Instant, id: PathId) {
        let Some(p) = self.paths.get_mut(&id) else {
            return;
        };
        if p.established {
            return;
        }
        p.established = true;
        p.established_at = Some(now);
        p.down_since = None;
        self.ever_up = true;
        self.push_event(Event::PathUp { path: id });
        self.announce_streams(now, id);
    }

    /// A path that went down answers again: it re-enters through the
    /// estimator with a fresh window.
    fn path_up(&mut self, now: Instant, id: PathId) {
        let Some(p) = self.paths.get_mut(&id) else {
            return;
        };
        p.down_since = None;
        tracing::debug!(path = id.0, "session: path up again");
        self.push_event(Event::PathUp { path: id });
        if self.role == Role::Source {
            self.announce_streams(now, id);
        }
    }

    fn path_down(&mut self, now: Instant, id: PathId) {
        let Some(p) = self.paths.get_mut(&id) else {
            return;
        };
        if p.down_since.is_some() {
            return;
        }
        p.down_since = Some(now);
        self.stats.paths_down += 1;
        tracing::debug!(path = id.0, "session: path down");
        let resent = if self.role == Role::Source {
            self.failover(now, id)
        } else {
            0
        };
        self.push_event(Event::PathDown { path: id, resent });
    }

    pub(super) fn path_closed(&mut self, now: Instant, h: ConnectionHandle, id: PathId) {
        self.conns.remove(&h);
        self.endpoint.remove(h);
        self.path_down(now, id);
        if let Some(p) = self.paths.get_mut(&id) {
            p.conn = None;
            p.established = false;
            if self.role == Role::Source {
                p.reconnect_at = Some(now + self.config.reconnect_after);
            }
        }
    }
}
