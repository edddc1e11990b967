//! Counters of what a secure pipe refused: connections at the handshake,
//! records that failed to open, wrong codes, encryption-mode mismatches.
//! Shared by the handshake (`secure`) and the record layer (`record`);
//! atomics updated once per refusal, never per byte.

use std::sync::atomic::{AtomicU64, Ordering};

/// Counters of one side's refusals (read them any time).
#[derive(Debug, Default)]
pub struct SecureStats {
    refused: AtomicU64,
    unverified: AtomicU64,
    code_failures: AtomicU64,
    mode_mismatch: AtomicU64,
}

/// A snapshot of [`SecureStats`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SecureCounts {
    /// Connections refused at the handshake: no key, a wrong key, not a
    /// secure sender, or silent until the timeout.
    pub refused: u64,
    /// Records that failed to open (altered, replayed, reordered) and
    /// `--no-encrypt` payloads that did not match their authenticated
    /// hash; each ended its connection.
    pub unverified: u64,
    /// Pairings whose code did not match.
    pub code_failures: u64,
    /// Connections refused for a different `--no-encrypt` setting.
    pub mode_mismatch: u64,
}

impl SecureStats {
    /// The counts now.
    pub fn snapshot(&self) -> SecureCounts {
        SecureCounts {
            refused: self.refused.load(Ordering::Relaxed),
            unverified: self.unverified.load(Ordering::Relaxed),
            code_failures: self.code_failures.load(Ordering::Relaxed),
            mode_mismatch: self.mode_mismatch.load(Ordering::Relaxed),
        }
    }

    pub(crate) fn count_refused(&self) {
        self.refused.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn count_unverified(&self) {
        self.unverified.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn count_code_failure(&self) {
        self.code_failures.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn count_mode_mismatch(&self) {
        self.mode_mismatch.fetch_add(1, Ordering::Relaxed);
    }
}
