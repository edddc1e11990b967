//! A file over several paths at once: the multipath pipe (`braid send` /
//! `braid recv`), as a library call, in one process on loopback.
//!
//! ```text
//! cargo run --release -p braid --example file_over_paths [-- MEGABYTES]
//! ```
//!
//! A receiver ([`Receiver`]) listens on two addresses, 127.0.0.1 and
//! 127.0.0.2 (two "paths" of one host's loopback); the sender
//! ([`braid::pipe::send`]) spreads four encrypted TCP connections over
//! both and schedules blocks onto whichever connection has room
//! ([`Mode::Adaptive`], seed 003). The receiver writes the file back in
//! order; both sides report a digest of the stream, and the example checks
//! the copy byte for byte and says what each connection carried.

use braid::pipe::net::SockOpts;
use braid::pipe::{send, Layout, Mode, Receiver, RecvConfig, Security, SendConfig};
use braid_core::transport::auth::Psk;
use braid_core::Duration;
use std::net::SocketAddr;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// What one run carried.
#[derive(Debug, Default)]
pub struct Report {
    /// Bytes the receiver wrote.
    pub bytes: u64,
    /// The copy equals the original.
    pub intact: bool,
    /// Both sides' stream digests agree.
    pub digests_agree: bool,
    /// Bytes per sender connection, and the address it went to.
    pub per_connection: Vec<(String, u64)>,
}

/// Both sides hold the same pre-shared key (from `braid keygen` in real
/// use; a fixed one here).
fn security() -> Security {
    Security::Key {
        psk: Psk::from_bytes([9; 32]),
        encrypt: true,
    }
}

/// Sends `len` bytes of a file over two addresses and checks the copy.
///
/// # Errors
/// A socket could not be bound, or the transfer failed.
pub fn run(len: usize) -> Result<Report, BoxError> {
    let dir = std::env::temp_dir().join(format!("braid-file-example-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let (input, output) = (dir.join("in.bin"), dir.join("out.bin"));
    let data: Vec<u8> = (0..len as u64).map(|i| (i * 31 % 251) as u8).collect();
    std::fs::write(&input, &data)?;

    let listen: Vec<SocketAddr> = vec!["127.0.0.1:0".parse()?, "127.0.0.2:0".parse()?];
    let rx = Receiver::bind(RecvConfig {
        listen,
        window_bytes: 8 << 20,
        sock: SockOpts::default(),
        idle_limit: Duration::from_secs(10),
        resume: None,
        security: security(),
    })?;
    let to = rx.local_addrs();
    let out = std::fs::File::create(&output)?;
    let receiving = std::thread::spawn(move || rx.run(Box::new(out), &mut |_| {}));

    let sent = send(
        Box::new(std::fs::File::open(&input)?),
        SendConfig {
            to,
            connections: 4,
            mode: Mode::Adaptive,
            layout: Layout::Interleaved,
            block_size: 256 << 10,
            window_bytes: 8 << 20,
            auto_window: true,
            total_size: Some(len as u64),
            sock: SockOpts::default(),
            reconnect_attempts: 3,
            corrupt_block: None,
            silence_limit: braid_core::Duration::from_secs(10),
            rate: None,
            rate_updates: None,
            paced_connections: None,
            rest_rate: None,
            resume: false,
            security: security(),
        },
        &mut |p| {
            if let Some(total) = p.total {
                eprint!("\r{:>5.1} % ", p.bytes as f64 * 100.0 / total.max(1) as f64);
            }
        },
    )?;
    eprintln!();
    let received = receiving.join().map_err(|_| "the receiver panicked")??;
    let copy = std::fs::read(&output)?;
    let _ = std::fs::remove_dir_all(&dir);
    let report = Report {
        bytes: received.bytes,
        intact: copy == data,
        digests_agree: sent.blake3 == received.blake3,
        per_connection: sent
            .connections
            .iter()
            .map(|c| (c.addr.clone(), c.counters.acked_bytes))
            .collect(),
    };
    println!(
        "{} bytes in {:.2} s over {} connections:",
        sent.bytes,
        sent.seconds,
        sent.connections.len()
    );
    for (to, bytes) in &report.per_connection {
        println!("  to {to}: {bytes} bytes");
    }
    Ok(report)
}

fn main() -> Result<(), BoxError> {
    let mb: usize = match std::env::args().nth(1) {
        Some(s) => s
            .parse()
            .map_err(|_| format!("MEGABYTES: a whole number, not {s:?}"))?,
        None => 64,
    };
    let report = run(mb << 20)?;
    if !(report.intact && report.digests_agree) {
        return Err("the copy differs from the original".into());
    }
    Ok(())
}
