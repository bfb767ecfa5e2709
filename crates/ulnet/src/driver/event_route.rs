//! The core's events to the event queues their MDs name.

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};

use ulnet_proto::engine::Event;

use super::core::{Core, Shared};
use super::wake::Wakes;
use crate::event_queue::EqShared;

/// Hands the core's events to the queues their MDs name. When they all go to one queue (the
/// usual case: one consumer per node), the whole batch moves in at once under one lock of the
/// queue, traded or appended rather than moved event by event; otherwise each run of events
/// for one queue goes in under one lock. Returns whether there were events.
pub(super) fn route_events(shared: &Arc<Shared>, core: &mut Core, wakes: &mut Wakes) -> bool {
    let mut events = std::mem::take(&mut core.event_scratch);
    if !core.engine.take_events(&mut events) {
        core.event_scratch = events;
        return false;
    }
    // Where each event goes, as an index into `queues` (None: nowhere). A cached queue whose
    // last handle was dropped is dead, as a failed upgrade would find it; a long list is
    // rebuilt rather than searched.
    // A failed operation is rare and what an administrator chasing lost RPCs needs to see.
    for event in events.iter().filter(|event| !event.status.is_ok()) {
        tracing::debug!(kind = ?event.kind, status = ?event.status, target = %event.target.nid,
            initiator = %event.initiator.nid, sender = %event.sender, portal = event.portal,
            rlength = event.rlength, "operation failed");
    }
    let mut queues = std::mem::take(&mut core.event_queues);
    if queues.len() > MAX_CACHED_QUEUES {
        queues.clear();
    }
    queues.retain(|queue| Arc::strong_count(queue) > 1);
    let mut targets = std::mem::take(&mut core.event_targets);
    for event in &events {
        let id = event.handler;
        let target = match queues.iter().position(|queue| queue.id == id) {
            Some(index) => Some(index),
            None => {
                let queue = core.queue_registry.get(&id).and_then(Weak::upgrade);
                if queue.is_none() {
                    core.queue_registry.remove(&id);
                }
                queue.map(|queue| {
                    queues.push(queue);
                    queues.len() - 1
                })
            }
        };
        targets.push(target);
    }
    let unrouted = targets.iter().filter(|target| target.is_none()).count();
    let first = targets.first().copied().flatten();
    let single = first.filter(|_| unrouted == 0 && targets.iter().all(|target| *target == first));
    if let Some(queue) = single.and_then(|index| queues.get(index)) {
        if queue.push_all(&mut events) {
            wakes.queue(Arc::clone(queue));
        }
    } else {
        let mut run = std::mem::take(&mut core.event_run);
        let mut current = None;
        for (event, target) in events.drain(..).zip(targets.iter().copied()) {
            let Some(target) = target else { continue };
            if current != Some(target) {
                if let Some(queue) = current.and_then(|previous| queues.get(previous)) {
                    push_run(queue, &mut run, wakes);
                }
                current = Some(target);
            }
            run.push_back(event);
        }
        if let Some(queue) = current.and_then(|last| queues.get(last)) {
            push_run(queue, &mut run, wakes);
        }
        core.event_run = run;
    }
    if unrouted > 0 {
        shared.counters.events_unrouted.fetch_add(unrouted as u64, Ordering::Relaxed);
    }
    events.clear();
    targets.clear();
    core.event_scratch = events;
    core.event_targets = targets;
    core.event_queues = queues;
    true
}

/// How many event queues [`route_events`] keeps between batches (a node has one consumer
/// in the usual case, a few with services such as the selftest one).
const MAX_CACHED_QUEUES: usize = 8;

fn push_run(queue: &Arc<EqShared>, run: &mut VecDeque<Event>, wakes: &mut Wakes) {
    // `push_all` leaves `run` empty whatever it does.
    if queue.push_all(run) {
        wakes.queue(Arc::clone(queue));
    }
}
