//! How the application names a session's paths: `direct`, `via=…` through
//! relays, `bind=…` to leave from one local address, `tcp` to run the
//! first hop over TCP where UDP is blocked.
//!
//! Main types: [`PathConfig`], [`Route`], [`PathSyntaxError`].
//!
//! A path is one or more terms joined by `+`:
//!
//! | term | meaning |
//! | --- | --- |
//! | `direct` | straight to the sink (the default route) |
//! | `via=HOST:PORT[,HOST:PORT…]` | through these relays, in order (at most 7) |
//! | `bind=ADDR` | leave from local address `ADDR` (an IP, or IP:PORT), e.g. one interface of a multi-homed host |
//! | `name=NAME` | what views and metrics call it (default `p0`, `p1`, … by position) |
//! | `tcp` | the first hop (to the sink, or to the first relay) runs over one TCP connection instead of UDP; a relay's next hops stay UDP (see [`crate::rudp::tcp`]) |
//!
//! e.g. `via=relay1.example:7000+bind=198.18.1.1`, `direct+tcp`. [`PathConfig`]'s
//! `Display` writes the same syntax back.

use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::str::FromStr;

/// Most relays on one path (a route also names the sink, and routes hold
/// at most [`braid_core::session::route::MAX_ROUTE_HOPS`] addresses).
pub const MAX_RELAYS: usize = braid_core::session::route::MAX_ROUTE_HOPS - 1;

/// Where a path goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// Straight to the sink.
    Direct,
    /// Through these relays (`HOST:PORT`, resolved when the session
    /// connects), in order.
    Via(Vec<String>),
}

/// One path of a session (see the module docs for the syntax).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathConfig {
    /// Where it goes.
    pub route: Route,
    /// The local address it leaves from (port 0 when only an IP is given).
    pub bind: Option<SocketAddr>,
    /// Its name in views and metrics.
    pub name: Option<String>,
    /// Whether its first hop runs over TCP (datagrams framed on one TCP
    /// connection) instead of UDP.
    pub tcp: bool,
}

impl PathConfig {
    /// A direct path.
    pub fn direct() -> Self {
        PathConfig {
            route: Route::Direct,
            bind: None,
            name: None,
            tcp: false,
        }
    }

    /// A path through `relays`.
    pub fn via(relays: Vec<String>) -> Self {
        PathConfig {
            route: Route::Via(relays),
            bind: None,
            name: None,
            tcp: false,
        }
    }

    /// Leaving from `local`.
    pub fn bound_to(mut self, local: SocketAddr) -> Self {
        self.bind = Some(local);
        self
    }

    /// Named `name`.
    pub fn named(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// With its first hop over TCP.
    pub fn over_tcp(mut self) -> Self {
        self.tcp = true;
        self
    }
}

/// A path that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("path {input:?}: {why} (expected `direct`, `via=HOST:PORT[,HOST:PORT…]`, `bind=ADDR`, `name=NAME` or `tcp`, joined by '+')")]
pub struct PathSyntaxError {
    /// What was given.
    pub input: String,
    /// What is wrong with it.
    pub why: String,
}

impl FromStr for PathConfig {
    type Err = PathSyntaxError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = |why: String| PathSyntaxError {
            input: s.to_string(),
            why,
        };
        let mut route: Option<Route> = None;
        let mut bind = None;
        let mut name = None;
        let mut tcp = false;
        if s.trim().is_empty() {
            return Err(err("empty".into()));
        }
        for term in s.split('+') {
            let (key, value) = match term.split_once('=') {
                Some((k, v)) => (k.trim(), Some(v.trim())),
                None => (term.trim(), None),
            };
            let set_route = |route: &mut Option<Route>, r: Route| {
                if route.is_some() {
                    return Err(err("more than one route (`direct` or `via=`)".into()));
                }
                *route = Some(r);
                Ok(())
            };
            match (key, value) {
                ("direct", None) => set_route(&mut route, Route::Direct)?,
                ("via", Some(v)) => {
                    let hops: Vec<String> = v.split(',').map(|h| h.trim().to_string()).collect();
                    if hops.iter().any(|h| h.is_empty()) {
                        return Err(err("an empty relay in `via=`".into()));
                    }
                    if hops.len() > MAX_RELAYS {
                        return Err(err(format!("{} relays (at most {MAX_RELAYS})", hops.len())));
                    }
                    for h in &hops {
                        check_host_port(h).map_err(err)?;
                    }
                    set_route(&mut route, Route::Via(hops))?;
                }
                ("bind", Some(v)) => {
                    if bind.is_some() {
                        return Err(err("more than one `bind=`".into()));
                    }
                    bind = Some(parse_bind(v).map_err(err)?);
                }
                ("name", Some(v)) => {
                    let ok = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
                    if v.is_empty() || v.len() > 32 || !v.chars().all(ok) {
                        return Err(err(format!(
                            "name {v:?}: use 1-32 ASCII letters, digits, '.', '_' or '-'"
                        )));
                    }
                    name = Some(v.to_string());
                }
                ("tcp", None) => {
                    if tcp {
                        return Err(err("more than one `tcp`".into()));
                    }
                    tcp = true;
                }
                (k, _) => return Err(err(format!("unknown term `{}`", k))),
            }
        }
        Ok(PathConfig {
            route: route.unwrap_or(Route::Direct),
            bind,
            name,
            tcp,
        })
    }
}

impl fmt::Display for PathConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.route {
            Route::Direct => f.write_str("direct")?,
            Route::Via(h) => write!(f, "via={}", h.join(","))?,
        }
        if self.tcp {
            f.write_str("+tcp")?;
        }
        if let Some(b) = self.bind {
            if b.port() == 0 {
                write!(f, "+bind={}", b.ip())?;
            } else {
                write!(f, "+bind={b}")?;
            }
        }
        if let Some(n) = &self.name {
            write!(f, "+name={n}")?;
        }
        Ok(())
    }
}

/// `HOST:PORT` with a non-empty host and a port number.
fn check_host_port(h: &str) -> Result<(), String> {
    if h.parse::<SocketAddr>().is_ok() {
        return Ok(());
    }
    match h.rsplit_once(':') {
        Some((host, port)) if !host.is_empty() && port.parse::<u16>().is_ok() => Ok(()),
        _ => Err(format!("relay {h:?} is not HOST:PORT")),
    }
}

/// `IP` or `IP:PORT`.
fn parse_bind(v: &str) -> Result<SocketAddr, String> {
    if let Ok(a) = v.parse::<SocketAddr>() {
        return Ok(a);
    }
    v.parse::<IpAddr>()
        .map(|ip| SocketAddr::new(ip, 0))
        .map_err(|_| format!("bind address {v:?} is not an IP or IP:PORT"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_writes_back() {
        for s in [
            "direct",
            "via=10.0.0.2:7000",
            "via=r1.example:7000,10.0.0.3:7001+bind=198.18.1.1",
            "direct+bind=127.0.0.2:9000+name=fast",
            "direct+tcp",
            "via=10.0.0.2:7000+tcp+bind=127.0.0.1+name=t",
        ] {
            let p: PathConfig = s.parse().unwrap();
            assert_eq!(p.to_string(), s);
        }
        let p: PathConfig = "bind=::1".parse().unwrap();
        assert_eq!(p.route, Route::Direct);
        assert_eq!(p.bind, Some("[::1]:0".parse().unwrap()));
        assert!(!p.tcp);
        let p: PathConfig = "tcp+via=r:7000".parse().unwrap();
        assert!(p.tcp);
        assert_eq!(p, PathConfig::via(vec!["r:7000".into()]).over_tcp());
    }

    #[test]
    fn bad_paths_name_the_problem() {
        for (s, why) in [
            ("", "empty"),
            ("sideways", "unknown term `sideways`"),
            ("via=", "empty relay"),
            ("via=10.0.0.1", "not HOST:PORT"),
            ("direct+via=a:1", "more than one route"),
            ("bind=eth0", "not an IP"),
            ("direct+tcp+tcp", "more than one `tcp`"),
            ("tcp=1", "unknown term `tcp`"),
            ("via=a:1,b:2,c:3,d:4,e:5,f:6,g:7,h:8", "at most 7"),
        ] {
            let e = s.parse::<PathConfig>().unwrap_err();
            assert!(e.to_string().contains(why), "{s}: {e}");
        }
    }
}
