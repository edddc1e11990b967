//! A path over UDP against a path over TCP: one greedy bulk stream and a
//! small-message stream beside it, over one session path; the sink prints
//! the bulk stream's goodput and the small messages' latency as one JSON
//! line. Used for docs/BENCHMARKS.md, "Issue 12: a path over TCP".
//!
//! ```sh
//! session_tcp_bench sink 198.18.1.2:9000 &
//! session_tcp_bench source 198.18.1.2:9000 direct+tcp 10
//! ```
//!
//! Latency compares the source's wall clock (written into each small
//! message) with the sink's, so both must run on one host (network
//! namespaces share the clock).

use braid::session::{ListenerConfig, PathConfig, Session, SessionConfig, SessionListener};
use braid_core::scheduler::StreamSpec;
use braid_core::session::StreamConfig;
use braid_core::units::Bandwidth;
use braid_core::StreamId;
use std::net::SocketAddr;
use std::time::Duration;

/// Size of a bulk message.
const BULK_MESSAGE: usize = 1200;
/// Size of a small message (a timestamp and padding).
const SMALL_MESSAGE: usize = 100;
/// Time between two small messages.
const SMALL_EVERY: Duration = Duration::from_millis(10);

/// Microseconds since the Unix epoch: the clock both processes share.
fn wall_micros() -> u64 {
    // A benchmark comparing two processes' clocks on one host.
    #[allow(clippy::disallowed_methods)]
    let now = std::time::SystemTime::now();
    now.duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0)
}

fn usage() -> ! {
    eprintln!("usage: session_tcp_bench sink ADDR | source ADDR PATH SECONDS");
    std::process::exit(2)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    match args.get(1).map(String::as_str) {
        Some("sink") if args.len() == 3 => sink(args[2].parse()?).await,
        Some("source") if args.len() == 5 => {
            source(args[2].parse()?, args[3].parse()?, args[4].parse()?).await
        }
        _ => usage(),
    }
}

async fn sink(addr: SocketAddr) -> Result<(), Box<dyn std::error::Error>> {
    let mut l = SessionListener::bind(addr, ListenerConfig::default())?;
    let mut s = l.accept().await?;
    let (mut bulk_bytes, mut first, mut last) = (0u64, None, 0u64);
    let mut lat = Vec::new();
    while let Some(m) = s.recv().await {
        let now = wall_micros();
        if m.stream == StreamId(1) {
            bulk_bytes += m.data.len() as u64;
            first.get_or_insert(now);
            last = now;
        } else if m.data.len() >= 8 {
            let mut t = [0u8; 8];
            t.copy_from_slice(&m.data[..8]);
            lat.push(now.saturating_sub(u64::from_le_bytes(t)));
        }
    }
    lat.sort_unstable();
    let pct = |p: f64| {
        lat.get(((lat.len() as f64 * p) as usize).min(lat.len().saturating_sub(1)))
            .map_or(0.0, |&u| u as f64 / 1000.0)
    };
    let secs = last.saturating_sub(first.unwrap_or(last)) as f64 / 1e6;
    println!(
        "{{\"bulk_mbps\":{:.2},\"bulk_bytes\":{},\"small\":{},\"p50_ms\":{:.1},\"p95_ms\":{:.1},\"max_ms\":{:.1}}}",
        if secs > 0.0 { bulk_bytes as f64 * 8.0 / secs / 1e6 } else { 0.0 },
        bulk_bytes,
        lat.len(),
        pct(0.5),
        pct(0.95),
        pct(1.0),
    );
    Ok(())
}

async fn source(
    to: SocketAddr,
    path: PathConfig,
    secs: u64,
) -> Result<(), Box<dyn std::error::Error>> {
    let config = SessionConfig {
        paths: vec![path],
        ..SessionConfig::default()
    };
    let session = Session::connect(to, config).await?;
    let mut bulk = session
        .open_stream(StreamConfig::new(StreamSpec::best_effort(1)?).with_name("bulk"))
        .await?;
    let mut small = session
        .open_stream(
            StreamConfig::new(StreamSpec::min_rate(Bandwidth::from_kbps(100), 0.95)?)
                .with_name("small"),
        )
        .await?;
    let run = Duration::from_secs(secs);
    let bulk_task = tokio::spawn(async move {
        let end = tokio::time::sleep(run);
        tokio::pin!(end);
        let msg = bytes::Bytes::from(vec![0x5a; BULK_MESSAGE]);
        loop {
            tokio::select! {
                _ = &mut end => break,
                r = bulk.send(msg.clone()) => r?,
            }
        }
        bulk.finish().await
    });
    let mut tick = tokio::time::interval(SMALL_EVERY);
    for _ in 0..run.as_millis() / SMALL_EVERY.as_millis() {
        tick.tick().await;
        let mut m = vec![0u8; SMALL_MESSAGE];
        m[..8].copy_from_slice(&wall_micros().to_le_bytes());
        small.send(m.into()).await?;
    }
    small.finish().await?;
    bulk_task.await??;
    session.close().await?;
    Ok(())
}
