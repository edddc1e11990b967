//! IQ-RUDP over braid-sim against the Reno throughput model (issue 3's
//! simulation benchmark): 20 Mbit/s, 30 ms RTT, 1 % random loss.
//!
//! The model's constant assumes periodic loss; Bernoulli loss as simulated
//! here gives Reno-like controllers less (CUBIC about 90 % of Mathis, NewReno
//! about 81 %; see docs/rudp-experiments.md). The bound below catches
//! regressions; reaching the model itself is open work (issue 3). Virtual
//! time, so this checks the controller's behaviour, not machine speed.

use braid_core::transport::CongestionKind;
use braid_sim::rudp::experiments::reno_benchmark;

#[test]
fn rudp_goodput_under_random_loss_against_reno_model() {
    let r = reno_benchmark(1, 0.01, 60, CongestionKind::Cubic);
    eprintln!(
        "rudp goodput {:.2} Mbit/s; Mathis {:.2}, Padhye {:.2} Mbit/s",
        r.goodput_mbps, r.mathis_mbps, r.padhye_mbps
    );
    assert!(r.intact, "reliable data must arrive intact");
    assert!(
        r.goodput_mbps >= 0.75 * r.mathis_mbps,
        "{r:?}: below 0.75 of the Mathis model"
    );
}
