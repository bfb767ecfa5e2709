//! Integration tests of the public API: one binary, one module per area.
//!
//! No timing assertions: timeouts here only turn a hang into a failure.

// Helpers outside #[test] functions unwrap too: a failure is the test failing.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

mod batch;
mod concurrency;
mod events;
mod loopback;
mod mem;
mod misuse;
#[path = "../support/requests.rs"]
mod requests;
mod shutdown;
#[path = "../support/mod.rs"]
mod support;

pub use requests::acked_put;
pub use support::*;
use ulnet::*;

/// Node `index` on `fabric`, NID `10.0.0.<index+1>@tcp`.
pub fn fabric_node(fabric: &MemFabric, index: u8) -> Node {
    Node::builder().mem_ni(fabric_nid(index), fabric).build().expect("node on the fabric")
}

pub fn fabric_nid(index: u8) -> Nid {
    nid(&format!("10.0.0.{}@tcp", u32::from(index) + 1))
}

pub fn lo_target(node: &Node) -> ProcessId {
    ProcessId::new(Nid::LO_0, node.pid())
}

/// A PUT of `data` from `node` to `target`'s `portal` (match bits 0), an ACK wanted, from an MD
/// bound for the SEND and the ACK with its events in `queue`.
pub fn put_with_ack(
    node: &Node,
    target: ProcessId,
    portal: u32,
    data: Vec<u8>,
    queue: &EventQueue,
) -> MdHandle {
    let spec = MdSpec::new(Memory::new(data)).threshold(Threshold::Count(2));
    let md = node.md_bind(spec, UnlinkMode::Unlink, Some(queue)).unwrap();
    node.put(&acked_put(md, target, portal)).unwrap();
    md
}
