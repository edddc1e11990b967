//! A real `braid broker` process for the CLI tests, and `braid reserve`
//! runs against it.

use std::ffi::OsStr;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

const BRAID: &str = env!("CARGO_BIN_EXE_braid");

/// Starts `braid broker` (with `extra` flags first, e.g. `--enforce`) for
/// `config` and the database `db`, on an ephemeral port; returns it and
/// its URL (read from its "listening on" line). Its stderr keeps being
/// drained, so the broker never blocks on a full pipe.
pub fn start(extra: &[&str], config: &Path, db: impl AsRef<OsStr>) -> (Child, String) {
    let mut child = Command::new(BRAID)
        .arg("broker")
        .args(extra)
        .arg("--config")
        .arg(config)
        .args(["--listen", "127.0.0.1:0", "--db"])
        .arg(db)
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn braid broker");
    let stderr = child.stderr.take().expect("piped stderr");
    let mut lines = BufReader::new(stderr).lines();
    let url = loop {
        let line = lines
            .next()
            .expect("broker printed its address before exiting")
            .expect("stderr is text");
        if let Some(rest) = line.split("listening on ").nth(1) {
            // Invariant: "listening on" is followed by the URL.
            break rest.split_whitespace().next().unwrap().to_string();
        }
    };
    std::thread::spawn(move || lines.for_each(drop));
    (child, url)
}

/// Runs `braid reserve --broker URL --token TOKEN --format json ARGS`,
/// asserts it succeeded, and returns its JSON.
pub fn reserve(url: &str, token: &str, args: &[&str]) -> serde_json::Value {
    let out = Command::new(BRAID)
        .args([
            "reserve", "--broker", url, "--token", token, "--format", "json",
        ])
        .args(args)
        .output()
        .expect("run braid reserve");
    assert!(
        out.status.success(),
        "braid reserve {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("json output")
}
