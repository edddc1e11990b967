//! A session's quota at a sink: what goes past it is refused by name,
//! the rest goes on.

use super::fuzzing::Pair;
use super::quota::{Quota, Usage};
use super::{Event, SessionConfig, StreamConfig};
use crate::id::StreamId;
use crate::scheduler::StreamSpec;
use crate::time::Duration;

fn bulk() -> StreamConfig {
    StreamConfig::new(StreamSpec::best_effort(1).unwrap())
}

fn run(p: &mut Pair, ms: u64) -> usize {
    let mut got = 0;
    for _ in 0..ms / 5 {
        p.step(Duration::from_millis(5));
        while let Some(m) = p.sink.recv(p.now) {
            got += m.data.len();
        }
    }
    got
}

fn refusals(p: &mut Pair) -> Vec<(StreamId, String)> {
    std::iter::from_fn(|| p.source.poll_event())
        .filter_map(|e| match e {
            Event::StreamRefused { stream, reason } => Some((stream, reason)),
            _ => None,
        })
        .collect()
}

fn sink_with(quota: Quota) -> Pair {
    let sink = SessionConfig {
        quota,
        ..SessionConfig::default()
    };
    Pair::with(SessionConfig::default(), sink)
}

#[test]
fn a_stream_beyond_the_streams_quota_is_refused_and_the_others_go_on() {
    let mut p = sink_with(Quota {
        streams: Some(2),
        bytes: None,
    });
    let s: Vec<StreamId> = (0..3)
        .map(|_| p.source.open_stream(p.now, bulk()).unwrap())
        .collect();
    for &id in &s {
        p.source.send(p.now, id, vec![1; 1000]).unwrap();
    }
    let got = run(&mut p, 200);
    assert_eq!(got, 2000, "the two streams within the quota are delivered");
    assert_eq!(
        refusals(&mut p),
        vec![(
            s[2],
            "quota: this sink takes at most 2 streams per session".to_string()
        )]
    );
    assert_eq!(p.sink.usage().streams, 2);
    for &id in &s[..2] {
        p.source.close_stream(p.now, id).unwrap();
    }
    run(&mut p, 100);
    assert!(p.source.is_stream_finished(s[0]) && p.source.is_stream_finished(s[1]));
}

#[test]
fn the_message_that_would_pass_the_bytes_quota_refuses_its_stream() {
    let mut p = sink_with(Quota {
        streams: None,
        bytes: Some(10_000),
    });
    let a = p.source.open_stream(p.now, bulk()).unwrap();
    for _ in 0..20 {
        p.source.send(p.now, a, vec![1; 1000]).unwrap();
    }
    let got = run(&mut p, 300);
    // Exactly the quota was taken, and nothing past it counts; a refused
    // stream is refused whole, so what the application had not read of it
    // is dropped.
    assert!(got <= 10_000, "{got}");
    assert_eq!(
        p.sink.usage(),
        Usage {
            streams: 1,
            bytes: 10_000
        }
    );
    let r = refusals(&mut p);
    assert_eq!(r.len(), 1);
    assert_eq!(r[0].0, a);
    assert!(
        r[0].1
            .starts_with("quota: this sink takes at most 10 kB per session"),
        "{}",
        r[0].1
    );
    assert!(!p.source.is_stream_finished(a));
    assert_eq!(p.source.outstanding(a), 0, "the source holds nothing of it");
}

#[test]
fn without_a_quota_nothing_is_refused() {
    let mut p = sink_with(Quota::UNLIMITED);
    let ids: Vec<StreamId> = (0..5)
        .map(|_| p.source.open_stream(p.now, bulk()).unwrap())
        .collect();
    for &id in &ids {
        for _ in 0..10 {
            p.source.send(p.now, id, vec![3; 1000]).unwrap();
        }
    }
    assert_eq!(run(&mut p, 300), 50_000);
    assert!(refusals(&mut p).is_empty());
    assert_eq!(p.sink.usage().bytes, 50_000);
}
