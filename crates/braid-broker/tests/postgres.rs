//! The store against PostgreSQL: the same migrations and the restart
//! contract. Needs a server: set BRAID_TEST_POSTGRES to its URL (e.g.
//! postgres://braid@localhost/braid_test); skipped with a printed reason
//! otherwise. The test adds rows with fresh ids to the database it is given.

use braid_broker::store::{Record, Store};
use braid_core::reserve::{Book, BookConfig, Owner, ReserveRequest};
use braid_core::{Bandwidth, Duration, Instant};

async fn store() -> Option<Store> {
    let Ok(url) = std::env::var("BRAID_TEST_POSTGRES") else {
        eprintln!(
            "skipped: set BRAID_TEST_POSTGRES=postgres://… to run the PostgreSQL store tests"
        );
        return None;
    };
    match Store::open(&url).await {
        Ok(s) => Some(s),
        Err(e) => {
            eprintln!("skipped: no PostgreSQL at BRAID_TEST_POSTGRES ({e})");
            None
        }
    }
}

#[tokio::test]
async fn postgres_keeps_committed_and_held_reservations() {
    let Some(store) = store().await else { return };
    let mut book = Book::new(BookConfig {
        first_id: store.max_id().await.unwrap() + 1,
        ..BookConfig::default()
    });
    book.add_resource("link", Bandwidth::from_mbps(100))
        .unwrap();
    let now = Instant::from_nanos(1_800_000_000 * 1_000_000_000);
    let req = ReserveRequest {
        owner: Owner::new("alice", "lab"),
        resource: "link".into(),
        rate: Bandwidth::from_mbps(10),
        start: now,
        end: now + Duration::from_secs(3600),
        class: Default::default(),
    };
    let committed = book.reserve(req.clone(), now).unwrap();
    book.commit(committed, now).unwrap();
    let held = book.reserve(req, now).unwrap();
    let rows: Vec<_> = [committed, held]
        .iter()
        .map(|id| book.reservation(*id).unwrap().clone())
        .collect();
    let records: Vec<Record<'_>> = rows
        .iter()
        .map(|r| Record {
            reservation: r,
            callback: Some("http://example.invalid/hook"),
        })
        .collect();
    store.write(&records).await.unwrap();
    store.close().await;

    let store = self::store().await.expect("reachable a moment ago");
    let live = store.live().await.unwrap();
    let got = |id| {
        live.iter()
            .find(|(r, _)| r.id == id)
            .expect("stored")
            .clone()
    };
    assert_eq!(got(committed).0, rows[0]);
    assert_eq!(got(held).0, rows[1]);
    assert_eq!(got(held).1.as_deref(), Some("http://example.invalid/hook"));
    assert!(store.max_id().await.unwrap() >= held.0);
}
