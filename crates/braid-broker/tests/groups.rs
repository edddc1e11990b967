//! Co-reservation groups over real HTTP: all parts held or none (the
//! refusal names the resource), committed together by any part or by the
//! group, aborted and terminated together, and kept across a restart; on
//! SQLite and, when `BRAID_TEST_POSTGRES` reaches a server, PostgreSQL.

mod common;

use braid_broker::owner::Action;
use std::path::Path;

use braid_broker::client::ClientError;
use braid_broker::types::CreateRequest;
use braid_broker::{Auth, Broker, Client, Config, Role};
use reqwest::StatusCode;

const SECRET: &str = "0123456789abcdef0123456789abcdef";

fn config() -> Config {
    let text = format!(
        "secret = \"{SECRET}\"\n\
         [[resource]]\nname = \"link\"\nkind = \"network\"\ncapacity = \"100mbit\"\n\
         [[resource]]\nname = \"cpu0\"\nkind = \"cpu\"\ncapacity = \"50mbit\"\n"
    );
    Config::parse(&text, Path::new("groups.toml")).expect("test config is valid")
}

async fn start(db: &str) -> (Broker, Client) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let broker = Broker::start(config(), db, listener)
        .await
        .expect("broker starts");
    let token = Auth::new(SECRET.as_bytes())
        .issue("alice", Role::User, 4_000_000_000)
        .expect("issue");
    let client = Client::new(&format!("http://{}", broker.addr()), &token).expect("client");
    (broker, client)
}

fn both(rate: &str) -> CreateRequest {
    let end = braid_broker::clock::format(
        braid_broker::clock::now() + braid_core::Duration::from_secs(3600),
    );
    CreateRequest {
        resources: Some(vec!["link".into(), "cpu0".into()]),
        rate: Some(rate.into()),
        end: Some(end),
        ..CreateRequest::default()
    }
}

fn status(e: ClientError) -> (StatusCode, String) {
    match e {
        ClientError::Api { status, error, .. } => (status, error),
        other => panic!("expected an API error, got {other}"),
    }
}

#[tokio::test]
async fn co_reservations_are_all_or_none() {
    for db in common::backends().await {
        eprintln!("on {}", db.kind());
        groups_on(db.url()).await;
        db.finish().await;
    }
}

async fn groups_on(db: &str) {
    let (broker, alice) = start(db).await;
    let made = alice.create(&both("20mbit")).await.unwrap();
    assert_eq!(made.ids.len(), 2);
    let gid = made.group.expect("a co-reservation has a group");
    assert_eq!(gid, made.ids[0]);
    let second = made.ids[1];
    assert_eq!(alice.show(second).await.unwrap().group, Some(gid));

    // Committing one part commits both.
    assert_eq!(
        alice.act(second, Action::Commit).await.unwrap().state,
        "committed"
    );
    let parts = alice.group(gid).await.unwrap();
    assert_eq!(parts.len(), 2);
    assert!(parts.iter().all(|p| p.state == "committed"), "{parts:?}");

    // A refusal names the refusing resource and holds nothing.
    let before = alice.list(false).await.unwrap().len();
    let (code, error) = status(alice.create(&both("40mbit")).await.unwrap_err());
    assert_eq!(code, StatusCode::CONFLICT);
    assert!(error.contains("cpu0"), "{error}");
    assert_eq!(alice.list(false).await.unwrap().len(), before);

    // Aborting one part aborts both.
    let other = alice.create(&both("5mbit")).await.unwrap();
    alice.act(other.ids[1], Action::Abort).await.unwrap();
    for id in &other.ids {
        assert_eq!(alice.show(*id).await.unwrap().state, "aborted");
    }
    // The group routes do the same; a commit after an abort is refused.
    let third = alice.create(&both("5mbit")).await.unwrap();
    let g3 = third.group.unwrap();
    let parts = alice.group_act(g3, Action::Abort).await.unwrap();
    assert!(parts.iter().all(|p| p.state == "aborted"), "{parts:?}");
    let (code, _) = status(alice.group_act(g3, Action::Commit).await.unwrap_err());
    assert_eq!(code, StatusCode::CONFLICT);
    // A single reservation is no group.
    let single = CreateRequest {
        resources: None,
        resource: Some("link".into()),
        ..both("1mbit")
    };
    let one = alice.create(&single).await.unwrap();
    assert_eq!(one.group, None);
    let (code, _) = status(alice.group(one.id).await.unwrap_err());
    assert_eq!(code, StatusCode::NOT_FOUND);
    // Held across a restart, then committed by the group route.
    let held = alice.create(&both("5mbit")).await.unwrap();
    broker.stop().await;

    let (broker, alice) = start(db).await;
    let g = held.group.unwrap();
    let parts = alice.group_act(g, Action::Commit).await.unwrap();
    assert_eq!(parts.len(), 2);
    assert!(parts.iter().all(|p| p.state == "committed"), "{parts:?}");
    assert_eq!(
        alice.group(gid).await.unwrap().len(),
        2,
        "the first group too"
    );
    // Terminating one part terminates the group.
    alice.terminate(gid).await.unwrap();
    for id in &made.ids {
        assert_eq!(alice.show(*id).await.unwrap().life, "terminated");
    }
    broker.stop().await;
}
