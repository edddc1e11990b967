//! `braid serve`: the sink of sessions. Each stream of each session is
//! written to a file named after the stream in `--out DIR` (or discarded
//! and counted); at the end of a session it says which streams arrived
//! complete and which did not.

use super::metrics;
use super::quota::Quotas;
use super::view::{stream_name, Format, LiveView, Names};
use crate::shutdown::{Stop, Stopped};
use anyhow::{bail, Context};
use braid::session::{IncomingSession, ListenerConfig, SessionListener, SinkItem};
use braid_core::session::{CloseReason, Event};
use braid_core::{Duration, StreamId};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use tokio::io::AsyncWriteExt;

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
        out: args.out.clone(),
        force: args.force,
        format: args.format,
        every: args.every,
        stop: stop.clone(),
        files: Files {
            per_session: quotas.session_files,
            per_source: quotas.source_files,
            by_source: Arc::default(),
        },
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
            (Err(e), Some(s)) => Err(Stopped::new(s, format!("{e:#}")).into()),
            (verdict, _) => verdict,
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
fn session_ended(done: Result<anyhow::Result<Report>, tokio::task::JoinError>) -> bool {
    let failure = match done {
        Ok(Ok(report)) => report.verdict().err(),
        Ok(Err(e)) => Some(e),
        Err(e) => Some(anyhow::anyhow!("a session's task failed: {e}")),
    };
    if let Some(e) = &failure {
        eprintln!("braid serve: {e:#}");
    }
    failure.is_none()
}

/// How each session is received.
#[derive(Debug, Clone)]
struct Sink {
    out: Option<PathBuf>,
    force: bool,
    format: Format,
    every: Duration,
    /// The signal that asked every session to stop, once one did.
    stop: tokio::sync::watch::Receiver<Option<Stop>>,
    files: Files,
}

/// The files quotas: how many files one session, and one source while
/// the sink runs, may create in `--out`.
#[derive(Debug, Clone)]
struct Files {
    per_session: Option<u64>,
    per_source: Option<u64>,
    /// Files each source has created (only while `per_source` is set).
    by_source: Arc<Mutex<HashMap<IpAddr, u64>>>,
}

impl Files {
    /// Counts one more file of a session that has created `mine`, from
    /// `source`; or says which quota it would break.
    fn take(&self, mine: &mut u64, source: IpAddr) -> Result<(), String> {
        let plural = |n: u64| if n == 1 { "" } else { "s" };
        if let Some(n) = self.per_session {
            if *mine >= n {
                return Err(format!(
                    "quota: this sink writes at most {n} file{} per session",
                    plural(n)
                ));
            }
        }
        if let Some(n) = self.per_source {
            let mut by_source = self.by_source.lock().unwrap_or_else(|e| e.into_inner());
            let full = by_source.len() >= braid_core::session::MAX_SOURCES;
            if full && !by_source.contains_key(&source) {
                return Err(format!(
                    "quota: this sink keeps the files quotas of at most {} sources",
                    braid_core::session::MAX_SOURCES
                ));
            }
            let theirs = by_source.entry(source).or_default();
            if *theirs >= n {
                return Err(format!(
                    "quota: this sink writes at most {n} file{} per source",
                    plural(n)
                ));
            }
            *theirs += 1;
        }
        *mine += 1;
        Ok(())
    }
}

/// Where one stream goes: a file, or nowhere (counted).
#[derive(Debug)]
struct Output {
    name: String,
    file: Option<tokio::io::BufWriter<tokio::fs::File>>,
    messages: u64,
    bytes: u64,
    /// The stream was refused (its file could not be created or
    /// written), and why; what still arrives of it is dropped.
    refused: Option<String>,
    /// The file this sink created for it (removed if it is refused).
    created: Option<PathBuf>,
}

/// How one session ended, stream by stream.
#[derive(Debug)]
struct Report {
    session: String,
    /// Name, messages, bytes, how it ended.
    streams: Vec<(String, u64, u64, Ending)>,
    /// Why the session ended, when not by the source's close.
    ended: Option<String>,
}

impl Report {
    /// `Ok` when every stream arrived complete.
    fn verdict(&self) -> anyhow::Result<()> {
        let incomplete: Vec<&str> = self
            .streams
            .iter()
            .filter(|s| s.3 != Ending::Kept)
            .map(|s| s.0.as_str())
            .collect();
        if incomplete.is_empty() {
            return Ok(());
        }
        let why = self
            .ended
            .as_deref()
            .map_or(String::new(), |e| format!(" ({e})"));
        bail!(
            "session {}: incomplete stream(s): {}{why}",
            self.session,
            incomplete.join(", ")
        )
    }
}

/// How a stream ended at this sink.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Ending {
    /// Every message written (and synced); the source was told.
    Kept,
    /// Refused, and why (the source was told).
    Refused(String),
    /// The session ended before the stream did.
    Incomplete,
}

impl Sink {
    /// Opens `DIR/NAME` for a new stream (refusing to overwrite without
    /// --force), or counts it only. A file that cannot be created, or one
    /// past a files quota (`created`: this session's files so far),
    /// refuses the stream: the source hears why, and nothing else is lost.
    async fn open(
        &self,
        incoming: &IncomingSession,
        id: StreamId,
        name: String,
        created: &mut u64,
    ) -> Output {
        let mut out = Output {
            name,
            file: None,
            messages: 0,
            bytes: 0,
            refused: None,
            created: None,
        };
        let Some(dir) = &self.out else {
            return out;
        };
        if let Err(why) = self.files.take(created, incoming.source()) {
            refuse(incoming, id, &mut out, why).await;
            return out;
        }
        let path = dir.join(&out.name);
        let mut o = tokio::fs::OpenOptions::new();
        o.write(true);
        if self.force {
            o.create(true).truncate(true);
        } else {
            o.create_new(true);
        }
        match o.open(&path).await {
            Ok(f) => {
                out.file = Some(tokio::io::BufWriter::new(f));
                out.created = Some(path);
            }
            Err(e) => {
                let why = if e.kind() == std::io::ErrorKind::AlreadyExists {
                    format!(
                        "{} exists: not overwriting it (use --force)",
                        path.display()
                    )
                } else {
                    format!("cannot create {}: {e}", path.display())
                };
                refuse(incoming, id, &mut out, why).await;
            }
        }
        out
    }

    /// The stream has ended and every message of it was written: flush,
    /// sync, and tell the source it was kept (or refuse it when that fails).
    async fn keep(&self, incoming: &IncomingSession, id: StreamId, o: &mut Output) {
        if o.refused.is_some() {
            return;
        }
        if let Some(f) = &mut o.file {
            let synced = match f.flush().await {
                Ok(()) => f.get_ref().sync_data().await,
                Err(e) => Err(e),
            };
            if let Err(e) = synced {
                let why = format!("writing {}: {e}", o.name);
                refuse(incoming, id, o, why).await;
                return;
            }
            o.file = None;
        }
        if let Err(e) = incoming.keep_stream(id).await {
            tracing::debug!(stream = %o.name, error = %e, "keeping a stream");
        }
    }

    /// Receives one session to its end (the source closed it, or it was
    /// lost), then closes its files and reports each stream.
    async fn session(&self, mut incoming: IncomingSession) -> anyhow::Result<Report> {
        let session = format!("{:016x}", incoming.id().0);
        tracing::info!(%session, "session accepted");
        let names = Names::default();
        let mut view = LiveView::new(self.format);
        let mut outputs: BTreeMap<StreamId, Output> = BTreeMap::new();
        let mut files = 0;
        // Streams whose end arrived whole (`Event::StreamClosed`) and were
        // kept, and the last snapshot (the session may be gone when it
        // ends).
        let mut kept = BTreeSet::new();
        let mut last = None;
        let mut tick = tokio::time::interval(self.every.into());
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        let mut stop = self.stop.clone();
        let mut interrupted = None;
        loop {
            tokio::select! {
                s = stop_requested(&mut stop) => {
                    interrupted = Some(s);
                    break;
                }
                item = incoming.next_item() => match item {
                    None => break,
                    Some(SinkItem::Message(m)) => {
                        let o = match outputs.entry(m.stream) {
                            std::collections::btree_map::Entry::Occupied(e) => e.into_mut(),
                            std::collections::btree_map::Entry::Vacant(e) => {
                                let name = stream_name_of(&incoming, m.stream).await;
                                e.insert(self.open(&incoming, m.stream, name, &mut files).await)
                            }
                        };
                        if o.refused.is_some() {
                            continue;
                        }
                        o.messages += 1;
                        o.bytes += m.data.len() as u64;
                        if let Some(f) = &mut o.file {
                            if let Err(e) = f.write_all(&m.data).await {
                                let why = format!("writing {}: {e}", o.name);
                                refuse(&incoming, m.stream, o, why).await;
                            }
                        }
                    }
                    // A stream's end comes after its last message: every
                    // message of it is written by now.
                    Some(SinkItem::Event(Event::StreamClosed { stream })) => {
                        let o = match outputs.entry(stream) {
                            std::collections::btree_map::Entry::Occupied(e) => e.into_mut(),
                            std::collections::btree_map::Entry::Vacant(e) => {
                                // An empty stream: an empty file.
                                let name = stream_name_of(&incoming, stream).await;
                                e.insert(self.open(&incoming, stream, name, &mut files).await)
                            }
                        };
                        self.keep(&incoming, stream, o).await;
                        if o.refused.is_none() {
                            kept.insert(stream);
                        }
                    }
                    Some(SinkItem::Event(ev)) => tracing::debug!(?ev, "session event"),
                },
                _ = tick.tick() => {
                    if let Ok(snap) = incoming.snapshot().await {
                        view.show(&snap, &names);
                        metrics::record_session(&snap, &names);
                        last = Some(snap);
                    }
                }
            }
        }
        for o in outputs.values_mut() {
            if let Some(f) = &mut o.file {
                f.flush()
                    .await
                    .with_context(|| format!("writing stream {}", o.name))?;
            }
        }
        view.detach();
        let snap = incoming.snapshot().await.ok().or(last);
        let ended = if let Some(s) = interrupted {
            Some(format!("stopped by {}", s.name()))
        } else {
            incoming.close_reason().and_then(|r| match r {
                CloseReason::Peer { .. } => None,
                other => Some(other.to_string()),
            })
        };
        let mut report = Report {
            session,
            streams: Vec::new(),
            ended,
        };
        let ending = |id: &StreamId, o: Option<&Output>| match o.and_then(|o| o.refused.clone()) {
            Some(why) => Ending::Refused(why),
            None if kept.contains(id) => Ending::Kept,
            None => Ending::Incomplete,
        };
        let mut seen = BTreeSet::new();
        if let Some(snap) = &snap {
            for s in &snap.streams {
                seen.insert(s.id);
                let o = outputs.get(&s.id);
                let (messages, bytes) = o.map_or((0, 0), |o| (o.messages, o.bytes));
                report
                    .streams
                    .push((stream_name(s), messages, bytes, ending(&s.id, o)));
            }
        }
        for (id, o) in &outputs {
            if !seen.contains(id) {
                report
                    .streams
                    .push((o.name.clone(), o.messages, o.bytes, ending(id, Some(o))));
            }
        }
        for (name, messages, bytes, how) in &report.streams {
            let state = match how {
                Ending::Kept => "complete".to_string(),
                Ending::Refused(why) => format!("REFUSED ({why})"),
                Ending::Incomplete => "INCOMPLETE".to_string(),
            };
            let place = match (&self.out, how) {
                (Some(dir), Ending::Kept | Ending::Incomplete) => {
                    format!(" -> {}", dir.join(name).display())
                }
                _ => String::new(),
            };
            eprintln!(
                "braid serve: session {}: {name}: {state}, {messages} messages, {bytes} bytes{place}",
                report.session
            );
        }
        Ok(report)
    }
}

/// Refuses stream `id`: the source hears `why`, and the partial file
/// this sink created for it is removed (a file it found is never touched).
async fn refuse(incoming: &IncomingSession, id: StreamId, o: &mut Output, why: String) {
    tracing::warn!(stream = %o.name, %why, "refusing a stream");
    o.file = None;
    if let Some(path) = o.created.take() {
        if let Err(e) = tokio::fs::remove_file(&path).await {
            tracing::warn!(path = %path.display(), error = %e, "removing a refused stream's file");
        }
    }
    if let Err(e) = incoming.refuse_stream(id, &why).await {
        tracing::debug!(stream = %o.name, error = %e, "refusing a stream");
    }
    o.refused = Some(why);
}

/// The name a stream's file gets: its own, or `stream-ID`.
async fn stream_name_of(incoming: &IncomingSession, id: StreamId) -> String {
    incoming
        .snapshot()
        .await
        .ok()
        .and_then(|s| s.streams.into_iter().find(|s| s.id == id))
        .map_or_else(|| format!("stream-{}", id.0), |s| stream_name(&s))
}
