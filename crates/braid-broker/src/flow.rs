//! What a reservation is enforced on: a network [`Flow`] (addresses, protocol
//! and ports, matched by a u32 filter) and a process (a pid moved into a CPU
//! cgroup) — together a [`Binding`], stored beside the reservation.
//!
//! [`Flow::parse`] checks what a client sent (each field named in the error);
//! [`Flow::u32_args`] is the filter's match, for `tc filter … u32`. Ports and
//! addresses left out (or 0) match anything. The u32 port matches read the
//! transport header right after a 20-byte IPv4 header (or the 40-byte IPv6
//! one): packets with IPv4 options or IPv6 extension headers do not match a
//! port — the classic u32 limit, said in docs/broker.md.

use std::net::IpAddr;

use serde::{Deserialize, Serialize};

/// A bad flow, naming the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct FlowError {
    /// The request field at fault (`flow.src`, `flow.proto`, …).
    pub field: &'static str,
    /// What is wrong.
    pub message: String,
}

fn bad(field: &'static str, message: impl Into<String>) -> FlowError {
    FlowError {
        field,
        message: message.into(),
    }
}

/// An address and prefix length (`10.0.0.1`, `10.0.0.0/24`, `fd00::/64`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Prefix {
    /// The address.
    pub addr: IpAddr,
    /// The prefix length (32 or 128 for one host).
    pub len: u8,
}

impl Prefix {
    /// Parses `10.0.0.1`, `10.0.0.0/24` or `fd00::/64`; errors name
    /// `field`.
    ///
    /// # Errors
    /// [`FlowError`] for a bad address or prefix length.
    pub fn parse(field: &'static str, text: &str) -> Result<Prefix, FlowError> {
        let (a, l) = match text.split_once('/') {
            Some((a, l)) => (a, Some(l)),
            None => (text, None),
        };
        let addr: IpAddr = a
            .trim()
            .parse()
            .map_err(|_| bad(field, format!("{text:?} is not an IPv4 or IPv6 address")))?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let len =
            match l {
                None => max,
                Some(l) => l.parse::<u8>().ok().filter(|l| *l <= max).ok_or_else(|| {
                    bad(field, format!("prefix length in {text:?} is not 0..={max}"))
                })?,
            };
        Ok(Prefix { addr, len })
    }
}

impl Prefix {
    /// The address as 128 bits, left-aligned (an IPv4 address in the top
    /// 32), so that a prefix of length `len` is its top `len` bits.
    fn bits(&self) -> u128 {
        match self.addr {
            IpAddr::V4(a) => u128::from(u32::from(a)) << 96,
            IpAddr::V6(a) => u128::from(a),
        }
    }

    /// The top `len` bits of the address (the rest zero).
    fn network(&self, len: u8) -> u128 {
        match len {
            0 => 0,
            l => self.bits() & (u128::MAX << (128 - u32::from(l.min(128)))),
        }
    }

    /// Whether the prefix is IPv6.
    pub fn is_ipv6(&self) -> bool {
        self.addr.is_ipv6()
    }

    /// Whether every address of `other` is in this prefix.
    pub fn contains(&self, other: &Prefix) -> bool {
        self.is_ipv6() == other.is_ipv6()
            && self.len <= other.len
            && self.network(self.len) == other.network(self.len)
    }

    /// Whether some address is in both prefixes (prefixes are nested or
    /// disjoint, so: one contains the other).
    pub fn overlaps(&self, other: &Prefix) -> bool {
        self.contains(other) || other.contains(self)
    }
}

impl std::fmt::Display for Prefix {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.addr, self.len)
    }
}

/// The transport protocol a flow matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Proto {
    /// TCP (IP protocol 6).
    Tcp,
    /// UDP (17).
    Udp,
}

impl Proto {
    fn number(self) -> u8 {
        match self {
            Proto::Tcp => 6,
            Proto::Udp => 17,
        }
    }
}

/// The traffic a network reservation is enforced on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Flow {
    /// Source address or prefix; `None` = any.
    pub src: Option<Prefix>,
    /// Destination address or prefix; `None` = any.
    pub dst: Option<Prefix>,
    /// Protocol; `None` = any.
    pub proto: Option<Proto>,
    /// Source port; 0 = any.
    pub sport: u16,
    /// Destination port; 0 = any.
    pub dport: u16,
}

impl Flow {
    /// Checks a flow as a client wrote it.
    ///
    /// # Errors
    /// [`FlowError`] naming the field: a bad address, mixed IPv4 and IPv6,
    /// an unknown protocol, ports without a protocol, a flow that matches
    /// everything.
    pub fn parse(
        src: Option<&str>,
        dst: Option<&str>,
        proto: Option<&str>,
        sport: Option<u16>,
        dport: Option<u16>,
    ) -> Result<Flow, FlowError> {
        let src = src
            .filter(|s| !s.is_empty())
            .map(|s| Prefix::parse("flow.src", s))
            .transpose()?;
        let dst = dst
            .filter(|s| !s.is_empty())
            .map(|s| Prefix::parse("flow.dst", s))
            .transpose()?;
        if let (Some(s), Some(d)) = (src, dst) {
            if s.addr.is_ipv4() != d.addr.is_ipv4() {
                return Err(bad("flow.dst", "src and dst mix IPv4 and IPv6"));
            }
        }
        let proto = match proto.map(str::to_ascii_lowercase).as_deref() {
            None | Some("") | Some("any") => None,
            Some("tcp") => Some(Proto::Tcp),
            Some("udp") => Some(Proto::Udp),
            Some(other) => {
                return Err(bad(
                    "flow.proto",
                    format!("unknown protocol {other:?}: use tcp or udp"),
                ))
            }
        };
        let (sport, dport) = (sport.unwrap_or(0), dport.unwrap_or(0));
        if proto.is_none() && (sport != 0 || dport != 0) {
            return Err(bad("flow.proto", "ports need a protocol (tcp or udp)"));
        }
        if src.is_none() && dst.is_none() && sport == 0 && dport == 0 {
            return Err(bad(
                "flow",
                "the flow matches all traffic: give src, dst or a port",
            ));
        }
        Ok(Flow {
            src,
            dst,
            proto,
            sport,
            dport,
        })
    }

    /// Whether the flow is IPv6 (else IPv4; a flow with ports only is
    /// IPv4).
    pub fn is_ipv6(&self) -> bool {
        self.src.or(self.dst).is_some_and(|p| p.addr.is_ipv6())
    }

    /// Whether some packet matches both flows: the same family (a flow
    /// with ports only is IPv4, as its filter is), overlapping source and
    /// destination prefixes, and protocol and ports that do not differ
    /// (what one leaves out matches anything).
    pub fn overlaps(&self, other: &Flow) -> bool {
        fn both<T: PartialEq>(a: Option<T>, b: Option<T>, meet: impl Fn(&T, &T) -> bool) -> bool {
            match (a, b) {
                (Some(a), Some(b)) => meet(&a, &b),
                _ => true,
            }
        }
        let port = |a: u16, b: u16| a == 0 || b == 0 || a == b;
        self.is_ipv6() == other.is_ipv6()
            && both(self.src, other.src, Prefix::overlaps)
            && both(self.dst, other.dst, Prefix::overlaps)
            && both(self.proto, other.proto, |a, b| a == b)
            && port(self.sport, other.sport)
            && port(self.dport, other.dport)
    }

    /// The `tc filter` protocol word: `ip` or `ipv6`.
    pub fn tc_protocol(&self) -> &'static str {
        if self.is_ipv6() {
            "ipv6"
        } else {
            "ip"
        }
    }

    /// The u32 selector: `match ip src … match ip dport … 0xffff …`.
    pub fn u32_args(&self) -> Vec<String> {
        let family = if self.is_ipv6() { "ip6" } else { "ip" };
        let mut a = Vec::new();
        let mut m = |what: &str, value: String, mask: Option<&str>| {
            a.extend(["match".into(), family.into(), what.into(), value]);
            if let Some(mask) = mask {
                a.push(mask.into());
            }
        };
        if let Some(s) = self.src {
            m("src", s.to_string(), None);
        }
        if let Some(d) = self.dst {
            m("dst", d.to_string(), None);
        }
        if let Some(p) = self.proto {
            m("protocol", p.number().to_string(), Some("0xff"));
        }
        if self.sport != 0 {
            m("sport", self.sport.to_string(), Some("0xffff"));
        }
        if self.dport != 0 {
            m("dport", self.dport.to_string(), Some("0xffff"));
        }
        a
    }
}

/// What one reservation is enforced on, as stored: the flow for network
/// resources, the process for CPU ones.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Binding {
    /// The flow, for a network resource with a device.
    pub flow: Option<Flow>,
    /// The process, for a CPU resource.
    pub pid: Option<u32>,
}

impl Binding {
    /// Whether there is nothing to enforce on.
    pub fn is_empty(&self) -> bool {
        self.flow.is_none() && self.pid.is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_matches_an_ipv4_tcp_flow() {
        let f = Flow::parse(
            Some("10.0.0.1"),
            Some("10.0.0.0/24"),
            Some("TCP"),
            Some(0),
            Some(5000),
        )
        .unwrap();
        assert!(!f.is_ipv6());
        assert_eq!(f.tc_protocol(), "ip");
        assert_eq!(
            f.u32_args().join(" "),
            "match ip src 10.0.0.1/32 match ip dst 10.0.0.0/24 match ip protocol 6 0xff match ip dport 5000 0xffff"
        );
    }

    #[test]
    fn parses_an_ipv6_flow() {
        let f = Flow::parse(Some("fd00::1"), None, Some("udp"), Some(9), None).unwrap();
        assert!(f.is_ipv6());
        assert_eq!(f.tc_protocol(), "ipv6");
        assert_eq!(
            f.u32_args().join(" "),
            "match ip6 src fd00::1/128 match ip6 protocol 17 0xff match ip6 sport 9 0xffff"
        );
    }

    #[test]
    fn prefixes_contain_and_overlap_by_their_masked_bits() {
        let p = |t: &str| Prefix::parse("x", t).unwrap();
        assert!(p("10.77.0.0/16").contains(&p("10.77.1.5")));
        assert!(p("10.77.9.9/16").contains(&p("10.77.1.0/24")));
        assert!(!p("10.77.1.0/24").contains(&p("10.77.0.0/16")));
        assert!(p("10.77.1.0/24").overlaps(&p("10.77.0.0/16")));
        assert!(!p("10.77.1.0/24").overlaps(&p("10.77.2.0/24")));
        assert!(p("0.0.0.0/0").contains(&p("192.0.2.1")));
        assert!(!p("0.0.0.0/0").overlaps(&p("::1")));
        assert!(p("fd00::/64").contains(&p("fd00::2")));
        assert!(!p("fd00::/64").contains(&p("fd01::2")));
    }

    #[test]
    fn flows_overlap_when_some_packet_matches_both() {
        let f = |src: Option<&str>, dst: Option<&str>, proto: Option<&str>, dport: u16| {
            Flow::parse(src, dst, proto, None, Some(dport)).unwrap()
        };
        let victim = f(Some("10.77.1.5"), Some("10.77.2.9"), Some("tcp"), 5201);
        assert!(victim.overlaps(&f(None, Some("10.77.0.0/16"), None, 0)));
        assert!(victim.overlaps(&f(Some("0.0.0.0/0"), None, None, 0)));
        assert!(victim.overlaps(&f(Some("10.77.1.5"), None, Some("tcp"), 0)));
        assert!(!victim.overlaps(&f(Some("10.77.1.5"), None, Some("udp"), 0)));
        assert!(!victim.overlaps(&f(Some("10.77.1.5"), None, Some("tcp"), 5202)));
        assert!(!victim.overlaps(&f(Some("10.77.1.6"), None, None, 0)));
        assert!(!victim.overlaps(&f(Some("fd00::1"), None, None, 0)));
    }

    #[test]
    fn names_the_field_at_fault() {
        let field = |r: Result<Flow, FlowError>| r.unwrap_err().field;
        assert_eq!(
            field(Flow::parse(Some("x"), None, None, None, None)),
            "flow.src"
        );
        assert_eq!(
            field(Flow::parse(Some("10.0.0.1"), Some("::1"), None, None, None)),
            "flow.dst"
        );
        assert_eq!(
            field(Flow::parse(Some("10.0.0.1/33"), None, None, None, None)),
            "flow.src"
        );
        assert_eq!(
            field(Flow::parse(
                Some("10.0.0.1"),
                None,
                Some("sctp"),
                None,
                None
            )),
            "flow.proto"
        );
        assert_eq!(
            field(Flow::parse(None, None, None, None, Some(80))),
            "flow.proto"
        );
        assert_eq!(
            field(Flow::parse(None, None, Some("tcp"), None, None)),
            "flow"
        );
    }
}
