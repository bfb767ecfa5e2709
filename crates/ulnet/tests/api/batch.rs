//! `Node::batch`: several calls under one lock, carried out together at the end.

use ulnet::*;

use crate::*;

#[test]
fn a_batch_posts_binds_and_sends_and_its_events_come_after_it() {
    let fabric = MemFabric::new(LinkConfig::IDEAL);
    let (a, b) = (fabric_node(&fabric, 0), fabric_node(&fabric, 1));
    let inbox = b.event_queue(8);
    let sent = a.event_queue(8);
    let target = b.process_id();
    b.batch(|calls| calls.post(7, 3, sink(4), &inbox).map_err(|rejected| rejected.error))
        .unwrap()
        .unwrap();
    let queued_inside = a
        .batch(|calls| {
            let spec = MdSpec::new(Memory::new(vec![5; 4]));
            let md = calls.md_bind(spec, UnlinkMode::Unlink, Some(&sent)).unwrap();
            let request = PutRequest {
                md,
                ack: false,
                target,
                portal: 7,
                match_bits: 3,
                remote_offset: 0,
                hdr_data: 0,
                source: None,
            };
            calls.put(&request).unwrap();
            // Nothing is carried out before the batch returns.
            sent.len()
        })
        .unwrap();
    assert_eq!(queued_inside, 0);
    assert_eq!(recv(&sent).kind, EventKind::Send);
    let put = recv(&inbox);
    assert_eq!((put.kind, put.memory.unwrap().to_vec()), (EventKind::Put, vec![5; 4]));
}

#[test]
fn errors_inside_a_batch_are_the_calls_own() {
    let node = Node::loopback().unwrap();
    let other = Node::loopback().unwrap();
    let foreign = other.event_queue(4);
    let (unlinked, rejected) = node
        .batch(|calls| {
            let md = calls.md_bind(MdSpec::new(Memory::new(vec![1])), UnlinkMode::Retain, None);
            let md = md.unwrap();
            calls.md_unlink(md).unwrap();
            let spec = MdSpec::new(Memory::new(vec![9]));
            let rejected = calls.md_bind(spec, UnlinkMode::Retain, Some(&foreign)).unwrap_err();
            (calls.md_unlink(md), rejected)
        })
        .unwrap();
    assert!(matches!(unlinked, Err(MdError::Core(_))), "{unlinked:?}");
    assert_eq!(rejected.error, MdBindError::ForeignEventQueue);
    assert_eq!(rejected.memory.to_vec(), [9], "the memory comes back");
}

#[test]
fn a_shut_down_node_runs_no_batch() {
    let node = Node::loopback().unwrap();
    node.shutdown();
    let mut ran = false;
    assert_eq!(node.batch(|_| ran = true), Err(ShutDown));
    assert!(!ran);
}

#[test]
fn every_declared_call_is_also_a_batch_call() {
    // `api_calls!` makes each call that changes a node both ways: the lazy portal, ME and
    // administration calls work inside a batch as they do on the node.
    let fabric = MemFabric::new(LinkConfig::IDEAL);
    let node = fabric_node(&fabric, 0);
    let peer: Nid = "10.9.9.9@tcp".parse().unwrap();
    node.batch(|calls| {
        calls.set_lazy_portal(5).unwrap();
        calls.clear_lazy_portal(5).unwrap();
        let me = calls
            .me_attach(5, ProcessId::ANY, 1, 0, UnlinkMode::Unlink, InsertPosition::After)
            .unwrap();
        calls.me_unlink(me).unwrap();
        calls.peer_add(peer, &[], true, false).unwrap();
        calls.set_peer_ni_priority(peer, 3).unwrap();
        calls.reset_stats().unwrap();
    })
    .unwrap();
    assert_eq!(node.peers().len(), 1);
    assert_eq!(node.stats().mes, 0);
}

#[test]
fn a_shut_down_node_refuses_each_call_with_its_own_error() {
    let node = Node::loopback().unwrap();
    node.shutdown();
    let rejected = node.md_bind(MdSpec::new(Memory::new(vec![7])), UnlinkMode::Retain, None);
    let rejected = rejected.unwrap_err();
    assert_eq!((rejected.error, rejected.memory.to_vec()), (MdBindError::ShutDown, vec![7]));
    assert_eq!(node.set_lazy_portal(1), Err(PortalError::ShutDown));
    assert_eq!(node.peer_add(Nid::LO_0, &[], true, false), Err(AdminError::ShutDown));
    assert_eq!(node.reset_stats(), Err(ShutDown));
}
