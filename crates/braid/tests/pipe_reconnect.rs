//! A connection cut mid-stream: the sender re-sends its unacknowledged
//! blocks over the other connection, reconnects (rejoining the session), and
//! the stream arrives complete and in order.

use braid::pipe::net::SockOpts;
use braid::pipe::{send, Layout, Mode, Receiver, RecvConfig, Security, SendConfig};
use braid_core::Duration;
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// Bytes the first proxied connection may carry before the proxy cuts it.
const CUT_AFTER: usize = 2 << 20;

fn sock() -> SockOpts {
    SockOpts {
        mptcp: false,
        sockbuf: None,
        notsent_lowat: None,
        user_timeout: None,
    }
}

/// A TCP proxy to `target` that cuts its first connection after
/// [`CUT_AFTER`] bytes from the client.
fn proxy(target: SocketAddr) -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind proxy");
    let addr = l.local_addr().expect("proxy addr");
    let accepted = Arc::new(AtomicUsize::new(0));
    std::thread::spawn(move || {
        for client in l.incoming() {
            let Ok(client) = client else { return };
            let Ok(server) = TcpStream::connect(target) else {
                return;
            };
            let first = accepted.fetch_add(1, Ordering::SeqCst) == 0;
            let (c2, s2) = (
                client.try_clone().expect("clone"),
                server.try_clone().expect("clone"),
            );
            std::thread::spawn(move || pump(c2, s2, first));
            std::thread::spawn(move || pump(server, client, false));
        }
    });
    addr
}

fn pump(mut from: TcpStream, mut to: TcpStream, cut: bool) {
    let mut buf = vec![0u8; 64 << 10];
    let mut total = 0;
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if to.write_all(&buf[..n]).is_err() {
            break;
        }
        total += n;
        if cut && total > CUT_AFTER {
            break;
        }
    }
    let _ = from.shutdown(Shutdown::Both);
    let _ = to.shutdown(Shutdown::Both);
}

struct Sink(Arc<Mutex<Vec<u8>>>);

impl Write for Sink {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("sink").extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn cut_connection_reconnects_and_stream_completes() {
    let rx = Receiver::bind(RecvConfig {
        listen: vec!["127.0.0.1:0".parse().expect("addr")],
        window_bytes: 4 << 20,
        sock: sock(),
        idle_limit: Duration::from_secs(10),
        resume: None,
        security: Security::Insecure,
    })
    .expect("bind");
    let via = proxy(rx.local_addrs()[0]);
    let out = Arc::new(Mutex::new(Vec::new()));
    let sink = Sink(out.clone());
    let server = std::thread::spawn(move || rx.run(Box::new(sink), &mut |_| {}));

    let data: Vec<u8> = (0..24_000_000u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    let cfg = SendConfig {
        to: vec![via],
        connections: 2,
        mode: Mode::Adaptive,
        layout: Layout::Interleaved,
        block_size: 64 << 10,
        window_bytes: 4 << 20,
        auto_window: true,
        total_size: None,
        sock: sock(),
        reconnect_attempts: 4,
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
    let report = send(Box::new(std::io::Cursor::new(d2)), cfg, &mut |_| {}).expect("send succeeds");
    let rr = server
        .join()
        .expect("server thread")
        .expect("recv succeeds");
    assert_eq!(rr.bytes, data.len() as u64);
    assert!(*out.lock().expect("out") == data, "output differs");
    let connects: u64 = report.connections.iter().map(|c| c.connects).sum();
    assert!(
        connects >= 3,
        "expected a reconnect, saw {connects} connects"
    );
}
