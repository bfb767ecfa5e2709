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
use crate::engine::shares::Shares;
use crate::engine::slab::Key;
use crate::engine::view::{Access, Exclusive};
use crate::time::Time;

/// Entries tolerated beyond twice the live trackers before compaction.
const COMPACTION_SLACK: usize = 64;
/// Finished trackers' request boxes kept for reuse (more than the requests a burst starts).
const SPARE_REQUESTS: usize = 64;

type Queue = BinaryHeap<Reverse<(Time, Key)>>;

/// One partition's trackers: a heap of the deadlines of its MDs' trackers, how many are
/// attached, and spare request boxes (the kernel's `the_lnet.ln_mt_rstq[cpt]`).
#[derive(Debug, Default)]
pub(crate) struct Trackers {
    queue: Queue,
    /// Trackers attached to this partition's MDs.
    live: usize,
    /// Boxes of finished trackers' requests, reused: every tracked request needs one (the
    /// boxes themselves are what is kept, hence a `Vec` of them).
    #[allow(clippy::vec_box)]
    spare_requests: Vec<Box<TrackedRequest>>,
    /// The heap may hold a stale entry in front (a tracker was re-armed or detached here):
    /// pruned by the call that made it so, each heap by itself, so no call reads another
    /// partition's MDs to prune.
    stale: bool,
    /// Whether the heap took an entry since the audit last took it.
    #[cfg(test)]
    touched: bool,
}

impl Trackers {
    /// This partition's earliest entry.
    pub(crate) fn front(&self) -> Option<(Time, Key)> {
        self.queue.peek().map(|Reverse(entry)| *entry)
    }

    /// The bound the invariant checker holds the heap to.
    fn bound(&self) -> usize {
        2 * self.live + COMPACTION_SLACK + 1
    }

    /// Drops stale and repeated entries when they dominate; `is_live` tells a current entry.
    /// Repeats happen when a tracker is detached and attached again at the same instant:
    /// both entries match the live deadline, and only one may stay for the bound to hold.
    fn maybe_compact(&mut self, is_live: impl Fn(Time, Key) -> bool) {
        if self.queue.len() > 2 * self.live + COMPACTION_SLACK {
            let mut kept = HashSet::with_capacity(self.live);
            self.queue.retain(|Reverse((deadline, md))| {
                is_live(*deadline, *md) && kept.insert((*deadline, *md))
            });
        }
    }
}

impl<'a, A: Access> Shares<'a, A, Trackers> {
    /// Trackers attached to MDs of the partitions held.
    pub(crate) fn live(&self) -> usize {
        self.iter_shares().map(|(_, share)| share.live).sum()
    }

    /// The partition whose heap holds the earliest entry, and that entry.
    fn earliest(&self) -> Option<(u32, (Time, Key))> {
        self.iter_shares()
            .filter_map(|(cpt, share)| share.queue.peek().map(|Reverse(entry)| (cpt, *entry)))
            .min_by_key(|(_, entry)| *entry)
    }

    /// The earliest entry.
    pub(crate) fn front(&self) -> Option<(Time, Key)> {
        self.earliest().map(|(_, entry)| entry)
    }

    /// The earliest entry of partition `cpt`'s heap.
    pub(crate) fn front_in(&self, cpt: u32) -> Option<(Time, Key)> {
        self.share(cpt)?.queue.peek().map(|Reverse(entry)| *entry)
    }

    pub(crate) fn len(&self) -> usize {
        self.iter_shares().map(|(_, share)| share.queue.len()).sum()
    }

    /// Every entry, in no particular order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (Time, Key)> + '_ {
        self.iter_shares().flat_map(|(_, share)| share.queue.iter().map(|Reverse(entry)| *entry))
    }

    /// The bound the invariant checker enforces, summed over the partitions held.
    pub(crate) fn bound(&self) -> usize {
        self.iter_shares().map(|(_, share)| share.bound()).sum()
    }
}

impl<'a> Shares<'a, Exclusive, Trackers> {
    /// A tracker was attached to MD `md`.
    pub(crate) fn attached(&mut self, md: Key) {
        if let Some(share) = self.share_of_mut(md) {
            share.live += 1;
        }
    }

    /// MD `md`'s tracker was detached; its request box is kept for reuse.
    pub(crate) fn detached(&mut self, md: Key, request: Option<Box<TrackedRequest>>) {
        let Some(share) = self.share_of_mut(md) else {
            return;
        };
        share.live = share.live.saturating_sub(1);
        if let Some(request) = request {
            if share.spare_requests.len() < SPARE_REQUESTS {
                share.spare_requests.push(request);
            }
        }
    }

    /// `request` for MD `md`'s tracker in a box, a spare one of its partition if any.
    pub(crate) fn boxed_request(
        &mut self,
        md: Key,
        request: TrackedRequest,
    ) -> Box<TrackedRequest> {
        match self.share_of_mut(md).and_then(|share| share.spare_requests.pop()) {
            Some(mut spare) => {
                *spare = request;
                spare
            }
            None => Box::new(request),
        }
    }

    /// Queues MD `md`'s tracker deadline in its partition's heap.
    pub(crate) fn push(&mut self, deadline: Time, md: Key) {
        if let Some(share) = self.share_of_mut(md) {
            #[cfg(test)]
            {
                share.touched = true;
            }
            share.queue.push(Reverse((deadline, md)));
        }
    }

    /// `md`'s tracker was re-armed or detached: its partition's heap may have a stale front.
    pub(crate) fn mark_stale(&mut self, md: Key) {
        if let Some(share) = self.share_of_mut(md) {
            share.stale = true;
        }
    }

    /// Whether each partition held had its heap take an entry since the audit last took it,
    /// one bit each.
    #[cfg(test)]
    pub(crate) fn take_touched(&mut self) -> u64 {
        self.iter_shares_mut()
            .filter_map(|(cpt, share)| std::mem::take(&mut share.touched).then_some(cpt))
            .fold(0, |bits, cpt| bits | 1 << cpt.min(63))
    }

    /// The partitions held that were marked stale since the last call, and forgets them.
    pub(crate) fn take_stale(&mut self) -> impl Iterator<Item = u32> + use<> {
        let mut stale = self
            .iter_shares_mut()
            .filter_map(|(cpt, share)| std::mem::take(&mut share.stale).then_some(cpt))
            .fold(0u64, |bits, cpt| bits | 1 << cpt.min(63));
        std::iter::from_fn(move || {
            let cpt = (stale != 0).then(|| stale.trailing_zeros())?;
            stale &= stale - 1;
            Some(cpt)
        })
    }

    /// Pops partition `cpt`'s earliest entry.
    pub(crate) fn pop_front_in(&mut self, cpt: u32) -> Option<(Time, Key)> {
        self.share_mut(cpt)?.queue.pop().map(|Reverse(entry)| entry)
    }

    pub(crate) fn pop_front(&mut self) -> Option<(Time, Key)> {
        let (cpt, _) = self.earliest()?;
        self.pop_front_in(cpt)
    }

    /// Compacts the heap of `md`'s partition when stale entries dominate it.
    pub(crate) fn maybe_compact(&mut self, md: Key, is_live: impl Fn(Time, Key) -> bool) {
        if let Some(share) = self.share_of_mut(md) {
            share.maybe_compact(is_live);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::shares::Owned;
    use crate::engine::slab::KeyPartitions;

    fn key(index: u32) -> Key {
        Key { index, generation: 0 }
    }

    #[test]
    fn pops_in_deadline_order_and_compacts() {
        let mut owned = Owned::new(KeyPartitions::new(1), |_, _| Trackers::default());
        let mut queue = owned.exclusive();
        queue.attached(key(3));
        queue.push(Time::from_secs(5), key(1));
        queue.push(Time::from_secs(2), key(2));
        queue.push(Time::from_secs(9), key(3));
        assert_eq!(queue.front(), Some((Time::from_secs(2), key(2))));
        assert_eq!(queue.pop_front(), Some((Time::from_secs(2), key(2))));
        assert_eq!(queue.pop_front(), Some((Time::from_secs(5), key(1))));
        for index in 0..200 {
            queue.push(Time::from_secs(10), key(index));
        }
        queue.maybe_compact(key(3), |deadline, md| md == key(3) && deadline == Time::from_secs(9));
        assert_eq!(queue.len(), 1);
        assert!(queue.len() <= queue.bound());
        assert_eq!(queue.live(), 1);
    }

    #[test]
    fn the_earliest_of_every_partitions_heap_goes_first() {
        let mut owned = Owned::new(KeyPartitions::new(3), |_, _| Trackers::default());
        let mut queue = owned.exclusive();
        // Keys of partitions 1, 2, 0 and 1 (the low two bits of the index).
        let entries = [(7, 1), (3, 2 | 4), (5, 4), (3, 1 | 8)];
        for (secs, index) in entries {
            queue.push(Time::from_secs(secs), key(index));
        }
        let lens: Vec<_> = queue.iter_shares().map(|(_, share)| share.queue.len()).collect();
        assert_eq!(lens, [1, 2, 1]);
        let order: Vec<_> = std::iter::from_fn(|| queue.pop_front()).collect();
        let expected = [(3, 2 | 4), (3, 1 | 8), (5, 4), (7, 1)];
        assert_eq!(order, expected.map(|(secs, index)| (Time::from_secs(secs), key(index))));
        assert_eq!(queue.len(), 0);
    }
}
