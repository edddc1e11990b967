//! What one `braid eval predictors` run works with: the validated settings
//! ([`Plan`]) and the result of one trace ([`Evaluation`]). Shared by the
//! run (`predictors`) and the output (`render`), which depend on it and not
//! on each other's internals.

use braid_core::estimate::study::{StudyConfig, StudyReport};
use braid_core::trace::TraceFormat;
use braid_core::Duration;

/// Validated settings shared by every trace of a run.
#[derive(Debug, Clone)]
pub(crate) struct Plan {
    pub interval: Duration,
    pub horizon: Duration,
    pub study: StudyConfig,
    pub trace_format: Option<TraceFormat>,
}

/// One evaluated trace.
#[derive(Debug, serde::Serialize)]
pub(crate) struct Evaluation {
    /// The path as given (`--trace`) or relative to DIR (`--all`).
    pub trace: String,
    pub format: TraceFormat,
    /// Samples in the file (mahimahi: delivery opportunities; otherwise rows).
    pub trace_samples: usize,
    pub duration_s: f64,
    /// The bin width, e.g. `100ms`.
    pub interval: String,
    /// Bins in the rate series the study ran on.
    pub bins: usize,
    pub horizon: String,
    pub window: usize,
    pub horizon_bins: usize,
    pub report: StudyReport,
}
