//! Nodes talking to each other over TCP.

use ulnet::*;

use crate::*;

#[test]
fn two_nodes_put_and_get_every_size() {
    let port = free_port();
    let (a, b) = (tcp_node(0, port), tcp_node(1, port));
    let inbox = b.event_queue(16);
    for (round, size) in SIZES.into_iter().enumerate() {
        let bits = round as u64;
        let data = pattern(size, round as u8);
        b.post(10, bits, sink(size), &inbox).unwrap();
        let done = a
            .put_and_wait_ack(b.process_id(), 10, bits, Memory::new(data.clone()), HANG_GUARD)
            .unwrap();
        assert_eq!(done.event.mlength as usize, size);
        assert_eq!(done.event.source, tcp_nid(1), "the ACK comes from b");
        let put = recv(&inbox);
        assert_eq!(put.kind, EventKind::Put);
        assert_eq!(put.initiator.nid, tcp_nid(0));
        assert_eq!(put.memory.unwrap().to_vec(), data);

        let served = pattern(size, 100 + round as u8);
        b.post(11, bits, source(served.clone()), &inbox).unwrap();
        let reply = a.get_into(b.process_id(), 11, bits, vec![0; size], HANG_GUARD).unwrap();
        assert_eq!(reply, served);
        let get = recv(&inbox);
        assert_eq!(get.kind, EventKind::Get);
    }
    assert_eq!((a.stats().messages, b.stats().messages), (0, 0));
    let (sa, sb) = (a.tcp_stats(), b.tcp_stats());
    assert_eq!(sa.protocol_errors + sb.protocol_errors, 0);
    assert!(sa.conns_dialled >= 1, "{sa:?}");
    assert!(sb.conns_accepted >= 1, "{sb:?}");
}
