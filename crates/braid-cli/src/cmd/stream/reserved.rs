//! `braid stream --reservation NAME=ID`: session streams on broker
//! reservations (issue 14 §3 "Senders"; seed 004 §4: an application binds
//! a flow to its reservation).
//!
//! Before the plan is built, each named reservation is fetched and checked
//! as `braid send --reservation` checks it (committed, this user's,
//! started, not ended; a background one is refused: its share changes and
//! a stream's spec is fixed). The stream's `--stream` text gets the spec
//! `rate=RATE@0.99` at the reserved rate, its delivery options (after the
//! first comma) kept; its file or stdin source is paced at that rate
//! (`braid::session::feed::Feed::paced_at`). The reservation
//! is provisioned for the session if it was released, and released after.
//! A modify of the reservation during the session is not followed (the
//! spec is fixed when the stream opens).

use crate::cmd::send_reserve::BrokerFlags;
use anyhow::{bail, Context};
use braid_broker::owner::Action;
use braid_broker::transfer::{reserved_rate, usable, Notes};
use braid_broker::Client;
use braid_core::session::split_spec;
use braid_core::Bandwidth;

/// The streams bound to reservations, and how to reach the broker.
#[derive(Debug, Default)]
pub struct Booked {
    client: Option<(Client, tokio::runtime::Runtime)>,
    /// (stream name, reservation id, reserved rate, provisioned here).
    items: Vec<(String, u64, Bandwidth, bool)>,
}

/// Checks each `NAME=ID` and rewrites the matching `--stream` text to the
/// reservation's rate spec.
///
/// # Errors
/// A malformed pair, no `--stream` of that name, an unusable or
/// background reservation, the broker unreachable.
pub fn bind(
    pairs: &[String],
    broker: &BrokerFlags,
    streams: &mut [String],
) -> anyhow::Result<Booked> {
    if pairs.is_empty() {
        return Ok(Booked::default());
    }
    let client = broker.client()?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let mut items = Vec::new();
    for pair in pairs {
        let Some((name, id)) = pair.split_once('=') else {
            bail!("--reservation {pair:?}: expected NAME=ID");
        };
        let id: u64 = id.parse().map_err(|_| {
            anyhow::anyhow!("--reservation {pair:?}: {id:?} is not a reservation id")
        })?;
        let notes: Notes = std::sync::Arc::new(|line: &str| eprintln!("braid stream: {line}"));
        let r = rt.block_on(usable(&client, id, false, &notes))?;
        if r.class == "background" {
            bail!("reservation {id} is background: its share changes, so it cannot set a stream's rate (use braid send --reservation)");
        }
        let rate = reserved_rate(&r);
        let Some(text) = streams
            .iter_mut()
            .find(|s| s.split_once(':').is_some_and(|(n, _)| n == name))
        else {
            bail!("--reservation {pair:?}: no --stream named {name:?}");
        };
        *text = respec(text, rate).with_context(|| format!("--stream {text:?}"))?;
        eprintln!("braid stream: stream {name} on reservation {id}: rate={rate}@0.99, paced");
        items.push((name.to_string(), id, rate, r.provision != "provisioned"));
    }
    Ok(Booked {
        client: Some((client, rt)),
        items,
    })
}

/// `NAME:SPEC:SOURCE` with SPEC's guarantee replaced by `rate=RATE@0.99`.
fn respec(text: &str, rate: Bandwidth) -> anyhow::Result<String> {
    let (name, rest) = text.split_once(':').context("expected NAME:SPEC:SOURCE")?;
    let (spec, source) = split_spec(rest);
    let source = source.context("expected NAME:SPEC:SOURCE")?;
    let options = spec
        .split_once(',')
        .map_or(String::new(), |(_, o)| format!(",{o}"));
    Ok(format!(
        "{name}:rate={}bit@0.99{options}:{source}",
        rate.bps()
    ))
}

impl Booked {
    /// The reserved rate of stream `name`, if it is on a reservation.
    pub fn rate_of(&self, name: &Option<String>) -> Option<Bandwidth> {
        let name = name.as_deref()?;
        self.items.iter().find(|i| i.0 == name).map(|i| i.2)
    }

    /// Provisions the reservations that were released.
    ///
    /// # Errors
    /// The broker's refusal, naming the reservation.
    pub fn provision(&self) -> anyhow::Result<()> {
        let Some((client, rt)) = &self.client else {
            return Ok(());
        };
        for (_, id, _, here) in &self.items {
            if *here {
                rt.block_on(client.act(*id, Action::Provision))
                    .with_context(|| format!("provisioning reservation {id}"))?;
            }
        }
        Ok(())
    }

    /// Releases what [`Booked::provision`] provisioned (failures are
    /// printed: the session's own outcome is what the exit code reports).
    pub fn release(&self) {
        let Some((client, rt)) = &self.client else {
            return;
        };
        for (_, id, _, here) in &self.items {
            if *here {
                if let Err(e) = rt.block_on(client.act(*id, Action::Release)) {
                    eprintln!("braid stream: releasing reservation {id}: {e}");
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_spec_becomes_the_reserved_rate_and_keeps_its_options() {
        let r = Bandwidth::from_bps(8_000_000);
        assert_eq!(
            respec("bulk:best-effort:data.bin", r).unwrap(),
            "bulk:rate=8000000bit@0.99:data.bin"
        );
        assert_eq!(
            respec("v:rate=1mbit@0.9,unreliable:cbr:1mbit", r).unwrap(),
            "v:rate=8000000bit@0.99,unreliable:cbr:1mbit"
        );
        assert!(respec("nospec", r).is_err());
    }
}
