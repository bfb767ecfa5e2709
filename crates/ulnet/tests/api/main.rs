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
#[path = "../support/mod.rs"]
mod support;

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
