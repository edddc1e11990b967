//! `braid broker` and `braid reserve` as processes: a committed reservation
//! survives kill -9 of the broker and a restart on the same database.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

const BRAID: &str = env!("CARGO_BIN_EXE_braid");

fn write_config(dir: &Path) -> std::path::PathBuf {
    let config = dir.join("broker.toml");
    std::fs::write(
        &config,
        "secret = \"0123456789abcdef0123456789abcdef\"\n\
         [[resource]]\nname = \"link\"\nkind = \"network\"\ncapacity = \"100mbit\"\n",
    )
    .unwrap();
    config
}

/// Starts a broker on an ephemeral port; returns it and its URL (read from
/// its "listening on" line).
fn start(config: &Path, db: &Path) -> (Child, String) {
    let mut child = Command::new(BRAID)
        .args(["broker", "--config"])
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
            break rest.split_whitespace().next().unwrap().to_string();
        }
    };
    // Keep draining stderr so the broker never blocks on a full pipe.
    std::thread::spawn(move || lines.for_each(drop));
    (child, url)
}

fn reserve(url: &str, token: &str, args: &[&str]) -> serde_json::Value {
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

#[test]
fn committed_reservation_survives_kill_9() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path());
    let db = dir.path().join("broker.db");
    let token = Command::new(BRAID)
        .args(["broker", "token", "--config"])
        .arg(&config)
        .args(["--user", "alice", "--role", "user", "--ttl", "1d"])
        .output()
        .unwrap();
    assert!(token.status.success());
    let token = String::from_utf8(token.stdout).unwrap().trim().to_string();

    let (mut broker, url) = start(&config, &db);
    let made = reserve(
        &url,
        &token,
        &[
            "create",
            "--resource",
            "link",
            "--rate",
            "40mbit",
            "--duration",
            "1h",
            "--commit",
        ],
    );
    let committed = made[0]["id"].as_u64().unwrap();
    assert_eq!(made[0]["state"], "committed");
    let held = reserve(
        &url,
        &token,
        &[
            "create",
            "--resource",
            "link",
            "--rate",
            "10mbit",
            "--duration",
            "1h",
        ],
    );
    let held = held[0]["id"].as_u64().unwrap();
    broker.kill().unwrap(); // SIGKILL
    broker.wait().unwrap();

    let (mut broker, url) = start(&config, &db);
    let shown = reserve(&url, &token, &["show", &committed.to_string()]);
    assert_eq!(shown["state"], "committed");
    assert_eq!(shown["committed"]["rate_bps"], 40_000_000);
    assert_eq!(
        reserve(&url, &token, &["show", &held.to_string()])["state"],
        "held"
    );
    assert_eq!(
        reserve(&url, &token, &["list"]).as_array().unwrap().len(),
        2
    );
    broker.kill().unwrap();
    broker.wait().unwrap();
}

#[test]
fn broker_refuses_a_bad_config_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("bad.toml");
    std::fs::write(&config, "secret = \"0123456789abcdef0123456789abcdef\"\n[[resource]]\nname = \"l\"\nkind = \"network\"\ncapacity = \"lots\"\n").unwrap();
    let out = Command::new(BRAID)
        .args(["broker", "--config"])
        .arg(&config)
        .args(["--db"])
        .arg(dir.path().join("x.db"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("line 5") && err.contains("lots"), "{err}");
}
