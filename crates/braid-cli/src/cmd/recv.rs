//! `braid recv`: accept a `braid send` stream on one or more addresses and
//! write it to stdout or a file, strictly in order, every block verified
//! before it is written (see docs/pipe.md).

use super::send::{emit_stats, parse_size, resolve, ProgressView, StatsFormat};
use anyhow::Context;
use braid::pipe::{net::SockOpts, Ended, Receiver, RecvConfig, ResumePoint};
use braid_core::Duration;

/// Flags of `braid recv`.
#[derive(Debug, clap::Args)]
pub struct RecvArgs {
    /// Address(es) to listen on, comma-separated (host:port), one per path.
    #[arg(long, required = true, value_delimiter = ',')]
    pub listen: Vec<String>,
    /// Output file (default: stdout).
    #[arg(short, long)]
    pub output: Option<std::path::PathBuf>,
    /// Largest reorder window (memory for out-of-order blocks).
    #[arg(long, default_value = "64MiB", value_parser = parse_size)]
    pub window: u64,
    /// Fixed socket buffer size (default: kernel autotuning to the BDP).
    #[arg(long, value_parser = parse_size)]
    pub sockbuf: Option<u64>,
    /// Listen with kernel MPTCP sockets (plain TCP senders still work).
    #[arg(long)]
    pub mptcp: bool,
    /// Give up when no sender connection is open for this long mid-stream.
    #[arg(long, default_value = "30s")]
    pub idle_limit: Duration,
    /// Resume an interrupted transfer into the -o FILE: keep what it holds
    /// (every byte was verified when written) and ask `braid send --resume`
    /// for the rest; the end-to-end digest covers the whole file.
    #[arg(long)]
    pub resume: bool,
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
    /// Append "seconds bytes-written" lines to this file a few times per
    /// second (for throughput-over-time plots).
    #[arg(long)]
    pub rate_log: Option<std::path::PathBuf>,
    /// Authentication and encryption.
    #[command(flatten)]
    pub security: super::pipe_security::RecvSecurity,
}

/// The shortest `--idle-limit` taken.
const MIN_IDLE_LIMIT: Duration = Duration::from_millis(100);

/// True if the process started with stdout closed (`>&-`). Rust's
/// runtime then opens `/dev/null` read-write in its place before `main`,
/// so every write would "succeed" into nothing; a shell's `> /dev/null`
/// opens it write-only, which this tells apart (Linux `/proc`).
fn stdout_was_closed() -> bool {
    let is_null =
        std::fs::read_link("/proc/self/fd/1").is_ok_and(|p| p == std::path::Path::new("/dev/null"));
    if !is_null {
        return false;
    }
    let Ok(info) = std::fs::read_to_string("/proc/self/fdinfo/1") else {
        return false;
    };
    info.lines()
        .find_map(|l| l.strip_prefix("flags:"))
        .and_then(|f| u32::from_str_radix(f.trim(), 8).ok())
        // O_ACCMODE == 3, O_RDWR == 2.
        .is_some_and(|flags| flags & 3 == 2)
}

/// Runs `braid recv`.
pub fn run(args: RecvArgs) -> anyhow::Result<()> {
    if args.idle_limit < MIN_IDLE_LIMIT {
        anyhow::bail!(
            "--idle-limit {}: at least {MIN_IDLE_LIMIT} (a sender reconnecting needs that long)",
            args.idle_limit
        );
    }
    super::send::check_stats_file(args.stats_file.as_deref())?;
    let listen = resolve(&args.listen)?;
    let (security, code) = args.security.resolve()?;
    // Open the output first: an unwritable output fails before anything
    // is accepted.
    let mut resume = None;
    let output: Box<dyn std::io::Write + Send> = match &args.output {
        Some(p) if args.resume => {
            // Keep what an earlier run wrote; go on at its end.
            let mut f = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(p)
                .with_context(|| format!("opening {}", p.display()))?;
            resume = Some(
                ResumePoint::read(&mut f).with_context(|| format!("reading {}", p.display()))?,
            );
            Box::new(f)
        }
        Some(p) => {
            Box::new(std::fs::File::create(p).with_context(|| format!("opening {}", p.display()))?)
        }
        None if args.resume => {
            anyhow::bail!("--resume needs -o FILE: a stream to stdout cannot be resumed")
        }
        None => {
            use std::os::fd::AsFd;
            if stdout_was_closed() {
                anyhow::bail!("stdout is closed: redirect it (e.g. > FILE) or give -o FILE");
            }
            crate::pipe_buffer::widen(std::io::stdout().as_fd());
            let fd = std::io::stdout()
                .as_fd()
                .try_clone_to_owned()
                .context("stdout")?;
            Box::new(std::fs::File::from(fd))
        }
    };
    let rx = Receiver::bind(RecvConfig {
        listen,
        window_bytes: args.window,
        sock: SockOpts {
            mptcp: args.mptcp,
            sockbuf: args.sockbuf.map(super::send::sockbuf),
            notsent_lowat: None,
            user_timeout: None,
        },
        idle_limit: args.idle_limit,
        resume,
        security,
    })?;
    if let Some(code) = code {
        let port = rx.local_addrs().first().map_or(0, |a| a.port());
        eprintln!(
            "braid recv: code {code}\nOn the sender: braid send --to HOST:{port} --code {code}"
        );
    }
    let stats = rx.security_stats();
    let mut view = ProgressView::new(args.progress, args.no_progress, None);
    let mut log = match &args.rate_log {
        Some(p) => Some(std::io::BufWriter::new(
            std::fs::File::create(p).with_context(|| format!("opening {}", p.display()))?,
        )),
        None => None,
    };
    // SIGINT or SIGTERM stops the transfer: what was written stays (it is
    // a prefix of the stream, which `--resume` verifies and goes on from),
    // and the command says how far it got (`crate::shutdown`).
    let mut written = 0u64;
    let ended = rx.run_until(
        output,
        &mut |p| {
            written = p.bytes;
            view.update(p);
            if let Some(l) = &mut log {
                use std::io::Write;
                let _ = writeln!(l, "{:.3} {}", p.seconds, p.bytes);
                let _ = l.flush();
            }
        },
        crate::shutdown::requested,
    );
    let res = match ended {
        Ok(Ended::Done(r)) => Ok(r),
        Err(e) => Err(e),
        Ok(Ended::Stopped(signal)) => {
            view.finish();
            // The file holds what was written; stdout, the last count.
            let (bytes, resume) = match &args.output {
                Some(p) => (
                    std::fs::metadata(p).map_or(written, |m| m.len()),
                    format!(
                        "; go on with braid recv --resume -o {} (and braid send --resume)",
                        p.display()
                    ),
                ),
                None => (written, String::new()),
            };
            eprintln!(
                "braid recv: stopped by {}: {bytes} bytes written{resume}",
                signal.name()
            );
            return Err(
                crate::shutdown::Stopped::new(signal, "the transfer was not finished").into(),
            );
        }
    };
    view.finish();
    let refused = stats.snapshot();
    // With --stats json, stderr is one JSON object: the counts go in it.
    if refused != braid::pipe::SecureCounts::default() && args.stats.is_none() {
        eprintln!(
            "braid recv: refused {} connection(s) at the handshake, {} unverified record(s), {} wrong code(s), {} encryption-mode mismatch(es)",
            refused.refused, refused.unverified, refused.code_failures, refused.mode_mismatch
        );
    }
    let report = res.context("braid recv")?;
    let mut json = serde_json::to_value(&report)?;
    if let Some(o) = json.as_object_mut() {
        o.insert(
            "security".into(),
            serde_json::json!({
                "refused": refused.refused,
                "unverified": refused.unverified,
                "code_failures": refused.code_failures,
                "mode_mismatch": refused.mode_mismatch,
            }),
        );
    }
    emit_stats(&json, args.stats, args.stats_file.as_deref())
}
