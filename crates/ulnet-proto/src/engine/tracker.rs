//! The response tracker queue: MDs waiting for an ACK or REPLY, by deadline.
//!
//! lustre: lnet/lnet/lib-move.c (`lnet_attach_rsp_tracker`, `lnet_detach_rsp_tracker`,
//! `lnet_finalize_expired_responses`), semantics.md §4.4. Every deadline is "now + the
//! transaction timeout" and `now` never decreases, so a FIFO is already in deadline order.
//! Detaching leaves a stale entry (skipped when popped); the queue is compacted when stale
//! entries outnumber live ones, so its length stays under twice the live count plus a constant.

use std::collections::VecDeque;

use crate::engine::slab::Key;
use crate::time::Time;

/// Entries tolerated beyond twice the live trackers before compaction.
const COMPACTION_SLACK: usize = 64;

#[derive(Debug, Default)]
pub(crate) struct TrackerQueue {
    queue: VecDeque<(Time, Key)>,
}

impl TrackerQueue {
    pub(crate) fn push(&mut self, deadline: Time, md: Key) {
        self.queue.push_back((deadline, md));
    }

    pub(crate) fn front(&self) -> Option<(Time, Key)> {
        self.queue.front().copied()
    }

    pub(crate) fn pop_front(&mut self) -> Option<(Time, Key)> {
        self.queue.pop_front()
    }

    pub(crate) fn len(&self) -> usize {
        self.queue.len()
    }

    /// Drops stale entries when they dominate; `is_live` tells a current entry.
    pub(crate) fn maybe_compact(&mut self, live: usize, is_live: impl Fn(Time, Key) -> bool) {
        if self.queue.len() > 2 * live + COMPACTION_SLACK {
            self.queue.retain(|(deadline, md)| is_live(*deadline, *md));
        }
    }

    /// The bound the invariant checker enforces.
    pub(crate) fn bound(live: usize) -> usize {
        2 * live + COMPACTION_SLACK + 1
    }
}
