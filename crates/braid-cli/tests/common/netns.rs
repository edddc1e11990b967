//! The testbed (`testbed/netns.sh`) from the namespace tests: building and
//! tearing down topologies, running commands in their namespaces, waiting.
//!
//! Namespaces are the testbed's `bt<pid>-NAME-{s,r}` (this test process's
//! pid, so parallel runs never collide); a [`Topology`] tears its own down
//! on drop, also when a test fails.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testbed/netns.sh")
}

/// Runs `testbed/netns.sh ARGS` as this process (`BT_OWNER`) with this
/// build's `braid` for emulated channels.
pub fn testbed(args: &[&str]) -> Output {
    Command::new("bash")
        .arg(script())
        .args(args)
        .env("BT_OWNER", std::process::id().to_string())
        .env("BRAID", env!("CARGO_BIN_EXE_braid"))
        .output()
        .expect("run testbed/netns.sh")
}

/// Why the namespace tests cannot run here, if they cannot (not root, no
/// `ip netns`, no /dev/net/tun).
pub fn skip_reason() -> Option<String> {
    let out = testbed(&["check"]);
    if !out.status.success() {
        return Some(String::from_utf8_lossy(&out.stdout).trim().to_string());
    }
    (!Path::new("/dev/net/tun").exists()).then(|| "no /dev/net/tun".to_string())
}

/// Returns from the test, saying why, when namespaces cannot be used here.
#[macro_export]
macro_rules! require_netns {
    () => {
        if let Some(why) = common::netns::skip_reason() {
            eprintln!("SKIP: network-namespace test needs root, ip netns and /dev/net/tun: {why}");
            return;
        }
    };
}

/// Polls `cond` every 10 ms for up to `ms`; whether it held. The only
/// wait these tests have: always on a condition, always bounded.
pub fn eventually(ms: u64, mut cond: impl FnMut() -> bool) -> bool {
    for _ in 0..ms / 10 {
        if cond() {
            return true;
        }
        std::thread::park_timeout(Duration::from_millis(10));
    }
    cond()
}

/// A testbed topology, torn down on drop.
pub struct Topology {
    name: String,
}

impl Topology {
    /// Builds NAME with one channel per spec (`400mbit`, `20mbit/10ms`,
    /// `10mbit/80ms/1%`, `trace:FILE/20ms`), after removing stale ones.
    pub fn up(name: &str, channels: &[&str]) -> Self {
        let _ = testbed(&["clean"]);
        let mut args = vec!["up", name];
        args.extend_from_slice(channels);
        let out = testbed(&args);
        assert!(
            out.status.success(),
            "testbed up {channels:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Topology {
            name: name.to_string(),
        }
    }

    /// The topology's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The namespace of side `s` (sender) or `r` (receiver).
    pub fn ns(&self, side: &str) -> String {
        format!("bt{}-{}-{side}", std::process::id(), self.name)
    }

    /// `ip netns exec NS`, ready for a program and its arguments.
    pub fn exec(&self, side: &str) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.ns(side)]);
        c
    }

    /// This build's `braid` in the namespace of `side`.
    pub fn braid(&self, side: &str) -> Command {
        let mut c = self.exec(side);
        c.arg(env!("CARGO_BIN_EXE_braid"));
        c
    }

    /// Waits until something listens on TCP `port` on the receiver side.
    pub fn wait_listening(&self, port: u16) {
        let listening = eventually(6000, || {
            let o = self.exec("r").args(["ss", "-ltnH"]).output().expect("ss");
            String::from_utf8_lossy(&o.stdout).contains(&format!(":{port} "))
        });
        assert!(listening, "receiver did not listen on {port}");
    }

    /// Where the testbed keeps the emulators' pid files, logs and FIFOs.
    pub fn state_dir(&self) -> PathBuf {
        PathBuf::from(format!(
            "/run/braid-testbed/bt{}-{}",
            std::process::id(),
            self.name
        ))
    }

    /// The pid of emulated channel `ch`'s `braid emulate`.
    pub fn emulator_pid(&self, ch: usize) -> u32 {
        let p = self.state_dir().join(format!("ch{ch}.pid"));
        std::fs::read_to_string(&p)
            .expect("emulator pid file")
            .trim()
            .parse()
            .expect("pid")
    }

    /// Whether device `dev` exists on side `side`.
    pub fn has_device(&self, side: &str, dev: &str) -> bool {
        Command::new("ip")
            .args(["-n", &self.ns(side), "link", "show", "dev", dev])
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    }
}

impl Drop for Topology {
    fn drop(&mut self) {
        let _ = testbed(&["down", &self.name]);
    }
}

/// A file in this test process's own temporary directory. The first call
/// also removes the directories earlier test processes left (their pid is
/// gone): the inputs and outputs there run to hundreds of MB per run.
pub fn tmp(name: &str) -> PathBuf {
    static SWEEP: std::sync::Once = std::sync::Once::new();
    SWEEP.call_once(sweep_stale);
    let d = std::env::temp_dir().join(format!("braid-netns-{}", std::process::id()));
    std::fs::create_dir_all(&d).expect("tmpdir");
    d.join(name)
}

/// Removes `braid-netns-PID` directories whose process no longer runs.
fn sweep_stale() {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix("braid-netns-"))
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

/// Deterministic pseudo-random bytes (xorshift), different per `seed`.
pub fn pseudo_random(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed ^ 0x9E37_79B9_7F4A_7C15;
    let mut v = Vec::with_capacity(len + 8);
    while v.len() < len {
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        v.extend_from_slice(&x.wrapping_mul(0x2545_F491_4F6C_DD1D).to_le_bytes());
    }
    v.truncate(len);
    v
}
