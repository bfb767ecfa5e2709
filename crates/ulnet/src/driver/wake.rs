//! Wake-ups owed once the core lock is released ([`Wakes`]): collected while the lock is held
//! and issued after, so nobody is woken only to block on the lock we hold; and output staged
//! in connections' outboxes, written then too so that no system call holds the lock.

use std::sync::Arc;
use std::sync::mpsc::SyncSender;

use smallvec::SmallVec;
use ulnet_proto::engine::PingCompletion;

use super::core::Shared;
use crate::event_queue::EqShared;
use crate::lnd::tcp::{Deferred, Finished, Outbox};

/// Wake-ups owed once the core lock is released.
#[derive(Default)]
pub(crate) struct Wakes {
    /// Connection outboxes this thread staged output in, to write after the unlock.
    outboxes: ArcSet<Outbox>,
    /// Set by a drain that may release the core lock part way ([`super::drain::drain_releasing`]):
    /// a burst's first half of TCP transmits (decision 0011) is then framed and written before
    /// the drain goes on.
    may_unlock: bool,
    doorbells: ArcSet<Shared>,
    queues: ArcSet<EqShared>,
    /// Connection tasks to wake (an LND's), on whichever partition's thread they run.
    nudges: ArcSet<tokio::sync::Notify>,
    /// Completions for blocked callers: sent after the unlock, else the woken caller's next
    /// call would find the core still locked and sleep again.
    completions: Vec<(SyncSender<PingCompletion>, PingCompletion)>,
    /// Transmits the TCP LND frames once the lock is released.
    pub(crate) tcp: Deferred,
}

impl Wakes {
    /// Wake `node`'s I/O thread.
    pub(crate) fn ring(&mut self, node: &Arc<Shared>) {
        if !self.doorbells.contains(node) {
            self.doorbells.insert(Arc::clone(node));
        }
    }

    /// Write `outbox` once the lock is released.
    pub(crate) fn write(&mut self, outbox: &Arc<Outbox>) {
        if !self.outboxes.contains(outbox) {
            self.outboxes.insert(Arc::clone(outbox));
        }
    }

    /// Whether output waits to be written at once: the drain should release the lock.
    pub(super) fn early_due(&self) -> bool {
        self.may_unlock && self.tcp.burst_due()
    }

    /// With the lock released part way through a drain: frames and writes a burst's first
    /// half of transmits set aside, so that it leaves while the drain produces the rest
    /// (decision 0011). Returns the sends that finished meanwhile, for the drain to complete
    /// once it holds the lock again.
    pub(super) fn run_early(&mut self) -> Finished {
        if !self.tcp.burst_due() {
            return None;
        }
        Deferred::run_early(self)
    }

    /// Sets whether the drain may release the lock part way; returns what it was.
    pub(super) fn set_may_unlock(&mut self, may_unlock: bool) -> bool {
        std::mem::replace(&mut self.may_unlock, may_unlock)
    }

    /// Frames the transmits set aside. Call with no core lock held.
    pub(crate) fn run_deferred(&mut self) {
        // Framing them may complete sends, whose drain may set more aside.
        while !self.tcp.is_empty() {
            std::mem::take(&mut self.tcp).run(self);
        }
    }

    /// Wake `queue`'s consumers.
    pub(super) fn queue(&mut self, queue: Arc<EqShared>) {
        if !self.queues.contains(&queue) {
            self.queues.insert(queue);
        }
    }

    /// Wake the task waiting on `nudge`.
    pub(crate) fn nudge(&mut self, nudge: Arc<tokio::sync::Notify>) {
        if !self.nudges.contains(&nudge) {
            self.nudges.insert(nudge);
        }
    }

    /// Hand `completion` to the caller blocked on `waiter`.
    pub(super) fn complete(
        &mut self,
        waiter: SyncSender<PingCompletion>,
        completion: PingCompletion,
    ) {
        self.completions.push((waiter, completion));
    }

    /// Frames the transmits set aside, writes the staged output, then issues the wake-ups.
    /// Call with no core lock held.
    pub(crate) fn finish(mut self) {
        self.run_deferred();
        for outbox in self.outboxes.into_items() {
            outbox.write_out_and_tell();
        }
        for node in self.doorbells.into_items() {
            node.doorbell.ring(&node.counters.io_wakeups);
        }
        for nudge in self.nudges.into_items() {
            nudge.notify_one();
        }
        for queue in self.queues.into_items() {
            queue.wake();
        }
        for (waiter, completion) in self.completions {
            // Capacity 1 and one completion per key: this never blocks. A caller that gave
            // up has dropped its receiver; nothing is lost then.
            let _ = waiter.try_send(completion);
        }
    }
}

/// Distinct `Arc`s (by pointer), in insertion order. The first is kept inline: a turn nearly
/// always wakes one node or one queue, and a `Vec` would allocate for it on every turn.
struct ArcSet<T>(SmallVec<[Arc<T>; 1]>);

impl<T> Default for ArcSet<T> {
    fn default() -> Self {
        Self(SmallVec::new())
    }
}

impl<T> ArcSet<T> {
    fn contains(&self, item: &Arc<T>) -> bool {
        self.0.iter().any(|known| Arc::ptr_eq(known, item))
    }

    /// Adds `item` at the end (the caller checked it is not there yet).
    fn insert(&mut self, item: Arc<T>) {
        self.0.push(item);
    }

    fn into_items(self) -> impl Iterator<Item = Arc<T>> {
        self.0.into_iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arc_set_keeps_distinct_items_in_insertion_order() {
        let (a, b, c) = (Arc::new(1), Arc::new(2), Arc::new(3));
        let mut set = ArcSet::default();
        for item in [&a, &b, &a, &c, &b] {
            if !set.contains(item) {
                set.insert(Arc::clone(item));
            }
        }
        // Equal values in distinct allocations are distinct members.
        let twin = Arc::new(1);
        assert!(!set.contains(&twin));
        let items: Vec<i32> = set.into_items().map(|item| *item).collect();
        assert_eq!(items, [1, 2, 3]);
    }
}
