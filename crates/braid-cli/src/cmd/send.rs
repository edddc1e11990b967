//! `braid send`: stream stdin (or a file) to a `braid recv` over parallel
//! TCP connections and several paths (see docs/pipe.md). Also holds the
//! helpers `braid recv` shares: size and address parsing, progress, stats.

use anyhow::{bail, Context};
use braid::pipe::{self, net::SockOpts, Layout, Mode, Progress, SendConfig};
use braid_broker::transfer::{self, Notes};
use braid_core::Duration;
use std::io::IsTerminal;
use std::net::SocketAddr;

/// TCP_NOTSENT_LOWAT in blocks: unsent data a socket may hold. Small keeps
/// the scheduler's view of each path fresh; too small starves a fast
/// connection whose writer thread is not scheduled in time (4 blocks
/// doubled loopback N = 1 but cost 10-25 % on 10-30 Mbit/s channels).
const LOWAT_BLOCKS: u32 = 1;

/// Scheduling mode on the command line.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum ModeArg {
    /// Pull-based, head-of-line re-send, throttling (default).
    Adaptive,
    /// The seed's weighted buffers with its PI re-weighting loop.
    Weighted,
    /// Equal blocks in turn (the seed's unweighted baseline).
    RoundRobin,
}

/// Block layout of the fixed modes.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum LayoutArg {
    /// Block i to connection i mod N.
    Interleaved,
    /// Contiguous ranges (a file of known size that fits in the window).
    Partitioned,
}

/// Format of `--stats`.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum StatsFormat {
    /// One JSON object on stderr at the end.
    Json,
}

/// Flags of `braid send`.
#[derive(Debug, clap::Args)]
pub struct SendArgs {
    /// Receiver address(es), comma-separated: one per path (host:port).
    #[arg(long, required = true, value_delimiter = ',')]
    pub to: Vec<String>,
    /// Number of TCP connections, spread over the addresses in turn
    /// (default: 2 per address).
    #[arg(short = 'n', long)]
    pub connections: Option<usize>,
    /// How blocks are spread over connections.
    #[arg(long, value_enum, default_value = "adaptive")]
    pub mode: ModeArg,
    /// Block layout for round-robin and weighted.
    #[arg(long, value_enum, default_value = "interleaved")]
    pub layout: LayoutArg,
    /// Block size (e.g. 256KiB, 1MiB). Weighted and round-robin: every
    /// block (default 256KiB). Adaptive: the largest block (default 2MiB);
    /// blocks start at 256KiB (or this, if smaller), then take 50 ms on
    /// the slowest connection.
    #[arg(long, value_parser = parse_size)]
    pub block_size: Option<u64>,
    /// Largest reorder window to ask the receiver for (the receiver may
    /// grant less); adaptive mode uses only what the measured paths need
    /// (sum of rates × longest block latency, with headroom).
    #[arg(long, default_value = "64MiB", value_parser = parse_size)]
    pub window: u64,
    /// Adaptive mode: use the whole --window instead of sizing it from the
    /// measured rates and latencies.
    #[arg(long)]
    pub fixed_window: bool,
    /// Fixed socket buffer size (default: kernel autotuning to the BDP;
    /// a connection to this same host: a 192 KiB send buffer).
    #[arg(long, value_parser = parse_size)]
    pub sockbuf: Option<u64>,
    /// Cap the total sending rate over all connections (e.g. 800mbit),
    /// paced smoothly (default: as fast as the paths allow).
    #[arg(long)]
    pub rate: Option<braid_core::Bandwidth>,
    /// Use kernel MPTCP sockets (IPPROTO_MPTCP) instead of TCP.
    #[arg(long)]
    pub mptcp: bool,
    /// Reconnect attempts per connection (backoff 0.2 s, doubling).
    #[arg(long, default_value_t = 4)]
    pub reconnect: u32,
    /// Declare a connection dead when sent data stays unacknowledged, or
    /// the receiver says nothing (it sends a keepalive every second), this
    /// long.
    #[arg(long, default_value = "10s")]
    pub user_timeout: Duration,
    /// Show progress (default: when stderr is a terminal).
    #[arg(long, overrides_with = "no_progress")]
    pub progress: bool,
    /// Never show progress.
    #[arg(long)]
    pub no_progress: bool,
    /// Print a summary at the end.
    #[arg(long, value_enum)]
    pub stats: Option<StatsFormat>,
    /// Also write the JSON summary to this file.
    #[arg(long)]
    pub stats_file: Option<std::path::PathBuf>,
    /// Resume an interrupted transfer of FILE: send only what the receiver
    /// (`braid recv --resume`) has not verified yet, after checking that
    /// its part matches this file's start.
    #[arg(long)]
    pub resume: bool,
    /// Testing only: corrupt block N on the wire (its checksum then fails).
    #[arg(long, hide = true)]
    pub corrupt_block: Option<u64>,
    /// Input file (default: stdin).
    pub file: Option<std::path::PathBuf>,
    /// Authentication and encryption.
    #[command(flatten)]
    pub security: super::pipe_security::SendSecurity,
    /// Send on this committed reservation of a `braid broker`, paced at
    /// its rate (a background reservation: at the share the broker
    /// announces), following its changes; it is provisioned for the
    /// transfer and released after. With --rate too, the pace is the
    /// smaller of the two (an application sending less than it reserved).
    #[arg(long, value_name = "ID")]
    pub reservation: Option<u64>,
    /// With --reservation: wait for a reservation that starts later
    /// (default: refuse it).
    #[arg(long, requires = "reservation")]
    pub wait_start: bool,
    /// The broker (for --reservation and --deadline).
    #[command(flatten)]
    pub broker: super::send_reserve::BrokerFlags,
    /// Deadline transfers.
    #[command(flatten)]
    pub deadline: super::send_deadline::DeadlineFlags,
}

/// Parses a size flag with [`braid_core::ByteSize`]'s units: `4096`,
/// `64KB` (64,000), `256KiB`, `1MiB`, `2GiB`; `256k` or `1M` is refused as
/// ambiguous (1000 or 1024?).
///
/// # Errors
/// The size's parse error, as one line for clap.
pub fn parse_size(s: &str) -> Result<u64, String> {
    s.parse::<braid_core::ByteSize>()
        .map(braid_core::ByteSize::bytes)
        .map_err(|e| e.to_string())
}

/// A `--sockbuf` size for [`SockOpts`]; beyond `usize` saturates (and is
/// then refused by the library's bounds check).
pub fn sockbuf(bytes: u64) -> usize {
    usize::try_from(bytes).unwrap_or(usize::MAX)
}

/// Resolves `host:port` strings.
pub fn resolve(addrs: &[String]) -> anyhow::Result<Vec<SocketAddr>> {
    addrs
        .iter()
        .map(|a| Ok(braid::resolve::host_port(a, None)?))
        .collect()
}

/// Progress display over indicatif, or nothing.
pub struct ProgressView {
    bar: Option<indicatif::ProgressBar>,
    last: Option<Progress>,
}

impl std::fmt::Debug for ProgressView {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ProgressView")
    }
}

impl ProgressView {
    /// A view that shows itself if `on` (or by default when stderr is a
    /// terminal and `off` is not set).
    pub fn new(on: bool, off: bool, total: Option<u64>) -> Self {
        let show = !off && (on || std::io::stderr().is_terminal());
        let bar = show.then(|| {
            let bar = match total {
                Some(t) => indicatif::ProgressBar::new(t),
                None => indicatif::ProgressBar::new_spinner(),
            };
            bar.set_draw_target(indicatif::ProgressDrawTarget::stderr());
            let tpl = if total.is_some() {
                "{bytes}/{total_bytes} {binary_bytes_per_sec} eta {eta} {msg}"
            } else {
                "{bytes} {binary_bytes_per_sec} {msg}"
            };
            if let Ok(style) = indicatif::ProgressStyle::with_template(tpl) {
                bar.set_style(style);
            }
            bar
        });
        ProgressView { bar, last: None }
    }

    /// Shows a snapshot: overall bytes and per-connection rates.
    pub fn update(&mut self, p: &Progress) {
        let Some(bar) = &self.bar else { return };
        bar.set_position(p.bytes);
        if let Some(last) = &self.last {
            let dt = (p.seconds - last.seconds).max(1e-3);
            let rates: Vec<String> = p
                .per_conn
                .iter()
                .enumerate()
                .map(|(i, b)| {
                    let prev = last.per_conn.get(i).copied().unwrap_or(0);
                    format!("{:.0}", b.saturating_sub(prev) as f64 * 8.0 / dt / 1e6)
                })
                .collect();
            bar.set_message(format!("Mbit/s per conn [{}]", rates.join(" ")));
        }
        self.last = Some(p.clone());
    }

    /// Removes the bar.
    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

/// Prints/writes the JSON summary as asked.
/// Checks at the start that `--stats-file` can be written (creating it),
/// so a typo fails at once instead of after the whole transfer.
pub fn check_stats_file(file: Option<&std::path::Path>) -> anyhow::Result<()> {
    if let Some(f) = file {
        std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .open(f)
            .with_context(|| format!("--stats-file {}", f.display()))?;
    }
    Ok(())
}

pub fn emit_stats<T: serde::Serialize>(
    report: &T,
    stats: Option<StatsFormat>,
    file: Option<&std::path::Path>,
) -> anyhow::Result<()> {
    let json = serde_json::to_string(report)?;
    if stats.is_some() {
        eprintln!("{json}");
    }
    if let Some(f) = file {
        std::fs::write(f, format!("{json}\n"))
            .with_context(|| format!("writing stats to {}", f.display()))?;
    }
    Ok(())
}

/// Runs `braid send`.
pub fn run(args: SendArgs) -> anyhow::Result<()> {
    check_stats_file(args.stats_file.as_deref())?;
    let security = args.security.resolve()?;
    let to = resolve(&args.to)?;
    if let Some(a) = to.iter().find(|a| a.port() == 0) {
        bail!("--to {a}: port 0 is not a port to connect to");
    }
    if args.resume && args.file.is_none() {
        bail!("--resume needs an input FILE: a stream from stdin cannot be resumed");
    }
    let (input, total): (Box<dyn std::io::Read + Send>, Option<u64>) = match &args.file {
        Some(p) => {
            let f = std::fs::File::open(p).with_context(|| format!("opening {}", p.display()))?;
            let len = f.metadata().ok().filter(|m| m.is_file()).map(|m| m.len());
            (Box::new(f), len)
        }
        None => {
            use std::os::fd::AsFd;
            crate::pipe_buffer::widen(std::io::stdin().as_fd());
            let fd = std::io::stdin()
                .as_fd()
                .try_clone_to_owned()
                .context("reading stdin")?;
            (Box::new(std::fs::File::from(fd)), None)
        }
    };
    // Out of u32's range is out of the pipe's range: the library's check
    // names the bounds.
    let block = match (args.block_size, args.mode) {
        (Some(b), _) => u32::try_from(b).unwrap_or(u32::MAX),
        (None, ModeArg::Adaptive) => pipe::DEFAULT_ADAPTIVE_BLOCK,
        (None, _) => pipe::DEFAULT_BLOCK,
    };
    let cfg = SendConfig {
        connections: args.connections.unwrap_or(2 * to.len()),
        to,
        mode: match args.mode {
            ModeArg::Adaptive => Mode::Adaptive,
            ModeArg::Weighted => Mode::Weighted,
            ModeArg::RoundRobin => Mode::RoundRobin,
        },
        layout: match args.layout {
            LayoutArg::Interleaved => Layout::Interleaved,
            LayoutArg::Partitioned => Layout::Partitioned,
        },
        block_size: block,
        window_bytes: args.window,
        auto_window: !args.fixed_window,
        total_size: total,
        sock: SockOpts {
            mptcp: args.mptcp,
            sockbuf: args.sockbuf.map(sockbuf),
            notsent_lowat: Some(block.saturating_mul(LOWAT_BLOCKS)),
            user_timeout: Some(args.user_timeout),
        },
        reconnect_attempts: args.reconnect,
        corrupt_block: args.corrupt_block,
        silence_limit: args.user_timeout,
        rate: args.rate,
        rate_updates: None,
        paced_connections: None,
        rest_rate: None,
        resume: args.resume,
        security,
    };
    let mut view = ProgressView::new(args.progress, args.no_progress, total);
    if args.reservation.is_some() || args.deadline.deadline.is_some() {
        let res = on_broker(&args, input, total, cfg, &mut view);
        view.finish();
        return res;
    }
    // SIGINT or SIGTERM stops the transfer; the receiver keeps what it
    // verified, and `--resume` goes on from there (`crate::shutdown`).
    let mut acked = 0u64;
    let ended = pipe::send_until(
        input,
        cfg,
        &mut |p| {
            acked = p.bytes;
            view.update(p);
        },
        crate::shutdown::requested,
    );
    view.finish();
    let report = match ended.context("braid send")? {
        pipe::Ended::Done(r) => r,
        pipe::Ended::Stopped(signal) => {
            let resume = if args.file.is_some() {
                "; go on with the same command and --resume on both sides"
            } else {
                ""
            };
            eprintln!(
                "braid send: stopped by {}: {acked} bytes acknowledged by the receiver{resume}",
                signal.name()
            );
            return Err(
                crate::shutdown::Stopped::new(signal, "the transfer was not finished").into(),
            );
        }
    };
    emit_stats(&report, args.stats, args.stats_file.as_deref())
}

/// `--reservation` or `--deadline`: a transfer driven with a broker.
fn on_broker(
    args: &SendArgs,
    input: Box<dyn std::io::Read + Send>,
    total: Option<u64>,
    cfg: SendConfig,
    view: &mut ProgressView,
) -> anyhow::Result<()> {
    let client = args.broker.client()?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let res = rt.block_on(async {
        let mut observe = |p: &Progress| view.update(p);
        let notes: Notes = std::sync::Arc::new(|line: &str| eprintln!("braid send: {line}"));
        if let Some(id) = args.reservation {
            let report = transfer::send_on_reservation(
                &client,
                id,
                args.wait_start,
                input,
                cfg,
                &mut observe,
                notes,
            )
            .await?;
            emit_stats(&report, args.stats, args.stats_file.as_deref())
        } else if let Some(deadline) = args.deadline.deadline {
            let Some(size) = total else {
                bail!("--deadline needs an input FILE (its size sets the rate)");
            };
            let plan = args.deadline.plan(deadline)?;
            let report = transfer::deadline::send_with_deadline(
                &client,
                &plan,
                size,
                input,
                cfg,
                &mut observe,
                notes,
            )
            .await
            .map_err(|e| match e {
                // The flags' names for what the library calls the plan.
                transfer::TransferError::Refused(m) => anyhow::anyhow!("--deadline: {m}"),
                other => other.into(),
            })?;
            emit_stats(&report, args.stats, args.stats_file.as_deref())
        } else {
            Ok(())
        }
    });
    // The pipe's reader may be blocked on an idle input: do not wait for it.
    rt.shutdown_background();
    res
}

#[cfg(test)]
mod tests {
    #[test]
    fn sizes() {
        assert_eq!(super::parse_size("4096").unwrap(), 4096);
        assert_eq!(super::parse_size("256KiB").unwrap(), 256 << 10);
        assert_eq!(super::parse_size("1.5MiB").unwrap(), 3 << 19);
        assert_eq!(super::parse_size("64KB").unwrap(), 64_000);
        let e = super::parse_size("1.5M").unwrap_err();
        assert!(e.contains("ambiguous") && e.contains("MiB"), "{e}");
        assert!(super::parse_size("12 parsecs").is_err());
    }
}
