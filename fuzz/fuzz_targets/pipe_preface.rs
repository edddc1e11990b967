//! Arbitrary bytes as the secure pipe's preface and as a one-time code.
//! See `braid::pipe::fuzzing::preface_and_code`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    braid::pipe::fuzzing::preface_and_code(data);
});
