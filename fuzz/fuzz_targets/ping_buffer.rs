#![no_main]
//! Ping buffer: parse is total and bounded; a parsed buffer re-emits and re-parses to the same
//! `PingInfo`, modulo the documented normalizations: `pi_features` gains LARGE_ADDR / METADATA
//! when such entries exist (`wire_features`), and skipped or padded entries are gone, so only the
//! info is compared, not the byte count.

use libfuzzer_sys::fuzz_target;
use ulnet_proto::wire::ping::{LNET_INTERFACES_MAX, PingInfo};

fuzz_target!(|data: &[u8]| {
    let Ok((info, used)) = PingInfo::parse(data) else {
        return;
    };
    assert!(used <= data.len());
    assert!(info.nids.len() < LNET_INTERFACES_MAX as usize);
    assert!(info.metadata.len() <= LNET_INTERFACES_MAX as usize);

    let bytes = match info.to_bytes() {
        Ok(bytes) => bytes,
        Err(error) => panic!("parsed {info:?} does not re-emit: {error:?}"),
    };
    assert_eq!(bytes.len(), info.buffer_len());
    let expected = PingInfo { features: info.wire_features(), ..info.clone() };
    assert_eq!(PingInfo::parse(&bytes), Ok((expected, bytes.len())));
});
