//! Text tables of the predictor study: one trace in detail, or one
//! summary row per trace. Pure functions from results to a `String`, laid
//! out by the simulator's one table renderer (`report::table::grid`).

use super::{Evaluation, Skipped, StudyPlan};
use crate::report::table::grid;
use braid_core::estimate::study::{AverageResult, PercentileResult, SeedTestResult, StudyReport};
use std::fmt::Write as _;
use std::path::PathBuf;

/// How far above nominal a violation rate may be before it is flagged
/// (within nominal + 0.02 is the study's acceptance line).
pub const FLAG_MARGIN: f64 = 0.02;

/// `12.3%`, or `-` for NaN (no predictions).
fn pct(v: f64) -> String {
    if v.is_finite() {
        format!("{:.1}%", v * 100.0)
    } else {
        "-".to_string()
    }
}

/// `+1.2%` / `-3.4%`, or `-` for NaN.
fn signed_pct(v: f64) -> String {
    if v.is_finite() {
        format!("{:+.1}%", v * 100.0)
    } else {
        "-".to_string()
    }
}

/// A violation rate with a `*` if it exceeds nominal + [`FLAG_MARGIN`].
fn violation(rate: f64, nominal: f64) -> String {
    let flag = if rate > nominal + FLAG_MARGIN {
        "*"
    } else {
        " "
    };
    format!("{}{flag}", pct(rate))
}

/// An aligned table: first column left-aligned, the rest right-aligned.
fn table(header: &[String], rows: &[Vec<String>]) -> String {
    let all: Vec<Vec<String>> = std::iter::once(header.to_vec())
        .chain(rows.iter().cloned())
        .collect();
    grid(&all, 1)
}

fn strings(cells: &[&str]) -> Vec<String> {
    cells.iter().map(|s| s.to_string()).collect()
}

/// The three tables of one study report: average predictors, percentile
/// predictor, the seed's test. `horizon` names what is predicted (e.g. `1s`).
pub fn study_tables(report: &StudyReport, horizon: &str) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Average predictors: relative error of the predicted mean rate over the next {horizon} (seed Fig. 7: about 20% mean)"
    );
    let rows: Vec<Vec<String>> = report
        .average
        .iter()
        .map(|a| {
            vec![
                a.predictor.clone(),
                pct(a.mean_relative_error),
                pct(a.median_relative_error),
                pct(a.weighted_relative_error),
                signed_pct(a.mean_signed_relative_error),
                a.predictions.to_string(),
                a.skipped_zero_actual.to_string(),
            ]
        })
        .collect();
    out.push_str(&table(
        &strings(&[
            "predictor",
            "mean rel. error",
            "median",
            "traffic-weighted",
            "bias (mean signed)",
            "predictions",
            "skipped (actual 0)",
        ]),
        &rows,
    ));

    let _ = writeln!(
        out,
        "\nPercentile predictor: promise \"mean rate over the next {horizon} >= b\", b = F^-1(1-P) of the window"
    );
    let adaptive = report.adaptive.as_ref();
    let calibrated = report.calibrated.as_ref();
    let rows: Vec<Vec<String>> = report
        .percentile
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let mut row = vec![
                format!("{:.3}", p.probability),
                pct(p.nominal_violation),
                violation(p.violation_rate, p.nominal_violation),
                format!("{:.3}", p.mean_promised_bps / 1e6),
                p.predictions.to_string(),
            ];
            if let Some(c) = calibrated {
                let r = c.percentile.get(i);
                row.push(r.map_or("-".into(), |r| {
                    violation(r.violation_rate, r.nominal_violation)
                }));
                row.push(r.map_or("-".into(), |r| format!("{:.3}", r.mean_promised_bps / 1e6)));
            }
            if let Some(a) = adaptive {
                let r = a.percentile.get(i);
                row.push(r.map_or("-".into(), |r| {
                    violation(r.violation_rate, r.nominal_violation)
                }));
                row.push(r.map_or("-".into(), |r| format!("{:.3}", r.mean_promised_bps / 1e6)));
            }
            row
        })
        .collect();
    let mut header = strings(&[
        "P",
        "nominal 1-P",
        "violation",
        "mean b [Mbit/s]",
        "predictions",
    ]);
    if calibrated.is_some() {
        header.push("calibrated violation".to_string());
        header.push("calibrated mean b".to_string());
    }
    if adaptive.is_some() {
        header.push("adaptive violation".to_string());
        header.push("adaptive mean b".to_string());
    }
    out.push_str(&table(&header, &rows));
    let _ = writeln!(out, "(* = violation above nominal + {FLAG_MARGIN})");
    if let Some(c) = calibrated {
        let _ = writeln!(
            out,
            "calibrated = F^-1(a_t) of the {} window, the level a_t corrected from earlier promises' outcomes (adaptive conformal inference, Gibbs & Candes 2021; gamma {})",
            c.window, c.gamma
        );
    }
    if let Some(a) = adaptive {
        let _ = writeln!(
            out,
            "adaptive = the same promise from an ADWIN window (Bifet & Gavalda 2007; {}..{} bins, delta {}): {} cuts, mean window {:.0} bins, shortest {}",
            a.config.min_window,
            a.config.max_window,
            a.config.delta,
            a.cuts,
            a.mean_window,
            a.min_window_seen
        );
    }

    let _ = writeln!(
        out,
        "\nSeed's test: X = the window's 10th percentile (default); a failure if one of the next n bins is below X, or, read strictly as the seed words it (\"larger than X\"), at or below X (seed: < 4% failure)"
    );
    let rows: Vec<Vec<String>> = report
        .seed_test
        .iter()
        .map(|s| {
            vec![
                s.n.to_string(),
                pct(s.failure_rate),
                pct(s.strict_failure_rate),
                s.predictions.to_string(),
            ]
        })
        .collect();
    out.push_str(&table(
        &strings(&["n", "failure (< X)", "strict (<= X)", "predictions"]),
        &rows,
    ));
    out
}

/// The detailed tables of one trace (`braid eval predictors --trace`).
pub fn single_table(eval: &Evaluation, plan: &StudyPlan) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "trace:  {} ({}, {} samples, {:.1}s)",
        eval.trace, eval.format, eval.trace_samples, eval.duration_s
    );
    let _ = writeln!(
        out,
        "series: {} bins of {}; window {} bins ({}); horizon {} = {} bins\n",
        eval.bins,
        eval.interval,
        eval.window,
        plan.interval.saturating_mul(eval.window as u64),
        eval.horizon,
        eval.horizon_bins
    );
    out.push_str(&study_tables(&eval.report, &eval.horizon));
    out
}

/// Which promise a pass count is over.
#[derive(Debug, Clone, Copy)]
enum Column {
    Fixed,
    Adaptive,
    Calibrated,
}

/// The calibrated level's result at probability `p`, if evaluated.
fn calibrated_row(report: &StudyReport, p: f64) -> Option<&PercentileResult> {
    report
        .calibrated
        .as_ref()?
        .percentile
        .iter()
        .find(|r| r.probability == p)
}

/// The adaptive window's result at probability `p`, if evaluated.
fn adaptive_row(report: &StudyReport, p: f64) -> Option<&PercentileResult> {
    report
        .adaptive
        .as_ref()?
        .percentile
        .iter()
        .find(|r| r.probability == p)
}

/// The median of the finite values, or NaN.
fn median(mut v: Vec<f64>) -> f64 {
    v.retain(|x| x.is_finite());
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let m = v.len() / 2;
    if v.len() % 2 == 1 {
        v[m]
    } else {
        (v[m - 1] + v[m]) / 2.0
    }
}

/// `min–max` over n of one of the seed test's rates.
fn seed_range(report: &StudyReport, rate: fn(&SeedTestResult) -> f64) -> String {
    let rates: Vec<f64> = report
        .seed_test
        .iter()
        .map(rate)
        .filter(|r| r.is_finite())
        .collect();
    let min = rates.iter().copied().fold(f64::INFINITY, f64::min);
    let max = rates.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if rates.is_empty() {
        "-".to_string()
    } else {
        format!("{}–{}", pct(min), pct(max))
    }
}

/// The seed test's `failure_rate` (some of the next n bins below X).
fn failure(s: &SeedTestResult) -> f64 {
    s.failure_rate
}

/// The seed test's `strict_failure_rate` (some at or below X).
fn strict_failure(s: &SeedTestResult) -> f64 {
    s.strict_failure_rate
}

/// The median over traces of the min (or max) over n of a seed-test rate.
fn median_seed_range(evals: &[Evaluation], rate: fn(&SeedTestResult) -> f64) -> String {
    let pick = |max: bool| {
        median(
            evals
                .iter()
                .filter_map(|e| {
                    e.report.seed_test.iter().map(rate).reduce(if max {
                        f64::max
                    } else {
                        f64::min
                    })
                })
                .collect(),
        )
    };
    format!("{}–{}", pct(pick(false)), pct(pick(true)))
}

/// The summary of a folder study (`braid eval predictors --all`): one row
/// per trace, then a median row.
pub fn summary_table(
    evals: &[Evaluation],
    plan: &StudyPlan,
    copies: &[PathBuf],
    skipped: &[Skipped],
) -> String {
    let Some(first) = evals.first() else {
        return String::new();
    };
    let averages: Vec<String> = first
        .report
        .average
        .iter()
        .map(|a| a.predictor.clone())
        .collect();
    let probabilities: Vec<(f64, f64)> = first
        .report
        .percentile
        .iter()
        .map(|p| (p.probability, p.nominal_violation))
        .collect();
    let ns: Vec<usize> = first.report.seed_test.iter().map(|s| s.n).collect();
    let n_label = match (ns.iter().min(), ns.iter().max()) {
        (Some(a), Some(b)) if a != b => format!("n={a}–{b}"),
        (Some(a), _) => format!("n={a}"),
        _ => "n".to_string(),
    };

    let mut header = strings(&["trace", "format", "bins"]);
    header.extend(averages.iter().map(|a| format!("MRE {a} (median)")));
    let adaptive = evals.iter().any(|e| e.report.adaptive.is_some());
    let calibrated = evals.iter().any(|e| e.report.calibrated.is_some());
    for (p, nom) in &probabilities {
        header.push(format!("viol P={p} ({})", pct(*nom)));
        if adaptive {
            header.push("adaptive".to_string());
        }
        if calibrated {
            header.push("calibrated".to_string());
        }
    }
    header.push(format!("seed fail {n_label}"));
    header.push("strict (<= X)".to_string());

    let mut rows = Vec::new();
    for e in evals {
        let mut row = vec![e.trace.clone(), e.format.to_string(), e.bins.to_string()];
        for name in &averages {
            let cell = e
                .report
                .average
                .iter()
                .find(|a| &a.predictor == name)
                .map_or("-".to_string(), |a| {
                    format!(
                        "{} ({})",
                        pct(a.mean_relative_error),
                        pct(a.median_relative_error)
                    )
                });
            row.push(cell);
        }
        for &(p, nominal) in &probabilities {
            let cell = e
                .report
                .percentile
                .iter()
                .find(|r| r.probability == p)
                .map_or("-".to_string(), |r| violation(r.violation_rate, nominal));
            row.push(cell);
            if adaptive {
                row.push(
                    adaptive_row(&e.report, p)
                        .map_or("-".to_string(), |r| violation(r.violation_rate, nominal)),
                );
            }
            if calibrated {
                row.push(
                    calibrated_row(&e.report, p)
                        .map_or("-".to_string(), |r| violation(r.violation_rate, nominal)),
                );
            }
        }
        row.push(seed_range(&e.report, failure));
        row.push(seed_range(&e.report, strict_failure));
        rows.push(row);
    }
    // The median row.
    let mut row = vec![
        format!("median of {}", evals.len()),
        String::new(),
        String::new(),
    ];
    for name in &averages {
        let of = |f: fn(&AverageResult) -> f64| {
            median(
                evals
                    .iter()
                    .filter_map(|e| e.report.average.iter().find(|a| &a.predictor == name))
                    .map(f)
                    .collect(),
            )
        };
        row.push(format!(
            "{} ({})",
            pct(of(|a| a.mean_relative_error)),
            pct(of(|a| a.median_relative_error))
        ));
    }
    for &(p, nominal) in &probabilities {
        let m = median(
            evals
                .iter()
                .filter_map(|e| e.report.percentile.iter().find(|r| r.probability == p))
                .map(|r| r.violation_rate)
                .collect(),
        );
        row.push(violation(m, nominal));
        if adaptive {
            let m = median(
                evals
                    .iter()
                    .filter_map(|e| adaptive_row(&e.report, p))
                    .map(|r| r.violation_rate)
                    .collect(),
            );
            row.push(violation(m, nominal));
        }
        if calibrated {
            let m = median(
                evals
                    .iter()
                    .filter_map(|e| calibrated_row(&e.report, p))
                    .map(|r| r.violation_rate)
                    .collect(),
            );
            row.push(violation(m, nominal));
        }
    }
    row.push(median_seed_range(evals, failure));
    row.push(median_seed_range(evals, strict_failure));
    rows.push(row);
    let pass_line = |which: Column| {
        let mut cells = 0;
        let mut ok = 0;
        let mut traces = 0;
        for e in evals {
            let results: Vec<&PercentileResult> = match which {
                Column::Fixed => e.report.percentile.iter().collect(),
                Column::Adaptive => e
                    .report
                    .adaptive
                    .iter()
                    .flat_map(|a| &a.percentile)
                    .collect(),
                Column::Calibrated => e
                    .report
                    .calibrated
                    .iter()
                    .flat_map(|c| &c.percentile)
                    .collect(),
            };
            let pass = results
                .iter()
                .filter(|r| r.violation_rate <= r.nominal_violation + FLAG_MARGIN)
                .count();
            cells += results.len();
            ok += pass;
            traces += usize::from(!results.is_empty() && pass == results.len());
        }
        format!("{ok}/{cells} cells, {traces}/{} traces", evals.len())
    };

    let mut out = String::new();
    let _ = writeln!(
        out,
        "Predictor study (seed 000 §VI-A, Fig. 7): {} traces; bins of {}, window {} bins, horizon {} ({} bins)\n",
        evals.len(),
        plan.interval,
        plan.study.window,
        plan.horizon,
        plan.study.horizon
    );
    out.push_str(&table(&header, &rows));
    let _ = writeln!(
        out,
        "\nwithin nominal + {FLAG_MARGIN}: fixed window {}",
        pass_line(Column::Fixed)
    );
    if adaptive {
        let _ = writeln!(
            out,
            "within nominal + {FLAG_MARGIN}: adaptive window {}",
            pass_line(Column::Adaptive)
        );
    }
    if calibrated {
        let _ = writeln!(
            out,
            "within nominal + {FLAG_MARGIN}: calibrated level {}",
            pass_line(Column::Calibrated)
        );
    }
    let _ = writeln!(
        out,
        "MRE  = mean relative error |predicted - actual| / actual of the mean rate over the next {} (seed: about 20%); in brackets the median relative error",
        plan.horizon
    );
    let _ = writeln!(
        out,
        "viol = share of predictions where the mean rate over the next {} fell below b = F^-1(1-P) (nominal 1-P; * = above nominal + {FLAG_MARGIN})",
        plan.horizon
    );
    if let Some(c) = evals.iter().find_map(|e| e.report.calibrated.as_ref()) {
        let _ = writeln!(
            out,
            "calibrated = viol with b = F^-1(a_t) of the {} window, the level a_t corrected from the outcomes of earlier promises (adaptive conformal inference, Gibbs & Candes, NeurIPS 2021; gamma {})",
            c.window, c.gamma
        );
    }
    if let Some(a) = evals.iter().find_map(|e| e.report.adaptive.as_ref()) {
        let _ = writeln!(
            out,
            "adaptive = viol with b taken from an ADWIN window (Bifet & Gavalda, SDM 2007) of {} to {} bins, delta {}, instead of the fixed {} bins",
            a.config.min_window, a.config.max_window, a.config.delta, plan.study.window
        );
    }
    let _ = writeln!(
        out,
        "seed = the seed's test: X = 10th percentile of the window, failure if one of the next n bins is below X (strict: at or below X, the seed's literal \"larger than X\"); min–max over n (seed: < 4%)"
    );
    if !copies.is_empty() {
        let _ = writeln!(
            out,
            "{} normalised .tsv copies were not evaluated: their originals were, binned at {}",
            copies.len(),
            plan.interval
        );
    }
    for Skipped { file, reason } in skipped {
        let _ = writeln!(out, "skipped {file}: {reason}");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_align_and_flag() {
        let t = table(
            &strings(&["a", "bb"]),
            &[strings(&["long name", "1"]), strings(&["x", "22"])],
        );
        assert_eq!(t, "a          bb\nlong name   1\nx          22\n");
        assert_eq!(violation(0.13, 0.10), "13.0%*");
        assert_eq!(violation(0.12, 0.10), "12.0% ");
        assert_eq!(pct(f64::NAN), "-");
        assert_eq!(median(vec![3.0, f64::NAN, 1.0, 2.0]), 2.0);
        assert!(median(vec![]).is_nan());
    }
}
