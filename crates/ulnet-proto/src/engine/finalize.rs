//! Finalization: health check, resend gate, events, MD detach and unlink, credit return.
//!
//! lustre: lnet/lnet/lib-msg.c (`lnet_finalize`, `lnet_health_check`,
//! `lnet_attempt_msg_resend`, `lnet_msg_detach_md`, `lnet_msg_decommit_tx/rx`),
//! lib-md.c (`lnet_md_unlink`, `LNetMDUnlink`, `lnet_build_unlink_event`),
//! docs/protocol/semantics.md §1.4, §1.5, §4.2, §11.

use crate::engine::call::Work;
use crate::engine::event::{Event, EventKind, EventStatus, EventTemplate};
use crate::engine::health::{HealthAction, HealthStatus, MAX_HEALTH};
use crate::engine::latency::LatencyOp;
use crate::engine::md::{MdOwner, Threshold, UnlinkMode};
use crate::engine::msg::{Message, Phase};
use crate::engine::ni::NiId;
use crate::engine::peer::PeerNiId;
use crate::engine::ping::InternalEvent;
use crate::engine::slab::Key;
use crate::engine::view::{Access, Exclusive, Flow, NodeAccess, View};
use crate::time::Time;
use crate::wire::header::{Body, Header, MsgType};
use crate::wire::ping::{LNET_NI_STATUS_DOWN, LNET_NI_STATUS_UP};

impl<A: Access, N: NodeAccess> View<'_, A, N> {
    /// `lnet_health_check`'s `handle_remote_health`: not for a peer with a single NI (there
    /// is nowhere else to go; we do not route), nor for our own NIDs (local recovery covers
    /// those).
    fn handles_remote_health(&self, peer_ni: PeerNiId) -> bool {
        self.node.peers.peer_ni_count(peer_ni) > 1
            && self
                .node
                .peers
                .ni(&self.peer_nis, peer_ni)
                .is_some_and(|ni| self.ni_for_nid(ni.nid).is_none())
    }

    /// `lnet_attempt_msg_resend`'s gate.
    fn may_resend(&self, key: Key, action: HealthAction) -> bool {
        let Some(message) = self.msgs.get(key) else {
            return false;
        };
        if message.recovery
            || message.abandoned
            || message.no_resend
            || !self.may_try_again(message)
        {
            return false;
        }
        if message.md.and_then(|md| self.mds.get(md)).is_some_and(|md| md.aborted) {
            return false;
        }
        // lustre: lnet_ping_at_least_two_entries() on the ping buffer (removed NIs left out).
        let real_nis = self.node.nis.iter().filter(|ni| ni.usable()).count();
        let peer_nis = message.peer_ni.map_or(0, |id| self.node.peers.peer_ni_count(id));
        (action.local_resend && real_nis > 1) || (action.remote_resend && peer_nis > 1)
    }
}

impl<N: NodeAccess> View<'_, Exclusive, N> {
    /// `lnet_finalize` for a send: health check (which may queue a resend), then the event,
    /// then decommit (credits back). Exactly once per send attempt chain.
    pub(super) fn finalize_tx(
        &mut self,
        key: Key,
        health: HealthStatus,
        status: EventStatus,
        no_resend: bool,
    ) {
        let Some(message) = self.msgs.get_mut(key) else {
            self.record_violation(|| format!("send {key:?} finalized twice"));
            return;
        };
        message.health = health;
        message.no_resend |= no_resend;
        let past_deadline = self.call.now > message.deadline;
        let (ni, peer_ni) = (message.ni, message.peer_ni);
        // Health applies only to committed messages with a peer NI (never loopback).
        if let Some(peer_ni) = peer_ni {
            if health.is_ok() {
                self.local_success(ni);
            } else if !past_deadline {
                let action = health.action();
                self.count_failure(ni, Some(peer_ni), health);
                if action.local_failure {
                    self.on_node("a local NI's failure", |flow| flow.local_failure(ni));
                }
                if action.remote_failure && self.handles_remote_health(peer_ni) {
                    self.remote_failure(peer_ni);
                }
                if self.may_resend(key, action) {
                    self.queue_resend(key);
                    return;
                }
            }
        }
        self.complete_tx(key, status);
    }

    /// `lnet_finalize` for a receive: health, statistics, the MD's event, then the ACK if one
    /// is due (the message is reused for it).
    pub(super) fn finalize_rx(&mut self, key: Key, health: HealthStatus, status: EventStatus) {
        if self.msgs.get(key).is_some_and(|message| message.routing) {
            self.forward_received(key, health);
            return;
        }
        if self.await_again(key, health) {
            return;
        }
        self.rx_health(key, health);
        if health.is_ok() {
            self.count_received(key);
        }
        let Some(message) = self.msgs.get(key) else {
            self.record_violation(|| format!("receive {key:?} finalized twice"));
            return;
        };
        let (md, event, template, ack_to) =
            (message.md, message.event, message.template, message.ack_to);
        if let (Some(md), Some(kind @ (EventKind::Ack | EventKind::Reply))) = (md, event) {
            if status.is_ok() {
                self.response_arrived(md, key, kind);
            }
        }
        self.settle_delivery(key, status.is_ok(), status.is_ok() && ack_to.is_some());
        if let (Some(md), Some(kind)) = (md, event) {
            self.detach_md(md, kind, &template, status);
        }
        match ack_to.filter(|_| status.is_ok()) {
            Some(ack_wmd) => self.send_ack(key, ack_wmd),
            None => self.discard_message(key),
        }
    }

    /// Receive-side health (`lnet_health_check` on an rx message).
    pub(super) fn rx_health(&mut self, key: Key, health: HealthStatus) {
        let Some(message) = self.msgs.get_mut(key) else {
            return;
        };
        message.health = health;
        let (ni, peer_ni, past_deadline) =
            (message.ni, message.peer_ni, self.call.now > message.deadline);
        let Some(peer_ni) = peer_ni else { return };
        if health.is_ok() {
            self.local_success(ni);
            // An OK receive resets both ping counts (faster recovery), raises the peer NI's
            // health, and (re)queues it for recovery if still below the maximum.
            let sensitivity = self.node.tunables.health_sensitivity;
            // Written only when set: in the steady state a receive leaves the node-wide NI
            // alone (decision 0029, "What the split has to change").
            if self.node.nis.get(ni).is_some_and(|local| local.recovery.ping_count != 0) {
                self.on_node("a local NI's recovery", |flow| {
                    if let Some(local) = flow.node.nis.get_mut(ni) {
                        local.recovery.ping_count = 0;
                    }
                });
            }
            if let Some(peer) = self.node.peers.ni_mut(&mut self.peer_nis, peer_ni) {
                peer.recovery.ping_count = 0;
                peer.health.increment(sensitivity);
            }
            self.queue_peer_recovery(peer_ni);
        } else if !past_deadline {
            let action = health.action();
            self.count_failure(ni, Some(peer_ni), health);
            if action.local_failure {
                self.on_node("a local NI's failure", |flow| flow.local_failure(ni));
            }
            if action.remote_failure && self.handles_remote_health(peer_ni) {
                self.remote_failure(peer_ni);
            }
        }
    }

    /// `lnet_msg_decommit_rx` statistics for a successfully received message.
    pub(super) fn count_received(&mut self, key: Key) {
        let Some(message) = self.msgs.get(key) else {
            return;
        };
        let (ni, peer_ni, msg_type) = (message.ni, message.peer_ni, message.header.body.msg_type());
        let (payload, length) = (message.header.payload_length, message.length);
        self.count(|counters| counters.recv_count += 1);
        self.count(|counters| counters.recv_length += u64::from(length));
        if let Some(local) = self.ni_shares.traffic_mut(ni, self.call.cpt) {
            local.stats.received(msg_type, payload);
        }
        if let Some(peer) = peer_ni.and_then(|id| self.node.peers.ni_mut(&mut self.peer_nis, id)) {
            peer.stats.received(msg_type, payload);
        }
    }

    /// Decommit (credits back) and queue the message for the resend pass.
    fn queue_resend(&mut self, key: Key) {
        self.return_credits(key);
        let Some(message) = self.msgs.get_mut(key) else {
            return;
        };
        message.retry_count += 1;
        message.resent = true;
        message.path_failed = true;
        if let Some(peer_ni) = message.peer_ni {
            message.failed_paths.record(message.ni, peer_ni);
        }
        message.phase = Phase::ResendQueued;
        message.peer_ni = None;
        self.count(|counters| counters.resend_count += 1);
        self.call.work.push_back(Work::Resend(key));
    }

    /// The send is over: statistics, credits back, the MD's event, and the message freed.
    fn complete_tx(&mut self, key: Key, status: EventStatus) {
        if self.msgs.get(key).is_some_and(|message| message.routing) {
            self.complete_forward(key, status);
            return;
        }
        self.return_credits(key);
        let tracked = self.tracked_md_of(key);
        // What the rest needs is copied out and the message dropped where it lies: it is
        // hundreds of bytes, and this runs once per message sent.
        let Some(message) = self.msgs.get_mut(key) else {
            self.record_violation(|| format!("message {key:?} finalized twice"));
            return;
        };
        let sent = SentMessage::of(message);
        let orphan = message.orphan.take();
        let template = (sent.md.is_some() && sent.event.is_some()).then_some(message.template);
        self.discard_message(key);
        self.release_orphan(orphan);
        if sent.abandoned {
            // Fast failover's copy carries the operation on; the original only ends.
            if status.is_ok() {
                self.count_sent(&sent);
            }
            return;
        }
        if sent.resent {
            if status.is_ok() {
                self.count(|counters| counters.successful_resends += 1);
            } else {
                self.count(|counters| counters.failed_resends += 1);
            }
        }
        if status.is_ok() {
            self.count_sent(&sent);
            self.record_egress(&sent);
            if let (Some(md), Some(peer_ni)) = (tracked, sent.peer_ni) {
                self.request_left(md, peer_ni, &sent);
            }
        }
        match (sent.md, sent.event, template) {
            (Some(md), Some(kind), Some(template)) => self.detach_md(md, kind, &template, status),
            (Some(md), None, _) => self.release_md(md),
            _ => {}
        }
    }

    /// `lnet_msg_decommit_tx`'s PUT egress sample: first commit to local completion, first
    /// transmissions only.
    fn record_egress(&mut self, sent: &SentMessage) {
        let first_put = sent.msg_type == MsgType::Put
            && sent.event == Some(EventKind::Send)
            && sent.retry_count == 0;
        let Some(committed) = sent.committed_at.filter(|_| first_put) else {
            return;
        };
        let took = self.call.now.saturating_duration_since(committed);
        if let Some(local) = self.ni_shares.traffic_mut(sent.ni, self.call.cpt) {
            local.latency.record(LatencyOp::PutEgress, took);
        }
        if let Some(peer) =
            sent.peer_ni.and_then(|id| self.node.peers.ni_mut(&mut self.peer_nis, id))
        {
            peer.latency.record(LatencyOp::PutEgress, took);
        }
    }

    /// A tracked request left through `peer_ni`: its response is now awaited there (fast
    /// failover's peer progress clock), moving from where a previous copy went.
    fn request_left(&mut self, md: Key, peer_ni: PeerNiId, sent: &SentMessage) {
        // Recovery pings have their own (probe) timeout.
        if !sent.wants_response || sent.recovery || !self.failover_enabled() {
            return;
        }
        let Some(tracker) = self.mds.get_mut(md).and_then(|md| md.tracker.as_mut()) else {
            return;
        };
        let previous = tracker.awaiting.replace((peer_ni, sent.ni));
        if let Some((previous, via)) = previous {
            self.watch_await_end(previous, via, None);
        }
        self.watch_await_start(peer_ni, sent.ni);
    }

    /// The ACK or REPLY of a tracked request arrived: round-trip statistics (Lustre's
    /// `lnet_record_response_latency`) and the end of the wait fast failover watches.
    fn response_arrived(&mut self, md: Key, rx: Key, kind: EventKind) {
        let now = self.call.now;
        let Some(tracker) = self.mds.get_mut(md).and_then(|md| md.tracker.as_mut()) else {
            return;
        };
        let rtt = now.saturating_duration_since(tracker.started);
        // A copy's response says nothing of the round trip since the first departure.
        let copied = tracker.request.as_ref().is_some_and(|request| request.copies > 0);
        let since_sent =
            tracker.sent_at.filter(|_| !copied).map(|at| now.saturating_duration_since(at));
        let awaiting = tracker.awaiting.take();
        if let Some((peer_ni, via)) = awaiting {
            self.watch_await_end(peer_ni, via, since_sent);
        }
        let op = if kind == EventKind::Reply { LatencyOp::GetRtt } else { LatencyOp::PutAck };
        let Some((ni, peer_ni)) = self.msgs.get(rx).map(|m| (m.ni, m.peer_ni)) else {
            return;
        };
        if let Some(local) = self.ni_shares.traffic_mut(ni, self.call.cpt) {
            local.latency.record(op, rtt);
        }
        if let Some(peer) = peer_ni.and_then(|id| self.node.peers.ni_mut(&mut self.peer_nis, id)) {
            peer.latency.record(op, rtt);
        }
    }

    /// Drops an event-less message's MD reference (`lnet_msg_detach_md` without an event).
    pub(super) fn release_md(&mut self, md_key: Key) {
        let Some(md) = self.mds.get_mut(md_key) else {
            self.record_violation(|| format!("release of missing MD {md_key:?}"));
            return;
        };
        md.refcount = md.refcount.saturating_sub(1);
        if md.unlinkable() {
            self.unlink_md(md_key);
        }
    }

    fn count_sent(&mut self, sent: &SentMessage) {
        let (msg_type, payload) = (sent.msg_type, sent.payload);
        self.count(|counters| counters.send_count += 1);
        self.count(|counters| counters.send_length += u64::from(payload));
        if let Some(local) = self.ni_shares.traffic_mut(sent.ni, self.call.cpt) {
            local.stats.sent(msg_type, payload);
        }
        if let Some(peer) =
            sent.peer_ni.and_then(|id| self.node.peers.ni_mut(&mut self.peer_nis, id))
        {
            peer.stats.sent(msg_type, payload);
        }
    }

    /// Reuse a received PUT as its ACK, sent from the NI the PUT arrived on.
    pub(super) fn send_ack(&mut self, key: Key, ack_wmd: crate::wire::header::WireHandle) {
        let pid = self.pid;
        let Some(message) = self.msgs.get_mut(key) else {
            return;
        };
        let request = message.header;
        let match_bits = match request.body {
            Body::Put { match_bits, .. } => match_bits,
            _ => 0,
        };
        message.header = Header {
            dest_nid: request.src_nid,
            src_nid: request.dest_nid,
            dest_pid: request.src_pid,
            src_pid: pid,
            payload_length: 0,
            body: Body::Ack { dst_wmd: ack_wmd, match_bits, mlength: message.length },
        };
        message.tx = true;
        message.phase = Phase::ResendQueued;
        message.md = None;
        message.event = None;
        message.length = 0;
        message.ack_to = None;
        message.lo_peer = None;
        message.response_ni = Some(message.ni);
        // The router hint is the PUT's last hop (`msg_from`).
        message.router_hint = message.peer_ni;
        // lustre: lib-msg.c lnet_complete_msg_locked(): the ACK is sent from the NI the PUT
        // came in on (`msg_ev.target.nid`) to exactly its source.
        let source = (message.ni != NiId::LOOPBACK).then_some(request.dest_nid);
        message.source = source;
        self.send(key, source);
    }

    /// `lnet_msg_detach_md`: drop the message's reference and deliver its event; the last
    /// event of an unlinkable MD carries `unlinked` and the memory, and the MD goes away.
    pub(super) fn detach_md(
        &mut self,
        md_key: Key,
        kind: EventKind,
        template: &EventTemplate,
        status: EventStatus,
    ) {
        let Some(md) = self.mds.get_mut(md_key) else {
            self.record_violation(|| format!("event for missing MD {md_key:?}"));
            return;
        };
        if md.refcount == 0 {
            self.record_violation(|| format!("MD {md_key:?} reference count underflow"));
            return;
        }
        md.refcount -= 1;
        let unlink = md.unlinkable();
        let owner = md.owner;
        // LNet's consumers read what a REPLY or a PUT brought before the memory goes.
        let data = match kind {
            EventKind::Reply | EventKind::Put if owner != MdOwner::User => {
                let mut data = vec![0; template.mlength.min(md.length) as usize];
                if !md.memory.read_at(template.offset as usize, &mut data) {
                    data.clear();
                }
                data
            }
            _ => Vec::new(),
        };
        let idle_infinite = md.refcount == 0 && md.threshold == Threshold::Infinite;
        if md.events {
            let status = if md.aborted && status.is_ok() { EventStatus::TimedOut } else { status };
            let memory = unlink.then(|| std::mem::take(&mut md.memory));
            if owner == MdOwner::User {
                // Completed where it is queued: an event is large, and this is the per-message
                // path.
                let event = template.event(kind, md.handle, (md.user_ptr, md.handler), status);
                if let Some(event) = self.push_event(event) {
                    event.unlinked = unlink;
                    event.memory = memory;
                }
            } else {
                let mut event = template.event(kind, md.handle, (md.user_ptr, md.handler), status);
                event.unlinked = unlink;
                self.deliver_event(owner, md_key, event, data);
            }
        }
        if unlink || idle_infinite {
            self.detach_tracker(md_key);
        }
        if unlink {
            self.unlink_md(md_key);
        }
    }

    /// `lnet_md_unlink`: mark the MD a zombie (its handle stops resolving), detach it from its
    /// ME (unlinking the ME if it was created with UNLINK), and free it once idle.
    pub(super) fn unlink_md(&mut self, md_key: Key) {
        let Some(md) = self.mds.get_mut(md_key) else {
            return;
        };
        if !md.zombie {
            md.zombie = true;
            if let Some(me_key) = md.me.take() {
                match self.mes.get(me_key).map(|me| me.unlink) {
                    Some(UnlinkMode::Unlink) => self.remove_me(me_key),
                    Some(UnlinkMode::Retain) => {
                        if let Some(me) = self.mes.get_mut(me_key) {
                            me.md = None;
                        }
                    }
                    None => {}
                }
            }
        }
        if self.mds.get(md_key).is_some_and(|md| md.refcount == 0) {
            self.detach_tracker(md_key);
            self.mds.discard(md_key);
        }
    }

    /// `LNetMDUnlink` (also used when a response tracker expires): abort, then an UNLINK event
    /// now if idle, else the last in-flight event reports it.
    pub(super) fn abort_md(&mut self, md_key: Key) {
        let Some(md) = self.mds.get_mut(md_key) else {
            return;
        };
        md.aborted = true;
        let owner = md.owner;
        let event = (md.refcount == 0 && md.events).then(|| {
            // lustre: lib-md.c lnet_build_unlink_event(): status 0, unlinked 1.
            let mut event: Event = EventTemplate::EMPTY.event(
                EventKind::Unlink,
                md.handle,
                (md.user_ptr, md.handler),
                EventStatus::Ok,
            );
            event.unlinked = true;
            event.memory = Some(std::mem::take(&mut md.memory));
            event
        });
        if let Some(event) = event {
            self.deliver_event(owner, md_key, event, Vec::new());
        }
        self.detach_tracker(md_key);
        self.unlink_md(md_key);
    }

    /// The user's event queue, or LNet's own handler for its MDs (run before the call
    /// returns, never re-entrantly).
    fn deliver_event(&mut self, owner: MdOwner, md: Key, mut event: Event, data: Vec<u8>) {
        if owner == MdOwner::User {
            self.push_event(event);
        } else {
            event.memory = None;
            self.call.internal_events.push_back(InternalEvent { owner, md, event, data });
        }
    }

    /// `lnet_inc_ni_healthv`: up by the sensitivity; reaching the maximum shows the NI UP
    /// again in the ping buffer (in place, no push). A node-wide change, made only below the
    /// maximum (the plans give such a call the node).
    fn local_success(&mut self, ni: NiId) {
        let sensitivity = self.node.tunables.health_sensitivity;
        if self.node.nis.get(ni).is_some_and(|local| local.health.value() < MAX_HEALTH) {
            self.on_node("a local NI's health", |flow| {
                if let Some(local) = flow.node.nis.get_mut(ni) {
                    local.health.increment(sensitivity);
                }
                flow.refresh_ni_status(ni);
            });
        }
    }

    /// `lnet_handle_remote_failure_locked`: the peer NI's health down, and the peer NI queued
    /// for recovery.
    pub(super) fn remote_failure(&mut self, peer_ni: PeerNiId) {
        let sensitivity = self.node.tunables.health_sensitivity;
        if let Some(peer) = self.node.peers.ni_mut(&mut self.peer_nis, peer_ni) {
            peer.health.decrement(sensitivity);
        }
        self.queue_peer_recovery(peer_ni);
    }

    /// `lnet_incr_hstats`: per-status counters, global, NI and peer NI.
    fn count_failure(&mut self, ni: NiId, peer_ni: Option<PeerNiId>, health: HealthStatus) {
        self.count(|counters| counters.count_health(health));
        self.on_node("a local NI's health statistics", |flow| {
            if let Some(local) = flow.node.nis.get_mut(ni) {
                local.health_stats.count(health);
            }
        });
        if let Some(peer) = peer_ni.and_then(|id| self.node.peers.ni_mut(&mut self.peer_nis, id)) {
            peer.health_stats.count(health);
        }
    }
}

impl Flow<'_> {
    /// `lnet_handle_local_failure`: health down (reaching 0 shows the NI DOWN in the ping
    /// buffer, in place), and the NI queued for recovery.
    fn local_failure(&mut self, ni: NiId) {
        let sensitivity = self.node.tunables.health_sensitivity;
        if let Some(local) = self.node.nis.get_mut(ni) {
            local.health.decrement(sensitivity);
        }
        self.refresh_ni_status(ni);
        self.queue_local_recovery(ni);
    }

    /// `lnet_dec_ni_healthv_locked` / `lnet_inc_ni_healthv` status transitions: health 0
    /// turns the NI's status word DOWN, 1000 turns it UP; the ping buffer changes in place
    /// (same sequence number, no push).
    pub(super) fn refresh_ni_status(&mut self, ni: NiId) {
        let Some(local) = self.node.nis.get_mut(ni) else {
            return;
        };
        let status = match local.health.value() {
            0 => LNET_NI_STATUS_DOWN,
            MAX_HEALTH => LNET_NI_STATUS_UP,
            _ => return,
        };
        if local.status != status {
            local.status = status;
            self.update_ping_buffer_in_place();
        }
    }
}

/// What finishing a send needs of its message (see `Engine::complete_tx`).
#[derive(Clone, Copy)]
struct SentMessage {
    msg_type: MsgType,
    payload: u32,
    ni: NiId,
    peer_ni: Option<PeerNiId>,
    md: Option<Key>,
    event: Option<EventKind>,
    retry_count: u32,
    committed_at: Option<Time>,
    /// A PUT that asked for an ACK, or a GET.
    wants_response: bool,
    recovery: bool,
    resent: bool,
    abandoned: bool,
}

impl SentMessage {
    fn of(message: &Message) -> Self {
        let wants_response = match message.header.body {
            Body::Put { ack_wmd, .. } => !ack_wmd.is_none(),
            Body::Get { .. } => true,
            _ => false,
        };
        Self {
            msg_type: message.header.body.msg_type(),
            payload: message.header.payload_length,
            ni: message.ni,
            peer_ni: message.peer_ni,
            md: message.md,
            event: message.event,
            retry_count: message.retry_count,
            committed_at: message.committed_at,
            wants_response,
            recovery: message.recovery,
            resent: message.resent,
            abandoned: message.abandoned,
        }
    }
}
