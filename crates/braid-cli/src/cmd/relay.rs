//! `braid relay`: forwards the paths of sessions hop by hop (each hop its
//! own IQ-RUDP connection and congestion control), for sessions that hold
//! its key, and reports what it forwards.

use super::metrics;
use super::view::Format;
use anyhow::{bail, Context};
use braid::relay::{Relay, RelayConfig, RelayRecord, RelaySnapshot};
use braid_core::Duration;
use std::io::Write as _;
use std::net::SocketAddr;

/// Flags of `braid relay`.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Example: relay on port 7000 for sessions holding relay.key; sources name
it in a path as via=THIS_HOST:7000:

  braid keygen relay.key      # once; copy it to the sources securely
  braid relay --listen 0.0.0.0:7000 --key relay.key --metrics 127.0.0.1:9100

See docs/sessions.md.")]
pub struct RelayArgs {
    /// Address to listen on, HOST:PORT (UDP).
    #[arg(long)]
    pub listen: String,
    /// --key FILE (sessions must hold it to be relayed; required unless
    /// --open), --open, --no-encrypt (every hop must agree).
    #[command(flatten)]
    pub access: super::access::AccessArgs,
    /// --max-connections N, --max-per-source N.
    #[command(flatten)]
    pub limits: super::limits::LimitArgs,
    /// Serve Prometheus metrics at http://ADDR/.
    #[arg(long, value_name = "ADDR")]
    pub metrics: Option<SocketAddr>,
    /// text: one line per period on stderr; json: one object per period
    /// on stdout.
    #[arg(long, value_enum, default_value = "text")]
    pub format: Format,
    /// How often the line and the metrics are refreshed.
    #[arg(long, default_value = "1s")]
    pub every: Duration,
}

/// Runs `braid relay`.
pub fn run(args: RelayArgs) -> anyhow::Result<()> {
    let listen = super::stream::config::resolve(&args.listen).context("--listen")?;
    if args.every.is_zero() {
        bail!("--every must be above zero");
    }
    // One thread: the relay is one driver task (and a timer). With a second
    // worker idle, tokio's I/O driver wakes it for every batch of datagrams
    // that arrives while the first runs the driver — a context switch or a
    // cross-core wake-up each time, for nothing: through a relay on
    // loopback 3.6–3.8 against 5.2–5.8 Gbit/s (2026-11-28, BENCHMARKS.md).
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    rt.block_on(relay(listen, args))
}

async fn relay(listen: SocketAddr, args: RelayArgs) -> anyhow::Result<()> {
    if let Some(addr) = args.metrics {
        metrics::install(addr)?;
    }
    let mut config = RelayConfig::default();
    let access = args.access.resolve("braid relay", None)?;
    config.transport.psk = access.psk;
    config.transport.protection = access.protection;
    args.limits.apply(&mut config.transport)?;
    let relay = Relay::bind(listen, config).with_context(|| format!("relaying on {listen}"))?;
    let stop = crate::shutdown::requested();
    tokio::pin!(stop);
    eprintln!("braid relay: listening on {}", relay.local_addr());
    let mut tick = tokio::time::interval(args.every.into());
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        tokio::select! {
            _ = tick.tick() => show(&relay, args.format).await?,
            s = &mut stop => {
                // Stopping is how a relay ends: its last figures, then 0.
                show(&relay, args.format).await?;
                eprintln!("braid relay: stopped by {}", s.name());
                return Ok(());
            }
        }
    }
}

/// Prints the relay's figures now, as `--format` says, and records them.
async fn show(relay: &Relay, format: Format) -> anyhow::Result<()> {
    let snap = relay.snapshot().await.context("the relay stopped")?;
    let t = braid::clock::now().as_secs_f64();
    metrics::record_relay(&snap.stats, snap.pairs.len());
    match format {
        Format::Json => {
            if let Ok(line) = serde_json::to_string(&RelayRecord::new(&snap, t)) {
                let mut out = std::io::stdout().lock();
                let _ = writeln!(out, "{line}");
                let _ = out.flush();
            }
        }
        Format::Text => {
            let _ = std::io::stderr().write_all(render(&snap, t).as_bytes());
        }
    }
    Ok(())
}

/// One line for the relay, then one per forwarding pair.
pub fn render(snap: &RelaySnapshot, t: f64) -> String {
    let s = &snap.stats;
    let mut out = format!(
        "t={t:.1}s relay pairs={} forwarded={} B down, {} B up ({} + {} messages) refused={} dropped={} reports={} auth_failed={}\n",
        snap.pairs.len(),
        s.bytes_down,
        s.bytes_up,
        s.forwarded_down,
        s.forwarded_up,
        s.refused,
        s.dropped,
        s.reports,
        snap.endpoint.auth_failed
    );
    for p in &snap.pairs {
        let to = p.to.map_or("-".to_string(), |a| a.to_string());
        let hop = p.index.map_or(String::new(), |i| format!(" hop {i}"));
        out.push_str(&format!(
            "t={t:.1}s pair {} -> {to}{hop}: rtt={} loss={:.1}% delivered={} queued={} B\n",
            p.from,
            p.srtt,
            p.loss * 100.0,
            p.delivered,
            p.queued_bytes
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use braid_core::session::relay::{PairInfo, RelayStats};
    use braid_core::Bandwidth;

    fn snapshot() -> RelaySnapshot {
        RelaySnapshot {
            stats: RelayStats {
                pairs: 2,
                bytes_down: 5000,
                refused: 1,
                ..RelayStats::default()
            },
            endpoint: Default::default(),
            io: Default::default(),
            pairs: vec![PairInfo {
                from: "127.0.0.1:4000".parse().unwrap(),
                to: Some("127.0.0.1:7000".parse().unwrap()),
                index: Some(1),
                srtt: Duration::from_millis(12),
                delivered: Bandwidth::from_mbps(4),
                loss: 0.02,
                queued_bytes: 1400,
                bytes_down: 5000,
                bytes_up: 0,
            }],
        }
    }

    #[test]
    fn the_relay_line_and_its_pairs() {
        let text = render(&snapshot(), 3.0);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2, "{text}");
        assert!(
            lines[0].contains("pairs=1 forwarded=5000 B down") && lines[0].contains("refused=1")
        );
        assert!(lines[1].contains("pair 127.0.0.1:4000 -> 127.0.0.1:7000 hop 1: rtt=12ms loss=2.0% delivered=4 Mbit/s queued=1400 B"), "{}", lines[1]);
        let v = serde_json::to_value(RelayRecord::new(&snapshot(), 3.0)).unwrap();
        assert_eq!(v["version"], braid_core::session::record::RECORD_VERSION);
        assert_eq!(v["bytes_down"], 5000);
        assert_eq!(v["pairs"][0]["to"], "127.0.0.1:7000");
        assert_eq!(v["pairs"][0]["delivered_bps"], 4_000_000);
    }
}
