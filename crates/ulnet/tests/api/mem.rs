//! Two and three nodes over the in-process fabric.

use std::time::Duration;

use ulnet::*;

use crate::*;

#[test]
fn two_nodes_put_and_get_every_size() {
    let fabric = MemFabric::new(LinkConfig::IDEAL);
    let (a, b) = (fabric_node(&fabric, 0), fabric_node(&fabric, 1));
    // Discovery first (ping + push), so what follows counts only the transfers.
    let peer = a.discover(fabric_nid(1), false).unwrap();
    assert_eq!(peer.primary_nid, fabric_nid(1));
    let frames_before = fabric.stats().frames_sent;
    let ni_before = a.stats().nis[1].clone();
    for (put, get) in put_and_get_every_size(&a, &b) {
        assert_eq!(put.initiator, a.process_id());
        assert_eq!((put.source, put.sender), (fabric_nid(0), fabric_nid(0)));
        assert_eq!(get.initiator, a.process_id());
    }
    let stats = fabric.stats();
    assert_eq!(stats.frames_sent, stats.frames_delivered);
    assert_eq!(stats.frames_sent - frames_before, 12, "PUT, ACK, GET, REPLY per size");
    assert_eq!((a.stats().messages, b.stats().messages), (0, 0));
    let (ni, before) = (a.stats().nis[1].statistics, ni_before.statistics);
    assert_eq!(ni.sent_stats.put - before.sent_stats.put, 3);
    assert_eq!(ni.sent_stats.get - before.sent_stats.get, 3);
    assert_eq!(ni.received_stats.ack - before.received_stats.ack, 3);
    assert_eq!(ni.received_stats.reply - before.received_stats.reply, 3);
}

#[test]
fn three_nodes_each_event_lands_on_its_own_queue() {
    let fabric = MemFabric::new(LinkConfig::IDEAL);
    let nodes: Vec<Node> = (0..3).map(|index| fabric_node(&fabric, index)).collect();
    // Each node has one queue per possible sender, on match bits = sender index.
    let queues: Vec<Vec<EventQueue>> = nodes
        .iter()
        .map(|node| {
            (0..3)
                .map(|sender| {
                    let queue = node.event_queue(8);
                    node.post(12, sender, sink(64), &queue).unwrap();
                    queue
                })
                .collect()
        })
        .collect();
    for (from, sender) in nodes.iter().enumerate() {
        for (to, receiver) in nodes.iter().enumerate() {
            if from == to {
                continue;
            }
            let data = pattern(64, (from * 3 + to) as u8);
            sender
                .put_and_wait_ack(
                    receiver.process_id(),
                    12,
                    from as u64,
                    Memory::new(data),
                    HANG_GUARD,
                )
                .unwrap();
        }
    }
    for (to, receiver) in nodes.iter().enumerate() {
        for (from, queue) in queues[to].iter().enumerate() {
            if from == to {
                assert!(queue.is_empty(), "nobody sends to itself here");
                continue;
            }
            let put = recv(queue);
            assert_eq!(put.initiator, nodes[from].process_id());
            assert_eq!(put.target, receiver.process_id());
            assert_eq!(put.match_bits, from as u64);
            assert_eq!(put.memory.unwrap().to_vec(), pattern(64, (from * 3 + to) as u8));
            assert!(queue.is_empty());
        }
    }
}

#[test]
fn latency_and_bandwidth_still_deliver() {
    let link = LinkConfig {
        latency: Duration::from_micros(300),
        bandwidth_bytes_per_sec: Some(2_000_000_000),
        ..LinkConfig::IDEAL
    };
    let fabric = MemFabric::new(link);
    let (a, b) = (fabric_node(&fabric, 0), fabric_node(&fabric, 1));
    let inbox = b.event_queue(64);
    for round in 0..20u64 {
        b.post(13, round, sink(65536), &inbox).unwrap();
        a.put_and_wait_ack(b.process_id(), 13, round, Memory::new(pattern(65536, 1)), HANG_GUARD)
            .unwrap();
        assert_eq!(recv(&inbox).memory.unwrap().to_vec(), pattern(65536, 1));
    }
}

#[test]
fn unknown_nid_and_partition_fail_the_send() {
    let fabric = MemFabric::new(LinkConfig::IDEAL);
    let (a, b) = (fabric_node(&fabric, 0), fabric_node(&fabric, 1));
    let nobody = ProcessId::new(fabric_nid(9), LNET_PID_LUSTRE);
    let error = a.put_and_wait_ack(nobody, 1, 1, Memory::new(vec![1]), HANG_GUARD).unwrap_err();
    assert!(matches!(error, TransferError::Failed { kind: EventKind::Send, .. }), "{error:?}");

    let inbox = b.event_queue(8);
    b.post(14, 1, sink(1), &inbox).unwrap();
    fabric.set_partitioned(fabric_nid(0), fabric_nid(1), true).unwrap();
    let error =
        a.put_and_wait_ack(b.process_id(), 14, 1, Memory::new(vec![1]), HANG_GUARD).unwrap_err();
    assert!(matches!(error, TransferError::Failed { kind: EventKind::Send, .. }), "{error:?}");
    fabric.set_partitioned(fabric_nid(0), fabric_nid(1), false).unwrap();
    a.put_and_wait_ack(b.process_id(), 14, 1, Memory::new(vec![1]), HANG_GUARD).unwrap();
    assert_eq!(recv(&inbox).kind, EventKind::Put);
    assert!(fabric.stats().frames_refused >= 2);
    assert_eq!(
        fabric.set_link(fabric_nid(0), fabric_nid(9), LinkConfig::IDEAL),
        Err(FabricError::UnknownNid(fabric_nid(9)))
    );
}

#[test]
fn a_lost_frame_leaves_the_ack_missing() {
    let fabric = MemFabric::new(LinkConfig::IDEAL);
    let (a, b) = (fabric_node(&fabric, 0), fabric_node(&fabric, 1));
    // Discover over a good link, then lose everything.
    a.discover(fabric_nid(1), false).unwrap();
    fabric.set_default_link(LinkConfig { loss_per_million: 1_000_000, ..LinkConfig::IDEAL });
    let inbox = b.event_queue(8);
    b.post(15, 1, sink(8), &inbox).unwrap();
    // The sender cannot tell: the SEND succeeds and the ACK never comes.
    let error = a
        .put_and_wait_ack(
            b.process_id(),
            15,
            1,
            Memory::new(vec![3; 8]),
            Duration::from_millis(200),
        )
        .unwrap_err();
    assert_eq!(error, TransferError::TimedOut(EventKind::Ack));
    assert_eq!(fabric.stats().frames_lost, 1);
    assert!(inbox.is_empty());
    // Giving up unlinked the MD: nothing is left behind on the sender.
    assert_eq!((a.stats().mds, a.stats().messages), (0, 0));
}

#[test]
fn lazy_portal_holds_the_connection_until_a_buffer_comes() {
    let fabric = MemFabric::new(LinkConfig::IDEAL);
    let (a, b) = (fabric_node(&fabric, 0), fabric_node(&fabric, 1));
    b.set_lazy_portal(20).unwrap();
    let late = b.event_queue(8);
    let early = b.event_queue(8);
    b.post(21, 0, sink(4), &early).unwrap();
    let sent = a.event_queue(16);
    for (portal, byte) in [(20, 1u8), (21, 2u8)] {
        put_with_ack(&a, b.process_id(), portal, vec![byte; 4], &sent);
    }
    // The first PUT is parked on the lazy portal, and the link behind it is not read: the
    // second PUT cannot have arrived, and neither SEND can have completed.
    assert_eq!(early.recv_timeout(Duration::from_millis(100)), Err(RecvError::Timeout));
    assert!(sent.is_empty());
    assert_eq!(b.stats().messages, 1, "one PUT delayed");

    b.post(20, 0, sink(4), &late).unwrap();
    assert_eq!(recv(&late).memory.unwrap().to_vec(), [1; 4]);
    assert_eq!(recv(&early).memory.unwrap().to_vec(), [2; 4]);
    let kinds: Vec<EventKind> = (0..4).map(|_| recv(&sent).kind).collect();
    assert_eq!(kinds.iter().filter(|kind| **kind == EventKind::Send).count(), 2);
    assert_eq!(kinds.iter().filter(|kind| **kind == EventKind::Ack).count(), 2);
}

#[test]
fn clearing_a_lazy_portal_drops_the_delayed_put() {
    let fabric = MemFabric::new(LinkConfig::IDEAL);
    let (a, b) = (fabric_node(&fabric, 0), fabric_node(&fabric, 1));
    b.set_lazy_portal(22).unwrap();
    let sent = a.event_queue(8);
    let md = put_with_ack(&a, b.process_id(), 22, vec![5; 16], &sent);
    // Wait until b holds the PUT, then drop it: the sender's SEND completes (the payload was
    // skipped, as a dropped message's is) and no ACK follows.
    let deadline = std::time::Instant::now() + HANG_GUARD;
    while b.stats().messages == 0 {
        assert!(std::time::Instant::now() < deadline, "the PUT never reached b");
        std::thread::yield_now();
    }
    b.clear_lazy_portal(22).unwrap();
    let send = recv(&sent);
    assert_eq!((send.kind, send.status), (EventKind::Send, EventStatus::Ok));
    assert_eq!(b.stats().global.drop_count, 1);
    a.md_unlink(md).unwrap();
    let unlink = recv(&sent);
    assert_eq!(unlink.kind, EventKind::Unlink);
    assert_eq!(unlink.memory.unwrap().to_vec(), [5; 16]);
}

#[test]
fn segments_and_truncation_cross_the_fabric() {
    let fabric = MemFabric::new(LinkConfig::IDEAL);
    let (a, b) = (fabric_node(&fabric, 0), fabric_node(&fabric, 1));
    let inbox = b.event_queue(8);
    // 40 bytes in three uneven segments; the 100-byte PUT is cut to fit.
    let segments = vec![vec![0; 7], vec![0; 30], vec![0; 3]];
    let spec = MdSpec::new(Memory::from_segments(segments).unwrap())
        .options(MdOptions::OP_PUT | MdOptions::TRUNCATE)
        .threshold(Threshold::Count(1));
    b.post(16, 0, spec, &inbox).unwrap();
    let data = pattern(100, 11);
    let pieces = vec![data[..1].to_vec(), data[1..50].to_vec(), Vec::new(), data[50..].to_vec()];
    let done = a
        .put_and_wait_ack(b.process_id(), 16, 0, Memory::from_segments(pieces).unwrap(), HANG_GUARD)
        .unwrap();
    assert_eq!(done.event.mlength, 40, "the ACK reports what the target kept");
    let put = recv(&inbox);
    assert_eq!((put.rlength, put.mlength), (100, 40));
    assert_eq!(put.memory.unwrap().to_vec(), data[..40]);
}

#[test]
fn response_tracker_expires_on_the_io_thread() {
    let fabric = MemFabric::new(LinkConfig::IDEAL);
    let tunables = Tunables {
        transaction_timeout: Duration::from_secs(1),
        retry_count: 0,
        ..Tunables::default()
    };
    let a = Node::builder().mem_ni(fabric_nid(0), &fabric).tunables(tunables).build().unwrap();
    let b = fabric_node(&fabric, 1);
    a.discover(fabric_nid(1), false).unwrap();
    fabric.set_default_link(LinkConfig { loss_per_million: 1_000_000, ..LinkConfig::IDEAL });
    // Nobody but the I/O thread's timer can end this wait: the ACK is never coming.
    let error =
        a.put_and_wait_ack(b.process_id(), 17, 0, Memory::new(vec![1; 8]), HANG_GUARD).unwrap_err();
    assert_eq!(error, TransferError::NoResponse(EventKind::Ack));
    assert_eq!(a.stats().global.response_timeout_count, 1);
    assert_eq!(a.stats().mds, 0);
}

#[test]
fn pinned_io_thread_works() {
    let fabric = MemFabric::new(LinkConfig::IDEAL);
    let a = Node::builder().mem_ni(fabric_nid(0), &fabric).io_cpu(0).build().unwrap();
    let b = Node::builder()
        .mem_ni(fabric_nid(1), &fabric)
        .io_cpu(0)
        .spin(Duration::from_micros(5))
        .build()
        .unwrap();
    let inbox = b.event_queue(4);
    b.post(18, 0, sink(8), &inbox).unwrap();
    a.put_and_wait_ack(b.process_id(), 18, 0, Memory::new(vec![4; 8]), HANG_GUARD).unwrap();
    assert_eq!(recv(&inbox).memory.unwrap().to_vec(), [4; 8]);
}

#[test]
fn ping_and_discover_through_the_runtime() {
    let fabric = MemFabric::new(LinkConfig::IDEAL);
    let (a, b) = (fabric_node(&fabric, 0), fabric_node(&fabric, 1));
    let reply = a.ping(b.process_id(), Duration::from_secs(5), None).unwrap();
    assert_eq!(reply.primary_nid, Some(fabric_nid(1)));
    assert_eq!(reply.replier, fabric_nid(1));
    assert!(reply.info.nids.iter().any(|entry| entry.nid == fabric_nid(1) && entry.is_up()));
    // A ping never discovers; an explicit discovery does.
    let peer = a.discover(fabric_nid(1), true).unwrap();
    assert_eq!(peer.primary_nid, fabric_nid(1));
    assert_eq!(a.peer_info(fabric_nid(1)).map(|info| info.primary_nid), Some(fabric_nid(1)));
    // Nobody answers for an unknown NID: the ping's own timeout ends it.
    let silent = ProcessId { nid: fabric_nid(7), pid: LNET_PID_LUSTRE };
    assert!(matches!(
        a.ping(silent, Duration::from_millis(200), None),
        Err(PingError::Failed(_) | PingError::Start(_))
    ));
    assert_eq!(
        a.ping(ProcessId { nid: Nid::ANY, pid: LNET_PID_LUSTRE }, Duration::from_secs(1), None),
        Err(PingError::Start(ulnet::proto::engine::PingStartError::AnyNid))
    );
    a.shutdown();
    assert_eq!(a.ping(b.process_id(), Duration::from_secs(1), None), Err(PingError::ShutDown));
    assert_eq!(a.discover(fabric_nid(1), false), Err(DiscoverError::ShutDown));
}

/// A node with two CPU partitions posts a buffer in each partition's match table
/// (`InsertPosition::Local`, `post_at`); each PUT is taken by the buffer of the partition its
/// sender hashes to (10.0.0.1: byte sum 13, partition 1; 10.0.0.2: 14, partition 0), none
/// stolen; a partition the node lacks is refused.
#[test]
fn a_partitioned_node_matches_puts_on_their_partitions_buffers() {
    use ulnet::proto::engine::cpt::Partitions;

    const PORTAL: u32 = 13;
    let fabric = MemFabric::new(LinkConfig::IDEAL);
    let senders = [fabric_node(&fabric, 0), fabric_node(&fabric, 1)];
    let server = Node::builder()
        .partitions(Partitions::new(2).unwrap())
        .mem_ni(fabric_nid(3), &fabric)
        .build()
        .unwrap();
    // Off the I/O threads, with no CPUs given for the partitions: partition 0.
    assert_eq!(server.current_partition(), 0);
    let refused = server.me_attach(
        PORTAL,
        ProcessId::ANY,
        0,
        0,
        UnlinkMode::Unlink,
        InsertPosition::Local { cpt: 2 },
    );
    assert_eq!(
        refused.unwrap_err(),
        MeAttachError::Core(ulnet::proto::engine::MeAttachError::BadCpt { cpt: 2, count: 2 })
    );
    let queue = server.event_queue(8);
    let posted: Vec<MdHandle> = (0..2)
        .map(|cpt| {
            let position = InsertPosition::Local { cpt };
            server.post_at(PORTAL, 7, position, sink(64), &queue).unwrap()
        })
        .collect();
    let tables = server.portal_tables(PORTAL).unwrap();
    assert_eq!(tables.iter().map(|table| table.entries).collect::<Vec<_>>(), [1, 1]);
    for (sender, cpt) in [(&senders[0], 1), (&senders[1], 0)] {
        let data = pattern(64, cpt as u8);
        sender
            .put_and_wait_ack(server.process_id(), PORTAL, 7, Memory::new(data), HANG_GUARD)
            .unwrap();
        let put = recv(&queue);
        assert_eq!((put.initiator, put.md), (sender.process_id(), posted[cpt]));
    }
    let tables = server.portal_tables(PORTAL).unwrap();
    let matched: Vec<_> = tables.iter().map(|table| (table.matched, table.stolen)).collect();
    assert_eq!(matched, [(1, 0), (1, 0)]);
}

/// `Node::cpt_of_nid` is the kernel's `lnet_nid2cpt(nid, NULL)`, which lnet_selftest places a
/// client RPC by: a NID on a local net bound to partitions 2 and 3 of 4 hashes over those two
/// (10.0.0.1: byte sum 13, partition 2 + 13 mod 2 = 3; 10.0.0.2: 14, 2), where the hash over
/// all four gives 1 and 2; a NID of a net the node has no NI on hashes over all four.
#[test]
fn a_nid_maps_through_its_nets_partitions() {
    use ulnet::proto::engine::cpt::{CptList, Partitions};

    let fabric = MemFabric::new(LinkConfig::IDEAL);
    let config = NiConfig {
        cpts: CptList::new(&[2, 3]).unwrap(),
        ..NiConfig::new(fabric_nid(3), LndKind::Fabric)
    };
    let node = Node::builder()
        .partitions(Partitions::new(4).unwrap())
        .mem_ni_config(config, &fabric)
        .build()
        .unwrap();
    let all = Partitions::new(4).unwrap();
    assert_eq!(
        (all.cpt_of_nid(&fabric_nid(0), None), all.cpt_of_nid(&fabric_nid(1), None)),
        (1, 2)
    );
    assert_eq!((node.cpt_of_nid(&fabric_nid(0)), node.cpt_of_nid(&fabric_nid(1))), (3, 2));
    let elsewhere: Nid = "10.0.0.1@tcp9".parse().unwrap();
    assert_eq!(node.cpt_of_nid(&elsewhere), all.cpt_of_nid(&elsewhere, None));
}
