//! `braid sim table3|table5 --packet`, `--cross-a/--cross-b` and
//! `--format json`: the JSON rows carry the issue's fields; a missing
//! cross-traffic trace is one clear line; table II prints packet and fluid
//! rows. Runs that need ../shared/data skip without it.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn braid(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_braid"))
        .args(args)
        .env_remove("BRAID_SIM_SEED")
        .output()
        .expect("run braid")
}

fn data() -> Option<PathBuf> {
    let d = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data");
    if d.join("traces").is_dir() {
        Some(d)
    } else {
        eprintln!("skipping: {} is absent", d.display());
        None
    }
}

#[test]
fn a_missing_cross_trace_is_one_line_naming_it() {
    let out = braid(&[
        "sim",
        "table3",
        "--packet",
        "--cross-a",
        "/nonexistent/trace.tsv",
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("/nonexistent/trace.tsv"), "{err}");
}

#[test]
fn table2_at_packet_level_prints_both_levels() {
    let Some(d) = data() else { return };
    let out = braid(&[
        "sim",
        "table2",
        "--packet",
        "--warmup",
        "20",
        "--measure",
        "5",
        "--data",
        d.to_str().unwrap(),
    ]);
    common::assert_ok(&out, "table2 --packet");
    let text = String::from_utf8_lossy(&out.stdout);
    for row in [
        "Bond1/patha/packet",
        "Bond1/patha/fluid",
        "Atom/pathb/packet",
    ] {
        assert!(text.contains(row), "{row} in\n{text}");
    }
}

#[test]
fn table3_packet_json_has_rows_with_the_issue_fields() {
    let Some(d) = data() else { return };
    let out = braid(&[
        "sim",
        "table3",
        "--packet",
        "--format",
        "json",
        "--warmup",
        "20",
        "--measure",
        "10",
        "--data",
        d.to_str().unwrap(),
        "--cross-b",
        d.join("traces/fcc/fcc_trace_7289_http---www.yahoo.com.tsv")
            .to_str()
            .unwrap(),
    ]);
    common::assert_ok(&out, "table3 --packet --format json");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let rows = v["rows"].as_array().expect("rows");
    for field in [
        "stream",
        "scheduler",
        "target_mbps",
        "mean_mbps",
        "p95_mbps",
        "std_mbps",
    ] {
        assert!(
            rows.iter().all(|r| !r[field].is_null()),
            "{field} in every row"
        );
    }
    let has = |s: &str, l: &str| {
        rows.iter()
            .any(|r| r["scheduler"] == s && r["level"] == l && r["stream"] == "Bond1")
    };
    for s in ["pgos", "msfq", "wfq", "minrtt"] {
        assert!(has(s, "packet"), "{s} at packet level");
    }
    assert!(
        has("pgos", "fluid") && has("msfq", "fluid"),
        "the fluid runs beside"
    );
}
