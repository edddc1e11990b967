//! The predictor study of seed 000 §VI-A (Fig. 7) on trace files: the
//! arithmetic is [`braid_core::estimate::study`]; this module reads the
//! files (through the one trace loader, [`crate::trace_file`]), bins them,
//! runs the study on one trace or a whole folder, and renders tables.
//! `braid eval predictors` is argument parsing around it.
//!
//! Main items: [`StudySettings`] (what a run asks for, with the CLI's
//! defaults) and [`StudyPlan`] (the same, validated), [`evaluate_file`]
//! ([`Evaluation`]), [`study_folder`] ([`FolderStudy`]), the renderers
//! [`single_table`], [`summary_table`], [`study_tables`], and
//! [`StudyError`].
//!
//! One trace becomes one rate series: the trace binned at the interval
//! with [`Trace::checked_rate_series`]. The study slides a window of
//! `window` bins along it and predicts the next `horizon`, which must be a
//! whole number (at least one) of intervals: a horizon of 1 s at 100 ms
//! bins is the next 10 bins. A horizon that is not a whole multiple is
//! refused rather than rounded, so the reported horizon is the one used.
//!
//! ```no_run
//! use braid_sim::study::{evaluate_file, single_table, StudySettings};
//! let plan = StudySettings::default().plan()?;
//! let eval = evaluate_file("trace.down".as_ref(), "trace.down".into(), &plan)?;
//! print!("{}", single_table(&eval, &plan));
//! # Ok::<(), braid_sim::study::StudyError>(())
//! ```

mod files;
mod render;

pub use files::{discover, Found, MAX_DIR_DEPTH, MAX_DIR_FILES, NON_TRACE_EXTENSIONS};
pub use render::{single_table, study_tables, summary_table, FLAG_MARGIN};

use crate::trace_file::{load_trace, TraceFileError};
use braid_core::estimate::study::{run_study, StudyConfig, StudyReport};
use braid_core::estimate::{AdwinConfig, DEFAULT_ACI_GAMMA, DEFAULT_ADWIN_DELTA};
use braid_core::trace::{Trace, TraceError, TraceFormat};
use braid_core::Duration;
use std::path::{Path, PathBuf};

/// Why a study could not run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StudyError {
    /// A setting is out of range. The message starts with the setting's
    /// name as [`StudySettings`] spells it (with `-` for `_`: the CLI puts
    /// `--` before it to name its flag) and says what is allowed.
    #[error("{0}")]
    Settings(String),
    /// A trace file could not be read or parsed.
    #[error("reading trace {0}")]
    Trace(#[from] TraceFileError),
    /// The trace gives no rate series at the interval.
    #[error("binning trace {}: {source}", path.display())]
    Bin {
        /// The file.
        path: PathBuf,
        /// Why.
        source: TraceError,
    },
    /// The series is unusable for the study (too short for the window).
    #[error("evaluating trace {}: {source}", path.display())]
    Study {
        /// The file.
        path: PathBuf,
        /// Why.
        source: braid_core::estimate::study::StudyError,
    },
    /// A folder could not be listed, or is not a folder.
    #[error("reading folder {}: {message}", path.display())]
    Folder {
        /// The folder.
        path: PathBuf,
        /// What went wrong.
        message: String,
    },
    /// A folder holds more files than a study looks at.
    #[error("{} holds more than {MAX_DIR_FILES} files; point the study at a smaller folder", path.display())]
    TooManyFiles {
        /// The folder.
        path: PathBuf,
    },
    /// A folder holds no trace files.
    #[error("no trace files under {}", path.display())]
    NoTraces {
        /// The folder.
        path: PathBuf,
    },
    /// No trace in a folder could be evaluated.
    #[error("none of the {total} files under {} could be evaluated (see above)", path.display())]
    NoneEvaluated {
        /// The folder.
        path: PathBuf,
        /// Trace files tried.
        total: usize,
    },
}

/// What a study run asks for. `Default` gives `braid eval predictors`'
/// defaults: 100 ms bins, a window of 500, a 1 s horizon, P = 0.8, 0.9,
/// 0.95, 0.99, the adaptive (ADWIN) and calibrated (ACI) promises beside
/// the fixed one.
#[derive(Debug, Clone, PartialEq)]
pub struct StudySettings {
    /// Bin width of the rate series (one sample of the distribution).
    pub interval: Duration,
    /// How many past bins form the distribution F.
    pub window: usize,
    /// What is predicted: the mean rate over the next `horizon` (a whole
    /// multiple of `interval`).
    pub horizon: Duration,
    /// Guarantee probabilities P, each strictly between 0 and 1.
    pub probabilities: Vec<f64>,
    /// Evaluate the adaptive (ADWIN) window beside the fixed one.
    pub adaptive: bool,
    /// The fewest bins a detected change leaves in the adaptive window
    /// (`None`: 2/5 of `window`).
    pub min_window: Option<usize>,
    /// ADWIN's confidence δ, in (0, 1).
    pub delta: f64,
    /// Evaluate the calibrated (adaptive conformal) promise.
    pub calibrated: bool,
    /// Its step γ, in (0, 1].
    pub gamma: f64,
    /// The trace format, when detection from the content is to be
    /// overridden.
    pub trace_format: Option<TraceFormat>,
}

impl Default for StudySettings {
    fn default() -> Self {
        StudySettings {
            interval: Duration::from_millis(100),
            window: 500,
            horizon: Duration::from_secs(1),
            probabilities: vec![0.8, 0.9, 0.95, 0.99],
            adaptive: true,
            min_window: None,
            delta: DEFAULT_ADWIN_DELTA,
            calibrated: true,
            gamma: DEFAULT_ACI_GAMMA,
            trace_format: None,
        }
    }
}

impl StudySettings {
    /// Validates the settings into the plan every trace of a run shares.
    ///
    /// # Errors
    /// [`StudyError::Settings`], naming the setting and what is allowed.
    pub fn plan(&self) -> Result<StudyPlan, StudyError> {
        let bad = |m: String| Err(StudyError::Settings(m));
        if self.interval.is_zero() {
            return bad("interval must be longer than zero".into());
        }
        let horizon_bins = self
            .horizon
            .checked_div_duration(self.interval)
            .unwrap_or(0);
        let whole = self.interval.saturating_mul(horizon_bins) == self.horizon;
        if horizon_bins == 0 || !whole {
            return bad(format!(
                "horizon {} must be a whole multiple (at least 1) of interval {}",
                self.horizon, self.interval
            ));
        }
        if self.window == 0 {
            return bad("window must be at least 1 bin".into());
        }
        if self.probabilities.is_empty() {
            return bad("probability needs at least one value".into());
        }
        for &p in &self.probabilities {
            if !(p > 0.0 && p < 1.0) {
                return bad(format!("probability {p} is out of range: use numbers strictly between 0 and 1, e.g. 0.8,0.9,0.95,0.99"));
            }
        }
        if !(self.delta > 0.0 && self.delta < 1.0) {
            return bad(format!(
                "delta {} is out of range: use a number strictly between 0 and 1, e.g. 0.002",
                self.delta
            ));
        }
        if !(self.gamma > 0.0 && self.gamma <= 1.0) {
            return bad(format!(
                "gamma {} is out of range: use a number in (0, 1], e.g. 0.005",
                self.gamma
            ));
        }
        let defaults = AdwinConfig::for_window(self.window);
        let min_window = self.min_window.unwrap_or(defaults.min_window);
        if min_window == 0 || min_window > self.window {
            return bad(format!(
                "min-window {min_window} is out of range: use 1 to window ({})",
                self.window
            ));
        }
        let Ok(horizon) = usize::try_from(horizon_bins) else {
            return bad("horizon is too long".into());
        };
        let study = StudyConfig {
            window: self.window,
            adaptive: self.adaptive.then_some(AdwinConfig {
                min_window,
                delta: self.delta,
                ..defaults
            }),
            calibrated: self.calibrated.then_some(self.gamma),
            horizon,
            probabilities: self.probabilities.clone(),
            ..StudyConfig::default()
        };
        Ok(StudyPlan {
            interval: self.interval,
            horizon: self.horizon,
            study,
            trace_format: self.trace_format,
        })
    }
}

/// Validated settings shared by every trace of a run.
#[derive(Debug, Clone)]
pub struct StudyPlan {
    /// Bin width.
    pub interval: Duration,
    /// What is predicted (a whole number of bins).
    pub horizon: Duration,
    /// The study's own configuration, in bins.
    pub study: StudyConfig,
    /// Forced trace format, if any.
    pub trace_format: Option<TraceFormat>,
}

/// One evaluated trace.
#[derive(Debug, serde::Serialize)]
pub struct Evaluation {
    /// The trace's name (the path as given, or relative to the folder).
    pub trace: String,
    /// Its format.
    pub format: TraceFormat,
    /// Samples in the file (mahimahi: delivery opportunities; otherwise rows).
    pub trace_samples: usize,
    /// Its duration, s.
    pub duration_s: f64,
    /// The bin width, e.g. `100ms`.
    pub interval: String,
    /// Bins in the rate series the study ran on.
    pub bins: usize,
    /// The horizon, e.g. `1s`.
    pub horizon: String,
    /// Window, bins.
    pub window: usize,
    /// Horizon, bins.
    pub horizon_bins: usize,
    /// The study's results.
    pub report: StudyReport,
}

/// Reads, parses and bins the trace at `path` and runs the study on it;
/// `name` is what the result calls it.
///
/// # Errors
/// [`StudyError::Trace`], [`StudyError::Bin`] or [`StudyError::Study`],
/// each naming the file.
pub fn evaluate_file(
    path: &Path,
    name: String,
    plan: &StudyPlan,
) -> Result<Evaluation, StudyError> {
    let trace = load_trace(path, plan.trace_format)?;
    evaluate_trace(&trace, path, name, plan)
}

/// [`evaluate_file`] on a trace already in memory (`path` names it in
/// errors).
///
/// # Errors
/// [`StudyError::Bin`] or [`StudyError::Study`].
pub fn evaluate_trace(
    trace: &Trace,
    path: &Path,
    name: String,
    plan: &StudyPlan,
) -> Result<Evaluation, StudyError> {
    let series = trace
        .checked_rate_series(plan.interval)
        .map_err(|source| StudyError::Bin {
            path: path.to_path_buf(),
            source,
        })?;
    let report = run_study(&series, &plan.study).map_err(|source| StudyError::Study {
        path: path.to_path_buf(),
        source,
    })?;
    Ok(Evaluation {
        trace: name,
        format: trace.format(),
        trace_samples: trace.samples(),
        duration_s: trace.duration().as_secs_f64(),
        interval: plan.interval.to_string(),
        bins: series.len(),
        horizon: plan.horizon.to_string(),
        window: plan.study.window,
        horizon_bins: plan.study.horizon,
        report,
    })
}

/// A file of a folder study that could not be evaluated.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Skipped {
    /// The file, relative to the folder.
    pub file: String,
    /// Why (the whole error chain, one line).
    pub reason: String,
}

/// The study of every trace in a folder (`braid eval predictors --all`;
/// its JSON is this, serialised).
#[derive(Debug, serde::Serialize)]
pub struct FolderStudy {
    /// The folder.
    pub folder: String,
    /// Horizon, e.g. `1s`.
    pub horizon: String,
    /// Horizon, bins.
    pub horizon_bins: usize,
    /// Bin width, e.g. `100ms`.
    pub interval: String,
    /// Files that could not be evaluated.
    pub skipped: Vec<Skipped>,
    /// One result per evaluated trace, in file order.
    pub traces: Vec<Evaluation>,
    /// Normalised `.tsv` copies left out because their originals were
    /// evaluated.
    pub tsv_copies_not_evaluated: Vec<PathBuf>,
    /// Window, bins.
    pub window: usize,
}

/// What a folder study reports while it runs.
#[derive(Debug)]
#[non_exhaustive]
pub enum FolderProgress<'a> {
    /// A file left out: not a trace by its extension.
    NotATrace(&'a Path),
    /// This many traces have a `.tsv` copy beside them that is not evaluated.
    CopiesLeftOut(usize),
    /// Trace `index` (from 1) of `total` was evaluated.
    Evaluated {
        /// Place in the run, from 1.
        index: usize,
        /// Traces in the run.
        total: usize,
        /// The result.
        eval: &'a Evaluation,
    },
    /// Trace `index` of `total` could not be evaluated.
    Skipped {
        /// Place in the run, from 1.
        index: usize,
        /// Traces in the run.
        total: usize,
        /// The file and why.
        skipped: &'a Skipped,
    },
}

/// Evaluates every trace under `dir` (recursively; see [`discover`]),
/// telling `progress` about each file as it goes.
///
/// # Errors
/// [`StudyError::Folder`] when `dir` is not a readable folder,
/// [`StudyError::TooManyFiles`], [`StudyError::NoTraces`], or
/// [`StudyError::NoneEvaluated`] when no trace could be evaluated.
pub fn study_folder(
    dir: &Path,
    plan: &StudyPlan,
    mut progress: impl FnMut(FolderProgress<'_>),
) -> Result<FolderStudy, StudyError> {
    if !dir.is_dir() {
        return Err(StudyError::Folder {
            path: dir.to_path_buf(),
            message: "not a folder".into(),
        });
    }
    let found = discover(dir)?;
    for rel in &found.other {
        progress(FolderProgress::NotATrace(rel));
    }
    if !found.copies.is_empty() {
        progress(FolderProgress::CopiesLeftOut(found.copies.len()));
    }
    if found.traces.is_empty() {
        return Err(StudyError::NoTraces {
            path: dir.to_path_buf(),
        });
    }
    let total = found.traces.len();
    let mut traces = Vec::new();
    let mut skipped = Vec::new();
    for (i, rel) in found.traces.iter().enumerate() {
        let name = rel.display().to_string();
        match evaluate_file(&dir.join(rel), name.clone(), plan) {
            Ok(eval) => {
                progress(FolderProgress::Evaluated {
                    index: i + 1,
                    total,
                    eval: &eval,
                });
                traces.push(eval);
            }
            Err(err) => {
                let s = Skipped {
                    file: name,
                    reason: error_chain(&err),
                };
                progress(FolderProgress::Skipped {
                    index: i + 1,
                    total,
                    skipped: &s,
                });
                skipped.push(s);
            }
        }
    }
    if traces.is_empty() {
        return Err(StudyError::NoneEvaluated {
            path: dir.to_path_buf(),
            total,
        });
    }
    Ok(FolderStudy {
        folder: dir.display().to_string(),
        interval: plan.interval.to_string(),
        window: plan.study.window,
        horizon: plan.horizon.to_string(),
        horizon_bins: plan.study.horizon,
        traces,
        tsv_copies_not_evaluated: found.copies,
        skipped,
    })
}

/// An error and its sources on one line, `a: b: c` (as anyhow's `{:#}`),
/// without repeating a source a message already contains.
fn error_chain(err: &dyn std::error::Error) -> String {
    let mut out = err.to_string();
    let mut source = err.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = s.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(change: impl FnOnce(&mut StudySettings)) -> Result<StudyPlan, StudyError> {
        let mut s = StudySettings::default();
        change(&mut s);
        s.plan()
    }

    #[test]
    fn defaults_match_the_seed_study() {
        let p = plan(|_| {}).unwrap();
        assert_eq!(p.interval, Duration::from_millis(100));
        assert_eq!(p.study.window, 500);
        assert_eq!(p.study.horizon, 10);
        assert_eq!(p.study.probabilities, vec![0.8, 0.9, 0.95, 0.99]);
        assert!(p.study.adaptive.is_some() && p.study.calibrated.is_some());
    }

    #[test]
    fn horizon_must_be_a_whole_number_of_intervals() {
        let ms = Duration::from_millis;
        assert_eq!(plan(|s| s.horizon = ms(300)).unwrap().study.horizon, 3);
        let one = plan(|s| {
            s.interval = ms(1000);
            s.horizon = ms(1000);
        });
        assert_eq!(one.unwrap().study.horizon, 1);
        let e = plan(|s| s.horizon = ms(150)).unwrap_err().to_string();
        assert!(e.contains("horizon 150ms must be a whole multiple"), "{e}");
        assert!(plan(|s| s.horizon = ms(50)).is_err());
    }

    #[test]
    fn settings_out_of_range_are_refused() {
        assert!(plan(|s| s.probabilities = vec![0.9, 1.0]).is_err());
        assert!(plan(|s| s.probabilities = vec![0.0]).is_err());
        assert!(plan(|s| s.probabilities.clear()).is_err());
        assert!(plan(|s| s.window = 0).is_err());
        assert!(plan(|s| s.interval = Duration::ZERO).is_err());
        assert!(plan(|s| s.delta = 1.0).is_err());
        assert!(plan(|s| s.gamma = 0.0).is_err());
        assert!(plan(|s| s.min_window = Some(501)).is_err());
        let p = plan(|s| s.probabilities = vec![0.5, 0.75]).unwrap();
        assert_eq!(p.study.probabilities, vec![0.5, 0.75]);
    }
}
