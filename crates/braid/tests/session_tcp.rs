//! Session paths over TCP on real loopback sockets: a session whose only
//! path is TCP, one UDP and one TCP path side by side, a relay reached over
//! TCP, a TCP peer that sends garbage, a taken TCP port, and keys.

use braid::relay::{Relay, RelayConfig};
use braid::session::{ListenerConfig, Session, SessionError, SessionListener};
use braid_core::scheduler::StreamSpec;
use braid_core::session::{Delivery, StreamConfig};
use braid_core::{Duration, StreamId};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

mod sessions;
use sessions::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_streams_over_one_tcp_path_arrive_intact() {
    let snap = three_streams(&["direct+tcp"]).await;
    assert_eq!(snap.paths.len(), 1);
    assert!(snap.paths[0].up, "{:?}", snap.paths);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_udp_and_a_tcp_path_carry_one_session() {
    let snap = three_streams(&["direct", "direct+tcp"]).await;
    assert_eq!(snap.paths.len(), 2);
    assert!(snap.paths.iter().all(|p| p.up), "{:?}", snap.paths);
    assert!(
        snap.paths.iter().all(|p| p.bytes_sent > 0),
        "both paths carry data: {:?}",
        snap.paths
    );
    assert_ne!(snap.paths[0].addr, snap.paths[1].addr, "two distinct paths");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tcp_path_needs_a_sink_that_accepts_tcp() {
    let udp_only = ListenerConfig {
        accept_tcp: false,
        ..ListenerConfig::default()
    };
    let l = SessionListener::bind("127.0.0.1:0".parse().unwrap(), udp_only).unwrap();
    let mut c = config(&["direct+tcp"]);
    c.connect_timeout = Duration::from_secs(1);
    let e = Session::connect(l.local_addr(), c).await.unwrap_err();
    assert!(matches!(e, SessionError::NoPath { .. }), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relay_reached_over_tcp_forwards_the_session() {
    let (mut l, sink) = listener().await;
    let relay = Relay::bind("127.0.0.1:0".parse().unwrap(), RelayConfig::default()).unwrap();
    let via = format!("via={}+tcp", relay.local_addr());
    let sink_task = tokio::spawn(async move { drain(l.accept().await.unwrap()).await });
    let session = Session::connect(sink, config(&[&via]))
        .await
        .expect("connect via the relay over TCP");
    let s = session
        .open_stream(
            StreamConfig::new(StreamSpec::best_effort(1).unwrap())
                .with_delivery(Delivery::Reliable),
        )
        .await
        .unwrap();
    let payload = data(3, 2_000_000);
    send_all(s, payload.clone()).await.unwrap();
    let r = relay.snapshot().await.unwrap();
    assert_eq!(r.stats.pairs, 1);
    assert!(r.stats.bytes_down >= payload.len() as u64);
    assert_eq!(r.io.tcp.connections, 1, "the first hop came over TCP");
    assert!(r.io.datagrams_received > 0);
    session.close().await.unwrap();
    let (got, _) = sink_task.await.unwrap();
    assert!(got[&StreamId(1)] == payload);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tcp_peer_with_a_bad_frame_is_dropped_and_the_session_goes_on() {
    let (mut l, sink) = listener().await;
    let sink_task = tokio::spawn(async move { drain(l.accept().await.unwrap()).await });
    let session = Session::connect(sink, config(&["direct+tcp"]))
        .await
        .expect("connect over TCP");
    let mut s = session
        .open_stream(StreamConfig::new(StreamSpec::best_effort(1).unwrap()))
        .await
        .unwrap();
    let payload = data(11, 1_200_000);
    let (first, second) = payload.split_at(600_000);
    for chunk in first.chunks(1200) {
        s.send(chunk.to_vec().into()).await.unwrap();
    }
    // A stranger on the sink's TCP port: a frame of length 0xffff.
    let mut rogue = tokio::net::TcpStream::connect(sink).await.unwrap();
    rogue.write_all(&[0xff, 0xff, 1, 2, 3]).await.unwrap();
    let mut buf = [0u8; 16];
    let r = tokio::time::timeout(std::time::Duration::from_secs(10), rogue.read(&mut buf))
        .await
        .expect("the sink closes a connection that sent a bad frame");
    assert!(matches!(r, Ok(0) | Err(_)), "closed, not answered: {r:?}");
    for chunk in second.chunks(1200) {
        s.send(chunk.to_vec().into()).await.unwrap();
    }
    s.finish().await.expect("the stream finishes");
    session.close().await.expect("a clean close");
    let (got, _) = sink_task.await.unwrap();
    assert!(got[&StreamId(1)] == payload, "the session was not harmed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_taken_tcp_port_is_a_clear_error() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap();
    let e = SessionListener::bind(addr, ListenerConfig::default()).unwrap_err();
    assert!(
        matches!(e, SessionError::TcpListen { .. }),
        "{e:?} ({addr} may also be taken for UDP)"
    );
    assert!(e.to_string().contains("accept_tcp"), "{e}");
    let udp_only = ListenerConfig {
        accept_tcp: false,
        ..ListenerConfig::default()
    };
    SessionListener::bind(addr, udp_only).expect("UDP only");
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap();
    let e = Relay::bind(addr, RelayConfig::default()).unwrap_err();
    assert!(e.to_string().contains("cannot listen on TCP"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_guard_tcp_paths_as_they_guard_udp_ones() {
    keys_guard("+tcp").await;
}
