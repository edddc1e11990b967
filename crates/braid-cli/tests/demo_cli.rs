//! `braid demo`, the README's quick start: the session (three streams over
//! two simulated paths, PGOS and MSFQ side by side) needs no files, its
//! output is byte-identical for one seed, and a bad flag is one clear line.

mod common;

use std::process::Command;

fn braid(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_braid"))
        .args(args)
        .env_remove("BRAID_SIM_SEED")
        // Run from an empty directory: the demo must not need ../shared.
        .current_dir(std::env::temp_dir())
        .output()
        .expect("run braid")
}

#[test]
fn demo_runs_without_files_and_is_reproducible() {
    let a = braid(&["demo", "--duration", "12s"]);
    common::assert_ok(&a, "demo");
    let text = String::from_utf8_lossy(&a.stdout);
    for needle in [
        "seed 1",
        "critical",
        "window",
        "bulk",
        "PGOS mean",
        "MSFQ mean",
        "held",
        "short",
        "long",
    ] {
        assert!(text.contains(needle), "missing {needle:?} in:\n{text}");
    }
    // Every stream row says whether its guarantee held (best effort: "-").
    for stream in ["critical", "window"] {
        let row = text
            .lines()
            .find(|l| l.starts_with(stream))
            .unwrap_or_else(|| panic!("no {stream} row in:\n{text}"));
        assert!(row.contains("yes") || row.contains("NO"), "{stream}: {row}");
    }
    let b = braid(&["demo", "--duration", "12s"]);
    assert_eq!(a.stdout, b.stdout, "same seed must give identical output");
    let c = braid(&["demo", "--duration", "12s", "--seed", "2"]);
    common::assert_ok(&c, "demo --seed 2");
    assert_ne!(a.stdout, c.stdout, "another seed draws other cross traffic");
}

#[test]
fn demo_writes_a_plot_of_both_schedulers() {
    let svg = std::env::temp_dir().join(format!("braid-demo-{}.svg", std::process::id()));
    let out = braid(&["demo", "--duration", "10s", "--svg", svg.to_str().unwrap()]);
    common::assert_ok(&out, "demo --svg");
    let text = std::fs::read_to_string(&svg).expect("svg written");
    let _ = std::fs::remove_file(&svg);
    assert!(text.starts_with("<svg"), "{}", &text[..text.len().min(80)]);
    for needle in [
        "critical (pgos)",
        "critical (msfq)",
        "bulk (msfq)",
        "critical target",
    ] {
        assert!(text.contains(needle), "missing {needle:?}");
    }
}

#[test]
fn demo_rejects_a_duration_out_of_range() {
    let out = braid(&["demo", "--duration", "2s"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "one clear line: {err}");
    assert!(err.contains("outside"), "{err}");
}

#[test]
fn the_predictor_study_stays_reachable_without_files() {
    let a = braid(&["eval", "synthetic", "--duration", "60s"]);
    common::assert_ok(&a, "eval synthetic");
    let text = String::from_utf8_lossy(&a.stdout);
    for needle in [
        "seed 1",
        "bulk",
        "Average predictors",
        "Percentile predictor",
        "0.950",
    ] {
        assert!(text.contains(needle), "missing {needle:?} in:\n{text}");
    }
    let b = braid(&["eval", "synthetic", "--duration", "60s"]);
    assert_eq!(a.stdout, b.stdout, "same seed must give identical output");
    let short = braid(&["eval", "synthetic", "--duration", "10s"]);
    assert!(!short.status.success());
    let err = String::from_utf8_lossy(&short.stderr);
    assert_eq!(err.lines().count(), 1, "one clear line: {err}");
    assert!(err.contains("too short"), "{err}");
}

#[test]
fn a_bad_flag_is_one_line_and_exit_code_2() {
    for args in [
        &["demo", "--duration", "100xs"][..],
        &["demo", "--bogus"][..],
        &["sim", "run"][..],
        &["sim", "session"][..],
    ] {
        let out = braid(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.starts_with("braid: error: "), "{err}");
    }
    let unit = braid(&["demo", "--duration", "100xs"]);
    assert!(String::from_utf8_lossy(&unit.stderr).contains("xs"));
}

#[test]
fn demo_json_has_one_run_per_scheduler_and_pgos_holds_what_msfq_does_not() {
    let out = braid(&["demo", "--format", "json"]);
    common::assert_ok(&out, "demo --format json");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    let runs = v["runs"].as_array().expect("a runs array");
    let names: Vec<&str> = runs
        .iter()
        .map(|r| r["scheduler"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["pgos", "msfq"]);
    let held = |run: &serde_json::Value, stream: &str| {
        let s = run["streams"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == stream)
            .unwrap_or_else(|| panic!("no {stream} in {run}"));
        for field in [
            "kind",
            "guarantee_held",
            "windows_met",
            "delay_p95_ms",
            "mean_mbps",
        ] {
            assert!(s.get(field).is_some(), "{stream}: no {field}");
        }
        s["guarantee_held"].as_bool()
    };
    // The default seed: PGOS holds both guarantees; MSFQ's bulk fills the
    // deep buffers and the deadline stream's windows fail.
    assert_eq!(held(&runs[0], "critical"), Some(true));
    assert_eq!(held(&runs[0], "window"), Some(true));
    assert_eq!(held(&runs[1], "window"), Some(false));
    assert_eq!(held(&runs[0], "bulk"), None);
    // The text form says why MSFQ missed it.
    let text = braid(&["demo"]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.lines()
            .any(|l| l.starts_with("MSFQ: window: not held")),
        "{text}"
    );
}
