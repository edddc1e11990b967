//! The operator's allow-list of callback URLs.
//!
//! A broker posts to URLs its clients name, so without a check any user
//! could make it send requests into the operator's network. The list in
//! the configuration is the only way in: `[callbacks] allow = [...]`. Each
//! pattern is a URL: scheme, host and port must equal the callback's (the
//! port may be `*`: any), and its path segments must begin the callback's,
//! segment by segment (a segment `*` matches any one segment):
//! `"http://127.0.0.1:*"` allows any port and path on that host,
//! `"https://hooks.example.net/braid/"` anything below that path. Both sides
//! are parsed and normalised first (the `url` crate: `..` resolved, the
//! host lower-cased, default ports made explicit), and a callback with
//! user information (`http://user@host/`) is refused, so neither
//! `http://127.0.0.1:1@127.0.0.2:80/` nor `…/hooks/../secret` gets past a
//! pattern by its spelling. With no list, every callback is refused (400
//! naming `callback`).
//!
//! A pattern names a host; what the host's name resolves to is checked
//! when the broker connects ([`AllowList::reachable`], used by
//! [`crate::callbacks`]): a name may lead only to a public address, or to
//! one inside the config's `[callbacks] resolve_to` prefixes, so a name
//! that is allowed but later resolves into the operator's network (DNS
//! rebinding) reaches nothing there. A pattern that is an address (like
//! `127.0.0.1`) is connected to as written.

use std::net::IpAddr;

use url::Url;

use crate::flow::Prefix;

/// The most patterns in `callbacks.allow`.
pub const MAX_PATTERNS: usize = 64;

/// One parsed pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Pattern {
    scheme: String,
    host: String,
    /// `None`: any port.
    port: Option<u16>,
    /// Leading path segments; `"*"` matches any one.
    segments: Vec<String>,
}

/// The operator's allow-list of callback URLs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AllowList {
    patterns: Vec<Pattern>,
    /// Non-public prefixes a callback host's name may resolve to.
    resolve_to: Vec<Prefix>,
}

/// Addresses that are not public: a callback host's name may resolve to
/// them only through `resolve_to`. (IPv4 special-purpose registry, RFC
/// 6890 and successors; IPv6: loopback, unspecified, unique local, link
/// local, multicast, documentation, and IPv4-mapped ones by their IPv4.)
const NOT_PUBLIC: &[&str] = &[
    "0.0.0.0/8",
    "10.0.0.0/8",
    "100.64.0.0/10",
    "127.0.0.0/8",
    "169.254.0.0/16",
    "172.16.0.0/12",
    "192.0.0.0/24",
    "192.0.2.0/24",
    "192.88.99.0/24",
    "192.168.0.0/16",
    "198.18.0.0/15",
    "198.51.100.0/24",
    "203.0.113.0/24",
    "224.0.0.0/4",
    "240.0.0.0/4",
    "::/127",
    "64:ff9b:1::/48",
    "100::/64",
    "2001:db8::/32",
    "fc00::/7",
    "fe80::/10",
    "ff00::/8",
];

/// Whether `ip` is a public address (not in `NOT_PUBLIC`).
pub fn is_public(ip: IpAddr) -> bool {
    let ip = canonical(ip);
    let host = Prefix {
        addr: ip,
        len: if ip.is_ipv4() { 32 } else { 128 },
    };
    !NOT_PUBLIC
        .iter()
        .filter_map(|p| Prefix::parse("callbacks", p).ok())
        .any(|p| p.contains(&host))
}

/// An IPv4-mapped IPv6 address as its IPv4 address; others as they are.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// A pattern that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PatternError {
    /// Not an http:// or https:// URL with a host.
    #[error("callbacks.allow: {0:?} must be an http:// or https:// URL with a host")]
    Scheme(String),
    /// A pattern that does not parse, or has user information or a `*`
    /// anywhere but the whole port or a whole path segment.
    #[error("callbacks.allow: {0:?}: {1}")]
    Invalid(String, String),
    /// Too many patterns.
    #[error("callbacks.allow: at most {MAX_PATTERNS} patterns")]
    TooMany,
}

/// The path segments of `u`, without the empty one a trailing `/` leaves.
fn segments(u: &Url) -> Vec<String> {
    let mut v: Vec<String> = u
        .path_segments()
        .map(|s| s.map(str::to_string).collect())
        .unwrap_or_default();
    if v.last().is_some_and(String::is_empty) {
        v.pop();
    }
    v
}

impl Pattern {
    fn parse(p: &str) -> Result<Pattern, PatternError> {
        let invalid = |why: &str| PatternError::Invalid(p.to_string(), why.to_string());
        let rest = p
            .strip_prefix("http://")
            .or_else(|| p.strip_prefix("https://"))
            .filter(|r| !r.is_empty())
            .ok_or_else(|| PatternError::Scheme(p.to_string()))?;
        // `:*` as the whole port means any port; parse with a stand-in.
        let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
        let any_port = authority.ends_with(":*");
        let text = if any_port {
            p.replacen(authority, &authority.replace(":*", ""), 1)
        } else {
            p.to_string()
        };
        let u = Url::parse(&text).map_err(|e| invalid(&e.to_string()))?;
        if !u.username().is_empty() || u.password().is_some() {
            return Err(invalid("user information is not allowed"));
        }
        let host = u
            .host_str()
            .ok_or_else(|| PatternError::Scheme(p.to_string()))?;
        if host.contains('*') {
            return Err(invalid(
                "`*` may stand only for the whole port or a whole path segment",
            ));
        }
        let segments = segments(&u);
        if segments.iter().any(|s| s.contains('*') && s != "*") {
            return Err(invalid(
                "`*` may stand only for the whole port or a whole path segment",
            ));
        }
        Ok(Pattern {
            scheme: u.scheme().to_string(),
            host: host.to_string(),
            port: if any_port {
                None
            } else {
                u.port_or_known_default()
            },
            segments,
        })
    }

    fn allows(&self, u: &Url) -> bool {
        let path = segments(u);
        u.scheme() == self.scheme
            && u.host_str() == Some(self.host.as_str())
            && self
                .port
                .is_none_or(|p| u.port_or_known_default() == Some(p))
            && path.len() >= self.segments.len()
            && self
                .segments
                .iter()
                .zip(&path)
                .all(|(want, got)| want == "*" || want == got)
    }
}

impl AllowList {
    /// The list of `patterns` (see the module doc).
    ///
    /// # Errors
    /// [`PatternError`].
    pub fn new(patterns: Vec<String>) -> Result<AllowList, PatternError> {
        if patterns.len() > MAX_PATTERNS {
            return Err(PatternError::TooMany);
        }
        let patterns = patterns
            .iter()
            .map(|p| Pattern::parse(p))
            .collect::<Result<_, _>>()?;
        Ok(AllowList {
            patterns,
            resolve_to: Vec::new(),
        })
    }

    /// The list with `prefixes` (addresses or prefixes) that a callback
    /// host's name may resolve to besides public addresses.
    ///
    /// # Errors
    /// [`PatternError::Invalid`] for one that is not an address or prefix.
    pub fn resolving_to(mut self, prefixes: &[String]) -> Result<AllowList, PatternError> {
        self.resolve_to = prefixes
            .iter()
            .map(|p| {
                Prefix::parse("callbacks.resolve_to", p).map_err(|e| {
                    PatternError::Invalid(format!("resolve_to {p}"), e.message.clone())
                })
            })
            .collect::<Result<_, _>>()?;
        Ok(self)
    }

    /// Whether the broker may connect to `ip`, an address a callback
    /// host's name resolved to: a public address, or one inside
    /// `resolve_to`.
    pub fn reachable(&self, ip: IpAddr) -> bool {
        let ip = canonical(ip);
        let host = Prefix {
            addr: ip,
            len: if ip.is_ipv4() { 32 } else { 128 },
        };
        is_public(ip) || self.resolve_to.iter().any(|p| p.contains(&host))
    }

    /// Whether no callback is allowed.
    pub fn is_empty(&self) -> bool {
        self.patterns.is_empty()
    }

    /// Whether `url` is allowed: it parses as an http(s) URL without user
    /// information and some pattern matches it (see the module doc).
    pub fn allows(&self, url: &str) -> bool {
        let Ok(u) = Url::parse(url) else {
            return false;
        };
        if !u.username().is_empty() || u.password().is_some() {
            return false;
        }
        self.patterns.iter().any(|p| p.allows(&u))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allow_list_matches_prefixes_and_wildcard_ports() {
        let list = AllowList::new(vec![
            "http://127.0.0.1:*".into(),
            "https://hooks.example.net/braid/".into(),
            "https://a.example".into(),
        ])
        .unwrap();
        assert!(list.allows("http://127.0.0.1:8080/hook"));
        assert!(list.allows("http://127.0.0.1:1"));
        assert!(!list.allows("http://127.0.0.2:8080/hook"));
        assert!(!list.allows("http://127.0.0.1.evil.net:80/"));
        assert!(list.allows("https://hooks.example.net/braid/x?y=1"));
        assert!(!list.allows("https://hooks.example.net/other"));
        assert!(list.allows("https://a.example/x"));
        assert!(list.allows("https://A.example"));
        assert!(!list.allows("https://a.example.evil.net/"));
        assert!(!list.allows("http://a.example/"));
        assert!(AllowList::default().is_empty());
        assert!(!AllowList::default().allows("http://127.0.0.1:1/"));
        assert!(AllowList::new(vec!["ftp://x".into()]).is_err());
        assert!(AllowList::new(vec!["https://".into()]).is_err());
    }

    #[test]
    fn names_lead_only_to_public_addresses_or_resolve_to() {
        let ip = |t: &str| t.parse::<IpAddr>().unwrap();
        let list = AllowList::default();
        for private in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "224.0.0.1",
            "255.255.255.255",
            "::1",
            "::",
            "fd00::1",
            "fe80::1",
            "::ffff:127.0.0.1",
        ] {
            assert!(!list.reachable(ip(private)), "{private}");
        }
        for public in ["192.0.1.1", "8.8.8.8", "2606:4700::1111", "::ffff:8.8.8.8"] {
            assert!(list.reachable(ip(public)), "{public}");
        }
        let list = list
            .resolving_to(&["10.1.0.0/16".into(), "::1".into()])
            .unwrap();
        assert!(list.reachable(ip("10.1.2.3")));
        assert!(!list.reachable(ip("10.2.0.1")));
        assert!(list.reachable(ip("::1")));
        assert!(AllowList::default()
            .resolving_to(&["10.1.0.0/33".into()])
            .is_err());
    }

    /// Issue 29 §4: what a string prefix let through.
    #[test]
    fn spelling_does_not_get_past_a_pattern() {
        let list = AllowList::new(vec![
            "http://127.0.0.1:*".into(),
            "https://hooks.example.net/hooks/".into(),
            "https://b.example:8443/x".into(),
        ])
        .unwrap();
        // User information that makes the host another one.
        assert!(!list.allows("http://127.0.0.1:1@127.0.0.2:9000/"));
        assert!(!list.allows("http://user@127.0.0.1:9000/"));
        // `..` out of the allowed path, raw and percent-encoded.
        assert!(!list.allows("https://hooks.example.net/hooks/../secret"));
        assert!(!list.allows("https://hooks.example.net/hooks/%2e%2e/secret"));
        assert!(list.allows("https://hooks.example.net/hooks/a/../b"));
        // A path prefix is a segment prefix.
        assert!(!list.allows("https://hooks.example.net/hooksmith"));
        assert!(!list.allows("https://b.example:8443/xy"));
        assert!(list.allows("https://b.example:8443/x/y"));
        // The port is exact unless `*`, default ports included.
        assert!(!list.allows("https://b.example/x"));
        assert!(!list.allows("https://b.example:8444/x"));
        // Not URLs, or not http(s).
        assert!(!list.allows("127.0.0.1:80/"));
        assert!(!list.allows("file:///etc/passwd"));
        // Patterns with `*` inside a host or segment, or user information.
        for bad in [
            "http://*.example/",
            "http://a.example/ho*ks/",
            "http://u@a.example/",
        ] {
            assert!(AllowList::new(vec![bad.into()]).is_err(), "{bad}");
        }
    }
}
