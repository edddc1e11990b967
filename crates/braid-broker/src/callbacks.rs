//! Callbacks: the delivery of state changes to the URLs clients named,
//! with a bounded retry (which URLs they may name: [`crate::allow`]).
//!
//! Delivery ([`deliver`]) posts one event at a time, each tried at most
//! [`CALLBACK_ATTEMPTS`] times with [`CALLBACK_BACKOFF`] doubling between
//! tries; a failure is logged (the event stays available from `/v1/events`
//! and `GET`).

use crate::types::EventView;

/// How long one callback post may take.
pub const CALLBACK_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);
/// Tries per event (the first and the retries).
pub const CALLBACK_ATTEMPTS: u32 = 3;
/// The wait before the first retry; doubled before each next one.
pub const CALLBACK_BACKOFF: std::time::Duration = std::time::Duration::from_millis(200);

/// Posts each event to its callback URL, one at a time, each tried at
/// most [`CALLBACK_ATTEMPTS`] times; failures are logged.
pub async fn deliver(mut rx: tokio::sync::mpsc::Receiver<(String, EventView)>) {
    let client = match reqwest::Client::builder()
        .timeout(CALLBACK_TIMEOUT)
        .redirect(reqwest::redirect::Policy::none())
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
                Err(e) => e.to_string(),
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
