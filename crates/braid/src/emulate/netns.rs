//! Running code inside a network namespace.
//!
//! `setns(2)` changes the namespace of the calling thread only, so
//! [`in_namespace`] runs a closure on a thread of its own that enters the
//! namespace first and ends right after. What the closure creates (a TUN
//! device, a socket, an endpoint bound to an address of that namespace)
//! stays in the namespace it was created in, whichever thread uses it
//! later.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

/// Where a network namespace lives: a name under `/run/netns` (what `ip
/// netns add` creates) or a path such as `/proc/PID/ns/net`.
pub fn namespace_path(ns: &str) -> PathBuf {
    if ns.contains('/') {
        PathBuf::from(ns)
    } else {
        Path::new("/run/netns").join(ns)
    }
}

/// Opens namespace `ns` (see [`namespace_path`]).
///
/// # Errors
/// It does not exist (the message says how to create it) or cannot be read.
pub fn open_namespace(ns: &str) -> io::Result<File> {
    let path = namespace_path(ns);
    File::open(&path).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!(
                "network namespace {ns} ({}): {e}; create it with `ip netns add`",
                path.display()
            ),
        )
    })
}

/// Runs `f` on a fresh thread inside network namespace `ns` and returns
/// its result.
///
/// # Errors
/// The namespace cannot be opened or entered (missing; entering needs
/// CAP_SYS_ADMIN), or what `f` returns.
pub fn in_namespace<T: Send>(ns: &str, f: impl FnOnce() -> io::Result<T> + Send) -> io::Result<T> {
    in_namespace_file(&open_namespace(ns)?, ns, f)
}

/// [`in_namespace`] for a namespace file already open (`ns` names it in
/// errors), so a caller that also inspects the file opens it once.
///
/// # Errors
/// The namespace cannot be entered, or what `f` returns.
pub fn in_namespace_file<T: Send>(
    file: &File,
    ns: &str,
    f: impl FnOnce() -> io::Result<T> + Send,
) -> io::Result<T> {
    std::thread::scope(|s| {
        s.spawn(move || {
            // SAFETY: `file` is an open namespace file; setns
            // changes only this thread, which ends after `f`.
            let rc = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
            if rc != 0 {
                let e = io::Error::last_os_error();
                return Err(io::Error::new(
                    e.kind(),
                    format!("entering network namespace {ns} (needs root): {e}"),
                ));
            }
            f()
        })
        .join()
        .unwrap_or_else(|_| Err(io::Error::other("namespace thread panicked")))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespace_names_and_paths() {
        assert_eq!(namespace_path("a"), PathBuf::from("/run/netns/a"));
        assert_eq!(
            namespace_path("/proc/1/ns/net"),
            PathBuf::from("/proc/1/ns/net")
        );
    }

    #[test]
    fn a_missing_namespace_is_named() {
        let e = in_namespace("braid-no-such-namespace", || Ok(())).unwrap_err();
        assert!(e.to_string().contains("braid-no-such-namespace"), "{e}");
        assert!(e.to_string().contains("ip netns add"), "{e}");
    }
}
