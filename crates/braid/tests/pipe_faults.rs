//! Faults found when the pipe was attacked (issue 13 §4): a forged early
//! DONE, an input that fails mid-stream, a path that goes silent for good,
//! a flood of silent connections. Each must end with a clear error or be
//! shrugged off; none may end a transfer with a false success.

use braid::pipe::frame::{HelloAck, HelloStatus, CONTROL_LEN, HELLO_LEN};
use braid::pipe::net::SockOpts;
use braid::pipe::{send, Layout, Mode, PipeError, Receiver, RecvConfig, Security, SendConfig};
use braid_core::transport::auth::Psk;
use braid_core::Duration;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};

fn sock() -> SockOpts {
    SockOpts {
        mptcp: false,
        sockbuf: None,
        notsent_lowat: None,
        user_timeout: None,
    }
}

/// The key every real pair here shares (the secure default); the forged
/// peer below speaks the clear-text protocol, so its sender runs insecure.
fn key() -> Security {
    Security::Key {
        psk: Psk::from_bytes([7; 32]),
        encrypt: true,
    }
}

fn send_cfg(to: SocketAddr, connections: usize) -> SendConfig {
    SendConfig {
        to: vec![to],
        connections,
        mode: Mode::Adaptive,
        layout: Layout::Interleaved,
        block_size: 64 << 10,
        window_bytes: 4 << 20,
        auto_window: true,
        total_size: None,
        sock: sock(),
        reconnect_attempts: 1,
        corrupt_block: None,
        silence_limit: braid_core::Duration::from_secs(10),
        rate: None,
        rate_updates: None,
        paced_connections: None,
        rest_rate: None,
        resume: false,
        security: key(),
    }
}

fn receiver(idle: Duration) -> (Receiver, SocketAddr) {
    let rx = Receiver::bind(RecvConfig {
        listen: vec!["127.0.0.1:0".parse().expect("addr")],
        window_bytes: 4 << 20,
        sock: sock(),
        idle_limit: idle,
        resume: None,
        security: key(),
    })
    .expect("bind");
    let addr = rx.local_addrs()[0];
    (rx, addr)
}

fn data(n: usize) -> Vec<u8> {
    (0..n as u64).map(|i| (i * 7 % 251) as u8).collect()
}

/// A fake receiver: accepts the hello, reads `after` bytes of frames, then
/// sends DONE(verified) claiming those bytes, and keeps the socket open.
fn forged_receiver(after: usize) -> (SocketAddr, std::thread::JoinHandle<()>) {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = l.local_addr().expect("addr");
    let t = std::thread::spawn(move || {
        let (mut s, _) = l.accept().expect("accept");
        let mut hello = [0u8; HELLO_LEN];
        s.read_exact(&mut hello).expect("hello");
        let ack = HelloAck {
            status: HelloStatus::Ok,
            window_blocks: 64,
            window_bytes: 4 << 20,
        };
        s.write_all(&ack.encode()).expect("ack");
        let mut got = vec![0u8; after];
        s.read_exact(&mut got).expect("some data");
        // DONE (kind 5), reason 0 = verified, bytes = what it read.
        let mut done = [0u8; CONTROL_LEN];
        done[0] = 5;
        done[8..16].copy_from_slice(&(after as u64).to_be_bytes());
        s.write_all(&done).expect("done");
        // Keep reading until the sender closes.
        let mut sink = [0u8; 1 << 16];
        while matches!(s.read(&mut sink), Ok(n) if n > 0) {}
    });
    (addr, t)
}

#[test]
fn forged_early_done_is_not_a_success() {
    let (addr, fake) = forged_receiver(1 << 20);
    let mut cfg = send_cfg(addr, 1);
    cfg.security = Security::Insecure;
    let res = send(
        Box::new(std::io::Cursor::new(data(4 << 20))),
        cfg,
        &mut |_| {},
    );
    assert!(
        matches!(
            res,
            Err(PipeError::EarlyDone { .. } | PipeError::DoneMismatch { .. })
        ),
        "a forged early DONE must fail the transfer, got {res:?}"
    );
    fake.join().expect("fake receiver");
}

/// An input that fails after `left` bytes.
struct Failing {
    left: usize,
}

impl Read for Failing {
    fn read(&mut self, b: &mut [u8]) -> std::io::Result<usize> {
        if self.left == 0 {
            return Err(std::io::Error::other("disk on fire"));
        }
        let n = b.len().min(self.left);
        b[..n].fill(7);
        self.left -= n;
        Ok(n)
    }
}

#[test]
fn input_failure_aborts_the_receiver_at_once() {
    // An idle limit far above the test's run: the receiver must stop on
    // the sender's ABORT, not by losing the sender.
    let (rx, addr) = receiver(Duration::from_secs(120));
    let server = std::thread::spawn(move || rx.run(Box::new(std::io::sink()), &mut |_| {}));
    let res = send(
        Box::new(Failing { left: 1 << 20 }),
        send_cfg(addr, 2),
        &mut |_| {},
    );
    assert!(matches!(res, Err(PipeError::Input(_))), "got {res:?}");
    let r = server.join().expect("server thread");
    assert!(
        matches!(r, Err(PipeError::SenderAborted { .. })),
        "the receiver must report the sender's abort, got {r:?}"
    );
}

/// A TCP proxy to `target` that forwards until its clients have sent
/// `cut` bytes, then stops forwarding in both directions for good while
/// keeping every socket open (a path that went down without a reset);
/// later connections are accepted and held, never forwarded.
fn black_hole_proxy(target: SocketAddr, cut: usize) -> SocketAddr {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::{Arc, Mutex};
    let l = TcpListener::bind("127.0.0.1:0").expect("bind proxy");
    let addr = l.local_addr().expect("proxy addr");
    let held: Arc<Mutex<Vec<TcpStream>>> = Arc::default();
    let down = Arc::new(AtomicBool::new(false));
    let sent = Arc::new(AtomicUsize::new(0));
    std::thread::spawn(move || {
        for client in l.incoming() {
            let Ok(client) = client else { return };
            if down.load(Ordering::SeqCst) {
                held.lock().expect("held").push(client);
                continue;
            }
            let Ok(server) = TcpStream::connect(target) else {
                return;
            };
            for (from, to, count) in [
                (client.try_clone(), server.try_clone(), true),
                (server.try_clone(), client.try_clone(), false),
            ] {
                let (Ok(mut from), Ok(mut to)) = (from, to) else {
                    return;
                };
                let (held, down, sent) = (held.clone(), down.clone(), sent.clone());
                std::thread::spawn(move || {
                    let mut buf = vec![0u8; 16 << 10];
                    loop {
                        let n = match from.read(&mut buf) {
                            Ok(0) | Err(_) => return,
                            Ok(n) => n,
                        };
                        if count && sent.fetch_add(n, Ordering::SeqCst) + n > cut {
                            down.store(true, Ordering::SeqCst);
                        }
                        if down.load(Ordering::SeqCst) {
                            // Keep both ends open, forward nothing more.
                            held.lock().expect("held").extend([from, to]);
                            return;
                        }
                        if to.write_all(&buf[..n]).is_err() {
                            return;
                        }
                    }
                });
            }
        }
    });
    addr
}

#[test]
fn a_path_down_for_good_ends_both_sides_with_a_clear_error() {
    let (rx, addr) = receiver(Duration::from_secs(2));
    let server = std::thread::spawn(move || rx.run(Box::new(std::io::sink()), &mut |_| {}));
    let proxy = black_hole_proxy(addr, 1 << 20);
    let mut cfg = send_cfg(proxy, 1);
    cfg.silence_limit = braid_core::Duration::from_secs(2);
    let res = send(
        Box::new(std::io::Cursor::new(data(16 << 20))),
        cfg,
        &mut |_| {},
    );
    let r = server.join().expect("server thread");
    assert!(
        matches!(
            r,
            Err(PipeError::SilentSender { .. } | PipeError::LostSender { .. })
        ),
        "the receiver must give up on a silent path, got {r:?}"
    );
    assert!(
        matches!(res, Err(PipeError::LostReceiver { .. })),
        "the sender must give up with a clear error, got {res:?}"
    );
}

/// A TCP connection to `to` from the loopback address `from`.
fn connect_from(from: &str, to: SocketAddr) -> TcpStream {
    use socket2::{Domain, SockAddr, Socket, Type};
    let s = Socket::new(Domain::IPV4, Type::STREAM, None).expect("socket");
    let local: SocketAddr = format!("{from}:0").parse().expect("addr");
    s.bind(&SockAddr::from(local)).expect("bind");
    s.connect(&SockAddr::from(to)).expect("connect");
    s.into()
}

/// True once the peer has closed `s` (end of stream or reset).
fn closed(s: &mut TcpStream) -> bool {
    let mut b = [0u8; 1];
    match s.read(&mut b) {
        Ok(0) => true,
        Ok(_) => false,
        // A read that would block is an open connection.
        Err(e) => e.kind() != std::io::ErrorKind::WouldBlock,
    }
}

#[test]
fn a_flood_of_silent_connections_is_bounded_and_the_transfer_works() {
    const FLOOD: usize = 1000;
    let out = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    struct Sink(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);
    impl Write for Sink {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().expect("sink").extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let (rx, addr) = receiver(Duration::from_secs(30));
    let sink = Sink(out.clone());
    let server = std::thread::spawn(move || rx.run(Box::new(sink), &mut |_| {}));
    // 1,000 connections that never say hello, from another address.
    let mut flood: Vec<TcpStream> = (0..FLOOD)
        .map(|_| connect_from("127.0.0.2", addr))
        .collect();
    for s in &flood {
        s.set_nonblocking(true).expect("nonblocking");
    }
    // The receiver closes all but a bounded few of them at once (well
    // before its hello timeout): poll, with a bound.
    let mut open = FLOOD;
    for _ in 0..100 {
        open = 0;
        for s in &mut flood {
            open += usize::from(!closed(s));
        }
        if open <= 64 {
            break;
        }
        std::thread::park_timeout(std::time::Duration::from_millis(20));
    }
    assert!(open <= 64, "{open} silent connections still held");
    // The real transfer still works.
    let d = data(1 << 20);
    let rep = send(
        Box::new(std::io::Cursor::new(d.clone())),
        send_cfg(addr, 2),
        &mut |_| {},
    )
    .expect("send succeeds");
    assert_eq!(rep.bytes, d.len() as u64);
    server.join().expect("server").expect("recv succeeds");
    assert!(*out.lock().expect("out") == d);
}

#[test]
fn rate_cap_holds_the_total_over_every_connection() {
    let rate = braid_core::Bandwidth::from_mbps(20);
    let n: usize = 4 << 20;
    let (rx, addr) = receiver(Duration::from_secs(30));
    let server = std::thread::spawn(move || rx.run(Box::new(std::io::sink()), &mut |_| {}));
    let mut cfg = send_cfg(addr, 4);
    cfg.rate = Some(rate);
    let start = braid::clock::now();
    let rep =
        send(Box::new(std::io::Cursor::new(data(n))), cfg, &mut |_| {}).expect("send succeeds");
    let secs = braid::clock::now()
        .saturating_duration_since(start)
        .as_secs_f64();
    server.join().expect("server").expect("recv succeeds");
    assert_eq!(rep.bytes, n as u64);
    // Loopback moves gigabits; the cap must hold the whole transfer near
    // 20 Mbit/s (a loose band: behaviour, not timing precision).
    let floor = 0.8 * n as f64 / rate.bytes_per_sec() as f64;
    assert!(
        secs >= floor,
        "{n} bytes in {secs:.2} s: faster than the cap"
    );
    assert!(
        rep.bps < 1.25 * rate.bps() as f64 && rep.bps > 0.25 * rate.bps() as f64,
        "average {:.1} Mbit/s, cap 20",
        rep.bps / 1e6
    );
}
