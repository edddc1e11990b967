//! The kernel's `TCP_INFO` for a connected socket: the fields braid reads
//! (`braid perf` shows them; the pipe's sender reads the handshake's round
//! trip to tell a same-host connection, `pipe::net`).

use std::os::fd::{AsFd, AsRawFd};

/// The fields of `TCP_INFO` that braid uses.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct TcpInfo {
    /// Smoothed round-trip time, µs (after the handshake: its round trip).
    pub rtt_us: u32,
    /// Congestion window in bytes (segments × MSS).
    pub cwnd_bytes: u64,
    /// Segments retransmitted over the connection's life.
    pub total_retrans: u32,
    /// Segments sent.
    pub segs_out: u32,
}

/// `TCP_INFO` of `s`; `None` where the socket has none (not TCP, or an
/// MPTCP socket on a kernel that refuses it).
pub(crate) fn tcp_info(s: &impl AsFd) -> Option<TcpInfo> {
    let mut info = std::mem::MaybeUninit::<libc::tcp_info>::zeroed();
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into the zeroed
    // `tcp_info` we own; older kernels write fewer (the rest stays zero).
    let rc = unsafe {
        libc::getsockopt(
            s.as_fd().as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            info.as_mut_ptr().cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return None;
    }
    // SAFETY: zero-initialised plain-old-data, partly filled by the kernel.
    let i = unsafe { info.assume_init() };
    Some(TcpInfo {
        rtt_us: i.tcpi_rtt,
        cwnd_bytes: u64::from(i.tcpi_snd_cwnd) * u64::from(i.tcpi_snd_mss),
        total_retrans: i.tcpi_total_retrans,
        segs_out: i.tcpi_segs_out,
    })
}
