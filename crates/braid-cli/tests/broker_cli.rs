//! `braid broker` and `braid reserve` as processes: a committed reservation
//! survives kill -9 of the broker and a restart on the same database.

use std::path::Path;
use std::process::Command;

mod common;
use common::broker::reserve;

/// A broker for `config` and `db`.
fn start(config: &Path, db: &Path) -> (std::process::Child, String) {
    common::broker::start(&[], config, db)
}

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

/// Issue 29 §4 (slowloris): with 256 file descriptors (`prlimit`), 400
/// connections that never finish their request head took every
/// descriptor and `/healthz` went unanswered. Now the broker holds at
/// most what its file limit leaves, and an idle or slow connection gives
/// way to a new one, so the health check is answered.
#[test]
fn healthz_answers_through_a_slowloris_flood() {
    use std::io::{BufRead, BufReader, Read, Write};
    if Command::new("prlimit").arg("--version").output().is_err() {
        eprintln!("SKIP: needs prlimit (util-linux) to give the broker a small file limit");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path());
    let mut child = Killed(
        Command::new("prlimit")
            .arg("--nofile=256:256")
            .args([BRAID, "broker", "--listen", "127.0.0.1:0", "--config"])
            .arg(&config)
            .arg("--db")
            .arg(dir.path().join("b.db"))
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("spawn braid broker under prlimit"),
    );
    let mut lines = BufReader::new(child.0.stderr.take().unwrap()).lines();
    let addr = loop {
        let line = lines
            .next()
            .expect("the broker printed its address")
            .unwrap();
        if let Some(rest) = line.split("listening on http://").nth(1) {
            break rest.split_whitespace().next().unwrap().to_string();
        }
    };
    std::thread::spawn(move || lines.for_each(drop));
    let mut slow = Vec::new();
    for _ in 0..400 {
        let mut s = std::net::TcpStream::connect(&addr).expect("connect");
        s.write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\n")
            .unwrap();
        slow.push(s);
    }
    for _ in 0..3 {
        let mut s = std::net::TcpStream::connect(&addr).expect("connect");
        // A guard, not a timing: a broker that never answers fails here.
        s.set_read_timeout(Some(std::time::Duration::from_secs(30)))
            .unwrap();
        s.write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
            .unwrap();
        let mut answer = String::new();
        let read = s.read_to_string(&mut answer);
        assert!(
            read.is_ok() && answer.starts_with("HTTP/1.1 200"),
            "/healthz under 400 slow connections: {read:?} {answer:?}"
        );
    }
    drop(slow);
}

/// A child process killed when dropped, also when a test fails.
struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
