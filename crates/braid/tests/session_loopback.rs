//! Sessions on real loopback sockets: several streams over several paths,
//! through a relay, with a relay that dies, a source that dies, and paths
//! that lead nowhere. (Wide-area versions with emulated links live in the
//! namespace tests.)

use braid::relay::{Relay, RelayConfig};
use braid::session::{CloseReason, Session, SessionError};
use braid_core::scheduler::StreamSpec;
use braid_core::session::{Delivery, StreamConfig};
use braid_core::units::Bandwidth;
use braid_core::{Duration, StreamId};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

mod sessions;
use sessions::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_streams_over_two_paths_arrive_intact() {
    let snap = three_streams(&["bind=127.0.0.1", "bind=127.0.0.2"]).await;
    assert_eq!(snap.paths.len(), 2);
    assert!(snap.paths.iter().all(|p| p.up), "{:?}", snap.paths);
    assert_eq!(snap.streams.len(), 3);
    assert!(snap.streams.iter().all(|s| s.finished));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relayed_path_carries_the_session_and_reports_its_hop() {
    let (mut l, sink) = listener().await;
    let relay = Relay::bind("127.0.0.1:0".parse().unwrap(), RelayConfig::default()).unwrap();
    let via = format!("via={}", relay.local_addr());
    let sink_task = tokio::spawn(async move {
        let inc = l.accept().await.unwrap();
        drain(inc).await
    });
    let session = Session::connect(sink, config(&[&via]))
        .await
        .expect("connect via the relay");
    let s = session
        .open_stream(StreamConfig::new(StreamSpec::best_effort(1).unwrap()))
        .await
        .unwrap();
    let payload = data(3, 2_000_000);
    send_all(s, payload.clone()).await.unwrap();
    // Reports come once per transport statistics interval (100 ms): the
    // relay's first one, within 5 s.
    let reported = eventually(std::time::Duration::from_secs(5), || async {
        !session.snapshot().await.unwrap().paths[0].hops.is_empty()
    })
    .await;
    assert!(reported, "the relay reports its next hop");
    let hops = session.snapshot().await.unwrap().paths[0].hops.clone();
    assert_eq!(hops.len(), 1, "the relay reports its next hop");
    assert_eq!(hops[0].index, 1);
    let r = relay.snapshot().await.unwrap();
    assert_eq!(r.stats.pairs, 1);
    assert!(r.stats.bytes_down >= payload.len() as u64);
    session.close().await.unwrap();
    let (got, _) = sink_task.await.unwrap();
    assert!(got[&StreamId(1)] == payload);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_relay_fails_over_and_loses_nothing() {
    let (mut l, sink) = listener().await;
    let relay = Relay::bind("127.0.0.1:0".parse().unwrap(), RelayConfig::default()).unwrap();
    let via = format!("via={}", relay.local_addr());
    let sink_task = tokio::spawn(async move { drain(l.accept().await.unwrap()).await });
    let mut session = Session::connect(sink, config(&[&via, "direct"]))
        .await
        .unwrap();
    let mut s = session
        .open_stream(
            StreamConfig::new(StreamSpec::best_effort(1).unwrap())
                .with_delivery(Delivery::Reliable),
        )
        .await
        .unwrap();
    let payload = data(5, 4_000_000);
    let mut relay = Some(relay);
    for (k, chunk) in payload.chunks(1200).enumerate() {
        if k == 1000 {
            // Its driver ends with the handle: like kill -9, nothing is said.
            drop(relay.take());
        }
        s.send(chunk.to_vec().into()).await.unwrap();
    }
    s.finish()
        .await
        .expect("the stream finishes over the direct path");
    let mut down = false;
    while let Ok(Some(e)) =
        tokio::time::timeout(std::time::Duration::from_millis(100), session.next_event()).await
    {
        if matches!(e, braid_core::session::Event::PathDown { path, .. } if path.0 == 0) {
            down = true;
        }
    }
    assert!(down, "the relayed path went down");
    session.close().await.unwrap();
    let (got, _) = sink_task.await.unwrap();
    assert_eq!(
        got[&StreamId(1)].len(),
        payload.len(),
        "nothing lost, nothing twice"
    );
    assert!(got[&StreamId(1)] == payload);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sink_is_not_a_relay_and_says_so() {
    let (_l, sink) = listener().await;
    let (_l2, other_sink) = listener().await;
    let via = format!("via={other_sink}");
    let e = Session::connect(sink, config(&[&via])).await.unwrap_err();
    let msg = e.to_string();
    assert!(msg.contains("not a relay"), "{msg}");
}

/// Issue 29 §2: a route that comes back to a relay it has passed is
/// refused with a reason, instead of forwarding each byte round the loop.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_route_that_loops_through_a_relay_is_refused() {
    let (_l, sink) = listener().await;
    let relay = Relay::bind("127.0.0.1:0".parse().unwrap(), RelayConfig::default()).unwrap();
    let r = relay.local_addr();
    let via = format!("via={r},{r}");
    let e = Session::connect(sink, config(&[&via])).await.unwrap_err();
    let msg = e.to_string();
    assert!(msg.contains("loops back"), "{msg}");
    assert_eq!(
        relay.snapshot().await.unwrap().stats.pairs,
        1,
        "one pair, refused"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_relay_says_relay_full_and_its_next_hops_do_not_count_against_the_source() {
    let (mut l, sink) = listener().await;
    // At most two connections from 127.0.0.1, where the sink is too: the
    // relay's own connections to the sink must not take the source's
    // slots, so two sources fit and the third hears "relay full".
    let mut rc = RelayConfig::default();
    rc.transport.max_connections_per_source = 2;
    let relay = Relay::bind("127.0.0.1:0".parse().unwrap(), rc).unwrap();
    let via = format!("via={}", relay.local_addr());
    let mut held = Vec::new();
    for k in 0..2 {
        let s = Session::connect(sink, config(&[&via]))
            .await
            .unwrap_or_else(|e| panic!("source {k} fits: {e}"));
        held.push((s, l.accept().await.unwrap()));
    }
    let mut c = config(&[&via]);
    c.connect_timeout = Duration::from_secs(3);
    let e = Session::connect(sink, c).await.unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.contains(&format!(
            "relay full: the relay at {} refused it (server full",
            relay.local_addr()
        )),
        "{msg}"
    );
    drop(held);
}

/// A relay bound to the wildcard address knows every interface address as
/// its own: a route that comes back to it through another of them is
/// refused (it could only catch loopback before).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wildcard_relay_refuses_a_route_back_through_any_of_its_addresses() {
    let (_l, sink) = listener().await;
    let relay = Relay::bind("0.0.0.0:0".parse().unwrap(), RelayConfig::default()).unwrap();
    let port = relay.local_addr().port();
    let other = braid::local_addrs::interface_ips()
        .into_iter()
        .find(|ip| ip.is_ipv4() && !ip.is_loopback())
        .unwrap_or(std::net::IpAddr::from([127, 0, 0, 1]));
    let via = format!("via=127.0.0.1:{port},{other}:{port}");
    let e = Session::connect(sink, config(&[&via])).await.unwrap_err();
    let msg = e.to_string();
    assert!(msg.contains("loops back"), "{msg}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_path_to_nowhere_fails_with_a_clear_reason() {
    let (_l, sink) = listener().await;
    // A bound UDP port where nobody speaks braid.
    let silent = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let via = format!("via={}", silent.local_addr().unwrap());
    let mut c = config(&[&via]);
    c.connect_timeout = Duration::from_secs(1);
    let e = Session::connect(sink, c).await.unwrap_err();
    let msg = e.to_string();
    assert!(
        matches!(e, SessionError::NoPath { .. }) && msg.contains("p0: no answer"),
        "{msg}"
    );
}

#[test]
fn a_killed_source_leaves_the_sink_with_incomplete_streams() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (mut l, sink) = rt.block_on(listener());
    let accept = rt.spawn(async move { l.accept().await.unwrap() });
    // The source runs on its own single-threaded runtime; dropping that
    // runtime stops its tasks where they stand, without a word: a kill.
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let (sent, sent_rx) = std::sync::mpsc::channel();
    let source = std::thread::spawn(move || {
        let src = source_runtime();
        src.block_on(async move {
            let s = Session::connect(sink, config(&["direct"])).await.unwrap();
            let mut st = s
                .open_stream(
                    StreamConfig::new(StreamSpec::best_effort(1).unwrap()).with_name("cut"),
                )
                .await
                .unwrap();
            for _ in 0..200 {
                st.send(vec![7u8; 1000].into()).await.unwrap();
            }
            sent.send(()).unwrap();
            let _ = stopped.await;
            std::mem::forget((s, st));
        });
        drop(src);
    });
    sent_rx.recv().unwrap();
    let mut inc = rt.block_on(accept).unwrap();
    // The sink knows the stream before the source dies (its event, within 5 s).
    let known = rt.block_on(async {
        let opened = async {
            while let Some(e) = inc.next_event().await {
                if matches!(e, braid_core::session::Event::StreamOpened { .. }) {
                    return true;
                }
            }
            false
        };
        tokio::time::timeout(std::time::Duration::from_secs(5), opened)
            .await
            .unwrap_or(false)
    });
    assert!(known, "the sink never saw the stream open");
    stop.send(()).unwrap();
    source.join().unwrap();
    let got = rt.block_on(async {
        tokio::time::timeout(std::time::Duration::from_secs(20), drain_mut(&mut inc))
            .await
            .expect("the sink notices within its peer timeout")
    });
    let why = inc.close_reason();
    assert!(matches!(why, Some(CloseReason::PeerLost(_))), "{why:?}");
    assert!(got.values().map(Vec::len).sum::<usize>() <= 200_000);
    // The stream opened and never closed: the application can tell.
    let mut events = Vec::new();
    while let Some(e) = rt.block_on(inc.next_event()) {
        events.push(e);
    }
    use braid_core::session::Event as E;
    // The stream never closed: the application can tell it is incomplete.
    let closed = events.iter().any(|e| matches!(e, E::StreamClosed { .. }));
    assert!(!closed, "{events:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keyed_sinks_and_relays_refuse_a_session_without_the_key() {
    keys_guard("").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_light_stream_is_mapped_because_idle_paths_are_probed() {
    // A 1 Mbit/s stream never fills a loopback path: without probes every
    // interval is app-limited, the path has no estimate, and the guarantee
    // is never mapped.
    let (mut l, sink) = listener().await;
    let sink_task = tokio::spawn(async move { drain(l.accept().await.unwrap()).await });
    let session = Session::connect(sink, config(&["direct"])).await.unwrap();
    let mut s = session
        .open_stream(StreamConfig::new(
            StreamSpec::min_rate(Bandwidth::from_mbps(1), 0.95).unwrap(),
        ))
        .await
        .unwrap();
    let mut mapped = None;
    let mut tick = tokio::time::interval(std::time::Duration::from_millis(10));
    for i in 0..600u32 {
        tick.tick().await;
        // 1250 B every 10 ms: 1 Mbit/s.
        s.send(vec![(i % 251) as u8; 1250].into()).await.unwrap();
        if i % 20 == 0 {
            let snap = session.snapshot().await.unwrap();
            if !snap.streams[0].paths.is_empty() {
                mapped = Some((i, snap.paths[0].guaranteed, snap.stats.probe_bytes));
                break;
            }
        }
    }
    let (_, guaranteed, probed) = mapped.expect("the stream was mapped within 6 s");
    assert!(
        guaranteed.is_some_and(|g| g > Bandwidth::from_mbps(10)),
        "{guaranteed:?}"
    );
    assert!(probed > 0);
    s.finish().await.unwrap();
    session.close().await.unwrap();
    sink_task.await.unwrap();
}

/// A UDP forwarder on loopback between a source and a sink whose
/// source-to-sink direction can go down for a while (an outage on the
/// path; the test itself waits on its own conditions, never on this).
struct Forwarder {
    addr: std::net::SocketAddr,
    down: Arc<AtomicBool>,
}

/// A single-threaded runtime of its own for a source: dropping it stops
/// the source's tasks where they stand.
fn source_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

impl Forwarder {
    async fn start(sink: std::net::SocketAddr) -> Forwarder {
        use tokio::net::UdpSocket;
        let front = Arc::new(UdpSocket::bind("127.0.0.1:0").await.unwrap());
        let back = Arc::new(UdpSocket::bind("127.0.0.1:0").await.unwrap());
        back.connect(sink).await.unwrap();
        let addr = front.local_addr().unwrap();
        let down = Arc::new(AtomicBool::new(false));
        let (source_tx, mut source_rx) = tokio::sync::watch::channel(None);
        let (f, b, is_down) = (front.clone(), back.clone(), down.clone());
        tokio::spawn(async move {
            let mut buf = [0u8; 2048];
            while let Ok((n, from)) = f.recv_from(&mut buf).await {
                source_tx.send_if_modified(|s| s.replace(from) != Some(from));
                if !is_down.load(Ordering::Relaxed) {
                    let _ = b.send(&buf[..n]).await;
                }
            }
        });
        tokio::spawn(async move {
            let mut buf = [0u8; 2048];
            while let Ok(n) = back.recv(&mut buf).await {
                let to = *source_rx.borrow_and_update();
                if let Some(to) = to {
                    let _ = front.send_to(&buf[..n], to).await;
                }
            }
        });
        Forwarder { addr, down }
    }

    /// Takes the source-to-sink direction down for `d` from now, on the
    /// runtime `rt` (a timer of the emulated outage, not a wait).
    fn outage(&self, rt: &tokio::runtime::Handle, d: std::time::Duration) {
        self.down.store(true, Ordering::Relaxed);
        let down = self.down.clone();
        rt.spawn(async move {
            tokio::time::sleep(d).await;
            down.store(false, Ordering::Relaxed);
        });
    }
}

#[test]
fn close_returns_once_the_sink_heard_it_even_if_the_close_is_lost_once() {
    // `Session::close` used to return as soon as the session closed here,
    // before its CLOSE left: an application that then ended its runtime
    // (as `braid stream` does) took the CLOSE with it, and the sink waited
    // out its peer timeout with the stream never closed.
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (mut l, sink) = rt.block_on(listener());
    let accept = rt.spawn(async move { drain(l.accept().await.unwrap()).await });
    let fwd = rt.block_on(Forwarder::start(sink));
    let handle = rt.handle().clone();
    let to = fwd.addr;
    let payload = data(9, 300_000);
    let sent = payload.clone();
    std::thread::spawn(move || {
        let src = source_runtime();
        src.block_on(async move {
            let s = Session::connect(to, config(&["direct"])).await.unwrap();
            let st = s
                .open_stream(StreamConfig::new(StreamSpec::best_effort(1).unwrap()))
                .await
                .unwrap();
            send_all(st, sent).await.unwrap();
            // Everything is at the sink: the CLOSE goes next, into a 300 ms
            // outage (counting datagrams instead would not do: the idle
            // path's probes come and go around it).
            fwd.outage(&handle, std::time::Duration::from_millis(300));
            s.close().await.unwrap();
        });
        // Returning ends the source's runtime and every task on it.
    })
    .join()
    .unwrap();
    let (got, why) = rt
        .block_on(async { tokio::time::timeout(std::time::Duration::from_secs(20), accept).await })
        .expect("the sink session ends")
        .unwrap();
    assert!(
        matches!(
            why,
            Some(CloseReason::Peer {
                code: braid_core::session::CloseCode::Done,
                ..
            })
        ),
        "the sink heard no CLOSE: {why:?}"
    );
    assert!(got[&StreamId(1)] == payload);
}
