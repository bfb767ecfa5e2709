//! Two nodes of one process over the TCP LND on loopback (127.0.0.2 and 127.0.0.3): a 0-byte
//! PUT+ACK round trip, the 0-byte PUT rate with 64 in flight, and 1 MiB PUT throughput with 8 in
//! flight (the bulk target; `scripts/bench-tcp.sh` sets it next to iperf3 across two
//! processes).
//!
//! Run: `cargo bench -p ulnet --bench tcp`

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)] // Test, bench and example code outside #[test] functions.

use std::net::TcpListener;
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use ulnet::*;

#[path = "../tests/support/requests.rs"]
mod requests;
use requests::acked_put;

const PORTAL: u32 = 4;
const TIMEOUT: Duration = Duration::from_secs(30);

/// A port free on both addresses, outside the ephemeral range.
fn free_port() -> u16 {
    (21_000..30_000)
        .find(|port| {
            ["127.0.0.2", "127.0.0.3"].iter().all(|ip| TcpListener::bind((*ip, *port)).is_ok())
        })
        .expect("a free port")
}

fn pair() -> (Node, Node) {
    let port = free_port();
    let build = |ip: &str| {
        let tunables =
            SocklndTunables { accept_port: port, accept: AcceptPolicy::All, ..Default::default() };
        Node::builder().tcp_ni(ip.parse().expect("nid"), tunables).build().expect("node")
    };
    let (a, b) = (build("127.0.0.2@tcp"), build("127.0.0.3@tcp"));
    // A target taking any number of PUTs into one 1 MiB buffer, without events.
    let me = b
        .me_attach(PORTAL, ProcessId::ANY, 0, u64::MAX, UnlinkMode::Retain, InsertPosition::After)
        .expect("me");
    let sink = MdSpec::new(Memory::new(vec![0; 1 << 20]))
        .options(MdOptions::OP_PUT | MdOptions::MANAGE_REMOTE | MdOptions::TRUNCATE)
        .threshold(Threshold::Infinite);
    b.md_attach(me, sink, UnlinkMode::Retain, None).expect("sink");
    (a, b)
}

/// Sends `count` PUTs of the bound MD with at most `window` awaiting their ACK.
fn windowed_puts(node: &Node, request: &PutRequest, queue: &EventQueue, count: u64, window: u64) {
    let (mut sent, mut acked) = (0u64, 0u64);
    while acked < count {
        while sent < count && sent - acked < window {
            node.put(request).expect("put");
            sent += 1;
        }
        let event = queue.recv_timeout(TIMEOUT).expect("event");
        assert_eq!(event.status, EventStatus::Ok);
        if event.kind == EventKind::Ack {
            acked += 1;
        }
    }
}

fn tcp(c: &mut Criterion) {
    let (a, b) = pair();
    let target = b.process_id();
    let mut group = c.benchmark_group("tcp");

    // Round trip, helper form (a private MD and queue per call).
    a.put_and_wait_ack(target, PORTAL, 0, Memory::empty(), TIMEOUT).expect("warm-up");
    group.throughput(Throughput::Elements(1));
    group.bench_function("put_ack_0B/round_trip", |bencher| {
        bencher
            .iter(|| a.put_and_wait_ack(target, PORTAL, 0, Memory::empty(), TIMEOUT).expect("put"))
    });

    for (label, size, window, count) in
        [("put_0B/64_in_flight", 0usize, 64u64, 1000u64), ("put_1MiB/8_in_flight", 1 << 20, 8, 64)]
    {
        let queue = a.event_queue(4 * window as usize);
        let source = MdSpec::new(Memory::new(vec![0xa5; size])).threshold(Threshold::Infinite);
        let md = a.md_bind(source, UnlinkMode::Retain, Some(&queue)).expect("bind");
        let request = acked_put(md, target, PORTAL);
        group.throughput(if size == 0 {
            Throughput::Elements(count)
        } else {
            Throughput::Bytes(count * size as u64)
        });
        group.bench_function(label, |bencher| {
            bencher.iter(|| windowed_puts(&a, &request, &queue, count, window))
        });
        a.md_unlink(md).expect("unlink");
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20).measurement_time(Duration::from_secs(5));
    targets = tcp
}
criterion_main!(benches);
