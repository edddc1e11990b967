//! `braid eval predictors`: flags, trace loading and the per-trace and
//! whole-folder runs. Tables and JSON are in `render`.
//!
//! One trace becomes one rate series: the trace binned at `--interval` with
//! [`Trace::checked_rate_series`]. The study then slides a window of
//! `--window` bins along it and predicts the next `--horizon`, which must be
//! a whole number (at least one) of intervals: a horizon of 1 s at 100 ms
//! bins is the next 10 bins. A horizon that is not a whole multiple is
//! refused rather than rounded, so the printed horizon is the one used.

use super::plan::{Evaluation, Plan};
use super::render;
use anyhow::{bail, Context as _};
use braid_core::estimate::study::{run_study, StudyConfig};
use braid_core::estimate::{AdwinConfig, DEFAULT_ACI_GAMMA, DEFAULT_ADWIN_DELTA};
use braid_core::trace::{Trace, TraceFormat};
use braid_core::Duration;
use std::path::{Path, PathBuf};

/// The largest trace file read (bytes); the largest real one is about 3 MB.
const MAX_TRACE_FILE_BYTES: u64 = 512 * 1024 * 1024;

/// How deep `--all` descends into sub-folders.
const MAX_DIR_DEPTH: usize = 16;

/// The most files `--all` looks at.
const MAX_DIR_FILES: usize = 10_000;

/// File extensions `--all` skips without trying to parse: documents,
/// images, archives, code and metadata that may sit beside traces.
const NON_TRACE_EXTENSIONS: &[&str] = &[
    "md", "rst", "pdf", "html", "htm", "png", "jpg", "jpeg", "svg", "gif", "json", "toml", "yaml",
    "yml", "py", "sh", "zip", "gz", "xz", "bz2", "tar", "zst", "ini", "log",
];

/// Flags of `braid eval predictors`.
#[derive(Debug, clap::Args)]
#[command(group = clap::ArgGroup::new("input").required(true).args(["trace", "all"]))]
pub struct PredictorsArgs {
    /// One trace file (mahimahi, `<seconds> <Mbit/s>` series incl. `.tsv`
    /// copies, or 5G G-NetTrack CSV; detected from the content).
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,

    /// Every trace file under DIR (recursively), one summary table. Where an
    /// original has a normalised `<name>.tsv` copy beside it, only the
    /// original is evaluated (binned at --interval).
    #[arg(long, value_name = "DIR")]
    pub all: Option<PathBuf>,

    /// Bin width of the rate series (one sample of the distribution).
    #[arg(long, default_value = "100ms")]
    pub interval: Duration,

    /// Window: how many past bins form the distribution F.
    #[arg(long, default_value_t = 500)]
    pub window: usize,

    /// What is predicted: the mean rate over the next HORIZON (a whole
    /// multiple of --interval).
    #[arg(long, default_value = "1s")]
    pub horizon: Duration,

    /// Guarantee probabilities P of the percentile predictor (b = F⁻¹(1 − P)),
    /// comma-separated, each strictly between 0 and 1.
    #[arg(
        long,
        value_delimiter = ',',
        default_values_t = [0.8, 0.9, 0.95, 0.99],
        value_name = "P,..."
    )]
    pub probability: Vec<f64>,

    /// Adaptive window (ADWIN, Bifet and Gavaldà 2007), evaluated beside
    /// the fixed one: the fewest bins a detected change leaves in the window
    /// (at most --window, which is also its largest size). Default: 2/5 of
    /// --window (200 at the default 500).
    #[arg(long, value_name = "BINS")]
    pub min_window: Option<usize>,

    /// Adaptive window: confidence δ of ADWIN's change test, in (0, 1)
    /// (the bound on false alarms per step for independent samples).
    #[arg(long, default_value_t = DEFAULT_ADWIN_DELTA, value_name = "DELTA")]
    pub delta: f64,

    /// Evaluate only the fixed window (no adaptive columns; the calibrated
    /// level, if on, then uses the fixed window).
    #[arg(long)]
    pub no_adaptive: bool,

    /// Calibrated level (adaptive conformal inference, Gibbs and Candès
    /// 2021): step size γ in (0, 1] of the online correction of the
    /// promise's quantile level.
    #[arg(long, default_value_t = DEFAULT_ACI_GAMMA, value_name = "GAMMA")]
    pub gamma: f64,

    /// Leave out the calibrated-level columns.
    #[arg(long)]
    pub no_calibrated: bool,

    /// Output: aligned tables or JSON.
    #[arg(long, value_enum, default_value_t = OutputFormat::Table)]
    pub format: OutputFormat,

    /// Trace format, if detection from the content should be overridden.
    #[arg(long, value_enum, value_name = "FORMAT")]
    pub trace_format: Option<TraceFormatArg>,
}

/// `--format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OutputFormat {
    /// Aligned text tables.
    Table,
    /// One JSON document on stdout.
    Json,
}

/// `--trace-format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum TraceFormatArg {
    /// mahimahi delivery opportunities (one ms timestamp per line).
    Mahimahi,
    /// `<seconds> <Mbit/s>` per line.
    Series,
    /// G-NetTrack Pro CSV (`DL_bitrate` in kbit/s).
    #[value(name = "5g-csv")]
    G5Csv,
}

impl From<TraceFormatArg> for TraceFormat {
    fn from(f: TraceFormatArg) -> Self {
        match f {
            TraceFormatArg::Mahimahi => TraceFormat::Mahimahi,
            TraceFormatArg::Series => TraceFormat::Series,
            TraceFormatArg::G5Csv => TraceFormat::G5Csv,
        }
    }
}

/// Validates the flags into the settings every trace of a run shares.
fn plan_from_args(args: &PredictorsArgs) -> anyhow::Result<Plan> {
    if args.interval.is_zero() {
        bail!("--interval must be longer than zero");
    }
    let horizon_bins = args
        .horizon
        .checked_div_duration(args.interval)
        .unwrap_or(0);
    let whole = args.interval.saturating_mul(horizon_bins) == args.horizon;
    if horizon_bins == 0 || !whole {
        bail!(
            "--horizon {} must be a whole multiple (at least 1) of --interval {}",
            args.horizon,
            args.interval
        );
    }
    if args.window == 0 {
        bail!("--window must be at least 1 bin");
    }
    if args.probability.is_empty() {
        bail!("--probability needs at least one value");
    }
    for &p in &args.probability {
        if !(p > 0.0 && p < 1.0) {
            bail!("--probability {p} is out of range: use numbers strictly between 0 and 1, e.g. 0.8,0.9,0.95,0.99");
        }
    }
    if !(args.delta > 0.0 && args.delta < 1.0) {
        bail!(
            "--delta {} is out of range: use a number strictly between 0 and 1, e.g. 0.002",
            args.delta
        );
    }
    if !(args.gamma > 0.0 && args.gamma <= 1.0) {
        bail!(
            "--gamma {} is out of range: use a number in (0, 1], e.g. 0.005",
            args.gamma
        );
    }
    let defaults = AdwinConfig::for_window(args.window);
    let min_window = args.min_window.unwrap_or(defaults.min_window);
    if min_window == 0 || min_window > args.window {
        bail!(
            "--min-window {min_window} is out of range: use 1 to --window ({})",
            args.window
        );
    }
    let adaptive = (!args.no_adaptive).then_some(AdwinConfig {
        min_window,
        delta: args.delta,
        ..defaults
    });
    let study = StudyConfig {
        window: args.window,
        adaptive,
        calibrated: (!args.no_calibrated).then_some(args.gamma),
        horizon: usize::try_from(horizon_bins).context("--horizon is too long")?,
        probabilities: args.probability.clone(),
        ..StudyConfig::default()
    };
    Ok(Plan {
        interval: args.interval,
        horizon: args.horizon,
        study,
        trace_format: args.trace_format.map(Into::into),
    })
}

/// Runs `braid eval predictors`.
pub fn run(args: PredictorsArgs) -> anyhow::Result<()> {
    let plan = plan_from_args(&args)?;
    match (&args.trace, &args.all) {
        (Some(path), None) => {
            let eval = evaluate(path, path.display().to_string(), &plan)?;
            match args.format {
                OutputFormat::Table => print!("{}", render::single(&eval, &plan)),
                OutputFormat::Json => println!("{}", serde_json::to_string_pretty(&eval)?),
            }
            Ok(())
        }
        (None, Some(dir)) => run_all(dir, &plan, args.format),
        // clap's ArgGroup makes exactly one of them present
        _ => bail!("give either --trace FILE or --all DIR"),
    }
}

/// Reads, parses and bins one trace and runs the study on it.
fn evaluate(path: &Path, name: String, plan: &Plan) -> anyhow::Result<Evaluation> {
    let trace = load_trace(path, plan.trace_format)?;
    let series = trace
        .checked_rate_series(plan.interval)
        .with_context(|| format!("binning trace {}", path.display()))?;
    let report = run_study(&series, &plan.study)
        .with_context(|| format!("evaluating trace {}", path.display()))?;
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

/// Reads and parses a trace file; errors read `reading trace FILE: line N: …`.
pub(super) fn load_trace(path: &Path, format: Option<TraceFormat>) -> anyhow::Result<Trace> {
    let context = || format!("reading trace {}", path.display());
    let meta = std::fs::metadata(path).with_context(context)?;
    if meta.is_dir() {
        return Err(anyhow::anyhow!("it is a directory (use --all DIR)")).with_context(context);
    }
    if meta.len() > MAX_TRACE_FILE_BYTES {
        return Err(anyhow::anyhow!(
            "file is {} bytes, above the limit of {MAX_TRACE_FILE_BYTES}",
            meta.len()
        ))
        .with_context(context);
    }
    let text = std::fs::read_to_string(path).with_context(context)?;
    Trace::parse(&text, format).with_context(context)
}

/// What `--all` found under DIR.
#[derive(Debug, Default)]
struct Found {
    /// Files to evaluate, relative to DIR, sorted.
    traces: Vec<PathBuf>,
    /// `.tsv` copies left out because their original is evaluated.
    copies: Vec<PathBuf>,
    /// Files skipped by extension.
    other: Vec<PathBuf>,
}

/// Lists DIR recursively (sorted, bounded, hidden entries and symlinked
/// folders skipped) and sorts files into traces, copies and other files.
fn discover(dir: &Path) -> anyhow::Result<Found> {
    let mut files = Vec::new();
    let mut stack = vec![(dir.to_path_buf(), 0usize)];
    while let Some((folder, depth)) = stack.pop() {
        let entries = std::fs::read_dir(&folder)
            .with_context(|| format!("reading folder {}", folder.display()))?;
        for entry in entries {
            let entry = entry.with_context(|| format!("reading folder {}", folder.display()))?;
            if entry.file_name().to_string_lossy().starts_with('.') {
                continue;
            }
            let kind = entry.file_type()?;
            let path = entry.path();
            if kind.is_dir() {
                if depth < MAX_DIR_DEPTH {
                    stack.push((path, depth + 1));
                }
            } else if path.is_file() {
                if files.len() == MAX_DIR_FILES {
                    bail!(
                        "{} holds more than {MAX_DIR_FILES} files; point --all at a smaller folder",
                        dir.display()
                    );
                }
                let rel = path.strip_prefix(dir).unwrap_or(&path).to_path_buf();
                files.push(rel);
            }
        }
    }
    files.sort();
    let mut found = Found::default();
    for rel in &files {
        let name = rel.to_string_lossy();
        let ext = rel
            .extension()
            .map(|e| e.to_string_lossy().to_ascii_lowercase())
            .unwrap_or_default();
        if ext == "tsv" {
            let original = PathBuf::from(name.strip_suffix(".tsv").unwrap_or(&name));
            if files.binary_search(&original).is_ok() {
                found.copies.push(rel.clone());
                continue;
            }
        }
        if NON_TRACE_EXTENSIONS.contains(&ext.as_str()) {
            found.other.push(rel.clone());
        } else {
            found.traces.push(rel.clone());
        }
    }
    Ok(found)
}

/// `--all DIR`: evaluates every trace, reports progress on stderr, prints
/// one summary.
fn run_all(dir: &Path, plan: &Plan, format: OutputFormat) -> anyhow::Result<()> {
    if !dir.is_dir() {
        bail!("reading folder {}: not a folder", dir.display());
    }
    let found = discover(dir)?;
    for rel in &found.other {
        eprintln!("note: skipping {}: not a trace file", rel.display());
    }
    if !found.copies.is_empty() {
        eprintln!(
            "note: {} trace(s) have a normalised .tsv copy beside them; evaluating the originals (binned at {}), not the copies",
            found.copies.len(),
            plan.interval
        );
    }
    if found.traces.is_empty() {
        bail!("no trace files under {}", dir.display());
    }
    let total = found.traces.len();
    let mut evaluations = Vec::new();
    let mut skipped = Vec::new();
    for (i, rel) in found.traces.iter().enumerate() {
        let name = rel.display().to_string();
        match evaluate(&dir.join(rel), name.clone(), plan) {
            Ok(eval) => {
                eprintln!(
                    "[{}/{total}] {name}: {} bins, {} predictions",
                    i + 1,
                    eval.bins,
                    eval.report.percentile.first().map_or(0, |p| p.predictions)
                );
                evaluations.push(eval);
            }
            Err(err) => {
                eprintln!("[{}/{total}] {name}: skipped: {err:#}", i + 1);
                skipped.push((name, format!("{err:#}")));
            }
        }
    }
    if evaluations.is_empty() {
        bail!(
            "none of the {total} files under {} could be evaluated (see above)",
            dir.display()
        );
    }
    match format {
        OutputFormat::Table => print!(
            "{}",
            render::summary(&evaluations, plan, &found.copies, &skipped)
        ),
        OutputFormat::Json => {
            let doc = serde_json::json!({
                "folder": dir.display().to_string(),
                "interval": plan.interval.to_string(),
                "window": plan.study.window,
                "horizon": plan.horizon.to_string(),
                "horizon_bins": plan.study.horizon,
                "traces": evaluations,
                "tsv_copies_not_evaluated": found.copies,
                "skipped": skipped
                    .iter()
                    .map(|(f, e)| serde_json::json!({"file": f, "reason": e}))
                    .collect::<Vec<_>>(),
            });
            println!("{}", serde_json::to_string_pretty(&doc)?);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        args: PredictorsArgs,
    }

    fn plan(argv: &[&str]) -> anyhow::Result<Plan> {
        let mut full = vec!["x", "--trace", "f"];
        full.extend_from_slice(argv);
        plan_from_args(&Cli::try_parse_from(full)?.args)
    }

    #[test]
    fn defaults_match_the_issue() {
        let p = plan(&[]).unwrap();
        assert_eq!(p.interval, Duration::from_millis(100));
        assert_eq!(p.study.window, 500);
        assert_eq!(p.study.horizon, 10);
        assert_eq!(p.study.probabilities, vec![0.8, 0.9, 0.95, 0.99]);
    }

    #[test]
    fn horizon_must_be_a_whole_number_of_intervals() {
        assert_eq!(plan(&["--horizon", "300ms"]).unwrap().study.horizon, 3);
        assert_eq!(
            plan(&["--interval", "1s", "--horizon", "1s"])
                .unwrap()
                .study
                .horizon,
            1
        );
        let e = plan(&["--horizon", "150ms"]).unwrap_err().to_string();
        assert!(e.contains("whole multiple"), "{e}");
        assert!(plan(&["--horizon", "50ms"]).is_err());
    }

    #[test]
    fn rejects_bad_flags() {
        assert!(plan(&["--probability", "0.9,1.0"]).is_err());
        assert!(plan(&["--probability", "0"]).is_err());
        assert!(plan(&["--window", "0"]).is_err());
        assert!(plan(&["--interval", "0ms"]).is_err());
        assert_eq!(
            plan(&["--probability", "0.5,0.75"])
                .unwrap()
                .study
                .probabilities,
            vec![0.5, 0.75]
        );
    }

    #[test]
    fn trace_and_all_are_exclusive_and_one_is_required() {
        assert!(Cli::try_parse_from(["x"]).is_err());
        assert!(Cli::try_parse_from(["x", "--trace", "a", "--all", "b"]).is_err());
        assert!(Cli::try_parse_from(["x", "--all", "b"]).is_ok());
    }
}
