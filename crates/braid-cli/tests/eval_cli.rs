//! `braid eval predictors` end to end: the built binary on small synthetic
//! traces (written to a temporary folder) and, where present, on the real
//! traces in ../shared/data (read in place, skipped with a printed reason
//! otherwise). Bad input must give one `braid: error: …` line naming the
//! file (and line) and a non-zero exit.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn braid(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_braid"))
        .args(args)
        .env_remove("BRAID_LOG")
        .output()
        .expect("the braid binary runs")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A fresh temporary folder for one test, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        let dir =
            std::env::temp_dir().join(format!("braid-eval-cli-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create temp dir");
        TempDir(dir)
    }
    fn write(&self, rel: &str, text: &str) -> PathBuf {
        let path = self.0.join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).expect("create sub dir");
        }
        std::fs::write(&path, text).expect("write temp file");
        path
    }
    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A `<seconds> <Mbit/s>` series of `n` samples every 100 ms, varying
/// deterministically between about 1 and 9 Mbit/s.
fn series_text(n: usize) -> String {
    let mut x: u64 = 12345;
    let mut out = String::from("# synthetic\n");
    for i in 0..n {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let rate = 1.0 + (x >> 33) as f64 / (1u64 << 31) as f64 * 8.0;
        out.push_str(&format!("{:.1}\t{rate:.4}\n", i as f64 * 0.1));
    }
    out
}

/// A mahimahi trace: `n_ms` milliseconds with one to three packets in
/// most of them. Millisecond 0 has none, so the trace (which starts at its
/// first opportunity) lasts `n_ms - 1` ms.
fn mahimahi_text(n_ms: u64) -> String {
    let mut out = String::new();
    for ms in 0..n_ms {
        for _ in 0..(ms * 7 % 4) {
            out.push_str(&format!("{ms}\n"));
        }
    }
    out
}

/// Asserts a failed run with exactly one stderr line that contains `parts`.
fn assert_one_line_error(o: &Output, parts: &[&str]) {
    let err = stderr(o);
    assert!(!o.status.success(), "expected failure, got success: {err}");
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 1, "one line of error, got: {err}");
    assert!(lines[0].starts_with("braid: error: "), "{err}");
    for part in parts {
        assert!(lines[0].contains(part), "{part:?} missing from: {err}");
    }
}

#[test]
fn missing_trace_file_is_one_clear_line() {
    let dir = TempDir::new("missing");
    let path = dir.path().join("no-such-trace.down");
    let o = braid(&["eval", "predictors", "--trace", path.to_str().unwrap()]);
    assert_one_line_error(&o, &["reading trace", "no-such-trace.down"]);
    assert!(stdout(&o).is_empty());
}

#[test]
fn malformed_trace_names_file_and_line() {
    let dir = TempDir::new("malformed");
    let path = dir.write("bad.tsv", "# header\n0.0 1.5\n0.1 fast\n");
    let o = braid(&["eval", "predictors", "--trace", path.to_str().unwrap()]);
    assert_one_line_error(
        &o,
        &[
            "reading trace",
            "bad.tsv",
            "line 3: expected `<seconds> <Mbit/s>`, got `0.1 fast`",
        ],
    );
}

#[test]
fn negative_rate_and_backwards_time_are_refused() {
    let dir = TempDir::new("negative");
    let neg = dir.write("neg.txt", "0 1\n1 -2\n");
    let o = braid(&["eval", "predictors", "--trace", neg.to_str().unwrap()]);
    assert_one_line_error(&o, &["neg.txt", "line 2: negative rate"]);
    let back = dir.write("back.down", "0\n5\n4\n");
    let o = braid(&["eval", "predictors", "--trace", back.to_str().unwrap()]);
    assert_one_line_error(&o, &["back.down", "line 3: time goes backwards"]);
    let empty = dir.write("empty.down", "");
    let o = braid(&["eval", "predictors", "--trace", empty.to_str().unwrap()]);
    assert_one_line_error(&o, &["empty.down", "empty trace"]);
}

#[test]
fn unknown_units_and_bad_flags_are_refused() {
    let dir = TempDir::new("flags");
    let path = dir.write("ok.tsv", &series_text(1000));
    let p = path.to_str().unwrap();
    let o = braid(&["eval", "predictors", "--trace", p, "--interval", "100x"]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("unknown duration unit"),
        "{}",
        stderr(&o)
    );
    let o = braid(&["eval", "predictors", "--trace", p, "--horizon", "150ms"]);
    assert_one_line_error(&o, &["--horizon 150ms", "whole multiple", "interval 100ms"]);
    let o = braid(&[
        "eval",
        "predictors",
        "--trace",
        p,
        "--probability",
        "0.9,1.5",
    ]);
    assert_one_line_error(&o, &["--probability 1.5"]);
    let o = braid(&["eval", "predictors"]);
    assert!(!o.status.success(), "--trace or --all is required");
}

#[test]
fn one_trace_prints_tables_and_json() {
    let dir = TempDir::new("single");
    let path = dir.write("synthetic.tsv", &series_text(2000));
    let p = path.to_str().unwrap();
    let o = braid(&["eval", "predictors", "--trace", p, "--window", "100"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    for part in [
        "MA",
        "EWMA",
        "SMA",
        "0.990",
        "2000 bins of 100ms",
        "window 100 bins",
    ] {
        assert!(out.contains(part), "{part:?} missing from:\n{out}");
    }

    let o = braid(&[
        "eval",
        "predictors",
        "--trace",
        p,
        "--window",
        "100",
        "--horizon",
        "500ms",
        "--probability",
        "0.9,0.95",
        "--format",
        "json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let doc: serde_json::Value = serde_json::from_str(&stdout(&o)).expect("valid JSON");
    assert_eq!(doc["format"], "series");
    assert_eq!(doc["bins"], 2000);
    assert_eq!(doc["horizon_bins"], 5);
    let percentile = doc["report"]["percentile"].as_array().unwrap();
    assert_eq!(percentile.len(), 2);
    for p in percentile {
        let v = p["violation_rate"].as_f64().unwrap();
        assert!((0.0..=1.0).contains(&v), "{p}");
    }
    assert_eq!(doc["report"]["average"].as_array().unwrap().len(), 3);
}

#[test]
fn all_evaluates_originals_not_copies_and_skips_other_files() {
    let dir = TempDir::new("all");
    let series = series_text(1500);
    dir.write("a/synthetic", &series);
    // a stand-in for the normalised copy: must not be evaluated
    dir.write("a/synthetic.tsv", &series);
    dir.write("b/link.down", &mahimahi_text(150_000));
    dir.write("SOURCES.md", "# not a trace\n");
    dir.write("notes.dat", "this is not a trace\n");
    let o = braid(&[
        "eval",
        "predictors",
        "--all",
        dir.path().to_str().unwrap(),
        "--window",
        "100",
    ]);
    let err = stderr(&o);
    assert!(o.status.success(), "{err}");
    let out = stdout(&o);
    assert!(out.contains("a/synthetic "), "{out}");
    assert!(
        !out.contains("synthetic.tsv "),
        "copy evaluated too:\n{out}"
    );
    assert!(out.contains("b/link.down"), "{out}");
    assert!(out.contains("mahimahi"), "{out}");
    assert!(out.contains("median of 2"), "{out}");
    assert!(
        err.contains("skipping SOURCES.md: not a trace file"),
        "{err}"
    );
    assert!(err.contains("notes.dat: skipped:"), "{err}");
    assert!(err.contains("evaluating the originals"), "{err}");
    // progress: one line per trace as it completes
    assert!(err.contains("[1/3] a/synthetic: 1500 bins"), "{err}");
    assert!(err.contains("[2/3] b/link.down: 1499 bins"), "{err}");
}

#[test]
fn all_on_a_missing_folder_is_an_error() {
    let dir = TempDir::new("all-missing");
    let missing = dir.path().join("nope");
    let o = braid(&["eval", "predictors", "--all", missing.to_str().unwrap()]);
    assert_one_line_error(&o, &["nope"]);
}

#[test]
fn real_traces_of_each_format_run() {
    let data = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/traces");
    if !data.is_dir() {
        eprintln!("skipping: {} is absent", data.display());
        return;
    }
    for (rel, format) in [
        ("oboe/oboe_trace_372.txt", "series"),
        ("mahimahi/Verizon-EVDO-driving.down", "mahimahi"),
        (
            "5g_ireland/Download_Static_B_2020.02.14_13.21.26.csv",
            "5g-csv",
        ),
    ] {
        let path = data.join(rel);
        let o = braid(&[
            "eval",
            "predictors",
            "--trace",
            path.to_str().unwrap(),
            "--format",
            "json",
        ]);
        assert!(o.status.success(), "{rel}: {}", stderr(&o));
        let doc: serde_json::Value = serde_json::from_str(&stdout(&o)).expect("valid JSON");
        assert_eq!(doc["format"], format, "{rel}");
        assert!(doc["report"]["samples"].as_u64().unwrap() > 1000, "{rel}");
    }
}

#[test]
fn fixed_adaptive_and_calibrated_side_by_side() {
    let dir = TempDir::new("side-by-side");
    dir.write("a/synthetic", &series_text(1500));
    let all = dir.path().to_str().unwrap();
    let o = braid(&["eval", "predictors", "--all", all, "--window", "100"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    for part in [
        "viol P=0.8 (20.0%)",
        "adaptive",
        "calibrated",
        "within nominal + 0.02: fixed window",
        "within nominal + 0.02: adaptive window",
        "within nominal + 0.02: calibrated level",
        "ADWIN",
    ] {
        assert!(out.contains(part), "{part:?} missing from:\n{out}");
    }
    let path = dir.path().join("a/synthetic");
    let o = braid(&[
        "eval",
        "predictors",
        "--trace",
        path.to_str().unwrap(),
        "--window",
        "100",
        "--min-window",
        "30",
        "--delta",
        "0.01",
        "--gamma",
        "0.02",
        "--format",
        "json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let doc: serde_json::Value = serde_json::from_str(&stdout(&o)).expect("valid JSON");
    let report = &doc["report"];
    assert_eq!(report["percentile"].as_array().unwrap().len(), 4);
    let adaptive = &report["adaptive"];
    assert_eq!(adaptive["config"]["min_window"], 30);
    assert_eq!(adaptive["config"]["max_window"], 100);
    assert_eq!(adaptive["percentile"].as_array().unwrap().len(), 4);
    assert!(adaptive["cuts"].is_u64() && adaptive["mean_window"].is_f64());
    let calibrated = &report["calibrated"];
    assert_eq!(calibrated["gamma"], 0.02);
    assert_eq!(calibrated["window"], "adaptive");
    assert_eq!(calibrated["percentile"].as_array().unwrap().len(), 4);

    let p = path.to_str().unwrap();
    let o = braid(&[
        "eval",
        "predictors",
        "--trace",
        p,
        "--window",
        "100",
        "--no-adaptive",
        "--no-calibrated",
        "--format",
        "json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let doc: serde_json::Value = serde_json::from_str(&stdout(&o)).expect("valid JSON");
    assert!(doc["report"]["adaptive"].is_null() && doc["report"]["calibrated"].is_null());
    for bad in [
        &["--min-window", "101"][..],
        &["--min-window", "0"],
        &["--delta", "1"],
        &["--gamma", "0"],
    ] {
        let mut argv = vec!["eval", "predictors", "--trace", p, "--window", "100"];
        argv.extend_from_slice(bad);
        assert_one_line_error(&braid(&argv), &[bad[0]]);
    }
}
