//! `braid broker`: runs the reservation service, or (`braid broker token`)
//! prints a bearer token for one of its users. The service itself is
//! `braid_broker`'s; this module holds the flags and the runtime.

use std::path::PathBuf;

use anyhow::Context;
use braid_broker::config::parse_duration;
use braid_broker::http::HttpLimits;
use braid_broker::owner::StartError;
use braid_broker::server::{BrokerError, Options};
use braid_broker::{Auth, Broker, Config, Role};

/// Flags of `braid broker`.
#[derive(Debug, clap::Args)]
#[command(
    args_conflicts_with_subcommands = true,
    after_help = "Run one: `braid keygen broker.secret`, write broker.toml with secret_file = \"broker.secret\" and [[resource]] tables (name, kind, capacity; see docs/broker.md), then `braid broker --config broker.toml --listen 127.0.0.1:7080 --db broker.db`.\n\
                  Give each user a token with `braid broker token --config broker.toml --user alice --role user`; they run `braid reserve --broker http://127.0.0.1:7080 --token TOKEN create ...`."
)]
pub struct BrokerArgs {
    /// Issue a token instead of serving.
    #[command(subcommand)]
    pub command: Option<BrokerCommand>,
    /// The configuration file (TOML: resources, policy, peers, token secret).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Where to serve the HTTP API.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:7080")]
    pub listen: std::net::SocketAddr,
    /// The database: a SQLite file (created if missing) or a postgres:// URL.
    #[arg(long, value_name = "PATH|URL")]
    pub db: Option<String>,
    /// Enforce provisioned reservations in this host's kernel (root): an
    /// htb class and u32 filter per flow on a resource's `device`, a CPU
    /// cgroup per reserved pid (docs/broker.md, "Enforcement").
    #[arg(long)]
    pub enforce: bool,
    /// HTTP connections open at once; lowered to what the file limit
    /// (ulimit -n) leaves. When full, an idle or slow connection gives way
    /// to a new one.
    #[arg(long, value_name = "N", default_value_t = HttpLimits::default().max_connections)]
    pub max_connections: usize,
    /// Of --max-connections, the slots kept for GET /healthz when all the
    /// others are serving requests.
    #[arg(long, value_name = "N", default_value_t = HttpLimits::default().health_reserve)]
    pub health_reserve: usize,
    /// A request head must arrive within this; idle connections are
    /// closed after it.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = duration)]
    pub header_timeout: std::time::Duration,
    /// A request body must arrive within this (else 408).
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = duration)]
    pub body_timeout: std::time::Duration,
    /// GET /v1/events streams open at once (503 beyond, connection closed).
    #[arg(long, value_name = "N", default_value_t = HttpLimits::default().max_event_streams)]
    pub max_event_streams: usize,
}

fn duration(text: &str) -> Result<std::time::Duration, String> {
    let d = parse_duration(text)?;
    if d.is_zero() {
        return Err("must be above zero".into());
    }
    Ok(std::time::Duration::from_nanos(d.as_nanos()))
}

/// `braid broker` subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum BrokerCommand {
    /// Print a bearer token for a user of the broker configured in FILE.
    Token(TokenArgs),
}

/// Flags of `braid broker token`.
#[derive(Debug, clap::Args)]
pub struct TokenArgs {
    /// The broker's configuration file (for its token secret).
    #[arg(long, value_name = "FILE")]
    pub config: PathBuf,
    /// The user the token names.
    #[arg(long)]
    pub user: String,
    /// user (their own reservations) or operator (all).
    #[arg(long, default_value = "user")]
    pub role: String,
    /// How long the token is valid (e.g. 12h, 30d).
    #[arg(long, default_value = "30d")]
    pub ttl: String,
}

/// Runs `braid broker`.
pub fn run(a: BrokerArgs) -> anyhow::Result<()> {
    if let Some(BrokerCommand::Token(t)) = a.command {
        return token(t);
    }
    let config_path = a
        .config
        .context("--config FILE is required (see braid broker --help)")?;
    let db =
        a.db.context("--db PATH is required: a SQLite file, or a postgres:// URL")?;
    let config = Config::load(&config_path)?;
    let rt = super::session_runtime()?;
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind(a.listen)
            .await
            .with_context(|| format!("listening on {}", a.listen))?;
        let options = Options {
            enforce: a.enforce,
            http: HttpLimits {
                max_connections: a.max_connections,
                health_reserve: a.health_reserve,
                header_timeout: a.header_timeout,
                body_timeout: a.body_timeout,
                max_event_streams: a.max_event_streams,
            },
        };
        let mut broker = Broker::start_with(config, &db, listener, options)
            .await
            .map_err(|e| match e {
                // These errors are the whole story (not root, no tc, a
                // flag that cannot work, …).
                BrokerError::Enforce(e) | BrokerError::Start(StartError::Enforce(e)) => {
                    anyhow::anyhow!("{e}")
                }
                BrokerError::Limits(e) => anyhow::anyhow!("{e}"),
                e => anyhow::Error::new(e).context(format!("starting the broker on {db}")),
            })?;
        let stop = crate::shutdown::requested();
        eprintln!(
            "braid: broker listening on http://{} (database {db}{})",
            broker.addr(),
            if a.enforce { ", enforcing" } else { "" }
        );
        let stopped = tokio::select! {
            _ = stop => true,
            () = broker.wait() => false,
        };
        if !stopped {
            anyhow::bail!("the broker stopped: storage failed (see the log); restart it");
        }
        broker.stop().await;
        Ok(())
    })
}

fn token(t: TokenArgs) -> anyhow::Result<()> {
    let config = Config::load(&t.config)?;
    let role: Role = t.role.parse()?;
    let ttl = parse_duration(&t.ttl).map_err(|e| anyhow::anyhow!("--ttl: {e}"))?;
    let now = braid_broker::clock::now();
    let exp = (now + ttl).as_nanos() / 1_000_000_000;
    let token = Auth::new(&config.secret).issue(&t.user, role, exp)?;
    println!("{token}");
    Ok(())
}
