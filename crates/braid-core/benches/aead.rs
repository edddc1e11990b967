//! Per-byte cost of the record and packet ciphers ([`transport::suite`])
//! on 256 KiB (a pipe record) and 1380-byte (an IQ-RUDP packet) buffers:
//! sealing in place, and the tag alone over clear bytes (`--no-encrypt`),
//! for both Noise ciphers; BLAKE3 and XXH3-128 over the same bytes beside
//! them (the pipe's block checks: BLAKE3 where the check authenticates or
//! nothing does, XXH3-128 under encryption — `braid::pipe::digest`).
//! What chose AES-256-GCM for the encrypted pipe and kept
//! ChaCha20-Poly1305 for `--no-encrypt` (docs/BENCHMARKS.md).
//!
//! Run: `cargo bench -p braid-core --bench aead`.
//!
//! [`transport::suite`]: braid_core::transport::suite
#![allow(missing_docs)]

use aws_lc_rs::aead::Aad;
use braid_core::transport::suite::Suite;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use std::hint::black_box;

fn ciphers(c: &mut Criterion) {
    for size in [256 << 10, 1380] {
        let mut g = c.benchmark_group(format!("aead/{size}B"));
        g.throughput(Throughput::Bytes(size as u64));
        let mut buf = vec![7u8; size];
        for (name, suite) in [
            ("chacha20-poly1305", Suite::ChaChaPoly),
            ("aes-256-gcm", Suite::AesGcm),
        ] {
            let key = suite.key(&[9; 32]).unwrap();
            let mut n = 0u64;
            g.bench_function(format!("{name}/seal"), |b| {
                b.iter(|| {
                    n += 1;
                    let tag = key.seal_in_place_separate_tag(
                        suite.nonce(n),
                        Aad::from(&[0u8; 4]),
                        &mut buf,
                    );
                    let _ = black_box(tag.unwrap());
                })
            });
            g.bench_function(format!("{name}/tag-only"), |b| {
                b.iter(|| {
                    n += 1;
                    let tag = key.seal_in_place_separate_tag(
                        suite.nonce(n),
                        Aad::from(&buf[..]),
                        &mut [],
                    );
                    let _ = black_box(tag.unwrap());
                })
            });
        }
        g.bench_function("blake3", |b| {
            b.iter(|| black_box(blake3::hash(black_box(&buf))))
        });
        g.bench_function("xxh3-128", |b| {
            b.iter(|| black_box(twox_hash::XxHash3_128::oneshot(black_box(&buf))))
        });
        g.finish();
    }
}

criterion_group!(benches, ciphers);
criterion_main!(benches);
