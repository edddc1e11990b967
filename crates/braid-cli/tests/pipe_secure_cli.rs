//! `braid send` / `braid recv` secure by default, on loopback: the one-time
//! code `braid recv` prints works end to end and a wrong code is refused
//! and counted; three wrong codes make the receiver give up with nothing
//! written; no key and no code is a clear error; `--insecure` on both sides
//! still works (and says loudly that it is insecure), on one side only it
//! is refused with a clear message.

mod common;

use std::io::{BufRead, BufReader, Read};
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};

fn braid() -> Command {
    Command::new(env!("CARGO_BIN_EXE_braid"))
}

fn free_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind port 0");
    l.local_addr().expect("local addr").port()
}

fn wait_listening(port: u16) {
    for _ in 0..200 {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return;
        }
        std::thread::park_timeout(std::time::Duration::from_millis(20));
    }
    panic!("receiver did not start listening on {port}");
}

fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("braid-pipesec-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("tmpdir");
    d
}

fn data(n: usize) -> Vec<u8> {
    (0..n as u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 11) as u8)
        .collect()
}

/// A receiver without a key: returns it, the code it printed, and a thread
/// collecting the rest of its stderr.
fn recv_with_code(addr: &str, out: &PathBuf) -> (Child, String, std::thread::JoinHandle<String>) {
    let mut rx = braid()
        .args(["recv", "--no-progress", "--listen", addr, "-o"])
        .arg(out)
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn recv");
    let mut err = BufReader::new(rx.stderr.take().expect("stderr"));
    let mut line = String::new();
    let code = loop {
        line.clear();
        let n = err.read_line(&mut line).expect("read recv stderr");
        assert!(n > 0, "recv ended without printing a code");
        if let Some(c) = line.trim().strip_prefix("braid recv: code ") {
            break c.to_string();
        }
    };
    let rest = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    (rx, code, rest)
}

fn send(addr: &str, input: &PathBuf, extra: &[&str]) -> Output {
    braid()
        .args(["send", "--no-progress", "--to", addr])
        .args(extra)
        .arg(input)
        .output()
        .expect("run send")
}

#[test]
fn code_mode_end_to_end_and_a_wrong_code_is_refused() {
    let dir = tmpdir("code");
    let want = data(5 << 20);
    let input = dir.join("in");
    std::fs::write(&input, &want).expect("write input");
    let out = dir.join("out");
    let addr = format!("127.0.0.1:{}", free_port());
    let (rx, code, rest) = recv_with_code(&addr, &out);
    // A code of the right form, but not this one (the number differs).
    let (n, words) = code.split_once('-').expect("code form");
    let n: u32 = n.parse().expect("number");
    let wrong = format!("{}-{words}", n % 999 + 1);
    let s = send(&addr, &input, &["--code", &wrong]);
    assert!(!s.status.success());
    let e = String::from_utf8_lossy(&s.stderr);
    assert!(e.contains("wrong code"), "said: {e}");
    let s = send(&addr, &input, &["--code", &code]);
    common::assert_ok(&s, "send with the right code");
    let r = rx.wait_with_output().expect("recv");
    let rest = rest.join().expect("stderr");
    assert!(r.status.success(), "recv: {rest}");
    assert!(rest.contains("1 wrong code"), "recv said: {rest}");
    assert!(
        std::fs::read(&out).expect("output") == want,
        "output differs"
    );
}

#[test]
fn three_wrong_codes_and_the_receiver_gives_up() {
    let dir = tmpdir("codes3");
    let input = dir.join("in");
    std::fs::write(&input, data(1000)).expect("write input");
    let out = dir.join("out");
    let addr = format!("127.0.0.1:{}", free_port());
    let (rx, code, rest) = recv_with_code(&addr, &out);
    let (n, words) = code.split_once('-').expect("code form");
    let n: u32 = n.parse().expect("number");
    for k in 1..=3 {
        let wrong = format!("{}-{words}", (n + k - 1) % 999 + 1);
        let s = send(&addr, &input, &["--code", &wrong]);
        assert!(!s.status.success(), "wrong code {k} accepted");
    }
    let r = rx.wait_with_output().expect("recv");
    let rest = rest.join().expect("stderr");
    assert!(!r.status.success());
    assert!(
        rest.contains("3 wrong codes: giving up"),
        "recv said: {rest}"
    );
    assert_eq!(std::fs::metadata(&out).expect("output").len(), 0);
}

#[test]
fn send_needs_a_key_or_a_code() {
    let dir = tmpdir("nokey");
    let input = dir.join("in");
    std::fs::write(&input, b"x").expect("write");
    let s = send("127.0.0.1:9", &input, &[]);
    assert!(!s.status.success());
    let e = String::from_utf8_lossy(&s.stderr);
    assert!(
        e.contains("needs --code CODE") && e.contains("--key FILE") && e.lines().count() == 1,
        "said: {e}"
    );
    let s = send("127.0.0.1:9", &input, &["--code", "not-a-code"]);
    assert!(!s.status.success());
    assert!(String::from_utf8_lossy(&s.stderr).contains("not a braid code"));
}

#[test]
fn insecure_on_both_sides_works_and_warns_on_one_side_is_refused() {
    let dir = tmpdir("insecure");
    let want = data(2 << 20);
    let input = dir.join("in");
    std::fs::write(&input, &want).expect("write input");
    let out = dir.join("out");
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let rx = braid()
        .args([
            "recv",
            "--no-progress",
            "--insecure",
            "--listen",
            &addr,
            "-o",
        ])
        .arg(&out)
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn recv");
    wait_listening(port);
    // An authenticated sender is refused by an insecure receiver...
    let s = send(
        &addr,
        &input,
        &[
            "--key",
            common::pipe_key().to_str().expect("utf-8"),
            "--reconnect",
            "0",
        ],
    );
    assert!(!s.status.success());
    let e = String::from_utf8_lossy(&s.stderr);
    assert!(e.contains("refused the handshake"), "said: {e}");
    // ...and the insecure one gets through, warned.
    let s = send(&addr, &input, &["--insecure"]);
    common::assert_ok(&s, "insecure send");
    assert!(String::from_utf8_lossy(&s.stderr).contains("WARNING: --insecure"));
    let r = rx.wait_with_output().expect("recv");
    common::assert_ok(&r, "insecure recv");
    assert!(String::from_utf8_lossy(&r.stderr).contains("WARNING: --insecure"));
    assert!(
        std::fs::read(&out).expect("output") == want,
        "output differs"
    );

    // An insecure sender to a receiver with a key: a clear refusal.
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let key = common::pipe_key();
    let mut rx = braid()
        .args(["recv", "--no-progress", "--listen", &addr, "-o"])
        .arg(dir.join("out2"))
        .arg("--key")
        .arg(&key)
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn recv");
    wait_listening(port);
    let s = send(&addr, &input, &["--insecure", "--reconnect", "0"]);
    assert!(!s.status.success());
    let e = String::from_utf8_lossy(&s.stderr);
    assert!(e.contains("requires a key or a code"), "said: {e}");
    rx.kill().expect("kill recv");
    let _ = rx.wait();
    assert_eq!(std::fs::metadata(dir.join("out2")).expect("out2").len(), 0);
}

/// Issue 29 §3: strangers who connect and never send a byte stall no
/// pairing and count for nothing; the sender with the code gets through
/// while they hang on, and no wrong code is counted.
#[test]
fn silent_connections_neither_stall_nor_count_against_the_code() {
    let dir = tmpdir("code-silent");
    let want = data(1 << 20);
    let input = dir.join("in");
    std::fs::write(&input, &want).expect("write input");
    let out = dir.join("out");
    let addr = format!("127.0.0.1:{}", free_port());
    let (rx, code, rest) = recv_with_code(&addr, &out);
    // More silent strangers than the three guesses a code allows.
    let silent: Vec<std::net::TcpStream> = (0..5)
        .map(|_| std::net::TcpStream::connect(&addr).expect("connect"))
        .collect();
    let s = send(&addr, &input, &["--code", &code]);
    common::assert_ok(&s, "send with the right code while strangers wait");
    drop(silent);
    let r = rx.wait_with_output().expect("recv");
    let rest = rest.join().expect("stderr");
    assert!(r.status.success(), "recv: {rest}");
    assert!(!rest.contains("wrong code"), "recv said: {rest}");
    assert!(
        std::fs::read(&out).expect("output") == want,
        "output differs"
    );
}
