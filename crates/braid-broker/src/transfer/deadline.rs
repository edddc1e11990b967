//! A deadline transfer over a premium reservation and a scavenger part in
//! parallel (`braid send --deadline 200s FILE`; seed 004 §6, Fig. 6–7).
//!
//! The plan, as in the seed: the premium rate is the one that delivers the
//! whole file within the deadline less a safety margin
//! ([`needed_rate`]; the seed's 280 MB in 200 s with a 10 s margin gives
//! its 12 Mbit/s). If the resource's availability over the deadline is
//! below it, the transfer is refused before anything is sent. Otherwise a
//! foreground reservation is created, committed and provisioned up to the
//! deadline. The pipe's first [`Deadline::premium_connections`] connections are the
//! premium part, paced together at the reserved rate; the others are the
//! scavenger part, unpaced (or capped by [`Deadline::scavenger_rate`]) and mapped by
//! the network to whatever class it gives them. Each time the scavenger
//! part has delivered another [`Deadline::update_every`] bytes (the seed's 25 MB),
//! the rate still needed for the rest is computed again from the bytes the
//! receiver acknowledged and the time left; when it is at least
//! [`MIN_STEP`] lower, the pace is lowered first and then the reservation
//! (modify + commit), so the pace never exceeds the reservation and the
//! reservation never drops below what the rest needs. At the end the
//! reservation is released and terminated, and the finish time is reported
//! beside the deadline.

use super::{broker, Notes, TransferError};
use crate::owner::Action;
use crate::types::{CreateRequest, ModifyRequest};
use crate::{clock, Client};
use braid::pipe::{self, Progress, SendConfig, SendReport};
use braid_core::{Bandwidth, Duration, Instant};
use std::io::Read;
use tokio::sync::watch;

/// The smallest cut worth a reservation update: a new rate at least 5 %
/// below the one in force.
pub const MIN_STEP: f64 = 0.05;

/// What a deadline transfer is asked to do.
#[derive(Debug, Clone, PartialEq)]
pub struct Deadline {
    /// Deliver the input within this time.
    pub within: Duration,
    /// The broker's resource to reserve the premium rate on.
    pub resource: String,
    /// Safety margin: the share of the time left kept spare when computing
    /// the premium rate (a fraction, below 1).
    pub margin: f64,
    /// Recompute and lower the reservation each time the scavenger part
    /// has delivered this many more bytes (the seed's 25 MB).
    pub update_every: u64,
    /// How many connections form the premium part (paced at the reserved
    /// rate); the others are the scavenger part.
    pub premium_connections: usize,
    /// Cap on the scavenger part's total rate (`None`: unpaced).
    pub scavenger_rate: Option<Bandwidth>,
}

/// The rate that delivers `bytes` within `time_left` with `margin` (a
/// fraction) of that time kept spare, rounded up to a whole kbit/s;
/// `None` when no time is left. Zero bytes need zero.
pub fn needed_rate(bytes: u64, time_left: Duration, margin: f64) -> Option<Bandwidth> {
    let secs = time_left.as_secs_f64() * (1.0 - margin);
    if secs <= 0.0 {
        return None;
    }
    let kbit = (bytes as f64 * 8.0 / secs / 1e3).ceil();
    Some(Bandwidth::from_bps_f64(kbit * 1e3))
}

/// What a deadline transfer reports beside the pipe's own summary.
#[derive(Debug, Clone, serde::Serialize)]
pub struct DeadlineSummary {
    /// The deadline, seconds after the start.
    pub deadline_seconds: f64,
    /// When the receiver confirmed the last byte, seconds after the start.
    pub finish_seconds: f64,
    /// Whether that was within the deadline.
    pub met: bool,
    /// The reservation.
    pub reservation: u64,
    /// The first reserved rate, bits per second.
    pub initial_rate_bps: u64,
    /// The last reserved rate, bits per second.
    pub final_rate_bps: u64,
    /// Each reservation update: (seconds after the start, new rate in
    /// bits per second).
    pub lowered: Vec<(f64, u64)>,
    /// Bytes delivered over the premium connections.
    pub premium_bytes: u64,
    /// Bytes delivered over the scavenger connections.
    pub scavenger_bytes: u64,
}

/// The pipe's summary and the deadline's, as one JSON object.
#[derive(Debug, Clone, serde::Serialize)]
pub struct DeadlineReport {
    /// The pipe's summary.
    #[serde(flatten)]
    pub send: SendReport,
    /// The deadline's.
    pub deadline: DeadlineSummary,
}

/// What the re-planner needs.
struct Plan {
    client: Client,
    id: u64,
    size: u64,
    start: Instant,
    end: Instant,
    margin: f64,
    update_every: u64,
    premium: usize,
    notes: Notes,
}

/// Runs a deadline transfer of `size` bytes from `input`.
///
/// # Errors
/// [`TransferError::Refused`] for a deadline that cannot be met or a plan
/// that cannot work (before sending), [`TransferError::Broker`] for broker
/// failures before sending, [`TransferError::Pipe`] for the transfer's.
pub async fn send_with_deadline(
    client: &Client,
    flags: &Deadline,
    size: u64,
    input: Box<dyn Read + Send>,
    mut cfg: SendConfig,
    observer: &mut (dyn FnMut(&Progress) + Send),
    notes: Notes,
) -> Result<DeadlineReport, TransferError> {
    let deadline = flags.within;
    let resource = flags.resource.clone();
    let refused = |m: String| Err(TransferError::Refused(m));
    if flags.premium_connections >= cfg.connections {
        return refused(format!(
            "a deadline transfer needs more connections (now {}) than premium connections ({}): the rest are the scavenger part",
            cfg.connections,
            flags.premium_connections
        ));
    }
    if size == 0 {
        return refused("the input is empty, there is nothing to reserve for".into());
    }
    let start = clock::now();
    let end = start + deadline;
    let margin_pct = flags.margin * 100.0;
    let Some(need) = needed_rate(size, deadline, flags.margin).filter(|r| *r > Bandwidth::ZERO)
    else {
        return refused("the deadline must leave time after the margin".into());
    };
    let free = client
        .availability(&resource, "now", &clock::format(end))
        .await
        .map_err(broker(format!(
            "asking the broker what is free on {resource}"
        )))?;
    if free.max_free_bps < need.bps() {
        return refused(format!(
            "the deadline cannot be met: {size} bytes in {deadline} need {need} on {resource} (with a {margin_pct:.0} % margin) but only {} is free until then",
            Bandwidth::from_bps(free.max_free_bps)
        ));
    }
    let created = client
        .create(&CreateRequest {
            resource: Some(resource.clone()),
            rate: Some(format!("{}bit", need.bps())),
            start: Some("now".into()),
            end: Some(clock::format(end)),
            class: Some("foreground".into()),
            ..CreateRequest::default()
        })
        .await
        .map_err(broker(format!("reserving {need} on {resource}")))?;
    let id = created.id;
    let plan = Plan {
        client: client.clone(),
        id,
        size,
        start,
        end,
        margin: flags.margin,
        update_every: flags.update_every.max(1),
        premium: flags.premium_connections,
        notes: notes.clone(),
    };
    let res = run(&plan, need, flags, input, &mut cfg, observer).await;
    // Whatever happened, give the capacity back.
    let _ = client.act(id, Action::Release).await;
    if let Err(e) = client.terminate(id).await {
        notes(&format!("terminating reservation {id}: {e}"));
    }
    let (report, lowered, premium_bytes, scavenger_bytes) = res?;
    let finish = report.seconds;
    let summary = DeadlineSummary {
        deadline_seconds: deadline.as_secs_f64(),
        finish_seconds: finish,
        met: finish <= deadline.as_secs_f64(),
        reservation: id,
        initial_rate_bps: need.bps(),
        final_rate_bps: lowered.last().map_or(need.bps(), |l| l.1),
        lowered,
        premium_bytes,
        scavenger_bytes,
    };
    notes(&format!(
        "deadline {deadline}: finished in {finish:.1} s ({}); reservation {id}: {need} → {}, lowered {} times, terminated",
        if summary.met { "met" } else { "MISSED" },
        Bandwidth::from_bps(summary.final_rate_bps),
        summary.lowered.len()
    ));
    Ok(DeadlineReport {
        send: report,
        deadline: summary,
    })
}

/// Per-part bytes and the reservation updates made.
type Outcome = (SendReport, Vec<(f64, u64)>, u64, u64);

/// Commits and provisions the held reservation, then sends while the
/// re-planner lowers it.
async fn run(
    plan: &Plan,
    need: Bandwidth,
    flags: &Deadline,
    input: Box<dyn Read + Send>,
    cfg: &mut SendConfig,
    observer: &mut (dyn FnMut(&Progress) + Send),
) -> Result<Outcome, TransferError> {
    let id = plan.id;
    plan.client
        .act(id, Action::Commit)
        .await
        .map_err(broker(format!("committing reservation {id}")))?;
    plan.client
        .act(id, Action::Provision)
        .await
        .map_err(broker(format!("provisioning reservation {id}")))?;
    (plan.notes)(&format!(
        "deadline: reserved {need} (reservation {id}) for {} bytes; {} premium connection(s), {} scavenger",
        plan.size,
        plan.premium,
        cfg.connections - plan.premium
    ));
    let (pace_tx, pace_rx) = watch::channel(need);
    let (prog_tx, prog_rx) = watch::channel(None::<Progress>);
    let mut send_cfg = cfg.clone();
    send_cfg.rate = Some(need);
    send_cfg.rate_updates = Some(pace_rx);
    send_cfg.paced_connections = Some(plan.premium);
    send_cfg.rest_rate = flags.scavenger_rate;
    let replanner = replan(plan, need, prog_rx, pace_tx);
    let mut last = None;
    let sending = async {
        let r = pipe::send_async(input, send_cfg, &mut |p| {
            observer(p);
            last = Some(p.clone());
            prog_tx.send_replace(Some(p.clone()));
        })
        .await;
        // The re-planner ends when the progress channel closes.
        drop(prog_tx);
        r
    };
    let (res, lowered) = tokio::join!(sending, replanner);
    let report = res?;
    let per_conn = last.map(|p| p.per_conn).unwrap_or_default();
    let premium: u64 = per_conn.iter().take(plan.premium).sum();
    let scavenger: u64 = per_conn.iter().skip(plan.premium).sum();
    Ok((report, lowered, premium, scavenger))
}

/// Lowers the pace and then the reservation each time the scavenger part
/// has delivered another `update_every` bytes and the rest needs at least
/// [`MIN_STEP`] less; returns the updates made.
async fn replan(
    plan: &Plan,
    need: Bandwidth,
    mut progress: watch::Receiver<Option<Progress>>,
    pace: watch::Sender<Bandwidth>,
) -> Vec<(f64, u64)> {
    let mut current = need;
    let mut counted = 0u64;
    let mut lowered = Vec::new();
    while progress.changed().await.is_ok() {
        let Some(p) = progress.borrow_and_update().clone() else {
            continue;
        };
        let scavenger: u64 = p.per_conn.iter().skip(plan.premium).sum();
        if scavenger < counted + plan.update_every {
            continue;
        }
        counted = scavenger;
        let remaining = plan.size.saturating_sub(p.bytes);
        let now = clock::now();
        let left = plan.end.saturating_duration_since(now);
        let Some(new) = needed_rate(remaining, left, plan.margin) else {
            continue;
        };
        // The broker refuses a zero rate: keep a token one.
        let new = new.max(Bandwidth::from_kbps(1));
        if new.bps() as f64 > current.bps() as f64 * (1.0 - MIN_STEP) {
            continue;
        }
        // Pace first, so the pace never exceeds the reservation.
        pace.send_replace(new);
        let modify = ModifyRequest {
            rate: Some(format!("{}bit", new.bps())),
            end: None,
        };
        let updated = async {
            plan.client.modify(plan.id, &modify).await?;
            plan.client.act(plan.id, Action::Commit).await
        }
        .await;
        match updated {
            Ok(_) => {
                let at = now.saturating_duration_since(plan.start).as_secs_f64();
                (plan.notes)(&format!(
                    "deadline: {remaining} bytes left, {:.1} s to go: reservation {} lowered {current} → {new}",
                    left.as_secs_f64(),
                    plan.id
                ));
                lowered.push((at, new.bps()));
                current = new;
            }
            Err(e) => {
                (plan.notes)(&format!(
                    "deadline: lowering reservation {} to {new}: {e}; it stays {current}",
                    plan.id
                ));
                pace.send_replace(current);
            }
        }
    }
    lowered
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_seeds_numbers() {
        // 280 MB in 200 s less a 10 s margin (5 %): about 11.8 Mbit/s,
        // which the seed rounds to 12 Mbit/s.
        let r = needed_rate(280_000_000, Duration::from_secs(200), 0.05).unwrap();
        assert!((r.mbps() - 11.79).abs() < 0.01, "{r}");
        assert_eq!(needed_rate(1, Duration::ZERO, 0.1), None);
        assert_eq!(
            needed_rate(0, Duration::from_secs(1), 0.1),
            Some(Bandwidth::ZERO)
        );
    }
}
