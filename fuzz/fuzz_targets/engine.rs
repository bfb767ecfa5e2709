#![no_main]
//! The LNet engine driven by arbitrary sequences of API calls, fabric events and timer advances
//! (`engine::testing::drive_arbitrary`). A panic here is a broken invariant: a credit leaked, a
//! message finalized twice or never, an event after the unlink event, unbounded growth.

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    ulnet_proto::engine::testing::drive_arbitrary(data);
});
