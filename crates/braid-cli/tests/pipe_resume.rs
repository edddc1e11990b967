//! `--resume` (issue 13 §2): a transfer killed at about 80 % of a 500 MB
//! file resumes with the same two commands plus `--resume`: the output is
//! identical and the resumed run sends at most a quarter of the file. A
//! different file is refused; stdin and stdout cannot be resumed.

mod common;

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

fn braid() -> Command {
    Command::new(env!("CARGO_BIN_EXE_braid"))
}

fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind port 0");
    l.local_addr().expect("local addr").port()
}

fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("braid-resume-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("tmpdir");
    d
}

/// Writes `n` deterministic pseudo-random bytes (xorshift64*) to `p`.
fn generate(p: &Path, n: u64) {
    let mut f = std::io::BufWriter::new(std::fs::File::create(p).expect("create"));
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut left = n;
    let mut chunk = Vec::with_capacity(1 << 20);
    while left > 0 {
        chunk.clear();
        while chunk.len() < (1 << 20) {
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            chunk.extend_from_slice(&x.wrapping_mul(0x2545_F491_4F6C_DD1D).to_le_bytes());
        }
        let k = left.min(chunk.len() as u64) as usize;
        f.write_all(&chunk[..k]).expect("write");
        left -= k as u64;
    }
    f.flush().expect("flush");
}

fn same_files(a: &Path, b: &Path) -> bool {
    let (mut fa, mut fb) = (
        std::fs::File::open(a).expect("open a"),
        std::fs::File::open(b).expect("open b"),
    );
    let (mut ba, mut bb) = (vec![0u8; 1 << 20], vec![0u8; 1 << 20]);
    loop {
        let na = fa.read(&mut ba).expect("read a");
        let mut nb = 0;
        while nb < na {
            match fb.read(&mut bb[nb..na]).expect("read b") {
                0 => return false,
                k => nb += k,
            }
        }
        if na == 0 {
            return fb.read(&mut bb).expect("read b") == 0;
        }
        if ba[..na] != bb[..na] {
            return false;
        }
    }
}

fn recv(port: u16, out: &Path, extra: &[&str]) -> Child {
    braid()
        .args([
            "recv",
            "--key",
            &common::pipe_key_arg(),
            "--no-progress",
            "--listen",
            &format!("127.0.0.1:{port}"),
        ])
        .arg("-o")
        .arg(out)
        .args(extra)
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn recv")
}

fn wait_listening(port: u16) {
    for _ in 0..200 {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return;
        }
        std::thread::park_timeout(Duration::from_millis(20));
    }
    panic!("receiver did not start listening on {port}");
}

fn send(port: u16, input: &Path, extra: &[&str]) -> Child {
    braid()
        .args([
            "send",
            "--key",
            &common::pipe_key_arg(),
            "--no-progress",
            "--to",
            &format!("127.0.0.1:{port}"),
        ])
        .args(extra)
        .arg(input)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn send")
}

fn finish(c: Child, what: &str) -> Output {
    let out = c.wait_with_output().expect("wait");
    assert!(
        out.status.success(),
        "{what} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

#[test]
fn killed_at_80_percent_resumes_with_at_most_a_quarter_sent() {
    const SIZE: u64 = 500_000_000;
    let dir = tmpdir("kill80");
    let input = dir.join("in");
    let output = dir.join("out");
    generate(&input, SIZE);

    // First run, capped so that "80 %" can be caught between two polls.
    let port = free_port();
    let mut r = recv(port, &output, &[]);
    wait_listening(port);
    let mut s = send(port, &input, &["--rate", "1gbit"]);
    let mut at = 0;
    for _ in 0..12_000 {
        at = std::fs::metadata(&output).map_or(0, |m| m.len());
        if at >= SIZE * 8 / 10 {
            break;
        }
        std::thread::park_timeout(Duration::from_millis(5));
    }
    let _ = s.kill();
    let _ = r.kill();
    let _ = s.wait();
    let _ = r.wait();
    let held = std::fs::metadata(&output).expect("output").len();
    assert!(
        at >= SIZE * 8 / 10 && held < SIZE,
        "the first run must stop between 80 % and the end: {held} of {SIZE}"
    );

    // The same two commands with --resume.
    let port = free_port();
    let r = recv(port, &output, &["--resume"]);
    wait_listening(port);
    let stats = dir.join("send.json");
    let s = send(
        port,
        &input,
        &[
            "--resume",
            "--stats-file",
            stats.to_str().expect("utf-8 path"),
        ],
    );
    finish(s, "resumed send");
    finish(r, "resumed recv");
    assert!(same_files(&input, &output), "the output differs");
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&stats).expect("stats")).expect("json");
    let sent = report["bytes"].as_u64().expect("bytes");
    let from = report["resumed_from"].as_u64().expect("resumed_from");
    assert_eq!(from, held, "resumed after the receiver's prefix");
    assert_eq!(from + sent, SIZE, "{report}");
    assert!(sent <= SIZE / 4, "the resumed run sent {sent} of {SIZE}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn resume_refuses_a_different_file_and_stdio() {
    let dir = tmpdir("refuse");
    let input = dir.join("in");
    let output = dir.join("out");
    generate(&input, 3_000_000);
    std::fs::write(&output, vec![0xEEu8; 1_000_000]).expect("other prefix");
    let port = free_port();
    let r = recv(port, &output, &["--resume"]);
    wait_listening(port);
    let s = send(port, &input, &["--resume"])
        .wait_with_output()
        .expect("send");
    let err = String::from_utf8_lossy(&s.stderr);
    assert!(
        !s.status.success() && err.contains("cannot resume"),
        "{err}"
    );
    let r = r.wait_with_output().expect("recv");
    assert!(!r.status.success(), "the receiver must stop too");
    // Nothing of the other file was overwritten.
    assert_eq!(
        std::fs::read(&output).expect("out"),
        vec![0xEEu8; 1_000_000]
    );

    let out = braid()
        .args([
            "send",
            "--key",
            &common::pipe_key_arg(),
            "--to",
            "127.0.0.1:9",
            "--resume",
        ])
        .stdin(Stdio::null())
        .output()
        .expect("send");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("stdin cannot be resumed"),
        "{err}"
    );
    let out = braid()
        .args([
            "recv",
            "--key",
            &common::pipe_key_arg(),
            "--listen",
            "127.0.0.1:0",
            "--resume",
        ])
        .output()
        .expect("recv");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("stdout cannot be resumed"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn resume_works_in_every_mode_over_two_paths() {
    let dir = tmpdir("modes");
    let input = dir.join("in");
    generate(&input, 5_000_000);
    let data = std::fs::read(&input).expect("input");
    for (i, mode) in ["adaptive", "weighted", "round-robin"].iter().enumerate() {
        // What an interrupted run left: a prefix, not on a block boundary.
        let output = dir.join(format!("out-{mode}"));
        let held = 1_234_567 + i * 100_000;
        std::fs::write(&output, &data[..held]).expect("prefix");
        let (p1, p2) = (free_port(), free_port());
        let listen = format!("127.0.0.1:{p1},127.0.0.1:{p2}");
        let r = braid()
            .args([
                "recv",
                "--key",
                &common::pipe_key_arg(),
                "--no-progress",
                "--resume",
                "--listen",
                &listen,
            ])
            .arg("-o")
            .arg(&output)
            .stderr(Stdio::piped())
            .spawn()
            .expect("recv");
        wait_listening(p1);
        wait_listening(p2);
        let stats = dir.join(format!("send-{mode}.json"));
        let s = braid()
            .args([
                "send",
                "--key",
                &common::pipe_key_arg(),
                "--no-progress",
                "--resume",
                "--mode",
                mode,
            ])
            .args(["--to", &format!("127.0.0.1:{p1},127.0.0.1:{p2}")])
            .args(["--stats-file", stats.to_str().expect("utf-8 path")])
            .arg(&input)
            .stderr(Stdio::piped())
            .spawn()
            .expect("send");
        finish(s, mode);
        finish(r, mode);
        assert!(same_files(&input, &output), "{mode}: the output differs");
        let report: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&stats).expect("stats")).expect("json");
        assert_eq!(report["resumed_from"].as_u64(), Some(held as u64), "{mode}");
        assert_eq!(
            report["bytes"].as_u64(),
            Some(data.len() as u64 - held as u64),
            "{mode}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// SIGTERM stops `braid recv` the way it stops every long-running command
/// (issue 30 §8): exit 128 + 15, a last line saying how many bytes the
/// file holds and how to go on, the file a true prefix of the input; the
/// same two commands with `--resume` then finish it identical.
#[test]
fn a_receiver_stopped_by_sigterm_says_how_far_it_got_and_resumes() {
    const SIZE: u64 = 40_000_000;
    let dir = tmpdir("sigterm");
    let input = dir.join("in");
    let output = dir.join("out");
    generate(&input, SIZE);
    let port = free_port();
    let r = recv(port, &output, &[]);
    wait_listening(port);
    // Paced, so that the signal comes well before the end.
    let s = send(port, &input, &["--rate", "40mbit"]);
    let mut at = 0;
    for _ in 0..6_000 {
        at = std::fs::metadata(&output).map_or(0, |m| m.len());
        if at >= 1_000_000 {
            break;
        }
        std::thread::park_timeout(Duration::from_millis(5));
    }
    assert!(at >= 1_000_000, "nothing arrived to stop");
    // SAFETY: kill(2) on our own child's pid; no memory is involved.
    let rc = unsafe { libc::kill(r.id() as libc::pid_t, libc::SIGTERM) };
    assert_eq!(rc, 0, "signalling the receiver");
    let r = r.wait_with_output().expect("recv");
    let _ = s.wait_with_output();
    let said = String::from_utf8_lossy(&r.stderr);
    assert_eq!(r.status.code(), Some(143), "{said}");
    let held = std::fs::metadata(&output).expect("output").len();
    assert!(held > 0 && held < SIZE, "{held} of {SIZE}: {said}");
    assert!(
        said.contains(&format!("stopped by SIGTERM: {held} bytes written"))
            && said.contains("--resume"),
        "{said}"
    );
    let data = std::fs::read(&input).expect("input");
    assert_eq!(
        std::fs::read(&output).expect("output"),
        data[..held as usize],
        "what was written is a prefix of the input"
    );
    let port = free_port();
    let r = recv(port, &output, &["--resume"]);
    wait_listening(port);
    finish(send(port, &input, &["--resume"]), "resumed send");
    finish(r, "resumed recv");
    assert!(same_files(&input, &output), "the output differs");
    let _ = std::fs::remove_dir_all(&dir);
}

/// SIGTERM stops `braid send` too: exit 143 and a last line with the bytes
/// the receiver acknowledged; after the receiver is stopped as well, the
/// same two commands with `--resume` finish the file identical.
#[test]
fn a_sender_stopped_by_sigterm_says_how_far_it_got_and_resumes() {
    const SIZE: u64 = 40_000_000;
    let dir = tmpdir("sigterm-send");
    let input = dir.join("in");
    let output = dir.join("out");
    generate(&input, SIZE);
    let port = free_port();
    let r = recv(port, &output, &[]);
    wait_listening(port);
    let s = send(port, &input, &["--rate", "40mbit"]);
    for _ in 0..6_000 {
        if std::fs::metadata(&output).map_or(0, |m| m.len()) >= 1_000_000 {
            break;
        }
        std::thread::park_timeout(Duration::from_millis(5));
    }
    // SAFETY: kill(2) on our own child's pid; no memory is involved.
    assert_eq!(
        unsafe { libc::kill(s.id() as libc::pid_t, libc::SIGTERM) },
        0
    );
    let s = s.wait_with_output().expect("send");
    let said = String::from_utf8_lossy(&s.stderr);
    assert_eq!(s.status.code(), Some(143), "{said}");
    assert!(
        said.contains("stopped by SIGTERM:") && said.contains("bytes acknowledged"),
        "{said}"
    );
    // SAFETY: as above, the receiver.
    assert_eq!(
        unsafe { libc::kill(r.id() as libc::pid_t, libc::SIGTERM) },
        0
    );
    let _ = r.wait_with_output();
    let held = std::fs::metadata(&output).expect("output").len();
    assert!(held > 0 && held < SIZE, "{held} of {SIZE}");
    let port = free_port();
    let r = recv(port, &output, &["--resume"]);
    wait_listening(port);
    finish(send(port, &input, &["--resume"]), "resumed send");
    finish(r, "resumed recv");
    assert!(same_files(&input, &output), "the output differs");
    let _ = std::fs::remove_dir_all(&dir);
}
