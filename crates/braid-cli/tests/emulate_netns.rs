//! `braid emulate` and the testbed's emulated channels on real kernels.
//!
//! - flag errors are one line and `--help` explains the model (no root
//!   needed);
//! - the pipe over 20mbit/10ms + 10mbit/80ms (RTTs 20 and 160 ms) delivers
//!   50 MB intact;
//! - an IQ-RUDP transfer through 1 % loss arrives intact and in order;
//! - killing an emulator (SIGKILL), ending the process it watches, or
//!   deleting a namespace under it leaves no device or namespace behind.
//!
//! The namespace tests need root, `ip netns` and /dev/net/tun; elsewhere
//! they print why and pass without running (CI runs as root). Namespaces
//! are named by the testbed (`bt<pid>-NAME-{s,r}`) and torn down by `Drop`
//! guards.

mod common;

use braid::emulate::netns::in_namespace;
use braid::rudp::{Endpoint, EndpointConfig, SendOptions};
use common::netns::{eventually, pseudo_random, testbed, tmp, Topology};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

const PORT: u16 = 9000;

fn braid() -> Command {
    Command::new(env!("CARGO_BIN_EXE_braid"))
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

fn alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
        && !std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .unwrap_or_default()
            .contains(") Z ")
}

/// A child process killed on drop (when a test fails half-way).
struct Reaped(Option<std::process::Child>);

impl Reaped {
    fn exited(&mut self) -> bool {
        let c = self.0.as_mut().expect("child present until taken");
        c.try_wait().expect("wait").is_some()
    }
    fn output(mut self) -> Output {
        self.0
            .take()
            .expect("child present until taken")
            .wait_with_output()
            .expect("output")
    }
}

impl Drop for Reaped {
    fn drop(&mut self) {
        if let Some(c) = self.0.as_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn namespaces() -> String {
    let out = Command::new("ip")
        .args(["netns", "list"])
        .output()
        .expect("ip netns");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn emulate_help_explains_the_model() {
    let out = braid().args(["emulate", "--help"]).output().expect("run");
    common::assert_ok(&out, "emulate --help");
    let help = String::from_utf8_lossy(&out.stdout);
    for word in [
        "drop-tail",
        "--rate",
        "--trace",
        "--delay",
        "--loss",
        "--queue",
        "braid-sim",
    ] {
        assert!(help.contains(word), "help lacks {word:?}:\n{help}");
    }
}

#[test]
fn emulate_flag_errors_are_one_line() {
    // Flags after `--ns-a a --ns-b b`, and what the error must name.
    let cases = [
        ("", "--rate"),
        ("--rate fast", "fast"),
        ("--rate 10mbit --loss 150%", "loss"),
        ("--rate 10mbit --queue lots", "lots"),
        ("--rate 10mbit --delay soon", "soon"),
        ("--rate 10mbit --trace x.tsv", "--trace"),
        ("--trace /nonexistent/trace.tsv", "/nonexistent/trace.tsv"),
        ("--rate 10mbit --addr-a 10.0.0.1", "10.0.0.1"),
        ("--rate 10mbit --mtu 100", "MTU"),
        ("--scenario x.toml", "--link"),
        ("--scenario x.toml --link l --rate 1mbit", "--rate"),
        (
            "--scenario /nonexistent/s.toml --link l",
            "/nonexistent/s.toml",
        ),
        (
            concat!(
                "--scenario ",
                env!("CARGO_MANIFEST_DIR"),
                "/../../scenarios/synthetic_path.toml --link nope"
            ),
            "links: path, return",
        ),
        // Namespaces `a` and `b` do not exist (or, not as root, cannot be
        // entered at all).
        (
            "--rate 10mbit",
            if is_root() { "namespace a" } else { "root" },
        ),
    ];
    for (flags, needle) in cases {
        let args: Vec<&str> = "--ns-a a --ns-b b"
            .split_whitespace()
            .chain(flags.split_whitespace())
            .collect();
        let out = braid().arg("emulate").args(&args).output().expect("run");
        assert!(!out.status.success(), "{args:?} must fail");
        let err = String::from_utf8_lossy(&out.stderr);
        let lines: Vec<_> = err.lines().collect();
        assert_eq!(lines.len(), 1, "{args:?}: not one line: {err}");
        assert!(lines[0].starts_with("braid: error:"), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err} lacks {needle:?}");
    }
}

#[test]
fn netns_pipe_over_heterogeneous_rtts_delivers_50mb_intact() {
    require_netns!();
    const BYTES: usize = 50_000_000;
    let t = Topology::up("emupipe", &["20mbit/10ms", "10mbit/80ms"]);
    let data = pseudo_random(BYTES, 1);
    let input = tmp("pipe-in");
    let output = tmp("pipe-out");
    std::fs::write(&input, &data).expect("write input");
    let addrs = format!("198.18.1.2:{PORT},198.18.2.2:{PORT}");
    let rx = Reaped(Some(
        t.braid("r")
            .args([
                "recv",
                "--key",
                &common::pipe_key_arg(),
                "--no-progress",
                "--listen",
                &addrs,
                "-o",
            ])
            .arg(&output)
            .stderr(Stdio::piped())
            .spawn()
            .expect("recv"),
    ));
    t.wait_listening(PORT);
    let s = t
        .braid("s")
        .args([
            "send",
            "--key",
            &common::pipe_key_arg(),
            "--no-progress",
            "-n",
            "4",
            "--to",
            &addrs,
        ])
        .arg(&input)
        .output()
        .expect("send");
    let r = rx.output();
    common::assert_ok(&s, "send");
    common::assert_ok(&r, "recv");
    let got = std::fs::read(&output).expect("read output");
    assert_eq!(got.len(), BYTES, "length");
    assert!(got == data, "bytes differ");
    let _ = std::fs::remove_file(&input);
    let _ = std::fs::remove_file(&output);
}

/// Binds an RUDP endpoint inside network namespace `ns`.
fn bind_in(ns: &str, addr: SocketAddr, config: EndpointConfig) -> Endpoint {
    let rt = tokio::runtime::Handle::current();
    in_namespace(ns, move || {
        let _guard = rt.enter();
        Endpoint::bind(addr, config).map_err(std::io::Error::other)
    })
    .expect("bind in namespace")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn netns_rudp_through_1pct_loss_arrives_intact() {
    require_netns!();
    const MESSAGES: u64 = 400;
    const MESSAGE: usize = 16 << 10;
    let t = Topology::up("emurudp", &["20mbit/10ms/1%"]);
    let mut server = bind_in(
        &t.ns("r"),
        "198.18.1.2:0".parse().expect("literal"),
        EndpointConfig::server(),
    );
    let client = bind_in(
        &t.ns("s"),
        "198.18.1.1:0".parse().expect("literal"),
        EndpointConfig::default(),
    );
    let to = server.local_addr();
    let (c, s) = tokio::join!(client.connect(to), server.accept());
    let (c, mut s) = (c.expect("connect"), s.expect("accept"));
    let stream = c.open_stream(SendOptions::RELIABLE).expect("stream");
    let sender = tokio::spawn(async move {
        for i in 0..MESSAGES {
            stream.send(pseudo_random(MESSAGE, i)).await.expect("send");
        }
        c
    });
    let receive = async {
        for i in 0..MESSAGES {
            let m = s.recv().await.expect("message");
            assert_eq!(m.number, i, "in order");
            assert!(
                m.data[..] == pseudo_random(MESSAGE, i)[..],
                "message {i} intact"
            );
        }
    };
    tokio::time::timeout(Duration::from_secs(120), receive)
        .await
        .expect("6.5 MB through 1 % loss within 120 s");
    let c = sender.await.expect("sender");
    let stats = c.stats().await.expect("stats");
    // The loss was real: the sender detected losses and re-sent.
    assert!(stats.packets_lost > 0, "no loss seen: {stats:?}");
    assert!(stats.retransmitted_bytes > 0, "nothing re-sent: {stats:?}");
    let log = std::fs::read_to_string(t.state_dir().join("ch1.log")).unwrap_or_default();
    assert!(log.contains("loss 1%"), "emulator log: {log}");
}

#[test]
fn netns_killed_emulator_leaves_no_devices() {
    require_netns!();
    let t = Topology::up("emukill", &["10mbit/5ms", "10mbit/5ms", "10mbit/5ms"]);
    for (ch, side, dev) in [
        (1, "s", "s1"),
        (1, "r", "r1"),
        (2, "s", "s2"),
        (3, "r", "r3"),
    ] {
        assert!(
            t.has_device(side, dev),
            "channel {ch}: {dev} missing after up"
        );
    }
    // SIGKILL: no clean-up code runs, the kernel removes the devices.
    let pid = t.emulator_pid(1);
    assert!(Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .expect("kill")
        .success());
    assert!(
        eventually(3000, || !t.has_device("s", "s1")
            && !t.has_device("r", "r1")),
        "devices of a SIGKILLed emulator remain"
    );
    assert!(t.has_device("s", "s2"), "another channel's device vanished");
    // SIGTERM: clean exit.
    let pid = t.emulator_pid(2);
    assert!(Command::new("kill")
        .arg(pid.to_string())
        .status()
        .expect("kill")
        .success());
    assert!(
        eventually(3000, || !alive(pid) && !t.has_device("s", "s2")),
        "a SIGTERMed emulator or its devices remain"
    );
    // `down` stops the remaining emulator and removes both namespaces.
    let pid = t.emulator_pid(3);
    let ns_s = t.ns("s");
    let ns_r = t.ns("r");
    drop(t);
    assert!(eventually(3000, || !alive(pid)), "emulator outlived down");
    let list = namespaces();
    assert!(
        !list.contains(&ns_s) && !list.contains(&ns_r),
        "namespaces remain: {list}"
    );
}

#[test]
fn netns_emulator_exits_when_its_namespace_or_owner_goes() {
    require_netns!();
    let tag = std::process::id();
    let (a, b) = (format!("bte{tag}-a"), format!("bte{tag}-b"));
    struct Ns(Vec<String>);
    impl Drop for Ns {
        fn drop(&mut self) {
            for n in &self.0 {
                let _ = Command::new("ip").args(["netns", "del", n]).status();
            }
        }
    }
    let _guard = Ns(vec![a.clone(), b.clone()]);
    for n in [&a, &b] {
        assert!(Command::new("ip")
            .args(["netns", "add", n])
            .status()
            .expect("ip")
            .success());
    }
    let has_dev = |ns: &str| {
        Command::new("ip")
            .args(["-n", ns, "link", "show", "dev", "braid0"])
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    // 1. The watched process ends: the emulator exits and the devices go.
    let mut owner = Command::new("sleep").arg("600").spawn().expect("sleep");
    let mut emu = Reaped(Some(
        braid()
            .args(["emulate", "--ns-a", &a, "--ns-b", &b, "--rate", "10mbit"])
            .args(["--watch-pid", &owner.id().to_string()])
            .stderr(Stdio::piped())
            .spawn()
            .expect("emulate"),
    ));
    assert!(
        eventually(3000, || has_dev(&a) && has_dev(&b)),
        "devices not created"
    );
    owner.kill().expect("kill owner");
    let _ = owner.wait();
    assert!(
        eventually(3000, || emu.exited()),
        "emulator outlived its watched process"
    );
    assert!(!has_dev(&a) && !has_dev(&b), "devices remain after exit");
    let out = emu.output();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("watched process ended"));

    // 2. A namespace is deleted under it: it exits with one clear error.
    let mut emu = Reaped(Some(
        braid()
            .args(["emulate", "--ns-a", &a, "--ns-b", &b, "--rate", "10mbit"])
            .stderr(Stdio::piped())
            .spawn()
            .expect("emulate"),
    ));
    assert!(
        eventually(3000, || has_dev(&a) && has_dev(&b)),
        "devices not created"
    );
    assert!(Command::new("ip")
        .args(["netns", "del", &b])
        .status()
        .expect("ip")
        .success());
    assert!(
        eventually(3000, || emu.exited()),
        "emulator kept running after its namespace was deleted"
    );
    let out = emu.output();
    assert!(!has_dev(&a), "side A's device remains");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "must fail: {err}");
    assert!(
        err.contains("braid: error:") && err.contains("was deleted"),
        "{err}"
    );
}

/// The value of counter `name` in `nstat -az` output (0 if absent).
fn nstat(t: &Topology, side: &str, name: &str) -> u64 {
    let out = t
        .exec(side)
        .args(["nstat", "-az", name])
        .output()
        .expect("nstat");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find(|l| l.split_whitespace().next() == Some(name))
        .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        .unwrap_or(0)
}

#[test]
fn netns_icmp_and_mptcp_cross_emulated_links_unchanged() {
    require_netns!();
    let t = Topology::up("emuproto", &["10mbit/25ms", "10mbit/5ms"]);
    // ICMP: echo replies come back, no sooner than the two one-way delays.
    if Command::new("ping").arg("-V").output().is_ok() {
        let out = t
            .exec("s")
            .args(["ping", "-c", "3", "-i", "0.2", "-W", "2", "198.18.1.2"])
            .output()
            .expect("ping");
        common::assert_ok(&out, "ping over the emulated channel");
        let text = String::from_utf8_lossy(&out.stdout);
        let min_rtt: f64 = text
            .lines()
            .find_map(|l| l.strip_prefix("rtt min/avg/max/mdev = "))
            .and_then(|v| v.split('/').next()?.parse().ok())
            .unwrap_or_else(|| panic!("no rtt line in: {text}"));
        assert!(min_rtt >= 50.0, "RTT {min_rtt} ms below 2 × 25 ms");
    } else {
        eprintln!("ping not installed: ICMP part skipped");
    }
    // MPTCP: one connection whose second subflow joins over channel 2.
    assert!(
        testbed(&["mptcp", "emuproto"]).status.success(),
        "mptcp setup"
    );
    let data = pseudo_random(4_000_000, 3);
    let input = tmp("mptcp-in");
    let output = tmp("mptcp-out");
    std::fs::write(&input, &data).expect("write input");
    let rx = Reaped(Some(
        t.braid("r")
            .args([
                "recv",
                "--key",
                &common::pipe_key_arg(),
                "--no-progress",
                "--mptcp",
                "--listen",
            ])
            .arg(format!("0.0.0.0:{PORT}"))
            .arg("-o")
            .arg(&output)
            .stderr(Stdio::piped())
            .spawn()
            .expect("recv"),
    ));
    t.wait_listening(PORT);
    let s = t
        .braid("s")
        .args([
            "send",
            "--key",
            &common::pipe_key_arg(),
            "--no-progress",
            "--mptcp",
            "-n",
            "1",
            "--to",
        ])
        .arg(format!("198.18.1.2:{PORT}"))
        .arg(&input)
        .output()
        .expect("send");
    let r = rx.output();
    common::assert_ok(&s, "mptcp send");
    common::assert_ok(&r, "mptcp recv");
    assert!(
        std::fs::read(&output).expect("output") == data,
        "bytes differ"
    );
    assert!(
        nstat(&t, "r", "MPTcpExtMPJoinAckRx") >= 1,
        "no MPTCP subflow joined over the emulated channel"
    );
    let _ = std::fs::remove_file(&input);
    let _ = std::fs::remove_file(&output);
}
