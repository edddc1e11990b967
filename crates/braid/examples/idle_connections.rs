//! Opens `N` keyed IQ-RUDP connections to a server and keeps them idle for
//! `SECS` seconds, then prints how much CPU the server process used
//! meanwhile (from /proc/PID/stat): what idle connections cost a
//! `braid serve` or `braid perf server` (issue 29: "idle connections cost
//! nothing"). Connections come from 127.0.0.2, 127.0.0.3, … (at most 60
//! per address, under the server's per-source cap).
//!
//! Run: `cargo run --release -p braid --example idle_connections -- ADDR KEYFILE N SECS SERVER_PID`
//! (docs/BENCHMARKS.md, "Issue 29: idle connections").

use braid::key::Key;
use braid::rudp::{Endpoint, EndpointConfig};
use std::net::SocketAddr;

const PER_ADDRESS: usize = 60;

/// User + system CPU seconds of process `pid`.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("read /proc/PID/stat");
    // Fields after the command name (which may hold spaces, in parentheses).
    let rest = &stat[stat.rfind(')').expect("a stat line") + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the line: 12 and 13 here.
    let ticks: f64 = f[11].parse::<f64>().unwrap() + f[12].parse::<f64>().unwrap();
    let hz = 100.0; // USER_HZ on Linux
    ticks / hz
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 6 {
        eprintln!("usage: idle_connections ADDR KEYFILE N SECS SERVER_PID");
        std::process::exit(2);
    }
    let to: SocketAddr = args[1].parse().expect("ADDR");
    let key = Key::read(&args[2]).expect("KEYFILE");
    let n: usize = args[3].parse().expect("N");
    let secs: u64 = args[4].parse().expect("SECS");
    let pid: u32 = args[5].parse().expect("SERVER_PID");
    let mut endpoints = Vec::new();
    let mut conns = Vec::new();
    for k in 0..n.div_ceil(PER_ADDRESS) {
        let mut c = EndpointConfig::default();
        c.transport.psk = Some(key.psk().clone());
        let from: SocketAddr = format!("127.0.0.{}:0", 2 + k).parse().expect("an address");
        endpoints.push(Endpoint::bind(from, c).expect("bind a client"));
    }
    for i in 0..n {
        let ep = &endpoints[i / PER_ADDRESS];
        conns.push(ep.connect(to).await.expect("connect"));
    }
    eprintln!("{n} connections up; idle for {secs} s");
    // Let the handshakes' own work settle before measuring.
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    let before = cpu_seconds(pid);
    tokio::time::sleep(std::time::Duration::from_secs(secs)).await;
    let used = cpu_seconds(pid) - before;
    println!(
        "server CPU with {n} idle connections: {used:.2} s in {secs} s ({:.1} % of a core)",
        100.0 * used / secs as f64
    );
    drop(conns);
}
