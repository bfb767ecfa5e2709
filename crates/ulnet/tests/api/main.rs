//! Integration tests of the public API: one binary, one module per area.
//!
//! No timing assertions: timeouts here only turn a hang into a failure.

// Helpers outside #[test] functions unwrap too: a failure is the test failing.
#![allow(clippy::unwrap_used)]

mod batch;
mod concurrency;
mod events;
mod loopback;
mod mem;
mod misuse;
mod shutdown;

use std::time::Duration;

use ulnet::*;

/// Generous bound on any single wait; only reached if something hangs.
pub const HANG_GUARD: Duration = Duration::from_secs(60);

/// The payload sizes every transfer test covers.
pub const SIZES: [usize; 3] = [0, 4096, 1 << 20];

pub fn nid(text: &str) -> Nid {
    text.parse().expect("test NID")
}

/// Deterministic, position-dependent bytes, so a misplaced copy shows.
pub fn pattern(length: usize, seed: u8) -> Vec<u8> {
    (0..length).map(|index| (index as u8).wrapping_mul(31).wrapping_add(seed)).collect()
}

/// Node `index` on `fabric`, NID `10.0.0.<index+1>@tcp`.
pub fn fabric_node(fabric: &MemFabric, index: u8) -> Node {
    Node::builder().mem_ni(fabric_nid(index), fabric).build().expect("node on the fabric")
}

pub fn fabric_nid(index: u8) -> Nid {
    nid(&format!("10.0.0.{}@tcp", u32::from(index) + 1))
}

pub fn recv(queue: &EventQueue) -> Event {
    queue.recv_timeout(HANG_GUARD).expect("an event before the hang guard")
}

/// A receive buffer for one PUT (threshold 1, auto-unlink) of `length` bytes.
pub fn sink(length: usize) -> MdSpec {
    MdSpec::new(Memory::new(vec![0; length]))
        .options(MdOptions::OP_PUT)
        .threshold(Threshold::Count(1))
}

/// A buffer served to one GET (threshold 1, auto-unlink).
pub fn source(data: Vec<u8>) -> MdSpec {
    MdSpec::new(Memory::new(data)).options(MdOptions::OP_GET).threshold(Threshold::Count(1))
}

pub fn lo_target(node: &Node) -> ProcessId {
    ProcessId::new(Nid::LO_0, node.pid())
}
