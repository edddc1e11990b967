//! Arbitrary bytes through braid_core::session::fuzzing::sink_messages (must never
//! panic). The corpus in fuzz/corpus/session_sink is replayed by braid-core's tests.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    braid_core::session::fuzzing::sink_messages(data);
});
