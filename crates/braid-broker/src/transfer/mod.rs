//! Transfers bound to a reservation: the client side of seed 004 §4–6.
//! A pipe transfer paced at a broker's reservation ([`send_on_reservation`],
//! `braid send --reservation ID`), and a deadline transfer over a premium
//! reservation and a scavenger part ([`deadline`], `braid send
//! --deadline`). Both drive [`braid::pipe`] with the broker's [`Client`].
//!
//! [`send_on_reservation`] fetches the reservation and refuses, in one
//! line, one that is unknown or someone else's (the broker answers both
//! with 404), not committed, finished, or not started yet (unless
//! `wait_start`, which waits for its start). It provisions the
//! reservation if it is released and releases it at the end if it
//! provisioned it. The pace is the pipe's rate bucket, its rate fed
//! through a `watch` channel by [`follow`], which reads the broker's
//! server-sent events: a foreground reservation's committed rate (a modify
//! committed while sending changes the pace) or a background
//! reservation's share (every new share changes the pace). With a rate
//! cap as well (`SendConfig::rate`), the pace is the smaller of the cap
//! and the reservation's rate (seed 004 Fig. 5: a 32 Mbit/s flow on a 36
//! Mbit/s reservation). Each change is told to the [`Notes`] as one line.
//!
//! Main items: [`send_on_reservation`], [`deadline::send_with_deadline`],
//! [`usable`], [`follow`], [`reserved_rate`], [`capped`],
//! [`TransferError`], [`Notes`].

pub mod deadline;

use crate::client::{ClientError, Events};
use crate::owner::Action;
use crate::types::ReservationView;
use crate::{clock, Client};
use braid::pipe::{self, PipeError, Progress, SendConfig, SendReport};
use braid_core::Bandwidth;
use std::io::Read;
use std::sync::Arc;
use tokio::sync::watch;

/// Where a transfer's lines go (what changed and why: a new pace, a
/// lowered reservation, a lost event stream). `braid send` prints them on
/// stderr; an application may log them.
pub type Notes = Arc<dyn Fn(&str) + Send + Sync>;

/// Why a transfer bound to a reservation did not run or did not finish.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TransferError {
    /// The reservation cannot carry the transfer, or the deadline cannot
    /// be met (one line saying why, before anything is sent).
    #[error("{0}")]
    Refused(String),
    /// A call to the broker failed.
    #[error("{what}: {source}")]
    Broker {
        /// What was being done.
        what: String,
        /// The broker's or the connection's error.
        source: ClientError,
    },
    /// The transfer itself failed.
    #[error("braid send: {0}")]
    Pipe(#[from] PipeError),
}

fn broker(what: impl Into<String>) -> impl FnOnce(ClientError) -> TransferError {
    let what = what.into();
    move |source| TransferError::Broker { what, source }
}

/// The rate a reservation gives its holder now: a foreground one's
/// committed rate, a background one's current share (zero while it has
/// none: the sender then waits for one).
pub fn reserved_rate(r: &ReservationView) -> Bandwidth {
    if r.class == "background" {
        r.share
            .as_deref()
            .and_then(|s| s.parse().ok())
            .unwrap_or(Bandwidth::ZERO)
    } else {
        r.committed
            .as_ref()
            .map_or(Bandwidth::ZERO, |v| Bandwidth::from_bps(v.rate_bps))
    }
}

/// Fetches reservation `id` and checks that it can carry a transfer now:
/// committed, not finished, started (or, with `wait_start`, waits for its
/// start).
///
/// # Errors
/// [`TransferError::Refused`] naming what is wrong with the reservation,
/// [`TransferError::Broker`] when the broker cannot be asked.
pub async fn usable(
    client: &Client,
    id: u64,
    wait_start: bool,
    notes: &Notes,
) -> Result<ReservationView, TransferError> {
    let refused = |m: String| Err(TransferError::Refused(m));
    let r = match client.show(id).await {
        Ok(r) => r,
        Err(ClientError::Api { status, .. }) if status.as_u16() == 404 => {
            return refused(format!(
                "reservation {id}: not found at the broker (unknown, or not yours)"
            ))
        }
        Err(e) => return Err(broker(format!("reservation {id}"))(e)),
    };
    if r.life != "created" {
        return refused(format!(
            "reservation {id} is {} (life): it can carry no transfer",
            r.life
        ));
    }
    let Some(v) = r.committed.as_ref().filter(|_| r.state == "committed") else {
        return refused(format!(
            "reservation {id} is {}, not committed: commit it first (braid reserve commit {id})",
            r.state
        ));
    };
    let now = clock::now();
    let (Some(start), Some(end)) = (clock::parse(&v.start, now), clock::parse(&v.end, now)) else {
        return refused(format!(
            "reservation {id}: the broker sent times that do not parse"
        ));
    };
    if now >= end {
        return refused(format!("reservation {id} ended at {}", v.end));
    }
    if now < start {
        let wait = start.saturating_duration_since(now);
        if !wait_start {
            return refused(format!(
                "reservation {id} starts at {} (in {:.0} s): pass --wait-start to wait for it",
                v.start,
                wait.as_secs_f64()
            ));
        }
        notes(&format!(
            "reservation {id} starts at {}: waiting {:.0} s",
            v.start,
            wait.as_secs_f64()
        ));
        tokio::time::sleep(wait.into()).await;
        // The reservation may have changed while waiting: look again.
        return Box::pin(usable(client, id, false, notes)).await;
    }
    Ok(r)
}

/// The pace for a reservation's `rate` under an optional rate cap
/// (`braid send --rate`):
/// the smaller of the two, and the reason to print beside it.
pub fn capped(rate: Bandwidth, cap: Option<Bandwidth>, background: bool) -> (Bandwidth, String) {
    let why = if background { "share" } else { "reserved rate" };
    match cap {
        Some(c) if c < rate => (c, format!("--rate, below the {why} {rate}")),
        _ => (rate, why.to_string()),
    }
}

/// Feeds `pace` from the broker's events about reservation `id`: its
/// committed rate (foreground) or its share (background), capped by
/// `cap`; one line to `notes` per change. Ends when the event stream
/// ends or `pace` has no receiver.
pub async fn follow(
    mut events: Events,
    id: u64,
    background: bool,
    cap: Option<Bandwidth>,
    pace: watch::Sender<Bandwidth>,
    notes: Notes,
) {
    loop {
        let ev = match events.next().await {
            Ok(Some(ev)) => ev,
            Ok(None) | Err(_) => {
                notes(&format!(
                    "reservation {id}: lost the broker's event stream; the pace stays {}",
                    *pace.borrow()
                ));
                return;
            }
        };
        if ev.id != id {
            continue;
        }
        let view = ev.reservation.as_ref();
        if let Some(r) = view.filter(|r| r.life != "created") {
            notes(&format!(
                "reservation {id} is {} while sending; the pace stays {}",
                r.life,
                *pace.borrow()
            ));
        }
        let new = if background {
            ev.share
                .as_deref()
                .or_else(|| view.and_then(|r| r.share.as_deref()))
                .and_then(|s| s.parse::<Bandwidth>().ok())
        } else {
            view.filter(|r| r.state == "committed" && r.life == "created")
                .map(reserved_rate)
                .filter(|r| *r > Bandwidth::ZERO)
        };
        let Some(new) = new else { continue };
        let (new, why) = capped(new, cap, background);
        let changed = pace.send_if_modified(|r| {
            let differs = *r != new;
            *r = new;
            differs
        });
        if changed {
            notes(&format!("reservation {id}: pace {new} ({why})"));
        }
        if pace.is_closed() {
            return;
        }
    }
}

/// Runs a transfer on reservation `id`: checks it, provisions it,
/// follows its rate while sending, releases it if this side provisioned
/// it.
///
/// # Errors
/// An unusable reservation ([`TransferError::Refused`], one line), a
/// broker failure before sending, the transfer's failure.
pub async fn send_on_reservation(
    client: &Client,
    id: u64,
    wait_start: bool,
    input: Box<dyn Read + Send>,
    mut cfg: SendConfig,
    observer: &mut (dyn FnMut(&Progress) + Send),
    notes: Notes,
) -> Result<SendReport, TransferError> {
    usable(client, id, wait_start, &notes).await?;
    // Subscribe before provisioning: a background share announced at the
    // provision is not missed.
    let events = client
        .events()
        .await
        .map_err(broker("subscribing to the broker's events"))?;
    let r = client
        .show(id)
        .await
        .map_err(broker(format!("reservation {id}")))?;
    let provisioned_here = r.provision != "provisioned";
    let r = if provisioned_here {
        client
            .act(id, Action::Provision)
            .await
            .map_err(broker(format!("provisioning reservation {id}")))?
    } else {
        r
    };
    let background = r.class == "background";
    // A rate cap caps the reservation's pace: the smaller one wins.
    let cap = cfg.rate.take();
    let (rate, why) = capped(reserved_rate(&r), cap, background);
    notes(&format!("reservation {id}: pace {rate} ({why})"));
    let (pace_tx, pace_rx) = watch::channel(rate);
    let follower = tokio::spawn(follow(events, id, background, cap, pace_tx, notes.clone()));
    cfg.rate_updates = Some(pace_rx);
    let res = pipe::send_async(input, cfg, observer).await;
    follower.abort();
    if provisioned_here {
        if let Err(e) = client.act(id, Action::Release).await {
            notes(&format!("releasing reservation {id}: {e}"));
        }
    }
    Ok(res?)
}

#[cfg(test)]
mod tests {
    use super::capped;
    use braid_core::Bandwidth;

    fn mbit(m: u64) -> Bandwidth {
        Bandwidth::from_bps(m * 1_000_000)
    }

    #[test]
    fn the_smaller_of_rate_and_reservation_wins() {
        // Seed 004 Fig. 5: 32 Mbit/s sent on a 36 Mbit/s reservation.
        let (pace, why) = capped(mbit(36), Some(mbit(32)), false);
        assert_eq!(pace, mbit(32));
        assert!(
            why.contains("--rate") && why.contains("reserved rate"),
            "{why}"
        );
        // A --rate above the reservation does not raise the pace.
        assert_eq!(capped(mbit(36), Some(mbit(40)), false).0, mbit(36));
        assert_eq!(
            capped(mbit(36), None, false),
            (mbit(36), "reserved rate".into())
        );
        // A background share shrinking below --rate takes over.
        assert_eq!(
            capped(mbit(8), Some(mbit(20)), true),
            (mbit(8), "share".into())
        );
        assert_eq!(capped(mbit(40), Some(mbit(20)), true).0, mbit(20));
    }
}
