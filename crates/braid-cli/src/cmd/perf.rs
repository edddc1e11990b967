//! `braid perf`: an iperf-like measurement of one connection, over braid's
//! RUDP transport or over TCP for comparison.
//!
//! `braid perf server` listens on one port for both (UDP for RUDP, TCP for
//! TCP). `braid perf client` sends for `--duration`, printing each
//! interval the goodput (what the server's application received, from the
//! server's reports), RTT, loss, congestion window and retransmissions, and
//! a summary with the CPU time of both ends. The server's line per test
//! adds per-message statistics: inter-arrival mean and deviation (seed
//! 002's "delay" and "jitter") and write-to-read latency percentiles.
//! `--fps` (with `--frame-trace`) sends frames at a fixed rate instead of
//! back-to-back messages (seed 002's "changing application").
//!
//! The protocol and both ends live in the library ([`braid::perf`]); this
//! module holds the flags and the printing.

use super::send::parse_size;
use anyhow::{bail, Context};
use braid::clock;
use braid::perf::arrivals::ArrivalSummary;
use braid::perf::frames::Frames;
use braid::perf::server::{PerfServer, TestDone};
use braid::perf::{
    ClientOptions, Drops, Progress, Report, Sample, Served, Summary, DATAGRAM_MESSAGE,
    MAX_TCP_MESSAGE, RELIABLE_MESSAGE, TCP_CHUNK,
};
use braid::rudp::Reliability;
use braid_core::transport::CongestionKind;
use braid_core::{Bandwidth, Duration, Instant};
use std::net::SocketAddr;
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
    /// FAST (delay-based).
    Fast,
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
    /// --key FILE: accept only RUDP clients that hold this key (required
    /// unless --open; TCP tests, unauthenticated, then listen on loopback
    /// only), --open, --no-encrypt.
    #[command(flatten)]
    pub access: super::access::AccessArgs,
    /// With --key: take unauthenticated TCP tests on --listen too, not
    /// only on loopback.
    #[arg(long)]
    pub tcp_open: bool,
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
    /// Send frames at this rate per second, one message each (blocking
    /// while the transport's queue is full), instead of back-to-back
    /// messages; frames are `--message-size` bytes unless `--frame-trace`.
    #[arg(long)]
    pub fps: Option<f64>,
    /// Frame sizes from this trace: one frame per line, size in bits in the
    /// second column (MMGC `time size_bits is_I`) or the only one; the trace
    /// repeats. Needs `--fps` and `--frame-mean`.
    #[arg(long, requires_all = ["fps", "frame_mean"])]
    pub frame_trace: Option<std::path::PathBuf>,
    /// Scale the trace's frame sizes so the mean offered load is this rate
    /// (e.g. 12mbit).
    #[arg(long, requires = "frame_trace")]
    pub frame_mean: Option<Bandwidth>,
    /// TCP congestion control for the client's socket (e.g. cubic, bbr;
    /// TCP only); default: the network namespace's
    /// net.ipv4.tcp_congestion_control.
    #[arg(long)]
    pub tcp_congestion: Option<String>,
    /// RUDP: bound the send queue by two congestion windows and hand
    /// messages to the driver one at a time (like TCP's send-buffer
    /// autotuning), so a writer faster than the path waits instead of
    /// queueing seconds of data; default: a fixed 2 MiB queue.
    #[arg(long)]
    pub autotune: bool,
    /// RUDP: --key FILE (the server must have the same one; required
    /// unless --open), --open, --no-encrypt.
    #[command(flatten)]
    pub access: super::access::AccessArgs,
}

/// Most runtime threads `BRAID_PERF_THREADS` may ask for.
const MAX_THREADS: usize = 256;

/// Runtime threads, from `BRAID_PERF_THREADS` (default 1: everything on
/// the calling thread, as iperf3 runs). A test is one connection, and an
/// RUDP connection's driver is one task: a second worker adds no
/// parallelism, only wake-ups — while the driver runs, the idle worker
/// waits in tokio's I/O driver and is woken by every batch of datagrams
/// that arrives (30 000 context switches a second for a loopback test,
/// and 20–25 % more CPU per Gbit; measured 2026-11-28).
fn threads() -> anyhow::Result<usize> {
    let Ok(v) = std::env::var("BRAID_PERF_THREADS") else {
        return Ok(1);
    };
    match v.trim().parse::<usize>() {
        Ok(n) if (1..=MAX_THREADS).contains(&n) => Ok(n),
        _ => bail!("BRAID_PERF_THREADS must be 1..={MAX_THREADS}, not {v:?}"),
    }
}

/// Runs `braid perf`.
pub fn run(cmd: PerfCommand) -> anyhow::Result<()> {
    let rt = match threads()? {
        1 => tokio::runtime::Builder::new_current_thread()
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
    Ok(braid::resolve::host_port(a, None)?)
}

// ---- server ----------------------------------------------------------------

async fn server(a: ServerArgs) -> anyhow::Result<()> {
    let addr = resolve(&a.listen)?;
    let access = a.access.resolve("braid perf server", None)?;
    let keyed = access.psk.is_some();
    // TCP tests are not authenticated: with a key they stay on loopback
    // unless asked for, so the key keeps strangers out of every test.
    let tcp = if keyed && !a.tcp_open {
        braid::perf::server::TcpTests::LoopbackOnly
    } else {
        braid::perf::server::TcpTests::Listen
    };
    let server = PerfServer::bind_with(addr, access.psk, access.protection, tcp).await?;
    let addr = server.addr();
    match (keyed, tcp) {
        (false, _) => eprintln!("braid perf server listening on {addr} (RUDP/UDP and TCP)"),
        (true, braid::perf::server::TcpTests::LoopbackOnly) => eprintln!(
            "braid perf server listening on {addr} (RUDP/UDP for clients with the key; unauthenticated TCP tests on {} only, --tcp-open to serve them on {addr})",
            server.tcp_addr()
        ),
        (true, braid::perf::server::TcpTests::Listen) => eprintln!(
            "braid perf server listening on {addr} (RUDP/UDP for clients with the key; TCP unauthenticated, --tcp-open)"
        ),
    }
    let format = a.format;
    let done = Arc::new(move |t: TestDone| match t.result {
        Ok(Served {
            report,
            drops,
            arrivals,
        }) => print_server(format, t.transport, t.remote, &report, drops, &arrivals),
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
    a: &ArrivalSummary,
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
                "receiver_drops": drops,
                "inter_arrival_ms": a.inter_arrival_mean_ms, "inter_arrival_sd_ms": a.inter_arrival_sd_ms,
                "latency_ms": {"mean": a.latency_mean_ms, "p50": a.latency_p50_ms,
                    "p95": a.latency_p95_ms, "p99": a.latency_p99_ms, "max": a.latency_max_ms,
                    "samples": a.latency_samples}})
        ),
        Format::Table => {
            println!(
                "{transport} from {remote}: {} bytes in {secs:.2} s = {mbps:.1} Mbit/s, {} messages, server CPU {:.2} s{}",
                r.bytes,
                r.messages,
                r.cpu_us as f64 / 1e6,
                drops.map_or(String::new(), |d| format!(
                    ", dropped at the receiver: {} reliable, {} unreliable, {} discardable",
                    d[0], d[1], d[2]
                ))
            );
            println!(
                "  inter-arrival {:.3} ms (sd {:.3}); latency ms mean {:.1} p50 {:.1} p95 {:.1} p99 {:.1} max {:.1}",
                a.inter_arrival_mean_ms,
                a.inter_arrival_sd_ms,
                a.latency_mean_ms,
                a.latency_p50_ms,
                a.latency_p95_ms,
                a.latency_p99_ms,
                a.latency_max_ms
            );
        }
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
    if to.port() == 0 {
        bail!("--to {to}: port 0 is not a port to connect to");
    }
    if a.duration.is_zero() {
        bail!("--duration must be positive");
    }
    if a.interval.is_zero() {
        bail!("--interval must be positive");
    }
    if a.rate == Some(Bandwidth::ZERO) {
        bail!("--rate must be positive");
    }
    let access = if a.transport == TransportArg::Tcp {
        if a.access.key.is_some() || a.access.no_encrypt {
            bail!("--key and --no-encrypt apply to --transport rudp only (TCP is not authenticated yet)");
        }
        super::access::Access {
            psk: None,
            protection: Default::default(),
        }
    } else {
        a.access.resolve("braid perf client", None)?
    };
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
            let min = braid::perf::tcp::HEADER_LEN as u64;
            if !(min..=MAX_TCP_MESSAGE).contains(&size) {
                bail!("--message-size must be {min}..=64MiB for tcp");
            }
            ("tcp", size)
        }
    };
    let (min, max) = match a.transport {
        TransportArg::Rudp => (1, braid::perf::rudp::max_message_size()),
        TransportArg::Tcp => (braid::perf::tcp::HEADER_LEN as u64, MAX_TCP_MESSAGE),
    };
    let frames = match (a.fps, &a.frame_trace, a.frame_mean) {
        (None, _, _) => None,
        (Some(fps), None, _) => {
            Some(Frames::constant(fps, message_size).context("--fps must be positive")?)
        }
        (Some(fps), Some(path), Some(mean)) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading the frame trace {}", path.display()))?;
            Some(
                Frames::from_trace(&text, fps, mean, min, max)
                    .with_context(|| format!("frame trace {}", path.display()))?,
            )
        }
        (Some(_), Some(_), None) => bail!("--frame-trace needs --frame-mean"),
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
            CongestionArg::Fast => CongestionKind::Fast,
        },
        pacing: !a.no_pacing,
        frames,
        tcp_congestion: a.tcp_congestion.clone(),
        autotune: a.autotune,
        key: access.psk,
        protection: access.protection,
    };
    let mut printer = Printer::new(a.format, transport);
    let summary = match a.transport {
        TransportArg::Rudp => braid::perf::rudp::client(&o, to, &mut printer).await?,
        TransportArg::Tcp => braid::perf::tcp::client(&o, to, &mut printer).await?,
    };
    print_summary(a.format, transport, &summary);
    Ok(())
}
