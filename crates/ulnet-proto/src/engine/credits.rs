//! Credit pools: counters that go negative, with FIFO waiters and a low-water mark.
//!
//! lustre: lnet/lnet/lib-move.c `lnet_post_send_locked()` (take), `lnet_return_tx_credits_locked()`
//! (give back and re-post the head waiter), docs/protocol/semantics.md §2.2-2.4. The counter is decremented
//! before the check, so a negative value is the number of queued waiters; the invariant
//! `value < 0 <=> waiters non-empty` holds at every step.

use std::collections::VecDeque;

use crate::engine::slab::Key;

/// A credit pool and its waiters.
#[derive(Debug, Clone)]
pub(crate) struct CreditPool {
    max: i32,
    value: i32,
    min: i32,
    waiters: VecDeque<Key>,
}

/// Whether a credit was granted now or the message was queued.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Acquire {
    Granted,
    Queued,
}

impl CreditPool {
    pub(crate) fn new(max: u32) -> Self {
        let max = i32::try_from(max).unwrap_or(i32::MAX);
        Self { max, value: max, min: max, waiters: VecDeque::new() }
    }

    /// Charges one credit to `message`; queued at the tail when none is free.
    pub(crate) fn acquire(&mut self, message: Key) -> Acquire {
        self.value -= 1;
        self.min = self.min.min(self.value);
        if self.value < 0 {
            self.waiters.push_back(message);
            Acquire::Queued
        } else {
            Acquire::Granted
        }
    }

    /// Returns one credit; the head waiter (which was already charged) now holds it.
    pub(crate) fn release(&mut self) -> Option<Key> {
        self.value += 1;
        if self.value <= 0 { self.waiters.pop_front() } else { None }
    }

    /// The waiter [`release`](Self::release) would hand the credit to now.
    pub(crate) fn next_waiter(&self) -> Option<Key> {
        if self.value < 0 { self.waiters.front().copied() } else { None }
    }

    /// Takes `message` off the waiters (it no longer wants the credit it was charged for).
    /// False if it was not waiting.
    pub(crate) fn remove(&mut self, message: Key) -> bool {
        let Some(at) = self.waiters.iter().position(|waiter| *waiter == message) else {
            return false;
        };
        self.waiters.remove(at);
        self.value += 1;
        true
    }

    pub(crate) fn max(&self) -> i32 {
        self.max
    }

    pub(crate) fn value(&self) -> i32 {
        self.value
    }

    pub(crate) fn min(&self) -> i32 {
        self.min
    }

    #[cfg(test)]
    pub(crate) fn waiters(&self) -> usize {
        self.waiters.len()
    }

    /// Checks the pool's own invariant given how many messages hold a credit.
    pub(crate) fn check(&self, holders: usize) -> Result<(), String> {
        let waiters = self.waiters.len() as i64;
        let expected = i64::from(self.max) - holders as i64 - waiters;
        if i64::from(self.value) != expected {
            return Err(format!(
                "credits {} != max {} - holders {holders} - waiters {waiters}",
                self.value, self.max
            ));
        }
        if (self.value < 0) != (waiters > 0) {
            return Err(format!("credits {} with {waiters} waiters", self.value));
        }
        if self.min > self.value {
            return Err(format!("min credits {} above credits {}", self.min, self.value));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(index: u32) -> Key {
        Key { index, generation: 0 }
    }

    #[test]
    fn negative_credits_queue_fifo() {
        let mut pool = CreditPool::new(1);
        assert_eq!(pool.acquire(key(1)), Acquire::Granted);
        assert_eq!(pool.acquire(key(2)), Acquire::Queued);
        assert_eq!(pool.acquire(key(3)), Acquire::Queued);
        assert_eq!((pool.value(), pool.min(), pool.waiters()), (-2, -2, 2));
        assert_eq!(pool.check(1), Ok(()));
        assert_eq!(pool.release(), Some(key(2)));
        assert_eq!(pool.release(), Some(key(3)));
        assert_eq!(pool.release(), None);
        assert_eq!((pool.value(), pool.min()), (1, -2));
        assert_eq!(pool.check(0), Ok(()));
        assert!(pool.check(1).is_err());
    }

    #[test]
    fn a_waiter_can_withdraw() {
        let mut pool = CreditPool::new(1);
        pool.acquire(key(1));
        pool.acquire(key(2));
        pool.acquire(key(3));
        assert!(pool.remove(key(2)));
        assert!(!pool.remove(key(2)));
        assert_eq!((pool.value(), pool.waiters()), (-1, 1));
        assert_eq!(pool.check(1), Ok(()));
        assert_eq!(pool.release(), Some(key(3)));
    }
}
