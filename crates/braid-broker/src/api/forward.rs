//! Requests that include resources held by peer brokers (see
//! [`crate::peers`]): hold at the peers, then here; commit at the peers,
//! then here; abort and terminate both. Any refusal or silence of a peer
//! releases what this request held, here and at the other peers, and is
//! answered naming the peer and the resource (409 refused, 504 silent, 502
//! unreachable).

use std::future::Future;

use axum::http::StatusCode;
use braid_core::reserve::{Class, ReserveRequest};
use braid_core::{Bandwidth, Instant, ReservationId};

use super::{ApiError, AppState, Caller};
use crate::clock;
use crate::owner::{self, Action, Answer, Command, Viewer};
use crate::peers::PeerError;
use crate::types::{CreateRequest, Created, RemotePart, ReservationView};

impl From<PeerError> for ApiError {
    fn from(e: PeerError) -> ApiError {
        let status = match e {
            PeerError::Refused { .. } => StatusCode::CONFLICT,
            PeerError::Silent { .. } => StatusCode::GATEWAY_TIMEOUT,
            _ => StatusCode::BAD_GATEWAY,
        };
        ApiError::new(status, e.to_string(), Some("resources"))
    }
}

/// What one create asks for, checked by the handler.
pub(super) struct Ask {
    /// Resources of this broker.
    pub local: Vec<String>,
    /// Resources of peers: (resource, peer).
    pub remote: Vec<(String, String)>,
    /// The rate.
    pub rate: Bandwidth,
    /// From.
    pub start: Instant,
    /// To.
    pub end: Instant,
    /// Foreground or background.
    pub class: Class,
    /// Where state changes are posted.
    pub callback: Option<String>,
    /// What the local parts are enforced on, if anything.
    pub binding: Option<crate::enforce::Binding>,
}

/// Holds `ask` at the peers, then here, and links them.
pub(super) async fn create(s: &AppState, caller: &Caller, ask: Ask) -> Result<Created, ApiError> {
    if ask.local.is_empty() {
        return Err(ApiError::bad(
            "resources",
            "a request through a peer needs at least one resource of this broker",
        ));
    }
    let class = match ask.class {
        Class::Background => "background",
        _ => "foreground",
    };
    let mut held: Vec<RemotePart> = Vec::new();
    for (resource, peer) in &ask.remote {
        let req = CreateRequest {
            resource: Some(resource.clone()),
            rate: Some(format!("{} bit/s", ask.rate.bps())),
            start: Some(clock::format(ask.start)),
            end: Some(clock::format(ask.end)),
            class: Some(class.into()),
            ..CreateRequest::default()
        };
        match s.peers.hold(peer, &req).await {
            Ok(part) => held.push(part),
            Err(e) => {
                s.peers.release(&held, Action::Abort).await;
                return Err(e.into());
            }
        }
    }
    let requests = ask
        .local
        .into_iter()
        .map(|resource| ReserveRequest {
            owner: owner::owner(&caller.user, &s.config),
            resource,
            rate: ask.rate,
            start: ask.start,
            end: ask.end,
            class: ask.class,
        })
        .collect();
    let views = match s
        .handle
        .call(|reply| Command::Reserve {
            requests,
            callback: ask.callback,
            binding: ask.binding,
            reply,
        })
        .await
    {
        Ok(Answer::Many(v)) if !v.is_empty() => v,
        other => {
            s.peers.release(&held, Action::Abort).await;
            return Err(match other {
                Err(e) => e.into(),
                Ok(_) => ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "nothing reserved", None),
            });
        }
    };
    let first = ReservationId(views[0].id);
    let parts = held.clone();
    if let Err(e) = s
        .handle
        .call(|reply| Command::Link {
            id: first,
            parts,
            reply,
        })
        .await
    {
        let viewer = caller.viewer();
        let _ = s
            .handle
            .call(|reply| Command::Act {
                id: first,
                action: Action::Abort,
                viewer,
                reply,
            })
            .await;
        s.peers.release(&held, Action::Abort).await;
        return Err(e.into());
    }
    let v = &views[0];
    Ok(Created {
        id: v.id,
        ids: views.iter().map(|v| v.id).collect(),
        state: v.state.clone(),
        hold_expires: v.hold_expires.clone(),
        group: v.group,
        remote: held,
    })
}

/// The reservation `id` as `viewer` sees it.
async fn view(
    s: &AppState,
    id: ReservationId,
    viewer: Viewer,
) -> Result<ReservationView, ApiError> {
    match s
        .handle
        .call(|reply| Command::Get { id, viewer, reply })
        .await?
    {
        Answer::Many(mut v) if !v.is_empty() => Ok(v.swap_remove(0)),
        _ => Err(ApiError::new(
            StatusCode::NOT_FOUND,
            format!("no reservation {}", id.0),
            None,
        )),
    }
}

/// Runs `local` (the action on this broker's parts) with the same action
/// on the reservation's parts at peers, if it has any: a commit goes to the
/// peers first, and any peer's refusal aborts everything held and answers
/// with it; an abort or terminate goes to the peers after, best effort.
pub(super) async fn act<T, F>(
    s: &AppState,
    caller: &Caller,
    id: ReservationId,
    action: Action,
    local: F,
) -> Result<T, ApiError>
where
    F: Future<Output = Result<T, ApiError>>,
{
    if s.config.routes.is_empty()
        || !matches!(action, Action::Commit | Action::Abort | Action::Terminate)
    {
        return local.await;
    }
    let remote = view(s, id, caller.viewer()).await?.remote;
    if remote.is_empty() {
        return local.await;
    }
    match action {
        Action::Commit => {
            let mut committed: Vec<RemotePart> = Vec::new();
            for (i, part) in remote.iter().enumerate() {
                if let Err(e) = s.peers.act(part, Action::Commit).await {
                    s.peers.release(&committed, Action::Terminate).await;
                    s.peers.release(&remote[i..], Action::Abort).await;
                    let viewer = caller.viewer();
                    let _ = s
                        .handle
                        .call(|reply| Command::Act {
                            id,
                            action: Action::Abort,
                            viewer,
                            reply,
                        })
                        .await;
                    return Err(e.into());
                }
                committed.push(part.clone());
            }
            let done = local.await;
            if done.is_err() {
                // Nothing committed at the peers that is not committed here.
                s.peers.release(&committed, Action::Terminate).await;
            }
            done
        }
        Action::Abort => {
            let done = local.await;
            s.peers.release(&remote, Action::Abort).await;
            done
        }
        _ => {
            let done = local.await;
            s.peers.release(&remote, Action::Terminate).await;
            done
        }
    }
}
