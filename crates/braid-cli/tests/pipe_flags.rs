//! Flags that misbehaved (issue 13 §4): each now gets one clear line and a
//! non-zero exit, or a correct bound. `--sockbuf 100GiB`, `--block-size
//! 100GiB`, `braid perf --rate 1bit --duration 1s`, `BRAID_PERF_THREADS`
//! out of range, and `braid recv` with a closed stdout.

mod common;

use std::process::{Command, Output, Stdio};
use std::time::Duration;

fn braid() -> Command {
    Command::new(env!("CARGO_BIN_EXE_braid"))
}

fn port() -> u16 {
    loop {
        let u = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind udp");
        let p = u.local_addr().expect("addr").port();
        if std::net::TcpListener::bind(("127.0.0.1", p)).is_ok() {
            return p;
        }
    }
}

/// Fails with one line on stderr that contains `want`.
fn fails_with(out: &Output, want: &str) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "must fail; stderr: {err}");
    assert!(err.contains(want), "stderr should say {want:?}: {err}");
    assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
}

fn input() -> std::path::PathBuf {
    let p = std::env::temp_dir().join(format!("braid-flags-{}", std::process::id()));
    std::fs::write(&p, vec![1u8; 100_000]).expect("input");
    p
}

#[test]
fn huge_sockbuf_is_refused() {
    let out = braid()
        .args([
            "send",
            "--key",
            &common::pipe_key_arg(),
            "--to",
            "127.0.0.1:9",
            "--sockbuf",
            "100GiB",
        ])
        .arg(input())
        .output()
        .expect("run send");
    fails_with(&out, "socket buffer must be");
    let out = braid()
        .args([
            "recv",
            "--key",
            &common::pipe_key_arg(),
            "--listen",
            "127.0.0.1:0",
            "--sockbuf",
            "100GiB",
        ])
        .args(["-o", "/dev/null"])
        .output()
        .expect("run recv");
    fails_with(&out, "socket buffer must be");
}

#[test]
fn huge_block_size_is_refused_clearly() {
    let out = braid()
        .args([
            "send",
            "--key",
            &common::pipe_key_arg(),
            "--to",
            "127.0.0.1:9",
            "--block-size",
            "100GiB",
        ])
        .arg(input())
        .output()
        .expect("run send");
    fails_with(&out, "block size must be");
}

#[test]
fn perf_threads_out_of_range_is_refused() {
    let out = braid()
        .args(["perf", "client", "--to", "127.0.0.1:9", "--duration", "1s"])
        .env("BRAID_PERF_THREADS", "100000")
        .output()
        .expect("run perf");
    fails_with(&out, "BRAID_PERF_THREADS must be");
}

#[test]
fn recv_with_closed_stdout_fails() {
    let out = Command::new("bash")
        .arg("-c")
        .arg(format!(
            "exec {} recv --listen 127.0.0.1:0 --no-progress >&-",
            env!("CARGO_BIN_EXE_braid")
        ))
        .output()
        .expect("run recv");
    fails_with(&out, "stdout is closed");
}

#[test]
fn perf_at_one_bit_per_second_ends_at_its_duration() {
    let p = port();
    let mut srv = braid()
        .args([
            "perf",
            "server",
            "--once",
            "--open",
            "--listen",
            &format!("127.0.0.1:{p}"),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("server");
    let mut line = String::new();
    let mut rd = std::io::BufReader::new(srv.stderr.take().expect("piped"));
    std::io::BufRead::read_line(&mut rd, &mut line).expect("server stderr");
    assert!(line.contains("listening"), "server: {line}");
    let mut client = braid()
        .args(["perf", "client", "--transport", "tcp", "--rate", "1bit"])
        .args(["--duration", "1s", "--to", &format!("127.0.0.1:{p}")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("client");
    // A bounded poll far above 1 s (about a minute): without the fix the
    // client would run for days.
    let mut status = None;
    for _ in 0..1200 {
        if let Some(st) = client.try_wait().expect("wait") {
            status = Some(st);
            break;
        }
        std::thread::park_timeout(Duration::from_millis(50));
    }
    let _ = client.kill();
    let _ = srv.kill();
    let _ = srv.wait();
    let status = status.expect("perf --rate 1bit --duration 1s must end");
    assert!(status.success(), "{status:?}");
}

/// Issue 29 §3: refused at once, in one line, before anything connects or
/// waits (they used to surface after a whole transfer, or as a hang).
#[test]
fn bad_limits_and_outputs_are_refused_before_the_transfer() {
    let key = common::pipe_key_arg();
    for limit in ["0s", "1ns"] {
        let out = braid()
            .args([
                "recv",
                "--key",
                &key,
                "--listen",
                "127.0.0.1:0",
                "--idle-limit",
                limit,
            ])
            .stdout(Stdio::null())
            .output()
            .expect("run recv");
        fails_with(&out, "--idle-limit");
    }
    let nowhere = "/nonexistent-braid-dir/stats.json";
    let out = braid()
        .args([
            "recv",
            "--key",
            &key,
            "--listen",
            "127.0.0.1:0",
            "--stats-file",
            nowhere,
        ])
        .stdout(Stdio::null())
        .output()
        .expect("run recv");
    fails_with(&out, "--stats-file");
    // Port 9 is "discard": nothing answers, so only an early check fails
    // this in time.
    let out = braid()
        .args([
            "send",
            "--key",
            &key,
            "--to",
            "127.0.0.1:9",
            "--stats-file",
            nowhere,
        ])
        .arg(input())
        .output()
        .expect("run send");
    fails_with(&out, "--stats-file");
    let out = braid()
        .args(["send", "--key", &key, "--to", "127.0.0.1:0"])
        .arg(input())
        .output()
        .expect("run send");
    fails_with(&out, "port 0");
}
