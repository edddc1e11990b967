//! `braid perf`: an iperf-like measurement of one connection, over braid's
//! RUDP transport or over TCP for comparison.
//!
//! `braid perf server` listens on one port for both (UDP for RUDP, TCP for
//! TCP). `braid perf client` sends for `--duration`, printing each
//! interval the goodput (what the server's application received, from the
//! server's reports), RTT, loss, congestion window and retransmissions, and
//! a summary with the CPU time of both ends.
//!
//! The protocol and both ends live in the library ([`braid::perf`]); this
//! module holds the flags and the printing.

use super::send::parse_size;
use anyhow::{bail, Context};
use braid::clock;
use braid::perf::server::{PerfServer, TestDone};
use braid::perf::{
    ClientOptions, Drops, Progress, Report, Sample, Summary, DATAGRAM_MESSAGE, MAX_TCP_MESSAGE,
    RELIABLE_MESSAGE, TCP_CHUNK,
};
use braid::rudp::Reliability;
use braid_core::transport::CongestionKind;
use braid_core::{Bandwidth, Duration, Instant};
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::Arc;

/// `braid perf` subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum PerfCommand {
    /// Accept perf clients (RUDP on UDP and TCP on the same port).
    Server(ServerArgs),
    /// Measure one connection to a `braid perf server`.
    Client(ClientArgs),
}

/// Output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Aligned text lines.
    Table,
    /// One JSON object per line (intervals, then a summary).
    Json,
}

/// Transport under test.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum TransportArg {
    /// braid's adaptive reliable UDP.
    Rudp,
    /// The kernel's TCP.
    Tcp,
}

/// Message class on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ReliabilityArg {
    /// Ordered, retransmitted.
    Reliable,
    /// Sent once.
    Unreliable,
    /// Sent once, or dropped before sending under congestion.
    Discardable,
}

/// Congestion controller on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum CongestionArg {
    /// Slow start and AIMD.
    Newreno,
    /// CUBIC.
    Cubic,
}

/// Flags of `braid perf server`.
#[derive(Debug, clap::Args)]
pub struct ServerArgs {
    /// Address to listen on (UDP and TCP; default port 7401).
    #[arg(long, default_value = "0.0.0.0:7401")]
    pub listen: String,
    /// Exit after the first test.
    #[arg(long)]
    pub once: bool,
    /// Output format of the per-test lines.
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
}

/// Flags of `braid perf client`.
#[derive(Debug, clap::Args)]
pub struct ClientArgs {
    /// The server (host:port).
    #[arg(long)]
    pub to: String,
    /// Transport to measure.
    #[arg(long, value_enum, default_value = "rudp")]
    pub transport: TransportArg,
    /// How long to send.
    #[arg(long, default_value = "10s")]
    pub duration: Duration,
    /// Limit the sending rate (e.g. 10mbit); default as fast as allowed.
    #[arg(long)]
    pub rate: Option<Bandwidth>,
    /// Message class (RUDP).
    #[arg(long, value_enum, default_value = "reliable")]
    pub reliability: ReliabilityArg,
    /// Message size (default 16KiB reliable, 1200 otherwise: one datagram).
    #[arg(long, value_parser = parse_size)]
    pub message_size: Option<u64>,
    /// Output format.
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
    /// Reporting interval.
    #[arg(long, default_value = "1s")]
    pub interval: Duration,
    /// Congestion controller (RUDP).
    #[arg(long, value_enum, default_value = "newreno")]
    pub congestion: CongestionArg,
    /// Do not pace packets (RUDP).
    #[arg(long)]
    pub no_pacing: bool,
}

/// Runtime threads, from `BRAID_PERF_THREADS` (default 2; 1 runs
/// everything on the calling thread).
fn threads() -> usize {
    std::env::var("BRAID_PERF_THREADS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2)
}

/// Runs `braid perf`.
pub fn run(cmd: PerfCommand) -> anyhow::Result<()> {
    let rt = match threads() {
        0 | 1 => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build(),
        n => tokio::runtime::Builder::new_multi_thread()
            .worker_threads(n)
            .enable_all()
            .build(),
    }
    .context("starting the async runtime")?;
    match cmd {
        PerfCommand::Server(a) => rt.block_on(server(a)),
        PerfCommand::Client(a) => rt.block_on(client(a)),
    }
}

fn resolve(a: &str) -> anyhow::Result<SocketAddr> {
    a.to_socket_addrs()
        .with_context(|| format!("bad address {a:?} (expected host:port)"))?
        .next()
        .with_context(|| format!("address {a:?} resolves to nothing"))
}

// ---- server ----------------------------------------------------------------

async fn server(a: ServerArgs) -> anyhow::Result<()> {
    let addr = resolve(&a.listen)?;
    let server = PerfServer::bind(addr).await?;
    eprintln!("braid perf server listening on {addr} (RUDP/UDP and TCP)");
    let format = a.format;
    let done = Arc::new(move |t: TestDone| match t.result {
        Ok((r, drops)) => print_server(format, t.transport, t.remote, &r, drops),
        Err(e) => eprintln!(
            "braid perf: {} test from {}: {:#}",
            t.transport,
            t.remote,
            anyhow::Error::new(e)
        ),
    });
    server.run(a.once, done).await?;
    Ok(())
}

fn print_server(
    format: Format,
    transport: &str,
    remote: SocketAddr,
    r: &Report,
    drops: Option<Drops>,
) {
    let secs = r.elapsed_ns as f64 / 1e9;
    let mbps = if secs > 0.0 {
        r.bytes as f64 * 8.0 / secs / 1e6
    } else {
        0.0
    };
    match format {
        Format::Json => println!(
            "{}",
            serde_json::json!({"server": transport, "from": remote.to_string(),
                "bytes": r.bytes, "messages": r.messages, "seconds": secs,
                "goodput_mbps": mbps, "cpu_s": r.cpu_us as f64 / 1e6,
                "receiver_drops": drops})
        ),
        Format::Table => println!(
            "{transport} from {remote}: {} bytes in {secs:.2} s = {mbps:.1} Mbit/s, {} messages, server CPU {:.2} s{}",
            r.bytes,
            r.messages,
            r.cpu_us as f64 / 1e6,
            drops.map_or(String::new(), |d| format!(
                ", dropped at the receiver: {} reliable, {} unreliable, {} discardable",
                d[0], d[1], d[2]
            ))
        ),
    }
}

// ---- client ----------------------------------------------------------------

struct Printer {
    format: Format,
    transport: &'static str,
    start: Instant,
    last_t: Instant,
    last_bytes: u64,
}

impl Printer {
    fn new(format: Format, transport: &'static str) -> Printer {
        let now = clock::now();
        Printer {
            format,
            transport,
            start: now,
            last_t: now,
            last_bytes: 0,
        }
    }
}

impl Progress for Printer {
    fn on_start(&mut self) {
        let now = clock::now();
        self.start = now;
        self.last_t = now;
        if self.format == Format::Table {
            println!(
                "{:>13}  {:>12}  {:>9}  {:>7}  {:>9}  {:>8}",
                "interval s", "goodput", "rtt ms", "loss %", "cwnd KB", "retrans"
            );
        }
    }

    fn on_interval(&mut self, delivered: u64, s: Sample) {
        let now = clock::now();
        let dt = now.saturating_duration_since(self.last_t).as_secs_f64();
        let from = self
            .last_t
            .saturating_duration_since(self.start)
            .as_secs_f64();
        let to = now.saturating_duration_since(self.start).as_secs_f64();
        let mbps = if dt > 0.0 {
            delivered.saturating_sub(self.last_bytes) as f64 * 8.0 / dt / 1e6
        } else {
            0.0
        };
        self.last_t = now;
        self.last_bytes = delivered;
        match self.format {
            Format::Json => println!(
                "{}",
                serde_json::json!({"transport": self.transport, "from_s": from, "to_s": to,
                    "goodput_mbps": mbps, "rtt_ms": s.rtt_ms, "loss_pct": s.loss_pct,
                    "cwnd_bytes": s.cwnd, "retrans": s.retrans})
            ),
            Format::Table => println!(
                "{from:>6.2}-{to:>6.2}  {:>12}  {:>9.3}  {:>7.2}  {:>9.1}  {:>8}",
                format!("{mbps:.1} Mbit/s"),
                s.rtt_ms,
                s.loss_pct,
                s.cwnd as f64 / 1024.0,
                s.retrans
            ),
        }
    }
}

fn print_summary(format: Format, transport: &str, s: &Summary) {
    let secs = s.report.elapsed_ns as f64 / 1e9;
    let gbit = s.report.bytes as f64 * 8.0 / 1e9;
    let rate = |r: &Report| {
        if r.elapsed_ns > 0 {
            r.bytes as f64 * 8.0 / (r.elapsed_ns as f64 / 1e9) / 1e6
        } else {
            0.0
        }
    };
    let total_mbps = rate(&s.report);
    let mbps = if s.at_stop.elapsed_ns > 0 {
        rate(&s.at_stop)
    } else {
        total_mbps
    };
    let per_gbit = |us: u64| {
        if gbit > 0.0 {
            us as f64 / 1e6 / gbit
        } else {
            0.0
        }
    };
    let delivered_pct = if s.sent_bytes > 0 {
        100.0 * s.report.bytes as f64 / s.sent_bytes as f64
    } else {
        0.0
    };
    match format {
        Format::Json => println!(
            "{}",
            serde_json::json!({"summary": true, "transport": transport,
                "sent_bytes": s.sent_bytes, "sent_messages": s.sent_messages,
                "send_seconds": s.send_seconds,
                "delivered_bytes": s.report.bytes, "delivered_messages": s.report.messages,
                "receive_seconds": secs, "goodput_mbps": mbps,
                "goodput_with_drain_mbps": total_mbps,
                "rtt_ms": s.rtt_ms, "loss_pct": s.loss_pct, "retrans": s.retrans,
                "client_cpu_s": s.client_cpu_us as f64 / 1e6,
                "server_cpu_s": s.report.cpu_us as f64 / 1e6,
                "client_cpu_s_per_gbit": per_gbit(s.client_cpu_us),
                "server_cpu_s_per_gbit": per_gbit(s.report.cpu_us)})
        ),
        Format::Table => {
            println!("summary ({transport}):");
            println!(
                "  sent      {} bytes, {} messages in {:.2} s",
                s.sent_bytes, s.sent_messages, s.send_seconds
            );
            println!(
                "  delivered {} bytes ({delivered_pct:.2} %), {} messages in {secs:.2} s",
                s.report.bytes, s.report.messages
            );
            println!(
                "  goodput   {mbps:.1} Mbit/s during the test ({total_mbps:.1} Mbit/s with the drain)"
            );
            println!(
                "  rtt {:.3} ms, loss {:.2} %, retransmitted {}",
                s.rtt_ms, s.loss_pct, s.retrans
            );
            println!(
                "  cpu       client {:.2} s ({:.2} s/Gbit), server {:.2} s ({:.2} s/Gbit)",
                s.client_cpu_us as f64 / 1e6,
                per_gbit(s.client_cpu_us),
                s.report.cpu_us as f64 / 1e6,
                per_gbit(s.report.cpu_us)
            );
        }
    }
}

async fn client(a: ClientArgs) -> anyhow::Result<()> {
    let to = resolve(&a.to)?;
    if a.duration.is_zero() {
        bail!("--duration must be positive");
    }
    if a.interval.is_zero() {
        bail!("--interval must be positive");
    }
    if a.rate == Some(Bandwidth::ZERO) {
        bail!("--rate must be positive");
    }
    let reliability = match a.reliability {
        ReliabilityArg::Reliable => Reliability::Reliable,
        ReliabilityArg::Unreliable => Reliability::Unreliable,
        ReliabilityArg::Discardable => Reliability::Discardable,
    };
    let (transport, message_size) = match a.transport {
        TransportArg::Rudp => {
            let size = a
                .message_size
                .unwrap_or(if reliability == Reliability::Reliable {
                    RELIABLE_MESSAGE
                } else {
                    DATAGRAM_MESSAGE
                });
            let max = braid::perf::rudp::max_message_size();
            if size == 0 || size > max {
                bail!("--message-size must be 1..={max} bytes");
            }
            ("rudp", size)
        }
        TransportArg::Tcp => {
            let size = a.message_size.unwrap_or(TCP_CHUNK as u64);
            if size == 0 || size > MAX_TCP_MESSAGE {
                bail!("--message-size must be 1..=64MiB for tcp");
            }
            ("tcp", size)
        }
    };
    let o = ClientOptions {
        duration: a.duration,
        rate: a.rate,
        reliability,
        message_size,
        interval: a.interval,
        congestion: match a.congestion {
            CongestionArg::Newreno => CongestionKind::NewReno,
            CongestionArg::Cubic => CongestionKind::Cubic,
        },
        pacing: !a.no_pacing,
    };
    let mut printer = Printer::new(a.format, transport);
    let summary = match a.transport {
        TransportArg::Rudp => braid::perf::rudp::client(&o, to, &mut printer).await?,
        TransportArg::Tcp => braid::perf::tcp::client(&o, to, &mut printer).await?,
    };
    print_summary(a.format, transport, &summary);
    Ok(())
}
