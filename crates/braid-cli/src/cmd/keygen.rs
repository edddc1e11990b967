//! `braid keygen FILE`: writes a new pre-shared key for `--key FILE`.
//!
//! The key file format and its checks are `braid::key`'s; this module
//! holds the flags and tells the user what to do with the key.

use anyhow::Context;
use braid::key::Key;
use std::path::PathBuf;

/// Flags of `braid keygen`.
#[derive(Debug, clap::Args)]
pub struct KeygenArgs {
    /// Where to write the key (created with mode 0600).
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
    /// Replace FILE if it exists (peers holding the old key are then
    /// refused until they get the new one).
    #[arg(long)]
    pub force: bool,
}

/// Runs `braid keygen`.
pub fn run(a: KeygenArgs) -> anyhow::Result<()> {
    let key = Key::generate()?;
    if a.force {
        key.write_replacing(&a.file)?;
    } else {
        key.write_new(&a.file)?;
    }
    let shown = std::fs::canonicalize(&a.file)
        .with_context(|| format!("finding the key just written at {}", a.file.display()))?;
    eprintln!("braid: wrote a new key to {} (mode 0600)", shown.display());
    eprintln!("  copy it to the peer over a secure channel (e.g. scp), keep it mode 0600 there,");
    eprintln!(
        "  and give both sides --key {}: peers without this key are refused before any state is kept",
        a.file.display()
    );
    Ok(())
}
