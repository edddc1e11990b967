//! The co-reservation group routes: `GET /v1/groups/{gid}` and
//! `POST /v1/groups/{gid}/commit|abort`, `DELETE /v1/groups/{gid}`.
//!
//! The same as acting on any part through `/v1/reservations/{id}/…`: a
//! group's parts are committed, aborted and terminated together (see
//! [`crate::groups`]); these routes name the group and answer every part.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;

use super::handlers::parse_id;
use super::{ApiError, AppState, Caller};
use crate::owner::{Action, Answer, Command};
use crate::types::{ErrorBody, ReservationView};

async fn group(
    s: AppState,
    caller: Caller,
    gid: &str,
    action: Option<Action>,
) -> Result<Json<Vec<ReservationView>>, ApiError> {
    let group = parse_id(gid)?;
    let viewer = caller.viewer();
    let local = async {
        match s
            .handle
            .call(|reply| Command::Group {
                group,
                action,
                viewer,
                reply,
            })
            .await?
        {
            Answer::Many(v) => Ok(Json(v)),
            Answer::Rate(_) => Err(ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "unexpected answer",
                None,
            )),
        }
    };
    match action {
        Some(a) => super::forward::act(&s, &caller, group, a, local).await,
        None => local.await,
    }
}

/// A co-reservation group's parts.
#[utoipa::path(get, path = "/v1/groups/{gid}", params(("gid" = u64, Path, description = "group id")),
    responses((status = 200, body = Vec<ReservationView>), (status = 404, body = ErrorBody)))]
pub async fn show(
    State(s): State<AppState>,
    caller: Caller,
    Path(gid): Path<String>,
) -> Result<Json<Vec<ReservationView>>, ApiError> {
    group(s, caller, &gid, None).await
}

/// Commit every held part of the group in one transaction, or none (409
/// naming the part that is not held).
#[utoipa::path(post, path = "/v1/groups/{gid}/commit", params(("gid" = u64, Path, description = "group id")),
    responses((status = 200, body = Vec<ReservationView>), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody)))]
pub async fn commit(
    State(s): State<AppState>,
    caller: Caller,
    Path(gid): Path<String>,
) -> Result<Json<Vec<ReservationView>>, ApiError> {
    group(s, caller, &gid, Some(Action::Commit)).await
}

/// Abort every held part of the group.
#[utoipa::path(post, path = "/v1/groups/{gid}/abort", params(("gid" = u64, Path, description = "group id")),
    responses((status = 200, body = Vec<ReservationView>), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody)))]
pub async fn abort(
    State(s): State<AppState>,
    caller: Caller,
    Path(gid): Path<String>,
) -> Result<Json<Vec<ReservationView>>, ApiError> {
    group(s, caller, &gid, Some(Action::Abort)).await
}

/// Terminate every part of the group.
#[utoipa::path(delete, path = "/v1/groups/{gid}", params(("gid" = u64, Path, description = "group id")),
    responses((status = 200, body = Vec<ReservationView>), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody)))]
pub async fn terminate(
    State(s): State<AppState>,
    caller: Caller,
    Path(gid): Path<String>,
) -> Result<Json<Vec<ReservationView>>, ApiError> {
    group(s, caller, &gid, Some(Action::Terminate)).await
}
