//! Domains: broker A forwards the transit part of a request to its peer
//! broker B (two in-process brokers on loopback, each with its own SQLite
//! database): held at both or neither, committed at both, aborted at both;
//! B's refusal named in A's answer; a silent peer answered 504 with A's
//! hold released; the link survives a restart of A.

use braid_broker::owner::Action;
use std::path::Path;

use braid_broker::client::ClientError;
use braid_broker::types::CreateRequest;
use braid_broker::{Auth, Broker, Client, Config, Role};
use reqwest::StatusCode;

const SECRET_A: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
const SECRET_B: &str = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";
const FAR: u64 = 4_000_000_000;

async fn serve(text: &str, db: &Path) -> Broker {
    let config = Config::parse(text, Path::new("peer.toml")).expect("test config is valid");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    Broker::start(config, db.to_str().unwrap(), listener)
        .await
        .expect("broker starts")
}

fn config_a(peer_url: &str) -> String {
    let token = Auth::new(SECRET_B.as_bytes())
        .issue("domain-a", Role::User, FAR)
        .unwrap();
    format!(
        "secret = \"{SECRET_A}\"\ndomain = \"a\"\n\
         [[resource]]\nname = \"link\"\nkind = \"network\"\ncapacity = \"100mbit\"\n\
         [[peer]]\nname = \"b\"\nurl = \"{peer_url}\"\ntoken = \"{token}\"\ntimeout = \"1s\"\n\
         [[route]]\nresource = \"transit\"\npeer = \"b\"\n"
    )
}

fn client(broker: &Broker, secret: &str, user: &str, role: Role) -> Client {
    let token = Auth::new(secret.as_bytes()).issue(user, role, FAR).unwrap();
    Client::new(&format!("http://{}", broker.addr()), &token).unwrap()
}

fn across(rate: &str) -> CreateRequest {
    let end = braid_broker::clock::format(
        braid_broker::clock::now() + braid_core::Duration::from_secs(3600),
    );
    CreateRequest {
        resources: Some(vec!["link".into(), "transit".into()]),
        rate: Some(rate.into()),
        end: Some(end),
        ..CreateRequest::default()
    }
}

fn api_err(e: ClientError) -> (StatusCode, String) {
    match e {
        ClientError::Api { status, error, .. } => (status, error),
        other => panic!("expected an API error, got {other}"),
    }
}

#[tokio::test]
async fn transit_is_held_and_committed_at_the_peer_or_nowhere() {
    let dir = tempfile::tempdir().unwrap();
    let b = serve(
        &format!(
            "secret = \"{SECRET_B}\"\ndomain = \"b\"\n\
             [[resource]]\nname = \"transit\"\nkind = \"network\"\ncapacity = \"50mbit\"\n"
        ),
        &dir.path().join("b.db"),
    )
    .await;
    let b_url = format!("http://{}", b.addr());
    let b_ops = client(&b, SECRET_B, "ops", Role::Operator);
    let a = serve(&config_a(&b_url), &dir.path().join("a.db")).await;
    let alice = client(&a, SECRET_A, "alice", Role::User);

    // Held at both, committed at both.
    let made = alice.create(&across("20mbit")).await.unwrap();
    assert_eq!(made.remote.len(), 1);
    let transit = made.remote[0].id;
    assert_eq!(made.remote[0].resource, "transit");
    assert_eq!(b_ops.show(transit).await.unwrap().state, "held");
    assert_eq!(b_ops.show(transit).await.unwrap().user, "domain-a");
    assert_eq!(alice.show(made.id).await.unwrap().remote, made.remote);
    assert_eq!(
        alice.act(made.id, Action::Commit).await.unwrap().state,
        "committed"
    );
    assert_eq!(b_ops.show(transit).await.unwrap().state, "committed");

    // B refuses (30 Mbit/s free): A names it and holds nothing.
    let (status, error) = api_err(alice.create(&across("40mbit")).await.unwrap_err());
    assert_eq!(status, StatusCode::CONFLICT);
    assert!(error.contains("peer b refused transit"), "{error}");
    assert_eq!(alice.list(false).await.unwrap().len(), 1);
    assert_eq!(b_ops.list(false).await.unwrap().len(), 1);

    // Aborted at A: aborted at B.
    let other = alice.create(&across("5mbit")).await.unwrap();
    alice.act(other.id, Action::Abort).await.unwrap();
    assert_eq!(
        b_ops.show(other.remote[0].id).await.unwrap().state,
        "aborted"
    );

    // The link survives a restart of A: a hold made before is committed at
    // both after.
    let held = alice.create(&across("5mbit")).await.unwrap();
    a.stop().await;
    let a = serve(&config_a(&b_url), &dir.path().join("a.db")).await;
    let alice = client(&a, SECRET_A, "alice", Role::User);
    assert_eq!(
        alice.act(held.id, Action::Commit).await.unwrap().state,
        "committed"
    );
    assert_eq!(
        b_ops.show(held.remote[0].id).await.unwrap().state,
        "committed"
    );
    // Terminated at A: terminated at B.
    alice.terminate(held.id).await.unwrap();
    assert_eq!(
        b_ops.show(held.remote[0].id).await.unwrap().life,
        "terminated"
    );
    a.stop().await;
    b.stop().await;
}

#[tokio::test]
async fn a_peer_gone_at_commit_aborts_the_local_hold() {
    let dir = tempfile::tempdir().unwrap();
    let b = serve(
        &format!(
            "secret = \"{SECRET_B}\"\n\
             [[resource]]\nname = \"transit\"\nkind = \"network\"\ncapacity = \"50mbit\"\n"
        ),
        &dir.path().join("b.db"),
    )
    .await;
    let a = serve(
        &config_a(&format!("http://{}", b.addr())),
        &dir.path().join("a.db"),
    )
    .await;
    let alice = client(&a, SECRET_A, "alice", Role::User);
    let made = alice.create(&across("5mbit")).await.unwrap();
    b.stop().await;
    let (status, error) = api_err(alice.act(made.id, Action::Commit).await.unwrap_err());
    assert!(
        status == StatusCode::BAD_GATEWAY || status == StatusCode::GATEWAY_TIMEOUT,
        "{status}: {error}"
    );
    assert!(error.contains("peer b"), "{error}");
    assert_eq!(alice.show(made.id).await.unwrap().state, "aborted");
    a.stop().await;
}

#[tokio::test]
async fn a_silent_peer_is_a_refusal_and_releases_the_local_hold() {
    let dir = tempfile::tempdir().unwrap();
    // Accepts connections (the kernel's backlog) and never answers.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", silent.local_addr().unwrap());
    let a = serve(&config_a(&url), &dir.path().join("a.db")).await;
    let alice = client(&a, SECRET_A, "alice", Role::User);
    let (status, error) = api_err(alice.create(&across("5mbit")).await.unwrap_err());
    assert_eq!(status, StatusCode::GATEWAY_TIMEOUT, "{error}");
    assert!(error.contains("peer b did not answer"), "{error}");
    assert!(alice.list(false).await.unwrap().is_empty());
    // Only local resources: no peer involved.
    let local = CreateRequest {
        resources: None,
        resource: Some("link".into()),
        ..across("5mbit")
    };
    alice.create(&local).await.unwrap();
    a.stop().await;
    drop(silent);
}
