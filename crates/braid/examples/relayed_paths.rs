//! A file's bytes over two paths of one session, one of them through a
//! relay, checked whole at the other end.
//!
//! ```text
//! cargo run --release -p braid --example relayed_paths [-- MEGABYTES]
//! ```
//!
//! Everything runs in this process on loopback: a relay ([`Relay`], what
//! `braid relay` runs), a sink ([`SessionListener`]) and a source whose
//! session has two paths, `direct` and `via=RELAY` ([`PathConfig`]). One
//! reliable best-effort stream carries the data; the scheduler spreads it
//! over both paths and the sink puts it back in order. At the end the sink
//! compares a BLAKE3 digest with the source's, and each side prints what
//! each path carried (the relay its own counts). A path's bytes sent
//! include the session's probe padding: on loopback an idle moment of a
//! path is padded at whatever loopback takes (`braid_core::session::probe`).

use braid::relay::{Relay, RelayConfig};
use braid::session::{ListenerConfig, PathConfig, Session, SessionConfig, SessionListener};
use braid_core::scheduler::StreamSpec;
use braid_core::session::StreamConfig;
use bytes::Bytes;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// What one run carried.
#[derive(Debug, Default)]
pub struct Report {
    /// Bytes the sink received.
    pub bytes: u64,
    /// Whether the sink's digest is the source's.
    pub intact: bool,
    /// Bytes each path delivered (source's view), by path name.
    pub per_path: Vec<(String, u64)>,
    /// Bytes the relay forwarded towards the sink.
    pub relayed: u64,
}

/// Sends `len` bytes of a fixed pseudo-random pattern over both paths.
///
/// # Errors
/// A session, relay or stream that cannot be set up or fails.
pub async fn run(len: usize) -> Result<Report, BoxError> {
    let relay = Relay::bind("127.0.0.1:0".parse()?, RelayConfig::default())?;
    let mut listener = SessionListener::bind("127.0.0.1:0".parse()?, ListenerConfig::default())?;
    let to = listener.local_addr();
    let sink = tokio::spawn(async move {
        let mut incoming = listener.accept().await?;
        let mut hash = blake3::Hasher::new();
        let mut bytes = 0u64;
        while let Some(m) = incoming.recv().await {
            hash.update(&m.data);
            bytes += m.data.len() as u64;
        }
        Ok::<_, BoxError>((bytes, hash.finalize()))
    });

    let config = SessionConfig {
        paths: vec![
            PathConfig::direct(),
            PathConfig::via(vec![relay.local_addr().to_string()]),
        ],
        ..SessionConfig::default()
    };
    let session = Session::connect(to, config).await?;
    let mut stream = session
        .open_stream(StreamConfig::new(StreamSpec::best_effort(1)?).with_name("file"))
        .await?;
    let data = pattern(len);
    let digest = blake3::hash(&data);
    // Messages of 16 KiB: the session cuts them into packets.
    let data = Bytes::from(data);
    for chunk in (0..data.len()).step_by(16 << 10) {
        let end = (chunk + (16 << 10)).min(data.len());
        stream.send(data.slice(chunk..end)).await?;
    }
    stream.finish().await?;
    let snap = session.snapshot().await?;
    let per_path = snap
        .paths
        .iter()
        .map(|p| (session.path_name(p.id), p.bytes_sent))
        .collect();
    session.close().await?;
    let (bytes, got) = sink.await??;
    let relayed = relay.snapshot().await?.stats.bytes_down;
    let report = Report {
        bytes,
        intact: got == digest,
        per_path,
        relayed,
    };
    println!(
        "sink: {} bytes, {}",
        report.bytes,
        if report.intact {
            "digest matches"
        } else {
            "DIGEST DIFFERS"
        }
    );
    for (name, sent) in &report.per_path {
        println!("path {name}: {sent} bytes sent");
    }
    println!("relay: {} bytes forwarded towards the sink", report.relayed);
    Ok(report)
}

/// `len` bytes of a fixed xorshift pattern (not compressible, the same
/// every run).
fn pattern(len: usize) -> Vec<u8> {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let mb: usize = match std::env::args().nth(1) {
        Some(s) => s
            .parse()
            .map_err(|_| format!("MEGABYTES: a whole number, not {s:?}"))?,
        None => 64,
    };
    let report = run(mb << 20).await?;
    if !report.intact {
        return Err("the sink's digest differs from the source's".into());
    }
    Ok(())
}
