//! CPU cost of one broker request cycle on the reservation book
//! (`reserve`): reserve, commit and terminate one reservation on a resource
//! that already holds N committed ones (N = 1,000 and 10,000), the work a
//! broker does per client request before touching its store.
//!
//! Run: `cargo bench -p braid-core --bench reserve`.
#![allow(missing_docs)]

use braid_core::reserve::{Book, BookConfig, Class, Owner, ReserveRequest};
use braid_core::{Bandwidth, Duration, Instant};
use criterion::{criterion_group, criterion_main, Criterion};

fn request(i: u64) -> ReserveRequest {
    // Spread over a day in steps of 7 s, each an hour long, 1 Mbit/s.
    let start = Instant::ZERO + Duration::from_secs((i * 7) % 86_400);
    ReserveRequest {
        owner: Owner::new(format!("user{}", i % 64), "lab"),
        resource: "link".into(),
        rate: Bandwidth::from_mbps(1),
        start,
        end: start + Duration::from_secs(3600),
        class: Class::Foreground,
    }
}

fn book_with(n: u64) -> Book {
    let mut book = Book::new(BookConfig::default());
    book.add_resource("link", Bandwidth::from_mbps(100_000))
        .expect("one resource");
    for i in 0..n {
        let id = book
            .reserve(request(i), Instant::ZERO)
            .expect("capacity for all");
        book.commit(id, Instant::ZERO).expect("held");
    }
    book
}

fn cycle(c: &mut Criterion) {
    for n in [1_000u64, 10_000] {
        let mut book = book_with(n);
        let mut i = n;
        c.bench_function(&format!("reserve_commit_terminate_{n}_live"), |b| {
            b.iter(|| {
                i += 1;
                let id = book.reserve(request(i), Instant::ZERO).expect("capacity");
                book.commit(id, Instant::ZERO).expect("held");
                book.terminate(id, Instant::ZERO).expect("committed");
            })
        });
    }
}

criterion_group!(benches, cycle);
criterion_main!(benches);
