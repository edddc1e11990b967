//! Arbitrary Noise messages in the authenticated handshake, after a
//! genuine cookie exchange. See
//! `braid_core::transport::fuzzing::auth_messages`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    braid_core::transport::fuzzing::auth_messages(data);
});
