//! `braid stream`'s settings: the flags, the `--config session.toml` file,
//! and the checked [`Plan`] both become (flags override the file).
//!
//! Main items: [`SessionFile`] (the TOML file; unknown keys are refused
//! with the key named), [`StreamPlan`] (one `--stream NAME:SPEC:SOURCE`),
//! [`OnInfeasible`], [`Plan`].
//!
//! ```toml
//! to = "10.0.0.2:7000"
//! scheduler = "pgos"          # pgos | msfq | wfq | rr | minrtt
//! on_infeasible = "lower"     # lower | drop | fail
//! key = "braid.key"
//! duration = "60s"
//! message_size = "16KiB"
//!
//! [[path]]
//! route = "direct"
//! [[path]]
//! route = "via=10.0.0.3:7000+bind=198.18.1.1"
//!
//! [[stream]]
//! name = "video"
//! spec = "rate=3.2mbit@0.95,copies=2"
//! source = "cbr:3.2mbit"
//! ```

use anyhow::{bail, Context};
use braid::session::feed::{SourceSpec, DEFAULT_MESSAGE_SIZE, MAX_MESSAGE_SIZE};
use braid_core::session::{split_spec, SchedulerKind, StreamConfig};
use braid_core::{ByteSize, Duration};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

/// What the source does when a stream's guarantee cannot be met: the
/// flag's and file's spelling of braid-core's `UpcallPolicy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OnInfeasible {
    /// Lower the spec to the best achievable figure and go on (default).
    #[default]
    Lower,
    /// Close that stream (and stop its source); the others go on.
    Drop,
    /// Exit non-zero, naming the stream and the best achievable figure.
    Fail,
}

impl From<OnInfeasible> for braid_core::scheduler::UpcallPolicy {
    fn from(o: OnInfeasible) -> Self {
        match o {
            OnInfeasible::Lower => Self::Lower,
            OnInfeasible::Drop => Self::Drop,
            OnInfeasible::Fail => Self::Fail,
        }
    }
}

/// The `--config` file.
#[derive(Debug, Clone, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SessionFile {
    /// The sink, HOST:PORT.
    pub to: Option<String>,
    /// The paths.
    #[serde(default)]
    pub path: Vec<PathEntry>,
    /// The streams.
    #[serde(default)]
    pub stream: Vec<StreamEntry>,
    /// The scheduler's name.
    pub scheduler: Option<String>,
    /// The infeasible-guarantee policy.
    pub on_infeasible: Option<OnInfeasible>,
    /// The key file (relative to the config file's folder).
    pub key: Option<PathBuf>,
    /// Stop after this long (e.g. "60s").
    pub duration: Option<String>,
    /// File and stdin message size (e.g. "16KiB").
    pub message_size: Option<String>,
}

/// One `[[path]]`.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PathEntry {
    /// `direct`, `via=HOST:PORT[,…]`, `bind=ADDR`, joined by `+`.
    pub route: String,
}

/// One `[[stream]]`.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StreamEntry {
    /// File name at the sink.
    pub name: String,
    /// Spec string.
    pub spec: String,
    /// SOURCE.
    pub source: String,
}

impl SessionFile {
    /// Reads and checks the syntax of `path`.
    ///
    /// # Errors
    /// The file, named, and the TOML error (line, and the unknown key).
    pub fn read(path: &Path) -> anyhow::Result<SessionFile> {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        Self::parse(&text).with_context(|| format!("{}", path.display()))
    }

    /// Parses the text of a session file.
    ///
    /// # Errors
    /// The TOML error as one line.
    pub fn parse(text: &str) -> anyhow::Result<SessionFile> {
        toml::from_str(text).map_err(|e| {
            // toml's message spans several lines (a source excerpt); keep
            // the position and the message.
            let msg = e.message().trim().to_string();
            match e.span().map(|s| line_of(text, s.start)) {
                Some(line) => anyhow::anyhow!("line {line}: {msg}"),
                None => anyhow::anyhow!("{msg}"),
            }
        })
    }
}

fn line_of(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].matches('\n').count() + 1
}

/// One stream to open: its config (spec and name) and its source.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamPlan {
    /// Spec, delivery, name.
    pub config: StreamConfig,
    /// Where its bytes come from.
    pub source: SourceSpec,
}

impl StreamPlan {
    /// Reads `NAME:SPEC:SOURCE`.
    ///
    /// # Errors
    /// The part that does not read, and the form expected.
    pub fn parse_arg(text: &str) -> anyhow::Result<StreamPlan> {
        let (name, rest) = text
            .split_once(':')
            .with_context(|| format!("--stream {text:?}: expected NAME:SPEC:SOURCE"))?;
        let (spec, source) = split_spec(rest);
        let source = source.with_context(|| {
            format!("--stream {text:?}: expected NAME:SPEC:SOURCE (no SOURCE after the spec)")
        })?;
        Self::new(name, spec, source).with_context(|| format!("--stream {text:?}"))
    }

    /// A stream from its three parts.
    ///
    /// # Errors
    /// The spec, name or source error.
    pub fn new(name: &str, spec: &str, source: &str) -> anyhow::Result<StreamPlan> {
        let config = spec.parse::<StreamConfig>()?.with_name(name);
        config.validate()?;
        Ok(StreamPlan {
            config,
            source: source.parse()?,
        })
    }
}

/// Checks a path route: `direct`, `via=HOST:PORT[,HOST:PORT…]`,
/// `bind=ADDR`, `name=NAME`, joined by `+` (the runtime's
/// [`PathConfig`](braid::session::PathConfig) syntax; relay names are
/// resolved when the session connects).
///
/// # Errors
/// The term that does not read, and the forms.
pub fn check_route(route: &str) -> anyhow::Result<()> {
    route.parse::<braid::session::PathConfig>()?;
    Ok(())
}

/// `HOST:PORT` to an address.
///
/// # Errors
/// Bad syntax or no address.
pub fn resolve(a: &str) -> anyhow::Result<SocketAddr> {
    Ok(braid::resolve::host_port(a, None)?)
}

/// Everything `braid stream` needs, checked.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The sink.
    pub to: SocketAddr,
    /// Path routes, in order (path `i` is the `i`-th).
    pub paths: Vec<String>,
    /// Streams, in order.
    pub streams: Vec<StreamPlan>,
    /// The scheduler.
    pub scheduler: SchedulerKind,
    /// The infeasible-guarantee policy.
    pub on_infeasible: OnInfeasible,
    /// The key file.
    pub key: Option<PathBuf>,
    /// Stop after.
    pub duration: Option<Duration>,
    /// File and stdin message size.
    pub message_size: u64,
}

/// The flags [`Plan::new`] reads (a subset of `StreamArgs`, so this file
/// does not depend on clap's struct).
#[derive(Debug, Clone, Default)]
pub struct Flags {
    /// `--to`.
    pub to: Option<String>,
    /// `--path`, each.
    pub paths: Vec<String>,
    /// `--stream`, each.
    pub streams: Vec<String>,
    /// `--scheduler`.
    pub scheduler: Option<String>,
    /// `--on-infeasible`.
    pub on_infeasible: Option<OnInfeasible>,
    /// `--key`.
    pub key: Option<PathBuf>,
    /// `--duration`.
    pub duration: Option<Duration>,
    /// `--message-size`.
    pub message_size: Option<u64>,
}

impl Plan {
    /// Joins `file` (if any, read from `file_dir`) and the flags; flags
    /// win, and a list given by flags (`--path`, `--stream`) replaces the
    /// file's.
    ///
    /// # Errors
    /// The first setting that is missing or does not read, named.
    pub fn new(file: Option<(SessionFile, PathBuf)>, flags: Flags) -> anyhow::Result<Plan> {
        let (file, dir) = file.unwrap_or_default();
        let to = flags
            .to
            .or(file.to)
            .context("no sink: give --to HOST:PORT (or `to` in --config)")?;
        let to = resolve(&to).context("--to")?;
        if to.port() == 0 {
            bail!("--to {to}: port 0 is not a port to connect to");
        }
        let paths = if flags.paths.is_empty() {
            file.path.into_iter().map(|p| p.route).collect()
        } else {
            flags.paths
        };
        let paths = if paths.is_empty() {
            vec!["direct".to_string()]
        } else {
            paths
        };
        for p in &paths {
            check_route(p)?;
        }
        let streams = if flags.streams.is_empty() {
            file.stream
                .iter()
                .map(|s| {
                    StreamPlan::new(&s.name, &s.spec, &s.source)
                        .with_context(|| format!("[[stream]] {:?}", s.name))
                })
                .collect::<anyhow::Result<Vec<_>>>()?
        } else {
            flags
                .streams
                .iter()
                .map(|s| StreamPlan::parse_arg(s))
                .collect::<anyhow::Result<Vec<_>>>()?
        };
        if streams.is_empty() {
            bail!("no streams: give --stream NAME:SPEC:SOURCE (or [[stream]] in --config)");
        }
        let mut names: Vec<&str> = streams
            .iter()
            .filter_map(|s| s.config.name.as_deref())
            .collect();
        names.sort_unstable();
        if let Some(w) = names.windows(2).find(|w| w[0] == w[1]) {
            bail!(
                "two streams are named {:?}: names must differ (they are file names at the sink)",
                w[0]
            );
        }
        if streams
            .iter()
            .filter(|s| s.source == SourceSpec::Stdin)
            .count()
            > 1
        {
            bail!("only one stream can read stdin ('-')");
        }
        let scheduler = match flags.scheduler.or(file.scheduler) {
            Some(s) => s.parse::<SchedulerKind>()?,
            None => SchedulerKind::default(),
        };
        let duration = match (flags.duration, file.duration) {
            (Some(d), _) => Some(d),
            (None, Some(d)) => Some(
                d.parse::<Duration>()
                    .with_context(|| format!("duration {d:?}"))?,
            ),
            (None, None) => None,
        };
        let message_size = match (flags.message_size, file.message_size) {
            (Some(m), _) => m,
            (None, Some(m)) => m
                .parse::<ByteSize>()
                .with_context(|| format!("message_size {m:?}"))?
                .bytes(),
            (None, None) => DEFAULT_MESSAGE_SIZE,
        };
        if message_size == 0 || message_size > u64::from(MAX_MESSAGE_SIZE) {
            bail!("message size {message_size} B: use 1 B to 1 MiB");
        }
        let key = flags.key.or(file.key.map(|k| dir.join(k)));
        Ok(Plan {
            to,
            paths,
            streams,
            scheduler,
            on_infeasible: flags
                .on_infeasible
                .or(file.on_infeasible)
                .unwrap_or_default(),
            key,
            duration,
            message_size,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use braid_core::scheduler::StreamSpec;
    use braid_core::Bandwidth;

    const FILE: &str = r#"
to = "127.0.0.1:7000"
scheduler = "msfq"
on_infeasible = "drop"
duration = "30s"

[[path]]
route = "direct"
[[path]]
route = "via=127.0.0.1:7100+bind=127.0.0.2"

[[stream]]
name = "video"
spec = "window=9/10:100ms:1400B@0.99"
source = "cbr:1mbit"
"#;

    #[test]
    fn a_file_becomes_a_plan_and_flags_override_it() {
        let file = SessionFile::parse(FILE).unwrap();
        let plan = Plan::new(Some((file.clone(), PathBuf::new())), Flags::default()).unwrap();
        assert_eq!(plan.to, "127.0.0.1:7000".parse().unwrap());
        assert_eq!(plan.paths, ["direct", "via=127.0.0.1:7100+bind=127.0.0.2"]);
        assert_eq!(plan.scheduler.name(), "msfq");
        assert_eq!(plan.on_infeasible, OnInfeasible::Drop);
        assert_eq!(plan.duration, Some(Duration::from_secs(30)));
        assert_eq!(plan.streams[0].config.name.as_deref(), Some("video"));
        let flags = Flags {
            to: Some("127.0.0.1:7001".into()),
            streams: vec!["bulk:best-effort:-".into()],
            on_infeasible: Some(OnInfeasible::Fail),
            ..Flags::default()
        };
        let plan = Plan::new(Some((file, PathBuf::new())), flags).unwrap();
        assert_eq!(plan.to.port(), 7001);
        assert_eq!(plan.on_infeasible, OnInfeasible::Fail);
        assert_eq!(plan.streams.len(), 1);
        assert_eq!(plan.streams[0].source, SourceSpec::Stdin);
        assert_eq!(plan.paths.len(), 2, "the file's paths stay");
    }

    /// Issue 30 §3: a simulator scenario's `[[stream]]` tables paste into
    /// a `--config` file unchanged and mean the same streams.
    #[test]
    fn a_simulated_stream_pastes_into_a_session_file() {
        let file = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../scenarios/session_two_paths.toml"
        );
        let scenario = braid_sim::session::SessionScenario::from_path(file).unwrap();
        assert!(scenario.warnings.is_empty(), "{:?}", scenario.warnings);
        let text = std::fs::read_to_string(file).unwrap();
        let streams = &text[text.find("[[stream]]").unwrap()..];
        let config = format!("to = \"127.0.0.1:7000\"\n{streams}");
        let plan = Plan::new(
            Some((SessionFile::parse(&config).unwrap(), PathBuf::new())),
            Flags::default(),
        )
        .unwrap();
        assert_eq!(plan.streams.len(), scenario.streams.len());
        for (p, s) in plan.streams.iter().zip(&scenario.streams) {
            let mut sim = s.config.clone();
            sim.name = Some(s.name.clone());
            assert_eq!(p.config, sim, "stream {}", s.name);
        }
        // And the sources: the scenario's trace, greedy and cbr forms.
        let sources: Vec<String> = plan.streams.iter().map(|s| s.source.to_string()).collect();
        assert_eq!(sources[0], "cbr:3mbit:1000B");
        assert_eq!(sources[3], "greedy:1200B");
        assert!(sources[2].starts_with("trace:") && sources[2].ends_with(":1200B"));
    }

    #[test]
    fn an_unknown_key_is_refused_by_name() {
        let e = SessionFile::parse("to = \"127.0.0.1:1\"\nspeed = 3\n").unwrap_err();
        let e = format!("{e:#}");
        assert!(e.contains("speed") && e.contains("line 2"), "{e}");
        assert!(!e.contains('\n'), "{e}");
        let e =
            SessionFile::parse("[[stream]]\nname = \"a\"\nspec = \"best-effort\"\nsorce = \"-\"\n")
                .unwrap_err();
        assert!(format!("{e:#}").contains("sorce"), "{e:#}");
    }

    #[test]
    fn stream_args_split_name_spec_and_source() {
        let s = StreamPlan::parse_arg("crit:rate=3.2mbit@0.95,copies=2:cbr:3mbit:1000B").unwrap();
        assert_eq!(s.config.name.as_deref(), Some("crit"));
        assert_eq!(s.config.copies, 2);
        assert_eq!(
            s.config.spec,
            StreamSpec::min_rate(Bandwidth::from_kbps(3200), 0.95).unwrap()
        );
        assert_eq!(
            s.source,
            SourceSpec::Cbr {
                rate: Bandwidth::from_mbps(3),
                size: 1000
            }
        );
        let e = format!(
            "{:#}",
            StreamPlan::parse_arg("x:rate=fast@0.9:-").unwrap_err()
        );
        assert!(e.contains("rate=RATE@P"), "{e}");
        let e = format!("{:#}", StreamPlan::parse_arg("x:best-effort").unwrap_err());
        assert!(e.contains("NAME:SPEC:SOURCE"), "{e}");
        let e = format!(
            "{:#}",
            StreamPlan::parse_arg("../x:best-effort:-").unwrap_err()
        );
        assert!(e.contains("stream name"), "{e}");
    }

    #[test]
    fn routes_are_checked() {
        for ok in [
            "direct",
            "via=127.0.0.1:7000,127.0.0.1:7001",
            "bind=127.0.0.2",
            "via=127.0.0.1:1+bind=127.0.0.2",
        ] {
            check_route(ok).unwrap();
        }
        for bad in [
            "",
            "relay=1.2.3.4:5",
            "via=nohost",
            "bind=eth0",
            "direkt",
            "direct+via=127.0.0.1:1",
        ] {
            let e = format!("{:#}", check_route(bad).unwrap_err());
            assert!(!e.contains('\n'), "{e}");
        }
    }

    #[test]
    fn two_streams_with_one_name_are_refused() {
        let flags = Flags {
            to: Some("127.0.0.1:1".into()),
            streams: vec!["a:best-effort:-".into(), "a:best-effort:cbr:1mbit".into()],
            ..Flags::default()
        };
        let e = Plan::new(None, flags).unwrap_err();
        assert!(e.to_string().contains("two streams are named \"a\""));
    }
}
