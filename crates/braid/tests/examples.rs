//! The examples a user copies run in CI: each is included here and run on
//! loopback (behaviour only, never speed).

#[path = "../examples/guaranteed_streams.rs"]
#[allow(dead_code)]
mod guaranteed_streams;

#[path = "../examples/file_over_paths.rs"]
#[allow(dead_code)]
mod file_over_paths;

#[path = "../examples/relayed_paths.rs"]
#[allow(dead_code)]
mod relayed_paths;

/// Two guaranteed streams and a best-effort one over one session: all
/// three deliver, both guarantees are mapped, and the sink judges the
/// constant-rate guarantee's windows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_guaranteed_streams_example_runs() {
    // Long enough that a window's length, allowance and the sink's next
    // look have passed well before the end, on a loaded machine too.
    let report = guaranteed_streams::run(braid_core::Duration::from_secs(6))
        .await
        .expect("the example runs");
    for name in ["video", "control", "bulk"] {
        let got = report.received.get(name);
        assert!(
            got.is_some_and(|r| r.messages > 0),
            "{name} delivered nothing: {report:?}"
        );
    }
    assert!(
        report.mapped.iter().any(|m| m == "video") || report.lowered > 0,
        "the video guarantee was neither mapped nor answered: {report:?}"
    );
    assert!(
        report.received["video"].windows_met.is_some(),
        "the sink judged no window of the video stream: {report:?}"
    );
    // Best effort has no windows to meet, and says so (it read 100 %).
    assert_eq!(report.received["bulk"].windows_met, None, "{report:?}");
}

/// A file's bytes over a direct path and one through a relay: all of it
/// arrives intact over a session whose second path runs through the relay
/// (which forwarded traffic of it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_relayed_paths_example_runs() {
    let report = relayed_paths::run(8 << 20).await.expect("the example runs");
    assert_eq!(report.bytes, 8 << 20, "{report:?}");
    assert!(report.intact, "{report:?}");
    assert_eq!(report.per_path.len(), 2, "{report:?}");
    assert!(
        report.relayed > 0,
        "nothing went through the relay: {report:?}"
    );
}

/// A file over two addresses and four connections: the copy is the
/// original, both sides' digests agree, and both addresses carried data.
#[test]
fn the_file_over_paths_example_runs() {
    let report = file_over_paths::run(16 << 20).expect("the example runs");
    assert_eq!(report.bytes, 16 << 20, "{report:?}");
    assert!(report.intact && report.digests_agree, "{report:?}");
    assert_eq!(report.per_connection.len(), 4, "{report:?}");
    for host in ["127.0.0.1:", "127.0.0.2:"] {
        assert!(
            report
                .per_connection
                .iter()
                .any(|(to, bytes)| to.starts_with(host) && *bytes > 0),
            "nothing went to {host}: {report:?}"
        );
    }
}
