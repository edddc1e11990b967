//! The store on every back-end from the same code: SQLite always, and
//! PostgreSQL when `BRAID_TEST_POSTGRES` reaches a server (skipped with a
//! printed reason otherwise; see `common`). The migrations, the restart
//! contract, updates in place, and the queries the broker makes.

mod common;

use braid_broker::store::{Record, Store};
use braid_core::reserve::{Book, BookConfig, Owner, Reservation, ReserveRequest};
use braid_core::{Bandwidth, Duration, Instant, ReservationId};

fn request(user: &str, now: Instant) -> ReserveRequest {
    ReserveRequest {
        owner: Owner::new(user, "lab"),
        resource: "link".into(),
        rate: Bandwidth::from_mbps(10),
        start: now,
        end: now + Duration::from_secs(3600),
        class: Default::default(),
    }
}

fn book(first_id: u64) -> Book {
    let mut book = Book::new(BookConfig {
        first_id,
        ..BookConfig::default()
    });
    book.add_resource("link", Bandwidth::from_mbps(100))
        .expect("a fresh book takes a resource");
    book
}

fn now() -> Instant {
    Instant::from_nanos(1_800_000_000 * 1_000_000_000)
}

async fn write(store: &Store, rows: &[Reservation], callback: Option<&str>) {
    let records: Vec<Record<'_>> = rows
        .iter()
        .map(|r| Record {
            reservation: r,
            callback,
            binding: None,
        })
        .collect();
    store.write(&records).await.unwrap();
}

#[tokio::test]
async fn keeps_committed_and_held_reservations() {
    for db in common::backends().await {
        let kind = db.kind();
        let store = Store::open(db.url()).await.unwrap();
        assert_eq!(store.is_postgres(), kind == "postgres");
        assert_eq!(store.max_id().await.unwrap(), 0, "{kind}: fresh database");
        let mut book = book(1);
        let now = now();
        let committed = book.reserve(request("alice", now), now).unwrap();
        book.commit(committed, now).unwrap();
        let held = book.reserve(request("alice", now), now).unwrap();
        let rows: Vec<_> = [committed, held]
            .iter()
            .map(|id| book.reservation(*id).unwrap().clone())
            .collect();
        write(&store, &rows, Some("http://example.invalid/hook")).await;
        store.close().await;

        // Reopening runs the migrations again: they are recorded, not redone.
        let store = Store::open(db.url()).await.unwrap();
        let live = store.live().await.unwrap();
        assert_eq!(live.len(), 2, "{kind}");
        assert_eq!(live[0].0, rows[0], "{kind}");
        assert_eq!(live[1].0, rows[1], "{kind}");
        assert_eq!(
            live[1].1.as_deref(),
            Some("http://example.invalid/hook"),
            "{kind}"
        );
        assert_eq!(store.max_id().await.unwrap(), held.0, "{kind}");
        store.close().await;
        db.finish().await;
    }
}

#[tokio::test]
async fn updates_in_place_and_answers_the_brokers_queries() {
    for db in common::backends().await {
        let kind = db.kind();
        let store = Store::open(db.url()).await.unwrap();
        let mut book = book(1);
        let now = now();
        let a1 = book.reserve(request("alice", now), now).unwrap();
        let b1 = book.reserve(request("bob", now), now).unwrap();
        let a2 = book.reserve(request("alice", now), now).unwrap();
        let snapshot = |book: &Book, ids: &[ReservationId]| -> Vec<Reservation> {
            ids.iter()
                .map(|id| book.reservation(*id).unwrap().clone())
                .collect()
        };
        write(&store, &snapshot(&book, &[a1, b1, a2]), None).await;

        // The same rows again, changed: an upsert, not a second row.
        book.commit(a1, now).unwrap();
        book.terminate(b1, now).unwrap();
        write(&store, &snapshot(&book, &[a1, b1]), None).await;

        let live: Vec<_> = store
            .live()
            .await
            .unwrap()
            .into_iter()
            .map(|(r, _)| r.id)
            .collect();
        assert_eq!(live, [a1, a2], "{kind}: the terminated one is not live");
        assert_eq!(
            store.get(a1).await.unwrap().as_ref(),
            book.reservation(a1),
            "{kind}"
        );
        assert_eq!(
            store.get(b1).await.unwrap().as_ref(),
            book.reservation(b1),
            "{kind}: finished reservations stay readable"
        );
        assert_eq!(store.get(ReservationId(99)).await.unwrap(), None, "{kind}");
        let ids = |rows: Vec<Reservation>| rows.into_iter().map(|r| r.id).collect::<Vec<_>>();
        assert_eq!(
            ids(store.all(None, 10).await.unwrap()),
            [a1, b1, a2],
            "{kind}"
        );
        assert_eq!(ids(store.all(None, 2).await.unwrap()), [a1, b1], "{kind}");
        assert_eq!(
            ids(store.all(Some("alice"), 10).await.unwrap()),
            [a1, a2],
            "{kind}"
        );
        assert_eq!(
            ids(store.all(Some("carol"), 10).await.unwrap()),
            [],
            "{kind}"
        );
        assert_eq!(store.max_id().await.unwrap(), a2.0, "{kind}");
        store.close().await;
        db.finish().await;
    }
}
