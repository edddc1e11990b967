//! `braid perf` on loopback: a short RUDP and TCP test each produce interval
//! lines and a summary in which the server received what the client sent,
//! and a client with no server fails with one clear line. Behaviour, never
//! speed.

mod common;

use std::process::{Child, Command, Output, Stdio};

fn braid() -> Command {
    Command::new(env!("CARGO_BIN_EXE_braid"))
}

/// A port free for both UDP and TCP right now.
/// A port nothing answers on, held for the caller's lifetime: a bound UDP
/// socket that never reads keeps parallel tests' perf servers (which bind UDP
/// and TCP on one port) off it, so "no server" stays true.
fn silent_port() -> (std::net::UdpSocket, u16) {
    loop {
        let u = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind udp");
        let port = u.local_addr().expect("addr").port();
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return (u, port);
        }
    }
}

fn free_port() -> u16 {
    loop {
        let u = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind udp");
        let port = u.local_addr().expect("addr").port();
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
}

/// The server process and its stderr (kept open so it can still write).
struct Server(
    Child,
    #[allow(dead_code)] std::io::BufReader<std::process::ChildStderr>,
);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn server(port: u16) -> Server {
    let child = braid()
        .args(["perf", "server", "--once", "--format", "json", "--open"])
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start server");
    // Wait until it listens: it says so on stderr.
    let mut child = child;
    let stderr = child.stderr.take().expect("piped");
    let mut line = String::new();
    let mut reader = std::io::BufReader::new(stderr);
    std::io::BufRead::read_line(&mut reader, &mut line).expect("read server stderr");
    assert!(line.contains("listening"), "server: {line}");
    Server(child, reader)
}

fn client(port: u16, extra: &[&str]) -> Output {
    braid()
        .args(["perf", "client", "--duration", "1s", "--interval", "250ms"])
        .args(["--to", &format!("127.0.0.1:{port}"), "--format", "json"])
        .args(extra)
        // RUDP (the default transport) needs a key or an explicit --open.
        .args(if extra.contains(&"tcp") {
            &[][..]
        } else {
            &["--open"]
        })
        .output()
        .expect("run client")
}

fn summary(out: &Output) -> serde_json::Value {
    assert!(
        out.status.success(),
        "client failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("every line is JSON"))
        .collect();
    assert!(lines.len() >= 2, "interval lines and a summary:\n{text}");
    assert!(lines[0].get("goodput_mbps").is_some());
    let s = lines.last().expect("non-empty").clone();
    assert_eq!(s["summary"], true, "{text}");
    s
}

#[test]
fn rudp_reliable_delivers_everything_sent() {
    let port = free_port();
    let _srv = server(port);
    let s = summary(&client(port, &["--transport", "rudp"]));
    assert!(s["sent_bytes"].as_u64().unwrap() > 0);
    assert_eq!(s["delivered_bytes"], s["sent_bytes"], "{s}");
    assert!(s["rtt_ms"].as_f64().unwrap() > 0.0);
}

#[test]
fn rudp_unreliable_rate_limited_runs() {
    let port = free_port();
    let _srv = server(port);
    let s = summary(&client(
        port,
        &["--reliability", "unreliable", "--rate", "50mbit"],
    ));
    let sent = s["sent_messages"].as_u64().unwrap();
    let got = s["delivered_messages"].as_u64().unwrap();
    assert!(sent > 0 && got <= sent, "{s}");
}

#[test]
fn tcp_delivers_everything_sent() {
    let port = free_port();
    let _srv = server(port);
    let s = summary(&client(port, &["--transport", "tcp"]));
    assert!(s["sent_bytes"].as_u64().unwrap() > 0);
    assert_eq!(s["delivered_bytes"], s["sent_bytes"], "{s}");
}

#[test]
fn no_server_is_one_clear_line() {
    let (_silent, port) = silent_port();
    let out = client(port, &["--transport", "tcp"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("connecting to"), "{err}");
}

#[test]
fn rudp_no_server_is_one_clear_line() {
    let (_silent, port) = silent_port();
    let out = client(port, &["--transport", "rudp"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("no answer"), "{err}");
}

#[test]
fn bad_flag_values_are_one_clear_line() {
    let out = braid()
        .args(["perf", "client", "--to", "127.0.0.1:9", "--duration", "0s"])
        .output()
        .expect("run");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--duration"), "{err}");
}

/// The server's JSON line for its one test (it exits after `--once`).
fn server_line(srv: &mut Server) -> serde_json::Value {
    let status = srv.0.wait().expect("server exits after --once");
    assert!(status.success());
    let mut out = String::new();
    std::io::Read::read_to_string(&mut srv.0.stdout.take().expect("piped"), &mut out)
        .expect("read server stdout");
    serde_json::from_str(out.trim().lines().last().expect("one line")).expect("JSON line")
}

#[test]
fn frames_from_a_trace_are_timed_per_message_over_rudp_and_tcp() {
    let dir = std::env::temp_dir().join(format!("braid-perf-frames-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let trace = dir.join("frames");
    // MMGC format: time, size in bits, I-frame flag.
    std::fs::write(&trace, "0.0 80000 1\n0.033 16000 0\n0.066 24000 0\n").expect("trace");
    for transport in ["rudp", "tcp"] {
        let port = free_port();
        let mut srv = server(port);
        let s = summary(&client(
            port,
            &[
                "--transport",
                transport,
                "--fps",
                "40",
                "--frame-trace",
                trace.to_str().expect("utf-8 path"),
                "--frame-mean",
                "2mbit",
            ],
        ));
        let sent = s["sent_messages"].as_u64().expect("count");
        assert!(sent > 1, "{s}");
        assert_eq!(s["delivered_bytes"], s["sent_bytes"], "{s}");
        let line = server_line(&mut srv);
        assert_eq!(line["messages"].as_u64(), Some(sent), "{transport}: {line}");
        assert_eq!(line["latency_ms"]["samples"].as_u64(), Some(sent), "{line}");
        assert!(
            line["inter_arrival_ms"].as_f64().expect("number") > 0.0,
            "{line}"
        );
        assert!(line["latency_ms"]["max"].as_f64().expect("number") >= 0.0);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn frame_flags_need_each_other() {
    let out = braid()
        .args([
            "perf",
            "client",
            "--to",
            "127.0.0.1:9",
            "--frame-trace",
            "x",
        ])
        .output()
        .expect("run");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--fps") || err.contains("--frame-mean"),
        "{err}"
    );
}

/// Issue 29 §5: with a key, the unauthenticated TCP tests listen on
/// loopback only (unless --tcp-open), so the key keeps strangers out of
/// every test; a TCP test from loopback still runs.
#[test]
fn a_keyed_server_takes_tcp_tests_on_loopback_only() {
    let port = free_port();
    let mut child = braid()
        .args(["perf", "server", "--once", "--format", "json"])
        .args(["--key", &common::pipe_key_arg()])
        .args(["--listen", &format!("0.0.0.0:{port}")])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start server");
    let stderr = child.stderr.take().expect("piped");
    let mut line = String::new();
    let mut reader = std::io::BufReader::new(stderr);
    std::io::BufRead::read_line(&mut reader, &mut line).expect("read server stderr");
    let _server = Server(child, reader);
    assert!(
        line.contains(&format!("TCP tests on 127.0.0.1:{port} only")),
        "server: {line}"
    );
    // The kernel's own table: a TCP listener on 127.0.0.1:PORT, none on
    // 0.0.0.0:PORT.
    let listeners: Vec<String> = std::fs::read_to_string("/proc/net/tcp")
        .expect("read /proc/net/tcp")
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.get(3) == Some(&"0A")).then(|| f[1].to_string())
        })
        .collect();
    let at = |ip: &str| format!("{ip}:{port:04X}");
    assert!(listeners.contains(&at("0100007F")), "{listeners:?}");
    assert!(!listeners.contains(&at("00000000")), "{listeners:?}");
    let out = client(port, &["--transport", "tcp"]);
    assert!(
        out.status.success(),
        "a TCP test from loopback: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}
