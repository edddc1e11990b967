//! How glibc's allocator is set for braid's data paths.
//!
//! A message's or a block's buffer is allocated on one thread (the
//! application's task, the pipe's reader) and freed on another (the
//! transport driver once it is acknowledged, a connection task once it is
//! written). With glibc's defaults each per-thread arena gives its free
//! top back to the kernel as soon as it passes the (dynamic) trim
//! threshold and takes it back a moment later: page faults, zeroed pages,
//! `mprotect` calls — 7–10 % of a `braid perf` client's CPU. Two settings
//! stop that: free memory up to [`TRIM_THRESHOLD`] stays in the process,
//! and buffers up to [`MMAP_THRESHOLD`] (the pipe's largest block) come
//! from the arenas instead of fresh mappings. Peak memory is unchanged; up
//! to 64 MiB freed after a peak may stay resident. Measured in
//! docs/BENCHMARKS.md (IQ-RUDP on loopback about 8 → 10 Gbit/s).
//!
//! Only the `braid` binary does this, at start-up; the libraries leave the
//! allocator to their users.

/// Free memory at an arena's top kept rather than returned (bytes).
const TRIM_THRESHOLD: i32 = 64 << 20;
/// Allocations from this size up get their own mapping (bytes): above the
/// pipe's largest block (16 MiB).
const MMAP_THRESHOLD: i32 = (16 << 20) + (1 << 20);

/// Sets both; a no-op where the C library is not glibc.
pub fn tune() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: `mallopt` only sets allocator parameters; it is called at the
    // start of `main`, before any other thread exists. A refused setting
    // (return 0) leaves glibc's default, which is correct, only slower.
    unsafe {
        libc::mallopt(libc::M_TRIM_THRESHOLD, TRIM_THRESHOLD);
        libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD);
    }
}
