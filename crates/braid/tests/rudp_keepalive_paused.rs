//! IQ-RUDP's keep-alives on tokio's paused clock (issue 30 §6): ten
//! virtual minutes pass at once. This binary holds this one test: braid's clock takes
//! its origin from the first reading in the process, and another test's
//! runtime reading it first, after this one started, would put this
//! runtime's virtual time before the origin, where braid's clock reads
//! zero until it passes it (a known limit of `braid::clock`).

mod mem_rudp;
use braid::rudp::mem::MemNet;
use braid::rudp::EndpointConfig;
use mem_rudp::{addr, mem_endpoint, transfer};

/// The runtime reads tokio's clock (`braid::clock`), so on a paused clock
/// its timers run in virtual time: ten virtual minutes without a message,
/// twenty idle timeouts' worth, pass at once; the client's keep-alive
/// pings hold the connection through them, and it still carries data.
#[tokio::test(start_paused = true)]
async fn keep_alives_hold_an_idle_connection_on_a_paused_clock() {
    let net = MemNet::new();
    let mut server = mem_endpoint(&net, &["10.0.0.2:9000"], EndpointConfig::server());
    let client = mem_endpoint(&net, &["10.0.0.1:0"], EndpointConfig::default());
    let (c, s) = tokio::join!(client.connect(addr("10.0.0.2:9000")), server.accept());
    let (c, s) = (c.expect("connected"), s.expect("accepted"));
    let before = braid::clock::now();
    tokio::time::sleep(std::time::Duration::from_secs(600)).await;
    let idle = braid::clock::now() - before;
    assert!(
        idle >= braid_core::Duration::from_secs(600),
        "braid's clock moved {idle} while tokio's moved 600 s"
    );
    let stats = c.stats().await.expect("the connection is open");
    assert!(stats.lone_pings > 0, "no keep-alive in 600 s: {stats:?}");
    transfer(c, s, 10).await;
}
