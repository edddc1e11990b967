//! Entry points shared by the cargo-fuzz targets in `fuzz/` and the plain
//! test that replays `fuzz/corpus/` in CI. Not part of the stable API.
//!
//! Each function takes arbitrary bytes and must never panic; what it
//! checks beyond that is in its doc comment.

use super::{Config, Endpoint, FourTuple, Protection, Psk, SendOptions, StreamId};
use crate::time::{Duration, Instant};
use crate::wire::{
    Frame, Header, Packet, PacketBuilder, PacketType, Reader, MAX_AUTH_LEN, MIN_DATAGRAM_SIZE,
};
use std::net::SocketAddr;

/// Most datagrams one fuzz input is cut into.
pub const MAX_FUZZ_DATAGRAMS: usize = 64;

/// Decodes `data` as a datagram; whatever decodes must re-encode, frame by
/// frame, to bytes that decode to the same frames.
pub fn decode_packet(data: &[u8]) {
    let Ok(p) = Packet::decode(data) else {
        return;
    };
    let mut out = Vec::new();
    let mut frames = Vec::new();
    for f in p.frames() {
        let Ok(f) = f else {
            // Invariant of `Packet::decode`: every frame decodes.
            panic!("validated packet yielded a bad frame");
        };
        f.encode(&mut out).expect("decoded frame re-encodes");
        frames.push(f);
    }
    let mut r = Reader::new(&out);
    for f in frames {
        let g = Frame::decode(&mut r).expect("re-encoded frame decodes");
        assert_eq!(f, g, "round trip");
    }
}

fn addr(last: u8) -> SocketAddr {
    SocketAddr::from(([10, 0, 0, last], 4433))
}

/// A client and a server endpoint with one established connection,
/// connected by exchanging datagrams directly (no loss).
fn established() -> (Endpoint, Endpoint, Instant) {
    established_with(Config::default())
}

/// [`established`] with `cfg` on both sides.
fn established_with(cfg: Config) -> (Endpoint, Endpoint, Instant) {
    let mut client = Endpoint::new(cfg.clone(), [1; 32], false).expect("valid config");
    let mut server = Endpoint::new(cfg, [2; 32], true).expect("valid config");
    let mut now = Instant::ZERO;
    // Invariant: the default config allows connections.
    let h = client.connect(now, addr(2)).expect("room for a connection");
    let mut buf = Vec::new();
    for _ in 0..100 {
        while let Some(t) = client.poll_transmit(now, &mut buf) {
            server.handle_datagram(now, FourTuple::from_remote(addr(1)), &buf[..t.size]);
        }
        while let Some(t) = server.poll_transmit(now, &mut buf) {
            client.handle_datagram(now, FourTuple::from_remote(addr(2)), &buf[..t.size]);
        }
        let up = |ep: &Endpoint| {
            ep.handles()
                .first()
                .and_then(|h| ep.connection(*h))
                .is_some_and(|c| c.is_established())
        };
        if up(&client) && up(&server) {
            break;
        }
        now += Duration::from_millis(5);
        client.handle_timeout(now);
        server.handle_timeout(now);
    }
    if let Some(c) = client.connection_mut(h) {
        let _ = c.send(now, StreamId(0), vec![7; 3000], SendOptions::RELIABLE);
    }
    (client, server, now)
}

/// Feeds arbitrary datagrams to an established server endpoint and its
/// connection, then lets both sides run their timers and transmit.
///
/// Input: repeated `[flags, len, bytes…]`. `flags & 1` prefixes a valid
/// DATA header addressed to the server's connection (so the bytes reach
/// frame processing); `flags & 2` sends to the client instead; `flags & 4`
/// advances time by `len` milliseconds first.
pub fn connection_datagrams(data: &[u8]) {
    let (client, server, now) = established();
    feed(client, server, now, data, false);
}

/// [`connection_datagrams`] against keyed endpoints: the first input byte
/// picks the protection mode (odd: `--no-encrypt`), the rest is as there,
/// plus `flags & 8`: seal the datagram (which needs `flags & 1`) with the
/// key of the side that would send it, so its frames reach frame
/// processing. A datagram that is not sealed must change nothing of the
/// connection it is addressed to (no packet counted as received).
pub fn keyed_datagrams(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let cfg = Config {
        psk: Some(Psk::from_bytes([7; 32])),
        protection: if mode & 1 == 1 {
            Protection::IntegrityOnly
        } else {
            Protection::Encrypt
        },
        ..Config::default()
    };
    let (client, server, now) = established_with(cfg);
    feed(client, server, now, rest, true);
}

/// The loop of [`connection_datagrams`] and [`keyed_datagrams`].
fn feed(mut client: Endpoint, mut server: Endpoint, mut now: Instant, data: &[u8], keyed: bool) {
    let server_cid = server
        .handles()
        .first()
        .and_then(|h| server.connection(*h))
        .map(|c| c.local_cid());
    let client_cid = client
        .handles()
        .first()
        .and_then(|h| client.connection(*h))
        .map(|c| c.local_cid());
    let mut r = Reader::new(data);
    let mut pn = 1000;
    let mut buf = Vec::new();
    for _ in 0..MAX_FUZZ_DATAGRAMS {
        let (Ok(flags), Ok(len)) = (r.u8(), r.u8()) else {
            break;
        };
        let take = usize::from(len).min(r.remaining());
        let Ok(body) = r.bytes(take) else { break };
        if flags & 4 != 0 {
            now += Duration::from_millis(u64::from(len));
        }
        let to_client = flags & 2 != 0;
        let cid = if to_client { client_cid } else { server_cid };
        let mut dgram = Vec::new();
        let mut header = None;
        if flags & 1 != 0 {
            if let Some(cid) = cid {
                let h = Header {
                    ty: PacketType::Data,
                    dst_cid: cid,
                    src_cid: None,
                    pn,
                };
                pn += 1;
                if let Ok(b) = PacketBuilder::new(&mut dgram, &h, 1472) {
                    b.finish();
                    header = Some(h);
                }
            }
        }
        dgram.extend_from_slice(body);
        let mut sealed = false;
        if let (true, true, Some(h)) = (keyed, flags & 8 != 0, header) {
            // Sealed by the peer of the receiving side, as it would be.
            let sender = if to_client { &server } else { &client };
            let keys = sender
                .handles()
                .first()
                .and_then(|x| sender.connection(*x))
                .and_then(|c| c.keys.as_ref());
            if let Some(k) = keys {
                sealed = k.packet.seal(h.pn, &mut dgram, 0, h.encoded_len()).is_ok();
            }
        }
        let (ep, from) = if to_client {
            (&mut client, addr(2))
        } else {
            (&mut server, addr(1))
        };
        let target = ep.handles().first().copied();
        let received = |ep: &Endpoint| {
            target
                .and_then(|t| ep.connection(t))
                .map(|c| c.stats().packets_received)
        };
        let before = received(ep);
        ep.handle_datagram(now, FourTuple::from_remote(from), &dgram);
        if keyed && !sealed {
            assert_eq!(received(ep), before, "an unsealed datagram was accepted");
        }
        for ep in [&mut client, &mut server] {
            ep.handle_timeout(now);
            let mut n = 0;
            while ep.poll_transmit(now, &mut buf).is_some() && n < 256 {
                n += 1;
            }
            for h in ep.handles() {
                if let Some(c) = ep.connection_mut(h) {
                    while c.poll_event().is_some() {}
                    while c.recv(now).is_some() {}
                    let _ = c.stats();
                }
            }
        }
    }
}

/// Arbitrary Noise messages against keyed endpoints, after a genuine
/// cookie exchange. Input: `[n, message 1 (n bytes), message 2 (rest)]`,
/// each cut to [`MAX_AUTH_LEN`]. Message 1 goes to a keyed server in the
/// client's cookie-echoing INITIAL: the server must count a refusal or
/// accept, never anything else. Message 2 goes to a keyed client in a
/// HANDSHAKE: the client must not count itself connected on forged bytes.
pub fn auth_messages(data: &[u8]) {
    let cfg = Config {
        psk: Some(Psk::from_bytes([7; 32])),
        ..Config::default()
    };
    let mut client = Endpoint::new(cfg.clone(), [1; 32], false).expect("valid config");
    let mut server = Endpoint::new(cfg, [2; 32], true).expect("valid config");
    let now = Instant::ZERO;
    let (c, s) = (
        FourTuple::from_remote(addr(1)),
        FourTuple::from_remote(addr(2)),
    );
    let h = client.connect(now, addr(2)).expect("room for a connection");
    let mut buf = Vec::new();
    // First INITIAL → RETRY → the client's echo (with its own message 1).
    let Some(t) = client.poll_transmit(now, &mut buf) else {
        return;
    };
    server.handle_datagram(now, c, &buf[..t.size]);
    let Some(t) = server.poll_transmit(now, &mut buf) else {
        return;
    };
    client.handle_datagram(now, s, &buf[..t.size]);
    let Some(t) = client.poll_transmit(now, &mut buf) else {
        return;
    };
    let echo = buf[..t.size].to_vec();
    let Ok(p) = Packet::decode(&echo) else {
        return;
    };
    let mut r = Reader::new(data);
    let n = usize::from(r.u8().unwrap_or(0)).min(r.remaining());
    let m1 = r.bytes(n).unwrap_or_default();
    let m2 = r.rest();
    // The echo again, its AUTH frame replaced by the fuzzed message 1.
    let mut forged = Vec::new();
    if let Ok(mut b) = PacketBuilder::new(&mut forged, &p.header, MIN_DATAGRAM_SIZE) {
        for f in p.frames().flatten() {
            match f {
                Frame::Auth { .. } | Frame::Padding { .. } => {}
                f => {
                    let _ = b.push(&f);
                }
            }
        }
        if !m1.is_empty() {
            let _ = b.push(&Frame::Auth {
                message: &m1[..m1.len().min(MAX_AUTH_LEN)],
            });
        }
        b.pad_to(MIN_DATAGRAM_SIZE);
        b.finish();
    }
    let before = server.stats();
    server.handle_datagram(now, c, &forged);
    let after = server.stats();
    assert!(
        after.auth_failed + after.accepted == before.auth_failed + before.accepted + 1,
        "a validated echo is refused or accepted"
    );
    assert!(after.auth_failed == before.auth_failed || server.connection_count() == 0);
    // A HANDSHAKE to the client with the fuzzed message 2.
    let Some(cid) = client.connection(h).map(|x| x.local_cid()) else {
        return;
    };
    let header = Header {
        ty: PacketType::Handshake,
        dst_cid: cid,
        src_cid: Some(crate::wire::ConnectionId([9; 8])),
        pn: 0,
    };
    let mut hs = Vec::new();
    if let Ok(mut b) = PacketBuilder::new(&mut hs, &header, 1472) {
        let _ = b.push(&Frame::Handshake {
            params: super::connection::params_of(&Config::default()),
        });
        if !m2.is_empty() {
            let _ = b.push(&Frame::Auth {
                message: &m2[..m2.len().min(MAX_AUTH_LEN)],
            });
        }
        b.finish();
    }
    client.handle_datagram(now, s, &hs);
    if let Some(x) = client.connection_mut(h) {
        assert!(!x.is_established(), "forged message 2 accepted");
        while let Some(e) = x.poll_event() {
            assert!(e != super::Event::Connected, "forged message 2 accepted");
        }
    }
}

/// A fuzz target's corpus folder name and its entry point.
#[cfg(test)]
pub(crate) type Target<'a> = (&'a str, fn(&[u8]));

/// Feeds every file in `fuzz/corpus/<target>/` to its entry point (tests
/// only: the corpus replays in CI without nightly); returns how many ran.
#[cfg(test)]
pub(crate) fn replay_corpus(targets: &[Target<'_>]) -> usize {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus");
    let mut n = 0;
    for (target, f) in targets {
        let Ok(dir) = std::fs::read_dir(root.join(target)) else {
            continue;
        };
        for entry in dir.flatten() {
            if let Ok(bytes) = std::fs::read(entry.path()) {
                f(&bytes);
                n += 1;
            }
        }
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Replays every file in `fuzz/corpus/<target>/` through the same entry
    /// points the fuzz targets use, so CI exercises them without nightly.
    #[test]
    fn replays_the_fuzz_corpus() {
        let n = replay_corpus(&[
            ("packet_decode", decode_packet as fn(&[u8])),
            ("connection_datagram", connection_datagrams as fn(&[u8])),
            ("keyed_datagram", keyed_datagrams as fn(&[u8])),
            ("auth_handshake", auth_messages as fn(&[u8])),
        ]);
        assert!(n > 0, "no transport corpus under fuzz/corpus");
    }

    /// Writes the seed corpus (run once by hand:
    /// `cargo test -p braid-core write_seed_corpus -- --ignored`).
    #[test]
    #[ignore]
    fn write_seed_corpus() {
        use crate::wire::{AckFrame, AckRange, ConnectionId, Reliability, StreamFrame};
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus");
        let dir = root.join("packet_decode");
        std::fs::create_dir_all(&dir).unwrap();
        let h = Header {
            ty: PacketType::Data,
            dst_cid: ConnectionId([3; 8]),
            src_cid: None,
            pn: 77,
        };
        let frames: Vec<Frame<'_>> = vec![
            Frame::Ping,
            Frame::Ack(
                AckFrame::new(
                    10,
                    &[AckRange { start: 5, end: 9 }, AckRange { start: 0, end: 2 }],
                )
                .unwrap(),
            ),
            Frame::Stream(StreamFrame {
                stream: StreamId(1),
                message: 4,
                message_len: 10,
                offset: 2,
                reliability: Reliability::Unreliable,
                depends_back: Some(2),
                ttl_us: Some(1000),
                data: b"abcdef",
            }),
            Frame::MaxData { limit: 1 << 20 },
            Frame::MessageSkip {
                stream: StreamId(0),
                message: 1,
                message_len: 5,
                reliability: Reliability::Reliable,
                depends_back: None,
            },
        ];
        for (i, f) in frames.iter().enumerate() {
            let mut buf = Vec::new();
            let mut b = PacketBuilder::new(&mut buf, &h, 1400).unwrap();
            b.push(f).unwrap();
            b.finish();
            std::fs::write(dir.join(format!("data-{i}")), &buf).unwrap();
        }
        // A client's first flight, as a whole exchange produced it.
        let mut client = Endpoint::new(Config::default(), [1; 32], false).unwrap();
        client.connect(Instant::ZERO, addr(2)).unwrap();
        let mut buf = Vec::new();
        let t = client.poll_transmit(Instant::ZERO, &mut buf).unwrap();
        std::fs::write(dir.join("initial"), &buf[..t.size]).unwrap();
        let dir = root.join("connection_datagram");
        std::fs::create_dir_all(&dir).unwrap();
        // [flags, len, body]: frames behind a valid header.
        let mut input = Vec::new();
        for f in &frames {
            let mut body = Vec::new();
            f.encode(&mut body).unwrap();
            input.push(1u8);
            input.push(body.len() as u8);
            input.extend_from_slice(&body);
        }
        input.extend_from_slice(&[5, 200]);
        std::fs::write(dir.join("frames"), &input).unwrap();
        std::fs::write(dir.join("garbage"), [0u8, 4, 1, 2, 3, 4, 2, 3, 9, 9, 9]).unwrap();
        write_keyed_seed_corpus(&root, &frames);
    }

    /// Writes `fuzz/corpus/keyed_datagram/` (also run by hand:
    /// `cargo test -p braid-core write_keyed_seed_corpus -- --ignored`).
    fn write_keyed_seed_corpus(root: &std::path::Path, frames: &[Frame<'_>]) {
        let dir = root.join("keyed_datagram");
        std::fs::create_dir_all(&dir).unwrap();
        for mode in [0u8, 1] {
            // The same frames sealed (flags 9), then unsealed (flags 1),
            // then to the client sealed (flags 11).
            let mut input = vec![mode];
            for flags in [9u8, 1, 11] {
                for f in frames {
                    let mut body = Vec::new();
                    f.encode(&mut body).unwrap();
                    input.push(flags);
                    input.push(body.len() as u8);
                    input.extend_from_slice(&body);
                }
            }
            input.extend_from_slice(&[5, 200]);
            std::fs::write(dir.join(format!("frames-mode{mode}")), &input).unwrap();
        }
    }

    #[test]
    #[ignore]
    fn write_keyed_seed_corpus_only() {
        use crate::wire::{ConnectionId, Reliability, StreamFrame};
        let _ = ConnectionId([0; 8]);
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus");
        let frames = vec![
            Frame::Ping,
            Frame::Stream(StreamFrame {
                stream: StreamId(1),
                message: 0,
                message_len: 6,
                offset: 0,
                reliability: Reliability::Reliable,
                depends_back: None,
                ttl_us: None,
                data: b"abcdef",
            }),
            Frame::MaxData { limit: 1 << 20 },
        ];
        write_keyed_seed_corpus(&root, &frames);
    }

    #[test]
    fn the_fuzzed_connection_is_established() {
        let (c, s, _) = established();
        for ep in [&c, &s] {
            let h = ep.handles()[0];
            assert!(ep.connection(h).unwrap().is_established());
        }
    }

    #[test]
    fn entry_points_take_edge_inputs() {
        for input in [&[][..], &[0], &[1, 0], &[7, 255, 1, 2, 3], &[0xff; 600]] {
            decode_packet(input);
            connection_datagrams(input);
            keyed_datagrams(input);
            auth_messages(input);
        }
    }
}
