//! The core's events to the event queues their MDs name: the registry of a node's queues, and
//! a router per partition.

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, PoisonError, Weak};

use foldhash::HashMap;
use ulnet_proto::engine::Event;

use super::core::{Core, Shared, leaf};
use super::wake::Wakes;
use crate::event_queue::EqShared;

/// Every event queue an MD of the node named, by id, weak (the application owns its
/// queues): an MD names its queue by id as its handler (`MdSpec::handler`), so ending an MD or
/// routing its events costs no table update; dead ones are swept when it has doubled since
/// the last sweep.
#[derive(Debug)]
pub(crate) struct QueueRegistry {
    queues: HashMap<u64, Weak<EqShared>>,
    sweep_at: usize,
}

impl Default for QueueRegistry {
    fn default() -> Self {
        Self { queues: HashMap::default(), sweep_at: MIN_QUEUE_REGISTRY_SWEEP }
    }
}

/// The smallest size of a [`QueueRegistry`] that is swept for dead queues.
pub(super) const MIN_QUEUE_REGISTRY_SWEEP: usize = 16;

impl QueueRegistry {
    /// Registers `queue`, which an MD just made names by id, unless it is known already.
    pub(super) fn register(&mut self, queue: &Arc<EqShared>) {
        if self.queues.contains_key(&queue.id) {
            return;
        }
        if self.queues.len() >= self.sweep_at {
            self.queues.retain(|_, queue| queue.strong_count() > 0);
            self.sweep_at = (self.queues.len() * 2).max(MIN_QUEUE_REGISTRY_SWEEP);
        }
        self.queues.insert(queue.id, Arc::downgrade(queue));
    }

    /// The live queue of id `id`; a dead one is forgotten.
    fn find(&mut self, id: u64) -> Option<Arc<EqShared>> {
        let queue = self.queues.get(&id).and_then(Weak::upgrade);
        if queue.is_none() {
            self.queues.remove(&id);
        }
        queue
    }

    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.queues.len()
    }

    #[cfg(test)]
    pub(super) fn contains(&self, id: u64) -> bool {
        self.queues.contains_key(&id)
    }
}

/// Routes one partition's events (or, with the core exclusive, the node's), keeping its
/// buffers for their allocations.
#[derive(Default)]
pub(crate) struct EventRouter {
    scratch: VecDeque<Event>,
    targets: Vec<Option<usize>>,
    /// The queues events went to lately, kept across calls so that routing a batch costs no
    /// `Weak::upgrade` and drop (atomic read-modify-writes) per queue; one nobody else holds
    /// any more is let go at the next batch.
    queues: Vec<Arc<EqShared>>,
    run: VecDeque<Event>,
}

/// Hands the node's events (all partitions', the core held exclusively) to their queues.
pub(super) fn route_events(shared: &Arc<Shared>, core: &mut Core, wakes: &mut Wakes) -> bool {
    let Core { engine, event_routers, queue_registry, .. } = core;
    let Some(router) = event_routers.first_mut() else { return false };
    let router = router.get_mut().unwrap_or_else(PoisonError::into_inner);
    router.route(shared, queue_registry, wakes, |into| engine.take_events(into))
}

/// Hands partition `cpt`'s events to their queues, the core shared: under the partition's
/// router lock, so whoever drains the partition keeps its events in order.
pub(super) fn route_events_of(
    shared: &Arc<Shared>,
    core: &Core,
    cpt: u32,
    wakes: &mut Wakes,
) -> bool {
    let Some(router) = usize::try_from(cpt).ok().and_then(|cpt| core.event_routers.get(cpt)) else {
        return false;
    };
    let mut router = leaf(router);
    router.route(shared, &core.queue_registry, wakes, |into| core.engine.take_events_of(cpt, into))
}

impl EventRouter {
    /// Hands the events `take` moves in to the queues their MDs name. When they all go to
    /// one queue (the usual case: one consumer per node), the whole batch moves in at once
    /// under one lock of the queue, traded or appended rather than moved event by event;
    /// otherwise each run of events for one queue goes in under one lock. Returns whether
    /// there were events.
    fn route(
        &mut self,
        shared: &Arc<Shared>,
        registry: &Mutex<QueueRegistry>,
        wakes: &mut Wakes,
        take: impl FnOnce(&mut VecDeque<Event>) -> bool,
    ) -> bool {
        let mut events = std::mem::take(&mut self.scratch);
        if !take(&mut events) {
            self.scratch = events;
            return false;
        }
        // A failed operation is rare and what an administrator chasing lost RPCs needs to see.
        for event in events.iter().filter(|event| !event.status.is_ok()) {
            tracing::debug!(kind = ?event.kind, status = ?event.status, target = %event.target.nid,
                initiator = %event.initiator.nid, sender = %event.sender, portal = event.portal,
                rlength = event.rlength, "operation failed");
        }
        // Where each event goes, as an index into `queues` (None: nowhere). A cached queue
        // whose last handle was dropped is dead, as a failed upgrade would find it; a long
        // list is rebuilt rather than searched.
        let mut queues = std::mem::take(&mut self.queues);
        if queues.len() > MAX_CACHED_QUEUES {
            queues.clear();
        }
        queues.retain(|queue| Arc::strong_count(queue) > 1);
        let mut targets = std::mem::take(&mut self.targets);
        for event in &events {
            let id = event.handler;
            let target = match queues.iter().position(|queue| queue.id == id) {
                Some(index) => Some(index),
                None => leaf(registry).find(id).map(|queue| {
                    queues.push(queue);
                    queues.len() - 1
                }),
            };
            targets.push(target);
        }
        let unrouted = targets.iter().filter(|target| target.is_none()).count();
        let first = targets.first().copied().flatten();
        let single =
            first.filter(|_| unrouted == 0 && targets.iter().all(|target| *target == first));
        if let Some(queue) = single.and_then(|index| queues.get(index)) {
            if queue.push_all(&mut events) {
                wakes.queue(Arc::clone(queue));
            }
        } else {
            let mut run = std::mem::take(&mut self.run);
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
            self.run = run;
        }
        if unrouted > 0 {
            shared.counters.events_unrouted.fetch_add(unrouted as u64, Ordering::Relaxed);
        }
        events.clear();
        targets.clear();
        self.scratch = events;
        self.targets = targets;
        self.queues = queues;
        true
    }
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
