//! The scenario file as written: serde structures with source spans.
//!
//! Every user-supplied value that is checked after parsing is a
//! [`toml::Spanned`], so an error can name the line it came from. Unknown
//! keys are rejected (`deny_unknown_fields`) so a typo is an error, not a
//! silently ignored setting.

use serde::Deserialize;
use toml::Spanned;

/// The top level of a scenario file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawScenario {
    pub name: Option<String>,
    pub seed: Option<u64>,
    pub duration: Spanned<String>,
    pub bin: Option<Spanned<String>>,
    pub nodes: Spanned<Vec<Spanned<String>>>,
    #[serde(default, rename = "link")]
    pub links: Vec<RawLink>,
    #[serde(default, rename = "flow")]
    pub flows: Vec<RawFlow>,
}

/// One `[[link]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawLink {
    pub name: Spanned<String>,
    pub from: Spanned<String>,
    pub to: Spanned<String>,
    pub rate: Option<Spanned<String>>,
    pub trace: Option<Spanned<String>>,
    pub trace_format: Option<Spanned<String>>,
    pub trace_bin: Option<Spanned<String>>,
    pub scale: Option<Spanned<f64>>,
    pub synthetic: Option<Spanned<RawSynthetic>>,
    pub delay: Option<Spanned<String>>,
    pub queue: Option<Spanned<String>>,
    pub loss: Option<Spanned<f64>>,
    pub duplicate: Option<Spanned<f64>>,
    pub reorder: Option<Spanned<f64>>,
    pub reorder_delay: Option<Spanned<String>>,
}

/// `synthetic = { mean = "10mbit", cov = 0.3, corr_time = "2s", step = "100ms" }`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawSynthetic {
    pub mean: Spanned<String>,
    pub cov: Spanned<f64>,
    pub corr_time: Option<Spanned<String>>,
    pub step: Option<Spanned<String>>,
}

/// One `[[flow]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawFlow {
    pub name: Spanned<String>,
    pub kind: Spanned<String>,
    pub from: Spanned<String>,
    pub to: Spanned<String>,
    pub route: Option<Spanned<Vec<Spanned<String>>>>,
    pub ack_route: Option<Spanned<Vec<Spanned<String>>>>,
    pub start: Option<Spanned<String>>,
    pub stop: Option<Spanned<String>>,
    pub packet: Option<Spanned<u32>>,
    pub rate: Option<Spanned<String>>,
    pub trace: Option<Spanned<String>>,
    pub trace_format: Option<Spanned<String>>,
    pub trace_bin: Option<Spanned<String>>,
    pub scale: Option<Spanned<f64>>,
    pub queue_target: Option<Spanned<String>>,
    pub window: Option<Spanned<u32>>,
    pub ack_size: Option<Spanned<u32>>,
}
