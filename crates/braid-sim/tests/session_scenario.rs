//! Session scenarios (issue 10 §2): the TOML format, its errors (one line
//! naming the file and line), and reports of short runs.

use braid_sim::session::report::run;
use braid_sim::session::SessionScenario;
use braid_sim::ScenarioErrorKind as K;
use std::path::{Path, PathBuf};

/// Two constant paths (the second through a relay) and three streams.
const GOOD: &str = r#"
name = "small"
seed = 5
duration = "8s"
warmup = "2s"

[[path]]
name = "a"
rate = "10mbit"
delay = "10ms"
cross = { rate = "2mbit" }

[[path]]
name = "b"
rate = "8mbit"
delay = "15ms"
relays = 1

[[stream]]
name = "critical"
kind = "rate"
rate = "2mbit"
probability = 0.9

[[stream]]
name = "control"
kind = "window"
x = 4
y = 5
window = "100ms"
size = 500
probability = 0.8
delivery = "deadline"
deadline = "300ms"
pin = ["a"]

[[stream]]
name = "bulk"
kind = "best-effort"
source = { kind = "greedy", size = 1200 }
"#;

fn parse(text: &str) -> Result<SessionScenario, braid_sim::ScenarioError> {
    SessionScenario::from_toml_str_at(text, Path::new("dir/s.toml"))
}

/// `GOOD` with `from` replaced by `to` (which must occur).
fn edited(from: &str, to: &str) -> String {
    assert!(GOOD.contains(from), "{from:?}");
    GOOD.replacen(from, to, 1)
}

fn line_of(text: &str, needle: &str) -> usize {
    text.lines()
        .position(|l| l.contains(needle))
        .expect("needle present")
        + 1
}

#[track_caller]
fn assert_error(text: &str, kind: K, line_needle: &str, words: &str) {
    let e = parse(text).expect_err("must be refused");
    assert_eq!(e.kind, kind, "{e}");
    assert_eq!(e.line, Some(line_of(text, line_needle)), "{e}");
    let shown = e.to_string();
    assert!(shown.starts_with("dir/s.toml: line "), "{shown}");
    assert!(shown.contains(words), "{shown}");
    assert_eq!(shown.lines().count(), 1, "{shown}");
}

#[test]
fn the_format_reads_paths_relays_cross_and_streams() {
    let s = parse(GOOD).unwrap();
    assert_eq!(s.name, "small");
    assert_eq!(s.paths.len(), 2);
    assert_eq!(s.paths[1].relays, 1);
    assert!(s.paths[0].cross.is_some());
    assert_eq!(s.streams.len(), 3);
    assert_eq!(
        s.streams[1].config.pinned,
        Some(vec![braid_core::PathId(0)])
    );
    let sim = s.sim().unwrap();
    assert_eq!(sim.paths[1].hops.len(), 2);
    assert_eq!(sim.cross.len(), 1);
    assert_eq!(sim.cross[0].hop, 0);
}

#[test]
fn an_unknown_path_in_pin_names_its_line() {
    let text = edited(r#"pin = ["a"]"#, r#"pin = ["a", "zz"]"#);
    assert_error(&text, K::Undefined, "pin = ", "undefined path `zz`");
}

#[test]
fn a_spec_that_does_not_validate_names_its_line() {
    let text = edited("probability = 0.9", "probability = 1.5");
    assert_error(
        &text,
        K::Value,
        "probability = 1.5",
        "strictly between 0 and 1",
    );
    let text = edited("x = 4", "x = 7");
    assert_error(&text, K::Value, "kind = \"window\"", "7 of 5");
    let text = edited(r#"rate = "2mbit""#, r#"rate = "2 parsecs""#);
    assert_error(&text, K::Value, "parsecs", "rate");
    let text = edited(r#"kind = "rate""#, r#"kind = "fast""#);
    assert_error(&text, K::Value, "fast", "unknown kind");
}

#[test]
fn a_missing_trace_names_its_line() {
    let text = edited(
        r#"cross = { rate = "2mbit" }"#,
        r#"cross = { trace = "no/such/trace.tsv" }"#,
    );
    assert_error(&text, K::Trace, "no/such/trace", "no/such/trace.tsv");
    let text = edited(
        r#"source = { kind = "greedy", size = 1200 }"#,
        r#"source = { kind = "frames", trace = "no/such/frames" }"#,
    );
    assert_error(&text, K::Trace, "no/such/frames", "cannot read frame trace");
}

#[test]
fn unknown_keys_and_bad_values_are_refused() {
    let text = edited(r#"delay = "10ms""#, "delay = \"10ms\"\nbandwidth = 3");
    assert_error(&text, K::Syntax, "bandwidth", "bandwidth");
    let text = edited(
        "relays = 1",
        "relays = 1\ncut = { at = \"1s\", lasting = \"1s\" }",
    );
    assert_error(&text, K::Syntax, "lasting", "lasting");
    let text = edited(r#"name = "b""#, r#"name = "a""#);
    let e = parse(&text).unwrap_err();
    assert_eq!(e.kind, K::Duplicate, "{e}");
    let text = edited(r#"pin = ["a"]"#, "copies = 3");
    assert_error(&text, K::Value, "copies = 3", "copies");
}

#[test]
fn a_run_reports_every_stream_and_path_and_is_deterministic() {
    let s = parse(GOOD).unwrap();
    let a = run(&s).unwrap();
    assert_eq!(a.streams.len(), 3);
    assert_eq!(a.paths.len(), 2);
    assert_eq!(a.paths[1].hops, 2);
    let critical = a.stream("critical").unwrap();
    assert_eq!(critical.target_mbps, Some(2.0));
    assert_eq!(critical.windows, 6, "8 s less a 2 s warm-up");
    assert!(critical.mean_mbps > 1.8, "{critical:?}");
    assert_eq!(critical.errors, 0);
    let bulk = a.stream("bulk").unwrap();
    assert!(bulk.mean_mbps > 5.0, "{bulk:?}");
    assert!(bulk.windows_met.is_none() && bulk.guarantee_held.is_none());
    assert!(
        a.paths.iter().all(|p| p.delivered_mbps > 0.0),
        "{:?}",
        a.paths
    );
    // JSON: one object with streams and paths arrays.
    let v: serde_json::Value = serde_json::from_str(&a.to_json()).unwrap();
    assert_eq!(v["streams"].as_array().unwrap().len(), 3);
    assert_eq!(v["paths"][1]["name"], "b");
    assert!(v["streams"][0]["p95_mbps"].is_number());
    assert_eq!(a.to_csv().lines().count(), 4);
    assert!(a.to_svg().starts_with("<svg"));
    assert!(a.to_table().contains("critical"));
    // Same scenario and seed: the same report.
    assert_eq!(run(&s).unwrap(), a);
}

#[test]
fn a_cut_path_is_seen_down_and_reliable_streams_stay_intact() {
    let text = edited(
        r#"cross = { rate = "2mbit" }"#,
        r#"cut = { at = "3s", for = "2s" }"#,
    );
    let r = run(&parse(&text).unwrap()).unwrap();
    assert!(r.paths[0].down >= 1, "{:?}", r.paths);
    for s in &r.streams {
        assert_eq!(s.errors, 0, "{s:?}");
    }
}

#[test]
fn a_guarantee_that_cannot_be_held_says_why_in_the_report() {
    // 30 Mbit/s at 0.9 over 10 + 8 Mbit/s: the upcall names what can be
    // carried, the source lowers the spec to it (the default answer), and
    // the report says both that the guarantee did not hold and why.
    let text = edited(
        "rate = \"2mbit\"\nprobability",
        "rate = \"30mbit\"\nprobability",
    );
    let r = run(&parse(&text).unwrap()).unwrap();
    let c = r.stream("critical").unwrap();
    assert_eq!(c.guarantee_held, Some(false), "{c:?}");
    assert!(c.upcalls >= 1, "{c:?}");
    let u = c.unmet.as_ref().expect("the upcall's figures");
    assert!(
        u.best_mbps > 1.0 && u.best_mbps < 18.0,
        "best achievable {} Mbit/s of 18",
        u.best_mbps
    );
    let table = r.to_table();
    let why = table
        .lines()
        .find(|l| l.starts_with("critical: not held"))
        .unwrap_or_else(|| panic!("no reason line in:\n{table}"));
    assert!(why.contains("upcall") && why.contains("Mbit/s"), "{why}");
    let v: serde_json::Value = serde_json::from_str(&r.to_json()).unwrap();
    assert!(v["streams"][0]["unmet"]["best_mbps"].is_number(), "{v}");
    // A guarantee that held has no such line.
    let ok = run(&parse(GOOD).unwrap()).unwrap();
    assert_eq!(ok.stream("critical").unwrap().guarantee_held, Some(true));
    assert!(!ok.to_table().contains("critical: not held"));
}

#[test]
fn the_report_judges_windows_by_offer_time_and_gives_delay_percentiles() {
    let r = run(&parse(GOOD).unwrap()).unwrap();
    let c = r.stream("critical").unwrap();
    // 8 s, a 2 s warm-up, the last 1 s window's allowance past the end.
    assert_eq!(c.windows_judged, Some(5), "{c:?}");
    assert!(c.delay_p50_ms <= c.delay_p95_ms && c.delay_p95_ms <= c.delay_p99_ms);
    assert!(c.delay_p50_ms > 10.0, "at least the path's 10 ms: {c:?}");
    let control = r.stream("control").unwrap();
    // 100 ms windows with a 300 ms deadline: 60 judged less the last 3.
    assert_eq!(control.windows_judged, Some(57), "{control:?}");
    assert!(r.stream("bulk").unwrap().windows_judged.is_none());
}

#[test]
fn bulk_yield_and_on_infeasible_are_read_and_checked() {
    let s = parse(GOOD).unwrap();
    assert_eq!(
        s.bulk_yield,
        braid_core::session::SessionConfig::default().bulk_yield
    );
    assert_eq!(s.on_infeasible, braid_sim::session::Infeasible::Lower);
    let text = edited(
        "warmup = \"2s\"",
        "warmup = \"2s\"\nbulk_yield = \"off\"\non_infeasible = \"drop\"",
    );
    let s = parse(&text).unwrap();
    assert_eq!(s.bulk_yield, None);
    assert_eq!(s.on_infeasible, braid_sim::session::Infeasible::Drop);
    let text = edited("warmup = \"2s\"", "warmup = \"2s\"\nbulk_yield = \"5ms\"");
    assert_eq!(
        parse(&text).unwrap().bulk_yield,
        Some(braid_core::Duration::from_millis(5))
    );
    let text = edited("warmup = \"2s\"", "warmup = \"2s\"\nbulk_yield = \"0s\"");
    assert_error(&text, K::Value, "bulk_yield", "between 1ms and 10s");
    let text = edited(
        "warmup = \"2s\"",
        "warmup = \"2s\"\non_infeasible = \"panic\"",
    );
    assert_error(&text, K::Value, "on_infeasible", "lower, accept or drop");
}

#[test]
fn calibration_is_read_and_checked() {
    let s = parse(GOOD).unwrap();
    assert_eq!(
        s.calibration,
        braid_core::session::SessionConfig::default().calibration
    );
    let text = edited("warmup = \"2s\"", "warmup = \"2s\"\ncalibration = \"off\"");
    assert_eq!(parse(&text).unwrap().calibration, None);
    let text = edited("warmup = \"2s\"", "warmup = \"2s\"\ncalibration = \"0.2\"");
    assert_eq!(parse(&text).unwrap().calibration, Some(0.2));
    let text = edited("warmup = \"2s\"", "warmup = \"2s\"\ncalibration = \"2\"");
    assert_error(&text, K::Value, "calibration", "(0, 1]");
}

/// A delay bound keeps the stream off the path whose one-way delay is
/// above it (a: 80 ms one way, and behind cross traffic; b: two hops of
/// 15 ms), the report gives the share of messages within the bound, and
/// the streams are mapped within the first two seconds.
#[test]
fn a_delay_bound_is_honoured_and_reported() {
    let text = GOOD
        .replacen("duration = \"8s\"", "duration = \"20s\"", 1)
        .replacen("delay = \"10ms\"", "delay = \"80ms\"", 1)
        .replacen(
            "probability = 0.9\n",
            "probability = 0.9\ndelay = { max = \"120ms\", probability = 0.95 }\n",
            1,
        );
    let s = parse(&text).unwrap();
    let b = s.streams[0].config.delay.expect("the bound is read");
    assert_eq!(b.max, braid_core::Duration::from_millis(120));
    let r = run(&s).unwrap();
    let c = r.stream("critical").unwrap();
    let met = c.delay_bound_met.expect("reported");
    assert!(met >= 0.95, "{met}");
    assert!(c.delay_p95_ms <= 120.0, "{}", c.delay_p95_ms);
    assert_eq!(c.guarantee_held, Some(true));
    assert!(
        c.mapped_at_s.is_some_and(|t| t <= 2.0),
        "{:?}",
        c.mapped_at_s
    );
    // Only the pinned control stream is promised on a.
    assert!(
        r.paths[0].promised_mbps < 0.5,
        "{}",
        r.paths[0].promised_mbps
    );
    assert_eq!(r.paths[0].unmeasured_at_s, None);
    assert!(r.stream("bulk").unwrap().delay_bound_met.is_none());
    let text = edited(
        "probability = 0.9\n",
        "probability = 0.9\ndelay = { max = \"40ms\", probability = 1.5 }\n",
    );
    assert_error(&text, K::Value, "delay = {", "probability");
}

/// A dip detected within its bound in virtual time (issue 28 §3): path
/// `a` falls from 30 to 1 Mbit/s at 20 s; the source sees it two 100 ms
/// intervals later, moves the 3 Mbit/s guarantee and what it had in
/// flight to `b`, and every window holds. Waiting for the estimate
/// instead loses windows and seconds of delay.
#[test]
fn a_capacity_dip_is_detected_within_two_intervals_and_the_guarantee_moves() {
    let s = SessionScenario::from_path(scenarios_dir().join("session_dip.toml")).unwrap();
    let r = run(&s).unwrap();
    let a = &r.paths[0];
    assert_eq!(a.dips, 1);
    let after = a.dip_detected_after_ms.expect("detected");
    assert!(after <= 200.0 + 1e-9, "{after} ms");
    let c = r.stream("critical").unwrap();
    assert_eq!(c.guarantee_held, Some(true), "{:?}", c.windows_met);
    assert!(c.delay_p95_ms < 200.0, "{}", c.delay_p95_ms);
    let mut waiting = s.clone();
    waiting.react_to_dips = false;
    let w = run(&waiting).unwrap();
    let wc = w.stream("critical").unwrap();
    assert_eq!(w.paths[0].dips, 0);
    assert!(wc.windows_met < c.windows_met, "{:?}", wc.windows_met);
    assert!(
        wc.delay_p95_ms > 5.0 * c.delay_p95_ms,
        "{}",
        wc.delay_p95_ms
    );
}

fn scenarios_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios")
}

#[test]
fn the_example_session_scenarios_load() {
    let have_data = scenarios_dir().join("../../shared/data").is_dir();
    for f in [
        "session_cut.toml",
        "session_100mbit.toml",
        "session_two_paths.toml",
        "session_deep_buffer.toml",
        "session_deep_path.toml",
    ] {
        let path = scenarios_dir().join(f);
        match SessionScenario::from_path(&path) {
            Ok(s) => assert!(!s.streams.is_empty()),
            Err(e) if e.kind == K::Trace && !have_data => {
                eprintln!("SKIPPED {f}: ../shared/data not found ({e})");
            }
            Err(e) => panic!("{e}"),
        }
    }
}

mod properties {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// A stream probability is taken exactly when it is inside (0, 1);
        /// otherwise the error names the probability's own line.
        #[test]
        fn probabilities_are_checked_on_their_line(p in -2.0f64..3.0) {
            let text = edited("probability = 0.9", &format!("probability = {p:?}"));
            match parse(&text) {
                Ok(s) => prop_assert!(p > 0.0 && p < 1.0, "{p} accepted: {:?}", s.streams[0].config.spec),
                Err(e) => {
                    prop_assert!(!(p > 0.0 && p < 1.0), "{p} refused: {e}");
                    prop_assert_eq!(e.line, Some(line_of(&text, &format!("probability = {p:?}"))));
                }
            }
        }

        /// Whatever follows a valid scenario's keys, loading never panics
        /// and an error is one line naming the file.
        #[test]
        fn arbitrary_values_never_panic(v in "[ -~]{0,24}") {
            let text = edited(r#"delay = "10ms""#, &format!("delay = {v:?}"));
            if let Err(e) = parse(&text) {
                let shown = e.to_string();
                prop_assert!(shown.starts_with("dir/s.toml"), "{}", shown);
                prop_assert_eq!(shown.lines().count(), 1);
            }
        }
    }
}

/// Greedy reliable bulk behind a 500 ms queue at 100 Mbit/s runs to its
/// end with every message delivered. CUBIC's window grows past the
/// connection's send queue bound there; the connection then refused what
/// the session handed it, the scheduler backed the path off, and its
/// back-off, once run out, kept naming a time that had passed: the
/// simulation stood still at t = 1.75 s (`Scheduler::handle_timeout`).
/// The receiver side of the same run is `transport::tests::a_hole_wider_than_the_receive_bound_loses_nothing`.
#[test]
fn greedy_bulk_behind_a_deep_queue_runs_to_the_end() {
    let text = r#"
name = "wide hole"
duration = "25s"
warmup = "1s"

[[path]]
name = "a"
rate = "100mbit"
delay = "20ms"
queue = "500ms"

[[stream]]
name = "bulk"
kind = "best-effort"
stop = "10s"
inflight = 20000
source = { kind = "greedy", size = 1200 }
"#;
    let r = run(&parse(text).unwrap()).unwrap();
    let bulk = r.stream("bulk").unwrap();
    assert!(bulk.sent > 50_000, "{bulk:?}");
    assert_eq!(bulk.delivered, bulk.sent, "{bulk:?}");
    assert_eq!(bulk.errors, 0, "{bulk:?}");
}

/// Issue 30 §3: the spec and SOURCE strings are the one grammar; the old
/// table form reads the same, with one warning per use that gives the
/// string replacing it.
#[test]
fn spec_and_source_strings_replace_the_tables_with_the_same_meaning() {
    let old = parse(GOOD).unwrap();
    let spec_lines: Vec<&String> = old
        .warnings
        .iter()
        .filter(|w| w.contains("write spec ="))
        .collect();
    assert_eq!(spec_lines.len(), 3, "{:?}", old.warnings);
    assert!(
        spec_lines[1].starts_with("dir/s.toml: line "),
        "{}",
        spec_lines[1]
    );
    assert!(
        spec_lines[1].contains(r#"write spec = "window=4/5:100ms:500B@0.8,deadline=300ms""#),
        "{}",
        spec_lines[1]
    );
    assert!(old
        .warnings
        .iter()
        .any(|w| w.contains(r#"write source = "greedy:1200B""#)));
    let new = GOOD
        .replacen("kind = \"rate\"\nrate = \"2mbit\"\nprobability = 0.9", "spec = \"rate=2mbit@0.9\"", 1)
        .replacen(
            "kind = \"window\"\nx = 4\ny = 5\nwindow = \"100ms\"\nsize = 500\nprobability = 0.8\ndelivery = \"deadline\"\ndeadline = \"300ms\"",
            "spec = \"window=4/5:100ms:500B@0.8,deadline=300ms\"",
            1,
        )
        .replacen(
            "kind = \"best-effort\"\nsource = { kind = \"greedy\", size = 1200 }",
            "spec = \"best-effort\"\nsource = \"greedy:1200B\"",
            1,
        );
    let new = parse(&new).unwrap();
    assert!(new.warnings.is_empty(), "{:?}", new.warnings);
    assert_eq!(new.streams, old.streams);
}

#[test]
fn a_spec_string_is_checked_and_not_mixed_with_table_keys() {
    let text = edited(
        "kind = \"rate\"\nrate = \"2mbit\"",
        "spec = \"rate=2mbit@1.5\"",
    );
    assert_error(&text, K::Value, "spec = ", "probability");
    let text = edited("kind = \"rate\"", "spec = \"rate=2mbit@0.9\"");
    assert_error(
        &text,
        K::Value,
        "spec = ",
        "write rate, probability inside it",
    );
    let text = edited(
        "kind = \"rate\"",
        "spec = \"rate=2mbit@0.9\"\nkind = \"rate\"",
    );
    assert_error(&text, K::Value, "spec = ", "not both");
    let text = edited(
        "source = { kind = \"greedy\", size = 1200 }",
        "source = \"-\"",
    );
    assert_error(&text, K::Value, "source = ", "not a simulated source");
}
