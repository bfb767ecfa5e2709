//! Round-robin stamps: the sequence numbers path selection writes on every commit and reads
//! to break ties (`lp_send_seq`, `lpn_seq`, `lpni_seq`, `ln_net_seq`, `net_seq`, `ni_seq`,
//! `lr_seq`).
//!
//! They sit on node-wide objects (NIs, nets, peers, routes) that every partition's messages
//! select among, so a call on one partition writes them. The kernel writes them with plain,
//! racy stores under whichever CPT lock the sender holds (lib-move.c `lnet_handle_send()`):
//! a lost update only makes one tie break differently. A relaxed atomic is that store made
//! sound: it needs no lock and no exclusive borrow (docs/decisions/0029, step 4). One
//! thread (the simulator, the deterministic harness) sees exactly the sequence a plain
//! counter would, so replays stay exact.

use std::sync::atomic::{AtomicU64, Ordering};

/// A round-robin stamp; see the module documentation.
#[derive(Default)]
pub(crate) struct Stamp(AtomicU64);

impl Stamp {
    #[inline]
    pub(crate) fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }

    #[inline]
    pub(crate) fn set(&self, value: u64) {
        self.0.store(value, Ordering::Relaxed);
    }

    /// The next value of a sequence, stored and returned. A load and a store, not a
    /// read-modify-write: two partitions committing at once may take the same value, as the
    /// kernel's `++` may.
    #[inline]
    pub(crate) fn advance(&self) -> u64 {
        let next = self.get().wrapping_add(1);
        self.set(next);
        next
    }
}

impl Clone for Stamp {
    fn clone(&self) -> Self {
        Self(AtomicU64::new(self.get()))
    }
}

impl PartialEq for Stamp {
    fn eq(&self, other: &Self) -> bool {
        self.get() == other.get()
    }
}

impl Eq for Stamp {}

impl std::fmt::Debug for Stamp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.get().fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamps_advance_through_shared_references() {
        let stamp = Stamp::default();
        assert_eq!((stamp.advance(), stamp.advance()), (1, 2));
        let copy = stamp.clone();
        stamp.set(7);
        assert_eq!((copy.get(), stamp.get()), (2, 7));
        assert_ne!(copy, stamp);
    }
}
