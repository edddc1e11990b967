//! Admission policy: per-user and per-domain limits (seed 004 §6, "a domain
//! may allocate resources on the basis of user identity … up to some SLA
//! limit").
//!
//! A [`Policy`] holds [`Limits`] for named users and domains and a default
//! for each scope. [`Policy::check`] runs at admission, before capacity is
//! looked at; the first limit exceeded is returned as a [`PolicyError`]
//! naming the [`PolicyRule`] (whose limit, which kind) so that a refused
//! user reads why. Users are checked before their domain.
//!
//! "Total" is the peak, over the requested interval, of the rate the user
//! (or the whole domain) holds on the requested resource, including held
//! reservations and the request itself.

use core::fmt;
use std::collections::BTreeMap;

use crate::time::{Duration, Instant};
use crate::units::Bandwidth;

/// Who asks: the authenticated user and the domain it belongs to (for a
/// request forwarded by a peer broker, the peer's domain).
#[derive(
    Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub struct Owner {
    /// The user's name.
    pub user: String,
    /// The user's domain.
    pub domain: String,
}

impl Owner {
    /// `user` in `domain`.
    pub fn new(user: impl Into<String>, domain: impl Into<String>) -> Owner {
        Owner {
            user: user.into(),
            domain: domain.into(),
        }
    }
}

/// Limits for one user or one domain; `None` means unlimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Limits {
    /// The most one request may reserve.
    pub rate_per_request: Option<Bandwidth>,
    /// The most held at any instant on one resource (all requests together).
    pub total: Option<Bandwidth>,
    /// The longest reservation.
    pub duration: Option<Duration>,
    /// How far ahead of now a reservation may start.
    pub advance: Option<Duration>,
}

/// Per-user and per-domain limits (see the module doc).
#[derive(Debug, Clone, PartialEq, Default, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Policy {
    /// Limits for users without their own entry.
    pub user_default: Limits,
    /// Limits for named users.
    pub users: BTreeMap<String, Limits>,
    /// Limits for domains without their own entry.
    pub domain_default: Limits,
    /// Limits for named domains.
    pub domains: BTreeMap<String, Limits>,
}

/// Whose limit a rule is.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// A user's (their own entry or the default).
    User(String),
    /// A domain's (its own entry or the default).
    Domain(String),
}

/// Which limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LimitKind {
    /// [`Limits::rate_per_request`].
    RatePerRequest,
    /// [`Limits::total`].
    Total,
    /// [`Limits::duration`].
    Duration,
    /// [`Limits::advance`].
    Advance,
}

/// One rule: a scope's limit of one kind.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PolicyRule {
    /// Whose limit.
    pub scope: Scope,
    /// Which limit.
    pub kind: LimitKind,
}

/// A rate or a duration, for naming what was asked and allowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Amount {
    /// A rate.
    Rate(Bandwidth),
    /// A length of time.
    Time(Duration),
}

/// A request refused by policy: the rule, what was asked, what it allows.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("refused by policy ({rule}): {requested} asked, {limit} allowed")]
pub struct PolicyError {
    /// The rule that refused.
    pub rule: PolicyRule,
    /// What the request asked for (for a total: the total with the request).
    pub requested: Amount,
    /// The rule's limit.
    pub limit: Amount,
}

/// What policy looks at in a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PolicyQuery {
    /// The rate asked for.
    pub rate: Bandwidth,
    /// When it starts.
    pub start: Instant,
    /// When it ends.
    pub end: Instant,
    /// Now.
    pub now: Instant,
}

impl Policy {
    /// The limits that apply to `user`.
    pub fn user_limits(&self, user: &str) -> &Limits {
        self.users.get(user).unwrap_or(&self.user_default)
    }

    /// The limits that apply to `domain`.
    pub fn domain_limits(&self, domain: &str) -> &Limits {
        self.domains.get(domain).unwrap_or(&self.domain_default)
    }

    /// Checks `query` from `owner`. `total` is asked, only when a total
    /// limit applies, for the peak rate the scope already holds during the
    /// request (not counting the request, and for a modification not
    /// counting the reservation being modified).
    ///
    /// # Errors
    /// [`PolicyError`] naming the first rule exceeded.
    pub fn check(
        &self,
        owner: &Owner,
        query: PolicyQuery,
        mut total: impl FnMut(&Scope) -> Bandwidth,
    ) -> Result<(), PolicyError> {
        let scopes = [
            (
                Scope::User(owner.user.clone()),
                self.user_limits(&owner.user),
            ),
            (
                Scope::Domain(owner.domain.clone()),
                self.domain_limits(&owner.domain),
            ),
        ];
        let duration = query.end.saturating_duration_since(query.start);
        let advance = query.start.saturating_duration_since(query.now);
        for (scope, limits) in scopes {
            let refuse = |kind, requested, limit| PolicyError {
                rule: PolicyRule {
                    scope: scope.clone(),
                    kind,
                },
                requested,
                limit,
            };
            if let Some(max) = limits.rate_per_request {
                if query.rate > max {
                    return Err(refuse(
                        LimitKind::RatePerRequest,
                        Amount::Rate(query.rate),
                        Amount::Rate(max),
                    ));
                }
            }
            if let Some(max) = limits.duration {
                if duration > max {
                    return Err(refuse(
                        LimitKind::Duration,
                        Amount::Time(duration),
                        Amount::Time(max),
                    ));
                }
            }
            if let Some(max) = limits.advance {
                if advance > max {
                    return Err(refuse(
                        LimitKind::Advance,
                        Amount::Time(advance),
                        Amount::Time(max),
                    ));
                }
            }
            if let Some(max) = limits.total {
                let with = total(&scope).saturating_add(query.rate);
                if with > max {
                    return Err(refuse(
                        LimitKind::Total,
                        Amount::Rate(with),
                        Amount::Rate(max),
                    ));
                }
            }
        }
        Ok(())
    }
}

impl fmt::Display for PolicyRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self.kind {
            LimitKind::RatePerRequest => "rate per request",
            LimitKind::Total => "total rate",
            LimitKind::Duration => "duration",
            LimitKind::Advance => "how far ahead",
        };
        match &self.scope {
            Scope::User(u) => write!(f, "user {u}: {kind}"),
            Scope::Domain(d) => write!(f, "domain {d}: {kind}"),
        }
    }
}

impl fmt::Display for Amount {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Amount::Rate(r) => write!(f, "{r}"),
            Amount::Time(d) => write!(f, "{d}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(s: u64) -> Instant {
        Instant::from_nanos(s * 1_000_000_000)
    }
    fn query(mbit: u64, start: u64, end: u64) -> PolicyQuery {
        PolicyQuery {
            rate: Bandwidth::from_mbps(mbit),
            start: secs(start),
            end: secs(end),
            now: secs(0),
        }
    }
    fn policy() -> Policy {
        let mut p = Policy {
            user_default: Limits {
                rate_per_request: Some(Bandwidth::from_mbps(50)),
                total: Some(Bandwidth::from_mbps(80)),
                duration: Some(Duration::from_secs(3600)),
                advance: Some(Duration::from_secs(86_400)),
            },
            ..Policy::default()
        };
        p.users.insert("ops".into(), Limits::default());
        p.domains.insert(
            "peer".into(),
            Limits {
                total: Some(Bandwidth::from_mbps(20)),
                ..Limits::default()
            },
        );
        p
    }
    fn kind(r: Result<(), PolicyError>) -> Option<(Scope, LimitKind)> {
        r.err().map(|e| (e.rule.scope, e.rule.kind))
    }

    #[test]
    fn each_limit_is_named() {
        let p = policy();
        let alice = Owner::new("alice", "here");
        let none = |_: &Scope| Bandwidth::ZERO;
        assert!(p.check(&alice, query(50, 0, 3600), none).is_ok());
        let u = Scope::User("alice".into());
        assert_eq!(
            kind(p.check(&alice, query(51, 0, 10), none)),
            Some((u.clone(), LimitKind::RatePerRequest))
        );
        assert_eq!(
            kind(p.check(&alice, query(1, 0, 3601), none)),
            Some((u.clone(), LimitKind::Duration))
        );
        assert_eq!(
            kind(p.check(&alice, query(1, 86_401, 86_402), none)),
            Some((u.clone(), LimitKind::Advance))
        );
        let held = |_: &Scope| Bandwidth::from_mbps(40);
        let e = p.check(&alice, query(41, 0, 10), held).unwrap_err();
        assert_eq!((e.rule.scope.clone(), e.rule.kind), (u, LimitKind::Total));
        assert_eq!(
            e.to_string(),
            "refused by policy (user alice: total rate): 81 Mbit/s asked, 80 Mbit/s allowed"
        );
    }

    #[test]
    fn named_entries_override_defaults_and_domains_follow_users() {
        let p = policy();
        let ops = Owner::new("ops", "here");
        assert!(p
            .check(&ops, query(500, 0, 1_000_000), |_| Bandwidth::ZERO)
            .is_ok());
        let guest = Owner::new("ops", "peer");
        let by_scope = |s: &Scope| match s {
            Scope::User(_) => Bandwidth::ZERO,
            Scope::Domain(_) => Bandwidth::from_mbps(15),
        };
        assert_eq!(
            kind(p.check(&guest, query(6, 0, 10), by_scope)),
            Some((Scope::Domain("peer".into()), LimitKind::Total))
        );
        assert!(p.check(&guest, query(5, 0, 10), by_scope).is_ok());
    }
}
