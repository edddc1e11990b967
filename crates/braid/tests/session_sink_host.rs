//! One listener, many sources, on real loopback sockets: sources back to
//! back (the next one used to find the sink deaf while the last wound
//! down), several at once, and one too many ("sink busy").

use braid::session::{ListenerConfig, Session, SessionListener};
use braid_core::scheduler::StreamSpec;
use braid_core::session::StreamConfig;
use braid_core::{Duration, StreamId};

mod sessions;
use sessions::*;

/// Accepts sessions for ever, draining each on its own task; each
/// session's bytes of stream 1 come back on the channel.
fn serve(mut l: SessionListener) -> tokio::sync::mpsc::UnboundedReceiver<Vec<u8>> {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Ok(s) = l.accept().await {
            let tx = tx.clone();
            tokio::spawn(async move {
                let (got, _) = drain(s).await;
                let _ = tx.send(got.get(&StreamId(1)).cloned().unwrap_or_default());
            });
        }
    });
    rx
}

async fn one_source(sink: std::net::SocketAddr, seed: u64, len: usize) {
    let session = Session::connect(sink, config(&["direct"]))
        .await
        .unwrap_or_else(|e| panic!("source {seed}: {e}"));
    let s = session
        .open_stream(StreamConfig::new(StreamSpec::best_effort(1).unwrap()))
        .await
        .unwrap();
    send_all(s, data(seed, len)).await.unwrap();
    session.close().await.expect("a clean close");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_sources_back_to_back_are_all_served() {
    let (l, sink) = listener().await;
    let mut got = serve(l);
    // Each source connects the moment the last one's close returned,
    // while the sink still winds that session down.
    for seed in 1..=20u64 {
        one_source(sink, seed, 50_000).await;
    }
    let mut seen = Vec::new();
    for _ in 1..=20 {
        seen.push(got.recv().await.expect("the sink reports each session"));
    }
    for seed in 1..=20u64 {
        assert!(
            seen.contains(&data(seed, 50_000)),
            "source {seed}'s bytes arrived"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sources_at_once_each_get_their_own_session() {
    let (l, sink) = listener().await;
    let mut got = serve(l);
    let tasks: Vec<_> = (1..=4u64)
        .map(|seed| tokio::spawn(one_source(sink, seed, 200_000 + seed as usize)))
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    let mut seen = Vec::new();
    for _ in 0..4 {
        seen.push(got.recv().await.expect("the sink reports each session"));
    }
    for seed in 1..=4u64 {
        let want = data(seed, 200_000 + seed as usize);
        assert!(
            seen.contains(&want),
            "source {seed}'s bytes arrived in its own session"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_source_beyond_max_sessions_hears_busy() {
    let config = ListenerConfig {
        max_sessions: 1,
        ..ListenerConfig::default()
    };
    let mut l = SessionListener::bind("127.0.0.1:0".parse().unwrap(), config).unwrap();
    let sink = l.local_addr();
    let first = Session::connect(sink, config_for_busy())
        .await
        .expect("the first source");
    let held = l.accept().await.unwrap();
    let e = Session::connect(sink, config_for_busy()).await.unwrap_err();
    assert!(e.to_string().contains("sink busy"), "{e}");
    drop(first);
    drop(held);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_source_beyond_its_sessions_quota_hears_busy() {
    let mut config = ListenerConfig::default();
    config.source_quota.sessions = Some(1);
    let mut l = SessionListener::bind("127.0.0.1:0".parse().unwrap(), config).unwrap();
    let sink = l.local_addr();
    let first = Session::connect(sink, config_for_busy())
        .await
        .expect("the first source");
    let held = l.accept().await.unwrap();
    assert_eq!(held.source(), std::net::IpAddr::from([127, 0, 0, 1]));
    let e = Session::connect(sink, config_for_busy()).await.unwrap_err();
    let said = e.to_string();
    assert!(
        said.contains("sink busy: it serves at most 1 session from one source (127.0.0.1)"),
        "{said}"
    );
    drop(first);
    drop(held);
}

fn config_for_busy() -> braid::session::SessionConfig {
    let mut c = config(&["direct"]);
    c.connect_timeout = Duration::from_secs(3);
    c
}

/// With `confirm_streams`, a stream is delivered when the sink application
/// keeps it, and a refusal reaches the source's stream with its reason;
/// the stream's end reaches the application after its last message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sink_application_keeps_or_refuses_each_stream() {
    use braid::session::SinkItem;
    use braid_core::session::{Event, SessionError as CoreError};
    let mut config = ListenerConfig::default();
    config.core.confirm_streams = true;
    let mut l = SessionListener::bind("127.0.0.1:0".parse().unwrap(), config).unwrap();
    let sink = l.local_addr();
    let app = tokio::spawn(async move {
        let mut s = l.accept().await.unwrap();
        let mut kept_bytes = 0usize;
        while let Some(item) = s.next_item().await {
            match item {
                SinkItem::Message(m) if m.stream == StreamId(1) && m.seq == 0 => {
                    s.refuse_stream(m.stream, "no room for it").await.unwrap();
                }
                SinkItem::Message(m) if m.stream == StreamId(2) => kept_bytes += m.data.len(),
                SinkItem::Event(Event::StreamClosed { stream }) if stream == StreamId(2) => {
                    // Every message came before the end.
                    assert_eq!(kept_bytes, 100_000);
                    s.keep_stream(stream).await.unwrap();
                }
                _ => {}
            }
        }
    });
    let session = Session::connect(sink, config_for_busy()).await.unwrap();
    let refused = session
        .open_stream(StreamConfig::new(StreamSpec::best_effort(1).unwrap()))
        .await
        .unwrap();
    let kept = session
        .open_stream(StreamConfig::new(StreamSpec::best_effort(1).unwrap()))
        .await
        .unwrap();
    let e = send_all(refused, data(1, 100_000)).await.unwrap_err();
    match e {
        braid::session::SessionError::Core(CoreError::StreamRefused { reason, .. }) => {
            assert_eq!(reason, "no room for it");
        }
        other => panic!("not a refusal: {other}"),
    }
    send_all(kept, data(2, 100_000)).await.expect("kept");
    session.close().await.expect("a clean close");
    app.await.unwrap();
}
