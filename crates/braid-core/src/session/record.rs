//! A session's state and events as records: plain numbers and strings
//! (rates in bit/s, times in seconds, ids as numbers, the session id as 16
//! hex digits), `serde::Serialize` and `Deserialize`, each with a
//! [`RECORD_VERSION`]. They are what `braid stream` and `braid serve`
//! print with `--format json`, what their Prometheus metrics are set
//! from, and what bindings hand their users: the one external shape of
//! [`Snapshot`] and [`Event`] (which serialise as these).
//!
//! Main types: [`SnapshotRecord`] (with [`StreamRecord`],
//! [`PathRecord`], [`HopRecord`], [`PromiseRecord`], [`UnmetRecord`]) and
//! [`EventRecord`]. docs/sessions.md lists every field.
//!
//! ```
//! use braid_core::session::record::{SnapshotRecord, RECORD_VERSION};
//! # fn show(snap: &braid_core::session::Snapshot) {
//! let record = SnapshotRecord::new(snap, &Default::default());
//! assert_eq!(record.version, RECORD_VERSION);
//! # }
//! ```

use super::event::{Event, PathPromise};
use super::snapshot::{PathSnapshot, Snapshot, StreamSnapshot};
use super::stream::{stream_name, StreamConfig};
use super::Role;
use crate::id::PathId;
use crate::scheduler::{BestAchievable, RemapReason};
use crate::units::Bandwidth;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The version of the records' shape. It grows when a field changes
/// meaning or is removed; new fields are added without a new version.
pub const RECORD_VERSION: u32 = 1;

/// A whole [`Snapshot`]: every stream and path.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SnapshotRecord {
    /// [`RECORD_VERSION`].
    pub version: u32,
    /// Seconds since the clock's origin (the process's start in the
    /// runtime, the start of the run in the simulator).
    pub t: f64,
    /// `source` or `sink`.
    pub role: String,
    /// The session id, 16 hex digits.
    pub session: String,
    /// The scheduler (source; empty on a sink).
    pub scheduler: String,
    /// Every stream, in id order.
    pub streams: Vec<StreamRecord>,
    /// Every path, in id order.
    pub paths: Vec<PathRecord>,
    /// Reliable messages moved off paths that went down, in all.
    pub resent: u64,
    /// Times a path went down, in all.
    pub paths_down: u64,
}

/// One stream of a [`SnapshotRecord`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StreamRecord {
    /// Stream id.
    pub id: u32,
    /// Name (or `stream-ID`).
    pub name: String,
    /// The spec string (`rate=3.2mbit@0.95,…`).
    pub spec: String,
    /// Rate in the last interval, bit/s.
    pub rate_bps: u64,
    /// Share of windows that met the spec (`null` before the first window
    /// is judged, and for best effort).
    pub windows_met: Option<f64>,
    /// Sink: median one-way delay of the messages delivered in the last
    /// interval, ms (`null` on the source and before anything arrived).
    pub delay_p50_ms: Option<f64>,
    /// Sink: their 95th percentile, ms.
    pub delay_p95_ms: Option<f64>,
    /// Sink: their 99th percentile, ms.
    pub delay_p99_ms: Option<f64>,
    /// What each path promises it.
    pub paths: Vec<PromiseRecord>,
    /// The guarantee cannot be met: the best achievable (`null` when met).
    pub unmet: Option<UnmetRecord>,
    /// Messages so far.
    pub messages: u64,
    /// Payload bytes so far.
    pub bytes: u64,
    /// Messages lost or dropped late so far (sink), or dropped at dispatch
    /// because their window had passed (source).
    pub lost: u64,
    /// The stream has ended.
    pub finished: bool,
    /// Sink: every message accounted for. Source: the sink kept it.
    pub complete: bool,
    /// The sink refused the stream, and why (`null` otherwise).
    pub refused: Option<String>,
}

/// One path's promise to a stream.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PromiseRecord {
    /// Path id.
    pub path: u32,
    /// Promised rate, bit/s.
    pub rate_bps: u64,
    /// With this probability (`null` for a violation-bound part).
    pub probability: Option<f64>,
}

/// The best achievable figures of an unmet guarantee.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct UnmetRecord {
    /// Largest rate mappable at the spec's probability, bit/s.
    pub best_rate_bps: u64,
    /// Largest probability at which the spec's rate is mappable.
    pub best_probability: Option<f64>,
    /// Smallest E\[Z\] at the spec's rate (violation-bound specs).
    pub best_expected_misses: Option<f64>,
}

/// One path of a [`SnapshotRecord`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PathRecord {
    /// Path id.
    pub id: u32,
    /// Route as the user named it (empty when unnamed).
    pub name: String,
    /// First hop's remote address.
    pub remote: String,
    /// Established and answering.
    pub up: bool,
    /// Sum of promised rates, bit/s.
    pub promised_bps: u64,
    /// 5th-percentile estimate, bit/s (`null` before it has samples).
    pub guaranteed_bps: Option<u64>,
    /// Delivered in the last interval, bit/s.
    pub delivered_bps: u64,
    /// Smoothed RTT of the whole path, seconds.
    pub rtt_s: f64,
    /// Loss ratio in the last interval.
    pub loss: f64,
    /// Usable samples in its bandwidth estimate.
    pub samples: u64,
    /// Bytes sent on its connections (payload and headers), in all.
    pub bytes_sent: u64,
    /// Packets declared lost on its connections, in all.
    pub packets_lost: u64,
    /// Why its connection last closed, if it did.
    pub error: Option<String>,
    /// Hops after the first, as relays reported them.
    pub hops: Vec<HopRecord>,
}

/// One relayed hop of a [`PathRecord`].
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct HopRecord {
    /// Place on the path (1: leaving the first relay).
    pub index: u8,
    /// Smoothed RTT, seconds.
    pub rtt_s: f64,
    /// Loss ratio.
    pub loss: f64,
    /// Delivered, bit/s.
    pub delivered_bps: u64,
    /// Bytes the relay holds towards this hop.
    pub queued_bytes: u64,
}

impl SnapshotRecord {
    /// The record of `snap`; `names` gives what the user called each path
    /// (paths without one get an empty name).
    pub fn new(snap: &Snapshot, names: &BTreeMap<PathId, String>) -> SnapshotRecord {
        SnapshotRecord {
            version: RECORD_VERSION,
            t: snap.at.as_secs_f64(),
            role: role_name(snap.role).into(),
            session: format!("{:016x}", snap.session.0),
            scheduler: snap.scheduler.into(),
            streams: snap
                .streams
                .iter()
                .map(|s| StreamRecord::new(snap.role, s))
                .collect(),
            paths: snap
                .paths
                .iter()
                .map(|p| PathRecord::new(p, names.get(&p.id).cloned().unwrap_or_default()))
                .collect(),
            resent: snap.stats.resent,
            paths_down: snap.stats.paths_down,
        }
    }
}

/// `source` or `sink`.
pub fn role_name(role: Role) -> &'static str {
    match role {
        Role::Source => "source",
        Role::Sink => "sink",
    }
}

impl StreamRecord {
    fn new(role: Role, s: &StreamSnapshot) -> StreamRecord {
        let last = &s.last;
        // Delays are measured where messages arrive, once some have.
        let delay = |d: crate::time::Duration| {
            (role == Role::Sink && last.messages > 0).then(|| d.as_secs_f64() * 1e3)
        };
        StreamRecord {
            id: s.id.0,
            name: stream_name(s.id, &s.config),
            spec: s.config.to_string(),
            rate_bps: last.rate.bps(),
            windows_met: s.windows_met,
            delay_p50_ms: delay(last.delay_p50),
            delay_p95_ms: delay(last.delay_p95),
            delay_p99_ms: delay(last.delay_p99),
            paths: s.paths.iter().map(PromiseRecord::from).collect(),
            unmet: s.unmet.as_ref().map(UnmetRecord::from),
            messages: s.messages,
            bytes: s.bytes,
            lost: last.lost,
            finished: s.finished,
            complete: s.complete,
            refused: s.refused.clone(),
        }
    }
}

impl From<&PathPromise> for PromiseRecord {
    fn from(p: &PathPromise) -> Self {
        PromiseRecord {
            path: p.path.0,
            rate_bps: p.rate.bps(),
            probability: p.probability,
        }
    }
}

impl From<&BestAchievable> for UnmetRecord {
    fn from(b: &BestAchievable) -> Self {
        UnmetRecord {
            best_rate_bps: b.rate.bps(),
            best_probability: b.probability,
            best_expected_misses: b.expected_misses,
        }
    }
}

impl PathRecord {
    fn new(p: &PathSnapshot, name: String) -> PathRecord {
        PathRecord {
            id: p.id.0,
            name,
            remote: p.addr.remote.to_string(),
            up: p.up,
            promised_bps: p.promised.bps(),
            guaranteed_bps: p.guaranteed.map(Bandwidth::bps),
            delivered_bps: p.delivered.bps(),
            rtt_s: p.srtt.as_secs_f64(),
            loss: p.loss,
            samples: p.samples as u64,
            bytes_sent: p.bytes_sent,
            packets_lost: p.packets_lost,
            error: p.error.clone(),
            hops: p
                .hops
                .iter()
                .map(|h| HopRecord {
                    index: h.index,
                    rtt_s: h.srtt.as_secs_f64(),
                    loss: h.loss,
                    delivered_bps: h.delivered.bps(),
                    queued_bytes: h.queued_bytes,
                })
                .collect(),
        }
    }
}

impl Serialize for Snapshot {
    /// As its [`SnapshotRecord`], paths unnamed.
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        SnapshotRecord::new(self, &BTreeMap::new()).serialize(s)
    }
}

/// An [`Event`] as a record: `{"version": 1, "event": "path_down",
/// "path": 0, "resent": 3}` and so on, one variant per event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EventRecord {
    /// [`RECORD_VERSION`].
    pub version: u32,
    /// What happened, with its figures.
    #[serde(flatten)]
    pub event: EventKind,
}

/// The events of [`EventRecord`], named in snake case under `event`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
#[non_exhaustive]
pub enum EventKind {
    /// [`Event::PathUp`].
    PathUp {
        /// Path id.
        path: u32,
    },
    /// [`Event::PathDown`].
    PathDown {
        /// Path id.
        path: u32,
        /// Reliable messages moved to the other paths.
        resent: u64,
    },
    /// [`Event::StreamOpened`].
    StreamOpened {
        /// Stream id.
        stream: u32,
    },
    /// [`Event::StreamMapped`].
    StreamMapped {
        /// Stream id.
        stream: u32,
        /// What each path promises it.
        paths: Vec<PromiseRecord>,
    },
    /// [`Event::GuaranteeUnmet`].
    GuaranteeUnmet {
        /// Stream id.
        stream: u32,
        /// What it asked for, as a spec string.
        spec: String,
        /// What could be had.
        best: UnmetRecord,
    },
    /// [`Event::PathUnmeasured`].
    PathUnmeasured {
        /// Path id.
        path: u32,
        /// Usable samples it gave.
        samples: u64,
    },
    /// [`Event::PathDip`].
    PathDip {
        /// Path id.
        path: u32,
        /// What it delivers in the dip, bit/s.
        delivered_bps: u64,
        /// What was promised on it, bit/s.
        promised_bps: u64,
        /// From the dip's first short interval to its detection, s.
        detected_after_s: f64,
    },
    /// [`Event::PathRecovered`].
    PathRecovered {
        /// Path id.
        path: u32,
    },
    /// [`Event::Remapped`].
    Remapped {
        /// `streams_changed`, `path_degraded`, `paths_changed` or `retry`.
        reason: String,
        /// The degraded path, for `path_degraded`.
        path: Option<u32>,
        /// When, s since the clock's origin.
        at_s: f64,
    },
    /// [`Event::Stats`].
    Stats {
        /// Stream id.
        stream: u32,
        /// Rate in the interval, bit/s.
        rate_bps: u64,
        /// Messages in the interval.
        messages: u64,
        /// Windows judged since the stream opened (sink).
        windows_judged: u64,
        /// Share of them that met the spec (`null` before one is judged).
        windows_met: Option<f64>,
        /// Messages lost or dropped late so far.
        lost: u64,
    },
    /// [`Event::StreamClosed`].
    StreamClosed {
        /// Stream id.
        stream: u32,
    },
    /// [`Event::StreamRefused`].
    StreamRefused {
        /// Stream id.
        stream: u32,
        /// The sink's reason.
        reason: String,
    },
    /// [`Event::Closed`].
    Closed {
        /// Why, in words.
        reason: String,
    },
}

impl From<&Event> for EventRecord {
    fn from(e: &Event) -> Self {
        use EventKind as K;
        let event = match e {
            Event::PathUp { path } => K::PathUp { path: path.0 },
            Event::PathDown { path, resent } => K::PathDown {
                path: path.0,
                resent: *resent,
            },
            Event::StreamOpened { stream } => K::StreamOpened { stream: stream.0 },
            Event::StreamMapped { stream, paths } => K::StreamMapped {
                stream: stream.0,
                paths: paths.iter().map(PromiseRecord::from).collect(),
            },
            Event::GuaranteeUnmet { stream, spec, best } => K::GuaranteeUnmet {
                stream: stream.0,
                spec: StreamConfig::new(*spec).to_string(),
                best: best.into(),
            },
            Event::PathUnmeasured { path, samples } => K::PathUnmeasured {
                path: path.0,
                samples: *samples,
            },
            Event::PathDip {
                path,
                delivered,
                promised,
                detected_after,
            } => K::PathDip {
                path: path.0,
                delivered_bps: delivered.bps(),
                promised_bps: promised.bps(),
                detected_after_s: detected_after.as_secs_f64(),
            },
            Event::PathRecovered { path } => K::PathRecovered { path: path.0 },
            Event::Remapped { reason, at } => {
                let (name, path) = match reason {
                    RemapReason::StreamsChanged => ("streams_changed", None),
                    RemapReason::PathDegraded(p) => ("path_degraded", Some(p.0)),
                    RemapReason::PathsChanged => ("paths_changed", None),
                    RemapReason::Retry => ("retry", None),
                };
                K::Remapped {
                    reason: name.into(),
                    path,
                    at_s: at.as_secs_f64(),
                }
            }
            Event::Stats { stream, stats } => K::Stats {
                stream: stream.0,
                rate_bps: stats.rate.bps(),
                messages: stats.messages,
                windows_judged: stats.windows_judged,
                windows_met: (stats.windows_judged > 0).then_some(stats.windows_met),
                lost: stats.lost,
            },
            Event::StreamClosed { stream } => K::StreamClosed { stream: stream.0 },
            Event::StreamRefused { stream, reason } => K::StreamRefused {
                stream: stream.0,
                reason: reason.clone(),
            },
            Event::Closed(reason) => K::Closed {
                reason: reason.to_string(),
            },
        };
        EventRecord {
            version: RECORD_VERSION,
            event,
        }
    }
}

impl Serialize for Event {
    /// As its [`EventRecord`].
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        EventRecord::from(self).serialize(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::id::StreamId;
    use crate::session::CloseReason;
    use crate::time::Duration;

    #[test]
    fn events_serialise_as_tagged_records_that_read_back() {
        let e = Event::PathDown {
            path: PathId(1),
            resent: 3,
        };
        let v = serde_json::to_value(&e).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"version": RECORD_VERSION, "event": "path_down", "path": 1, "resent": 3})
        );
        let back: EventRecord = serde_json::from_value(v).unwrap();
        assert_eq!(back, EventRecord::from(&e));
        let closed =
            serde_json::to_value(Event::Closed(CloseReason::PeerLost(Duration::from_secs(3))))
                .unwrap();
        assert_eq!(closed["event"], "closed");
        assert!(closed["reason"]
            .as_str()
            .unwrap()
            .contains("the peer is gone"));
    }

    #[test]
    fn stats_before_any_judged_window_have_no_windows_met() {
        let stats = crate::session::StreamStats {
            windows_met: 1.0,
            windows_judged: 0,
            ..Default::default()
        };
        let v = serde_json::to_value(Event::Stats {
            stream: StreamId(2),
            stats,
        })
        .unwrap();
        assert_eq!(v["event"], "stats");
        assert_eq!(v["windows_met"], serde_json::Value::Null);
    }
}
