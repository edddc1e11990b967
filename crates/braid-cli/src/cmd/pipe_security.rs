//! The security flags `braid send` and `braid recv` share: `--key FILE`,
//! `--code CODE` (send), `--no-encrypt`, `--insecure`; secure by default
//! (docs/SECURITY.md, "The pipe").

use anyhow::{bail, Context};
use braid::pipe::{Code, Security};

/// Security flags of `braid send`.
#[derive(Debug, clap::Args)]
pub struct SendSecurity {
    /// Key file both sides hold (`braid keygen FILE` writes one).
    #[arg(long, value_name = "FILE", conflicts_with_all = ["code", "insecure"])]
    pub key: Option<std::path::PathBuf>,
    /// The one-time code `braid recv` printed (e.g. 7-orbit-lantern).
    #[arg(long, value_name = "CODE", conflicts_with = "insecure")]
    pub code: Option<String>,
    /// Authenticate and check integrity, but send in clear text (trusted
    /// networks; the receiver needs it too). The fastest authenticated
    /// mode: payloads are checked through their BLAKE3.
    #[arg(long)]
    pub no_encrypt: bool,
    /// No authentication, no encryption (benchmarks, old scripts; the
    /// receiver needs it too).
    #[arg(long, conflicts_with = "no_encrypt")]
    pub insecure: bool,
}

/// Security flags of `braid recv`.
#[derive(Debug, clap::Args)]
pub struct RecvSecurity {
    /// Key file both sides hold (`braid keygen FILE` writes one); without
    /// it `braid recv` prints a one-time code for the sender.
    #[arg(long, value_name = "FILE", conflicts_with = "insecure")]
    pub key: Option<std::path::PathBuf>,
    /// Authenticate and check integrity, but accept clear text (trusted
    /// networks; the sender needs it too).
    #[arg(long)]
    pub no_encrypt: bool,
    /// Accept anyone, in clear text (benchmarks, old scripts; the sender
    /// needs it too).
    #[arg(long, conflicts_with = "no_encrypt")]
    pub insecure: bool,
}

fn read_key(p: &std::path::Path) -> anyhow::Result<braid_core::transport::Psk> {
    Ok(braid::key::Key::read(p)
        .with_context(|| format!("key file {}", p.display()))?
        .psk()
        .clone())
}

fn warn_insecure(cmd: &str, what: &str) {
    eprintln!("braid {cmd}: WARNING: --insecure: no authentication, no encryption; {what}");
}

impl SendSecurity {
    /// What the sender proves.
    ///
    /// # Errors
    /// No flag given, an unreadable key file, or a malformed code.
    pub fn resolve(&self) -> anyhow::Result<Security> {
        let encrypt = !self.no_encrypt;
        if self.insecure {
            warn_insecure(
                "send",
                "anyone on the path can read and alter the stream, and anyone can pose as the receiver",
            );
            return Ok(Security::Insecure);
        }
        if let Some(p) = &self.key {
            return Ok(Security::Key {
                psk: read_key(p)?,
                encrypt,
            });
        }
        if let Some(c) = &self.code {
            let code: Code = c.parse()?;
            return Ok(Security::Code { code, encrypt });
        }
        bail!(
            "braid send needs --code CODE (printed by braid recv) or --key FILE (braid keygen FILE writes one); --insecure sends in clear text"
        )
    }
}

impl RecvSecurity {
    /// What a sender must prove; with neither a key nor `--insecure`, a
    /// fresh one-time code (returned to print).
    ///
    /// # Errors
    /// An unreadable key file, or no randomness for a code.
    pub fn resolve(&self) -> anyhow::Result<(Security, Option<Code>)> {
        let encrypt = !self.no_encrypt;
        if self.insecure {
            warn_insecure(
                "recv",
                "anyone who reaches the port can feed the output, and the stream crosses the network in clear text",
            );
            return Ok((Security::Insecure, None));
        }
        if let Some(p) = &self.key {
            let psk = read_key(p)?;
            return Ok((Security::Key { psk, encrypt }, None));
        }
        let code = Code::generate()?;
        Ok((
            Security::Code {
                code: code.clone(),
                encrypt,
            },
            Some(code),
        ))
    }
}
