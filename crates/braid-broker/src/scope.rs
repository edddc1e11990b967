//! Whose traffic a reservation may touch (issue 29 §4): the addresses
//! each user may reserve flows on, the widest prefix a user's flow may
//! name, and the rule that no reservation's class takes traffic another
//! reservation covers.
//!
//! With `--enforce` a flow becomes an htb class and a u32 filter, and a
//! filter takes every packet it matches away from the classes after it:
//! a 1 mbit reservation on `0.0.0.0/0`, or on another user's flow, would
//! shape that user's traffic to 1 mbit. So:
//!
//! - **Grants** ([`FlowScopes`], the config's `[flows]`): a user's flow must
//!   name a source or a destination inside an address or prefix granted to
//!   them (`[flows.users] NAME = [...]`, or a `[flows.groups.G]` they are a
//!   member of). A user with no grant may reserve no flow. Operators are
//!   not bound by grants.
//! - **Width**: every prefix a user's flow names is at most as wide as
//!   `widest_prefix_v4` / `widest_prefix_v6` allow ([`DEFAULT_WIDEST_V4`],
//!   [`DEFAULT_WIDEST_V6`]); operators are not bound by it either.
//! - **Overlap** ([`conflict`], for everyone): a flow that overlaps the flow
//!   of another user's live reservation on the same resource is refused;
//!   on a resource with `borrow = false` (whose classes are capped at
//!   their rate) an overlap with any other reservation, one's own too, is
//!   refused, so that no capped class takes traffic another reservation
//!   covers.
//!
//! Grants and width are checked by the handler (403, naming the field);
//! overlap by the owner task, which sees every live reservation (409
//! naming `flow`).

use std::collections::BTreeMap;

use braid_core::reserve::Reservation;
use serde::Deserialize;

use crate::auth::Role;
use crate::flow::Prefix;
use crate::flow::{Binding, Flow};

/// The widest IPv4 prefix a user's flow may name by default: /24.
pub const DEFAULT_WIDEST_V4: u8 = 24;
/// The widest IPv6 prefix a user's flow may name by default: /64.
pub const DEFAULT_WIDEST_V6: u8 = 64;

/// The `[flows]` table as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawFlows {
    widest_prefix_v4: Option<u8>,
    widest_prefix_v6: Option<u8>,
    #[serde(default)]
    users: BTreeMap<String, Vec<String>>,
    #[serde(default)]
    groups: BTreeMap<String, RawGroup>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawGroup {
    members: Vec<String>,
    addresses: Vec<String>,
}

/// Who may reserve flows on which addresses (the config's `[flows]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowScopes {
    /// The widest IPv4 prefix a user's flow may name (its length).
    pub widest_v4: u8,
    /// The widest IPv6 prefix a user's flow may name (its length).
    pub widest_v6: u8,
    /// Each user's grants, their groups' included.
    grants: BTreeMap<String, Vec<Prefix>>,
}

impl Default for FlowScopes {
    fn default() -> Self {
        FlowScopes {
            widest_v4: DEFAULT_WIDEST_V4,
            widest_v6: DEFAULT_WIDEST_V6,
            grants: BTreeMap::new(),
        }
    }
}

/// A flow a user may not reserve (403).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ScopeError {
    /// A prefix wider than policy allows.
    #[error("{field}: {prefix} is wider than /{widest}, the widest prefix a user may reserve ([flows] widest_prefix_{family}); name a narrower one")]
    TooWide {
        /// `flow.src` or `flow.dst`.
        field: &'static str,
        /// The prefix named.
        prefix: Prefix,
        /// The widest allowed.
        widest: u8,
        /// `v4` or `v6`.
        family: &'static str,
    },
    /// Neither end of the flow is inside the user's grants.
    #[error("user {user:?} may reserve only traffic from or to the addresses [flows] grants them ({granted}); neither the flow's src nor its dst is inside them")]
    NotGranted {
        /// The user.
        user: String,
        /// What they were granted, or "none".
        granted: String,
    },
}

impl ScopeError {
    /// The request field at fault.
    pub fn field(&self) -> &'static str {
        match self {
            ScopeError::TooWide { field, .. } => field,
            ScopeError::NotGranted { .. } => "flow",
        }
    }
}

impl FlowScopes {
    /// Checks and gathers `[flows]`.
    ///
    /// # Errors
    /// One line naming the key at fault.
    pub(crate) fn new(raw: RawFlows) -> Result<FlowScopes, String> {
        let widest_v4 = raw.widest_prefix_v4.unwrap_or(DEFAULT_WIDEST_V4);
        let widest_v6 = raw.widest_prefix_v6.unwrap_or(DEFAULT_WIDEST_V6);
        if widest_v4 > 32 {
            return Err(format!(
                "flows.widest_prefix_v4 = {widest_v4}: a prefix length 0..=32"
            ));
        }
        if widest_v6 > 128 {
            return Err(format!(
                "flows.widest_prefix_v6 = {widest_v6}: a prefix length 0..=128"
            ));
        }
        let parse = |key: &str, list: &[String]| {
            list.iter()
                .map(|t| Prefix::parse("flows", t).map_err(|e| format!("{key}: {}", e.message)))
                .collect::<Result<Vec<_>, _>>()
        };
        let mut grants: BTreeMap<String, Vec<Prefix>> = BTreeMap::new();
        for (user, list) in &raw.users {
            let p = parse(&format!("flows.users.{user}"), list)?;
            grants.entry(user.clone()).or_default().extend(p);
        }
        for (name, g) in &raw.groups {
            let p = parse(&format!("flows.groups.{name}.addresses"), &g.addresses)?;
            for m in &g.members {
                grants
                    .entry(m.clone())
                    .or_default()
                    .extend(p.iter().copied());
            }
        }
        Ok(FlowScopes {
            widest_v4,
            widest_v6,
            grants,
        })
    }

    /// What `user` was granted (their own and their groups').
    pub fn granted(&self, user: &str) -> &[Prefix] {
        self.grants.get(user).map_or(&[], Vec::as_slice)
    }

    /// Whether `user` (with `role`) may reserve `flow`: operators always;
    /// a user if every prefix it names is narrow enough and its src or dst
    /// is inside their grants.
    ///
    /// # Errors
    /// [`ScopeError`], naming the field.
    pub fn check(&self, user: &str, role: Role, flow: &Flow) -> Result<(), ScopeError> {
        if role == Role::Operator {
            return Ok(());
        }
        for (field, p) in [("flow.src", flow.src), ("flow.dst", flow.dst)] {
            let Some(p) = p else { continue };
            let (widest, family) = if p.is_ipv6() {
                (self.widest_v6, "v6")
            } else {
                (self.widest_v4, "v4")
            };
            if p.len < widest {
                return Err(ScopeError::TooWide {
                    field,
                    prefix: p,
                    widest,
                    family,
                });
            }
        }
        let granted = self.granted(user);
        let inside = |p: Option<Prefix>| p.is_some_and(|p| granted.iter().any(|g| g.contains(&p)));
        if inside(flow.src) || inside(flow.dst) {
            return Ok(());
        }
        let mut list: Vec<String> = granted.iter().take(8).map(Prefix::to_string).collect();
        if granted.len() > 8 {
            list.push("…".into());
        }
        Err(ScopeError::NotGranted {
            user: user.to_string(),
            granted: if list.is_empty() {
                "none".into()
            } else {
                list.join(", ")
            },
        })
    }
}

/// A flow refused because it overlaps what a live reservation covers (409).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FlowConflict {
    /// Another user's reservation covers some of the same traffic.
    #[error("the flow overlaps traffic another user's reservation covers on resource {resource:?}; a reservation never takes traffic another user reserved")]
    OtherUser {
        /// The resource.
        resource: String,
    },
    /// On a resource without borrowing, another reservation of the same
    /// user covers some of the same traffic.
    #[error("the flow overlaps traffic your reservation {other} covers on resource {resource:?}, whose classes do not borrow (borrow = false): one would cap the other's traffic")]
    Capped {
        /// The resource.
        resource: String,
        /// The reservation it overlaps.
        other: u64,
    },
}

/// Whether `flow`, asked for by `user` on `resource` (whose classes
/// borrow unless `borrow` is false), overlaps what one of the live
/// reservations `others` (with their bindings) covers: another user's
/// always refuses, one's own only without borrowing. Reservations that
/// hold no version (ended, aborted) cover nothing.
pub fn conflict<'a>(
    flow: &Flow,
    user: &str,
    resource: &str,
    borrow: bool,
    others: impl IntoIterator<Item = (&'a Reservation, Option<&'a Binding>)>,
) -> Option<FlowConflict> {
    for (r, b) in others {
        let covers = r.resource == resource
            && r.life.is_created()
            && (r.committed.is_some() || r.pending.is_some());
        let Some(theirs) = b.and_then(|b| b.flow.as_ref()).filter(|_| covers) else {
            continue;
        };
        if !theirs.overlaps(flow) {
            continue;
        }
        if r.owner.user != user {
            return Some(FlowConflict::OtherUser {
                resource: resource.to_string(),
            });
        }
        if !borrow {
            return Some(FlowConflict::Capped {
                resource: resource.to_string(),
                other: r.id.0,
            });
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scopes(toml_text: &str) -> FlowScopes {
        FlowScopes::new(toml::from_str(toml_text).unwrap()).unwrap()
    }

    fn flow(src: Option<&str>, dst: Option<&str>) -> Flow {
        Flow::parse(src, dst, Some("tcp"), None, Some(5201)).unwrap()
    }

    #[test]
    fn users_reserve_only_inside_their_grants_and_narrow_enough() {
        let s = scopes(
            "[users]\nalice = [\"10.77.1.0/24\"]\n[groups.lab]\nmembers = [\"bob\"]\naddresses = [\"10.77.2.0/24\", \"fd00:77::/48\"]\n",
        );
        let user = |u: &str, f: &Flow| s.check(u, Role::User, f);
        assert!(user("alice", &flow(Some("10.77.1.5"), Some("10.9.9.9"))).is_ok());
        assert!(user("alice", &flow(None, Some("10.77.1.0/24"))).is_ok());
        assert!(user("bob", &flow(Some("10.77.2.7"), None)).is_ok());
        assert!(user("bob", &flow(Some("fd00:77::1"), None)).is_ok());
        // Another user's address, or none granted.
        let e = user("bob", &flow(Some("10.77.1.5"), None)).unwrap_err();
        assert_eq!(e.field(), "flow");
        assert!(e.to_string().contains("10.77.2.0/24"), "{e}");
        let e = user("carol", &flow(Some("10.77.1.5"), None)).unwrap_err();
        assert!(e.to_string().contains("(none)"), "{e}");
        // Wide prefixes, even inside a grant.
        for (src, dst, field) in [
            (Some("10.77.0.0/16"), None, "flow.src"),
            (Some("10.77.1.5"), Some("0.0.0.0/0"), "flow.dst"),
            (Some("fd00:77::/48"), None, "flow.src"),
        ] {
            let e = user("bob", &flow(src, dst)).unwrap_err();
            assert_eq!(e.field(), field, "{e}");
            assert!(e.to_string().contains("wider than"), "{e}");
        }
        // Ports only: no address inside a grant.
        let ports = Flow::parse(None, None, Some("tcp"), None, Some(80)).unwrap();
        assert!(user("alice", &ports).is_err());
        // Operators are not bound.
        assert!(s
            .check("ops", Role::Operator, &flow(Some("0.0.0.0/0"), None))
            .is_ok());
    }

    #[test]
    fn bad_scopes_are_refused() {
        for (text, want) in [
            ("widest_prefix_v4 = 33\n", "widest_prefix_v4"),
            ("widest_prefix_v6 = 129\n", "widest_prefix_v6"),
            ("[users]\nalice = [\"10.0.0.300\"]\n", "flows.users.alice"),
        ] {
            let e = FlowScopes::new(toml::from_str(text).unwrap()).unwrap_err();
            assert!(e.contains(want), "{text}: {e}");
        }
    }
}
