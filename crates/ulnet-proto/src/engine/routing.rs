//! Routing flows: routes configured, route choice for messages to remote nets, forwarding
//! through router buffers, gateway liveness and the router checker.
//!
//! lustre: lnet/lnet/router.c (`lnet_add_route`, `lnet_del_route`, `lnet_is_route_alive`,
//! `lnet_router_discovery_ping_reply`, `lnet_router_discovery_complete`,
//! `lnet_check_routers`, `lnet_rtrpools_enable`, `lnet_rtrpools_disable`), lib-move.c
//! (`lnet_find_route_locked`, `lnet_compare_routes`, `lnet_compare_gw_lpnis`,
//! `lnet_handle_find_routed_path`, `lnet_post_routed_recv_locked`,
//! `lnet_return_rx_credits_locked`, `lnet_mr_forwarding_allowed`, `lnet_parse` for the
//! asymmetric-route check), docs/protocol/semantics.md §2.5, §3.4, §3.6, §5.
//!
//! Where ulnet differs (docs/decisions/0023-routing.md): a forwarded message does not make the
//! router discover its destination (the final hop is sent as Lustre sends it to a
//! non-multi-rail peer unless the destination is already known to be multi-rail); the router
//! credit queue is per peer NI rather than per peer; with the router checker off, a gateway is
//! queued for discovery on first use but the message does not wait for it.

use crate::engine::view::{Access, Exclusive, Flow, NodeAccess, View};
use std::cmp::Reverse;

use crate::addr::{Net, Nid};
use crate::engine::call::Work;
use crate::engine::credits::Acquire;
use crate::engine::event::EventStatus;
use crate::engine::health::{HealthStatus, MAX_HEALTH};
use crate::engine::msg::{Credit, Phase, RxId};
use crate::engine::ni::{NiId, Nis};
use crate::engine::node::{Engine, RecvAction, Resume};
use crate::engine::peer::{PeerId, PeerNiId, PeerState};
use crate::engine::routes::{
    BufferClass, BufferPoolStats, RouteConfig, RouteError, RouteInfo, Routes, RoutingState,
};
use crate::engine::slab::Key;
use crate::engine::tunables::Tunables;
use crate::time::Time;
use crate::wire::header::{Body, Header};
use crate::wire::ping::{LNET_NI_STATUS_DOWN, LNET_NI_STATUS_UP, LNET_RESERVED_PORTAL, PingInfo};

/// `LNET_PID_USERFLAG`: a userspace process, which routers deliver to whatever its peer's state.
const LNET_PID_USERFLAG: u32 = 0x8000_0000;

/// Why `set routing` was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RoutingError {
    /// `-EBUSY`: "Cannot enable routing while it is being stopped".
    #[error("cannot enable routing while it is being stopped")]
    Stopping,
}

/// A route chosen for a message: the gateway NI to send to, and the destination peer NI the
/// header names.
#[derive(Clone, Copy, Debug)]
pub(super) struct RoutedPath {
    pub(super) ni: NiId,
    pub(super) gateway: PeerNiId,
    pub(super) destination: PeerNiId,
}

impl Engine {
    // ------------------------------------------------------------ configuration

    /// `lnetctl route add`: a route to `config.net` through `config.gateway`, checked as
    /// `lnet_add_route` checks it. The gateway becomes a peer (created if new) and is checked
    /// at once by the router checker.
    pub fn route_add(&mut self, now: Time, config: RouteConfig) -> Result<(), RouteError> {
        self.flow().route_add(now, config)
    }

    /// `lnetctl route del`: the routes to `net` (every net when `None`) through the peer owning
    /// `gateway` (every gateway when `None`). `-ENOENT` when `net` has no route at all.
    pub fn route_del(
        &mut self,
        now: Time,
        net: Option<Net>,
        gateway: Option<Nid>,
    ) -> Result<usize, RouteError> {
        self.flow().route_del(now, net, gateway)
    }

    /// Every route, as `route show` lists them.
    pub fn routes(&self) -> Vec<RouteInfo> {
        self.with_look(|look| look.routes())
    }

    /// The routing state (`routing show`'s `enable` is [`RoutingState::enabled`]).
    pub fn routing_state(&self) -> RoutingState {
        self.with_look(|look| look.routing_state())
    }

    /// `lnetctl set routing 1|0` (`lnet_rtrpools_enable` / `_disable`): enabling sizes the
    /// buffer pools and forwards at once, but this node advertises itself as a router only
    /// after `alive_router_check_interval + router_ping_timeout`; disabling advertises at once
    /// and frees the buffers once they are all back. `immediate` is the module-parameter and
    /// configuration-file path (`forwarding=enabled`), which takes effect at once.
    pub fn set_routing(
        &mut self,
        now: Time,
        enable: bool,
        immediate: bool,
    ) -> Result<(), RoutingError> {
        self.flow().set_routing(now, enable, immediate)
    }

    /// `lnetctl set tiny_buffers|small_buffers|large_buffers`: the requested count (0: the
    /// default); a live pool grows at once and shrinks as buffers come back.
    pub fn set_router_buffers(&mut self, now: Time, class: BufferClass, count: u32) {
        self.flow().set_router_buffers(now, class, count)
    }

    /// The requested buffer counts (0: default), as `buffers:` exports them.
    pub fn router_buffer_counts(&self) -> crate::engine::routes::BufferCounts {
        self.with_look(|look| look.router_buffer_counts())
    }

    /// The pools `routing show` prints: tiny, small and large for each partition, in CPT
    /// order (`cpt[0]`, `cpt[1]`, ...).
    pub fn router_pools(&self) -> Vec<[BufferPoolStats; 3]> {
        self.with_look(|look| look.router_pools())
    }

    /// Whether the peer owning `nid` is a gateway of some route, and if so whether it is
    /// alive (`lp_alive`).
    pub fn gateway_alive(&self, nid: Nid) -> Option<bool> {
        self.with_look(|look| look.gateway_alive(nid))
    }

    /// Bytes held by router buffers now free for reuse (memory accounting).
    pub fn router_spare_bytes(&self) -> usize {
        self.with_look(|look| look.router_spare_bytes())
    }
}

impl<A: Access, N: NodeAccess> View<'_, A, N> {
    /// Whether an arriving message is an LNet ping from elsewhere that, on a router, keeps
    /// the receiving net alive ([`router_ping_received`](Flow::router_ping_received)).
    pub(super) fn counts_as_router_ping(&self, header: &Header) -> bool {
        self.node.routes.state.enabled()
            && matches!(header.body, Body::Get { ptl_index: LNET_RESERVED_PORTAL, .. })
            && self.ni_for_nid(header.src_nid).is_none()
    }

    /// See [`Engine::routes`].
    pub(crate) fn routes(&self) -> Vec<RouteInfo> {
        (0..)
            .map_while(|index| self.node.routes.get(index).map(|route| (index, route)))
            .map(|(index, route)| RouteInfo {
                net: route.net,
                gateway: route.gateway,
                hops: route.hops,
                priority: route.priority,
                alive: self.route_alive(index),
                multi_hop: !route.single_hop,
            })
            .collect()
    }

    /// See [`Engine::routing_state`].
    pub(crate) fn routing_state(&self) -> RoutingState {
        self.node.routes.state
    }

    /// See [`Engine::router_buffer_counts`].
    pub(crate) fn router_buffer_counts(&self) -> crate::engine::routes::BufferCounts {
        self.node.routes.counts
    }

    /// See [`Engine::router_pools`].
    pub(crate) fn router_pools(&self) -> Vec<[BufferPoolStats; 3]> {
        self.router_pools.stats()
    }

    /// See [`Engine::gateway_alive`].
    pub(crate) fn gateway_alive(&self, nid: Nid) -> Option<bool> {
        let peer = self.node.peers.peer_id(nid)?;
        self.peer_is_router(peer, None).then(|| self.node.peers.peer(peer).is_some_and(|p| p.alive))
    }

    // ------------------------------------------------------------ liveness

    /// Whether `peer` is the gateway of a route (`lp_rtr_refcount > 0`); `except` leaves one
    /// NID out (a route being added).
    pub(super) fn peer_is_router(&self, peer: PeerId, except: Option<Nid>) -> bool {
        self.node.routes.iter().any(|route| {
            Some(route.gateway) != except && self.node.peers.peer_id(route.gateway) == Some(peer)
        })
    }

    /// `lnet_is_peer_ni_alive`: the peer NI's cached status is UP.
    fn peer_ni_up(&self, id: PeerNiId) -> bool {
        self.node
            .peers
            .ni(&self.peer_nis, id)
            .is_some_and(|ni| ni.status == LNET_NI_STATUS_UP && !ni.vanished)
    }

    /// `lnet_is_gateway_net_alive`: some NI of `peer` on `net` is UP.
    fn gateway_net_alive(&self, peer: PeerId, net: Net) -> Option<bool> {
        let entry = self.node.peers.peer(peer)?;
        let peer_net = entry.nets.iter().find(|peer_net| peer_net.net == net)?;
        Some(peer_net.nis.iter().any(|id| self.peer_ni_up(*id)))
    }

    /// `lnet_is_route_alive`.
    pub(super) fn route_alive(&self, index: usize) -> bool {
        let Some(route) = self.node.routes.get(index) else {
            return false;
        };
        let Some(peer) = self.node.peers.peer_id(route.gateway) else {
            return false;
        };
        let Some(entry) = self.node.peers.peer(peer) else {
            return false;
        };
        if !entry.alive || !self.gateway_reachable(peer, route.gateway.net()) {
            return false;
        }
        if self.gateway_discovery_disabled(peer) {
            return route.cached_alive;
        }
        if self.gateway_net_alive(peer, route.gateway.net()) != Some(true) {
            return false;
        }
        let single_hop = route.hops == Some(1) || route.single_hop;
        if self.node.tunables.router.avoid_asym_router_failure
            && single_hop
            && self.gateway_net_alive(peer, route.net) != Some(true)
        {
            return false;
        }
        entry.state.contains(PeerState::ROUTER_ENABLED)
    }

    /// Not in Lustre: with fast failover on, a gateway is usable only while one of its NIs on
    /// `net` has a path from a usable local NI that is neither suspected of black-holing nor
    /// reported DOWN (docs/decisions/0023-routing.md): a router that stops answering is left
    /// within the suspicion timeout instead of the router checker's minute.
    fn gateway_reachable(&self, peer: PeerId, net: Net) -> bool {
        if !self.failover_enabled() {
            return true;
        }
        let Some(peer_net) =
            self.node.peers.peer(peer).and_then(|entry| entry.nets.iter().find(|n| n.net == net))
        else {
            return false;
        };
        let locals: Vec<NiId> = self
            .node
            .nis
            .iter()
            .enumerate()
            .filter(|(_, ni)| ni.nid.net() == net)
            .filter_map(|(index, _)| u16::try_from(index).ok().map(NiId))
            .collect();
        peer_net.nis.iter().any(|id| locals.iter().any(|ni| self.path_usable(*ni, *id)))
    }

    /// `lnet_is_discovery_disabled` toward a gateway.
    fn gateway_discovery_disabled(&self, peer: PeerId) -> bool {
        !self.node.tunables.discovery
            || self.node.peers.peer(peer).is_none_or(|entry| {
                !entry.multi_rail() || entry.state.contains(PeerState::NO_DISCOVERY)
            })
    }

    /// `lnet_router_checker_active`.
    fn router_checker_active(&self) -> bool {
        self.node.routes.state.forwards()
            || (!self.node.routes.is_empty()
                && !self.node.tunables.router.alive_router_check_interval.is_zero())
    }

    /// When the router checker next has work: a routing transition or a gateway net due for
    /// its ping (a router net going stale is [`router_staleness_deadline`]).
    fn router_checker_deadline(&self) -> Option<Time> {
        let transition = self.node.tunables.router.routing_transition();
        let state = match self.node.routes.state {
            RoutingState::Starting { since } => Some(since + transition),
            // Checked each second once the minimum has passed (the buffers may still be out).
            RoutingState::Stopping { since } => {
                Some((since + transition).max(self.call.now + std::time::Duration::from_secs(1)))
            }
            _ => None,
        };
        let interval = self.node.tunables.router.alive_router_check_interval;
        if self.node.routes.is_empty() || interval.is_zero() {
            return state;
        }
        let mut next: Option<Time> = state;
        for peer in self.gateway_peers() {
            let Some(entry) = self.node.peers.peer(peer) else { continue };
            if entry.state.contains(PeerState::RTR_DISCOVERY) {
                continue;
            }
            for peer_net in entry.nets.iter().filter(|net| self.is_local_net(net.net)) {
                next = Some(next.map_or(peer_net.next_ping, |at: Time| at.min(peer_net.next_ping)));
            }
        }
        next
    }

    /// The distinct gateway peers, in route order.
    fn gateway_peers(&self) -> Vec<PeerId> {
        let mut peers: Vec<PeerId> = Vec::new();
        for route in self.node.routes.iter() {
            if let Some(peer) = self.node.peers.peer_id(route.gateway) {
                if !peers.contains(&peer) {
                    peers.push(peer);
                }
            }
        }
        peers
    }

    /// The destination peer's net that a route reaches, by peer-net health, priority and
    /// sequence, and its best NI (`lnet_handle_find_routed_path`, SRC_ANY).
    fn best_routed_peer_net(&self, destination: PeerNiId) -> Option<(Net, PeerNiId)> {
        let peer = self.node.peers.owner(destination)?;
        let entry = self.node.peers.peer(peer)?;
        type NetOrder = (Reverse<u32>, u32, u64);
        let mut best: Option<(Net, NetOrder)> = None;
        for peer_net in &entry.nets {
            if !self.node.routes.reaches(peer_net.net) {
                continue;
            }
            let health = peer_net
                .nis
                .iter()
                .filter_map(|id| self.node.peers.ni(&self.peer_nis, *id))
                .map(|ni| ni.health.value())
                .max()
                .unwrap_or(0);
            let order = (Reverse(health), peer_net.priority, peer_net.seq.get());
            if best.is_none_or(|(_, current)| order < current) {
                best = Some((peer_net.net, order));
            }
        }
        let net = best?.0;
        let ni = self.best_gateway_ni(peer, Some(net))?;
        Some((net, ni))
    }

    /// `lnet_find_route_locked`: the best alive route to `net` and its gateway NI on the
    /// source net (any local net when `None`). A gateway `destination` prefers (UDSP
    /// `--dst --rte`, `policies.rs`) comes first (`lnet_compare_routes`).
    fn best_route(
        &self,
        net: Net,
        source_net: Option<Net>,
        destination: PeerNiId,
    ) -> Option<(usize, PeerNiId)> {
        type RouteOrder = (bool, u32, u32);
        let mut best: Option<(usize, PeerNiId, RouteOrder)> = None;
        for index in self.node.routes.to_net(net) {
            if !self.route_alive(index) {
                continue;
            }
            let Some(route) = self.node.routes.get(index) else { continue };
            let preferred = self.prefers_router(destination, route.gateway);
            let order = (!preferred, route.priority, route.hops.unwrap_or(1));
            if best.is_some_and(|(_, _, current)| order > current) {
                continue;
            }
            let Some(peer) = self.node.peers.peer_id(route.gateway) else { continue };
            let Some(gateway) = self.best_gateway_ni(peer, source_net) else { continue };
            if let Some((best_index, best_gateway, current)) = best {
                if order == current {
                    match self.compare_gateway_nis(gateway, best_gateway) {
                        std::cmp::Ordering::Less => continue,
                        std::cmp::Ordering::Equal => {
                            let seq = route.seq.get();
                            if self.node.routes.get(best_index).is_some_and(|b| seq > b.seq.get()) {
                                continue;
                            }
                        }
                        std::cmp::Ordering::Greater => {}
                    }
                }
            }
            best = Some((index, gateway, order));
        }
        best.map(|(index, gateway, _)| (index, gateway))
    }

    /// `lnet_compare_gw_lpnis`: Greater when `a` is the better gateway NI (health, then fewer
    /// bytes queued, then more credits).
    fn compare_gateway_nis(&self, a: PeerNiId, b: PeerNiId) -> std::cmp::Ordering {
        let key = |id: PeerNiId| {
            self.node
                .peers
                .ni(&self.peer_nis, id)
                .map(|ni| (ni.health.value(), Reverse(ni.queued_bytes), ni.credits.value()))
        };
        key(a).cmp(&key(b))
    }

    /// `lnet_find_best_lpni` without a local NI: the best of the gateway's NIs on `net`, or
    /// on any local net (health, priority, credits, sequence).
    fn best_gateway_ni(&self, peer: PeerId, net: Option<Net>) -> Option<PeerNiId> {
        let entry = self.node.peers.peer(peer)?;
        type GatewayNiOrder = (Reverse<u32>, u32, Reverse<i32>, u64);
        let mut best: Option<(PeerNiId, GatewayNiOrder)> = None;
        for peer_net in &entry.nets {
            let wanted = match net {
                Some(net) => peer_net.net == net,
                None => self.is_local_net(peer_net.net),
            };
            if !wanted {
                continue;
            }
            for id in &peer_net.nis {
                let Some(lpni) = self
                    .node
                    .peers
                    .ni(&self.peer_nis, *id)
                    .filter(|lpni| !lpni.vanished && !lpni.deleted)
                else {
                    continue;
                };
                let order = (
                    Reverse(lpni.health.value()),
                    lpni.priority,
                    Reverse(lpni.credits.value()),
                    lpni.seq.get(),
                );
                if best.is_none_or(|(_, current)| order < current) {
                    best = Some((*id, order));
                }
            }
        }
        best.map(|best| best.0)
    }

    /// `lnet_mr_forwarding_allowed`: on the final hop a router may choose among the
    /// destination's NIs only when the originator is multi-rail and the NI it chose is down
    /// or unhealthy.
    pub(super) fn mr_forwarding_allowed(&self, destination: PeerNiId, source: Nid) -> bool {
        let originator_mr = self
            .node
            .peers
            .find(source)
            .and_then(|id| self.node.peers.peer_of(id))
            .is_some_and(|peer| peer.multi_rail());
        if !originator_mr {
            return false;
        }
        !self.peer_ni_up(destination)
            || self
                .node
                .peers
                .ni(&self.peer_nis, destination)
                .is_some_and(|ni| ni.health.value() < MAX_HEALTH)
    }

    /// `lnet_peer_buffer_credits`: the net's `peer_buffer_credits`, else its `peer_credits`.
    fn router_credits_for(&self, ni: NiId) -> u32 {
        self.node.nis.get(ni).map_or(0, |ni| {
            let tunables = ni.tunables;
            if tunables.peer_buffer_credits > 0 {
                tunables.peer_buffer_credits
            } else {
                tunables.peer_credits
            }
        })
    }

    /// The router side of `lnet_check_message_drop`: a routed message to a peer NI that is
    /// not UP is dropped when the net has a peer timeout (the router's peer aliveness).
    pub(super) fn routed_peer_dead(&self, key: Key) -> bool {
        let Some(message) = self.msgs.get(key).filter(|m| m.routing) else {
            return false;
        };
        if message.header.dest_pid & LNET_PID_USERFLAG != 0 {
            return false;
        }
        let timeout = self.node.nis.get(message.ni).map_or(0, |ni| ni.tunables.peer_timeout);
        timeout > 0 && message.peer_ni.is_some_and(|id| !self.peer_ni_up(id))
    }

    /// See [`Engine::router_spare_bytes`].
    pub(crate) fn router_spare_bytes(&self) -> usize {
        self.router_pools.spare_bytes()
    }

    /// Checks the router pools and credits against the messages holding them, and that the
    /// router checker's cached deadline is not later than its work (earlier is a harmless
    /// wake-up).
    pub(super) fn check_routing(&self) -> Result<(), String> {
        let computed = self.router_checker_deadline();
        let cached = self.node.routes.next_check;
        let late = match (cached, computed) {
            (None, Some(_)) => true,
            (Some(cached), Some(computed)) => cached > computed,
            _ => false,
        };
        if late {
            return Err(format!("router checker deadline {cached:?} later than {computed:?}"));
        }
        for cpt in 0..self.partitions.count() {
            for class in BufferClass::ALL {
                let holders = self
                    .msgs
                    .iter()
                    .filter(|(_, m)| {
                        m.buffer_credit == Credit::Held
                            && m.rx_cpt == cpt
                            && BufferClass::for_length(m.header.payload_length) == Some(class)
                    })
                    .count();
                if let Some(pool) = self.router_pools.pool(cpt, class) {
                    pool.check(holders).map_err(|error| format!("CPT {cpt}: {error}"))?;
                }
            }
        }
        for (id, lpni) in self.node.peers.nis(&self.peer_nis) {
            let Some(pool) = &lpni.router_credits else { continue };
            let holders = self
                .msgs
                .iter()
                .filter(|(_, m)| {
                    m.router_credit == Credit::Held
                        && m.rx_peer.or(m.peer_ni.filter(|_| !m.tx)) == Some(id)
                })
                .count();
            pool.check(holders)
                .map_err(|error| format!("router credits of {}: {error}", lpni.nid))?;
        }
        Ok(())
    }
}

impl<N: NodeAccess> View<'_, Exclusive, N> {
    // ------------------------------------------------------------ configuration

    // ------------------------------------------------------------ route choice

    /// `lnet_handle_find_routed_path`: the gateway (and the local NI, when not fixed) for a
    /// message to `destination` on a remote net. `originating` is SRC_ANY from this node
    /// (neither forwarding nor source-specified, no NI fixed): the destination's routed net
    /// is chosen among the peer's, and its best NI becomes the final destination.
    pub(super) fn find_routed_path(
        &mut self,
        destination: PeerNiId,
        local: Option<NiId>,
        hint: Option<PeerNiId>,
        originating: bool,
        md_cpt: u32,
    ) -> Option<RoutedPath> {
        // A response goes back through the router its request came through, while that is
        // still a gateway.
        if let Some(hint) = hint {
            let gateway = Some(hint).filter(|id| {
                let deleted = self.node.peers.ni(&self.peer_nis, *id).is_none_or(|ni| ni.deleted);
                !deleted
                    && self
                        .node
                        .peers
                        .owner(*id)
                        .is_some_and(|peer| self.peer_is_router(peer, None))
            });
            if let Some(gateway) = gateway {
                let ni = local.or_else(|| {
                    let net = self.node.peers.ni(&self.peer_nis, gateway)?.nid.net();
                    self.best_ni_on_net(net, md_cpt)
                })?;
                return Some(RoutedPath { ni, gateway, destination });
            }
        }
        let mut destination = destination;
        let remote_net = if originating && local.is_none() {
            let (net, best) = self.best_routed_peer_net(destination)?;
            destination = best;
            net
        } else {
            self.node.peers.ni(&self.peer_nis, destination)?.nid.net()
        };
        let source_net = local.and_then(|ni| self.ni_nid(ni)).map(|nid| nid.net());
        let (route, gateway) = self.best_route(remote_net, source_net, destination)?;
        let ni = match local {
            Some(ni) => ni,
            None => {
                let net = self.node.peers.ni(&self.peer_nis, gateway)?.nid.net();
                self.best_ni_on_net(net, md_cpt)?
            }
        };
        // The round robin among routes that tie.
        let highest = self
            .node
            .routes
            .to_net(remote_net)
            .filter(|index| self.route_alive(*index))
            .filter_map(|index| self.node.routes.get(index).map(|route| route.seq.get()))
            .max()
            .unwrap_or(0);
        if let Some(route) = self.node.routes.get(route) {
            route.seq.set(highest + 1);
        }
        Some(RoutedPath { ni, gateway, destination })
    }

    // ------------------------------------------------------------ forwarding

    /// `lnet_post_routed_recv_locked`: a message to forward takes a router credit of the peer
    /// NI it came from, then a buffer of its size class, then is received into the buffer.
    /// Either may make it wait, its payload unread (back-pressure on the connection).
    pub(super) fn post_routed_recv(&mut self, key: Key) -> RecvAction {
        let Some(message) = self.msgs.get(key) else {
            return RecvAction::Discard { length: 0 };
        };
        let length = message.header.payload_length;
        let Some(class) = BufferClass::for_length(length) else {
            self.drop_rx(key);
            return RecvAction::Discard { length };
        };
        if message.router_credit == Credit::None {
            let rx_peer = message.peer_ni;
            let ni = message.ni;
            let credits = self.router_credits_for(ni);
            let Some(peer) = rx_peer.and_then(|id| self.node.peers.ni_mut(&mut self.peer_nis, id))
            else {
                self.drop_rx(key);
                return RecvAction::Discard { length };
            };
            let pool = peer
                .router_credits
                .get_or_insert_with(|| crate::engine::credits::CreditPool::new(credits));
            let granted = pool.acquire(key) == Acquire::Granted;
            let Some(message) = self.msgs.get_mut(key) else {
                return RecvAction::Discard { length };
            };
            if !granted {
                message.router_credit = Credit::Waiting;
                message.phase = Phase::RouterWait;
                return RecvAction::Delay { rx: RxId(key) };
            }
            message.router_credit = Credit::Held;
        }
        let Some(message) = self.msgs.get(key) else {
            return RecvAction::Discard { length };
        };
        if message.buffer_credit == Credit::None {
            // lustre: lnet_msg2bufpool() picks the pools of `msg_rx_cpt`, the partition of
            // the previous hop on the receiving NI (lnet_parse(): lnet_nid2cpt(from_nid, ni)).
            let from = message
                .peer_ni
                .and_then(|id| self.node.peers.ni(&self.peer_nis, id))
                .map_or(message.header.src_nid, |peer| peer.nid);
            let cpt = self.cpt_of_nid(&from, message.ni);
            let Some(pool) = self.router_pools.pool_mut(cpt, class) else {
                self.drop_rx(key);
                return RecvAction::Discard { length };
            };
            let granted = pool.acquire(key);
            let Some(message) = self.msgs.get_mut(key) else {
                return RecvAction::Discard { length };
            };
            message.rx_cpt = cpt;
            if !granted {
                message.buffer_credit = Credit::Waiting;
                message.phase = Phase::RouterWait;
                return RecvAction::Delay { rx: RxId(key) };
            }
            message.buffer_credit = Credit::Held;
        }
        let Some(cpt) = self.msgs.get(key).map(|m| m.rx_cpt) else {
            return RecvAction::Discard { length };
        };
        let memory = match self.router_pools.pool_mut(cpt, class) {
            Some(pool) if class != BufferClass::Tiny => pool.take_memory(),
            _ => Vec::new(),
        };
        let Some(message) = self.msgs.get_mut(key) else {
            return RecvAction::Discard { length };
        };
        message.router_buffer = Some(crate::engine::memory::Memory::new(memory));
        message.length = length;
        message.phase = Phase::Receiving;
        RecvAction::Deliver { rx: RxId(key), length, discard: 0 }
    }

    /// A routed receive that waited now has its credit or buffer: try again, and tell the
    /// driver when it may read the payload.
    pub(super) fn resume_routed_recv(&mut self, key: Key) {
        if !self.msgs.get(key).is_some_and(|m| m.phase == Phase::RouterWait) {
            return;
        }
        match self.post_routed_recv(key) {
            RecvAction::Delay { .. } => {}
            action => self.queue_resume(Resume { rx: RxId(key), action }),
        }
    }

    /// Buffers handed to waiters (a pool grew, or a buffer came back): they proceed.
    fn buffers_granted(&mut self, waiters: Vec<Key>) {
        for key in waiters {
            if let Some(message) = self.msgs.get_mut(key) {
                message.buffer_credit = Credit::Held;
                self.call.work.push_back(Work::RoutedRecv(key));
            }
        }
    }

    /// A waiter on a pool that routing being switched off freed: dropped unread
    /// (`lnet_drop_routed_msgs_locked`).
    fn drop_blocked_route(&mut self, key: Key) {
        let Some(message) = self.msgs.get_mut(key) else { return };
        message.buffer_credit = Credit::None;
        let length = message.header.payload_length;
        self.return_router_credits(key);
        self.queue_resume(Resume { rx: RxId(key), action: RecvAction::Discard { length } });
        self.discard_message(key);
    }

    /// The payload of a routed message is in (or failed): it is sent on toward its
    /// destination, the same message now a send (`lnet_complete_msg_locked` calling
    /// `lnet_send` for a routed message not yet sent).
    pub(super) fn forward_received(&mut self, key: Key, health: HealthStatus) {
        self.rx_health(key, health);
        if !health.is_ok() {
            self.return_router_credits(key);
            self.discard_message(key);
            return;
        }
        let Some(message) = self.msgs.get(key) else { return };
        let (ni, peer_ni, msg_type, payload) =
            (message.ni, message.peer_ni, message.header.body.msg_type(), message.length);
        if let Some(local) = self.ni_shares.traffic_mut(ni, self.call.cpt) {
            local.stats.received(msg_type, payload);
        }
        if let Some(peer) = peer_ni.and_then(|id| self.node.peers.ni_mut(&mut self.peer_nis, id)) {
            peer.stats.received(msg_type, payload);
        }
        let Some(message) = self.msgs.get_mut(key) else { return };
        message.rx_peer = peer_ni;
        message.peer_ni = None;
        message.tx = true;
        message.phase = Phase::ResendQueued;
        self.send(key, None);
    }

    /// `lnet_return_rx_credits_locked`: the router buffer goes back to its pool (or away, when
    /// the pool shrank or routing stopped) and the router credit to the peer NI it came from;
    /// the waiters they unblock proceed.
    pub(super) fn return_router_credits(&mut self, key: Key) {
        let Some(message) = self.msgs.get_mut(key) else { return };
        // A copy only if a write still holds the buffer (a send completed before its write).
        let buffer = message.router_buffer.take().and_then(|memory| memory.into_segments().next());
        let buffer_credit = std::mem::replace(&mut message.buffer_credit, Credit::None);
        let router_credit = std::mem::replace(&mut message.router_credit, Credit::None);
        let rx_peer = message.rx_peer.or(message.peer_ni.filter(|_| !message.tx));
        let (length, cpt) = (message.header.payload_length, message.rx_cpt);
        let forwarding = self.node.routes.state.forwards();
        let pool = BufferClass::for_length(length)
            .and_then(|class| self.router_pools.pool_mut(cpt, class));
        if let Some(pool) = pool {
            match buffer_credit {
                Credit::Held => {
                    if let Some(waiter) = pool.release(buffer, forwarding) {
                        self.buffers_granted(vec![waiter]);
                    }
                }
                Credit::Waiting => {
                    pool.remove_waiter(key);
                }
                Credit::None => {}
            }
        }
        let Some(peer) = rx_peer.and_then(|id| self.node.peers.ni_mut(&mut self.peer_nis, id))
        else {
            return;
        };
        let Some(pool) = peer.router_credits.as_mut() else { return };
        let next = match router_credit {
            Credit::Held => pool.release(),
            Credit::Waiting => {
                pool.remove(key);
                None
            }
            Credit::None => None,
        };
        if let Some(waiter) = next {
            if let Some(message) = self.msgs.get_mut(waiter) {
                message.router_credit = Credit::Held;
                self.call.work.push_back(Work::RoutedRecv(waiter));
            }
        }
    }

    /// A forwarded message's send is over: the route counters, then the receive side's
    /// credits back (`lnet_msg_decommit_tx` then `_rx` for a routed message).
    pub(super) fn complete_forward(&mut self, key: Key, status: EventStatus) {
        self.return_credits(key);
        if let Some(message) = self.msgs.get(key) {
            if status.is_ok() {
                let (ni, peer_ni, msg_type, length) =
                    (message.ni, message.peer_ni, message.header.body.msg_type(), message.length);
                self.count(|counters| counters.route_count += 1);
                self.count(|counters| counters.route_length += u64::from(length));
                if let Some(local) = self.ni_shares.traffic_mut(ni, self.call.cpt) {
                    local.stats.sent(msg_type, length);
                }
                if let Some(peer) =
                    peer_ni.and_then(|id| self.node.peers.ni_mut(&mut self.peer_nis, id))
                {
                    peer.stats.sent(msg_type, length);
                }
            }
        }
        self.return_router_credits(key);
        self.discard_message(key);
    }

    /// The part of `lnet_parse` for a message that came through gateway `from` (its source is
    /// on another net): a dead gateway is alive again, and with `lnet_drop_asym_route` a
    /// message for us that came through a gateway we would not route back through is
    /// dropped (true).
    pub(super) fn check_asymmetric_route(
        &mut self,
        from: PeerNiId,
        source: Nid,
        for_me: bool,
    ) -> bool {
        let Some(gateway_nid) = self.node.peers.ni(&self.peer_nis, from).map(|ni| ni.nid) else {
            return false;
        };
        if source.net() == gateway_nid.net() {
            return false;
        }
        let Some(peer) = self.node.peers.owner(from) else { return false };
        let alive = self.node.peers.peer(peer).is_some_and(|entry| entry.alive);
        let drop_asym = self.node.tunables.router.drop_asym_route && for_me;
        if !drop_asym && alive {
            return false;
        }
        let discovery_off = self.gateway_discovery_disabled(peer);
        let source_net = source.net();
        let peers = &self.node.peers;
        let found = self
            .node
            .routes
            .iter()
            .any(|route| route.net == source_net && peers.peer_id(route.gateway) == Some(peer));
        if drop_asym && !found {
            return true;
        }
        if !alive {
            self.on_node("a gateway alive again", |flow| {
                flow.gateway_alive_again(peer, source_net, discovery_off);
            });
        }
        false
    }
}

impl Flow<'_> {
    /// [`View::check_asymmetric_route`]'s change: a dead gateway a message came through is
    /// alive again, its routes from `source_net` too when discovery is off for it.
    fn gateway_alive_again(&mut self, peer: PeerId, source_net: Net, discovery_off: bool) {
        let peers = &self.node.peers;
        for route in self.node.routes.iter_mut() {
            if route.net == source_net
                && peers.peer_id(route.gateway) == Some(peer)
                && discovery_off
            {
                route.cached_alive = true;
            }
        }
        let ids: Vec<PeerNiId> = self
            .node
            .peers
            .peer(peer)
            .and_then(|entry| entry.nets.iter().find(|net| net.net == source_net))
            .map(|net| net.nis.clone())
            .unwrap_or_default();
        if let Some(entry) = self.node.peers.peer_mut(peer) {
            entry.alive = true;
        }
        for id in ids {
            if let Some(ni) = self.node.peers.ni_mut(&mut self.peer_nis, id) {
                ni.status = LNET_NI_STATUS_UP;
            }
        }
    }

    /// See [`Engine::route_add`].
    pub(crate) fn route_add(&mut self, now: Time, config: RouteConfig) -> Result<(), RouteError> {
        self.advance(now);
        Routes::validate(&config)?;
        if self.is_local_net(config.net) {
            return Err(RouteError::Exists);
        }
        if !self.is_local_net(config.gateway.net()) {
            return Err(RouteError::GatewayUnreachable);
        }
        let credits = self.node.nis.peer_credits_for(config.gateway);
        let gateway =
            self.peer_ni_or_create(config.gateway, credits).map_err(|_| RouteError::TableFull)?;
        let Some(peer) = self.node.peers.owner(gateway) else {
            return Err(RouteError::TableFull);
        };
        let start_down = self.node.tunables.router.check_routers_before_use;
        let peers = &self.node.peers;
        self.node.routes.insert(&config, !start_down, |nid| peers.peer_id(nid) == Some(peer))?;
        if start_down && !self.peer_is_router(peer, Some(config.gateway)) {
            self.mark_gateway_down(peer);
        }
        // lustre: lnet_add_route_to_rnet() forces a router check on every gateway net.
        let now = self.call.now;
        if let Some(entry) = self.node.peers.peer_mut(peer) {
            for net in &mut entry.nets {
                net.next_ping = now;
            }
        }
        self.run_router_checker();
        self.run_work();
        Ok(())
    }

    /// See [`Engine::route_del`].
    pub(crate) fn route_del(
        &mut self,
        now: Time,
        net: Option<Net>,
        gateway: Option<Nid>,
    ) -> Result<usize, RouteError> {
        self.advance(now);
        if let Some(net) = net {
            if !self.node.routes.reaches(net) {
                return Err(RouteError::NotFound);
            }
        }
        let peer = gateway.and_then(|nid| self.node.peers.peer_id(nid));
        let peers = &self.node.peers;
        let removed = self.node.routes.remove(net, |nid| match (gateway, peer) {
            (None, _) => true,
            (Some(_), Some(peer)) => peers.peer_id(nid) == Some(peer),
            (Some(gateway), None) => nid == gateway,
        });
        self.refresh_router_deadline();
        Ok(removed)
    }

    /// See [`Engine::set_routing`].
    pub(crate) fn set_routing(
        &mut self,
        now: Time,
        enable: bool,
        immediate: bool,
    ) -> Result<(), RoutingError> {
        self.advance(now);
        let state = self.node.routes.state;
        let next = match (enable, state) {
            (true, RoutingState::Enabled | RoutingState::Starting { .. }) => return Ok(()),
            (true, RoutingState::Stopping { .. }) => return Err(RoutingError::Stopping),
            (true, RoutingState::Disabled) if immediate => RoutingState::Enabled,
            (true, RoutingState::Disabled) => RoutingState::Starting { since: self.call.now },
            (false, RoutingState::Disabled | RoutingState::Stopping { .. }) => return Ok(()),
            (false, _) if immediate => RoutingState::Disabled,
            (false, _) => RoutingState::Stopping { since: self.call.now },
        };
        self.change_routing(next);
        self.refresh_router_deadline();
        self.run_work();
        Ok(())
    }

    /// See [`Engine::set_router_buffers`].
    pub(crate) fn set_router_buffers(&mut self, now: Time, class: BufferClass, count: u32) {
        self.advance(now);
        // lustre: lnet_rtrpools_adjust_helper(): the pools follow when routing is on.
        self.node.routes.counts.set(class, count);
        let granted = if self.node.routes.state.forwards() {
            let share = self.node.routes.counts.per_partition(class, self.partitions.count());
            self.router_pools.resize(class, share)
        } else {
            Vec::new()
        };
        self.buffers_granted(granted);
        self.run_work();
    }

    fn change_routing(&mut self, next: RoutingState) {
        let was = self.node.routes.state;
        self.node.routes.state = next;
        if next.enabled() && !was.enabled() {
            self.node.routes.enabled_at = self.call.now;
        }
        let waiters = match next {
            RoutingState::Disabled => self.router_pools.free(),
            _ if !was.forwards() => {
                self.router_pools.size(&self.node.routes.counts, self.partitions.count())
            }
            _ => Vec::new(),
        };
        if next == RoutingState::Disabled {
            for key in waiters {
                self.drop_blocked_route(key);
            }
        } else {
            self.buffers_granted(waiters);
        }
        // The ping buffer says RTE_DISABLED unless routing is Enabled.
        if was.enabled() != next.enabled() {
            self.update_ping_buffer_in_place();
            self.push_update_to_peers();
        }
    }

    /// `check_routers_before_use`: a new gateway is dead and its NIs DOWN until it answers.
    fn mark_gateway_down(&mut self, peer: PeerId) {
        let ids: Vec<PeerNiId> =
            self.node.peers.peer(peer).map(|entry| entry.ni_ids().collect()).unwrap_or_default();
        if let Some(entry) = self.node.peers.peer_mut(peer) {
            entry.alive = false;
        }
        for id in ids {
            if let Some(ni) = self.node.peers.ni_mut(&mut self.peer_nis, id) {
                ni.status = LNET_NI_STATUS_DOWN;
            }
        }
    }

    /// `lnet_router_discovery_ping_reply`: a gateway's ping buffer says which of its routes
    /// are alive (its local net reachable and, single-hop under `avoid_asym_router_failure`,
    /// an NI UP on the remote net) and which are really multi-hop.
    pub(super) fn router_ping_reply(&mut self, peer: PeerId, info: &PingInfo) {
        if !self.peer_is_router(peer, None) {
            return;
        }
        let indexes: Vec<usize> = (0..)
            .map_while(|index| self.node.routes.get(index).map(|route| (index, route)))
            .filter(|(_, route)| self.node.peers.peer_id(route.gateway) == Some(peer))
            .map(|(index, _)| index)
            .collect();
        let disabled = info.features & crate::wire::ping::LNET_PING_FEAT_RTE_DISABLED != 0;
        let avoid_asym = self.node.tunables.router.avoid_asym_router_failure;
        for index in indexes {
            let Some((net, local_net, hops)) = self
                .node
                .routes
                .get(index)
                .map(|route| (route.net, route.gateway.net(), route.hops))
            else {
                continue;
            };
            let reachable = !disabled && self.gateway_net_alive(peer, local_net) == Some(true);
            let listed: Vec<u32> = info
                .entries()
                .filter(|entry| entry.nid.net() == net)
                .map(|entry| entry.status)
                .collect();
            let single_hop = !listed.is_empty();
            let net_up = listed.contains(&LNET_NI_STATUS_UP);
            let Some(route) = self.node.routes.get_mut(index) else { continue };
            if !reachable {
                route.cached_alive = false;
                continue;
            }
            route.single_hop = single_hop;
            route.cached_alive =
                if avoid_asym && (hops == Some(1) || single_hop) { net_up } else { true };
        }
    }

    /// `lnet_router_discovery_complete`: a gateway whose discovery failed is dead, its NIs
    /// DOWN and its routes with them; one that answered is alive.
    pub(super) fn router_discovery_complete(&mut self, peer: PeerId, error: Option<EventStatus>) {
        if !self.peer_is_router(peer, None) {
            return;
        }
        if let Some(entry) = self.node.peers.peer_mut(peer) {
            entry.state.remove(PeerState::RTR_DISCOVERY);
            entry.state.insert(PeerState::RTR_DISCOVERED);
            entry.alive = error.is_none();
        }
        self.refresh_router_deadline();
        if error.is_none() {
            return;
        }
        self.mark_gateway_down(peer);
        if let Some(entry) = self.node.peers.peer_mut(peer) {
            entry.alive = false;
        }
        let peers = &self.node.peers;
        for route in self.node.routes.iter_mut() {
            if peers.peer_id(route.gateway) == Some(peer) {
                route.cached_alive = false;
            }
        }
    }

    /// Recomputes [`Routes::next_check`](crate::engine::routes::Routes).
    pub(super) fn refresh_router_deadline(&mut self) {
        self.node.routes.next_check = self.router_checker_deadline();
    }

    /// One pass of `lnet_check_routers`: routing transitions that are due, then each gateway
    /// not being checked has its next local net that is due pinged (a forced discovery).
    pub(super) fn run_router_checker(&mut self) {
        self.router_check_pass();
        self.refresh_router_deadline();
    }

    fn router_check_pass(&mut self) {
        let transition = self.node.tunables.router.routing_transition();
        match self.node.routes.state {
            RoutingState::Starting { since } if self.call.now >= since + transition => {
                self.change_routing(RoutingState::Enabled);
            }
            RoutingState::Stopping { since }
                if (self.call.now >= since + transition && self.router_pools.idle())
                    || self.call.now >= since + transition * 3 =>
            {
                self.change_routing(RoutingState::Disabled);
            }
            _ => {}
        }
        self.update_router_ni_status();
        if !self.router_checker_active() {
            return;
        }
        let interval = self.node.tunables.router.alive_router_check_interval;
        if interval.is_zero() {
            return;
        }
        let now = self.call.now;
        for peer in self.gateway_peers() {
            let Some(entry) = self.node.peers.peer(peer) else { continue };
            if entry.state.contains(PeerState::RTR_DISCOVERY) {
                continue;
            }
            // The next local peer net after the last one pinged, round robin, that is due.
            let count = entry.nets.len();
            let start = entry
                .router_net
                .and_then(|net| entry.nets.iter().position(|peer_net| peer_net.net == net))
                .map_or(0, |at| at + 1);
            let due = (0..count).map(|step| (start + step) % count).find(|&at| {
                entry.nets.get(at).is_some_and(|peer_net| {
                    self.is_local_net(peer_net.net) && now >= peer_net.next_ping
                })
            });
            let Some(at) = due else { continue };
            let Some(entry) = self.node.peers.peer_mut(peer) else { continue };
            entry.state.remove(PeerState::NIDS_UPTODATE);
            entry
                .state
                .insert(PeerState::FORCE_PING | PeerState::FORCE_PUSH | PeerState::RTR_DISCOVERY);
            if let Some(peer_net) = entry.nets.get_mut(at) {
                entry.router_net = Some(peer_net.net);
                peer_net.next_ping = now + interval;
            }
            self.start_discovery(peer);
        }
    }

    /// `lnet_parse`'s router half of an incoming LNet ping (a GET on the reserved portal from
    /// another node): the net it came in on is alive, and its NIs UP again if staleness had
    /// put them DOWN.
    pub(super) fn router_ping_received(&mut self, ni: NiId) {
        if !self.node.routes.state.enabled() {
            return;
        }
        let Some(net) = self.ni_nid(ni).map(|nid| nid.net()) else { return };
        self.node.nis.touch_net(net, self.call.now);
        if self.set_net_status(net, LNET_NI_STATUS_UP) {
            self.install_ping_target();
            self.force_push_to_peers();
        }
        self.refresh_router_deadline();
    }

    /// `lnet_update_ni_status_locked`: on a router, the NIs of a net that received no LNet ping
    /// for `router_ping_timeout + alive_router_check_interval` are reported DOWN (its clients
    /// would otherwise route into a net nobody can reach through it).
    fn update_router_ni_status(&mut self) {
        if !self.node.routes.state.enabled() {
            return;
        }
        let window = self.node.tunables.router.routing_transition();
        let since = self.node.routes.enabled_at;
        let stale: Vec<Net> = self
            .node
            .nis
            .nets()
            .iter()
            .filter(|local| {
                local.net != Net::LO && self.call.now >= local.last_alive.max(since) + window
            })
            .map(|local| local.net)
            .collect();
        let mut changed = false;
        for net in stale {
            changed |= self.set_net_status(net, LNET_NI_STATUS_DOWN);
        }
        if changed {
            self.install_ping_target();
            self.force_push_to_peers();
        }
    }

    /// Sets the status word of every usable NI on `net`; true when one changed.
    fn set_net_status(&mut self, net: Net, status: u32) -> bool {
        let mut changed = false;
        for ni in self.node.nis.iter_mut().filter(|ni| ni.usable() && ni.nid.net() == net) {
            if ni.status != status {
                ni.status = status;
                changed = true;
            }
        }
        changed
    }
}

/// When a router net next goes stale (its NIs still UP). Computed on each call (no
/// allocation), since other flows change NI status.
pub(super) fn router_staleness_deadline(
    routes: &Routes,
    tunables: &Tunables,
    nis: &Nis,
) -> Option<Time> {
    if !routes.state.enabled() {
        return None;
    }
    let window = tunables.router.routing_transition();
    let since = routes.enabled_at;
    nis.nets()
        .iter()
        .filter(|local| local.net != Net::LO)
        .filter(|local| {
            nis.iter().any(|ni| {
                ni.usable() && ni.nid.net() == local.net && ni.status == LNET_NI_STATUS_UP
            })
        })
        .map(|local| local.last_alive.max(since) + window)
        .min()
}
