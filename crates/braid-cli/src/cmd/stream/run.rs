//! The running source session: a task per stream feeding its stream
//! (`braid::session::feed`), upcalls answered as `--on-infeasible` says, the view,
//! JSON line and metrics each period, and the end (sources done or
//! `--duration` passed: every message delivered, then close).
//!
//! A sink that dies ends the session with the runtime's
//! [`CloseReason::PeerLost`] (every path down for its `peer_timeout`,
//! 3 s): the source exits non-zero naming the sink.

use super::config::{OnInfeasible, Plan};
use crate::cmd::access::Access;
use crate::cmd::metrics;
use crate::cmd::view::{unmet_text, Format, LiveView, Names};
use anyhow::{anyhow, bail};
use braid::session::feed::{feed_stream, Fed, Feed, FeedError};
use braid::session::{PathConfig, Session, SessionConfig, SessionError};
use braid_core::scheduler::{BestAchievable, StreamSpec, UpcallAnswer, UpcallPolicy};
use braid_core::session::{CloseReason, Event};
use braid_core::{Duration, StreamId};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use tokio::task::{AbortHandle, JoinSet};

/// Where and how often the running session is shown.
#[derive(Debug, Clone, Copy)]
pub struct Output {
    /// Text (view / plain lines) or JSON lines.
    pub format: Format,
    /// Prometheus endpoint.
    pub metrics: Option<SocketAddr>,
    /// Refresh period.
    pub every: Duration,
}

/// Runs the session of `plan` on a tokio runtime of its own.
///
/// # Errors
/// Connecting failed, a stream could not be opened or fed, a guarantee
/// failed under `--on-infeasible fail`, or the session ended early.
pub fn session(
    plan: Plan,
    sources: Vec<Feed>,
    access: Access,
    out: Output,
    peer_timeout: Duration,
) -> anyhow::Result<()> {
    let rt = crate::cmd::session_runtime()?;
    rt.block_on(run(plan, sources, out, access, peer_timeout))
}

/// The sink went away or refused us: one clear line.
fn ended(to: SocketAddr, reason: &CloseReason) -> anyhow::Error {
    match reason {
        CloseReason::PeerLost(after) => anyhow!(
            "the sink at {to} stopped answering: every path has been down for {after} (sink killed or unreachable)"
        ),
        other => anyhow!("the session with the sink at {to} ended: {other}"),
    }
}

fn session_error(to: SocketAddr, e: SessionError) -> anyhow::Error {
    match e {
        SessionError::Closed(reason) => ended(to, &reason),
        other => anyhow::Error::from(other),
    }
}

/// Per-stream bookkeeping of the running session.
struct Streams {
    names: BTreeMap<StreamId, String>,
    producers: BTreeMap<StreamId, AbortHandle>,
}

impl Streams {
    fn name(&self, id: StreamId) -> String {
        self.names
            .get(&id)
            .cloned()
            .unwrap_or_else(|| format!("stream-{}", id.0))
    }
}

async fn run(
    plan: Plan,
    sources: Vec<Feed>,
    out: Output,
    access: Access,
    peer_timeout: Duration,
) -> anyhow::Result<()> {
    if let Some(addr) = out.metrics {
        metrics::install(addr)?;
    }
    let paths = plan
        .paths
        .iter()
        .map(|p| p.parse::<PathConfig>())
        .collect::<Result<Vec<_>, _>>()?;
    let mut config = SessionConfig {
        paths,
        peer_timeout,
        ..SessionConfig::default()
    };
    config.core.scheduler = plan.scheduler;
    config.core.transport.psk = access.psk;
    config.core.transport.protection = access.protection;
    let to = plan.to;
    let mut session = Session::connect(to, config)
        .await
        .map_err(|e| session_error(to, e))?;
    tracing::info!(session = ?session.id(), %to, "connected");
    let names = Names::from_routes(session.paths());

    let mut streams = Streams {
        names: BTreeMap::new(),
        producers: BTreeMap::new(),
    };
    let mut tasks: JoinSet<(StreamId, Result<Fed, FeedError>)> = JoinSet::new();
    for (plan_stream, source) in plan.streams.iter().zip(sources) {
        let stream = session
            .open_stream(plan_stream.config.clone())
            .await
            .map_err(|e| session_error(to, e))?;
        let id = stream.id();
        let name = plan_stream
            .config
            .name
            .clone()
            .unwrap_or_else(|| format!("stream-{}", id.0));
        streams.names.insert(id, name);
        let stop = plan.duration;
        // Paced sources stop at `--duration`; files and stdin are sent
        // whole.
        let handle = tasks.spawn(async move { (id, feed_stream(source, stream, stop).await) });
        streams.producers.insert(id, handle);
    }

    let mut view = LiveView::new(out.format);
    let mut tick = tokio::time::interval(out.every.into());
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut sent: BTreeMap<StreamId, Fed> = BTreeMap::new();
    let mut refused: BTreeMap<StreamId, String> = BTreeMap::new();
    let mut interrupted = None;
    let stop = crate::shutdown::requested();
    tokio::pin!(stop);
    while !tasks.is_empty() {
        tokio::select! {
            ev = session.next_event() => match ev {
                Some(Event::GuaranteeUnmet { stream, spec, best }) => {
                    upcall(&session, &mut streams, plan.on_infeasible, stream, &spec, &best).await?;
                    // Its line is printed below the view, which redraws under it.
                    view.detach();
                }
                Some(Event::PathDown { path, resent }) => {
                    tracing::warn!(path = %names.paths.get(&path).cloned().unwrap_or_default(), resent, "path down");
                }
                Some(Event::PathUp { path }) => {
                    tracing::info!(path = %names.paths.get(&path).cloned().unwrap_or_default(), "path up");
                }
                Some(Event::Closed(reason)) => return Err(ended(to, &reason)),
                Some(_) => {}
                None => {
                    let reason = session.close_reason();
                    return Err(reason.map_or_else(|| anyhow!("the session ended"), |r| ended(to, &r)));
                }
            },
            _ = tick.tick() => show(&session, &mut view, &names).await,
            done = tasks.join_next() => match done {
                Some(Ok((id, Ok(p)))) => {
                    streams.producers.remove(&id);
                    sent.insert(id, p);
                }
                Some(Ok((id, Err(e)))) => {
                    streams.producers.remove(&id);
                    if let Some(reason) = e.refusal() {
                        let reason = reason.to_string();
                        // That stream is over; the others go on.
                        refused.insert(id, reason);
                        continue;
                    }
                    if let Some(reason) = session.close_reason() {
                        return Err(ended(to, &reason));
                    }
                    return Err(anyhow::Error::new(e).context(format!("stream {}", streams.name(id))));
                }
                // Aborted by `--on-infeasible drop`.
                Some(Err(e)) if e.is_cancelled() => {}
                Some(Err(e)) => return Err(anyhow!("a stream's producer failed: {e}")),
                None => {}
            },
            s = &mut stop => {
                interrupted = Some(s);
                tasks.abort_all();
                break;
            }
        }
    }
    show(&session, &mut view, &names).await;
    view.detach();
    if let Some(s) = interrupted {
        eprintln!(
            "braid: {}: closing the session (what was sent is delivered first)",
            s.name()
        );
    }
    let final_snap = session.snapshot().await.ok();
    // Closing waits until what was sent is delivered; a signal during it
    // (the first, if the streams ended by themselves) stops the wait.
    let closed = if interrupted.is_some() {
        session.close().await
    } else {
        tokio::select! {
            r = session.close() => r,
            s = &mut stop => {
                return Err(crate::shutdown::Stopped::new(s, "closing the session before all was delivered").into());
            }
        }
    };
    closed.map_err(|e| session_error(to, e))?;
    if out.format == Format::Text {
        for (id, name) in &streams.names {
            match (sent.get(id), refused.get(id)) {
                (_, Some(why)) => eprintln!("braid: {name}: REFUSED by the sink: {why}"),
                (Some(p), None) => eprintln!(
                    "braid: {name}: {} messages, {} bytes sent and delivered",
                    p.messages, p.bytes
                ),
                (None, None) => eprintln!("braid: {name}: stopped early"),
            }
        }
    }
    if let Some(s) = final_snap {
        metrics::record_session(&s, &names);
    }
    if let Some(s) = interrupted {
        return Err(crate::shutdown::Stopped::new(s, "the streams had more to send").into());
    }
    if !refused.is_empty() {
        let names: Vec<String> = refused.keys().map(|id| streams.name(*id)).collect();
        bail!(
            "the sink refused {} of {} streams: {}",
            refused.len(),
            streams.names.len(),
            names.join(", ")
        );
    }
    Ok(())
}

/// Takes a snapshot and shows it (a failed snapshot means the session is
/// ending; the event loop reports why).
async fn show(session: &Session, view: &mut LiveView, names: &Names) {
    if let Ok(snap) = session.snapshot().await {
        view.show(&snap, names);
        metrics::record_session(&snap, names);
    }
}

/// Answers one upcall as the policy says (braid-core's `UpcallPolicy`),
/// and says so.
async fn upcall(
    session: &Session,
    streams: &mut Streams,
    policy: OnInfeasible,
    stream: StreamId,
    spec: &StreamSpec,
    best: &BestAchievable,
) -> anyhow::Result<()> {
    let name = streams.name(stream);
    let asked = braid_core::session::StreamConfig::new(*spec).to_string();
    let what = unmet_text(best);
    let Some(answer) = UpcallPolicy::from(policy).answer(spec, best) else {
        bail!("stream {name}: guarantee {asked} cannot be met ({what}); --on-infeasible fail")
    };
    match answer {
        UpcallAnswer::Close => {
            tracing::warn!(stream = %name, asked, best = %what, "dropping the stream");
            eprintln!("braid: stream {name}: guarantee {asked} cannot be met ({what}): dropped");
            if let Some(h) = streams.producers.remove(&stream) {
                h.abort();
            }
        }
        UpcallAnswer::Lower(l) => {
            let text = braid_core::session::StreamConfig::new(l).to_string();
            eprintln!("braid: stream {name}: guarantee {asked} cannot be met; lowered to {text}");
        }
        _ => eprintln!(
            "braid: stream {name}: guarantee {asked} cannot be met ({what}); running best effort"
        ),
    }
    session
        .answer_upcall(stream, answer)
        .await
        .map_err(anyhow::Error::from)
}
