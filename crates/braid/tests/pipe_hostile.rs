//! A receiver facing hostile or confused peers: junk, wrong magic, a hello
//! from another session, oversized frames. None of it may panic or stop a
//! good transfer; a block beyond the window stops the transfer cleanly.

use braid::pipe::frame::{DataHeader, DataKind, Hello, HelloAck, HELLO_ACK_LEN, HELLO_LEN};
use braid::pipe::net::SockOpts;
use braid::pipe::{send, Layout, Mode, PipeError, Receiver, RecvConfig, Security, SendConfig};
use braid_core::Duration;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};

fn sock() -> SockOpts {
    SockOpts {
        mptcp: false,
        sockbuf: None,
        notsent_lowat: None,
        user_timeout: None,
    }
}

fn receiver() -> (Receiver, SocketAddr) {
    let rx = Receiver::bind(RecvConfig {
        listen: vec!["127.0.0.1:0".parse().expect("addr")],
        window_bytes: 1 << 20,
        sock: sock(),
        idle_limit: Duration::from_secs(5),
        resume: None,
        security: Security::Insecure,
    })
    .expect("bind");
    let addr = rx.local_addrs()[0];
    (rx, addr)
}

fn hello(session: u8) -> Hello {
    Hello {
        flags: 0,
        session: [session; 16],
        conn_index: 0,
        max_block: 4096,
        window_blocks: 8,
        total_size: u64::MAX,
    }
}

#[test]
fn junk_and_strangers_do_not_disturb_a_good_transfer() {
    let (rx, addr) = receiver();
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
    let sink = Sink(out.clone());
    let server = std::thread::spawn(move || rx.run(Box::new(sink), &mut |_| {}));

    // Junk instead of a hello.
    let mut s = TcpStream::connect(addr).expect("connect");
    s.write_all(&[0xAB; HELLO_LEN]).expect("junk");
    let mut b = [0u8; 1];
    assert_eq!(s.read(&mut b).unwrap_or(0), 0, "junk must be dropped");
    // A short hello, then close.
    let mut s = TcpStream::connect(addr).expect("connect");
    s.write_all(&hello(1).encode()[..10]).expect("short");
    drop(s);

    // The real transfer (session chosen by the sender).
    let data: Vec<u8> = (0..300_000u32).map(|i| (i * 7 % 251) as u8).collect();
    let cfg = SendConfig {
        to: vec![addr],
        connections: 2,
        mode: Mode::Adaptive,
        layout: Layout::Interleaved,
        block_size: 4096,
        window_bytes: 1 << 20,
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
        security: Security::Insecure,
    };
    let d2 = data.clone();
    let sender =
        std::thread::spawn(move || send(Box::new(std::io::Cursor::new(d2)), cfg, &mut |_| {}));
    let report = sender
        .join()
        .expect("sender thread")
        .expect("send succeeds");
    assert_eq!(report.bytes, data.len() as u64);
    server
        .join()
        .expect("server thread")
        .expect("recv succeeds");
    assert!(*out.lock().expect("out") == data);
}

#[test]
fn stranger_session_is_refused_and_window_violation_stops() {
    let (rx, addr) = receiver();
    let server = std::thread::spawn(move || rx.run(Box::new(std::io::sink()), &mut |_| {}));
    let mut a = TcpStream::connect(addr).expect("connect");
    a.write_all(&hello(1).encode()).expect("hello");
    let mut ack = [0u8; HELLO_ACK_LEN];
    a.read_exact(&mut ack).expect("ack");
    let ack = HelloAck::decode(&ack).expect("decode");
    assert_eq!(ack.window_blocks, 8);
    // Another session on a second connection is refused.
    let mut b = TcpStream::connect(addr).expect("connect");
    b.write_all(&hello(2).encode()).expect("hello");
    let mut ack2 = [0u8; HELLO_ACK_LEN];
    b.read_exact(&mut ack2).expect("ack");
    assert_ne!(HelloAck::decode(&ack2).expect("decode").status, ack.status);
    // A block far beyond the window (with a valid checksum: the payload is
    // read and checked before the window is): the transfer stops with an
    // error.
    let h = DataHeader {
        kind: DataKind::Data,
        seq: 1_000_000,
        len: 16,
        check: *blake3::hash(&[0u8; 16]).as_bytes(),
    };
    a.write_all(&h.encode()).expect("header");
    a.write_all(&[0u8; 16]).expect("payload");
    let res = server.join().expect("server thread");
    assert!(matches!(res, Err(PipeError::Protocol(_))), "got {res:?}");
}
