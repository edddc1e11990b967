//! Relayed paths on the wire: the ROUTE frame that tells a relay where a
//! path goes next, and the HOP_REPORT frame in which a relay tells the
//! source what it measures on the hop it sends on (seed 000 §III: relays
//! "report their links' measurements").
//!
//! Main types: [`Route`], [`HopReport`]; both travel as session frames
//! ([`Frame::Route`](super::Frame::Route),
//! [`Frame::HopReport`](super::Frame::HopReport)) on the control stream.
//!
//! A relayed path `source → R1 → R2 → sink` is three connections. The
//! source's first message on its connection to R1 is `Route { index: 1,
//! hops: [R2, sink] }`; R1 connects to R2 and sends `Route { index: 2,
//! hops: [sink] }`; R2 connects to the sink and sends no route, so the
//! sink sees the source's PATH_HELLO first, as on a direct path. Every
//! relay then reports on the hop it sends on, tagged with its `index`.
//!
//! Invariants: at most [`MAX_ROUTE_HOPS`] addresses; decoding is strict and
//! bounded like every session frame (fuzzed through
//! `fuzz_targets/session_frame.rs`).

use super::frame::FrameError;
use crate::time::Duration;
use crate::units::Bandwidth;
use crate::wire::{put_varint, Reader};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// Most addresses in one route (relays after the first, plus the sink).
pub const MAX_ROUTE_HOPS: usize = 8;
/// Largest loss figure on the wire: parts per million.
const PPM: u32 = 1_000_000;

/// Where a relayed path goes after the relay that reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    /// The reading relay's place on the path (1 = the first relay).
    pub index: u8,
    /// The next hop first, the sink last; never empty.
    pub hops: Vec<SocketAddr>,
}

impl Route {
    /// What the next relay reads: one hop further. `None` when the next
    /// hop is the sink, which gets no route.
    pub fn next(&self) -> Option<Route> {
        (self.hops.len() > 1).then(|| Route {
            index: self.index.saturating_add(1),
            hops: self.hops[1..].to_vec(),
        })
    }

    pub(super) fn encode(&self, out: &mut Vec<u8>) {
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

    pub(super) fn decode(r: &mut Reader<'_>) -> Result<Route, FrameError> {
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

/// A relay's measurements of the hop it sends on, over its last interval.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HopReport {
    /// The reporting relay's place on the path (see [`Route::index`]).
    pub index: u8,
    /// Smoothed RTT of the hop.
    pub srtt: Duration,
    /// Share of the hop's packets lost in the interval, in [0, 1].
    pub loss: f64,
    /// Rate the hop delivered in the interval.
    pub delivered: Bandwidth,
    /// Bytes the relay holds for the path towards the hop.
    pub queued_bytes: u64,
}

impl HopReport {
    pub(super) fn encode(&self, out: &mut Vec<u8>) {
        out.push(self.index);
        put_varint(out, self.srtt.as_micros().min(crate::wire::MAX_TTL_US));
        let ppm = (self.loss.clamp(0.0, 1.0) * f64::from(PPM)).round() as u64;
        put_varint(out, ppm);
        put_varint(out, self.delivered.bps().min(crate::wire::VARINT_MAX));
        put_varint(out, self.queued_bytes.min(crate::wire::VARINT_MAX));
    }

    pub(super) fn decode(r: &mut Reader<'_>) -> Result<HopReport, FrameError> {
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
