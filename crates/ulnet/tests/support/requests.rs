//! The request the `api` tests, the benchmarks and `examples/tcp_perf.rs` build; each includes
//! this file by path.

use ulnet::{MdHandle, ProcessId, PutRequest};

/// A PUT of all of `md` to `target`'s `portal`, match bits 0, an ACK wanted.
pub fn acked_put(md: MdHandle, target: ProcessId, portal: u32) -> PutRequest {
    PutRequest {
        md,
        ack: true,
        target,
        portal,
        match_bits: 0,
        remote_offset: 0,
        hdr_data: 0,
        source: None,
    }
}
