//! Entry points shared by the session cargo-fuzz targets in `fuzz/` and the
//! test that replays `fuzz/corpus/session_*` in CI. Not part of the stable API.
//!
//! Each function takes arbitrary bytes and must never panic.

use super::{Frame, Session, SessionConfig, SessionId, CONTROL_STREAM};
use crate::id::PathId;
use crate::time::{Duration, Instant};
use crate::transport::{FourTuple, SendOptions};
use std::net::SocketAddr;

/// Most messages one fuzz input is cut into.
pub const MAX_FUZZ_MESSAGES: usize = 64;

/// Decodes `data` as a session frame; whatever decodes re-encodes to bytes
/// that decode to the same frame.
pub fn decode_frame(data: &[u8]) {
    if let Ok(f) = Frame::decode(data) {
        let again = f.to_vec();
        assert_eq!(Frame::decode(&again).as_ref(), Ok(&f), "round trip");
    }
}

fn addr(last: u8) -> SocketAddr {
    SocketAddr::from(([10, 0, 0, last], 4433))
}

/// A source and a sink joined by one lossless path, driven in lock step.
#[derive(Debug)]
pub struct Pair {
    /// The source.
    pub source: Session,
    /// The sink.
    pub sink: Session,
    /// The time now.
    pub now: Instant,
    path: FourTuple,
    buf: Vec<u8>,
}

impl Pair {
    /// Connects a source and a sink over one path and runs until it is up.
    pub fn new(config: SessionConfig) -> Pair {
        Pair::with(config.clone(), config)
    }

    /// As [`Pair::new`], with different settings at the two ends.
    pub fn with(config: SessionConfig, sink_config: SessionConfig) -> Pair {
        let now = Instant::ZERO;
        let path = FourTuple::new(addr(1), addr(2));
        // Defaults are valid; a fuzz harness panics loudly if not.
        let mut source =
            Session::source(SessionId(7), config.clone(), [1; 32], now).expect("valid config");
        let sink = Session::sink(sink_config, [2; 32], now).expect("valid config");
        source.add_path(now, PathId(0), path).expect("a fresh path");
        let mut p = Pair {
            source,
            sink,
            now,
            path,
            buf: Vec::with_capacity(2048),
        };
        p.step(Duration::from_millis(50));
        p
    }

    /// Moves every datagram both ways (no delay), then advances time by `dt`
    /// and fires due timers.
    pub fn step(&mut self, dt: Duration) {
        for _ in 0..1000 {
            let mut moved = false;
            while let Some(t) = self.source.poll_transmit(self.now, &mut self.buf) {
                let back = FourTuple::new(addr(2), addr(1));
                self.sink
                    .handle_datagram(self.now, back, &self.buf[..t.size]);
                moved = true;
            }
            while let Some(t) = self.sink.poll_transmit(self.now, &mut self.buf) {
                self.source
                    .handle_datagram(self.now, self.path, &self.buf[..t.size]);
                moved = true;
            }
            if !moved {
                break;
            }
        }
        self.now += dt;
        self.source.handle_timeout(self.now);
        self.sink.handle_timeout(self.now);
    }
}

/// Sends arbitrary bytes, cut into messages by a length prefix byte, from
/// the source's connection to the sink as session messages: the sink must
/// close the session with an error (or take what is valid), never panic.
pub fn sink_messages(data: &[u8]) {
    let mut p = Pair::new(SessionConfig::default());
    let mut rest = data;
    let mut n = 0;
    while let Some((&len, tail)) = rest.split_first() {
        if n >= MAX_FUZZ_MESSAGES {
            break;
        }
        let len = usize::from(len).min(tail.len());
        let (msg, tail) = tail.split_at(len);
        p.source.inject_raw(
            p.now,
            PathId(0),
            CONTROL_STREAM,
            msg.to_vec(),
            SendOptions::RELIABLE,
        );
        p.step(Duration::from_millis(5));
        while p.sink.recv(p.now).is_some() {}
        while p.sink.poll_event().is_some() {}
        rest = tail;
        n += 1;
    }
    p.step(Duration::from_millis(50));
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Replays every file in `fuzz/corpus/session_*/`.
    #[test]
    fn replays_the_session_fuzz_corpus() {
        let n = crate::transport::fuzzing::replay_corpus(&[
            ("session_frame", decode_frame as fn(&[u8])),
            ("session_sink", sink_messages as fn(&[u8])),
        ]);
        assert!(n > 0, "no session corpus under fuzz/corpus");
    }

    #[test]
    fn a_bad_frame_closes_the_session_with_a_clear_error() {
        let mut p = Pair::new(SessionConfig::default());
        assert!(p.sink.paths().iter().any(|x| x.up), "the path is up");
        p.source.inject_raw(
            p.now,
            PathId(0),
            CONTROL_STREAM,
            vec![super::super::SESSION_VERSION, 0x7f],
            SendOptions::RELIABLE,
        );
        p.step(Duration::from_millis(5));
        let r = p.sink.close_reason().expect("closed").to_string();
        assert!(r.contains("unknown session frame type 0x7f"), "{r}");
        let mut p = Pair::new(SessionConfig::default());
        p.source.inject_raw(
            p.now,
            PathId(0),
            CONTROL_STREAM,
            vec![9, 1],
            SendOptions::RELIABLE,
        );
        p.step(Duration::from_millis(5));
        assert!(p
            .sink
            .close_reason()
            .unwrap()
            .to_string()
            .contains("version 9"));
    }

    #[test]
    fn a_sink_never_holds_more_than_its_byte_bound() {
        use crate::scheduler::StreamSpec;
        use crate::session::StreamConfig;
        let small = SessionConfig {
            max_bytes: 20_000,
            ..SessionConfig::default()
        };
        let mut p = Pair::with(SessionConfig::default(), small);
        let s = p
            .source
            .open_stream(
                p.now,
                StreamConfig::new(StreamSpec::best_effort(1).unwrap()),
            )
            .unwrap();
        p.step(Duration::from_millis(5));
        // The sink application reads nothing: 40 KB of reliable messages
        // cannot all be held there.
        for _ in 0..40 {
            p.source.send(p.now, s, vec![1; 1000]).unwrap();
        }
        for _ in 0..20 {
            p.step(Duration::from_millis(5));
        }
        let r = p.sink.close_reason().expect("closed").to_string();
        assert!(r.contains("above its bound of 20000"), "{r}");
    }

    /// Writes the seed corpus (by hand:
    /// `cargo test -p braid-core write_session_seed_corpus -- --ignored`).
    #[test]
    #[ignore]
    fn write_session_seed_corpus() {
        use crate::scheduler::StreamSpec;
        use crate::session::StreamConfig;
        use crate::units::Bandwidth;
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus");
        let open = Frame::StreamOpen {
            stream: crate::id::StreamId(1),
            config: StreamConfig::new(StreamSpec::min_rate(Bandwidth::from_mbps(2), 0.9).unwrap())
                .with_rtt(Duration::from_millis(40), 0.9),
        }
        .to_vec();
        let data = Frame::Data {
            stream: crate::id::StreamId(1),
            seq: 3,
            sent_us: 1000,
            payload: b"abc",
        }
        .to_vec();
        let close = Frame::Close {
            code: 2,
            reason: b"why",
        }
        .to_vec();
        let frames = [
            open.clone(),
            data.clone(),
            close,
            vec![super::super::SESSION_VERSION, 5, 1, 2],
        ];
        std::fs::create_dir_all(root.join("session_frame")).unwrap();
        for (i, f) in frames.iter().enumerate() {
            std::fs::write(root.join("session_frame").join(format!("seed{i}")), f).unwrap();
        }
        let mut msgs = Vec::new();
        for f in [&open, &data, &data] {
            msgs.push(f.len() as u8);
            msgs.extend_from_slice(f);
        }
        std::fs::create_dir_all(root.join("session_sink")).unwrap();
        std::fs::write(root.join("session_sink").join("seed0"), &msgs).unwrap();
        let mut bad = msgs.clone();
        bad.extend_from_slice(&[3, 1, 4, 0xff]);
        std::fs::write(root.join("session_sink").join("seed1"), &bad).unwrap();
    }
}
