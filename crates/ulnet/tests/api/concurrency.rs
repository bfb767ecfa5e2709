//! Many messages from several threads at once.

use std::thread;

use ulnet::*;

use crate::*;

const THREADS: u64 = 4;
const PER_THREAD: u64 = 200;

/// A target MD that accepts any number of PUTs (each lands at offset 0).
fn open_sink(node: &Node, portal: u32, queue: &EventQueue) -> MdHandle {
    let spec = MdSpec::new(Memory::new(vec![0; 64]))
        .options(MdOptions::OP_PUT | MdOptions::MANAGE_REMOTE | MdOptions::TRUNCATE);
    let me = node
        .me_attach(portal, ProcessId::ANY, 0, u64::MAX, UnlinkMode::Retain, InsertPosition::After)
        .unwrap();
    node.md_attach(me, spec, UnlinkMode::Retain, Some(queue)).unwrap()
}

#[test]
fn loopback_from_several_threads() {
    let node = Node::loopback().unwrap();
    let inbox = node.event_queue(4096);
    open_sink(&node, 40, &inbox);
    let workers: Vec<_> = (0..THREADS)
        .map(|worker| {
            let node = node.clone();
            thread::spawn(move || {
                for round in 0..PER_THREAD {
                    let bits = worker << 32 | round;
                    let done = node
                        .put_and_wait_ack(
                            lo_target(&node),
                            40,
                            bits,
                            Memory::new(vec![1; 16]),
                            HANG_GUARD,
                        )
                        .unwrap();
                    assert_eq!(done.event.match_bits, bits);
                }
            })
        })
        .collect();
    for worker in workers {
        worker.join().unwrap();
    }
    let mut seen = std::collections::HashSet::new();
    while let Ok(event) = inbox.try_recv() {
        assert_eq!(event.kind, EventKind::Put);
        assert!(seen.insert(event.match_bits), "one PUT event per message");
    }
    assert_eq!(seen.len() as u64, THREADS * PER_THREAD);
    assert_eq!(node.stats().messages, 0);
}

#[test]
fn mem_fabric_from_several_threads_and_nodes() {
    let fabric = MemFabric::new(LinkConfig::IDEAL);
    let nodes: Vec<Node> = (0..3).map(|index| fabric_node(&fabric, index)).collect();
    let hub = nodes[1].clone();
    let inbox = hub.event_queue(4096);
    open_sink(&hub, 41, &inbox);
    let served = hub.event_queue(4096);
    let spec = MdSpec::new(Memory::new(pattern(64, 1)))
        .options(MdOptions::OP_GET | MdOptions::MANAGE_REMOTE | MdOptions::TRUNCATE);
    let me = hub
        .me_attach(42, ProcessId::ANY, 0, u64::MAX, UnlinkMode::Retain, InsertPosition::After)
        .unwrap();
    hub.md_attach(me, spec, UnlinkMode::Retain, Some(&served)).unwrap();

    let workers: Vec<_> = (0..THREADS)
        .map(|worker| {
            // Two threads each on the two outer nodes.
            let node = nodes[if worker % 2 == 0 { 0 } else { 2 }].clone();
            let target = hub.process_id();
            thread::spawn(move || {
                for round in 0..PER_THREAD / 2 {
                    let bits = worker << 32 | round;
                    node.put_and_wait_ack(target, 41, bits, Memory::new(vec![2; 64]), HANG_GUARD)
                        .unwrap();
                    let data = node.get_into(target, 42, bits, vec![0; 64], HANG_GUARD).unwrap();
                    assert_eq!(data, pattern(64, 1));
                }
            })
        })
        .collect();
    for worker in workers {
        worker.join().unwrap();
    }
    let puts = std::iter::from_fn(|| inbox.try_recv().ok()).count() as u64;
    let gets = std::iter::from_fn(|| served.try_recv().ok()).count() as u64;
    assert_eq!((puts, gets), (THREADS * PER_THREAD / 2, THREADS * PER_THREAD / 2));
    for node in &nodes {
        assert_eq!(node.stats().messages, 0);
    }
    let stats = fabric.stats();
    assert_eq!(stats.frames_sent, stats.frames_delivered);
}
