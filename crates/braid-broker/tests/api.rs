//! The broker over real HTTP on 127.0.0.1: every endpoint, bad input,
//! tokens, restart, server-sent events; each test once on a fresh SQLite
//! file and once on a fresh PostgreSQL database when `BRAID_TEST_POSTGRES`
//! reaches a server (see `common`).

mod common;

use braid_broker::owner::Action;
use std::path::Path;

use braid_broker::client::{ClientError, Events};
use braid_broker::types::{CreateRequest, ModifyRequest};
use braid_broker::{Auth, Broker, Client, Config, Role};
use reqwest::StatusCode;

const SECRET: &str = "0123456789abcdef0123456789abcdef";
const FAR: u64 = 4_000_000_000;

fn config() -> Config {
    config_with("")
}

fn config_with(extra: &str) -> Config {
    let text = format!(
        "secret = \"{SECRET}\"\n{extra}\
         [[resource]]\nname = \"link\"\nkind = \"network\"\ncapacity = \"100mbit\"\n\
         [[resource]]\nname = \"cpu0\"\nkind = \"cpu\"\ncapacity = \"50mbit\"\n"
    );
    Config::parse(&text, Path::new("test.toml")).expect("test config is valid")
}

fn token(user: &str, role: Role) -> String {
    Auth::new(SECRET.as_bytes())
        .issue(user, role, FAR)
        .expect("issue")
}

struct Running {
    broker: Broker,
    base: String,
}

async fn start(db: &str) -> Running {
    start_with(db, config()).await
}

async fn start_with(db: &str, config: Config) -> Running {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let broker = Broker::start(config, db, listener)
        .await
        .expect("broker starts");
    let base = format!("http://{}", broker.addr());
    Running { broker, base }
}

fn client(r: &Running, user: &str, role: Role) -> Client {
    Client::new(&r.base, &token(user, role)).expect("client")
}

/// Runs each `async fn(&str)` once per back-end as the named test.
macro_rules! on_every_backend {
    ($($test:ident => $body:ident;)*) => {$(
        #[tokio::test]
        async fn $test() {
            for db in common::backends().await {
                eprintln!("{}: on {}", stringify!($test), db.kind());
                $body(db.url()).await;
                db.finish().await;
            }
        }
    )*};
}

on_every_backend! {
    every_endpoint => every_endpoint_on;
    bad_input_is_refused_naming_the_field_and_changes_nothing => bad_input_on;
    tokens_and_ownership => tokens_and_ownership_on;
    restart_keeps_committed_and_held_and_times_out_expired_holds => restart_on;
    events_announce_a_commit_to_its_owner_only => events_on;
    a_hold_times_out_while_running_and_is_announced => hold_timeout_on;
    callbacks_receive_state_changes => callbacks_on;
    policy_refuses_naming_the_rule => policy_on;
    flow_and_pid_are_stored_and_shown => binding_on;
}

fn flow(dst: &str, dport: u16) -> braid_broker::types::FlowSpec {
    braid_broker::types::FlowSpec {
        dst: Some(dst.into()),
        proto: Some("tcp".into()),
        dport: Some(dport),
        ..Default::default()
    }
}

/// A flow on a resource with a device and a pid on a CPU resource are
/// accepted (without `--enforce` nothing is enforced), shown, and kept
/// across a restart; a pid needs an operator. (alice's flow is inside
/// what `[flows]` grants her: a user may reserve no flow without a grant.)
async fn binding_on(db: &str) {
    let with_device = || {
        config_with(
            "[flows.users]\nalice = [\"fd00::/64\"]\n\
             [[resource]]\nname = \"wan\"\nkind = \"network\"\ncapacity = \"10mbit\"\ndevice = \"eth9\"\n",
        )
    };
    let r = start_with(db, with_device()).await;
    let alice = client(&r, "alice", Role::User);
    let ops = client(&r, "ops", Role::Operator);
    let id = alice
        .create(&CreateRequest {
            flow: Some(flow("fd00::2", 5000)),
            ..req("wan", "1mbit")
        })
        .await
        .unwrap()
        .id;
    let (status, field) = api_err(
        alice
            .create(&CreateRequest {
                pid: Some(1),
                ..req("cpu0", "1mbit")
            })
            .await
            .unwrap_err(),
    );
    assert_eq!(
        (status, field.as_deref()),
        (StatusCode::FORBIDDEN, Some("pid"))
    );
    let cpu = ops
        .create(&CreateRequest {
            pid: Some(4242),
            ..req("cpu0", "1mbit")
        })
        .await
        .unwrap()
        .id;
    r.broker.stop().await;
    let r = start_with(db, with_device()).await;
    let ops = client(&r, "ops", Role::Operator);
    let shown = ops.show(id).await.unwrap();
    let f = shown.flow.expect("the flow is kept");
    assert_eq!(f.dst.as_deref(), Some("fd00::2/128"));
    assert_eq!((f.proto.as_deref(), f.dport), (Some("tcp"), Some(5000)));
    assert_eq!(ops.show(cpu).await.unwrap().pid, Some(4242));
    r.broker.stop().await;
}

fn req(resource: &str, rate: &str) -> CreateRequest {
    CreateRequest {
        resource: Some(resource.into()),
        rate: Some(rate.into()),
        start: Some("now".into()),
        end: Some(in_secs(3600)),
        ..CreateRequest::default()
    }
}

fn in_secs(s: u64) -> String {
    let now = braid_broker::clock::now();
    braid_broker::clock::format(now + braid_core::Duration::from_secs(s))
}

fn api_err(e: ClientError) -> (StatusCode, Option<String>) {
    match e {
        ClientError::Api { status, field, .. } => (status, field),
        other => panic!("expected an API error, got {other}"),
    }
}

async fn every_endpoint_on(db: &str) {
    let r = start(db).await;
    let alice = client(&r, "alice", Role::User);
    let http = reqwest::Client::new();

    let health: serde_json::Value = http
        .get(format!("{}/healthz", r.base))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(health["status"], "ok");
    let doc: serde_json::Value = http
        .get(format!("{}/openapi.json", r.base))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    for path in [
        "/v1/reservations",
        "/v1/reservations/{id}",
        "/v1/reservations/{id}/commit",
        "/v1/resources/{name}/availability",
        "/v1/events",
    ] {
        assert!(doc["paths"][path].is_object(), "openapi lacks {path}");
    }
    assert!(doc["components"]["schemas"]["CreateRequest"].is_object());

    let created = alice.create(&req("link", "60mbit")).await.unwrap();
    assert_eq!(created.state, "held");
    assert!(created.hold_expires.is_some());
    let id = created.id;
    let shown = alice.show(id).await.unwrap();
    assert_eq!(
        (shown.state.as_str(), shown.user.as_str()),
        ("held", "alice")
    );
    assert_eq!(shown.pending.as_ref().unwrap().rate_bps, 60_000_000);

    let avail = alice
        .availability("link", "now", &in_secs(600))
        .await
        .unwrap();
    assert_eq!(avail.max_free_bps, 40_000_000);
    // A second 60 Mbit/s does not fit.
    let (status, field) = api_err(alice.create(&req("link", "60mbit")).await.unwrap_err());
    assert_eq!(
        (status, field.as_deref()),
        (StatusCode::CONFLICT, Some("rate"))
    );

    let committed = alice.act(id, Action::Commit).await.unwrap();
    assert_eq!(committed.state, "committed");
    assert_eq!(
        alice.act(id, Action::Provision).await.unwrap().provision,
        "provisioned"
    );
    assert_eq!(
        alice.act(id, Action::Release).await.unwrap().provision,
        "released"
    );

    let modified = alice
        .modify(
            id,
            &ModifyRequest {
                rate: Some("30mbit".into()),
                end: None,
            },
        )
        .await
        .unwrap();
    assert_eq!(modified.pending.as_ref().unwrap().rate_bps, 30_000_000);
    assert_eq!(modified.committed.as_ref().unwrap().rate_bps, 60_000_000);
    let after = alice.act(id, Action::Commit).await.unwrap();
    assert_eq!(after.committed.as_ref().unwrap().rate_bps, 30_000_000);

    let other = alice.create(&req("cpu0", "10mbit")).await.unwrap();
    assert_eq!(
        alice.act(other.id, Action::Abort).await.unwrap().state,
        "aborted"
    );

    let list = alice.list(false).await.unwrap();
    assert_eq!(list.iter().map(|v| v.id).collect::<Vec<_>>(), vec![id]);

    let ended = alice.terminate(id).await.unwrap();
    assert_eq!(ended.life, "terminated");
    assert!(alice.list(false).await.unwrap().is_empty());
    assert_eq!(alice.list(true).await.unwrap().len(), 2);
    assert_eq!(alice.show(id).await.unwrap().life, "terminated");
    let avail = alice
        .availability("link", "now", &in_secs(600))
        .await
        .unwrap();
    assert_eq!(avail.max_free_bps, 100_000_000);

    // A co-reservation: all held, or none.
    let mut co = req("link", "20mbit");
    co.resource = None;
    co.resources = Some(vec!["link".into(), "cpu0".into()]);
    let both = alice.create(&co).await.unwrap();
    assert_eq!(both.ids.len(), 2);
    co.rate = Some("40mbit".into()); // fits the link (80 free), not cpu0 (30 free)
    let (status, _) = api_err(alice.create(&co).await.unwrap_err());
    assert_eq!(status, StatusCode::CONFLICT);
    assert_eq!(
        alice.list(false).await.unwrap().len(),
        2,
        "the refused co-reservation held nothing"
    );
    r.broker.stop().await;
}

async fn bad_input_on(db: &str) {
    let r = start(db).await;
    let alice = client(&r, "alice", Role::User);
    let http = reqwest::Client::new();
    let post = |body: &'static str| {
        http.post(format!("{}/v1/reservations", r.base))
            .bearer_auth(token("alice", Role::User))
            .header("content-type", "application/json")
            .body(body)
            .send()
    };
    let resp = post("{\"resource\": \"link\", \"rate\": ").await.unwrap();
    assert_eq!(resp.status(), StatusCode::BAD_REQUEST);
    let body: serde_json::Value = resp.json().await.unwrap();
    assert_eq!(body["field"], "body");
    assert!(body["error"].as_str().unwrap().contains("malformed JSON"));
    let resp = post("{\"resource\": \"link\", \"rate\": 5}").await.unwrap();
    let body: serde_json::Value = resp.json().await.unwrap();
    assert_eq!(body["field"], "rate");

    let cases: Vec<(CreateRequest, &str)> = vec![
        (
            CreateRequest {
                end: Some(in_secs(0)),
                start: Some(in_secs(60)),
                ..req("link", "1mbit")
            },
            "end",
        ),
        (
            CreateRequest {
                start: Some("2020-01-01T00:00:00Z".into()),
                ..req("link", "1mbit")
            },
            "start",
        ),
        (
            CreateRequest {
                start: Some("yesterday".into()),
                ..req("link", "1mbit")
            },
            "start",
        ),
        (req("link", "0mbit"), "rate"),
        (req("link", "-5mbit"), "rate"),
        (req("link", "1tbit"), "rate"),
        (req("link", "10 furlongs"), "rate"),
        (
            CreateRequest {
                rate: None,
                ..req("link", "1mbit")
            },
            "rate",
        ),
        (req("nowhere", "1mbit"), "resource"),
        (
            CreateRequest {
                resource: None,
                ..req("link", "1mbit")
            },
            "resource",
        ),
        (
            CreateRequest {
                end: None,
                ..req("link", "1mbit")
            },
            "end",
        ),
        (
            CreateRequest {
                class: Some("gold".into()),
                ..req("link", "1mbit")
            },
            "class",
        ),
        (
            CreateRequest {
                callback: Some("ftp://x".into()),
                ..req("link", "1mbit")
            },
            "callback",
        ),
        // A flow needs a device to be enforced on.
        (
            CreateRequest {
                flow: Some(flow("10.0.0.2", 5000)),
                ..req("link", "1mbit")
            },
            "flow",
        ),
        (
            CreateRequest {
                flow: Some(flow("10.0.0.2", 5000)),
                ..req("cpu0", "1mbit")
            },
            "flow",
        ),
        (
            CreateRequest {
                flow: Some(flow("10.0.0.300", 5000)),
                ..req("link", "1mbit")
            },
            "flow.dst",
        ),
        (
            CreateRequest {
                pid: Some(1),
                ..req("link", "1mbit")
            },
            "pid",
        ),
    ];
    for (request, field) in cases {
        let (status, got) = api_err(alice.create(&request).await.unwrap_err());
        assert_eq!(
            (status, got.as_deref()),
            (StatusCode::BAD_REQUEST, Some(field)),
            "{request:?}"
        );
    }
    let (status, field) = api_err(alice.availability("link", "now", "then").await.unwrap_err());
    assert_eq!(
        (status, field.as_deref()),
        (StatusCode::BAD_REQUEST, Some("end"))
    );
    let (status, _) = api_err(
        alice
            .availability("nowhere", "now", &in_secs(60))
            .await
            .unwrap_err(),
    );
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, field) = api_err(alice.show(0).await.unwrap_err());
    assert_eq!((status, field), (StatusCode::NOT_FOUND, None));

    // Nothing changed.
    assert!(alice.list(true).await.unwrap().is_empty());
    let avail = alice
        .availability("link", "now", &in_secs(600))
        .await
        .unwrap();
    assert_eq!(avail.max_free_bps, 100_000_000);
    r.broker.stop().await;
}

async fn tokens_and_ownership_on(db: &str) {
    let r = start(db).await;
    let http = reqwest::Client::new();
    let url = format!("{}/v1/reservations", r.base);
    assert_eq!(
        http.get(&url).send().await.unwrap().status(),
        StatusCode::UNAUTHORIZED
    );
    let good = token("alice", Role::User);
    let mut tampered = good.clone();
    tampered.insert(good.len() / 2, 'x');
    let expired = Auth::new(SECRET.as_bytes())
        .issue("alice", Role::User, 1_000)
        .unwrap();
    let forged = Auth::new(b"another secret of thirty-two bytes!")
        .issue("alice", Role::Operator, FAR)
        .unwrap();
    for bad in [tampered, expired, forged, "not-a-token".to_string()] {
        let resp = http.get(&url).bearer_auth(&bad).send().await.unwrap();
        assert_eq!(resp.status(), StatusCode::UNAUTHORIZED, "{bad}");
        let body: serde_json::Value = resp.json().await.unwrap();
        assert!(body["error"].is_string());
    }

    let alice = client(&r, "alice", Role::User);
    let bob = client(&r, "bob", Role::User);
    let op = client(&r, "noc", Role::Operator);
    let a = alice.create(&req("link", "10mbit")).await.unwrap().id;
    let b = bob.create(&req("link", "10mbit")).await.unwrap().id;
    // Bob cannot see or touch Alice's.
    assert_eq!(
        api_err(bob.show(a).await.unwrap_err()).0,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        api_err(bob.act(a, Action::Commit).await.unwrap_err()).0,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        api_err(bob.terminate(a).await.unwrap_err()).0,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        api_err(
            bob.modify(
                a,
                &ModifyRequest {
                    rate: Some("1mbit".into()),
                    end: None
                }
            )
            .await
            .unwrap_err()
        )
        .0,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        bob.list(true)
            .await
            .unwrap()
            .iter()
            .map(|v| v.id)
            .collect::<Vec<_>>(),
        vec![b]
    );
    assert_eq!(alice.show(a).await.unwrap().state, "held");
    // The operator sees and manages all.
    assert_eq!(op.list(false).await.unwrap().len(), 2);
    assert_eq!(op.act(a, Action::Commit).await.unwrap().state, "committed");
    r.broker.stop().await;
}

async fn restart_on(db: &str) {
    let r = start(db).await;
    let alice = client(&r, "alice", Role::User);
    let committed = alice.create(&req("link", "30mbit")).await.unwrap().id;
    alice.act(committed, Action::Commit).await.unwrap();
    let held = alice.create(&req("link", "20mbit")).await.unwrap();
    r.broker.stop().await;

    let r = start(db).await;
    let alice = client(&r, "alice", Role::User);
    assert_eq!(alice.show(committed).await.unwrap().state, "committed");
    let h = alice.show(held.id).await.unwrap();
    assert_eq!(h.state, "held");
    assert_eq!(
        h.hold_expires, held.hold_expires,
        "the hold keeps its deadline"
    );
    let avail = alice
        .availability("link", "now", &in_secs(600))
        .await
        .unwrap();
    assert_eq!(avail.max_free_bps, 50_000_000);
    // New ids continue the sequence.
    let next = alice.create(&req("cpu0", "1mbit")).await.unwrap().id;
    assert!(next > held.id);
    r.broker.stop().await;

    // A hold that ran out while the broker was down times out at start.
    let store = braid_broker::store::Store::open(db).await.unwrap();
    let mut stale = store
        .get(braid_core::ReservationId(held.id))
        .await
        .unwrap()
        .unwrap();
    stale.hold_expires = Some(braid_broker::clock::now() - braid_core::Duration::from_secs(1));
    store
        .write(&[braid_broker::store::Record {
            reservation: &stale,
            callback: None,
            binding: None,
        }])
        .await
        .unwrap();
    store.close().await;
    let r = start(db).await;
    let alice = client(&r, "alice", Role::User);
    assert_eq!(alice.show(held.id).await.unwrap().state, "timed_out");
    assert_eq!(alice.show(committed).await.unwrap().state, "committed");
    r.broker.stop().await;
}

/// The next event that is not about `skip`ped kinds, bounded.
async fn next_event(events: &mut Events) -> braid_broker::types::EventView {
    tokio::time::timeout(std::time::Duration::from_secs(30), events.next())
        .await
        .expect("an event within the bound")
        .expect("event stream")
        .expect("stream open")
}

async fn events_on(db: &str) {
    let r = start(db).await;
    let alice = client(&r, "alice", Role::User);
    let bob = client(&r, "bob", Role::User);
    let mut alice_events = alice.events().await.unwrap();
    let mut bob_events = bob.events().await.unwrap();
    let id = alice.create(&req("link", "10mbit")).await.unwrap().id;
    alice.act(id, Action::Commit).await.unwrap();
    let held = next_event(&mut alice_events).await;
    assert_eq!((held.event.as_str(), held.id), ("changed", id));
    assert_eq!(held.reservation.unwrap().state, "held");
    let done = next_event(&mut alice_events).await;
    assert_eq!(done.reservation.unwrap().state, "committed");
    // Bob's first event is about his own reservation, not Alice's.
    let mine = bob.create(&req("link", "1mbit")).await.unwrap().id;
    assert_eq!(next_event(&mut bob_events).await.id, mine);
    r.broker.stop().await;
}

async fn hold_timeout_on(db: &str) {
    let r = start_with(db, config_with("hold_time = \"1s\"\n")).await;
    let alice = client(&r, "alice", Role::User);
    let mut events = alice.events().await.unwrap();
    let id = alice.create(&req("link", "10mbit")).await.unwrap().id;
    assert_eq!(
        next_event(&mut events).await.reservation.unwrap().state,
        "held"
    );
    // The owner task's timer fires; the event is the signal, not a sleep.
    let out = next_event(&mut events).await;
    assert_eq!(
        (out.id, out.reservation.unwrap().state.as_str()),
        (id, "timed_out")
    );
    assert_eq!(alice.show(id).await.unwrap().state, "timed_out");
    let (status, _) = api_err(alice.act(id, Action::Commit).await.unwrap_err());
    assert_eq!(status, StatusCode::CONFLICT);
    r.broker.stop().await;
}

async fn callbacks_on(db: &str) {
    use axum::routing::post;
    let (tx, mut rx) = tokio::sync::mpsc::channel::<serde_json::Value>(16);
    let app = axum::Router::new().route(
        "/hook",
        post(move |axum::Json(v): axum::Json<serde_json::Value>| {
            let tx = tx.clone();
            async move {
                let _ = tx.send(v).await;
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let hook = format!("http://{}/hook", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });

    let r = start_with(
        db,
        config_with("[callbacks]\nallow = [\"http://127.0.0.1:*\"]\n"),
    )
    .await;
    let alice = client(&r, "alice", Role::User);
    let id = alice
        .create(&CreateRequest {
            callback: Some(hook),
            ..req("link", "10mbit")
        })
        .await
        .unwrap()
        .id;
    alice.act(id, Action::Commit).await.unwrap();
    let mut states = Vec::new();
    while states.len() < 2 {
        let v = tokio::time::timeout(std::time::Duration::from_secs(30), rx.recv())
            .await
            .expect("a callback within the bound")
            .expect("hook server alive");
        assert_eq!(v["id"], id);
        states.push(v["reservation"]["state"].as_str().unwrap().to_string());
    }
    assert_eq!(states, ["held", "committed"]);
    r.broker.stop().await;
}

async fn policy_on(db: &str) {
    let policy = "[policy.user_default]\nrate_per_request = \"50mbit\"\n[policy.users.alice]\ntotal = \"20mbit\"\n";
    let r = start_with(db, config_with(policy)).await;
    let bob = client(&r, "bob", Role::User);
    let err = bob.create(&req("link", "60mbit")).await.unwrap_err();
    assert!(
        err.to_string().contains("user bob: rate per request"),
        "{err}"
    );
    assert_eq!(
        api_err(err),
        (StatusCode::FORBIDDEN, Some("rate".to_string()))
    );
    let alice = client(&r, "alice", Role::User);
    alice.create(&req("link", "15mbit")).await.unwrap();
    let err = alice.create(&req("link", "10mbit")).await.unwrap_err();
    assert!(err.to_string().contains("user alice: total rate"), "{err}");
    r.broker.stop().await;
}
