//! The TCP LND over real sockets on 127.0.0.x (Linux routes all of 127/8 to `lo`): nodes
//! talking to each other, a scripted kernel peer checking every byte, bad input against a live
//! node, and NIs of several nets sharing one listener.
//!
//! Every node of a test shares one port (socklnd dials the peer's `accept_port`, which is ours
//! too), taken from [`free_port`]; tests run in parallel on distinct ports. Nothing here needs
//! root: nodes accept `accept=all`, and what depends on privileged ports adapts to whether the
//! process may bind them. No timing assertions: timeouts only turn a hang into a failure.

// Helpers outside #[test] functions unwrap too: a failure is the test failing.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

mod admission;
mod bad_input;
mod batching;
mod capture;
mod kernel_peer;
mod partitions;
mod script;
mod shared_listener;
#[path = "../support/mod.rs"]
mod support;
mod transfer;
mod unlocked_io;

use std::net::{Ipv4Addr, SocketAddrV4, TcpListener};
use std::sync::atomic::{AtomicU16, Ordering};
use std::time::{Duration, Instant};

pub use support::*;
use ulnet::*;

/// The loopback addresses tests put nodes and peers on.
pub const ADDRESSES: [Ipv4Addr; 6] = [
    Ipv4Addr::new(127, 0, 0, 2),
    Ipv4Addr::new(127, 0, 0, 3),
    Ipv4Addr::new(127, 0, 0, 4),
    Ipv4Addr::new(127, 0, 0, 5),
    Ipv4Addr::new(127, 0, 0, 6),
    Ipv4Addr::new(127, 0, 0, 7),
];

/// A port free on every test address, from a range below the kernel's ephemeral ports (so
/// outgoing connections never take it meanwhile), different for each call in the process.
pub fn free_port() -> u16 {
    static NEXT: AtomicU16 = AtomicU16::new(0);
    let base = 20_000 + (std::process::id() % 500) as u16 * 16;
    loop {
        let port = base + NEXT.fetch_add(1, Ordering::Relaxed) % 8000;
        let free =
            ADDRESSES.iter().all(|ip| TcpListener::bind(SocketAddrV4::new(*ip, port)).is_ok());
        if free {
            return port;
        }
    }
}

/// The NID of test address `index` on `tcp`.
pub fn tcp_nid(index: usize) -> Nid {
    Nid::ipv4(Net::TCP, ADDRESSES[index])
}

/// socklnd tunables for tests: `port`, accept anyone (tests run without privileged ports).
pub fn tunables(port: u16) -> SocklndTunables {
    SocklndTunables { accept_port: port, accept: AcceptPolicy::All, ..SocklndTunables::default() }
}

/// A node with one TCP NI on test address `index`.
pub fn tcp_node(index: usize, port: u16) -> Node {
    tcp_node_with(index, tunables(port))
}

pub fn tcp_node_with(index: usize, tunables: SocklndTunables) -> Node {
    Node::builder().tcp_ni(tcp_nid(index), tunables).build().expect("TCP node")
}

/// Waits until `condition` holds, or fails after the hang guard.
pub fn wait_until(what: &str, mut condition: impl FnMut() -> bool) {
    let start = Instant::now();
    while !condition() {
        assert!(start.elapsed() < HANG_GUARD, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// PUT `data` from `from` to `to` (portal 10, `bits`) and check it arrives.
pub fn put_and_check(from: &Node, to: &Node, bits: u64, data: &[u8]) {
    let inbox = to.event_queue(4);
    to.post(10, bits, sink(data.len()), &inbox).unwrap();
    let done = from
        .put_and_wait_ack(to.process_id(), 10, bits, Memory::new(data.to_vec()), HANG_GUARD)
        .unwrap();
    assert_eq!(done.event.mlength as usize, data.len());
    let put = recv(&inbox);
    assert_eq!(put.kind, EventKind::Put);
    assert_eq!(put.memory.unwrap().to_vec(), data);
}

/// Portal 12 on `node`: takes any number of 8-byte PUTs from anyone, each an event in `inbox`.
pub fn open_portal_12(node: &Node, inbox: &EventQueue) {
    let me = node
        .me_attach(12, ProcessId::ANY, 0, u64::MAX, UnlinkMode::Retain, InsertPosition::After)
        .unwrap();
    let spec = MdSpec::new(Memory::new(vec![0; 8]))
        .options(MdOptions::OP_PUT | MdOptions::MANAGE_REMOTE)
        .threshold(Threshold::Infinite);
    node.md_attach(me, spec, UnlinkMode::Retain, Some(inbox)).unwrap();
}

/// A PUT of `md` to portal 12 of `target`, without ACK, numbered by `hdr_data`.
pub fn put_to_portal_12(target: &Node, md: MdHandle, hdr_data: u64) -> PutRequest {
    PutRequest {
        md,
        ack: false,
        target: target.process_id(),
        portal: 12,
        match_bits: 0,
        remote_offset: 0,
        hdr_data,
        source: None,
    }
}
