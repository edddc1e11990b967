//! [`SinkHost`]: a sink that serves many sessions at once on one socket.
//!
//! A lone sink [`Session`] takes the first session that greets it and
//! turns every other away ("another session"); a sink that serves one
//! source after another that way leaves the next source unanswered while
//! the last one winds down. A host runs every session on one transport
//! [`Endpoint`], so the cookies, the connection ids and the connection caps
//! (`max_connections`, `max_connections_per_source`) cover all of them:
//!
//! * **The lobby** is a sink session that accepts every new connection and
//!   never becomes a session itself. When a connection's PATH_HELLO names
//!   session S, the host places it: in S when S is served here (a second
//!   path, or a path reconnecting), in a new session S while fewer than
//!   `max_sessions` are open (and, with the closed ones still winding
//!   down, fewer than `max(4 × max_sessions, max_sessions + 64)` are
//!   held), otherwise the connection is closed with
//!   [`ErrorCode::SERVER_BUSY`] and a reason that says so. A connection is
//!   placed before anything after its PATH_HELLO is read, so no frame of
//!   it reaches the wrong session.
//! * **Members** own only their own connections and accept none. Each is
//!   an ordinary sink [`Session`]; the host lends it the shared endpoint
//!   for the length of every call (the member's own endpoint is an unused
//!   placeholder), so the session code is the lone sink's, unchanged.
//! * **The application** takes each new session's id from
//!   [`SinkHost::accept`], works on it through [`SinkHost::with_session`],
//!   and ends it with [`SinkHost::remove`] once it is over: its
//!   connections leave the endpoint with it.
//!
//! * **Quotas.** Each session is bounded by its own
//!   [`SessionConfig::quota`]; [`SinkHost::set_source_quota`] bounds each
//!   source (the IP address of its session's first path) over all its
//!   sessions: how many run at once, and the streams and bytes they give
//!   while the host lives ([`super::quota`]).
//!
//! Driving is a [`Session`]'s: datagrams in, timeouts, transmits out. A
//! datagram pumps the lobby and the member that owns the connection it
//! reached; a timeout pumps everyone. Cost per datagram: one lookup per
//! member (bounded by `max_sessions`).

use super::quota::{Quota, SourceQuota, Usage};
use super::{Session, SessionConfig, SessionId};
use crate::id::PathId;
use crate::time::Instant;
use crate::transport::{ConfigError, ConnectionHandle, Endpoint, ErrorCode, FourTuple, Transmit};
use std::collections::{BTreeMap, VecDeque};
use std::net::IpAddr;

/// Default of the most sessions a [`SinkHost`] serves at once.
pub const DEFAULT_MAX_SESSIONS: usize = 16;

/// Most sources whose usage a host remembers for a [`SourceQuota`] with a
/// total; a new source beyond them is refused ("sink busy").
pub const MAX_SOURCES: usize = 65_536;

/// Where a sink session stands with respect to a host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Hosting {
    /// A lone sink: owns its endpoint, takes the first session.
    Alone,
    /// A host's lobby: accepts connections, hands each greeting over.
    Lobby,
    /// One of a host's sessions: accepts nothing itself.
    Member,
}

/// A connection that greeted the lobby for `session` as `path`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Greeting {
    pub connection: ConnectionHandle,
    pub session: SessionId,
    pub path: PathId,
}

/// One session of a host, and when it next needs a timeout.
#[derive(Debug)]
struct Member {
    session: Session,
    timeout: Option<Instant>,
    /// The IP address its first path came from.
    source: IpAddr,
}

/// Many sink sessions on one endpoint (see the module docs).
#[derive(Debug)]
pub struct SinkHost {
    endpoint: Endpoint,
    config: SessionConfig,
    lobby: Session,
    lobby_timeout: Option<Instant>,
    members: BTreeMap<SessionId, Member>,
    max_sessions: usize,
    accepted: VecDeque<SessionId>,
    refused_busy: u64,
    next_sweep: Instant,
    source_quota: SourceQuota,
    /// What each source's sessions have taken while the host lives (kept
    /// only while `source_quota.total` bounds something; at most
    /// [`MAX_SOURCES`]).
    sources: BTreeMap<IpAddr, Usage>,
}

/// How often closed connections nobody owns are forgotten.
const SWEEP_EVERY: crate::time::Duration = crate::time::Duration::from_secs(1);

/// Runs `f` on `s` with `endpoint` in its place (see the module docs).
fn lend<R>(endpoint: &mut Endpoint, s: &mut Session, f: impl FnOnce(&mut Session) -> R) -> R {
    std::mem::swap(endpoint, &mut s.endpoint);
    let r = f(s);
    std::mem::swap(endpoint, &mut s.endpoint);
    r
}

impl SinkHost {
    /// A host of at most `max_sessions` sessions (at least 1) on one
    /// endpoint; `secret`: 32 random bytes for it.
    ///
    /// # Errors
    /// An invalid configuration.
    pub fn new(
        config: SessionConfig,
        secret: [u8; 32],
        now: Instant,
        max_sessions: usize,
    ) -> Result<SinkHost, ConfigError> {
        let endpoint = Endpoint::new(config.transport.clone(), secret, true)?;
        let lobby = Self::hosted(&config, now, Hosting::Lobby)?;
        Ok(SinkHost {
            endpoint,
            config,
            lobby,
            lobby_timeout: None,
            members: BTreeMap::new(),
            max_sessions: max_sessions.max(1),
            accepted: VecDeque::new(),
            refused_busy: 0,
            next_sweep: now,
            source_quota: SourceQuota::default(),
            sources: BTreeMap::new(),
        })
    }

    /// A sink session whose own endpoint is a placeholder: it only ever
    /// runs on the host's (its secret is never used).
    fn hosted(
        config: &SessionConfig,
        now: Instant,
        hosting: Hosting,
    ) -> Result<Session, ConfigError> {
        let mut s = Session::sink(config.clone(), [0; 32], now)?;
        s.hosting = hosting;
        Ok(s)
    }

    /// Bounds each source from now on (see the module docs); what its
    /// sessions took before counts when a total is set.
    pub fn set_source_quota(&mut self, quota: SourceQuota) {
        self.source_quota = quota;
    }

    /// The bounds on each source.
    pub fn source_quota(&self) -> SourceQuota {
        self.source_quota
    }

    /// The source of session `id`: the IP address its first path came
    /// from.
    pub fn source_of(&self, id: SessionId) -> Option<IpAddr> {
        self.members.get(&id).map(|m| m.source)
    }

    /// What `source`'s sessions have taken while the host lives, as its
    /// quota counts it (zero when no total is set).
    pub fn source_usage(&self, source: IpAddr) -> Usage {
        self.sources.get(&source).copied().unwrap_or_default()
    }

    /// The most sessions served at once.
    pub fn max_sessions(&self) -> usize {
        self.max_sessions
    }

    /// Sessions held now (open or winding down, until removed).
    pub fn len(&self) -> usize {
        self.members.len()
    }

    /// No session is served.
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// Connections turned away because `max_sessions` were open.
    pub fn refused_busy(&self) -> u64 {
        self.refused_busy
    }

    /// The ids of the sessions served, in id order.
    pub fn sessions(&self) -> Vec<SessionId> {
        self.members.keys().copied().collect()
    }

    /// The next session that came up (its first path greeted), in order.
    pub fn accept(&mut self) -> Option<SessionId> {
        self.accepted.pop_front()
    }

    /// Runs `f` on session `id` (with the shared endpoint lent to it);
    /// `None` when it is not served here.
    pub fn with_session<R>(
        &mut self,
        id: SessionId,
        f: impl FnOnce(&mut Session) -> R,
    ) -> Option<R> {
        let m = self.members.get_mut(&id)?;
        let total = self.source_quota.total;
        let counted = total != Quota::UNLIMITED;
        let before = m.session.usage;
        m.session.source_share = counted.then(|| {
            let used = self.sources.get(&m.source).copied().unwrap_or_default();
            (total, used.since(before))
        });
        let r = lend(&mut self.endpoint, &mut m.session, f);
        m.timeout = lend(&mut self.endpoint, &mut m.session, |s| s.poll_timeout());
        let taken = m.session.usage.since(before);
        if counted && taken != Usage::default() {
            let used = self.sources.entry(m.source).or_default();
            *used = used.plus(taken);
        }
        Some(r)
    }

    /// Ends session `id` here: it and its connections are forgotten (close
    /// it first for the source to hear why). The session, if it was served.
    pub fn remove(&mut self, id: SessionId) -> Option<Session> {
        let m = self.members.remove(&id)?;
        for h in m.session.conns.keys().chain(m.session.pending.iter()) {
            self.endpoint.remove(*h);
        }
        Some(m.session)
    }

    // ---- driving ---------------------------------------------------------

    /// A datagram arrived over `path`.
    pub fn handle_datagram(&mut self, now: Instant, path: FourTuple, data: &[u8]) {
        self.endpoint.handle_datagram(now, path, data);
        let routed = self.endpoint.last_routed();
        let owner = routed.and_then(|h| {
            self.members
                .iter()
                .find(|(_, m)| m.session.conns.contains_key(&h))
                .map(|(id, _)| *id)
        });
        if let Some(id) = owner {
            self.with_session(id, |s| s.pump(now));
        }
        // The lobby only when the datagram may concern it: a new
        // connection, or one of its own (a thousand idle connections in it
        // cost a walk over all of them otherwise).
        let lobby = routed.is_none_or(|h| self.lobby.pending.contains(&h));
        if lobby || self.endpoint.has_incoming() {
            self.pump_lobby(now);
        }
    }

    /// The instant of [`SinkHost::poll_timeout`] has passed.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.endpoint.handle_timeout(now);
        let ids = self.sessions();
        for id in ids {
            self.with_session(id, |s| {
                s.handle_timeout(now);
            });
        }
        self.pump_lobby(now);
        if now >= self.next_sweep {
            self.sweep();
            self.next_sweep = now + SWEEP_EVERY;
        }
    }

    /// The next datagram to send, appended to `buf`.
    pub fn poll_transmit_append(&mut self, now: Instant, buf: &mut Vec<u8>) -> Option<Transmit> {
        self.endpoint.poll_transmit_append(now, buf)
    }

    /// When to call [`SinkHost::handle_timeout`] next.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let members = self.members.values().map(|m| m.timeout);
        [self.endpoint.poll_timeout(), self.lobby_timeout]
            .into_iter()
            .chain(members)
            .flatten()
            .min()
    }

    /// Runs the lobby, then places every connection that greeted it.
    fn pump_lobby(&mut self, now: Instant) {
        if self.lobby.is_closed() {
            // Nothing should close it (its connections are refused one by
            // one), but a closed lobby would accept nobody again.
            if let Ok(l) = Self::hosted(&self.config, now, Hosting::Lobby) {
                self.lobby = l;
            }
        }
        lend(&mut self.endpoint, &mut self.lobby, |s| s.pump(now));
        // The lobby's own events (statistics of no paths) concern nobody.
        while self.lobby.poll_event().is_some() {}
        let greetings = std::mem::take(&mut self.lobby.foreign);
        for g in greetings {
            self.place(now, g);
        }
        self.lobby_timeout = lend(&mut self.endpoint, &mut self.lobby, |s| s.poll_timeout());
    }

    /// Puts a greeted connection in its session (see the module docs).
    fn place(&mut self, now: Instant, g: Greeting) {
        let refuse = |ep: &mut Endpoint, reason: &str| {
            if let Some(c) = ep.connection_mut(g.connection) {
                c.close(now, ErrorCode::SERVER_BUSY, reason.as_bytes());
            }
        };
        if g.session == SessionId(0) {
            refuse(&mut self.endpoint, "session id 0 is not a session");
            return;
        }
        if !self.members.contains_key(&g.session) {
            let Some(source) = self
                .endpoint
                .connection(g.connection)
                .map(|c| c.remote().ip())
            else {
                return;
            };
            // Closed sessions winding down do not count, up to
            // `max_held` in all (they hold memory until the application
            // removes them).
            let open = self
                .members
                .values()
                .filter(|m| !m.session.is_closed())
                .count();
            if open < self.max_sessions && self.members.len() >= self.max_held() {
                self.refused_busy += 1;
                let reason = format!(
                    "sink busy: {} ended sessions are still winding down",
                    self.members.len() - open
                );
                refuse(&mut self.endpoint, &reason);
                return;
            }
            if open >= self.max_sessions {
                self.refused_busy += 1;
                let n = self.max_sessions;
                let reason = format!(
                    "sink busy: it serves at most {n} session{} at once",
                    if n == 1 { "" } else { "s" }
                );
                tracing::debug!(session = g.session.0, "session host: busy");
                refuse(&mut self.endpoint, &reason);
                return;
            }
            if let Some(reason) = self.source_refusal(source) {
                self.refused_busy += 1;
                tracing::debug!(session = g.session.0, %source, "session host: source at its quota");
                refuse(&mut self.endpoint, &reason);
                return;
            }
            let Ok(mut s) = Self::hosted(&self.config, now, Hosting::Member) else {
                refuse(&mut self.endpoint, "sink cannot start a session");
                return;
            };
            s.id = g.session;
            self.members.insert(
                g.session,
                Member {
                    session: s,
                    timeout: None,
                    source,
                },
            );
            self.accepted.push_back(g.session);
        }
        let closed = self
            .members
            .get(&g.session)
            .is_some_and(|m| m.session.is_closed());
        if closed {
            refuse(&mut self.endpoint, "that session is over");
            return;
        }
        self.with_session(g.session, |s| {
            s.pending.push(g.connection);
            if let Err(e) = s.handle_hello(now, g.connection, g.session, g.path) {
                s.close_with(now, e);
                return;
            }
            // What came after PATH_HELLO on the connection.
            s.pump(now);
        });
    }

    /// Most sessions held, open or winding down: the open ones, and ended
    /// ones until the application removes them (a source may end a
    /// session every few milliseconds; they must not turn the next away).
    fn max_held(&self) -> usize {
        (4 * self.max_sessions).max(self.max_sessions + 64)
    }

    /// Why a new session of `source` is refused, if it is: its sessions
    /// quota is reached, or a total is set and no more sources fit.
    fn source_refusal(&self, source: IpAddr) -> Option<String> {
        if let Some(n) = self.source_quota.sessions {
            let open = self
                .members
                .values()
                .filter(|m| m.source == source && !m.session.is_closed())
                .count();
            if open >= n {
                return Some(format!(
                    "sink busy: it serves at most {n} session{} from one source ({source}) at once",
                    if n == 1 { "" } else { "s" }
                ));
            }
        }
        let counted = self.source_quota.total != Quota::UNLIMITED;
        if counted && !self.sources.contains_key(&source) && self.sources.len() >= MAX_SOURCES {
            return Some(format!(
                "sink busy: it keeps the quotas of at most {MAX_SOURCES} sources"
            ));
        }
        None
    }

    /// Forgets closed connections that no session owns any more (a path
    /// replaced by its reconnection, a refused greeting).
    fn sweep(&mut self) {
        let mut owned: std::collections::HashSet<ConnectionHandle> =
            self.lobby.pending.iter().copied().collect();
        for m in self.members.values() {
            owned.extend(m.session.conns.keys().copied());
            owned.extend(m.session.pending.iter().copied());
        }
        let stray: Vec<ConnectionHandle> = self
            .endpoint
            .handles()
            .into_iter()
            .filter(|h| !owned.contains(h))
            .filter(|h| self.endpoint.connection(*h).is_some_and(|c| c.is_closed()))
            .collect();
        for h in stray {
            self.endpoint.remove(h);
        }
    }
}

#[cfg(test)]
#[path = "host_tests.rs"]
mod tests;
