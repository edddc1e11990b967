//! Peer brokers: the other domains this broker reserves through (seed 004
//! §6, multi-domain reservations; NSI's aggregator forwarding to provider
//! agents).
//!
//! A `[[route]]` names a resource another domain holds and the `[[peer]]`
//! broker that holds it (its URL and a user token it issued to this
//! broker). A request that includes such a resource is held at the peer
//! first, then here; committed at the peer first, then here; and aborted or
//! terminated in both (the HTTP side of this is `api::forward`). Every call
//! to a peer is bounded by its `timeout` ([`PEER_TIMEOUT`] by default): a
//! silent peer counts as refusing, and what was held for the request is
//! released. A crash between the phases leaves holds only, which time out
//! in each domain; a crash between a peer's commit and the local one leaves
//! the peer's part committed until its owner terminates it here (the link
//! is stored, so `DELETE` reaches it).

use crate::owner::Action;
use std::collections::BTreeMap;

use crate::client::{Client, ClientError};
use crate::config::Config;
use crate::types::{CreateRequest, RemotePart};

/// How long a call to a peer may take unless its `[[peer]]` says.
pub const PEER_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// A peer's refusal or silence.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PeerError {
    /// The peer answered with a refusal.
    #[error("peer {peer} refused {resource}: {error}")]
    Refused {
        /// The peer.
        peer: String,
        /// The resource asked for.
        resource: String,
        /// The peer's HTTP status.
        status: u16,
        /// The peer's reason.
        error: String,
    },
    /// The peer did not answer in time.
    #[error("peer {peer} did not answer about {resource} within {timeout:?}; nothing is held")]
    Silent {
        /// The peer.
        peer: String,
        /// The resource asked for.
        resource: String,
        /// The bound.
        timeout: std::time::Duration,
    },
    /// The peer could not be reached, or answered nonsense.
    #[error("peer {peer} unreachable about {resource}: {error}")]
    Unreachable {
        /// The peer.
        peer: String,
        /// The resource asked for.
        resource: String,
        /// Why.
        error: String,
    },
    /// A route names a peer that is not configured (checked at load).
    #[error("no peer {0}")]
    Unknown(String),
}

/// Clients of the configured peers, by name.
#[derive(Debug, Clone, Default)]
pub struct Peers {
    peers: BTreeMap<String, (Client, std::time::Duration)>,
}

impl Peers {
    /// Clients for every named `[[peer]]` of `config`.
    ///
    /// # Errors
    /// [`PeerError::Unreachable`] for a peer URL the client refuses.
    pub fn new(config: &Config) -> Result<Peers, PeerError> {
        let mut peers = BTreeMap::new();
        for p in &config.peers {
            let Some(name) = &p.name else { continue };
            let client = Client::new(&p.url, &p.token).map_err(|e| PeerError::Unreachable {
                peer: name.clone(),
                resource: String::new(),
                error: e.to_string(),
            })?;
            let timeout = p.timeout.map_or(PEER_TIMEOUT, |t| {
                std::time::Duration::from_nanos(t.as_nanos())
            });
            peers.insert(name.clone(), (client, timeout));
        }
        Ok(Peers { peers })
    }

    /// Holds `req` (one resource) at `peer`: the peer's reservation.
    ///
    /// # Errors
    /// [`PeerError`].
    pub async fn hold(&self, peer: &str, req: &CreateRequest) -> Result<RemotePart, PeerError> {
        let resource = req.resource.clone().unwrap_or_default();
        let (client, timeout) = self
            .peers
            .get(peer)
            .ok_or_else(|| PeerError::Unknown(peer.to_string()))?;
        let made = bounded(peer, &resource, *timeout, client.create(req)).await?;
        Ok(RemotePart {
            peer: peer.to_string(),
            resource,
            id: made.id,
        })
    }

    /// `commit`, `abort` or `terminate` the peer's part.
    ///
    /// # Errors
    /// [`PeerError`].
    pub async fn act(&self, part: &RemotePart, action: Action) -> Result<(), PeerError> {
        let (client, timeout) = self
            .peers
            .get(&part.peer)
            .ok_or_else(|| PeerError::Unknown(part.peer.clone()))?;
        let call = client.act(part.id, action);
        bounded(&part.peer, &part.resource, *timeout, call)
            .await
            .map(|_| ())
    }

    /// Best effort: `action` on every part, failures logged (their holds
    /// time out at the peers).
    pub async fn release(&self, parts: &[RemotePart], action: Action) {
        for p in parts {
            if let Err(e) = self.act(p, action).await {
                tracing::warn!(peer = %p.peer, id = p.id, action = action.name(), error = %e, "peer release failed");
            }
        }
    }
}

async fn bounded<T>(
    peer: &str,
    resource: &str,
    timeout: std::time::Duration,
    call: impl std::future::Future<Output = Result<T, ClientError>>,
) -> Result<T, PeerError> {
    match tokio::time::timeout(timeout, call).await {
        Err(_) => Err(PeerError::Silent {
            peer: peer.to_string(),
            resource: resource.to_string(),
            timeout,
        }),
        Ok(Ok(t)) => Ok(t),
        Ok(Err(ClientError::Api { status, error, .. })) => Err(PeerError::Refused {
            peer: peer.to_string(),
            resource: resource.to_string(),
            status: status.as_u16(),
            error,
        }),
        Ok(Err(e)) => Err(PeerError::Unreachable {
            peer: peer.to_string(),
            resource: resource.to_string(),
            error: e.to_string(),
        }),
    }
}
