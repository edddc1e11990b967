//! `braid serve`: the sink of sessions. Each stream of each session is
//! written to a file named after the stream in `--out DIR` (or discarded
//! and counted); at the end of a session it says which streams arrived
//! complete and which did not.

use super::view::Format;
use anyhow::{bail, Context};
use braid_core::Duration;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

/// Flags of `braid serve`.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Example: accept one session on port 7000 and write its streams to ./in/:

  braid serve --listen 0.0.0.0:7000 --out in --once

Each stream becomes in/NAME (or in/stream-ID when unnamed); an existing
file is not overwritten without --force. Exits non-zero when a stream of
a --once session arrived incomplete. See docs/sessions.md.")]
pub struct ServeArgs {
    /// Address to listen on, HOST:PORT (UDP).
    #[arg(long)]
    pub listen: String,
    /// Write each stream to DIR/NAME (default: discard and count).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Overwrite existing files in --out.
    #[arg(long)]
    pub force: bool,
    /// The key file (`braid keygen`) sources must hold.
    #[arg(long, value_name = "FILE")]
    pub key: Option<PathBuf>,
    /// Serve one session, then exit (non-zero if a stream is incomplete).
    #[arg(long)]
    pub once: bool,
    /// text: a live view on stderr (plain lines when it is not a
    /// terminal); json: one object per period on stdout.
    #[arg(long, value_enum, default_value = "text")]
    pub format: Format,
    /// Serve Prometheus metrics at http://ADDR/.
    #[arg(long, value_name = "ADDR")]
    pub metrics: Option<SocketAddr>,
    /// How often the view, the JSON line and the metrics are refreshed.
    #[arg(long, default_value = "1s")]
    pub every: Duration,
}

/// Checks `--out`: an existing folder, or one that can be created.
fn check_out(dir: &Path) -> anyhow::Result<()> {
    if dir.exists() && !dir.is_dir() {
        bail!("--out {}: not a folder", dir.display());
    }
    std::fs::create_dir_all(dir).with_context(|| format!("--out {}", dir.display()))
}

/// Runs `braid serve`.
pub fn run(args: ServeArgs) -> anyhow::Result<()> {
    let listen = super::stream::config::resolve(&args.listen).context("--listen")?;
    if let Some(dir) = &args.out {
        check_out(dir)?;
    }
    if args.every.is_zero() {
        bail!("--every must be above zero");
    }
    let _ = listen;
    bail!("sessions on real sockets (braid::session) are not in this build yet")
}
