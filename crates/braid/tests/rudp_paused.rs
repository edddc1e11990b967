//! IQ-RUDP's runtime on tokio's paused clock (issue 30 §6): a paced
//! transfer runs its course in virtual time, the driver never spinning at
//! a frozen instant. This binary holds this one test: braid's clock takes
//! its origin from the first reading in the process, and another test's
//! runtime reading it first, after this one started, would put this
//! runtime's virtual time before the origin, where braid's clock reads
//! zero until it passes it (a known limit of `braid::clock`).

mod mem_rudp;
use braid::rudp::mem::MemNet;
use braid::rudp::EndpointConfig;
use mem_rudp::{addr, mem_endpoint, transfer};

/// On a paused clock the driver does not spin on its pacer: a transfer far
/// longer than one burst (2,000 messages of 2 kB, paced at a fixed 8
/// Mbit/s) runs to the end in virtual time, and takes the virtual time its
/// pace says (4 MB at 8 Mbit/s: about 4 s), not none.
#[tokio::test(start_paused = true)]
async fn a_paced_transfer_runs_its_course_on_a_paused_clock() {
    use braid_core::transport::CongestionKind;
    let net = MemNet::new();
    let mut server = mem_endpoint(&net, &["10.0.0.2:9000"], EndpointConfig::server());
    let mut config = EndpointConfig::default();
    config.transport.congestion = CongestionKind::Fixed(braid_core::Bandwidth::from_mbps(8));
    let client = mem_endpoint(&net, &["10.0.0.1:0"], config);
    let (c, s) = tokio::join!(client.connect(addr("10.0.0.2:9000")), server.accept());
    let (c, s) = (c.expect("connected"), s.expect("accepted"));
    let before = braid::clock::now();
    tokio::time::timeout(std::time::Duration::from_secs(600), transfer(c, s, 2_000))
        .await
        .expect("the transfer ends in virtual time");
    let took = braid::clock::now() - before;
    assert!(
        took >= braid_core::Duration::from_secs(3) && took <= braid_core::Duration::from_secs(30),
        "4 MB at 8 Mbit/s took {took} of virtual time"
    );
}
