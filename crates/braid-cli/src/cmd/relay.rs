//! `braid relay`: forwards the paths of sessions hop by hop (each hop its
//! own IQ-RUDP connection and congestion control), for sessions that hold
//! its key, and reports what it forwards.

use super::view::Format;
use anyhow::{bail, Context};
use braid_core::Duration;
use std::net::SocketAddr;
use std::path::PathBuf;

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
    /// The key file (`braid keygen`) sessions must hold to be relayed.
    #[arg(long, value_name = "FILE")]
    pub key: Option<PathBuf>,
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
    let _ = listen;
    bail!("relays on real sockets (braid::relay) are not in this build yet")
}
