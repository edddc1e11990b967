//! Helpers the session tests share: payloads, configs, a loopback sink,
//! draining a sink session, and the three-stream exchange.

#![allow(dead_code)] // each test binary uses its own subset

use braid::session::{
    CloseReason, IncomingSession, ListenerConfig, Session, SessionConfig, SessionError,
    SessionListener,
};
use braid_core::scheduler::StreamSpec;
use braid_core::session::StreamConfig;
use braid_core::units::Bandwidth;
use braid_core::{Duration, StreamId};
use std::collections::BTreeMap;
use std::net::SocketAddr;

pub fn data(seed: u64, len: usize) -> Vec<u8> {
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

pub fn config(paths: &[&str]) -> SessionConfig {
    SessionConfig {
        paths: paths.iter().map(|p| p.parse().unwrap()).collect(),
        connect_timeout: Duration::from_secs(3),
        ..SessionConfig::default()
    }
}

pub async fn drain(mut s: IncomingSession) -> (BTreeMap<StreamId, Vec<u8>>, Option<CloseReason>) {
    let got = drain_mut(&mut s).await;
    (got, s.close_reason())
}

pub async fn drain_mut(s: &mut IncomingSession) -> BTreeMap<StreamId, Vec<u8>> {
    let mut got: BTreeMap<StreamId, Vec<u8>> = BTreeMap::new();
    while let Some(m) = s.recv().await {
        got.entry(m.stream).or_default().extend_from_slice(&m.data);
    }
    got
}

pub async fn listener() -> (SessionListener, SocketAddr) {
    let l = SessionListener::bind("127.0.0.1:0".parse().unwrap(), ListenerConfig::default())
        .expect("bind a sink on loopback");
    let a = l.local_addr();
    (l, a)
}

pub async fn send_all(mut s: braid::session::Stream, payload: Vec<u8>) -> Result<(), SessionError> {
    for chunk in payload.chunks(1200) {
        s.send(chunk.to_vec().into()).await?;
    }
    s.finish().await
}

/// Opens three streams (guaranteed rate, bulk, windowed), sends them whole,
/// closes, and checks the sink got every byte in order.
pub async fn three_streams(paths: &[&str]) -> braid_core::session::Snapshot {
    let (mut l, sink) = listener().await;
    let sink_task = tokio::spawn(async move { drain(l.accept().await.unwrap()).await });
    let session = Session::connect(sink, config(paths))
        .await
        .expect("connect");
    let specs = [
        StreamConfig::new(StreamSpec::min_rate(Bandwidth::from_mbps(2), 0.95).unwrap())
            .with_name("critical"),
        StreamConfig::new(StreamSpec::best_effort(1).unwrap()).with_name("bulk"),
        StreamConfig::new(
            StreamSpec::window(9, 10, Duration::from_millis(100), 1200, 0.9).unwrap(),
        )
        .with_name("frames"),
    ];
    let sizes = [300_000, 3_000_000, 200_000];
    let mut tasks = Vec::new();
    for (i, (spec, size)) in specs.into_iter().zip(sizes).enumerate() {
        let s = session.open_stream(spec).await.unwrap();
        tasks.push(tokio::spawn(send_all(s, data(i as u64 + 7, size))));
    }
    for t in tasks {
        t.await.unwrap().expect("every stream finishes");
    }
    let snap = session.snapshot().await.unwrap();
    session.close().await.expect("a clean close");
    let (got, why) = sink_task.await.unwrap();
    assert!(
        matches!(why, Some(CloseReason::Peer { .. })),
        "the source closed it: {why:?}"
    );
    for (i, size) in sizes.into_iter().enumerate() {
        let id = StreamId(i as u32 + 1);
        assert_eq!(got.get(&id).map(Vec::len), Some(size), "{id}");
        assert!(got[&id] == data(i as u64 + 7, size), "{id} differs");
    }
    snap
}

/// A keyed sink and a keyed relay, paths written with `suffix` (`""` or
/// `"+tcp"`): the wrong key (direct and through the relay) and no key are
/// refused, the relay keeps no state and counts the refusal, and the right
/// key carries a stream through the relay intact.
pub async fn keys_guard(suffix: &str) {
    use braid::key::Key;
    use braid::relay::{Relay, RelayConfig};
    let key = Key::generate().unwrap();
    let wrong = Key::generate().unwrap();
    let mut lc = ListenerConfig::default();
    lc.core.transport.psk = Some(key.psk().clone());
    let mut l = SessionListener::bind("127.0.0.1:0".parse().unwrap(), lc).unwrap();
    let sink = l.local_addr();
    let mut rc = RelayConfig::default();
    rc.transport.psk = Some(key.psk().clone());
    let relay = Relay::bind("127.0.0.1:0".parse().unwrap(), rc).unwrap();
    let via = format!("via={}{suffix}", relay.local_addr());
    let direct = format!("direct{suffix}");
    let keyed = |k: Option<&Key>, paths: &[&str]| {
        let mut c = config(paths);
        c.connect_timeout = Duration::from_secs(2);
        c.core.transport.psk = k.map(|k| k.psk().clone());
        c
    };
    for (k, path) in [(Some(&wrong), &direct), (Some(&wrong), &via), (None, &via)] {
        let e = Session::connect(sink, keyed(k, &[path])).await.unwrap_err();
        assert!(e.to_string().contains("key"), "{path}: {e}");
    }
    let r = relay.snapshot().await.unwrap();
    assert_eq!(r.stats.pairs, 0, "the relay kept no state");
    assert!(r.endpoint.auth_failed >= 1);
    let sink_task = tokio::spawn(async move { drain(l.accept().await.unwrap()).await });
    let session = Session::connect(sink, keyed(Some(&key), &[&via, &direct]))
        .await
        .unwrap();
    let s = session
        .open_stream(StreamConfig::new(StreamSpec::best_effort(1).unwrap()))
        .await
        .unwrap();
    send_all(s, data(9, 300_000)).await.unwrap();
    session.close().await.unwrap();
    let (got, _) = sink_task.await.unwrap();
    assert!(got[&StreamId(1)] == data(9, 300_000));
}

/// Whether `cond` holds within `limit`, checked every 10 ms: the one way
/// these tests wait, always on a condition, always bounded.
pub async fn eventually<F, Fut>(limit: std::time::Duration, mut cond: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let check = async {
        let mut tick = tokio::time::interval(std::time::Duration::from_millis(10));
        loop {
            tick.tick().await;
            if cond().await {
                return;
            }
        }
    };
    tokio::time::timeout(limit, check).await.is_ok()
}
