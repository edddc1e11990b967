//! Socket set-up for the pipe: TCP or kernel MPTCP, buffers, timeouts.
//!
//! Buffer policy ("socket buffers from the bandwidth-delay product"): unless
//! the user gives `--sockbuf`, the kernel's autotuning sizes each
//! connection's buffers to its measured BDP (up to `tcp_wmem`/`tcp_rmem`
//! max), and `TCP_NOTSENT_LOWAT` keeps the *unsent* part of the send buffer
//! to about one block, so a connection asks the scheduler for its next block
//! only when the network has taken the previous one; in adaptive mode the
//! sender lowers it on slow connections to 50 ms of their measured rate
//! (`BlockScheduler::notsent_lowat`). `TCP_USER_TIMEOUT`
//! bounds how long unacknowledged data may sit before the kernel declares the
//! connection dead (a path that went down).
//!
//! One exception to autotuning: a sender's connection to this same host
//! with no delay on it ([`same_host`]) gets a fixed send buffer of
//! [`SAME_HOST_SNDBUF`]. Such a path has no bandwidth-delay product to
//! cover, but autotuning still grows the buffer to `tcp_wmem`'s maximum (a
//! loopback path never loses a packet), and on one host, while the
//! receiver lags, the receiving kernel acknowledges as it reads: megabytes
//! wait in the receiver's socket and are read back from memory instead of
//! the cache they were copied into (docs/BENCHMARKS.md: the encrypted pipe from a
//! pipe on loopback 13.2 → 16.7 Gbit/s, the sender's CPU per byte −18 %,
//! the receiver's −24 %).

use super::ConfigError;
use socket2::{Domain, Protocol, SockAddr, Socket, Type};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};

/// Smallest fixed socket buffer (`--sockbuf`).
pub const MIN_SOCKBUF: usize = 4 << 10;
/// Largest fixed socket buffer (`--sockbuf`): the kernel takes an `int`
/// and doubles it, so anything above would overflow (and silently become
/// a tiny buffer).
pub const MAX_SOCKBUF: usize = 1 << 30;

/// The send buffer asked for on a same-host connection ([`same_host`])
/// without `--sockbuf`. The kernel doubles it (384 KiB for its own
/// accounting) and caps the ask at `net.core.wmem_max`, 208 KiB by
/// default, so every host with the default `wmem_max` or a larger one
/// grants the same. At a same-host round trip of about 20 µs, 384 KiB in
/// flight is 19 GB/s per connection.
pub const SAME_HOST_SNDBUF: usize = 192 << 10;

/// The longest handshake round trip of a same-host connection: a longer
/// one means a delay is emulated on it (`tc netem` on `lo`), whose
/// bandwidth-delay product autotuning must go on covering.
pub const SAME_HOST_RTT: std::time::Duration = std::time::Duration::from_millis(1);

/// `IPPROTO_MPTCP` (Linux).
pub const IPPROTO_MPTCP: i32 = 262;

/// Socket options shared by sender and receiver (`Default`: no MPTCP, the
/// kernel's buffers, no low-water mark, no user timeout).
#[derive(Debug, Clone, Copy, Default)]
pub struct SockOpts {
    /// Use kernel MPTCP instead of TCP.
    pub mptcp: bool,
    /// Fixed SO_SNDBUF/SO_RCVBUF (disables autotuning); `None`: autotune
    /// (but a sender's same-host connection gets [`SAME_HOST_SNDBUF`]:
    /// [`connect_async`]).
    /// Must be [`MIN_SOCKBUF`]..=[`MAX_SOCKBUF`] ([`SockOpts::validate`]).
    pub sockbuf: Option<usize>,
    /// TCP_NOTSENT_LOWAT in bytes (sender).
    pub notsent_lowat: Option<u32>,
    /// TCP_USER_TIMEOUT.
    pub user_timeout: Option<braid_core::Duration>,
}

impl SockOpts {
    /// Checks the options' bounds.
    ///
    /// # Errors
    /// [`ConfigError::SockBuf`] if `sockbuf` is out of range.
    pub fn validate(&self) -> Result<(), ConfigError> {
        match self.sockbuf {
            Some(b) if !(MIN_SOCKBUF..=MAX_SOCKBUF).contains(&b) => Err(ConfigError::SockBuf),
            _ => Ok(()),
        }
    }
}

fn socket_for(addr: &SocketAddr, o: &SockOpts) -> std::io::Result<Socket> {
    let proto = if o.mptcp {
        Protocol::from(IPPROTO_MPTCP)
    } else {
        Protocol::TCP
    };
    let s = Socket::new(Domain::for_address(*addr), Type::STREAM, Some(proto))?;
    if let Some(b) = o.sockbuf {
        s.set_send_buffer_size(b)?;
        s.set_recv_buffer_size(b)?;
    }
    if let Err(e) = s.set_nodelay(true) {
        tracing::debug!("TCP_NODELAY not set: {e}");
    }
    Ok(s)
}

/// Connects to `addr` on the tokio runtime and applies the options (the
/// socket is made with socket2, so MPTCP and every option work); the caller
/// bounds the time with its own timeout.
///
/// # Errors
/// The OS error of `socket`, `connect` or a socket option.
pub async fn connect_async(
    addr: &SocketAddr,
    o: &SockOpts,
) -> std::io::Result<tokio::net::TcpStream> {
    let s = socket_for(addr, o)?;
    if let Some(t) = o.user_timeout {
        // MPTCP sockets on older kernels refuse TCP-level options.
        if let Err(e) = s.set_tcp_user_timeout(Some(t.into())) {
            tracing::debug!("TCP_USER_TIMEOUT not set: {e}");
        }
    }
    if let Some(l) = o.notsent_lowat {
        set_notsent_lowat(&s, l);
    }
    s.set_nonblocking(true)?;
    let std: TcpStream = s.into();
    let stream = tokio::net::TcpSocket::from_std_stream(std)
        .connect(*addr)
        .await?;
    if o.sockbuf.is_none() && same_host(&stream) {
        if let Err(e) = socket2::SockRef::from(&stream).set_send_buffer_size(SAME_HOST_SNDBUF) {
            tracing::debug!("same-host SO_SNDBUF not set: {e}");
        }
    }
    Ok(stream)
}

/// Whether `s` connects two addresses of this host with no delay between
/// them ([`is_same_host`] of its addresses and its handshake's round trip,
/// from `TCP_INFO`). A socket without `TCP_INFO` is not.
pub fn same_host(s: &tokio::net::TcpStream) -> bool {
    let (Ok(local), Ok(peer)) = (s.local_addr(), s.peer_addr()) else {
        return false;
    };
    let rtt = crate::tcp_info::tcp_info(s).map(|i| i.rtt_us);
    is_same_host(local.ip(), peer.ip(), rtt)
}

/// Whether a connection from `local` to `peer` whose smoothed round trip
/// is `rtt_us` (µs, after the handshake: its round trip) stays on this
/// host with no delay: the peer is a loopback address or the local one
/// (IPv4-mapped IPv6 addresses as their IPv4), and the round trip was
/// measured (a kernel that has no sample says 0) and is under
/// [`SAME_HOST_RTT`].
pub fn is_same_host(local: IpAddr, peer: IpAddr, rtt_us: Option<u32>) -> bool {
    let (local, peer) = (local.to_canonical(), peer.to_canonical());
    (peer.is_loopback() || peer == local)
        && rtt_us.is_some_and(|r| {
            r > 0 && std::time::Duration::from_micros(u64::from(r)) < SAME_HOST_RTT
        })
}

/// Binds a listener on `addr`.
///
/// # Errors
/// The OS error of `socket`, `bind` or `listen`.
pub fn listen(addr: &SocketAddr, o: &SockOpts) -> std::io::Result<TcpListener> {
    let s = socket_for(addr, o)?;
    s.set_reuse_address(true)?;
    s.bind(&SockAddr::from(*addr))?;
    s.listen(128)?;
    Ok(s.into())
}

/// Sets `TCP_NOTSENT_LOWAT` (how much unsent data makes the socket
/// writable); a failure is logged, not fatal (MPTCP on older kernels).
pub fn set_notsent_lowat(s: &impl std::os::fd::AsRawFd, bytes: u32) {
    let v: libc::c_int = bytes.min(i32::MAX as u32) as libc::c_int;
    // SAFETY: setsockopt with a valid fd, a pointer to a live c_int and its
    // size; the kernel copies the value and keeps no pointer.
    let rc = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_NOTSENT_LOWAT,
            (&v as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        tracing::debug!(
            "TCP_NOTSENT_LOWAT not set: {}",
            std::io::Error::last_os_error()
        );
    }
}

/// Sets `SO_MAX_PACING_RATE` (bytes per second, saturating at `u32::MAX`):
/// the kernel spreads the socket's packets out at no more than this rate
/// (`braid send --rate`); a failure is logged, not fatal.
pub fn set_max_pacing_rate(s: &impl std::os::fd::AsRawFd, bytes_per_sec: u64) {
    let v: u32 = u32::try_from(bytes_per_sec).unwrap_or(u32::MAX);
    // SAFETY: setsockopt with a valid fd, a pointer to a live u32 and its
    // size; the kernel copies the value and keeps no pointer.
    let rc = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_MAX_PACING_RATE,
            (&v as *const u32).cast(),
            std::mem::size_of::<u32>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        tracing::debug!(
            "SO_MAX_PACING_RATE not set: {}",
            std::io::Error::last_os_error()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the kernel makes of a `SO_SNDBUF` ask: doubled, the ask
    /// capped at `net.core.wmem_max`.
    fn granted(ask: usize) -> usize {
        let max: usize = std::fs::read_to_string("/proc/sys/net/core/wmem_max")
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(usize::MAX);
        2 * ask.min(max)
    }

    /// A connection to a listener on 127.0.0.1 whose handshake took under
    /// [`SAME_HOST_RTT`]: a loaded machine may take longer once, so up to
    /// five tries.
    async fn connect_with(sockbuf: Option<usize>) -> (tokio::net::TcpStream, TcpListener) {
        let o = SockOpts {
            mptcp: false,
            sockbuf,
            notsent_lowat: None,
            user_timeout: None,
        };
        for _ in 0..5 {
            let l = listen(&"127.0.0.1:0".parse().unwrap(), &o).unwrap();
            let s = connect_async(&l.local_addr().unwrap(), &o).await.unwrap();
            if same_host(&s) {
                return (s, l);
            }
        }
        panic!("five loopback handshakes all took 1 ms or more (or had no RTT sample)");
    }

    #[tokio::test]
    async fn a_same_host_connection_gets_the_small_send_buffer() {
        let (s, _l) = connect_with(None).await;
        let have = socket2::SockRef::from(&s).send_buffer_size().unwrap();
        assert_eq!(have, granted(SAME_HOST_SNDBUF));
    }

    #[tokio::test]
    async fn sockbuf_wins_over_the_same_host_buffer() {
        let (s, _l) = connect_with(Some(64 << 10)).await;
        let have = socket2::SockRef::from(&s).send_buffer_size().unwrap();
        assert_eq!(have, granted(64 << 10));
    }

    #[test]
    fn same_host_needs_a_local_peer_and_a_short_measured_round_trip() {
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        let lan = ip("10.1.2.3");
        // Loopback peers, and a peer at the socket's own address.
        assert!(is_same_host(ip("127.0.0.1"), ip("127.0.0.2"), Some(30)));
        assert!(is_same_host(ip("::1"), ip("::1"), Some(30)));
        assert!(is_same_host(lan, lan, Some(30)));
        // IPv4-mapped IPv6 counts as its IPv4.
        assert!(is_same_host(
            ip("::ffff:127.0.0.1"),
            ip("::ffff:127.0.0.2"),
            Some(30)
        ));
        assert!(is_same_host(ip("::ffff:10.1.2.3"), lan, Some(30)));
        // Another host.
        assert!(!is_same_host(lan, ip("10.1.2.4"), Some(30)));
        assert!(!is_same_host(
            ip("::ffff:10.1.2.3"),
            ip("::ffff:10.9.9.9"),
            Some(30)
        ));
        // A delay on the path (netem on lo), no sample, no TCP_INFO.
        assert!(is_same_host(lan, lan, Some(999)));
        assert!(!is_same_host(lan, lan, Some(1000)));
        assert!(!is_same_host(
            ip("127.0.0.1"),
            ip("127.0.0.1"),
            Some(50_000)
        ));
        assert!(!is_same_host(ip("127.0.0.1"), ip("127.0.0.1"), Some(0)));
        assert!(!is_same_host(ip("127.0.0.1"), ip("127.0.0.1"), None));
    }
}
