//! A sink that keeps each stream of a session in a file of its own
//! (`braid serve --out DIR`): a stream is named after itself (or
//! `stream-ID`), written as it arrives, flushed and synced when it ends,
//! and only then confirmed to the source as kept; a file that cannot be
//! created or written, or one past a files quota, refuses the stream, and
//! the source hears why. Without a folder, streams are counted only.
//!
//! Main items: [`DirSink`] ([`DirSink::receive`] one session to its end),
//! [`FileQuotas`], [`SessionOutcome`] with a [`StreamOutcome`] and its
//! [`Ending`] per stream. The listener should set
//! `SessionConfig::confirm_streams` so a stream counts as delivered only
//! once kept here.

use super::{IncomingSession, SinkItem};
use braid_core::session::{stream_name, CloseReason, Event, Snapshot};
use braid_core::{Duration, StreamId};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::future::Future;
use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use tokio::io::AsyncWriteExt;

/// Where and how a session's streams are kept.
#[derive(Debug, Clone, Default)]
pub struct DirSink {
    /// Write each stream to `out/NAME` (`None`: count only).
    pub out: Option<PathBuf>,
    /// Overwrite existing files.
    pub force: bool,
    /// How many files may be created.
    pub files: FileQuotas,
}

/// The files quotas: how many files one session, and one source while
/// the sink runs, may create. Clones share the per-source counts.
#[derive(Debug, Clone, Default)]
pub struct FileQuotas {
    per_session: Option<u64>,
    per_source: Option<u64>,
    /// Files each source has created (only while `per_source` is set).
    by_source: Arc<Mutex<HashMap<IpAddr, u64>>>,
}

impl FileQuotas {
    /// At most `per_session` files per session and `per_source` per
    /// source address while the sink runs (`None`: no bound).
    pub fn new(per_session: Option<u64>, per_source: Option<u64>) -> FileQuotas {
        FileQuotas {
            per_session,
            per_source,
            by_source: Arc::default(),
        }
    }

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
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionOutcome {
    /// The session id, 16 hex digits.
    pub session: String,
    /// Every stream the session had, in id order (then any the snapshot
    /// no longer listed).
    pub streams: Vec<StreamOutcome>,
    /// Why the session ended, when not by the source's close.
    pub ended: Option<String>,
}

/// One stream of a [`SessionOutcome`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamOutcome {
    /// Its name (its file's name).
    pub name: String,
    /// Messages received.
    pub messages: u64,
    /// Payload bytes received.
    pub bytes: u64,
    /// How it ended.
    pub ending: Ending,
    /// Its file, when it was kept or left incomplete in a folder.
    pub path: Option<PathBuf>,
}

impl SessionOutcome {
    /// `Ok` when every stream was kept; else which were not, and why the
    /// session ended, as one line.
    ///
    /// # Errors
    /// The streams not kept, named.
    pub fn verdict(&self) -> Result<(), String> {
        let incomplete: Vec<&str> = self
            .streams
            .iter()
            .filter(|s| s.ending != Ending::Kept)
            .map(|s| s.name.as_str())
            .collect();
        if incomplete.is_empty() {
            return Ok(());
        }
        let why = self
            .ended
            .as_deref()
            .map_or(String::new(), |e| format!(" ({e})"));
        Err(format!(
            "session {}: incomplete stream(s): {}{why}",
            self.session,
            incomplete.join(", ")
        ))
    }
}

/// How a stream ended at this sink.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ending {
    /// Every message written (and synced); the source was told.
    Kept,
    /// Refused, and why (the source was told).
    Refused(String),
    /// The session ended before the stream did.
    Incomplete,
}

impl DirSink {
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

    /// Receives one session to its end (the source closed it, it was
    /// lost, or `stop` finished: its output says why), then closes its
    /// files and reports each stream. `on_snapshot` sees the session
    /// every `every`.
    ///
    /// # Errors
    /// A file could not be flushed at the end.
    pub async fn receive(
        &self,
        mut incoming: IncomingSession,
        every: Duration,
        stop: impl Future<Output = String>,
        on_snapshot: &mut (dyn FnMut(&Snapshot) + Send),
    ) -> std::io::Result<SessionOutcome> {
        let session = format!("{:016x}", incoming.id().0);
        tracing::info!(%session, "session accepted");
        let mut outputs: BTreeMap<StreamId, Output> = BTreeMap::new();
        let mut files = 0;
        // Streams whose end arrived whole (`Event::StreamClosed`) and were
        // kept, and the last snapshot (the session may be gone when it
        // ends).
        let mut kept = BTreeSet::new();
        let mut last = None;
        let mut tick = tokio::time::interval(every.into());
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        tokio::pin!(stop);
        let mut interrupted = None;
        loop {
            tokio::select! {
                why = &mut stop => {
                    interrupted = Some(why);
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
                        on_snapshot(&snap);
                        last = Some(snap);
                    }
                }
            }
        }
        for o in outputs.values_mut() {
            if let Some(f) = &mut o.file {
                f.flush().await.map_err(|e| {
                    std::io::Error::new(e.kind(), format!("writing stream {}: {e}", o.name))
                })?;
            }
        }
        let snap = incoming.snapshot().await.ok().or(last);
        let ended = if interrupted.is_some() {
            interrupted
        } else {
            incoming.close_reason().and_then(|r| match r {
                CloseReason::Peer { .. } => None,
                other => Some(other.to_string()),
            })
        };
        let mut report = SessionOutcome {
            session,
            streams: Vec::new(),
            ended,
        };
        let ending = |id: &StreamId, o: Option<&Output>| match o.and_then(|o| o.refused.clone()) {
            Some(why) => Ending::Refused(why),
            None if kept.contains(id) => Ending::Kept,
            None => Ending::Incomplete,
        };
        let place = |name: &str, ending: &Ending| match (&self.out, ending) {
            (Some(dir), Ending::Kept | Ending::Incomplete) => Some(dir.join(name)),
            _ => None,
        };
        let mut seen = BTreeSet::new();
        if let Some(snap) = &snap {
            for s in &snap.streams {
                seen.insert(s.id);
                let o = outputs.get(&s.id);
                let (messages, bytes) = o.map_or((0, 0), |o| (o.messages, o.bytes));
                let name = stream_name(s.id, &s.config);
                let ending = ending(&s.id, o);
                report.streams.push(StreamOutcome {
                    path: place(&name, &ending),
                    name,
                    messages,
                    bytes,
                    ending,
                });
            }
        }
        for (id, o) in &outputs {
            if !seen.contains(id) {
                let ending = ending(id, Some(o));
                report.streams.push(StreamOutcome {
                    path: place(&o.name, &ending),
                    name: o.name.clone(),
                    messages: o.messages,
                    bytes: o.bytes,
                    ending,
                });
            }
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
        .map_or_else(
            || format!("stream-{}", id.0),
            |s| stream_name(s.id, &s.config),
        )
}
