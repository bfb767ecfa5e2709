//! The response tracker queue: MDs waiting for an ACK or REPLY, by deadline.
//!
//! lustre: lnet/lnet/lib-move.c (`lnet_attach_rsp_tracker`, `lnet_detach_rsp_tracker`,
//! `lnet_finalize_expired_responses`), docs/protocol/semantics.md §4.4. Deadlines are not monotonic (the
//! transaction timeout can change at run time, and recovery probes use a shorter one), so
//! the queue is a min-heap. Detaching leaves a stale entry (skipped when popped); the queue
//! is compacted when stale entries outnumber live ones, so its length stays under twice the
//! live count plus a constant.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashSet};

use crate::engine::slab::Key;
use crate::time::Time;

/// Entries tolerated beyond twice the live trackers before compaction.
const COMPACTION_SLACK: usize = 64;

#[derive(Debug, Default)]
pub(crate) struct TrackerQueue {
    heap: BinaryHeap<Reverse<(Time, Key)>>,
}

impl TrackerQueue {
    pub(crate) fn push(&mut self, deadline: Time, md: Key) {
        self.heap.push(Reverse((deadline, md)));
    }

    /// The earliest entry.
    pub(crate) fn front(&self) -> Option<(Time, Key)> {
        self.heap.peek().map(|Reverse(entry)| *entry)
    }

    pub(crate) fn pop_front(&mut self) -> Option<(Time, Key)> {
        self.heap.pop().map(|Reverse(entry)| entry)
    }

    pub(crate) fn len(&self) -> usize {
        self.heap.len()
    }

    /// Every entry, in no particular order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (Time, Key)> + '_ {
        self.heap.iter().map(|Reverse(entry)| *entry)
    }

    /// Drops stale and repeated entries when they dominate; `is_live` tells a current entry.
    /// Repeats happen when a tracker is detached and attached again at the same instant:
    /// both entries match the live deadline, and only one may stay for the bound to hold.
    pub(crate) fn maybe_compact(&mut self, live: usize, is_live: impl Fn(Time, Key) -> bool) {
        if self.heap.len() > 2 * live + COMPACTION_SLACK {
            let mut kept = HashSet::with_capacity(live);
            self.heap.retain(|Reverse((deadline, md))| {
                is_live(*deadline, *md) && kept.insert((*deadline, *md))
            });
        }
    }

    /// The bound the invariant checker enforces.
    pub(crate) fn bound(live: usize) -> usize {
        2 * live + COMPACTION_SLACK + 1
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
        let mut queue = TrackerQueue::default();
        queue.push(Time::from_secs(5), key(1));
        queue.push(Time::from_secs(2), key(2));
        queue.push(Time::from_secs(9), key(3));
        assert_eq!(queue.front(), Some((Time::from_secs(2), key(2))));
        assert_eq!(queue.pop_front(), Some((Time::from_secs(2), key(2))));
        assert_eq!(queue.pop_front(), Some((Time::from_secs(5), key(1))));
        for index in 0..200 {
            queue.push(Time::from_secs(10), key(index));
        }
        queue.maybe_compact(1, |deadline, md| md == key(3) && deadline == Time::from_secs(9));
        assert_eq!(queue.len(), 1);
        assert!(queue.len() <= TrackerQueue::bound(1));
    }
}
