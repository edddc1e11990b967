//! Load: 64 concurrent clients reserving and committing over real HTTP
//! against one broker, on SQLite and (when `BRAID_TEST_POSTGRES` reaches a
//! server, see `common`) on PostgreSQL; prints requests/s and latency
//! percentiles per back-end, and checks that the stored reservations,
//! replayed, never exceed a resource's capacity at any instant. A
//! measurement, so ignored by default:
//!
//! `cargo test --release -p braid-broker --test load -- --ignored --nocapture`

mod common;

use braid_broker::owner::Action;
use std::path::Path;

use braid_broker::store::Store;
use braid_broker::types::CreateRequest;
use braid_broker::{Auth, Broker, Client, Config, Role};
use braid_core::reserve::ReservationState;

const SECRET: &str = "0123456789abcdef0123456789abcdef";
const CLIENTS: usize = 64;
const ROUNDS: usize = 40;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement: run by name with --ignored --nocapture"]
#[allow(clippy::disallowed_methods)] // timing real work is the point here
async fn sixty_four_clients_reserve_and_commit() {
    for db in common::backends().await {
        let kind = db.kind();
        load(db.url(), kind).await;
        db.finish().await;
    }
}

#[allow(clippy::disallowed_methods)] // timing real work is the point here
async fn load(db: &str, kind: &str) {
    let text = format!(
        "secret = \"{SECRET}\"\n[[resource]]\nname = \"wide\"\nkind = \"network\"\ncapacity = \"10gbit\"\n\
         [[resource]]\nname = \"tight\"\nkind = \"network\"\ncapacity = \"1mbit\"\n"
    );
    let config = Config::parse(&text, Path::new("load.toml")).unwrap();
    let capacities = [("wide", 10_000_000_000_u64), ("tight", 1_000_000)];
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let broker = Broker::start(config, db, listener).await.unwrap();
    let base = format!("http://{}", broker.addr());
    let end = braid_broker::clock::format(
        braid_broker::clock::now() + braid_core::Duration::from_secs(3600),
    );

    let started = std::time::Instant::now();
    let mut tasks = Vec::new();
    for c in 0..CLIENTS {
        let token = Auth::new(SECRET.as_bytes())
            .issue(&format!("user{c}"), Role::User, 4_000_000_000)
            .unwrap();
        let client = Client::new(&base, &token).unwrap();
        let end = end.clone();
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            let mut refused = 0;
            for i in 0..ROUNDS {
                let resource = if i % 4 == 0 { "tight" } else { "wide" };
                let req = CreateRequest {
                    resource: Some(resource.into()),
                    rate: Some("100kbit".into()),
                    end: Some(end.clone()),
                    ..CreateRequest::default()
                };
                let t = std::time::Instant::now();
                let made = client.create(&req).await;
                latencies.push(t.elapsed());
                let Ok(made) = made else {
                    refused += 1;
                    continue;
                };
                let t = std::time::Instant::now();
                client
                    .act(made.id, Action::Commit)
                    .await
                    .expect("commit what was held");
                latencies.push(t.elapsed());
            }
            (latencies, refused)
        }));
    }
    let mut latencies = Vec::new();
    let mut refused = 0;
    for t in tasks {
        let (l, r) = t.await.unwrap();
        latencies.extend(l);
        refused += r;
    }
    let elapsed = started.elapsed();
    broker.stop().await;
    latencies.sort();
    let pct = |p: f64| latencies[((latencies.len() as f64 * p) as usize).min(latencies.len() - 1)];
    println!(
        "{kind}: {} requests ({refused} refused for capacity) from {CLIENTS} clients in {:.2} s: {:.0} requests/s, p50 {:?}, p99 {:?}, max {:?}",
        latencies.len(),
        elapsed.as_secs_f64(),
        latencies.len() as f64 / elapsed.as_secs_f64(),
        pct(0.5),
        pct(0.99),
        latencies[latencies.len() - 1],
    );

    // Replay what is stored: at every start instant, what is held or
    // committed there fits the capacity.
    let store = Store::open(db).await.unwrap();
    let all = store.all(None, i64::MAX).await.unwrap();
    assert!(refused > 0, "the tight resource refused some");
    for (name, capacity) in capacities {
        let pieces: Vec<(u64, u64, u64)> = all
            .iter()
            .filter(|r| r.resource == name && r.state == ReservationState::Committed)
            .filter_map(|r| r.committed.as_ref())
            .map(|v| (v.start.as_nanos(), v.end.as_nanos(), v.rate.bps()))
            .collect();
        for &(t, _, _) in &pieces {
            let used: u64 = pieces
                .iter()
                .filter(|p| p.0 <= t && t < p.1)
                .map(|p| p.2)
                .sum();
            assert!(
                used <= capacity,
                "{name} over-admitted at {t}: {used} > {capacity}"
            );
        }
    }
    store.close().await;
}
