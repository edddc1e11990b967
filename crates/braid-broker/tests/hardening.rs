//! Hardening: a bound on open event streams (503 beyond), PostgreSQL
//! migrations under an advisory lock (two brokers opening one fresh
//! database together), callback URLs only from the operator's allow-list
//! (400 naming `callback`), and callbacks retried a bounded number of
//! times. On SQLite and, with `BRAID_TEST_POSTGRES`, PostgreSQL.

mod common;

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use braid_broker::api::MAX_SSE_CLIENTS;
use braid_broker::client::ClientError;
use braid_broker::store::Store;
use braid_broker::types::CreateRequest;
use braid_broker::{Auth, Broker, Client, Config, Role};
use reqwest::StatusCode;

const SECRET: &str = "0123456789abcdef0123456789abcdef";

fn config(extra: &str) -> Config {
    let text = format!(
        "secret = \"{SECRET}\"\n{extra}\
         [[resource]]\nname = \"link\"\nkind = \"network\"\ncapacity = \"100mbit\"\n"
    );
    Config::parse(&text, Path::new("hardening.toml")).expect("test config is valid")
}

async fn start(db: &str, config: Config) -> (Broker, Client) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let broker = Broker::start(config, db, listener)
        .await
        .expect("broker starts");
    let token = Auth::new(SECRET.as_bytes())
        .issue("alice", Role::User, 4_000_000_000)
        .expect("issue");
    let client = Client::new(&format!("http://{}", broker.addr()), &token).expect("client");
    (broker, client)
}

fn with_callback(url: &str) -> CreateRequest {
    let end = braid_broker::clock::format(
        braid_broker::clock::now() + braid_core::Duration::from_secs(3600),
    );
    CreateRequest {
        resource: Some("link".into()),
        rate: Some("1mbit".into()),
        end: Some(end),
        callback: Some(url.into()),
        ..CreateRequest::default()
    }
}

fn api_err(e: ClientError) -> (StatusCode, Option<String>, String) {
    match e {
        ClientError::Api {
            status,
            field,
            error,
        } => (status, field, error),
        other => panic!("expected an API error, got {other}"),
    }
}

#[tokio::test]
async fn event_streams_are_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("b.db");
    let (broker, alice) = start(db.to_str().unwrap(), config("")).await;
    let mut open = Vec::new();
    for _ in 0..MAX_SSE_CLIENTS {
        open.push(alice.events().await.expect("a stream within the bound"));
    }
    let (status, _, error) = api_err(alice.events().await.unwrap_err());
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{error}");
    // The open ones still work.
    alice
        .create(&CreateRequest {
            callback: None,
            ..with_callback("")
        })
        .await
        .unwrap();
    let ev = tokio::time::timeout(std::time::Duration::from_secs(30), open[0].next())
        .await
        .expect("an event within the bound")
        .unwrap()
        .unwrap();
    assert_eq!(ev.event, "changed");
    broker.stop().await;
}

#[tokio::test]
async fn two_brokers_migrate_one_fresh_database_together() {
    for db in common::backends().await {
        for _ in 0..3 {
            let (a, b) = tokio::join!(Store::open(db.url()), Store::open(db.url()));
            let (a, b) = (
                a.unwrap_or_else(|e| panic!("{}: first: {e}", db.kind())),
                b.unwrap_or_else(|e| panic!("{}: second: {e}", db.kind())),
            );
            a.close().await;
            b.close().await;
        }
        db.finish().await;
    }
}

#[tokio::test]
async fn callbacks_only_from_the_allow_list() {
    for db in common::backends().await {
        // No list: every callback refused, naming the field.
        let (broker, alice) = start(db.url(), config("")).await;
        let (status, field, error) = api_err(
            alice
                .create(&with_callback("http://127.0.0.1:9/hook"))
                .await
                .unwrap_err(),
        );
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert_eq!(field.as_deref(), Some("callback"));
        assert!(error.contains("callbacks.allow"), "{error}");
        assert!(alice.list(false).await.unwrap().is_empty(), "nothing held");
        broker.stop().await;

        let (broker, alice) = start(
            db.url(),
            config("[callbacks]\nallow = [\"http://127.0.0.1:*/hooks/\"]\n"),
        )
        .await;
        for bad in [
            "http://127.0.0.2:80/hooks/x",
            "http://127.0.0.1:80/other",
            "https://127.0.0.1:80/hooks/x",
        ] {
            let (status, field, _) = api_err(alice.create(&with_callback(bad)).await.unwrap_err());
            assert_eq!(
                (status, field.as_deref()),
                (StatusCode::BAD_REQUEST, Some("callback")),
                "{bad}"
            );
        }
        broker.stop().await;
        db.finish().await;
    }
}

#[tokio::test]
async fn a_failed_callback_is_retried() {
    use axum::routing::post;
    // The hook fails its first post, then takes them.
    let calls = Arc::new(AtomicUsize::new(0));
    let (tx, mut rx) = tokio::sync::mpsc::channel::<serde_json::Value>(16);
    let seen = calls.clone();
    let app = axum::Router::new().route(
        "/hooks/a",
        post(move |axum::Json(v): axum::Json<serde_json::Value>| {
            let (tx, seen) = (tx.clone(), seen.clone());
            async move {
                if seen.fetch_add(1, Ordering::SeqCst) == 0 {
                    return StatusCode::INTERNAL_SERVER_ERROR;
                }
                let _ = tx.send(v).await;
                StatusCode::OK
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let hook = format!("http://{}/hooks/a", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });

    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("b.db");
    let (broker, alice) = start(
        db.to_str().unwrap(),
        config("[callbacks]\nallow = [\"http://127.0.0.1:*/hooks/\"]\n"),
    )
    .await;
    let id = alice.create(&with_callback(&hook)).await.unwrap().id;
    let v = tokio::time::timeout(std::time::Duration::from_secs(30), rx.recv())
        .await
        .expect("the retried callback within the bound")
        .expect("hook server alive");
    assert_eq!(v["id"], id);
    assert_eq!(v["reservation"]["state"], "held");
    assert_eq!(calls.load(Ordering::SeqCst), 2, "one failure, one retry");
    broker.stop().await;
}
