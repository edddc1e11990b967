//! The HTTP server under the API: hyper's HTTP/1 connections with the
//! broker's bounds, so that slow or many clients cannot take its file
//! descriptors or keep `/healthz` from answering (issue 29 §4).
//!
//! [`serve`] accepts connections and serves each with hyper's
//! `http1::Builder`, given a timer so that its `header_read_timeout`
//! works: a request head (the first, or the next on a kept-alive
//! connection) must arrive whole within [`HttpLimits::header_timeout`],
//! else the connection is closed — so an idle connection also lasts at
//! most that long. A request body must arrive whole within
//! [`HttpLimits::body_timeout`] (408, then closed) and be at most
//! [`MAX_BODY`] bytes (413). The connection table ([`slots`]) bounds the
//! open connections to [`HttpLimits::max_connections`], evicting idle ones
//! for new ones and keeping [`HttpLimits::health_reserve`] slots for
//! `/healthz`. Every 503, 408 and 413 closes its connection, so a refused
//! client (an event stream beyond the bound, a full queue) holds nothing.
//!
//! `max_connections` is lowered at start to leave [`FD_HEADROOM`] file
//! descriptors of the process's limit for the store, callbacks and `tc`.

pub mod slots;

use std::time::Duration;

use axum::body::Body;
use axum::http::header::{CONNECTION, CONTENT_LENGTH};
use axum::http::{HeaderValue, Request, Response, StatusCode};
use axum::response::IntoResponse;
use axum::Router;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use tower::ServiceExt;

use crate::api::ApiError;
use slots::{Admission, Busy, Slot, Slots};

/// The largest request body, in bytes (requests are small JSON).
pub const MAX_BODY: usize = 1 << 20;
/// File descriptors of the process's limit kept for everything but HTTP
/// connections (the store, callbacks, peers, `tc`).
pub const FD_HEADROOM: u64 = 64;
/// How long the accept loop waits after a failed accept before the next.
pub const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);

/// The server's bounds (`braid broker` flags).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HttpLimits {
    /// Connections open at once (`--max-connections`).
    pub max_connections: usize,
    /// Of those, kept for `/healthz` when the rest are all serving
    /// requests (`--health-reserve`).
    pub health_reserve: usize,
    /// A request head must arrive within this (`--header-timeout`); an
    /// idle connection is closed after it.
    pub header_timeout: Duration,
    /// A request body must arrive within this (`--body-timeout`).
    pub body_timeout: Duration,
    /// `/v1/events` streams open at once (`--max-event-streams`).
    pub max_event_streams: usize,
}

impl Default for HttpLimits {
    fn default() -> Self {
        HttpLimits {
            max_connections: 512,
            health_reserve: 8,
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(10),
            max_event_streams: crate::api::MAX_SSE_CLIENTS,
        }
    }
}

/// Bounds that cannot work.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LimitsError {
    /// The reserve is not below the connection cap.
    #[error("--health-reserve {reserve} must be below --max-connections {max}")]
    Reserve {
        /// The reserve.
        reserve: usize,
        /// The cap.
        max: usize,
    },
    /// A zero timeout or bound.
    #[error("{0} must be above zero")]
    Zero(&'static str),
    /// The file-descriptor limit leaves no room for connections.
    #[error("the process may open only {limit} files (ulimit -n); the broker needs more than {needed}: raise the limit")]
    FewFiles {
        /// The soft limit.
        limit: u64,
        /// What the broker keeps plus the reserve.
        needed: u64,
    },
}

impl HttpLimits {
    /// Checks the bounds and lowers `max_connections` to what the
    /// process's file-descriptor limit (`fd_limit`, when known) leaves
    /// after [`FD_HEADROOM`].
    ///
    /// # Errors
    /// [`LimitsError`].
    pub fn fitted(mut self, fd_limit: Option<u64>) -> Result<HttpLimits, LimitsError> {
        for (name, zero) in [
            ("--max-connections", self.max_connections == 0),
            ("--header-timeout", self.header_timeout.is_zero()),
            ("--body-timeout", self.body_timeout.is_zero()),
            ("--max-event-streams", self.max_event_streams == 0),
        ] {
            if zero {
                return Err(LimitsError::Zero(name));
            }
        }
        if self.health_reserve >= self.max_connections {
            return Err(LimitsError::Reserve {
                reserve: self.health_reserve,
                max: self.max_connections,
            });
        }
        if let Some(limit) = fd_limit {
            let needed = FD_HEADROOM + self.health_reserve as u64;
            let room = limit.saturating_sub(FD_HEADROOM);
            if room <= self.health_reserve as u64 {
                return Err(LimitsError::FewFiles { limit, needed });
            }
            if (self.max_connections as u64) > room {
                tracing::warn!(
                    max_connections = self.max_connections,
                    fd_limit = limit,
                    lowered_to = room,
                    "--max-connections lowered below the file-descriptor limit"
                );
                self.max_connections = usize::try_from(room).unwrap_or(usize::MAX);
            }
        }
        Ok(self)
    }
}

/// The process's soft limit on open files, from `/proc/self/limits`
/// (`None` where that cannot be read, or it is unlimited).
pub fn fd_limit() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = text.lines().find(|l| l.starts_with("Max open files"))?;
    line.trim_start_matches("Max open files")
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// Serves `app` on `listener` within `limits` until `stop` fires, then
/// closes every connection.
pub async fn serve(
    listener: tokio::net::TcpListener,
    app: Router,
    limits: HttpLimits,
    mut stop: tokio::sync::oneshot::Receiver<()>,
) {
    let slots = Slots::new(limits.max_connections, limits.health_reserve);
    let refused = refused_answer();
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    tracing::warn!(error = %e, "accepting a connection failed");
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                    continue;
                }
            },
            _ = &mut stop => break,
        };
        let (slot, reserve) = match slots.admit() {
            Admission::General(s) => (s, false),
            Admission::Reserve(s) => (s, true),
            Admission::Refused => {
                tracing::debug!("every connection is serving a request; one more refused");
                // Best effort, without waiting: the client may read why.
                let _ = stream.try_write(&refused);
                continue;
            }
        };
        tokio::spawn(connection(stream, slot, reserve, app.clone(), limits));
    }
    slots.close_all();
}

/// What a connection beyond every slot is sent before it is closed.
fn refused_answer() -> Vec<u8> {
    let body = r#"{"error":"the broker has too many connections open; retry later"}"#;
    format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

async fn connection(
    stream: tokio::net::TcpStream,
    mut slot: Slot,
    reserve: bool,
    app: Router,
    limits: HttpLimits,
) {
    let tracker = slot.tracker();
    let service = hyper::service::service_fn(move |req: Request<Incoming>| {
        request(req, tracker.busy(), reserve, app.clone(), limits)
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .keep_alive(!reserve);
    let conn = builder.serve_connection(TokioIo::new(stream), service);
    tokio::select! {
        served = conn => {
            if let Err(e) = served {
                tracing::debug!(error = %e, "connection ended");
            }
        }
        _ = &mut slot.evicted => {}
    }
}

/// One request: the reserve's restriction, the body read within its
/// deadline, the router, and the connection closed after a refusal.
async fn request(
    req: Request<Incoming>,
    busy: Busy,
    reserve: bool,
    app: Router,
    limits: HttpLimits,
) -> Result<Response<Body>, std::convert::Infallible> {
    if reserve && req.uri().path() != "/healthz" {
        return Ok(closing(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "the broker has too many connections open; only /healthz is answered now (retry later)",
            None,
        )));
    }
    let (parts, body) = req.into_parts();
    let declared = parts
        .headers
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > MAX_BODY as u64) {
        return Ok(closing(too_large()));
    }
    let read = http_body_util::Limited::new(body, MAX_BODY).collect();
    let bytes = match tokio::time::timeout(limits.body_timeout, read).await {
        Ok(Ok(collected)) => collected.to_bytes(),
        Ok(Err(e)) if e.is::<http_body_util::LengthLimitError>() => {
            return Ok(closing(too_large()))
        }
        Ok(Err(e)) => {
            return Ok(closing(ApiError::bad(
                "body",
                format!("the request body could not be read: {e}"),
            )))
        }
        Err(_) => {
            return Ok(closing(ApiError::new(
                StatusCode::REQUEST_TIMEOUT,
                format!(
                    "the request body did not arrive within {:?} (--body-timeout)",
                    limits.body_timeout
                ),
                Some("body"),
            )))
        }
    };
    let req = Request::from_parts(parts, Body::from(bytes));
    let resp = match app.oneshot(req).await {
        Ok(r) => r,
        Err(never) => match never {},
    };
    let (mut parts, body) = resp.into_parts();
    if reserve
        || matches!(
            parts.status,
            StatusCode::SERVICE_UNAVAILABLE
                | StatusCode::REQUEST_TIMEOUT
                | StatusCode::PAYLOAD_TOO_LARGE
        )
    {
        parts
            .headers
            .insert(CONNECTION, HeaderValue::from_static("close"));
    }
    // The request is in flight until its body is sent (or dropped).
    let body = body.map_frame(move |f| {
        let _in_flight = &busy;
        f
    });
    Ok(Response::from_parts(parts, Body::new(body)))
}

fn too_large() -> ApiError {
    ApiError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        format!("the request body is larger than {MAX_BODY} bytes"),
        Some("body"),
    )
}

/// `e` as a response that closes its connection.
fn closing(e: ApiError) -> Response<Body> {
    let mut r = e.into_response();
    r.headers_mut()
        .insert(CONNECTION, HeaderValue::from_static("close"));
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_refusal_is_a_whole_response() {
        let answer = String::from_utf8(refused_answer()).unwrap();
        let (head, body) = answer.split_once("\r\n\r\n").unwrap();
        let length: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length: "))
            .unwrap()
            .parse()
            .unwrap();
        assert_eq!(length, body.len());
        assert!(head.starts_with("HTTP/1.1 503") && head.contains("connection: close"));
        assert!(serde_json::from_str::<serde_json::Value>(body).is_ok());
    }
}
