//! Memory descriptors: options, threshold, offsets and the unlink rules, and the MD table
//! (`Mds`).
//!
//! lustre: lnet/lnet/lib-md.c (`lnet_md_build`, `LNetMDAttach`, `LNetMDBind`, `LNetMDUnlink`),
//! include/linux/lnet/lib-lnet.h (`lnet_md_exhausted`, `lnet_md_unlinkable`),
//! include/uapi/linux/lnet/lnet-types.h (`LNET_MD_*`), docs/protocol/semantics.md §1.3-1.5.

use std::fmt;
use std::ops::BitOr;

use crate::addr::Nid;
use crate::engine::memory::Memory;
use crate::engine::peer::{PeerId, PeerNiId};
use crate::engine::recovery::RecoveryTarget;
use crate::engine::shares::{Keyed, Shares};
use crate::engine::slab::{Key, KeyPartitions, PartSlab};
use crate::engine::view::{Access, Exclusive};
use crate::time::Time;
use crate::wire::header::Header;

/// MD option bits, with Lustre's values (`LNET_MD_*` in lnet-types.h).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct MdOptions(pub u32);

impl MdOptions {
    pub const NONE: Self = Self(0);
    /// Incoming PUTs may match.
    pub const OP_PUT: Self = Self(0x1);
    /// Incoming GETs may match.
    pub const OP_GET: Self = Self(0x2);
    /// The offset comes from the request instead of the MD's running offset.
    pub const MANAGE_REMOTE: Self = Self(0x4);
    /// An oversized request is truncated instead of dropped.
    pub const TRUNCATE: Self = Self(0x10);
    /// Never send an ACK for PUTs into this MD.
    pub const ACK_DISABLE: Self = Self(0x20);
    /// Each match may use at most `max_size` bytes; exhausted when fewer remain.
    pub const MAX_SIZE: Self = Self(0x80);
    /// Force response tracking on for this MD.
    pub const TRACK_RESPONSE: Self = Self(0x400);
    /// Force response tracking off for this MD.
    pub const NO_TRACK_RESPONSE: Self = Self(0x800);

    pub fn contains(self, other: Self) -> bool {
        self.0 & other.0 == other.0
    }

    pub fn intersects(self, other: Self) -> bool {
        self.0 & other.0 != 0
    }
}

impl BitOr for MdOptions {
    type Output = Self;

    fn bitor(self, other: Self) -> Self {
        Self(self.0 | other.0)
    }
}

impl fmt::Debug for MdOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "MdOptions({:#x})", self.0)
    }
}

/// How many operations an MD accepts (`threshold`, `LNET_MD_THRESH_INF` = -1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Threshold {
    Infinite,
    Count(u32),
}

impl Threshold {
    pub(crate) fn is_zero(self) -> bool {
        self == Threshold::Count(0)
    }

    pub(crate) fn decrement(&mut self) {
        if let Threshold::Count(count) = self {
            *count = count.saturating_sub(1);
        }
    }
}

/// Whether an MD (or ME) goes away by itself when exhausted (`LNET_UNLINK` / `LNET_RETAIN`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnlinkMode {
    Unlink,
    Retain,
}

/// The user's description of an MD (`struct lnet_md`), memory included.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MdSpec {
    pub memory: Memory,
    pub threshold: Threshold,
    pub options: MdOptions,
    /// Used when `options` has [`MdOptions::MAX_SIZE`].
    pub max_size: u32,
    /// Opaque user value reported in every event (`user_ptr`).
    pub user_ptr: u64,
    /// False for an MD without an event handler: no events at all.
    pub events: bool,
    /// Opaque value naming who takes the MD's events, reported in every one of them (the
    /// kernel's `md_handler`): a runtime keeps its event queue's id here, so routing an event
    /// needs no table of MDs.
    pub handler: u64,
    /// The CPU partition a bound MD is made on, what the kernel takes from the binding
    /// thread (`lnet_res_lock_current()`); `None` is partition 0. An attached MD goes where
    /// its ME is, whatever this says.
    pub cpt: Option<u32>,
}

impl MdSpec {
    /// An MD over `memory` with infinite threshold, no options and events on.
    pub fn new(memory: Memory) -> Self {
        Self {
            memory,
            threshold: Threshold::Infinite,
            options: MdOptions::NONE,
            max_size: 0,
            user_ptr: 0,
            events: true,
            handler: 0,
            cpt: None,
        }
    }

    pub fn threshold(mut self, threshold: Threshold) -> Self {
        self.threshold = threshold;
        self
    }

    pub fn options(mut self, options: MdOptions) -> Self {
        self.options = options;
        self
    }

    pub fn max_size(mut self, max_size: u32) -> Self {
        self.options = self.options | MdOptions::MAX_SIZE;
        self.max_size = max_size;
        self
    }

    pub fn user_ptr(mut self, user_ptr: u64) -> Self {
        self.user_ptr = user_ptr;
        self
    }

    /// Names who takes the MD's events ([`MdSpec::handler`]).
    pub fn handler(mut self, handler: u64) -> Self {
        self.handler = handler;
        self
    }

    /// Binds the MD on partition `cpt` ([`MdSpec::cpt`]).
    pub fn on_partition(mut self, cpt: u32) -> Self {
        self.cpt = Some(cpt);
        self
    }

    pub fn without_events(mut self) -> Self {
        self.events = false;
        self
    }
}

/// An MD handle: the cookie LNet puts in wire handles (`lh_cookie`).
///
/// Layout: generation in the high 32 bits, the key's index (its partition in the low bits,
/// as many as the partition count needs, the slot above) shifted by 2, and the 2-bit object
/// type (MD = 1) at the bottom, as Lustre's handle cookies have. Never all-ones.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MdHandle(pub u64);

/// `LNET_COOKIE_TYPE_MD`.
const COOKIE_TYPE_MD: u64 = 1;
/// Slot indices must fit in the 30 cookie bits above the type.
pub(crate) const MAX_COOKIE_INDEX: u32 = (1 << 30) - 1;

impl MdHandle {
    pub(crate) fn from_key(key: Key) -> Self {
        Self((u64::from(key.generation) << 32) | (u64::from(key.index) << 2) | COOKIE_TYPE_MD)
    }

    pub(crate) fn key(self) -> Option<Key> {
        if self.0 & 0x3 != COOKIE_TYPE_MD {
            return None;
        }
        Some(Key { index: ((self.0 & 0xffff_ffff) >> 2) as u32, generation: (self.0 >> 32) as u32 })
    }
}

impl fmt::Debug for MdHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "MdHandle({:#x})", self.0)
    }
}

/// A response tracker attached to an MD (`struct lnet_rsp_tracker`).
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Tracker {
    pub(crate) deadline: Time,
    /// The peer NI the tracked request went to; blamed when the tracker expires.
    pub(crate) next_hop: Option<PeerNiId>,
    /// `rspt_start`: when `LNetPut`/`LNetGet` attached it (the round-trip statistics).
    pub(crate) started: Time,
    /// When the request first reached the LND (fast failover's copy window), and through
    /// which NI it last left.
    pub(crate) sent_at: Option<Time>,
    pub(crate) sent_ni: Option<crate::engine::ni::NiId>,
    /// The path (peer NI, local NI) whose `awaiting` count includes this request (fast
    /// failover).
    pub(crate) awaiting: Option<(PeerNiId, crate::engine::ni::NiId)>,
    /// What fast failover needs to send the request again; `None` when it may not (fast
    /// failover off, or more than one operation on the MD).
    pub(crate) request: Option<Box<TrackedRequest>>,
}

/// A tracked request as sent, kept so fast failover can send a copy on another path.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct TrackedRequest {
    pub(crate) header: Header,
    /// The source NID the user asked for (`msg_src_nid_param`).
    pub(crate) source: Option<Nid>,
    /// Payload bytes (a PUT's MD length).
    pub(crate) length: u32,
    /// Copies sent so far (bounded by `retry_count`).
    pub(crate) copies: u32,
}

/// Who an MD's events go to: the user, or one of LNet's own consumers (the ping and push
/// targets, discovery, the ping API), which the user can neither see nor unlink.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum MdOwner {
    User,
    PingTarget,
    PushTarget,
    DiscoveryPing(PeerId),
    DiscoveryPush(PeerId),
    Ping(u64),
    /// A recovery ping of a local NI or a peer NI (`lnet_mt_event_handler`).
    Recovery(RecoveryTarget),
    /// Dropped by its consumer (a failed ping or push, a finished API ping): its late events
    /// are ignored, as Lustre's handlers find nothing left to update.
    Abandoned,
}

/// A live MD (`struct lnet_libmd`).
#[derive(Debug)]
pub(crate) struct Md {
    pub(crate) handle: MdHandle,
    pub(crate) memory: Memory,
    /// `md_length`; fits in u32 (checked at creation).
    pub(crate) length: u32,
    /// `md_offset`: the running local offset.
    pub(crate) offset: u32,
    pub(crate) max_size: u32,
    pub(crate) threshold: Threshold,
    pub(crate) options: MdOptions,
    pub(crate) user_ptr: u64,
    pub(crate) events: bool,
    /// [`MdSpec::handler`].
    pub(crate) handler: u64,
    /// Messages attached to this MD (`md_refcount`).
    pub(crate) refcount: u32,
    /// The ME this MD is attached to (passive MDs only).
    pub(crate) me: Option<Key>,
    /// `LNET_MD_FLAG_AUTO_UNLINK`: created with [`UnlinkMode::Unlink`].
    pub(crate) auto_unlink: bool,
    /// `LNET_MD_FLAG_ZOMBIE`: unlinked, waiting for its last message.
    pub(crate) zombie: bool,
    /// `LNET_MD_FLAG_ABORTED`: explicitly unlinked (or its tracker expired).
    pub(crate) aborted: bool,
    /// The memory is lent to the driver filling this MD's one receive ([`Engine::rx_lend`]);
    /// `memory` is empty until it comes back.
    ///
    /// [`Engine::rx_lend`]: crate::engine::Engine::rx_lend
    pub(crate) lent: bool,
    pub(crate) tracker: Option<Tracker>,
    pub(crate) owner: MdOwner,
}

impl Md {
    /// `lnet_md_exhausted`: threshold used up, or MAX_SIZE and too little room for another.
    pub(crate) fn exhausted(&self) -> bool {
        self.threshold.is_zero()
            || (self.options.contains(MdOptions::MAX_SIZE)
                && u64::from(self.offset) + u64::from(self.max_size) > u64::from(self.length))
    }

    /// `lnet_md_unlinkable`: idle and either unlinked or auto-unlink and exhausted.
    pub(crate) fn unlinkable(&self) -> bool {
        self.refcount == 0 && (self.zombie || (self.auto_unlink && self.exhausted()))
    }

    /// Attaches one operation (`lnet_msg_attach_md`): a reference and one threshold unit.
    pub(crate) fn attach_operation(&mut self) {
        self.refcount = self.refcount.saturating_add(1);
        self.threshold.decrement();
    }

    /// Undoes [`Md::attach_operation`] for an operation that never happened (a response cut
    /// off in transit that fast failover waits for again).
    pub(crate) fn detach_unused_operation(&mut self) {
        self.refcount = self.refcount.saturating_sub(1);
        if let Threshold::Count(left) = &mut self.threshold {
            *left = left.saturating_add(1);
        }
    }
}

/// One partition's MDs alive, by key (the kernel's `ln_md_containers[cpt]`): an MD's key,
/// and so its handle's cookie, names the partition it was made on. LNet's own MDs (ping and
/// push targets, discovery, pings, recovery) are counted apart so that only the user's count
/// against `Limits::mds` (a bound on each partition).
#[derive(Debug)]
pub(crate) struct Mds {
    slab: PartSlab<Md>,
    internal: usize,
}

impl Mds {
    /// Partition `cpt`'s MDs.
    pub(crate) fn new(cpt: u32, partitions: KeyPartitions) -> Self {
        Self { slab: PartSlab::new(cpt, partitions, MAX_COOKIE_INDEX), internal: 0 }
    }

    /// Files an MD here and gives it its handle.
    #[inline]
    pub(crate) fn insert(&mut self, md: Md) -> Option<Key> {
        let internal = md.owner != MdOwner::User;
        let key = self.slab.insert(md)?;
        if internal {
            self.internal += 1;
        }
        if let Some(md) = self.slab.get_mut(key) {
            md.handle = MdHandle::from_key(key);
        }
        Some(key)
    }

    /// The user's MDs.
    pub(crate) fn user_count(&self) -> usize {
        self.slab.len() - self.internal
    }
}

impl Keyed for Mds {
    type Value = Md;

    fn slab(&self) -> &PartSlab<Md> {
        &self.slab
    }

    fn slab_mut(&mut self) -> &mut PartSlab<Md> {
        &mut self.slab
    }
}

impl<'a, A: Access> Shares<'a, A, Mds> {
    /// The user's MDs in the partitions held.
    pub(crate) fn user_count(&self) -> usize {
        self.iter_shares().map(|(_, share)| share.user_count()).sum()
    }

    /// LNet's own MDs in the partitions held.
    pub(crate) fn internal_count(&self) -> usize {
        self.iter_shares().map(|(_, share)| share.internal).sum()
    }
}

impl<'a> Shares<'a, Exclusive, Mds> {
    /// Files an MD in partition `cpt` and gives it its handle; `None` when keys ran out or
    /// the call does not hold the partition.
    #[inline]
    pub(crate) fn insert(&mut self, cpt: u32, md: Md) -> Option<Key> {
        self.share_mut(cpt)?.insert(md)
    }

    /// Frees an MD; false if it was already gone.
    #[inline]
    pub(crate) fn discard(&mut self, key: Key) -> bool {
        let Some(share) = self.share_of_mut(key) else {
            return false;
        };
        let internal = share.slab.get(key).is_some_and(|md| md.owner != MdOwner::User);
        let discarded = share.slab.discard(key);
        if discarded && internal {
            share.internal -= 1;
        }
        discarded
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn option_values_match_lnet_types_h() {
        assert_eq!(MdOptions::OP_PUT.0, 0x1);
        assert_eq!(MdOptions::OP_GET.0, 0x2);
        assert_eq!(MdOptions::MANAGE_REMOTE.0, 0x4);
        assert_eq!(MdOptions::TRUNCATE.0, 0x10);
        assert_eq!(MdOptions::ACK_DISABLE.0, 0x20);
        assert_eq!(MdOptions::MAX_SIZE.0, 0x80);
        assert_eq!(MdOptions::TRACK_RESPONSE.0, 0x400);
        assert_eq!(MdOptions::NO_TRACK_RESPONSE.0, 0x800);
        let both = MdOptions::OP_PUT | MdOptions::OP_GET;
        assert!(both.contains(MdOptions::OP_GET) && !both.contains(MdOptions::TRUNCATE));
    }

    #[test]
    fn handle_cookies_round_trip_and_are_never_none() {
        let key = Key { index: MAX_COOKIE_INDEX, generation: u32::MAX };
        let handle = MdHandle::from_key(key);
        assert_eq!(handle.key(), Some(key));
        assert_ne!(handle.0, u64::MAX);
        assert_eq!(MdHandle(u64::MAX).key(), None);
        assert_eq!(MdHandle(0).key(), None);
    }

    #[test]
    fn threshold_counts_down_to_zero() {
        let mut threshold = Threshold::Count(1);
        threshold.decrement();
        assert!(threshold.is_zero());
        threshold.decrement();
        assert!(threshold.is_zero());
        let mut infinite = Threshold::Infinite;
        infinite.decrement();
        assert_eq!(infinite, Threshold::Infinite);
    }
}
