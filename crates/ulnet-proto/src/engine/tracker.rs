//! The response trackers: the queue of MDs waiting for an ACK or REPLY, by deadline, how
//! many trackers are attached, and the request boxes of finished ones kept for reuse. The
//! trackers themselves sit in their MDs (`md.rs`).
//!
//! lustre: lnet/lnet/lib-move.c (`lnet_attach_rsp_tracker`, `lnet_detach_rsp_tracker`,
//! `lnet_finalize_expired_responses`), docs/protocol/semantics.md §4.4. Deadlines are not monotonic (the
//! transaction timeout can change at run time, and recovery probes use a shorter one), so
//! the queue is a min-heap. Detaching leaves a stale entry (skipped when popped); the queue
//! is compacted when stale entries outnumber live ones, so its length stays under twice the
//! live count plus a constant.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashSet};

use crate::engine::md::TrackedRequest;
use crate::engine::per_partition::PerPartition;
use crate::engine::slab::{Key, KeyPartitions};
use crate::time::Time;

/// Entries tolerated beyond twice the live trackers before compaction.
const COMPACTION_SLACK: usize = 64;
/// Finished trackers' request boxes kept for reuse (more than the requests a burst starts).
const SPARE_REQUESTS: usize = 64;

type Queue = BinaryHeap<Reverse<(Time, Key)>>;

#[derive(Debug)]
pub(crate) struct Trackers {
    /// A heap per partition, by the partition each MD's key names.
    queues: PerPartition<Queue>,
    partitions: KeyPartitions,
    /// Trackers attached to MDs.
    live: usize,
    /// Boxes of finished trackers' requests, reused: every tracked request needs one (the
    /// boxes themselves are what is kept, hence a `Vec` of them).
    #[allow(clippy::vec_box)]
    spare_requests: Vec<Box<TrackedRequest>>,
    /// Partitions whose heap may hold a stale entry in front (a tracker was re-armed or
    /// detached there), one bit each: pruned by the call that made them so, each heap by
    /// itself, so no call reads another partition's MDs to prune.
    stale: u64,
    /// The partitions whose heap took an entry since the last `take_touched` (the audit).
    #[cfg(test)]
    touched: u64,
}

impl Trackers {
    pub(crate) fn new(partitions: KeyPartitions) -> Self {
        Self {
            queues: PerPartition::new(partitions.count(), Queue::new),
            partitions,
            live: 0,
            spare_requests: Vec::new(),
            stale: 0,
            #[cfg(test)]
            touched: 0,
        }
    }

    /// The partitions whose heap took an entry since the last call (the audit).
    #[cfg(test)]
    pub(crate) fn take_touched(&mut self) -> u64 {
        std::mem::take(&mut self.touched)
    }

    /// Trackers attached to MDs.
    pub(crate) fn live(&self) -> usize {
        self.live
    }

    /// A tracker was attached; returns the new live count.
    pub(crate) fn attached(&mut self) -> usize {
        self.live += 1;
        self.live
    }

    /// A tracker was detached; its request box is kept for reuse. Returns the new live count.
    pub(crate) fn detached(&mut self, request: Option<Box<TrackedRequest>>) -> usize {
        self.live = self.live.saturating_sub(1);
        if let Some(request) = request {
            if self.spare_requests.len() < SPARE_REQUESTS {
                self.spare_requests.push(request);
            }
        }
        self.live
    }

    /// `request` in a box, a spare one if any.
    pub(crate) fn boxed_request(&mut self, request: TrackedRequest) -> Box<TrackedRequest> {
        match self.spare_requests.pop() {
            Some(mut spare) => {
                *spare = request;
                spare
            }
            None => Box::new(request),
        }
    }

    pub(crate) fn push(&mut self, deadline: Time, md: Key) {
        let cpt = self.partitions.of(md).unwrap_or(0) as usize;
        #[cfg(test)]
        {
            self.touched |= 1 << cpt.min(63);
        }
        if let Some(queue) = self.queues.get_mut(cpt) {
            queue.push(Reverse((deadline, md)));
        }
    }

    /// The partition whose heap holds the earliest entry, and that entry.
    fn earliest(&self) -> Option<(usize, (Time, Key))> {
        self.queues
            .iter()
            .enumerate()
            .filter_map(|(cpt, queue)| queue.peek().map(|Reverse(entry)| (cpt, *entry)))
            .min_by_key(|(_, entry)| *entry)
    }

    /// `md`'s tracker was re-armed or detached: its partition's heap may have a stale front.
    pub(crate) fn mark_stale(&mut self, md: Key) {
        let cpt = self.partitions.of(md).unwrap_or(0);
        self.stale |= 1 << cpt.min(63);
    }

    /// The partitions marked stale since the last call, and forgets them.
    pub(crate) fn take_stale(&mut self) -> impl Iterator<Item = u32> + use<> {
        let mut stale = std::mem::take(&mut self.stale);
        std::iter::from_fn(move || {
            let cpt = (stale != 0).then(|| stale.trailing_zeros())?;
            stale &= stale - 1;
            Some(cpt)
        })
    }

    /// The earliest entry of partition `cpt`'s heap.
    pub(crate) fn front_in(&self, cpt: u32) -> Option<(Time, Key)> {
        self.queues.get(cpt as usize)?.peek().map(|Reverse(entry)| *entry)
    }

    /// Pops partition `cpt`'s earliest entry.
    pub(crate) fn pop_front_in(&mut self, cpt: u32) -> Option<(Time, Key)> {
        self.queues.get_mut(cpt as usize)?.pop().map(|Reverse(entry)| entry)
    }

    /// The earliest entry.
    pub(crate) fn front(&self) -> Option<(Time, Key)> {
        self.earliest().map(|(_, entry)| entry)
    }

    pub(crate) fn pop_front(&mut self) -> Option<(Time, Key)> {
        let (cpt, _) = self.earliest()?;
        self.queues.get_mut(cpt)?.pop().map(|Reverse(entry)| entry)
    }

    pub(crate) fn len(&self) -> usize {
        self.queues.iter().map(Queue::len).sum()
    }

    /// Every entry, in no particular order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (Time, Key)> + '_ {
        self.queues.iter().flatten().map(|Reverse(entry)| *entry)
    }

    /// Drops stale and repeated entries when they dominate; `is_live` tells a current entry.
    /// Repeats happen when a tracker is detached and attached again at the same instant:
    /// both entries match the live deadline, and only one may stay for the bound to hold.
    pub(crate) fn maybe_compact(&mut self, is_live: impl Fn(Time, Key) -> bool) {
        if self.len() > 2 * self.live + COMPACTION_SLACK {
            let mut kept = HashSet::with_capacity(self.live);
            for queue in self.queues.iter_mut() {
                queue.retain(|Reverse((deadline, md))| {
                    is_live(*deadline, *md) && kept.insert((*deadline, *md))
                });
            }
        }
    }

    /// The bound the invariant checker enforces.
    pub(crate) fn bound(&self) -> usize {
        2 * self.live + COMPACTION_SLACK + 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(index: u32) -> Key {
        Key { index, generation: 0 }
    }

    #[test]
    fn pops_in_deadline_order_and_compacts() {
        let mut queue = Trackers::new(KeyPartitions::new(1));
        queue.attached();
        queue.push(Time::from_secs(5), key(1));
        queue.push(Time::from_secs(2), key(2));
        queue.push(Time::from_secs(9), key(3));
        assert_eq!(queue.front(), Some((Time::from_secs(2), key(2))));
        assert_eq!(queue.pop_front(), Some((Time::from_secs(2), key(2))));
        assert_eq!(queue.pop_front(), Some((Time::from_secs(5), key(1))));
        for index in 0..200 {
            queue.push(Time::from_secs(10), key(index));
        }
        queue.maybe_compact(|deadline, md| md == key(3) && deadline == Time::from_secs(9));
        assert_eq!(queue.len(), 1);
        assert!(queue.len() <= queue.bound());
    }

    #[test]
    fn the_earliest_of_every_partitions_heap_goes_first() {
        let mut queue = Trackers::new(KeyPartitions::new(3));
        // Keys of partitions 1, 2, 0 and 1 (the low two bits of the index).
        let entries = [(7, 1), (3, 2 | 4), (5, 4), (3, 1 | 8)];
        for (secs, index) in entries {
            queue.push(Time::from_secs(secs), key(index));
        }
        assert_eq!(queue.queues.iter().map(Queue::len).collect::<Vec<_>>(), [1, 2, 1]);
        let order: Vec<_> = std::iter::from_fn(|| queue.pop_front()).collect();
        let expected = [(3, 2 | 4), (3, 1 | 8), (5, 4), (7, 1)];
        assert_eq!(order, expected.map(|(secs, index)| (Time::from_secs(secs), key(index))));
        assert_eq!(queue.len(), 0);
    }
}
