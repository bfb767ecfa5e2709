//! Public-API round trips, blocking form: a 0-byte PUT with ACK, from the call to the ACK in
//! the caller's hands, on loopback and between two nodes over the in-process fabric.
//!
//! Loopback completes on the caller's thread. The fabric round trip crosses three threads (the
//! caller, the target's I/O thread, the initiator's I/O thread); the variants differ in how long
//! a waiting thread spins before it parks (`NodeBuilder::spin`). With more runnable threads than
//! CPUs, a spinning thread holds the CPU the next hop needs, so longer spins cost more there.
//!
//! Run: `cargo bench -p ulnet --bench api`

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)] // Test, bench and example code outside #[test] functions.

use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use ulnet::*;

#[path = "../tests/support/requests.rs"]
mod requests;
use requests::acked_put;

const PORTAL: u32 = 4;
const TIMEOUT: Duration = Duration::from_secs(30);

/// A target that takes any number of 0-byte PUTs (and GETs), without events.
fn open_target(node: &Node) {
    let me = node
        .me_attach(PORTAL, ProcessId::ANY, 0, u64::MAX, UnlinkMode::Retain, InsertPosition::After)
        .expect("me");
    let spec = MdSpec::new(Memory::empty()).options(MdOptions::OP_PUT | MdOptions::OP_GET);
    node.md_attach(me, spec, UnlinkMode::Retain, None).expect("target md");
}

/// PUT+ACK with the primitives: one bound MD (threshold 2) per operation, one long-lived
/// event queue, wait for the event that unlinks the MD.
fn put_ack_primitives(node: &Node, target: ProcessId, queue: &EventQueue) {
    let spec = MdSpec::new(Memory::empty()).threshold(Threshold::Count(2));
    let md = node.md_bind(spec, UnlinkMode::Unlink, Some(queue)).expect("bind");
    let request = acked_put(md, target, PORTAL);
    node.put(&request).expect("put");
    while !queue.recv_timeout(TIMEOUT).expect("event").unlinked {}
}

fn loopback(c: &mut Criterion) {
    let node = Node::loopback().expect("node");
    open_target(&node);
    let target = ProcessId::new(Nid::LO_0, node.pid());
    let queue = node.event_queue(16);
    let mut group = c.benchmark_group("loopback");
    group.throughput(Throughput::Elements(1));
    group.bench_function("put_ack_0B/helper", |b| {
        b.iter(|| node.put_and_wait_ack(target, PORTAL, 0, Memory::empty(), TIMEOUT).expect("put"))
    });
    group.bench_function("put_ack_0B/primitives", |b| {
        b.iter(|| put_ack_primitives(&node, target, &queue))
    });
    group.finish();
}

fn fabric_pair(spin: Duration) -> (MemFabric, Node, Node) {
    let fabric = MemFabric::new(LinkConfig::IDEAL);
    let nid = |text: &str| text.parse::<Nid>().expect("nid");
    let build = |address: &str| {
        Node::builder().mem_ni(nid(address), &fabric).spin(spin).build().expect("node")
    };
    let (a, b) = (build("10.0.0.1@tcp"), build("10.0.0.2@tcp"));
    open_target(&b);
    (fabric, a, b)
}

fn mem(c: &mut Criterion) {
    let mut group = c.benchmark_group("mem");
    group.throughput(Throughput::Elements(1));
    for (label, spin) in [
        ("spin0", Duration::ZERO),
        ("spin2us", Duration::from_micros(2)),
        ("spin20us", Duration::from_micros(20)),
    ] {
        let (_fabric, a, b) = fabric_pair(spin);
        let target = b.process_id();
        let queue = a.event_queue(16);
        group.bench_function(format!("put_ack_0B/helper/{label}"), |bencher| {
            bencher.iter(|| {
                a.put_and_wait_ack(target, PORTAL, 0, Memory::empty(), TIMEOUT).expect("put")
            })
        });
        group.bench_function(format!("put_ack_0B/primitives/{label}"), |bencher| {
            bencher.iter(|| put_ack_primitives(&a, target, &queue))
        });
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(30).measurement_time(Duration::from_secs(3));
    targets = loopback, mem
}
criterion_main!(benches);
