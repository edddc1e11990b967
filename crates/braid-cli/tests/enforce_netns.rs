//! `braid broker --enforce` on a real kernel (issue 14 §3): a provisioned
//! network reservation becomes an htb class and a u32 filter on a device in
//! a network namespace, and its flow gets its rate beside unmatched
//! traffic; release removes both; a broker killed and restarted removes
//! what is no longer provisioned; a CPU reservation caps a busy process
//! through a cgroup; `--enforce` without root is one clear line.
//!
//! Namespaces are `enforce<pid><tag>{a,b}` joined by a veth pair
//! (`ea` 10.77.0.1 — `eb` 10.77.0.2); the broker shapes `ea`, the sender's
//! egress. The tests skip, saying why, when not root or without `tc`
//! (and the flow test without `iperf3`).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

const BRAID: &str = env!("CARGO_BIN_EXE_braid");

mod common;
use common::broker::reserve;

/// A `braid broker --enforce` process; its URL.
fn start(config: &Path, db: &Path) -> (Child, String) {
    common::broker::start(&["--enforce"], config, db)
}
const SECRET: &str = "secret = \"0123456789abcdef0123456789abcdef\"\n";

fn skip_reason() -> Option<String> {
    if !braid_broker::enforce::is_root() {
        return Some("not root".into());
    }
    if Command::new("tc").arg("-V").output().is_err() {
        return Some("no tc (iproute2)".into());
    }
    None
}

macro_rules! require_root_tc {
    () => {
        if let Some(why) = skip_reason() {
            eprintln!("SKIP: enforcement test needs root and tc: {why}");
            return;
        }
    };
}

/// Polls `cond` every 10 ms for up to `ms`; whether it held.
fn eventually(ms: u64, mut cond: impl FnMut() -> bool) -> bool {
    for _ in 0..ms / 10 {
        if cond() {
            return true;
        }
        std::thread::park_timeout(Duration::from_millis(10));
    }
    cond()
}

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().expect("run");
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Two namespaces and a veth pair, removed on drop.
struct Pair {
    a: String,
    b: String,
}

impl Pair {
    fn up(tag: &str) -> Pair {
        let base = format!("enforce{}{tag}", std::process::id());
        let p = Pair {
            a: format!("{base}a"),
            b: format!("{base}b"),
        };
        p.down();
        for ns in [&p.a, &p.b] {
            run(Command::new("ip").args(["netns", "add", ns]));
        }
        run(Command::new("ip").args([
            "-n", &p.a, "link", "add", "ea", "type", "veth", "peer", "name", "eb", "netns", &p.b,
        ]));
        for (ns, dev, addr) in [(&p.a, "ea", "10.77.0.1/24"), (&p.b, "eb", "10.77.0.2/24")] {
            run(Command::new("ip").args(["-n", ns, "addr", "add", addr, "dev", dev]));
            run(Command::new("ip").args(["-n", ns, "link", "set", dev, "up"]));
            run(Command::new("ip").args(["-n", ns, "link", "set", "lo", "up"]));
        }
        p
    }

    fn down(&self) {
        for ns in [&self.a, &self.b] {
            let _ = Command::new("ip")
                .args(["netns", "del", ns])
                .stderr(Stdio::null())
                .status();
        }
    }

    fn tc(&self, args: &[&str]) -> String {
        run(Command::new("tc").args(["-n", &self.a]).args(args))
    }

    fn exec(&self, ns: &str) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", ns]);
        c
    }
}

impl Drop for Pair {
    fn drop(&mut self) {
        self.down();
    }
}

fn write_config(dir: &Path, body: &str) -> PathBuf {
    let config = dir.join("broker.toml");
    std::fs::write(&config, format!("{SECRET}{body}")).unwrap();
    config
}

fn token(config: &Path) -> String {
    let out = run(Command::new(BRAID)
        .args(["broker", "token", "--config"])
        .arg(config)
        .args(["--user", "ops", "--role", "operator", "--ttl", "1d"]));
    out.trim().to_string()
}

fn first_id(v: &serde_json::Value) -> u64 {
    v[0]["id"].as_u64().expect("an id")
}

/// The class minor the broker gives reservation `id`, as tc prints it.
fn class(id: u64) -> String {
    format!(
        "bd:{:x}",
        braid_broker::enforce::net::minor(braid_core::ReservationId(id))
    )
}

/// Bytes sent by class `handle` (from `tc -s class show`).
fn class_bytes(p: &Pair, handle: &str) -> u64 {
    let out = p.tc(&["-s", "class", "show", "dev", "ea"]);
    let mut lines = out.lines();
    while let Some(l) = lines.next() {
        if l.starts_with(&format!("class htb {handle} ")) {
            let sent = lines.next().unwrap_or("");
            return sent
                .split_whitespace()
                .nth(1)
                .and_then(|b| b.parse().ok())
                .unwrap_or(0);
        }
    }
    0
}

fn net_config(p: &Pair, borrow: bool) -> String {
    format!(
        "[[resource]]\nname = \"link\"\nkind = \"network\"\ncapacity = \"40mbit\"\n\
         device = \"ea\"\nnetns = \"{}\"\nlink = \"50mbit\"\nborrow = {borrow}\n\
         overhead = 0.0\n",
        p.a
    )
}

#[test]
fn enforce_provision_shapes_the_flow_and_release_removes_it() {
    require_root_tc!();
    let p = Pair::up("p");
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), &net_config(&p, false));
    let token = token(&config);
    let (mut broker, url) = start(&config, &dir.path().join("b.db"));

    // The broker owns the root qdisc from the start: link and default classes.
    let classes = p.tc(&["class", "show", "dev", "ea"]);
    assert!(
        classes.contains("class htb bd:1 root rate 50Mbit"),
        "{classes}"
    );
    assert!(classes.contains("class htb bd:ffff"), "{classes}");

    let made = reserve(
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
            "--provision",
            "--flow",
            "dst=10.77.0.2,proto=tcp,dport=5201",
        ],
    );
    let id = first_id(&made);
    assert_eq!(made[0]["provision"], "provisioned", "{made}");
    assert_eq!(made[0]["flow"]["dport"], 5201, "{made}");
    let h = class(id);
    let classes = p.tc(&["-s", "class", "show", "dev", "ea"]);
    assert!(
        classes.contains(&format!(
            "class htb {h} parent bd:1 prio 0 rate 10Mbit ceil 10Mbit"
        )),
        "{classes}"
    );
    // The default class gets what the reservation leaves of the link.
    assert!(
        classes.contains("class htb bd:ffff parent bd:1 prio 0 rate 40Mbit ceil 50Mbit"),
        "{classes}"
    );
    let filters = p.tc(&["filter", "show", "dev", "ea", "parent", "bd:"]);
    assert!(filters.contains(&format!("flowid {h}")), "{filters}");
    assert!(
        filters.contains("match 0a4d0002/ffffffff at 16"),
        "{filters}"
    );
    assert!(
        filters.contains("match 00001451/0000ffff at 20"),
        "{filters}"
    );

    // A modification, once committed, changes the class rate.
    reserve(
        &url,
        &token,
        &["modify", &id.to_string(), "--rate", "12mbit"],
    );
    reserve(&url, &token, &["commit", &id.to_string()]);
    let classes = p.tc(&["class", "show", "dev", "ea"]);
    assert!(
        classes.contains(&format!("class htb {h} parent bd:1 prio 0 rate 12Mbit")),
        "{classes}"
    );

    reserve(&url, &token, &["release", &id.to_string()]);
    let classes = p.tc(&["class", "show", "dev", "ea"]);
    assert!(!classes.contains(&format!("class htb {h} ")), "{classes}");
    let filters = p.tc(&["filter", "show", "dev", "ea", "parent", "bd:"]);
    assert!(!filters.contains("flowid"), "{filters}");

    // Provisioned again, then terminated: gone again.
    reserve(&url, &token, &["provision", &id.to_string()]);
    assert!(p
        .tc(&["class", "show", "dev", "ea"])
        .contains(&format!("class htb {h} ")));
    reserve(&url, &token, &["cancel", &id.to_string()]);
    assert!(!p
        .tc(&["class", "show", "dev", "ea"])
        .contains(&format!("class htb {h} ")));
    let _ = broker.kill();
    let _ = broker.wait();
}

#[test]
fn enforce_reserved_flow_gets_its_rate_beside_unmatched_traffic() {
    require_root_tc!();
    if Command::new("iperf3").arg("-v").output().is_err() {
        eprintln!("SKIP: the flow test needs iperf3");
        return;
    }
    let p = Pair::up("f");
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), &net_config(&p, false));
    let token = token(&config);
    let (mut broker, url) = start(&config, &dir.path().join("b.db"));
    let made = reserve(
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
            "--provision",
            "--flow",
            "dst=10.77.0.2,proto=tcp,dport=5201",
        ],
    );
    let h = class(first_id(&made));
    let mut servers: Vec<Child> = [5201, 5202]
        .iter()
        .map(|port| {
            p.exec(&p.b)
                .args(["iperf3", "-s", "-1", "-p", &port.to_string()])
                .stdout(Stdio::null())
                .spawn()
                .expect("iperf3 -s")
        })
        .collect();
    let listening = eventually(5000, || {
        let o = run(p.exec(&p.b).args(["ss", "-ltnH"]));
        o.contains(":5201 ") && o.contains(":5202 ")
    });
    assert!(listening, "iperf3 servers did not listen");
    // Both flows as fast as TCP goes, at once, over the 50 Mbit/s link.
    let mut clients: Vec<Child> = [5201, 5202]
        .iter()
        .map(|port| {
            p.exec(&p.a)
                .args([
                    "iperf3",
                    "-c",
                    "10.77.0.2",
                    "-t",
                    "4",
                    "-p",
                    &port.to_string(),
                ])
                .stdout(Stdio::null())
                .spawn()
                .expect("iperf3 -c")
        })
        .collect();
    for c in clients.iter_mut().chain(servers.iter_mut()) {
        assert!(c.wait().unwrap().success());
    }
    let reserved = class_bytes(&p, &h) as f64;
    let other = class_bytes(&p, "bd:ffff") as f64;
    let share = reserved / (reserved + other);
    // Reserved 10 of 50 Mbit/s and shaped to it (borrow = false): about a
    // fifth of what crossed the link, the unmatched flow the rest.
    assert!(
        (0.12..=0.28).contains(&share),
        "reserved flow carried {reserved} bytes, unmatched {other}: share {share:.3}"
    );
    let _ = broker.kill();
    let _ = broker.wait();
}

#[test]
fn enforce_restart_removes_what_is_no_longer_provisioned() {
    require_root_tc!();
    let p = Pair::up("r");
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), &net_config(&p, true));
    let token = token(&config);
    let db = dir.path().join("b.db");
    let (mut broker, url) = start(&config, &db);
    let id = first_id(&reserve(
        &url,
        &token,
        &[
            "create",
            "--resource",
            "link",
            "--rate",
            "5mbit",
            "--duration",
            "1h",
            "--provision",
            "--flow",
            "src=10.77.0.1,proto=udp,sport=9000",
        ],
    ));
    let h = format!("class htb {} ", class(id));
    broker.kill().unwrap();
    broker.wait().unwrap();
    // Killed: the kernel state stays (the reservation is still in force).
    assert!(p.tc(&["class", "show", "dev", "ea"]).contains(&h));

    // Restarted on the same database: still provisioned, class kept.
    let (mut broker, _) = start(&config, &db);
    assert!(p.tc(&["class", "show", "dev", "ea"]).contains(&h));
    broker.kill().unwrap();
    broker.wait().unwrap();

    // Restarted on a database that does not have it: removed.
    let (mut broker, _) = start(&config, &dir.path().join("other.db"));
    let classes = p.tc(&["class", "show", "dev", "ea"]);
    assert!(!classes.contains(&h), "{classes}");
    let filters = p.tc(&["filter", "show", "dev", "ea", "parent", "bd:"]);
    assert!(!filters.contains("flowid"), "{filters}");
    broker.kill().unwrap();
    broker.wait().unwrap();
}

/// CPU ticks (utime + stime) of `pid`.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // Fields after the command's closing parenthesis; utime and stime are
    // the 14th and 15th of the whole line.
    let rest = stat.rsplit_once(')').unwrap().1;
    let f: Vec<&str> = rest.split_whitespace().collect();
    f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
}

/// Seconds since boot (/proc/uptime), to 10 ms.
fn uptime() -> f64 {
    let u = std::fs::read_to_string("/proc/uptime").unwrap();
    u.split_whitespace().next().unwrap().parse().unwrap()
}

#[test]
fn enforce_cpu_reservation_caps_a_busy_process() {
    require_root_tc!();
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(
        dir.path(),
        "[[resource]]\nname = \"cpu\"\nkind = \"cpu\"\ncapacity = \"1gbit\"\ncpus = 1\n",
    );
    let token = token(&config);
    let (mut broker, url) = start(&config, &dir.path().join("b.db"));
    let mut busy = Command::new("sh")
        .args(["-c", "while :; do :; done"])
        .spawn()
        .expect("busy loop");
    let pid = busy.id();
    // 250 Mbit/s of a 1 Gbit/s capacity standing for 1 CPU: 0.25 CPU.
    let made = reserve(
        &url,
        &token,
        &[
            "create",
            "--resource",
            "cpu",
            "--rate",
            "250mbit",
            "--duration",
            "1h",
            "--provision",
            "--pid",
            &pid.to_string(),
        ],
    );
    let id = first_id(&made);
    let cgroup = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap();
    assert!(cgroup.contains(&format!("/braid/res-{id}")), "{cgroup}");
    let hz = 100.0; // USER_HZ on Linux
    let (t0, w0) = (cpu_ticks(pid), uptime());
    assert!(eventually(10_000, || uptime() - w0 >= 2.0));
    let used = (cpu_ticks(pid) - t0) as f64 / hz / (uptime() - w0);
    assert!(used <= 0.3, "a 0.25 CPU reservation used {used:.2} CPU");
    assert!(used > 0.05, "the busy loop hardly ran: {used:.2} CPU");

    reserve(&url, &token, &["release", &id.to_string()]);
    let cgroup = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap();
    assert!(!cgroup.contains("/braid/res-"), "{cgroup}");
    let _ = busy.kill();
    let _ = busy.wait();
    let _ = broker.kill();
    let _ = broker.wait();
}

#[test]
fn enforce_without_root_is_one_clear_line() {
    require_root_tc!();
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(
        dir.path(),
        "[[resource]]\nname = \"link\"\nkind = \"network\"\ncapacity = \"10mbit\"\ndevice = \"lo\"\n",
    );
    let mut perms = std::fs::metadata(dir.path()).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(dir.path(), perms).unwrap();
    let out = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", BRAID])
        .args(["broker", "--enforce", "--listen", "127.0.0.1:0", "--config"])
        .arg(&config)
        .arg("--db")
        .arg(dir.path().join("b.db"))
        .output();
    let Ok(out) = out else {
        eprintln!("SKIP: no setpriv to drop root");
        return;
    };
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("--enforce needs root"), "{err}");
}

/// The rate tc shows for class `handle`, in Mbit/s (`None` if absent).
fn class_rate_mbit(p: &Pair, handle: &str) -> Option<f64> {
    let out = p.tc(&["class", "show", "dev", "ea"]);
    let line = out
        .lines()
        .find(|l| l.starts_with(&format!("class htb {handle} ")))?;
    let rate = line.split(" rate ").nth(1)?.split_whitespace().next()?;
    if let Some(m) = rate.strip_suffix("Mbit") {
        m.parse().ok()
    } else {
        rate.strip_suffix("Kbit")?
            .parse::<f64>()
            .ok()
            .map(|k| k / 1000.0)
    }
}

#[test]
fn enforce_background_class_follows_its_share() {
    require_root_tc!();
    let p = Pair::up("g");
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), &net_config(&p, false));
    let token = token(&config);
    let (mut broker, url) = start(&config, &dir.path().join("b.db"));
    // A background reservation with a 4 Mbit/s minimum: alone, it is
    // enforced at its share of the 40 Mbit/s premium capacity, not at 4.
    let bg = first_id(&reserve(
        &url,
        &token,
        &[
            "create",
            "--resource",
            "link",
            "--rate",
            "4mbit",
            "--class",
            "background",
            "--duration",
            "1h",
            "--provision",
            "--flow",
            "dst=10.77.0.2,proto=tcp,dport=5202",
        ],
    ));
    let h = class(bg);
    let alone = class_rate_mbit(&p, &h).expect("the background class");
    assert!(alone > 30.0, "background class alone: {alone} Mbit/s");
    // A 10 Mbit/s foreground reservation arrives: the share, and the
    // class, shrink; it leaves: they grow back.
    let fg = first_id(&reserve(
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
            "--commit",
        ],
    ));
    let with_fg = class_rate_mbit(&p, &h).expect("the background class");
    assert!(
        with_fg < alone - 5.0 && with_fg >= 4.0,
        "background class with a 10 Mbit/s foreground: {with_fg} (alone {alone})"
    );
    reserve(&url, &token, &["cancel", &fg.to_string()]);
    let again = class_rate_mbit(&p, &h).expect("the background class");
    assert!(
        (again - alone).abs() < 0.5,
        "background class after the foreground left: {again} (alone {alone})"
    );
    let _ = broker.kill();
    let _ = broker.wait();
}
