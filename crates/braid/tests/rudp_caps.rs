//! The server's connection caps over real sockets on loopback: beyond its
//! per-source cap, a new client fails at once with "server full", not with
//! the handshake timeout's "is a server listening?", and the server keeps
//! nothing for it. Tests assert behaviour, never speed.

use braid::rudp::{Endpoint, EndpointConfig, RudpError};
use std::net::SocketAddr;

fn local() -> SocketAddr {
    "127.0.0.1:0".parse().expect("literal address")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn beyond_the_per_source_cap_a_client_hears_server_full() {
    let mut config = EndpointConfig::server();
    config.transport.max_connections_per_source = 1;
    let mut server = Endpoint::bind(local(), config).unwrap();
    let to = server.local_addr();
    let first = Endpoint::bind(local(), EndpointConfig::default()).unwrap();
    let (c, s) = tokio::join!(first.connect(to), server.accept());
    let (_c, _s) = (c.unwrap(), s.unwrap());
    // Every client on loopback shares the source address 127.0.0.1.
    let second = Endpoint::bind(local(), EndpointConfig::default()).unwrap();
    let err = second.connect(to).await.unwrap_err();
    assert!(matches!(err, RudpError::ConnectFailed { .. }), "{err}");
    let msg = err.to_string();
    assert!(msg.starts_with("server full:"), "{msg}");
    assert!(
        msg.contains(&to.to_string()) && !msg.contains("listening"),
        "{msg}"
    );
    let st = server.stats().await.unwrap();
    assert_eq!((st.endpoint.accepted, st.endpoint.refused_full), (1, 1));
    assert_eq!(st.connections, 1, "nothing kept for the refused client");
}
