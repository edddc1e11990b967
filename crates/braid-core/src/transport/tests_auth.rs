//! Scenario tests of the authenticated handshake ([`super::auth`]) on
//! virtual time: who gets a connection, what a refused side hears, what
//! the server keeps (nothing) and counts.

use super::auth::{REASON_KEY_MISMATCH, REASON_KEY_REQUIRED, REASON_NO_KEY};
use super::tests::{addr, Net, CLIENT, SERVER};
use super::*;
use crate::time::{Duration, Instant};
use crate::wire::{Frame, Packet, PacketBuilder, PacketType};

fn keyed(k: u8) -> Config {
    Config {
        psk: Some(Psk::from_bytes([k; 32])),
        ..Config::default()
    }
}

/// Connects and runs until the client's connection is established or
/// closed; returns the client's handle.
fn attempt(net: &mut Net) -> ConnectionHandle {
    let c = net.client.connect(net.now, addr(SERVER)).unwrap();
    net.run(Duration::from_secs(20), |n| {
        n.server.accept();
        let cc = n.client.connection(c).unwrap();
        cc.is_established() || cc.is_closed()
    });
    c
}

fn events(ep: &mut Endpoint, h: ConnectionHandle) -> Vec<Event> {
    let c = ep.connection_mut(h).unwrap();
    std::iter::from_fn(|| c.poll_event()).collect()
}

fn refused_with(net: &mut Net, c: ConnectionHandle, phrase: &str) {
    let evs = events(&mut net.client, c);
    assert!(!evs.contains(&Event::Connected), "{evs:?}");
    assert_eq!(
        evs.last(),
        Some(&Event::Closed(CloseReason::Peer {
            code: ErrorCode::AUTH_FAILED,
            reason: phrase.into()
        }))
    );
    let cc = net.client.connection(c).unwrap();
    assert!(cc.is_closed() && !cc.is_authenticated());
    let st = net.server.stats();
    assert_eq!(st.auth_failed, 1, "counted once");
    assert_eq!(st.accepted, 0);
    assert_eq!(net.server.connection_count(), 0, "the server keeps nothing");
    // Refused at once, with the server's first answer to the echo: well
    // within one initial RTT of backoff, far from any timeout.
    assert!(
        net.now < Instant::ZERO + Duration::from_secs(1),
        "{:?}",
        net.now
    );
}

#[test]
fn the_same_key_connects_and_both_sides_are_authenticated() {
    let mut net = Net::new(1, keyed(7));
    let (c, s) = net.connect();
    assert!(net.client.connection(c).unwrap().is_authenticated());
    assert!(net.server.connection(s).unwrap().is_authenticated());
    let st = net.server.stats();
    assert_eq!((st.accepted, st.auth_failed, st.retries_sent), (1, 0, 1));
    assert_eq!(events(&mut net.client, c), vec![Event::Connected]);
    // Data flows as without a key.
    let cc = net.client.connection_mut(c).unwrap();
    cc.send(
        net.now,
        StreamId(0),
        b"hello".to_vec(),
        SendOptions::RELIABLE,
    )
    .unwrap();
    let mut got = None;
    net.run(Duration::from_secs(5), |n| {
        got = n.server.connection_mut(s).unwrap().recv(n.now);
        got.is_some()
    });
    assert_eq!(got.unwrap().data, b"hello");
}

#[test]
fn keys_survive_loss_of_handshake_packets() {
    let mut net = Net::new(5, keyed(7));
    net.pipe.loss = 0.3;
    let (c, s) = net.connect();
    assert!(net.client.connection(c).unwrap().is_authenticated());
    assert!(net.server.connection(s).unwrap().is_authenticated());
    assert_eq!(net.server.stats().auth_failed, 0);
}

#[test]
fn a_wrong_key_creates_nothing_and_the_client_hears_why() {
    let mut net = Net::with_configs(2, keyed(1), keyed(2));
    let c = attempt(&mut net);
    refused_with(&mut net, c, REASON_KEY_MISMATCH);
}

#[test]
fn a_server_with_a_key_refuses_a_client_without_one() {
    let mut net = Net::with_configs(3, Config::default(), keyed(2));
    let c = attempt(&mut net);
    refused_with(&mut net, c, REASON_KEY_REQUIRED);
}

#[test]
fn a_server_without_a_key_refuses_a_client_with_one() {
    let mut net = Net::with_configs(4, keyed(1), Config::default());
    let c = attempt(&mut net);
    refused_with(&mut net, c, REASON_NO_KEY);
}

#[test]
fn without_keys_nothing_changes() {
    let mut net = Net::new(6, Config::default());
    let (c, s) = net.connect();
    assert!(!net.client.connection(c).unwrap().is_authenticated());
    assert!(!net.server.connection(s).unwrap().is_authenticated());
    assert_eq!(net.server.stats().auth_failed, 0);
}

/// Exchanges datagrams directly (no loss) for a while, passing every
/// server → client datagram through `tamper` first.
fn pump(net: &mut Net, mut tamper: impl FnMut(&[u8]) -> Vec<u8>) {
    let mut buf = Vec::new();
    for _ in 0..50 {
        while let Some(t) = net.client.poll_transmit(net.now, &mut buf) {
            let d = buf[..t.size].to_vec();
            net.server
                .handle_datagram(net.now, FourTuple::from_remote(addr(CLIENT)), &d);
        }
        while let Some(t) = net.server.poll_transmit(net.now, &mut buf) {
            let d = tamper(&buf[..t.size]);
            net.client
                .handle_datagram(net.now, FourTuple::from_remote(addr(SERVER)), &d);
        }
        net.server.accept();
        net.now += Duration::from_millis(5);
        net.client.handle_timeout(net.now);
        net.server.handle_timeout(net.now);
    }
}

/// Rebuilds a HANDSHAKE datagram with its AUTH frame dropped or altered.
fn rewrite_handshake(d: &[u8], drop_auth: bool) -> Vec<u8> {
    let Ok(p) = Packet::decode(d) else {
        return d.to_vec();
    };
    if p.header.ty != PacketType::Handshake {
        return d.to_vec();
    }
    let mut out = Vec::new();
    let mut b = PacketBuilder::new(&mut out, &p.header, 1472).unwrap();
    for f in p.frames() {
        match f.unwrap() {
            Frame::Auth { .. } if drop_auth => {}
            Frame::Auth { message } => {
                let mut m = message.to_vec();
                m[40] ^= 1;
                b.push(&Frame::Auth { message: &m }).unwrap();
            }
            f => {
                b.push(&f).unwrap();
            }
        }
    }
    b.finish();
    out
}

#[test]
fn the_client_refuses_a_server_that_does_not_prove_the_key() {
    for drop_auth in [true, false] {
        let mut net = Net::new(8, keyed(7));
        let c = net.client.connect(net.now, addr(SERVER)).unwrap();
        pump(&mut net, |d| rewrite_handshake(d, drop_auth));
        let evs = events(&mut net.client, c);
        assert!(!evs.contains(&Event::Connected), "{evs:?}");
        assert_eq!(
            evs.last(),
            Some(&Event::Closed(CloseReason::Local(ErrorCode::AUTH_FAILED)))
        );
        // Our CLOSE goes out, but without keys it is unprotected, and a
        // keyed server takes no unprotected DATA packet (anyone could send
        // one): it is counted, and the server's connection, never
        // confirmed, ends at its handshake timeout instead, having
        // delivered nothing.
        let s = net.server.handles()[0];
        let sc = net.server.connection(s).unwrap();
        assert!(sc.stats().decrypt_failed >= 1, "{:?}", sc.stats());
        assert!(net.server.stats().decrypt_failed >= 1);
        for _ in 0..1000 {
            if net.server.connection(s).unwrap().is_closed() {
                break;
            }
            let Some(t) = net.server.poll_timeout() else {
                break;
            };
            net.now = net.now.max(t);
            net.server.handle_timeout(net.now);
        }
        let reason = events(&mut net.server, s)
            .into_iter()
            .find_map(|e| match e {
                Event::Closed(r) => Some(r),
                _ => None,
            });
        assert_eq!(reason, Some(CloseReason::HandshakeTimeout));
    }
}

#[test]
fn a_replayed_authenticated_initial_is_refused_by_the_replay_rule() {
    let mut net = Net::new(9, keyed(7));
    net.pipe.keep_log = true;
    let (_, s) = net.connect();
    let echo = net
        .pipe
        .log
        .iter()
        .find(|(from, _, d)| {
            *from == addr(CLIENT)
                && Packet::decode(d).is_ok_and(|p| {
                    p.frames().any(
                        |f| matches!(f, Ok(Frame::Initial { cookie, .. }) if !cookie.is_empty()),
                    ) && p.frames().any(|f| matches!(f, Ok(Frame::Auth { .. })))
                })
        })
        .map(|(_, _, d)| d.clone())
        .expect("the cookie echo carries message 1");
    net.server.remove(s);
    let before = net.server.stats();
    net.server
        .handle_datagram(net.now, FourTuple::from_remote(addr(CLIENT)), &echo);
    let after = net.server.stats();
    assert_eq!(after.replayed_cookies, before.replayed_cookies + 1);
    assert_eq!(after.auth_failed, before.auth_failed);
    assert_eq!(after.accepted, before.accepted);
    assert_eq!(net.server.connection_count(), 0);
}

#[test]
fn no_key_is_checked_before_the_cookie() {
    // A forged cookie with a message 1 attached: dropped as a bad cookie,
    // the AUTH frame never read.
    let mut net = Net::new(10, keyed(7));
    let c = net.client.connect(net.now, addr(SERVER)).unwrap();
    let mut buf = Vec::new();
    // The client's first INITIAL, answered by the server's RETRY.
    let t = net.client.poll_transmit(net.now, &mut buf).unwrap();
    let first = buf[..t.size].to_vec();
    net.server
        .handle_datagram(net.now, FourTuple::from_remote(addr(CLIENT)), &first);
    let t = net.server.poll_transmit(net.now, &mut buf).unwrap();
    let mut retry = buf[..t.size].to_vec();
    // Forge the cookie's tag before the client sees it.
    let n = retry.len();
    retry[n - 1] ^= 0xff;
    net.client
        .handle_datagram(net.now, FourTuple::from_remote(addr(SERVER)), &retry);
    let t = net.client.poll_transmit(net.now, &mut buf).unwrap();
    let echo = buf[..t.size].to_vec();
    assert!(Packet::decode(&echo)
        .unwrap()
        .frames()
        .any(|f| matches!(f, Ok(Frame::Auth { .. }))));
    net.server
        .handle_datagram(net.now, FourTuple::from_remote(addr(CLIENT)), &echo);
    let st = net.server.stats();
    assert_eq!((st.bad_cookies, st.auth_failed, st.accepted), (1, 0, 0));
    assert!(
        net.server.poll_transmit(net.now, &mut buf).is_none(),
        "no answer"
    );
    let _ = c;
}
