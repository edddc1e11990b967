//! The session scenario file as written: serde structures with source
//! spans (the format is documented on [`super::scenario`]).
//!
//! Every value checked after parsing is a [`toml::Spanned`] so an error can
//! name its line; unknown keys are rejected (`deny_unknown_fields`).

use crate::scenario::raw::RawSynthetic;
use serde::Deserialize;
use toml::Spanned;

/// The top level of a session scenario.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawSession {
    pub name: Option<String>,
    pub seed: Option<u64>,
    pub duration: Spanned<String>,
    pub warmup: Option<Spanned<String>>,
    pub scheduler: Option<Spanned<String>>,
    pub bulk_yield: Option<Spanned<String>>,
    pub calibration: Option<Spanned<String>>,
    pub react_to_dips: Option<bool>,
    pub on_infeasible: Option<Spanned<String>>,
    #[serde(default, rename = "path")]
    pub paths: Vec<RawPath>,
    #[serde(default, rename = "stream")]
    pub streams: Vec<RawStream>,
}

/// One `[[path]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawPath {
    pub name: Spanned<String>,
    pub rate: Option<Spanned<String>>,
    pub trace: Option<Spanned<String>>,
    pub trace_format: Option<Spanned<String>>,
    pub trace_bin: Option<Spanned<String>>,
    pub scale: Option<Spanned<f64>>,
    pub synthetic: Option<Spanned<RawSynthetic>>,
    pub delay: Option<Spanned<String>>,
    pub loss: Option<Spanned<f64>>,
    pub queue: Option<Spanned<String>>,
    pub relays: Option<Spanned<u32>>,
    pub cross: Option<Spanned<RawCross>>,
    pub cut: Option<Spanned<RawCut>>,
}

/// `cross = { rate | trace (+ trace_format, trace_bin, scale) | synthetic, packet }`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawCross {
    pub rate: Option<Spanned<String>>,
    pub trace: Option<Spanned<String>>,
    pub trace_format: Option<Spanned<String>>,
    pub trace_bin: Option<Spanned<String>>,
    pub scale: Option<Spanned<f64>>,
    pub synthetic: Option<Spanned<RawSynthetic>>,
    pub packet: Option<Spanned<u32>>,
}

/// `cut = { at = "20s", for = "5s" }`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawCut {
    pub at: Spanned<String>,
    #[serde(rename = "for")]
    pub length: Spanned<String>,
}

/// One `[[stream]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawStream {
    pub name: Spanned<String>,
    /// The spec string (`rate=3mbit@0.95,deadline=200ms`), braid's one
    /// grammar; replaces `kind` and the spec keys below.
    pub spec: Option<Spanned<String>>,
    /// Deprecated table form of the spec: `kind` and its keys.
    pub kind: Option<Spanned<String>>,
    pub rate: Option<Spanned<String>>,
    pub probability: Option<Spanned<f64>>,
    pub x: Option<Spanned<u32>>,
    pub y: Option<Spanned<u32>>,
    pub window: Option<Spanned<String>>,
    pub size: Option<Spanned<u32>>,
    pub max_misses: Option<Spanned<f64>>,
    pub weight: Option<Spanned<u64>>,
    pub delivery: Option<Spanned<String>>,
    pub deadline: Option<Spanned<String>>,
    pub rtt: Option<Spanned<RawRttBound>>,
    pub loss: Option<Spanned<RawLossBound>>,
    pub delay: Option<Spanned<RawRttBound>>,
    pub pin: Option<Spanned<Vec<Spanned<String>>>>,
    pub copies: Option<Spanned<u8>>,
    pub inflight: Option<Spanned<u32>>,
    pub source: Option<Spanned<RawSource>>,
    pub start: Option<Spanned<String>>,
    pub stop: Option<Spanned<String>>,
}

/// `rtt = { max = "60ms", probability = 0.9 }` (and `delay = …`, the
/// one-way delay bound).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawRttBound {
    pub max: Spanned<String>,
    pub probability: Spanned<f64>,
}

/// `loss = { max = 0.01, probability = 0.9 }`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawLossBound {
    pub max: Spanned<f64>,
    pub probability: Spanned<f64>,
}

/// `source = "cbr:3mbit:1000B"` (braid's one SOURCE grammar), or the
/// deprecated table `source = { kind = "cbr" | "greedy" | "frames", … }`.
#[derive(Debug)]
pub(crate) enum RawSource {
    /// The SOURCE string.
    Text(String),
    /// The table.
    Table(RawSourceTable),
}

impl<'de> Deserialize<'de> for RawSource {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = RawSource;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a SOURCE string (e.g. \"cbr:3mbit:1000B\") or a source table")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<RawSource, E> {
                Ok(RawSource::Text(v.to_string()))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                map: A,
            ) -> Result<RawSource, A::Error> {
                // Straight from the document's deserializer, so the
                // table's fields keep their spans.
                RawSourceTable::deserialize(serde::de::value::MapAccessDeserializer::new(map))
                    .map(RawSource::Table)
            }
        }
        d.deserialize_any(V)
    }
}

/// The deprecated `source = { kind = … }` table.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawSourceTable {
    pub kind: Spanned<String>,
    pub rate: Option<Spanned<String>>,
    pub size: Option<Spanned<u32>>,
    pub trace: Option<Spanned<String>>,
    pub format: Option<Spanned<String>>,
    pub fps: Option<Spanned<f64>>,
}
