//! How output is cut into writes (`RuntimeStats::socket_writes`): what an event handler's
//! calls send leaves in one write when the handler returns, and a burst is written in halves
//! so that the peer can work the first while the second is produced.

use std::sync::{Arc, Mutex};

use super::*;

fn writes(node: &Node) -> u64 {
    node.stats().runtime.socket_writes
}

fn expect_puts(inbox: &EventQueue, indexes: std::ops::Range<u64>) {
    for index in indexes {
        let put = recv(inbox);
        assert_eq!((put.kind, put.hdr_data), (EventKind::Put, index));
    }
}

#[test]
fn what_a_handler_sends_in_separate_calls_leaves_in_one_write() {
    let port = free_port();
    let (a, b, inbox) = connected(port);
    let md = a.md_bind(MdSpec::new(Memory::new(vec![7; 8])), UnlinkMode::Retain, None).unwrap();
    // Three PUTs, each its own call (its own lock and drain), from a handler of `a` that
    // polls its queue empty between them.
    let sender: Arc<Mutex<Option<(Node, Node)>>> =
        Arc::new(Mutex::new(Some((a.clone(), b.clone()))));
    let queue = a.event_queue_with_handler(4, {
        let sender = Arc::clone(&sender);
        move |queue| {
            let Some((a, b)) = sender.lock().unwrap().take() else { return };
            for index in 0..3 {
                a.put(&put_to_portal_12(&b, md, index)).unwrap();
                // As the selftest service does: poll between calls, until the queue is empty.
                while queue.try_recv().is_ok() {}
            }
        }
    });
    let trigger =
        a.md_bind(MdSpec::new(Memory::new(vec![0])), UnlinkMode::Retain, Some(&queue)).unwrap();
    let before = writes(&a);
    a.md_unlink(trigger).unwrap();
    expect_puts(&inbox, 0..3);
    // Not the first call's PUT alone (as a lone call after a wait would be), nor a write at
    // each empty poll: all three when the handler returned.
    assert_eq!(writes(&a) - before, 1, "three PUTs in one write");
    // The handler is over: calls in a stream nobody waits on are held back again, and the
    // I/O thread writes them (nobody on `a` waits here).
    for index in 3..6 {
        a.put(&put_to_portal_12(&b, md, index)).unwrap();
    }
    expect_puts(&inbox, 3..6);
}

#[test]
fn a_burst_is_written_in_halves() {
    let port = free_port();
    let (a, b, inbox) = connected(port);
    let md = a.md_bind(MdSpec::new(Memory::new(vec![7; 8])), UnlinkMode::Retain, None).unwrap();
    let burst = |first: u64| {
        let before = writes(&a);
        a.batch(|calls| {
            for index in first..first + 8 {
                calls.put(&put_to_portal_12(&b, md, index)).unwrap();
            }
        })
        .unwrap();
        // Whatever was held back is written before a wait.
        let _ = a.event_queue(1).try_recv();
        before
    };
    for round in 0..2 {
        let before = burst(round * 8);
        expect_puts(&inbox, round * 8..round * 8 + 8);
        assert_eq!(writes(&a) - before, 2, "eight PUTs in two writes of four");
    }
}
