//! `braid perf`: an iperf-like measurement of one connection, over braid's
//! RUDP transport or over TCP for comparison.
//!
//! `braid perf server` listens on one port for both (UDP for RUDP, TCP for
//! TCP). `braid perf client` sends for `--duration`, printing each
//! interval the goodput (what the server's application received, from the
//! server's reports), RTT, loss, congestion window and retransmissions, and
//! a summary with the CPU time of both ends.
//!
//! The exchange: the client sends data messages (RUDP: on stream 0 with the
//! chosen class; TCP: a byte stream). The server sends a [`Report`] every
//! [`REPORT_EVERY`] (RUDP: on its own reliable stream; TCP: on the same
//! connection). At the end the client says how much it sent (RUDP: an
//! `END` message on a reliable control stream; TCP: shutting down its
//! write side); the server then waits for the data still in flight (all of
//! it for reliable data, up to [`GRACE`] of silence otherwise) and sends a
//! final report, after which both close.

mod tcp;

use super::send::parse_size;
use anyhow::{bail, Context};
use braid::clock;
use braid::rudp::{
    Connection, Endpoint, EndpointConfig, ErrorCode, Reliability, SendOptions, Stats,
};
use braid_core::transport::CongestionKind;
use braid_core::{Bandwidth, Duration, Instant};
use std::net::{SocketAddr, ToSocketAddrs};
use tokio::net::TcpListener;

/// How often the server reports what it received.
pub const REPORT_EVERY: std::time::Duration = std::time::Duration::from_millis(100);
/// After the client's END, how long the server waits for more non-reliable
/// data before its final report.
pub const GRACE: std::time::Duration = std::time::Duration::from_millis(500);
/// How long the client waits for the final report after it stopped sending.
pub const FINAL_WAIT: std::time::Duration = std::time::Duration::from_secs(30);
/// Size of one encoded [`Report`].
pub const REPORT_LEN: usize = 33;
/// The RUDP client's send queue (the core's `send_queue_bytes`).
pub const SEND_QUEUE_BYTES: u64 = 2 << 20;
/// TCP read and write buffer size.
const TCP_CHUNK: usize = 128 << 10;

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

// ---- reports ---------------------------------------------------------------

/// What the server's application received so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Report {
    /// The last report of the test.
    pub last: bool,
    /// Payload bytes received.
    pub bytes: u64,
    /// Messages received (RUDP; TCP counts reads).
    pub messages: u64,
    /// From the first to the last byte received, in nanoseconds.
    pub elapsed_ns: u64,
    /// Server process CPU time (user + system) during the test, in µs.
    pub cpu_us: u64,
}

impl Report {
    /// The fixed-size encoding.
    pub fn encode(&self) -> [u8; REPORT_LEN] {
        let mut b = [0u8; REPORT_LEN];
        b[0] = u8::from(self.last);
        b[1..9].copy_from_slice(&self.bytes.to_be_bytes());
        b[9..17].copy_from_slice(&self.messages.to_be_bytes());
        b[17..25].copy_from_slice(&self.elapsed_ns.to_be_bytes());
        b[25..33].copy_from_slice(&self.cpu_us.to_be_bytes());
        b
    }

    /// Decodes a report; `None` unless exactly [`REPORT_LEN`] bytes.
    pub fn decode(b: &[u8]) -> Option<Report> {
        if b.len() != REPORT_LEN || b[0] > 1 {
            return None;
        }
        let u = |r: std::ops::Range<usize>| {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[r]);
            u64::from_be_bytes(a)
        };
        Some(Report {
            last: b[0] == 1,
            bytes: u(1..9),
            messages: u(9..17),
            elapsed_ns: u(17..25),
            cpu_us: u(25..33),
        })
    }
}

/// Process CPU time (user + system) in microseconds.
pub fn cpu_us() -> u64 {
    let mut ru = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage writes a `rusage` into the pointer we own; on
    // failure we read the zeroed value.
    let ru = unsafe {
        libc::getrusage(libc::RUSAGE_SELF, ru.as_mut_ptr());
        ru.assume_init()
    };
    let tv = |t: libc::timeval| t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// Receive-side counters of one test.
#[derive(Debug, Default)]
struct Counter {
    bytes: u64,
    messages: u64,
    first: Option<Instant>,
    last: Instant,
    cpu_start: u64,
}

impl Counter {
    fn new() -> Counter {
        Counter {
            cpu_start: cpu_us(),
            ..Counter::default()
        }
    }
    fn add(&mut self, n: usize) {
        let now = clock::now();
        self.first.get_or_insert(now);
        self.last = now;
        self.bytes += n as u64;
        self.messages += 1;
    }
    fn report(&self, last: bool) -> Report {
        Report {
            last,
            bytes: self.bytes,
            messages: self.messages,
            elapsed_ns: self
                .first
                .map_or(0, |f| self.last.saturating_duration_since(f).as_nanos()),
            cpu_us: cpu_us().saturating_sub(self.cpu_start),
        }
    }
}

// ---- server ----------------------------------------------------------------

async fn server(a: ServerArgs) -> anyhow::Result<()> {
    let addr = resolve(&a.listen)?;
    let mut rudp = Endpoint::bind(addr, EndpointConfig::server())
        .with_context(|| format!("listening for RUDP on {addr}"))?;
    let tcp = TcpListener::bind(addr)
        .await
        .with_context(|| format!("listening for TCP on {addr}"))?;
    eprintln!("braid perf server listening on {addr} (RUDP/UDP and TCP)");
    let (done_tx, mut done_rx) = tokio::sync::mpsc::channel::<()>(4);
    loop {
        tokio::select! {
            c = rudp.accept() => {
                let c = c.context("accepting RUDP")?;
                let done = done_tx.clone();
                let format = a.format;
                tokio::spawn(async move {
                    let remote = c.remote();
                    match serve_rudp(c).await {
                        Ok((r, drops)) => print_server(format, "rudp", remote, &r, drops),
                        Err(e) => eprintln!("braid perf: rudp test from {remote}: {e:#}"),
                    }
                    let _ = done.send(()).await;
                });
            }
            t = tcp.accept() => {
                let (s, remote) = t.context("accepting TCP")?;
                let done = done_tx.clone();
                let format = a.format;
                tokio::spawn(async move {
                    match tcp::serve(s).await {
                        Ok(r) => print_server(format, "tcp", remote, &r, None),
                        Err(e) => eprintln!("braid perf: tcp test from {remote}: {e:#}"),
                    }
                    let _ = done.send(()).await;
                });
            }
            _ = done_rx.recv(), if a.once => return Ok(()),
        }
    }
}

/// Messages the receiving core dropped (buffer full, incomplete, late,
/// expired), per class: reliable, unreliable, discardable.
type Drops = [u64; 3];

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

async fn serve_rudp(mut c: Connection) -> anyhow::Result<(Report, Option<Drops>)> {
    let reports = c.open_stream(SendOptions::RELIABLE)?;
    let mut count = Counter::new();
    let mut tick = tokio::time::interval(REPORT_EVERY);
    // Messages the client says it sent, once its END arrived.
    let mut expected: Option<u64> = None;
    let mut quiet_since: Option<Instant> = None;
    loop {
        tokio::select! {
            m = c.recv() => {
                let Some(m) = m else { bail!("connection closed before the end of the test") };
                if m.stream.0 == 0 {
                    count.add(m.data.len());
                    quiet_since = Some(clock::now());
                } else if let Some(n) = m.data.strip_prefix(b"END").and_then(|b| b.try_into().ok()) {
                    expected = Some(u64::from_be_bytes(n));
                    quiet_since = Some(clock::now());
                }
            }
            _ = tick.tick() => {
                let _ = reports.try_send(count.report(false).encode().to_vec());
            }
        }
        if let Some(n) = expected {
            let quiet = quiet_since.is_some_and(|q| {
                clock::now().saturating_duration_since(q) >= Duration::from(GRACE)
            });
            if count.messages >= n || quiet {
                let r = count.report(true);
                reports.send(r.encode().to_vec()).await?;
                let drops = c
                    .stats()
                    .await
                    .ok()
                    .map(|s| s.classes.map(|k| k.dropped_on_receive + k.late + k.expired));
                // The client closes once it has the final report.
                let _ =
                    tokio::time::timeout(FINAL_WAIT, async { while c.recv().await.is_some() {} })
                        .await;
                return Ok((r, drops));
            }
        }
    }
}

// ---- client ----------------------------------------------------------------

/// One interval's line.
#[derive(Debug, Clone, Copy, Default)]
struct Sample {
    rtt_ms: f64,
    loss_pct: f64,
    cwnd: u64,
    retrans: u64,
}

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
        if format == Format::Table {
            println!(
                "{:>13}  {:>12}  {:>9}  {:>7}  {:>9}  {:>8}",
                "interval s", "goodput", "rtt ms", "loss %", "cwnd KB", "retrans"
            );
        }
        Printer {
            format,
            transport,
            start: now,
            last_t: now,
            last_bytes: 0,
        }
    }

    fn line(&mut self, delivered: u64, s: Sample) {
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

/// What the client measured.
#[derive(Debug, Default)]
struct Summary {
    sent_bytes: u64,
    sent_messages: u64,
    send_seconds: f64,
    /// The server's last report before the client stopped sending: the
    /// goodput over the test's duration (what is still queued then only
    /// drains afterwards).
    at_stop: Report,
    /// The final report (everything delivered, drain included).
    report: Report,
    client_cpu_us: u64,
    rtt_ms: f64,
    retrans: u64,
    loss_pct: f64,
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
    match a.transport {
        TransportArg::Rudp => client_rudp(a, to).await,
        TransportArg::Tcp => tcp::client(a, to).await,
    }
}

/// Sleeps as needed so that `sent` bytes since `start` stay within `rate`.
async fn pace(rate: Option<Bandwidth>, start: Instant, sent: u64) {
    let Some(rate) = rate else { return };
    let due = start + rate.transmit_time(sent);
    let now = clock::now();
    if due > now + Duration::from_millis(1) {
        tokio::time::sleep(due.saturating_duration_since(now).into()).await;
    }
}

fn rudp_sample(s: &Stats, prev: &Stats) -> Sample {
    let sent = s.packets_sent.saturating_sub(prev.packets_sent);
    let lost = s.packets_lost.saturating_sub(prev.packets_lost);
    Sample {
        rtt_ms: s.srtt.as_secs_f64() * 1e3,
        loss_pct: if sent > 0 {
            100.0 * lost as f64 / sent as f64
        } else {
            0.0
        },
        cwnd: s.cwnd,
        retrans: s
            .retransmitted_bytes
            .saturating_sub(prev.retransmitted_bytes),
    }
}

async fn client_rudp(a: ClientArgs, to: SocketAddr) -> anyhow::Result<()> {
    let local: SocketAddr = if to.is_ipv4() {
        SocketAddr::from(([0, 0, 0, 0], 0))
    } else {
        SocketAddr::from(([0u16; 8], 0))
    };
    let mut cfg = EndpointConfig::default();
    cfg.transport.pacing = !a.no_pacing;
    // A backlog of a few milliseconds at loopback rates, not seconds at
    // WAN rates: the test ends soon after --duration.
    cfg.transport.send_queue_bytes = SEND_QUEUE_BYTES;
    cfg.transport.congestion = match a.congestion {
        CongestionArg::Newreno => CongestionKind::NewReno,
        CongestionArg::Cubic => CongestionKind::Cubic,
    };
    let reliability = match a.reliability {
        ReliabilityArg::Reliable => Reliability::Reliable,
        ReliabilityArg::Unreliable => Reliability::Unreliable,
        ReliabilityArg::Discardable => Reliability::Discardable,
    };
    let size = a
        .message_size
        .unwrap_or(if reliability == Reliability::Reliable {
            16 << 10
        } else {
            1200
        });
    if size == 0 || size > cfg.transport.max_message_size {
        bail!(
            "--message-size must be 1..={} bytes",
            cfg.transport.max_message_size
        );
    }
    let ep = Endpoint::bind(local, cfg).context("opening a UDP socket")?;
    let mut conn = ep
        .connect(to)
        .await
        .with_context(|| format!("connecting to {to}"))?;
    let data = conn.open_stream(SendOptions {
        reliability,
        ttl: None,
    })?;
    let control = conn.open_stream(SendOptions::RELIABLE)?;
    let cpu0 = cpu_us();
    let duration = a.duration;
    let rate = a.rate;
    let sender = tokio::spawn(async move {
        let msg = vec![0x5a_u8; size as usize];
        let start = clock::now();
        let end = start + duration;
        let (mut bytes, mut n) = (0u64, 0u64);
        while clock::now() < end {
            if data.send(msg.clone()).await.is_err() {
                break;
            }
            bytes += size;
            n += 1;
            pace(rate, start, bytes).await;
        }
        let secs = clock::now().saturating_duration_since(start).as_secs_f64();
        let mut end_msg = b"END".to_vec();
        end_msg.extend_from_slice(&n.to_be_bytes());
        let _ = control.send(end_msg).await;
        (bytes, n, secs)
    });
    let mut printer = Printer::new(a.format, "rudp");
    let mut tick = tokio::time::interval(a.interval.into());
    tick.tick().await;
    let first = conn.stats().await?;
    let mut prev = first;
    let mut latest = Report::default();
    let mut sender = Some(sender);
    let mut sent = (0, 0, 0.0);
    let mut at_stop = Report::default();
    let mut final_wait: Option<std::pin::Pin<Box<tokio::time::Sleep>>> = None;
    loop {
        tokio::select! {
            m = conn.recv() => {
                let Some(m) = m else { bail!("the server closed the connection before the final report") };
                if let Some(r) = Report::decode(&m.data) {
                    if r.last && sender.is_some() {
                        at_stop = latest;
                    }
                    latest = r;
                    if r.last { break; }
                }
            }
            _ = tick.tick() => {
                let s = conn.stats().await?;
                printer.line(latest.bytes, rudp_sample(&s, &prev));
                prev = s;
            }
            r = async { sender.as_mut().expect("guarded by the branch condition").await }, if sender.is_some() => {
                sender = None;
                sent = r.context("sender task")?;
                at_stop = latest;
                final_wait = Some(Box::pin(tokio::time::sleep(FINAL_WAIT)));
            }
            _ = async { final_wait.as_mut().expect("guarded by the branch condition").await }, if final_wait.is_some() => {
                bail!("no final report from the server within {:?}", FINAL_WAIT);
            }
        }
    }
    if let Some(task) = sender.take() {
        // The server answers END, which is the sender task's last act, so its
        // final report can win the race against the task's completion: the
        // task has finished or is about to.
        match tokio::time::timeout(FINAL_WAIT, task).await {
            Ok(r) => sent = r.context("sender task")?,
            Err(_) => bail!("final report before the client finished sending"),
        }
    }
    let s = conn.stats().await?;
    let summary = Summary {
        sent_bytes: sent.0,
        sent_messages: sent.1,
        send_seconds: sent.2,
        at_stop,
        report: latest,
        client_cpu_us: cpu_us().saturating_sub(cpu0),
        rtt_ms: s.srtt.as_secs_f64() * 1e3,
        retrans: s.retransmitted_bytes,
        loss_pct: if s.packets_sent > first.packets_sent {
            100.0 * (s.packets_lost - first.packets_lost.min(s.packets_lost)) as f64
                / (s.packets_sent - first.packets_sent) as f64
        } else {
            0.0
        },
    };
    let _ = conn.close(ErrorCode::NO_ERROR, b"done").await;
    print_summary(a.format, "rudp", &summary);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn report_round_trip() {
        let r = Report {
            last: true,
            bytes: 1 << 40,
            messages: 7,
            elapsed_ns: 123,
            cpu_us: 9,
        };
        assert_eq!(Report::decode(&r.encode()), Some(r));
        assert_eq!(Report::decode(&[0; 5]), None);
        let mut bad = r.encode();
        bad[0] = 2;
        assert_eq!(Report::decode(&bad), None);
    }

    #[test]
    fn cpu_time_is_readable() {
        let a = cpu_us();
        let mut x = 0u64;
        for i in 0..1_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        assert!(x != 1 || cpu_us() >= a);
    }
}
