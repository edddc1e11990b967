//! The operator routes: `GET/POST/PATCH /v1/resources` (list, add, change
//! capacity or kind) and `GET/PUT /v1/policy`. Operators only (a user's
//! token is answered 403). Changes go through the owner task, which
//! refuses a capacity below what is held or committed (409 naming
//! `capacity`) and stores them before answering (see [`crate::catalog`]).

use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use braid_core::Bandwidth;

use super::handlers::parse_json;
use super::{ApiError, AppState, Caller};
use crate::auth::Role;
use crate::catalog::{Change, PolicyView, ResourceRequest, ResourceView};
use crate::config::{ResourceConfig, ResourceKind};
use crate::owner::Command;
use crate::types::ErrorBody;

/// The most resources one broker serves (braid-core's book bound).
pub const MAX_RESOURCES: usize = 1024;

fn operator(caller: &Caller) -> Result<(), ApiError> {
    if caller.role == Role::Operator {
        Ok(())
    } else {
        Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "operators only: this token's role is user",
            None,
        ))
    }
}

fn kind(text: &str) -> Result<ResourceKind, ApiError> {
    serde_json::from_value(serde_json::Value::String(text.into())).map_err(|_| {
        ApiError::bad(
            "kind",
            format!("unknown kind {text:?}: use network, cpu or storage"),
        )
    })
}

fn capacity(text: &str) -> Result<Bandwidth, ApiError> {
    match text.parse::<Bandwidth>() {
        Ok(c) if c > Bandwidth::ZERO => Ok(c),
        Ok(_) => Err(ApiError::bad("capacity", "the capacity must be above zero")),
        Err(e) => Err(ApiError::bad("capacity", e.to_string())),
    }
}

async fn change(s: &AppState, change: Change) -> Result<(), ApiError> {
    s.handle
        .call(|reply| Command::Operate { change, reply })
        .await?;
    Ok(())
}

fn view(s: &AppState, name: &str) -> Result<Json<ResourceView>, ApiError> {
    s.handle
        .catalog()
        .resource(name)
        .map(|r| Json(ResourceView::from(r)))
        .ok_or_else(|| {
            ApiError::new(
                StatusCode::NOT_FOUND,
                format!("no resource {name:?}"),
                Some("name"),
            )
        })
}

/// Every resource (operators).
#[utoipa::path(get, path = "/v1/resources",
    responses((status = 200, body = Vec<ResourceView>), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)))]
pub async fn list(
    State(s): State<AppState>,
    caller: Caller,
) -> Result<Json<Vec<ResourceView>>, ApiError> {
    operator(&caller)?;
    Ok(Json(
        s.handle
            .catalog()
            .resources
            .iter()
            .map(ResourceView::from)
            .collect(),
    ))
}

/// Add a resource (operators); kept across restarts.
#[utoipa::path(post, path = "/v1/resources", request_body = ResourceRequest,
    responses((status = 201, body = ResourceView), (status = 400, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 409, body = ErrorBody)))]
pub async fn add(
    State(s): State<AppState>,
    caller: Caller,
    body: Bytes,
) -> Result<(StatusCode, Json<ResourceView>), ApiError> {
    operator(&caller)?;
    let req: ResourceRequest = parse_json(&body)?;
    let name = req
        .name
        .ok_or_else(|| ApiError::bad("name", "missing name"))?;
    if name.is_empty() || name.contains('/') || name.len() > 128 {
        return Err(ApiError::bad("name", "1 to 128 characters, without '/'"));
    }
    if s.config.route(&name).is_some() {
        return Err(ApiError::bad(
            "name",
            format!("{name:?} is routed to a peer"),
        ));
    }
    if s.handle.catalog().resources.len() >= MAX_RESOURCES {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            format!("at most {MAX_RESOURCES} resources"),
            None,
        ));
    }
    let kind = kind(
        req.kind
            .as_deref()
            .ok_or_else(|| ApiError::bad("kind", "missing kind"))?,
    )?;
    let capacity = capacity(
        req.capacity
            .as_deref()
            .ok_or_else(|| ApiError::bad("capacity", "missing capacity"))?,
    )?;
    change(
        &s,
        Change::Add(ResourceConfig::plain(name.clone(), kind, capacity)),
    )
    .await?;
    Ok((StatusCode::CREATED, view(&s, &name)?))
}

/// Change a resource's capacity or kind (operators): a capacity below what
/// is held or committed at some instant is refused with 409.
#[utoipa::path(patch, path = "/v1/resources", request_body = ResourceRequest,
    responses((status = 200, body = ResourceView), (status = 400, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 409, body = ErrorBody)))]
pub async fn modify(
    State(s): State<AppState>,
    caller: Caller,
    body: Bytes,
) -> Result<Json<ResourceView>, ApiError> {
    operator(&caller)?;
    let req: ResourceRequest = parse_json(&body)?;
    let name = req
        .name
        .ok_or_else(|| ApiError::bad("name", "missing name"))?;
    let _exists = view(&s, &name)?;
    let kind = req.kind.as_deref().map(kind).transpose()?;
    let capacity = req.capacity.as_deref().map(capacity).transpose()?;
    if kind.is_none() && capacity.is_none() {
        return Err(ApiError::bad("body", "give capacity or kind to change"));
    }
    change(
        &s,
        Change::Set {
            name: name.clone(),
            kind,
            capacity,
        },
    )
    .await?;
    view(&s, &name)
}

/// The admission policy in force (operators).
#[utoipa::path(get, path = "/v1/policy",
    responses((status = 200, body = PolicyView), (status = 403, body = ErrorBody)))]
pub async fn policy(
    State(s): State<AppState>,
    caller: Caller,
) -> Result<Json<PolicyView>, ApiError> {
    operator(&caller)?;
    Ok(Json(PolicyView::from(&s.handle.catalog().policy)))
}

/// Replace the admission policy (operators); for requests from now on,
/// kept across restarts.
#[utoipa::path(put, path = "/v1/policy", request_body = PolicyView,
    responses((status = 200, body = PolicyView), (status = 400, body = ErrorBody), (status = 403, body = ErrorBody)))]
pub async fn set_policy(
    State(s): State<AppState>,
    caller: Caller,
    body: Bytes,
) -> Result<Json<PolicyView>, ApiError> {
    operator(&caller)?;
    let req: PolicyView = parse_json(&body)?;
    let policy = req
        .policy()
        .map_err(|(field, why)| ApiError::bad(&field, why))?;
    change(&s, Change::Policy(policy)).await?;
    Ok(Json(PolicyView::from(&s.handle.catalog().policy)))
}
