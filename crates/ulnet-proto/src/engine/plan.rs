//! Lock plans: which CPU partitions' state a message-path call will reach, told before the
//! call, without changing anything.
//!
//! A runtime with a lock per partition (docs/decisions/0029) takes the locks a call's plan
//! names, in partition order, before making it; a call planned [`CallScope::Node`] takes them
//! all, as the kernel's `LNET_LOCK_EX` calls do. The kernel plans the same way in its flows:
//! `lnet_parse()` locks the CPT of the previous hop on the receiving NI, a response the CPT of
//! its MD's cookie (`lnet_cpt_of_cookie()`), a match the table `lnet_mt_of_match()` names.
//! The plans cover the partitioned state (MDs, MEs, messages, tracker heaps), the peer NIs
//! (owned by the partition their NID hashes to), the NIs' tx credit pools and the portals'
//! match tables; changes to node-wide state (peers, an NI's health, a portal's rotor or
//! delayed list) need a plan of the whole node. The engine's tests check every call they
//! make against its plan (`audit.rs`).

use crate::addr::Nid;
use crate::engine::health::{HealthStatus, MAX_HEALTH};
use crate::engine::md::{MdHandle, MdOptions, MdOwner};
use crate::engine::me::{InsertPosition, MeHandle, ProcessId};
use crate::engine::msg::{Credit, RxId, TxId};
use crate::engine::ni::NiId;
use crate::engine::node::Engine;
use crate::engine::peer::{PeerId, PeerNiId};
use crate::engine::portal::MatchInfo;
use crate::engine::slab::Key;
use crate::engine::view::{Access, NodeAccess, View};
use crate::wire::header::{Body, Header};
use crate::wire::ping::LNET_RESERVED_PORTAL;

/// The partitions a call needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CallScope {
    /// These partitions, one bit each (partition `n` is bit `n`).
    Partitions(u64),
    /// The whole node: every partition, and the node-wide state.
    Node,
}

impl CallScope {
    /// Partition `cpt` alone (the whole node past the 64 partitions a plan can name).
    pub fn one(cpt: u32) -> Self {
        Self::Partitions(0).with(cpt)
    }

    /// This scope and partition `cpt`.
    pub fn with(self, cpt: u32) -> Self {
        match self {
            Self::Partitions(mask) if cpt < u64::BITS => Self::Partitions(mask | 1 << cpt),
            _ => Self::Node,
        }
    }

    /// Both scopes' partitions.
    pub fn join(self, other: Self) -> Self {
        match (self, other) {
            (Self::Partitions(a), Self::Partitions(b)) => Self::Partitions(a | b),
            _ => Self::Node,
        }
    }

    /// Whether the scope holds every partition of `mask`.
    pub fn covers(self, mask: u64) -> bool {
        match self {
            Self::Partitions(planned) => mask & !planned == 0,
            Self::Node => true,
        }
    }
}

impl Engine {
    /// The plan of [`handle_header`](Engine::handle_header): the partition of the previous
    /// hop on `ni`, where the message lives, and the one a response's MD or a request's match
    /// table is in. A sender the node does not know yet (the peer is created), LNet's own
    /// traffic (pings, pushes: discovery state) and a match that takes the rotor or may steal
    /// need the node.
    pub fn plan_header(&self, ni: NiId, from: Nid, header: &Header) -> CallScope {
        self.with_look(|look| look.plan_header(ni, from, header))
    }

    /// The plan of [`handle_send_done`](Engine::handle_send_done): the message, and the
    /// messages its credits go to next (a message waiting for a credit may live in another
    /// partition, its MD's, where the kernel's waiters all share the CPT of their next hop).
    /// A failure, or a success on an NI whose health is recovering, changes health, the
    /// recovery queues and perhaps the ping buffer: the whole node.
    pub fn plan_send_done(&self, tx: TxId, status: HealthStatus) -> CallScope {
        self.with_look(|look| look.plan_send_done(tx, status))
    }

    /// The plan of [`handle_recv_done`](Engine::handle_recv_done), as
    /// [`plan_send_done`](Self::plan_send_done)'s.
    pub fn plan_recv_done(&self, rx: RxId, status: HealthStatus) -> CallScope {
        self.with_look(|look| look.plan_recv_done(rx, status))
    }

    /// The plan of [`put`](Engine::put) or [`get`](Engine::get) from `md` to `target`: the
    /// MD's partition, where the message lives; a target the node has not discovered needs
    /// the node (the peer is created, discovery runs).
    pub fn plan_initiate(&self, md: MdHandle, target: ProcessId) -> CallScope {
        self.with_look(|look| look.plan_initiate(md, target))
    }

    /// The plan of [`me_attach`](Engine::me_attach): the partition whose match table takes
    /// the ME; the node for a portal's first ME (it fixes the match type).
    pub fn plan_me_attach(
        &self,
        portal: u32,
        match_id: ProcessId,
        position: InsertPosition,
    ) -> CallScope {
        self.with_look(|look| look.plan_me_attach(portal, match_id, position))
    }

    /// The plan of [`md_attach`](Engine::md_attach) on `me` and of
    /// [`me_unlink`](Engine::me_unlink): the ME's partition; the node while its portal holds
    /// delayed PUTs (the MD may take them).
    pub fn plan_me(&self, me: MeHandle) -> CallScope {
        match me.key() {
            Some(key) => self.with_look(|look| look.plan_me(key)),
            None => CallScope::Node,
        }
    }

    /// The plan of [`md_unlink`](Engine::md_unlink): the MD's partition and the peer NI its
    /// tracker awaits; the node for LNet's own MDs.
    pub fn plan_unlink(&self, md: MdHandle) -> CallScope {
        self.with_look(|look| look.plan_unlink(md))
    }
}

impl<A: Access, N: NodeAccess> View<'_, A, N> {
    /// See [`Engine::plan_header`].
    pub(crate) fn plan_header(&self, ni: NiId, from: Nid, header: &Header) -> CallScope {
        if self.partitions.count() == 1 {
            return CallScope::one(0);
        }
        let Some(hop) = self.node.peers.find(from) else {
            return CallScope::Node;
        };
        if self.ni_recovering(ni) {
            // A message complete with its header (a GET, an ACK) raises the NI's health.
            return CallScope::Node;
        }
        if self.node.faults.has_rules() || self.counts_as_router_ping(header) {
            // Fault rules count what they match; a router's ping keeps its net alive.
            return CallScope::Node;
        }
        let home = self.with_peer_ni(CallScope::one(self.cpt_of_nid(&from, ni)), hop);
        if self.peer_ni_recovers(hop) {
            // A message complete with its header queues the peer NI for recovery.
            return CallScope::Node;
        }
        let for_me = self.ni_for_nid(header.dest_nid).is_some();
        if !for_me {
            return home;
        }
        // A request's response (a GET's REPLY at once, a PUT's ACK when it is received) goes
        // to one of the initiator's NIs.
        let Some(initiator) = self.node.peers.peer_id(header.src_nid) else {
            return CallScope::Node;
        };
        let home = self.with_peer(home, initiator);
        let (info, portal) = match header.body {
            Body::Ack { dst_wmd, .. } | Body::Reply { dst_wmd } => {
                let Some(md) = self.response_md_key(dst_wmd) else {
                    return home;
                };
                if self.mds.get(md).is_some_and(|md| md.owner != MdOwner::User) {
                    // A ping's or push's response drives discovery.
                    return CallScope::Node;
                }
                let home = self.with_awaited(home, md);
                return self.mds.partition_of(md).map_or(home, |cpt| home.with(cpt));
            }
            Body::Put { match_bits, offset, ptl_index, .. } => {
                (self.match_info(header, MdOptions::OP_PUT, match_bits, offset), ptl_index)
            }
            Body::Get { match_bits, ptl_index, src_offset, sink_length, .. } => {
                let info = MatchInfo {
                    rlength: sink_length,
                    ..self.match_info(header, MdOptions::OP_GET, match_bits, src_offset)
                };
                (info, ptl_index)
            }
            Body::Hello { .. } => return home,
        };
        if portal == LNET_RESERVED_PORTAL {
            return CallScope::Node;
        }
        let Some(table) = self.node.portals.get(portal as usize) else {
            return home;
        };
        let place = self.place_of(ni, from, info.initiator.nid, header);
        match table.plan_match(&self.match_tables, &self.mes, &self.mds, &info, &place) {
            Some(cpt) => home.with(cpt),
            None => CallScope::Node,
        }
    }

    /// See [`Engine::plan_send_done`].
    pub(crate) fn plan_send_done(&self, tx: TxId, status: HealthStatus) -> CallScope {
        self.plan_completion(tx.0, status)
    }

    /// See [`Engine::plan_recv_done`].
    pub(crate) fn plan_recv_done(&self, rx: RxId, status: HealthStatus) -> CallScope {
        self.plan_completion(rx.0, status)
    }

    fn plan_completion(&self, key: Key, status: HealthStatus) -> CallScope {
        let mut scope = self.plan_message(key);
        let Some(message) = self.msgs.get(key) else {
            return scope;
        };
        if !status.is_ok() || self.ni_recovering(message.ni) {
            return CallScope::Node;
        }
        if !message.tx && message.peer_ni.is_some_and(|id| self.peer_ni_recovers(id)) {
            // A good receive queues its peer NI for recovery.
            return CallScope::Node;
        }
        let ni_waiter = (message.ni_credit == Credit::Held)
            .then(|| self.ni_shares.share(message.tx_cpt)?.pool(message.ni)?.next_waiter())
            .flatten();
        let peer_waiter = (message.peer_credit == Credit::Held)
            .then(|| self.node.peers.ni(&self.peer_nis, message.peer_ni?)?.credits.next_waiter())
            .flatten();
        let rx_peer = message.rx_peer.or(message.peer_ni.filter(|_| !message.tx));
        let router_waiter = (message.router_credit == Credit::Held)
            .then(|| {
                self.node.peers.ni(&self.peer_nis, rx_peer?)?.router_credits.as_ref()?.next_waiter()
            })
            .flatten();
        for waiter in [ni_waiter, peer_waiter].into_iter().flatten() {
            // A waiter that cannot be sent any more fails when it is posted: the whole node.
            let fails = self.msgs.get(waiter).is_some_and(|w| self.post_drop(waiter, w).is_some());
            scope = if fails { CallScope::Node } else { scope.join(self.plan_message(waiter)) };
        }
        if let Some(waiter) = router_waiter {
            scope = scope.join(self.plan_message(waiter));
        }
        if message.routing && !message.tx {
            scope = scope.join(self.plan_forward(&message.header));
        }
        if message.ack_to.is_some() {
            // The ACK goes to one of the initiator's NIs.
            scope = match self.node.peers.peer_id(message.header.src_nid) {
                Some(peer) => self.with_peer(scope, peer),
                None => CallScope::Node,
            };
        }
        scope
    }

    /// Where forwarding a message to its destination reaches: the destination's peer NIs
    /// when it is on a net of ours (the next hop is one of them); the whole node when it is
    /// reached through another router or not known yet.
    fn plan_forward(&self, header: &Header) -> CallScope {
        let local =
            self.node.nis.iter().any(|ni| !ni.removed && ni.nid.net() == header.dest_nid.net());
        match self.node.peers.peer_id(header.dest_nid) {
            Some(peer) if local => self.with_peer(CallScope::Partitions(0), peer),
            _ => CallScope::Node,
        }
    }

    /// Whether local NI `ni` is recovering (health below full, or recovery pings counted):
    /// a good message raises its health, may change the recovery queue and the ping buffer,
    /// and resets its ping count.
    fn ni_recovering(&self, ni: NiId) -> bool {
        self.node
            .nis
            .get(ni)
            .is_some_and(|ni| ni.health.value() < MAX_HEALTH || ni.recovery.ping_count != 0)
    }

    /// Whether a good message from peer NI `id` would queue it on the node's recovery queue
    /// (monitor.rs `queue_peer_recovery()`): below full health or with a suspect path, and not
    /// queued yet. Read from its owner's share, which the plan names, so a plan made again
    /// holding it sees it.
    fn peer_ni_recovers(&self, id: PeerNiId) -> bool {
        self.node.peers.ni(&self.peer_nis, id).is_some_and(|lpni| {
            (lpni.health.value() < MAX_HEALTH || lpni.watch.any_suspect()) && !lpni.recovery.queued
        })
    }

    /// `scope` and the partitions a send to peer NI `id` reaches: the one owning it, and
    /// the one whose tx credits each local NI of its net would charge (`lnet_cpt_of_nid()` on
    /// that NI: the owner unless the NI is bound to some partitions only).
    /// Told from the node part alone (the peer NI's NID), so that a call not yet holding
    /// the owner plans it.
    fn with_peer_ni(&self, scope: CallScope, id: PeerNiId) -> CallScope {
        let Some(nid) = self.node.peers.nid(id) else {
            return CallScope::Node;
        };
        let net = nid.net();
        self.node
            .nis
            .iter()
            .filter(|ni| ni.nid.net() == net && !ni.cpts.is_all())
            .fold(scope.with(self.node.peers.cpt_of(&nid)), |scope, ni| {
                scope.with(self.partitions.cpt_of_nid_for(&nid, &ni.cpts))
            })
    }

    /// `scope` and the partitions owning the NIs of `peer`: selection may take any of them.
    fn with_peer(&self, scope: CallScope, peer: PeerId) -> CallScope {
        let Some(peer) = self.node.peers.peer(peer) else {
            return CallScope::Node;
        };
        peer.ni_ids().fold(scope, |scope, id| self.with_peer_ni(scope, id))
    }

    /// See [`Engine::plan_initiate`].
    pub(crate) fn plan_initiate(&self, md: MdHandle, target: ProcessId) -> CallScope {
        if self.node.faults.has_rules() {
            return CallScope::Node;
        }
        let Some(cpt) = md.key().and_then(|key| self.mds.partition_of(key)) else {
            return CallScope::Node;
        };
        let Some(peer) = self.node.peers.peer_id(target.nid) else {
            return CallScope::Node;
        };
        if !self.peer_is_uptodate(peer) {
            // The send waits for discovery (discovery.rs `hold_for_discovery`).
            return CallScope::Node;
        }
        self.with_peer(CallScope::one(cpt), peer)
    }

    /// See [`Engine::plan_message`].
    pub(crate) fn plan_message(&self, key: Key) -> CallScope {
        if self.node.faults.has_rules() {
            return CallScope::Node;
        }
        let Some(message) = self.msgs.get(key) else {
            return CallScope::one(self.msgs.partition_of(key).unwrap_or(0));
        };
        let mut scope = CallScope::one(self.msgs.partition_of(key).unwrap_or(0));
        if message.ni_credit != Credit::None {
            scope = scope.with(message.tx_cpt);
        }
        // The peer NIs it holds credits of, was received from, or routes through.
        for id in [message.peer_ni, message.rx_peer, message.router_hint].into_iter().flatten() {
            scope = self.with_peer_ni(scope, id);
        }
        for md in [message.md, message.tracked_md].into_iter().flatten() {
            if self.mds.get(md).is_some_and(|md| md.owner != MdOwner::User) {
                return CallScope::Node;
            }
            if let Some(cpt) = self.mds.partition_of(md) {
                scope = scope.with(cpt);
            }
            scope = self.with_awaited(scope, md);
        }
        scope
    }

    /// See [`Engine::plan_me_attach`].
    pub(crate) fn plan_me_attach(
        &self,
        portal: u32,
        match_id: ProcessId,
        position: InsertPosition,
    ) -> CallScope {
        let Some(table) = self.node.portals.get(portal as usize) else {
            return CallScope::Node;
        };
        if table.match_type.is_none() {
            // The first ME fixes the portal's match type.
            return CallScope::Node;
        }
        let me = crate::engine::node::me_of(portal, match_id);
        CallScope::one(table.table_of_attach(&me, position, |nid| {
            self.node.nis.cpt_of_nid_any(&self.partitions, nid)
        }))
    }

    /// See [`Engine::plan_me`].
    pub(crate) fn plan_me(&self, me: Key) -> CallScope {
        let Some(cpt) = self.mes.partition_of(me) else {
            return CallScope::Node;
        };
        let portal = self.mes.get(me).and_then(|me| self.node.portals.get(me.portal as usize));
        if portal.is_some_and(|portal| !portal.delayed().is_empty()) {
            // Delayed PUTs may match the MD attached: the portal's list is the node's.
            return CallScope::Node;
        }
        CallScope::one(cpt)
    }

    /// See [`Engine::plan_unlink`].
    pub(crate) fn plan_unlink(&self, md: MdHandle) -> CallScope {
        let Some(key) = md.key() else {
            return CallScope::Node;
        };
        let Some(cpt) = self.mds.partition_of(key) else {
            return CallScope::Node;
        };
        if self.mds.get(key).is_some_and(|md| md.owner != MdOwner::User) {
            return CallScope::Node;
        }
        self.with_awaited(CallScope::one(cpt), key)
    }

    /// `scope` and the peer NI whose response `md`'s tracker awaits (fast failover's watch of
    /// that path ends when the response comes or another send takes over).
    fn with_awaited(&self, scope: CallScope, md: Key) -> CallScope {
        let awaited = self.mds.get(md).and_then(|md| md.tracker.as_ref()?.awaiting);
        awaited.map_or(scope, |(id, _)| self.with_peer_ni(scope, id))
    }

    fn match_info(
        &self,
        header: &Header,
        operation: MdOptions,
        bits: u64,
        offset: u32,
    ) -> MatchInfo {
        MatchInfo {
            initiator: ProcessId::new(self.node.peers.primary_nid(header.src_nid), header.src_pid),
            operation,
            match_bits: bits,
            remote_offset: offset,
            rlength: header.payload_length,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scopes_grow_and_cover() {
        let scope = CallScope::one(1).with(3);
        assert_eq!(scope, CallScope::Partitions(0b1010));
        assert!(scope.covers(0b1000) && scope.covers(0) && !scope.covers(0b1001));
        assert_eq!(scope.with(64), CallScope::Node);
        assert!(CallScope::Node.covers(u64::MAX));
        assert_eq!(CallScope::Node.with(0), CallScope::Node);
    }
}
