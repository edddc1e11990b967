//! The broker's configuration: one TOML file.
//!
//! ```toml
//! domain = "lab"                 # this broker's domain (default "local")
//! hold_time = "120s"             # how long a held reservation waits for its commit
//! secret_file = "broker.secret"  # HS256 token secret, next to this file (or `secret = "…"`)
//!
//! [[resource]]
//! name = "link"
//! kind = "network"               # network | cpu | storage
//! capacity = "100mbit"
//! device = "eth1"                # enforce (`--enforce`) on this interface
//! netns = "router"               # … in this namespace (optional)
//! link = "1gbit"                 # the htb ceil (default: capacity)
//! borrow = true                  # may a reservation use unused link rate (default true)
//!
//! [[resource]]
//! name = "rx-cpu"
//! kind = "cpu"
//! capacity = "1gbit"
//! cpus = 2                       # the capacity stands for 2 CPUs (default: this host's)
//!
//! [policy.user_default]          # also policy.users.NAME, policy.domain_default, policy.domains.NAME
//! rate_per_request = "50mbit"
//! total = "80mbit"
//! duration = "1h"
//! advance = "24h"
//!
//! [callbacks]                    # URLs clients may name as `callback` (default: none)
//! allow = ["https://hooks.example.net/braid/", "http://127.0.0.1:*"]
//! resolve_to = ["10.1.0.0/16"]   # non-public addresses a callback's host name may resolve to
//!
//! [flows]                        # who may reserve flows on which addresses (crate::scope)
//! widest_prefix_v4 = 24          # the widest prefix a user's flow may name (default 24; v6: 64)
//! [flows.users]
//! alice = ["10.77.1.0/24"]       # alice may reserve traffic from or to these
//! [flows.groups.lab]
//! members = ["bob", "carol"]
//! addresses = ["10.77.2.0/24"]
//!
//! [[peer]]                       # a broker this one trusts (see crate::peers)
//! name = "wan"
//! url = "https://broker.example.net"
//! token = "…"                    # a user token the peer issued to this broker
//! timeout = "10s"
//!
//! [[route]]                      # a resource the peer holds, reserved through it
//! resource = "transit"
//! peer = "wan"
//! ```
//!
//! [`Config::parse`] checks everything and names the line and field of the
//! first problem in one line; the policy maps onto
//! [`braid_core::reserve::Policy`].

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use braid_core::reserve::{Limits, Policy, DEFAULT_HOLD_TIME};

/// The shortest `hold_time` a broker takes: a held reservation must live
/// long enough for its holder to commit it.
pub const MIN_HOLD_TIME: Duration = Duration::from_secs(1);
use braid_core::{Bandwidth, Duration};
use serde::{Deserialize, Deserializer};

use crate::allow::AllowList;
use crate::scope::{FlowScopes, RawFlows};

/// Shortest accepted token secret, in bytes.
pub const MIN_SECRET_LEN: usize = 32;

/// A bad configuration file, in one line.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The file could not be read.
    #[error("reading {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The TOML is malformed or a field is wrong.
    #[error("{path}: line {line}: {message}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// The line (1-based) of the problem.
        line: usize,
        /// What is wrong, naming the field.
        message: String,
    },
    /// A check across fields failed.
    #[error("{path}: {message}")]
    Check {
        /// The file.
        path: PathBuf,
        /// What is wrong, naming the field.
        message: String,
    },
}

/// What a resource is (only informative for admission, which is by rate).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ResourceKind {
    /// A network link or path.
    Network,
    /// CPU (a rate of work).
    Cpu,
    /// Storage bandwidth.
    Storage,
}

/// One `[[resource]]` table.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResourceConfig {
    /// Its name in the API.
    pub name: String,
    /// What it is.
    pub kind: ResourceKind,
    /// Its reservable capacity (e.g. "100mbit").
    #[serde(deserialize_with = "rate")]
    pub capacity: Bandwidth,
    /// Network: the interface on which `--enforce` shapes reservations
    /// (an htb class and a u32 filter each).
    #[serde(default)]
    pub device: Option<String>,
    /// Network: the `ip netns` namespace of `device`, when it is not the
    /// broker's own (an agent for a router namespace; the tests).
    #[serde(default)]
    pub netns: Option<String>,
    /// Network: the link rate, the htb ceil (default: the capacity).
    #[serde(default, deserialize_with = "opt_rate")]
    pub link: Option<Bandwidth>,
    /// Network: whether a reserved flow may borrow unused link rate above
    /// its reservation (default true); false shapes it to its rate.
    #[serde(default)]
    pub borrow: Option<bool>,
    /// Network: how much more than a reservation's rate its class gets on
    /// the wire, in percent, for the headers (reservations are payload
    /// rates, htb counts frames; default 5: TCP/IPv4 over Ethernet at a
    /// 1448-byte MSS adds 4.6 %).
    #[serde(default)]
    pub overhead: Option<f64>,
    /// CPU: how many CPUs the capacity stands for (default: the CPUs this
    /// host has); a reservation of rate r gets r / capacity × cpus CPUs.
    #[serde(default)]
    pub cpus: Option<u32>,
}

impl ResourceConfig {
    /// A resource with only a name, a kind and a capacity (what the
    /// operator API creates; no enforcement settings).
    pub fn plain(name: String, kind: ResourceKind, capacity: Bandwidth) -> Self {
        ResourceConfig {
            name,
            kind,
            capacity,
            device: None,
            netns: None,
            link: None,
            borrow: None,
            overhead: None,
            cpus: None,
        }
    }

    /// The link rate: `link`, or the capacity.
    pub fn link_rate(&self) -> Bandwidth {
        self.link.unwrap_or(self.capacity)
    }

    fn check(&self) -> Result<(), String> {
        let name = &self.name;
        let network = self.kind == ResourceKind::Network;
        for (field, given) in [
            ("device", self.device.is_some()),
            ("netns", self.netns.is_some()),
            ("link", self.link.is_some()),
            ("borrow", self.borrow.is_some()),
            ("overhead", self.overhead.is_some()),
        ] {
            if given && !network {
                return Err(format!(
                    "resource {name:?}: {field} is for kind = \"network\" only"
                ));
            }
        }
        if let Some(o) = self.overhead {
            if !(0.0..=100.0).contains(&o) {
                return Err(format!(
                    "resource {name:?}: overhead {o}: a percentage from 0 to 100"
                ));
            }
        }
        if self.cpus.is_some() && self.kind != ResourceKind::Cpu {
            return Err(format!(
                "resource {name:?}: cpus is for kind = \"cpu\" only"
            ));
        }
        if self.cpus == Some(0) {
            return Err(format!("resource {name:?}: cpus must be at least 1"));
        }
        if let Some(d) = &self.device {
            // IFNAMSIZ is 16 with the NUL.
            if d.is_empty() || d.len() > 15 || d.contains(['/', ' ', ':']) || d.starts_with('-') {
                return Err(format!(
                    "resource {name:?}: device {d:?} is not an interface name"
                ));
            }
        }
        if let Some(n) = &self.netns {
            if self.device.is_none() {
                return Err(format!("resource {name:?}: netns needs a device"));
            }
            if n.is_empty()
                || n.starts_with(['-', '.'])
                || !n
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
            {
                return Err(format!(
                    "resource {name:?}: netns {n:?} is not a namespace name"
                ));
            }
        }
        if self.link_rate() < self.capacity {
            return Err(format!(
                "resource {name:?}: link {} is below its capacity {}",
                self.link_rate(),
                self.capacity
            ));
        }
        Ok(())
    }
}

/// One `[[peer]]` table: a broker this one trusts.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PeerConfig {
    /// Its name in `[[route]]` tables.
    #[serde(default)]
    pub name: Option<String>,
    /// Its base URL (http or https).
    pub url: String,
    /// The bearer token it issued to this broker.
    pub token: String,
    /// How long a call to it may take (default
    /// [`crate::peers::PEER_TIMEOUT`]); a peer silent for longer is taken
    /// as refusing.
    #[serde(default, deserialize_with = "opt_duration")]
    pub timeout: Option<Duration>,
}

/// One `[[route]]` table: a resource another domain holds, reserved
/// through its broker.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouteConfig {
    /// The resource's name at the peer (and in requests here).
    pub resource: String,
    /// The `[[peer]]` that holds it, by name.
    pub peer: String,
}

/// The broker's configuration, checked.
#[derive(Debug, Clone)]
pub struct Config {
    /// This broker's domain.
    pub domain: String,
    /// How long a held reservation waits for its commit.
    pub hold_time: Duration,
    /// The resources, in file order.
    pub resources: Vec<ResourceConfig>,
    /// Admission policy.
    pub policy: Policy,
    /// Trusted peer brokers.
    pub peers: Vec<PeerConfig>,
    /// The HS256 token secret.
    pub secret: Vec<u8>,
    /// The callback URLs clients may name (empty: none).
    pub callbacks: AllowList,
    /// Resources held by peer brokers.
    pub routes: Vec<RouteConfig>,
    /// Who may reserve flows on which addresses.
    pub flows: FlowScopes,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    domain: Option<String>,
    #[serde(default, deserialize_with = "opt_duration")]
    hold_time: Option<Duration>,
    secret: Option<String>,
    secret_file: Option<String>,
    #[serde(default)]
    resource: Vec<ResourceConfig>,
    #[serde(default)]
    policy: RawPolicy,
    #[serde(default)]
    peer: Vec<PeerConfig>,
    #[serde(default)]
    callbacks: RawCallbacks,
    #[serde(default)]
    route: Vec<RouteConfig>,
    #[serde(default)]
    flows: RawFlows,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCallbacks {
    #[serde(default)]
    allow: Vec<String>,
    #[serde(default)]
    resolve_to: Vec<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPolicy {
    #[serde(default)]
    user_default: RawLimits,
    #[serde(default)]
    users: BTreeMap<String, RawLimits>,
    #[serde(default)]
    domain_default: RawLimits,
    #[serde(default)]
    domains: BTreeMap<String, RawLimits>,
}

#[derive(Debug, Default, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLimits {
    #[serde(default, deserialize_with = "opt_rate")]
    rate_per_request: Option<Bandwidth>,
    #[serde(default, deserialize_with = "opt_rate")]
    total: Option<Bandwidth>,
    #[serde(default, deserialize_with = "opt_duration")]
    duration: Option<Duration>,
    #[serde(default, deserialize_with = "opt_duration")]
    advance: Option<Duration>,
}

impl From<RawLimits> for Limits {
    fn from(r: RawLimits) -> Limits {
        Limits {
            rate_per_request: r.rate_per_request,
            total: r.total,
            duration: r.duration,
            advance: r.advance,
        }
    }
}

fn rate<'de, D: Deserializer<'de>>(d: D) -> Result<Bandwidth, D::Error> {
    let text = String::deserialize(d)?;
    let rate: Bandwidth = text.parse().map_err(serde::de::Error::custom)?;
    if rate == Bandwidth::ZERO {
        return Err(serde::de::Error::custom(
            "a capacity or limit must be above zero",
        ));
    }
    Ok(rate)
}

fn opt_rate<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Bandwidth>, D::Error> {
    rate(d).map(Some)
}

fn opt_duration<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
    let text = String::deserialize(d)?;
    parse_duration(&text)
        .map(Some)
        .map_err(serde::de::Error::custom)
}

/// A duration as braid writes them (`100ms`, `2m`, `1h`), plus days (`30d`).
///
/// # Errors
/// The parse error, in one line.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    if let Some(days) = t.strip_suffix('d') {
        let days: f64 = days
            .parse()
            .map_err(|_| format!("invalid duration {text:?}"))?;
        if !days.is_finite() || days < 0.0 {
            return Err(format!("invalid duration {text:?}"));
        }
        return Ok(Duration::from_secs_f64(days * 86_400.0));
    }
    t.parse::<Duration>().map_err(|e| e.to_string())
}

impl Config {
    /// Reads and checks the file at `path` (a `secret_file` is found next
    /// to it).
    ///
    /// # Errors
    /// [`ConfigError`], naming the line and field.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Config::parse(&text, path)
    }

    /// Checks `text`, read from `path`.
    ///
    /// # Errors
    /// [`ConfigError`], naming the line and field.
    pub fn parse(text: &str, path: &Path) -> Result<Config, ConfigError> {
        let raw: RawConfig = toml::from_str(text).map_err(|e| ConfigError::Invalid {
            path: path.to_path_buf(),
            line: e.span().map_or(1, |s| {
                text[..s.start.min(text.len())].matches('\n').count() + 1
            }),
            message: e.message().trim().replace('\n', " "),
        })?;
        let check = |message: String| ConfigError::Check {
            path: path.to_path_buf(),
            message,
        };
        if raw.resource.is_empty() {
            return Err(check("no [[resource]]: a broker needs at least one".into()));
        }
        let mut names = std::collections::BTreeSet::new();
        for r in &raw.resource {
            if r.name.is_empty() || r.name.contains('/') {
                return Err(check(format!(
                    "resource name {:?}: must be non-empty, without '/'",
                    r.name
                )));
            }
            r.check().map_err(&check)?;
            if !names.insert(r.name.as_str()) {
                return Err(check(format!("resource {:?} is listed twice", r.name)));
            }
        }
        for p in &raw.peer {
            if !(p.url.starts_with("http://") || p.url.starts_with("https://")) {
                return Err(check(format!(
                    "peer url {:?}: must start with http:// or https://",
                    p.url
                )));
            }
            if p.token.trim().is_empty() {
                return Err(check(format!("peer {}: token is empty", p.url)));
            }
        }
        let secret = match (raw.secret, raw.secret_file) {
            (Some(s), None) => s.into_bytes(),
            (None, Some(file)) => {
                let file = path.parent().unwrap_or(Path::new(".")).join(file);
                read_secret(&file).map_err(|e| check(format!("secret_file: {e}")))?
            }
            (Some(_), Some(_)) => return Err(check("give secret or secret_file, not both".into())),
            (None, None) => {
                return Err(check(
                    "no token secret: add secret_file = \"broker.secret\" (make one with `braid keygen broker.secret`) or secret = \"…\"".into(),
                ))
            }
        };
        if secret.len() < MIN_SECRET_LEN {
            return Err(check(format!(
                "the token secret is {} bytes; use at least {MIN_SECRET_LEN}",
                secret.len()
            )));
        }
        for r in &raw.route {
            if names.contains(r.resource.as_str()) {
                return Err(check(format!(
                    "route {:?}: a [[resource]] of this broker has that name",
                    r.resource
                )));
            }
            if !raw.peer.iter().any(|p| p.name.as_deref() == Some(&r.peer)) {
                return Err(check(format!(
                    "route {:?}: no [[peer]] named {:?}",
                    r.resource, r.peer
                )));
            }
        }
        let callbacks = AllowList::new(raw.callbacks.allow)
            .and_then(|l| l.resolving_to(&raw.callbacks.resolve_to))
            .map_err(|e| check(e.to_string()))?;
        if raw.hold_time.is_some_and(|h| h < MIN_HOLD_TIME) {
            return Err(check(format!(
                "hold_time = \"{}\": a held reservation needs at least {} to be committed",
                raw.hold_time.unwrap_or_default(),
                MIN_HOLD_TIME
            )));
        }
        let flows = FlowScopes::new(raw.flows).map_err(&check)?;
        let p = raw.policy;
        Ok(Config {
            domain: raw.domain.unwrap_or_else(|| "local".into()),
            hold_time: raw.hold_time.unwrap_or(DEFAULT_HOLD_TIME),
            resources: raw.resource,
            policy: Policy {
                user_default: p.user_default.into(),
                users: p.users.into_iter().map(|(k, v)| (k, v.into())).collect(),
                domain_default: p.domain_default.into(),
                domains: p.domains.into_iter().map(|(k, v)| (k, v.into())).collect(),
            },
            peers: raw.peer,
            secret,
            callbacks,
            routes: raw.route,
            flows,
        })
    }

    /// The resource called `name`.
    pub fn resource(&self, name: &str) -> Option<&ResourceConfig> {
        self.resources.iter().find(|r| r.name == name)
    }

    /// The peer that holds the remote resource `name`, if it is one.
    pub fn route(&self, name: &str) -> Option<&PeerConfig> {
        let route = self.routes.iter().find(|r| r.resource == name)?;
        self.peers
            .iter()
            .find(|p| p.name.as_deref() == Some(&route.peer))
    }
}

/// A secret file: a `braid keygen` key file (`braid-key-1 <hex>`) or any
/// text, trimmed.
fn read_secret(file: &Path) -> Result<Vec<u8>, String> {
    let text = std::fs::read_to_string(file).map_err(|e| format!("{}: {e}", file.display()))?;
    let text = text.trim();
    Ok(match text.strip_prefix("braid-key-1 ") {
        Some(hex) => hex.trim().as_bytes().to_vec(),
        None => text.as_bytes().to_vec(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &str = "secret = \"0123456789abcdef0123456789abcdef\"\n";

    fn parse(text: &str) -> Result<Config, ConfigError> {
        Config::parse(text, Path::new("broker.toml"))
    }

    #[test]
    fn a_hold_time_too_short_to_commit_is_refused() {
        let with = |h: &str| {
            parse(&format!(
                "{SECRET}hold_time = \"{h}\"\n[[resource]]\nname = \"link\"\nkind = \"network\"\ncapacity = \"100mbit\"\n"
            ))
        };
        for h in ["0s", "1ns", "999ms"] {
            let e = with(h).unwrap_err();
            assert!(e.to_string().contains("at least 1s"), "{h}: {e}");
        }
        assert!(with("1s").is_ok());
    }

    #[test]
    fn parses_resources_policy_and_peers() {
        let c = parse(&format!(
            "{SECRET}hold_time = \"30s\"\n[[resource]]\nname = \"link\"\nkind = \"network\"\ncapacity = \"100mbit\"\n\
             [policy.user_default]\nrate_per_request = \"50mbit\"\nduration = \"1h\"\n\
             [policy.users.alice]\ntotal = \"20mbit\"\n[[peer]]\nurl = \"https://b.example\"\ntoken = \"t\"\n"
        ))
        .unwrap();
        assert_eq!(c.resources[0].capacity, Bandwidth::from_mbps(100));
        assert_eq!(c.hold_time, Duration::from_secs(30));
        assert_eq!(
            c.policy.user_default.rate_per_request,
            Some(Bandwidth::from_mbps(50))
        );
        assert_eq!(
            c.policy.users["alice"].total,
            Some(Bandwidth::from_mbps(20))
        );
        assert_eq!(c.peers.len(), 1);
    }

    #[test]
    fn enforcement_fields_are_checked() {
        let net = |extra: &str| {
            parse(&format!(
                "{SECRET}[[resource]]\nname = \"l\"\nkind = \"network\"\ncapacity = \"100mbit\"\n{extra}"
            ))
        };
        let c =
            net("device = \"eth1\"\nnetns = \"r1\"\nlink = \"1gbit\"\nborrow = false\n").unwrap();
        let r = &c.resources[0];
        assert_eq!(r.device.as_deref(), Some("eth1"));
        assert_eq!(r.link_rate(), Bandwidth::from_mbps(1000));
        assert_eq!(r.borrow, Some(false));
        assert_eq!(
            net("overhead = 5\n").unwrap().resources[0].overhead,
            Some(5.0)
        );
        assert_eq!(
            net("overhead = 2.5\n").unwrap().resources[0].overhead,
            Some(2.5)
        );
        let e = net("overhead = 101\n").unwrap_err().to_string();
        assert!(e.contains("overhead 101"), "{e}");
        assert_eq!(
            net("device = \"eth1\"\n").unwrap().resources[0].link_rate(),
            Bandwidth::from_mbps(100)
        );
        for (extra, want) in [
            (
                "device = \"eth1\"\nlink = \"10mbit\"\n",
                "below its capacity",
            ),
            ("netns = \"r1\"\n", "netns needs a device"),
            ("device = \"a/b\"\n", "not an interface name"),
            (
                "device = \"eth1\"\nnetns = \"-x\"\n",
                "not a namespace name",
            ),
            ("cpus = 2\n", "cpus is for"),
        ] {
            let e = net(extra).unwrap_err().to_string();
            assert!(e.contains(want), "{extra}: {e}");
        }
        let e = parse(&format!(
            "{SECRET}[[resource]]\nname = \"c\"\nkind = \"cpu\"\ncapacity = \"1gbit\"\ndevice = \"eth1\"\n"
        ))
        .unwrap_err()
        .to_string();
        assert!(e.contains("device is for"), "{e}");
    }

    #[test]
    fn names_line_and_field_of_a_bad_value() {
        let e = parse(&format!(
            "{SECRET}[[resource]]\nname = \"link\"\nkind = \"network\"\ncapacity = \"100 furlongs\"\n"
        ))
        .unwrap_err()
        .to_string();
        assert!(e.contains("line 5") && e.contains("furlongs"), "{e}");
        assert!(!e.contains('\n'), "{e}");
        let e = parse(&format!(
            "{SECRET}[[resource]]\nname = \"l\"\nkind = \"disk\"\ncapacity = \"1mbit\"\n"
        ))
        .unwrap_err()
        .to_string();
        assert!(e.contains("line 4") && e.contains("disk"), "{e}");
        let e = parse("[[resource]]\nname = \"l\"\nkind = \"cpu\"\ncapacity = \"1mbit\"\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("secret"), "{e}");
        assert!(parse(SECRET)
            .unwrap_err()
            .to_string()
            .contains("[[resource]]"));
    }
}
