//! `braid emulate` on a real kernel: datagrams through an emulated link
//! with random loss arrive exactly when the model did not lose them, and the
//! same seed loses the same datagrams again.
//!
//! Needs root, `ip netns` and /dev/net/tun; otherwise the test prints why and
//! passes without running (CI runs as root). The namespaces are
//! `bt<pid>-emutest-{s,r}` (the testbed's naming, so parallel runs never
//! collide), torn down by a `Drop` guard. Datagrams go one at a time: the
//! next is sent only once the emulator has read the last, so a busy machine
//! cannot drop one in front of the model (which would shift the seeded
//! draws). Nothing here depends on timing.

mod common;

use braid::emulate::netns::in_namespace;
use braid::emulate::{Direction, Emulator, EmulatorConfig, Side};
use braid_core::link::{Capacity, LinkConfig};
use braid_core::{Bandwidth, Duration};
use common::{skip_reason, testbed};
use std::collections::BTreeSet;
use std::net::UdpSocket;
use std::process::Command;

const NAME: &str = "emutest";
const DATAGRAMS: u64 = 2000;
const LOSS: f64 = 0.05;

/// The two namespaces (no channels: the emulator makes the link), torn
/// down on drop.
struct Namespaces;

impl Namespaces {
    fn up() -> Namespaces {
        let out = testbed(&["up", NAME]);
        assert!(
            out.status.success(),
            "testbed up: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let ns = Namespaces;
        for side in ["s", "r"] {
            // No IPv6 chatter (router solicitations) through the link: the
            // loss draws then fall on the test's datagrams only.
            let out = Command::new("ip")
                .args(["netns", "exec", &ns.name(side), "sysctl", "-qw"])
                .args([
                    "net.ipv6.conf.all.disable_ipv6=1",
                    "net.ipv6.conf.default.disable_ipv6=1",
                ])
                .output()
                .expect("run sysctl");
            assert!(out.status.success(), "sysctl in {side}");
        }
        ns
    }

    fn name(&self, side: &str) -> String {
        format!("bt{}-{NAME}-{side}", std::process::id())
    }
}

impl Drop for Namespaces {
    fn drop(&mut self) {
        let _ = testbed(&["down", NAME]);
    }
}

/// A UDP socket bound inside namespace `ns` (it stays there whatever thread
/// uses it).
fn bind_in(ns: &str, addr: &'static str) -> UdpSocket {
    in_namespace(ns, || UdpSocket::bind(addr)).expect("bind in namespace")
}

/// Sends `DATAGRAMS` numbered datagrams through a fresh emulated link with
/// `seed`; returns the numbers that arrived and the emulator's loss count.
fn run(ns: &Namespaces, seed: u64) -> (BTreeSet<u64>, u64) {
    let mut link = LinkConfig::new(
        "a>b",
        Capacity::Constant(Bandwidth::from_mbps(100)),
        Duration::from_millis(1),
    );
    link.loss = LOSS;
    let mut back = link.clone();
    back.loss = 0.0;
    let emu = Emulator::start(EmulatorConfig {
        a: Side {
            namespace: ns.name("s"),
            device: "s1".into(),
            addr: Some("198.18.1.1/24".parse().expect("valid")),
        },
        b: Side {
            namespace: ns.name("r"),
            device: "r1".into(),
            addr: Some("198.18.1.2/24".parse().expect("valid")),
        },
        mtu: 1500,
        a_to_b: link,
        b_to_a: back,
        seed,
        realtime: None,
    })
    .expect("start the emulator");
    let rx = bind_in(&ns.name("r"), "198.18.1.2:7000");
    let tx = bind_in(&ns.name("s"), "198.18.1.1:0");
    rx.set_read_timeout(Some(std::time::Duration::from_millis(200)))
        .expect("timeout");
    let mut got = BTreeSet::new();
    let mut buf = [0u8; 64];
    // Takes what has arrived (the socket buffer holds a few hundred small
    // datagrams, so read while sending); `true` if something came.
    let mut take = |rx: &UdpSocket, got: &mut BTreeSet<u64>| -> bool {
        match rx.recv(&mut buf) {
            Ok(n) => {
                if let Ok(b) = <[u8; 8]>::try_from(&buf[..n]) {
                    got.insert(u64::from_be_bytes(b));
                }
                true
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                false
            }
            Err(e) => panic!("recv: {e}"),
        }
    };
    rx.set_nonblocking(true).expect("non-blocking");
    for seq in 0..DATAGRAMS {
        tx.send_to(&seq.to_be_bytes(), "198.18.1.2:7000")
            .expect("send");
        // Lock-step: wait until the emulator has read it.
        while emu.counters(Direction::AtoB).read_packets <= seq {
            std::thread::yield_now();
        }
        while take(&rx, &mut got) {}
    }
    rx.set_nonblocking(false).expect("blocking");
    // Bounds the wait if a delivered datagram never reaches the socket
    // (the assertions below then say what is missing).
    let mut idle_reads = 0;
    while idle_reads < 50 {
        let c = emu.counters(Direction::AtoB);
        if got.len() as u64 == c.delivered_packets
            && c.delivered_packets + c.random_losses == DATAGRAMS
        {
            break;
        }
        if take(&rx, &mut got) {
            idle_reads = 0;
        } else {
            idle_reads += 1;
        }
    }
    let [ab, _] = emu.stop().expect("stop");
    assert_eq!(ab.read_packets, DATAGRAMS);
    assert_eq!(ab.queue_drops, 0);
    (got, ab.random_losses)
}

#[test]
fn seeded_loss_is_exact_and_repeatable() {
    if let Some(why) = skip_reason().or_else(|| {
        (!std::path::Path::new("/dev/net/tun").exists()).then(|| "no /dev/net/tun".to_string())
    }) {
        eprintln!("SKIP: emulator test needs root, ip netns and /dev/net/tun: {why}");
        return;
    }
    let _ = testbed(&["clean"]);
    let ns = Namespaces::up();
    let (a, lost_a) = run(&ns, 7);
    // Everything the model did not lose arrived, nothing else.
    assert_eq!(a.len() as u64 + lost_a, DATAGRAMS);
    assert!(a.iter().all(|&s| s < DATAGRAMS));
    assert!(lost_a > 0, "5 % of {DATAGRAMS} lost none");
    let (b, lost_b) = run(&ns, 7);
    assert_eq!(a, b, "the same seed lost different datagrams");
    assert_eq!(lost_a, lost_b);
    let (c, _) = run(&ns, 8);
    assert_ne!(a, c, "another seed lost the same datagrams");
}
