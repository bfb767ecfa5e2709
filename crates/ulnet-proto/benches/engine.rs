//! Core CPU cost per message: two nodes through the deterministic harness on an ideal fabric
//! (zero latency, infinite bandwidth), 0-byte payloads, invariant checks off. Each iteration is
//! one complete operation (API call to final event); divide by the messages it carries.
//!
//! The multi-rail group runs the same PUT with 1, 2 and 4 rails (each its own net, all
//! discovered first), with and without fast failover: the difference between the 4-rail and
//! the 1-rail figures is what path selection over four rails adds per message.
//!
//! Run: `cargo bench -p ulnet-proto --bench engine`

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)] // Test, bench and example code outside #[test] functions.

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use ulnet_proto::engine::testing::{Harness, HarnessConfig};
use ulnet_proto::engine::{
    GetRequest, HealthStatus, InsertPosition, MdOptions, MdSpec, Memory, ProcessId, PutRequest,
    Tunables, UnlinkMode,
};
use ulnet_proto::link_model::LinkConfig;

const PORTAL: u32 = 4;

fn harness_with(rails: usize, tunables: Tunables) -> (Harness, ulnet_proto::engine::MdHandle) {
    let config = HarnessConfig {
        link: LinkConfig::IDEAL,
        check_invariants: false,
        keep_events: false,
        rails,
        tunables,
        ..HarnessConfig::default()
    };
    let mut h = Harness::new(config);
    h.discover_all();
    let me = h
        .me_attach(1, PORTAL, ProcessId::ANY, 0, 0, UnlinkMode::Retain, InsertPosition::After)
        .expect("me");
    let target = MdSpec::new(Memory::empty()).options(MdOptions::OP_PUT | MdOptions::OP_GET);
    h.md_attach(1, me, target, UnlinkMode::Retain).expect("target md");
    let md = h.md_bind(0, MdSpec::new(Memory::empty()), UnlinkMode::Retain).expect("bound md");
    (h, md)
}

fn harness() -> (Harness, ulnet_proto::engine::MdHandle) {
    harness_with(1, Tunables::default())
}

fn put_request(h: &Harness, md: ulnet_proto::engine::MdHandle, ack: bool) -> PutRequest {
    PutRequest {
        md,
        ack,
        target: h.process(1),
        portal: PORTAL,
        match_bits: 0,
        remote_offset: 0,
        hdr_data: 0,
        source: None,
    }
}

fn put(c: &mut Criterion, name: &str, ack: bool) {
    let (mut h, md) = harness();
    let request = put_request(&h, md, ack);
    let mut group = c.benchmark_group("engine");
    group.throughput(Throughput::Elements(1));
    group.bench_function(name, |b| {
        b.iter(|| {
            h.put(0, black_box(&request)).expect("put");
            h.drive();
        })
    });
    group.finish();
}

fn get(c: &mut Criterion) {
    let (mut h, md) = harness();
    let request = GetRequest {
        md,
        target: h.process(1),
        portal: PORTAL,
        match_bits: 0,
        remote_offset: 0,
        source: None,
    };
    let mut group = c.benchmark_group("engine");
    group.throughput(Throughput::Elements(1));
    group.bench_function("get_reply_0b (2 messages)", |b| {
        b.iter(|| {
            h.get(0, black_box(&request)).expect("get");
            h.drive();
        })
    });
    group.finish();
}

/// PUT without ACK (one message) over `rails` rails, and a PUT with ACK: the whole engine
/// path, selection included, on both nodes.
fn multi_rail(c: &mut Criterion) {
    let mut group = c.benchmark_group("multi-rail");
    group.throughput(Throughput::Elements(1));
    for (failover, label) in [(true, "fast failover"), (false, "kernel-exact")] {
        let tunables = Tunables {
            blackhole_timeout: if failover { Duration::from_secs(2) } else { Duration::ZERO },
            ..Tunables::default()
        };
        for rails in [1usize, 2, 4] {
            let (mut h, md) = harness_with(rails, tunables);
            let request = put_request(&h, md, false);
            group.bench_function(format!("put_0b, {rails} rails, {label}"), |b| {
                b.iter(|| {
                    h.put(0, black_box(&request)).expect("put");
                    h.drive();
                })
            });
        }
        // With an ACK: response tracking, and with fast failover the saved request and the
        // target's duplicate log.
        let (mut h, md) = harness_with(1, tunables);
        let request = put_request(&h, md, true);
        group.bench_function(format!("put_ack_0b, 1 rail, {label}"), |b| {
            b.iter(|| {
                h.put(0, black_box(&request)).expect("put");
                h.drive();
            })
        });
    }
    group.finish();
}

/// The initiator's side alone, without the harness: `put`, `poll_transmit`,
/// `handle_send_done`, the SEND event; the peer (discovered first) has `rails` NIs. What the
/// 4-rail figure adds to the 1-rail one is path selection over four rails.
fn initiator(c: &mut Criterion) {
    let mut group = c.benchmark_group("initiator");
    group.throughput(Throughput::Elements(1));
    for (failover, label) in [(true, "fast failover"), (false, "kernel-exact")] {
        let tunables = Tunables {
            blackhole_timeout: if failover { Duration::from_secs(2) } else { Duration::ZERO },
            ..Tunables::default()
        };
        for rails in [1usize, 4] {
            let (mut h, md) = harness_with(rails, tunables);
            let request = put_request(&h, md, false);
            let now = h.now();
            let node = h.node_mut(0);
            group.bench_function(format!("put_0b, {rails} rails, {label}"), |b| {
                b.iter(|| {
                    node.put(now, black_box(&request)).expect("put");
                    let transmit = node.poll_transmit().expect("a transmit");
                    node.handle_send_done(now, transmit.tx, HealthStatus::Ok).expect("done");
                    black_box(node.poll_event());
                })
            });
        }
    }
    group.finish();
}

fn benches(c: &mut Criterion) {
    put(c, "put_0b (1 message)", false);
    put(c, "put_ack_0b (2 messages)", true);
    get(c);
    multi_rail(c);
    initiator(c);
}

criterion_group!(engine, benches);
criterion_main!(engine);
