//! Arbitrary datagrams, sealed or not, into an established keyed
//! connection (packet protection), with timers and transmits in between.
//! See `braid_core::transport::fuzzing::keyed_datagrams`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    braid_core::transport::fuzzing::keyed_datagrams(data);
});
