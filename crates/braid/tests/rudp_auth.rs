//! The authenticated IQ-RUDP handshake over real sockets on loopback: the
//! same key connects and carries data; a wrong key, or a key on one side
//! only, fails at once with a line that says which, and the server keeps
//! no connection. Tests assert behaviour, never speed.

use braid::key::Key;
use braid::rudp::{Endpoint, EndpointConfig, RudpError, SendOptions};
use braid_core::transport::Psk;
use std::net::SocketAddr;

fn local() -> SocketAddr {
    "127.0.0.1:0".parse().expect("literal address")
}

fn config(server: bool, key: Option<&Key>) -> EndpointConfig {
    let mut c = if server {
        EndpointConfig::server()
    } else {
        EndpointConfig::default()
    };
    c.transport.psk = key.map(|k| k.psk().clone());
    c
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_key_connects_and_carries_data() {
    let key = Key::generate().unwrap();
    let mut server = Endpoint::bind(local(), config(true, Some(&key))).unwrap();
    let client = Endpoint::bind(local(), config(false, Some(&key))).unwrap();
    let to = server.local_addr();
    let (c, s) = tokio::join!(client.connect(to), server.accept());
    let (c, mut s) = (c.unwrap(), s.unwrap());
    let stream = c.open_stream(SendOptions::RELIABLE).unwrap();
    stream.send(b"authenticated".to_vec()).await.unwrap();
    let m = s.recv().await.expect("a message");
    assert_eq!(m.data, b"authenticated");
    let st = server.stats().await.unwrap().endpoint;
    assert_eq!((st.accepted, st.auth_failed), (1, 0));
}

/// Connects with `client_key` to a server holding `server_key`; the
/// attempt must fail with an authentication message (not the handshake
/// timeout), and the server must hold nothing and count one refusal.
async fn refused(client_key: Option<&Key>, server_key: Option<&Key>) -> String {
    let server = Endpoint::bind(local(), config(true, server_key)).unwrap();
    let client = Endpoint::bind(local(), config(false, client_key)).unwrap();
    let err = client.connect(server.local_addr()).await.unwrap_err();
    assert!(matches!(err, RudpError::ConnectFailed { .. }), "{err}");
    let st = server.stats().await.unwrap();
    assert_eq!(st.endpoint.auth_failed, 1, "{st:?}");
    assert_eq!(st.endpoint.accepted, 0);
    assert_eq!(st.connections, 0, "no state kept for a refused client");
    assert_eq!(client.stats().await.unwrap().connections, 0);
    let msg = err.to_string();
    assert!(msg.contains(&server.local_addr().to_string()), "{msg}");
    assert!(!msg.contains('\n'));
    msg
}

#[tokio::test]
async fn a_wrong_key_is_refused_at_once_and_says_so() {
    let (a, b) = (Key::generate().unwrap(), Key::generate().unwrap());
    let msg = refused(Some(&a), Some(&b)).await;
    assert!(msg.contains("refused our key"), "{msg}");
}

#[tokio::test]
async fn a_key_on_one_side_only_fails_both_ways() {
    let k = Key::from_psk(Psk::from_bytes([3; 32]));
    let msg = refused(None, Some(&k)).await;
    assert!(msg.contains("requires a key"), "{msg}");
    let msg = refused(Some(&k), None).await;
    assert!(msg.contains("has no key"), "{msg}");
}
