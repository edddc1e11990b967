//! The addresses this host answers on: every interface's IP address
//! (`getifaddrs(3)`), so that a socket bound to the wildcard address knows
//! which concrete addresses are its own (a relay refuses a route that
//! loops back to it through any of them).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// The IP addresses of this host's interfaces (loopback included); empty
/// when the system cannot say.
pub fn interface_ips() -> Vec<IpAddr> {
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs writes a list head we free below with
    // freeifaddrs; on failure it writes nothing and returns -1.
    if unsafe { libc::getifaddrs(&mut head) } != 0 {
        return Vec::new();
    }
    let mut out = Vec::new();
    let mut cur = head;
    while !cur.is_null() {
        // SAFETY: `cur` is a node of the list getifaddrs returned, alive
        // until freeifaddrs; `ifa_addr` is null or points at a sockaddr
        // whose family says which struct it is.
        let ifa = unsafe { &*cur };
        if !ifa.ifa_addr.is_null() {
            let family = i32::from(unsafe { (*ifa.ifa_addr).sa_family });
            if family == libc::AF_INET {
                let a = unsafe { &*(ifa.ifa_addr as *const libc::sockaddr_in) };
                out.push(IpAddr::V4(Ipv4Addr::from(u32::from_be(a.sin_addr.s_addr))));
            } else if family == libc::AF_INET6 {
                let a = unsafe { &*(ifa.ifa_addr as *const libc::sockaddr_in6) };
                out.push(IpAddr::V6(Ipv6Addr::from(a.sin6_addr.s6_addr)));
            }
        }
        cur = ifa.ifa_next;
    }
    // SAFETY: `head` came from a successful getifaddrs and is freed once.
    unsafe { libc::freeifaddrs(head) };
    out.sort();
    out.dedup();
    out
}

/// `bound` and, when it is the wildcard address, the same port on every
/// interface address of its family.
pub fn own_addrs(bound: SocketAddr) -> Vec<SocketAddr> {
    let mut out = vec![bound];
    if bound.ip().is_unspecified() {
        let v4 = bound.is_ipv4();
        out.extend(
            interface_ips()
                .into_iter()
                .filter(|ip| ip.is_ipv4() == v4 || !v4)
                .map(|ip| SocketAddr::new(ip, bound.port())),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_loopback_address_is_one_of_ours() {
        let ips = interface_ips();
        assert!(ips.contains(&IpAddr::V4(Ipv4Addr::LOCALHOST)), "{ips:?}");
        let own = own_addrs("0.0.0.0:7000".parse().unwrap());
        assert!(own.contains(&"127.0.0.1:7000".parse().unwrap()), "{own:?}");
        assert_eq!(
            own_addrs("127.0.0.1:7000".parse().unwrap()),
            vec!["127.0.0.1:7000".parse::<SocketAddr>().unwrap()]
        );
    }
}
