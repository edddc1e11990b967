//! `braid eval predictors`: flags, and printing what
//! [`braid_sim::study`] finds (the study, the trace loading and the
//! tables live there).

use anyhow::bail;
use braid_core::estimate::{DEFAULT_ACI_GAMMA, DEFAULT_ADWIN_DELTA};
use braid_core::trace::TraceFormat;
use braid_core::Duration;
use braid_sim::study::{
    evaluate_file, single_table, study_folder, summary_table, FolderProgress, StudyPlan,
    StudySettings,
};
use std::path::{Path, PathBuf};

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

/// The study's settings from the flags.
fn settings(args: &PredictorsArgs) -> StudySettings {
    StudySettings {
        interval: args.interval,
        window: args.window,
        horizon: args.horizon,
        probabilities: args.probability.clone(),
        adaptive: !args.no_adaptive,
        min_window: args.min_window,
        delta: args.delta,
        calibrated: !args.no_calibrated,
        gamma: args.gamma,
        trace_format: args.trace_format.map(Into::into),
    }
}

/// Runs `braid eval predictors`.
pub fn run(args: PredictorsArgs) -> anyhow::Result<()> {
    // The library names settings as the flags do, without the dashes.
    let plan = settings(&args)
        .plan()
        .map_err(|e| anyhow::anyhow!("--{e}"))?;
    match (&args.trace, &args.all) {
        (Some(path), None) => {
            let eval = evaluate_file(path, path.display().to_string(), &plan)?;
            match args.format {
                OutputFormat::Table => print!("{}", single_table(&eval, &plan)),
                OutputFormat::Json => println!("{}", serde_json::to_string_pretty(&eval)?),
            }
            Ok(())
        }
        (None, Some(dir)) => run_all(dir, &plan, args.format),
        // clap's ArgGroup makes exactly one of them present
        _ => bail!("give either --trace FILE or --all DIR"),
    }
}

/// `--all DIR`: evaluates every trace, reports progress on stderr, prints
/// one summary.
fn run_all(dir: &Path, plan: &StudyPlan, format: OutputFormat) -> anyhow::Result<()> {
    let study = study_folder(dir, plan, |p| {
        match p {
        FolderProgress::NotATrace(rel) => {
            eprintln!("note: skipping {}: not a trace file", rel.display());
        }
        FolderProgress::CopiesLeftOut(n) => eprintln!(
            "note: {n} trace(s) have a normalised .tsv copy beside them; evaluating the originals (binned at {}), not the copies",
            plan.interval
        ),
        FolderProgress::Evaluated { index, total, eval } => eprintln!(
            "[{index}/{total}] {}: {} bins, {} predictions",
            eval.trace,
            eval.bins,
            eval.report.percentile.first().map_or(0, |p| p.predictions)
        ),
        FolderProgress::Skipped { index, total, skipped } => {
            eprintln!("[{index}/{total}] {}: skipped: {}", skipped.file, skipped.reason);
        }
        _ => {}
    }
    })?;
    match format {
        OutputFormat::Table => print!(
            "{}",
            summary_table(
                &study.traces,
                plan,
                &study.tsv_copies_not_evaluated,
                &study.skipped
            )
        ),
        // Through a `Value`, whose keys are sorted: the order this JSON
        // has always had.
        OutputFormat::Json => println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::to_value(&study)?)?
        ),
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

    fn settings_of(argv: &[&str]) -> StudySettings {
        let mut full = vec!["x", "--trace", "f"];
        full.extend_from_slice(argv);
        settings(&Cli::try_parse_from(full).unwrap().args)
    }

    #[test]
    fn the_flags_defaults_are_the_librarys() {
        assert_eq!(settings_of(&[]), StudySettings::default());
        let s = settings_of(&["--probability", "0.5,0.75", "--no-adaptive"]);
        assert_eq!(s.probabilities, vec![0.5, 0.75]);
        assert!(!s.adaptive);
    }

    #[test]
    fn trace_and_all_are_exclusive_and_one_is_required() {
        assert!(Cli::try_parse_from(["x"]).is_err());
        assert!(Cli::try_parse_from(["x", "--trace", "a", "--all", "b"]).is_err());
        assert!(Cli::try_parse_from(["x", "--all", "b"]).is_ok());
    }
}
