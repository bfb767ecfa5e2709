//! The simulator's event queue: a monotone radix heap of (time, slot) entries that pops in
//! time order and, among entries of one time, in the order they were pushed.
//!
//! A discrete-event simulation never schedules before its clock, so the queue only needs to
//! be monotone: every key pushed is at least the last key popped. A radix heap uses that: an
//! entry lives in the bucket of the highest bit in which its time differs from the last time
//! popped (bucket 0: the same time). Popping takes bucket 0's oldest entry; when bucket 0 is
//! empty, the lowest non-empty bucket is split by its smallest time into the buckets below
//! it. An entry moves at most once per bit of the time, and every move and every pop reads
//! a `Vec` front to back, where a binary heap of 100,000 entries walks 17 levels of
//! scattered cache lines per pop (the heap's sift-down was a tenth of the 10,000-node
//! bench's cycles, BENCHMARKS.md "Simulator").
//!
//! Ties keep their push order with no sequence number: a push appends the newest entry to
//! the end of its bucket, and a split copies a bucket, in order, into buckets that are empty
//! (every bucket below the lowest non-empty one is), so each bucket stays in push order and
//! the pops come out exactly as a heap ordered by (time, push sequence) would give them.

use ulnet_proto::time::Time;

/// Buckets: 0 for the last time popped, then one per bit position of a `u64` time.
const BUCKETS: usize = 65;

/// A monotone priority queue of slots keyed by time, first in first out among equal times.
#[derive(Debug)]
pub struct EventQueue {
    /// The time of the last entry popped (or split out); every entry is at or after it.
    last: u64,
    buckets: Vec<Vec<(u64, u32)>>,
    /// Bucket 0's entries before this index were popped.
    head: usize,
    len: usize,
}

impl Default for EventQueue {
    fn default() -> Self {
        Self { last: 0, buckets: vec![Vec::new(); BUCKETS], head: 0, len: 0 }
    }
}

impl EventQueue {
    /// Entries queued.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Queues `slot` at `at`. A time before the last popped one is queued at that time
    /// (the world never asks for it: its clock never goes back).
    pub fn push(&mut self, at: Time, slot: u32) {
        debug_assert!(at.as_nanos() >= self.last, "an event scheduled in the past");
        let key = at.as_nanos().max(self.last);
        let bucket = bucket_of(key, self.last);
        if let Some(list) = self.buckets.get_mut(bucket) {
            list.push((key, slot));
            self.len += 1;
        }
    }

    /// The time of the next entry, without taking it.
    pub fn peek(&mut self) -> Option<Time> {
        if !self.refill() {
            return None;
        }
        Some(Time::from_nanos(self.last))
    }

    /// Takes the next entry: the earliest, the oldest of those.
    pub fn pop(&mut self) -> Option<(Time, u32)> {
        if !self.refill() {
            return None;
        }
        let first = self.buckets.first_mut()?;
        let (key, slot) = *first.get(self.head)?;
        self.head += 1;
        self.len -= 1;
        Some((Time::from_nanos(key), slot))
    }

    /// Makes bucket 0 hold the next entries; false when the queue is empty.
    fn refill(&mut self) -> bool {
        if self.buckets.first().is_some_and(|first| self.head < first.len()) {
            return true;
        }
        if let Some(first) = self.buckets.first_mut() {
            first.clear();
        }
        self.head = 0;
        let Some(lowest) = self.buckets.iter().position(|list| !list.is_empty()) else {
            return false;
        };
        let mut split = self.buckets.get_mut(lowest).map(std::mem::take).unwrap_or_default();
        self.last = split.iter().map(|&(key, _)| key).min().unwrap_or(self.last);
        for &(key, slot) in &split {
            if let Some(list) = self.buckets.get_mut(bucket_of(key, self.last)) {
                list.push((key, slot));
            }
        }
        split.clear();
        // Keep the emptied bucket's allocation for the next time it fills.
        if let Some(list) = self.buckets.get_mut(lowest) {
            if list.is_empty() {
                *list = split;
            }
        }
        true
    }
}

/// The bucket of `key` when the last time popped is `last` (`key >= last`).
fn bucket_of(key: u64, last: u64) -> usize {
    (u64::BITS - (key ^ last).leading_zeros()) as usize
}

#[cfg(test)]
mod tests {
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;

    use ulnet_proto::rng::Rng;

    use super::*;

    #[test]
    fn pops_in_time_then_push_order_as_a_sequenced_heap_does() {
        let mut rng = Rng::new(7);
        let mut queue = EventQueue::default();
        let mut heap = BinaryHeap::new();
        let mut sequence = 0u64;
        let mut now = 0u64;
        let mut popped = 0;
        for round in 0..20_000u32 {
            // Bursts of pushes at and after the clock, many at the same instants.
            for _ in 0..rng.below(4) {
                let ahead = match rng.below(4) {
                    0 => 0,
                    1 => rng.below(8),
                    2 => rng.below(1 << 20),
                    _ => rng.below(1 << 40),
                };
                sequence += 1;
                queue.push(Time::from_nanos(now + ahead), round);
                heap.push(Reverse((now + ahead, sequence, round)));
            }
            if rng.below(3) > 0 {
                let expected =
                    heap.pop().map(|Reverse((at, _, slot))| (Time::from_nanos(at), slot));
                assert_eq!(queue.peek(), expected.map(|(at, _)| at));
                assert_eq!(queue.pop(), expected);
                if let Some((at, _)) = expected {
                    now = at.as_nanos();
                    popped += 1;
                }
            }
            assert_eq!(queue.len(), heap.len());
        }
        while let Some(Reverse((at, _, slot))) = heap.pop() {
            assert_eq!(queue.pop(), Some((Time::from_nanos(at), slot)));
        }
        assert!(queue.is_empty() && queue.pop().is_none());
        assert!(popped > 5_000, "{popped}");
    }

    #[test]
    fn the_largest_times_have_a_bucket() {
        let mut queue = EventQueue::default();
        queue.push(Time::MAX, 1);
        queue.push(Time::ZERO, 2);
        queue.push(Time::MAX, 3);
        assert_eq!(queue.pop(), Some((Time::ZERO, 2)));
        assert_eq!(queue.pop(), Some((Time::MAX, 1)));
        assert_eq!(queue.pop(), Some((Time::MAX, 3)));
        assert_eq!(queue.pop(), None);
    }
}
