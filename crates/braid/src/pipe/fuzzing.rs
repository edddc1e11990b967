//! Entry points of the pipe's fuzz targets (`fuzz/fuzz_targets/pipe_*.rs`);
//! the tests below replay `fuzz/corpus/pipe_*` through them, so CI runs
//! them without nightly. Every decoder of the secure pipe is here: the
//! preface, the one-time code, the records (`record::fuzzing`).

#[doc(inline)]
pub use super::record::fuzzing::open_records;

/// Decodes `data` as a [`Preface`](super::secure::Preface) (its first 16
/// bytes) and as a one-time code (all of it, if UTF-8); nothing may panic.
pub fn preface_and_code(data: &[u8]) {
    if let Some(b) = data.first_chunk::<{ super::secure::PREFACE_LEN }>() {
        if let Ok(p) = super::secure::Preface::decode(b) {
            assert_eq!(p.encode(), *b, "a decoded preface re-encodes to itself");
        }
    }
    if let Ok(s) = std::str::from_utf8(data) {
        if let Ok(c) = s.parse::<super::Code>() {
            assert!(c.to_string().parse::<super::Code>().is_ok());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn corpus(target: &str) -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../fuzz/corpus")
            .join(target)
    }

    /// Replays every file in `fuzz/corpus/pipe_*` through the entry points.
    #[test]
    fn replays_the_pipe_fuzz_corpus() {
        let mut n = 0;
        for (target, f) in [
            ("pipe_preface", preface_and_code as fn(&[u8])),
            ("pipe_records", open_records as fn(&[u8])),
        ] {
            let dir = std::fs::read_dir(corpus(target)).expect("corpus dir");
            for e in dir {
                let bytes = std::fs::read(e.expect("entry").path()).expect("read");
                f(&bytes);
                n += 1;
            }
        }
        assert!(n >= 4, "pipe corpus missing");
    }

    /// Every one-byte change and every cut of the record seeds (the read
    /// size, the payload unit, lengths, ciphertext, tags) runs through the
    /// opener without a panic: a cheap stand-in for the fuzzer in CI.
    #[test]
    fn mutated_record_seeds_never_panic() {
        let dir = std::fs::read_dir(corpus("pipe_records")).expect("corpus dir");
        for e in dir {
            let seed = std::fs::read(e.expect("entry").path()).expect("read");
            for i in 0..seed.len() {
                for x in [1u8, 0x80, 0xff] {
                    let mut m = seed.clone();
                    m[i] ^= x;
                    open_records(&m);
                }
                open_records(&seed[..i]);
            }
        }
    }

    /// Writes the seed corpus (run once by hand:
    /// `cargo test -p braid write_pipe_seed_corpus -- --ignored`).
    #[test]
    #[ignore]
    fn write_pipe_seed_corpus() {
        use crate::pipe::record::{fuzzing::seal_records, RecordKeys};
        use crate::pipe::secure::{Kind, Preface};
        let d = corpus("pipe_preface");
        std::fs::create_dir_all(&d).expect("dir");
        let p = Preface {
            kind: Kind::Noise,
            encrypt: true,
        };
        std::fs::write(d.join("noise"), p.encode()).expect("write");
        let p = Preface {
            kind: Kind::Pake,
            encrypt: false,
        };
        std::fs::write(d.join("pake-no-encrypt"), p.encode()).expect("write");
        std::fs::write(d.join("code"), b"7-orbit-lantern").expect("write");
        std::fs::write(d.join("insecure-hello"), b"BRDPIPE\0\0\x01").expect("write");
        let d = corpus("pipe_records");
        std::fs::create_dir_all(&d).expect("dir");
        // The second byte: even reads through AsyncRead, odd reads block
        // payloads of that unit (see `open_records`).
        for first in [0u8, 1, 8, 255] {
            let k = RecordKeys::new([first; 32], first & 1 == 0);
            let wire = seal_records(&k, &[b"hello", &[7u8; 300]]);
            std::fs::write(
                d.join(format!("two-records-{first}")),
                [&[first, 0], &wire[..]].concat(),
            )
            .expect("write");
        }
        for (name, first, unit, records) in [
            // Payloads of 5, 16 and 17 bytes, a record each: all opened
            // in place.
            ("payloads-in-place", 8u8, 5u8, vec![5usize, 16, 17]),
            // A 100-byte payload in two records, opened in place.
            ("payload-two-records", 8, 33, vec![33, 50, 50]),
            // Records reaching past their payloads: read through.
            ("payload-straddling", 8, 5, vec![11, 30]),
            // Authenticate-only: never in place.
            ("payloads-no-encrypt", 9, 5, vec![5, 16]),
            // A record whose length alone is past the limit.
            ("payload-huge-length", 8, 1, vec![]),
        ] {
            let k = RecordKeys::new([first; 32], first & 1 == 0);
            let bodies: Vec<Vec<u8>> = records.iter().map(|&n| vec![n as u8; n]).collect();
            let refs: Vec<&[u8]> = bodies.iter().map(Vec::as_slice).collect();
            let mut wire = seal_records(&k, &refs);
            if records.is_empty() {
                wire = vec![0xff; 4];
            }
            std::fs::write(d.join(name), [&[first, unit], &wire[..]].concat()).expect("write");
        }
        std::fs::write(d.join("huge-length"), [0u8, 0, 0xff, 0xff, 0xff, 0xff]).expect("write");
    }
}
