//! `braid broker`: runs the reservation service, or (`braid broker token`)
//! prints a bearer token for one of its users. The service itself is
//! `braid_broker`'s; this module holds the flags and the runtime.

use std::path::PathBuf;

use anyhow::Context;
use braid_broker::config::parse_duration;
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
        let mut broker = if a.enforce {
            // The enforcement error is the whole story (not root, no tc, …).
            Broker::start_enforcing(config, &db, listener)
                .await
                .map_err(|e| match e {
                    braid_broker::server::BrokerError::Enforce(e)
                    | braid_broker::server::BrokerError::Start(
                        braid_broker::owner::StartError::Enforce(e),
                    ) => anyhow::anyhow!("{e}"),
                    e => anyhow::Error::new(e).context(format!("starting the broker on {db}")),
                })?
        } else {
            Broker::start(config, &db, listener)
                .await
                .with_context(|| format!("starting the broker on {db}"))?
        };
        eprintln!(
            "braid: broker listening on http://{} (database {db}{})",
            broker.addr(),
            if a.enforce { ", enforcing" } else { "" }
        );
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .context("watching SIGTERM")?;
        let stopped = tokio::select! {
            _ = tokio::signal::ctrl_c() => true,
            _ = term.recv() => true,
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
