//! Transfers bound to a reservation, as `braid send --reservation` and
//! `braid send --deadline` run them, in one process on loopback.
//!
//! ```text
//! cargo run --release -p braid-broker --example reserved_transfer [-- MEGABYTES]
//! ```
//!
//! A reservation broker ([`Broker`], what `braid broker serve` runs) on a
//! fresh SQLite file offers a 200 Mbit/s resource `link`. Alice reserves
//! 80 Mbit/s on it and commits; a pipe transfer then runs paced at the
//! reservation ([`transfer::send_on_reservation`]: it provisions the
//! reservation, follows its rate, releases it). Then a deadline transfer
//! ([`transfer::deadline::send_with_deadline`]) reserves what delivers the
//! same data within 20 s, sends over a premium and a scavenger connection,
//! lowers the reservation as it gets ahead and terminates it. Each
//! transfer's lines (pace, lowering) are printed as they come.

use braid::pipe::net::SockOpts;
use braid::pipe::{Layout, Mode, Receiver, RecvConfig, RecvReport, Security, SendConfig};
use braid_broker::owner::Action;
use braid_broker::transfer::{self, deadline::Deadline, Notes};
use braid_broker::types::CreateRequest;
use braid_broker::{clock, Auth, Broker, Client, Config, Role};
use braid_core::transport::auth::Psk;
use braid_core::Duration;
use std::net::SocketAddr;
use std::sync::Arc;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The broker's signing secret (a real one comes from `braid broker
/// secret`).
const SECRET: &str = "0123456789abcdef0123456789abcdef";

/// What the two transfers did.
#[derive(Debug, Default)]
pub struct Report {
    /// Bytes the receiver kept, per transfer.
    pub received: Vec<u64>,
    /// Whether the deadline transfer finished within its deadline.
    pub deadline_met: bool,
    /// How often the deadline transfer lowered its reservation.
    pub lowered: usize,
    /// The reservations' states at the end.
    pub states: Vec<String>,
}

fn security() -> Security {
    Security::Key {
        psk: Psk::from_bytes([7; 32]),
        encrypt: true,
    }
}

fn send_config(to: SocketAddr, connections: usize, size: u64) -> SendConfig {
    SendConfig {
        to: vec![to],
        connections,
        mode: Mode::Adaptive,
        layout: Layout::Interleaved,
        block_size: 64 << 10,
        window_bytes: 4 << 20,
        auto_window: true,
        total_size: Some(size),
        sock: SockOpts::default(),
        reconnect_attempts: 1,
        corrupt_block: None,
        silence_limit: braid_core::Duration::from_secs(10),
        rate: None,
        rate_updates: None,
        paced_connections: None,
        rest_rate: None,
        resume: false,
        security: security(),
    }
}

/// A pipe receiver on loopback writing nowhere, on its own thread.
fn receiver() -> Result<
    (
        SocketAddr,
        std::thread::JoinHandle<Result<RecvReport, String>>,
    ),
    BoxError,
> {
    let rx = Receiver::bind(RecvConfig {
        listen: vec!["127.0.0.1:0".parse()?],
        window_bytes: 4 << 20,
        sock: SockOpts::default(),
        idle_limit: Duration::from_secs(10),
        resume: None,
        security: security(),
    })?;
    let addr = rx.local_addrs()[0];
    let done = std::thread::spawn(move || {
        rx.run(Box::new(std::io::sink()), &mut |_| {})
            .map_err(|e| e.to_string())
    });
    Ok((addr, done))
}

/// Runs both transfers of `len` bytes.
///
/// # Errors
/// The broker, a reservation or a transfer failed.
pub async fn run(len: usize) -> Result<Report, BoxError> {
    let dir = std::env::temp_dir().join(format!("braid-reserved-example-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let db = dir.join("broker.db");
    let config = Config::parse(
        &format!(
            "secret = \"{SECRET}\"\n[[resource]]\nname = \"link\"\nkind = \"network\"\ncapacity = \"200mbit\"\n"
        ),
        std::path::Path::new("example.toml"),
    )?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let broker = Broker::start(
        config,
        db.to_str().ok_or("a UTF-8 temporary path")?,
        listener,
    )
    .await?;
    let hour_from_now = clock::now().as_nanos() / 1_000_000_000 + 3600;
    let token = Auth::new(SECRET.as_bytes()).issue("alice", Role::User, hour_from_now)?;
    let client = Client::new(&format!("http://{}", broker.addr()), &token)?;
    let notes: Notes = Arc::new(|line: &str| println!("transfer: {line}"));
    let data = vec![0x5au8; len];
    let mut report = Report::default();

    // 1. A reservation made and committed beforehand; the transfer follows it.
    let made = client
        .create(&CreateRequest {
            resource: Some("link".into()),
            rate: Some("80mbit".into()),
            start: Some("now".into()),
            end: Some(clock::format(clock::now() + Duration::from_secs(60))),
            class: Some("foreground".into()),
            ..CreateRequest::default()
        })
        .await?;
    client.act(made.id, Action::Commit).await?;
    let (addr, rx) = receiver()?;
    let sent = transfer::send_on_reservation(
        &client,
        made.id,
        false,
        Box::new(std::io::Cursor::new(data.clone())),
        send_config(addr, 2, len as u64),
        &mut |_| {},
        notes.clone(),
    )
    .await?;
    report
        .received
        .push(rx.join().map_err(|_| "the receiver panicked")??.bytes);
    println!(
        "reservation {}: {} bytes in {:.2} s",
        made.id, sent.bytes, sent.seconds
    );

    // 2. A deadline transfer reserves what it needs, and lowers it as it gets ahead.
    let (addr, rx) = receiver()?;
    let plan = Deadline {
        within: Duration::from_secs(20),
        resource: "link".into(),
        margin: 0.1,
        update_every: (len as u64 / 8).max(1),
        premium_connections: 1,
        scavenger_rate: None,
    };
    let done = transfer::deadline::send_with_deadline(
        &client,
        &plan,
        len as u64,
        Box::new(std::io::Cursor::new(data)),
        send_config(addr, 2, len as u64),
        &mut |_| {},
        notes,
    )
    .await?;
    report
        .received
        .push(rx.join().map_err(|_| "the receiver panicked")??.bytes);
    report.deadline_met = done.deadline.met;
    report.lowered = done.deadline.lowered.len();
    for id in [made.id, done.deadline.reservation] {
        let r = client.show(id).await?;
        report
            .states
            .push(format!("{}/{}/{}", r.state, r.provision, r.life));
    }
    broker.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
    Ok(report)
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let mb: usize = match std::env::args().nth(1) {
        Some(s) => s
            .parse()
            .map_err(|_| format!("MEGABYTES: a whole number, not {s:?}"))?,
        None => 16,
    };
    let report = run(mb << 20).await?;
    println!("{report:?}");
    if report.received.iter().any(|&b| b != (mb << 20) as u64) {
        return Err("a transfer did not arrive whole".into());
    }
    Ok(())
}
