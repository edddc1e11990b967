//! IQ-RUDP packet protection over real sockets on loopback, through a UDP
//! forwarder that sees (and can alter) every datagram, as an on-path
//! party would: encrypted message bytes never appear on the wire, altered
//! packets are dropped and counted while the transfer completes intact,
//! and `--no-encrypt` sends in clear but still refuses altered packets.
//! Tests assert behaviour, never speed.

use braid::rudp::{Endpoint, EndpointConfig, SendOptions};
use braid_core::transport::{Protection, Psk};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use tokio::net::UdpSocket;

fn local() -> SocketAddr {
    "127.0.0.1:0".parse().expect("literal address")
}

fn config(server: bool, mode: Protection) -> EndpointConfig {
    let mut c = if server {
        EndpointConfig::server()
    } else {
        EndpointConfig::default()
    };
    c.transport.psk = Some(Psk::from_bytes([5; 32]));
    c.transport.protection = mode;
    c
}

/// Most datagrams the forwarder keeps for inspection.
const MAX_CAPTURE: usize = 200_000;

/// What the forwarder saw.
#[derive(Default)]
struct Capture {
    datagrams: Vec<Vec<u8>>,
    altered: u64,
}

/// Starts a forwarder to `server`: clients send to the returned address.
/// Every `alter_every`-th large client → server datagram gets one byte
/// flipped (0: none). Stops with the test's runtime.
async fn forwarder(server: SocketAddr, alter_every: u64) -> (SocketAddr, Arc<Mutex<Capture>>) {
    let front = UdpSocket::bind(local()).await.expect("bind front");
    let back = UdpSocket::bind(local()).await.expect("bind back");
    let addr = front.local_addr().expect("front address");
    let cap = Arc::new(Mutex::new(Capture::default()));
    let seen = cap.clone();
    tokio::spawn(async move {
        let (mut a, mut b) = (vec![0u8; 65536], vec![0u8; 65536]);
        let mut client = None;
        let mut n = 0u64;
        loop {
            tokio::select! {
                r = front.recv_from(&mut a) => {
                    let Ok((len, from)) = r else { return };
                    client = Some(from);
                    let d = &mut a[..len];
                    {
                        let mut c = seen.lock().expect("capture lock");
                        if c.datagrams.len() < MAX_CAPTURE {
                            c.datagrams.push(d.to_vec());
                        }
                        if len > 1000 {
                            n += 1;
                            if alter_every > 0 && n % alter_every == 0 {
                                d[len / 2] ^= 0x10;
                                c.altered += 1;
                            }
                        }
                    }
                    let _ = back.send_to(d, server).await;
                }
                r = back.recv_from(&mut b) => {
                    let Ok((len, _)) = r else { return };
                    {
                        let mut c = seen.lock().expect("capture lock");
                        if c.datagrams.len() < MAX_CAPTURE {
                            c.datagrams.push(b[..len].to_vec());
                        }
                    }
                    if let Some(to) = client {
                        let _ = front.send_to(&b[..len], to).await;
                    }
                }
            }
        }
    });
    (addr, cap)
}

const MARKER: &[u8] = b"braid-payload-marker:";

/// Sends `messages` messages of 64 KiB full of [`MARKER`] through a
/// forwarder; returns what arrived, the server's decrypt_failed count and
/// the capture.
async fn transfer(
    mode: Protection,
    alter_every: u64,
    messages: usize,
) -> (Vec<Vec<u8>>, u64, Capture) {
    let mut server = Endpoint::bind(local(), config(true, mode)).expect("server");
    let client = Endpoint::bind(local(), config(false, mode)).expect("client");
    let (via, cap) = forwarder(server.local_addr(), alter_every).await;
    let (c, s) = tokio::join!(client.connect(via), server.accept());
    let (c, mut s) = (c.expect("connected"), s.expect("accepted"));
    let message: Vec<u8> = MARKER.iter().copied().cycle().take(64 << 10).collect();
    let stream = c.open_stream(SendOptions::RELIABLE).expect("stream");
    let sender = tokio::spawn(async move {
        for _ in 0..messages {
            stream.send(message.clone()).await.expect("send");
        }
        (stream, c)
    });
    let mut got = Vec::new();
    while got.len() < messages {
        got.push(s.recv().await.expect("a message").data);
    }
    let _keep = sender.await.expect("sender");
    let failed = server.stats().await.expect("stats").endpoint.decrypt_failed;
    let capture = std::mem::take(&mut *cap.lock().expect("capture lock"));
    (got, failed, capture)
}

fn marker_seen(cap: &Capture) -> bool {
    cap.datagrams
        .iter()
        .any(|d| d.windows(MARKER.len()).any(|w| w == MARKER))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn encrypted_bytes_stay_off_the_wire_and_altered_packets_are_refused() {
    let (got, failed, cap) = transfer(Protection::Encrypt, 9, 16).await;
    let want: Vec<u8> = MARKER.iter().copied().cycle().take(64 << 10).collect();
    assert!(got.iter().all(|m| *m == want), "delivered intact");
    assert!(cap.altered > 0, "the forwarder altered packets");
    assert!(
        failed > 0 && failed <= cap.altered,
        "{failed} of {}",
        cap.altered
    );
    assert!(!marker_seen(&cap), "message bytes visible on the wire");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_encrypt_sends_in_clear_but_still_refuses_altered_packets() {
    let (got, failed, cap) = transfer(Protection::IntegrityOnly, 9, 16).await;
    let want: Vec<u8> = MARKER.iter().copied().cycle().take(64 << 10).collect();
    assert!(got.iter().all(|m| *m == want), "delivered intact");
    assert!(cap.altered > 0 && failed > 0, "{failed} of {}", cap.altered);
    assert!(marker_seen(&cap), "--no-encrypt leaves the bytes readable");
}
