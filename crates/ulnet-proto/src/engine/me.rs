//! Match entries and process ids, and the ME table (`Mes`).
//!
//! lustre: lnet/lnet/lib-me.c `LNetMEAttach()`, lib-ptl.c `lnet_try_match_md()` (the match
//! rule), include/uapi/linux/lnet/lnet-types.h (`struct lnet_process_id`, `LNET_PID_ANY`).

use std::fmt;

use crate::engine::md::MAX_COOKIE_INDEX;
use crate::engine::md::UnlinkMode;
use crate::engine::shares::{Keyed, Shares};
use crate::engine::slab::{Key, KeyPartitions, PartSlab};
use crate::engine::view::{Access, Exclusive};

pub use crate::addr::{LNET_PID_ANY, LNET_PID_LUSTRE, ProcessId};

/// Where a new ME goes (`enum lnet_ins_pos`). On a wildcard portal of a node with several
/// partitions, `Before` and `After` put it in the portal's fixed match table (portal index
/// modulo the partition count) and `Local` in the table of partition `cpt`; on a unique portal
/// the table is the hash of the ME's NID whatever the position. Within its table's list,
/// `Before` goes first and the others last.
/// lustre: lnet/lnet/lib-me.c `LNetMEAttach()`, lib-ptl.c `lnet_mt_of_attach()`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InsertPosition {
    /// `LNET_INS_BEFORE`.
    Before,
    /// `LNET_INS_AFTER`.
    After,
    /// `LNET_INS_LOCAL`: appended to partition `cpt`'s table. The kernel takes the attaching
    /// thread's partition (`lnet_cpt_current()`); the engine, which has no threads, is told
    /// it (the runtime passes the calling thread's).
    Local {
        /// The partition, below the node's partition count.
        cpt: u32,
    },
}

impl InsertPosition {
    /// Whether the ME goes at the front of its list.
    pub(crate) fn is_front(self) -> bool {
        self == Self::Before
    }
}

/// An ME handle.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MeHandle(pub u64);

/// `LNET_COOKIE_TYPE_ME`.
const COOKIE_TYPE_ME: u64 = 2;

impl MeHandle {
    pub(crate) fn from_key(key: Key) -> Self {
        Self((u64::from(key.generation) << 32) | (u64::from(key.index) << 2) | COOKIE_TYPE_ME)
    }

    pub(crate) fn key(self) -> Option<Key> {
        if self.0 & 0x3 != COOKIE_TYPE_ME {
            return None;
        }
        Some(Key { index: ((self.0 & 0xffff_ffff) >> 2) as u32, generation: (self.0 >> 32) as u32 })
    }
}

impl fmt::Debug for MeHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "MeHandle({:#x})", self.0)
    }
}

/// A match entry (`struct lnet_me`).
#[derive(Clone, Debug)]
pub(crate) struct Me {
    pub(crate) portal: u32,
    pub(crate) match_id: ProcessId,
    pub(crate) match_bits: u64,
    pub(crate) ignore_bits: u64,
    pub(crate) unlink: UnlinkMode,
    pub(crate) md: Option<Key>,
    /// LNet's own (the ping and push targets): invisible to the user's handles.
    pub(crate) internal: bool,
    /// The partition whose match table of the portal holds it (`me_cpt`).
    pub(crate) cpt: u32,
}

impl Me {
    /// The ME half of `lnet_try_match_md`: initiator and match bits.
    pub(crate) fn matches(&self, initiator: ProcessId, match_bits: u64) -> bool {
        (self.match_id.nid.is_any() || self.match_id.nid == initiator.nid)
            && (self.match_id.pid == LNET_PID_ANY || self.match_id.pid == initiator.pid)
            && (self.match_bits ^ match_bits) & !self.ignore_bits == 0
    }

    /// Unique MEs (specific NID and pid, no ignore bits) fix a portal's match type to unique.
    /// lustre: lib-ptl.c `lnet_ptl_match_type()`.
    pub(crate) fn is_unique(&self) -> bool {
        self.ignore_bits == 0 && !self.match_id.nid.is_any() && self.match_id.pid != LNET_PID_ANY
    }
}

/// One partition's MEs alive, by key (the kernel's `ln_me_containers[cpt]`): an ME lives in
/// the partition of the match table that holds it, which its key, and so its handle's cookie,
/// names. LNet's own MEs (on portal 0) are counted apart so that only the user's count
/// against `Limits::mes` (a bound on each partition).
#[derive(Debug)]
pub(crate) struct Mes {
    slab: PartSlab<Me>,
    internal: usize,
}

impl Mes {
    /// Partition `cpt`'s MEs.
    pub(crate) fn new(cpt: u32, partitions: KeyPartitions) -> Self {
        Self { slab: PartSlab::new(cpt, partitions, MAX_COOKIE_INDEX), internal: 0 }
    }

    /// Every ME here, LNet's included.
    pub(crate) fn len(&self) -> usize {
        self.slab.len()
    }

    /// The user's MEs.
    pub(crate) fn user_count(&self) -> usize {
        self.slab.len() - self.internal
    }
}

impl Keyed for Mes {
    type Value = Me;

    fn slab(&self) -> &PartSlab<Me> {
        &self.slab
    }

    fn slab_mut(&mut self) -> &mut PartSlab<Me> {
        &mut self.slab
    }
}

impl<'a, A: Access> Shares<'a, A, Mes> {
    /// Every ME in the partitions held, LNet's included.
    pub(crate) fn len(&self) -> usize {
        self.iter_shares().map(|(_, share)| share.len()).sum()
    }

    /// The user's MEs in the partitions held.
    pub(crate) fn user_count(&self) -> usize {
        self.iter_shares().map(|(_, share)| share.user_count()).sum()
    }

    /// LNet's own MEs in the partitions held.
    pub(crate) fn internal_count(&self) -> usize {
        self.iter_shares().map(|(_, share)| share.internal).sum()
    }
}

impl<'a> Shares<'a, Exclusive, Mes> {
    /// Files an ME in its table's partition (`me.cpt`); `None` when keys ran out or the call
    /// does not hold the partition.
    #[inline]
    pub(crate) fn insert(&mut self, me: Me) -> Option<Key> {
        let share = self.share_mut(me.cpt)?;
        let internal = me.internal;
        let key = share.slab.insert(me)?;
        if internal {
            share.internal += 1;
        }
        Some(key)
    }

    #[inline]
    pub(crate) fn remove(&mut self, key: Key) -> Option<Me> {
        let share = self.share_of_mut(key)?;
        let me = share.slab.remove(key)?;
        if me.internal {
            share.internal -= 1;
        }
        Some(me)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::addr::{Net, Nid};

    fn me(match_id: ProcessId, match_bits: u64, ignore_bits: u64) -> Me {
        Me {
            portal: 0,
            match_id,
            match_bits,
            ignore_bits,
            unlink: UnlinkMode::Retain,
            md: None,
            internal: false,
            cpt: 0,
        }
    }

    #[test]
    fn match_rule() {
        let a = ProcessId::new(Nid::new4(Net::TCP, 1), 12345);
        let b = ProcessId::new(Nid::new4(Net::TCP, 2), 12345);
        let exact = me(a, 0x10, 0);
        assert!(exact.matches(a, 0x10));
        assert!(!exact.matches(a, 0x11));
        assert!(!exact.matches(b, 0x10));
        assert!(!exact.matches(ProcessId::new(a.nid, 7), 0x10));
        let wild = me(ProcessId::ANY, 0xf0, 0x0f);
        assert!(wild.matches(b, 0xf7));
        assert!(!wild.matches(b, 0x07));
        assert!(exact.is_unique() && !wild.is_unique());
        assert!(!me(ProcessId::new(a.nid, LNET_PID_ANY), 0, 0).is_unique());
    }

    #[test]
    fn handle_round_trip() {
        let key = Key { index: 5, generation: 9 };
        assert_eq!(MeHandle::from_key(key).key(), Some(key));
        assert_eq!(MeHandle(1).key(), None);
    }
}
