//! How an endpoint's state lock is used: how long it is held and how often a thread finds it
//! held. The lock is the selftest service's serial section, as the node's core lock is the
//! runtime's (ulnet's `core_lock_held_ns`): with one state per endpoint, the partitions'
//! threads take turns on it, so its held time against the service's CPU bounds what more
//! partitions can gain (docs/decisions/0029-io-thread-per-partition.md, "The selftest
//! service").

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// One acquisition of an endpoint's state in this many, on each thread, is timed: timing
/// every hold would cost two clock reads per fold.
pub const HOLD_SAMPLE: u32 = 16;

thread_local! {
    /// Acquisitions of an endpoint's state on this thread since the last timed one.
    static UNTIMED_HOLDS: Cell<u32> = const { Cell::new(0) };
}

/// An endpoint's state lock, counted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EndpointLockStats {
    /// Times the state was taken, and how long it was held in all, both estimated from one
    /// acquisition in 16 on each thread.
    pub holds: u64,
    pub held_ns: u64,
    /// Times a thread found the state held: it then waited for it, or left its events to
    /// the holder.
    pub busy: u64,
}

/// The counters behind [`EndpointLockStats`], updated without the lock.
#[derive(Debug, Default)]
pub(super) struct LockCounters {
    holds: AtomicU64,
    held_ns: AtomicU64,
    busy: AtomicU64,
}

impl LockCounters {
    /// The state was just taken: when, if this hold is one of the timed ones.
    pub(super) fn taken(&self) -> Option<Instant> {
        let untimed = UNTIMED_HOLDS.get() + 1;
        if untimed >= HOLD_SAMPLE {
            UNTIMED_HOLDS.set(0);
            Some(Instant::now())
        } else {
            UNTIMED_HOLDS.set(untimed);
            None
        }
    }

    /// The state is about to be released; `taken` is what [`taken`](Self::taken) returned.
    pub(super) fn released(&self, taken: Option<Instant>) {
        let Some(taken) = taken else { return };
        let held = u64::try_from(taken.elapsed().as_nanos()).unwrap_or(u64::MAX);
        let sample = u64::from(HOLD_SAMPLE);
        self.held_ns.fetch_add(held.saturating_mul(sample), Ordering::Relaxed);
        self.holds.fetch_add(sample, Ordering::Relaxed);
    }

    /// A thread found the state held.
    pub(super) fn found_busy(&self) {
        self.busy.fetch_add(1, Ordering::Relaxed);
    }

    pub(super) fn snapshot(&self) -> EndpointLockStats {
        EndpointLockStats {
            holds: self.holds.load(Ordering::Relaxed),
            held_ns: self.held_ns.load(Ordering::Relaxed),
            busy: self.busy.load(Ordering::Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn one_hold_in_the_sample_is_timed_for_all_of_them() {
        let counters = LockCounters::default();
        let held = Duration::from_micros(100);
        for _ in 0..2 * HOLD_SAMPLE {
            let taken = counters.taken();
            let start = Instant::now();
            while start.elapsed() < held {
                std::hint::spin_loop();
            }
            counters.released(taken);
        }
        counters.found_busy();
        let stats = counters.snapshot();
        assert_eq!(stats.holds, 2 * u64::from(HOLD_SAMPLE));
        assert!(stats.held_ns / stats.holds >= held.as_nanos() as u64, "{stats:?}");
        assert_eq!(stats.busy, 1);
    }
}
