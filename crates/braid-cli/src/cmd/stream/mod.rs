//! `braid stream`: the source of a session — streams with specs, fed from
//! files, stdin, constant-rate generators or video frame traces, over
//! several paths to a `braid serve` (docs/sessions.md).
//!
//! | file | concern |
//! | --- | --- |
//! | `mod` | the flags, and `run`: check everything, then connect |
//! | [`config`] | `--config session.toml`, `--stream NAME:SPEC:SOURCE`, the checked plan |
//! | (library) | SOURCEs and the loop that feeds one stream: `braid::session::feed` |
//! | `run` | the session: producers, upcalls, the view, the end |

pub mod config;
pub mod reserved;
mod run;

use super::view::Format;
use braid_core::Duration;
use config::{Flags, OnInfeasible, Plan, SessionFile};
use std::net::SocketAddr;
use std::path::PathBuf;

/// Flags of `braid stream`.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Example: a 3.2 Mbit/s stream guaranteed at P=0.95, a reliable file and a
best-effort bulk stream over two paths, one through a relay:

  braid stream --to 10.0.0.2:7000 --key site.key --path direct --path via=10.0.0.3:7000 \\
      --stream video:rate=3.2mbit@0.95,unreliable:cbr:3.2mbit \\
      --stream log:best-effort:app.log \\
      --stream bulk:best-effort=4:- < backup.tar

SPEC: rate=RATE@P | window=X/Y:TW:SIZE@P | violation=X:TW:SIZE<=E |
best-effort[=W], then ,reliable | ,unreliable | ,deadline=D, ,copies=2,
,rtt<=D@P, ,loss<=L%@P, ,window-msgs=N.
SOURCE: FILE | - | cbr:RATE[:SIZE] | trace:FILE[:FPS].
PATH: direct | via=HOST:PORT[,HOST:PORT...] | bind=ADDR, joined by '+'.
See docs/sessions.md.")]
pub struct StreamArgs {
    /// The sink (`braid serve --listen`), HOST:PORT.
    #[arg(long)]
    pub to: Option<String>,
    /// A path to the sink (repeat for several; default: one `direct`).
    #[arg(long = "path", value_name = "PATH")]
    pub paths: Vec<String>,
    /// A stream: NAME:SPEC:SOURCE (repeat for several).
    #[arg(long = "stream", value_name = "NAME:SPEC:SOURCE")]
    pub streams: Vec<String>,
    /// Read settings from a TOML file (flags override it).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// --key FILE (the sink and relays expect it; required unless --open
    /// or a key in --config), --open, --no-encrypt.
    #[command(flatten)]
    pub access: super::access::AccessArgs,
    /// The scheduler: pgos (default), msfq, wfq, rr or minrtt.
    #[arg(long)]
    pub scheduler: Option<String>,
    /// When a guarantee cannot be met: lower it to the best achievable
    /// figure (default), drop that stream, or fail.
    #[arg(long, value_enum)]
    pub on_infeasible: Option<OnInfeasible>,
    /// Stop the generators (cbr:, trace:) after this long (e.g. 60s);
    /// files and stdin are sent whole. What was sent is delivered, then
    /// the session closes.
    #[arg(long)]
    pub duration: Option<Duration>,
    /// Message size for files and stdin (default 16KiB; at most 1MiB).
    #[arg(long, value_parser = super::send::parse_size)]
    pub message_size: Option<u64>,
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
    /// End the session once every path has been down this long (a link
    /// with outages, such as a cellular one, needs more than the default).
    #[arg(long, value_name = "DURATION", default_value_t = braid::session::PEER_TIMEOUT)]
    pub peer_timeout: Duration,
    /// Put stream NAME (a --stream) on a committed foreground reservation
    /// of a `braid broker`: its spec becomes rate=RATE@0.99 at the
    /// reserved rate (delivery options kept), a file or stdin source is
    /// paced at that rate, and the reservation is provisioned for the
    /// session and released after. Repeat for several.
    #[arg(long = "reservation", value_name = "NAME=ID")]
    pub reservations: Vec<String>,
    /// The broker (for --reservation).
    #[command(flatten)]
    pub broker: super::send_reserve::BrokerFlags,
}

/// Runs `braid stream`: everything is checked (addresses, paths, specs,
/// sources, the key) before anything is sent.
pub fn run(mut args: StreamArgs) -> anyhow::Result<()> {
    let booked = reserved::bind(&args.reservations, &args.broker, &mut args.streams)?;
    let file = match &args.config {
        Some(p) => {
            let dir = p.parent().map(PathBuf::from).unwrap_or_default();
            Some((SessionFile::read(p)?, dir))
        }
        None => None,
    };
    let plan = Plan::new(
        file,
        Flags {
            to: args.to,
            paths: args.paths,
            streams: args.streams,
            scheduler: args.scheduler,
            on_infeasible: args.on_infeasible,
            key: args.access.key.clone(),
            duration: args.duration,
            message_size: args.message_size,
        },
    )?;
    if args.every.is_zero() {
        anyhow::bail!("--every must be above zero");
    }
    if args.peer_timeout < Duration::from_millis(500) {
        anyhow::bail!(
            "--peer-timeout {}: must be at least 500ms",
            args.peer_timeout
        );
    }
    let sources = plan
        .streams
        .iter()
        .map(|s| {
            let src = braid::session::feed::Feed::open(&s.source, plan.message_size)?;
            Ok(match booked.rate_of(&s.config.name) {
                Some(rate) => src.paced_at(rate),
                None => src,
            })
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let access = args.access.resolve("braid stream", plan.key.as_deref())?;
    booked.provision()?;
    let res = run::session(
        plan,
        sources,
        access,
        run::Output {
            format: args.format,
            metrics: args.metrics,
            every: args.every,
        },
        args.peer_timeout,
    );
    booked.release();
    res
}
