//! The driver over sockets it does not know the kind of: RUDP over the
//! in-memory sockets of `braid::rudp::mem` (no kernel), one driver owning
//! several sockets (in memory and real ones on loopback), and connections
//! leaving through the socket they were opened from. Tests assert
//! behaviour, never speed.

mod mem_rudp;
use braid::rudp::mem::MemNet;
use braid::rudp::{Endpoint, EndpointConfig, RudpError};
use mem_rudp::{addr, mem_endpoint, transfer};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rudp_over_in_memory_sockets() {
    let net = MemNet::new();
    let mut server = mem_endpoint(&net, &["10.0.0.2:4433"], EndpointConfig::server());
    let client = mem_endpoint(&net, &["10.0.0.1:0"], EndpointConfig::default());
    assert_eq!(server.local_addr(), addr("10.0.0.2:4433"));
    let (c, s) = tokio::join!(client.connect(server.local_addr()), server.accept());
    let (c, s) = (c.unwrap(), s.unwrap());
    assert_eq!(s.remote(), client.local_addr());
    transfer(c, s, 2_000).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_driver_serves_connections_on_two_sockets() {
    let net = MemNet::new();
    let (a, b) = (addr("10.0.1.1:4433"), addr("10.0.2.1:4433"));
    let mut server = mem_endpoint(
        &net,
        &["10.0.1.1:4433", "10.0.2.1:4433"],
        EndpointConfig::server(),
    );
    assert_eq!(server.local_addrs(), &[a, b]);
    let c1 = mem_endpoint(&net, &["10.0.1.2:0"], EndpointConfig::default());
    let c2 = mem_endpoint(&net, &["10.0.2.2:0"], EndpointConfig::default());
    let (x, s1) = tokio::join!(c1.connect(a), server.accept());
    let (x, s1) = (x.unwrap(), s1.unwrap());
    let (y, s2) = tokio::join!(c2.connect(b), server.accept());
    let (y, s2) = (y.unwrap(), s2.unwrap());
    assert_eq!(s1.remote(), c1.local_addr());
    assert_eq!(s2.remote(), c2.local_addr());
    tokio::join!(transfer(x, s1, 500), transfer(y, s2, 500));
    // Every answer left through the socket the client spoke to: a reply
    // from the other socket comes from an address the client's connection
    // does not know and is dropped, so no handshake or transfer above
    // would have completed. Nothing went astray in the network either.
    let st = c1.stats().await.unwrap();
    assert_eq!(st.endpoint.unknown_connection, 0);
    assert_eq!(net.dropped(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_leaves_through_the_socket_it_names() {
    let net = MemNet::new();
    let mut server = mem_endpoint(&net, &["10.0.0.9:4433"], EndpointConfig::server());
    let client = mem_endpoint(
        &net,
        &["10.0.1.1:5000", "10.0.2.1:5000"],
        EndpointConfig::default(),
    );
    let from = addr("10.0.2.1:5000");
    let (c, s) = tokio::join!(
        client.connect_from(from, server.local_addr()),
        server.accept()
    );
    let (c, s) = (c.unwrap(), s.unwrap());
    assert_eq!(s.remote(), from, "the server saw the second socket");
    transfer(c, s, 200).await;
    let e = client
        .connect_from(addr("10.0.3.1:5000"), server.local_addr())
        .await;
    assert!(matches!(e, Err(RudpError::UnknownLocalAddress(_))));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_driver_owns_two_kernel_sockets() {
    let mut server = Endpoint::bind_many(
        &[addr("127.0.0.1:0"), addr("127.0.0.1:0")],
        EndpointConfig::server(),
    )
    .unwrap();
    let [a, b] = server.local_addrs() else {
        panic!("two sockets");
    };
    let (a, b) = (*a, *b);
    assert_ne!(a, b);
    let client = Endpoint::bind(addr("127.0.0.1:0"), EndpointConfig::default()).unwrap();
    let (x, s1) = tokio::join!(client.connect(a), server.accept());
    let (y, s2) = tokio::join!(client.connect(b), server.accept());
    let (x, s1, y, s2) = (x.unwrap(), s1.unwrap(), y.unwrap(), s2.unwrap());
    assert_eq!(x.remote(), a);
    assert_eq!(y.remote(), b);
    tokio::join!(transfer(x, s1, 300), transfer(y, s2, 300));
}
