//! Wider kernel pipe buffers for `braid send` reading stdin and `braid
//! recv` writing stdout.
//!
//! A Linux pipe holds 64 KiB by default, so a producer such as `tar c |
//! braid send` and braid's reader hand the CPU back and forth every 64 KiB:
//! two context switches and a wake-up per 64 KiB, on the same cores that
//! hash, seal and send. A 1 MiB pipe (the unprivileged limit,
//! `/proc/sys/fs/pipe-max-size`) cuts that sixteenfold. Best effort: any
//! other file, or a refused size, is left as it is.

use std::os::fd::{AsRawFd, BorrowedFd};

/// The pipe size asked for.
const PIPE_BYTES: i32 = 1 << 20;

/// Widens `fd` to [`PIPE_BYTES`] if it is a narrower pipe; does nothing
/// otherwise.
pub fn widen(fd: BorrowedFd<'_>) {
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::fs::FileTypeExt;
        let Ok(owned) = fd.try_clone_to_owned() else {
            return;
        };
        let is_fifo = std::fs::File::from(owned)
            .metadata()
            .is_ok_and(|m| m.file_type().is_fifo());
        if is_fifo {
            // SAFETY: F_GETPIPE_SZ / F_SETPIPE_SZ on a descriptor this
            // process holds open (borrowed for the call) only read or
            // resize the pipe's buffer; a refusal returns -1 and changes
            // nothing. Only ever grow: a producer may have widened it more.
            unsafe {
                let have = libc::fcntl(fd.as_raw_fd(), libc::F_GETPIPE_SZ);
                if (0..PIPE_BYTES).contains(&have) {
                    libc::fcntl(fd.as_raw_fd(), libc::F_SETPIPE_SZ, PIPE_BYTES);
                }
            }
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = fd;
}
