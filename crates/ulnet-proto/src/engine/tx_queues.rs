//! An NI's tx credits split per CPU partition: one credit pool and queue per partition the
//! NI covers (`ni_tx_queues[cpt]`), each with the share `lnet_ni_tq_credits()` gives it. A
//! message takes, waits on and gives back the credit of its own partition's pool (the CPT of
//! its next hop on that NI), so one partition's queue can be full while another's is idle,
//! exactly as on a kernel node (docs/protocol/semantics.md §7.3, decision 0026).
//!
//! lustre: lnet/lnet/api-ni.c `lnet_ni_tq_credits()`, `lnet_startup_lndni()` (every queue
//! starts at the share, `ni_tx_credits` at share × `ni_ncpts`); config.c `lnet_ni_alloc()`;
//! lib-move.c `lnet_post_send_locked()`, `lnet_return_tx_credits_locked()`;
//! lnet_debugfs.c `proc_lnet_nis()` (the queues shown: the partitions in the NI's list).

use std::sync::atomic::{AtomicI64, Ordering};

use crate::engine::cpt::{CptList, Partitions};
use crate::engine::credits::{Acquire, CreditPool};
use crate::engine::slab::Key;
use crate::engine::stats::CreditStats;

/// `lnet_ni_tq_credits()`: the tx credits each partition's queue of an NI gets. With one CPT
/// the NI's `credits`; otherwise `credits / ncpts`, raised to `8 × peer_credits` so that a
/// partition can still fill a few peers' windows, and never above `credits`. `ncpts` is the
/// length of the NI's CPT list as written (duplicates counted, as the kernel's `ni_ncpts`),
/// or the node's partition count for an unbound NI.
pub fn tq_credits(credits: u32, peer_credits: u32, ncpts: u32) -> u32 {
    if ncpts <= 1 {
        return credits;
    }
    (credits / ncpts).max(peer_credits.saturating_mul(8)).min(credits)
}

/// The tx credits of one of an NI's partitions, as the kernel's `nis` file lists them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CptCredits {
    pub cpt: u32,
    /// `max`, `tx`, `min`: the queue's share, its credits now, and their low-water mark.
    pub credits: CreditStats,
}

/// One NI's tx credits over its partitions: which partitions have a queue and the NI-wide
/// count, kept with the NI; the queues themselves are each in its partition's part
/// (`ni.rs`, `NiShares`), reached only by that partition's calls.
#[derive(Debug)]
pub(crate) struct TxQueues {
    /// The distinct partitions the NI covers, each with a queue, in CPT order.
    covered: Vec<u32>,
    /// Each queue's credits (`lnet_ni_tq_credits()`).
    share: u32,
    /// `ni_tx_credits` at start: the share × `ni_ncpts` (duplicated CPTs counted twice, as the
    /// kernel counts them; only distinct partitions have a queue).
    initial_total: i64,
    /// Credits charged on all partitions, kept beside the pools as the kernel keeps the
    /// atomic `ni_tx_credits`: selection compares NIs by it without reading any partition's
    /// pool (decision 0029, step 4). Changed only through [`PoolMut`].
    charged: AtomicI64,
}

/// A partition's pool of an NI, to change: every credit it charges or gives back is counted
/// in the NI-wide total too.
pub(crate) struct PoolMut<'a> {
    pool: &'a mut CreditPool,
    charged: &'a AtomicI64,
}

impl PoolMut<'_> {
    pub(crate) fn acquire(self, message: Key) -> Acquire {
        self.charged.fetch_add(1, Ordering::Relaxed);
        self.pool.acquire(message)
    }

    pub(crate) fn release(self) -> Option<Key> {
        self.charged.fetch_sub(1, Ordering::Relaxed);
        self.pool.release()
    }

    pub(crate) fn remove(self, message: Key) -> bool {
        let removed = self.pool.remove(message);
        if removed {
            self.charged.fetch_sub(1, Ordering::Relaxed);
        }
        removed
    }
}

impl TxQueues {
    /// The credits of an NI with `credits` and `peer_credits` bound to `cpts` on a node with
    /// `partitions` (the list is already checked against them).
    pub(crate) fn new(
        credits: u32,
        peer_credits: u32,
        cpts: &CptList,
        partitions: Partitions,
    ) -> Self {
        let ncpts = if cpts.is_all() { partitions.count() } else { cpts.values().len() as u32 };
        let share = tq_credits(credits, peer_credits, ncpts);
        let mut covered = partitions.covered(cpts);
        covered.sort_unstable();
        covered.dedup();
        let initial_total = i64::from(share.min(i32::MAX as u32)) * i64::from(ncpts);
        Self { covered, share, initial_total, charged: AtomicI64::new(0) }
    }

    /// The queue partition `cpt` starts with; `None` when the NI does not cover it.
    pub(crate) fn new_pool(&self, cpt: u32) -> Option<CreditPool> {
        self.covered.contains(&cpt).then(|| CreditPool::new(self.share))
    }

    /// Partition `cpt`'s `pool` of this NI, to charge and give back through.
    pub(crate) fn charge<'a>(&'a self, pool: &'a mut CreditPool) -> PoolMut<'a> {
        PoolMut { pool, charged: &self.charged }
    }

    /// `ni_tx_credits`: the NI-wide count selection compares (`lnet_get_best_ni()`), the
    /// initial total less every credit charged on any partition.
    pub(crate) fn available(&self) -> i64 {
        self.initial_total - self.charged.load(Ordering::Relaxed)
    }

    /// Whether the NI-wide total agrees with its partitions' `pools` (the invariant checker).
    pub(crate) fn check<'p>(
        &self,
        pools: impl Iterator<Item = &'p CreditPool>,
    ) -> Result<(), String> {
        let charged: i64 = pools.map(|pool| i64::from(pool.max()) - i64::from(pool.value())).sum();
        let counted = self.charged.load(Ordering::Relaxed);
        if counted == charged {
            Ok(())
        } else {
            Err(format!("{counted} tx credits counted charged, the pools hold {charged}"))
        }
    }

    /// NI-wide totals: `max` and `available` as `ni_tx_credits` counts them, `min` the sum
    /// of its partitions' `pools`' low-water marks (the NI's own with one partition).
    pub(crate) fn totals<'p>(&self, pools: impl Iterator<Item = &'p CreditPool>) -> CreditStats {
        let clamp = |value: i64| i32::try_from(value).unwrap_or(i32::MAX);
        let min: i64 = pools.map(|pool| i64::from(pool.min())).sum();
        CreditStats {
            max: clamp(self.initial_total),
            available: clamp(self.available()),
            min: clamp(min),
        }
    }
}

/// Each partition's credits, from its pool, in the order given (CPT order).
pub(crate) fn per_cpt<'p>(pools: impl Iterator<Item = (u32, &'p CreditPool)>) -> Vec<CptCredits> {
    pools
        .map(|(cpt, pool)| CptCredits {
            cpt,
            credits: CreditStats { max: pool.max(), available: pool.value(), min: pool.min() },
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Worked examples of `lnet_ni_tq_credits()`: socklnd's defaults are 256 credits and 8
    /// peer credits, so the floor 8 × 8 = 64 binds from 5 partitions on (256 / 4 = 64).
    #[test]
    fn the_share_is_the_kernels() {
        assert_eq!(tq_credits(256, 8, 1), 256, "one CPT: the NI's credits");
        assert_eq!(tq_credits(256, 8, 2), 128);
        assert_eq!(tq_credits(256, 8, 4), 64, "256 / 4 = 64 = 8 x 8");
        assert_eq!(tq_credits(256, 8, 8), 64, "256 / 8 = 32 raised to 8 x 8");
        assert_eq!(tq_credits(256, 16, 4), 128, "256 / 4 = 64 raised to 8 x 16");
        assert_eq!(tq_credits(100, 32, 2), 100, "8 x 32 = 256 capped at the NI's 100");
        assert_eq!(tq_credits(1000, 8, 3), 333, "integer division");
    }

    /// An NI's queues as its partitions would hold them, by CPT.
    fn pools(queues: &TxQueues, count: u32) -> Vec<(u32, CreditPool)> {
        (0..count).filter_map(|cpt| Some((cpt, queues.new_pool(cpt)?))).collect()
    }

    fn maxima(pools: &[(u32, CreditPool)]) -> Vec<(u32, i32)> {
        pools.iter().map(|(cpt, pool)| (*cpt, pool.max())).collect()
    }

    #[test]
    fn queues_cover_the_nis_partitions() {
        let four = Partitions::new(4).unwrap();
        let all = TxQueues::new(256, 8, &CptList::ALL, four);
        assert_eq!(maxima(&pools(&all, 4)), [(0, 64), (1, 64), (2, 64), (3, 64)]);
        assert_eq!(all.available(), 256);
        // Bound to [3, 1]: two queues of 256 / 2 = 128, listed in CPT order.
        let pair = TxQueues::new(256, 8, &CptList::new(&[3, 1]).unwrap(), four);
        assert_eq!(maxima(&pools(&pair, 4)), [(1, 128), (3, 128)]);
        // [1, 1]: the kernel divides by the list's length (2) but only CPT 1 has traffic.
        let dup = TxQueues::new(256, 8, &CptList::new(&[1, 1]).unwrap(), four);
        assert_eq!(maxima(&pools(&dup, 4)), [(1, 128)]);
        assert_eq!(dup.available(), 256, "ni_tx_credits = 128 x 2");
        let one = TxQueues::new(256, 8, &CptList::ALL, Partitions::default());
        let one_pools = pools(&one, 1);
        let totals = one.totals(one_pools.iter().map(|(_, pool)| pool));
        assert_eq!(totals, CreditStats { max: 256, available: 256, min: 256 });
    }

    #[test]
    fn a_partition_waits_while_another_is_free() {
        let queues = TxQueues::new(16, 8, &CptList::ALL, Partitions::new(2).unwrap());
        let mut held = pools(&queues, 2);
        assert!(queues.new_pool(2).is_none());
        let [(_, zero), (_, one)] = held.as_mut_slice() else { panic!("two pools") };
        let key = |index| Key { index, generation: 0 };
        for index in 0..16 {
            assert_eq!(queues.charge(zero).acquire(key(index)), Acquire::Granted);
        }
        assert_eq!(queues.charge(zero).acquire(key(16)), Acquire::Queued);
        assert_eq!(queues.charge(one).acquire(key(17)), Acquire::Granted);
        // Each queue has 16 (8 x 8 = 64 capped at 16): 32 in all, 18 charged.
        let totals = queues.totals(held.iter().map(|(_, pool)| pool));
        assert_eq!(totals, CreditStats { max: 32, available: 14, min: 14 });
        let shown = per_cpt(held.iter().map(|(cpt, pool)| (*cpt, pool)));
        assert_eq!(shown[0].credits, CreditStats { max: 16, available: -1, min: -1 });
        let [(_, zero), (_, one)] = held.as_mut_slice() else { panic!("two pools") };
        assert_eq!(queues.charge(zero).release(), Some(key(16)));
        assert!(!queues.charge(one).remove(key(17)), "not waiting");
        assert_eq!(queues.available(), 15);
        queues.check(held.iter().map(|(_, pool)| pool)).unwrap();
    }
}
