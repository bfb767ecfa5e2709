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

/// Three PUTs from a handler of `a`, each its own call, numbered from `first`: the writes
/// they took.
fn handler_puts(a: &Node, b: &Node, md: MdHandle, inbox: &EventQueue, first: u64) -> u64 {
    let sender: Arc<Mutex<Option<(Node, Node)>>> =
        Arc::new(Mutex::new(Some((a.clone(), b.clone()))));
    let queue = a.event_queue_with_handler(4, {
        let sender = Arc::clone(&sender);
        move |queue| {
            let Some((a, b)) = sender.lock().unwrap().take() else { return };
            for index in first..first + 3 {
                a.put(&put_to_portal_12(&b, md, index)).unwrap();
                // As the selftest service does: poll between calls, until the queue is empty.
                while queue.try_recv().is_ok() {}
            }
        }
    });
    let trigger =
        a.md_bind(MdSpec::new(Memory::new(vec![0])), UnlinkMode::Retain, Some(&queue)).unwrap();
    let before = writes(a);
    a.md_unlink(trigger).unwrap();
    expect_puts(inbox, first..first + 3);
    writes(a) - before
}

#[test]
fn what_a_handler_sends_in_separate_calls_leaves_in_one_write() {
    let port = free_port();
    let (a, b, inbox) = connected(port);
    let md = a.md_bind(MdSpec::new(Memory::new(vec![7; 8])), UnlinkMode::Retain, None).unwrap();
    // Not the first call's PUT alone (as a lone call after a wait would be), nor a write at
    // each empty poll: all three when the handler returned. The I/O thread of `a` may write
    // the first PUT itself when it runs meanwhile (finishing earlier traffic, or with the
    // handler's thread preempted on a loaded host), so one try in several is asked to show it.
    let counts: Vec<u64> =
        (0..8).map(|attempt| handler_puts(&a, &b, md, &inbox, attempt * 3)).collect();
    assert!(counts.iter().all(|count| (1..=3).contains(count)), "{counts:?}");
    assert!(counts.contains(&1), "three PUTs in one write: {counts:?}");
    // The handler is over: calls in a stream nobody waits on are held back again, and the
    // I/O thread writes them (nobody on `a` waits here).
    for index in 100..103 {
        a.put(&put_to_portal_12(&b, md, index)).unwrap();
    }
    expect_puts(&inbox, 100..103);
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
