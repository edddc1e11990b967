//! A session with two guaranteed streams and a best-effort one, and a
//! source that reacts to what the session tells it.
//!
//! ```text
//! cargo run --release -p braid --example guaranteed_streams [-- SECONDS]
//! ```
//!
//! Everything runs in this process on loopback (the source's connection
//! paced at 40 Mbit/s, standing in for a wide-area path): a sink
//! ([`SessionListener`]) that counts what each stream delivers, and a
//! source ([`Session::connect`]) with
//! * `video`: 4 Mbit/s guaranteed at 0.95 (`rate=4mbit@0.95`), 1200-byte
//!   messages at a constant rate;
//! * `control`: 8 of every 10 messages within 100 ms at 0.9, deadline
//!   delivery (a message later than 250 ms is of no use and is dropped);
//! * `bulk`: best effort, as fast as the session takes it.
//!
//! The source answers the session's events: a mapping is printed with its
//! paths; a guarantee the paths cannot carry (`Event::GuaranteeUnmet`, the
//! upcall) is lowered to the best the session can promise, as `braid
//! stream --on-infeasible lower` does; a path going down or up is printed.
//! At the end both sides print what each stream carried; the sink's
//! figures include its own share of windows met (braid's one definition,
//! `braid_core::session::meter`).

use braid::session::{ListenerConfig, Session, SessionConfig, SessionListener, Stream};
use braid_core::scheduler::{StreamSpec, UpcallAnswer};
use braid_core::session::{Delivery, Event, StreamConfig};
use braid_core::transport::CongestionKind;
use braid_core::{Bandwidth, Duration, StreamId};
use bytes::Bytes;
use std::collections::BTreeMap;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// What the sink got of one stream.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Received {
    /// Messages and bytes delivered.
    pub messages: u64,
    /// Bytes delivered.
    pub bytes: u64,
    /// The sink's share of the stream's windows met (guarantees only).
    pub windows_met: Option<f64>,
}

/// What one run saw: per stream name, what the sink got; and the events
/// the source answered.
#[derive(Debug, Default)]
pub struct Report {
    /// Per stream name.
    pub received: BTreeMap<String, Received>,
    /// Streams the session mapped onto paths at least once.
    pub mapped: Vec<String>,
    /// Upcalls answered by lowering.
    pub lowered: u64,
}

/// Runs the source for `length` against an in-process sink.
///
/// # Errors
/// A session that cannot be set up or ends with an error.
pub async fn run(length: Duration) -> Result<Report, BoxError> {
    let mut listener = SessionListener::bind("127.0.0.1:0".parse()?, ListenerConfig::default())?;
    let to = listener.local_addr();
    let sink = tokio::spawn(async move {
        let mut incoming = listener.accept().await?;
        let mut got: BTreeMap<StreamId, Received> = BTreeMap::new();
        let mut names: BTreeMap<StreamId, String> = BTreeMap::new();
        while let Some(m) = incoming.recv().await {
            let r = got.entry(m.stream).or_default();
            r.messages += 1;
            r.bytes += m.data.len() as u64;
            // The sink's own verdicts, looked at every 100 messages.
            if r.messages % 100 == 1 {
                if let Ok(snap) = incoming.snapshot().await {
                    for s in &snap.streams {
                        names.insert(s.id, braid_core::session::stream_name(s.id, &s.config));
                        if let (Some(share), Some(r)) = (s.windows_met, got.get_mut(&s.id)) {
                            r.windows_met = Some(share);
                        }
                    }
                }
            }
        }
        let by_name: BTreeMap<String, Received> = got
            .into_iter()
            .map(|(id, r)| (names.get(&id).cloned().unwrap_or(id.to_string()), r))
            .collect();
        Ok::<_, BoxError>(by_name)
    });

    // Loopback is faster than any application can fill, so the session
    // could never measure it (every interval would be app-limited); a
    // connection paced at 40 Mbit/s stands in for a wide-area path.
    let mut config = SessionConfig::default();
    config.core.transport.congestion = CongestionKind::Fixed(Bandwidth::from_mbps(40));
    let mut session = Session::connect(to, config).await?;
    let video = session
        .open_stream(
            StreamConfig::new(StreamSpec::min_rate(Bandwidth::from_mbps(4), 0.95)?)
                .with_name("video"),
        )
        .await?;
    let control = session
        .open_stream(
            StreamConfig::new(StreamSpec::window(
                8,
                10,
                Duration::from_millis(100),
                200,
                0.9,
            )?)
            .with_name("control")
            .with_delivery(Delivery::Deadline {
                ttl: Duration::from_millis(250),
            }),
        )
        .await?;
    let bulk = session
        .open_stream(StreamConfig::new(StreamSpec::best_effort(1)?).with_name("bulk"))
        .await?;
    let names: BTreeMap<StreamId, &str> = [
        (video.id(), "video"),
        (control.id(), "control"),
        (bulk.id(), "bulk"),
    ]
    .into_iter()
    .collect();
    let mut producers = tokio::task::JoinSet::new();
    // 4 Mbit/s in 1200-byte messages: one every 2.4 ms.
    producers.spawn(paced(video, 1200, Duration::from_micros(2400), length));
    // 10 messages per 100 ms.
    producers.spawn(paced(control, 200, Duration::from_millis(10), length));
    producers.spawn(greedy(bulk, 1200, length));

    let mut report = Report::default();
    while !producers.is_empty() {
        tokio::select! {
            done = producers.join_next() => {
                if let Some(r) = done {
                    r??;
                }
            }
            event = session.next_event() => match event {
                Some(Event::StreamMapped { stream, paths }) => {
                    let name = names.get(&stream).copied().unwrap_or("?");
                    println!("{name}: mapped onto {} path(s)", paths.len());
                    if !paths.is_empty() && !report.mapped.iter().any(|m| m == name) {
                        report.mapped.push(name.to_string());
                    }
                }
                Some(Event::GuaranteeUnmet { stream, spec, best }) => {
                    // The upcall: take the best the paths can promise, or
                    // run best effort if nothing is left.
                    let answer = best.lowered(&spec).map_or(UpcallAnswer::Accept, UpcallAnswer::Lower);
                    println!("{}: cannot be met; answering {answer:?}", names.get(&stream).copied().unwrap_or("?"));
                    session.answer_upcall(stream, answer).await?;
                    report.lowered += 1;
                }
                Some(Event::PathDown { path, .. }) => println!("path {} down", path.0),
                Some(Event::PathUp { path }) => println!("path {} up", path.0),
                Some(Event::Closed(reason)) => return Err(format!("the session closed: {reason}").into()),
                Some(Event::PathUnmeasured { path, .. }) => {
                    println!("path {}: no usable rate sample yet: guarantees wait", path.0);
                }
                Some(_) => {}
                None => break,
            },
        }
    }
    session.close().await?;
    report.received = sink.await??;
    for (name, r) in &report.received {
        let met = r
            .windows_met
            .map_or_else(|| "-".to_string(), |m| format!("{:.1} %", 100.0 * m));
        println!(
            "{name}: {} messages, {} bytes delivered; windows met {met}",
            r.messages, r.bytes
        );
    }
    Ok(report)
}

/// Sends `size`-byte messages every `every` for `length`.
async fn paced(
    mut stream: Stream,
    size: usize,
    every: Duration,
    length: Duration,
) -> Result<(), BoxError> {
    let mut tick = tokio::time::interval(every.into());
    let n = length.as_nanos() / every.as_nanos().max(1);
    for _ in 0..n {
        tick.tick().await;
        stream.send(Bytes::from(vec![0u8; size])).await?;
    }
    stream.finish().await?;
    Ok(())
}

/// Sends as fast as the session takes `size`-byte messages for `length`.
async fn greedy(mut stream: Stream, size: usize, length: Duration) -> Result<(), BoxError> {
    let stop = tokio::time::sleep(length.into());
    tokio::pin!(stop);
    let message = Bytes::from(vec![0u8; size]);
    loop {
        tokio::select! {
            _ = &mut stop => break,
            sent = stream.send(message.clone()) => sent?,
        }
    }
    stream.finish().await?;
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let secs: u64 = match std::env::args().nth(1) {
        Some(s) => s
            .parse()
            .map_err(|_| format!("SECONDS: a whole number, not {s:?}"))?,
        None => 5,
    };
    run(Duration::from_secs(secs)).await.map(|_| ())
}
