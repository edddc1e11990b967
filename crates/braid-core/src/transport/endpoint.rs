//! The endpoint: all connections of one UDP socket, the stateless cookie
//! handshake, and routing of datagrams by connection id.
//!
//! Main types: [`Endpoint`], [`ConnectionHandle`], [`EndpointStats`].
//!
//! Invariants:
//! - No per-peer state exists before a client echoes a valid cookie: a
//!   first INITIAL is answered with a RETRY built from the datagram alone.
//! - A cookie creates at most one connection: accepted cookies are
//!   remembered (up to [`MAX_REPLAY_ENTRIES`], about two buckets' worth) and
//!   a replay for which no connection exists is dropped and counted; its
//!   sender gets a stateless CLOSE ([`REASON_HANDSHAKE_EXPIRED`]), so a
//!   client whose HANDSHAKEs were all lost hears that it must start again.
//! - With a key ([`Config::psk`](super::Config::psk)), a connection is
//!   created only for a client whose Noise message 1 verifies, and only
//!   after its cookie did (so no cryptographic work is done for an
//!   unvalidated address); a refused client gets a stateless CLOSE
//!   ([`ErrorCode::AUTH_FAILED`]) and leaves no state behind, not even its
//!   cookie in the replay set.
//! - At most `Config::max_connections` connections in all, at most
//!   `Config::max_connections_per_source` for one source IP address, and
//!   [`MAX_STATELESS_QUEUE`] queued stateless answers. A validated client
//!   beyond either connection cap gets a stateless CLOSE
//!   ([`ErrorCode::SERVER_BUSY`], a reason starting "server full") and
//!   leaves no state behind; it is checked before any cryptographic work.
//!   Beyond the queue bound, answers are dropped and counted.
//! - A server connection whose client never confirms the handshake gives
//!   up after `Config::handshake_timeout` (see the connection's timers),
//!   so completed-then-silent handshakes free their slots.
//! - A DATA packet for a keyed connection reaches it only after it opened
//!   under that connection's key ([`super::protection`]); one that does
//!   not open is dropped and counted (`decrypt_failed`, here and in the
//!   connection's stats) and changes nothing else.
//! - Every datagram is either routed to exactly one connection, answered
//!   statelessly, or dropped and counted.
//! - Only connections touched since they last had nothing to send are
//!   asked for datagrams and timers; the others wait on their timers
//!   ([`super::wakeups`]). Every call that may change a connection goes
//!   through a path that touches it.

use super::auth::{self, AuthError, SeedSource, SessionKeys};
use super::connection::Connection;
use super::cookie::{CookieKey, COOKIE_TAG_LEN};
use super::protection::Protection;
use super::wakeups::Wakeups;
use super::{Config, ConfigError, FourTuple, Transmit};
use crate::time::Instant;
use crate::wire::{
    CloseFrame, ConnectionId, ErrorCode, Frame, Header, Packet, PacketBuilder, PacketType, Reader,
    TransportParams, WireError, CID_LEN, MAX_DATAGRAM_SIZE, MIN_DATAGRAM_SIZE,
};
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::net::SocketAddr;
use tracing::{debug, trace, warn};

/// Refusal phrase: the client has `--no-encrypt`, this server encrypts.
const REASON_MODE_CLIENT_PLAIN: &str =
    "encryption mode mismatch: the client has --no-encrypt but the server encrypts";
/// Refusal phrase: the client encrypts, this server has `--no-encrypt`.
const REASON_MODE_CLIENT_ENCRYPTS: &str =
    "encryption mode mismatch: the server has --no-encrypt but the client encrypts";

/// Every "server full" refusal's reason phrase starts with this.
pub const REASON_SERVER_FULL_PREFIX: &str = "server full";
/// Refusal phrase: `Config::max_connections` reached.
pub const REASON_SERVER_FULL: &str = "server full: no room for another connection";
/// Refusal phrase: `Config::max_connections_per_source` reached for the
/// client's address.
pub const REASON_SERVER_FULL_SOURCE: &str = "server full: too many connections from this address";

/// Most stateless answers (RETRYs and refusals) waiting to be sent.
pub const MAX_STATELESS_QUEUE: usize = 256;
/// The reason of the stateless CLOSE a client gets when it echoes a
/// cookie whose connection already timed out at the server.
pub const REASON_HANDSHAKE_EXPIRED: &str = "handshake timed out at the server: connect again";

/// Most accepted cookies remembered for replay detection.
pub const MAX_REPLAY_ENTRIES: usize = 65_536;

/// Several datagrams on one path, laid out for UDP GSO: every
/// `segment_size` bytes of the buffer is one datagram (the last may be
/// shorter).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Batch {
    /// The path to send them on (see [`Transmit::path`]).
    pub path: FourTuple,
    /// Total bytes in the buffer.
    pub size: usize,
    /// Bytes per datagram.
    pub segment_size: usize,
}

/// Identifies a connection within its endpoint; never reused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConnectionHandle(pub u64);

/// Datagram counters of an endpoint.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct EndpointStats {
    /// Datagrams handed to the endpoint.
    pub received: u64,
    /// Dropped: undecodable (truncated, bad bounds, unknown types).
    pub malformed: u64,
    /// Dropped: larger than the protocol allows.
    pub oversized: u64,
    /// Dropped: a version this endpoint does not speak.
    pub bad_version: u64,
    /// Dropped: addressed to no known connection.
    pub unknown_connection: u64,
    /// Dropped: an INITIAL shorter than the required padding.
    pub short_initial: u64,
    /// RETRYs sent.
    pub retries_sent: u64,
    /// Dropped: a cookie with a wrong tag (spoofed or forged).
    pub bad_cookies: u64,
    /// Dropped: a cookie from an expired time bucket.
    pub stale_cookies: u64,
    /// Dropped: a valid cookie used before (replay).
    pub replayed_cookies: u64,
    /// Dropped: no room for another connection (client side) or for
    /// another stateless answer in the queue.
    pub refused: u64,
    /// Refused with a stateless "server full" CLOSE: a valid cookie, but
    /// the total or the per-source connection cap was reached.
    pub refused_full: u64,
    /// Refused with a stateless AUTH_FAILED close: a valid cookie but no
    /// key, a wrong key, or a key this server does not have.
    pub auth_failed: u64,
    /// Dropped: a DATA packet for a keyed connection that did not open
    /// under its key (forged, altered, unprotected or injected).
    pub decrypt_failed: u64,
    /// Connections accepted.
    pub accepted: u64,
}

/// All connections of one socket. Drive it as the module docs of
/// [`super`] describe.
#[derive(Debug)]
pub struct Endpoint {
    config: Config,
    server: bool,
    cookie_key: CookieKey,
    cid_key: [u8; 32],
    cid_counter: u64,
    /// Seeds of the handshakes' ephemeral keys (see [`auth`]).
    seeds: SeedSource,
    next_handle: u64,
    conns: BTreeMap<u64, Connection>,
    by_cid: HashMap<ConnectionId, u64>,
    /// The id and handle the last datagram was routed by: a bulk
    /// transfer's datagrams come in long runs for one connection, and this
    /// spares hashing each one's id.
    last_route: Option<(ConnectionId, u64)>,
    by_initial: HashMap<(FourTuple, ConnectionId), u64>,
    used_cookies: HashSet<[u8; COOKIE_TAG_LEN]>,
    used_order: VecDeque<[u8; COOKIE_TAG_LEN]>,
    stateless: VecDeque<(FourTuple, Vec<u8>)>,
    incoming: VecDeque<ConnectionHandle>,
    cursor: u64,
    wakeups: Wakeups,
    stats: EndpointStats,
}

/// Why `connect` failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectError {
    /// `Config::max_connections` reached.
    #[error("too many connections")]
    TooManyConnections,
}

impl Endpoint {
    /// An endpoint; `server` says whether it accepts incoming connections.
    /// `secret` must be 32 random bytes from the caller, fresh for every
    /// endpoint: it keys the cookies, the derivation of connection ids and
    /// the seeds of the authenticated handshake's ephemeral keys.
    ///
    /// # Errors
    /// [`ConfigError`] for an invalid configuration.
    pub fn new(config: Config, secret: [u8; 32], server: bool) -> Result<Self, ConfigError> {
        config.validate()?;
        Ok(Endpoint {
            cookie_key: CookieKey::new(blake3::derive_key("braid rudp cookie v1", &secret)),
            cid_key: blake3::derive_key("braid rudp connection id v1", &secret),
            seeds: SeedSource::new(&secret),
            config,
            server,
            cid_counter: 0,
            next_handle: 0,
            conns: BTreeMap::new(),
            by_cid: HashMap::new(),
            last_route: None,
            by_initial: HashMap::new(),
            used_cookies: HashSet::new(),
            used_order: VecDeque::new(),
            stateless: VecDeque::new(),
            incoming: VecDeque::new(),
            cursor: 0,
            wakeups: Wakeups::default(),
            stats: EndpointStats::default(),
        })
    }

    /// A fresh, unpredictable connection id not in use here.
    fn new_cid(&mut self) -> ConnectionId {
        loop {
            self.cid_counter += 1;
            let mut h = blake3::Hasher::new_keyed(&self.cid_key);
            h.update(&self.cid_counter.to_be_bytes());
            let mut id = [0u8; CID_LEN];
            id.copy_from_slice(&h.finalize().as_bytes()[..CID_LEN]);
            let id = ConnectionId(id);
            if !self.by_cid.contains_key(&id) {
                return id;
            }
        }
    }

    fn insert(&mut self, c: Connection) -> ConnectionHandle {
        let h = self.next_handle;
        self.next_handle += 1;
        self.by_cid.insert(c.local_cid(), h);
        let c = self.conns.entry(h).or_insert(c);
        self.wakeups.touch(h, &mut c.wake);
        ConnectionHandle(h)
    }

    /// Opens a connection to `remote` from whichever local address the
    /// driver sends from; its INITIAL goes out with the next
    /// `poll_transmit`.
    ///
    /// # Errors
    /// [`ConnectError::TooManyConnections`].
    pub fn connect(
        &mut self,
        now: Instant,
        remote: SocketAddr,
    ) -> Result<ConnectionHandle, ConnectError> {
        self.connect_on(now, FourTuple::from_remote(remote))
    }

    /// Opens a connection on `path`: to `path.remote`, from the socket
    /// bound to `path.local` when that is set.
    ///
    /// # Errors
    /// [`ConnectError::TooManyConnections`].
    pub fn connect_on(
        &mut self,
        now: Instant,
        path: FourTuple,
    ) -> Result<ConnectionHandle, ConnectError> {
        if self.conns.len() >= self.config.max_connections {
            return Err(ConnectError::TooManyConnections);
        }
        let local = self.new_cid();
        let initial_dst = self.new_cid();
        // Only a keyed client draws a seed, so keyless runs (braid-sim)
        // derive exactly what they did before.
        let seed = self.config.psk.as_ref().map(|_| self.seeds.next_seed());
        let c = Connection::new_client(now, path, local, initial_dst, self.config.clone(), seed);
        debug!(?path, cid = ?local, ?now, "client connection created");
        Ok(self.insert(c))
    }

    /// The next connection accepted from a client, if any.
    pub fn accept(&mut self) -> Option<ConnectionHandle> {
        self.incoming.pop_front()
    }

    /// Connections accepted and not yet taken with [`Self::accept`].
    pub fn has_incoming(&self) -> bool {
        !self.incoming.is_empty()
    }

    /// A connection by handle.
    pub fn connection(&self, h: ConnectionHandle) -> Option<&Connection> {
        self.conns.get(&h.0)
    }

    /// A connection by handle, mutably (to send, receive, poll events).
    pub fn connection_mut(&mut self, h: ConnectionHandle) -> Option<&mut Connection> {
        self.conn_mut(h.0)
    }

    /// Connection `h`, touched: whatever the caller does to it, the
    /// endpoint looks at it again.
    fn conn_mut(&mut self, h: u64) -> Option<&mut Connection> {
        let c = self.conns.get_mut(&h)?;
        self.wakeups.touch(h, &mut c.wake);
        Some(c)
    }

    /// Handles of all connections, in creation order.
    pub fn handles(&self) -> Vec<ConnectionHandle> {
        self.conns.keys().map(|h| ConnectionHandle(*h)).collect()
    }

    /// Datagram counters.
    pub fn stats(&self) -> EndpointStats {
        self.stats
    }

    /// The connection the last routed datagram went to (kept until
    /// another is routed or that connection is removed): a host of several
    /// sessions on one endpoint runs only the one that owns it.
    pub fn last_routed(&self) -> Option<ConnectionHandle> {
        self.last_route.map(|(_, h)| ConnectionHandle(h))
    }

    /// Connections the endpoint looks at on its next call (touched since
    /// they last had nothing to send).
    #[cfg(test)]
    pub(crate) fn active_connections(&self) -> usize {
        self.wakeups.active_count()
    }

    /// Number of connections held.
    pub fn connection_count(&self) -> usize {
        self.conns.len()
    }

    /// Forgets a connection (closed or not); its handle becomes invalid.
    pub fn remove(&mut self, h: ConnectionHandle) -> Option<Connection> {
        let c = self.conns.remove(&h.0)?;
        self.wakeups.forget(h.0, &c.wake);
        self.by_cid.remove(&c.local_cid());
        self.last_route = None;
        self.by_initial.retain(|_, v| *v != h.0);
        Some(c)
    }

    /// Handles a datagram that travelled `path` (from `path.remote`, to
    /// `path.local` when the driver knows it), received at `now`. The
    /// datagram is decoded and checked here, once; the connection it is
    /// for gets the checked view.
    pub fn handle_datagram(&mut self, now: Instant, path: FourTuple, data: &[u8]) {
        self.stats.received += 1;
        if data.len() > MAX_DATAGRAM_SIZE {
            self.count_undecodable(path, WireError::Oversized(data.len()));
            return;
        }
        // A keyed connection's DATA packets are opened before their frames
        // are read: the header alone routes them.
        let mut r = Reader::new(data);
        let header = match Header::decode(&mut r) {
            Ok(h) => h,
            Err(e) => {
                self.count_undecodable(path, e);
                return;
            }
        };
        let header_len = r.position();
        let route = self.route(&header.dst_cid);
        let mut scratch = None;
        let mut bytes = data;
        if let Some(c) = route.and_then(|i| self.conn_mut(i)) {
            let Some(clear) = c.open(&header, header_len, data, &mut scratch) else {
                self.stats.decrypt_failed += 1;
                trace!(?path, reason = "decrypt_failed", "datagram dropped");
                return;
            };
            bytes = clear;
        }
        // The header reads the same in the clear: only the payload again.
        let payload = bytes.get(header_len..).unwrap_or(&[]);
        let packet = match Packet::decode_payload(header, payload) {
            Ok(p) => p,
            Err(e) => {
                self.count_undecodable(path, e);
                return;
            }
        };
        let h = packet.header;
        if h.ty == PacketType::Initial {
            if self.server {
                self.on_initial(now, path, data.len(), &packet);
            } else {
                self.stats.unknown_connection += 1;
                trace!(?path, reason = "unknown_connection", "datagram dropped");
            }
            return;
        }
        match route.and_then(|i| self.conn_mut(i)) {
            Some(c) => c.handle_packet(now, path, &packet, data.len()),
            None => {
                self.stats.unknown_connection += 1;
                trace!(?path, reason = "unknown_connection", "datagram dropped");
            }
        }
    }

    /// The handle of the connection whose local id is `cid`.
    fn route(&mut self, cid: &ConnectionId) -> Option<u64> {
        if let Some((last, h)) = self.last_route {
            if last == *cid {
                return Some(h);
            }
        }
        let h = *self.by_cid.get(cid)?;
        self.last_route = Some((*cid, h));
        Some(h)
    }

    /// Counts a datagram that did not decode.
    fn count_undecodable(&mut self, path: FourTuple, e: WireError) {
        let reason = match e {
            WireError::Oversized(_) => {
                self.stats.oversized += 1;
                "oversized"
            }
            WireError::UnsupportedVersion(_) => {
                self.stats.bad_version += 1;
                "bad_version"
            }
            _ => {
                self.stats.malformed += 1;
                "malformed"
            }
        };
        trace!(?path, reason, "datagram dropped");
    }

    fn on_initial(&mut self, now: Instant, path: FourTuple, len: usize, p: &Packet<'_>) {
        let remote = path.remote;
        let h = p.header;
        // Invariant: INITIAL is a long header, so the source id is present.
        let Some(src) = h.src_cid else {
            self.stats.malformed += 1;
            trace!(?path, reason = "malformed", "datagram dropped");
            return;
        };
        if len < MIN_DATAGRAM_SIZE {
            self.stats.short_initial += 1;
            trace!(?path, reason = "short_initial", "datagram dropped");
            return;
        }
        if let Some(c) = self
            .by_initial
            .get(&(path, h.dst_cid))
            .copied()
            .and_then(|i| self.conn_mut(i))
        {
            // The client did not get our HANDSHAKE yet.
            c.on_initial_retransmit();
            return;
        }
        let Some((params, cookie)) = p.frames().find_map(|f| match f {
            Ok(Frame::Initial { params, cookie }) => Some((params, cookie)),
            _ => None,
        }) else {
            self.stats.malformed += 1;
            trace!(?path, reason = "malformed", "datagram dropped");
            return;
        };
        if cookie.is_empty() {
            self.send_retry(now, path, h.dst_cid, src);
            return;
        }
        let tag = match self
            .cookie_key
            .verify(now, &remote, &h.dst_cid, &src, cookie)
        {
            Ok(t) => t,
            Err(super::cookie::CookieError::Stale) => {
                self.stats.stale_cookies += 1;
                trace!(?path, reason = "stale_cookies", "datagram dropped");
                return;
            }
            Err(_) => {
                self.stats.bad_cookies += 1;
                trace!(?path, reason = "bad_cookies", "datagram dropped");
                return;
            }
        };
        if self.used_cookies.contains(&tag) {
            // A fresh cookie whose connection is gone (no route above):
            // the handshake timed out here while the client, whose
            // HANDSHAKEs were all lost, kept trying. Tell it, statelessly
            // (the cookie validated its address), instead of leaving it to
            // its own connect timeout.
            self.stats.replayed_cookies += 1;
            trace!(?path, reason = "replayed_cookies", "datagram dropped");
            self.send_refusal(
                path,
                h.dst_cid,
                src,
                ErrorCode::IDLE_TIMEOUT,
                REASON_HANDSHAKE_EXPIRED,
            );
            return;
        }
        if let Some(reason) = self.full_for(remote) {
            // Validated, so answering cannot be used to reflect traffic;
            // cheaper than authenticating, and no state is kept.
            self.stats.refused_full += 1;
            debug!(?path, reason, "server full: refused");
            self.send_refusal(path, h.dst_cid, src, ErrorCode::SERVER_BUSY, reason);
            return;
        }
        // The address is validated: now, and only now, authenticate.
        let local = self.new_cid();
        let message1 = p.frames().find_map(|f| match f {
            Ok(Frame::Auth { message }) => Some(message),
            _ => None,
        });
        let (message2, keys) = match self.authenticate(&h, src, &params, local, message1) {
            Ok(a) => a,
            Err(reason) => {
                self.stats.auth_failed += 1;
                if reason.starts_with(auth::REASON_MODE_MISMATCH_PREFIX) {
                    // Only a holder of the key gets this far: worth saying
                    // on the server's side too, it is a setup mistake.
                    warn!(peer = %path.remote, reason, "refused a client with our key");
                } else {
                    debug!(?path, reason, "handshake not authenticated: refused");
                }
                self.send_refusal(path, h.dst_cid, src, ErrorCode::AUTH_FAILED, reason);
                return;
            }
        };
        if self.used_order.len() >= MAX_REPLAY_ENTRIES {
            if let Some(old) = self.used_order.pop_front() {
                self.used_cookies.remove(&old);
            }
        }
        self.used_cookies.insert(tag);
        self.used_order.push_back(tag);
        let c = Connection::new_server(
            now,
            path,
            local,
            src,
            params,
            self.config.clone(),
            message2,
            keys,
        );
        let handle = self.insert(c);
        self.by_initial.insert((path, h.dst_cid), handle.0);
        self.incoming.push_back(handle);
        self.stats.accepted += 1;
        debug!(?path, cid = ?local, ?now, "cookie accepted: connection created");
    }

    /// The "server full" reason if a new connection from `remote` would
    /// exceed the total or the per-source cap. The per-source cap counts
    /// the connections `remote`'s address opened here, not the ones this
    /// endpoint opened to it (a relay's next hop may share a source's
    /// address: its own connections there must not refuse the source).
    fn full_for(&self, remote: SocketAddr) -> Option<&'static str> {
        if self.conns.len() >= self.config.max_connections {
            return Some(REASON_SERVER_FULL);
        }
        let ip = remote.ip();
        let mut from_ip = 0usize;
        for c in self.conns.values() {
            if c.side() == crate::transport::connection::Side::Server && c.path().remote.ip() == ip
            {
                from_ip += 1;
                if from_ip >= self.config.max_connections_per_source {
                    return Some(REASON_SERVER_FULL_SOURCE);
                }
            }
        }
        None
    }

    /// Checks the client's AUTH frame against this server's key. Returns
    /// message 2 and the derived keys (both `None` without a key), or the
    /// CLOSE reason phrase of the refusal.
    fn authenticate(
        &mut self,
        h: &Header,
        src: ConnectionId,
        params: &TransportParams,
        local: ConnectionId,
        message1: Option<&[u8]>,
    ) -> Result<(Option<Vec<u8>>, Option<SessionKeys>), &'static str> {
        let (psk, message1) = match (&self.config.psk, message1) {
            (None, None) => return Ok((None, None)),
            (None, Some(_)) => return Err(auth::REASON_NO_KEY),
            (Some(_), None) => return Err(auth::REASON_KEY_REQUIRED),
            (Some(psk), Some(m1)) => (psk.clone(), m1),
        };
        let mut encoded = Vec::new();
        params.encode(&mut encoded);
        let prologue = auth::prologue(h.dst_cid.as_bytes(), src.as_bytes(), &encoded);
        let mode = self.config.protection;
        let payload = auth::server_payload(&local, &self.server_params(), mode);
        let seed = self.seeds.next_seed();
        match auth::respond(
            &psk,
            seed,
            &prologue,
            message1,
            mode,
            auth::Suite::ChaChaPoly,
            &payload,
        ) {
            Ok((m2, keys)) => Ok((Some(m2), Some(keys))),
            Err(AuthError::ModeMismatch { server, .. }) => Err(match server {
                Protection::Encrypt => REASON_MODE_CLIENT_PLAIN,
                Protection::IntegrityOnly => REASON_MODE_CLIENT_ENCRYPTS,
            }),
            Err(_) => Err(auth::REASON_KEY_MISMATCH),
        }
    }

    /// The parameters this server's connections send in their HANDSHAKE.
    fn server_params(&self) -> TransportParams {
        super::connection::params_of(&self.config)
    }

    /// Answers a validated address statelessly with a CLOSE in a RETRY
    /// packet (`code`: [`ErrorCode::AUTH_FAILED`] or
    /// [`ErrorCode::SERVER_BUSY`], `reason` as the phrase), so the client
    /// fails at once instead of waiting for its handshake timeout.
    fn send_refusal(
        &mut self,
        path: FourTuple,
        dst: ConnectionId,
        src: ConnectionId,
        code: ErrorCode,
        reason: &str,
    ) {
        if self.stateless.len() >= MAX_STATELESS_QUEUE {
            self.stats.refused += 1;
            trace!(?path, reason = "refused", "datagram dropped");
            return;
        }
        let header = Header {
            ty: PacketType::Retry,
            dst_cid: src,
            src_cid: Some(dst),
            pn: 0,
        };
        let mut buf = Vec::new();
        let Ok(mut b) = PacketBuilder::new(&mut buf, &header, MIN_DATAGRAM_SIZE) else {
            return;
        };
        let close = Frame::Close(CloseFrame {
            code,
            reason: reason.as_bytes(),
        });
        if !matches!(b.push(&close), Ok(true)) {
            return;
        }
        b.finish();
        self.stateless.push_back((path, buf));
    }

    fn send_retry(&mut self, now: Instant, path: FourTuple, dst: ConnectionId, src: ConnectionId) {
        if self.stateless.len() >= MAX_STATELESS_QUEUE {
            self.stats.refused += 1;
            trace!(?path, reason = "refused", "datagram dropped");
            return;
        }
        let cookie = self.cookie_key.mint(now, &path.remote, &dst, &src);
        let header = Header {
            ty: PacketType::Retry,
            dst_cid: src,
            src_cid: Some(dst),
            pn: 0,
        };
        let mut buf = Vec::new();
        let Ok(mut b) = PacketBuilder::new(&mut buf, &header, MIN_DATAGRAM_SIZE) else {
            return;
        };
        if !matches!(b.push(&Frame::Retry { cookie: &cookie }), Ok(true)) {
            return;
        }
        b.finish();
        self.stats.retries_sent += 1;
        trace!(?path, ?now, "cookie issued in a RETRY");
        self.stateless.push_back((path, buf));
    }

    /// Writes the next datagram to send into `buf`, if any: stateless
    /// answers first, then the connections in turn.
    pub fn poll_transmit(&mut self, now: Instant, buf: &mut Vec<u8>) -> Option<Transmit> {
        buf.clear();
        self.poll_transmit_append(now, buf)
    }

    /// As [`Endpoint::poll_transmit`], but appends the datagram after what
    /// `buf` holds (see [`Connection::poll_transmit_append`]).
    pub fn poll_transmit_append(&mut self, now: Instant, buf: &mut Vec<u8>) -> Option<Transmit> {
        if let Some((path, bytes)) = self.stateless.pop_front() {
            buf.extend_from_slice(&bytes);
            return Some(Transmit {
                path,
                size: bytes.len(),
            });
        }
        // A quiet connection whose timer has come is asked too (a paced
        // one may send again microseconds later, long before a timer of
        // the driver's would fire): what the whole walk over every
        // connection used to find.
        self.wake_due(now);
        // Round robin over the active connections, starting after the one
        // that sent last; one that has nothing to send goes quiet on its
        // timer, so the walk ends.
        while let Some(k) = self.wakeups.next_active(self.cursor) {
            let Some(c) = self.conns.get_mut(&k) else {
                self.wakeups.forget_handle(k);
                continue;
            };
            if let Some(t) = c.poll_transmit_append(now, buf) {
                self.cursor = k + 1;
                return Some(t);
            }
            let timeout = c.poll_timeout();
            self.wakeups.quiet(k, &mut c.wake, timeout);
        }
        None
    }

    /// Like [`Endpoint::poll_transmit`], but packs up to `max_segments`
    /// datagrams for the same path back to back into `buf`, all of
    /// `segment_size` bytes except possibly a shorter last one — the layout
    /// UDP GSO (`UDP_SEGMENT`) sends with one system call. Returns the
    /// path, the total size and the segment size.
    pub fn poll_transmit_batch(
        &mut self,
        now: Instant,
        buf: &mut Vec<u8>,
        max_segments: usize,
    ) -> Option<Batch> {
        let stateless = !self.stateless.is_empty();
        let first = self.poll_transmit(now, buf)?;
        let mut batch = Batch {
            path: first.path,
            size: first.size,
            segment_size: first.size,
        };
        // Only a connection's own datagrams are batched: stateless answers
        // go out one by one. `poll_transmit` left the cursor just after the
        // connection that sent.
        if stateless {
            return Some(batch);
        }
        let Some(&k) = self.conns.range(..self.cursor).next_back().map(|(k, _)| k) else {
            return Some(batch);
        };
        for _ in 1..max_segments.max(1) {
            let Some(c) = self.conns.get_mut(&k) else {
                break;
            };
            if c.path() != batch.path {
                break;
            }
            let Some(t) = c.poll_append_fits(now, buf, batch.segment_size) else {
                break;
            };
            batch.size += t;
            if t < batch.segment_size {
                break; // a short segment must be the last
            }
        }
        Some(batch)
    }

    /// The earliest timer of any connection: the quiet ones' earliest,
    /// and each active one's (`transport::wakeups`).
    pub fn poll_timeout(&self) -> Option<Instant> {
        let active = self
            .wakeups
            .active()
            .filter_map(|h| self.conns.get(&h).and_then(Connection::poll_timeout));
        active.chain(self.wakeups.first_timer()).min()
    }

    /// Runs every connection's due timers.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.wake_due(now);
        for h in self.wakeups.active() {
            if let Some(c) = self.conns.get_mut(&h) {
                if c.poll_timeout().is_some_and(|t| now >= t) {
                    c.handle_timeout(now);
                }
            }
        }
    }

    /// Makes every quiet connection whose timer is due at `now` active.
    fn wake_due(&mut self, now: Instant) {
        while let Some(h) = self.wakeups.pop_due(now) {
            if let Some(c) = self.conns.get_mut(&h) {
                c.wake.unscheduled();
                self.wakeups.touch(h, &mut c.wake);
            }
        }
    }

    /// True if no connection is a client still handshaking or a live one.
    pub fn is_idle(&self) -> bool {
        self.conns.values().all(|c| c.is_closed())
    }
}
