//! Callbacks: the delivery of state changes to the URLs clients named,
//! with a bounded retry (which URLs they may name: [`crate::allow`]).
//!
//! Delivery ([`deliver`]) posts one event at a time, each tried at most
//! [`CALLBACK_ATTEMPTS`] times with [`CALLBACK_BACKOFF`] doubling between
//! tries; a failure is logged (the event stays available from `/v1/events`
//! and `GET`).
//!
//! At connect time the callback's host is resolved by [`CheckedResolver`],
//! which passes on only the addresses [`AllowList::reachable`] allows, so
//! the connection goes only there (a host written as an address is not
//! resolved: the pattern matched it as written). Redirects are not
//! followed, and no proxy from the environment is used (it would be
//! connected to instead of the checked address).

use std::net::SocketAddr;
use std::sync::Arc;

use reqwest::dns::{Addrs, Name, Resolve, Resolving};

use crate::allow::AllowList;
use crate::types::EventView;

/// How long one callback post may take.
pub const CALLBACK_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);
/// Tries per event (the first and the retries).
pub const CALLBACK_ATTEMPTS: u32 = 3;
/// The wait before the first retry; doubled before each next one.
pub const CALLBACK_BACKOFF: std::time::Duration = std::time::Duration::from_millis(200);

/// The most addresses one callback host's name may resolve to that are
/// looked at.
pub const MAX_RESOLVED: usize = 32;

/// A callback host whose name resolved to no address the broker may reach.
#[derive(Debug, thiserror::Error)]
#[error("callback host {host} resolved to {found}, none of them an address callbacks may reach (public, or in [callbacks] resolve_to)")]
pub struct Unreachable {
    /// The host.
    pub host: String,
    /// What it resolved to.
    pub found: String,
}

/// Resolves a callback's host when the broker connects and keeps only the
/// addresses the allow-list lets a name lead to.
#[derive(Debug)]
pub struct CheckedResolver {
    allow: Arc<AllowList>,
}

impl CheckedResolver {
    /// A resolver checking against `allow`.
    pub fn new(allow: Arc<AllowList>) -> CheckedResolver {
        CheckedResolver { allow }
    }
}

impl Resolve for CheckedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let allow = Arc::clone(&self.allow);
        let host = name.as_str().to_string();
        Box::pin(async move {
            let found: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0))
                .await?
                .take(MAX_RESOLVED)
                .collect();
            let ok: Vec<SocketAddr> = found
                .iter()
                .copied()
                .filter(|a| allow.reachable(a.ip()))
                .collect();
            if ok.is_empty() {
                let found = found
                    .iter()
                    .map(|a| a.ip().to_string())
                    .collect::<Vec<_>>()
                    .join(", ");
                return Err(Box::new(Unreachable {
                    host,
                    found: if found.is_empty() {
                        "nothing".into()
                    } else {
                        found
                    },
                })
                    as Box<dyn std::error::Error + Send + Sync>);
            }
            Ok(Box::new(ok.into_iter()) as Addrs)
        })
    }
}

/// Posts each event to its callback URL, one at a time, each tried at
/// most [`CALLBACK_ATTEMPTS`] times; failures are logged. Hosts are
/// resolved and checked against `allow` at connect time.
pub async fn deliver(
    mut rx: tokio::sync::mpsc::Receiver<(String, EventView)>,
    allow: Arc<AllowList>,
) {
    let client = match reqwest::Client::builder()
        .timeout(CALLBACK_TIMEOUT)
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .dns_resolver(Arc::new(CheckedResolver::new(allow)))
        .build()
    {
        Ok(c) => c,
        Err(e) => {
            tracing::error!(error = %e, "no HTTP client for callbacks");
            return;
        }
    };
    while let Some((url, event)) = rx.recv().await {
        let mut wait = CALLBACK_BACKOFF;
        for attempt in 1..=CALLBACK_ATTEMPTS {
            let outcome = client.post(&url).json(&event).send().await;
            let error = match outcome {
                Ok(r) if r.status().is_success() => break,
                Ok(r) => format!("status {}", r.status()),
                Err(e) => error_chain(&e),
            };
            if attempt == CALLBACK_ATTEMPTS {
                tracing::warn!(%url, %error, attempts = attempt, "callback failed; given up");
            } else {
                tracing::debug!(%url, %error, attempt, "callback failed; retrying");
                tokio::time::sleep(wait).await;
                wait = wait.saturating_mul(2);
            }
        }
    }
}

/// An error with its causes, in one line (reqwest's own text leaves out
/// why a connection failed).
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        text.push_str(": ");
        text.push_str(&c.to_string());
        cause = c.source();
    }
    text
}
