//! The broker's example a user copies runs in CI, on loopback (behaviour
//! only, never speed).

#[path = "../examples/reserved_transfer.rs"]
#[allow(dead_code)]
mod reserved_transfer;

/// A transfer on a committed reservation and a deadline transfer: both
/// arrive whole, the deadline is met and both reservations end released
/// (the deadline's also terminated).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reserved_transfer_example_runs() {
    let len = 4 << 20;
    let report = reserved_transfer::run(len).await.expect("the example runs");
    assert_eq!(report.received, vec![len as u64, len as u64], "{report:?}");
    assert!(report.deadline_met, "{report:?}");
    assert_eq!(report.states.len(), 2, "{report:?}");
    assert!(report.states[0].contains("released"), "{report:?}");
    assert!(report.states[1].contains("terminated"), "{report:?}");
}
