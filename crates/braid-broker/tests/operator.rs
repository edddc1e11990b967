//! The operator routes over real HTTP: users get 403; an operator lists,
//! adds and resizes resources (a capacity below what is committed is 409
//! naming `capacity`) and replaces the policy (a bad value is 400 naming
//! it); the changes govern admission at once and survive a restart; they
//! are in the OpenAPI document. On SQLite and, with `BRAID_TEST_POSTGRES`,
//! PostgreSQL.

mod common;

use braid_broker::owner::Action;
use std::path::Path;

use braid_broker::types::CreateRequest;
use braid_broker::{Auth, Broker, Client, Config, Role};
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

const SECRET: &str = "0123456789abcdef0123456789abcdef";

async fn start(db: &str) -> Broker {
    let text = format!(
        "secret = \"{SECRET}\"\n\
         [[resource]]\nname = \"link\"\nkind = \"network\"\ncapacity = \"100mbit\"\n"
    );
    let config = Config::parse(&text, Path::new("operator.toml")).expect("valid");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    Broker::start(config, db, listener).await.expect("starts")
}

fn token(user: &str, role: Role) -> String {
    Auth::new(SECRET.as_bytes())
        .issue(user, role, 4_000_000_000)
        .unwrap()
}

/// One call: (status, JSON body).
async fn call(
    b: &Broker,
    role: Role,
    method: Method,
    path: &str,
    body: Option<Value>,
) -> (StatusCode, Value) {
    let mut req = reqwest::Client::new()
        .request(method, format!("http://{}{path}", b.addr()))
        .bearer_auth(token("someone", role));
    if let Some(v) = body {
        req = req.json(&v);
    }
    let resp = req.send().await.unwrap();
    let status = resp.status();
    (status, resp.json().await.unwrap_or(Value::Null))
}

fn reserve(resource: &str, rate: &str) -> CreateRequest {
    let end = braid_broker::clock::format(
        braid_broker::clock::now() + braid_core::Duration::from_secs(3600),
    );
    CreateRequest {
        resource: Some(resource.into()),
        rate: Some(rate.into()),
        end: Some(end),
        ..CreateRequest::default()
    }
}

#[tokio::test]
async fn operators_manage_resources_and_policy() {
    for db in common::backends().await {
        eprintln!("on {}", db.kind());
        operator_on(db.url()).await;
        db.finish().await;
    }
}

async fn operator_on(db: &str) {
    use Role::{Operator as Op, User};
    let b = start(db).await;
    let alice = Client::new(&format!("http://{}", b.addr()), &token("alice", User)).unwrap();
    for (m, path) in [(Method::GET, "/v1/resources"), (Method::GET, "/v1/policy")] {
        assert_eq!(
            call(&b, User, m, path, None).await.0,
            StatusCode::FORBIDDEN,
            "{path}"
        );
    }
    let (s, _) = call(&b, User, Method::PUT, "/v1/policy", Some(json!({}))).await;
    assert_eq!(s, StatusCode::FORBIDDEN);
    let (s, _) = call(
        &b,
        User,
        Method::POST,
        "/v1/resources",
        Some(json!({"name": "x", "kind": "cpu", "capacity": "1mbit"})),
    )
    .await;
    assert_eq!(s, StatusCode::FORBIDDEN);

    // Add a resource: users can reserve it at once.
    let (s, v) = call(
        &b,
        Op,
        Method::POST,
        "/v1/resources",
        Some(json!({"name": "disk", "kind": "storage", "capacity": "1gbit"})),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    assert_eq!(v["capacity_bps"], 1_000_000_000_u64);
    let (s, _) = call(
        &b,
        Op,
        Method::POST,
        "/v1/resources",
        Some(json!({"name": "disk", "kind": "storage", "capacity": "1gbit"})),
    )
    .await;
    assert_eq!(s, StatusCode::CONFLICT, "a duplicate");
    let (s, v) = call(
        &b,
        Op,
        Method::POST,
        "/v1/resources",
        Some(json!({"name": "d2", "kind": "tape", "capacity": "1gbit"})),
    )
    .await;
    assert_eq!(
        (s, v["field"].as_str()),
        (StatusCode::BAD_REQUEST, Some("kind"))
    );
    alice.create(&reserve("disk", "500mbit")).await.unwrap();

    // Resize: not below what is committed.
    let id = alice.create(&reserve("link", "60mbit")).await.unwrap().id;
    alice.act(id, Action::Commit).await.unwrap();
    let (s, v) = call(
        &b,
        Op,
        Method::PATCH,
        "/v1/resources",
        Some(json!({"name": "link", "capacity": "50mbit"})),
    )
    .await;
    assert_eq!(
        (s, v["field"].as_str()),
        (StatusCode::CONFLICT, Some("capacity")),
        "{v}"
    );
    let (s, v) = call(
        &b,
        Op,
        Method::PATCH,
        "/v1/resources",
        Some(json!({"name": "link", "capacity": "80mbit"})),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["capacity_bps"], 80_000_000_u64);
    assert!(
        alice.create(&reserve("link", "30mbit")).await.is_err(),
        "60 + 30 > 80"
    );
    let (s, _) = call(
        &b,
        Op,
        Method::PATCH,
        "/v1/resources",
        Some(json!({"name": "nope", "capacity": "80mbit"})),
    )
    .await;
    assert_eq!(s, StatusCode::NOT_FOUND);

    // Policy: replaced, in force at once; a bad value names its field.
    let (s, v) = call(
        &b,
        Op,
        Method::PUT,
        "/v1/policy",
        Some(json!({"user_default": {"rate_per_request": "fast"}})),
    )
    .await;
    assert_eq!(
        (s, v["field"].as_str()),
        (
            StatusCode::BAD_REQUEST,
            Some("user_default.rate_per_request")
        )
    );
    let (s, v) = call(&b, Op, Method::PUT, "/v1/policy",
        Some(json!({"user_default": {"rate_per_request": "10mbit"}, "users": {"bob": {"total": "5mbit"}}}))).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let e = alice
        .create(&reserve("disk", "20mbit"))
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("rate per request"), "{e}");
    b.stop().await;

    // After a restart: the same resources, capacities and policy.
    let b = start(db).await;
    let (_, v) = call(&b, Op, Method::GET, "/v1/resources", None).await;
    let caps: Vec<(String, u64)> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["name"].as_str().unwrap().to_string(),
                r["capacity_bps"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        caps,
        [
            ("link".to_string(), 80_000_000),
            ("disk".to_string(), 1_000_000_000)
        ]
    );
    let (_, v) = call(&b, Op, Method::GET, "/v1/policy", None).await;
    assert_eq!(v["user_default"]["rate_per_request"], "10 Mbit/s");
    assert_eq!(v["users"]["bob"]["total"], "5 Mbit/s");
    let (_, doc) = call(&b, User, Method::GET, "/openapi.json", None).await;
    assert!(doc["paths"]["/v1/resources"]["patch"].is_object());
    assert!(doc["paths"]["/v1/policy"]["put"].is_object());
    b.stop().await;
}
