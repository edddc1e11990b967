//! The testbed (`testbed/netns.sh`) from the library's namespace tests.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testbed/netns.sh")
}

/// Runs `testbed/netns.sh ARGS` as this process (`BT_OWNER`).
pub fn testbed(args: &[&str]) -> Output {
    Command::new("bash")
        .arg(script())
        .args(args)
        .env("BT_OWNER", std::process::id().to_string())
        .output()
        .expect("run testbed/netns.sh")
}

/// Why the namespace tests cannot run here, if they cannot (not root, no
/// `ip netns`).
pub fn skip_reason() -> Option<String> {
    let out = testbed(&["check"]);
    (!out.status.success()).then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}
