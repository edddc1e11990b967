//! `braid keygen` and `--key`: a key file is written private (0600) and
//! never overwritten by accident; a key file others can read is refused
//! with the fix; a perf client with the wrong key fails with one clear line
//! that names the key problem (not the handshake timeout's "no answer").

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

fn braid() -> Command {
    Command::new(env!("CARGO_BIN_EXE_braid"))
}

fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("braid-keygen-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("temp dir");
    d
}

fn keygen(path: &Path, extra: &[&str]) -> Output {
    braid()
        .arg("keygen")
        .arg(path)
        .args(extra)
        .output()
        .expect("run keygen")
}

/// The one stderr line of a failed run.
fn one_error_line(out: &Output) -> String {
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr).trim().to_string();
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.starts_with("braid: error: "), "{err}");
    err
}

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).expect("stat").permissions().mode() & 0o777
}

#[test]
fn keygen_writes_a_private_key_and_never_overwrites_by_accident() {
    let d = temp_dir("write");
    let k = d.join("site.key");
    let out = keygen(&k, &[]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(mode(&k), 0o600);
    let text = std::fs::read_to_string(&k).expect("key file");
    assert!(text.starts_with("braid-key-1 ") && text.trim().len() == 12 + 64);
    let told = String::from_utf8_lossy(&out.stderr);
    assert!(
        told.contains("site.key") && told.contains("--key"),
        "{told}"
    );
    // A second run refuses and leaves the key as it was.
    let err = one_error_line(&keygen(&k, &[]));
    assert!(
        err.contains("already exists") && err.contains("--force"),
        "{err}"
    );
    assert_eq!(std::fs::read_to_string(&k).expect("key file"), text);
    // --force replaces it, still private.
    assert!(keygen(&k, &["--force"]).status.success());
    assert_ne!(std::fs::read_to_string(&k).expect("key file"), text);
    assert_eq!(mode(&k), 0o600);
    let _ = std::fs::remove_dir_all(&d);
}

/// A port free for both UDP and TCP right now.
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

fn keyed_server(port: u16, key: &Path) -> Server {
    keyed_server_with(port, key, &[])
}

fn keyed_server_with(port: u16, key: &Path, extra: &[&str]) -> Server {
    let mut child = braid()
        .args(["perf", "server", "--listen", &format!("127.0.0.1:{port}")])
        .arg("--key")
        .arg(key)
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start server");
    let stderr = child.stderr.take().expect("piped");
    let mut reader = std::io::BufReader::new(stderr);
    let mut line = String::new();
    std::io::BufRead::read_line(&mut reader, &mut line).expect("read server stderr");
    assert!(line.contains("listening"), "server: {line}");
    Server(child, reader)
}

fn client(port: u16, key: Option<&Path>) -> Output {
    let mut c = braid();
    c.args(["perf", "client", "--duration", "1s", "--format", "json"])
        .args(["--to", &format!("127.0.0.1:{port}")]);
    match key {
        Some(k) => c.arg("--key").arg(k),
        // Explicitly without a key (the default needs one).
        None => c.arg("--open"),
    };
    c.output().expect("run client")
}

#[test]
fn perf_with_the_wrong_key_fails_with_one_line_naming_the_key() {
    let d = temp_dir("perf");
    let (a, b) = (d.join("a.key"), d.join("b.key"));
    assert!(keygen(&a, &[]).status.success());
    assert!(keygen(&b, &[]).status.success());
    let port = free_port();
    let _srv = keyed_server(port, &a);
    let err = one_error_line(&client(port, Some(&b)));
    assert!(err.contains("refused our key"), "{err}");
    assert!(
        !err.contains("no answer"),
        "not the handshake timeout: {err}"
    );
    let err = one_error_line(&client(port, None));
    assert!(err.contains("requires a key"), "{err}");
    // The right key measures as usual.
    let ok = client(port, Some(&a));
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn no_encrypt_interoperates_with_itself_and_a_mismatch_says_so_on_both_sides() {
    let d = temp_dir("noenc");
    let k = d.join("site.key");
    assert!(keygen(&k, &[]).status.success());
    let port = free_port();
    let mut srv = keyed_server_with(port, &k, &["--no-encrypt"]);
    let mut c = braid();
    c.args(["perf", "client", "--duration", "1s", "--format", "json"])
        .args([
            "--to",
            &format!("127.0.0.1:{port}"),
            "--no-encrypt",
            "--key",
        ])
        .arg(&k);
    let ok = c.output().expect("run client");
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    // An encrypting client: refused, told what to change.
    let err = one_error_line(&client(port, Some(&k)));
    assert!(
        err.contains("encryption mode mismatch") && err.contains("--no-encrypt"),
        "{err}"
    );
    // The server says so too (a warning: only a key holder gets this far).
    let mut said = String::new();
    while !said.contains("encryption mode mismatch") {
        let mut line = String::new();
        let n = std::io::BufRead::read_line(&mut srv.1, &mut line).expect("server stderr");
        assert!(n > 0, "server ended without saying: {said}");
        said.push_str(&line);
    }
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn a_key_file_others_can_read_is_refused_with_the_fix() {
    let d = temp_dir("mode");
    let k = d.join("loose.key");
    assert!(keygen(&k, &[]).status.success());
    std::fs::set_permissions(&k, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let err = one_error_line(&client(9, Some(&k)));
    assert!(
        err.contains("loose.key") && err.contains("chmod 600"),
        "{err}"
    );
    let err = one_error_line(&client(9, Some(&d.join("missing.key"))));
    assert!(
        err.contains("does not exist") && err.contains("braid keygen"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&d);
}
