//! Network enforcement: one broker-owned htb tree per device, one class and
//! one u32 filter per provisioned reservation, through iproute2's `tc`.
//!
//! The tree on a [`Device`] (handle `bd:`, see [`QDISC_MAJOR`]):
//!
//! ```text
//! qdisc htb bd: root default ffff
//! └── class bd:1      rate = ceil = link           (the link itself)
//!     ├── class bd:N  rate = reservation, ceil = link (or = rate without borrow)
//!     │               ← u32 filter, pref N, matching the reservation's flow
//!     └── class bd:ffff rate = link − Σ reserved, ceil = link (all other traffic)
//! ```
//!
//! A reserved class is guaranteed its rate whatever the unmatched traffic
//! does (seed 004 §5.4, Fig. 9–10: the flood in `bd:ffff` cannot take it);
//! with `borrow = false` its ceil is its rate too, which paces a TCP flow
//! that writes more than it reserved instead of letting it borrow. N is
//! [`minor`] of the reservation id, so a restarted broker finds its classes
//! again ([`Device::listed`]) and removes those no longer provisioned.
//!
//! `tc` is run with `std::process::Command` (no shell), `-n NETNS` when the
//! resource names a namespace. iproute2 rather than a netlink crate: the
//! maintained ones (rtnetlink, netlink-packet-route) build qdiscs and
//! filters only partly (no htb class options or u32 selectors as of 2026).

use std::collections::BTreeSet;
use std::process::Command;

use braid_core::{Bandwidth, ReservationId};

use crate::flow::Flow;

/// The major handle of the broker's root htb qdisc (`bd:`, "braid").
pub const QDISC_MAJOR: u16 = 0xbd;
/// The class that stands for the link (rate = ceil = link).
pub const LINK_MINOR: u16 = 1;
/// The class of all traffic no reservation matches.
pub const DEFAULT_MINOR: u16 = 0xffff;
/// Reserved classes take minors `FIRST_MINOR..FIRST_MINOR + MINORS`.
pub const FIRST_MINOR: u16 = 2;
/// How many reserved minors there are.
pub const MINORS: u64 = 0xfff0;
/// The filter preference used once at start to check that u32 exists.
pub const PROBE_PREF: u16 = 0xfffe;
/// The least rate the default class is given, even when reservations fill
/// the link (htb needs a rate above zero).
pub const MIN_DEFAULT_RATE: Bandwidth = Bandwidth::from_bps(8_000);
/// htb's DRR quantum for every class: one full-size Ethernet frame (htb's
/// own default, rate / r2q, is far off at both ends of the rates here).
pub const QUANTUM: u32 = 1514;

/// A `tc` failure, in one line.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NetError {
    /// `tc` is not installed.
    #[error(
        "tc (iproute2) was not found in PATH: install iproute2 to enforce network reservations"
    )]
    NoTc,
    /// `tc` could not be run.
    #[error("running tc: {0}")]
    Spawn(std::io::Error),
    /// `tc` refused.
    #[error("`tc {args}` failed: {stderr}")]
    Tc {
        /// The arguments.
        args: String,
        /// What tc said.
        stderr: String,
    },
    /// The kernel lacks a qdisc or classifier the broker needs.
    #[error("{device}: the kernel has no {what} (tc said: {stderr})")]
    Missing {
        /// The device.
        device: String,
        /// `htb qdisc` or `u32 classifier`.
        what: &'static str,
        /// What tc said.
        stderr: String,
    },
    /// The device has a root qdisc the broker did not create.
    #[error("{device}: its root qdisc is not the broker's ({found}); remove it (`tc qdisc del dev {device} root`) or name another device")]
    NotOurs {
        /// The device.
        device: String,
        /// The qdisc found.
        found: String,
    },
}

/// The class minor of reservation `id`: `FIRST_MINOR + id mod MINORS`.
/// Two provisioned reservations whose ids differ by a multiple of
/// [`MINORS`] collide; the enforcer refuses the second.
pub fn minor(id: ReservationId) -> u16 {
    // The remainder is below MINORS = 0xfff0, so the sum fits in a u16.
    u16::try_from(id.0 % MINORS).map_or(FIRST_MINOR, |m| m + FIRST_MINOR)
}

/// Runs `tc` with `args`, in `netns` if given; its stdout.
fn tc(netns: Option<&str>, args: &[String]) -> Result<String, NetError> {
    let mut c = Command::new("tc");
    if let Some(ns) = netns {
        c.args(["-n", ns]);
    }
    let out = c.args(args).output().map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => NetError::NoTc,
        _ => NetError::Spawn(e),
    })?;
    if !out.status.success() {
        return Err(NetError::Tc {
            args: args.join(" "),
            stderr: one_line(&out.stderr),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn one_line(b: &[u8]) -> String {
    String::from_utf8_lossy(b)
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("; ")
}

fn args(a: &[&str]) -> Vec<String> {
    a.iter().map(|s| (*s).to_string()).collect()
}

fn rate(r: Bandwidth) -> String {
    format!("{}bit", r.bps().max(1))
}

fn handle(minor: u16) -> String {
    format!("{QDISC_MAJOR:x}:{minor:x}")
}

/// Whether `tc` can be run at all.
///
/// # Errors
/// [`NetError::NoTc`] or [`NetError::Spawn`].
pub fn check_tc() -> Result<(), NetError> {
    tc(None, &args(&["-V"])).map(|_| ())
}

/// One device the broker shapes.
#[derive(Debug, Clone, PartialEq)]
pub struct Device {
    /// The interface.
    pub name: String,
    /// Its network namespace (`ip netns` name), if not the broker's own.
    pub netns: Option<String>,
    /// The link rate: the htb ceil of every class.
    pub link: Bandwidth,
    /// Whether reserved classes may borrow up to the link (else ceil =
    /// rate).
    pub borrow: bool,
    /// The headers' share on the wire above a reserved (payload) rate,
    /// as a fraction (0.05 = 5 %).
    pub overhead: f64,
}

/// Default [`Device::overhead`], in percent: TCP/IPv4 over Ethernet at a
/// 1448-byte MSS sends 1514 bytes per 1448 of payload (4.6 %).
pub const DEFAULT_OVERHEAD_PERCENT: f64 = 5.0;

impl Device {
    /// The class rate, on the wire, for a reserved payload rate `r`.
    pub fn wire(&self, r: Bandwidth) -> Bandwidth {
        // Rates are far below 2^53 bit/s: exact in an f64.
        Bandwidth::from_bps((r.bps() as f64 * (1.0 + self.overhead)).ceil() as u64)
    }

    fn tc(&self, a: &[&str]) -> Result<String, NetError> {
        tc(self.netns.as_deref(), &args(a))
    }

    fn class(
        &self,
        minor: u16,
        parent: u16,
        r: Bandwidth,
        ceil: Bandwidth,
    ) -> Result<(), NetError> {
        let quantum = QUANTUM.to_string();
        let parent = if minor == LINK_MINOR {
            format!("{QDISC_MAJOR:x}:")
        } else {
            handle(parent)
        };
        self.tc(&[
            "class",
            "replace",
            "dev",
            &self.name,
            "parent",
            &parent,
            "classid",
            &handle(minor),
            "htb",
            "rate",
            &rate(r),
            "ceil",
            &rate(ceil.max(r)),
            "quantum",
            &quantum,
        ])
        .map(|_| ())
    }

    /// Makes sure the broker's htb tree is the device's root (creating it,
    /// replacing the kernel's default qdisc) and that u32 filters work.
    ///
    /// # Errors
    /// [`NetError::NotOurs`] when another root qdisc is there,
    /// [`NetError::Missing`] when the kernel lacks htb or u32.
    pub fn ensure_root(&self, reserved: Bandwidth) -> Result<(), NetError> {
        let shown = self.tc(&["qdisc", "show", "dev", &self.name, "root"])?;
        let ours = format!("qdisc htb {QDISC_MAJOR:x}: root");
        let first = shown.lines().next().unwrap_or("").trim().to_string();
        if !first.starts_with(&ours) {
            // The kernel's defaults show handle 0:; anything else someone set.
            let default = first.split_whitespace().nth(2) == Some("0:");
            if !first.is_empty() && !default {
                return Err(NetError::NotOurs {
                    device: self.name.clone(),
                    found: first,
                });
            }
            let major = format!("{QDISC_MAJOR:x}:");
            self.tc(&[
                "qdisc", "replace", "dev", &self.name, "root", "handle", &major, "htb", "default",
                "ffff",
            ])
            .map_err(|e| self.missing(e, "htb qdisc"))?;
        }
        self.class(LINK_MINOR, 0, self.link, self.link)?;
        self.set_default(reserved)?;
        self.probe_u32()
    }

    fn missing(&self, e: NetError, what: &'static str) -> NetError {
        match e {
            NetError::Tc { stderr, .. } => NetError::Missing {
                device: self.name.clone(),
                what,
                stderr,
            },
            e => e,
        }
    }

    fn probe_u32(&self) -> Result<(), NetError> {
        let major = format!("{QDISC_MAJOR:x}:");
        let pref = PROBE_PREF.to_string();
        let flowid = handle(DEFAULT_MINOR);
        self.tc(&[
            "filter",
            "replace",
            "dev",
            &self.name,
            "parent",
            &major,
            "protocol",
            "ip",
            "pref",
            &pref,
            "u32",
            "match",
            "ip",
            "dst",
            "0.0.0.0/32",
            "flowid",
            &flowid,
        ])
        .map_err(|e| self.missing(e, "u32 classifier"))?;
        self.del_filter(PROBE_PREF)
    }

    /// Gives the default class what reservations leave of the link.
    ///
    /// # Errors
    /// [`NetError`].
    pub fn set_default(&self, reserved: Bandwidth) -> Result<(), NetError> {
        let left = Bandwidth::from_bps(self.link.bps().saturating_sub(reserved.bps()));
        self.class(
            DEFAULT_MINOR,
            LINK_MINOR,
            left.max(MIN_DEFAULT_RATE),
            self.link,
        )
    }

    /// Creates or changes the class of a reservation and (re)places its
    /// filter.
    ///
    /// # Errors
    /// [`NetError`].
    pub fn set_class(
        &self,
        minor: u16,
        r: Bandwidth,
        flow: &Flow,
        new_flow: bool,
    ) -> Result<(), NetError> {
        let ceil = if self.borrow { self.link } else { r };
        self.class(minor, LINK_MINOR, r, ceil)?;
        if !new_flow {
            return Ok(());
        }
        let _ = self.del_filter(minor);
        let major = format!("{QDISC_MAJOR:x}:");
        let pref = minor.to_string();
        let flowid = handle(minor);
        let mut a = vec![
            "filter",
            "add",
            "dev",
            &self.name,
            "parent",
            &major,
            "protocol",
            flow.tc_protocol(),
            "pref",
            &pref,
            "u32",
        ]
        .into_iter()
        .map(str::to_string)
        .collect::<Vec<_>>();
        a.extend(flow.u32_args());
        a.extend(["flowid".to_string(), flowid]);
        tc(self.netns.as_deref(), &a).map(|_| ())
    }

    fn del_filter(&self, pref: u16) -> Result<(), NetError> {
        let major = format!("{QDISC_MAJOR:x}:");
        let pref = pref.to_string();
        self.tc(&[
            "filter", "del", "dev", &self.name, "parent", &major, "pref", &pref,
        ])
        .map(|_| ())
    }

    /// Removes a reservation's filter and class (what is already gone is
    /// fine).
    ///
    /// # Errors
    /// [`NetError`] when the class exists and cannot be removed.
    pub fn remove_class(&self, minor: u16) -> Result<(), NetError> {
        let _ = self.del_filter(minor);
        let (classes, _) = self.listed()?;
        if classes.contains(&minor) {
            self.tc(&["class", "del", "dev", &self.name, "classid", &handle(minor)])?;
        }
        Ok(())
    }

    /// The reserved class minors and the filter preferences on the device
    /// now (the link and default classes left out).
    ///
    /// # Errors
    /// [`NetError`].
    pub fn listed(&self) -> Result<(BTreeSet<u16>, BTreeSet<u16>), NetError> {
        let prefix = format!("{QDISC_MAJOR:x}:");
        let classes = self
            .tc(&["class", "show", "dev", &self.name])?
            .lines()
            .filter_map(|l| l.strip_prefix("class htb "))
            .filter_map(|l| l.split_whitespace().next())
            .filter_map(|h| h.strip_prefix(&prefix))
            .filter_map(|m| u16::from_str_radix(m, 16).ok())
            .filter(|m| *m != LINK_MINOR && *m != DEFAULT_MINOR)
            .collect();
        let prefs = self
            .tc(&["filter", "show", "dev", &self.name, "parent", &prefix])?
            .lines()
            .filter_map(|l| {
                let mut w = l.split_whitespace();
                w.position(|x| x == "pref")?;
                w.next()?.parse::<u16>().ok()
            })
            .collect();
        Ok((classes, prefs))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_class_gets_the_headers_on_top_of_the_reserved_rate() {
        let d = |overhead| Device {
            name: "x".into(),
            netns: None,
            link: Bandwidth::from_mbps(100),
            borrow: true,
            overhead,
        };
        assert_eq!(
            d(0.0).wire(Bandwidth::from_mbps(40)),
            Bandwidth::from_mbps(40)
        );
        assert_eq!(
            d(0.05).wire(Bandwidth::from_mbps(40)),
            Bandwidth::from_mbps(42)
        );
        // A TCP payload paced at the reserved rate fits its class: 1514
        // bytes on the wire per 1448 of payload.
        let needed = 40_000_000.0 * 1514.0 / 1448.0;
        assert!(
            d(DEFAULT_OVERHEAD_PERCENT / 100.0)
                .wire(Bandwidth::from_mbps(40))
                .bps() as f64
                >= needed
        );
    }

    #[test]
    fn minors_are_deterministic_and_in_range() {
        assert_eq!(minor(ReservationId(1)), 3);
        assert_eq!(minor(ReservationId(0)), FIRST_MINOR);
        assert_eq!(minor(ReservationId(MINORS - 1)), 0xfff1);
        assert_eq!(minor(ReservationId(MINORS + 1)), minor(ReservationId(1)));
        assert!(minor(ReservationId(u64::MAX)) < DEFAULT_MINOR);
        assert_ne!(minor(ReservationId(u64::MAX)), LINK_MINOR);
        assert_ne!(
            u64::from(minor(ReservationId(0xfffd))),
            u64::from(PROBE_PREF)
        );
    }
}
