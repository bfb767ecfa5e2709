//! Where a connection's system calls run (`RuntimeStats::socket_reads`, `socket_writes` and
//! their `_unlocked` shares): headers and small payloads are read into the task's own buffer
//! before it takes the core lock, and frames are staged in the connection's outbox (small
//! payloads copied, large ones pinned) and written after the unlock; a large payload is read
//! into the destination the core lends, without the lock, unless the core cannot lend it
//! (decision 0029). Mixed sizes keep their order on the stream.

use super::*;

fn reads(node: &Node) -> (u64, u64) {
    let runtime = node.stats().runtime;
    (runtime.socket_reads, runtime.socket_reads_unlocked)
}

fn writes(node: &Node) -> (u64, u64) {
    let runtime = node.stats().runtime;
    (runtime.socket_writes, runtime.socket_writes_unlocked)
}

#[test]
fn small_messages_are_read_and_written_without_the_core_lock() {
    let port = free_port();
    let (a, b, inbox) = connected(port);
    let md = a.md_bind(MdSpec::new(Memory::new(vec![7; 8])), UnlinkMode::Retain, None).unwrap();
    let (read_before, read_unlocked_before) = reads(&b);
    let (written_before, written_unlocked_before) = writes(&a);
    for index in 0..100 {
        a.put(&put_to_portal_12(&b, md, index)).unwrap();
        let put = recv(&inbox);
        assert_eq!((put.kind, put.hdr_data), (EventKind::Put, index));
    }
    let (total, unlocked) = reads(&b);
    let (total, unlocked) = (total - read_before, unlocked - read_unlocked_before);
    // One PUT in flight at a time: each is one read at least, and every read of headers and
    // 8-byte payloads is made before the lock.
    assert!(unlocked >= 100, "{unlocked} reads without the lock for 100 PUTs");
    assert_eq!(total, unlocked, "reads with the lock held");
    let (total, unlocked) = writes(&a);
    let (total, unlocked) = (total - written_before, unlocked - written_unlocked_before);
    assert!(unlocked >= 100, "{unlocked} writes without the lock for 100 PUTs");
    assert_eq!(total, unlocked, "writes with the lock held");
}

/// A burst's first half leaves while the drain still has the second to stage (decision
/// 0011): the drain releases the core lock for that write too, so no write of a burst of
/// small messages holds it.
#[test]
fn a_burst_is_written_in_halves_without_the_core_lock() {
    let port = free_port();
    let (a, b, inbox) = connected(port);
    let md = a.md_bind(MdSpec::new(Memory::new(vec![7; 8])), UnlinkMode::Retain, None).unwrap();
    let before = writes(&a);
    for round in 0..4 {
        a.batch(|calls| {
            for index in round * 16..round * 16 + 16 {
                calls.put(&put_to_portal_12(&b, md, index)).unwrap();
            }
        })
        .unwrap();
        // Whatever was held back is written before a wait.
        let _ = a.event_queue(1).try_recv();
        for index in round * 16..round * 16 + 16 {
            assert_eq!(recv(&inbox).hdr_data, index);
        }
    }
    let (total, locked) = locked_since(writes(&a), before);
    // Each burst of 16 leaves in two writes at least: its first half early.
    assert!(total >= 8, "{total} writes for 4 bursts");
    assert_eq!(locked, 0, "writes with the lock held, of {total}");
}

/// Threads sending bursts to one peer at once: a drain that released the lock for an early
/// write finds, when it takes the lock again, that another thread may have carried out part
/// of its output, and the other thread's drain may pause in turn. Every message arrives once,
/// each thread's in the order it sent them.
#[test]
fn bursts_from_several_threads_arrive_whole_and_in_order() {
    const THREADS: u64 = 4;
    const BURSTS: u64 = 20;
    const BURST: u64 = 16;
    let port = free_port();
    let (a, b) = (tcp_node(0, port), tcp_node(1, port));
    put_and_check(&a, &b, 1, &[1, 2, 3]);
    let inbox = b.event_queue((THREADS * BURSTS * BURST) as usize);
    open_portal_12(&b, &inbox);
    let md = a.md_bind(MdSpec::new(Memory::new(vec![7; 8])), UnlinkMode::Retain, None).unwrap();
    let before = writes(&a);
    std::thread::scope(|scope| {
        for thread in 0..THREADS {
            let (a, b) = (&a, &b);
            scope.spawn(move || {
                for burst in 0..BURSTS {
                    a.batch(|calls| {
                        for index in 0..BURST {
                            let number = thread << 32 | (burst * BURST + index);
                            calls.put(&put_to_portal_12(b, md, number)).unwrap();
                        }
                    })
                    .unwrap();
                }
                // Whatever was held back is written before a wait.
                let _ = a.event_queue(1).try_recv();
            });
        }
    });
    let mut next = [0u64; THREADS as usize];
    for _ in 0..THREADS * BURSTS * BURST {
        let put = recv(&inbox);
        let (thread, number) = ((put.hdr_data >> 32) as usize, put.hdr_data & 0xffff_ffff);
        assert_eq!(number, next[thread], "thread {thread}'s messages out of order");
        next[thread] += 1;
    }
    assert!(inbox.is_empty());
    assert_eq!(a.tcp_stats().protocol_errors + b.tcp_stats().protocol_errors, 0);
    let (total, locked) = locked_since(writes(&a), before);
    assert!(total >= THREADS * BURSTS, "{total} writes for {} bursts", THREADS * BURSTS);
    assert_eq!(locked, 0, "writes with the lock held, of {total}");
}

/// Reads and writes (total, with the lock held) on `node` since `before`.
fn locked_since(now: (u64, u64), before: (u64, u64)) -> (u64, u64) {
    let total = now.0 - before.0;
    (total, total - (now.1 - before.1))
}

/// 1 MiB from one buffer into a use-once MD: the sender writes it from the pinned buffer and
/// the receiver reads it into the lent MD memory, neither with the core lock held.
#[test]
fn a_large_payload_moves_without_the_core_lock() {
    let port = free_port();
    let (a, b) = (tcp_node(0, port), tcp_node(1, port));
    put_and_check(&a, &b, 1, &[1, 2, 3]);
    let (read_before, written_before) = (reads(&b), writes(&a));
    let data = pattern(1 << 20, 3);
    put_and_check(&a, &b, 2, &data);
    let (total, locked) = locked_since(reads(&b), read_before);
    assert!(total > 1, "{total} reads for 1 MiB");
    assert_eq!(locked, 0, "reads with the lock held, of {total}");
    let (total, locked) = locked_since(writes(&a), written_before);
    assert!(total > 0);
    assert_eq!(locked, 0, "writes with the lock held, of {total}");
}

/// An MD still open to more PUTs cannot be lent (another message could land in it meanwhile):
/// its payload is read with the lock held. A source of several segments cannot be pinned: it
/// is copied when the core hands the message over, and written without the lock. Both arrive
/// intact.
#[test]
fn memory_the_core_cannot_hand_out_moves_with_the_lock() {
    let port = free_port();
    let (a, b) = (tcp_node(0, port), tcp_node(1, port));
    put_and_check(&a, &b, 1, &[1, 2, 3]);
    let inbox = b.event_queue(8);
    let open = MdSpec::new(Memory::new(vec![0; 2 << 20]))
        .options(MdOptions::OP_PUT | MdOptions::MANAGE_REMOTE)
        .threshold(Threshold::Infinite);
    b.post(10, 5, open, &inbox).unwrap();
    let data = pattern(1 << 20, 9);
    let halves = vec![data[..1 << 19].to_vec(), data[1 << 19..].to_vec()];
    let (read_before, written_before) = (reads(&b), writes(&a));
    let source = Memory::from_segments(halves).unwrap();
    a.put_and_wait_ack(b.process_id(), 10, 5, source, HANG_GUARD).unwrap();
    let put = recv(&inbox);
    assert_eq!((put.kind, put.mlength), (EventKind::Put, 1 << 20));
    let (_, locked) = locked_since(reads(&b), read_before);
    assert!(locked > 0, "the open MD is read into with the lock held");
    let (total, locked) = locked_since(writes(&a), written_before);
    assert!(total > 0);
    assert_eq!(locked, 0, "writes of the copied source with the lock held, of {total}");
    let received = b.with_md_memory(put.md, |memory| memory.to_vec());
    // The MD stays open (threshold infinite), so its memory is the core's to show.
    assert_eq!(received.unwrap().get(..1 << 20), Some(data.as_slice()));
}

/// Small and large PUTs queued together on one connection (untyped: one carries everything):
/// the small ones go through the outbox, the large ones from MD memory, and the stream must
/// carry them in order, each intact.
#[test]
fn mixed_sizes_keep_their_order() {
    const SIZES: [usize; 8] = [8, 1 << 20, 100, 4 << 10, 64 << 10, 0, 4097, 300 << 10];
    let port = free_port();
    let untyped = || SocklndTunables { typed_conns: false, ..tunables(port) };
    let (a, b) = (tcp_node_with(0, untyped()), tcp_node_with(1, untyped()));
    put_and_check(&a, &b, 1, &[1, 2, 3]);
    let inbox = b.event_queue(256);
    let payloads: Vec<Vec<u8>> = (0..64)
        .map(|index| {
            let size = SIZES[index % SIZES.len()];
            (0..size).map(|byte| (byte * 7 + index) as u8).collect()
        })
        .collect();
    for (index, payload) in payloads.iter().enumerate() {
        b.post(20, index as u64, sink(payload.len()), &inbox).unwrap();
    }
    let mds: Vec<MdHandle> = payloads
        .iter()
        .map(|payload| {
            let spec = MdSpec::new(Memory::new(payload.clone()));
            a.md_bind(spec, UnlinkMode::Retain, None).unwrap()
        })
        .collect();
    a.batch(|calls| {
        for (index, md) in mds.iter().enumerate() {
            let put = PutRequest {
                md: *md,
                ack: false,
                target: b.process_id(),
                portal: 20,
                match_bits: index as u64,
                remote_offset: 0,
                hdr_data: index as u64,
                source: None,
            };
            calls.put(&put).unwrap();
        }
    })
    .unwrap();
    for (index, payload) in payloads.iter().enumerate() {
        let put = recv(&inbox);
        assert_eq!((put.kind, put.hdr_data), (EventKind::Put, index as u64), "in order");
        assert_eq!(put.memory.unwrap().to_vec(), *payload, "PUT {index} intact");
    }
    assert_eq!(a.tcp_stats().conns_live(), 1, "one connection carried them all");
}
