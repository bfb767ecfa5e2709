//! Nodes with two CPU partitions: every connection runs on the I/O thread of the partition its
//! peer's NID hashes to (the kernel's `lnet_cpt_of_nid()`), and traffic spread over both
//! partitions' threads arrives whole, exactly once.

use std::sync::{Arc, Mutex};

use ulnet::proto::engine::cpt::Partitions;
use ulnet::*;

use crate::*;

fn two_partitions() -> Partitions {
    Partitions::new(2).unwrap()
}

/// A node with two partitions and one TCP NI on test address `index`; its I/O threads are
/// pinned to CPU 0 and CPU 1 where the process may run there (else left unpinned).
fn partitioned_node(index: usize, port: u16) -> Node {
    Node::builder()
        .partitions(two_partitions())
        .partition_cpus(vec![vec![0], vec![1]])
        .tcp_ni(tcp_nid(index), tunables(port))
        .build()
        .expect("TCP node")
}

/// The partition the connections between a node and test address `index` run on.
fn cpt_of(index: usize) -> usize {
    two_partitions().cpt_of_nid(&tcp_nid(index), None) as usize
}

/// Waits until every live connection of `node` has its task running, then returns the tasks
/// by partition.
fn settled(node: &Node) -> Vec<u64> {
    wait_until("connection tasks", || {
        node.connections_by_partition().iter().sum::<u64>() == node.tcp_stats().conns_live()
    });
    node.connections_by_partition()
}

/// Only `cpt` has connections, and it has `live`.
fn only_on(cpt: usize, live: u64) -> Vec<u64> {
    let mut expected = vec![0; 2];
    expected[cpt] = live;
    expected
}

#[test]
fn connections_run_on_the_thread_of_their_peers_partition() {
    // The byte sums of 127.0.0.2@tcp and 127.0.0.3@tcp differ by one: their peers' partitions
    // differ, so both threads of a serve someone.
    let (index_a, index_b, index_c) = (0, 1, 2);
    assert_ne!(cpt_of(index_b), cpt_of(index_c), "the test needs peers on both partitions");
    let port = free_port();
    let (a, b) = (partitioned_node(index_a, port), partitioned_node(index_b, port));
    put_and_check(&a, &b, 1, b"to b");
    put_and_check(&b, &a, 2, b"to a");
    let live_ab = a.tcp_stats().conns_live();
    assert!(live_ab >= 1);
    assert_eq!(settled(&a), only_on(cpt_of(index_b), live_ab));
    assert_eq!(settled(&b), only_on(cpt_of(index_a), b.tcp_stats().conns_live()));

    let c = partitioned_node(index_c, port);
    put_and_check(&a, &c, 3, b"to c");
    put_and_check(&c, &a, 4, &pattern(1 << 20, 4));
    assert_eq!(settled(&c), only_on(cpt_of(index_a), c.tcp_stats().conns_live()));
    // a now serves peers on both partitions: each thread runs its own peer's connections.
    let by_partition = settled(&a);
    assert!(by_partition.iter().all(|&count| count > 0), "{by_partition:?}");

    // Closing a connection ends its task on its partition's thread.
    drop(c);
    wait_until("c's connections to end", || a.connections_by_partition()[cpt_of(index_c)] == 0);
    for node in [&a, &b] {
        assert_eq!(node.tcp_stats().protocol_errors, 0);
    }
}

/// One node talks to peers on both of its partitions at once, small and large, both ways:
/// nothing lost, nothing twice, every payload intact.
#[test]
fn concurrent_traffic_over_both_partitions_arrives_whole() {
    const SENDERS: usize = 2;
    const PER_SENDER: usize = 60;
    let port = free_port();
    let nodes: Vec<Node> = (0..3).map(|index| partitioned_node(index, port)).collect();
    let size_of = |index: usize| if index % 10 == 9 { 1 << 20 } else { 4096 };
    // Every node's portal 12 takes what each of the others sends it.
    let inboxes: Vec<EventQueue> = nodes
        .iter()
        .map(|node| {
            let inbox = node.event_queue(2 * SENDERS * PER_SENDER * nodes.len());
            for from in 0..nodes.len() {
                for index in 0..SENDERS * PER_SENDER {
                    node.post(12, (from * 1000 + index) as u64, sink(size_of(index)), &inbox)
                        .unwrap();
                }
            }
            inbox
        })
        .collect();
    // Node 0 with each peer, both ways: peers 1 and 2 hash to different partitions of node 0.
    let pairs = [(0, 1), (1, 0), (0, 2), (2, 0)];
    std::thread::scope(|scope| {
        for (from, to) in pairs {
            for sender in 0..SENDERS {
                let (source, target) = (&nodes[from], &nodes[to]);
                scope.spawn(move || {
                    for index in 0..PER_SENDER {
                        let slot = sender * PER_SENDER + index;
                        let bits = (from * 1000 + slot) as u64;
                        let data = pattern(size_of(slot), bits as u8);
                        let done = source
                            .put_and_wait_ack(
                                target.process_id(),
                                12,
                                bits,
                                Memory::new(data),
                                HANG_GUARD,
                            )
                            .unwrap();
                        assert_eq!(done.event.mlength as usize, size_of(slot));
                    }
                });
            }
        }
    });
    for (to, inbox) in inboxes.iter().enumerate() {
        let senders: Vec<usize> =
            pairs.iter().filter(|pair| pair.1 == to).map(|pair| pair.0).collect();
        let mut seen = std::collections::HashSet::new();
        for _ in 0..senders.len() * SENDERS * PER_SENDER {
            let put = recv(inbox);
            assert_eq!(put.kind, EventKind::Put);
            let bits = put.match_bits as usize;
            assert!(seen.insert(bits), "match bits {bits} twice");
            let (from, slot) = (bits / 1000, bits % 1000);
            assert!(senders.contains(&from));
            let expected = pattern(size_of(slot), bits as u8);
            assert_eq!(put.memory.unwrap().to_vec(), expected, "payload of {bits}");
        }
        assert!(inbox.is_empty());
    }
    let by_partition = settled(&nodes[0]);
    assert!(by_partition.iter().all(|&count| count > 0), "{by_partition:?}");
    for node in &nodes {
        // Their calls ran with the core shared (PUTs on a portal whose buffers sit in one
        // table take it exclusively when they land on the other partition).
        assert!(node.stats().runtime.core_shared_holds > 0);
        let stats = node.tcp_stats();
        assert_eq!(stats.protocol_errors + stats.timeouts, 0, "{stats:?}");
        assert_eq!(node.stats().messages, 0);
    }
}

/// An MD bound with no partition named is made on the calling thread's, as the kernel's
/// `LNetMDBind()` binds on the caller's CPT: from a handler running on the I/O thread of the
/// sender's partition, that partition. One named is made where it says.
#[test]
fn an_md_is_bound_on_the_calling_threads_partition() {
    let port = free_port();
    // The receiver is test address 0; of addresses 1 and 2 (partitions apart), the sender is
    // the one on partition 1, which no default would give.
    let sender_index = (1..3).find(|&index| cpt_of(index) == 1).expect("a peer on partition 1");
    let (b, a) = (partitioned_node(0, port), partitioned_node(sender_index, port));
    let named = MdSpec::new(Memory::new(vec![0; 8])).on_partition(1);
    let named = b.md_bind(named, UnlinkMode::Unlink, None).unwrap();
    assert_eq!(b.md_partition(named), Ok(1));
    let refused = MdSpec::new(Memory::new(vec![0; 8])).on_partition(2);
    assert!(matches!(
        b.md_bind(refused, UnlinkMode::Unlink, None).map_err(|rejected| rejected.error),
        Err(MdBindError::Core(ulnet::proto::engine::MdBindError::BadCpt { cpt: 2, count: 2 }))
    ));

    let found: Arc<Mutex<Vec<u32>>> = Arc::default();
    let binder = Arc::new(Mutex::new(Some(b.clone())));
    let inbox = b.event_queue_with_handler(4, {
        let found = Arc::clone(&found);
        move |queue| {
            while let Ok(event) = queue.try_recv() {
                let node = binder.lock().unwrap().take();
                if let (EventKind::Put, Some(node)) = (event.kind, node) {
                    let spec = MdSpec::new(Memory::new(vec![1; 8]));
                    let md = node.md_bind(spec, UnlinkMode::Unlink, None).unwrap();
                    found.lock().unwrap().push(node.md_partition(md).unwrap());
                }
            }
        }
    });
    b.post(12, 5, sink(8), &inbox).unwrap();
    a.put_and_wait_ack(b.process_id(), 12, 5, Memory::new(vec![2; 8]), HANG_GUARD).unwrap();
    wait_until("the handler's bind", || !found.lock().unwrap().is_empty());
    assert_eq!(*found.lock().unwrap(), [1]);
}
