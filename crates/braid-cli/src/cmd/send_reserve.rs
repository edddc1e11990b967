//! `braid send --reservation ID`: a pipe transfer paced at a broker's
//! reservation (issue 14 §3 "Senders"; seed 004 §4–5: an application that
//! reserved a rate sends at it, and a background flow follows the share
//! the reservation manager announces).
//!
//! The sender fetches the reservation with the `braid broker` client and
//! refuses, in one line, one that is unknown or someone else's (the broker
//! answers both with 404), not committed, finished, or not started yet
//! (unless `--wait-start`, which waits for its start with a progress line).
//! It provisions the reservation if it is released and releases it at the
//! end if it provisioned it. The pace is the pipe's `--rate` bucket, its
//! rate fed through a `watch` channel by [`follow`], which reads the
//! broker's server-sent events: a foreground reservation's committed rate
//! (a modify committed while sending changes the pace) or a background
//! reservation's share (every new share changes the pace). With `--rate`
//! as well, the pace is the smaller of `--rate` and the reservation's rate
//! (seed 004 Fig. 5: a 32 Mbit/s flow on a 36 Mbit/s reservation). Each
//! change is printed as one `pace` line on stderr.

use anyhow::{bail, Context};
use braid::pipe::{self, Progress, SendConfig, SendReport};
use braid_broker::client::{ClientError, Events};
use braid_broker::types::ReservationView;
use braid_broker::{clock, Client};
use braid_core::Bandwidth;
use std::io::Read;
use tokio::sync::watch;

/// How to reach the broker (for `--reservation` and `--deadline`).
#[derive(Debug, Clone, clap::Args)]
pub struct BrokerFlags {
    /// The reservation broker's URL (default: $BRAID_BROKER).
    #[arg(long, value_name = "URL")]
    pub broker: Option<String>,
    /// A bearer token from `braid broker token` (default: $BRAID_TOKEN).
    #[arg(long, value_name = "TOKEN", conflicts_with = "token_file")]
    pub token: Option<String>,
    /// Read the bearer token from this file.
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<std::path::PathBuf>,
}

impl BrokerFlags {
    /// The broker client these flags (or `BRAID_BROKER` / `BRAID_TOKEN`)
    /// name.
    ///
    /// # Errors
    /// No broker or no token given, an unreadable token file, a bad URL.
    pub fn client(&self) -> anyhow::Result<Client> {
        let url = self
            .broker
            .clone()
            .or_else(|| std::env::var("BRAID_BROKER").ok())
            .context("no broker: give --broker URL or set BRAID_BROKER")?;
        let token = match (&self.token, &self.token_file) {
            (Some(t), _) => t.clone(),
            (None, Some(f)) => std::fs::read_to_string(f)
                .with_context(|| format!("reading the token file {}", f.display()))?,
            (None, None) => std::env::var("BRAID_TOKEN").context(
                "no token: give --token, --token-file or set BRAID_TOKEN (from `braid broker token`)",
            )?,
        };
        Ok(Client::new(&url, &token)?)
    }
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
/// One line naming what is wrong with the reservation.
pub async fn usable(client: &Client, id: u64, wait_start: bool) -> anyhow::Result<ReservationView> {
    let r = match client.show(id).await {
        Ok(r) => r,
        Err(ClientError::Api { status, .. }) if status.as_u16() == 404 => {
            bail!("reservation {id}: not found at the broker (unknown, or not yours)")
        }
        Err(e) => return Err(e).with_context(|| format!("reservation {id}")),
    };
    if r.life != "created" {
        bail!(
            "reservation {id} is {} (life): it can carry no transfer",
            r.life
        );
    }
    let Some(v) = r.committed.as_ref().filter(|_| r.state == "committed") else {
        bail!(
            "reservation {id} is {}, not committed: commit it first (braid reserve commit {id})",
            r.state
        );
    };
    let now = clock::now();
    let (Some(start), Some(end)) = (clock::parse(&v.start, now), clock::parse(&v.end, now)) else {
        bail!("reservation {id}: the broker sent times that do not parse");
    };
    if now >= end {
        bail!("reservation {id} ended at {}", v.end);
    }
    if now < start {
        let wait = start.saturating_duration_since(now);
        if !wait_start {
            bail!(
                "reservation {id} starts at {} (in {:.0} s): pass --wait-start to wait for it",
                v.start,
                wait.as_secs_f64()
            );
        }
        eprintln!(
            "braid send: reservation {id} starts at {}: waiting {:.0} s",
            v.start,
            wait.as_secs_f64()
        );
        tokio::time::sleep(wait.into()).await;
        // The reservation may have changed while waiting: look again.
        return Box::pin(usable(client, id, false)).await;
    }
    Ok(r)
}

/// The pace for a reservation's `rate` under an optional `--rate` cap:
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
/// `cap` (`--rate`); one stderr line per change. Ends when the event
/// stream ends or `pace` has no receiver.
pub async fn follow(
    mut events: Events,
    id: u64,
    background: bool,
    cap: Option<Bandwidth>,
    pace: watch::Sender<Bandwidth>,
) {
    loop {
        let ev = match events.next().await {
            Ok(Some(ev)) => ev,
            Ok(None) | Err(_) => {
                eprintln!(
                    "braid send: reservation {id}: lost the broker's event stream; the pace stays {}",
                    *pace.borrow()
                );
                return;
            }
        };
        if ev.id != id {
            continue;
        }
        let view = ev.reservation.as_ref();
        if let Some(r) = view.filter(|r| r.life != "created") {
            eprintln!(
                "braid send: reservation {id} is {} while sending; the pace stays {}",
                r.life,
                *pace.borrow()
            );
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
            eprintln!("braid send: reservation {id}: pace {new} ({why})");
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
/// An unusable reservation (one line), a broker failure before sending,
/// the transfer's failure.
pub async fn send_on_reservation(
    client: &Client,
    id: u64,
    wait_start: bool,
    input: Box<dyn Read + Send>,
    mut cfg: SendConfig,
    observer: &mut (dyn FnMut(&Progress) + Send),
) -> anyhow::Result<SendReport> {
    usable(client, id, wait_start).await?;
    // Subscribe before provisioning: a background share announced at the
    // provision is not missed.
    let events = client
        .events()
        .await
        .context("subscribing to the broker's events")?;
    let r = client.show(id).await?;
    let provisioned_here = r.provision != "provisioned";
    let r = if provisioned_here {
        client
            .act(id, "provision")
            .await
            .with_context(|| format!("provisioning reservation {id}"))?
    } else {
        r
    };
    let background = r.class == "background";
    // `--rate` caps the reservation's pace: the smaller one wins.
    let cap = cfg.rate.take();
    let (rate, why) = capped(reserved_rate(&r), cap, background);
    eprintln!("braid send: reservation {id}: pace {rate} ({why})");
    let (pace_tx, pace_rx) = watch::channel(rate);
    let follower = tokio::spawn(follow(events, id, background, cap, pace_tx));
    cfg.rate_updates = Some(pace_rx);
    let res = pipe::send_async(input, cfg, observer).await;
    follower.abort();
    if provisioned_here {
        if let Err(e) = client.act(id, "release").await {
            eprintln!("braid send: releasing reservation {id}: {e}");
        }
    }
    res.context("braid send")
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
