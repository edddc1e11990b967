//! Scenario tests of packet protection ([`super::protection`]) on virtual
//! time: tampered, replayed, injected and unprotected packets are dropped
//! and counted without harming the connection; payload bytes stay off the
//! wire when encrypting; `--no-encrypt` interoperates with itself and is
//! refused, with a clear reason, against an encrypting peer.

use super::tests::{addr, Net, CLIENT, SERVER};
use super::*;
use crate::time::Duration;
use crate::wire::{ConnectionId, Frame, Header, PacketBuilder, PacketType, StreamFrame};

fn keyed(mode: Protection) -> Config {
    Config {
        psk: Some(Psk::from_bytes([7; 32])),
        protection: mode,
        ..Config::default()
    }
}

const MODES: [Protection; 2] = [Protection::Encrypt, Protection::IntegrityOnly];

/// A recognisable payload of `len` bytes.
fn payload(len: usize) -> Vec<u8> {
    b"braid-secret-payload:"
        .iter()
        .copied()
        .cycle()
        .take(len)
        .collect()
}

/// Sends `data` as one reliable message from client to server and runs
/// until it arrives (or a minute of virtual time passes).
fn transfer(net: &mut Net, c: ConnectionHandle, s: ConnectionHandle, data: &[u8]) -> Vec<u8> {
    let cc = net.client.connection_mut(c).unwrap();
    cc.send(net.now, StreamId(0), data.to_vec(), SendOptions::RELIABLE)
        .unwrap();
    let mut got = None;
    net.run(Duration::from_secs(60), |n| {
        got = n.server.connection_mut(s).unwrap().recv(n.now);
        got.is_some()
    });
    got.expect("the message arrives").data
}

/// True for a DATA packet (short header) of this protocol version.
fn is_data(d: &[u8]) -> bool {
    d.first().is_some_and(|b| b >> 4 == 4)
}

#[test]
fn a_tampered_packet_is_counted_and_the_transfer_completes_intact() {
    for mode in MODES {
        let mut net = Net::new(21, keyed(mode));
        let (c, s) = net.connect();
        let mut n = 0u32;
        net.pipe.corrupt = Some(Box::new(move |to, d| {
            n += 1;
            if to == addr(SERVER) && is_data(d) && n % 4 == 0 {
                let i = d.len() / 2;
                d[i] ^= 0x20;
            }
        }));
        let data = payload(200_000);
        assert_eq!(transfer(&mut net, c, s, &data), data, "{mode:?}");
        let sc = net.server.connection(s).unwrap();
        assert!(sc.is_established());
        let failed = sc.stats().decrypt_failed;
        assert!(failed > 0, "{mode:?}");
        assert_eq!(net.server.stats().decrypt_failed, failed);
        assert_eq!(
            net.server.stats().malformed,
            0,
            "nothing reached the decoder"
        );
    }
}

#[test]
fn a_packet_that_does_not_open_changes_nothing() {
    let mut net = Net::new(22, keyed(Protection::Encrypt));
    net.pipe.keep_log = true;
    let (c, s) = net.connect();
    let data = payload(5_000);
    assert_eq!(transfer(&mut net, c, s, &data), data);
    // Let every ACK and timer settle.
    net.run(Duration::from_secs(1), |_| false);
    let genuine = net
        .pipe
        .log
        .iter()
        .rev()
        .find(|(from, _, d)| *from == addr(CLIENT) && is_data(d))
        .map(|(_, _, d)| d.clone())
        .unwrap();
    let sc = net.server.connection(s).unwrap();
    let (before, timeout) = (sc.stats(), sc.poll_timeout());
    let mut forged = genuine.clone();
    let last = forged.len() - 1;
    forged[last] ^= 1; // the tag
    net.server
        .handle_datagram(net.now, FourTuple::from_remote(addr(CLIENT)), &forged);
    let sc = net.server.connection(s).unwrap();
    let after = sc.stats();
    assert_eq!(after.decrypt_failed, before.decrypt_failed + 1);
    assert_eq!(after.packets_received, before.packets_received);
    assert_eq!(after.bytes_received, before.bytes_received);
    assert_eq!(after.duplicates, before.duplicates);
    assert_eq!(
        sc.poll_timeout(),
        timeout,
        "no idle-timer reset, no ACK owed"
    );
    let mut buf = Vec::new();
    assert!(
        net.server.poll_transmit(net.now, &mut buf).is_none(),
        "no ACK"
    );
}

/// An unprotected DATA packet to `dst` carrying `frame`, as a third party
/// that saw the connection id would build it.
fn forged(dst: ConnectionId, pn: u64, frame: &Frame<'_>) -> Vec<u8> {
    let h = Header {
        ty: PacketType::Data,
        dst_cid: dst,
        src_cid: None,
        pn,
    };
    let mut out = Vec::new();
    let mut b = PacketBuilder::new(&mut out, &h, 1400).unwrap();
    assert!(b.push(frame).unwrap());
    b.finish();
    out
}

#[test]
fn injected_packets_with_a_live_connection_id_are_refused() {
    for mode in MODES {
        let mut net = Net::new(23, keyed(mode));
        let (c, s) = net.connect();
        let server_cid = net.server.connection(s).unwrap().local_cid();
        let client_cid = net.client.connection(c).unwrap().local_cid();
        let data = payload(100_000);
        net.client
            .connection_mut(c)
            .unwrap()
            .send(net.now, StreamId(0), data.clone(), SendOptions::RELIABLE)
            .unwrap();
        let evil = vec![0x55u8; 1000];
        let mut got = None;
        let mut injected = 0u64;
        net.run(Duration::from_secs(60), |n| {
            if injected < 50 {
                // From the client's address and from a third one: a STREAM
                // frame claiming the same message, and a CLOSE each way.
                let stream = Frame::Stream(StreamFrame {
                    stream: StreamId(0),
                    message: 0,
                    message_len: data.len() as u64,
                    offset: injected * 1000,
                    reliability: Reliability::Reliable,
                    depends_back: None,
                    ttl_us: None,
                    data: &evil,
                });
                let close = Frame::Close(crate::wire::CloseFrame {
                    code: ErrorCode::NO_ERROR,
                    reason: b"bye",
                });
                for (from, d) in [
                    (addr(CLIENT), forged(server_cid, 10_000 + injected, &stream)),
                    (addr(9), forged(server_cid, 20_000 + injected, &close)),
                ] {
                    n.server
                        .handle_datagram(n.now, FourTuple::from_remote(from), &d);
                }
                let d = forged(client_cid, 30_000 + injected, &close);
                n.client
                    .handle_datagram(n.now, FourTuple::from_remote(addr(SERVER)), &d);
                injected += 1;
            }
            got = n.server.connection_mut(s).unwrap().recv(n.now);
            got.is_some()
        });
        assert_eq!(got.expect("delivered").data, data, "{mode:?}: intact");
        assert_eq!(injected, 50);
        let (sc, cc) = (
            net.server.connection(s).unwrap(),
            net.client.connection(c).unwrap(),
        );
        assert!(sc.is_established() && cc.is_established());
        assert_eq!(sc.stats().decrypt_failed, 100);
        assert_eq!(cc.stats().decrypt_failed, 50);
        assert_eq!(net.server.stats().decrypt_failed, 100);
    }
}

#[test]
fn replayed_packets_are_rejected_and_counted() {
    let mut net = Net::new(24, keyed(Protection::Encrypt));
    net.pipe.keep_log = true;
    let (c, s) = net.connect();
    let data = payload(20_000);
    assert_eq!(transfer(&mut net, c, s, &data), data);
    net.run(Duration::from_secs(1), |_| false);
    let replays: Vec<Vec<u8>> = net
        .pipe
        .log
        .iter()
        .filter(|(from, _, d)| *from == addr(CLIENT) && is_data(d))
        .map(|(_, _, d)| d.clone())
        .collect();
    assert!(replays.len() > 10);
    let before = net.server.connection(s).unwrap().stats();
    for d in &replays {
        net.server
            .handle_datagram(net.now, FourTuple::from_remote(addr(CLIENT)), d);
    }
    let sc = net.server.connection_mut(s).unwrap();
    let after = sc.stats();
    assert_eq!(after.replayed, before.replayed + replays.len() as u64);
    assert_eq!(after.decrypt_failed, before.decrypt_failed);
    assert_eq!(after.packets_received, before.packets_received);
    assert!(sc.recv(net.now).is_none(), "nothing delivered twice");
    assert!(sc.is_established());
}

#[test]
fn payload_bytes_stay_off_the_wire_only_when_encrypting() {
    for mode in MODES {
        let mut net = Net::new(25, keyed(mode));
        net.pipe.keep_log = true;
        let (c, s) = net.connect();
        let data = payload(50_000);
        assert_eq!(transfer(&mut net, c, s, &data), data);
        let marker = b"braid-secret-payload:";
        let seen = net
            .pipe
            .log
            .iter()
            .any(|(_, _, d)| d.windows(marker.len()).any(|w| w == marker));
        assert_eq!(seen, mode == Protection::IntegrityOnly, "{mode:?}");
        assert_eq!(net.server.connection(s).unwrap().protection(), Some(mode));
        assert_eq!(net.client.connection(c).unwrap().protection(), Some(mode));
    }
}

#[test]
fn a_protection_mode_mismatch_is_refused_with_a_clear_reason() {
    for (client, server, says) in [
        (
            Protection::IntegrityOnly,
            Protection::Encrypt,
            "the client has --no-encrypt",
        ),
        (
            Protection::Encrypt,
            Protection::IntegrityOnly,
            "the server has --no-encrypt",
        ),
    ] {
        let mut net = Net::with_configs(26, keyed(client), keyed(server));
        let c = net.client.connect(net.now, addr(SERVER)).unwrap();
        net.run(Duration::from_secs(20), |n| {
            n.client.connection(c).unwrap().is_closed()
        });
        let cc = net.client.connection_mut(c).unwrap();
        let evs: Vec<Event> = std::iter::from_fn(|| cc.poll_event()).collect();
        let Some(Event::Closed(CloseReason::Peer { code, reason })) = evs.last() else {
            panic!("refused: {evs:?}");
        };
        assert_eq!(*code, ErrorCode::AUTH_FAILED);
        assert!(
            reason.starts_with(auth::REASON_MODE_MISMATCH_PREFIX) && reason.contains(says),
            "{reason}"
        );
        assert!(!evs.contains(&Event::Connected));
        let st = net.server.stats();
        assert_eq!((st.auth_failed, st.accepted), (1, 0));
        assert_eq!(net.server.connection_count(), 0, "the server keeps nothing");
    }
}

#[test]
fn keyless_connections_are_unchanged_and_unprotected() {
    let mut net = Net::new(27, Config::default());
    net.pipe.keep_log = true;
    let (c, s) = net.connect();
    let data = payload(10_000);
    assert_eq!(transfer(&mut net, c, s, &data), data);
    assert_eq!(net.server.connection(s).unwrap().protection(), None);
    let marker = b"braid-secret-payload:";
    assert!(net
        .pipe
        .log
        .iter()
        .any(|(_, _, d)| d.windows(marker.len()).any(|w| w == marker)));
}

/// A datagram appended after other bytes (a driver's GSO batch) is sealed
/// over its own bytes only: the bytes before it are untouched and the
/// packet opens at the peer; with nothing to send, the buffer is as it was.
#[test]
fn a_packet_appended_after_others_is_sealed_alone_and_opens() {
    for mode in MODES {
        let mut net = Net::new(23, keyed(mode));
        let (c, s) = net.connect();
        net.run(Duration::from_secs(1), |_| false);
        let prefix = b"an earlier datagram of the batch".to_vec();
        let mut buf = prefix.clone();
        assert!(
            net.client.poll_transmit_append(net.now, &mut buf).is_none(),
            "{mode:?}: nothing to send yet"
        );
        assert_eq!(buf, prefix, "{mode:?}: left as it was");
        let cc = net.client.connection_mut(c).unwrap();
        cc.send(net.now, StreamId(0), payload(900), SendOptions::RELIABLE)
            .unwrap();
        let t = net
            .client
            .poll_transmit_append(net.now, &mut buf)
            .expect("the message's packet");
        assert_eq!(buf.len(), prefix.len() + t.size, "{mode:?}");
        assert_eq!(&buf[..prefix.len()], &prefix[..], "{mode:?}: untouched");
        let before = net.server.connection(s).unwrap().stats();
        net.server.handle_datagram(
            net.now,
            FourTuple::from_remote(addr(CLIENT)),
            &buf[prefix.len()..],
        );
        let after = net.server.connection(s).unwrap().stats();
        assert_eq!(after.decrypt_failed, before.decrypt_failed, "{mode:?}");
        assert_eq!(
            after.packets_received,
            before.packets_received + 1,
            "{mode:?}"
        );
        let got = net.server.connection_mut(s).unwrap().recv(net.now);
        assert_eq!(got.map(|m| m.data), Some(payload(900)), "{mode:?}");
    }
}
