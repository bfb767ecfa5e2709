//! PUT/ACK and GET/REPLY through `0@lo`, where everything completes on the caller's thread.

use ulnet::*;

use crate::*;

#[test]
fn put_with_ack_delivers_every_size() {
    let node = Node::loopback().unwrap();
    let inbox = node.event_queue(16);
    for (round, size) in SIZES.into_iter().enumerate() {
        let bits = 0x100 + round as u64;
        let target_md = node.post(4, bits, sink(size), &inbox).unwrap();
        let data = pattern(size, round as u8);
        let done = node
            .put_and_wait_ack(lo_target(&node), 4, bits, Memory::new(data.clone()), HANG_GUARD)
            .unwrap();
        assert_eq!(done.event.kind, EventKind::Ack);
        assert_eq!(done.event.mlength as usize, size);
        assert_eq!(done.memory.to_vec(), data, "the source memory comes back unchanged");

        let put = recv(&inbox);
        assert_eq!(put.kind, EventKind::Put);
        assert_eq!(put.md, target_md);
        assert_eq!(put.status, EventStatus::Ok);
        assert_eq!((put.portal, put.match_bits), (4, bits));
        assert_eq!((put.rlength as usize, put.mlength as usize), (size, size));
        assert_eq!(put.initiator.pid, node.pid());
        assert!(put.unlinked, "threshold 1: the PUT is the MD's last event");
        assert_eq!(put.memory.unwrap().to_vec(), data);
    }
    assert!(inbox.is_empty());
    assert_eq!(node.stats().messages, 0);
}

#[test]
fn get_with_reply_returns_every_size() {
    let node = Node::loopback().unwrap();
    let served = node.event_queue(16);
    for (round, size) in SIZES.into_iter().enumerate() {
        let bits = 0x200 + round as u64;
        let data = pattern(size, 7 + round as u8);
        let served_md = node.post(5, bits, source(data.clone()), &served).unwrap();
        let reply = node.get_into(lo_target(&node), 5, bits, vec![0; size], HANG_GUARD).unwrap();
        assert_eq!(reply, data);

        let get = recv(&served);
        assert_eq!(get.kind, EventKind::Get);
        assert_eq!(get.md, served_md);
        assert_eq!(get.mlength as usize, size);
        assert!(get.unlinked);
        assert_eq!(get.memory.unwrap().to_vec(), data, "the served memory comes back");
    }
    assert_eq!(node.stats().messages, 0);
}

#[test]
fn primitives_report_every_event_field() {
    let node = Node::loopback().unwrap();
    let events = node.event_queue(16);
    let me = node
        .me_attach(6, ProcessId::ANY, 0xf0, 0x0f, UnlinkMode::Unlink, InsertPosition::After)
        .unwrap();
    let target = MdSpec::new(Memory::new(vec![0; 32]))
        .options(MdOptions::OP_PUT | MdOptions::MANAGE_REMOTE)
        .threshold(Threshold::Count(1))
        .user_ptr(77);
    let target_md = node.md_attach(me, target, UnlinkMode::Unlink, Some(&events)).unwrap();
    let spec =
        MdSpec::new(Memory::new(b"abcd".to_vec())).threshold(Threshold::Count(2)).user_ptr(5);
    let md = node.md_bind(spec, UnlinkMode::Unlink, Some(&events)).unwrap();
    node.put(&PutRequest {
        md,
        ack: true,
        target: lo_target(&node),
        portal: 6,
        match_bits: 0xf3, // matches 0xf0 with the low bits ignored
        remote_offset: 8,
        hdr_data: 0xdead_beef,
        source: None,
    })
    .unwrap();

    let put = recv(&events);
    assert_eq!(put.kind, EventKind::Put);
    assert_eq!((put.md, put.user_ptr), (target_md, 77));
    assert_eq!((put.match_bits, put.offset, put.hdr_data), (0xf3, 8, 0xdead_beef));
    let memory = put.memory.unwrap().to_vec();
    assert_eq!(&memory[8..12], b"abcd");
    assert!(memory[..8].iter().chain(&memory[12..]).all(|byte| *byte == 0));

    let send = recv(&events);
    assert_eq!((send.kind, send.md, send.user_ptr), (EventKind::Send, md, 5));
    assert_eq!(send.status, EventStatus::Ok);
    assert!(!send.unlinked);
    let ack = recv(&events);
    assert_eq!((ack.kind, ack.md, ack.mlength), (EventKind::Ack, md, 4));
    assert!(ack.unlinked);
    assert_eq!(ack.memory.unwrap().to_vec(), b"abcd");
}

#[test]
fn multi_segment_memory_round_trips() {
    let node = Node::loopback().unwrap();
    let inbox = node.event_queue(8);
    let segments = vec![vec![0; 3], Vec::new(), vec![0; 5000], vec![0; 1]];
    let spec = MdSpec::new(Memory::from_segments(segments).unwrap())
        .options(MdOptions::OP_PUT)
        .threshold(Threshold::Count(1));
    node.post(7, 1, spec, &inbox).unwrap();
    let data = pattern(5004, 3);
    let pieces = vec![data[..1000].to_vec(), data[1000..].to_vec()];
    let done = node
        .put_and_wait_ack(
            lo_target(&node),
            7,
            1,
            Memory::from_segments(pieces).unwrap(),
            HANG_GUARD,
        )
        .unwrap();
    assert_eq!(done.memory.segments().len(), 2, "segments come back as they went");
    let put = recv(&inbox);
    let memory = put.memory.unwrap();
    assert_eq!(memory.segments().len(), 4);
    assert_eq!(memory.to_vec(), data);
}

#[test]
fn live_md_memory_is_readable_and_writable() {
    let node = Node::loopback().unwrap();
    let inbox = node.event_queue(8);
    // Infinite threshold: the MD stays after the PUT, and its data is read in place.
    let spec = MdSpec::new(Memory::new(vec![0; 8])).options(MdOptions::OP_PUT);
    let md = node.post(8, 2, spec, &inbox).unwrap();
    node.put_and_wait_ack(lo_target(&node), 8, 2, Memory::new(vec![1, 2, 3]), HANG_GUARD).unwrap();
    let put = recv(&inbox);
    assert!(!put.unlinked && put.memory.is_none());
    assert_eq!(
        node.with_md_memory(md, |memory| memory.to_vec()).unwrap(),
        [1, 2, 3, 0, 0, 0, 0, 0]
    );
    node.with_md_memory_mut(md, |memory| memory.write_at(7, &[9])).unwrap();
    node.md_unlink(md).unwrap();
    let unlink = recv(&inbox);
    assert_eq!(unlink.kind, EventKind::Unlink);
    assert_eq!(unlink.memory.unwrap().to_vec(), [1, 2, 3, 0, 0, 0, 0, 9]);
}
