//! The flags that decide who may talk to an IQ-RUDP command and how its
//! packets are protected, shared by `braid perf`, `serve`, `stream` and
//! `relay`: `--key FILE` (required by default), `--open` (the explicit way
//! to run without a key) and `--no-encrypt` (authenticated, in clear).

use anyhow::bail;
use braid_core::transport::{Protection, Psk};
use std::path::{Path, PathBuf};

/// `--key`, `--open`, `--no-encrypt`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct AccessArgs {
    /// The key file (`braid keygen FILE`) the peer must hold too; packets
    /// are then authenticated and encrypted. Required unless --open.
    #[arg(long, value_name = "FILE")]
    pub key: Option<PathBuf>,
    /// Run without a key: no authentication, no encryption (trusted
    /// networks and tests only).
    #[arg(long, conflicts_with_all = ["key", "no_encrypt"])]
    pub open: bool,
    /// With --key: keep authentication and integrity but send packets in
    /// clear (trusted networks); the peer must say --no-encrypt too.
    #[arg(long)]
    pub no_encrypt: bool,
}

/// What the flags resolve to: the key (none with `--open`) and the mode.
#[derive(Debug, Clone)]
pub struct Access {
    /// The pre-shared key, `None` with `--open`.
    pub psk: Option<Psk>,
    /// How packets are protected (meaningful with a key).
    pub protection: Protection,
}

impl AccessArgs {
    /// Reads the key. `key_file` overrides `--key` when the command found
    /// one elsewhere (a session file); `command` names the command in the
    /// error.
    ///
    /// # Errors
    /// No key and no `--open` (one line saying how to make a key);
    /// `--no-encrypt` without a key; the key file is missing, malformed or
    /// readable by others.
    pub fn resolve(&self, command: &str, key_file: Option<&Path>) -> anyhow::Result<Access> {
        let protection = if self.no_encrypt {
            Protection::IntegrityOnly
        } else {
            Protection::Encrypt
        };
        let psk = match (key_file.or(self.key.as_deref()), self.open) {
            (Some(p), _) => Some(braid::key::Key::read(p)?.psk().clone()),
            (None, true) => None,
            (None, false) if self.no_encrypt => {
                bail!("{command}: --no-encrypt needs --key FILE (it keeps authentication)")
            }
            (None, false) => bail!(
                "{command} needs --key FILE (make one with `braid keygen FILE` and give the peer a copy), or --open to run without authentication or encryption"
            ),
        };
        Ok(Access { psk, protection })
    }
}
