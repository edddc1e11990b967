//! Arbitrary bytes as a secure pipe connection's record stream.
//! See `braid::pipe::fuzzing::open_records`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    braid::pipe::fuzzing::open_records(data);
});
