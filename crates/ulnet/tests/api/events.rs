//! Event queues: routing, bounds, the blocking and async forms, closing.

use std::pin::Pin;
use std::time::Duration;

use futures_core::Stream;
use ulnet::*;

use crate::*;

#[test]
fn events_go_to_the_queue_their_md_names() {
    let node = Node::loopback().unwrap();
    let (first, second) = (node.event_queue(8), node.event_queue(8));
    let md_one = node.post(3, 1, sink(4), &first).unwrap();
    let md_two = node.post(3, 2, sink(4), &second).unwrap();
    node.put_and_wait_ack(lo_target(&node), 3, 2, Memory::new(vec![2; 4]), HANG_GUARD).unwrap();
    node.put_and_wait_ack(lo_target(&node), 3, 1, Memory::new(vec![1; 4]), HANG_GUARD).unwrap();
    let one = recv(&first);
    let two = recv(&second);
    assert_eq!((one.md, one.match_bits), (md_one, 1));
    assert_eq!((two.md, two.match_bits), (md_two, 2));
    assert!(first.is_empty() && second.is_empty());
}

#[test]
fn an_md_without_a_queue_has_no_events() {
    let node = Node::loopback().unwrap();
    let me =
        node.me_attach(3, ProcessId::ANY, 9, 0, UnlinkMode::Unlink, InsertPosition::After).unwrap();
    node.md_attach(me, sink(4), UnlinkMode::Unlink, None).unwrap();
    node.put_and_wait_ack(lo_target(&node), 3, 9, Memory::new(vec![1; 4]), HANG_GUARD).unwrap();
    assert_eq!(node.stats().runtime.events_unrouted, 0);
    assert_eq!(node.stats().mds, 0);
}

#[test]
fn events_for_a_dropped_queue_are_counted_unrouted() {
    let node = Node::loopback().unwrap();
    let queue = node.event_queue(8);
    let md = node.post(3, 1, sink(4), &queue).unwrap();
    let retained =
        node.md_bind(MdSpec::new(Memory::new(vec![5])), UnlinkMode::Retain, Some(&queue)).unwrap();
    // The queue has taken events, so the runtime has routed to it (and may keep it at hand).
    node.put_and_wait_ack(lo_target(&node), 3, 1, Memory::new(vec![1; 4]), HANG_GUARD).unwrap();
    assert_eq!(recv(&queue).md, md);
    assert_eq!(node.stats().runtime.events_unrouted, 0);
    drop(queue);
    // Unlinking the other MD makes an event for the dropped queue: nobody can read it.
    node.md_unlink(retained).unwrap();
    assert_eq!(node.stats().runtime.events_unrouted, 1);
}

#[test]
fn a_full_queue_drops_and_counts() {
    let node = Node::loopback().unwrap();
    let small = node.event_queue(2);
    assert_eq!(small.capacity(), 2);
    for byte in 0..5u8 {
        let md = node
            .md_bind(MdSpec::new(Memory::new(vec![byte])), UnlinkMode::Retain, Some(&small))
            .unwrap();
        node.md_unlink(md).unwrap();
    }
    assert_eq!((small.len(), small.dropped()), (2, 3));
    assert_eq!(recv(&small).memory.unwrap().to_vec(), [0]);
    assert_eq!(recv(&small).memory.unwrap().to_vec(), [1]);
    assert_eq!(small.try_recv(), Err(RecvError::Empty));
    assert_eq!(node.event_queue(0).capacity(), 1, "capacity is at least one");
}

#[test]
fn blocking_wait_times_out_when_nothing_comes() {
    let node = Node::loopback().unwrap();
    let queue = node.event_queue(4);
    assert_eq!(queue.recv_timeout(Duration::from_millis(20)), Err(RecvError::Timeout));
    assert_eq!(queue.recv_timeout(Duration::ZERO), Err(RecvError::Timeout));
}

#[test]
fn a_blocked_consumer_is_woken_by_another_thread() {
    let fabric = MemFabric::new(LinkConfig::IDEAL);
    let (a, b) = (fabric_node(&fabric, 0), fabric_node(&fabric, 1));
    let inbox = b.event_queue(4);
    b.post(4, 0, sink(3), &inbox).unwrap();
    let waiter = std::thread::spawn(move || inbox.recv_timeout(HANG_GUARD));
    a.put_and_wait_ack(b.process_id(), 4, 0, Memory::new(vec![6; 3]), HANG_GUARD).unwrap();
    let put = waiter.join().unwrap().unwrap();
    assert_eq!(put.memory.unwrap().to_vec(), [6; 3]);
}

#[test]
fn closed_after_shutdown_once_drained() {
    let node = Node::loopback().unwrap();
    let queue = node.event_queue(4);
    node.md_bind(MdSpec::new(Memory::new(vec![8])), UnlinkMode::Retain, Some(&queue)).unwrap();
    node.shutdown();
    assert!(queue.is_closed());
    // Shutdown unlinked the MD: its memory still comes back.
    let unlink = recv(&queue);
    assert_eq!((unlink.kind, unlink.memory.unwrap().to_vec()), (EventKind::Unlink, vec![8]));
    assert_eq!(queue.recv_timeout(HANG_GUARD), Err(RecvError::Closed));
    assert_eq!(queue.try_recv(), Err(RecvError::Closed));
    assert!(node.event_queue(4).is_closed(), "a queue made after shutdown starts closed");
}

#[test]
fn many_at_once_in_order_up_to_the_limit() {
    let node = Node::loopback().unwrap();
    let queue = node.event_queue(8);
    let mut taken = std::collections::VecDeque::new();
    assert_eq!(queue.try_recv_many(&mut taken, 4), Err(RecvError::Empty));
    let mds: Vec<MdHandle> = (0..3u8)
        .map(|i| {
            let spec = MdSpec::new(Memory::new(vec![i]));
            let md = node.md_bind(spec, UnlinkMode::Retain, Some(&queue)).unwrap();
            node.md_unlink(md).unwrap();
            md
        })
        .collect();
    assert_eq!(queue.try_recv_many(&mut taken, 2), Ok(2));
    assert_eq!(queue.len(), 1);
    // Nothing asked for, nothing taken, whatever waits.
    assert_eq!(queue.try_recv_many(&mut taken, 0), Ok(0));
    assert_eq!(queue.try_recv_many(&mut taken, 8), Ok(1));
    assert!(queue.is_empty());
    let order: Vec<MdHandle> = taken.iter().map(|event| event.md).collect();
    assert_eq!(order, mds, "appended in the order they came");
    // All of them into an empty buffer.
    let md = node.md_bind(MdSpec::new(Memory::new(vec![7])), UnlinkMode::Retain, Some(&queue));
    node.md_unlink(md.unwrap()).unwrap();
    let mut all = std::collections::VecDeque::new();
    assert_eq!(queue.try_recv_many(&mut all, 8), Ok(1));
    assert_eq!(all[0].memory.as_ref().map(Memory::to_vec), Some(vec![7]));
    assert!(queue.is_empty());
    node.shutdown();
    assert_eq!(queue.try_recv_many(&mut taken, 8), Err(RecvError::Closed));
    assert_eq!(taken.len(), 3, "an error appends nothing");
}

#[tokio::test]
async fn async_transfers_and_stream() {
    let fabric = MemFabric::new(LinkConfig::IDEAL);
    let (a, b) = (fabric_node(&fabric, 0), fabric_node(&fabric, 1));
    let mut inbox = b.event_queue(8);
    b.post(6, 1, sink(4096), &inbox).unwrap();
    b.post(6, 2, source(pattern(4096, 9)), &inbox).unwrap();
    let data = pattern(4096, 4);
    let done =
        a.put_and_wait_ack_async(b.process_id(), 6, 1, Memory::new(data.clone())).await.unwrap();
    assert_eq!(done.event.kind, EventKind::Ack);
    let reply = a.get_into_async(b.process_id(), 6, 2, vec![0; 4096]).await.unwrap();
    assert_eq!(reply, pattern(4096, 9));

    let put = inbox.next().await.unwrap();
    assert_eq!((put.kind, put.memory.unwrap().to_vec()), (EventKind::Put, data));
    let get = std::future::poll_fn(|context| Pin::new(&mut inbox).poll_next(context)).await;
    assert_eq!(get.unwrap().kind, EventKind::Get);

    // A consumer waiting on the stream is woken by the shutdown and sees the end.
    let waiting = tokio::spawn({
        let inbox = inbox.clone();
        async move { inbox.next().await }
    });
    tokio::task::yield_now().await;
    b.shutdown();
    assert_eq!(waiting.await.unwrap(), None);
}

#[tokio::test]
async fn async_wait_is_woken_across_threads() {
    let node = Node::loopback().unwrap();
    let queue = node.event_queue(4);
    let md = node
        .md_bind(MdSpec::new(Memory::new(vec![1, 2])), UnlinkMode::Retain, Some(&queue))
        .unwrap();
    let unlinker = {
        let node = node.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(10));
            node.md_unlink(md)
        })
    };
    let unlink = tokio::time::timeout(HANG_GUARD, queue.next()).await.unwrap().unwrap();
    assert_eq!(unlink.memory.unwrap().to_vec(), [1, 2]);
    unlinker.join().unwrap().unwrap();
}

#[test]
fn a_handler_runs_on_the_thread_that_produced_the_events() {
    let node = Node::loopback().unwrap();
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let queue = node.event_queue_with_handler(4, {
        let seen = std::sync::Arc::clone(&seen);
        move |queue| {
            while let Ok(event) = queue.try_recv() {
                seen.lock().unwrap().push((std::thread::current().id(), event.kind));
            }
        }
    });
    let md =
        node.md_bind(MdSpec::new(Memory::new(vec![1])), UnlinkMode::Retain, Some(&queue)).unwrap();
    node.md_unlink(md).unwrap();
    // Handled before md_unlink returned, on this thread; nothing is left for consumers.
    assert_eq!(*seen.lock().unwrap(), [(std::thread::current().id(), EventKind::Unlink)]);
    assert_eq!(queue.try_recv(), Err(RecvError::Empty));
}

#[test]
fn events_a_handler_leaves_wake_the_other_consumers() {
    let fabric = MemFabric::new(LinkConfig::IDEAL);
    let (a, b) = (fabric_node(&fabric, 0), fabric_node(&fabric, 1));
    let calls = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let inbox = b.event_queue_with_handler(4, {
        let calls = std::sync::Arc::clone(&calls);
        move |_| {
            calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    });
    b.post(4, 0, sink(3), &inbox).unwrap();
    let waiter = std::thread::spawn(move || inbox.recv_timeout(HANG_GUARD));
    a.put_and_wait_ack(b.process_id(), 4, 0, Memory::new(vec![6; 3]), HANG_GUARD).unwrap();
    let put = waiter.join().unwrap().unwrap();
    assert_eq!(put.memory.unwrap().to_vec(), [6; 3]);
    assert!(calls.load(std::sync::atomic::Ordering::SeqCst) >= 1);
}

#[test]
fn a_handler_takes_what_its_own_calls_produce_without_reentering() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, Mutex};
    let node = Node::loopback().unwrap();
    let second: Arc<Mutex<Option<MdHandle>>> = Arc::new(Mutex::new(None));
    let depth = Arc::new(AtomicUsize::new(0));
    let deepest = Arc::new(AtomicUsize::new(0));
    let unlinked = Arc::new(Mutex::new(Vec::new()));
    let queue = node.event_queue_with_handler(8, {
        let (node, second) = (node.clone(), Arc::clone(&second));
        let (depth, deepest, unlinked) =
            (Arc::clone(&depth), Arc::clone(&deepest), Arc::clone(&unlinked));
        move |queue| {
            let now = depth.fetch_add(1, Ordering::SeqCst) + 1;
            deepest.fetch_max(now, Ordering::SeqCst);
            while let Ok(event) = queue.try_recv() {
                unlinked.lock().unwrap().push(event.memory.unwrap().to_vec());
                // The first unlink makes the handler unlink the second MD itself.
                let md = second.lock().unwrap().take();
                if let Some(md) = md {
                    node.md_unlink(md).unwrap();
                }
            }
            depth.fetch_sub(1, Ordering::SeqCst);
        }
    });
    let bind = |byte: u8| {
        node.md_bind(MdSpec::new(Memory::new(vec![byte])), UnlinkMode::Retain, Some(&queue))
            .unwrap()
    };
    let first = bind(1);
    *second.lock().unwrap() = Some(bind(2));
    node.md_unlink(first).unwrap();
    assert_eq!(*unlinked.lock().unwrap(), [vec![1], vec![2]]);
    assert_eq!(deepest.load(Ordering::SeqCst), 1, "the handler was re-entered");
    assert!(queue.is_empty());
}
