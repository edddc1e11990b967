//! `braid serve`: the sink of sessions. Each stream of each session is
//! written to a file named after the stream in `--out DIR` (or discarded
//! and counted) by `braid::session::store`; at the end of a session it
//! says which streams arrived complete and which did not.

use super::metrics;
use super::quota::Quotas;
use super::view::{Format, LiveView, Names};
use crate::shutdown::{Stop, Stopped};
use anyhow::{bail, Context};
use braid::session::store::{DirSink, Ending, FileQuotas, SessionOutcome};
use braid::session::{IncomingSession, ListenerConfig, SessionListener};
use braid_core::Duration;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

/// Flags of `braid serve`.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Example: accept one session on port 7000 and write its streams to ./in/:

  braid keygen site.key      # once; give the sources a copy securely
  braid serve --listen 0.0.0.0:7000 --key site.key --out in --once

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
    /// --key FILE (sources must hold it; required unless --open), --open,
    /// --no-encrypt.
    #[command(flatten)]
    pub access: super::access::AccessArgs,
    /// --max-connections N, --max-per-source N.
    #[command(flatten)]
    pub limits: super::limits::LimitArgs,
    /// --session-quota, --source-quota.
    #[command(flatten)]
    pub quota: super::quota::QuotaArgs,
    /// Serve one session, then exit (non-zero if a stream is incomplete).
    #[arg(long)]
    pub once: bool,
    /// Sessions served at once; a source beyond them is refused with
    /// "sink busy".
    #[arg(long, value_name = "N", default_value_t = braid_core::session::DEFAULT_MAX_SESSIONS)]
    pub max_sessions: usize,
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
    /// End a session once every path of it has been down this long (a
    /// link with outages, such as a cellular one, needs more than the
    /// default).
    #[arg(long, value_name = "DURATION", default_value_t = braid::session::PEER_TIMEOUT)]
    pub peer_timeout: Duration,
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
    if args.peer_timeout < Duration::from_millis(500) {
        bail!(
            "--peer-timeout {}: must be at least 500ms",
            args.peer_timeout
        );
    }
    let quotas = args.quota.resolve()?;
    let rt = super::session_runtime()?;
    rt.block_on(serve(listen, args, quotas))
}

async fn serve(listen: SocketAddr, args: ServeArgs, quotas: Quotas) -> anyhow::Result<()> {
    if let Some(addr) = args.metrics {
        metrics::install(addr)?;
    }
    let mut config = ListenerConfig::default();
    let access = args.access.resolve("braid serve", None)?;
    config.core.transport.psk = access.psk;
    config.core.transport.protection = access.protection;
    args.limits.apply(&mut config.core.transport)?;
    if args.max_sessions == 0 {
        bail!("--max-sessions must be at least 1");
    }
    config.max_sessions = args.max_sessions;
    config.peer_timeout = args.peer_timeout;
    config.core.quota = quotas.session;
    config.source_quota = quotas.source;
    // A stream is delivered once its file is written and synced: the
    // source hears nothing sooner (`Sink::keep`).
    config.core.confirm_streams = true;
    let mut listener =
        SessionListener::bind(listen, config).with_context(|| format!("listening on {listen}"))?;
    // SIGINT or SIGTERM ends every session the same way a lost source
    // does: files flushed and closed, streams reported (`crate::shutdown`).
    let (stop_tx, stop) = tokio::sync::watch::channel(None);
    let signal = crate::shutdown::requested();
    tokio::spawn(async move {
        let _ = stop_tx.send(Some(signal.await));
    });
    eprintln!("braid serve: listening on {}", listener.local_addr());
    let sink = Sink {
        dir: DirSink {
            out: args.out.clone(),
            force: args.force,
            files: FileQuotas::new(quotas.session_files, quotas.source_files),
        },
        format: args.format,
        every: args.every,
        stop: stop.clone(),
    };
    let mut stopped = stop.clone();
    if args.once {
        let incoming = tokio::select! {
            r = listener.accept() => r.context("accepting a session")?,
            s = stop_requested(&mut stopped) => {
                return Err(Stopped::new(s, "before any session").into());
            }
        };
        let report = sink.session(incoming).await?;
        let signal = *stopped.borrow();
        return match (report.verdict(), signal) {
            (Err(e), Some(s)) => Err(Stopped::new(s, e).into()),
            (verdict, _) => verdict.map_err(anyhow::Error::msg),
        };
    }
    let mut sessions = tokio::task::JoinSet::new();
    let mut failed = false;
    loop {
        tokio::select! {
            r = listener.accept() => {
                let incoming = r.context("accepting a session")?;
                let sink = sink.clone();
                sessions.spawn(async move { sink.session(incoming).await });
            }
            Some(done) = sessions.join_next(), if !sessions.is_empty() => {
                failed |= !session_ended(done);
            }
            _ = stop_requested(&mut stopped) => break,
        }
    }
    while let Some(done) = sessions.join_next().await {
        failed |= !session_ended(done);
    }
    let signal = *stopped.borrow();
    match signal {
        // Stopping is how a server ends; only streams left incomplete
        // make it a failure.
        Some(s) if failed => Err(Stopped::new(s, "some streams are incomplete").into()),
        _ if failed => bail!("some streams are incomplete"),
        _ => Ok(()),
    }
}

/// Returns the signal once one asked to stop (never, if the watcher is
/// gone).
async fn stop_requested(stop: &mut tokio::sync::watch::Receiver<Option<Stop>>) -> Stop {
    let seen = stop
        .wait_for(Option::is_some)
        .await
        .map(|s| s.unwrap_or(Stop::Interrupt));
    match seen {
        Ok(s) => s,
        Err(_) => std::future::pending().await,
    }
}

/// Reports how a session's task ended; whether every stream was complete.
fn session_ended(done: Result<anyhow::Result<SessionOutcome>, tokio::task::JoinError>) -> bool {
    let failure = match done {
        Ok(Ok(report)) => report.verdict().err().map(anyhow::Error::msg),
        Ok(Err(e)) => Some(e),
        Err(e) => Some(anyhow::anyhow!("a session's task failed: {e}")),
    };
    if let Some(e) = &failure {
        eprintln!("braid serve: {e:#}");
    }
    failure.is_none()
}

/// How each session is received and shown.
#[derive(Debug, Clone)]
struct Sink {
    dir: DirSink,
    format: Format,
    every: Duration,
    /// The signal that asked every session to stop, once one did.
    stop: tokio::sync::watch::Receiver<Option<Stop>>,
}

impl Sink {
    /// Receives one session (`braid::session::store`), showing it as it
    /// goes and each stream's ending after.
    async fn session(&self, incoming: IncomingSession) -> anyhow::Result<SessionOutcome> {
        let names = Names::default();
        let mut view = LiveView::new(self.format);
        let mut stop = self.stop.clone();
        let stop = async move { format!("stopped by {}", stop_requested(&mut stop).await.name()) };
        let outcome = self
            .dir
            .receive(incoming, self.every, stop, &mut |snap| {
                view.show(snap, &names);
                metrics::record_session(snap, &names);
            })
            .await?;
        view.detach();
        for s in &outcome.streams {
            let state = match &s.ending {
                Ending::Kept => "complete".to_string(),
                Ending::Refused(why) => format!("REFUSED ({why})"),
                Ending::Incomplete => "INCOMPLETE".to_string(),
            };
            let place = s
                .path
                .as_ref()
                .map_or(String::new(), |p| format!(" -> {}", p.display()));
            eprintln!(
                "braid serve: session {}: {}: {state}, {} messages, {} bytes{place}",
                outcome.session, s.name, s.messages, s.bytes
            );
        }
        Ok(outcome)
    }
}
