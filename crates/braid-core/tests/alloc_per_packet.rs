//! IQ-RUDP allocates nothing per packet once a bulk transfer is under way
//! (issue 13 §3): a counting global allocator, switched on only inside the
//! endpoints' calls, over a steady reliable transfer of 64 KiB messages
//! between a client and a server joined by a 1 ms in-memory link.
//!
//! Counted apart: `Connection::recv`, which hands each reassembled message
//! to the application in a `Vec` of its own (one allocation per message,
//! not per packet). The harness's own queues are not counted.
//!
//! This file is its own test binary, with one test, so that nothing else
//! allocates while the counter is on.

use braid_core::time::{Duration, Instant};
use braid_core::transport::{
    Config, ConnectionHandle, Endpoint, FourTuple, Protection, Psk, SendOptions, StreamId,
};
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::collections::VecDeque;
use std::net::SocketAddr;

struct Counting;

thread_local! {
    static ON: Cell<bool> = const { Cell::new(false) };
    static COUNT: Cell<u64> = const { Cell::new(0) };
}

fn note() {
    // `try_with`: the allocator may run while thread-locals are torn down.
    if ON.try_with(Cell::get).unwrap_or(false) {
        let _ = COUNT.try_with(|c| c.set(c.get() + 1));
    }
}

// SAFETY: every call is forwarded unchanged to the system allocator.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        note();
        unsafe { System.alloc(l) }
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        note();
        unsafe { System.alloc_zeroed(l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        note();
        unsafe { System.realloc(p, l, n) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        unsafe { System.dealloc(p, l) }
    }
}

#[global_allocator]
static A: Counting = Counting;

/// Allocations made while `f` runs on this thread.
fn counted<T>(tally: &mut u64, f: impl FnOnce() -> T) -> T {
    let before = COUNT.with(Cell::get);
    ON.with(|o| o.set(true));
    let r = f();
    ON.with(|o| o.set(false));
    *tally += COUNT.with(Cell::get) - before;
    r
}

const MSG: usize = 64 << 10;

fn addr(n: u8) -> SocketAddr {
    SocketAddr::from(([10, 0, 0, n], 4000 + u16::from(n)))
}

#[derive(Default, Debug)]
struct Tally {
    /// In `poll_transmit`, `handle_datagram`, `handle_timeout` and
    /// `poll_timeout` of both endpoints.
    engine: u64,
    /// In `Connection::recv` (the messages handed out).
    recv: u64,
    packets: u64,
    messages: u64,
}

/// Runs `warm` then `measure` packets of data from client to server and
/// returns what the measured part allocated.
fn transfer(config: Config, warm: u64, measure: u64) -> Tally {
    let mut client = Endpoint::new(config.clone(), [1; 32], false).unwrap();
    let mut server = Endpoint::new(config, [2; 32], true).unwrap();
    let (ca, sa) = (addr(1), addr(2));
    let delay = Duration::from_millis(1);
    let mut now = Instant::ZERO;
    // (arrival, to server?, bytes)
    let mut wire: VecDeque<(Instant, bool, Vec<u8>)> = VecDeque::new();
    let mut buf = Vec::with_capacity(2048);
    let c = client.connect(now, sa).unwrap();
    let mut s: Option<ConnectionHandle> = None;
    let mut t = Tally::default();
    let mut junk = Tally::default();
    let mut data_packets = 0u64;
    let payload = vec![7u8; MSG];
    loop {
        let measuring = data_packets >= warm;
        let tally = if measuring { &mut t } else { &mut junk };
        // The application keeps the send queue topped up (not counted:
        // the message's Vec is the application's).
        if let Some(conn) = client.connection_mut(c) {
            while conn.is_established() && conn.queued_bytes() < 4 * MSG as u64 {
                conn.send(now, StreamId(0), payload.clone(), SendOptions::RELIABLE)
                    .unwrap();
            }
        }
        while let Some(x) = counted(&mut tally.engine, || client.poll_transmit(now, &mut buf)) {
            wire.push_back((now + delay, true, buf[..x.size].to_vec()));
            if measuring {
                tally.packets += 1;
            }
            data_packets += 1;
        }
        while let Some(x) = counted(&mut tally.engine, || server.poll_transmit(now, &mut buf)) {
            wire.push_back((now + delay, false, buf[..x.size].to_vec()));
        }
        if s.is_none() {
            s = server.accept();
        }
        if let Some(sc) = s.and_then(|s| server.connection_mut(s)) {
            while let Some(m) = counted(&mut tally.recv, || sc.recv(now)) {
                assert_eq!(m.data.len(), MSG);
                if measuring {
                    tally.messages += 1;
                }
            }
        }
        if tally.packets >= measure {
            return t;
        }
        let timers = [
            counted(&mut tally.engine, || client.poll_timeout()),
            counted(&mut tally.engine, || server.poll_timeout()),
        ];
        let next = timers
            .into_iter()
            .flatten()
            .chain(wire.front().map(|w| w.0))
            .min()
            .expect("something is always pending in a transfer");
        now = now.max(next);
        while wire.front().is_some_and(|w| w.0 <= now) {
            let (_, to_server, bytes) = wire.pop_front().unwrap();
            if to_server {
                counted(&mut tally.engine, || {
                    server.handle_datagram(now, FourTuple::from_remote(ca), &bytes)
                });
            } else {
                counted(&mut tally.engine, || {
                    client.handle_datagram(now, FourTuple::from_remote(sa), &bytes)
                });
            }
        }
        counted(&mut tally.engine, || client.handle_timeout(now));
        counted(&mut tally.engine, || server.handle_timeout(now));
    }
}

fn check(name: &str, config: Config) {
    let t = transfer(config, 20_000, 20_000);
    eprintln!(
        "{name}: {} packets, {} messages: {} allocations in the engine ({:.4} per packet), {} in recv",
        t.packets,
        t.messages,
        t.engine,
        t.engine as f64 / t.packets as f64,
        t.recv
    );
    assert!(t.messages > 0, "{name}: nothing was delivered");
    // No allocation per packet: one per message (its bytes, reassembled
    // where they arrive and handed out by `recv`) and a few for the odd
    // event (a statistics interval, a queue reaching a new peak).
    assert!(
        t.engine <= t.messages + t.packets / 100,
        "{name}: {} allocations for {} packets: the send or receive path allocates per packet",
        t.engine,
        t.packets
    );
    // The receiver hands each message out in one Vec.
    assert!(
        t.recv <= t.messages + 2,
        "{name}: {} allocations in recv for {} messages",
        t.recv,
        t.messages
    );
}

#[test]
fn a_bulk_transfer_allocates_nothing_per_packet() {
    check("open", Config::default());
    let keyed = |protection| Config {
        psk: Some(Psk::from_bytes([7; 32])),
        protection,
        ..Config::default()
    };
    check("authenticated", keyed(Protection::IntegrityOnly));
    check("encrypted", keyed(Protection::Encrypt));
}
