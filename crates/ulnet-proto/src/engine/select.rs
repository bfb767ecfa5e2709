//! Multi-rail path selection: which local NI and which peer NI carry a message.
//!
//! lustre: lnet/lnet/lib-move.c (`lnet_select_pathway`, `lnet_handle_send_case_locked` and
//! the eight case handlers, `lnet_find_best_ni_on_local_net`, `lnet_get_best_ni`,
//! `lnet_select_peer_ni`, `lnet_find_existing_preferred_best_ni`,
//! `lnet_select_preferred_best_ni`, `lnet_set_non_mr_pref_nid`, `lnet_handle_send`),
//! docs/protocol/semantics.md §3. The routed cases (`lnet_handle_spec_router_dst`,
//! `lnet_handle_any_router_nmr_dst`, the routed half of `lnet_handle_any_mr_dst`) find their
//! gateway in `routing.rs`; without a live route they fail with `-EHOSTUNREACH` as Lustre's do.
//!
//! Key orders, exactly as Lustre compares (health higher is better, priority lower, credits
//! higher, sequence lower = least recently used):
//! * local net: peer-net health, peer-net priority, local-net health, local-net priority,
//!   peer-net sequence, local-net sequence;
//! * local NI: fatal flag, health, priority, NUMA distance (rounded up to `numa_range`),
//!   tx credits, sequence;
//! * peer NI: health, priority, "the chosen NI is preferred", tx credits, sequence.
//!
//! Not in Lustre: with fast failover on, a path (local NI, peer NI) suspected of
//! black-holing traffic (`failover.rs`) is avoided like a fatal NI. For a fresh PUT or GET to
//! a multi-rail peer, a local NI with no unsuspected path to any of the peer's NIs on the net
//! comes after every NI that has one (right after the fatal flag), and a peer NI whose path
//! from the chosen NI is suspect comes after every other (before health). While a peer has a
//! suspect path, paths proven alive lately (something arrived on them) come next, before
//! health: one broken rail can break several paths, and a moved message should not find them
//! one suspicion timeout at a time. A message being resent tries every path its earlier sends
//! did not fail on before one they did (first in both orders, after the fatal flag). Without
//! suspicions or failed sends (and with `blackhole_timeout = 0`) the orders are exactly
//! Lustre's.

use crate::engine::view::{Access, Exclusive, NodeAccess, View};
use std::cmp::Reverse;

use crate::addr::{Net, Nid};
use crate::engine::failover::keeps_path;
use crate::engine::msg::FailedPaths;
use crate::engine::ni::NiId;

use crate::engine::peer::{PeerId, PeerNiId};
use crate::engine::slab::Key;
use crate::wire::header::Body;
use crate::wire::ping::LNET_RESERVED_PORTAL;

/// A local net's selection order, compared as a tuple (smaller is better, so "more is
/// better" fields are reversed): peer-net health, peer-net priority, local-net health,
/// local-net priority, peer-net seq, local-net seq.
type NetOrder = (Reverse<u32>, u32, Reverse<u32>, u32, u64, u64);
/// A local NI's selection order, compared as a tuple (smaller is better, so "more is better"
/// fields are reversed): fatal, failed, blocked, unproven, health, priority, distance,
/// credits, seq.
type NiOrder = (bool, bool, bool, bool, Reverse<u32>, u32, u32, Reverse<i64>, u64);
/// A peer NI's selection order, as [`NiOrder`]: failed, suspect, unproven, health, priority,
/// not preferred, credits, seq.
type PeerNiOrder = (bool, bool, bool, Reverse<u32>, u32, bool, Reverse<i32>, u64);

/// The path chosen for a message: the local NI, the peer NI it goes to (a gateway when
/// routed), and when routed the destination peer NI the header names.
#[derive(Clone, Copy, Debug)]
pub(super) struct Path {
    pub(super) ni: NiId,
    pub(super) peer_ni: PeerNiId,
    pub(super) routed_to: Option<PeerNiId>,
}

impl From<(NiId, PeerNiId)> for Path {
    fn from((ni, peer_ni): (NiId, PeerNiId)) -> Self {
        Self { ni, peer_ni, routed_to: None }
    }
}

/// Why no path was found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum SelectError {
    /// `-EHOSTUNREACH`: no local NI on a net the destination is on (and no routing).
    HostUnreachable,
    /// `-EINVAL`: the source NID asked for is no longer a local NI.
    NoSource,
}

/// How a send is classified (`sd_send_case`).
struct Case {
    /// A source NID was given (SRC_SPEC) or not (SRC_ANY).
    source: Option<Nid>,
    /// LOCAL_DST vs REMOTE_DST.
    local: bool,
    /// MR_DST vs NMR_DST.
    multi_rail: bool,
    /// SND_RESP: an ACK or a REPLY.
    response: bool,
    /// A PUT or GET on the reserved portal (`lnet_reserved_msg`).
    reserved: bool,
    /// `msg_routing`: forwarding for another node.
    routing: bool,
    /// The router a response goes back through.
    hint: Option<PeerNiId>,
    /// Paths this message's sends failed on, avoided while others exist (fast failover).
    avoid: FailedPaths,
    /// `md_cpt`: the message's home partition, where its MD was bound (a forwarded message's
    /// is its receive partition), whose NUMA distance to each NI counts.
    md_cpt: u32,
}

impl<A: Access, N: NodeAccess> View<'_, A, N> {
    /// `lnet_handle_send`'s round-robin bookkeeping: the peer's send sequence stamps the
    /// chosen peer net and peer NI, the global net sequence the chosen net and NI.
    pub(super) fn stamp_path(&self, ni: NiId, peer_ni: PeerNiId) {
        self.stamp_destination(peer_ni);
        self.node.nis.stamp(ni);
    }

    /// The peer side of [`Self::stamp_path`]; a routed message's final destination is
    /// stamped too, so a multi-rail destination is round-robined across routed nets.
    pub(super) fn stamp_destination(&self, peer_ni: PeerNiId) {
        let Some(lpni) = self.node.peers.ni(&self.peer_nis, peer_ni) else {
            return;
        };
        if let Some(entry) = self.node.peers.peer_of(peer_ni) {
            let seq = entry.send_seq.advance();
            if let Some(peer_net) = entry.nets.iter().find(|n| n.net == lpni.nid.net()) {
                peer_net.seq.set(seq);
            }
            lpni.seq.set(seq);
        }
    }

    /// Whether any usable NI is on `net` (`lnet_get_net_locked` finding a local net).
    pub(super) fn is_local_net(&self, net: Net) -> bool {
        self.node.nis.iter().any(|ni| ni.usable() && ni.nid.net() == net)
    }

    /// `lnet_find_best_ni_on_local_net`'s net choice: over the peer's nets that are local and
    /// have a selectable peer NI.
    fn best_local_net(&self, peer: PeerId) -> Option<Net> {
        let entry = self.node.peers.peer(peer)?;
        let mut best: Option<(Net, NetOrder)> = None;
        for peer_net in &entry.nets {
            let Some(local) = self.node.nis.net(peer_net.net) else {
                continue;
            };
            let Some(net_health) = self.local_net_health(peer_net.net) else {
                continue;
            };
            let mut lpn_health = None;
            for id in &peer_net.nis {
                if let Some(lpni) =
                    self.node.peers.ni(&self.peer_nis, *id).filter(|lpni| !lpni.vanished)
                {
                    let health = lpni.health.value();
                    lpn_health = Some(lpn_health.map_or(health, |best: u32| best.max(health)));
                }
            }
            let Some(lpn_health) = lpn_health else {
                continue;
            };
            let order = (
                Reverse(lpn_health),
                peer_net.priority,
                Reverse(net_health),
                local.priority,
                peer_net.seq.get(),
                local.seq.get(),
            );
            if best.is_none_or(|(_, current)| order < current) {
                best = Some((peer_net.net, order));
            }
        }
        best.map(|best| best.0)
    }

    /// A local net's health: the best health among its NIs without the fatal flag
    /// (`lnet_get_net_healthv_locked`); 0 when all have it; `None` without usable NIs.
    fn local_net_health(&self, net: Net) -> Option<u32> {
        let mut found = false;
        let mut health = 0;
        for ni in self.node.nis.iter().filter(|ni| ni.usable() && ni.nid.net() == net) {
            found = true;
            if !ni.fatal_error {
                health = health.max(ni.health.value());
            }
        }
        found.then_some(health)
    }

    /// `lnet_get_best_ni`: the best usable NI on `net` for a message whose memory is on
    /// partition `md_cpt`.
    pub(super) fn best_ni_on_net(&self, net: Net, md_cpt: u32) -> Option<NiId> {
        self.best_ni(net, None, &FailedPaths::default(), md_cpt)
    }

    /// `lnet_get_best_ni`, and for a multi-rail `peer`, NIs whose every path to the peer's
    /// NIs on `net` is suspect come last but for fatal ones (see the module documentation).
    fn best_ni(
        &self,
        net: Net,
        peer: Option<PeerId>,
        avoid: &FailedPaths,
        md_cpt: u32,
    ) -> Option<NiId> {
        let range = self.node.tunables.numa_range;
        let trouble = peer.is_some_and(|peer| self.peer_in_trouble(peer));
        let peer_nis: &[PeerNiId] = peer
            .and_then(|peer| self.node.peers.peer(peer))
            .and_then(|peer| peer.nets.iter().find(|peer_net| peer_net.net == net))
            .map_or(&[], |peer_net| peer_net.nis.as_slice());
        let mut best: Option<(usize, NiOrder)> = None;
        for (index, ni) in self.node.nis.iter().enumerate() {
            if !ni.usable() || ni.nid.net() != net {
                continue;
            }
            let id = u16::try_from(index).map(NiId).ok();
            // Blocked: the peer has NIs here and the path from this NI to each is suspect.
            let blocked = trouble
                && !peer_nis.is_empty()
                && peer_nis.iter().all(|peer_ni| {
                    self.node.peers.ni(&self.peer_nis, *peer_ni).is_none_or(|lpni| {
                        lpni.vanished || id.is_some_and(|id| lpni.watch.suspects(id))
                    })
                });
            // Unproven: in trouble, and no unsuspected path from this NI was heard from lately.
            let unproven = trouble
                && !peer_nis.iter().any(|peer_ni| {
                    id.is_some_and(|id| {
                        self.node
                            .peers
                            .ni(&self.peer_nis, *peer_ni)
                            .is_some_and(|lpni| !lpni.vanished && !lpni.watch.suspects(id))
                            && self.path_proven(*peer_ni, id)
                    })
                });
            // Every path from this NI to the peer's NIs here failed this message already.
            let failed = !avoid.is_empty()
                && !peer_nis.is_empty()
                && peer_nis.iter().all(|peer_ni| {
                    self.node.peers.ni(&self.peer_nis, *peer_ni).is_none_or(|lpni| lpni.vanished)
                        || id.is_some_and(|id| avoid.contains(id, *peer_ni))
                });
            // lustre: lnet_get_best_ni() reads `ni_tx_credits`, the sum over the partitions.
            let credits = ni.credits.as_ref().map_or(0, |queues| queues.available());
            let order = (
                ni.fatal_error,
                failed,
                blocked,
                unproven,
                Reverse(ni.health.value()),
                ni.priority,
                ni.numa_distance.seen_from(md_cpt).max(range),
                Reverse(credits),
                ni.seq.get(),
            );
            // Ties keep the first found, as Lustre's strict comparisons do.
            if best.is_none_or(|(_, current)| order < current) {
                best = Some((index, order));
            }
        }
        // NI ids are u16 (add_ni bounds the table).
        best.and_then(|best| u16::try_from(best.0).ok()).map(NiId)
    }

    /// `lnet_select_peer_ni`: the best of the peer's NIs on `net` for sending from `ni`.
    fn best_peer_ni(
        &self,
        ni: NiId,
        peer: PeerId,
        net: Net,
        avoid: &FailedPaths,
    ) -> Option<PeerNiId> {
        let local_nid = self.ni_nid(ni);
        let peer_net =
            self.node.peers.peer(peer)?.nets.iter().find(|peer_net| peer_net.net == net)?;
        let trouble = self.peer_in_trouble(peer);
        let mut best: Option<(PeerNiId, PeerNiOrder)> = None;
        for id in &peer_net.nis {
            let Some(lpni) = self.node.peers.ni(&self.peer_nis, *id).filter(|lpni| !lpni.vanished)
            else {
                continue;
            };
            // lustre: lnet_peer_is_pref_nid_locked(): on the peer NI's preferred list (UDSP
            // `--src --dst` rules, or the NI a non-multi-rail peer NI is pinned to).
            let preferred = local_nid.is_some_and(|nid| lpni.preferred.contains(nid));
            let order = (
                avoid.contains(ni, *id),
                lpni.watch.suspects(ni),
                trouble && !self.path_proven(*id, ni),
                Reverse(lpni.health.value()),
                lpni.priority,
                !preferred,
                Reverse(lpni.credits.value()),
                lpni.seq.get(),
            );
            if best.is_none_or(|(_, current)| order < current) {
                best = Some((*id, order));
            }
        }
        best.map(|best| best.0)
    }

    /// `lnet_find_existing_preferred_best_ni`: the local NI some peer NI on the destination's
    /// peer net prefers.
    fn existing_preferred(&self, destination: PeerNiId) -> Option<NiId> {
        let lpni = self.node.peers.ni(&self.peer_nis, destination)?;
        let net = lpni.nid.net();
        let peer = self.node.peers.peer_of(destination)?;
        let peer_net = peer.nets.iter().find(|peer_net| peer_net.net == net)?;
        let preferred = peer_net
            .nis
            .iter()
            .filter_map(|id| self.node.peers.ni(&self.peer_nis, *id))
            .find_map(|lpni| lpni.preferred.first())?;
        self.ni_for_nid(preferred)
    }
}

impl<N: NodeAccess> View<'_, Exclusive, N> {
    /// `lnet_select_pathway` from the case split on (the loopback shortcut, the peer NI and
    /// the discovery gate are the caller's): the local NI and the peer NI to use for the
    /// message `key` addressed to the peer NI `destination`.
    pub(super) fn select_path(
        &mut self,
        key: Key,
        destination: PeerNiId,
        source: Option<Nid>,
    ) -> Result<Path, SelectError> {
        let (Some(message), Some(dst)) =
            (self.msgs.get(key), self.node.peers.ni(&self.peer_nis, destination))
        else {
            return Err(SelectError::HostUnreachable);
        };
        let dst_nid = dst.nid;
        let peer = self.node.peers.owner(destination).ok_or(SelectError::HostUnreachable)?;
        let multi_rail = self.node.peers.peer_of(destination).is_some_and(|p| p.multi_rail());
        let local = match source {
            Some(source) => source.net() == dst_nid.net(),
            None => self.is_local_net(dst_nid.net()),
        };
        // lustre: a router on the final hop keeps the originator's choice of NI unless MR
        // forwarding is allowed (lnet_mr_forwarding_allowed()).
        let final_hop = message.routing && local;
        let keep_choice =
            final_hop && !self.mr_forwarding_allowed(destination, message.header.src_nid);
        let case = Case {
            source,
            local,
            // lustre: recovery pings are sent NMR to exactly the NID being recovered.
            multi_rail: multi_rail && !message.recovery && !keep_choice,
            response: matches!(message.header.body, Body::Ack { .. } | Body::Reply { .. }),
            reserved: matches!(
                message.header.body,
                Body::Put { ptl_index: LNET_RESERVED_PORTAL, .. }
                    | Body::Get { ptl_index: LNET_RESERVED_PORTAL, .. }
            ),
            routing: message.routing,
            hint: message.router_hint,
            avoid: if self.failover_enabled() {
                message.failed_paths
            } else {
                FailedPaths::default()
            },
            md_cpt: self.msgs.partition_of(key).unwrap_or(0),
        };
        match (case.source, case.local, case.multi_rail) {
            // lnet_handle_spec_local_{nmr,mr}_dst: exactly the source, exactly the
            // destination ("continuing the same RPC").
            (Some(source), true, multi_rail) => {
                let ni = self.ni_for_nid(source).ok_or(SelectError::NoSource)?;
                // Not in Lustre: with fast failover on, a pinned path the node knows to be
                // broken, or on which this message's last send failed, is left for the peer's
                // others (docs/decisions/0008).
                let (keeps_path, path_failed) = (keeps_path(message), message.path_failed);
                if multi_rail
                    && !keeps_path
                    && self.failover_enabled()
                    && (path_failed || !self.path_usable(ni, destination))
                {
                    self.count(|counters| counters.pins_released += 1);
                    let free = Case { source: None, response: false, ..case };
                    return self.select_any_multi_rail(destination, peer, &free);
                }
                if !multi_rail {
                    self.set_non_mr_preferred(destination, ni, case.response);
                }
                Ok(Path::from((ni, destination)))
            }
            // lnet_handle_spec_router_dst: exactly the source, through a gateway.
            (Some(source), false, multi_rail) => {
                let ni = self.ni_for_nid(source).ok_or(SelectError::NoSource)?;
                let path = self
                    .find_routed_path(destination, Some(ni), case.hint, false, case.md_cpt)
                    .ok_or(SelectError::HostUnreachable)?;
                if !multi_rail {
                    self.set_non_mr_preferred(path.destination, ni, case.response);
                }
                Ok(Path { ni, peer_ni: path.gateway, routed_to: Some(path.destination) })
            }
            // lnet_handle_any_router_nmr_dst: the NI the peer prefers, if any, and a gateway.
            (None, false, false) => {
                let preferred = self.existing_preferred(destination);
                let originating = !case.routing;
                let path = self
                    .find_routed_path(destination, preferred, case.hint, originating, case.md_cpt)
                    .ok_or(SelectError::HostUnreachable)?;
                self.set_non_mr_preferred(path.destination, path.ni, case.response);
                Ok(Path { ni: path.ni, peer_ni: path.gateway, routed_to: Some(path.destination) })
            }
            (None, true, false) => self.select_any_local_non_mr(destination, &case),
            (None, _, true) => self.select_any_multi_rail(destination, peer, &case),
        }
    }

    /// `lnet_handle_any_local_nmr_dst` / `lnet_select_preferred_best_ni`: the NI the peer
    /// prefers on this net (ignored for portal-0 traffic), else the best NI on it, which then
    /// becomes preferred.
    fn select_any_local_non_mr(
        &mut self,
        destination: PeerNiId,
        case: &Case,
    ) -> Result<Path, SelectError> {
        let net = self
            .node
            .peers
            .ni(&self.peer_nis, destination)
            .map(|p| p.nid.net())
            .ok_or(SelectError::HostUnreachable)?;
        // lustre: a router forwarding to its final hop may use any NI on that net.
        if case.routing {
            let ni = self.best_ni_on_net(net, case.md_cpt).ok_or(SelectError::HostUnreachable)?;
            return Ok(Path::from((ni, destination)));
        }
        let preferred = if case.reserved { None } else { self.existing_preferred(destination) };
        let ni = preferred
            .or_else(|| self.best_ni_on_net(net, case.md_cpt))
            .ok_or(SelectError::HostUnreachable)?;
        self.set_non_mr_preferred(destination, ni, case.response);
        Ok(Path::from((ni, destination)))
    }

    /// `lnet_handle_any_mr_dst`: a response goes to exactly its destination, from the best NI
    /// on that net or through a gateway; a fresh PUT or GET picks the best local net among
    /// the peer's, the best NI on it, and the best of the peer's NIs on it, and when the peer
    /// has no local net, the best of its routed nets and a gateway to it.
    fn select_any_multi_rail(
        &mut self,
        destination: PeerNiId,
        peer: PeerId,
        case: &Case,
    ) -> Result<Path, SelectError> {
        if case.response {
            if !case.local {
                let path = self
                    .find_routed_path(destination, None, case.hint, false, case.md_cpt)
                    .ok_or(SelectError::HostUnreachable)?;
                return Ok(Path {
                    ni: path.ni,
                    peer_ni: path.gateway,
                    routed_to: Some(path.destination),
                });
            }
            let net = self.node.peers.ni(&self.peer_nis, destination).map(|p| p.nid.net());
            let ni = net.and_then(|net| self.best_ni_on_net(net, case.md_cpt));
            return ni.map(|ni| Path::from((ni, destination))).ok_or(SelectError::HostUnreachable);
        }
        if let Some(net) = self.best_local_net(peer) {
            let ni = self
                .best_ni(net, Some(peer), &case.avoid, case.md_cpt)
                .ok_or(SelectError::HostUnreachable)?;
            let peer_ni = self
                .best_peer_ni(ni, peer, net, &case.avoid)
                .ok_or(SelectError::HostUnreachable)?;
            return Ok(Path::from((ni, peer_ni)));
        }
        let path = self
            .find_routed_path(destination, None, case.hint, !case.routing, case.md_cpt)
            .ok_or(SelectError::HostUnreachable)?;
        Ok(Path { ni: path.ni, peer_ni: path.gateway, routed_to: Some(path.destination) })
    }

    /// `lnet_set_non_mr_pref_nid`: a non-MR peer NI remembers the first NI a request used.
    fn set_non_mr_preferred(&mut self, destination: PeerNiId, ni: NiId, response: bool) {
        if response {
            return;
        }
        let multi_rail = self.node.peers.peer_of(destination).is_some_and(|peer| peer.multi_rail());
        let Some(nid) = self.ni_nid(ni) else {
            return;
        };
        if let Some(lpni) = self.node.peers.ni_mut(&mut self.peer_nis, destination) {
            if !multi_rail {
                lpni.preferred.set_from_traffic(nid);
            }
        }
    }
}
