//! The monitor thread's recovery passes: the pings that bring unhealthy interfaces back, with
//! exponential backoff, over the queues of `recovery.rs`.
//!
//! lustre: lnet/lnet/lib-move.c (`lnet_recover_local_nis`, `lnet_recover_peer_nis`,
//! `lnet_send_ping`, `lnet_handle_recovery_reply`, `lnet_mt_event_handler`,
//! `lnet_unlink_ni_recovery_mdh_locked`), lib-msg.c (`lnet_ni_add_to_recoveryq_locked`,
//! `lnet_handle_local_failure`, `lnet_handle_remote_failure_locked`), peer.c
//! (`lnet_peer_ni_add_to_recoveryq_locked`), include/linux/lnet/lib-lnet.h
//! (`lnet_get_next_recovery_ping`), docs/protocol/semantics.md §4.3.
//!
//! The kernel's monitor wakes every second; here the pass runs exactly when the earliest
//! queued entry is due (so a ping Lustre sends up to a second late goes out on time).

use crate::addr::Nid;
use crate::engine::event::{Event, EventKind};
use crate::engine::health::MAX_HEALTH;
use crate::engine::md::MdOwner;
use crate::engine::me::{LNET_PID_LUSTRE, ProcessId};
use crate::engine::ni::NiId;
use crate::engine::node::Engine;
use crate::engine::peer::PeerNiId;
use crate::engine::recovery::{Recovery, RecoveryTarget};
use crate::engine::slab::Key;
use crate::engine::view::{Exclusive, Flow, NodeAccess, View};
use crate::wire::ping::LNET_PING_INFO_MIN_SIZE;

impl Engine {
    /// `lnetctl debug recovery --local`: the local NIs on the recovery queue, in queue order.
    pub fn local_recovery_queue(&self) -> impl Iterator<Item = Nid> + '_ {
        self.node.recovery.local().filter_map(|ni| self.ni_nid(ni))
    }

    /// `lnetctl debug recovery --peer`: the peer NIs on the recovery queue, in queue order.
    pub fn peer_recovery_queue(&self) -> impl Iterator<Item = Nid> + '_ {
        self.node.recovery.peer().filter_map(|id| self.node.peers.nid(id))
    }
}

impl<N: NodeAccess> View<'_, Exclusive, N> {
    /// `lnet_peer_ni_add_to_recoveryq_locked`: only peer NIs ever heard from, and within
    /// `recovery_limit` of that; our own NIDs recover as local NIs instead.
    pub(super) fn queue_peer_recovery(&mut self, id: PeerNiId) {
        let (limit, now) = (self.node.tunables.recovery_limit, self.call.now);
        let Some(lpni) = self.node.peers.ni(&self.peer_nis, id) else {
            return;
        };
        // The common case first: a healthy peer NI (every OK receive comes here). One with a
        // suspect path stays under recovery until that path is probed back.
        if (lpni.health.value() == MAX_HEALTH && !lpni.watch.any_suspect()) || lpni.recovery.queued
        {
            return;
        }
        // Lustre deletes NIs a peer stops listing; here they stay, vanished, and are not
        // recovered.
        if lpni.deleted || lpni.vanished || self.ni_for_nid(lpni.nid).is_some() {
            return;
        }
        let interval = self.node.tunables.recovery_ping_interval(lpni.recovery.ping_count);
        let Some(lpni) = self.node.peers.ni_mut(&mut self.peer_nis, id) else {
            return;
        };
        if lpni.recovery.queued || (lpni.health.value() == MAX_HEALTH && !lpni.watch.any_suspect())
        {
            return;
        }
        let Some(last_alive) = lpni.last_alive else {
            return;
        };
        if !limit.is_zero() && now > last_alive + limit {
            // Aged out: the next message from it starts recovery afresh.
            lpni.recovery.ping_count = 0;
            return;
        }
        lpni.recovery.queued = true;
        lpni.recovery.next_ping = now + interval;
        let next = lpni.recovery.next_ping;
        self.on_node("the peer recovery queue", |flow| flow.node.recovery.push_peer(id, next));
    }
}

impl Flow<'_> {
    /// `lnet_ni_add_to_recoveryq_locked`: an unhealthy NI not yet queued is queued, its
    /// next ping after the backoff for its ping count.
    pub(super) fn queue_local_recovery(&mut self, ni: NiId) {
        let interval_for = |count| self.node.tunables.recovery_ping_interval(count);
        let now = self.call.now;
        let Some(local) = self.node.nis.get_mut(ni) else {
            return;
        };
        if local.recovery.queued || local.health.value() == MAX_HEALTH || !local.usable() {
            return;
        }
        local.recovery.queued = true;
        local.recovery.next_ping = now + interval_for(local.recovery.ping_count);
        let next = local.recovery.next_ping;
        self.node.recovery.push_local(ni, next);
    }

    /// Fast failover's probe: a queued peer NI without a ping in flight is pinged at once.
    pub(super) fn probe_now(&mut self, id: PeerNiId) {
        self.queue_peer_recovery(id);
        let now = self.call.now;
        if let Some(lpni) = self.node.peers.ni_mut(&mut self.peer_nis, id) {
            if lpni.recovery.queued && !lpni.recovery.pending {
                lpni.recovery.next_ping = now;
                self.node.recovery.note_deadline(now);
            }
        }
    }

    /// The monitor thread's recovery passes, if one is due.
    pub(super) fn run_recovery(&mut self) {
        if self.node.recovery.deadline().is_none_or(|deadline| deadline > self.call.now) {
            return;
        }
        self.recover_local_nis();
        self.recover_peer_nis();
        self.recompute_recovery_deadline();
    }

    /// `lnet_recover_local_nis`: drop healthy (or removed) NIs, clean up failed pings, and
    /// ping the due ones at their own NID, which exercises the NI both ways.
    fn recover_local_nis(&mut self) {
        let queue = self.node.recovery.take_local();
        let mut pinged = Vec::new();
        let mut waiting = Vec::new();
        for ni in queue {
            let now = self.call.now;
            let Some(local) = self.node.nis.get_mut(ni) else {
                continue;
            };
            if !local.usable() || local.health.value() == MAX_HEALTH {
                local.recovery.queued = false;
                // lustre: lnet_unlink_lpni_recovery_mdh_locked() unlinks any MD still held,
                // pending or not: a failed ping's MD outlives its SEND event.
                let stale = local.recovery.md.take();
                local.recovery.pending = false;
                if let Some(md) = stale {
                    self.abandon_md(md);
                }
                continue;
            }
            if local.recovery.failed {
                local.recovery.failed = false;
                if let Some(md) = local.recovery.md.take() {
                    self.abandon_md(md);
                }
            }
            let Some(local) = self.node.nis.get_mut(ni) else {
                continue;
            };
            if now < local.recovery.next_ping || local.recovery.pending {
                waiting.push(ni);
                continue;
            }
            local.recovery.pending = true;
            let nid = local.nid;
            let sent = self.send_recovery_ping(RecoveryTarget::Local(ni), nid, None);
            let interval_for = |count| self.node.tunables.recovery_ping_interval(count);
            let Some(local) = self.node.nis.get_mut(ni) else {
                continue;
            };
            local.recovery.ping_count = local.recovery.ping_count.saturating_add(1);
            local.recovery.next_ping = now + interval_for(local.recovery.ping_count);
            match sent {
                Some(md) => local.recovery.md = Some(md),
                None => local.recovery.pending = false,
            }
            pinged.push(ni);
        }
        self.node.recovery.requeue_local(pinged, waiting);
    }

    /// `lnet_recover_peer_nis`: the same for peer NIs, pinging the NID under recovery.
    fn recover_peer_nis(&mut self) {
        let queue = self.node.recovery.take_peer();
        let mut pinged = Vec::new();
        let mut waiting = Vec::new();
        for id in queue {
            let now = self.call.now;
            let Some(lpni) = self.node.peers.ni_mut(&mut self.peer_nis, id) else {
                continue;
            };
            let recovered = lpni.health.value() == MAX_HEALTH && !lpni.watch.any_suspect();
            if lpni.deleted || lpni.vanished || recovered {
                lpni.recovery.queued = false;
                // lustre: lnet_unlink_lpni_recovery_mdh_locked() unlinks any MD still held,
                // pending or not: a failed ping's MD outlives its SEND event.
                let stale = lpni.recovery.md.take();
                lpni.recovery.pending = false;
                if let Some(md) = stale {
                    self.abandon_md(md);
                }
                continue;
            }
            if lpni.recovery.failed {
                lpni.recovery.failed = false;
                if let Some(md) = lpni.recovery.md.take() {
                    self.abandon_md(md);
                }
            }
            let Some(lpni) = self.node.peers.ni_mut(&mut self.peer_nis, id) else {
                continue;
            };
            if now < lpni.recovery.next_ping || lpni.recovery.pending {
                waiting.push(id);
                continue;
            }
            lpni.recovery.pending = true;
            let nid = lpni.nid;
            // Fast failover: a suspect path is probed from its own local NI (in turn), so
            // that only its REPLY clears it.
            let source = lpni.watch.next_probe();
            let source = source.and_then(|ni| self.ni_nid(ni));
            let sent = self.send_recovery_ping(RecoveryTarget::Peer(id), nid, source);
            let interval_for = |count| self.node.tunables.recovery_ping_interval(count);
            let Some(lpni) = self.node.peers.ni_mut(&mut self.peer_nis, id) else {
                continue;
            };
            lpni.recovery.ping_count = lpni.recovery.ping_count.saturating_add(1);
            lpni.recovery.next_ping = now + interval_for(lpni.recovery.ping_count);
            match sent {
                Some(md) => lpni.recovery.md = Some(md),
                None => lpni.recovery.pending = false,
            }
            // Lustre takes it off the queue to ping it and adds it back through
            // lnet_peer_ni_add_to_recoveryq_locked(), which applies recovery_limit again.
            let limit = self.node.tunables.recovery_limit;
            let Some(lpni) = self.node.peers.ni_mut(&mut self.peer_nis, id) else {
                continue;
            };
            let aged_out =
                !limit.is_zero() && lpni.last_alive.is_none_or(|alive| now > alive + limit);
            if aged_out {
                lpni.recovery.queued = false;
                lpni.recovery.ping_count = 0;
                continue;
            }
            pinged.push(id);
        }
        self.node.recovery.requeue_peer(pinged, waiting);
    }

    /// `lnet_send_ping(.., recovery = true)`: a 272-byte ping GET, tracked, never resent,
    /// sent non-multi-rail to exactly `nid`. With fast failover its tracker expires after the
    /// probe timeout instead of the transaction timeout.
    fn send_recovery_ping(
        &mut self,
        target: RecoveryTarget,
        nid: Nid,
        source: Option<Nid>,
    ) -> Option<Key> {
        let owner = MdOwner::Recovery(target);
        let process = ProcessId::new(nid, LNET_PID_LUSTRE);
        let md = self
            .send_internal_ping(owner, LNET_PING_INFO_MIN_SIZE as u32, process, source, true)
            .ok()?;
        let probe = match target {
            RecoveryTarget::Peer(id) => self.failover_timeout(id),
            RecoveryTarget::Local(_) => self.node.tunables.blackhole_timeout,
        };
        if !probe.is_zero() && probe < self.node.tunables.transaction_timeout {
            let deadline = self.call.now + probe;
            self.rearm_tracker(md, deadline);
        }
        Some(md)
    }

    /// `lnet_mt_event_handler` / `lnet_handle_recovery_reply`.
    pub(super) fn recovery_event(&mut self, target: RecoveryTarget, md: Key, event: &Event) {
        let sensitivity = self.node.tunables.health_sensitivity;
        let state = match target {
            RecoveryTarget::Local(ni) => self.node.nis.get_mut(ni).map(|ni| &mut ni.recovery),
            RecoveryTarget::Peer(id) => {
                self.node.peers.ni_mut(&mut self.peer_nis, id).map(|ni| &mut ni.recovery)
            }
        };
        let Some(state) = state.filter(|state| state.md == Some(md)) else {
            return;
        };
        let send = event.kind == EventKind::Send;
        let ok = event.status.is_ok();
        if !send || !ok {
            state.pending = false;
        }
        if !ok {
            state.failed = true;
        }
        if event.unlinked {
            state.md = None;
        }
        if !state.pending {
            let next = state.next_ping.max(self.call.now);
            self.node.recovery.note_deadline(next);
        }
        // A local NI's REPLY is its proof of health; a peer NI's comes through the normal
        // receive path (an OK receive from it).
        if let (RecoveryTarget::Local(ni), EventKind::Reply, true) = (target, event.kind, ok) {
            if let Some(local) = self.node.nis.get_mut(ni) {
                local.health.increment(sensitivity);
            }
            self.refresh_ni_status(ni);
        }
    }

    /// Cancels an NI's or peer NI's recovery (removed, deleted): off the queue, ping dropped.
    pub(super) fn cancel_recovery(&mut self, target: RecoveryTarget) {
        let state = match target {
            RecoveryTarget::Local(ni) => {
                self.node.recovery.remove_local(ni);
                self.node.nis.get_mut(ni).map(|ni| &mut ni.recovery)
            }
            RecoveryTarget::Peer(id) => {
                self.node.recovery.remove_peer(id);
                self.node.peers.ni_mut(&mut self.peer_nis, id).map(|ni| &mut ni.recovery)
            }
        };
        let Some(state) = state else {
            return;
        };
        let md = state.md.take();
        *state = Recovery { ping_count: state.ping_count, ..Recovery::default() };
        if let Some(md) = md {
            self.abandon_md(md);
        }
    }

    /// The earliest next ping among queued entries that can ping; entries with a ping in
    /// flight are looked at again when its event arrives (which re-arms the deadline).
    pub(super) fn recompute_recovery_deadline(&mut self) {
        let local = self
            .node
            .recovery
            .local()
            .filter_map(|ni| self.node.nis.get(ni))
            .filter(|ni| !ni.recovery.pending)
            .map(|ni| ni.recovery.next_ping);
        let peer = self
            .node
            .recovery
            .peer()
            .filter_map(|id| self.node.peers.ni(&self.peer_nis, id))
            .filter(|ni| !ni.recovery.pending)
            .map(|ni| ni.recovery.next_ping);
        let deadline = local.chain(peer).min().map(|at| at.max(self.call.now));
        self.node.recovery.set_deadline(deadline);
    }
}
