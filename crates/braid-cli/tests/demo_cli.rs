//! `braid demo`, the README's quick start: it needs no files, its output is
//! byte-identical for one seed, and a bad flag is one clear line.

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
    let a = braid(&["demo", "--duration", "60s"]);
    assert!(a.status.success(), "{}", String::from_utf8_lossy(&a.stderr));
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
    let b = braid(&["demo", "--duration", "60s"]);
    assert_eq!(a.stdout, b.stdout, "same seed must give identical output");
    let c = braid(&["demo", "--duration", "60s", "--seed", "2"]);
    assert!(c.status.success());
    assert_ne!(a.stdout, c.stdout, "another seed draws another path");
}

#[test]
fn demo_rejects_a_duration_too_short_for_the_study() {
    let out = braid(&["demo", "--duration", "10s"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "one clear line: {err}");
    assert!(err.contains("too short"), "{err}");
}

#[test]
fn a_bad_flag_is_one_line_and_exit_code_2() {
    for args in [
        &["demo", "--duration", "100xs"][..],
        &["demo", "--bogus"][..],
        &["sim", "run"][..],
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
