//! Shutdown with work in flight: every message finalized, every MD's memory handed back, the
//! I/O thread joined.

use std::collections::HashMap;

use ulnet::*;

use crate::*;

/// Binds `count` send MDs on `node` (threshold 2, for SEND and ACK) and PUTs each to `portal`
/// on `target`. Returns their handles.
fn put_many(
    node: &Node,
    queue: &EventQueue,
    target: ProcessId,
    portal: u32,
    count: u8,
) -> Vec<MdHandle> {
    (0..count).map(|index| put_with_ack(node, target, portal, vec![index; 32], queue)).collect()
}

/// Reads `queue` to its end and returns, per MD, the event that reported it unlinked.
fn final_events(queue: &EventQueue) -> HashMap<MdHandle, Event> {
    let mut finals = HashMap::new();
    loop {
        match queue.recv_timeout(HANG_GUARD) {
            Ok(event) if event.unlinked => {
                assert!(finals.insert(event.md, event).is_none(), "two final events for one MD");
            }
            Ok(_) => {}
            Err(RecvError::Closed) => return finals,
            Err(RecvError::Timeout | RecvError::Empty) => panic!("the queue never closed"),
        }
    }
}

#[test]
fn sender_shutdown_finalizes_messages_held_by_the_fabric() {
    let fabric = MemFabric::new(LinkConfig::IDEAL);
    let (a, b) = (fabric_node(&fabric, 0), fabric_node(&fabric, 1));
    a.discover(fabric_nid(1), false).unwrap();
    // b delays every PUT on portal 30, so a's sends stay in the fabric.
    b.set_lazy_portal(30).unwrap();
    let sent = a.event_queue(64);
    let mds = put_many(&a, &sent, b.process_id(), 30, 8);
    let idle =
        a.md_bind(MdSpec::new(Memory::new(vec![0xee])), UnlinkMode::Retain, Some(&sent)).unwrap();

    a.shutdown();
    let finals = final_events(&sent);
    assert_eq!(finals.len(), 9, "each MD reported unlinked exactly once");
    for (index, md) in mds.iter().enumerate() {
        let event = &finals[md];
        assert_eq!(event.memory.as_ref().unwrap().to_vec(), vec![index as u8; 32]);
    }
    assert_eq!(finals[&idle].kind, EventKind::Unlink);
    let stats = a.stats();
    assert_eq!((stats.messages, stats.mds, stats.runtime.transmits_in_flight), (0, 0, 0));

    // b still holds a's first PUT; resuming it finds the sender gone and fails the receive.
    let inbox = b.event_queue(8);
    b.post(30, 0, sink(32), &inbox).unwrap();
    b.shutdown();
    assert_eq!(b.stats().messages, 0);
}

#[test]
fn receiver_shutdown_fails_what_was_sent_to_it() {
    let fabric = MemFabric::new(LinkConfig::IDEAL);
    let (a, b) = (fabric_node(&fabric, 0), fabric_node(&fabric, 1));
    // Discovery first: a discovery ping b received but never answered would (rightly) wait for
    // the 150 s response timeout, which is not what this test is about.
    a.discover(fabric_nid(1), false).unwrap();
    b.set_lazy_portal(31).unwrap();
    let sent = a.event_queue(64);
    let mds = put_many(&a, &sent, b.process_id(), 31, 5);
    b.shutdown();
    // Every SEND completes, with an error for the ones b never read.
    let mut sends = 0;
    while sends < mds.len() {
        let event = recv(&sent);
        if event.kind == EventKind::Send {
            sends += 1;
        }
    }
    assert_eq!(a.stats().messages, 0);
    assert_eq!(a.stats().runtime.transmits_in_flight, 0);
    // After b is gone, sends to it fail at once.
    let error = a
        .put_and_wait_ack(
            ProcessId::new(fabric_nid(1), LNET_PID_LUSTRE),
            31,
            0,
            Memory::new(vec![1]),
            HANG_GUARD,
        )
        .unwrap_err();
    assert!(matches!(error, TransferError::Failed { kind: EventKind::Send, .. }), "{error:?}");
    // And its NID is free for a new node.
    let _b_again = fabric_node(&fabric, 1);
}

#[test]
fn dropping_the_last_handle_shuts_down() {
    let fabric = MemFabric::new(LinkConfig::IDEAL);
    let node = fabric_node(&fabric, 0);
    let queue = node.event_queue(4);
    node.md_bind(MdSpec::new(Memory::new(vec![4])), UnlinkMode::Retain, Some(&queue)).unwrap();
    let clone = node.clone();
    drop(node);
    assert!(!queue.is_closed(), "a clone keeps the node alive");
    drop(clone);
    assert!(queue.is_closed());
    assert_eq!(recv(&queue).memory.unwrap().to_vec(), [4]);
    assert_eq!(queue.recv_timeout(HANG_GUARD), Err(RecvError::Closed));
    let _again = fabric_node(&fabric, 0);
}

#[test]
fn shutdown_is_idempotent_and_concurrent() {
    let node = Node::loopback().unwrap();
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let node = node.clone();
            std::thread::spawn(move || node.shutdown())
        })
        .collect();
    for thread in threads {
        thread.join().unwrap();
    }
    node.shutdown();
    assert!(node.is_shut_down());
}

#[test]
fn helper_waiting_during_shutdown_returns() {
    let fabric = MemFabric::new(LinkConfig::IDEAL);
    let (a, b) = (fabric_node(&fabric, 0), fabric_node(&fabric, 1));
    // Discovery first: its own messages would otherwise count as "the PUT reached b".
    a.discover(fabric_nid(1), false).unwrap();
    b.set_lazy_portal(32).unwrap();
    let waiter = {
        let a = a.clone();
        let target = b.process_id();
        std::thread::spawn(move || {
            a.put_and_wait_ack(target, 32, 0, Memory::new(vec![1; 8]), HANG_GUARD)
        })
    };
    // Let the PUT reach b, then shut the sender down under the waiting helper.
    let deadline = std::time::Instant::now() + HANG_GUARD;
    while b.stats().messages == 0 {
        assert!(std::time::Instant::now() < deadline, "the PUT never reached b");
        std::thread::yield_now();
    }
    a.shutdown();
    let error = waiter.join().unwrap().unwrap_err();
    assert!(matches!(error, TransferError::Failed { kind: EventKind::Send, .. }), "{error:?}");
}
