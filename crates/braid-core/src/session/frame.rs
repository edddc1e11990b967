//! Session frames: what a session says inside its connections' messages.
//!
//! Every transport message of a session is exactly one frame: a version
//! byte ([`SESSION_VERSION`]), a type byte, then the type's fields (QUIC
//! varints, see [`crate::wire::Reader`]). The layout is documented in
//! docs/PROTOCOL.md ("Session frames"). Decoding is strict: an unknown
//! version or type, a field out of its bound, a stream config that does not
//! validate, or bytes left over is a [`FrameError`]; the session closes with
//! it. Nothing here panics on any input (fuzzed: `fuzz_targets/session_frame.rs`).
//!
//! Main types: [`Frame`], [`FrameError`], [`SessionId`].

use super::route::{HopReport, Route, MAX_ROUTE_HOPS};
use super::stream::{
    Delivery, PathBound, StreamConfig, StreamConfigError, MAX_PINNED, MAX_STREAM_NAME,
};
use crate::id::{PathId, StreamId, MAX_STREAMS};
use crate::scheduler::StreamSpec;
use crate::time::Duration;
use crate::units::Bandwidth;
use crate::wire::{put_varint, Reader};
use crate::wire::{WireError, MAX_REASON_LEN, MAX_TTL_US};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// The session frame format this code speaks.
pub const SESSION_VERSION: u8 = 4;
/// Largest path id on the wire.
pub const MAX_PATH_ID: u32 = 1 << 20;
/// Largest message sequence number on the wire (2^62 − 1, the varint bound).
pub const MAX_SEQ: u64 = crate::wire::VARINT_MAX;

const T_PATH_HELLO: u8 = 0x01;
const T_STREAM_OPEN: u8 = 0x02;
const T_STREAM_CLOSE: u8 = 0x03;
const T_DATA: u8 = 0x04;
const T_ACK: u8 = 0x05;
const T_PATH_STATUS: u8 = 0x06;
const T_CLOSE: u8 = 0x07;
const T_ROUTE: u8 = 0x08;
const T_HOP_REPORT: u8 = 0x09;
const T_STREAM_REPORT: u8 = 0x0a;
const T_PAD: u8 = 0x0b;
const T_STREAM_VERDICT: u8 = 0x0c;

/// A session's identity, chosen by the source and named in every path's
/// first frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SessionId(pub u64);

/// One session frame (see the module docs; the layout is in docs/PROTOCOL.md).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Frame<'a> {
    /// First frame on every connection, source → sink: this connection is
    /// path `path` of session `session`.
    PathHello {
        /// The session.
        session: SessionId,
        /// The path this connection is.
        path: PathId,
    },
    /// Source → sink: a stream opens with this config (idempotent; sent on
    /// every path). The sink answers with an [`Frame::Ack`] of 0.
    StreamOpen {
        /// The stream.
        stream: StreamId,
        /// What it is.
        config: StreamConfig,
    },
    /// Source → sink: the stream ends after `sent` messages (idempotent).
    StreamClose {
        /// The stream.
        stream: StreamId,
        /// Messages the source sent on it, in all.
        sent: u64,
    },
    /// Source → sink: one message of a stream.
    Data {
        /// The stream.
        stream: StreamId,
        /// The message's number in the stream (0, 1, …).
        seq: u64,
        /// When the source application sent it: microseconds on the
        /// source's session clock.
        sent_us: u64,
        /// The message.
        payload: &'a [u8],
    },
    /// Sink → source: the sink application has consumed every message of
    /// `stream` below `consumed` (reliable streams), or the sink has seen
    /// up to `consumed` (others). Cumulative; sent on every path.
    Ack {
        /// The stream.
        stream: StreamId,
        /// The cumulative count.
        consumed: u64,
    },
    /// Either way: the sender sees path `path` as `up` or down.
    PathStatus {
        /// The path.
        path: PathId,
        /// Up or down.
        up: bool,
    },
    /// Source → relay, relay → relay: where a relayed path goes next
    /// (the first message on the connection; see [`super::route`]).
    Route(Route),
    /// Relay → source: what the relay measured on the hop it sends on.
    HopReport(HopReport),
    /// Sink → source, once per statistics interval: how a stream fares
    /// at the sink.
    StreamReport {
        /// The stream.
        stream: StreamId,
        /// Share of the spec's windows met since the stream opened, in
        /// parts per million.
        windows_met_ppm: u32,
        /// Rate delivered to the sink application in the last interval.
        rate: Bandwidth,
        /// Messages lost or dropped late, since the stream opened.
        lost: u64,
        /// Windows judged since the stream opened (version 2).
        windows_judged: u64,
        /// Of them, windows that missed the spec (≤ `windows_judged`): the
        /// outcomes that calibrate the source's promises.
        windows_missed: u64,
        /// Messages short of the spec over those windows (a violation
        /// bound's Σ Z; 0 for rate specs) (version 3).
        messages_missed: u64,
    },
    /// Source → sink: padding a probe sends (see [`super::probe`]); the
    /// payload is this many zero bytes, and the sink drops it.
    Pad(usize),
    /// Sink → source: what became of a stream at the sink (version 4).
    /// `kept`: the stream ended and the sink application kept every
    /// message of it; the source reports it delivered only now. Not
    /// kept: the sink refused it (`reason`, e.g. "out/atoms exists"); the
    /// source ends it at once with that error. Sent once per stream.
    StreamVerdict {
        /// The stream.
        stream: StreamId,
        /// Kept whole (true) or refused.
        kept: bool,
        /// Why it was refused, in words (at most [`MAX_REASON_LEN`] bytes;
        /// empty when kept).
        reason: &'a [u8],
    },
    /// Either way: the session is over (`code` 0 = normal end).
    Close {
        /// Why, as a number (see [`CloseCode`](super::CloseCode)).
        code: u64,
        /// Why, in words (at most [`MAX_REASON_LEN`] bytes).
        reason: &'a [u8],
    },
}

/// Why bytes are not a session frame.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum FrameError {
    /// A field ran past the end, or a bound was broken.
    #[error("session frame: {0}")]
    Wire(#[from] WireError),
    /// The version byte is not [`SESSION_VERSION`].
    #[error("session frame version {0} (this side speaks {SESSION_VERSION})")]
    Version(u8),
    /// An unknown frame type.
    #[error("unknown session frame type {0:#x}")]
    UnknownType(u8),
    /// An unknown enumeration value in a field.
    #[error("session frame: unknown {0}")]
    UnknownValue(&'static str),
    /// A stream config that does not validate.
    #[error("session frame: stream config: {0}")]
    Config(#[from] StreamConfigError),
    /// Bytes after the last field.
    #[error("session frame: {0} trailing bytes")]
    Trailing(usize),
}

impl<'a> Frame<'a> {
    /// Decodes one frame, strictly (see the module docs).
    ///
    /// # Errors
    /// [`FrameError`] naming what is wrong.
    pub fn decode(buf: &'a [u8]) -> Result<Frame<'a>, FrameError> {
        let mut r = Reader::new(buf);
        let v = r.u8()?;
        if v != SESSION_VERSION {
            return Err(FrameError::Version(v));
        }
        let t = r.u8()?;
        let f = match t {
            T_PATH_HELLO => Frame::PathHello {
                session: SessionId(u64::from_be_bytes(r.array()?)),
                path: path_id(&mut r)?,
            },
            T_STREAM_OPEN => Frame::StreamOpen {
                stream: stream_id(&mut r)?,
                config: decode_config(&mut r)?,
            },
            T_STREAM_CLOSE => Frame::StreamClose {
                stream: stream_id(&mut r)?,
                sent: r.varint()?,
            },
            T_DATA => Frame::Data {
                stream: stream_id(&mut r)?,
                seq: r.varint()?,
                sent_us: r.varint()?,
                payload: r.rest(),
            },
            T_ACK => Frame::Ack {
                stream: stream_id(&mut r)?,
                consumed: r.varint()?,
            },
            T_PATH_STATUS => Frame::PathStatus {
                path: path_id(&mut r)?,
                up: match r.u8()? {
                    0 => false,
                    1 => true,
                    _ => return Err(FrameError::UnknownValue("path status")),
                },
            },
            T_CLOSE => {
                let code = r.varint()?;
                let n = r.varint_max(MAX_REASON_LEN as u64, "reason length")?;
                Frame::Close {
                    code,
                    reason: r.bytes(n as usize)?,
                }
            }
            T_ROUTE => Frame::Route(Route::decode(&mut r)?),
            T_HOP_REPORT => Frame::HopReport(HopReport::decode(&mut r)?),
            T_STREAM_REPORT => {
                let stream = stream_id(&mut r)?;
                // 10^6 fits in u32; the bound makes the cast exact.
                let windows_met_ppm = r.varint_max(1_000_000, "windows met")? as u32;
                let rate = Bandwidth::from_bps(r.varint()?);
                let lost = r.varint()?;
                let windows_judged = r.varint()?;
                Frame::StreamReport {
                    stream,
                    windows_met_ppm,
                    rate,
                    lost,
                    windows_judged,
                    windows_missed: r.varint_max(windows_judged, "windows missed")?,
                    messages_missed: r.varint()?,
                }
            }
            T_PAD => Frame::Pad(r.rest().len()),
            T_STREAM_VERDICT => {
                let stream = stream_id(&mut r)?;
                let kept = match r.u8()? {
                    0 => false,
                    1 => true,
                    _ => return Err(FrameError::UnknownValue("stream verdict")),
                };
                let n = r.varint_max(MAX_REASON_LEN as u64, "reason length")?;
                Frame::StreamVerdict {
                    stream,
                    kept,
                    reason: r.bytes(n as usize)?,
                }
            }
            other => return Err(FrameError::UnknownType(other)),
        };
        if !r.is_empty() {
            return Err(FrameError::Trailing(r.remaining()));
        }
        Ok(f)
    }

    /// Appends the encoded frame to `out`. Fields beyond their wire bounds
    /// are clamped (a reason is cut at [`MAX_REASON_LEN`]); configs are
    /// validated before a session sends them.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.push(SESSION_VERSION);
        match self {
            Frame::PathHello { session, path } => {
                out.push(T_PATH_HELLO);
                out.extend_from_slice(&session.0.to_be_bytes());
                put_varint(out, u64::from(path.0));
            }
            Frame::StreamOpen { stream, config } => {
                out.push(T_STREAM_OPEN);
                put_varint(out, u64::from(stream.0));
                encode_config(config, out);
            }
            Frame::StreamClose { stream, sent } => {
                out.push(T_STREAM_CLOSE);
                put_varint(out, u64::from(stream.0));
                put_varint(out, *sent);
            }
            Frame::Data {
                stream,
                seq,
                sent_us,
                payload,
            } => {
                encode_data_header(*stream, *seq, *sent_us, out);
                out.extend_from_slice(payload);
            }
            Frame::Ack { stream, consumed } => {
                out.push(T_ACK);
                put_varint(out, u64::from(stream.0));
                put_varint(out, *consumed);
            }
            Frame::PathStatus { path, up } => {
                out.push(T_PATH_STATUS);
                put_varint(out, u64::from(path.0));
                out.push(u8::from(*up));
            }
            Frame::Route(route) => {
                out.push(T_ROUTE);
                route.encode(out);
            }
            Frame::HopReport(report) => {
                out.push(T_HOP_REPORT);
                report.encode(out);
            }
            Frame::StreamReport {
                stream,
                windows_met_ppm,
                rate,
                lost,
                windows_judged,
                windows_missed,
                messages_missed,
            } => {
                out.push(T_STREAM_REPORT);
                put_varint(out, u64::from(stream.0));
                put_varint(out, u64::from((*windows_met_ppm).min(1_000_000)));
                put_varint(out, rate.bps().min(crate::wire::VARINT_MAX));
                put_varint(out, (*lost).min(crate::wire::VARINT_MAX));
                let judged = (*windows_judged).min(crate::wire::VARINT_MAX);
                put_varint(out, judged);
                put_varint(out, (*windows_missed).min(judged));
                put_varint(out, (*messages_missed).min(crate::wire::VARINT_MAX));
            }
            Frame::Pad(n) => {
                out.push(T_PAD);
                out.resize(out.len() + n, 0);
            }
            Frame::Close { code, reason } => {
                out.push(T_CLOSE);
                put_varint(out, *code);
                put_reason(out, reason);
            }
            Frame::StreamVerdict {
                stream,
                kept,
                reason,
            } => {
                out.push(T_STREAM_VERDICT);
                put_varint(out, u64::from(stream.0));
                out.push(u8::from(*kept));
                put_reason(out, reason);
            }
        }
    }

    /// The frame encoded into a fresh buffer.
    pub fn to_vec(&self) -> Vec<u8> {
        let mut v = Vec::new();
        self.encode(&mut v);
        v
    }
}

/// A reason cut at [`MAX_REASON_LEN`] (on a character boundary when it is
/// text), its length first.
fn put_reason(out: &mut Vec<u8>, reason: &[u8]) {
    let mut n = reason.len().min(MAX_REASON_LEN);
    while n > 0 && n < reason.len() && (reason[n] & 0xc0) == 0x80 {
        n -= 1;
    }
    put_varint(out, n as u64);
    out.extend_from_slice(&reason[..n]);
}

/// Writes a DATA frame's header (everything but the payload) after the
/// version byte already in `out`; the payload follows it directly.
fn encode_data_header(stream: StreamId, seq: u64, sent_us: u64, out: &mut Vec<u8>) {
    out.push(T_DATA);
    put_varint(out, u64::from(stream.0));
    put_varint(out, seq);
    put_varint(out, sent_us);
}

/// A whole DATA frame for `payload`, built with one allocation.
pub fn data_frame(stream: StreamId, seq: u64, sent_us: u64, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(payload.len() + 24);
    out.push(SESSION_VERSION);
    encode_data_header(stream, seq, sent_us, &mut out);
    out.extend_from_slice(payload);
    out
}

fn stream_id(r: &mut Reader<'_>) -> Result<StreamId, FrameError> {
    let v = r.varint_max(u64::from(MAX_STREAMS - 1), "stream id")?;
    // Bounded by MAX_STREAMS just above, so it fits in u32.
    Ok(StreamId(v as u32))
}

fn path_id(r: &mut Reader<'_>) -> Result<PathId, FrameError> {
    let v = r.varint_max(u64::from(MAX_PATH_ID), "path id")?;
    // Bounded by MAX_PATH_ID just above, so it fits in u32.
    Ok(PathId(v as u32))
}

fn f64_field(r: &mut Reader<'_>) -> Result<f64, FrameError> {
    Ok(f64::from_bits(u64::from_be_bytes(r.array()?)))
}

fn u32_field(r: &mut Reader<'_>, what: &'static str) -> Result<u32, FrameError> {
    // u32::MAX fits in u64; the bound makes the cast exact.
    Ok(r.varint_max(u64::from(u32::MAX), what)? as u32)
}

fn duration_us(r: &mut Reader<'_>, what: &'static str) -> Result<Duration, FrameError> {
    Ok(Duration::from_micros(r.varint_max(MAX_TTL_US, what)?))
}

const SPEC_MIN_RATE: u8 = 0;
const SPEC_WINDOW: u8 = 1;
const SPEC_VIOLATION: u8 = 2;
const SPEC_BEST_EFFORT: u8 = 3;

const FLAG_RTT: u8 = 1;
const FLAG_LOSS: u8 = 2;
const FLAG_PINNED: u8 = 4;
const FLAG_NAME: u8 = 8;
const FLAG_DELAY: u8 = 16;
const FLAGS_KNOWN: u8 = FLAG_RTT | FLAG_LOSS | FLAG_PINNED | FLAG_NAME | FLAG_DELAY;

fn encode_config(c: &StreamConfig, out: &mut Vec<u8>) {
    match c.spec {
        StreamSpec::MinRate { rate, probability } => {
            out.push(SPEC_MIN_RATE);
            put_varint(out, rate.bps());
            out.extend_from_slice(&probability.to_bits().to_be_bytes());
        }
        StreamSpec::Window {
            x,
            y,
            window,
            message_size,
            probability,
        } => {
            out.push(SPEC_WINDOW);
            put_varint(out, u64::from(x));
            put_varint(out, u64::from(y));
            put_varint(out, window.as_micros());
            put_varint(out, u64::from(message_size));
            out.extend_from_slice(&probability.to_bits().to_be_bytes());
        }
        StreamSpec::ViolationBound {
            x,
            window,
            message_size,
            max_expected_misses,
        } => {
            out.push(SPEC_VIOLATION);
            put_varint(out, u64::from(x));
            put_varint(out, window.as_micros());
            put_varint(out, u64::from(message_size));
            out.extend_from_slice(&max_expected_misses.to_bits().to_be_bytes());
        }
        StreamSpec::BestEffort { weight } => {
            out.push(SPEC_BEST_EFFORT);
            put_varint(out, weight);
        }
    }
    match c.delivery {
        Delivery::Reliable => out.push(0),
        Delivery::Unreliable => out.push(1),
        Delivery::Deadline { ttl } => {
            out.push(2);
            put_varint(out, ttl.as_micros());
        }
    }
    let mut flags = 0;
    if c.rtt.is_some() {
        flags |= FLAG_RTT;
    }
    if c.loss.is_some() {
        flags |= FLAG_LOSS;
    }
    if c.pinned.is_some() {
        flags |= FLAG_PINNED;
    }
    if c.name.is_some() {
        flags |= FLAG_NAME;
    }
    if c.delay.is_some() {
        flags |= FLAG_DELAY;
    }
    out.push(flags);
    if let Some(b) = c.rtt {
        put_varint(out, b.max.as_micros());
        out.extend_from_slice(&b.probability.to_bits().to_be_bytes());
    }
    if let Some(b) = c.loss {
        out.extend_from_slice(&b.max.to_bits().to_be_bytes());
        out.extend_from_slice(&b.probability.to_bits().to_be_bytes());
    }
    if let Some(b) = c.delay {
        put_varint(out, b.max.as_micros());
        out.extend_from_slice(&b.probability.to_bits().to_be_bytes());
    }
    if let Some(p) = &c.pinned {
        put_varint(out, p.len() as u64);
        for id in p {
            put_varint(out, u64::from(id.0));
        }
    }
    out.push(c.copies);
    put_varint(out, u64::from(c.window));
    if let Some(n) = &c.name {
        put_varint(out, n.len() as u64);
        out.extend_from_slice(n.as_bytes());
    }
}

/// A duration bound (`varint max_us, f64 probability`) if `present`.
fn duration_bound(
    r: &mut Reader<'_>,
    present: bool,
    what: &'static str,
) -> Result<Option<PathBound<Duration>>, FrameError> {
    if !present {
        return Ok(None);
    }
    Ok(Some(PathBound {
        max: duration_us(r, what)?,
        probability: f64_field(r)?,
    }))
}

fn decode_config(r: &mut Reader<'_>) -> Result<StreamConfig, FrameError> {
    let spec = match r.u8()? {
        SPEC_MIN_RATE => StreamSpec::MinRate {
            rate: Bandwidth::from_bps(r.varint()?),
            probability: f64_field(r)?,
        },
        SPEC_WINDOW => StreamSpec::Window {
            x: u32_field(r, "x")?,
            y: u32_field(r, "y")?,
            window: duration_us(r, "window")?,
            message_size: u32_field(r, "message size")?,
            probability: f64_field(r)?,
        },
        SPEC_VIOLATION => StreamSpec::ViolationBound {
            x: u32_field(r, "x")?,
            window: duration_us(r, "window")?,
            message_size: u32_field(r, "message size")?,
            max_expected_misses: f64_field(r)?,
        },
        SPEC_BEST_EFFORT => StreamSpec::BestEffort {
            weight: r.varint()?,
        },
        _ => return Err(FrameError::UnknownValue("stream spec kind")),
    };
    let delivery = match r.u8()? {
        0 => Delivery::Reliable,
        1 => Delivery::Unreliable,
        2 => Delivery::Deadline {
            ttl: duration_us(r, "ttl")?,
        },
        _ => return Err(FrameError::UnknownValue("delivery")),
    };
    let flags = r.u8()?;
    if flags & !FLAGS_KNOWN != 0 {
        return Err(FrameError::UnknownValue("stream config flag"));
    }
    let rtt = duration_bound(r, flags & FLAG_RTT != 0, "rtt bound")?;
    let loss = if flags & FLAG_LOSS != 0 {
        Some(PathBound {
            max: f64_field(r)?,
            probability: f64_field(r)?,
        })
    } else {
        None
    };
    let delay = duration_bound(r, flags & FLAG_DELAY != 0, "delay bound")?;
    let pinned = if flags & FLAG_PINNED != 0 {
        let n = r.varint_max(MAX_PINNED as u64, "pinned paths")?;
        let mut v = Vec::with_capacity(n as usize);
        for _ in 0..n {
            v.push(path_id(r)?);
        }
        Some(v)
    } else {
        None
    };
    let config = StreamConfig {
        spec,
        delivery,
        rtt,
        loss,
        delay,
        pinned,
        copies: r.u8()?,
        window: u32_field(r, "window")?,
        name: None,
    };
    let config = if flags & FLAG_NAME != 0 {
        let n = r.varint_max(MAX_STREAM_NAME as u64, "stream name length")?;
        let name = std::str::from_utf8(r.bytes(n as usize)?)
            .map_err(|_| FrameError::UnknownValue("stream name (not UTF-8)"))?;
        config.with_name(name)
    } else {
        config
    };
    config.validate()?;
    Ok(config)
}

// ---- relayed paths (see `super::route`) ----------------------------------

/// Loss figures on the wire: parts per million.
const PPM: u32 = 1_000_000;

impl Route {
    fn encode(&self, out: &mut Vec<u8>) {
        out.push(self.index);
        let n = self.hops.len().min(MAX_ROUTE_HOPS);
        out.push(n as u8);
        for a in &self.hops[..n] {
            match a.ip() {
                IpAddr::V4(v4) => {
                    out.push(4);
                    out.extend_from_slice(&v4.octets());
                }
                IpAddr::V6(v6) => {
                    out.push(6);
                    out.extend_from_slice(&v6.octets());
                }
            }
            out.extend_from_slice(&a.port().to_be_bytes());
        }
    }

    fn decode(r: &mut Reader<'_>) -> Result<Route, FrameError> {
        let index = r.u8()?;
        if index == 0 {
            return Err(FrameError::UnknownValue("route index 0"));
        }
        let n = usize::from(r.u8()?);
        if n == 0 || n > MAX_ROUTE_HOPS {
            return Err(FrameError::UnknownValue("route length"));
        }
        let mut hops = Vec::with_capacity(n);
        for _ in 0..n {
            let ip = match r.u8()? {
                4 => IpAddr::V4(Ipv4Addr::from(r.array::<4>()?)),
                6 => IpAddr::V6(Ipv6Addr::from(r.array::<16>()?)),
                _ => return Err(FrameError::UnknownValue("route address family")),
            };
            let port = u16::from_be_bytes(r.array()?);
            hops.push(SocketAddr::new(ip, port));
        }
        Ok(Route { index, hops })
    }
}

impl HopReport {
    fn encode(&self, out: &mut Vec<u8>) {
        out.push(self.index);
        put_varint(out, self.srtt.as_micros().min(crate::wire::MAX_TTL_US));
        let ppm = (self.loss.clamp(0.0, 1.0) * f64::from(PPM)).round() as u64;
        put_varint(out, ppm);
        put_varint(out, self.delivered.bps().min(crate::wire::VARINT_MAX));
        put_varint(out, self.queued_bytes.min(crate::wire::VARINT_MAX));
    }

    fn decode(r: &mut Reader<'_>) -> Result<HopReport, FrameError> {
        let index = r.u8()?;
        if index == 0 {
            return Err(FrameError::UnknownValue("hop report index 0"));
        }
        let srtt = Duration::from_micros(r.varint_max(crate::wire::MAX_TTL_US, "hop srtt")?);
        let ppm = r.varint_max(u64::from(PPM), "hop loss")?;
        Ok(HopReport {
            index,
            srtt,
            loss: ppm as f64 / f64::from(PPM),
            delivered: Bandwidth::from_bps(r.varint()?),
            queued_bytes: r.varint()?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn configs() -> Vec<StreamConfig> {
        vec![
            StreamConfig::new(StreamSpec::min_rate(Bandwidth::from_mbps(3), 0.95).unwrap()),
            StreamConfig::new(
                StreamSpec::window(8, 10, Duration::from_millis(100), 1000, 0.9).unwrap(),
            )
            .with_delivery(Delivery::Deadline {
                ttl: Duration::from_millis(150),
            })
            .with_rtt(Duration::from_millis(80), 0.95)
            .with_delay(Duration::from_millis(150), 0.9)
            .with_loss(0.01, 0.9)
            .pinned_to(vec![PathId(1), PathId(7)])
            .with_copies(2)
            .with_window(64)
            .with_name("atoms.v2-1"),
            StreamConfig::new(
                StreamSpec::violation_bound(5, Duration::from_millis(40), 1200, 0.5).unwrap(),
            )
            .with_delivery(Delivery::Unreliable),
            StreamConfig::new(StreamSpec::best_effort(3).unwrap()),
        ]
    }

    fn frames() -> Vec<Frame<'static>> {
        let mut v = vec![
            Frame::PathHello {
                session: SessionId(0xdead_beef_0102_0304),
                path: PathId(3),
            },
            Frame::StreamClose {
                stream: StreamId(1023),
                sent: 1 << 40,
            },
            Frame::Route(Route {
                index: 2,
                hops: vec![
                    "10.1.2.3:7000".parse().unwrap(),
                    "[2001:db8::1]:9000".parse().unwrap(),
                ],
            }),
            Frame::Pad(1200),
            Frame::StreamReport {
                stream: StreamId(3),
                windows_met_ppm: 987_654,
                rate: Bandwidth::from_bps(3_200_000),
                lost: 12,
                windows_judged: 300,
                windows_missed: 4,
                messages_missed: 17,
            },
            Frame::HopReport(HopReport {
                index: 1,
                srtt: Duration::from_micros(40_123),
                loss: 0.0125,
                delivered: Bandwidth::from_bps(98_765_432),
                queued_bytes: 65_536,
            }),
            Frame::Data {
                stream: StreamId(5),
                seq: 77,
                sent_us: 123_456,
                payload: b"hello",
            },
            Frame::Data {
                stream: StreamId(0),
                seq: 0,
                sent_us: 0,
                payload: b"",
            },
            Frame::Ack {
                stream: StreamId(9),
                consumed: 400,
            },
            Frame::PathStatus {
                path: PathId(2),
                up: false,
            },
            Frame::Close {
                code: 3,
                reason: b"bad frame",
            },
            Frame::StreamVerdict {
                stream: StreamId(4),
                kept: true,
                reason: b"",
            },
            Frame::StreamVerdict {
                stream: StreamId(5),
                kept: false,
                reason: b"out/atoms exists: not overwriting it",
            },
        ];
        for (i, config) in configs().into_iter().enumerate() {
            v.push(Frame::StreamOpen {
                stream: StreamId(i as u32 + 1),
                config,
            });
        }
        v
    }

    #[test]
    fn every_frame_round_trips() {
        for f in frames() {
            let b = f.to_vec();
            assert_eq!(Frame::decode(&b).unwrap(), f, "{f:?}");
        }
    }

    #[test]
    fn data_frame_matches_the_generic_encoder() {
        let f = Frame::Data {
            stream: StreamId(4),
            seq: 1 << 20,
            sent_us: 99,
            payload: &[7; 300],
        };
        assert_eq!(data_frame(StreamId(4), 1 << 20, 99, &[7; 300]), f.to_vec());
    }

    #[test]
    fn strict_decoding_names_the_problem() {
        let ok = Frame::Ack {
            stream: StreamId(1),
            consumed: 2,
        }
        .to_vec();
        let mut v = ok.clone();
        v[0] = 1;
        assert_eq!(Frame::decode(&v), Err(FrameError::Version(1)));
        let mut v = ok.clone();
        v[1] = 0x7f;
        assert_eq!(Frame::decode(&v), Err(FrameError::UnknownType(0x7f)));
        let mut v = ok.clone();
        v.push(0);
        assert_eq!(Frame::decode(&v), Err(FrameError::Trailing(1)));
        assert!(matches!(
            Frame::decode(&ok[..ok.len() - 1]),
            Err(FrameError::Wire(WireError::Truncated))
        ));
        // Stream id 1024 is beyond the bound.
        let mut v = vec![SESSION_VERSION, T_ACK];
        put_varint(&mut v, 1024);
        put_varint(&mut v, 0);
        assert!(matches!(
            Frame::decode(&v),
            Err(FrameError::Wire(WireError::OutOfRange { .. }))
        ));
        // A config whose probability is 1.5 does not validate.
        let mut c = configs()[0].clone();
        c.spec = StreamSpec::MinRate {
            rate: Bandwidth::from_mbps(1),
            probability: 1.5,
        };
        let v = Frame::StreamOpen {
            stream: StreamId(1),
            config: c,
        }
        .to_vec();
        assert!(matches!(Frame::decode(&v), Err(FrameError::Config(_))));
    }

    proptest! {
        #[test]
        fn decoding_never_panics_and_what_decodes_re_encodes(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            if let Ok(f) = Frame::decode(&bytes) {
                let again = f.to_vec();
                prop_assert_eq!(Frame::decode(&again).unwrap(), f);
            }
        }

        #[test]
        fn truncations_of_valid_frames_are_errors(i in 0usize..32, cut in 0usize..64) {
            let all = frames();
            let b = all[i % all.len()].to_vec();
            if cut < b.len() {
                let short = &b[..cut];
                // A DATA or PAD frame cut inside its payload is still a
                // (shorter) frame of its kind.
                if let Ok(Frame::Data { .. } | Frame::Pad(_)) = Frame::decode(short) {
                } else {
                    prop_assert!(Frame::decode(short).is_err());
                }
            }
        }
    }
}
