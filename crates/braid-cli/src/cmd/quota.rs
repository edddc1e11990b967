//! `--session-quota` and `--source-quota` of `braid serve`: how much one
//! session, and one source over all its sessions, may give the sink.
//! Streams and bytes are braid's own quotas (braid-core's `quota` module:
//! past them a stream is refused with a reason the source prints);
//! files are `braid serve`'s, counted as it creates them in `--out`.

use anyhow::{bail, Context};
use braid::session::{DEFAULT_SESSION_QUOTA, DEFAULT_SOURCE_QUOTA};
use braid_core::session::quota::{Quota, SourceQuota};
use braid_core::units::ByteSize;

/// Default of the files one session may create in `--out`.
pub const DEFAULT_SESSION_FILES: u64 = 256;

/// `--session-quota`, `--source-quota`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct QuotaArgs {
    /// What one session may give this sink, as KEY=VALUE,… with keys
    /// streams, files (created in --out) and bytes (1.5GB, 64KiB);
    /// `off`: no bound. Default: streams=256,files=256,bytes=off. Past a
    /// quota a stream is refused and its source told why.
    #[arg(long, value_name = "KEY=VALUE,…")]
    pub session_quota: Option<String>,
    /// What one source (an IP address) may give over all its sessions
    /// while this sink runs, as KEY=VALUE,… with keys sessions (at once),
    /// streams, files and bytes; `off`: no bound. Default:
    /// sessions=8,streams=off,files=off,bytes=off.
    #[arg(long, value_name = "KEY=VALUE,…")]
    pub source_quota: Option<String>,
}

/// Every quota `braid serve` applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quotas {
    /// Streams and bytes of one session.
    pub session: Quota,
    /// Files one session may create.
    pub session_files: Option<u64>,
    /// Sessions at once, streams and bytes of one source.
    pub source: SourceQuota,
    /// Files one source may create while the sink runs.
    pub source_files: Option<u64>,
}

impl QuotaArgs {
    /// The quotas: the defaults, with what the flags set.
    ///
    /// # Errors
    /// A key the flag does not take, a value that is not a count, a size
    /// or `off`, a key given twice, or a sessions quota of 0.
    pub fn resolve(&self) -> anyhow::Result<Quotas> {
        let mut q = Quotas {
            session: DEFAULT_SESSION_QUOTA,
            session_files: Some(DEFAULT_SESSION_FILES),
            source: DEFAULT_SOURCE_QUOTA,
            source_files: None,
        };
        if let Some(text) = &self.session_quota {
            for (key, value) in pairs("--session-quota", text, &["streams", "files", "bytes"])? {
                match key {
                    "streams" => q.session.streams = value,
                    "files" => q.session_files = value,
                    _ => q.session.bytes = value,
                }
            }
        }
        if let Some(text) = &self.source_quota {
            let keys = ["sessions", "streams", "files", "bytes"];
            for (key, value) in pairs("--source-quota", text, &keys)? {
                match key {
                    "sessions" => {
                        if value == Some(0) {
                            bail!("--source-quota sessions=0: a source needs at least one session");
                        }
                        q.source.sessions = value.map(|v| usize::try_from(v).unwrap_or(usize::MAX));
                    }
                    "streams" => q.source.total.streams = value,
                    "files" => q.source_files = value,
                    _ => q.source.total.bytes = value,
                }
            }
        }
        Ok(q)
    }
}

/// `KEY=VALUE,…` of `flag`, each key one of `keys` at most once; values
/// are counts (sizes for `bytes`) or `off` (`None`).
fn pairs(
    flag: &str,
    text: &str,
    keys: &[&'static str],
) -> anyhow::Result<Vec<(&'static str, Option<u64>)>> {
    let mut out: Vec<(&'static str, Option<u64>)> = Vec::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let Some((key, value)) = part.split_once('=') else {
            bail!(
                "{flag} {part:?}: expected KEY=VALUE (keys: {})",
                keys.join(", ")
            );
        };
        let (key, value) = (key.trim(), value.trim());
        let Some(&key) = keys.iter().find(|k| **k == key) else {
            bail!("{flag}: unknown key {key:?} (keys: {})", keys.join(", "));
        };
        if out.iter().any(|(k, _)| *k == key) {
            bail!("{flag}: {key} given twice");
        }
        let v = if value.eq_ignore_ascii_case("off") {
            None
        } else if key == "bytes" {
            let size = value.parse::<ByteSize>().with_context(|| {
                format!("{flag} bytes={value}: not a size (1.5GB, 64KiB) or off")
            })?;
            Some(size.bytes())
        } else {
            Some(
                value
                    .parse::<u64>()
                    .with_context(|| format!("{flag} {key}={value}: not a count or off"))?,
            )
        };
        out.push((key, v));
    }
    if out.is_empty() {
        bail!("{flag}: expected KEY=VALUE,… (keys: {})", keys.join(", "));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(session: Option<&str>, source: Option<&str>) -> QuotaArgs {
        QuotaArgs {
            session_quota: session.map(str::to_string),
            source_quota: source.map(str::to_string),
        }
    }

    #[test]
    fn the_defaults_hold_until_a_flag_changes_them() {
        let q = args(None, None).resolve().unwrap();
        assert_eq!(q.session, DEFAULT_SESSION_QUOTA);
        assert_eq!(q.session_files, Some(DEFAULT_SESSION_FILES));
        assert_eq!(q.source, DEFAULT_SOURCE_QUOTA);
        let q = args(
            Some("bytes=1.5GB, files=off"),
            Some("sessions=2,streams=10"),
        )
        .resolve()
        .unwrap();
        assert_eq!(q.session.bytes, Some(1_500_000_000));
        assert_eq!(q.session.streams, DEFAULT_SESSION_QUOTA.streams);
        assert_eq!(q.session_files, None);
        assert_eq!(q.source.sessions, Some(2));
        assert_eq!(q.source.total.streams, Some(10));
        assert_eq!(q.source.total.bytes, None);
    }

    #[test]
    fn bad_quotas_are_refused_by_name() {
        for (session, source, words) in [
            (Some("streams"), None, "expected KEY=VALUE"),
            (Some("sessions=2"), None, "unknown key \"sessions\""),
            (Some("bytes=lots"), None, "not a size"),
            (Some("streams=-1"), None, "not a count"),
            (Some("files=1,files=2"), None, "files given twice"),
            (None, Some("sessions=0"), "at least one session"),
            (None, Some(""), "expected KEY=VALUE"),
        ] {
            let e = args(session, source).resolve().unwrap_err();
            assert!(format!("{e:#}").contains(words), "{e:#}");
        }
    }
}
