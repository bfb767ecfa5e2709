//! Where a connection's system calls run (`RuntimeStats::socket_reads`, `socket_writes` and
//! their `_unlocked` shares): headers and small payloads are read into the task's own buffer
//! before it takes the core lock, and small frames are copied into the connection's outbox
//! and written after the unlock; a large payload moves between the socket and MD memory with
//! the lock held (decision 0029). Mixed sizes keep their order on the stream.

use super::*;

fn reads(node: &Node) -> (u64, u64) {
    let runtime = node.stats().runtime;
    (runtime.socket_reads, runtime.socket_reads_unlocked)
}

fn writes(node: &Node) -> (u64, u64) {
    let runtime = node.stats().runtime;
    (runtime.socket_writes, runtime.socket_writes_unlocked)
}

/// Two connected nodes, and on `b` portal 12 taking any number of 8-byte PUTs into `inbox`.
fn connected(port: u16) -> (Node, Node, EventQueue) {
    let (a, b) = (tcp_node(0, port), tcp_node(1, port));
    // Connect first, so that the hellos are not counted.
    put_and_check(&a, &b, 1, &[1, 2, 3]);
    let inbox = b.event_queue(64);
    open_portal_12(&b, &inbox);
    (a, b, inbox)
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

#[test]
fn a_large_payload_moves_with_the_lock() {
    let port = free_port();
    let (a, b) = (tcp_node(0, port), tcp_node(1, port));
    put_and_check(&a, &b, 1, &[1, 2, 3]);
    let (read_before, read_unlocked_before) = reads(&b);
    let (written_before, written_unlocked_before) = writes(&a);
    let data: Vec<u8> = (0..1 << 20).map(|i: u32| (i % 251) as u8).collect();
    put_and_check(&a, &b, 2, &data);
    let (total, unlocked) = reads(&b);
    let locked = (total - read_before) - (unlocked - read_unlocked_before);
    assert!(unlocked > read_unlocked_before, "the header is read without the lock");
    assert!(locked > 0, "the payload is read into the MD with the lock held");
    let (total, unlocked) = writes(&a);
    let locked = (total - written_before) - (unlocked - written_unlocked_before);
    assert!(locked > 0, "the payload is written from the MD with the lock held");
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
