//! Bad scenario input gives one clear line naming the file (and the line
//! where there is one); nothing panics.

use braid_sim::{Scenario, ScenarioError, ScenarioErrorKind};
use std::path::Path;

const GOOD: &str = r#"duration = "10s"
nodes = ["a", "b"]

[[link]]
name = "fwd"
from = "a"
to = "b"
rate = "10mbit"
delay = "20ms"

[[flow]]
name = "cbr"
kind = "cbr"
from = "a"
to = "b"
rate = "1mbit"
route = ["fwd"]
"#;

fn parse_as(text: &str, file: &str) -> ScenarioError {
    Scenario::from_toml_str_at(text, Path::new(file)).expect_err("must be rejected")
}

fn check(
    e: &ScenarioError,
    file: &str,
    line: Option<usize>,
    kind: ScenarioErrorKind,
    needle: &str,
) {
    let msg = e.to_string();
    println!("{msg}");
    assert!(msg.starts_with(file), "names the file: {msg}");
    assert!(!msg.contains('\n'), "one line: {msg:?}");
    assert!(msg.contains(needle), "mentions {needle:?}: {msg}");
    assert_eq!(e.line, line, "{msg}");
    assert_eq!(e.kind, kind, "{msg}");
    if let Some(l) = line {
        assert!(msg.contains(&format!("line {l}:")), "{msg}");
    }
}

#[test]
fn the_good_scenario_is_good() {
    Scenario::from_toml_str_at(GOOD, Path::new("x/good.toml")).unwrap();
}

#[test]
fn undefined_node() {
    let text = GOOD.replace(
        "to = \"b\"\nrate = \"10mbit\"",
        "to = \"c\"\nrate = \"10mbit\"",
    );
    let e = parse_as(&text, "x/undefined_node.toml");
    check(
        &e,
        "x/undefined_node.toml",
        Some(7),
        ScenarioErrorKind::Undefined,
        "undefined node `c`",
    );
}

#[test]
fn undefined_link() {
    let text = GOOD.replace("route = [\"fwd\"]", "route = [\"nope\"]");
    let e = parse_as(&text, "x/undefined_link.toml");
    check(
        &e,
        "x/undefined_link.toml",
        Some(17),
        ScenarioErrorKind::Undefined,
        "undefined link `nope`",
    );
}

#[test]
fn unknown_unit() {
    let text = GOOD.replace("rate = \"10mbit\"", "rate = \"10 furlongs\"");
    let e = parse_as(&text, "x/unit.toml");
    check(
        &e,
        "x/unit.toml",
        Some(8),
        ScenarioErrorKind::Value,
        "furlongs",
    );
    let text = GOOD.replace("delay = \"20ms\"", "delay = \"20 fortnights\"");
    let e = parse_as(&text, "x/unit.toml");
    check(
        &e,
        "x/unit.toml",
        Some(9),
        ScenarioErrorKind::Value,
        "fortnights",
    );
    let text = GOOD.replace(
        "delay = \"20ms\"",
        "delay = \"20ms\"\nqueue = \"12 barrels\"",
    );
    let e = parse_as(&text, "x/unit.toml");
    check(
        &e,
        "x/unit.toml",
        Some(10),
        ScenarioErrorKind::Value,
        "barrels",
    );
}

#[test]
fn malformed_toml() {
    let text = GOOD.replace("delay = \"20ms\"", "delay = \"20ms");
    let e = parse_as(&text, "x/malformed.toml");
    check(
        &e,
        "x/malformed.toml",
        Some(9),
        ScenarioErrorKind::Syntax,
        "",
    );
    // A misspelt key is refused, not ignored.
    let text = GOOD.replace("delay = \"20ms\"", "dealy = \"20ms\"");
    let e = parse_as(&text, "x/typo.toml");
    check(
        &e,
        "x/typo.toml",
        Some(9),
        ScenarioErrorKind::Syntax,
        "dealy",
    );
    // A missing required key.
    let text = GOOD.replace("duration = \"10s\"\n", "");
    let e = parse_as(&text, "x/missing.toml");
    assert!(e.to_string().contains("duration"), "{e}");
}

#[test]
fn missing_trace() {
    let text = GOOD.replace("rate = \"10mbit\"", "trace = \"no/such/trace.down\"");
    let e = parse_as(&text, "x/missing_trace.toml");
    check(
        &e,
        "x/missing_trace.toml",
        Some(8),
        ScenarioErrorKind::Trace,
        "x/no/such/trace.down",
    );
}

#[test]
fn malformed_trace() {
    let dir = std::env::temp_dir().join(format!("braid-sim-errors-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("bad.down"), "10\n20\nthirty\n40\n").unwrap();
    let scenario = dir.join("bad_trace.toml");
    let text = GOOD.replace(
        "rate = \"10mbit\"",
        "trace = \"bad.down\"\ntrace_format = \"mahimahi\"",
    );
    std::fs::write(&scenario, text).unwrap();
    let e = Scenario::from_path(&scenario).unwrap_err();
    let msg = e.to_string();
    let _ = std::fs::remove_dir_all(&dir);
    check(
        &e,
        &scenario.display().to_string(),
        Some(8),
        ScenarioErrorKind::Trace,
        "bad.down: line 3:",
    );
    assert!(msg.contains("thirty"), "{msg}");
}

#[test]
fn missing_scenario_file() {
    let e = Scenario::from_path("no/such/scenario.toml").unwrap_err();
    check(&e, "no/such/scenario.toml", None, ScenarioErrorKind::Io, "");
}

#[test]
fn broken_route_and_duplicates_and_ranges() {
    let text = GOOD.replace(
        "from = \"a\"\nto = \"b\"\nrate = \"1mbit\"",
        "from = \"b\"\nto = \"a\"\nrate = \"1mbit\"",
    );
    let e = parse_as(&text, "x/route.toml");
    check(
        &e,
        "x/route.toml",
        Some(17),
        ScenarioErrorKind::Route,
        "leaves `a`",
    );
    let text = GOOD.replace("nodes = [\"a\", \"b\"]", "nodes = [\"a\", \"b\", \"a\"]");
    let e = parse_as(&text, "x/dup.toml");
    check(
        &e,
        "x/dup.toml",
        Some(2),
        ScenarioErrorKind::Duplicate,
        "defined twice",
    );
    let text = GOOD.replace("delay = \"20ms\"", "delay = \"20ms\"\nloss = 1.5");
    let e = parse_as(&text, "x/range.toml");
    check(
        &e,
        "x/range.toml",
        Some(10),
        ScenarioErrorKind::Value,
        "probability",
    );
    let text = GOOD.replace("kind = \"cbr\"", "kind = \"greedy\"");
    let e = parse_as(&text, "x/noback.toml");
    check(
        &e,
        "x/noback.toml",
        Some(12),
        ScenarioErrorKind::Route,
        "no chain of links",
    );
}

proptest::proptest! {
    /// Arbitrary text never panics the scenario parser, and every error is
    /// one line naming the file.
    #[test]
    fn arbitrary_text_never_panics(text in "\\PC{0,400}") {
        if let Err(e) = Scenario::from_toml_str_at(&text, Path::new("fuzz.toml")) {
            let msg = e.to_string();
            proptest::prop_assert!(msg.starts_with("fuzz.toml: "));
            proptest::prop_assert!(!msg.contains('\n'));
        }
    }

    /// Mutations of a valid scenario (one value replaced) never panic.
    #[test]
    fn mutated_values_never_panic(
        key in proptest::sample::select(vec!["10mbit", "20ms", "1mbit", "10s", "\"a\"", "\"b\"", "\"fwd\""]),
        value in proptest::sample::select(vec!["0bit", "-1ms", "1e300mbit", "0s", "\"\"", "1.5", "[]", "{}", "\"0ns\"", "\"99999999h\""]),
    ) {
        let text = GOOD.replacen(key, value, 1);
        if let Ok(s) = Scenario::from_toml_str(&text) {
            let _ = braid_sim::Simulation::new(&s).map(|sim| sim.run());
        }
    }
}
