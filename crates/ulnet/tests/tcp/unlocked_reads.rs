//! Where a connection's reads run (`RuntimeStats::socket_reads`, `socket_reads_unlocked`):
//! headers and small payloads are read into the task's own buffer before it takes the core
//! lock; a large payload is read straight into MD memory, which needs the lock (decision 0029).

use super::*;

fn reads(node: &Node) -> (u64, u64) {
    let runtime = node.stats().runtime;
    (runtime.socket_reads, runtime.socket_reads_unlocked)
}

#[test]
fn small_messages_are_read_without_the_core_lock() {
    let port = free_port();
    let (a, b) = (tcp_node(0, port), tcp_node(1, port));
    // Connect first, so that the hellos are not counted.
    put_and_check(&a, &b, 1, &[1, 2, 3]);
    let inbox = b.event_queue(64);
    open_portal_12(&b, &inbox);
    let md = a.md_bind(MdSpec::new(Memory::new(vec![7; 8])), UnlinkMode::Retain, None).unwrap();
    let (total_before, unlocked_before) = reads(&b);
    for index in 0..100 {
        a.put(&put_to_portal_12(&b, md, index)).unwrap();
        let put = recv(&inbox);
        assert_eq!((put.kind, put.hdr_data), (EventKind::Put, index));
    }
    let (total, unlocked) = reads(&b);
    let (total, unlocked) = (total - total_before, unlocked - unlocked_before);
    // One PUT in flight at a time: each is one read at least, and every read of headers and
    // 8-byte payloads is made before the lock.
    assert!(unlocked >= 100, "{unlocked} reads without the lock for 100 PUTs");
    assert_eq!(total, unlocked, "reads with the lock held");
}

#[test]
fn a_large_payload_is_read_into_md_memory_with_the_lock() {
    let port = free_port();
    let (a, b) = (tcp_node(0, port), tcp_node(1, port));
    put_and_check(&a, &b, 1, &[1, 2, 3]);
    let (total_before, unlocked_before) = reads(&b);
    let data: Vec<u8> = (0..1 << 20).map(|i: u32| (i % 251) as u8).collect();
    put_and_check(&a, &b, 2, &data);
    let (total, unlocked) = reads(&b);
    let locked = (total - total_before) - (unlocked - unlocked_before);
    assert!(unlocked > unlocked_before, "the header is read without the lock");
    assert!(locked > 0, "the payload is read into the MD with the lock held");
}
