//! `braid sim session FILE.toml` end to end: a good scenario prints the
//! tables and `--format json` parses; bad input (an unknown path, a spec
//! that does not parse, a trace that does not exist) is one line naming the
//! file and the line, with a non-zero exit.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn braid(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_braid"))
        .args(args)
        .env_remove("BRAID_SIM_SEED")
        .env_remove("BRAID_LOG")
        .output()
        .expect("run braid")
}

/// A fresh temporary folder for one test, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        let dir =
            std::env::temp_dir().join(format!("braid-session-cli-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create temp dir");
        TempDir(dir)
    }
    fn write(&self, name: &str, text: &str) -> PathBuf {
        let p = self.0.join(name);
        std::fs::write(&p, text).expect("write scenario");
        p
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

const GOOD: &str = r#"name = "cli"
duration = "6s"
warmup = "1s"

[[path]]
name = "a"
rate = "10mbit"
delay = "10ms"

[[path]]
name = "b"
rate = "5mbit"
delay = "30ms"
relays = 1

[[stream]]
name = "critical"
kind = "rate"
rate = "2mbit"
probability = 0.9
pin = ["a", "b"]

[[stream]]
name = "bulk"
kind = "best-effort"
"#;

/// Runs a bad scenario and checks the one-line error names the file and
/// the line holding `needle`.
#[track_caller]
fn assert_bad(dir: &TempDir, name: &str, text: &str, needle: &str, words: &str) {
    let file = dir.write(name, text);
    let out = braid(&["sim", "session", file.to_str().unwrap()]);
    assert!(!out.status.success(), "{name} must fail");
    assert_eq!(out.status.code(), Some(1), "{name}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{name}: one line: {err}");
    let line = text.lines().position(|l| l.contains(needle)).unwrap() + 1;
    let want = format!("{}: line {line}: ", file.display());
    assert!(err.contains(&want), "{name}: want {want:?} in {err}");
    assert!(err.contains(words), "{name}: want {words:?} in {err}");
    assert!(out.stdout.is_empty(), "{name}: nothing on stdout");
}

#[test]
fn bad_scenarios_are_one_line_naming_file_and_line() {
    let dir = TempDir::new("bad");
    assert_bad(
        &dir,
        "unknown_path.toml",
        &GOOD.replace(r#"pin = ["a", "b"]"#, r#"pin = ["a", "c"]"#),
        "pin = ",
        "undefined path `c`",
    );
    assert_bad(
        &dir,
        "bad_spec.toml",
        &GOOD.replace(r#"rate = "2mbit""#, r#"rate = "2 furlongs""#),
        "furlongs",
        "rate",
    );
    assert_bad(
        &dir,
        "bad_probability.toml",
        &GOOD.replace("probability = 0.9", "probability = 1.5"),
        "probability = 1.5",
        "between 0 and 1",
    );
    assert_bad(
        &dir,
        "missing_trace.toml",
        &GOOD.replace(r#"rate = "5mbit""#, r#"trace = "no_such_trace.tsv""#),
        "no_such_trace",
        "no_such_trace.tsv",
    );
    assert_bad(
        &dir,
        "unknown_key.toml",
        &GOOD.replace("relays = 1", "relay = 1"),
        "relay = 1",
        "relay",
    );
}

#[test]
fn a_missing_file_is_one_line() {
    let out = braid(&["sim", "session", "/nonexistent/x.toml"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("/nonexistent/x.toml"), "{err}");
}

#[test]
fn a_good_scenario_prints_tables_json_csv_and_svg() {
    let dir = TempDir::new("good");
    let file = dir.write("good.toml", GOOD);
    let f = file.to_str().unwrap();
    let out = braid(&["sim", "session", f]);
    common::assert_ok(&out, "sim session");
    let text = String::from_utf8_lossy(&out.stdout);
    for needle in ["critical", "bulk", "promised", "delivered", "p95", "held"] {
        assert!(text.contains(needle), "missing {needle:?} in:\n{text}");
    }
    let again = braid(&["sim", "session", f]);
    assert_eq!(out.stdout, again.stdout, "deterministic");

    let csv = dir.path().join("s.csv");
    let svg = dir.path().join("s.svg");
    let out = braid(&[
        "sim",
        "session",
        f,
        "--format",
        "json",
        "--scheduler",
        "msfq",
        "--seed",
        "9",
        "--csv",
        csv.to_str().unwrap(),
        "--svg",
        svg.to_str().unwrap(),
    ]);
    common::assert_ok(&out, "sim session --format json");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    assert_eq!(v["scheduler"], "msfq");
    assert_eq!(v["seed"], 9);
    let streams = v["streams"].as_array().expect("streams array");
    assert_eq!(streams.len(), 2);
    for key in [
        "name",
        "target_mbps",
        "mean_mbps",
        "p5_mbps",
        "p50_mbps",
        "p95_mbps",
        "windows_met",
        "guarantee_held",
        "loss_ratio",
        "delay_p95_ms",
        "duplicates",
    ] {
        assert!(streams[0].get(key).is_some(), "stream field {key}");
    }
    let paths = v["paths"].as_array().expect("paths array");
    assert_eq!(paths[1]["hops"], 2);
    assert!(paths[0]["delivered_mbps"].as_f64().unwrap() > 0.0);
    let csv = std::fs::read_to_string(&csv).expect("csv written");
    assert_eq!(csv.lines().count(), 3, "{csv}");
    assert!(csv.starts_with("scenario,scheduler,seed,stream,"));
    assert!(std::fs::read_to_string(&svg)
        .expect("svg")
        .starts_with("<svg"));
}

#[test]
fn an_unknown_scheduler_is_a_usage_error() {
    let out = braid(&["sim", "session", "x.toml", "--scheduler", "fifo"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("fifo"), "{err}");
}
