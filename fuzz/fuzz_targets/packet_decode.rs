//! Arbitrary bytes through the packet decoder; decoded frames must
//! round-trip. See `braid_core::transport::fuzzing::decode_packet`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    braid_core::transport::fuzzing::decode_packet(data);
});
