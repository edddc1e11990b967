//! The HTTP server's bounds (issue 29 §4, slowloris): a request head or
//! body that does not arrive in time closes its connection; an idle
//! connection gives way to a new one when every slot is taken; when every
//! slot is serving a request, the reserve answers `/healthz` and nothing
//! else; a refused event stream is closed at once. Raw TCP on 127.0.0.1;
//! every wait is for the server to close or answer, bounded by [`GUARD`]
//! so that a broker that never does fails instead of hanging.

use std::path::Path;
use std::time::Duration;

use braid_broker::http::HttpLimits;
use braid_broker::server::Options;
use braid_broker::{Auth, Broker, Client, Config, Role};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const SECRET: &str = "0123456789abcdef0123456789abcdef";
/// How long a test waits for the server before it fails.
const GUARD: Duration = Duration::from_secs(30);

async fn start(db: &Path, http: HttpLimits) -> Broker {
    let text = format!(
        "secret = \"{SECRET}\"\n[[resource]]\nname = \"link\"\nkind = \"network\"\ncapacity = \"100mbit\"\n"
    );
    let config = Config::parse(&text, Path::new("c.toml")).expect("test config is valid");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let options = Options {
        http,
        ..Options::default()
    };
    Broker::start_with(config, db.to_str().expect("utf-8 path"), listener, options)
        .await
        .expect("broker starts")
}

fn token() -> String {
    Auth::new(SECRET.as_bytes())
        .issue("alice", Role::User, 4_000_000_000)
        .expect("issue")
}

/// A connection that has sent `bytes`.
async fn sent(b: &Broker, bytes: &str) -> TcpStream {
    let mut s = TcpStream::connect(b.addr()).await.expect("connect");
    s.write_all(bytes.as_bytes()).await.expect("write");
    s
}

/// Everything the server sends until it closes the connection.
async fn until_closed(mut s: TcpStream) -> String {
    let mut got = Vec::new();
    let read = tokio::time::timeout(GUARD, async {
        let mut buf = [0_u8; 4096];
        loop {
            match s.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await;
    let text = String::from_utf8_lossy(&got).into_owned();
    assert!(
        read.is_ok(),
        "the broker kept the connection open for {GUARD:?}; it sent {text:?}"
    );
    text
}

/// One whole request on a new connection, answered and closed.
async fn ask(b: &Broker, path: &str) -> String {
    let tok = token();
    until_closed(
        sent(
            b,
            &format!("GET {path} HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {tok}\r\nconnection: close\r\n\r\n"),
        )
        .await,
    )
    .await
}

fn short() -> HttpLimits {
    HttpLimits {
        header_timeout: Duration::from_millis(200),
        body_timeout: Duration::from_millis(200),
        ..HttpLimits::default()
    }
}

#[tokio::test]
async fn a_slow_head_or_body_or_an_idle_connection_is_closed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let broker = start(&dir.path().join("b.db"), short()).await;
    // Half a request head, never finished.
    until_closed(sent(&broker, "GET /healthz HTTP/1.1\r\nhost: x\r\n").await).await;
    // A body that stops after 10 of its 100 bytes: 408, then closed.
    let tok = token();
    let slow_body = sent(
        &broker,
        &format!("POST /v1/reservations HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {tok}\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{{\"rate\":\"1"),
    )
    .await;
    let answer = until_closed(slow_body).await;
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("--body-timeout"), "{answer}");
    // A body larger than the bound: 413 before it is read.
    let huge = sent(
        &broker,
        "POST /v1/reservations HTTP/1.1\r\nhost: x\r\ncontent-length: 100000000\r\n\r\n",
    )
    .await;
    let answer = until_closed(huge).await;
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    // Kept alive after an answer, then idle: closed too.
    let idle = sent(&broker, "GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n").await;
    let answer = until_closed(idle).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    broker.stop().await;
}

#[tokio::test]
async fn healthz_answers_while_slow_connections_hold_every_slot() {
    let dir = tempfile::tempdir().expect("tempdir");
    let limits = HttpLimits {
        max_connections: 16,
        health_reserve: 2,
        header_timeout: Duration::from_secs(3600),
        ..HttpLimits::default()
    };
    let broker = start(&dir.path().join("b.db"), limits).await;
    // Three times the cap of half-sent heads that would never time out.
    let mut slow = Vec::new();
    for _ in 0..48 {
        slow.push(sent(&broker, "GET /healthz HTTP/1.1\r\nhost: x\r\n").await);
    }
    for _ in 0..3 {
        let answer = ask(&broker, "/healthz").await;
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    }
    broker.stop().await;
}

#[tokio::test]
async fn with_every_slot_serving_the_reserve_answers_healthz_only() {
    let dir = tempfile::tempdir().expect("tempdir");
    let limits = HttpLimits {
        max_connections: 8,
        health_reserve: 2,
        max_event_streams: 6,
        ..HttpLimits::default()
    };
    let broker = start(&dir.path().join("b.db"), limits).await;
    let alice = Client::new(&format!("http://{}", broker.addr()), &token()).expect("client");
    // Six event streams: every general slot serves a request.
    let mut streams = Vec::new();
    for _ in 0..6 {
        streams.push(alice.events().await.expect("a stream within the bound"));
    }
    let answer = ask(&broker, "/healthz").await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    let answer = ask(&broker, "/v1/reservations").await;
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    assert!(answer.contains("only /healthz"), "{answer}");
    drop(streams);
    broker.stop().await;
}

#[tokio::test]
async fn a_refused_event_stream_is_closed_at_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let limits = HttpLimits {
        max_event_streams: 2,
        ..HttpLimits::default()
    };
    let broker = start(&dir.path().join("b.db"), limits).await;
    let alice = Client::new(&format!("http://{}", broker.addr()), &token()).expect("client");
    let _open = (
        alice.events().await.expect("first stream"),
        alice.events().await.expect("second stream"),
    );
    // Without `connection: close`: the broker must close it itself.
    let tok = token();
    let refused = sent(
        &broker,
        &format!("GET /v1/events HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {tok}\r\n\r\n"),
    )
    .await;
    let answer = until_closed(refused).await;
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    assert!(answer.contains("too many event streams"), "{answer}");
    broker.stop().await;
}

#[test]
fn bounds_are_checked_and_fitted_below_the_file_limit() {
    let d = HttpLimits::default();
    let fitted = d.fitted(Some(256)).expect("fits");
    assert_eq!(
        fitted.max_connections,
        256 - braid_broker::http::FD_HEADROOM as usize
    );
    assert_eq!(d.fitted(None).expect("fits"), d);
    assert!(d.fitted(Some(64)).is_err());
    let bad = HttpLimits {
        health_reserve: 512,
        ..d
    };
    assert!(bad
        .fitted(None)
        .unwrap_err()
        .to_string()
        .contains("--health-reserve"));
    let bad = HttpLimits {
        header_timeout: Duration::ZERO,
        ..d
    };
    assert!(bad
        .fitted(None)
        .unwrap_err()
        .to_string()
        .contains("--header-timeout"));
}
