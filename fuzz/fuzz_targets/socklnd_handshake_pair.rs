#![no_main]
//! The socklnd connection protocol (`socklnd::fuzzing::drive_handshake_pair`): arbitrary peer bytes,
//! splits and timer advances. A panic is a broken invariant of the state machine.

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    ulnet_proto::socklnd::fuzzing::drive_handshake_pair(data);
});
