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

/// A key file for the pipe tests (`braid keygen`, once per test process).
#[allow(dead_code)] // not every test binary talks to a pipe
pub fn pipe_key() -> std::path::PathBuf {
    static KEY: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    KEY.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("braid-pipekey-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("key dir");
        let key = dir.join("key");
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_braid"))
            .arg("keygen")
            .arg(&key)
            .output()
            .expect("run braid keygen");
        assert_ok(&out, "braid keygen");
        key
    })
    .clone()
}

/// [`pipe_key`] as a string argument.
#[allow(dead_code)] // not every test binary talks to a pipe
pub fn pipe_key_arg() -> String {
    pipe_key()
        .to_str()
        .expect("temp paths are UTF-8")
        .to_string()
}

// Only the namespace tests use it; the other test binaries include this
// module too and would warn about unused items.
#[allow(dead_code)]
pub mod broker;
#[allow(dead_code)]
pub mod netns;
