//! Selftest buffer memory: the bulk bytes charged to RPCs in progress and the spare buffers
//! kept for reuse, together under one byte budget, with spare buffers let go once idle.
//!
//! The kernel bounds this memory by construction: each BRW server work item owns one
//! `LNET_MTU` bulk made at service start, and there are at most `SFW_TEST_WI_MAX` of them,
//! fewer on a small node (lustre: brw_test.c `brw_init_test_service()`, `brw_srpc_init()`:
//! the preallocated bulks take at most 1/16 of the node's pages); a request finding no free
//! work item waits for one. ulnet allocates per RPC instead, so it keeps the bound here: an
//! RPC's bulk is charged at its nominal length before anything is allocated, and a charge past
//! the budget is refused (the RPC layer answers `ENOMEM`, what the kernel's own allocation
//! failures report). Spare buffers count against the same budget and are evicted, least
//! recently used length first, to make room for a charge; a length unused for
//! [`SPARE_IDLE`] loses its spares altogether, so memory taken by a burst goes back.
//!
//! Time is the pool's own clock, advanced by [`BufferPool::trim`] (the dispatcher's tick), so
//! tests drive it without sleeping.

use std::time::{Duration, Instant};

use foldhash::HashMap;

use super::committed_buffer;

/// The default budget for selftest bulk memory: 512 MiB, i.e. 512 full-size (`LNET_MTU`)
/// transfers in flight. The kernel's equivalent is its BRW server's preallocated bulks,
/// `min(SFW_TEST_WI_MAX, totalram / 16 / (LNET_MTU pages + 1))` of one `LNET_MTU` each
/// (lustre: brw_test.c `brw_init_test_service()`): 512 MiB on a node of 8 GiB. A `ulst` brw
/// test at concurrency 16 of 1 MiB uses 16 MiB of it on each side.
pub const DEFAULT_BULK_BUDGET: usize = 512 << 20;

/// Spare buffers of one length unused for this long are freed.
pub const SPARE_IDLE: Duration = Duration::from_secs(5);

/// Most spare buffers kept per length.
pub const SPARES_PER_LENGTH: usize = 256;

/// Most distinct lengths with spares kept: a peer choosing a new bulk length per request
/// cannot grow the pool's index (the least recently used length goes first).
pub const SPARE_LENGTHS: usize = 64;

/// How much selftest buffer memory is in use, in bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BufferUsage {
    /// Bulk bytes charged to RPCs in progress.
    pub charged: usize,
    /// Bytes of spare buffers kept for reuse.
    pub spare: usize,
    /// The budget `charged + spare` stays within.
    pub budget: usize,
    /// Charges refused because the budget was spent (each answered `ENOMEM`).
    pub refused: u64,
}

#[derive(Debug)]
struct Spares {
    buffers: Vec<Vec<u8>>,
    /// The pool's clock when a buffer of this length was last taken or given back.
    used: Instant,
}

/// The budgeted pool of one RPC endpoint.
#[derive(Debug)]
pub(crate) struct BufferPool {
    budget: usize,
    spares: HashMap<usize, Spares>,
    spare_bytes: usize,
    charged: usize,
    refused: u64,
    /// The pool's clock: the latest time [`BufferPool::trim`] was given.
    now: Instant,
}

impl BufferPool {
    pub fn new(budget: usize) -> Self {
        Self {
            budget,
            spares: HashMap::default(),
            spare_bytes: 0,
            charged: 0,
            refused: 0,
            now: Instant::now(),
        }
    }

    /// Changes the budget; spares over the new one are freed, charges already made stay.
    pub fn set_budget(&mut self, budget: usize) {
        self.budget = budget;
        while self.charged + self.spare_bytes > self.budget && self.evict_one(None) {}
    }

    pub fn usage(&self) -> BufferUsage {
        BufferUsage {
            charged: self.charged,
            spare: self.spare_bytes,
            budget: self.budget,
            refused: self.refused,
        }
    }

    /// Whether a charge of `length` would be granted now.
    pub fn has_room(&self, length: usize) -> bool {
        self.charged.saturating_add(length) <= self.budget
    }

    /// As [`BufferPool::has_room`], counting a refusal when there is none (for a caller that
    /// then does without).
    pub fn check_room(&mut self, length: usize) -> bool {
        let room = self.has_room(length);
        if !room {
            self.refused = self.refused.wrapping_add(1);
        }
        room
    }

    /// Charges `length` bytes to an RPC, evicting spares to make room; `false` (nothing
    /// charged) when the RPCs in progress already hold too much of the budget.
    pub fn charge(&mut self, length: usize) -> bool {
        if !self.has_room(length) {
            self.refused = self.refused.wrapping_add(1);
            return false;
        }
        self.charged += length;
        // Spares of this length are what the charge will most likely take: evict others first.
        while self.charged + self.spare_bytes > self.budget && self.evict_one(Some(length)) {}
        true
    }

    /// Gives back a charge made by [`BufferPool::charge`].
    pub fn release(&mut self, length: usize) {
        debug_assert!(length <= self.charged, "released more than charged");
        self.charged = self.charged.saturating_sub(length);
    }

    /// A buffer of `length` bytes (contents unspecified): a spare if there is one.
    pub fn take(&mut self, length: usize) -> Vec<u8> {
        if let Some(spares) = self.spares.get_mut(&length) {
            spares.used = self.now;
            if let Some(buffer) = spares.buffers.pop() {
                self.spare_bytes -= buffer.len();
                return buffer;
            }
        }
        committed_buffer(length)
    }

    /// Keeps `buffer` as a spare if the budget and the per-length bounds allow, else frees it.
    pub fn give_back(&mut self, buffer: Vec<u8>) {
        let length = buffer.len();
        if length == 0 || self.charged + self.spare_bytes + length > self.budget {
            return;
        }
        if !self.spares.contains_key(&length) && self.spares.len() >= SPARE_LENGTHS {
            self.evict_one(None);
        }
        let now = self.now;
        let spares =
            self.spares.entry(length).or_insert_with(|| Spares { buffers: Vec::new(), used: now });
        spares.used = now;
        if spares.buffers.len() < SPARES_PER_LENGTH {
            spares.buffers.push(buffer);
            self.spare_bytes += length;
        }
    }

    /// Advances the pool's clock to `now` and frees the spares of every length unused for
    /// [`SPARE_IDLE`].
    pub fn trim(&mut self, now: Instant) {
        self.now = self.now.max(now);
        let horizon = self.now;
        let mut freed = 0;
        self.spares.retain(|_, spares| {
            let keep = horizon.saturating_duration_since(spares.used) < SPARE_IDLE;
            if !keep {
                freed += spares.buffers.iter().map(Vec::len).sum::<usize>();
            }
            keep
        });
        self.spare_bytes -= freed;
    }

    /// Frees the spares of the least recently used length (other than `except`); `false` if
    /// there was none.
    fn evict_one(&mut self, except: Option<usize>) -> bool {
        let victim = self
            .spares
            .iter()
            .filter(|(length, _)| Some(**length) != except)
            .min_by_key(|(_, spares)| spares.used)
            .map(|(length, _)| *length);
        let victim = match (victim, except) {
            (Some(length), _) => length,
            // Only `except` is left: evict from it too.
            (None, Some(length)) if self.spares.contains_key(&length) => length,
            _ => return false,
        };
        if let Some(spares) = self.spares.remove(&victim) {
            self.spare_bytes -= spares.buffers.iter().map(Vec::len).sum::<usize>();
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: usize = 1 << 20;

    #[test]
    fn a_charge_past_the_budget_is_refused_and_counted() {
        let mut pool = BufferPool::new(4 * MIB);
        for _ in 0..4 {
            assert!(pool.charge(MIB));
        }
        assert!(!pool.charge(1));
        assert_eq!(
            pool.usage(),
            BufferUsage { charged: 4 * MIB, spare: 0, budget: 4 * MIB, refused: 1 }
        );
        pool.release(MIB);
        assert!(pool.charge(MIB));
    }

    #[test]
    fn spares_never_take_the_pool_past_its_budget() {
        let mut pool = BufferPool::new(4 * MIB);
        // Buffers of many new lengths given back, as a peer choosing a new length each time
        // leaves them.
        for extra in 0..100 {
            pool.give_back(vec![0; MIB + extra]);
            let usage = pool.usage();
            assert!(usage.charged + usage.spare <= usage.budget, "{usage:?}");
        }
        assert!(pool.spares.len() <= SPARE_LENGTHS);
        assert!(pool.usage().spare <= 4 * MIB);
    }

    #[test]
    fn lengths_with_spares_are_bounded() {
        let mut pool = BufferPool::new(usize::MAX);
        for length in 1..=(SPARE_LENGTHS * 4) {
            pool.give_back(vec![0; length]);
        }
        assert_eq!(pool.spares.len(), SPARE_LENGTHS);
    }

    #[test]
    fn a_charge_evicts_spares_to_stay_within_the_budget() {
        let mut pool = BufferPool::new(4 * MIB);
        for _ in 0..4 {
            pool.give_back(vec![0; MIB]);
        }
        assert_eq!(pool.usage().spare, 4 * MIB);
        assert!(pool.charge(2 * MIB));
        let usage = pool.usage();
        assert_eq!(usage.charged, 2 * MIB);
        assert!(usage.charged + usage.spare <= usage.budget, "{usage:?}");
    }

    #[test]
    fn idle_spares_are_freed_and_busy_ones_kept() {
        let mut pool = BufferPool::new(64 * MIB);
        let start = Instant::now();
        pool.trim(start);
        pool.give_back(vec![0; MIB]);
        pool.give_back(vec![0; 4096]);
        pool.trim(start + SPARE_IDLE / 2);
        // 4096 is used again; 1 MiB is not.
        let buffer = pool.take(4096);
        pool.give_back(buffer);
        assert_eq!(pool.usage().spare, MIB + 4096);
        pool.trim(start + SPARE_IDLE);
        assert_eq!(pool.usage().spare, 4096);
        pool.trim(start + SPARE_IDLE * 3);
        assert_eq!(pool.usage().spare, 0);
        assert!(pool.spares.is_empty());
    }

    #[test]
    fn a_taken_spare_is_reused() {
        let mut pool = BufferPool::new(64 * MIB);
        let mut buffer = pool.take(4096);
        buffer[0] = 7;
        pool.give_back(buffer);
        assert_eq!(pool.take(4096)[0], 7);
        assert_eq!(pool.usage().spare, 0);
    }
}
