//! The receiving side of the multipath experiments, as one simulator node:
//! per-stream throughput bins and frame completion times.
//!
//! Main types: [`StreamSink`] and the [`FrameTag`] every experiment packet
//! carries (`[stream: u32 LE][frame: u64 LE][last: u8]`). A datagram whose
//! tag does not decode, or names a stream the sink does not know, is counted
//! as malformed, never a panic.
//!
//! A frame is complete when its last packet arrives (the source sends a
//! stream's packets in order, and the experiments' links neither lose nor
//! reorder). Throughput counts wire bytes per `sample` bin over
//! `[start, end)`.

use crate::node::{Datagram, Node, RouteId, Transmit};
use braid_core::{Bandwidth, Duration, Instant};

/// Length of an encoded [`FrameTag`].
pub const TAG_LEN: usize = 13;

/// What an experiment packet says about itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameTag {
    /// Index of the stream.
    pub stream: u32,
    /// Frame number within the stream.
    pub frame: u64,
    /// The frame's last packet.
    pub last: bool,
}

impl FrameTag {
    /// Encodes the tag.
    pub fn encode(self) -> Vec<u8> {
        let mut v = Vec::with_capacity(TAG_LEN);
        v.extend_from_slice(&self.stream.to_le_bytes());
        v.extend_from_slice(&self.frame.to_le_bytes());
        v.push(u8::from(self.last));
        v
    }

    /// Decodes a tag; `None` if malformed.
    pub fn decode(data: &[u8]) -> Option<FrameTag> {
        let stream = u32::from_le_bytes(data.get(0..4)?.try_into().ok()?);
        let frame = u64::from_le_bytes(data.get(4..12)?.try_into().ok()?);
        let last = match *data.get(12)? {
            0 => false,
            1 => true,
            _ => return None,
        };
        Some(FrameTag {
            stream,
            frame,
            last,
        })
    }
}

/// What the sink measured for one stream.
#[derive(Debug, Clone, Default)]
struct StreamBins {
    /// Wire bytes per bin.
    delivered: Vec<u64>,
    /// Arrival of each frame's last packet, in arrival order.
    frame_done: Vec<(u64, Instant)>,
}

/// The receiving node (see the module docs).
#[derive(Debug)]
pub struct StreamSink {
    start: Instant,
    end: Instant,
    sample: Duration,
    streams: Vec<StreamBins>,
    malformed: u64,
}

impl StreamSink {
    /// A sink for `streams` streams measuring `sample` bins over
    /// `[start, end)`.
    pub fn new(streams: usize, start: Instant, end: Instant, sample: Duration) -> Self {
        let span = end.saturating_duration_since(start);
        let bins = span.checked_div_duration(sample).unwrap_or(0) as usize;
        StreamSink {
            start,
            end,
            sample,
            streams: vec![
                StreamBins {
                    delivered: vec![0; bins],
                    frame_done: Vec::new(),
                };
                streams
            ],
            malformed: 0,
        }
    }

    /// Stream `i`'s throughput per bin, in Mbit/s (empty for an unknown
    /// stream).
    pub fn throughput_mbps(&self, i: usize) -> Vec<f64> {
        self.streams.get(i).map_or_else(Vec::new, |s| {
            s.delivered
                .iter()
                .map(|&b| Bandwidth::from_delivery(b, self.sample).mbps())
                .collect()
        })
    }

    /// Stream `i`'s completed frames with their completion times, sorted by
    /// frame number.
    pub fn frame_done(&self, i: usize) -> Vec<(u64, Instant)> {
        let mut v = self
            .streams
            .get(i)
            .map_or_else(Vec::new, |s| s.frame_done.clone());
        v.sort_by_key(|f| f.0);
        v
    }

    /// Datagrams whose tag did not decode or named an unknown stream.
    pub fn malformed(&self) -> u64 {
        self.malformed
    }
}

impl Node for StreamSink {
    fn handle_datagram(&mut self, now: Instant, _route: RouteId, datagram: Datagram) {
        let tag = FrameTag::decode(datagram.data());
        let Some((tag, s)) =
            tag.and_then(|t| self.streams.get_mut(t.stream as usize).map(|s| (t, s)))
        else {
            self.malformed += 1;
            return;
        };
        if tag.last {
            s.frame_done.push((tag.frame, now));
        }
        if now >= self.start && now < self.end {
            let bin = ((now - self.start).as_nanos() / self.sample.as_nanos()) as usize;
            if let Some(b) = s.delivered.get_mut(bin) {
                *b += u64::from(datagram.wire_len());
            }
        }
    }

    fn handle_timeout(&mut self, _now: Instant) {}

    fn poll_transmit(&mut self, _now: Instant) -> Option<Transmit> {
        None
    }

    fn poll_timeout(&self) -> Option<Instant> {
        None
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![("malformed", self.malformed)]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tag_round_trips_and_rejects_garbage() {
        let t = FrameTag {
            stream: 3,
            frame: 77,
            last: true,
        };
        assert_eq!(FrameTag::decode(&t.encode()), Some(t));
        assert_eq!(FrameTag::decode(&[1, 2, 3]), None);
        let mut bad = t.encode();
        bad[12] = 9;
        assert_eq!(FrameTag::decode(&bad), None);
    }
}
