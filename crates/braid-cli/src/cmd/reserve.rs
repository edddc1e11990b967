//! `braid reserve`: the broker's client — create, list, show, modify,
//! commit, cancel and watch reservations. The calls are
//! `braid_broker::Client`'s; this module holds the flags and the output
//! (one line per reservation, or `--format json`).

use anyhow::Context;
use braid_broker::owner::Action;
use braid_broker::types::{CreateRequest, EventView, FlowSpec, ModifyRequest, ReservationView};
use braid_broker::Client;

/// The broker asked when neither --broker nor BRAID_BROKER is given.
pub const DEFAULT_BROKER: &str = "http://127.0.0.1:7080";

/// Flags of `braid reserve`.
#[derive(Debug, clap::Args)]
pub struct ReserveArgs {
    /// What to do.
    #[command(subcommand)]
    pub command: ReserveCommand,
    /// The broker's URL (default: $BRAID_BROKER, else http://127.0.0.1:7080).
    #[arg(long, global = true, value_name = "URL")]
    pub broker: Option<String>,
    /// A bearer token from `braid broker token` (default: $BRAID_TOKEN).
    #[arg(long, global = true, value_name = "TOKEN")]
    pub token: Option<String>,
    /// Output: text (one line per reservation) or json.
    #[arg(long, global = true, default_value = "text", value_parser = ["text", "json"])]
    pub format: String,
}

/// `braid reserve` subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum ReserveCommand {
    /// Hold a reservation (then `commit` it before the hold runs out, or
    /// pass --commit).
    Create(CreateArgs),
    /// Your live reservations (--all: also finished ones).
    List {
        /// Also finished reservations.
        #[arg(long)]
        all: bool,
    },
    /// One reservation.
    Show {
        /// Its id.
        id: u64,
    },
    /// Hold a new rate or end for a committed reservation (commit it to
    /// put it in force).
    Modify {
        /// Its id.
        id: u64,
        /// The new rate (e.g. 20mbit).
        #[arg(long)]
        rate: Option<String>,
        /// The new end (RFC 3339).
        #[arg(long)]
        end: Option<String>,
    },
    /// Commit what is held.
    Commit {
        /// Its id.
        id: u64,
    },
    /// Put a committed reservation in force (a broker run with --enforce
    /// shapes its flow or caps its process from now on).
    Provision {
        /// Its id.
        id: u64,
    },
    /// Stop enforcing a provisioned reservation (it stays committed).
    Release {
        /// Its id.
        id: u64,
    },
    /// Abort a held reservation, or terminate a committed one.
    Cancel {
        /// Its id.
        id: u64,
    },
    /// Print state changes as they happen (until interrupted).
    Watch,
}

/// Flags of `braid reserve create`.
#[derive(Debug, clap::Args)]
pub struct CreateArgs {
    /// The resource (repeat for a co-reservation of several, all or none).
    #[arg(long = "resource", required = true, value_name = "NAME")]
    pub resources: Vec<String>,
    /// The rate (e.g. 10mbit).
    #[arg(long)]
    pub rate: String,
    /// The start: RFC 3339, or now.
    #[arg(long, default_value = "now")]
    pub start: String,
    /// The end: RFC 3339 (or give --duration).
    #[arg(
        long,
        conflicts_with = "duration",
        required_unless_present = "duration"
    )]
    pub end: Option<String>,
    /// How long from the start (e.g. 10m, 2h, 1d).
    #[arg(long)]
    pub duration: Option<String>,
    /// foreground (a guaranteed rate) or background (a share of what is left).
    #[arg(long, default_value = "foreground")]
    pub class: String,
    /// A URL the broker posts state changes to.
    #[arg(long)]
    pub callback: Option<String>,
    /// Commit at once.
    #[arg(long)]
    pub commit: bool,
    /// Commit and provision at once.
    #[arg(long)]
    pub provision: bool,
    /// The traffic a network reservation is enforced on:
    /// src=ADDR[/LEN],dst=ADDR[/LEN],proto=tcp|udp,sport=N,dport=N (any
    /// subset).
    #[arg(long, value_name = "SPEC")]
    pub flow: Option<String>,
    /// The process a CPU reservation is enforced on (operators).
    #[arg(long)]
    pub pid: Option<u32>,
}

/// Parses `--flow src=…,dst=…,proto=…,sport=…,dport=…`.
fn flow_spec(text: &str) -> anyhow::Result<FlowSpec> {
    let mut f = FlowSpec::default();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (k, v) = part
            .split_once('=')
            .with_context(|| format!("--flow: {part:?} is not KEY=VALUE"))?;
        let port = |v: &str| -> anyhow::Result<Option<u16>> {
            Ok(Some(
                v.parse()
                    .with_context(|| format!("--flow: {k}={v}: not a port"))?,
            ))
        };
        match k {
            "src" => f.src = Some(v.into()),
            "dst" => f.dst = Some(v.into()),
            "proto" => f.proto = Some(v.into()),
            "sport" => f.sport = port(v)?,
            "dport" => f.dport = port(v)?,
            _ => anyhow::bail!("--flow: unknown key {k:?} (src, dst, proto, sport, dport)"),
        }
    }
    Ok(f)
}

/// Runs `braid reserve`.
pub fn run(a: ReserveArgs) -> anyhow::Result<()> {
    let broker = a
        .broker
        .or_else(|| std::env::var("BRAID_BROKER").ok())
        .unwrap_or_else(|| DEFAULT_BROKER.to_string());
    let token = a
        .token
        .or_else(|| std::env::var("BRAID_TOKEN").ok())
        .context("no token: give --token TOKEN or set BRAID_TOKEN (from `braid broker token`)")?;
    let client = Client::new(&broker, &token)?;
    let json = a.format == "json";
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    rt.block_on(async move {
        match a.command {
            ReserveCommand::Create(c) => create(&client, c, json).await,
            ReserveCommand::List { all } => {
                let list = client.list(all).await?;
                if json {
                    out(&serde_json::to_string_pretty(&list)?);
                } else {
                    list.iter().for_each(|r| out(&line(r)));
                }
                Ok(())
            }
            ReserveCommand::Show { id } => print(&client.show(id).await?, json),
            ReserveCommand::Modify { id, rate, end } => print(
                &client.modify(id, &ModifyRequest { rate, end }).await?,
                json,
            ),
            ReserveCommand::Commit { id } => print(&client.act(id, Action::Commit).await?, json),
            ReserveCommand::Provision { id } => {
                print(&client.act(id, Action::Provision).await?, json)
            }
            ReserveCommand::Release { id } => print(&client.act(id, Action::Release).await?, json),
            ReserveCommand::Cancel { id } => {
                let r = client.show(id).await?;
                let done = if r.state == "held" && r.committed.is_none() {
                    client.act(id, Action::Abort).await?
                } else {
                    client.terminate(id).await?
                };
                print(&done, json)
            }
            ReserveCommand::Watch => watch(&client, json).await,
        }
    })
}

async fn create(client: &Client, c: CreateArgs, json: bool) -> anyhow::Result<()> {
    let end = match (c.end, c.duration) {
        (Some(e), _) => e,
        (None, Some(d)) => {
            let d = braid_broker::config::parse_duration(&d)
                .map_err(|e| anyhow::anyhow!("--duration: {e}"))?;
            let now = braid_broker::clock::now();
            let start = braid_broker::clock::parse(&c.start, now)
                .context("--start: not an RFC 3339 time or now")?;
            braid_broker::clock::format(start.max(now) + d)
        }
        (None, None) => anyhow::bail!("give --end or --duration"),
    };
    let (resource, resources) = if c.resources.len() == 1 {
        (c.resources.into_iter().next(), None)
    } else {
        (None, Some(c.resources))
    };
    let created = client
        .create(&CreateRequest {
            resource,
            resources,
            rate: Some(c.rate),
            start: Some(c.start),
            end: Some(end),
            class: Some(c.class),
            callback: c.callback,
            flow: c.flow.as_deref().map(flow_spec).transpose()?,
            pid: c.pid,
        })
        .await?;
    let mut views = Vec::new();
    for id in &created.ids {
        if c.commit || c.provision {
            client.act(*id, Action::Commit).await?;
        }
        views.push(if c.provision {
            client.act(*id, Action::Provision).await?
        } else {
            client.show(*id).await?
        });
    }
    if json {
        out(&serde_json::to_string_pretty(&views)?);
    } else {
        views.iter().for_each(|r| out(&line(r)));
    }
    Ok(())
}

async fn watch(client: &Client, json: bool) -> anyhow::Result<()> {
    let mut events = client.events().await?;
    while let Some(e) = events.next().await? {
        if json {
            out(&serde_json::to_string(&e)?);
        } else {
            out(&event_line(&e));
        }
    }
    anyhow::bail!("the broker closed the event stream")
}

/// One line to stdout; a closed pipe (`| head`) is not an error.
fn out(text: &str) {
    use std::io::Write as _;
    let _ = writeln!(std::io::stdout().lock(), "{text}");
}

fn print(r: &ReservationView, json: bool) -> anyhow::Result<()> {
    if json {
        out(&serde_json::to_string_pretty(r)?);
    } else {
        out(&line(r));
    }
    Ok(())
}

/// `7 alice link 10 Mbit/s committed released created 2026-…Z..2026-…Z`.
fn line(r: &ReservationView) -> String {
    let v = r.committed.as_ref().or(r.pending.as_ref());
    let (rate, start, end) = v.map_or(("-", "-", "-"), |v| {
        (v.rate.as_str(), v.start.as_str(), v.end.as_str())
    });
    let pending = match (&r.committed, &r.pending) {
        (Some(_), Some(p)) => format!(" (held: {} until {})", p.rate, p.end),
        _ => String::new(),
    };
    format!(
        "{} {} {} {} {} {} {} {start}..{end}{pending}",
        r.id, r.user, r.resource, rate, r.state, r.provision, r.life
    )
}

fn event_line(e: &EventView) -> String {
    match (&e.reservation, &e.share) {
        (Some(r), _) => format!("{} {}", e.event, line(r)),
        (None, Some(s)) => format!("{} {} {s}", e.event, e.id),
        (None, None) => format!("{} {}", e.event, e.id),
    }
}
