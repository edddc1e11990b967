//! The connection caps of an IQ-RUDP server, shared by `braid serve` and
//! `braid relay`: `--max-connections` and `--max-per-source` (defaults from
//! braid-core's transport config). A client beyond either gets a
//! stateless "server full" refusal before any cryptographic work.

use anyhow::bail;
use braid_core::transport::Config;

/// Largest value either flag takes (a sanity bound: every connection
/// holds buffers).
const MAX_CAP: usize = 65_536;

/// `--max-connections`, `--max-per-source`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct LimitArgs {
    /// Most connections this server holds in all (default 1024).
    #[arg(long, value_name = "N")]
    pub max_connections: Option<usize>,
    /// Most connections from one source IP address (default 64): one
    /// party cannot take every slot.
    #[arg(long, value_name = "N")]
    pub max_per_source: Option<usize>,
}

impl LimitArgs {
    /// Sets the caps in `c`.
    ///
    /// # Errors
    /// A cap of 0 or above 65536, or a per-source cap above the total.
    pub fn apply(&self, c: &mut Config) -> anyhow::Result<()> {
        for (flag, v) in [
            ("--max-connections", self.max_connections),
            ("--max-per-source", self.max_per_source),
        ] {
            if let Some(v) = v {
                if v == 0 || v > MAX_CAP {
                    bail!("{flag} {v}: must be 1..={MAX_CAP}");
                }
            }
        }
        if let Some(v) = self.max_connections {
            c.max_connections = v;
        }
        if let Some(v) = self.max_per_source {
            c.max_connections_per_source = v;
        }
        if c.max_connections_per_source > c.max_connections {
            bail!(
                "--max-per-source {} is above --max-connections {}",
                c.max_connections_per_source,
                c.max_connections
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(total: Option<usize>, per: Option<usize>) -> LimitArgs {
        LimitArgs {
            max_connections: total,
            max_per_source: per,
        }
    }

    #[test]
    fn caps_are_set_and_checked() {
        let mut c = Config::default();
        limits(Some(10), Some(2)).apply(&mut c).unwrap();
        assert_eq!((c.max_connections, c.max_connections_per_source), (10, 2));
        let mut c = Config::default();
        limits(None, None).apply(&mut c).unwrap();
        assert_eq!(c.max_connections, Config::default().max_connections);
        for (t, p, words) in [
            (Some(0), None, "--max-connections 0"),
            (None, Some(70_000), "--max-per-source 70000"),
            (Some(4), Some(8), "above --max-connections 4"),
            (Some(4), None, "above --max-connections 4"),
        ] {
            let e = limits(t, p).apply(&mut Config::default()).unwrap_err();
            assert!(e.to_string().contains(words), "{e}");
        }
    }
}
