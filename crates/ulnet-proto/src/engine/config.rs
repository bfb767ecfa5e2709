//! Run-time configuration: configured peers (`lnetctl peer add/del/set`), interface state
//! (`lnetctl net set --health`, the fatal-error flag LNDs raise on link events, UDSP
//! priorities, NUMA distances), `lnetctl set` tunables and `lnetctl stats reset`.
//!
//! lustre: lnet/lnet/peer.c (`lnet_user_add_peer_ni`, `lnet_add_peer_ni`, `lnet_peer_add`,
//! `lnet_peer_add_nid`, `lnet_del_peer_ni`, `lnet_peer_del_nid`, `lnet_reset_peer`,
//! `lnet_peer_ni_set_healthv`), api-ni.c (`lnet_ni_set_healthv`, `discovery_set`),
//! config.c (`lnet_set_link_fatal_state`), docs/protocol/semantics.md §4.6, §6.5, docs/protocol/cli.md §1.3.

use crate::addr::Nid;
use crate::engine::call::Work;
use crate::engine::health::{Health, MAX_HEALTH};
use crate::engine::msg::Phase;
use crate::engine::ni::{NiId, NumaDistances};
use crate::engine::node::Engine;
use crate::engine::peer::{PeerId, PeerInfo, PeerNiId, PeerState};
use crate::engine::recovery::RecoveryTarget;
use crate::engine::slab::Key;
use crate::engine::tunables::{Tunables, TunablesError};
use crate::engine::view::{Access, Flow, NodeAccess, View};
use crate::time::Time;
use crate::wire::ping::{LNET_NI_STATUS_DOWN, LNET_NI_STATUS_UP};

/// `LNET_MAX_NIDS_PER_PEER`: most NIDs one `peer add` may name (lnetctl's nidlist bound).
pub const MAX_NIDS_PER_PEER: usize = 128;

/// `lnetctl peer add` (`lnet_user_add_peer_ni`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PeerAddError {
    /// `-EINVAL`: a NID is `LNET_NID_ANY`.
    #[error("LNET_NID_ANY is not a peer NID")]
    AnyNid,
    /// `0@lo` is never a peer.
    #[error("0@lo is not a peer NID")]
    LoopbackNid,
    #[error("{0} NIDs, at most 128 per peer")]
    TooManyNids(usize),
    /// `-EEXIST`: the NID belongs to a configured peer with another primary.
    #[error("{nid:?} belongs to the configured peer {primary:?}")]
    PrimaryMismatch { nid: Nid, primary: Nid },
    /// `-EPERM`: the peer exists with the other multi-rail setting.
    #[error("peer {0:?} exists with the other multi-rail setting")]
    MultiRailMismatch(Nid),
    /// `-EEXIST` / `-EALREADY`: the peer's primary NID is locked by the upper layer.
    #[error("peer of {nid:?} has the locked primary {primary:?}")]
    PrimaryLocked { nid: Nid, primary: Nid },
    /// `-EEXIST`: the NID belongs to another configured peer.
    #[error("{0:?} is configured for another peer")]
    NidConfiguredElsewhere(Nid),
    /// `-ENOTUNIQ`: a non-multi-rail peer has one NID per net.
    #[error("a non-multi-rail peer already has a NID on the net of {0:?}")]
    NotUnique(Nid),
    /// `-ENOMEM`: the peer table is full.
    #[error("the peer table is full")]
    TooManyPeers,
    /// `-EBUSY`: a route goes through the peer that would be replaced (lustre: peer.c
    /// `lnet_peer_ni_del_locked()` refuses to delete a gateway's peer NI).
    #[error("peer {0:?} is a gateway")]
    Gateway(Nid),
}

/// `lnetctl peer del` (`lnet_del_peer_ni`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PeerDelError {
    /// `-EINVAL`.
    #[error("LNET_NID_ANY is not a peer NID")]
    AnyNid,
    /// `-ENOENT`: no peer has this NID.
    #[error("no peer has {0:?}")]
    NoSuchPeer(Nid),
    /// `-ENODEV`: the NID is not the peer's primary.
    #[error("{nid:?} is not the primary NID of its peer ({primary:?})")]
    NotPrimary { nid: Nid, primary: Nid },
    /// `-ENOENT` for a NID to remove.
    #[error("no peer NI {0:?}")]
    NoSuchNid(Nid),
    /// `-ECHILD`: the NID belongs to another peer.
    #[error("{0:?} belongs to another peer")]
    NotOwned(Nid),
    /// `-EBUSY`: a route goes through the peer (lustre: peer.c `lnet_del_peer_ni()`, "is a
    /// router. Can not be deleted").
    #[error("{0:?} is a router. Can not be deleted")]
    Gateway(Nid),
}

/// `lnetctl peer set`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PeerSetError {
    #[error("health {0} out of range 0..=1000")]
    HealthOutOfRange(u32),
    #[error("no peer NI {0:?}")]
    NoSuchPeerNi(Nid),
}

/// Changing a local NI's state (`lnetctl net set`, link events, UDSP, NUMA).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NiSetError {
    #[error("unknown NI")]
    UnknownNi,
    #[error("NI was removed")]
    RemovedNi,
    /// `0@lo` has no link, health or priority to change.
    #[error("the loopback NI cannot be changed")]
    Loopback,
    #[error("health {0} out of range 0..=1000")]
    HealthOutOfRange(u32),
    #[error("{given} NUMA distances for {partitions} partitions")]
    DistanceCount { given: usize, partitions: u32 },
}

impl Engine {
    /// Every peer, in table order.
    pub fn peers(&self) -> impl Iterator<Item = PeerInfo> + '_ {
        let infos: Vec<PeerInfo> = self.with_look(|look| {
            let peers = look.node.peers.peers();
            peers.filter_map(|(id, _)| look.node.peers.info(&look.peer_nis, id)).collect()
        });
        infos.into_iter()
    }
    // ------------------------------------------------------------ configured peers

    /// `lnetctl peer add --prim_nid P [--nid N,...] [--non_mr] [--lock_prim]`: creates the
    /// configured peer `primary` (or checks an existing configured one), then adds each NID.
    /// Re-adding what the peer already has succeeds. A peer created by traffic or discovery
    /// with that primary is replaced by the configured one.
    pub fn peer_add(
        &mut self,
        now: Time,
        primary: Nid,
        nids: &[Nid],
        multi_rail: bool,
        lock_primary: bool,
    ) -> Result<(), PeerAddError> {
        self.flow().peer_add(now, primary, nids, multi_rail, lock_primary)
    }

    /// `lnetctl peer del --prim_nid P [--nid N,...] [--force]`: without NIDs (or naming the
    /// primary) the whole peer goes, except that a locked primary without `force` keeps the
    /// peer and only loses its other NIDs; with NIDs, those are removed.
    pub fn peer_del(
        &mut self,
        now: Time,
        primary: Nid,
        nids: &[Nid],
        force: bool,
    ) -> Result<(), PeerDelError> {
        self.flow().peer_del(now, primary, nids, force)
    }

    /// `lnetctl peer set --health V [--nid N | --all]` (`lnet_peer_ni_set_healthv`): the
    /// peer NI's health is set and, if below the maximum, it is queued for recovery.
    pub fn set_peer_ni_health(
        &mut self,
        now: Time,
        nid: Option<Nid>,
        value: u32,
    ) -> Result<(), PeerSetError> {
        self.flow().set_peer_ni_health(now, nid, value)
    }

    /// `lnetctl peer set --state N --nid P` (debug): overwrites the raw state bits of the
    /// peer owning `nid`.
    pub fn set_peer_state(&mut self, nid: Nid, state: PeerState) -> Result<(), PeerSetError> {
        self.flow().set_peer_state(nid, state)
    }

    /// Sets a peer NI's selection priority (lower is preferred) directly. UDSP rules
    /// ([`Engine::udsp_add`]) stamp the same value and overwrite it when applied.
    pub fn set_peer_ni_priority(&mut self, nid: Nid, priority: u32) -> Result<(), PeerSetError> {
        self.flow().set_peer_ni_priority(nid, priority)
    }

    // ------------------------------------------------------------ local NIs

    /// The LND's link state (`lnet_set_link_fatal_state`; netlink link down/up, address
    /// removed): a fatal NI is selected last, shows DOWN in the ping buffer, and the buffer is
    /// rebuilt (new sequence number, pushed to multi-rail peers). Messages waiting for credits
    /// on it that are not pinned to it are selected again at once. Clearing the flag at full
    /// health shows the NI UP and force-pushes every multi-rail peer; below full health it
    /// shows UP once recovered.
    pub fn set_ni_fatal(&mut self, now: Time, ni: NiId, fatal: bool) -> Result<(), NiSetError> {
        self.flow().set_ni_fatal(now, ni, fatal)
    }

    /// `lnetctl net set --health V [--nid N | --all]` (`lnet_ni_set_healthv`): health 0
    /// shows DOWN, 1000 UP; below the maximum the NI is queued for recovery.
    pub fn set_ni_health(
        &mut self,
        now: Time,
        ni: Option<NiId>,
        value: u32,
    ) -> Result<(), NiSetError> {
        self.flow().set_ni_health(now, ni, value)
    }

    /// The NUMA distance from the node's memory to the NI's device, as the driver reads it
    /// (sysfs `device/numa_node` and the node distance table); compared after health and
    /// priority, distances below `numa_range` counting as equal. One distance for every
    /// partition; [`set_ni_numa_distances`](Self::set_ni_numa_distances) gives one each.
    pub fn set_ni_numa_distance(&mut self, ni: NiId, distance: u32) -> Result<(), NiSetError> {
        self.flow().set_ni_numa_distances(ni, &[distance])
    }

    /// The NUMA distance from each partition's memory to the NI's device, by CPT (the
    /// kernel's `cfs_cpt_distance(cpt, ni_dev_cpt)`): a message is compared with its home
    /// partition's, where its MD was bound (the kernel takes the CPT of the MD's first page).
    /// A list that is not one value per partition is refused.
    pub fn set_ni_numa_distances(&mut self, ni: NiId, distances: &[u32]) -> Result<(), NiSetError> {
        let count = self.partitions().count();
        if distances.len() != count as usize {
            return Err(NiSetError::DistanceCount { given: distances.len(), partitions: count });
        }
        self.flow().set_ni_numa_distances(ni, distances)
    }

    /// Sets a local NI's selection priority (lower is preferred) directly. UDSP rules
    /// ([`Engine::udsp_add`]) stamp the same value and overwrite it when applied.
    pub fn set_ni_priority(&mut self, ni: NiId, priority: u32) -> Result<(), NiSetError> {
        self.flow().set_ni_priority(ni, priority)
    }

    // ------------------------------------------------------------ tunables and statistics

    /// `lnetctl set <tunable>` (`transaction_timeout`, `retry_count`, `health_sensitivity`,
    /// `response_tracking`, `discovery`, `numa_range`, `recovery_limit`,
    /// `max_recovery_ping_interval`, and fast failover's `blackhole_timeout`), validated as the
    /// kernel's setters do. Most are read when a decision needs them, so the change applies
    /// from the next send, resend or tracker on; deadlines already armed keep theirs, as in
    /// Lustre. Turning discovery on or off changes the ping buffer's `DISCOVERY` feature: a new
    /// buffer is installed (and pushed to the peers that need it), and turning it off also
    /// force-pushes every multi-rail peer so they learn it (api-ni.c `discovery_set()`). Fast
    /// failover's progress state starts afresh when it is turned on or off.
    /// lustre: api-ni.c `transaction_to_set()`, `retry_count_set()`, `sensitivity_set()`,
    /// `response_tracking_set()`, `discovery_set()`, `recovery_limit_set()`,
    /// `max_recovery_ping_interval_set()`.
    pub fn set_tunables(&mut self, now: Time, tunables: Tunables) -> Result<(), TunablesError> {
        self.flow().set_tunables(now, tunables)
    }

    /// `lnetctl stats reset`: the global counters (not the gauges) and the latency
    /// statistics of every NI and peer NI go back to zero.
    pub fn reset_stats(&mut self) {
        self.flow().reset_stats()
    }

    /// What the node knows of the peer owning `nid`.
    pub fn peer_info(&self, nid: Nid) -> Option<PeerInfo> {
        self.with_look(|look| look.peer_info(nid))
    }
}

impl<A: Access, N: NodeAccess> View<'_, A, N> {
    /// See [`Engine::peer_info`].
    pub(crate) fn peer_info(&self, nid: Nid) -> Option<PeerInfo> {
        self.node.peers.info(&self.peer_nis, self.node.peers.peer_id(nid)?)
    }

    fn check_peer_nid(&self, nid: Nid) -> Result<(), PeerAddError> {
        if nid.is_any() {
            return Err(PeerAddError::AnyNid);
        }
        if nid == Nid::LO_0 {
            return Err(PeerAddError::LoopbackNid);
        }
        // lustre: lnet_add_peer_ni() takes one of the node's own NIDs too (a self peer).
        Ok(())
    }
}

impl Flow<'_> {
    // ------------------------------------------------------------ configured peers

    /// See [`Engine::peer_add`].
    pub(crate) fn peer_add(
        &mut self,
        now: Time,
        primary: Nid,
        nids: &[Nid],
        multi_rail: bool,
        lock_primary: bool,
    ) -> Result<(), PeerAddError> {
        self.advance(now);
        if nids.len() > MAX_NIDS_PER_PEER {
            return Err(PeerAddError::TooManyNids(nids.len()));
        }
        for nid in std::iter::once(&primary).chain(nids) {
            self.check_peer_nid(*nid)?;
        }
        let mut flags = PeerState::CONFIGURED;
        if multi_rail {
            flags.insert(PeerState::MULTI_RAIL);
        }
        if lock_primary {
            flags.insert(PeerState::LOCK_PRIMARY);
        }
        let result = self.add_configured_peer(primary, flags).and_then(|peer| {
            nids.iter().try_for_each(|nid| self.add_configured_nid(peer, *nid, flags))
        });
        self.reclaim_peer_nis();
        self.run_work();
        result
    }

    /// See [`Engine::peer_del`].
    pub(crate) fn peer_del(
        &mut self,
        now: Time,
        primary: Nid,
        nids: &[Nid],
        force: bool,
    ) -> Result<(), PeerDelError> {
        self.advance(now);
        if primary.is_any() {
            return Err(PeerDelError::AnyNid);
        }
        let peer = self.node.peers.peer_id(primary).ok_or(PeerDelError::NoSuchPeer(primary))?;
        let (actual, state) = self
            .node
            .peers
            .peer(peer)
            .map(|entry| (entry.primary_nid, entry.state))
            .ok_or(PeerDelError::NoSuchPeer(primary))?;
        if actual != primary {
            return Err(PeerDelError::NotPrimary { nid: primary, primary: actual });
        }
        if self.peer_is_router(peer, None) {
            return Err(PeerDelError::Gateway(primary));
        }
        let result = if nids.is_empty() || nids.contains(&primary) {
            if !force && state.contains(PeerState::LOCK_PRIMARY) {
                self.reset_peer(peer);
            } else {
                self.delete_peer(peer);
            }
            Ok(())
        } else {
            nids.iter().try_for_each(|nid| {
                let id = self.node.peers.find(*nid).ok_or(PeerDelError::NoSuchNid(*nid))?;
                if self.node.peers.owner(id) != Some(peer) {
                    return Err(PeerDelError::NotOwned(*nid));
                }
                self.delete_peer_ni(id);
                Ok(())
            })
        };
        self.reclaim_peer_nis();
        self.run_work();
        result
    }

    /// See [`Engine::set_peer_ni_health`].
    pub(crate) fn set_peer_ni_health(
        &mut self,
        now: Time,
        nid: Option<Nid>,
        value: u32,
    ) -> Result<(), PeerSetError> {
        self.advance(now);
        if value > MAX_HEALTH {
            return Err(PeerSetError::HealthOutOfRange(value));
        }
        let targets: Vec<PeerNiId> = match nid {
            Some(nid) => vec![self.node.peers.find(nid).ok_or(PeerSetError::NoSuchPeerNi(nid))?],
            None => self
                .node
                .peers
                .nis(&self.peer_nis)
                .filter(|(_, ni)| !ni.deleted)
                .map(|(id, _)| id)
                .collect(),
        };
        for id in targets {
            if let Some(ni) = self.node.peers.ni_mut(&mut self.peer_nis, id) {
                ni.health = Health::new(value);
            }
            self.queue_peer_recovery(id);
        }
        self.run_work();
        Ok(())
    }

    /// See [`Engine::set_peer_state`].
    pub(crate) fn set_peer_state(
        &mut self,
        nid: Nid,
        state: PeerState,
    ) -> Result<(), PeerSetError> {
        let peer = self.node.peers.peer_id(nid).ok_or(PeerSetError::NoSuchPeerNi(nid))?;
        if let Some(entry) = self.node.peers.peer_mut(peer) {
            entry.state = state;
        }
        Ok(())
    }

    /// See [`Engine::set_peer_ni_priority`].
    pub(crate) fn set_peer_ni_priority(
        &mut self,
        nid: Nid,
        priority: u32,
    ) -> Result<(), PeerSetError> {
        let id = self.node.peers.find(nid).ok_or(PeerSetError::NoSuchPeerNi(nid))?;
        if let Some(ni) = self.node.peers.ni_mut(&mut self.peer_nis, id) {
            ni.priority = priority;
        }
        Ok(())
    }

    /// See [`Engine::set_ni_fatal`].
    pub(crate) fn set_ni_fatal(
        &mut self,
        now: Time,
        ni: NiId,
        fatal: bool,
    ) -> Result<(), NiSetError> {
        self.advance(now);
        let local = self.settable_ni(ni)?;
        if local.fatal_error == fatal {
            return Ok(());
        }
        local.fatal_error = fatal;
        let recovered = !fatal && local.health.value() == MAX_HEALTH;
        // The kernel's status word points into the buffer the fatal NI was last written to.
        local.status = if fatal || !recovered { LNET_NI_STATUS_DOWN } else { LNET_NI_STATUS_UP };
        if fatal {
            self.requeue_waiting_on(ni, false);
            self.evacuate_ni(ni);
            // The link is gone: what its connections hold fails now, not at sock_timeout.
            self.request_path_reset(ni, None);
        }
        if !fatal {
            self.reprobe_suspect_paths();
        }
        self.install_ping_target();
        if recovered {
            self.force_push_to_peers();
        }
        self.run_work();
        Ok(())
    }

    /// See [`Engine::set_ni_health`].
    pub(crate) fn set_ni_health(
        &mut self,
        now: Time,
        ni: Option<NiId>,
        value: u32,
    ) -> Result<(), NiSetError> {
        self.advance(now);
        if value > MAX_HEALTH {
            return Err(NiSetError::HealthOutOfRange(value));
        }
        let targets: Vec<NiId> = match ni {
            Some(ni) => {
                self.settable_ni(ni)?;
                vec![ni]
            }
            None => self.node.nis.live_ids().filter(|id| *id != NiId::LOOPBACK).collect(),
        };
        for ni in targets {
            if let Some(local) = self.node.nis.get_mut(ni) {
                local.health = Health::new(value);
            }
            self.refresh_ni_status(ni);
            self.queue_local_recovery(ni);
        }
        self.run_work();
        Ok(())
    }

    /// See [`Engine::set_ni_numa_distances`].
    pub(crate) fn set_ni_numa_distances(
        &mut self,
        ni: NiId,
        distances: &[u32],
    ) -> Result<(), NiSetError> {
        self.settable_ni(ni)?.numa_distance = NumaDistances::new(distances);
        Ok(())
    }

    /// See [`Engine::set_ni_priority`].
    pub(crate) fn set_ni_priority(&mut self, ni: NiId, priority: u32) -> Result<(), NiSetError> {
        self.settable_ni(ni)?.priority = priority;
        Ok(())
    }

    /// See [`Engine::set_tunables`].
    pub(crate) fn set_tunables(
        &mut self,
        now: Time,
        tunables: Tunables,
    ) -> Result<(), TunablesError> {
        tunables.validate()?;
        self.advance(now);
        let old = std::mem::replace(&mut self.node.tunables, tunables);
        if old.discovery != tunables.discovery {
            if old.discovery {
                // Marked while discovery still counts as on, so the push goes out.
                self.node.tunables.discovery = true;
                self.force_push_to_peers();
                self.node.tunables.discovery = false;
            }
            self.install_ping_target();
        }
        if old.blackhole_timeout.is_zero() != tunables.blackhole_timeout.is_zero() {
            self.reset_failover_state();
        }
        self.recompute_recovery_deadline();
        self.refresh_router_deadline();
        self.run_work();
        Ok(())
    }

    /// See [`Engine::reset_stats`].
    pub(crate) fn reset_stats(&mut self) {
        self.stats.reset();
        for ni in 0..self.node.nis.len() {
            self.ni_shares.reset_latency(NiId(ni as u16));
        }
        for ni in crate::engine::peer::PeerTable::nis_mut(&mut self.peer_nis) {
            ni.latency.reset();
        }
    }

    // ------------------------------------------------------------ helpers

    fn settable_ni(&mut self, ni: NiId) -> Result<&mut crate::engine::ni::Ni, NiSetError> {
        if ni == NiId::LOOPBACK {
            return Err(NiSetError::Loopback);
        }
        let local = self.node.nis.get_mut(ni).ok_or(NiSetError::UnknownNi)?;
        if local.removed {
            return Err(NiSetError::RemovedNi);
        }
        Ok(local)
    }

    /// `lnet_peer_add`: an existing configured peer with this primary is kept (if its
    /// multi-rail setting agrees); any other peer owning the NID is deleted and the
    /// configured one created.
    fn add_configured_peer(&mut self, nid: Nid, flags: PeerState) -> Result<PeerId, PeerAddError> {
        if let Some(peer) = self.node.peers.peer_id(nid) {
            let (primary, state) = self
                .node
                .peers
                .peer(peer)
                .map(|entry| (entry.primary_nid, entry.state))
                .ok_or(PeerAddError::TooManyPeers)?;
            if state.contains(PeerState::CONFIGURED) {
                if primary != nid {
                    return Err(PeerAddError::PrimaryMismatch { nid, primary });
                }
                if state.contains(PeerState::MULTI_RAIL) != flags.contains(PeerState::MULTI_RAIL) {
                    return Err(PeerAddError::MultiRailMismatch(nid));
                }
                return Ok(peer);
            }
            if state.contains(PeerState::LOCK_PRIMARY) {
                return Err(PeerAddError::PrimaryLocked { nid, primary });
            }
            // Replacing the peer deletes its peer NIs, which a route holds.
            if self.peer_is_router(peer, None) {
                return Err(PeerAddError::Gateway(nid));
            }
            self.delete_peer(peer);
        }
        let credits = self.node.nis.peer_credits_for(nid);
        let id = self.peer_ni_or_create(nid, credits).map_err(|_| PeerAddError::TooManyPeers)?;
        let peer = self.node.peers.owner(id).ok_or(PeerAddError::TooManyPeers)?;
        if let Some(entry) = self.node.peers.peer_mut(peer) {
            entry.state.insert(flags);
        }
        Ok(peer)
    }

    /// `lnet_peer_add_nid` with the CONFIGURED flag.
    fn add_configured_nid(
        &mut self,
        peer: PeerId,
        nid: Nid,
        flags: PeerState,
    ) -> Result<(), PeerAddError> {
        let Some(entry) = self.node.peers.peer(peer) else {
            return Err(PeerAddError::TooManyPeers);
        };
        let multi_rail = entry.multi_rail();
        let existing = self.node.peers.find(nid);
        let owner = existing.and_then(|id| self.node.peers.owner(id));
        if owner == Some(peer) {
            return Ok(());
        }
        if !multi_rail && entry.nets.iter().any(|net| net.net == nid.net()) {
            return Err(PeerAddError::NotUnique(nid));
        }
        if let (Some(id), Some(other)) = (existing, owner) {
            let Some(other_entry) = self.node.peers.peer(other) else {
                return Err(PeerAddError::TooManyPeers);
            };
            if other_entry.state.contains(PeerState::CONFIGURED) {
                return Err(PeerAddError::NidConfiguredElsewhere(nid));
            }
            if other_entry.primary_nid == nid {
                let (other_state, other_nis) = (other_entry.state, other_entry.ni_count());
                if other_state.contains(PeerState::LOCK_PRIMARY) && other_nis > 1 {
                    // lustre: both peers are flagged BAD_CONFIG and the add "succeeds".
                    for id in [peer, other] {
                        if let Some(entry) = self.node.peers.peer_mut(id) {
                            entry.state.insert(PeerState::BAD_CONFIG);
                        }
                    }
                    return Ok(());
                }
                // The NID locked first stays primary.
                if other_state.contains(PeerState::LOCK_PRIMARY)
                    && !flags.contains(PeerState::LOCK_PRIMARY)
                {
                    if let Some(entry) = self.node.peers.peer_mut(peer) {
                        entry.primary_nid = nid;
                        entry.state.insert(PeerState::LOCK_PRIMARY);
                    }
                }
                self.delete_peer(other);
            } else {
                let new_net = !self.peer_has_net(peer, nid.net());
                let emptied = self.node.peers.attach(id, peer);
                self.apply_policies_on_attached(id, new_net);
                if let Some(emptied) = emptied {
                    self.remove_empty_peer(emptied);
                }
                self.node.peers.put_primary_first(peer);
                return Ok(());
            }
        }
        let credits = self.node.nis.peer_credits_for(nid);
        self.make_peer_ni_room();
        let new_net = !self.peer_has_net(peer, nid.net());
        let id = self
            .node
            .peers
            .create_for(&mut self.peer_nis, peer, nid, credits, self.limits.peer_nis)
            .map_err(|_| PeerAddError::TooManyPeers)?;
        self.apply_policies_on_attached(id, new_net);
        self.node.peers.put_primary_first(peer);
        Ok(())
    }

    /// `lnet_reset_peer`: every NID but the primary goes; the peer is discovered again.
    fn reset_peer(&mut self, peer: PeerId) {
        let Some(entry) = self.node.peers.peer(peer) else {
            return;
        };
        let primary = entry.primary_nid;
        let others: Vec<PeerNiId> = entry
            .ni_ids()
            .filter(|id| {
                self.node.peers.ni(&self.peer_nis, *id).is_some_and(|ni| ni.nid != primary)
            })
            .collect();
        for id in others {
            self.delete_peer_ni(id);
        }
        if let Some(entry) = self.node.peers.peer_mut(peer) {
            entry.state.remove(PeerState::NIDS_UPTODATE);
        }
    }

    /// `lnet_peer_del`: discovery cancelled, every peer NI deleted, the peer gone; messages
    /// it held for discovery are sent again (to a new peer created by traffic).
    pub(super) fn delete_peer(&mut self, peer: PeerId) {
        let Some(entry) = self.node.peers.peer(peer) else {
            return;
        };
        let ids: Vec<PeerNiId> = entry.ni_ids().collect();
        for id in ids {
            self.cancel_recovery(RecoveryTarget::Peer(id));
            self.node.peers.delete_ni(&mut self.peer_nis, id);
        }
        self.remove_empty_peer(peer);
    }

    /// Deletes one peer NI; a peer left without NIs goes too.
    pub(super) fn delete_peer_ni(&mut self, id: PeerNiId) {
        self.cancel_recovery(RecoveryTarget::Peer(id));
        if let Some(emptied) = self.node.peers.delete_ni(&mut self.peer_nis, id) {
            self.remove_empty_peer(emptied);
        }
    }

    /// Messages waiting for credits on `ni` (or for the driver to take them) are selected
    /// again; `all` includes those pinned to it (a removed NI), which then fail selection.
    pub(super) fn requeue_waiting_on(&mut self, ni: NiId, all: bool) {
        let waiting: Vec<Key> = self
            .msgs
            .iter()
            .filter(|(_, m)| {
                m.tx && m.ni == ni
                    && matches!(
                        m.phase,
                        Phase::WaitPeerCredit | Phase::WaitNiCredit | Phase::TxReady
                    )
                    && (all
                        || (m.source.is_none() && m.response_ni.is_none())
                        || self.pin_released(m))
            })
            .map(|(key, _)| key)
            .collect();
        for key in waiting {
            self.withdraw(key);
            self.call.work.push_back(Work::Resend(key));
        }
    }
}
