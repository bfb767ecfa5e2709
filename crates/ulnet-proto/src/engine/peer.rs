//! Peers as Lustre models them: peer -> peer nets -> peer NIs, with a primary NID, the state
//! bits discovery and configuration drive, the per-peer discovery bookkeeping, and per peer
//! NI the selection, health, recovery and progress state multi-rail uses. The node part's
//! `PeerTable` holds the peers, indexes peer NIs by NID and says where each lives, creates
//! them on first traffic and reclaims the slots of deleted ones; each peer NI is kept by the
//! partition its NID hashes to (`PeerNis`, in that partition's part).
//!
//! lustre: lnet/lnet/peer.c (`lnet_peer_ni_alloc`, `lnet_nid2peerni_locked`,
//! `lnet_peer_primary_nid_locked`, `lnet_peer_attach_peer_ni`,
//! `lnet_peer_detach_peer_ni_locked`), include/linux/lnet/lib-types.h (`struct lnet_peer`,
//! `struct lnet_peer_net`, `struct lnet_peer_ni`, `LNET_PEER_*`).

use std::collections::{BTreeSet, VecDeque};

use foldhash::HashMap;
use std::fmt;
use std::ops::BitOr;

use crate::addr::{Net, Nid};
use crate::engine::cpt::Partitions;
use crate::engine::credits::CreditPool;
use crate::engine::event::EventStatus;
use crate::engine::health::Health;
use crate::engine::latency::LatencySlot;
use crate::engine::ni::MAX_SELECTION_PRIORITY;
use crate::engine::ni::NiId;
use crate::engine::policies::PreferredNids;
use crate::engine::recovery::Recovery;
use crate::engine::shares::{Keyed, Shares};
use crate::engine::slab::{Key, KeyPartitions, PartSlab, Slab};
use crate::engine::stamp::Stamp;
use crate::engine::stats::{ElementStats, PeerNiHealthStats};
use crate::engine::view::{Access, Exclusive};
use crate::engine::watch::Watch;
use crate::time::Time;
use crate::wire::ping::{LNET_NI_STATUS_UP, PingInfo};

/// Index of a peer NI in the node's peer table. Peer NIs are never removed (discovery moves
/// them between peers and marks vanished ones DOWN), so ids stay valid for the node's lifetime.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PeerNiId(pub u32);

/// A peer: a slab key, so a peer absorbed by a merge is never mistaken for its slot's reuse.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct PeerId(pub(crate) Key);

/// `lp_state`: the peer state bits, with Lustre's values (include/linux/lnet/lib-types.h).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct PeerState(pub u32);

impl PeerState {
    /// Multi-rail aware: learned from a ping reply or push when discovery is on both sides.
    pub const MULTI_RAIL: Self = Self(1 << 0);
    /// The peer has discovery off (or it is off locally).
    pub const NO_DISCOVERY: Self = Self(1 << 1);
    /// The peer routes (its ping buffer lacks `RTE_DISABLED`).
    pub const ROUTER_ENABLED: Self = Self(1 << 2);
    /// Configured by the user (`lnetctl peer add`): discovery may not change its multi-rail
    /// setting, and only configuration changes its NIs.
    pub const CONFIGURED: Self = Self(1 << 3);
    pub const DISCOVERED: Self = Self(1 << 4);
    /// The last discovery failed; the next message retries it.
    pub const REDISCOVER: Self = Self(1 << 5);
    pub const DISCOVERING: Self = Self(1 << 6);
    /// A ping reply or push is stored, waiting to be merged.
    pub const DATA_PRESENT: Self = Self(1 << 7);
    pub const NIDS_UPTODATE: Self = Self(1 << 8);
    pub const PING_SENT: Self = Self(1 << 9);
    pub const PUSH_SENT: Self = Self(1 << 10);
    pub const PING_FAILED: Self = Self(1 << 11);
    pub const PUSH_FAILED: Self = Self(1 << 12);
    pub const FORCE_PING: Self = Self(1 << 13);
    pub const FORCE_PUSH: Self = Self(1 << 14);
    /// The router checker is discovering this gateway.
    pub const RTR_DISCOVERY: Self = Self(1 << 16);
    /// The router checker has discovered this gateway at least once.
    pub const RTR_DISCOVERED: Self = Self(1 << 17);
    /// The peer turned discovery off after being discovered: its state is reset and it is
    /// discovered again from scratch (Lustre deletes and re-creates it).
    pub const MARK_DELETION: Self = Self(1 << 18);
    /// The primary NID is locked (`--lock_prim`, or set by the upper layer): deleting the
    /// peer without force keeps it and its primary.
    pub const LOCK_PRIMARY: Self = Self(1 << 20);
    /// Discovery found a NID of this peer that is the locked primary of another peer with
    /// other NIs: the configuration is wrong (`lnet_peer_add_nid`).
    pub const BAD_CONFIG: Self = Self(1 << 21);

    pub fn contains(self, other: Self) -> bool {
        self.0 & other.0 == other.0
    }

    pub fn intersects(self, other: Self) -> bool {
        self.0 & other.0 != 0
    }

    pub(crate) fn insert(&mut self, other: Self) {
        self.0 |= other.0;
    }

    pub(crate) fn remove(&mut self, other: Self) {
        self.0 &= !other.0;
    }
}

impl BitOr for PeerState {
    type Output = Self;

    fn bitor(self, other: Self) -> Self {
        Self(self.0 | other.0)
    }
}

impl fmt::Debug for PeerState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PeerState({:#x})", self.0)
    }
}

/// What the node knows about a peer (`lnetctl peer show` material).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeerInfo {
    pub primary_nid: Nid,
    pub state: PeerState,
    /// `lp_peer_seqno`: the peer's ping-buffer sequence number last seen.
    pub peer_sequence: u32,
    /// `lp_node_seqno`: our sequence number the peer last acknowledged (a push ACK).
    pub node_sequence: u32,
    /// Bytes the peer's ping buffer needs (`lp_data_bytes`), 0 until known.
    pub data_bytes: u32,
    /// Messages held until discovery completes.
    pub pending: usize,
    /// The peer's NIs, primary net first and primary NI first in its net.
    pub nis: Vec<PeerNiInfo>,
}

impl PeerInfo {
    pub fn multi_rail(&self) -> bool {
        self.state.contains(PeerState::MULTI_RAIL)
    }
}

/// One peer NI as [`PeerInfo`] lists it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PeerNiInfo {
    pub nid: Nid,
    /// `lpni_ns_status`: `LNET_NI_STATUS_UP` or `_DOWN` as the peer last reported it.
    pub status: u32,
}

/// `struct lnet_peer`.
#[derive(Debug)]
pub(crate) struct Peer {
    pub(crate) primary_nid: Nid,
    pub(crate) state: PeerState,
    /// In order, the primary's net first.
    pub(crate) nets: Vec<PeerNet>,
    pub(crate) discovery: Discovery,
    /// `lp_send_seq`: stamps the peer net and peer NI each commit uses (round robin).
    pub(crate) send_seq: Stamp,
    /// `lp_alive`: a gateway answered its last router check (routing.rs).
    pub(crate) alive: bool,
    /// `lp_disc_net_id`: the net the router checker pinged this gateway on last.
    pub(crate) router_net: Option<Net>,
}

impl Peer {
    pub(crate) fn multi_rail(&self) -> bool {
        self.state.contains(PeerState::MULTI_RAIL)
    }

    pub(crate) fn ni_ids(&self) -> impl Iterator<Item = PeerNiId> + '_ {
        self.nets.iter().flat_map(|net| net.nis.iter().copied())
    }

    pub(crate) fn ni_count(&self) -> usize {
        self.nets.iter().map(|net| net.nis.len()).sum()
    }
}

/// Where a peer is in the discovery queues (`lp_dc_list`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub(crate) enum DiscoveryQueue {
    #[default]
    None,
    /// On the request queue: the discovery pass will act on it.
    Request,
    /// Waiting for an event (a ping REPLY or push ACK).
    Working,
}

/// The discovery fields of `struct lnet_peer`.
#[derive(Debug, Default)]
pub(crate) struct Discovery {
    /// `lp_data`: the ping reply or push waiting to be merged (`DATA_PRESENT`).
    pub(crate) data: Option<Box<PingInfo>>,
    /// `lp_data_bytes`: the size of the peer's ping buffer, for the next ping's sink.
    pub(crate) data_bytes: u32,
    /// `lp_peer_seqno`.
    pub(crate) peer_sequence: u32,
    /// `lp_node_seqno`: our sequence number the peer acknowledged.
    pub(crate) node_sequence: u32,
    /// The sequence number of the buffer in flight as a push.
    pub(crate) pushed_sequence: u32,
    /// `lp_ping_mdh`, `lp_push_mdh`.
    pub(crate) ping_md: Option<Key>,
    pub(crate) push_md: Option<Key>,
    /// `lp_ping_error` / `lp_push_error` with PING/PUSH_FAILED: `None` is Lustre's 0, a soft
    /// failure (corrupt or truncated reply) that retries.
    pub(crate) ping_error: Option<EventStatus>,
    pub(crate) push_error: Option<EventStatus>,
    /// `lp_dc_error`: how the last discovery failed.
    pub(crate) error: Option<EventStatus>,
    /// `lp_disc_src_nid` / `lp_disc_dst_nid`: the NI pair a ping reply used; the push that
    /// follows goes the same way once.
    pub(crate) source: Option<Nid>,
    pub(crate) destination: Option<Nid>,
    /// `lp_dc_pendq`: messages held until discovery completes.
    pub(crate) pending: VecDeque<Key>,
    pub(crate) queue: DiscoveryQueue,
    /// Soft ping failures in a row (bounded so a peer that always answers garbage cannot keep
    /// us pinging it forever).
    pub(crate) soft_failures: u8,
}

/// `struct lnet_peer_net`.
#[derive(Debug)]
pub(crate) struct PeerNet {
    pub(crate) net: Net,
    pub(crate) nis: Vec<PeerNiId>,
    /// `lpn_seq`.
    pub(crate) seq: Stamp,
    /// `lpn_sel_priority` (UDSP; lower is preferred).
    pub(crate) priority: u32,
    /// `lpn_next_ping`: when the router checker next pings a gateway on this net.
    pub(crate) next_ping: Time,
}

impl PeerNet {
    fn new(net: Net, nis: Vec<PeerNiId>) -> Self {
        Self {
            net,
            nis,
            seq: Stamp::default(),
            priority: MAX_SELECTION_PRIORITY,
            next_ping: Time::ZERO,
        }
    }
}

/// `struct lnet_peer_ni`.
#[derive(Debug)]
pub(crate) struct PeerNi {
    pub(crate) nid: Nid,
    /// The partition that owns it: the kernel keeps a peer NI in the peer table of
    /// `lnet_nid_cpt_hash(nid, LNET_CPT_NUMBER)`, whatever its net (peer.c
    /// `lnet_peer_ni_alloc()`).
    pub(crate) cpt: u32,
    /// Peer tx credits (`lpni_txcredits`, `lpni_mintxcredits`, `lpni_txq`).
    pub(crate) credits: CreditPool,
    /// Router credits (`lpni_rtrcredits`): messages from this peer NI a router may hold in
    /// its buffers at once; made on the first message it forwards for it.
    pub(crate) router_credits: Option<CreditPool>,
    /// `lpni_txqnob`: bytes of messages holding a peer credit (length + header).
    pub(crate) queued_bytes: u64,
    pub(crate) health: Health,
    /// `lpni_last_alive`: when we last heard from it.
    pub(crate) last_alive: Option<Time>,
    /// Connection state the LND reported (`auto_down`).
    pub(crate) alive: bool,
    /// `lpni_ns_status`: what the peer's ping buffer says of this NI.
    pub(crate) status: u32,
    pub(crate) stats: ElementStats,
    pub(crate) health_stats: PeerNiHealthStats,
    /// `lpni_seq`.
    pub(crate) seq: Stamp,
    /// `lpni_sel_priority` (UDSP; lower is preferred).
    pub(crate) priority: u32,
    /// `lpni_pref`: the local NIDs preferred for reaching it (UDSP `--src --dst` rules), or
    /// the one a non-multi-rail peer NI is always reached from.
    pub(crate) preferred: PreferredNids,
    /// `lpni_rtr_pref_nids`: the routers preferred for reaching it (UDSP `--dst --rte`
    /// rules), newest first; at most one entry per route gateway.
    pub(crate) preferred_routers: Vec<Nid>,
    /// No longer listed in the peer's ping buffer (Lustre deletes such NIs): never selected.
    pub(crate) vanished: bool,
    /// Deleted by configuration (`peer del`): detached from every peer and from the NID
    /// index; the slot is reused once nothing refers to it.
    pub(crate) deleted: bool,
    pub(crate) recovery: Recovery,
    pub(crate) latency: LatencySlot,
    pub(crate) watch: Watch,
}

/// The peer table was full.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PeerTableFull;

/// One partition's peer NIs: those whose NID hashes to it, as the kernel files a peer NI in
/// the peer table of its CPT (`the_lnet.ln_peer_tables[cpt]`). The changing state of a peer NI
/// (credits and their queue, health, statistics, the watch, recovery) is its owner's, so a
/// call planned on that partition reaches it under the partition's lock alone.
#[derive(Debug)]
pub(crate) struct PeerNis {
    slab: PartSlab<PeerNi>,
    /// Fast failover's watch of the paths to these peer NIs that have work outstanding, by
    /// when each becomes suspect (`watch.rs`).
    watch: BTreeSet<(Time, PeerNiId, NiId)>,
}

impl PeerNis {
    /// Partition `cpt`'s peer NIs.
    pub(crate) fn new(cpt: u32, partitions: KeyPartitions) -> Self {
        Self { slab: PartSlab::new(cpt, partitions, u32::MAX), watch: BTreeSet::new() }
    }

    /// The deadline of this partition's earliest watch entry.
    pub(crate) fn watch_deadline(&self) -> Option<Time> {
        self.watch.first().map(|(at, _, _)| *at)
    }

    /// Every peer NI here, to change (node-wide changes: configuration, a restart).
    pub(crate) fn iter_mut(&mut self) -> impl Iterator<Item = &mut PeerNi> {
        self.slab.iter_mut()
    }
}

/// Fast failover's watch queue: one per partition, beside the peer NIs it watches, so that
/// arming a path takes no lock but the peer NI's partition's.
impl Shares<'_, Exclusive, PeerNis> {
    /// Files the path `ni` -> `id` (owned by partition `cpt`) under `due`.
    pub(crate) fn arm(&mut self, cpt: u32, due: Time, id: PeerNiId, ni: NiId) {
        if let Some(share) = self.share_mut(cpt) {
            share.watch.insert((due, id, ni));
        }
    }

    pub(crate) fn disarm(&mut self, cpt: u32, at: Time, id: PeerNiId, ni: NiId) {
        if let Some(share) = self.share_mut(cpt) {
            share.watch.remove(&(at, id, ni));
        }
    }

    /// Takes the earliest watch entry of the partitions held if it is due at `now`.
    pub(crate) fn pop_due_watch(&mut self, now: Time) -> Option<(PeerNiId, NiId)> {
        let (_, cpt) = self.watch_front()?;
        let share = self.share_mut(cpt)?;
        let &(at, id, ni) = share.watch.first()?;
        if at > now {
            return None;
        }
        share.watch.pop_first();
        Some((id, ni))
    }

    /// Forgets every armed path (fast failover turned on or off).
    pub(crate) fn clear_watch(&mut self) {
        self.iter_shares_mut().for_each(|(_, share)| share.watch.clear());
    }
}

impl<A: Access> Shares<'_, A, PeerNis> {
    /// The earliest watch entry's deadline among the partitions held, with its partition.
    pub(crate) fn watch_front(&self) -> Option<(Time, u32)> {
        let fronts =
            self.iter_shares().filter_map(|(cpt, share)| Some((share.watch.first()?.0, cpt)));
        fronts.min()
    }

    pub(crate) fn is_armed(&self, at: Time, id: PeerNiId, ni: NiId) -> bool {
        self.iter_shares().any(|(_, share)| share.watch.contains(&(at, id, ni)))
    }

    /// Whether any path to `id` is in a watch queue.
    pub(crate) fn watches(&self, id: PeerNiId) -> bool {
        self.iter_shares().any(|(_, share)| share.watch.iter().any(|entry| entry.1 == id))
    }

    pub(crate) fn armed_count(&self) -> usize {
        self.iter_shares().map(|(_, share)| share.watch.len()).sum()
    }
}

impl Keyed for PeerNis {
    type Value = PeerNi;

    fn slab(&self) -> &PartSlab<PeerNi> {
        &self.slab
    }

    fn slab_mut(&mut self) -> &mut PartSlab<PeerNi> {
        &mut self.slab
    }
}

/// Where a peer NI is, by id: its key in its owner's [`PeerNis`], with what the node part
/// needs without reaching the owner (its NID, which never changes, and the peer it belongs
/// to, which only node-wide calls change).
#[derive(Clone, Copy, Debug)]
struct Slot {
    key: Key,
    nid: Nid,
    peer: PeerId,
}

/// Every peer the node knows, with the NID index and where each peer NI lives. Peer NI ids are
/// never moved: a deleted one keeps its slot (so ids stay valid) until reclaimed for a new NID.
/// The peer NIs themselves are kept by their owning partitions ([`PeerNis`]); the methods that
/// reach them take the shares a call holds.
#[derive(Debug, Default)]
pub(crate) struct PeerTable {
    peers: Slab<Peer>,
    slots: Vec<Slot>,
    by_nid: HashMap<Nid, PeerNiId>,
    /// Reclaimed slots of deleted peer NIs.
    free: Vec<PeerNiId>,
    /// Where each peer NI is owned (its `cpt`).
    partitions: Partitions,
    /// Every bit once a peer changed: a peer's change is the node's (the engine's partition
    /// audit).
    #[cfg(test)]
    touched: std::cell::Cell<u64>,
}

impl PeerTable {
    pub(crate) fn new(partitions: Partitions) -> Self {
        Self { partitions, ..Self::default() }
    }

    /// Every bit once a peer changed (the audit takes them).
    #[cfg(test)]
    pub(crate) fn touched(&self) -> &std::cell::Cell<u64> {
        &self.touched
    }

    /// The partition owning the peer NI of `nid` (made or not yet).
    pub(crate) fn cpt_of(&self, nid: &Nid) -> u32 {
        self.partitions.cpt_of_nid(nid, None)
    }

    /// Every peer, in slab order.
    pub(crate) fn peers(&self) -> impl Iterator<Item = (PeerId, &Peer)> {
        self.peers.iter().map(|(key, peer)| (PeerId(key), peer))
    }

    pub(crate) fn peer_count(&self) -> usize {
        self.peers.len()
    }

    /// Every peer NI slot (deleted ones included) whose owner the call holds, in id order.
    pub(crate) fn nis<'s, A: Access>(
        &'s self,
        nis: &'s Shares<'_, A, PeerNis>,
    ) -> impl Iterator<Item = (PeerNiId, &'s PeerNi)> {
        (0u32..)
            .zip(&self.slots)
            .filter_map(move |(index, slot)| Some((PeerNiId(index), nis.get(slot.key)?)))
    }

    /// Every peer NI the call holds, to change, partition by partition.
    pub(crate) fn nis_mut<'s>(
        nis: &'s mut Shares<'_, Exclusive, PeerNis>,
    ) -> impl Iterator<Item = &'s mut PeerNi> {
        nis.iter_shares_mut().flat_map(|(_, share)| share.iter_mut())
    }

    /// Peer NI slots, deleted ones included.
    pub(crate) fn ni_slots(&self) -> usize {
        self.slots.len()
    }

    /// Every peer NI id, deleted ones included, with its NID.
    pub(crate) fn ids(&self) -> impl Iterator<Item = (PeerNiId, Nid)> + '_ {
        (0u32..).zip(&self.slots).map(|(index, slot)| (PeerNiId(index), slot.nid))
    }

    pub(crate) fn find(&self, nid: Nid) -> Option<PeerNiId> {
        self.by_nid.get(&nid).copied()
    }

    /// The NID of peer NI `id`.
    pub(crate) fn nid(&self, id: PeerNiId) -> Option<Nid> {
        self.slot(id).map(|slot| slot.nid)
    }

    /// The peer peer NI `id` belongs to.
    pub(crate) fn owner(&self, id: PeerNiId) -> Option<PeerId> {
        self.slot(id).map(|slot| slot.peer)
    }

    fn slot(&self, id: PeerNiId) -> Option<&Slot> {
        self.slots.get(id.0 as usize)
    }

    /// A peer NI, read, when the call holds its owner.
    #[inline]
    pub(crate) fn ni<'s, A: Access>(
        &self,
        nis: &'s Shares<'_, A, PeerNis>,
        id: PeerNiId,
    ) -> Option<&'s PeerNi> {
        nis.get(self.slot(id)?.key)
    }

    /// A peer NI, to change, when the call holds its owner.
    #[inline]
    pub(crate) fn ni_mut<'s>(
        &self,
        nis: &'s mut Shares<'_, Exclusive, PeerNis>,
        id: PeerNiId,
    ) -> Option<&'s mut PeerNi> {
        nis.get_mut(self.slot(id)?.key)
    }

    pub(crate) fn peer(&self, id: PeerId) -> Option<&Peer> {
        self.peers.get(id.0)
    }

    /// A peer, to change: node-wide state (the kernel changes a peer's NIs and state under
    /// `LNET_LOCK_EX` or the peer's own `lp_lock`).
    pub(crate) fn peer_mut(&mut self, id: PeerId) -> Option<&mut Peer> {
        #[cfg(test)]
        self.touched.set(u64::MAX);
        self.peers.get_mut(id.0)
    }

    pub(crate) fn peer_of(&self, id: PeerNiId) -> Option<&Peer> {
        self.peer(self.owner(id)?)
    }

    /// The peer owning `nid`.
    pub(crate) fn peer_id(&self, nid: Nid) -> Option<PeerId> {
        self.find(nid).and_then(|id| self.owner(id))
    }

    /// How many NIs the peer owning `id` has (gates remote resends, docs/protocol/semantics.md §4.2).
    pub(crate) fn peer_ni_count(&self, id: PeerNiId) -> usize {
        self.peer_of(id).map_or(0, Peer::ni_count)
    }

    /// The primary NID of the peer owning `nid`, or `nid` itself for an unknown NID.
    /// lustre: peer.c `lnet_peer_primary_nid_locked()`.
    pub(crate) fn primary_nid(&self, nid: Nid) -> Nid {
        self.find(nid).and_then(|id| self.peer_of(id)).map_or(nid, |peer| peer.primary_nid)
    }

    /// Finds the peer NI for `nid`, creating a non-multi-rail peer with it as primary on first
    /// use. `peer_credits` comes from the local net's tunables.
    /// lustre: peer.c `lnet_nid2peerni_locked()` / `lnet_peer_ni_traffic_add()`.
    pub(crate) fn find_or_create(
        &mut self,
        nis: &mut Shares<'_, Exclusive, PeerNis>,
        nid: Nid,
        peer_credits: u32,
        limit: usize,
    ) -> Result<PeerNiId, PeerTableFull> {
        if let Some(id) = self.find(nid) {
            return Ok(id);
        }
        if self.is_full(limit) {
            return Err(PeerTableFull);
        }
        let peer = Peer {
            primary_nid: nid,
            state: PeerState::default(),
            nets: Vec::new(),
            discovery: Discovery::default(),
            send_seq: Stamp::default(),
            alive: true,
            router_net: None,
        };
        let Some(key) = self.peers.insert(peer) else {
            return Err(PeerTableFull);
        };
        let peer = PeerId(key);
        match self.new_ni(nis, nid, peer, peer_credits, limit) {
            Ok(id) => {
                if let Some(entry) = self.peers.get_mut(peer.0) {
                    entry.nets.push(PeerNet::new(nid.net(), vec![id]));
                }
                Ok(id)
            }
            Err(full) => {
                self.peers.remove(peer.0);
                Err(full)
            }
        }
    }

    /// A new peer NI for `nid`, to be attached to `peer` by the caller (`lnet_peer_ni_alloc`).
    pub(crate) fn create_for(
        &mut self,
        nis: &mut Shares<'_, Exclusive, PeerNis>,
        peer: PeerId,
        nid: Nid,
        peer_credits: u32,
        limit: usize,
    ) -> Result<PeerNiId, PeerTableFull> {
        let id = self.new_ni(nis, nid, peer, peer_credits, limit)?;
        if let Some(peer) = self.peer_mut(peer) {
            insert_ni(peer, id, nid);
        }
        Ok(id)
    }

    /// Moves `id` to `peer`, detaching it from its old peer (`lnet_peer_attach_peer_ni`).
    /// Returns the old peer when it was left without NIs.
    pub(crate) fn attach(&mut self, id: PeerNiId, peer: PeerId) -> Option<PeerId> {
        let slot = self.slots.get_mut(id.0 as usize)?;
        let old = std::mem::replace(&mut slot.peer, peer);
        let nid = slot.nid;
        if old == peer {
            return None;
        }
        if let Some(target) = self.peers.get_mut(peer.0) {
            insert_ni(target, id, nid);
        }
        let source = self.peers.get_mut(old.0)?;
        for net in &mut source.nets {
            net.nis.retain(|other| *other != id);
        }
        source.nets.retain(|net| !net.nis.is_empty());
        if source.nets.is_empty() {
            return Some(old);
        }
        if source.primary_nid == nid {
            // lustre: the old peer would have been deleted with its primary; it keeps its
            // other NIs under the next one and is discovered again on next use.
            if let Some(next) = source.nets.first().and_then(|net| net.nis.first()).copied() {
                let next_nid = self.slots.get(next.0 as usize).map(|slot| slot.nid);
                if let (Some(source), Some(next_nid)) = (self.peers.get_mut(old.0), next_nid) {
                    source.primary_nid = next_nid;
                    source.state.remove(PeerState::DISCOVERED | PeerState::NIDS_UPTODATE);
                }
            }
        }
        None
    }

    /// Puts the primary NID's net first and the primary NI first in it (`lnet_peer_merge_data`
    /// tail).
    pub(crate) fn put_primary_first(&mut self, peer: PeerId) {
        let Some(peer) = self.peers.get_mut(peer.0) else {
            return;
        };
        let primary = peer.primary_nid;
        let slots = &self.slots;
        let is_primary =
            |id: &PeerNiId| slots.get(id.0 as usize).is_some_and(|slot| slot.nid == primary);
        if let Some(at) = peer.nets.iter().position(|net| net.nis.iter().any(is_primary)) {
            let net = peer.nets.remove(at);
            peer.nets.insert(0, net);
        }
        if let Some(net) = peer.nets.first_mut() {
            if let Some(at) = net.nis.iter().position(is_primary) {
                let id = net.nis.remove(at);
                net.nis.insert(0, id);
            }
        }
    }

    pub(crate) fn remove_peer(&mut self, peer: PeerId) -> Option<Peer> {
        self.peers.remove(peer.0)
    }

    pub(crate) fn info<A: Access>(
        &self,
        nis: &Shares<'_, A, PeerNis>,
        peer: PeerId,
    ) -> Option<PeerInfo> {
        let peer = self.peer(peer)?;
        let nis = peer
            .ni_ids()
            .filter_map(|id| self.ni(nis, id))
            .map(|ni| PeerNiInfo { nid: ni.nid, status: ni.status })
            .collect();
        Some(PeerInfo {
            primary_nid: peer.primary_nid,
            state: peer.state,
            peer_sequence: peer.discovery.peer_sequence,
            node_sequence: peer.discovery.node_sequence,
            data_bytes: peer.discovery.data_bytes,
            pending: peer.discovery.pending.len(),
            nis,
        })
    }

    /// Files a new peer NI for `nid` of `peer` with its owner, in a reclaimed slot if any.
    fn new_ni(
        &mut self,
        nis: &mut Shares<'_, Exclusive, PeerNis>,
        nid: Nid,
        peer: PeerId,
        peer_credits: u32,
        limit: usize,
    ) -> Result<PeerNiId, PeerTableFull> {
        let cpt = self.cpt_of(&nid);
        let reused = self.free.last().copied();
        let id = match reused {
            Some(id) => id,
            None if self.slots.len() >= limit => return Err(PeerTableFull),
            None => PeerNiId(u32::try_from(self.slots.len()).map_err(|_| PeerTableFull)?),
        };
        let owner = nis.share_mut(cpt).ok_or(PeerTableFull)?;
        let key = owner.slab.insert(PeerNi::new(nid, cpt, peer_credits)).ok_or(PeerTableFull)?;
        let slot = Slot { key, nid, peer };
        match self.slots.get_mut(id.0 as usize) {
            Some(old) => {
                let old = std::mem::replace(old, slot);
                self.free.pop();
                if let Some(share) = nis.share_of_mut(old.key) {
                    share.slab.discard(old.key);
                }
            }
            None => self.slots.push(slot),
        }
        self.by_nid.insert(nid, id);
        Ok(id)
    }

    /// Deletes a peer NI (`lnet_peer_ni_del_locked`): detached from its peer and from the NID
    /// index; the caller reclaims the slot once no message or MD refers to it. Returns the
    /// peer when it was left without NIs.
    pub(crate) fn delete_ni(
        &mut self,
        nis: &mut Shares<'_, Exclusive, PeerNis>,
        id: PeerNiId,
    ) -> Option<PeerId> {
        let ni = self.ni_mut(nis, id).filter(|ni| !ni.deleted)?;
        ni.deleted = true;
        let Slot { nid, peer: owner, .. } = *self.slot(id)?;
        if self.by_nid.get(&nid) == Some(&id) {
            self.by_nid.remove(&nid);
        }
        let peer = self.peers.get_mut(owner.0)?;
        for net in &mut peer.nets {
            net.nis.retain(|other| *other != id);
        }
        peer.nets.retain(|net| !net.nis.is_empty());
        peer.nets.is_empty().then_some(owner)
    }

    /// Deleted peer NIs are reclaimed lazily: here, when a new one would not fit (their
    /// messages may have finished since the delete), and after admin changes.
    pub(crate) fn make_room<A: Access>(
        &mut self,
        nis: &Shares<'_, A, PeerNis>,
        limit: usize,
        referenced: impl Fn(PeerNiId) -> bool,
    ) {
        if self.is_full(limit) {
            self.reclaim_unused(nis, referenced);
        }
    }

    /// Reclaims the slots of deleted peer NIs nothing refers to any more: not `referenced`
    /// from outside the table (messages, trackers, watches) and no recovery ping in flight.
    pub(crate) fn reclaim_unused<A: Access>(
        &mut self,
        nis: &Shares<'_, A, PeerNis>,
        referenced: impl Fn(PeerNiId) -> bool,
    ) {
        let deleted: Vec<PeerNiId> = self.deleted(nis).collect();
        for id in deleted {
            let in_use =
                referenced(id) || self.ni(nis, id).is_some_and(|ni| ni.recovery.md.is_some());
            if !in_use {
                self.reclaim(nis, id);
            }
        }
    }

    pub(crate) fn is_full(&self, limit: usize) -> bool {
        self.free.is_empty() && self.slots.len() >= limit
    }

    /// Deleted peer NIs not yet reclaimed.
    pub(crate) fn deleted<'s, A: Access>(
        &'s self,
        nis: &'s Shares<'_, A, PeerNis>,
    ) -> impl Iterator<Item = PeerNiId> + 's {
        self.nis(nis).filter(|(id, ni)| ni.deleted && !self.free.contains(id)).map(|(id, _)| id)
    }

    /// A deleted peer NI nothing refers to any more: its slot may be reused.
    pub(crate) fn reclaim<A: Access>(&mut self, nis: &Shares<'_, A, PeerNis>, id: PeerNiId) {
        if self.ni(nis, id).is_some_and(|ni| ni.deleted) && !self.free.contains(&id) {
            self.free.push(id);
        }
    }

    /// `lnet_peer_clr_non_mr_pref_nids`: a peer that became multi-rail forgets the local NIs
    /// its NIs were pinned to by traffic (not those UDSP rules prefer).
    pub(crate) fn clear_non_mr_preferred(
        &self,
        nis: &mut Shares<'_, Exclusive, PeerNis>,
        peer: PeerId,
    ) {
        let Some(entry) = self.peers.get(peer.0) else {
            return;
        };
        for id in entry.ni_ids() {
            if let Some(ni) = self.ni_mut(nis, id) {
                ni.preferred.clear_from_traffic();
            }
        }
    }
}

impl PeerNi {
    fn new(nid: Nid, cpt: u32, peer_credits: u32) -> Self {
        Self {
            nid,
            cpt,
            credits: CreditPool::new(peer_credits),
            router_credits: None,
            queued_bytes: 0,
            health: Health::FULL,
            last_alive: None,
            alive: true,
            status: LNET_NI_STATUS_UP,
            stats: ElementStats::default(),
            health_stats: PeerNiHealthStats::default(),
            seq: Stamp::default(),
            priority: MAX_SELECTION_PRIORITY,
            preferred: PreferredNids::default(),
            preferred_routers: Vec::new(),
            vanished: false,
            deleted: false,
            recovery: Recovery::default(),
            latency: LatencySlot::default(),
            watch: Watch::default(),
        }
    }
}

/// Adds `id` under its net, the primary first (`lnet_peer_attach_peer_ni` list order).
fn insert_ni(peer: &mut Peer, id: PeerNiId, nid: Nid) {
    let primary = peer.primary_nid == nid;
    match peer.nets.iter_mut().find(|net| net.net == nid.net()) {
        Some(net) if primary => net.nis.insert(0, id),
        Some(net) => net.nis.push(id),
        None if primary => peer.nets.insert(0, PeerNet::new(nid.net(), vec![id])),
        None => peer.nets.push(PeerNet::new(nid.net(), vec![id])),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::shares::Owned;

    /// A table and its peer NIs, on `partitions`.
    fn table_on(partitions: Partitions) -> (PeerTable, Owned<PeerNis>) {
        let keys = KeyPartitions::new(partitions.count());
        (PeerTable::new(partitions), Owned::new(keys, PeerNis::new))
    }

    fn table() -> (PeerTable, Owned<PeerNis>) {
        table_on(Partitions::default())
    }

    #[test]
    fn peers_are_created_once_with_their_nid_as_primary() {
        let (mut table, mut nis) = table();
        let nid = Nid::new4(Net::TCP, 7);
        let id = table.find_or_create(&mut nis.exclusive(), nid, 8, 4).unwrap();
        assert_eq!(table.find_or_create(&mut nis.exclusive(), nid, 8, 4), Ok(id));
        assert_eq!(table.primary_nid(nid), nid);
        assert_eq!(table.peer_ni_count(id), 1);
        assert_eq!(table.ni(&nis.shared(), id).map(|ni| ni.credits.max()), Some(8));
        let other = Nid::new4(Net::TCP, 8);
        assert_eq!(table.primary_nid(other), other);
        assert_eq!(table.find_or_create(&mut nis.exclusive(), other, 8, 1), Err(PeerTableFull));
        assert_eq!(table.peer_count(), 1, "a peer refused for want of room is not made");
    }

    #[test]
    fn peer_nis_are_owned_by_the_partition_their_nid_hashes_to() {
        let partitions = Partitions::new(4).unwrap();
        let (mut table, mut nis) = table_on(partitions);
        let nids: Vec<Nid> = (1..=8).map(|host| Nid::new4(Net::TCP, host)).collect();
        for nid in &nids {
            let id = table.find_or_create(&mut nis.exclusive(), *nid, 8, 16).unwrap();
            let owner = partitions.cpt_of_nid(nid, None);
            let cpt = table.ni(&nis.shared(), id).unwrap().cpt;
            assert_eq!((cpt, table.cpt_of(nid)), (owner, owner));
            nis.shared().take_touched();
            let mut shares = nis.exclusive();
            table.ni_mut(&mut shares, id).unwrap().queued_bytes += 1;
            assert_eq!(shares.take_touched(), 1 << owner, "a peer NI's change is its owner's");
            assert!(table.ni(&shares, id).is_some());
            assert_eq!(shares.take_touched(), 1 << owner, "and so is a read of it");
        }
        let shares = nis.exclusive();
        let by_owner = shares.count_by_partition();
        let expected: Vec<usize> = (0..partitions.count())
            .map(|cpt| nids.iter().filter(|nid| partitions.cpt_of_nid(nid, None) == cpt).count())
            .collect();
        assert_eq!(by_owner, expected, "each peer NI is kept by its owner");
        shares.take_touched();
        let peer = table.peer_id(nids[0]).unwrap();
        table.peer_mut(peer).unwrap().alive = false;
        assert_eq!(table.touched().take(), u64::MAX, "a peer's change is the node's");
    }

    #[test]
    fn a_reclaimed_slot_moves_to_its_new_nids_owner() {
        let partitions = Partitions::new(4).unwrap();
        let (mut table, mut nis) = table_on(partitions);
        let mut shares = nis.exclusive();
        let first = Nid::new4(Net::TCP, 1);
        let owner = |nid: &Nid| partitions.cpt_of_nid(nid, None);
        let other = (2..64)
            .map(|host| Nid::new4(Net::TCP, host))
            .find(|nid| owner(nid) != owner(&first))
            .unwrap();
        let id = table.find_or_create(&mut shares, first, 8, 1).unwrap();
        assert_eq!(table.find_or_create(&mut shares, other, 8, 1), Err(PeerTableFull));
        table.delete_ni(&mut shares, id);
        table.reclaim_unused(&shares, |_| false);
        let reused = table.find_or_create(&mut shares, other, 8, 1).unwrap();
        assert_eq!(reused, id, "the slot is reused");
        assert_eq!(table.nid(id), Some(other));
        assert_eq!(table.ni(&shares, id).map(|ni| (ni.nid, ni.cpt)), Some((other, owner(&other))));
        let mut counts = vec![0; 4];
        counts[owner(&other) as usize] = 1;
        assert_eq!(shares.count_by_partition(), counts, "the old owner let its peer NI go");
    }

    #[test]
    fn attaching_moves_nis_and_reports_emptied_peers() {
        let (mut table, mut nis) = table();
        let mut nis = nis.exclusive();
        let (a, b, c) = (Nid::new4(Net::TCP, 1), Nid::new4(Net::TCP, 2), Nid::new4(Net::TCP, 3));
        let tcp1 = Net::new(crate::addr::LndType::SOCK, 1);
        let a_id = table.find_or_create(&mut nis, a, 8, 8).unwrap();
        let b_id = table.find_or_create(&mut nis, b, 8, 8).unwrap();
        let peer_a = table.owner(a_id).unwrap();
        let peer_b = table.owner(b_id).unwrap();
        let c_id = table.create_for(&mut nis, peer_b, c, 8, 8).unwrap();
        let d = Nid::new4(tcp1, 4);
        table.create_for(&mut nis, peer_b, d, 8, 8).unwrap();
        // b's primary moves to a: b keeps c and d under c, and must be discovered again.
        assert_eq!(table.attach(b_id, peer_a), None);
        assert_eq!(table.primary_nid(b), a);
        assert_eq!(table.primary_nid(d), c);
        assert_eq!(table.peer_ni_count(c_id), 2);
        // Moving the last NI empties the peer.
        table.attach(c_id, peer_a);
        let d_id = table.find(d).unwrap();
        assert_eq!(table.attach(d_id, peer_a), Some(peer_b));
        table.remove_peer(peer_b);
        assert_eq!(table.peer_ni_count(a_id), 4);
        table.peer_mut(peer_a).unwrap().primary_nid = d;
        table.put_primary_first(peer_a);
        let info = table.info(&nis, peer_a).unwrap();
        assert_eq!(info.nis.first().map(|ni| ni.nid), Some(d));
        assert_eq!(info.nis.len(), 4);
    }
}
