//! `braid stream`, `braid serve` and `braid relay` on bad input: each is
//! one `braid: error:` line naming what is wrong, a non-zero exit, and
//! nothing sent (every check runs before a socket is opened).

mod common;

use std::process::{Command, Output};

fn braid(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_braid"))
        .args(args)
        .env_remove("BRAID_LOG")
        .output()
        .expect("run braid")
}

/// The run failed with exactly one `braid: error:` line that contains
/// every one of `needles`.
#[track_caller]
fn one_error_line(out: &Output, needles: &[&str]) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "succeeded: {err}");
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 1, "not one line: {err}");
    assert!(lines[0].starts_with("braid: error: "), "{err}");
    for n in needles {
        assert!(lines[0].contains(n), "{n:?} not in {err}");
    }
}

const TO: &str = "127.0.0.1:9";

#[test]
fn an_unknown_path_syntax_is_one_line() {
    let out = braid(&[
        "stream",
        "--to",
        TO,
        "--path",
        "tunnel=1.2.3.4:5",
        "--stream",
        "a:best-effort:-",
    ]);
    one_error_line(&out, &["tunnel=1.2.3.4:5", "direct", "via="]);
}

#[test]
fn a_spec_that_does_not_parse_is_one_line() {
    let out = braid(&[
        "stream",
        "--to",
        TO,
        "--stream",
        "video:rate=3.2mbit:cbr:1mbit",
    ]);
    one_error_line(&out, &["rate=3.2mbit", "rate=RATE@P"]);
    let out = braid(&["stream", "--to", TO, "--stream", "video:speed=9:cbr:1mbit"]);
    one_error_line(&out, &["unknown spec term \"speed=9\""]);
}

#[test]
fn a_missing_source_file_is_one_line() {
    let out = braid(&[
        "stream",
        "--to",
        TO,
        "--stream",
        "log:best-effort:/nonexistent/braid-test-source",
    ]);
    one_error_line(&out, &["/nonexistent/braid-test-source"]);
    let out = braid(&[
        "stream",
        "--to",
        TO,
        "--stream",
        "v:best-effort:trace:/nonexistent/frames:30",
    ]);
    one_error_line(&out, &["/nonexistent/frames"]);
}

#[test]
fn a_bad_on_infeasible_is_one_line() {
    let out = braid(&[
        "stream",
        "--to",
        TO,
        "--on-infeasible",
        "shrug",
        "--stream",
        "a:best-effort:-",
    ]);
    one_error_line(&out, &["shrug", "lower", "drop", "fail"]);
}

#[test]
fn a_config_file_with_an_unknown_key_is_one_line() {
    let dir = std::env::temp_dir().join(format!("braid-stream-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let file = dir.join("session.toml");
    std::fs::write(
        &file,
        "to = \"127.0.0.1:9\"\n\n[[stream]]\nname = \"a\"\nspec = \"best-effort\"\nsource = \"-\"\ncolour = \"red\"\n",
    )
    .expect("write config");
    let out = braid(&["stream", "--config", file.to_str().expect("utf-8 path")]);
    let _ = std::fs::remove_dir_all(&dir);
    one_error_line(&out, &["session.toml", "line 7", "colour"]);
}

#[test]
fn missing_settings_are_named() {
    one_error_line(
        &braid(&["stream", "--stream", "a:best-effort:-"]),
        &["--to"],
    );
    one_error_line(&braid(&["stream", "--to", TO]), &["--stream"]);
    one_error_line(
        &braid(&[
            "stream",
            "--to",
            TO,
            "--scheduler",
            "fifo",
            "--stream",
            "a:best-effort:-",
        ]),
        &["fifo", "pgos"],
    );
    one_error_line(
        &braid(&["serve", "--listen", "nowhere"]),
        &["--listen", "nowhere"],
    );
    one_error_line(
        &braid(&["relay", "--open", "--listen", "nowhere"]),
        &["--listen", "nowhere"],
    );
    // Not an open relay unless asked: no key, no relay.
    let out = braid(&["relay", "--listen", "127.0.0.1:0"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--key"));
}

#[test]
fn the_rudp_commands_need_a_key_or_an_explicit_open() {
    for args in [
        &["serve", "--listen", "127.0.0.1:0"][..],
        &["stream", "--to", TO, "--stream", "a:best-effort:cbr:1mbit"],
        &["relay", "--listen", "127.0.0.1:0"],
        &["perf", "server", "--listen", "127.0.0.1:0"],
        &["perf", "client", "--to", TO],
    ] {
        one_error_line(&braid(args), &["--key FILE", "braid keygen FILE", "--open"]);
    }
    one_error_line(
        &braid(&["serve", "--listen", "127.0.0.1:0", "--no-encrypt"]),
        &["--no-encrypt needs --key"],
    );
    one_error_line(
        &braid(&["serve", "--listen", "127.0.0.1:0", "--open", "--no-encrypt"]),
        &["--open", "--no-encrypt"],
    );
}

#[test]
fn each_command_explains_itself_with_an_example() {
    for cmd in ["stream", "serve", "relay"] {
        let out = braid(&[cmd, "--help"]);
        common::assert_ok(&out, cmd);
        let help = String::from_utf8_lossy(&out.stdout);
        assert!(help.contains("Example:"), "{cmd}: {help}");
        assert!(help.contains(&format!("braid {cmd} --")), "{cmd}: {help}");
    }
}
