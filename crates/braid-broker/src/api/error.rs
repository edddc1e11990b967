//! API errors: a status and a JSON body `{ "error": …, "field": … }`.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use braid_core::reserve::policy::LimitKind;
use braid_core::reserve::ReserveError;

use crate::auth::AuthError;
use crate::owner::OwnerError;
use crate::types::ErrorBody;

/// An error answer.
#[derive(Debug)]
pub struct ApiError {
    /// The status.
    pub status: StatusCode,
    /// The body.
    pub body: ErrorBody,
}

impl ApiError {
    /// 400 naming `field`.
    pub fn bad(field: &str, error: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, error, Some(field))
    }

    /// Any status.
    pub fn new(status: StatusCode, error: impl Into<String>, field: Option<&str>) -> ApiError {
        ApiError {
            status,
            body: ErrorBody {
                error: error.into(),
                field: field.map(str::to_string),
            },
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status, Json(self.body)).into_response()
    }
}

impl From<AuthError> for ApiError {
    fn from(e: AuthError) -> ApiError {
        ApiError::new(StatusCode::UNAUTHORIZED, e.to_string(), None)
    }
}

impl From<OwnerError> for ApiError {
    fn from(e: OwnerError) -> ApiError {
        let text = e.to_string();
        match e {
            OwnerError::NotFound(_) => ApiError::new(StatusCode::NOT_FOUND, text, None),
            OwnerError::Busy | OwnerError::Stopped => {
                ApiError::new(StatusCode::SERVICE_UNAVAILABLE, text, None)
            }
            OwnerError::Store(_) => ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, text, None),
            OwnerError::Book(e) => book_error(&e, text),
            OwnerError::Group(crate::groups::GroupError::NotFound(_)) => {
                ApiError::new(StatusCode::NOT_FOUND, text, None)
            }
            OwnerError::Group(_) => ApiError::new(StatusCode::CONFLICT, text, None),
            OwnerError::Flow(_) => ApiError::new(StatusCode::CONFLICT, text, Some("flow")),
            OwnerError::Catalog(crate::catalog::CatalogError::Book(e)) => {
                let mut err = book_error(&e, text);
                if matches!(e, ReserveError::Overbooked { .. }) {
                    err.body.field = Some("capacity".into());
                }
                err
            }
            OwnerError::Catalog(_) => ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, text, None),
        }
    }
}

fn book_error(e: &ReserveError, text: String) -> ApiError {
    use StatusCode as S;
    let (status, field) = match e {
        ReserveError::UnknownResource(_) => (S::BAD_REQUEST, Some("resource")),
        ReserveError::ZeroRate => (S::BAD_REQUEST, Some("rate")),
        ReserveError::EndBeforeStart { .. } | ReserveError::EndInPast { .. } => {
            (S::BAD_REQUEST, Some("end"))
        }
        ReserveError::EmptyModification => (S::BAD_REQUEST, Some("body")),
        ReserveError::Overbooked { .. } => (S::CONFLICT, Some("rate")),
        ReserveError::Policy(p) => (
            S::FORBIDDEN,
            Some(match p.rule.kind {
                LimitKind::RatePerRequest | LimitKind::Total => "rate",
                LimitKind::Duration => "end",
                LimitKind::Advance => "start",
            }),
        ),
        ReserveError::UnknownReservation(_) => (S::NOT_FOUND, None),
        ReserveError::BookFull(_) | ReserveError::TooManyResources(_) => {
            (S::SERVICE_UNAVAILABLE, None)
        }
        _ => (S::CONFLICT, None),
    };
    ApiError::new(status, text, field)
}
