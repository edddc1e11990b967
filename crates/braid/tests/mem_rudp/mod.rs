//! IQ-RUDP over braid's in-memory network (`MemNet`), shared by the
//! runtime's socket tests and its paused-clock tests.
#![allow(dead_code)]

use braid::rudp::mem::MemNet;
use braid::rudp::{
    AsyncUdpSocket, CloseReason, Connection, Endpoint, EndpointConfig, ErrorCode, SendOptions,
};
use std::net::SocketAddr;

pub fn addr(s: &str) -> SocketAddr {
    s.parse().expect("literal address")
}

pub fn mem_endpoint(net: &MemNet, addrs: &[&str], config: EndpointConfig) -> Endpoint {
    let sockets: Vec<Box<dyn AsyncUdpSocket>> = addrs
        .iter()
        .map(|a| Box::new(net.bind(addr(a)).expect("free address")) as Box<dyn AsyncUdpSocket>)
        .collect();
    Endpoint::with_sockets(sockets, config).expect("endpoint")
}

/// Sends `n` reliable messages from `c` and checks `s` gets them all, in
/// order, then the graceful close.
pub async fn transfer(c: Connection, mut s: Connection, n: u32) {
    let stream = c.open_stream(SendOptions::RELIABLE).unwrap();
    let sender = tokio::spawn(async move {
        for i in 0..n {
            stream.send(i.to_be_bytes().repeat(500)).await.unwrap();
        }
        let reason = c.finish().await.unwrap();
        (c, reason)
    });
    let mut next = 0u32;
    while let Some(m) = s.recv().await {
        assert_eq!(m.data, next.to_be_bytes().repeat(500), "in order, intact");
        next += 1;
    }
    assert_eq!(next, n);
    let (_c, reason) = sender.await.unwrap();
    assert_eq!(reason, CloseReason::Local(ErrorCode::NO_ERROR));
}
