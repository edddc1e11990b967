//! RUDP over real sockets on loopback: a reliable transfer arrives intact,
//! unreliable messages are never delivered twice, garbage and spoofed
//! datagrams create no connection, and connecting to nothing fails clearly.
//! Tests assert behaviour, never speed.

use braid::rudp::{
    CloseReason, Connection, Endpoint, EndpointConfig, ErrorCode, Reliability, RudpError,
    SendOptions,
};
use braid_core::wire::{
    ConnectionId, Frame, Header, PacketBuilder, PacketType, Ratio, TransportParams, CID_LEN,
    MIN_DATAGRAM_SIZE,
};
use braid_core::Duration;
use std::net::SocketAddr;

const LOCALHOST: &str = "127.0.0.1:0";

fn local() -> SocketAddr {
    LOCALHOST.parse().expect("literal address")
}

async fn pair() -> (Endpoint, Endpoint, Connection, Connection) {
    let mut server = Endpoint::bind(local(), EndpointConfig::server()).unwrap();
    let client = Endpoint::bind(local(), EndpointConfig::default()).unwrap();
    let to = server.local_addr();
    let (c, s) = tokio::join!(client.connect(to), server.accept());
    (server, client, c.unwrap(), s.unwrap())
}

/// Deterministic pseudo-random bytes (xorshift), so the digest is checked
/// against data that is not trivially compressible or periodic.
fn payload(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rudp_reliable_20mb_arrives_intact() {
    const TOTAL: usize = 20 << 20;
    const MSG: usize = 64 << 10;
    let (_server, _client, c, mut s) = pair().await;
    let data = payload(TOTAL, 7);
    let sent_digest = blake3::hash(&data);
    let stream = c.open_stream(SendOptions::RELIABLE).unwrap();
    let sender = tokio::spawn(async move {
        for chunk in data.chunks(MSG) {
            stream.send(chunk.to_vec()).await.unwrap();
        }
        let reason = c.finish().await.unwrap();
        (c, reason)
    });
    let mut hasher = blake3::Hasher::new();
    let mut got = 0usize;
    let mut next = 0u64;
    while let Some(m) = s.recv().await {
        assert_eq!(m.reliability, Reliability::Reliable);
        assert_eq!(m.number, next, "in order, none missing or repeated");
        next += 1;
        got += m.data.len();
        hasher.update(&m.data);
    }
    assert_eq!(got, TOTAL);
    assert_eq!(hasher.finalize(), sent_digest);
    let (c, reason) = sender.await.unwrap();
    assert_eq!(reason, CloseReason::Local(ErrorCode::NO_ERROR));
    drop(c);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rudp_unreliable_messages_never_delivered_twice() {
    const N: u32 = 20_000;
    let (_server, _client, c, mut s) = pair().await;
    let stream = c.open_stream(SendOptions::UNRELIABLE).unwrap();
    let sender = tokio::spawn(async move {
        for i in 0..N {
            let mut m = i.to_be_bytes().to_vec();
            m.extend_from_slice(&payload(1000, u64::from(i)));
            stream.send(m).await.unwrap();
        }
        c.finish().await.unwrap();
        c
    });
    let mut last: Option<u32> = None;
    let mut count = 0u32;
    while let Some(m) = s.recv().await {
        assert_eq!(m.reliability, Reliability::Unreliable);
        let i = u32::from_be_bytes(m.data[..4].try_into().unwrap());
        assert_eq!(m.number, u64::from(i), "message number matches its content");
        assert!(
            last.is_none_or(|l| i > l),
            "{i} after {last:?}: late or twice"
        );
        assert_eq!(m.data[4..], payload(1000, u64::from(i))[..]);
        last = Some(i);
        count += 1;
    }
    assert!(count <= N);
    // On an unloaded loopback nearly all arrive; a few may be dropped by
    // the kernel. Behaviour, not speed: at least something arrived.
    assert!(count > 0);
    let c = sender.await.unwrap();
    drop(c);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rudp_messages_both_ways_and_stats() {
    let (_server, _client, mut c, mut s) = pair().await;
    let cs = c.open_stream(SendOptions::RELIABLE).unwrap();
    let ss = s.open_stream(SendOptions::RELIABLE).unwrap();
    cs.send(b"ping".to_vec()).await.unwrap();
    let m = s.recv().await.unwrap();
    assert_eq!(m.data, b"ping");
    ss.send(b"pong".to_vec()).await.unwrap();
    let m = c.recv().await.unwrap();
    assert_eq!(m.data, b"pong");
    let st = c.stats().await.unwrap();
    assert!(st.packets_sent > 0 && st.packets_received > 0);
    assert!(!st.srtt.is_zero());
    // Too large for the configured maximum: refused at once.
    let big = vec![0u8; (EndpointConfig::default().transport.max_message_size + 1) as usize];
    assert!(matches!(
        cs.send(big).await,
        Err(RudpError::MessageTooLarge { .. })
    ));
    c.close(ErrorCode(0x1001), b"bye").await.unwrap();
    // The server sees the peer's close as an event and then end of messages.
    let mut saw_close = false;
    while let Some(ev) = s.next_event().await {
        if let braid::rudp::Event::Closed(CloseReason::Peer { code, reason }) = ev {
            assert_eq!(code, ErrorCode(0x1001));
            assert_eq!(reason, "bye");
            saw_close = true;
            break;
        }
    }
    assert!(saw_close);
    assert!(s.recv().await.is_none());
}

fn initial_packet(cookie: &[u8], dst: [u8; CID_LEN], src: [u8; CID_LEN]) -> Vec<u8> {
    let header = Header {
        ty: PacketType::Initial,
        dst_cid: ConnectionId(dst),
        src_cid: Some(ConnectionId(src)),
        pn: 0,
    };
    let params = TransportParams {
        max_message_size: 1 << 20,
        initial_max_data: 1 << 20,
        loss_tolerance: Ratio::ZERO,
        idle_timeout_ms: 30_000,
        max_ack_delay_ms: 25,
        max_datagram_size: 1400,
    };
    let mut buf = Vec::new();
    let mut b = PacketBuilder::new(&mut buf, &header, MIN_DATAGRAM_SIZE).unwrap();
    b.push(&Frame::Initial { params, cookie }).unwrap();
    b.pad_to(MIN_DATAGRAM_SIZE);
    b.finish();
    buf
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rudp_garbage_and_spoofed_datagrams_create_no_connection() {
    const EACH: usize = 2000;
    let server = Endpoint::bind(local(), EndpointConfig::server()).unwrap();
    let to = server.local_addr();
    let attacker = tokio::net::UdpSocket::bind(local()).await.unwrap();
    let mut sent = 0u64;
    for i in 0..EACH {
        // Random bytes of random length.
        let g = payload(1 + (i * 37) % 1500, i as u64 + 1);
        attacker.send_to(&g, to).await.unwrap();
        // An INITIAL with a forged cookie: time bucket 0 (current while the
        // process is young, so its tag is checked) and a random tag.
        let mut forged = vec![0u8; 4];
        forged.extend_from_slice(&payload(16, i as u64 + 99));
        let p = initial_packet(&forged, [i as u8; CID_LEN], [7; CID_LEN]);
        attacker.send_to(&p, to).await.unwrap();
        // A DATA packet for a connection that does not exist.
        let mut d = vec![4 << 4, 1];
        d.extend_from_slice(&[0xab; CID_LEN]);
        d.extend_from_slice(&[0, 1, 0]);
        attacker.send_to(&d, to).await.unwrap();
        // A too-short INITIAL (no padding) and an oversized datagram.
        attacker.send_to(&p[..200], to).await.unwrap();
        attacker.send_to(&vec![0x10; 1800], to).await.unwrap();
        sent += 5;
        if i % 200 == 0 {
            tokio::task::yield_now().await;
        }
    }
    // Wait until the driver has seen (nearly) everything the kernel kept.
    let mut st = server.stats().await.unwrap();
    for _ in 0..200 {
        st = server.stats().await.unwrap();
        if st.endpoint.received >= sent {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let e = st.endpoint;
    assert_eq!(e.accepted, 0, "{e:?}");
    assert_eq!(st.connections, 0);
    assert!(e.bad_cookies + e.stale_cookies > 0, "{e:?}");
    assert!(e.malformed + e.oversized + e.unknown_connection + e.short_initial > 0);
    let dropped = e.malformed
        + e.oversized
        + e.bad_version
        + e.unknown_connection
        + e.short_initial
        + e.bad_cookies
        + e.stale_cookies
        + e.replayed_cookies
        + e.refused;
    // Everything received was dropped and counted (forged INITIALs without
    // a cookie would be answered with a RETRY; ours all carry one).
    assert_eq!(dropped + e.retries_sent, e.received, "{e:?}");
    // The server still works for a real client.
    let mut server = server;
    let client = Endpoint::bind(local(), EndpointConfig::default()).unwrap();
    let (c, s) = tokio::join!(client.connect(to), server.accept());
    let (c, mut s) = (c.unwrap(), s.unwrap());
    c.open_stream(SendOptions::RELIABLE)
        .unwrap()
        .send(b"ok".to_vec())
        .await
        .unwrap();
    assert_eq!(s.recv().await.unwrap().data, b"ok");
    assert_eq!(server.stats().await.unwrap().endpoint.accepted, 1);
}

#[tokio::test]
async fn rudp_connect_to_nothing_times_out_clearly() {
    // A port that was bound a moment ago and is closed now.
    let port = std::net::UdpSocket::bind(local())
        .unwrap()
        .local_addr()
        .unwrap();
    let cfg = EndpointConfig {
        handshake_timeout: Duration::from_millis(500),
        ..EndpointConfig::default()
    };
    let client = Endpoint::bind(local(), cfg).unwrap();
    let err = client.connect(port).await.unwrap_err();
    assert!(matches!(err, RudpError::ConnectTimeout { .. }), "{err}");
    let msg = err.to_string();
    assert!(
        msg.contains(&port.to_string()) && msg.contains("no answer"),
        "{msg}"
    );
    // The failed attempt leaves nothing behind.
    assert_eq!(client.stats().await.unwrap().connections, 0);
}

#[tokio::test]
async fn rudp_client_endpoint_does_not_accept() {
    let mut client = Endpoint::bind(local(), EndpointConfig::default()).unwrap();
    assert!(matches!(client.accept().await, Err(RudpError::NotServer)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rudp_backpressure_bounds_what_a_sender_can_queue() {
    const MSG: usize = 16 << 10;
    let (_server, _client, c, mut s) = pair().await;
    let stream = c.open_stream(SendOptions::RELIABLE).unwrap();
    // The receiver reads nothing: flow control stops the peer, the core's
    // send queue fills, then the handle's channel; `try_send` says full.
    let mut accepted = 0u64;
    let mut full_streak = 0;
    while full_streak < 1000 {
        if stream.try_send(payload(MSG, accepted + 1)).unwrap() {
            accepted += 1;
            full_streak = 0;
        } else {
            full_streak += 1;
            tokio::task::yield_now().await;
        }
        assert!(accepted < 10_000, "160 MB queued: no backpressure");
    }
    let cfg = EndpointConfig::default().transport;
    let bound = cfg.recv_window
        + cfg.send_queue_bytes
        + ((braid::rudp::SEND_QUEUE_MESSAGES + braid::rudp::RECV_QUEUE_MESSAGES + 2) * MSG) as u64;
    assert!(accepted * MSG as u64 <= bound, "{accepted} messages queued");
    // Reading resumes the transfer: everything accepted arrives, in order.
    let finisher = tokio::spawn(async move { c.finish().await.unwrap() });
    let mut n = 0u64;
    while let Some(m) = s.recv().await {
        assert_eq!(m.number, n);
        assert_eq!(m.data, payload(MSG, n + 1));
        n += 1;
    }
    assert_eq!(n, accepted);
    assert_eq!(
        finisher.await.unwrap(),
        CloseReason::Local(ErrorCode::NO_ERROR)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rudp_threshold_events_reach_the_application() {
    use braid::rudp::{Condition, Event};
    let (_server, _client, mut c, mut s) = pair().await;
    // An RTT above 1 ns always holds once measured.
    let id = c
        .add_threshold(Condition::RttAbove {
            above: Duration::from_nanos(1),
            clear: Duration::ZERO,
        })
        .await
        .unwrap();
    let stream = c.open_stream(SendOptions::RELIABLE).unwrap();
    let reader = tokio::spawn(async move { while s.recv().await.is_some() {} });
    let mut crossed = false;
    for i in 0..10_000u64 {
        stream.send(payload(4096, i + 1)).await.unwrap();
        if let Some(Event::Threshold(t)) = c.try_next_event() {
            assert_eq!(t.id, id);
            assert!(t.crossed);
            crossed = true;
            break;
        }
        if i % 100 == 0 {
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
    }
    assert!(crossed, "no threshold event");
    // An invalid condition is refused with a typed error.
    let bad = c
        .add_threshold(Condition::LossAbove {
            above: 0.1,
            clear: 0.5,
        })
        .await;
    assert!(matches!(bad, Err(RudpError::Threshold(_))));
    // Dropping every handle finishes the connection; the reader then ends.
    drop(stream);
    drop(c);
    reader.await.unwrap();
}

/// Waits (bounded) until `addr`'s UDP port can be bound again, i.e. the
/// driver that owned it has stopped and closed its socket.
async fn port_released(addr: SocketAddr) -> bool {
    for _ in 0..1000 {
        if std::net::UdpSocket::bind(addr).is_ok() {
            return true;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    false
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rudp_driver_stops_when_every_handle_is_gone() {
    // No connection: dropping the endpoint stops the driver.
    let ep = Endpoint::bind(local(), EndpointConfig::server()).unwrap();
    let addr = ep.local_addr();
    drop(ep);
    assert!(port_released(addr).await, "idle driver kept its socket");
    // With a connection: the endpoints go first, the connections finish
    // gracefully when their handles go, then both drivers stop.
    let (server, client, c, s) = pair().await;
    let (sa, ca) = (server.local_addr(), client.local_addr());
    let stream = c.open_stream(SendOptions::RELIABLE).unwrap();
    stream.send(b"last words".to_vec()).await.unwrap();
    drop((server, client, stream, c));
    let mut s = s;
    assert_eq!(s.recv().await.unwrap().data, b"last words");
    assert!(s.recv().await.is_none(), "the client's drop closed it");
    drop(s);
    assert!(port_released(ca).await, "client driver kept its socket");
    assert!(port_released(sa).await, "server driver kept its socket");
}
