//! Dynamic discovery: before the first PUT or GET to a peer that is not up to date, the message
//! waits on the peer's pending queue while the node pings the peer, merges what the reply says
//! (multi-rail, discovery, routing, its NIDs and their status, its primary NID) into the peer
//! model, pushes our own ping buffer to multi-rail peers that have not seen it, and then sends
//! the held messages (or fails them with discovery's error). Pushes from peers feed the same
//! merge. The kernel's discovery thread becomes a request queue drained inside every call.
//!
//! lustre: lnet/lnet/peer.c (`lnet_discover_peer_locked`, `lnet_peer_queue_for_discovery`,
//! `lnet_peer_discovery` (the thread's loop), `lnet_discovery_event_handler` and its
//! `_reply`/`_ack`/`_send`/`_unlink` helpers, `lnet_peer_push_event`, `lnet_peer_data_present`,
//! `lnet_peer_merge_data`, `lnet_peer_set_primary_data`, `lnet_peer_add_nid`,
//! `lnet_peer_send_ping`, `lnet_peer_send_push`, `lnet_peer_discovery_complete`),
//! lib-move.c (`lnet_msg_discovery`, `lnet_initiate_peer_discovery`),
//! include/linux/lnet/lib-lnet.h (`lnet_peer_needs_push`, `lnet_peer_needs_ping`),
//! docs/protocol/semantics.md §6, docs/protocol/wire.md §6.4-6.5.

use crate::addr::Nid;
use crate::engine::call::Work;
use crate::engine::error::DiscoverError;
use crate::engine::event::{Event, EventKind, EventStatus};
use crate::engine::health::{Health, HealthStatus};
use crate::engine::md::MdOwner;
use crate::engine::me::{LNET_PID_LUSTRE, ProcessId};
use crate::engine::msg::Phase;
use crate::engine::node::Engine;
use crate::engine::peer::{DiscoveryQueue, Peer, PeerId, PeerNiId, PeerState};
use crate::engine::ping::{MAX_PING_SINK, PingCompletion, RefusedNid, RefusedReason};
use crate::engine::slab::Key;
use crate::engine::view::{Access, Exclusive, Flow, NodeAccess, View};
use crate::time::Time;
use crate::wire::header::Body;
use crate::wire::ping::{
    LNET_NI_STATUS_DOWN, LNET_NI_STATUS_UP, LNET_PING_FEAT_DISCOVERY, LNET_PING_FEAT_MULTI_RAIL,
    LNET_PING_FEAT_RTE_DISABLED, LNET_PING_INFO_HDR_SIZE, LNET_PING_INFO_MIN_SIZE,
    LNET_PROTO_PING_MAGIC, LNET_RESERVED_PORTAL, NI_STATUS_LEN, PingError, PingInfo,
};

/// Most messages one peer holds while it is being discovered (Lustre's `lp_dc_pendq` is
/// unbounded). Beyond it a new message fails at once with `-ENOMEM`.
pub const MAX_DISCOVERY_PENDING: usize = 4096;
/// Soft ping failures (corrupt or truncated replies) in a row before discovery gives up with
/// `-EPROTO`. Lustre retries without a bound; a truncated reply needs one retry.
pub const MAX_SOFT_PING_FAILURES: u8 = 4;

pub use crate::engine::ping::{DiscoveryId, DiscoveryResult, MAX_DISCOVERIES};

/// What a discovery action asks of the loop (Lustre's 0 and `LNET_REDISCOVER_PEER`).
enum Step {
    /// Nothing more now: wait for an event, or finish if the peer is no longer discovering.
    Continue,
    /// Take another look at once.
    Rediscover,
}

/// A received ping buffer, as far as discovery can read it.
enum Received {
    Whole(PingInfo, usize),
    /// The header and entry 0 arrived, the rest did not: `info_size` is what the peer needs.
    Truncated {
        features: u32,
        info_size: usize,
    },
    Corrupt,
}

/// Why a NID could not be added to a peer (`lnet_peer_add_nid` errors).
enum AddNidError {
    /// `-EPERM`: a multi-rail peer is only updated by multi-rail data, a configured peer only
    /// by configuration.
    NotMultiRail,
    /// `-ENOTUNIQ`: a non-multi-rail peer has one NI per net.
    NotUnique,
    /// `-ENOMEM`: the peer table is full.
    NoMemory,
    /// `-EEXIST`: the NID belongs to another peer that configuration owns.
    ConfiguredElsewhere,
    /// One of this node's own NIDs (ulnet's rule, not the kernel's: see
    /// docs/decisions/0016-discovery-nid-ownership.md).
    Local,
}

impl Engine {
    /// `lnetctl discover` (`lnet_discover`): discovers the peer owning `nid` again (it is
    /// always pinged; `force` also forces a push), and reports a [`DiscoveryResult`] through
    /// [`poll_completion`](Self::poll_completion). Held messages are released as usual.
    pub fn discover(
        &mut self,
        now: Time,
        nid: Nid,
        force: bool,
    ) -> Result<DiscoveryId, DiscoverError> {
        self.flow().discover(now, nid, force)
    }

    /// The last NID a peer's ping reply or push listed that discovery did not attach to it
    /// (one of ours, or another peer's that configuration keeps); how many there were is
    /// [`GlobalStats::discovery_nids_refused`](crate::engine::stats::GlobalStats). For the
    /// runtime to log (docs/decisions/0016-discovery-nid-ownership.md).
    pub fn last_refused_nid(&self) -> Option<RefusedNid> {
        self.with_look(|look| look.last_refused_nid())
    }
}

impl<A: Access, N: NodeAccess> View<'_, A, N> {
    /// See [`Engine::last_refused_nid`].
    pub(crate) fn last_refused_nid(&self) -> Option<RefusedNid> {
        self.node.discoveries.last_refused
    }

    /// One of this node's NIDs (`0@lo` included).
    fn is_local_nid(&self, nid: Nid) -> bool {
        nid == Nid::LO_0 || self.ni_for_nid(nid).is_some()
    }

    // ------------------------------------------------------------ predicates

    /// `lnet_peer_is_uptodate_locked`.
    pub(super) fn peer_is_uptodate(&self, peer: PeerId) -> bool {
        let Some(entry) = self.node.peers.peer(peer) else {
            return true;
        };
        let busy = PeerState::DISCOVERING
            | PeerState::FORCE_PING
            | PeerState::FORCE_PUSH
            | PeerState::REDISCOVER;
        !entry.state.intersects(busy)
            && !self.peer_needs_push(peer)
            && entry.state.contains(PeerState::DISCOVERED | PeerState::NIDS_UPTODATE)
    }

    /// `lnet_peer_needs_push`.
    fn peer_needs_push(&self, peer: PeerId) -> bool {
        let Some(entry) = self.node.peers.peer(peer) else {
            return false;
        };
        if !entry.multi_rail() || entry.state.contains(PeerState::PUSH_SENT) {
            return false;
        }
        if entry.state.contains(PeerState::FORCE_PUSH) {
            return true;
        }
        if entry.state.contains(PeerState::NO_DISCOVERY) || !self.node.tunables.discovery {
            return false;
        }
        entry.discovery.node_sequence < self.node.ping_target.info().sequence
    }

    /// `lnet_is_discovery_disabled_locked`.
    fn peer_discovery_disabled(&self, peer: PeerId) -> bool {
        !self.node.tunables.discovery
            || self.node.peers.peer(peer).is_none_or(|entry| {
                !entry.multi_rail() || entry.state.contains(PeerState::NO_DISCOVERY)
            })
    }
}

impl Flow<'_> {
    /// See [`Engine::discover`].
    pub(crate) fn discover(
        &mut self,
        now: Time,
        nid: Nid,
        force: bool,
    ) -> Result<DiscoveryId, DiscoverError> {
        self.advance(now);
        if nid.is_any() {
            return Err(DiscoverError::AnyNid);
        }
        // Our own network NIDs are discovered like any peer's (a self peer, as the kernel's);
        // 0@lo is not a peer.
        if nid == Nid::LO_0 {
            return Err(DiscoverError::LocalNid(nid));
        }
        if self.node.discoveries.waiter_count() >= MAX_DISCOVERIES {
            return Err(DiscoverError::TooManyDiscoveries);
        }
        let credits = self.node.nis.peer_credits_for(nid);
        let peer_ni =
            self.peer_ni_or_create(nid, credits).map_err(|_| DiscoverError::TooManyPeers)?;
        let Some(peer) = self.node.peers.owner(peer_ni) else {
            return Err(DiscoverError::TooManyPeers);
        };
        if let Some(state) = self.node.peers.peer_mut(peer).map(|peer| &mut peer.state) {
            state.remove(PeerState::NIDS_UPTODATE);
            if force {
                state.insert(PeerState::FORCE_PING | PeerState::FORCE_PUSH);
            }
        }
        let id = self.node.discoveries.add_waiter(nid);
        self.clear_discovery_error(peer);
        self.queue_for_discovery(peer);
        self.run_work();
        Ok(DiscoveryId(id))
    }
}

// ------------------------------------------------------------ holding messages

impl<N: NodeAccess> View<'_, Exclusive, N> {
    /// `lnet_initiate_peer_discovery`: a PUT or GET off portal 0 to a peer that is not up to
    /// date waits on its pending queue while the peer is discovered. True when the message
    /// was taken (held, or failed).
    pub(super) fn hold_for_discovery(&mut self, key: Key, peer_ni: PeerNiId) -> bool {
        let Some(message) = self.msgs.get(key) else {
            return false;
        };
        // lustre: lnet_msg_discovery(): every PUT and GET but the reserved portal's. A router
        // does not hold what it forwards for its destination's discovery, where the kernel
        // does (decision 0023).
        let triggers = message.tx
            && message.event == Some(EventKind::Send)
            && matches!(
                message.header.body,
                Body::Put { ptl_index, .. } | Body::Get { ptl_index, .. }
                    if ptl_index != LNET_RESERVED_PORTAL
            );
        let Some(peer) = self.node.peers.owner(peer_ni) else {
            return false;
        };
        if !triggers || self.peer_is_uptodate(peer) {
            return false;
        }
        self.on_node("discovery", |flow| flow.hold_now(key, peer)).unwrap_or(false)
    }
}

impl Flow<'_> {
    /// [`View::hold_for_discovery`] for a message that waits: the peer's pending queue.
    fn hold_now(&mut self, key: Key, peer: PeerId) -> bool {
        // lnet_discover_peer_locked(), non-blocking.
        self.clear_discovery_error(peer);
        if let Some(error) = self.node.peers.peer(peer).and_then(|peer| peer.discovery.error) {
            self.finalize_tx(key, HealthStatus::LocalError, error, true);
            return true;
        }
        self.queue_for_discovery(peer);
        let Some(pending) = self.node.peers.peer_mut(peer).map(|peer| &mut peer.discovery.pending)
        else {
            return false;
        };
        if pending.len() >= MAX_DISCOVERY_PENDING {
            self.finalize_tx(key, HealthStatus::LocalError, EventStatus::NoMemory, true);
            return true;
        }
        pending.push_back(key);
        if let Some(message) = self.msgs.get_mut(key) {
            message.phase = Phase::DiscoveryWait;
        }
        true
    }

    /// Sends a message that discovery held, through path selection again.
    pub(super) fn release_held(&mut self, key: Key) {
        let Some(message) = self.msgs.get_mut(key).filter(|m| m.phase == Phase::DiscoveryWait)
        else {
            return;
        };
        message.phase = Phase::ResendQueued;
        let source = message.source;
        self.send(key, source);
    }

    // ------------------------------------------------------------ the request queue

    /// `lnet_peer_queue_for_discovery`: mark the peer DISCOVERING and put it on the request
    /// queue unless it is on a queue already. True when newly queued.
    fn queue_for_discovery(&mut self, peer: PeerId) -> bool {
        let Some(entry) = self.node.peers.peer_mut(peer) else {
            return false;
        };
        entry.state.insert(PeerState::DISCOVERING);
        if entry.discovery.queue != DiscoveryQueue::None {
            return false;
        }
        entry.discovery.queue = DiscoveryQueue::Request;
        self.node.discoveries.request(peer, false);
        true
    }

    /// Moves a queued peer onto the request queue, at its head or tail (`list_move`).
    fn request_again(&mut self, peer: PeerId, front: bool) {
        let Some(entry) = self.node.peers.peer_mut(peer) else {
            return;
        };
        entry.discovery.queue = DiscoveryQueue::Request;
        self.node.discoveries.request(peer, front);
    }

    /// The next peer to act on; stale queue entries are skipped.
    pub(super) fn next_discovery_request(&mut self) -> Option<PeerId> {
        while let Some(peer) = self.node.discoveries.pop_request() {
            let queued = self
                .node
                .peers
                .peer(peer)
                .is_some_and(|entry| entry.discovery.queue == DiscoveryQueue::Request);
            if queued {
                return Some(peer);
            }
        }
        None
    }

    /// One pass of the discovery thread over one peer: the first matching action, then
    /// requeue, wait or complete. lustre: peer.c `lnet_peer_discovery()`.
    pub(super) fn discovery_step(&mut self, peer: PeerId) {
        let Some(entry) = self.node.peers.peer_mut(peer) else {
            return;
        };
        entry.discovery.queue = DiscoveryQueue::Working;
        let state = entry.state;
        let result = if state.contains(PeerState::MARK_DELETION) {
            self.peer_reset(peer)
        } else if state.contains(PeerState::DATA_PRESENT) {
            self.peer_data_present(peer)
        } else if state.contains(PeerState::PING_FAILED) {
            self.peer_ping_failed(peer)
        } else if state.contains(PeerState::PUSH_FAILED) {
            self.peer_push_failed(peer)
        } else if self.node.peers.peer(peer).is_some_and(needs_ping) {
            self.peer_send_ping(peer)
        } else if self.peer_needs_push(peer) {
            self.peer_send_push(peer)
        } else if state.contains(PeerState::PUSH_SENT | PeerState::FORCE_PUSH) {
            // A forced push waits for the one in flight (its ACK brings the peer back).
            Ok(Step::Continue)
        } else {
            if !state.contains(PeerState::MULTI_RAIL) {
                // lustre: lnet_peer_send_push() drops FORCE_PUSH for a non-multi-rail peer,
                // but lnet_peer_needs_push() never lets one get there; left set, the peer
                // would never be up to date and its messages would cycle through discovery.
                if let Some(entry) = self.node.peers.peer_mut(peer) {
                    entry.state.remove(PeerState::FORCE_PUSH);
                }
            }
            self.peer_discovered(peer)
        };
        // A merge may have absorbed this peer into another.
        let Some(entry) = self.node.peers.peer(peer) else {
            return;
        };
        match result {
            Ok(Step::Rediscover) => self.request_again(peer, true),
            Err(error) => self.discovery_complete(peer, Some(error)),
            Ok(Step::Continue) if !entry.state.contains(PeerState::DISCOVERING) => {
                self.discovery_complete(peer, None)
            }
            Ok(Step::Continue) => {}
        }
    }

    /// `lnet_peer_discovery_complete`: off the queues, waiters told, held messages sent again
    /// (or failed with the error).
    fn discovery_complete(&mut self, peer: PeerId, error: Option<EventStatus>) {
        let Some(entry) = self.node.peers.peer_mut(peer) else {
            return;
        };
        entry.state.remove(PeerState::DISCOVERING);
        if let Some(error) = error {
            entry.discovery.error = Some(error);
            entry.state.insert(PeerState::REDISCOVER);
        }
        entry.discovery.queue = DiscoveryQueue::None;
        entry.discovery.soft_failures = 0;
        let pending = std::mem::take(&mut entry.discovery.pending);
        self.router_discovery_complete(peer, error);
        for key in pending {
            match error {
                Some(error) => self.fail_held(key, error),
                None => self.call.work.push_back(Work::Release(key)),
            }
        }
        self.settle_discover_waiters();
    }

    /// `lnet_discover_peer_locked`, non-blocking: the peer is queued for discovery (the router
    /// checker's forced checks, a gateway used with the checker off).
    pub(super) fn start_discovery(&mut self, peer: PeerId) {
        self.clear_discovery_error(peer);
        self.queue_for_discovery(peer);
    }

    fn fail_held(&mut self, key: Key, error: EventStatus) {
        if self.msgs.get(key).is_some_and(|message| message.phase == Phase::DiscoveryWait) {
            self.finalize_tx(key, HealthStatus::LocalError, error, true);
        }
    }

    /// Completes every [`Engine::discover`](crate::engine::Engine::discover) whose peer is no
    /// longer being discovered.
    fn settle_discover_waiters(&mut self) {
        let mut index = 0;
        while let Some(waiter) = self.node.discoveries.waiter(index) {
            let peer = self.node.peers.peer_id(waiter.nid);
            let busy = peer
                .and_then(|peer| self.node.peers.peer(peer))
                .is_some_and(|entry| entry.state.contains(PeerState::DISCOVERING));
            if busy {
                index += 1;
                continue;
            }
            self.node.discoveries.remove_waiter(index);
            let error =
                peer.and_then(|peer| self.node.peers.peer(peer)).and_then(|p| p.discovery.error);
            let outcome =
                match (error, peer.and_then(|peer| self.node.peers.info(&self.peer_nis, peer))) {
                    (Some(error), _) => Err(error),
                    (None, Some(info)) => Ok(info),
                    (None, None) => Err(EventStatus::NoMemory),
                };
            self.outputs.complete(
                self.call.cpt,
                PingCompletion::Discovery(DiscoveryResult {
                    id: DiscoveryId(waiter.id),
                    nid: waiter.nid,
                    outcome,
                }),
            );
        }
    }

    /// Counts and records a NID discovery did not attach to the peer whose primary is `peer`.
    fn refuse_nid(&mut self, peer: Nid, nid: Nid, reason: RefusedReason) {
        self.count(|counters| counters.discovery_nids_refused += 1);
        self.node.discoveries.last_refused = Some(RefusedNid { peer, nid, reason });
    }

    fn refuse_listed(&mut self, peer: PeerId, nid: Nid, reason: RefusedReason) {
        let primary = self.node.peers.peer(peer).map_or(Nid::ANY, |entry| entry.primary_nid);
        self.refuse_nid(primary, nid, reason);
    }

    /// `lnet_peer_clear_discovery_error`: unless discovery is running, forget its last error.
    fn clear_discovery_error(&mut self, peer: PeerId) {
        if let Some(entry) = self.node.peers.peer_mut(peer) {
            if !entry.state.contains(PeerState::DISCOVERING) {
                entry.discovery.error = None;
            }
        }
    }

    /// `lnet_push_update_to_peers(0)`: our buffer changed; queue every peer that needs it.
    pub(super) fn push_update_to_peers(&mut self) {
        let peers: Vec<PeerId> = self.node.peers.peers().map(|(id, _)| id).collect();
        for peer in peers {
            if self.peer_needs_push(peer) {
                self.queue_for_discovery(peer);
            }
        }
    }

    // ------------------------------------------------------------ the actions

    /// A peer that turned discovery off after being discovered: Lustre deletes and re-creates
    /// it; we keep its NIs and forget everything discovery learned, then let the held
    /// messages go, which discovers it afresh (`lnet_peer_deletion`).
    fn peer_reset(&mut self, peer: PeerId) -> Result<Step, EventStatus> {
        let Some(entry) = self.node.peers.peer_mut(peer) else {
            return Ok(Step::Continue);
        };
        entry.state = PeerState::default();
        entry.discovery.data = None;
        entry.discovery.peer_sequence = 0;
        entry.discovery.node_sequence = 0;
        let mds = [entry.discovery.ping_md.take(), entry.discovery.push_md.take()];
        for md in mds.into_iter().flatten() {
            self.abandon_md(md);
        }
        Ok(Step::Continue)
    }

    /// `lnet_peer_data_present`: merge the stored reply or push, possibly into the peer that
    /// owns its primary NID.
    fn peer_data_present(&mut self, peer: PeerId) -> Result<Step, EventStatus> {
        let Some(entry) = self.node.peers.peer_mut(peer) else {
            return Ok(Step::Continue);
        };
        let Some(info) = entry.discovery.data.take() else {
            entry.state.remove(PeerState::DATA_PRESENT);
            return Ok(Step::Rediscover);
        };
        entry.state.remove(PeerState::DATA_PRESENT);
        entry.state.insert(PeerState::NIDS_UPTODATE);
        entry.discovery.soft_failures = 0;
        let peer_primary = entry.primary_nid;
        let Some(primary) = info.primary_nid() else {
            return Ok(Step::Rediscover);
        };
        // ulnet: a buffer naming one of our own NIDs its primary is refused whole for any
        // other peer, and a peer for one of our own NIDs (the self peer that traffic to
        // ourselves makes) takes only a buffer that lists nothing but our own NIDs (the kernel
        // has no such check; docs/decisions/0016-discovery-nid-ownership.md). Merging anything
        // else would make a peer ours, or attach another node's NIDs to ours; the peer stays as
        // it is and its messages still go to the NIs it had (as after the kernel's "Primary
        // NID error").
        let self_peer = self.is_local_nid(peer_primary);
        if self.is_local_nid(primary) && !self_peer {
            self.refuse_nid(peer_primary, primary, RefusedReason::LocalPrimary);
            return Ok(Step::Rediscover);
        }
        if self_peer
            && !info.entries().all(|entry| entry.nid == Nid::LO_0 || self.is_local_nid(entry.nid))
        {
            self.refuse_nid(peer_primary, primary, RefusedReason::LocalPeer);
            return Ok(Step::Rediscover);
        }
        let multi_rail = info.features & LNET_PING_FEAT_MULTI_RAIL != 0;
        let listed = info.entries().any(|entry| entry.nid == peer_primary);
        let result = if peer_primary == primary || (listed && self.peer_discovery_disabled(peer)) {
            self.merge_data(peer, &info)
        } else {
            match self.node.peers.peer_id(primary).filter(|owner| *owner != peer) {
                None => match self.set_primary_nid(peer, primary, multi_rail) {
                    Ok(()) => self.merge_data(peer, &info),
                    // lustre: "Primary NID error" ends discovery with -EPERM or -ENOTUNIQ
                    // (a non-multi-rail peer listing two NIDs on one net), which no event
                    // status carries; the peer stays as it is and its messages still go.
                    Err(_) => Ok(()),
                },
                Some(owner) => {
                    self.hand_over_flags(peer, owner);
                    self.set_primary_data(owner, *info)
                }
            }
        };
        result.map(|()| Step::Rediscover)
    }

    /// The peer owning the buffer's primary NID inherits what this one learned.
    fn hand_over_flags(&mut self, from: PeerId, to: PeerId) {
        let Some(source) = self.node.peers.peer(from) else {
            return;
        };
        let (state, disc_source, disc_destination) =
            (source.state, source.discovery.source, source.discovery.destination);
        let Some(target) = self.node.peers.peer_mut(to) else {
            return;
        };
        if !state.contains(PeerState::NO_DISCOVERY) {
            target.state.remove(PeerState::NO_DISCOVERY);
        }
        if state.contains(PeerState::MULTI_RAIL) {
            target.state.insert(PeerState::MULTI_RAIL);
        }
        if disc_source.is_some() {
            target.discovery.source = disc_source;
            target.discovery.destination = disc_destination;
        }
    }

    /// `lnet_peer_set_primary_data`: data received through another peer object says `peer`
    /// is its owner; merge it here.
    fn set_primary_data(&mut self, peer: PeerId, info: PingInfo) -> Result<(), EventStatus> {
        if !self.queue_for_discovery(peer) {
            self.request_again(peer, true);
        }
        let Some(entry) = self.node.peers.peer_mut(peer) else {
            return Ok(());
        };
        let mut info = info;
        if entry.multi_rail() {
            if entry.discovery.peer_sequence < info.sequence {
                entry.discovery.peer_sequence = info.sequence;
            } else if let Some(stored) = entry.discovery.data.take() {
                info = *stored;
            }
        }
        entry.discovery.data = None;
        entry.state.remove(PeerState::DATA_PRESENT | PeerState::FORCE_PING);
        let stale_ping = entry.state.contains(PeerState::PING_FAILED);
        let ping_md = if stale_ping {
            entry.state.remove(PeerState::PING_FAILED);
            entry.discovery.ping_error = None;
            entry.discovery.ping_md.take()
        } else {
            None
        };
        entry.state.insert(PeerState::NIDS_UPTODATE);
        if let Some(md) = ping_md {
            self.abandon_md(md);
        }
        self.merge_data(peer, &info)
    }

    /// `lnet_peer_set_primary_nid`.
    fn set_primary_nid(
        &mut self,
        peer: PeerId,
        nid: Nid,
        multi_rail: bool,
    ) -> Result<(), AddNidError> {
        let Some(entry) = self.node.peers.peer_mut(peer) else {
            return Ok(());
        };
        if entry.primary_nid == nid {
            return Ok(());
        }
        let locked = entry.state.contains(PeerState::LOCK_PRIMARY);
        let old = entry.primary_nid;
        if !locked {
            entry.primary_nid = nid;
        }
        let result = self.add_nid(peer, nid, multi_rail);
        if result.is_err() {
            if let Some(entry) = self.node.peers.peer_mut(peer) {
                entry.primary_nid = old;
            }
        } else {
            self.node.peers.put_primary_first(peer);
        }
        // lustre: not a failure for a configured peer or a locked primary.
        let exempt = self.node.peers.peer(peer).is_some_and(|entry| {
            entry.state.intersects(PeerState::CONFIGURED | PeerState::LOCK_PRIMARY)
        });
        if exempt {
            return Ok(());
        }
        result
    }

    /// `lnet_peer_merge_data`: router flag, NI statuses, NIDs added; NIDs the buffer no longer
    /// lists are deleted (the primary is only marked DOWN).
    /// With discovery off toward the peer only statuses change.
    fn merge_data(&mut self, peer: PeerId, info: &PingInfo) -> Result<(), EventStatus> {
        let result = self.merge_peer_data(peer, info);
        // lustre: lnet_peer_merge_data() ends by telling the router code what a gateway's
        // buffer says of its routes (lnet_router_discovery_ping_reply()).
        self.router_ping_reply(peer, info);
        result
    }

    fn merge_peer_data(&mut self, peer: PeerId, info: &PingInfo) -> Result<(), EventStatus> {
        let multi_rail = info.features & LNET_PING_FEAT_MULTI_RAIL != 0;
        let Some(entry) = self.node.peers.peer_mut(peer) else {
            return Ok(());
        };
        if info.features & LNET_PING_FEAT_RTE_DISABLED == 0 {
            entry.state.insert(PeerState::ROUTER_ENABLED);
        } else {
            entry.state.remove(PeerState::ROUTER_ENABLED);
        }
        let current: Vec<PeerNiId> = entry.ni_ids().collect();
        let mut vanished = Vec::new();
        for id in current {
            let Some(nid) = self.node.peers.ni(&self.peer_nis, id).map(|ni| ni.nid) else {
                continue;
            };
            if nid == Nid::LO_0 {
                continue;
            }
            match info.entries().find(|entry| entry.nid == nid) {
                Some(listed) => {
                    if let Some(ni) = self.node.peers.ni_mut(&mut self.peer_nis, id) {
                        ni.vanished = false;
                    }
                    self.update_ni_status(id, listed.status)
                }
                None => vanished.push(id),
            }
        }
        if self.peer_discovery_disabled(peer) {
            return Ok(());
        }
        for listed in info.entries() {
            if self.node.peers.peer_id(listed.nid) == Some(peer) {
                continue;
            }
            // lustre: lnet_peer_merge_data() logs the error and goes on with the next NID,
            // except for -ENOMEM.
            match self.add_nid(peer, listed.nid, multi_rail) {
                Ok(()) => {}
                Err(AddNidError::NoMemory) => return Err(EventStatus::NoMemory),
                // The kernel would still apply the listed status to the NID where it is; the
                // status of a NID that is not the peer's is not the peer's to give.
                Err(AddNidError::Local) => {
                    self.refuse_listed(peer, listed.nid, RefusedReason::Local);
                    continue;
                }
                Err(AddNidError::ConfiguredElsewhere) => {
                    self.refuse_listed(peer, listed.nid, RefusedReason::ConfiguredElsewhere);
                    continue;
                }
                Err(AddNidError::NotMultiRail | AddNidError::NotUnique) => continue,
            }
            // Not a NID that stayed with another peer (a locked primary: BAD_CONFIG).
            let owned = self
                .node
                .peers
                .find(listed.nid)
                .filter(|id| self.node.peers.owner(*id) == Some(peer));
            if let Some(id) = owned {
                self.update_ni_status(id, listed.status);
            }
        }
        let mut deleted = false;
        for id in vanished {
            // Lustre deletes it (not for configured peers or a locked primary, which it marks
            // DOWN). So do we, except the primary, which stays listed DOWN and is never
            // selected: deleting it would re-key the peer mid-discovery. Deleting the rest
            // keeps a peer whose list keeps changing from filling the peer NI table.
            let Some(entry) = self.node.peers.peer(peer) else {
                break;
            };
            let keep = entry.state.intersects(PeerState::CONFIGURED | PeerState::LOCK_PRIMARY);
            let primary = entry.primary_nid;
            if !keep && self.node.peers.ni(&self.peer_nis, id).is_some_and(|ni| ni.nid != primary) {
                self.delete_peer_ni(id);
                self.evacuate_peer_ni(id);
                deleted = true;
                continue;
            }
            if let Some(ni) = self.node.peers.ni_mut(&mut self.peer_nis, id) {
                ni.vanished = !keep;
            }
            self.update_ni_status(id, LNET_NI_STATUS_DOWN);
        }
        if deleted {
            self.reclaim_peer_nis();
        }
        self.node.peers.put_primary_first(peer);
        Ok(())
    }

    /// `lnet_peer_add_nid` for discovery: the NID joins `peer`, moving from the peer that had
    /// it, by the kernel's rules: never from a configured peer (`-EEXIST`); never the primary
    /// of a peer whose primary is locked and that has other NIs (both peers are flagged
    /// BAD_CONFIG and the NID stays); the locked primary of a single-NI peer moves with its
    /// lock, and becomes `peer`'s primary unless `peer` has a locked one. A peer losing its
    /// primary keeps its other NIs (Lustre deletes it) and is discovered again on next use; a
    /// peer losing its last NI is gone and its held messages are sent again. Our own NIDs are
    /// never added to another node's peer, only to the self peer (ulnet's rule, decision 0016).
    fn add_nid(&mut self, peer: PeerId, nid: Nid, multi_rail: bool) -> Result<(), AddNidError> {
        let self_peer = self
            .node
            .peers
            .peer(peer)
            .is_some_and(|entry| self.ni_for_nid(entry.primary_nid).is_some());
        if nid == Nid::LO_0 || (self.is_local_nid(nid) && !self_peer) {
            return Err(AddNidError::Local);
        }
        let Some(entry) = self.node.peers.peer_mut(peer) else {
            return Ok(());
        };
        if entry.state.contains(PeerState::CONFIGURED) {
            return Err(AddNidError::NotMultiRail);
        }
        if multi_rail {
            if !entry.multi_rail() {
                entry.state.insert(PeerState::MULTI_RAIL);
                self.node.peers.clear_non_mr_preferred(&mut self.peer_nis, peer);
            }
        } else if entry.multi_rail() {
            return Err(AddNidError::NotMultiRail);
        }
        let owner = self.node.peers.peer_id(nid);
        if owner == Some(peer) {
            return Ok(());
        }
        let Some(entry) = self.node.peers.peer(peer) else {
            return Ok(());
        };
        if !entry.multi_rail() && entry.nets.iter().any(|net| net.net == nid.net()) {
            return Err(AddNidError::NotUnique);
        }
        if let Some(old) = owner {
            // lustre: lnet/lnet/peer.c lnet_peer_add_nid(), the "peer_ni already exists" case.
            let Some(other) = self.node.peers.peer(old) else {
                return Ok(());
            };
            if other.state.contains(PeerState::CONFIGURED) {
                return Err(AddNidError::ConfiguredElsewhere);
            }
            if other.primary_nid == nid && other.state.contains(PeerState::LOCK_PRIMARY) {
                if other.ni_count() > 1 {
                    // "Peer %s NID %s is already locked with peer %s": not an error.
                    for id in [peer, old] {
                        if let Some(entry) = self.node.peers.peer_mut(id) {
                            entry.state.insert(PeerState::BAD_CONFIG);
                        }
                    }
                    return Ok(());
                }
                // The NID locked first stays primary. We keep no lock times: a peer with a
                // locked primary of its own keeps it.
                if let Some(entry) = self.node.peers.peer_mut(peer) {
                    if !entry.state.contains(PeerState::LOCK_PRIMARY) {
                        entry.primary_nid = nid;
                        entry.state.insert(PeerState::LOCK_PRIMARY);
                    }
                }
            }
        }
        let new_net = !self.peer_has_net(peer, nid.net());
        match self.node.peers.find(nid) {
            Some(id) => {
                let emptied = self.node.peers.attach(id, peer);
                self.apply_policies_on_attached(id, new_net);
                if let Some(emptied) = emptied {
                    self.remove_empty_peer(emptied);
                } else if let Some(old) = owner {
                    // lnet_peer_detach_peer_ni_locked(): a discovered peer takes another look.
                    if self
                        .node
                        .peers
                        .peer(old)
                        .is_some_and(|p| p.state.contains(PeerState::DISCOVERED))
                    {
                        self.queue_for_discovery(old);
                    }
                }
                Ok(())
            }
            None => {
                let credits = self.node.nis.peer_credits_for(nid);
                self.make_peer_ni_room();
                let id = self
                    .node
                    .peers
                    .create_for(&mut self.peer_nis, peer, nid, credits, self.limits.peer_nis)
                    .map_err(|_| AddNidError::NoMemory)?;
                self.apply_policies_on_attached(id, new_net);
                Ok(())
            }
        }
    }

    /// A peer whose last NI moved to another: its pings and pushes are cancelled and its held
    /// messages go through path selection again (Lustre's `ln_msg_resend` for deleted peers).
    pub(super) fn remove_empty_peer(&mut self, peer: PeerId) {
        let Some(entry) = self.node.peers.remove_peer(peer) else {
            return;
        };
        let discovery = entry.discovery;
        for md in [discovery.ping_md, discovery.push_md].into_iter().flatten() {
            self.abandon_md(md);
        }
        for key in discovery.pending {
            self.call.work.push_back(Work::Release(key));
        }
        self.settle_discover_waiters();
    }

    /// `handle_disc_lpni_health`: record the status the peer reports; UP to DOWN is a remote
    /// failure, a NID first seen UP gets full health.
    fn update_ni_status(&mut self, id: PeerNiId, status: u32) {
        let Some(ni) = self.node.peers.ni_mut(&mut self.peer_nis, id) else {
            return;
        };
        let old = std::mem::replace(&mut ni.status, status);
        // Never heard from, so never under recovery (docs/protocol/semantics.md §4.3): only the peer's word
        // lowered its health, and its word that the NI is UP restores it. Without this a NID
        // first advertised DOWN (its link not up yet when the peer started) stays below the
        // others forever and is never selected.
        if status == LNET_NI_STATUS_UP && ni.last_alive.is_none() {
            ni.health = Health::FULL;
        }
        if old != status {
            if status == LNET_NI_STATUS_DOWN {
                self.remote_failure(id);
                // Not in Lustre: what is on its paths moves now (docs/decisions/0008).
                self.lose_paths_to(id);
            } else if status == LNET_NI_STATUS_UP {
                self.reprobe_suspect_paths();
            }
        }
    }

    /// `lnet_peer_ping_failed`: unlink the ping MD and force another ping; a real error ends
    /// discovery, a soft one (corrupt or truncated reply) retries, within a bound.
    fn peer_ping_failed(&mut self, peer: PeerId) -> Result<Step, EventStatus> {
        let Some(entry) = self.node.peers.peer_mut(peer) else {
            return Ok(Step::Continue);
        };
        entry.state.remove(PeerState::PING_FAILED);
        entry.state.insert(PeerState::FORCE_PING);
        let error = entry.discovery.ping_error.take();
        let md = entry.discovery.ping_md.take();
        let soft = error.is_none();
        if soft {
            entry.discovery.soft_failures = entry.discovery.soft_failures.saturating_add(1);
        }
        let exhausted = entry.discovery.soft_failures > MAX_SOFT_PING_FAILURES;
        if let Some(md) = md {
            self.abandon_md(md);
        }
        match error {
            Some(error) => Err(error),
            None if exhausted => Err(EventStatus::Protocol),
            None => Ok(Step::Rediscover),
        }
    }

    /// `lnet_peer_push_failed`.
    fn peer_push_failed(&mut self, peer: PeerId) -> Result<Step, EventStatus> {
        let Some(entry) = self.node.peers.peer_mut(peer) else {
            return Ok(Step::Continue);
        };
        entry.state.remove(PeerState::PUSH_FAILED);
        let error = entry.discovery.push_error.take();
        let md = entry.discovery.push_md.take();
        if let Some(md) = md {
            self.abandon_md(md);
        }
        match error {
            Some(error) => Err(error),
            None => Ok(Step::Rediscover),
        }
    }

    /// `lnet_peer_send_ping`: GET the peer's ping buffer (at least 272 bytes, or what it last
    /// needed) from its primary NID.
    fn peer_send_ping(&mut self, peer: PeerId) -> Result<Step, EventStatus> {
        let Some(entry) = self.node.peers.peer_mut(peer) else {
            return Ok(Step::Continue);
        };
        entry.state.insert(PeerState::PING_SENT);
        entry.state.remove(PeerState::FORCE_PING);
        let length = entry.discovery.data_bytes.max(LNET_PING_INFO_MIN_SIZE as u32);
        // One discovery ping per peer at a time: a ping still outstanding (a forced or
        // restarted discovery overtook it) is abandoned, so its late REPLY changes nothing and
        // its MD goes now instead of at its response deadline.
        let previous = entry.discovery.ping_md.take();
        let target = ProcessId::new(entry.primary_nid, LNET_PID_LUSTRE);
        if let Some(md) = previous {
            self.abandon_md(md);
        }
        match self.send_internal_ping(
            MdOwner::DiscoveryPing(peer),
            length.min(MAX_PING_SINK),
            target,
            None,
            false,
        ) {
            Ok(md) => {
                if let Some(entry) = self.node.peers.peer_mut(peer) {
                    entry.discovery.ping_md = Some(md);
                }
                Ok(Step::Continue)
            }
            Err(error) => {
                if let Some(entry) = self.node.peers.peer_mut(peer) {
                    entry.state.remove(PeerState::PING_SENT | PeerState::PING_FAILED);
                }
                Err(error)
            }
        }
    }

    /// `lnet_peer_send_push`: PUT our ping buffer to a multi-rail peer, through the NI pair
    /// its ping reply used if there was one.
    fn peer_send_push(&mut self, peer: PeerId) -> Result<Step, EventStatus> {
        let Some(entry) = self.node.peers.peer_mut(peer) else {
            return Ok(Step::Continue);
        };
        if !entry.multi_rail() {
            entry.state.remove(PeerState::FORCE_PUSH);
            if entry.state.contains(PeerState::NIDS_UPTODATE) {
                return self.peer_discovered(peer);
            }
            return Ok(Step::Continue);
        }
        entry.state.insert(PeerState::PUSH_SENT);
        entry.state.remove(PeerState::FORCE_PUSH);
        let source = entry.discovery.source.take();
        let destination = entry.discovery.destination.take().unwrap_or(entry.primary_nid);
        entry.discovery.pushed_sequence = self.node.ping_target.info().sequence;
        let target = ProcessId::new(destination, LNET_PID_LUSTRE);
        // As for pings: one discovery push per peer at a time.
        if let Some(md) = entry.discovery.push_md.take() {
            self.abandon_md(md);
        }
        match self.send_internal_push(MdOwner::DiscoveryPush(peer), target, source) {
            Ok(md) => {
                if let Some(entry) = self.node.peers.peer_mut(peer) {
                    entry.discovery.push_md = Some(md);
                }
                Ok(Step::Continue)
            }
            Err(error) => {
                if let Some(entry) = self.node.peers.peer_mut(peer) {
                    entry.state.remove(PeerState::PUSH_SENT | PeerState::PUSH_FAILED);
                }
                Err(error)
            }
        }
    }

    /// `lnet_peer_discovered`.
    fn peer_discovered(&mut self, peer: PeerId) -> Result<Step, EventStatus> {
        if let Some(entry) = self.node.peers.peer_mut(peer) {
            entry.state.insert(PeerState::DISCOVERED);
            entry.state.remove(PeerState::DISCOVERING | PeerState::REDISCOVER);
            entry.discovery.error = None;
        }
        Ok(Step::Continue)
    }

    // ------------------------------------------------------------ events

    /// `lnet_discovery_event_handler`: update the peer from an event of its ping or push MD,
    /// and have discovery look at it again unless it is up to date.
    pub(super) fn discovery_event(
        &mut self,
        peer: PeerId,
        md: Key,
        ping: bool,
        event: &Event,
        data: &[u8],
    ) {
        if self.node.peers.peer(peer).is_none() {
            return;
        }
        let rediscover = match event.kind {
            EventKind::Ack => {
                self.discovery_event_ack(peer, event);
                true
            }
            EventKind::Reply => {
                self.discovery_event_reply(peer, event, data);
                true
            }
            EventKind::Send => self.discovery_event_send(peer, ping, event),
            EventKind::Unlink => {
                self.discovery_event_unlink(peer);
                true
            }
            EventKind::Get | EventKind::Put => false,
        };
        if event.unlinked {
            if let Some(entry) = self.node.peers.peer_mut(peer) {
                if entry.discovery.ping_md == Some(md) {
                    entry.discovery.ping_md = None;
                }
                if entry.discovery.push_md == Some(md) {
                    entry.discovery.push_md = None;
                }
            }
        }
        if rediscover && !self.peer_is_uptodate(peer) && !self.queue_for_discovery(peer) {
            self.request_again(peer, false);
        }
    }

    /// `lnet_discovery_event_ack`: the push arrived; the peer has our sequence number.
    fn discovery_event_ack(&mut self, peer: PeerId, event: &Event) {
        let Some(entry) = self.node.peers.peer_mut(peer) else {
            return;
        };
        entry.state.remove(PeerState::PUSH_SENT);
        if event.status.is_ok() {
            entry.discovery.push_error = None;
            entry.discovery.node_sequence = entry.discovery.pushed_sequence;
        } else {
            entry.discovery.push_error = Some(event.status);
            entry.state.insert(PeerState::PUSH_FAILED);
        }
    }

    /// `lnet_discovery_event_send`: only a failed send matters.
    fn discovery_event_send(&mut self, peer: PeerId, ping: bool, event: &Event) -> bool {
        if event.status.is_ok() {
            return false;
        }
        let Some(entry) = self.node.peers.peer_mut(peer) else {
            return false;
        };
        if ping {
            entry.state.remove(PeerState::PING_SENT);
            entry.state.insert(PeerState::PING_FAILED);
            entry.discovery.ping_error = Some(event.status);
        } else {
            entry.state.remove(PeerState::PUSH_SENT);
            entry.state.insert(PeerState::PUSH_FAILED);
            entry.discovery.push_error = Some(event.status);
        }
        true
    }

    /// `lnet_discovery_event_unlink`: the MD was unlinked under a ping or push in flight (its
    /// response tracker expired).
    fn discovery_event_unlink(&mut self, peer: PeerId) {
        let Some(entry) = self.node.peers.peer_mut(peer) else {
            return;
        };
        if entry.state.contains(PeerState::PING_SENT) {
            entry.state.remove(PeerState::PING_SENT);
            entry.state.insert(PeerState::PING_FAILED);
            entry.discovery.ping_error = Some(EventStatus::TimedOut);
        }
        if entry.state.contains(PeerState::PUSH_SENT) {
            entry.state.remove(PeerState::PUSH_SENT);
            entry.state.insert(PeerState::PUSH_FAILED);
            entry.discovery.push_error = Some(EventStatus::TimedOut);
        }
    }

    /// `lnet_discovery_event_reply`: validate the ping reply, learn multi-rail and discovery
    /// from its features, and store it for the merge (or retry a truncated one bigger).
    fn discovery_event_reply(&mut self, peer: PeerId, event: &Event, data: &[u8]) {
        let local_discovery = self.node.tunables.discovery;
        let Some(entry) = self.node.peers.peer_mut(peer) else {
            return;
        };
        entry.discovery.source = Some(event.target.nid);
        entry.discovery.destination = Some(event.source);
        entry.state.remove(PeerState::PING_SENT);
        if !event.status.is_ok() {
            entry.state.insert(PeerState::PING_FAILED);
            entry.discovery.ping_error = Some(event.status);
            return;
        }
        let (features, info_size, info) = match receive(data) {
            Received::Whole(info, info_size) => (info.features, info_size, Some(info)),
            Received::Truncated { features, info_size } => (features, info_size, None),
            Received::Corrupt => {
                entry.state.insert(PeerState::PING_FAILED);
                entry.discovery.ping_error = None;
                return;
            }
        };
        learn_discovery(entry, features, local_discovery, false);
        let was_multi_rail = entry.multi_rail();
        learn_multi_rail_from_reply(entry, features, local_discovery);
        if entry.multi_rail() && !was_multi_rail {
            self.node.peers.clear_non_mr_preferred(&mut self.peer_nis, peer);
        }
        let Some(entry) = self.node.peers.peer_mut(peer) else {
            return;
        };
        let info_bytes = u32::try_from(info_size).unwrap_or(u32::MAX);
        entry.discovery.data_bytes = entry.discovery.data_bytes.max(info_bytes);
        let Some(info) = info else {
            entry.state.insert(PeerState::PING_FAILED);
            entry.discovery.ping_error = None;
            self.node.push_target.grow(info_bytes);
            return;
        };
        if features & LNET_PING_FEAT_MULTI_RAIL != 0
            && info.primary_nid() == Some(entry.primary_nid)
        {
            entry.discovery.peer_sequence = info.sequence;
        }
        entry.discovery.data = Some(Box::new(info));
        entry.state.insert(PeerState::DATA_PRESENT);
    }

    /// `lnet_peer_push_event`: a peer PUT its ping buffer into our push target (already
    /// ACKed). A valid push from a multi-rail peer becomes the peer's data; anything else
    /// makes discovery ping it instead.
    pub(super) fn received_push(&mut self, event: &Event, data: &[u8]) {
        let local_discovery = self.node.tunables.discovery;
        // lnet_find_peer(&ev->source.nid): a push from an unknown NID is ignored.
        let Some(peer) = self.node.peers.peer_id(event.source) else {
            return;
        };
        let Some(entry) = self.node.peers.peer_mut(peer) else {
            return;
        };
        let was_multi_rail = entry.multi_rail();
        let mut grow_to = None;
        match receive(data) {
            _ if !event.status.is_ok() => force_ping(entry),
            Received::Corrupt => force_ping(entry),
            Received::Truncated { .. } if event.mlength >= event.rlength => force_ping(entry),
            Received::Truncated { features, info_size } => {
                let info_bytes = u32::try_from(info_size).unwrap_or(u32::MAX);
                entry.discovery.data_bytes = entry.discovery.data_bytes.max(info_bytes);
                if features & LNET_PING_FEAT_MULTI_RAIL != 0 {
                    learn_discovery(entry, features, local_discovery, true);
                    learn_multi_rail_from_push(entry, local_discovery);
                    grow_to = Some(info_bytes);
                    force_ping(entry);
                }
            }
            Received::Whole(info, info_size) => {
                let info_bytes = u32::try_from(info_size).unwrap_or(u32::MAX);
                entry.discovery.data_bytes = entry.discovery.data_bytes.max(info_bytes);
                // "A non-Multi-Rail peer is not supposed to be capable of sending a push."
                if info.features & LNET_PING_FEAT_MULTI_RAIL != 0 {
                    learn_discovery(entry, info.features, local_discovery, true);
                    learn_multi_rail_from_push(entry, local_discovery);
                    if event.mlength < event.rlength {
                        grow_to = Some(info_bytes);
                        force_ping(entry);
                    } else {
                        store_push(entry, info);
                    }
                }
            }
        }
        if self.node.peers.peer(peer).is_some_and(|entry| entry.multi_rail() && !was_multi_rail) {
            self.node.peers.clear_non_mr_preferred(&mut self.peer_nis, peer);
        }
        if let Some(size) = grow_to {
            self.node.push_target.grow(size);
        }
        if !self.peer_is_uptodate(peer) && !self.queue_for_discovery(peer) {
            self.request_again(peer, true);
        }
    }

    /// `lnet_push_update_to_peers(1)`: every multi-rail peer is pushed our buffer.
    pub(super) fn force_push_to_peers(&mut self) {
        if !self.node.tunables.discovery {
            return;
        }
        let peers: Vec<PeerId> = self.node.peers.peers().map(|(id, _)| id).collect();
        for peer in peers {
            if let Some(entry) = self.node.peers.peer_mut(peer).filter(|entry| entry.multi_rail()) {
                entry.state.insert(PeerState::FORCE_PUSH);
            }
        }
        self.push_update_to_peers();
    }
}

/// `lnet_peer_needs_ping`.
fn needs_ping(peer: &Peer) -> bool {
    peer.state.contains(PeerState::FORCE_PING) || !peer.state.contains(PeerState::NIDS_UPTODATE)
}

fn force_ping(peer: &mut Peer) {
    peer.state.remove(PeerState::NIDS_UPTODATE);
    peer.state.insert(PeerState::FORCE_PING);
}

/// A push's data replaces what is stored only if newer ("always assume new data").
fn store_push(peer: &mut Peer, info: PingInfo) {
    peer.discovery.peer_sequence = info.sequence;
    peer.state.remove(PeerState::NIDS_UPTODATE);
    match &mut peer.discovery.data {
        Some(stored) if peer.state.contains(PeerState::DATA_PRESENT) => {
            if info.sequence > stored.sequence {
                **stored = info;
            }
        }
        _ => {
            peer.discovery.data = Some(Box::new(info));
            peer.state.insert(PeerState::DATA_PRESENT);
        }
    }
}

/// The DISCOVERY feature: NO_DISCOVERY when off on either side; a discovered peer that turned
/// it off is reset (Lustre marks it for deletion).
fn learn_discovery(peer: &mut Peer, features: u32, local_discovery: bool, from_push: bool) {
    let state = peer.state;
    let (enabled, resettable) = if from_push {
        // lustre: lnet_peer_push_event() looks only at the peer's bit.
        let resettable = !state.intersects(PeerState::NO_DISCOVERY | PeerState::DISCOVERING)
            && state.contains(PeerState::DISCOVERED);
        (features & LNET_PING_FEAT_DISCOVERY != 0, resettable)
    } else {
        let resettable = !state.contains(PeerState::NO_DISCOVERY)
            && state.intersects(PeerState::DISCOVERED | PeerState::MULTI_RAIL);
        (features & LNET_PING_FEAT_DISCOVERY != 0 && local_discovery, resettable)
    };
    // Peers configured by the user are never deleted by discovery.
    let resettable = resettable && !state.contains(PeerState::CONFIGURED);
    if enabled {
        peer.state.remove(PeerState::NO_DISCOVERY);
    } else {
        if resettable {
            peer.state.insert(PeerState::MARK_DELETION);
        }
        peer.state.insert(PeerState::NO_DISCOVERY);
    }
}

/// `lnet_discovery_event_reply`'s MULTI_RAIL update.
/// A configured peer keeps the multi-rail setting it was configured with (Lustre only warns
/// when discovery disagrees).
fn learn_multi_rail_from_reply(peer: &mut Peer, features: u32, local_discovery: bool) {
    let configured = peer.state.contains(PeerState::CONFIGURED);
    if features & LNET_PING_FEAT_MULTI_RAIL != 0 {
        if !peer.multi_rail()
            && !configured
            && local_discovery
            && !peer.state.contains(PeerState::NO_DISCOVERY)
        {
            peer.state.insert(PeerState::MULTI_RAIL);
        }
    } else if !configured {
        // "Multi-Rail state vanished".
        peer.state.remove(PeerState::MULTI_RAIL);
    }
}

/// `lnet_peer_push_event`'s MULTI_RAIL update (the push had the bit).
fn learn_multi_rail_from_push(peer: &mut Peer, local_discovery: bool) {
    if !peer.multi_rail()
        && !peer.state.contains(PeerState::CONFIGURED)
        && local_discovery
        && !peer.state.contains(PeerState::NO_DISCOVERY)
    {
        peer.state.insert(PeerState::MULTI_RAIL);
    }
}

/// Reads a received ping buffer as discovery does: whole, truncated after a valid header and
/// entry 0 (`lnet_ping_info_validate` passed), or corrupt.
fn receive(data: &[u8]) -> Received {
    match PingInfo::parse(data) {
        Ok((info, _)) => {
            let info_size = info.info_size();
            Received::Whole(info, info_size)
        }
        Err(PingError::Truncated { info_size, len })
            if len >= LNET_PING_INFO_HDR_SIZE + NI_STATUS_LEN =>
        {
            match raw_features(data) {
                Some(features) => Received::Truncated { features, info_size },
                None => Received::Corrupt,
            }
        }
        Err(_) => Received::Corrupt,
    }
}

/// `pi_features` of a buffer whose magic was already accepted, in the sender's byte order.
fn raw_features(data: &[u8]) -> Option<u32> {
    let magic = u32::from_le_bytes(*data.first_chunk::<4>()?);
    let features = u32::from_le_bytes(*data.get(4..)?.first_chunk::<4>()?);
    if magic == LNET_PROTO_PING_MAGIC { Some(features) } else { Some(features.swap_bytes()) }
}
