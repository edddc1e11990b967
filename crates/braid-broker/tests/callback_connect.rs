//! Callback URLs re-checked when the broker connects (issue 29 §4): a host
//! name the allow-list lets through reaches only a public address or one
//! the operator listed in `[callbacks] resolve_to`, whatever its name
//! resolves to then (DNS rebinding); a redirect is never followed.
//!
//! `localhost` stands for a name that resolves into the operator's
//! network. Callbacks are posted one at a time in order, so once the hook
//! has seen the post that follows a refused one, the refused one's tries
//! are over: no test waits for something not to happen.

use std::path::Path;
use std::time::Duration;

use braid_broker::types::CreateRequest;
use braid_broker::{Broker, Client, Role};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc;

mod start;

const GUARD: Duration = Duration::from_secs(30);

/// A hook on 127.0.0.1 that answers every POST (`/redirect` with a 302 to
/// `/secret`, the rest 200) and reports each path it was asked for.
async fn hook() -> (u16, mpsc::UnboundedReceiver<String>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            let tx = tx.clone();
            tokio::spawn(async move {
                let mut got = Vec::new();
                let mut buf = [0_u8; 4096];
                // The head and the JSON body (one read is usually all).
                while !complete(&got) {
                    match s.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => got.extend_from_slice(&buf[..n]),
                    }
                }
                let text = String::from_utf8_lossy(&got).into_owned();
                let path = text.split_whitespace().nth(1).unwrap_or("").to_string();
                let answer = if path == "/redirect" {
                    format!("HTTP/1.1 302 Found\r\nlocation: http://127.0.0.1:{port}/secret\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
                } else {
                    "HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n".into()
                };
                let _ = s.write_all(answer.as_bytes()).await;
                let _ = tx.send(path);
            });
        }
    });
    (port, rx)
}

/// Whether `got` holds a whole request (head and `content-length` body).
fn complete(got: &[u8]) -> bool {
    let text = String::from_utf8_lossy(got);
    let Some((head, body)) = text.split_once("\r\n\r\n") else {
        return false;
    };
    let length = head
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("content-length:")
                .map(|v| v.trim().parse::<usize>().unwrap_or(0))
        })
        .unwrap_or(0);
    body.len() >= length
}

async fn start(db: &Path, callbacks: &str) -> (Broker, Client) {
    let body = format!(
        "[callbacks]\n{callbacks}\n\
         [[resource]]\nname = \"link\"\nkind = \"network\"\ncapacity = \"100mbit\"\n"
    );
    let broker = start::start_broker(&body, db).await;
    let client = start::client_for(&broker, "alice", Role::User);
    (broker, client)
}

/// Holds a reservation whose state changes are posted to `url` (the hold
/// itself is the first).
async fn reserve_with(c: &Client, url: String) {
    let end = braid_broker::clock::format(
        braid_broker::clock::now() + braid_core::Duration::from_secs(3600),
    );
    c.create(&CreateRequest {
        resource: Some("link".into()),
        rate: Some("1mbit".into()),
        end: Some(end),
        callback: Some(url),
        ..CreateRequest::default()
    })
    .await
    .expect("the callback passes the allow-list");
}

/// The next path the hook was asked for.
async fn next(rx: &mut mpsc::UnboundedReceiver<String>) -> String {
    tokio::time::timeout(GUARD, rx.recv())
        .await
        .expect("the hook was posted to")
        .expect("the hook runs")
}

const ALLOW: &str = "allow = [\"http://localhost:*\", \"http://127.0.0.1:*\"]";

#[tokio::test]
async fn a_name_that_resolves_into_the_local_network_is_not_connected_to() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (port, mut posts) = hook().await;
    let (broker, alice) = start(&dir.path().join("b.db"), ALLOW).await;
    // Allowed by its name; its name leads to 127.0.0.1 (or ::1).
    reserve_with(&alice, format!("http://localhost:{port}/rebound")).await;
    // Allowed as written: an address.
    reserve_with(&alice, format!("http://127.0.0.1:{port}/literal")).await;
    assert_eq!(
        next(&mut posts).await,
        "/literal",
        "the name's post reached the local network"
    );
    broker.stop().await;
}

#[tokio::test]
async fn resolve_to_lets_a_name_lead_where_the_operator_said() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (port, mut posts) = hook().await;
    let config = format!("{ALLOW}\nresolve_to = [\"127.0.0.0/8\"]");
    let (broker, alice) = start(&dir.path().join("b.db"), &config).await;
    reserve_with(&alice, format!("http://localhost:{port}/named")).await;
    assert_eq!(next(&mut posts).await, "/named");
    broker.stop().await;
}

#[tokio::test]
async fn a_redirect_is_not_followed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (port, mut posts) = hook().await;
    let (broker, alice) = start(&dir.path().join("b.db"), ALLOW).await;
    reserve_with(&alice, format!("http://127.0.0.1:{port}/redirect")).await;
    reserve_with(&alice, format!("http://127.0.0.1:{port}/after")).await;
    let mut seen = Vec::new();
    loop {
        let p = next(&mut posts).await;
        if p == "/after" {
            break;
        }
        seen.push(p);
    }
    // Tried (a 302 is no success) but never followed to /secret.
    assert!(
        !seen.is_empty() && seen.iter().all(|p| p == "/redirect"),
        "{seen:?}"
    );
    broker.stop().await;
}
