//! The route handlers: check the request, ask the owner task, answer.

use std::convert::Infallible;

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::Json;
use braid_core::reserve::{Class, Modify, ReserveRequest};
use braid_core::{Bandwidth, Duration, Instant, ReservationId};
use futures_util::Stream;
use serde::de::DeserializeOwned;
use tokio::sync::broadcast::error::RecvError;
use utoipa::OpenApi;

use super::{ApiDoc, ApiError, AppState, Caller};
use crate::auth::Role;
use crate::clock;
use crate::config::ResourceKind;
use crate::enforce::Binding;
use crate::owner::{self, Action, Answer, Command};
use crate::types::{
    Availability, AvailabilityQuery, CreateRequest, Created, ErrorBody, EventView, FlowSpec,
    Health, ModifyRequest, ReservationView,
};

/// How far in the past an explicit start may be (clock skew between the
/// client and the broker); earlier is refused as "in the past".
pub const START_SKEW: Duration = Duration::from_secs(5);
/// The most resources in one co-reservation.
pub const MAX_CORESERVE: usize = 16;
/// The longest callback URL.
pub const MAX_CALLBACK_LEN: usize = 2048;

/// Parses a JSON body, naming the field at fault.
pub(super) fn parse_json<T: DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    let de = &mut serde_json::Deserializer::from_slice(body);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let field = if e.inner().is_syntax() || e.inner().is_eof() {
            "body".to_string()
        } else if path == "." || path.is_empty() {
            // An unknown field is named in the message, not the path.
            let text = e.inner().to_string();
            text.split('`')
                .nth(1)
                .filter(|_| text.starts_with("unknown field"))
                .unwrap_or("body")
                .to_string()
        } else {
            path
        };
        ApiError::bad(&field, format!("malformed JSON: {}", e.inner()))
    })
}

pub(super) fn parse_id(id: &str) -> Result<ReservationId, ApiError> {
    id.parse::<u64>()
        .map(ReservationId)
        .map_err(|_| ApiError::bad("id", format!("{id:?} is not a reservation id")))
}

fn parse_rate(text: Option<&str>) -> Result<Bandwidth, ApiError> {
    let text = text.ok_or_else(|| ApiError::bad("rate", "missing rate (e.g. \"10mbit\")"))?;
    let rate: Bandwidth = text
        .parse()
        .map_err(|e| ApiError::bad("rate", format!("{e}")))?;
    if rate == Bandwidth::ZERO {
        return Err(ApiError::bad("rate", "the rate must be above zero"));
    }
    Ok(rate)
}

fn parse_time(field: &str, text: &str, now: Instant) -> Result<Instant, ApiError> {
    clock::parse(text, now).ok_or_else(|| {
        ApiError::bad(
            field,
            format!("{text:?} is not an RFC 3339 time or \"now\""),
        )
    })
}

fn one(answer: Answer) -> Result<ReservationView, ApiError> {
    match answer {
        Answer::Many(mut v) if !v.is_empty() => Ok(v.swap_remove(0)),
        _ => Err(ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "empty answer",
            None,
        )),
    }
}

/// Hold a reservation (or one per resource, all or none).
#[utoipa::path(post, path = "/v1/reservations", request_body = CreateRequest,
    responses((status = 201, body = Created), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 409, body = ErrorBody)))]
pub async fn create(
    State(s): State<AppState>,
    caller: Caller,
    body: Bytes,
) -> Result<(StatusCode, Json<Created>), ApiError> {
    let req: CreateRequest = parse_json(&body)?;
    let now = clock::now();
    let names = match (req.resource, req.resources) {
        (Some(r), None) => vec![r],
        (None, Some(rs)) if !rs.is_empty() && rs.len() <= MAX_CORESERVE => rs,
        (None, Some(_)) => {
            return Err(ApiError::bad(
                "resources",
                format!("give 1 to {MAX_CORESERVE} resources"),
            ))
        }
        (Some(_), Some(_)) => {
            return Err(ApiError::bad(
                "resources",
                "give resource or resources, not both",
            ))
        }
        (None, None) => return Err(ApiError::bad("resource", "missing resource")),
    };
    let rate = parse_rate(req.rate.as_deref())?;
    let mut remote = Vec::new();
    for (i, name) in names.iter().enumerate() {
        if names[..i].contains(name) {
            return Err(ApiError::bad(
                "resources",
                format!("resource {name:?} is named twice"),
            ));
        }
        if let Some(peer) = s.config.route(name).and_then(|p| p.name.clone()) {
            remote.push((name.clone(), peer));
            continue;
        }
        let catalog = s.handle.catalog();
        let r = catalog
            .resource(name)
            .ok_or_else(|| ApiError::bad("resource", format!("unknown resource {name:?}")))?;
        if rate > r.capacity {
            return Err(ApiError::bad(
                "rate",
                format!(
                    "{rate} is more than resource {name:?} can ever carry ({})",
                    r.capacity
                ),
            ));
        }
    }
    let start = match req.start.as_deref() {
        None => now,
        Some(t) => parse_time("start", t, now)?,
    };
    if start + START_SKEW < now {
        return Err(ApiError::bad("start", "the start is in the past"));
    }
    let end = parse_time(
        "end",
        req.end
            .as_deref()
            .ok_or_else(|| ApiError::bad("end", "missing end"))?,
        now,
    )?;
    if end <= start.max(now) {
        return Err(ApiError::bad("end", "the end is not after the start"));
    }
    let class = match req.class.as_deref() {
        None | Some("foreground") => Class::Foreground,
        Some("background") => Class::Background,
        Some(other) => {
            return Err(ApiError::bad(
                "class",
                format!("unknown class {other:?}: use foreground or background"),
            ))
        }
    };
    if let Some(c) = &req.callback {
        if !(c.starts_with("http://") || c.starts_with("https://")) || c.len() > MAX_CALLBACK_LEN {
            return Err(ApiError::bad(
                "callback",
                "the callback must be an http:// or https:// URL",
            ));
        }
        if !s.config.callbacks.allows(c) {
            return Err(ApiError::bad(
                "callback",
                if s.config.callbacks.is_empty() {
                    "this broker posts no callbacks (its operator lists allowed URLs in callbacks.allow)"
                } else {
                    "the callback URL is not in this broker's callbacks.allow list"
                },
            ));
        }
    }
    let binding = binding(&s, &caller, &names, req.flow.as_ref(), req.pid)?;
    if !remote.is_empty() {
        let ask = super::forward::Ask {
            local: names
                .into_iter()
                .filter(|n| !remote.iter().any(|(r, _)| r == n))
                .collect(),
            remote,
            rate,
            start,
            end,
            class,
            callback: req.callback,
            binding,
        };
        let made = super::forward::create(&s, &caller, ask).await?;
        return Ok((StatusCode::CREATED, Json(made)));
    }
    let requests = names
        .into_iter()
        .map(|resource| ReserveRequest {
            owner: owner::owner(&caller.user, &s.config),
            resource,
            rate,
            start,
            end,
            class,
        })
        .collect();
    let answer = s
        .handle
        .call(|reply| Command::Reserve {
            requests,
            callback: req.callback,
            binding,
            reply,
        })
        .await?;
    let Answer::Many(views) = answer else {
        return Err(ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "unexpected answer",
            None,
        ));
    };
    let first = views.first().ok_or_else(|| {
        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "nothing reserved", None)
    })?;
    Ok((
        StatusCode::CREATED,
        Json(Created {
            id: first.id,
            ids: views.iter().map(|v| v.id).collect(),
            state: first.state.clone(),
            hold_expires: first.hold_expires.clone(),
            group: first.group,
            remote: Vec::new(),
        }),
    ))
}

/// Checks `flow` and `pid` against the resources named: a flow needs a
/// network resource, and every network resource named needs a `device` to
/// enforce it on, and a user's flow must be inside their grants
/// ([`crate::scope`]); a pid needs a CPU resource and an operator (moving a
/// process into a capped cgroup is a change to the host).
fn binding(
    s: &AppState,
    caller: &Caller,
    names: &[String],
    flow: Option<&FlowSpec>,
    pid: Option<u32>,
) -> Result<Option<Binding>, ApiError> {
    // The resources in force (the configuration's and operators'); only
    // the configuration's have devices.
    let catalog = s.handle.catalog();
    let kinds = || {
        names
            .iter()
            .filter_map(|n| catalog.resource(n))
            .map(|r| (r, r.kind))
    };
    let flow = match flow {
        None => None,
        Some(spec) => {
            let flow = spec
                .parse()
                .map_err(|e| ApiError::bad(e.field, e.to_string()))?;
            let mut network = false;
            for (r, kind) in kinds() {
                if kind == ResourceKind::Network {
                    network = true;
                    if r.device.is_none() {
                        return Err(ApiError::bad(
                            "flow",
                            format!(
                                "resource {:?} has no device to enforce a flow on (add device = \"IFNAME\" to its [[resource]])",
                                r.name
                            ),
                        ));
                    }
                }
            }
            if !network {
                return Err(ApiError::bad("flow", "a flow needs a network resource"));
            }
            s.config
                .flows
                .check(&caller.user, caller.role, &flow)
                .map_err(|e| {
                    ApiError::new(StatusCode::FORBIDDEN, e.to_string(), Some(e.field()))
                })?;
            Some(flow)
        }
    };
    if pid.is_some() {
        if !kinds().any(|(_, k)| k == ResourceKind::Cpu) {
            return Err(ApiError::bad("pid", "a pid needs a cpu resource"));
        }
        if caller.role != Role::Operator {
            return Err(ApiError::new(
                StatusCode::FORBIDDEN,
                "binding a process to a CPU reservation needs an operator token",
                Some("pid"),
            ));
        }
        if pid == Some(0) {
            return Err(ApiError::bad("pid", "pid 0 is not a process"));
        }
    }
    let b = Binding { flow, pid };
    Ok((!b.is_empty()).then_some(b))
}

/// The query of `GET /v1/reservations`.
#[derive(Debug, serde::Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListQuery {
    /// Also finished reservations (from the store).
    pub all: Option<bool>,
}

/// Your live reservations (an operator's: everyone's).
#[utoipa::path(get, path = "/v1/reservations", params(ListQuery),
    responses((status = 200, body = Vec<ReservationView>), (status = 401, body = ErrorBody)))]
pub async fn list(
    State(s): State<AppState>,
    caller: Caller,
    Query(q): Query<ListQuery>,
) -> Result<Json<Vec<ReservationView>>, ApiError> {
    let viewer = caller.viewer();
    let all = q.all.unwrap_or(false);
    match s
        .handle
        .call(|reply| Command::List { viewer, all, reply })
        .await?
    {
        Answer::Many(v) => Ok(Json(v)),
        Answer::Rate(_) => Err(ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "unexpected answer",
            None,
        )),
    }
}

/// One reservation.
#[utoipa::path(get, path = "/v1/reservations/{id}", params(("id" = u64, Path, description = "reservation id")),
    responses((status = 200, body = ReservationView), (status = 404, body = ErrorBody)))]
pub async fn show(
    State(s): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<ReservationView>, ApiError> {
    let id = parse_id(&id)?;
    let viewer = caller.viewer();
    one(s
        .handle
        .call(|reply| Command::Get { id, viewer, reply })
        .await?)
    .map(Json)
}

/// Modify a committed reservation's rate or end: a new version, held until
/// committed (the old stays in force meanwhile).
#[utoipa::path(patch, path = "/v1/reservations/{id}", request_body = ModifyRequest,
    params(("id" = u64, Path, description = "reservation id")),
    responses((status = 200, body = ReservationView), (status = 400, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 409, body = ErrorBody)))]
pub async fn modify(
    State(s): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Json<ReservationView>, ApiError> {
    let id = parse_id(&id)?;
    let req: ModifyRequest = parse_json(&body)?;
    let now = clock::now();
    let rate = req
        .rate
        .as_deref()
        .map(|r| parse_rate(Some(r)))
        .transpose()?;
    let end = req
        .end
        .as_deref()
        .map(|e| parse_time("end", e, now))
        .transpose()?;
    if rate.is_none() && end.is_none() {
        return Err(ApiError::bad("body", "give rate or end to change"));
    }
    let viewer = caller.viewer();
    let modify = Modify { rate, end };
    one(s
        .handle
        .call(|reply| Command::Modify {
            id,
            modify,
            viewer,
            reply,
        })
        .await?)
    .map(Json)
}

async fn act(
    s: AppState,
    caller: Caller,
    id: &str,
    action: Action,
) -> Result<Json<ReservationView>, ApiError> {
    let id = parse_id(id)?;
    let viewer = caller.viewer();
    let local = async {
        one(s
            .handle
            .call(|reply| Command::Act {
                id,
                action,
                viewer,
                reply,
            })
            .await?)
        .map(Json)
    };
    super::forward::act(&s, &caller, id, action, local).await
}

/// Terminate a reservation (its capacity is free at once).
#[utoipa::path(delete, path = "/v1/reservations/{id}", params(("id" = u64, Path, description = "reservation id")),
    responses((status = 200, body = ReservationView), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody)))]
pub async fn terminate(
    State(s): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<ReservationView>, ApiError> {
    act(s, caller, &id, Action::Terminate).await
}

/// Commit the held version.
#[utoipa::path(post, path = "/v1/reservations/{id}/commit", params(("id" = u64, Path, description = "reservation id")),
    responses((status = 200, body = ReservationView), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody)))]
pub async fn commit(
    State(s): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<ReservationView>, ApiError> {
    act(s, caller, &id, Action::Commit).await
}

/// Abort the held version.
#[utoipa::path(post, path = "/v1/reservations/{id}/abort", params(("id" = u64, Path, description = "reservation id")),
    responses((status = 200, body = ReservationView), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody)))]
pub async fn abort(
    State(s): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<ReservationView>, ApiError> {
    act(s, caller, &id, Action::Abort).await
}

/// Provision: enforce the committed reservation on the data plane.
#[utoipa::path(post, path = "/v1/reservations/{id}/provision", params(("id" = u64, Path, description = "reservation id")),
    responses((status = 200, body = ReservationView), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody)))]
pub async fn provision(
    State(s): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<ReservationView>, ApiError> {
    act(s, caller, &id, Action::Provision).await
}

/// Release: stop enforcing it (it stays reserved).
#[utoipa::path(post, path = "/v1/reservations/{id}/release", params(("id" = u64, Path, description = "reservation id")),
    responses((status = 200, body = ReservationView), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody)))]
pub async fn release(
    State(s): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<ReservationView>, ApiError> {
    act(s, caller, &id, Action::Release).await
}

/// The largest rate free on a resource over `[start, end)`.
#[utoipa::path(get, path = "/v1/resources/{name}/availability",
    params(("name" = String, Path, description = "resource name"), AvailabilityQuery),
    responses((status = 200, body = Availability), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub async fn availability(
    State(s): State<AppState>,
    _caller: Caller,
    Path(name): Path<String>,
    Query(q): Query<AvailabilityQuery>,
) -> Result<Json<Availability>, ApiError> {
    let capacity = s
        .handle
        .catalog()
        .resource(&name)
        .ok_or_else(|| {
            ApiError::new(
                StatusCode::NOT_FOUND,
                format!("no resource {name:?}"),
                Some("name"),
            )
        })?
        .capacity;
    let now = clock::now();
    let start = match q.start.as_deref() {
        None => now,
        Some(t) => parse_time("start", t, now)?,
    };
    let end = parse_time(
        "end",
        q.end
            .as_deref()
            .ok_or_else(|| ApiError::bad("end", "missing end"))?,
        now,
    )?;
    if end <= start.max(now) {
        return Err(ApiError::bad("end", "the end is not after the start"));
    }
    let resource = name.clone();
    let free = match s
        .handle
        .call(|reply| Command::Availability {
            resource,
            start,
            end,
            reply,
        })
        .await?
    {
        Answer::Rate(r) => r,
        Answer::Many(_) => {
            return Err(ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "unexpected answer",
                None,
            ))
        }
    };
    Ok(Json(Availability {
        resource: name,
        capacity: capacity.to_string(),
        start: clock::format(start.max(now)),
        end: clock::format(end),
        max_free: free.to_string(),
        max_free_bps: free.bps(),
    }))
}

/// State changes of your reservations (an operator's: all) as server-sent
/// events named `changed` or `share`, data an [`EventView`]. At most
/// [`crate::http::HttpLimits::max_event_streams`] streams are open at
/// once (default [`super::MAX_SSE_CLIENTS`]); beyond, 503, and the
/// connection is closed.
#[utoipa::path(get, path = "/v1/events",
    responses((status = 200, description = "text/event-stream of EventView", body = EventView), (status = 401, body = ErrorBody),
        (status = 503, body = ErrorBody)))]
pub async fn events(
    State(s): State<AppState>,
    caller: Caller,
) -> Result<Sse<impl Stream<Item = Result<SseEvent, Infallible>>>, ApiError> {
    let permit = s.sse_slots.clone().try_acquire_owned().map_err(|_| {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "too many event streams open (--max-event-streams); retry later",
            None,
        )
    })?;
    let rx = s.handle.subscribe();
    let viewer = caller.viewer();
    // The permit lives in the stream's state: closed stream, slot freed.
    let stream = futures_util::stream::unfold(
        (rx, viewer, permit),
        |(mut rx, viewer, permit)| async move {
            loop {
                match rx.recv().await {
                    Ok(ev) if viewer.as_ref().is_none_or(|u| *u == ev.user) => {
                        let event = SseEvent::default()
                            .event(ev.view.event.clone())
                            .json_data(&ev.view)
                            .unwrap_or_else(|_| SseEvent::default().comment("unencodable event"));
                        return Some((Ok(event), (rx, viewer, permit)));
                    }
                    Ok(_) => {}
                    Err(RecvError::Lagged(n)) => {
                        let event = SseEvent::default().comment(format!("missed {n} events"));
                        return Some((Ok(event), (rx, viewer, permit)));
                    }
                    Err(RecvError::Closed) => return None,
                }
            }
        },
    );
    Ok(Sse::new(stream).keep_alive(KeepAlive::default()))
}

/// The OpenAPI document.
pub async fn openapi() -> Json<utoipa::openapi::OpenApi> {
    Json(ApiDoc::openapi())
}

/// Liveness.
#[utoipa::path(get, path = "/healthz", security(()), responses((status = 200, body = Health)))]
pub async fn healthz() -> Json<Health> {
    Json(Health {
        status: "ok".into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_errors_name_the_field() {
        let e = parse_json::<CreateRequest>(b"{\"rate\": 5}").unwrap_err();
        assert_eq!(e.body.field.as_deref(), Some("rate"));
        let e = parse_json::<CreateRequest>(b"{\"colour\": 5}").unwrap_err();
        assert_eq!(e.body.field.as_deref(), Some("colour"));
        let e = parse_json::<CreateRequest>(b"{\"rate\": ").unwrap_err();
        assert_eq!(e.body.field.as_deref(), Some("body"));
    }
}
