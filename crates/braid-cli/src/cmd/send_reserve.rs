//! How `braid send` and `braid stream` reach a broker (`--broker`,
//! `--token`, `--token-file`). Transfers bound to a reservation are
//! `braid_broker::transfer`.

use anyhow::Context;
use braid_broker::Client;

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
