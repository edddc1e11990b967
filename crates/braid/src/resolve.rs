//! `HOST:PORT` to a socket address: the one resolver of the runtime and
//! of the `braid` commands (issue 30 §5), blocking ([`host_port`]) or
//! async ([`host_port_async`], which sessions use for relay names).
//!
//! Both take the first address the name resolves to, or with `prefer` the
//! first of that address's family (IPv4 or IPv6), so that one socket can
//! carry a path to it; both fail with a [`ResolveError`] whose words say
//! what was given and what is expected.

use std::net::{SocketAddr, ToSocketAddrs};

/// A `HOST:PORT` that does not resolve.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ResolveError {
    /// Not `HOST:PORT`, or the name service refused it.
    #[error("bad address {given:?} (expected HOST:PORT): {why}")]
    Bad {
        /// What was given.
        given: String,
        /// Why it failed.
        why: String,
    },
    /// A name that resolves to no address.
    #[error("address {given:?} resolves to nothing")]
    Nothing {
        /// What was given.
        given: String,
    },
}

fn pick(
    given: &str,
    found: impl Iterator<Item = SocketAddr>,
    prefer: Option<SocketAddr>,
) -> Result<SocketAddr, ResolveError> {
    let all: Vec<SocketAddr> = found.collect();
    prefer
        .and_then(|p| all.iter().find(|a| a.is_ipv4() == p.is_ipv4()))
        .or(all.first())
        .copied()
        .ok_or_else(|| ResolveError::Nothing {
            given: given.to_string(),
        })
}

/// Resolves `given` (`HOST:PORT`, `IP:PORT` or `[IPv6]:PORT`), blocking on
/// the name service if it is a name (see the module docs for `prefer`).
///
/// # Errors
/// [`ResolveError`].
pub fn host_port(given: &str, prefer: Option<SocketAddr>) -> Result<SocketAddr, ResolveError> {
    let found = given.to_socket_addrs().map_err(|e| ResolveError::Bad {
        given: given.to_string(),
        why: e.to_string(),
    })?;
    pick(given, found, prefer)
}

/// As [`host_port`], without blocking the runtime. Must be called from
/// within a tokio runtime.
///
/// # Errors
/// [`ResolveError`].
pub async fn host_port_async(
    given: &str,
    prefer: Option<SocketAddr>,
) -> Result<SocketAddr, ResolveError> {
    let found = tokio::net::lookup_host(given)
        .await
        .map_err(|e| ResolveError::Bad {
            given: given.to_string(),
            why: e.to_string(),
        })?;
    pick(given, found, prefer)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_resolve_and_bad_ones_say_what_is_expected() {
        assert_eq!(
            host_port("127.0.0.1:9000", None),
            Ok(SocketAddr::from(([127, 0, 0, 1], 9000)))
        );
        assert_eq!(host_port("[::1]:9000", None).map(|a| a.is_ipv6()), Ok(true));
        let e = host_port("no-port-here", None).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("bad address \"no-port-here\" (expected HOST:PORT)"),
            "{e}"
        );
    }

    #[test]
    fn the_preferred_family_wins_when_both_are_there() {
        let v6 = SocketAddr::from(([0, 0, 0, 0, 0, 0, 0, 1], 1));
        let v4 = SocketAddr::from(([10, 0, 0, 1], 1));
        let both = [v6, v4];
        assert_eq!(pick("x", both.into_iter(), Some(v4)), Ok(v4));
        assert_eq!(pick("x", both.into_iter(), None), Ok(v6));
        assert_eq!(
            pick("x", std::iter::empty(), None),
            Err(ResolveError::Nothing { given: "x".into() })
        );
    }
}
