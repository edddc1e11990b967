//! Helpers shared by the CLI integration tests.

use std::fmt::Display;
use std::process::Output;

/// Asserts that a `braid` run exited successfully, showing its stderr if not.
#[track_caller]
pub fn assert_ok(out: &Output, what: impl Display) {
    assert!(
        out.status.success(),
        "{what}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

// Only the namespace tests use it; the other test binaries include this
// module too and would warn about unused items.
#[allow(dead_code)]
pub mod netns;
