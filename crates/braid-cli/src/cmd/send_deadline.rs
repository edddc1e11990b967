//! `braid send --deadline`'s flags; the transfer is
//! `braid_broker::transfer::deadline` (seed 004 §6, Fig. 6–7).

use braid_core::{Bandwidth, Duration};

/// Flags of a deadline transfer.
#[derive(Debug, Clone, clap::Args)]
pub struct DeadlineFlags {
    /// Deliver FILE within this time (e.g. 200s, 5m) over a premium
    /// reservation (needs --broker, --token and --resource) and a
    /// scavenger part in parallel, lowering the reservation as the
    /// transfer gets ahead.
    #[arg(long, requires = "resource", conflicts_with_all = ["reservation", "rate"])]
    pub deadline: Option<Duration>,
    /// The broker's resource to reserve the premium rate on.
    #[arg(long, value_name = "NAME", requires = "deadline")]
    pub resource: Option<String>,
    /// Safety margin: the share of the time left kept spare when computing
    /// the premium rate (percent).
    #[arg(long, default_value = "10%", value_parser = parse_percent, requires = "deadline")]
    pub margin: f64,
    /// Recompute and lower the reservation each time the scavenger part
    /// has delivered this much more (the seed's 25 MB).
    #[arg(long, default_value = "25MB", value_parser = parse_bytes, requires = "deadline")]
    pub update_every: u64,
    /// How many connections form the premium part (paced at the reserved
    /// rate); the others are the scavenger part.
    #[arg(long, default_value_t = 1, requires = "deadline")]
    pub premium_connections: usize,
    /// Cap the scavenger part's total rate (default: unpaced, it takes
    /// what the network gives).
    #[arg(long, value_name = "RATE", requires = "deadline")]
    pub scavenger_rate: Option<Bandwidth>,
}

/// Parses a size such as `25MB` or `1MiB` ([`braid_core::ByteSize`]).
///
/// # Errors
/// The size's parse error, as one line for clap.
pub fn parse_bytes(s: &str) -> Result<u64, String> {
    s.parse::<braid_core::ByteSize>()
        .map(braid_core::ByteSize::bytes)
        .map_err(|e| e.to_string())
}

/// Parses `10%` or `10` as the fraction 0.10; refuses 100 % and above.
///
/// # Errors
/// Not a number, negative, or 100 and above, as one line for clap.
pub fn parse_percent(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .trim()
        .trim_end_matches('%')
        .trim()
        .parse()
        .map_err(|_| format!("{s:?} is not a percentage (e.g. 10%)"))?;
    if !(0.0..100.0).contains(&v) {
        return Err(format!(
            "{s:?}: the margin must be at least 0 % and below 100 %"
        ));
    }
    Ok(v / 100.0)
}

impl DeadlineFlags {
    /// The library's description of the transfer, once `--deadline` is given.
    ///
    /// # Errors
    /// No `--resource`.
    pub fn plan(
        &self,
        within: Duration,
    ) -> anyhow::Result<braid_broker::transfer::deadline::Deadline> {
        use anyhow::Context as _;
        Ok(braid_broker::transfer::deadline::Deadline {
            within,
            resource: self
                .resource
                .clone()
                .context("--deadline needs --resource NAME")?,
            margin: self.margin,
            update_every: self.update_every.max(1),
            premium_connections: self.premium_connections,
            scavenger_rate: self.scavenger_rate,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentages() {
        assert_eq!(parse_percent("10%"), Ok(0.1));
        assert_eq!(parse_percent("5"), Ok(0.05));
        assert!(parse_percent("100%").is_err());
        assert!(parse_percent("-1").is_err());
        assert!(parse_percent("ten").is_err());
    }
}
