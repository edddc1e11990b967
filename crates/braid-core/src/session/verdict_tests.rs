//! A stream is delivered when the sink says it kept it (STREAM_VERDICT),
//! refused when the sink cannot keep it, and stream names are unique in a
//! session.

use super::fuzzing::Pair;
use super::{Event, SendRefusal, SessionConfig, SessionError, StreamConfig};
use crate::id::StreamId;
use crate::scheduler::StreamSpec;
use crate::time::Duration;

fn bulk() -> StreamConfig {
    StreamConfig::new(StreamSpec::best_effort(1).unwrap())
}

/// Sends `n` messages on a new stream and closes it.
fn send_and_close(p: &mut Pair, config: StreamConfig, n: usize) -> StreamId {
    let s = p.source.open_stream(p.now, config).unwrap();
    for _ in 0..n {
        p.source.send(p.now, s, vec![7; 800]).unwrap();
    }
    p.source.close_stream(p.now, s).unwrap();
    s
}

fn run(p: &mut Pair, ms: u64) {
    for _ in 0..ms / 5 {
        p.step(Duration::from_millis(5));
        while p.sink.recv(p.now).is_some() {}
    }
}

fn source_events(p: &mut Pair) -> Vec<Event> {
    std::iter::from_fn(|| p.source.poll_event()).collect()
}

#[test]
fn a_stream_is_finished_once_the_sink_kept_it() {
    let mut p = Pair::new(SessionConfig::default());
    let s = send_and_close(&mut p, bulk(), 20);
    run(&mut p, 200);
    assert!(p.source.is_stream_finished(s));
    assert!(p.source.is_idle());
    assert!(source_events(&mut p).contains(&Event::StreamClosed { stream: s }));
    let snap = p.source.snapshot(p.now);
    assert!(snap.streams[0].complete && snap.streams[0].refused.is_none());
}

#[test]
fn a_confirming_sink_holds_the_verdict_until_its_application_keeps_the_stream() {
    let sink = SessionConfig {
        confirm_streams: true,
        ..SessionConfig::default()
    };
    let mut p = Pair::with(SessionConfig::default(), sink);
    let s = send_and_close(&mut p, bulk(), 20);
    run(&mut p, 300);
    // Every message was taken, but the application has not said it kept
    // them: not delivered yet, and the source is not idle.
    assert!(!p.source.is_stream_finished(s));
    assert!(!p.source.is_idle());
    assert!(!source_events(&mut p).contains(&Event::StreamClosed { stream: s }));
    p.sink.keep_stream(p.now, s).unwrap();
    assert_eq!(p.sink.keep_stream(p.now, s), Err(SessionError::NotEnded(s)));
    run(&mut p, 50);
    assert!(p.source.is_stream_finished(s));
    assert!(source_events(&mut p).contains(&Event::StreamClosed { stream: s }));
}

#[test]
fn keeping_a_stream_before_it_ended_is_refused() {
    let sink = SessionConfig {
        confirm_streams: true,
        ..SessionConfig::default()
    };
    let mut p = Pair::with(SessionConfig::default(), sink);
    let s = p.source.open_stream(p.now, bulk()).unwrap();
    p.source.send(p.now, s, vec![1; 100]).unwrap();
    run(&mut p, 50);
    assert_eq!(p.sink.keep_stream(p.now, s), Err(SessionError::NotEnded(s)));
}

#[test]
fn a_refused_stream_ends_at_the_source_with_the_sinks_reason() {
    let mut p = Pair::new(SessionConfig::default());
    let s = p
        .source
        .open_stream(p.now, bulk().with_name("atoms"))
        .unwrap();
    let other = p.source.open_stream(p.now, bulk()).unwrap();
    for _ in 0..10 {
        p.source.send(p.now, s, vec![1; 1000]).unwrap();
    }
    run(&mut p, 50);
    p.sink
        .refuse_stream(p.now, s, "out/atoms exists: not overwriting it")
        .unwrap();
    run(&mut p, 50);
    let reason = "out/atoms exists: not overwriting it".to_string();
    assert!(source_events(&mut p).contains(&Event::StreamRefused {
        stream: s,
        reason: reason.clone()
    }));
    assert_eq!(p.source.stream_refused(s), Some(reason.as_str()));
    assert!(!p.source.is_stream_finished(s));
    let e = p.source.send(p.now, s, vec![1; 10]).unwrap_err();
    assert_eq!(
        e.error,
        SendRefusal::Session(SessionError::StreamRefused { stream: s, reason })
    );
    // Nothing of it is held any more; the other stream is untouched.
    assert_eq!(p.source.outstanding(s), 0);
    p.source.send(p.now, other, vec![2; 10]).unwrap();
    let snap = p.sink.snapshot(p.now);
    let at_sink = snap.streams.iter().find(|x| x.id == s).unwrap();
    assert!(at_sink.refused.is_some() && !at_sink.complete);
}

#[test]
fn stream_names_are_unique_in_a_session() {
    let mut p = Pair::new(SessionConfig::default());
    let a = p
        .source
        .open_stream(p.now, bulk().with_name("atoms"))
        .unwrap();
    assert_eq!(
        p.source.open_stream(p.now, bulk().with_name("atoms")),
        Err(SessionError::NameTaken("atoms".into()))
    );
    // `stream-N` is stream N's name: no other stream may take it.
    let next = StreamId(a.0 + 1);
    let clash = format!("stream-{}", a.0);
    assert_eq!(
        p.source
            .open_stream(p.now, bulk().with_name(clash.as_str())),
        Err(SessionError::NameTaken(clash))
    );
    let own = format!("stream-{}", next.0);
    assert_eq!(
        p.source.open_stream(p.now, bulk().with_name(own.as_str())),
        Ok(next)
    );
    // An unnamed stream is `stream-ID`, which no named stream can be.
    assert!(p.source.open_stream(p.now, bulk()).is_ok());
}
