//! Arbitrary datagrams into an established connection's
//! `handle_datagram`, with timers and transmits in between. See
//! `braid_core::transport::fuzzing::connection_datagrams`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    braid_core::transport::fuzzing::connection_datagrams(data);
});
