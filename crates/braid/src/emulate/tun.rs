//! TUN devices created inside a network namespace.
//!
//! [`Tun::create`] enters the namespace on a short-lived thread
//! ([`in_namespace_file`]), opens `/dev/net/tun`, creates a
//! non-persistent layer-3 device without packet information (`IFF_TUN |
//! IFF_NO_PI`), sets its MTU and an optional IPv4 address, and brings it up.
//! The device lives exactly as long as the file descriptor: dropping the
//! [`Tun`], exiting, being killed (even by SIGKILL) or crashing removes it,
//! so an emulator can never leave an orphan device behind.
//!
//! This is the only unsafe code of the emulator: `setns` and the `ioctl`s,
//! each on a descriptor this module owns and a zero-initialised `ifreq`.

use super::netns::{in_namespace_file, namespace_path, open_namespace};
use std::ffi::CString;
use std::io;
use std::net::Ipv4Addr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::PathBuf;

/// An IPv4 address with its prefix length (`198.18.1.1/24`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ipv4Cidr {
    /// The address.
    pub addr: Ipv4Addr,
    /// The prefix length, 0..=32.
    pub prefix: u8,
}

impl std::str::FromStr for Ipv4Cidr {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let (a, p) = s
            .split_once('/')
            .ok_or_else(|| format!("{s:?} is not ADDRESS/PREFIX (e.g. 198.18.1.1/24)"))?;
        let addr = a
            .parse()
            .map_err(|_| format!("{a:?} is not an IPv4 address"))?;
        let prefix = p
            .parse::<u8>()
            .ok()
            .filter(|&p| p <= 32)
            .ok_or_else(|| format!("prefix {p:?} is not 0..=32"))?;
        Ok(Ipv4Cidr { addr, prefix })
    }
}

impl std::fmt::Display for Ipv4Cidr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix)
    }
}

/// Transmit queue length of the devices, packets (the kernel default for
/// TUN is 500: 6 ms at 1 Gbit/s).
pub const TX_QUEUE_LEN: libc::c_int = 10_000;

/// One TUN device, removed when dropped.
#[derive(Debug)]
pub struct Tun {
    fd: OwnedFd,
    name: String,
    namespace: String,
    ns_path: PathBuf,
    /// Device and inode of the namespace file when the device was made.
    ns_id: (u64, u64),
}

impl Tun {
    /// Creates device `name` in namespace `ns` (see [`namespace_path`]) with
    /// MTU `mtu` and, if given, IPv4 address `addr`, and brings it up. The
    /// descriptor is non-blocking.
    ///
    /// # Errors
    /// The namespace cannot be opened or entered (missing, not root), TUN is
    /// unavailable, the name is taken or invalid, or an `ioctl` fails; the
    /// message names the step.
    pub fn create(ns: &str, name: &str, mtu: u32, addr: Option<Ipv4Cidr>) -> io::Result<Tun> {
        if name.is_empty() || name.len() >= libc::IFNAMSIZ || name.contains(['/', ' ']) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("device name {name:?} must be 1 to 15 characters without '/' or spaces"),
            ));
        }
        let path = namespace_path(ns);
        let ns_file = open_namespace(ns)?;
        let ns_id = file_id(&ns_file.metadata()?);
        let name_owned = name.to_string();
        let fd = in_namespace_file(&ns_file, ns, move || {
            let fd = open_tun(&name_owned)?;
            configure(&name_owned, mtu, addr)?;
            Ok(fd)
        })?;
        Ok(Tun {
            fd,
            name: name.to_string(),
            namespace: ns.to_string(),
            ns_path: path,
            ns_id,
        })
    }

    /// Whether the namespace is still reachable under the name it was
    /// given. `ip netns del` only removes the name: the namespace itself
    /// lives on while this device's descriptor holds it, so an emulator
    /// checks this to notice that its namespace was deleted.
    pub fn namespace_present(&self) -> bool {
        std::fs::metadata(&self.ns_path).is_ok_and(|m| file_id(&m) == self.ns_id)
    }

    /// The device's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The namespace it was created in (as given).
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// Reads one packet into `buf` (`WouldBlock` when none is waiting).
    pub fn read(&self, buf: &mut [u8]) -> io::Result<usize> {
        // SAFETY: the descriptor is owned by self; buf is valid for writes
        // of its length.
        let n = unsafe { libc::read(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
        if n < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(n as usize)
        }
    }

    /// Writes one packet (the whole IP packet in `buf`).
    pub fn write(&self, buf: &[u8]) -> io::Result<usize> {
        // SAFETY: the descriptor is owned by self; buf is valid for reads of
        // its length.
        let n = unsafe { libc::write(self.fd.as_raw_fd(), buf.as_ptr().cast(), buf.len()) };
        if n < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(n as usize)
        }
    }

    /// The raw descriptor, for `poll`.
    pub fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

fn file_id(m: &std::fs::Metadata) -> (u64, u64) {
    use std::os::unix::fs::MetadataExt;
    (m.dev(), m.ino())
}

fn with_context(e: io::Error, what: String) -> io::Error {
    io::Error::new(e.kind(), format!("{what}: {e}"))
}

fn ifreq_for(name: &str) -> libc::ifreq {
    // SAFETY: ifreq is plain old data; all-zero is a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, src) in req.ifr_name.iter_mut().zip(name.bytes()) {
        *dst = src as libc::c_char;
    }
    req
}

fn open_tun(name: &str) -> io::Result<OwnedFd> {
    let path = CString::new("/dev/net/tun").expect("no NUL in a literal");
    // SAFETY: path is a valid C string.
    let raw = unsafe {
        libc::open(
            path.as_ptr(),
            libc::O_RDWR | libc::O_NONBLOCK | libc::O_CLOEXEC,
        )
    };
    if raw < 0 {
        return Err(with_context(
            io::Error::last_os_error(),
            "opening /dev/net/tun (is the tun driver available?)".into(),
        ));
    }
    // SAFETY: raw is a fresh descriptor nobody else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    let mut req = ifreq_for(name);
    req.ifr_ifru.ifru_flags = (libc::IFF_TUN | libc::IFF_NO_PI) as libc::c_short;
    // SAFETY: TUNSETIFF reads and writes an ifreq, which req is.
    let rc = unsafe { libc::ioctl(fd.as_raw_fd(), libc::TUNSETIFF, &mut req) };
    if rc != 0 {
        return Err(with_context(
            io::Error::last_os_error(),
            format!("creating TUN device {name} (name taken?)"),
        ));
    }
    Ok(fd)
}

/// Sets MTU, address and the up flag through an `AF_INET` socket opened in
/// the current (the device's) namespace.
fn configure(name: &str, mtu: u32, addr: Option<Ipv4Cidr>) -> io::Result<()> {
    // SAFETY: plain socket(2) call.
    let raw = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if raw < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: raw is a fresh descriptor nobody else owns.
    let sock = unsafe { OwnedFd::from_raw_fd(raw) };
    let ioctl = |req: libc::c_ulong, r: &mut libc::ifreq, what: &str| -> io::Result<()> {
        // SAFETY: every request used here reads (or writes) an ifreq.
        let rc = unsafe { libc::ioctl(sock.as_raw_fd(), req as _, r as *mut libc::ifreq) };
        if rc != 0 {
            return Err(with_context(
                io::Error::last_os_error(),
                format!("{what} of {name}"),
            ));
        }
        Ok(())
    };
    let mut req = ifreq_for(name);
    req.ifr_ifru.ifru_mtu = mtu as libc::c_int;
    ioctl(libc::SIOCSIFMTU, &mut req, "setting the MTU")?;
    // The queue in front of the emulator (the device's qdisc and ring) is
    // outside the model: make it deep enough that a briefly descheduled
    // emulator does not drop there (ifr_qlen shares the union's int).
    let mut req = ifreq_for(name);
    req.ifr_ifru.ifru_metric = TX_QUEUE_LEN;
    ioctl(
        libc::SIOCSIFTXQLEN,
        &mut req,
        "setting the transmit queue length",
    )?;
    if let Some(a) = addr {
        let mut req = ifreq_for(name);
        req.ifr_ifru.ifru_addr = sockaddr_v4(a.addr);
        ioctl(libc::SIOCSIFADDR, &mut req, "setting the address")?;
        let mask = if a.prefix == 0 {
            0
        } else {
            u32::MAX << (32 - a.prefix as u32)
        };
        let mut req = ifreq_for(name);
        req.ifr_ifru.ifru_netmask = sockaddr_v4(Ipv4Addr::from(mask));
        ioctl(libc::SIOCSIFNETMASK, &mut req, "setting the netmask")?;
    }
    let mut req = ifreq_for(name);
    ioctl(libc::SIOCGIFFLAGS, &mut req, "reading the flags")?;
    // SAFETY: SIOCGIFFLAGS filled ifru_flags.
    let flags = unsafe { req.ifr_ifru.ifru_flags };
    req.ifr_ifru.ifru_flags = flags | (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short;
    ioctl(libc::SIOCSIFFLAGS, &mut req, "bringing up")?;
    Ok(())
}

fn sockaddr_v4(ip: Ipv4Addr) -> libc::sockaddr {
    let sin = libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: 0,
        sin_addr: libc::in_addr {
            s_addr: u32::from(ip).to_be(),
        },
        sin_zero: [0; 8],
    };
    // SAFETY: sockaddr_in and sockaddr have the same size on Linux, and a
    // sockaddr is plain bytes.
    unsafe { std::mem::transmute::<libc::sockaddr_in, libc::sockaddr>(sin) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_cidrs() {
        let c: Ipv4Cidr = "198.18.1.1/24".parse().unwrap();
        assert_eq!(c.addr, Ipv4Addr::new(198, 18, 1, 1));
        assert_eq!(c.prefix, 24);
        assert!("198.18.1.1".parse::<Ipv4Cidr>().is_err());
        assert!("198.18.1.1/33".parse::<Ipv4Cidr>().is_err());
        assert!("x/24".parse::<Ipv4Cidr>().is_err());
    }
}
