//! `braid send` / `braid recv` across real rate-shaped channels in network
//! namespaces (testbed/netns.sh). Needs root and `ip netns`; otherwise each
//! test prints why and passes without running (CI runs as root).
//!
//! - a 200 MB random stream over three 400 Mbit/s channels arrives
//!   byte-identical in every mode;
//! - taking one channel down mid-transfer still delivers everything;
//! - killing the receiver makes the sender exit non-zero with a clear message.

mod common;

use common::netns::{pseudo_random, testbed, tmp, Topology};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::OnceLock;

const STREAM_BYTES: usize = 200_000_000;
const RATES: [&str; 3] = ["400mbit", "400mbit", "400mbit"];
const PORT: u16 = 9000;

fn addrs(n: usize) -> String {
    (1..=n)
        .map(|i| format!("198.18.{i}.2:{PORT}"))
        .collect::<Vec<_>>()
        .join(",")
}

fn recv(t: &Topology, n: usize, out: &Path) -> Child {
    t.braid("r")
        .args([
            "recv",
            "--key",
            &common::pipe_key_arg(),
            "--no-progress",
            "--listen",
            &addrs(n),
            "-o",
        ])
        .arg(out)
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn recv")
}

/// The 200 MB random input, written once per test process.
fn input() -> &'static (PathBuf, Vec<u8>) {
    static INPUT: OnceLock<(PathBuf, Vec<u8>)> = OnceLock::new();
    INPUT.get_or_init(|| {
        let v = pseudo_random(STREAM_BYTES, 0);
        let p = tmp("input");
        std::fs::write(&p, &v).expect("write input");
        (p, v)
    })
}

fn assert_same(out: &Path, want: &[u8], what: &str) {
    let got = std::fs::read(out).expect("read output");
    assert_eq!(got.len(), want.len(), "{what}: length differs");
    assert!(got == want, "{what}: bytes differ");
}

#[test]
fn netns_200mb_identical_in_every_mode() {
    require_netns!();
    let (inp, data) = input();
    let t = Topology::up("modes", &RATES);
    for mode in ["adaptive", "weighted", "round-robin"] {
        let out = tmp(&format!("out-{mode}"));
        let rx = recv(&t, 3, &out);
        t.wait_listening(PORT);
        let s = t
            .braid("s")
            .args([
                "send",
                "--key",
                &common::pipe_key_arg(),
                "--no-progress",
                "-n",
                "3",
                "--mode",
                mode,
                "--to",
                &addrs(3),
            ])
            .arg(inp)
            .output()
            .expect("send");
        let r = rx.wait_with_output().expect("recv");
        common::assert_ok(&s, format_args!("{mode} send"));
        common::assert_ok(&r, format_args!("{mode} recv"));
        assert_same(&out, data, mode);
        let _ = std::fs::remove_file(&out);
    }
}

#[test]
fn netns_channel_down_mid_transfer_still_delivers() {
    require_netns!();
    let (inp, data) = input();
    let t = Topology::up("linkdown", &RATES);
    let out = tmp("out-linkdown");
    let rx = recv(&t, 3, &out);
    t.wait_listening(PORT);
    let tx = t
        .braid("s")
        .args([
            "send",
            "--key",
            &common::pipe_key_arg(),
            "--no-progress",
            "-n",
            "3",
            "--user-timeout",
            "2s",
            "--to",
            &addrs(3),
        ])
        .arg(inp)
        .stderr(Stdio::piped())
        .spawn()
        .expect("send");
    // Take channel 2 down once a third of the stream has arrived.
    let mut downed = false;
    for _ in 0..3000 {
        let len = std::fs::metadata(&out).map(|m| m.len()).unwrap_or(0);
        if len as usize > STREAM_BYTES / 3 {
            let o = testbed(&["link", "linkdown", "2", "down"]);
            assert!(o.status.success(), "link down failed");
            downed = true;
            break;
        }
        std::thread::park_timeout(std::time::Duration::from_millis(5));
    }
    let s = tx.wait_with_output().expect("send");
    let r = rx.wait_with_output().expect("recv");
    common::assert_ok(&s, "send");
    common::assert_ok(&r, "recv");
    assert!(
        downed,
        "the transfer ended before the channel could be taken down"
    );
    assert_same(&out, data, "link down");
}

#[test]
fn netns_killed_receiver_fails_the_sender() {
    require_netns!();
    let t = Topology::up("kill", &RATES);
    let out = tmp("out-kill");
    let mut rx = recv(&t, 3, &out);
    t.wait_listening(PORT);
    let mut tx = t
        .braid("s")
        .args([
            "send",
            "--key",
            &common::pipe_key_arg(),
            "--no-progress",
            "-n",
            "3",
            "--reconnect",
            "2",
            "--to",
            &addrs(3),
        ])
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("send");
    let mut stdin = tx.stdin.take().expect("stdin");
    let feeder = std::thread::spawn(move || {
        let chunk = vec![0xa5u8; 1 << 20];
        while stdin.write_all(&chunk).is_ok() {}
    });
    for _ in 0..1000 {
        if std::fs::metadata(&out).map(|m| m.len()).unwrap_or(0) > 8 << 20 {
            break;
        }
        std::thread::park_timeout(std::time::Duration::from_millis(10));
    }
    rx.kill().expect("kill recv");
    let _ = rx.wait();
    let s = tx.wait_with_output().expect("send");
    let _ = feeder.join();
    assert!(
        !s.status.success(),
        "sender must fail when the receiver dies"
    );
    let err = String::from_utf8_lossy(&s.stderr);
    assert!(err.contains("lost the receiver"), "sender said: {err}");
}

/// Waits for `c` to exit, polling up to about `secs` seconds; kills it and
/// returns `None` if it has not.
fn exit_within(c: &mut Child, secs: u64) -> Option<std::process::ExitStatus> {
    for _ in 0..secs * 20 {
        if let Some(st) = c.try_wait().expect("wait") {
            return Some(st);
        }
        std::thread::park_timeout(std::time::Duration::from_millis(50));
    }
    let _ = c.kill();
    let _ = c.wait();
    None
}

fn stderr_of(c: &mut Child) -> String {
    let mut s = String::new();
    if let Some(mut e) = c.stderr.take() {
        let _ = std::io::Read::read_to_string(&mut e, &mut s);
    }
    s
}

#[test]
fn netns_only_path_down_for_good_ends_both_sides() {
    require_netns!();
    let (inp, _) = input();
    let t = Topology::up("pipefix-cut", &RATES[..1]);
    let out = tmp("out-pipefix-cut");
    let mut rx = t
        .braid("r")
        .args([
            "recv",
            "--key",
            &common::pipe_key_arg(),
            "--no-progress",
            "--idle-limit",
            "3s",
        ])
        .args(["--listen", &addrs(1), "-o"])
        .arg(&out)
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn recv");
    t.wait_listening(PORT);
    let mut tx = t
        .braid("s")
        .args([
            "send",
            "--key",
            &common::pipe_key_arg(),
            "--no-progress",
            "--user-timeout",
            "2s",
        ])
        .args(["--reconnect", "1", "--to", &addrs(1)])
        .arg(inp)
        .stderr(Stdio::piped())
        .spawn()
        .expect("send");
    let mut cut = false;
    for _ in 0..3000 {
        let len = std::fs::metadata(&out).map(|m| m.len()).unwrap_or(0);
        if len as usize > STREAM_BYTES / 4 {
            let o = testbed(&["link", "pipefix-cut", "1", "down"]);
            assert!(o.status.success(), "link down failed");
            cut = true;
            break;
        }
        std::thread::park_timeout(std::time::Duration::from_millis(5));
    }
    assert!(cut, "the transfer ended before the path could be cut");
    // Bounds far above the limits (3 s idle, 2 s silence, one reconnect).
    let r = exit_within(&mut rx, 60);
    let s = exit_within(&mut tx, 60);
    let (rerr, serr) = (stderr_of(&mut rx), stderr_of(&mut tx));
    let r = r.expect("the receiver must not wait forever");
    let s = s.expect("the sender must not wait forever");
    assert!(
        !r.success() && rerr.contains("lost the sender"),
        "recv: {rerr}"
    );
    assert!(
        !s.success() && serr.contains("lost the receiver"),
        "send: {serr}"
    );
}
