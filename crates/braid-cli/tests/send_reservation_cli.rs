//! `braid send --reservation` and `--deadline` against a real `braid
//! broker` process, with real transfers on loopback: a foreground
//! reservation paces the transfer at its rate; an unknown, foreign or
//! uncommitted one is refused in one line; a background sender's pace
//! follows the share the broker announces as a foreground reservation
//! arrives and leaves; a deadline transfer reserves, lowers its
//! reservation as it gets ahead and terminates it; an impossible deadline
//! is refused before anything is sent.

mod common;

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

const BRAID: &str = env!("CARGO_BIN_EXE_braid");

fn braid() -> Command {
    Command::new(BRAID)
}

fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("braid-sendres-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("tmpdir");
    d
}

fn free_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind port 0");
    l.local_addr().expect("local addr").port()
}

/// Deterministic pseudo-random bytes (xorshift64*).
fn random_bytes(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    let mut v = Vec::with_capacity(n + 8);
    while v.len() < n {
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        v.extend_from_slice(&x.wrapping_mul(0x2545_F491_4F6C_DD1D).to_le_bytes());
    }
    v.truncate(n);
    v
}

/// A broker on an ephemeral port with one 16 Mbit/s link; killed on drop.
struct Broker {
    child: Child,
    url: String,
    dir: PathBuf,
}

impl Drop for Broker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Broker {
    fn start(dir: &Path) -> Broker {
        let config = dir.join("broker.toml");
        std::fs::write(
            &config,
            "secret = \"0123456789abcdef0123456789abcdef\"\n\
             [[resource]]\nname = \"link\"\nkind = \"network\"\ncapacity = \"16mbit\"\n",
        )
        .unwrap();
        let (child, url) = common::broker::start(&[], &config, dir.join("broker.db"));
        Broker {
            child,
            url,
            dir: dir.to_path_buf(),
        }
    }

    fn token(&self, user: &str) -> String {
        let out = braid()
            .args(["broker", "token", "--config"])
            .arg(self.dir.join("broker.toml"))
            .args(["--user", user, "--role", "user", "--ttl", "1d"])
            .output()
            .unwrap();
        common::assert_ok(&out, "braid broker token");
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    }

    /// `braid reserve ARGS --format json` as `token`'s user.
    fn reserve(&self, token: &str, args: &[&str]) -> serde_json::Value {
        let out = braid()
            .args([
                "reserve", "--broker", &self.url, "--token", token, "--format", "json",
            ])
            .args(args)
            .output()
            .expect("run braid reserve");
        common::assert_ok(&out, format!("braid reserve {args:?}"));
        serde_json::from_slice(&out.stdout).expect("json output")
    }

    /// Creates a committed reservation; its id.
    fn committed(&self, token: &str, rate: &str, class: &str) -> u64 {
        let v = self.reserve(
            token,
            &[
                "create",
                "--resource",
                "link",
                "--rate",
                rate,
                "--duration",
                "10m",
                "--class",
                class,
                "--commit",
            ],
        );
        v[0]["id"].as_u64().expect("an id")
    }
}

fn start_recv(port: u16, out: &Path) -> Child {
    let mut child = braid()
        .args([
            "recv",
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--no-progress",
            "--key",
        ])
        .arg(common::pipe_key())
        .arg("-o")
        .arg(out)
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn recv");
    for _ in 0..200 {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return child;
        }
        std::thread::park_timeout(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    panic!("receiver did not start listening on {port}");
}

/// `braid send` on the broker with `token`, to `port`, `extra` flags.
fn send_cmd(b: &Broker, token: &str, port: u16, extra: &[&str], input: &Path) -> Command {
    let mut c = braid();
    c.args([
        "send",
        "--to",
        &format!("127.0.0.1:{port}"),
        "--no-progress",
        "--key",
    ])
    .arg(common::pipe_key())
    .args(["--broker", &b.url, "--token", token])
    .args(extra)
    .arg(input);
    c
}

/// A refusal: non-zero exit and exactly one error line naming `what`.
fn assert_refused(out: &Output, what: &str) {
    assert!(!out.status.success(), "expected a refusal");
    let err = String::from_utf8_lossy(&out.stderr);
    let errors: Vec<&str> = err.lines().filter(|l| l.contains("error")).collect();
    assert_eq!(errors.len(), 1, "one error line: {err}");
    assert!(errors[0].contains(what), "{what:?} in {err}");
}

#[test]
fn reservation_paces_the_transfer_and_bad_ones_are_refused() {
    let dir = tmpdir("pace");
    let b = Broker::start(&dir);
    let alice = b.token("alice");
    let bob = b.token("bob");
    let id = b.committed(&alice, "8mbit", "foreground");
    let held = b.reserve(
        &alice,
        &[
            "create",
            "--resource",
            "link",
            "--rate",
            "1mbit",
            "--duration",
            "10m",
        ],
    )[0]["id"]
        .as_u64()
        .unwrap();
    let input = dir.join("in");
    let bytes = 2_000_000usize;
    std::fs::write(&input, random_bytes(bytes, 3)).unwrap();

    // Refusals come before any connection: nothing listens on the port.
    let nobody = free_port();
    let refuse = |token: &str, id: u64| {
        send_cmd(
            &b,
            token,
            nobody,
            &["--reservation", &id.to_string()],
            &input,
        )
        .output()
        .unwrap()
    };
    assert_refused(&refuse(&alice, 999), "not found");
    assert_refused(&refuse(&bob, id), "not found");
    assert_refused(&refuse(&alice, held), "not committed");
    let later = braid_broker::clock::format(
        braid_broker::clock::now() + braid_core::Duration::from_secs(3600),
    );
    let future = b.reserve(
        &alice,
        &[
            "create",
            "--resource",
            "link",
            "--rate",
            "1mbit",
            "--start",
            &later,
            "--duration",
            "10m",
            "--commit",
        ],
    )[0]["id"]
        .as_u64()
        .unwrap();
    assert_refused(&refuse(&alice, future), "--wait-start");

    let port = free_port();
    let out = dir.join("out");
    let rx = start_recv(port, &out);
    let t0 = braid::clock::now();
    let sent = send_cmd(
        &b,
        &alice,
        port,
        &["--reservation", &id.to_string(), "--block-size", "64KiB"],
        &input,
    )
    .output()
    .unwrap();
    let took = braid::clock::now()
        .saturating_duration_since(t0)
        .as_secs_f64();
    common::assert_ok(&sent, "send on the reservation");
    common::assert_ok(&rx.wait_with_output().unwrap(), "recv");
    assert_eq!(std::fs::read(&out).unwrap().len(), bytes);
    // Paced at 8 Mbit/s = 1 MB/s: at least 90 % of bytes / rate.
    let floor = bytes as f64 / 1e6 * 0.9;
    assert!(
        took >= floor,
        "took {took:.2} s, under {floor:.2} s: not paced"
    );
    let err = String::from_utf8_lossy(&sent.stderr);
    assert!(err.contains("pace 8 Mbit/s (reserved rate)"), "{err}");
    // Provisioned for the transfer, released after.
    let v = b.reserve(&alice, &["show", &id.to_string()]);
    assert_eq!(v["provision"], "released", "{v}");
}

#[test]
fn rate_below_the_reservation_wins() {
    let dir = tmpdir("ratecap");
    let b = Broker::start(&dir);
    let alice = b.token("alice");
    let id = b.committed(&alice, "8mbit", "foreground");
    let input = dir.join("in");
    let bytes = 1_000_000usize;
    std::fs::write(&input, random_bytes(bytes, 17)).unwrap();
    let port = free_port();
    let out = dir.join("out");
    let rx = start_recv(port, &out);
    let t0 = braid::clock::now();
    let sent = send_cmd(
        &b,
        &alice,
        port,
        &[
            "--reservation",
            &id.to_string(),
            "--rate",
            "4mbit",
            "--block-size",
            "64KiB",
        ],
        &input,
    )
    .output()
    .unwrap();
    let took = braid::clock::now()
        .saturating_duration_since(t0)
        .as_secs_f64();
    common::assert_ok(&sent, "send on the reservation with --rate");
    common::assert_ok(&rx.wait_with_output().unwrap(), "recv");
    assert_eq!(std::fs::read(&out).unwrap(), random_bytes(bytes, 17));
    let err = String::from_utf8_lossy(&sent.stderr);
    assert!(
        err.contains("pace 4 Mbit/s (--rate, below the reserved rate 8 Mbit/s)"),
        "{err}"
    );
    // Paced at 4 Mbit/s = 0.5 MB/s, not at the reserved 1 MB/s: at least
    // 90 % of bytes / 0.5 MB/s.
    let floor = bytes as f64 / 0.5e6 * 0.9;
    assert!(
        took >= floor,
        "took {took:.2} s, under {floor:.2} s: not at --rate"
    );
}

/// Waits for a stderr line containing `pat`; the lines seen meanwhile.
fn wait_line(lines: &mpsc::Receiver<String>, pat: &str, seen: &mut Vec<String>) -> String {
    loop {
        match lines.recv_timeout(Duration::from_secs(60)) {
            Ok(l) => {
                seen.push(l.clone());
                if l.contains(pat) {
                    return l;
                }
            }
            Err(_) => panic!("no line with {pat:?}; saw {seen:#?}"),
        }
    }
}

/// The rate in a "pace R (share)" line, in Mbit/s.
fn pace_of(line: &str) -> f64 {
    let r = line.split("pace ").nth(1).unwrap();
    let mut parts = r.split_whitespace();
    let v: f64 = parts.next().unwrap().parse().unwrap();
    match parts.next().unwrap() {
        "kbit/s" => v / 1e3,
        "Mbit/s" => v,
        u => panic!("unit {u}"),
    }
}

#[test]
fn background_sender_follows_the_share() {
    let dir = tmpdir("share");
    let b = Broker::start(&dir);
    let alice = b.token("alice");
    let bg = b.committed(&alice, "1mbit", "background");
    let input = dir.join("in");
    let bytes = 12_000_000usize;
    std::fs::write(&input, random_bytes(bytes, 5)).unwrap();
    let port = free_port();
    let out = dir.join("out");
    let rx = start_recv(port, &out);
    let mut tx = send_cmd(
        &b,
        &alice,
        port,
        &["--reservation", &bg.to_string()],
        &input,
    )
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    let (line_tx, lines) = mpsc::channel();
    let stderr = tx.stderr.take().unwrap();
    std::thread::spawn(move || {
        for l in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = line_tx.send(l);
        }
    });
    let mut seen = Vec::new();
    let alone = pace_of(&wait_line(&lines, "(share)", &mut seen));
    // A foreground reservation arrives: the share shrinks.
    let fg = b.committed(&alice, "12mbit", "foreground");
    let squeezed = pace_of(&wait_line(&lines, "(share)", &mut seen));
    assert!(squeezed < alone, "{squeezed} < {alone}: {seen:#?}");
    // It leaves: the share grows back.
    b.reserve(&alice, &["cancel", &fg.to_string()]);
    let back = pace_of(&wait_line(&lines, "(share)", &mut seen));
    assert!(back > squeezed, "{back} > {squeezed}: {seen:#?}");
    assert!(tx.wait().unwrap().success(), "send failed: {seen:#?}");
    common::assert_ok(&rx.wait_with_output().unwrap(), "recv");
    assert_eq!(std::fs::read(&out).unwrap(), random_bytes(bytes, 5));
}

#[test]
fn a_committed_modify_changes_the_pace() {
    let dir = tmpdir("modify");
    let b = Broker::start(&dir);
    let alice = b.token("alice");
    let id = b.committed(&alice, "8mbit", "foreground");
    let input = dir.join("in");
    let bytes = 6_000_000usize;
    std::fs::write(&input, random_bytes(bytes, 13)).unwrap();
    let port = free_port();
    let out = dir.join("out");
    let rx = start_recv(port, &out);
    let mut tx = send_cmd(
        &b,
        &alice,
        port,
        &["--reservation", &id.to_string()],
        &input,
    )
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    let (line_tx, lines) = mpsc::channel();
    let stderr = tx.stderr.take().unwrap();
    std::thread::spawn(move || {
        for l in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = line_tx.send(l);
        }
    });
    let mut seen = Vec::new();
    wait_line(&lines, "pace 8 Mbit/s (reserved rate)", &mut seen);
    b.reserve(&alice, &["modify", &id.to_string(), "--rate", "16mbit"]);
    b.reserve(&alice, &["commit", &id.to_string()]);
    wait_line(&lines, "pace 16 Mbit/s (reserved rate)", &mut seen);
    assert!(tx.wait().unwrap().success(), "send failed: {seen:#?}");
    common::assert_ok(&rx.wait_with_output().unwrap(), "recv");
    assert_eq!(std::fs::read(&out).unwrap(), random_bytes(bytes, 13));
}

#[test]
fn deadline_transfer_lowers_its_reservation_and_terminates_it() {
    let dir = tmpdir("deadline");
    let b = Broker::start(&dir);
    let alice = b.token("alice");
    let input = dir.join("in");
    let bytes = 8_000_000usize;
    std::fs::write(&input, random_bytes(bytes, 9)).unwrap();
    let port = free_port();
    let out = dir.join("out");
    let stats = dir.join("stats.json");
    let rx = start_recv(port, &out);
    let sent = send_cmd(
        &b,
        &alice,
        port,
        &[
            "--deadline",
            "60s",
            "--resource",
            "link",
            "--update-every",
            "1MiB",
            "--scavenger-rate",
            "16mbit",
            "--stats-file",
            stats.to_str().unwrap(),
        ],
        &input,
    )
    .output()
    .unwrap();
    common::assert_ok(&sent, "deadline send");
    common::assert_ok(&rx.wait_with_output().unwrap(), "recv");
    assert_eq!(std::fs::read(&out).unwrap(), random_bytes(bytes, 9));
    let s: serde_json::Value = serde_json::from_slice(&std::fs::read(&stats).unwrap()).unwrap();
    let d = &s["deadline"];
    assert_eq!(d["met"], true, "{d}");
    let lowered = d["lowered"].as_array().unwrap();
    assert!(!lowered.is_empty(), "lowered at least once: {d}");
    assert!(
        d["final_rate_bps"].as_u64() < d["initial_rate_bps"].as_u64(),
        "{d}"
    );
    let id = d["reservation"].as_u64().unwrap();
    let v = b.reserve(&alice, &["show", &id.to_string()]);
    assert_eq!(v["life"], "terminated", "{v}");
    // Every update was a committed version of the reservation.
    let version = v["committed"]["number"].as_u64().unwrap();
    assert!(version as usize >= lowered.len(), "{v}");
}

#[test]
fn impossible_deadline_is_refused_before_sending() {
    let dir = tmpdir("impossible");
    let b = Broker::start(&dir);
    let alice = b.token("alice");
    let input = dir.join("in");
    std::fs::write(&input, random_bytes(8_000_000, 1)).unwrap();
    // 8 MB in 2 s needs about 36 Mbit/s; the link has 16. Nothing listens
    // on the port: a refusal after connecting would say so.
    let out = send_cmd(
        &b,
        &alice,
        free_port(),
        &["--deadline", "2s", "--resource", "link"],
        &input,
    )
    .output()
    .unwrap();
    assert_refused(&out, "cannot be met");
    let all = b.reserve(&alice, &["list", "--all"]);
    assert_eq!(
        all.as_array().map(Vec::len),
        Some(0),
        "nothing reserved: {all}"
    );
}

#[test]
fn stream_on_a_reservation_takes_its_rate_and_arrives_whole() {
    let dir = tmpdir("stream");
    let b = Broker::start(&dir);
    let alice = b.token("alice");
    let id = b.committed(&alice, "8mbit", "foreground");
    let input = dir.join("in");
    let bytes = 1_000_000usize;
    std::fs::write(&input, random_bytes(bytes, 11)).unwrap();
    let out = dir.join("sink");
    std::fs::create_dir_all(&out).unwrap();
    let mut serve = braid()
        .args([
            "serve",
            "--open",
            "--listen",
            "127.0.0.1:0",
            "--once",
            "--out",
        ])
        .arg(&out)
        .env_remove("BRAID_LOG")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start braid serve");
    let mut lines = BufReader::new(serve.stderr.take().unwrap()).lines();
    let addr = loop {
        let Some(Ok(l)) = lines.next() else {
            let _ = serve.kill();
            let _ = serve.wait();
            panic!("serve ended before listening");
        };
        if let Some(rest) = l.split("listening on ").nth(1) {
            break rest.trim().to_string();
        }
    };
    std::thread::spawn(move || lines.for_each(drop));
    let stream = |name: &str, id: u64| {
        braid()
            .args(["stream", "--to", &addr, "--open", "--format", "json"])
            .args(["--stream", &format!("bulk:best-effort:{}", input.display())])
            .args(["--reservation", &format!("{name}={id}")])
            .args(["--broker", &b.url, "--token", &alice])
            .env_remove("BRAID_LOG")
            .output()
            .unwrap()
    };
    assert_refused(&stream("bulk", 999), "not found");
    assert_refused(&stream("other", id), "no --stream named");
    let ok = stream("bulk", id);
    let _ = serve.wait();
    common::assert_ok(&ok, "stream on the reservation");
    let last = String::from_utf8_lossy(&ok.stdout)
        .lines()
        .last()
        .unwrap()
        .to_string();
    let v: serde_json::Value = serde_json::from_str(&last).unwrap();
    assert_eq!(v["streams"][0]["spec"], "rate=8mbit@0.99", "{v}");
    assert_eq!(
        std::fs::read(out.join("bulk")).unwrap(),
        random_bytes(bytes, 11)
    );
}
