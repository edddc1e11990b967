//! The broker's client (`braid reserve`): typed calls over HTTP(S) with a
//! bearer token, errors as the broker phrased them, and a reader for the
//! server-sent event stream.

use reqwest::{Method, StatusCode};
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::owner::Action;
use braid_core::id::ReservationId;

use crate::types::{
    Availability, CreateRequest, Created, ErrorBody, EventView, ModifyRequest, ReservationView,
};

/// The largest server-sent event accepted, in bytes.
pub const MAX_EVENT_BYTES: usize = 1 << 20;

/// A failed call.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    /// The broker could not be reached or the connection broke.
    #[error("{0}")]
    Http(#[from] reqwest::Error),
    /// The broker refused, with its reason.
    #[error("{status}: {}{error}", field.as_deref().map(|f| format!("{f}: ")).unwrap_or_default())]
    Api {
        /// The HTTP status.
        status: StatusCode,
        /// The broker's reason.
        error: String,
        /// The field at fault.
        field: Option<String>,
    },
    /// The answer did not decode.
    #[error("unexpected answer from the broker: {0}")]
    Decode(String),
    /// A bad URL or token.
    #[error("{0}")]
    Setup(String),
}

/// A client of one broker with one token.
#[derive(Debug, Clone)]
pub struct Client {
    http: reqwest::Client,
    base: String,
    token: String,
}

impl Client {
    /// A client of the broker at `base` (e.g. `http://127.0.0.1:7080`).
    ///
    /// # Errors
    /// [`ClientError::Setup`] for a URL that is not http(s).
    pub fn new(base: &str, token: &str) -> Result<Client, ClientError> {
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            return Err(ClientError::Setup(format!(
                "broker URL {base:?}: must start with http:// or https://"
            )));
        }
        let http = reqwest::Client::builder().build()?;
        Ok(Client {
            http,
            base: base.trim_end_matches('/').to_string(),
            token: token.trim().to_string(),
        })
    }

    async fn call<B: Serialize, T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        body: Option<&B>,
    ) -> Result<T, ClientError> {
        let mut req = self
            .http
            .request(method, format!("{}{path}", self.base))
            .bearer_auth(&self.token);
        if let Some(b) = body {
            req = req.json(b);
        }
        let resp = req.send().await?;
        let status = resp.status();
        let bytes = resp.bytes().await?;
        if !status.is_success() {
            let body: ErrorBody = serde_json::from_slice(&bytes).unwrap_or(ErrorBody {
                error: String::from_utf8_lossy(&bytes).trim().to_string(),
                field: None,
            });
            return Err(ClientError::Api {
                status,
                error: body.error,
                field: body.field,
            });
        }
        serde_json::from_slice(&bytes).map_err(|e| ClientError::Decode(e.to_string()))
    }

    /// Hold a reservation.
    ///
    /// # Errors
    /// [`ClientError`].
    pub async fn create(&self, req: &CreateRequest) -> Result<Created, ClientError> {
        self.call(Method::POST, "/v1/reservations", Some(req)).await
    }

    /// Your live reservations (or with `all` every one stored).
    ///
    /// # Errors
    /// [`ClientError`].
    pub async fn list(&self, all: bool) -> Result<Vec<ReservationView>, ClientError> {
        let path = if all {
            "/v1/reservations?all=true"
        } else {
            "/v1/reservations"
        };
        self.call::<(), _>(Method::GET, path, None).await
    }

    /// One reservation.
    ///
    /// # Errors
    /// [`ClientError`].
    pub async fn show(&self, id: impl Into<ReservationId>) -> Result<ReservationView, ClientError> {
        let id = id.into().0;
        self.call::<(), _>(Method::GET, &format!("/v1/reservations/{id}"), None)
            .await
    }

    /// Hold a new version with another rate or end.
    ///
    /// # Errors
    /// [`ClientError`].
    pub async fn modify(
        &self,
        id: impl Into<ReservationId>,
        m: &ModifyRequest,
    ) -> Result<ReservationView, ClientError> {
        let id = id.into().0;
        self.call(Method::PATCH, &format!("/v1/reservations/{id}"), Some(m))
            .await
    }

    /// Commit, abort, provision, release or terminate (the last is
    /// [`Client::terminate`]).
    ///
    /// # Errors
    /// [`ClientError`].
    pub async fn act(
        &self,
        id: impl Into<ReservationId>,
        action: Action,
    ) -> Result<ReservationView, ClientError> {
        let id = id.into();
        if action == Action::Terminate {
            return self.terminate(id).await;
        }
        self.call::<(), _>(
            Method::POST,
            &format!("/v1/reservations/{}/{action}", id.0),
            None,
        )
        .await
    }

    /// Terminate.
    ///
    /// # Errors
    /// [`ClientError`].
    pub async fn terminate(
        &self,
        id: impl Into<ReservationId>,
    ) -> Result<ReservationView, ClientError> {
        let id = id.into().0;
        self.call::<(), _>(Method::DELETE, &format!("/v1/reservations/{id}"), None)
            .await
    }

    /// A co-reservation group's parts.
    ///
    /// # Errors
    /// [`ClientError`].
    pub async fn group(&self, gid: u64) -> Result<Vec<ReservationView>, ClientError> {
        self.call::<(), _>(Method::GET, &format!("/v1/groups/{gid}"), None)
            .await
    }

    /// Commit or abort every part of a group; the parts after it.
    ///
    /// # Errors
    /// [`ClientError`].
    pub async fn group_act(
        &self,
        gid: u64,
        action: Action,
    ) -> Result<Vec<ReservationView>, ClientError> {
        self.call::<(), _>(Method::POST, &format!("/v1/groups/{gid}/{action}"), None)
            .await
    }

    /// The largest rate free on `resource` over `[start, end)`.
    ///
    /// # Errors
    /// [`ClientError`].
    pub async fn availability(
        &self,
        resource: &str,
        start: &str,
        end: &str,
    ) -> Result<Availability, ClientError> {
        let url = reqwest::Url::parse_with_params(
            &format!("{}/v1/resources/{resource}/availability", self.base),
            &[("start", start), ("end", end)],
        )
        .map_err(|e| ClientError::Setup(e.to_string()))?;
        let path = &url.as_str()[self.base.len()..];
        self.call::<(), _>(Method::GET, path, None).await
    }

    /// The stream of state changes.
    ///
    /// # Errors
    /// [`ClientError`].
    pub async fn events(&self) -> Result<Events, ClientError> {
        let resp = self
            .http
            .get(format!("{}/v1/events", self.base))
            .bearer_auth(&self.token)
            .send()
            .await?;
        if !resp.status().is_success() {
            let status = resp.status();
            let text = resp.text().await.unwrap_or_default();
            let body: ErrorBody = serde_json::from_str(&text).unwrap_or(ErrorBody {
                error: text,
                field: None,
            });
            return Err(ClientError::Api {
                status,
                error: body.error,
                field: body.field,
            });
        }
        Ok(Events {
            resp,
            buf: Vec::new(),
        })
    }
}

/// Server-sent events from `/v1/events`.
#[derive(Debug)]
pub struct Events {
    resp: reqwest::Response,
    buf: Vec<u8>,
}

impl Events {
    /// The next event; `None` when the broker closed the stream.
    ///
    /// # Errors
    /// [`ClientError`]; an event above [`MAX_EVENT_BYTES`] is
    /// [`ClientError::Decode`].
    pub async fn next(&mut self) -> Result<Option<EventView>, ClientError> {
        loop {
            while let Some(end) = find_blank_line(&self.buf) {
                let block: Vec<u8> = self.buf.drain(..end.1).collect();
                let text = String::from_utf8_lossy(&block[..end.0]);
                let data: Vec<&str> = text
                    .lines()
                    .filter_map(|l| l.strip_prefix("data:").map(str::trim_start))
                    .collect();
                if data.is_empty() {
                    continue; // a comment or keep-alive
                }
                let view = serde_json::from_str(&data.join("\n"))
                    .map_err(|e| ClientError::Decode(e.to_string()))?;
                return Ok(Some(view));
            }
            if self.buf.len() > MAX_EVENT_BYTES {
                return Err(ClientError::Decode("event too large".into()));
            }
            match self.resp.chunk().await? {
                Some(c) => self.buf.extend_from_slice(&c),
                None => return Ok(None),
            }
        }
    }
}

/// Where the first event block ends: (end of its text, end including the
/// blank line).
fn find_blank_line(buf: &[u8]) -> Option<(usize, usize)> {
    let lf = buf
        .windows(2)
        .position(|w| w == b"\n\n")
        .map(|i| (i, i + 2));
    let crlf = buf
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|i| (i, i + 4));
    match (lf, crlf) {
        (Some(a), Some(b)) => Some(if a.0 <= b.0 { a } else { b }),
        (a, b) => a.or(b),
    }
}
