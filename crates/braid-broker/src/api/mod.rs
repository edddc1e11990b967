//! The HTTP API (axum): routes, the bearer-token extractor, and the OpenAPI
//! document generated from [`crate::types`] and the handlers' annotations.
//!
//! Every `/v1` route needs `Authorization: Bearer <token>` ([`Caller`]);
//! `/healthz` and `/openapi.json` do not. Handlers check the request's
//! fields against the configuration (names, rates, times) and answer 400
//! naming the field before anything reaches the owner task; the owner task
//! answers the rest ([`crate::owner`]).

mod error;
mod forward;
mod groups;
mod handlers;
mod operator;

use std::sync::Arc;

use axum::extract::FromRequestParts;
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use axum::routing::{get, post};
use axum::Router;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::OpenApi;

pub use error::ApiError;

use crate::auth::{Auth, Role};
use crate::config::Config;
use crate::owner::{Handle, Viewer};

/// What every handler shares.
#[derive(Debug, Clone)]
pub struct AppState {
    /// The owner task.
    pub handle: Handle,
    /// Token checking.
    pub auth: Arc<Auth>,
    /// The configuration (resources, for checking requests).
    pub config: Arc<Config>,
    /// Peer brokers (resources routed to other domains).
    pub peers: Arc<crate::peers::Peers>,
    /// One permit per open `/v1/events` stream
    /// ([`crate::http::HttpLimits::max_event_streams`]).
    pub sse_slots: Arc<tokio::sync::Semaphore>,
}

/// Open `/v1/events` streams at once by default; one more is answered
/// 503 (`--max-event-streams`).
pub const MAX_SSE_CLIENTS: usize = 256;

/// The authenticated caller of a `/v1` route.
#[derive(Debug, Clone)]
pub struct Caller {
    /// The token's user.
    pub user: String,
    /// The token's role.
    pub role: Role,
}

impl Caller {
    /// What this caller may see: their own (a user) or all (an operator).
    pub fn viewer(&self) -> Viewer {
        match self.role {
            Role::Operator => None,
            Role::User => Some(self.user.clone()),
        }
    }
}

impl FromRequestParts<AppState> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let header = parts
            .headers
            .get(AUTHORIZATION)
            .and_then(|v| v.to_str().ok());
        let claims = state.auth.verify_header(header)?;
        Ok(Caller {
            user: claims.sub,
            role: claims.role,
        })
    }
}

/// The broker's routes over `state`.
pub fn router(state: AppState) -> Router {
    use handlers as h;
    Router::new()
        .route("/v1/reservations", post(h::create).get(h::list))
        .route(
            "/v1/reservations/{id}",
            get(h::show).patch(h::modify).delete(h::terminate),
        )
        .route("/v1/reservations/{id}/commit", post(h::commit))
        .route("/v1/reservations/{id}/abort", post(h::abort))
        .route("/v1/reservations/{id}/provision", post(h::provision))
        .route("/v1/reservations/{id}/release", post(h::release))
        .route("/v1/resources/{name}/availability", get(h::availability))
        .route(
            "/v1/resources",
            get(operator::list)
                .post(operator::add)
                .patch(operator::modify),
        )
        .route(
            "/v1/policy",
            get(operator::policy).put(operator::set_policy),
        )
        .route(
            "/v1/groups/{gid}",
            get(groups::show).delete(groups::terminate),
        )
        .route("/v1/groups/{gid}/commit", post(groups::commit))
        .route("/v1/groups/{gid}/abort", post(groups::abort))
        .route("/v1/events", get(h::events))
        .route("/openapi.json", get(h::openapi))
        .route("/healthz", get(h::healthz))
        .with_state(state)
}

/// The OpenAPI document, generated from the types and handlers.
#[derive(OpenApi)]
#[openapi(
    info(title = "braid broker", description = "Reservations of network, CPU and storage rates (two-phase: hold, then commit)."),
    paths(
        handlers::create, handlers::list, handlers::show, handlers::modify, handlers::terminate,
        handlers::commit, handlers::abort, handlers::provision, handlers::release,
        handlers::availability, handlers::events, handlers::healthz,
        groups::show, groups::commit, groups::abort, groups::terminate,
        operator::list, operator::add, operator::modify, operator::policy, operator::set_policy
    ),
    components(schemas(
        crate::types::CreateRequest, crate::types::ModifyRequest, crate::types::Created,
        crate::types::ReservationView, crate::types::VersionView, crate::types::Availability,
        crate::types::ErrorBody, crate::types::EventView, crate::types::Health,
        crate::types::RemotePart, crate::catalog::ResourceView, crate::catalog::ResourceRequest,
        crate::catalog::PolicyView, crate::catalog::LimitsView,
        crate::types::FlowSpec
    )),
    modifiers(&BearerScheme),
    security(("bearer" = []))
)]
#[derive(Debug)]
pub struct ApiDoc;

struct BearerScheme;

impl utoipa::Modify for BearerScheme {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .bearer_format("JWT")
                    .build(),
            ),
        );
    }
}
