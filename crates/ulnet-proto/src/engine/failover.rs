//! Fast failover: black holes noticed in seconds instead of the kernel's 49-150 s. This file
//! is the flow (suspecting paths, moving and copying messages); its state is in `watch.rs`.
//!
//! Not in Lustre; the design and the delivery guarantee are in
//! docs/decisions/0008-fast-failover.md. In short, per peer NI two clocks run while work is
//! outstanding:
//!
//! * LND progress: transmits handed to the driver and not completed; any completion to that
//!   peer NI is progress.
//! * Peer progress: tracked requests (PUT with ACK, GET) sent and awaiting their response
//!   through that peer NI; any message received from that peer NI is progress.
//!
//! When either clock passes the peer NI's suspicion timeout (the tunable
//! `blackhole_timeout`, or a multiple of the round trip measured to that peer NI if longer,
//! never more than the LND timeout), the peer NI is suspect: it takes a remote failure (so
//! selection prefers its siblings), a recovery ping probes it at once (with a probe timeout
//! instead of the transaction timeout), and its messages move to other paths:
//!
//! * messages waiting for credits on it (never handed to the driver) are selected again;
//! * PUTs with ACK and GETs the driver still holds are copied: the driver keeps the original
//!   (with a private copy of its payload, so the MD is free), the copy carries the SEND event;
//! * PUTs with ACK and GETs that left but got no response are sent again from a saved copy.
//!
//! Copies of PUTs carry [`RESEND_COOKIE_FLAG`](crate::engine::RESEND_COOKIE_FLAG) in their ACK wire
//! handle's interface cookie so a ulnet target recognises them (`dedupe.rs`) and never delivers a
//! PUT twice; a copy of a GET may be served twice if the target MD still matches (a read; the
//! initiator still sees one REPLY). Copies are made only for MDs that accept exactly one more
//! operation (so a late second response is stale) and only within [`COPY_WINDOW`] of the original's
//! departure (targets remember PUTs for [`DEDUPE_WINDOW`](crate::engine::DEDUPE_WINDOW)).

use crate::engine::view::{Access, Exclusive, Flow, NodeAccess, View};
use std::time::Duration;

use crate::engine::call::Work;
use crate::engine::dedupe::RESEND_COOKIE_FLAG;
use crate::engine::event::EventKind;
use crate::engine::health::HealthStatus;
use crate::engine::md::Threshold;
use crate::engine::memory::Memory;
use crate::engine::msg::{Credit, Message, Phase};
use crate::engine::ni::NiId;
use crate::engine::node::Engine;
use crate::engine::outputs::PathReset;
use crate::engine::peer::PeerNiId;
use crate::engine::slab::Key;
use crate::time::Time;
use crate::wire::header::Body;
use crate::wire::ping::{LNET_NI_STATUS_DOWN, LNET_RESERVED_PORTAL};

/// Copies are only sent this soon after the original left, so the target still remembers it.
pub const COPY_WINDOW: Duration = Duration::from_secs(15);
/// The suspicion timeout is this many retransmission timeouts (`srtt + 4 * rttvar`) when that
/// exceeds the tunable floor.
const RTO_MULTIPLIER: u64 = 4;

/// What can be done with a message to a suspect peer NI.
enum Move {
    /// Never reached the driver: select again.
    Reselect,
    /// The driver holds it: copy it.
    Copy,
}

impl Engine {
    /// The next path reset for the driver (see [`PathReset`]).
    pub fn poll_path_reset(&mut self) -> Option<PathReset> {
        self.outputs().pop_path_reset()
    }

    /// The driver saw a link go down: every peer NI whose NID `behind` says is reachable only
    /// through it loses its paths (every path to it is suspected at once). With rails on separate
    /// subnets a rail's peer addresses are behind its link whatever local NI sends to them,
    /// so the cross paths from other NIs fail with it.
    pub fn links_lost(&mut self, now: Time, behind: impl Fn(crate::addr::Nid) -> bool) {
        self.flow().links_lost(now, behind)
    }
}

impl<A: Access, N: NodeAccess> View<'_, A, N> {
    /// Fast failover is on (`blackhole_timeout` > 0).
    pub(super) fn failover_enabled(&self) -> bool {
        !self.node.tunables.blackhole_timeout.is_zero()
    }

    /// Whether `message`, whose last send failed, may be sent again. Lustre allows
    /// `lnet_retry_count` resends. With fast failover on, a message past that count may
    /// still go, up to as many more times as it remembers failed paths, while its peer has a
    /// usable path it has not failed on: under a black hole on one of two rails, three of the
    /// four paths between two nodes are broken in at least one direction, and a message that
    /// met them one after another would otherwise fail with the good one untried (decision
    /// 0008). Resends stay off when Lustre turns them off (`lnet_health_sensitivity = 0`).
    pub(super) fn may_try_again(&self, message: &Message) -> bool {
        let base = self.node.tunables.effective_retry_count();
        if message.retry_count < base {
            return true;
        }
        let extra = crate::engine::msg::FailedPaths::CAPACITY as u32;
        base > 0
            && self.failover_enabled()
            && message.retry_count < base + extra
            && message.peer_ni.is_some_and(|id| self.has_untried_path(message, id))
    }

    /// Whether the peer of `id` has a usable path, other than `message`'s last one (its NI
    /// to `id`) and those it remembers failing on.
    fn has_untried_path(&self, message: &Message, id: PeerNiId) -> bool {
        let Some(peer) = self.node.peers.peer_of(id) else {
            return false;
        };
        peer.ni_ids().any(|peer_ni| {
            let Some(net) = self.node.peers.ni(&self.peer_nis, peer_ni).map(|ni| ni.nid.net())
            else {
                return false;
            };
            self.node.nis.iter().enumerate().any(|(index, local)| {
                let Ok(ni) = u16::try_from(index).map(NiId) else {
                    return false;
                };
                ni != NiId::LOOPBACK
                    && local.nid.net() == net
                    && (ni, peer_ni) != (message.ni, id)
                    && !message.failed_paths.contains(ni, peer_ni)
                    && self.path_usable(ni, peer_ni)
            })
        })
    }

    /// The suspicion (and probe) timeout of a peer NI.
    pub(super) fn failover_timeout(&self, id: PeerNiId) -> Duration {
        let floor = self.node.tunables.blackhole_timeout;
        if floor.is_zero() {
            return floor;
        }
        let ceiling = self.node.tunables.lnd_timeout().max(floor);
        let rto =
            self.node.peers.ni(&self.peer_nis, id).map_or(0, |ni| {
                ni.watch.srtt_ns.saturating_add(ni.watch.rttvar_ns.saturating_mul(4))
            });
        Duration::from_nanos(rto.saturating_mul(RTO_MULTIPLIER)).clamp(floor, ceiling)
    }

    /// Whether something arrived from `id` on `ni` within half its suspicion timeout: while
    /// a peer has a suspect path, selection prefers such proven paths, so that a message
    /// moved off one broken path does not try the other broken ones one by one (with rails
    /// on separate subnets one broken rail breaks several paths at once; see [`Watch`]).
    pub(super) fn path_proven(&self, id: PeerNiId, ni: NiId) -> bool {
        let window = self.failover_timeout(id) / 2;
        self.node.peers.ni(&self.peer_nis, id).is_some_and(|peer_ni| {
            peer_ni.watch.heard.iter().any(|(via, at)| *via == ni && self.call.now < *at + window)
        })
    }

    /// Whether any path to any of `peer`'s NIs is suspect.
    pub(super) fn peer_in_trouble(&self, peer: crate::engine::peer::PeerId) -> bool {
        self.node.peers.peer(peer).is_some_and(|entry| {
            entry.nets.iter().flat_map(|net| &net.nis).any(|id| {
                self.node
                    .peers
                    .ni(&self.peer_nis, *id)
                    .is_some_and(|peer_ni| peer_ni.watch.any_suspect())
            })
        })
    }

    /// Whether traffic to peer NI `id` has somewhere else to go: the peer has other NIs, or
    /// it is a gateway (other routes; decision 0023).
    fn has_alternative(&self, id: PeerNiId) -> bool {
        self.node.peers.peer_ni_count(id) > 1
            || self.node.peers.owner(id).is_some_and(|peer| self.peer_is_router(peer, None))
    }

    /// Whether the path `ni` -> `id` can carry traffic as far as this node knows: the local
    /// NI is up (no fatal flag), the peer NI is listed and not reported DOWN by its peer, and
    /// the path is not suspect.
    pub(super) fn path_usable(&self, ni: NiId, id: PeerNiId) -> bool {
        let local = self.node.nis.get(ni).is_some_and(|local| local.usable() && !local.fatal_error);
        local
            && self.node.peers.ni(&self.peer_nis, id).is_some_and(|peer_ni| {
                !peer_ni.vanished
                    && !peer_ni.deleted
                    && peer_ni.status != LNET_NI_STATUS_DOWN
                    && !peer_ni.watch.suspects(ni)
            })
    }

    /// Whether a message pinned to its path (a source asked for, or a response, which
    /// Lustre sends to exactly the request's source from the NI it came in on) may leave it:
    /// its peer is multi-rail and the path is broken. The other end accepts it from any of
    /// this node's NIDs (an ACK or REPLY is matched by its wire handle, lustre: lib-move.c
    /// `lnet_parse_reply()`, `lnet_parse_ack()`).
    pub(super) fn pin_released(&self, message: &Message) -> bool {
        let Some(id) = message.peer_ni else {
            return false;
        };
        !keeps_path(message)
            && self.node.peers.peer_of(id).is_some_and(|peer| peer.multi_rail())
            && !self.path_usable(message.ni, id)
    }

    /// Whether the receive `key` (a PUT or REPLY carrying `mlength` bytes) could be waited
    /// for again if cut off in transit: fast failover on, from a multi-rail peer.
    pub(super) fn may_await_again(&self, key: Key, mlength: u32) -> bool {
        let Some(message) = self.msgs.get(key) else {
            return false;
        };
        let carries = matches!(message.header.body, Body::Put { .. } | Body::Reply { .. });
        self.failover_enabled()
            && carries
            && mlength > 0
            && message
                .peer_ni
                .and_then(|id| self.node.peers.peer_of(id))
                .is_some_and(|p| p.multi_rail())
    }

    /// Whether a message to a suspect peer NI can go elsewhere: to a multi-rail peer, not a
    /// recovery ping, and not pinned to a source (nor a response, which is) unless its path
    /// is broken ([`Engine::pin_released`]).
    fn movable(&self, message: &Message) -> Option<Move> {
        let pinned = message.source.is_some() || message.response_ni.is_some();
        if message.recovery || message.abandoned || (pinned && !self.pin_released(message)) {
            return None;
        }
        let multi_rail = message
            .peer_ni
            .and_then(|id| self.node.peers.peer_of(id))
            .is_some_and(|peer| peer.multi_rail());
        // A message sent through a gateway can take another route (decision 0023).
        let via_gateway = message
            .peer_ni
            .and_then(|id| self.node.peers.ni(&self.peer_nis, id))
            .is_some_and(|ni| ni.nid != message.header.dest_nid);
        if !multi_rail && !via_gateway {
            return None;
        }
        match message.phase {
            Phase::WaitPeerCredit | Phase::WaitNiCredit | Phase::TxReady => Some(Move::Reselect),
            Phase::InLnd if self.copyable(message) => Some(Move::Copy),
            _ => None,
        }
    }

    /// A message the driver holds may be copied if it is a PUT with ACK or a GET whose MD
    /// takes exactly its response (so a second response is stale), within the copy window
    /// and the retry budget.
    fn copyable(&self, message: &Message) -> bool {
        let request = match message.header.body {
            Body::Put { ack_wmd, .. } => !ack_wmd.is_none(),
            Body::Get { .. } => true,
            _ => false,
        };
        let single_response = message.md.and_then(|md| self.mds.get(md)).is_some_and(|md| {
            md.threshold == Threshold::Count(1) && md.refcount == 1 && !md.aborted && !md.zombie
        });
        let left = message
            .md
            .and_then(|md| self.mds.get(md))
            .and_then(|md| md.tracker.as_ref())
            .and_then(|tracker| tracker.sent_at)
            .or(message.lnd_at);
        request
            && single_response
            && message.event.is_some()
            && self.may_try_again(message)
            && left.is_some_and(|at| self.call.now < at + COPY_WINDOW)
            && self.node.failover.can_hold(u64::from(message.length))
    }

    /// The payload a message sends, copied out of its MD.
    fn payload_copy(&self, message: &Message) -> Memory {
        let mut bytes = vec![0; message.length as usize];
        let copied = message
            .md
            .and_then(|md| self.mds.get(md))
            .is_some_and(|md| md.memory.read_at(message.md_offset as usize, &mut bytes));
        if !copied {
            bytes.clear();
        }
        Memory::new(bytes)
    }
}

impl<N: NodeAccess> View<'_, Exclusive, N> {
    /// A transmit to `id` from `ni` went to the driver.
    pub(super) fn watch_lnd_start(&mut self, id: PeerNiId, ni: NiId) {
        let now = self.call.now;
        let Some(peer_ni) = self.node.peers.ni_mut(&mut self.peer_nis, id) else {
            return;
        };
        let path = peer_ni.watch.path_mut(ni);
        if path.in_lnd == 0 {
            path.lnd_since = now;
        }
        path.in_lnd = path.in_lnd.saturating_add(1);
        self.arm_watch(id, ni);
    }

    /// The driver finished a transmit to `id` from `ni` that took `took`.
    pub(super) fn watch_lnd_done(&mut self, id: PeerNiId, ni: NiId, took: Option<Duration>) {
        let now = self.call.now;
        let Some(peer_ni) = self.node.peers.ni_mut(&mut self.peer_nis, id) else {
            return;
        };
        // The sample is the gap since the path last made progress, when shorter than the
        // transmit's own time: on a busy path a transmit's time is mostly queueing behind the
        // others (megabytes of socket buffer, a ZC-ACK after them), while silence is measured
        // against the gaps between completions.
        let gap = peer_ni.watch.path(ni).map(|path| now.saturating_duration_since(path.lnd_since));
        if let Some(took) = took {
            peer_ni.watch.sample(gap.map_or(took, |gap| gap.min(took)));
        }
        let path = peer_ni.watch.path_mut(ni);
        path.in_lnd = path.in_lnd.saturating_sub(1);
        path.lnd_since = now;
        self.disarm_if_idle(id, ni);
    }

    /// A tracked request through `id` from `ni` left and awaits its response.
    pub(super) fn watch_await_start(&mut self, id: PeerNiId, ni: NiId) {
        let now = self.call.now;
        let Some(peer_ni) = self.node.peers.ni_mut(&mut self.peer_nis, id) else {
            return;
        };
        let path = peer_ni.watch.path_mut(ni);
        if path.awaiting == 0 {
            path.rx_since = now;
        }
        path.awaiting = path.awaiting.saturating_add(1);
        self.arm_watch(id, ni);
    }

    /// A request through `id` from `ni` is no longer awaited; `rtt` when its response came.
    pub(super) fn watch_await_end(&mut self, id: PeerNiId, ni: NiId, rtt: Option<Duration>) {
        let Some(peer_ni) = self.node.peers.ni_mut(&mut self.peer_nis, id) else {
            return;
        };
        if let Some(rtt) = rtt {
            // As for transmits: a response's round trip under load is mostly queueing; the
            // gap since the path last received (its header, at least) bounds it.
            let now = self.call.now;
            let gap = peer_ni.watch.path(ni).map(|p| now.saturating_duration_since(p.rx_since));
            peer_ni.watch.sample(gap.map_or(rtt, |gap| gap.min(rtt)));
        }
        let path = peer_ni.watch.path_mut(ni);
        path.awaiting = path.awaiting.saturating_sub(1);
        self.disarm_if_idle(id, ni);
    }

    /// Something arrived from `id` on `ni`: that path makes progress, and if it was suspect
    /// it is usable again.
    pub(super) fn watch_rx(&mut self, id: PeerNiId, ni: NiId) {
        let now = self.call.now;
        let Some(peer_ni) = self.node.peers.ni_mut(&mut self.peer_nis, id) else {
            return;
        };
        match peer_ni.watch.heard.iter_mut().find(|(via, _)| *via == ni) {
            Some(heard) => heard.1 = now,
            None => peer_ni.watch.heard.push((ni, now)),
        }
        let Some(path) = peer_ni.watch.paths.iter_mut().find(|path| path.ni == ni) else {
            return;
        };
        path.rx_since = now;
        if path.suspect {
            path.suspect = false;
            peer_ni.watch.prune();
        }
    }

    /// Puts the path `ni` -> `id` in the watch queue at its due time if it has work
    /// outstanding. A peer with one NI is not watched unless it is a gateway: there is no
    /// other path to move its traffic to.
    fn arm_watch(&mut self, id: PeerNiId, ni: NiId) {
        let armed = self
            .node
            .peers
            .ni(&self.peer_nis, id)
            .is_none_or(|peer_ni| peer_ni.watch.path(ni).is_some_and(|p| p.armed.is_some()));
        if armed || !self.failover_enabled() || !self.has_alternative(id) {
            if let Some(peer_ni) = self.node.peers.ni_mut(&mut self.peer_nis, id) {
                peer_ni.watch.prune();
            }
            return;
        }
        let timeout = self.failover_timeout(id);
        let Some(peer_ni) = self.node.peers.ni_mut(&mut self.peer_nis, id) else {
            return;
        };
        let path = peer_ni.watch.path_mut(ni);
        if let Some(due) = path.due(timeout) {
            path.armed = Some(due);
            let cpt = peer_ni.cpt;
            self.peer_nis.arm(cpt, due, id, ni);
        } else {
            peer_ni.watch.prune();
        }
    }

    /// Nothing outstanding on the path any more: its entry goes (no wakeup for an idle path).
    fn disarm_if_idle(&mut self, id: PeerNiId, ni: NiId) {
        let Some(peer_ni) = self.node.peers.ni_mut(&mut self.peer_nis, id) else {
            return;
        };
        let cpt = peer_ni.cpt;
        let path = peer_ni.watch.path_mut(ni);
        if path.in_lnd == 0 && path.awaiting == 0 {
            if let Some(at) = path.armed.take() {
                self.peer_nis.disarm(cpt, at, id, ni);
            }
        }
        if let Some(peer_ni) = self.node.peers.ni_mut(&mut self.peer_nis, id) {
            peer_ni.watch.prune();
        }
    }

    pub(super) fn request_path_reset(&mut self, ni: NiId, peer: Option<crate::addr::Nid>) {
        self.outputs.request_path_reset(self.call.cpt, PathReset { ni, peer });
    }

    /// The path `ni` -> `id` showed no progress for its timeout: selection avoids it, the
    /// peer NI's health goes down, the path is probed, the driver closes its connections and
    /// its work moves to other paths.
    fn suspect(&mut self, id: PeerNiId, ni: NiId) {
        let now = self.call.now;
        self.count(|counters| counters.blackhole_suspicions += 1);
        let single = !self.has_alternative(id);
        let Some(peer_ni) = self.node.peers.ni_mut(&mut self.peer_nis, id) else {
            return;
        };
        peer_ni.health_stats.suspicions += 1;
        let nid = peer_ni.nid;
        let path = peer_ni.watch.path_mut(ni);
        // The clocks restart: a path that stays silent is suspected again a timeout later.
        path.lnd_since = now;
        path.rx_since = now;
        // As for remote health (docs/protocol/semantics.md §4.2): with one NI there is nowhere
        // else to go (but for a gateway, decision 0023).
        if single {
            return;
        }
        path.suspect = true;
        // This path is probed first.
        if let Some(index) = peer_ni.watch.paths.iter().position(|path| path.ni == ni) {
            let path = peer_ni.watch.paths.remove(index);
            peer_ni.watch.paths.insert(0, path);
        }
        self.remote_failure(id);
        self.on_node("a suspect path's probe", |flow| flow.probe_now(id));
        self.move_messages(|message| message.peer_ni == Some(id) && message.ni == ni);
        self.reissue_awaiting(|path| path == (id, ni));
        // What the LND still holds on the path (PUTs without ACK, responses, originals of
        // the copies just made) fails back now rather than at `sock_timeout`.
        self.request_path_reset(ni, Some(nid));
    }

    /// A local NI lost its link (its fatal flag went up): what the driver holds on it and
    /// the requests that left through it and await a response move to other paths at once,
    /// as for a suspect path.
    pub(super) fn evacuate_ni(&mut self, ni: NiId) {
        if !self.failover_enabled() {
            return;
        }
        let held: Vec<Key> = self
            .msgs
            .iter()
            .filter(|(_, m)| m.tx && m.ni == ni && m.phase == Phase::InLnd)
            .filter(|(_, m)| matches!(self.movable(m), Some(Move::Copy)))
            .map(|(key, _)| key)
            .collect();
        for key in held {
            self.copy_in_lnd(key);
        }
        self.reissue_awaiting(|(_, via)| via == ni);
    }

    /// A peer NI its peer stopped listing was deleted (discovery): what is queued for it or
    /// held by the driver moves to the peer's other NIs, and requests through it that await a
    /// response are reissued there, instead of waiting out `transaction_timeout` for a reply
    /// that can no longer come (the peer closed that NI's connections). Call after the
    /// delete, so selection no longer offers it.
    pub(super) fn evacuate_peer_ni(&mut self, id: PeerNiId) {
        if !self.failover_enabled() {
            return;
        }

        self.move_messages(|message| message.peer_ni == Some(id));
        self.reissue_awaiting(|(peer_ni, _)| peer_ni == id);
    }

    /// Moves the sent messages `which` selects that can go elsewhere: reselected if the
    /// driver does not have them yet, copied if it does.
    fn move_messages(&mut self, which: impl Fn(&Message) -> bool) {
        let candidates: Vec<(Key, Move)> = self
            .msgs
            .iter()
            .filter(|(_, message)| message.tx && which(message))
            .filter_map(|(key, message)| self.movable(message).map(|how| (key, how)))
            .collect();
        for (key, how) in candidates {
            match how {
                Move::Reselect => self.reselect(key),
                Move::Copy => self.copy_in_lnd(key),
            }
        }
    }

    /// Reissues the tracked requests (with a saved copy) whose awaited path `which` selects.
    fn reissue_awaiting(&mut self, which: impl Fn((PeerNiId, NiId)) -> bool) {
        // A set: the tracker queue may list an MD more than once.
        let awaiting: std::collections::BTreeSet<Key> = self
            .trackers
            .iter()
            .map(|(_, md)| md)
            .filter(|md| {
                self.mds.get(*md).and_then(|md| md.tracker.as_ref()).is_some_and(|tracker| {
                    tracker.awaiting.is_some_and(&which) && tracker.request.is_some()
                })
            })
            .collect();
        for md in awaiting {
            self.reissue(md);
        }
    }

    /// Every path to the peer NI `id` is broken (its peer reported it DOWN, or the link it
    /// sits behind went down here): each is suspected at once rather than after its timeout.
    pub(super) fn lose_paths_to(&mut self, id: PeerNiId) {
        if !self.failover_enabled() {
            return;
        }
        let Some(net) = self.node.peers.ni(&self.peer_nis, id).map(|peer_ni| peer_ni.nid.net())
        else {
            return;
        };
        let local: Vec<NiId> = self
            .node
            .nis
            .live_ids()
            .filter(|ni| self.node.nis.get(*ni).is_some_and(|l| l.usable() && l.nid.net() == net))
            .collect();
        for ni in local {
            let already = self
                .node
                .peers
                .ni(&self.peer_nis, id)
                .is_none_or(|peer_ni| peer_ni.watch.suspects(ni));
            if !already {
                self.suspect(id, ni);
            }
        }
    }

    /// A PUT or REPLY cut off in transit (its connection died mid-payload) from a multi-rail
    /// peer: rather than failing the MD, undo the message's claim on it (threshold, reference,
    /// offset) and wait for it again. Its sender learns of the loss (it asked for a ZC-ACK,
    /// as ulnet and the kernel do from `zc_min_payload`) and resends it by another path; a
    /// GET's MD also has its GET copied (`reissue`), and its tracker's deadline still bounds
    /// the wait. Not in Lustre, where the MD fails with the message. Returns false (fail as
    /// Lustre does) when this does not apply: the MD took other operations meanwhile, was
    /// unlinked, or is not waiting for exactly this one.
    pub(super) fn await_again(&mut self, key: Key, health: HealthStatus) -> bool {
        if health.is_ok() {
            return false;
        }
        let Some(message) = self.msgs.get(key) else {
            return false;
        };
        let (Some(md_key), event, start, length) =
            (message.md, message.event, message.md_offset, message.length)
        else {
            return false;
        };
        if !matches!(event, Some(EventKind::Put | EventKind::Reply))
            || !self.may_await_again(key, length)
        {
            return false;
        }
        let restorable = self.mds.get(md_key).is_some_and(|md| {
            let tracked = md.tracker.as_ref().is_some_and(|tracker| tracker.awaiting.is_some());
            md.threshold == Threshold::Count(0)
                && md.refcount == 1
                && !md.aborted
                && !md.zombie
                && (event == Some(EventKind::Put) || tracked)
        });
        if !restorable {
            return false;
        }
        self.rx_health(key, health);
        if let Some(md) = self.mds.get_mut(md_key) {
            md.detach_unused_operation();
            if event == Some(EventKind::Put) {
                md.offset = start;
            }
        }
        self.discard_message(key);
        self.count(|counters| counters.receives_awaited_again += 1);
        if event == Some(EventKind::Reply) {
            self.reissue(md_key);
        }
        true
    }

    /// Takes a message that never reached the driver off its credit queues and selects again.
    pub(super) fn reselect(&mut self, key: Key) {
        self.withdraw(key);
        self.count(|counters| counters.fast_resends += 1);
        self.call.work.push_back(Work::Resend(key));
    }

    /// Withdraws a not-yet-transmitted message from its credit queues (giving back what it
    /// holds) and leaves it ready for selection.
    pub(super) fn withdraw(&mut self, key: Key) {
        let Some(message) = self.msgs.get_mut(key) else {
            return;
        };
        if !matches!(message.phase, Phase::WaitPeerCredit | Phase::WaitNiCredit | Phase::TxReady) {
            let phase = message.phase;
            self.record_violation(|| format!("withdrawing message {key:?} in phase {phase:?}"));
            return;
        }
        let (ni, peer_ni, cpt) = (message.ni, message.peer_ni, message.tx_cpt);
        if message.ni_credit == Credit::Waiting {
            message.ni_credit = Credit::None;
            if let Some(pool) = self.credit_pool_mut(ni, cpt) {
                pool.remove(key);
            }
        }
        let Some(message) = self.msgs.get_mut(key) else {
            return;
        };
        if message.peer_credit == Credit::Waiting {
            message.peer_credit = Credit::None;
            let charged = std::mem::take(&mut message.charged_bytes);
            if let Some(peer) =
                peer_ni.and_then(|id| self.node.peers.ni_mut(&mut self.peer_nis, id))
            {
                peer.credits.remove(key);
                peer.queued_bytes = peer.queued_bytes.saturating_sub(u64::from(charged));
            }
        }
        self.return_credits(key);
        if let Some(message) = self.msgs.get_mut(key) {
            message.phase = Phase::ResendQueued;
            message.peer_ni = None;
            message.ni = NiId::LOOPBACK;
        }
    }

    /// The driver holds `key` to a suspect peer NI: it keeps the original with a private copy
    /// of its payload (its MD reference and SEND event go to the copy), and the copy is
    /// selected afresh.
    fn copy_in_lnd(&mut self, key: Key) {
        if !self.message_room(self.msgs.partition_of(key).unwrap_or(0)) {
            return;
        }
        let Some(original) = self.msgs.get(key) else {
            return;
        };
        let payload = self.payload_copy(original);
        let mut copy = Message {
            event: original.event,
            template: original.template,
            md: original.md,
            md_offset: original.md_offset,
            retry_count: original.retry_count + 1,
            no_resend: original.no_resend,
            resent: true,
            committed_at: original.committed_at,
            ..Message::blank(original.header, original.length)
        };
        flag_wire_handle(&mut copy.header.body);
        let home = self.msgs.partition_of(key).unwrap_or(0);
        let Some(copy_key) = self.alloc_message(home, copy) else {
            return;
        };
        self.node.failover.hold(payload.len() as u64);
        if let Some(original) = self.msgs.get_mut(key) {
            original.abandoned = true;
            original.no_resend = true;
            original.event = None;
            original.md = None;
            original.orphan = Some(Box::new(payload));
            original.md_offset = 0;
        }
        self.count(|counters| counters.fast_resends += 1);
        self.call.work.push_back(Work::Resend(copy_key));
    }

    /// A tracked request that left but got no response: send a copy of it, event-less, from
    /// a private copy of its payload, if its MD takes exactly the response.
    fn reissue(&mut self, md_key: Key) {
        if !self.message_room(self.mds.partition_of(md_key).unwrap_or(0)) {
            return;
        }
        let now = self.call.now;
        let retry_limit = self.node.tunables.effective_retry_count();
        let Some(md) = self.mds.get(md_key) else {
            return;
        };
        let single_response = md.threshold == Threshold::Count(1)
            && md.refcount == 0
            && !md.aborted
            && !md.zombie
            && md.me.is_none();
        let Some(tracker) = md.tracker.as_ref() else {
            return;
        };
        let Some(request) = tracker.request.as_deref() else {
            return;
        };
        let in_window = tracker.sent_at.is_some_and(|at| now < at + COPY_WINDOW);
        // Like a held message, only a request free to take another path is copied: the peer
        // is multi-rail or a gateway (another route), and no source was asked for or the
        // path it pinned is broken.
        let free = tracker.awaiting.is_some_and(|(id, via)| {
            let gateway =
                self.node.peers.owner(id).is_some_and(|peer| self.peer_is_router(peer, None));
            (gateway || self.node.peers.peer_of(id).is_some_and(|peer| peer.multi_rail()))
                && (request.source.is_none() || !self.path_usable(via, id))
        });
        if !single_response || !in_window || !free || request.copies >= retry_limit {
            return;
        }
        let length = match request.header.body {
            Body::Put { .. } => request.length,
            _ => 0,
        };
        if !self.node.failover.can_hold(u64::from(length)) {
            return;
        }
        let mut payload = vec![0; length as usize];
        if !md.memory.read_at(0, &mut payload) {
            return;
        }
        let mut header = request.header;
        flag_wire_handle(&mut header.body);
        let (source, copies) = (request.source, request.copies);
        let message = Message {
            retry_count: copies + 1,
            resent: true,
            source,
            orphan: Some(Box::new(Memory::new(payload))),
            tracked_md: Some(md_key),
            ..Message::blank(header, length)
        };
        let home = self.mds.partition_of(md_key).unwrap_or(0);
        let Some(key) = self.alloc_message(home, message) else {
            return;
        };
        self.node.failover.hold(u64::from(length));
        if let Some(request) = self
            .mds
            .get_mut(md_key)
            .and_then(|md| md.tracker.as_mut())
            .and_then(|t| t.request.as_mut())
        {
            request.copies += 1;
        }
        self.count(|counters| counters.fast_resends += 1);
        self.call.work.push_back(Work::Resend(key));
    }

    /// A message's private payload copy is gone: its bytes leave the budget.
    pub(super) fn release_orphan(&mut self, orphan: Option<Box<Memory>>) {
        if let Some(orphan) = orphan {
            self.node.failover.release(orphan.len() as u64);
        }
    }
}

impl Flow<'_> {
    /// Checks the due paths; suspects the ones without progress.
    pub(super) fn run_watch(&mut self) {
        while let Some((id, ni)) = self.peer_nis.pop_due_watch(self.call.now) {
            let timeout = self.failover_timeout(id);
            let Some(peer_ni) = self.node.peers.ni_mut(&mut self.peer_nis, id) else {
                continue;
            };
            let deleted = peer_ni.deleted;
            let path = peer_ni.watch.path_mut(ni);
            path.armed = None;
            let due = path.due(timeout);
            if deleted || timeout.is_zero() {
                peer_ni.watch.prune();
                continue;
            }
            match due {
                None => peer_ni.watch.prune(),
                Some(due) if due > self.call.now => self.arm_watch(id, ni),
                Some(_) => {
                    self.suspect(id, ni);
                    self.arm_watch(id, ni);
                }
            }
        }
    }

    /// A link came back (a local NI's fatal flag cleared, or a peer reported one of its NIs
    /// UP again): paths may have healed, so every suspect path is probed at once, its backoff
    /// restarted, rather than at the next (possibly minutes away) recovery ping.
    pub(super) fn reprobe_suspect_paths(&mut self) {
        if !self.failover_enabled() {
            return;
        }
        let suspects: Vec<PeerNiId> = self
            .node
            .peers
            .nis(&self.peer_nis)
            .filter(|(_, peer_ni)| peer_ni.watch.any_suspect())
            .map(|(id, _)| id)
            .collect();
        for id in suspects {
            if let Some(peer_ni) = self.node.peers.ni_mut(&mut self.peer_nis, id) {
                peer_ni.recovery.ping_count = 0;
            }
            self.probe_now(id);
        }
    }

    /// Fast failover was turned on or off: its counters restart from what is in flight.
    pub(super) fn reset_failover_state(&mut self) {
        self.peer_nis.clear_watch();
        for ni in crate::engine::peer::PeerTable::nis_mut(&mut self.peer_nis) {
            ni.watch.restart();
        }
        let keys: Vec<Key> = self.mds.iter().map(|(key, _)| key).collect();
        for key in keys {
            if let Some(tracker) = self.mds.get_mut(key).and_then(|md| md.tracker.as_mut()) {
                tracker.awaiting = None;
                tracker.request = None;
            }
        }
        if !self.failover_enabled() {
            return;
        }
        let in_lnd: Vec<(PeerNiId, NiId)> = self
            .msgs
            .iter()
            .filter(|(_, m)| m.tx && m.phase == Phase::InLnd)
            .filter_map(|(_, m)| m.peer_ni.map(|id| (id, m.ni)))
            .collect();
        for (id, ni) in in_lnd {
            self.watch_lnd_start(id, ni);
        }
    }

    /// See [`Engine::links_lost`].
    pub(crate) fn links_lost(&mut self, now: Time, behind: impl Fn(crate::addr::Nid) -> bool) {
        self.advance(now);
        let lost: Vec<PeerNiId> = self
            .node
            .peers
            .nis(&self.peer_nis)
            .filter(|(_, peer_ni)| !peer_ni.deleted && behind(peer_ni.nid))
            .filter(|(_, peer_ni)| self.ni_for_nid(peer_ni.nid).is_none())
            .map(|(id, _)| id)
            .collect();
        for id in lost {
            self.lose_paths_to(id);
        }
        self.run_work();
    }
}

/// Marks a PUT copy's ACK handle so a ulnet target recognises it.
pub(crate) fn flag_wire_handle(body: &mut Body) {
    if let Body::Put { ack_wmd, .. } = body {
        if !ack_wmd.is_none() {
            ack_wmd.interface_cookie |= RESEND_COOKIE_FLAG;
        }
    }
}

/// Messages that test a path never leave it: a recovery ping, and the REPLY to a ping (the
/// pinger learns from which of its paths the answer came, `watch_rx`).
pub(super) fn keeps_path(message: &Message) -> bool {
    message.recovery
        || (message.response_ni.is_some() && message.template.portal == LNET_RESERVED_PORTAL)
}
